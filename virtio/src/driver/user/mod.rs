//! virtio-user: this process is the virtio-net driver, and a vhost-user
//! backend (DPDK's `net_vhost`, a vswitch) is the device, over a Unix
//! socket.
//!
//! The control protocol (feature negotiation, the memory table with the fds
//! of our DMA memory, vring sizes, addresses and eventfds) goes through
//! rust-vmm's `vhost` crate (its frontend side); the data path is ours:
//! split virtqueues (RX of pair q = vring 2q, TX = 2q + 1) in a DMA region we share, whose
//! descriptors point into the mempool's region, which we share too. IOVA =
//! our virtual address, as the memory table says (guest address = user
//! address).
//!
//! Frames to send must live in shared memory. The memory table a start
//! sends holds every IOVA = VA region registered in the registry's DMA
//! domain by then (the `rx_pool` is registered there if it was not) and
//! the rings, at most 8 regions: any port's mbufs of those pools can be
//! sent. A pool registered while the port runs goes to the backend by
//! ADD_MEM_REG where it offers CONFIGURE_MEM_SLOTS (protocol features are
//! then negotiated even with one queue pair); otherwise the registration
//! fails, saying to register pools before starting the port (DPDK 22.11's
//! vhost library offers no CONFIGURE_MEM_SLOTS). Frames elsewhere are
//! dropped and counted (`oerrors`), since the backend could not reach
//! them.
//!
//! Device string: `virtio-user:PATH[,server=0|1][,queues=Q][,queue_size=N][,mrg_rxbuf=0|1][,event_idx=0|1][,packed_vq=0|1][,in_order=0|1][,timeout_ms=T]`
//! (`server=1`: we listen on PATH and the backend connects to us, as
//! testpmd's `net_vhost` does with `client=1`; the open waits up to T for
//! it);
//! (Q queue pairs, 1..=8, default 1: more than one needs a backend that
//! offers VIRTIO_NET_F_MQ and the vhost-user MQ protocol feature, and the
//! pairs are enabled with SET_VRING_ENABLE; N a power of two, default 256;
//! event indices (VIRTIO_F_EVENT_IDX) and in-order use (VIRTIO_F_IN_ORDER)
//! on by default when offered; `packed_vq=1` asks for packed
//! rings;
//! T bounds every wait for a backend reply,
//! default 5000; mergeable RX buffers on by default when the
//! backend offers them: frames larger than an mbuf arrive as chains, and
//! chains are sent as descriptor chains). The backend must be listening (as testpmd's `net_vhost`
//! does by default).
//!
//! Reconnection: a started port watches its socket. When the backend goes
//! away (testpmd killed, a vswitch restarted) the link goes down and the
//! port tries to connect to the same path every 100 ms (in server mode:
//! waits for the backend to connect again); a new backend is
//! programmed with the same queues, each split ring resuming at the
//! `used.idx` the old one left, and the link comes back. Packed rings
//! cannot be resumed (a backend is told only where to start), so each
//! queue starts its ring over at its next burst (or `in_flight` call),
//! dropping what was in flight (TX frames counted as errors), and the
//! link comes back once all have; sleepers on rx interrupts are woken for
//! that. A queue handle the application holds must therefore be polled
//! for the link to come back (a run loop polls every queue); one it
//! dropped needs nothing: its ring starts over without it. The
//! application keeps its queue handles throughout (`reconnects` in the
//! xstats counts them).
//!
//! A backend that breaks the ring protocol (a used index past what is in
//! flight, a used entry naming no buffer in flight on a packed or
//! in-order ring; see [`crate::driver::split`]) stops the queue: the error is
//! counted (`*_device_errors`), the link goes down, the port closes the
//! connection, gives the backend 100 ms to stop, and reconnects with
//! every ring started over. A dropped queue handle's posted buffers wait
//! with the port (the backend may still write them) until it stops.
//!
//! Queue pairs: where the backend offers the CONFIG protocol feature, its
//! `max_virtqueue_pairs` must cover `queues`; otherwise only GET_QUEUE_NUM
//! can be asked, and DPDK answers it with its maximum (128) whatever its
//! own `queues=`. A pair such a backend never serves shows as
//! `tx_qN_unfinished` growing in the xstats (frames posted, none
//! finished). Receive filters: a backend delivers every frame, so
//! promiscuous and all-multicast stay on (turning them off is an error).
mod control;

use crate::consts::{
    VHOST_USER_F_PROTOCOL_FEATURES, VIRTIO_F_IN_ORDER, VIRTIO_F_VERSION_1, VIRTIO_NET_F_MQ,
    VIRTIO_NET_F_MRG_RXBUF, VIRTIO_RING_F_EVENT_IDX,
};
use crate::driver::net::{
    build_handles, feature_xstats, max_mtu, offload_features, offloads, packed_feature,
    start_config, Handles, Kick, QueueHome, Ring,
};
use crate::driver::packed::{PackedLayout, PackedQueue};
use crate::driver::split::{Layout, SplitQueue};
use crate::fd::CallFd;
use crate::{Error, MemoryTableFull};
use control::{
    handshake, listen, mem_region, program, watch, Endpoint, Session, SharedSpans, Vring, Watched,
};
use rpmd_pmd::domain::{DomainWatcher, Reach, Span, SpanSource};
use rpmd_pmd::port::features::{Declared, Feature, Support};
use rpmd_pmd::port::stats::StatsBlock;
use rpmd_pmd::port::{
    Capabilities, DevArgs, Device, Driver, EthDev, Link, LinkEvents, MacAddr, Port, Queues,
    RxFilter, StartContext, Xstat,
};
use rpmd_pmd::{DmaDomain, DmaRegion, IovaMode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use vhost::vhost_user::VhostUserFrontend;
use vhost::VhostBackend;
use vmm_sys_util::eventfd::EventFd;

type PmdError = rpmd_pmd::Error;

use crate::{no_filter, perr, psrc};

/// The `virtio-user` driver.
pub struct VirtioUserDriver;

/// What a `virtio-user:` string asks for.
struct UserOptions {
    fault_desc_every: u32,
    want_event_idx: bool,
    want_packed: bool,
    want_in_order: bool,
    pairs: u16,
    timeout: Duration,
    mrg: bool,
    path: String,
    layout: Layout,
    server: bool,
}

impl UserOptions {
    fn parse(args: &DevArgs) -> Result<UserOptions, PmdError> {
        args.only_options(&[
            "queues",
            "queue_size",
            "mrg_rxbuf",
            "event_idx",
            "packed_vq",
            "in_order",
            "server",
            "timeout_ms",
            "fault_desc_every",
        ])?;
        let fault_desc_every = crate::fault_every(args, "fault_desc_every")?;
        let want_event_idx = args.opt_bool("event_idx", true)?;
        let want_packed = args.opt_bool("packed_vq", false)?;
        let want_in_order = args.opt_bool("in_order", true)?;
        let pairs = args.opt_u64("queues", 1)?;
        if !(1..=MAX_PAIRS as u64).contains(&pairs) {
            return Err(perr(
                args.raw(),
                format!("queues={pairs}: 1..={MAX_PAIRS} queue pairs"),
            ));
        }
        let pairs = pairs as u16;
        // Every reply from the backend is waited for at most this long.
        let timeout = Duration::from_millis(args.opt_u64("timeout_ms", 5000)?.max(1));
        let mrg = args.opt_bool("mrg_rxbuf", true)?;
        let path = args.require_target("a vhost-user socket path")?.to_string();
        let qs = args.opt_u64("queue_size", 256)?;
        let layout = u16::try_from(qs)
            .map_err(|_| Error::Config(format!("queue_size={qs}: at most 32768")))
            .and_then(Layout::new)
            .map_err(|e| psrc(args.raw(), "queue_size", e))?;
        let server = args.opt_bool("server", false)?;
        Ok(UserOptions {
            fault_desc_every,
            want_event_idx,
            want_packed,
            want_in_order,
            pairs,
            timeout,
            mrg,
            path,
            layout,
            server,
        })
    }
}

impl Driver for VirtioUserDriver {
    fn features(&self) -> &'static [Declared] {
        &[
            (Feature::LinkStatusEvent, Support::Yes),
            (Feature::RxInterrupt, Support::Yes),
            (Feature::ScatteredRx, Support::Yes),
            (Feature::MultiSegmentTx, Support::Yes),
            (
                Feature::ChecksumOffload,
                Support::Partial(
                    "where the backend offers VIRTIO_NET_F_CSUM (tx) or GUEST_CSUM (rx)",
                ),
            ),
        ]
    }

    fn kind(&self) -> &'static str {
        "virtio-user"
    }

    fn usage(&self) -> &'static str {
        "virtio-user:PATH[,server=0|1][,queues=Q][,queue_size=N][,mrg_rxbuf=0|1][,event_idx=0|1][,packed_vq=0|1][,in_order=0|1][,timeout_ms=T]  virtio-net driven over a vhost-user socket"
    }

    fn check(&self, args: &DevArgs) -> Result<(), PmdError> {
        UserOptions::parse(args).map(drop)
    }

    fn open(&self, args: &DevArgs, domain: &DmaDomain) -> Result<Box<dyn Port>, PmdError> {
        let UserOptions {
            fault_desc_every,
            want_event_idx,
            want_packed,
            want_in_order,
            pairs,
            timeout,
            mrg,
            path,
            layout,
            server,
        } = UserOptions::parse(args)?;
        let ep = if server {
            listen(&path, args.raw())?
        } else {
            Endpoint::Client(path.clone())
        };
        // A server waits for its backend as long as for any reply.
        let h = handshake(
            &ep,
            args.raw(),
            timeout,
            timeout,
            pairs,
            2 * MAX_PAIRS as u64,
            true,
        )?;
        let (ctl, offered, proto, mem_slots) = (h.ctl, h.offered, h.proto, h.mem_slots);
        let dev = VirtioUserDevice {
            name: args.raw().to_string(),
            endpoint: Arc::new(ep),
            watched: Arc::new(Watched {
                ctl: std::sync::Mutex::new(ctl),
                connected: AtomicBool::new(true),
                mem_slots: AtomicBool::new(mem_slots),
                reconnects: std::sync::atomic::AtomicU64::new(0),
                quit: AtomicBool::new(false),
                link_events: rpmd_pmd::port::LinkNotifier::default(),
            }),
            watch: None,
            offered,
            pairs,
            proto,
            mem_slots,
            want_mrg: mrg,
            want_event_idx,
            want_packed,
            want_in_order,
            fault_desc_every,
            features: 0,
            layout,
            mac: MacAddr::from_name(&path, 0x76),
            rings: None,
            domain: domain.clone(),
            snapshot: None,
            active: 0,
            homes: Vec::new(),
        };
        Ok(Box::new(EthDev::new(args, dev)))
    }
}

/// Most queue pairs a port sets up.
pub const MAX_PAIRS: u16 = 8;

/// What a started port does with a region registered in the domain while
/// it runs: sends it to the backend (ADD_MEM_REG, where CONFIGURE_MEM_SLOTS
/// was negotiated), after which TX hands over its mbufs; else refuses it
/// with an error saying what to do.
struct MemoryTableWatch {
    port: String,
    watched: Arc<Watched>,
    shared: Arc<SharedSpans>,
}

impl DomainWatcher for MemoryTableWatch {
    fn region_added(&self, r: &DmaRegion) -> Result<(), PmdError> {
        if r.iova_mode() != IovaMode::Va {
            // Physical addresses never go to a vhost-user backend.
            return Ok(());
        }
        let start = r.as_ptr() as u64;
        let span = Span {
            start,
            end: start + r.len() as u64,
            mode: IovaMode::Va,
        };
        let mut set = self.shared.hold();
        if set.iter().any(|s| s.start == start) {
            return Ok(());
        }
        let w = &self.watched;
        if !w.mem_slots.load(Ordering::Acquire) {
            return Err(table_full(
                &self.port,
                MemoryTableFull::NoMemSlots {
                    len: r.len(),
                    start,
                },
            ));
        }
        if set.len() + 2 > MEM_TABLE_MAX {
            return Err(table_full(
                &self.port,
                MemoryTableFull::WhileRunning {
                    regions: set.len(),
                    limit: MEM_TABLE_MAX,
                },
            ));
        }
        if w.connected.load(Ordering::Acquire) {
            let mut ctl = w.ctl.lock().unwrap_or_else(|e| e.into_inner());
            let sent = ctl
                .call("ADD_MEM_REG", |fe| {
                    fe.add_mem_region(&mem_region(r)).map(drop)
                })
                // Without REPLY_ACK nothing answers ADD_MEM_REG; a reply to
                // a later request says the backend has read it (requests
                // are handled in order) before TX hands over its mbufs.
                .and_then(|()| ctl.call("GET_FEATURES", |fe| fe.get_features()).map(drop));
            // A backend that went away meanwhile gets the region in the
            // memory table of the reconnection.
            if let Err(e) = sent {
                if w.connected.load(Ordering::Acquire) {
                    return Err(e);
                }
            }
        }
        self.shared.push(&mut set, span);
        Ok(())
    }

    fn region_withdrawn(&self, r: &DmaRegion) {
        let start = r.as_ptr() as u64;
        let mut set = self.shared.hold();
        if !self.shared.remove(&mut set, start) {
            return;
        }
        // TX hands over no more of its mbufs; the backend lets it go (best
        // effort: a backend that went away drops all its mappings).
        let w = &self.watched;
        if w.connected.load(Ordering::Acquire) {
            let mut ctl = w.ctl.lock().unwrap_or_else(|e| e.into_inner());
            let _ = ctl.call("REM_MEM_REG", |fe| fe.remove_mem_region(&mem_region(r)));
        }
    }
}

/// A region that cannot join the backend's memory table.
fn table_full(port: &str, why: MemoryTableFull) -> PmdError {
    crate::verr(port, "vhost-user memory table", Error::MemoryTable(why))
}

/// Regions in a vhost-user memory table (the spec's
/// VHOST_MEMORY_BASELINE_NREGIONS, without CONFIGURE_MEM_SLOTS).
const MEM_TABLE_MAX: usize = 8;

/// A virtio-user device: the driver's side of one vhost-user connection.
pub struct VirtioUserDevice {
    /// The device string, for errors.
    name: String,
    /// Where the backend is (client) or comes from (server).
    endpoint: Arc<Endpoint>,
    /// The connection, shared with the watch thread while started.
    watched: Arc<Watched>,
    watch: Option<std::thread::JoinHandle<()>>,
    offered: u64,
    /// Queue pairs (the `queues` option).
    pairs: u16,
    /// Whether protocol features were negotiated (rings then need
    /// SET_VRING_ENABLE).
    proto: bool,
    /// Whether CONFIGURE_MEM_SLOTS was (regions registered while the port
    /// runs then go to the backend by ADD_MEM_REG).
    mem_slots: bool,
    want_mrg: bool,
    want_event_idx: bool,
    want_packed: bool,
    want_in_order: bool,
    /// Every Nth frame sent with a descriptor outside the memory table,
    /// on purpose (`fault_desc_every`; the `fault-injection` feature).
    fault_desc_every: u32,
    features: u64,
    layout: Layout,
    mac: MacAddr,
    rings: Option<Arc<DmaRegion>>,
    /// The registry's DMA domain: its regions make the memory table.
    domain: DmaDomain,
    /// While started: refuses regions registered in the domain, which
    /// the backend's memory table, sent at the start, would not cover.
    snapshot: Option<Arc<dyn DomainWatcher>>,
    /// Vrings set up by the last start.
    active: usize,
    /// The homes of the queue handles handed out by the last start: what
    /// dropped handles left there is released once the backend stopped.
    homes: Vec<Arc<QueueHome>>,
}

impl VirtioUserDevice {
    fn setup(&mut self, ctx: &StartContext<'_>) -> Result<Queues, PmdError> {
        let name = self.name.clone();
        let (conf, pool) = start_config(ctx)?;
        let l = self.layout;
        // Pair q: RX on vring 2q, TX on vring 2q + 1.
        let pairs = conf.rx_queues.max(conf.tx_queues) as usize;
        let mut want = VIRTIO_F_VERSION_1 | offload_features(conf.offloads);
        if self.want_mrg {
            want |= VIRTIO_NET_F_MRG_RXBUF;
        }
        if self.want_event_idx {
            want |= VIRTIO_RING_F_EVENT_IDX;
        }
        want |= packed_feature(self.want_packed, self.offered, &name, "")?;
        if self.want_in_order {
            want |= VIRTIO_F_IN_ORDER;
        }
        if self.proto {
            want |= VHOST_USER_F_PROTOCOL_FEATURES;
        }
        if self.pairs > 1 {
            want |= VIRTIO_NET_F_MQ;
        }
        self.features = self.offered & want;
        if self.want_packed {
            let pl = PackedLayout::new(l.size).map_err(|e| psrc(&name, "packed ring layout", e))?;
            let rings = Arc::new(DmaRegion::new(
                "virtio-user rings",
                2 * pairs * pl.len,
                IovaMode::Va,
            )?);
            let mut queues = Vec::with_capacity(2 * pairs);
            let in_order = self.features & VIRTIO_F_IN_ORDER != 0;
            for i in 0..2 * pairs {
                let mut q = PackedQueue::new(&rings, i * pl.len, pl)
                    .map_err(|e| psrc(&name, format!("packed ring {i}"), e))?;
                q.set_in_order(in_order);
                q.set_interrupts(false);
                queues.push(q);
            }
            return self.connect_queues(queues, pl.len, rings, ctx, pool);
        }
        let rings = Arc::new(DmaRegion::new(
            "virtio-user rings",
            2 * pairs * l.len,
            IovaMode::Va,
        )?);
        let event_idx = self.features & VIRTIO_RING_F_EVENT_IDX != 0;
        let in_order = self.features & VIRTIO_F_IN_ORDER != 0;
        let mut queues = Vec::with_capacity(2 * pairs);
        for i in 0..2 * pairs {
            let mut q = SplitQueue::new(&rings, i * l.len, l)
                .map_err(|e| psrc(&name, format!("split ring {i}"), e))?;
            q.set_event_idx(event_idx);
            q.set_in_order(in_order);
            q.set_interrupts(false);
            queues.push(q);
        }
        self.connect_queues(queues, l.len, rings, ctx, pool)
    }

    /// Programs the backend with `queues` (RX, TX per pair) and hands out
    /// their data-path handles.
    fn connect_queues<Q: Ring>(
        &mut self,
        queues: Vec<Q>,
        ring_len: usize,
        rings: Arc<DmaRegion>,
        ctx: &StartContext<'_>,
        pool: rpmd_pmd::Mempool,
    ) -> Result<Queues, PmdError> {
        let conf = ctx.conf;
        let (vrings, kicks, mut calls) = self.vrings(&queues, ring_len)?;
        // A home per vring that gets a queue handle (RX of pairs below
        // rx_queues, TX below tx_queues), shared with the watch (see
        // `control::watch`); the others stay empty.
        let homes: Vec<Option<Arc<QueueHome>>> = (0..vrings.len())
            .map(|i| {
                let n = if i % 2 == 0 {
                    conf.rx_queues
                } else {
                    conf.tx_queues
                };
                (i / 2 < n as usize).then(Arc::default)
            })
            .collect();
        // Per vring, as the homes: the counters of its queue handle.
        let queue_stats = homes
            .iter()
            .enumerate()
            .map(|(i, h)| {
                h.as_ref().map(|_| match i % 2 {
                    0 => ctx.stats.rx(i / 2),
                    _ => ctx.stats.tx(i / 2),
                })
            })
            .collect();
        let shared = Arc::new(SharedSpans::new(self.shared_regions(&pool)?));
        let source: Arc<dyn SpanSource> = shared.clone();
        let reach = || Reach::following(source.clone(), None);
        let w: Arc<dyn DomainWatcher> = Arc::new(MemoryTableWatch {
            port: self.name.clone(),
            watched: self.watched.clone(),
            shared: shared.clone(),
        });
        self.domain.watch(&w);
        self.snapshot = Some(w);
        self.program_and_watch(Session {
            packed: self.want_packed,
            homes: homes.clone(),
            stats: queue_stats,
            features: self.features,
            proto: self.proto,
            domain: self.domain.clone(),
            shared,
            mem_slots: self.mem_slots,
            rings: rings.clone(),
            vrings,
        })?;
        self.homes = homes.iter().flatten().cloned().collect();
        self.rings = Some(rings.clone());
        self.active = queues.len();
        let h = Handles {
            pool: &pool,
            rings: &rings,
            rx_live: ctx.rx_live,
            tx_live: ctx.tx_live,
            stats: ctx.stats,
            reach: &reach,
            features: self.features,
            rx_queues: conf.rx_queues as usize,
            tx_queues: conf.tx_queues as usize,
            stamp: ctx.stamp,
            fault_desc_every: self.fault_desc_every,
        };
        let queues = queues.into_iter().zip(kicks.into_iter().map(Kick::Event));
        build_handles(
            &h,
            queues.collect(),
            |p| calls.get_mut(2 * p).and_then(Option::take),
            |k| homes[k].clone().unwrap_or_default(),
        )
    }

    /// The regions the backend is given besides the rings: the receive
    /// pool, registered in the domain, and every other IOVA = VA region
    /// registered there by now (so TX can hand over their mbufs; later
    /// ones are not seen until the next start). vhost-user's memory table
    /// takes 8 regions.
    fn shared_regions(&self, pool: &rpmd_pmd::Mempool) -> Result<Vec<Span>, PmdError> {
        self.domain.register_pool(pool)?;
        let shared: Vec<Span> = self
            .domain
            .spans()
            .into_iter()
            .filter(|s| s.mode == IovaMode::Va)
            .collect();
        if shared.len() + 1 > MEM_TABLE_MAX {
            return Err(table_full(
                &self.name,
                MemoryTableFull::AtStart {
                    registered: shared.len(),
                    limit: MEM_TABLE_MAX,
                },
            ));
        }
        Ok(shared)
    }

    /// The vrings as the backend is told about them, with a kick and a
    /// call eventfd each (the kicks and calls for the queue handles, the
    /// session keeping its own handles on them to give a backend that
    /// replaces this one).
    #[allow(clippy::type_complexity)]
    fn vrings<Q: Ring>(
        &self,
        queues: &[Q],
        ring_len: usize,
    ) -> Result<(Vec<Vring>, Vec<EventFd>, Vec<Option<CallFd>>), PmdError> {
        let ev = |e: std::io::Error| psrc(&self.name, "eventfd", e);
        let mut vrings = Vec::with_capacity(queues.len());
        let (mut kicks, mut calls) = (Vec::new(), Vec::new());
        for (i, q) in queues.iter().enumerate() {
            let kick = EventFd::new(libc::EFD_NONBLOCK).map_err(ev)?;
            let call = EventFd::new(libc::EFD_NONBLOCK).map_err(ev)?;
            let (desc, avail, used) = q.addresses();
            vrings.push(Vring {
                size: q.size(),
                desc,
                avail,
                used,
                offset: i * ring_len,
                len: ring_len,
                layout: self.layout,
                kick: kick.try_clone().map_err(ev)?,
                call: call.try_clone().map_err(ev)?,
            });
            kicks.push(kick);
            calls.push(Some(CallFd::Vhost(call)));
        }
        Ok((vrings, kicks, calls))
    }

    /// Programs the backend with `session` and starts the watch that
    /// reconnects it.
    fn program_and_watch(&mut self, session: Session) -> Result<(), PmdError> {
        {
            let mut ctl = self.watched.ctl.lock().unwrap_or_else(|e| e.into_inner());
            let set = session.shared.hold();
            program(&mut ctl, &session, &set, |_| true)?;
        }
        self.watched.set_connected(true);
        self.watched.quit.store(false, Ordering::Relaxed);
        let w = self.watched.clone();
        let ep = self.endpoint.clone();
        let pairs = self.pairs;
        self.watch = Some(
            std::thread::Builder::new()
                .name("virtio-user watch".into())
                .spawn(move || watch(w, session, ep, pairs))
                .map_err(|e| psrc(&self.name, "watch thread", e))?,
        );
        Ok(())
    }
}

impl Device for VirtioUserDevice {
    fn driver(&self) -> &'static str {
        "virtio-user"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_rx_queues: self.pairs,
            max_tx_queues: self.pairs,
            min_desc: 1,
            max_desc: u16::MAX,
            desc_pow2: false,
            min_mtu: 68,
            max_mtu: max_mtu(self.want_mrg, self.offered),
            offloads: offloads(self.offered),
            rx_interrupts: true,
            needs_rx_pool: true,
        }
    }
    fn start(&mut self, ctx: StartContext<'_>) -> Result<Queues, PmdError> {
        let q = self.setup(&ctx);
        if q.is_err() {
            self.halt();
        }
        q
    }
    fn stop(&mut self, _name: &str) -> Result<(), PmdError> {
        self.halt();
        Ok(())
    }
    fn link(&self, started: bool) -> Link {
        Link {
            up: started && self.watched.connected.load(Ordering::Acquire),
            speed_mbps: 10_000,
            full_duplex: true,
        }
    }
    fn mac_addr(&self) -> MacAddr {
        self.mac
    }
    // A vhost-user backend has no receive filter (DPDK's vhost does not
    // filter): every frame is delivered, so both modes stay on, and
    // asking for less is an error rather than a silent Ok.
    fn set_rx_filter(&mut self, name: &str, filter: &RxFilter) -> Result<(), PmdError> {
        no_filter(name, filter)
    }
    /// Raised by the watch when the backend goes away and when a new
    /// one is programmed.
    fn watch_link(&mut self, _name: &str, events: &LinkEvents) -> Result<bool, PmdError> {
        let w = &self.watched;
        w.link_events
            .attach(events, w.connected.load(Ordering::Acquire));
        Ok(true)
    }
    fn xstats(&self, stats: &StatsBlock, out: &mut Vec<Xstat>) {
        feature_xstats(stats, self.offered, self.features, out);
        out.push(Xstat {
            name: "reconnects".into(),
            value: self.watched.reconnects.load(Ordering::Relaxed),
        });
    }
}

impl VirtioUserDevice {
    /// Stops the watch, stops every ring the backend was given and frees
    /// what the queues left behind; safe to call again.
    fn halt(&mut self) {
        self.watched.quit.store(true, Ordering::Relaxed);
        let programmed = self.watch.take().map(|t| t.join()).is_some();
        if programmed && self.watched.connected.load(Ordering::Acquire) {
            let mut ctl = self.watched.ctl.lock().unwrap_or_else(|e| e.into_inner());
            for i in 0..self.active {
                // GET_VRING_BASE stops the ring in the backend.
                let _ = ctl.call("GET_VRING_BASE", |fe| fe.get_vring_base(i));
            }
        }
        // The backend stopped every ring (or is gone): what dropped
        // handles parked goes back to the pool, and handles dropped from
        // now on free their mbufs at once.
        for h in self.homes.drain(..) {
            drop(h.close());
        }
        self.snapshot = None;
    }
}

impl Drop for VirtioUserDevice {
    fn drop(&mut self) {
        self.halt();
    }
}
