//! The vhost-user backend: this process is the virtio-net device, and a
//! frontend (DPDK's `net_virtio_user`, QEMU for a guest's virtio-net,
//! rpmd's own `virtio-user:` port) is the driver.
//!
//! Device string: `vhost-user:PATH[,client=0|1][,queues=Q][,mrg_rxbuf=0|1][,event_idx=0|1][,mtu=M][,busyloop_us=U][,rx_poll=0|1][,call_coalesce=N][,csum=0|1]`.
//! By default the port listens on PATH (as DPDK's `net_vhost` does);
//! `client=1` connects to a frontend listening there (QEMU's
//! `server=on`, virtio-user's `server=1`), retrying every 100 ms. Either
//! way one frontend is served at a time, from open until the port is
//! dropped; when it goes (or is dropped for breaking the protocol), the
//! rings stop, the link goes down, and the next one is served, with no
//! restart of the app. Q queue pairs (1..=8, default 1) are offered with
//! VIRTIO_NET_F_MQ; rx queue q reads the guest's TX vring 2q + 1 and tx
//! queue q writes its RX vring 2q. Offered: VERSION_1, MRG_RXBUF and
//! EVENT_IDX (each can be taken out), CSUM and GUEST_CSUM (`csum=0`
//! takes them out), RING_PACKED, IN_ORDER, MQ, MTU (M,
//! default 1500) and MAC, and the protocol features MQ, CONFIG,
//! REPLY_ACK, CONFIGURE_MEM_SLOTS and STATUS (SET_STATUS and GET_STATUS,
//! which the `vhost` crate's backend side refuses, are served from a
//! copy peeked before it reads them; the status is kept, reported with
//! DEVICE_NEEDS_RESET while a ring is stopped for the driver's fault, and
//! in the xstat `device_status`). Not LOG_SHMFD: dirty-page logging for
//! live migration would cost the data path a log write per buffer.
//! Split rings (`vq`) and packed rings (`vq::packed`).
//!
//! Checksum offloads: CSUM and GUEST_CSUM are offered (`csum=0` takes
//! both out) and the port has the RX and TX checksum offloads. A partial
//! checksum from the guest (NEEDS_CSUM) is completed in software unless
//! the application asked for RX_CHECKSUM, in which case the mbuf carries
//! it on, flagged, to a port that finishes it; a frame whose mbuf asks
//! for a checksum reaches the guest as NEEDS_CSUM when it took
//! GUEST_CSUM, else completed on its copy (`crate::offload`). Counted per
//! queue: `_csum_partial` and `_csum_completed`.
//!
//! Busy polling (vhost_net's `busyloop_timeout`): by default the queues
//! leave polling to the lcore's mode (`--poll`: the adaptive spin, or
//! spin, or interrupt). With `busyloop_us` each rx queue declares its own
//! [`BusyPoll`] policy to the run loop instead: once it finds the guest's
//! TX ring empty, the lcore keeps polling for `busyloop_us` (0: arm the
//! kick and sleep at once), and with `rx_poll=1` (the default)
//! its other queues are polled meanwhile (RX busy polling: the port
//! feeding this guest); with `rx_poll=0` they wait for their own
//! wake-ups. Hits and timeouts are in the xstats
//! (`rx_qN_busy_poll_hits`, `rx_qN_busy_poll_timeouts`), beside kicks
//! (`_kicks`: wake-ups by the guest) and calls.
//!
//! Call coalescing (`call_coalesce=N`, default 0: off): a call the
//! driver asked for is held until N chains have been completed on that
//! vring since the last call, or until the queue is next found idle (an
//! empty rx burst; the tx queue's `in_flight`, which the run loop's
//! forwarding tasks call on idle rounds), so a guest under load takes
//! one interrupt per N frames instead of one per burst.
//!
//! The message layer is rust-vmm's `vhost` crate (`control`); the
//! memory table goes through `pmd::peer` (every region checked, every
//! address translated only when wholly inside one); the rings are the
//! crate's typed views on that memory, and the data path is ours
//! (`vq`): rx_burst copies guest TX chains into mbufs, tx_burst copies
//! mbufs into the guest's RX buffers (mergeable when negotiated); bursts,
//! no allocation, no syscalls but the call eventfd write when the guest
//! asked for an interrupt. Each queue try-locks its vring once a burst,
//! as DPDK's vhost library takes its per-queue access lock, so a control
//! message that changes a ring waits for at most one burst.
//!
//! Kicks: while the queues are polled the guest is told not to kick
//! (used.flags NO_NOTIFY, or a stale avail_event with EVENT_IDX); an rx
//! queue arms kicks when the run loop is about to sleep, and its
//! interrupt fd is the guest's kick eventfd.
mod control;
pub mod testing;
mod vq;

use crate::fd::drain_eventfd;
use crate::{no_filter, perr, psrc};
use control::{serve, Endpoint, Offer, Shared, BASE_FEATURES};
use rpmd_pmd::port::features::{Declared, Feature, Support};
use rpmd_pmd::port::stats::{QueueStats, StatsBlock};
use rpmd_pmd::port::{
    BusyPoll, Capabilities, DevArgs, Device, Driver, EthDev, Link, LinkEvents, LiveFlag, MacAddr,
    Offloads, Pkts, Port, PortConfig, Queues, RxFilter, RxQueue, RxStamp, StartContext, TxQueue,
    Xstat,
};
use rpmd_pmd::{DmaDomain, Mempool};
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use vq::VringSlot;

type PmdError = rpmd_pmd::Error;

/// Most queue pairs a backend port offers.
pub const MAX_PAIRS: u16 = 8;

/// The `vhost-user` driver.
pub struct VhostUserDriver;

/// What a `vhost-user:` string asks for.
struct BackendOptions {
    path: String,
    pairs: u16,
    mtu: u64,
    features: u64,
    busy_poll: Option<BusyPoll>,
    call_coalesce: u64,
    fault_every: u32,
    client: bool,
}

impl BackendOptions {
    fn parse(args: &DevArgs) -> Result<BackendOptions, PmdError> {
        args.only_options(&[
            "client",
            "queues",
            "mrg_rxbuf",
            "event_idx",
            "mtu",
            "busyloop_us",
            "rx_poll",
            "call_coalesce",
            "csum",
            "fault_used_every",
        ])?;
        let name = args.raw();
        let path = args.require_target("a vhost-user socket path")?.to_string();
        let pairs = args.opt_u64("queues", 1)?;
        if !(1..=MAX_PAIRS as u64).contains(&pairs) {
            return Err(perr(
                name,
                format!("queues={pairs}: 1..={MAX_PAIRS} queue pairs"),
            ));
        }
        let pairs = pairs as u16;
        let mtu = args.opt_u64("mtu", 1500)?;
        if !(68..=9000).contains(&mtu) {
            return Err(perr(name, format!("mtu={mtu}: 68..=9000")));
        }
        let mut features = BASE_FEATURES;
        if !args.opt_bool("mrg_rxbuf", true)? {
            features &= !crate::consts::VIRTIO_NET_F_MRG_RXBUF;
        }
        if !args.opt_bool("event_idx", true)? {
            features &= !crate::consts::VIRTIO_RING_F_EVENT_IDX;
        }
        if !args.opt_bool("csum", true)? {
            features &=
                !(crate::consts::VIRTIO_NET_F_CSUM | crate::consts::VIRTIO_NET_F_GUEST_CSUM);
        }
        // No busyloop_us: no policy of the queue's own, the lcore's
        // mode (--poll) decides. Given: vhost_net's busy loop.
        let rx_poll = args.opt_bool("rx_poll", true)?;
        let busy_poll = match args.opt("busyloop_us") {
            None => None,
            Some(_) => {
                let us = args.opt_u64("busyloop_us", 0)?;
                if us > 1_000_000 {
                    return Err(perr(
                        name,
                        format!("busyloop_us={us}: at most 1000000 (1 s)"),
                    ));
                }
                Some(BusyPoll {
                    budget: Duration::from_micros(us),
                    poll_others: rx_poll,
                })
            }
        };
        let call_coalesce = args.opt_u64("call_coalesce", 0)?;
        if call_coalesce > 4096 {
            return Err(perr(
                name,
                format!("call_coalesce={call_coalesce}: at most 4096 chains"),
            ));
        }
        let fault_every = crate::fault_every(args, "fault_used_every")?;
        let client = args.opt_bool("client", false)?;
        Ok(BackendOptions {
            path,
            pairs,
            mtu,
            features,
            busy_poll,
            call_coalesce,
            fault_every,
            client,
        })
    }
}

impl Driver for VhostUserDriver {
    fn features(&self) -> &'static [Declared] {
        &[
            (Feature::LinkStatusEvent, Support::Yes),
            (Feature::RxInterrupt, Support::Yes),
            (
                Feature::ChecksumOffload,
                Support::Partial("where the frontend negotiates the checksum features"),
            ),
        ]
    }

    fn check(&self, args: &DevArgs) -> Result<(), PmdError> {
        BackendOptions::parse(args).map(drop)
    }

    fn kind(&self) -> &'static str {
        "vhost-user"
    }

    fn usage(&self) -> &'static str {
        "vhost-user:PATH[,client=0|1][,queues=Q][,mrg_rxbuf=0|1][,event_idx=0|1][,mtu=M][,busyloop_us=U][,rx_poll=0|1][,call_coalesce=N][,csum=0|1]  a virtio-net device for a vhost-user frontend (a VM, virtio-user)"
    }

    fn open(&self, args: &DevArgs, _: &DmaDomain) -> Result<Box<dyn Port>, PmdError> {
        Ok(Box::new(VhostUserDevice::open(args)?))
    }
}

/// A vhost-user backend port: the generic port over the backend device.
pub type VhostUserPort = EthDev<VhostUserDevice>;

impl VhostUserDevice {
    /// Opens the port `args` describes (what the registry does for a
    /// `vhost-user:` string), as its own type, for the device's own
    /// methods ([`EthDev::device`]).
    pub fn open(args: &DevArgs) -> Result<VhostUserPort, PmdError> {
        let name = args.raw();
        let BackendOptions {
            path,
            pairs,
            mtu,
            features,
            busy_poll,
            call_coalesce,
            fault_every,
            client,
        } = BackendOptions::parse(args)?;
        #[cfg(not(feature = "fault-injection"))]
        let _ = fault_every;
        let ep = if client {
            Endpoint::Client(path.clone())
        } else {
            Endpoint::Server(listen(name, &path)?)
        };
        let mac = MacAddr::from_name(&path, 0x56);
        let offer = Offer {
            features,
            pairs,
            mac: mac.0,
            mtu: mtu as u16,
            call_coalesce: call_coalesce as u32,
            #[cfg(feature = "fault-injection")]
            fault_every,
        };
        let shared = Arc::new(Shared::new(name, pairs));
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("rpmd-vhost-ctl".into())
            .spawn(move || serve(ep, s, offer))
            .map_err(|e| psrc(name, "spawning the vhost-user control thread", e))?;
        let dev = VhostUserDevice {
            path: (!client).then_some(path),
            shared,
            thread: Some(thread),
            pairs,
            mac,
            mtu: mtu as u16,
            busy_poll,
            coalescing: call_coalesce > 1,
            keep_partial: false,
        };
        Ok(EthDev::new(args, dev))
    }
}

/// Binds the listening socket at `path`: a stale socket file is replaced,
/// anything else there (a file, a live backend's socket) is an error.
fn listen(name: &str, path: &str) -> Result<UnixListener, PmdError> {
    if let Ok(md) = std::fs::symlink_metadata(path) {
        if !md.file_type().is_socket() {
            return Err(perr(
                name,
                format!("{path} exists and is not a socket; remove it or choose another path"),
            ));
        }
        if UnixStream::connect(path).is_ok() {
            return Err(perr(
                name,
                format!("{path}: another process is listening there"),
            ));
        }
        let _ = std::fs::remove_file(path);
    }
    let l = UnixListener::bind(path).map_err(|e| psrc(name, format!("listening on {path}"), e))?;
    l.set_nonblocking(true)
        .map_err(|e| psrc(name, "a non-blocking listener", e))?;
    Ok(l)
}

/// A vhost-user backend: the device side of the frontend's virtio-net.
pub struct VhostUserDevice {
    /// The socket we listen on (removed when the port goes).
    path: Option<String>,
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
    pairs: u16,
    mac: MacAddr,
    mtu: u16,
    /// The rx queues' busy-poll policy (`busyloop_us`, `rx_poll`).
    busy_poll: Option<BusyPoll>,
    /// `call_coalesce` above 1: calls may be held, and idle rounds send
    /// them.
    coalescing: bool,
    /// The RX checksum offload was asked for (`offload`).
    keep_partial: bool,
}

impl Device for VhostUserDevice {
    fn driver(&self) -> &'static str {
        "vhost-user"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_rx_queues: self.pairs,
            max_tx_queues: self.pairs,
            // The frontend sizes the rings.
            min_desc: 1,
            max_desc: 32768,
            desc_pow2: false,
            offloads: Offloads::RX_CHECKSUM | Offloads::TX_CHECKSUM,
            min_mtu: 68,
            max_mtu: 9000,
            rx_interrupts: true,
            needs_rx_pool: true,
        }
    }
    fn configure(&mut self, _name: &str, conf: &PortConfig) -> Result<(), PmdError> {
        self.keep_partial = conf.offloads.contains(Offloads::RX_CHECKSUM);
        Ok(())
    }
    fn start(&mut self, ctx: StartContext<'_>) -> Result<Queues, PmdError> {
        let Some(pool) = ctx.conf.rx_pool.clone() else {
            return Err(perr(ctx.name, "no rx pool"));
        };
        let v = &self.shared.vrings;
        let rx = (0..ctx.conf.rx_queues as usize)
            .map(|q| {
                Box::new(BackendRx {
                    slot: v[2 * q + 1].clone(),
                    pool: pool.clone(),
                    stats: ctx.stats.rx(q),
                    live: ctx.rx_live[q].clone(),
                    stamp: ctx.stamp,
                    kick: None,
                    kick_gen: u64::MAX,
                    busy_poll: self.busy_poll,
                    keep_partial: self.keep_partial,
                }) as Box<dyn RxQueue>
            })
            .collect();
        let tx = (0..ctx.conf.tx_queues as usize)
            .map(|q| {
                Box::new(BackendTx {
                    slot: v[2 * q].clone(),
                    pool: pool.clone(),
                    stats: ctx.stats.tx(q),
                    live: ctx.tx_live[q].clone(),
                    coalescing: self.coalescing,
                }) as Box<dyn TxQueue>
            })
            .collect();
        Ok(Queues::new(rx, tx))
    }
    /// The frontend's link: up while one is connected and has set it up,
    /// started or not (as DPDK's vhost PMD).
    fn link(&self, _started: bool) -> Link {
        let up = self.shared.link();
        Link {
            up,
            speed_mbps: if up { 10_000 } else { 0 },
            full_duplex: true,
        }
    }
    fn mac_addr(&self) -> MacAddr {
        self.mac
    }
    fn set_rx_filter(&mut self, name: &str, filter: &RxFilter) -> Result<(), PmdError> {
        no_filter(name, filter)
    }
    /// Raised by the control thread when a frontend comes, sets up or
    /// tears down its first pair, or goes.
    fn watch_link(&mut self, _name: &str, events: &LinkEvents) -> Result<bool, PmdError> {
        let s = &self.shared;
        s.link_events.attach(events, s.link());
        Ok(true)
    }
    fn set_mtu(&mut self, _name: &str, mtu: u16, _started: bool) -> Result<(), PmdError> {
        self.mtu = mtu;
        Ok(())
    }
    fn mtu(&self) -> Option<u16> {
        Some(self.mtu)
    }
    fn xstats(&self, _stats: &StatsBlock, x: &mut Vec<Xstat>) {
        let s = &self.shared;
        let mut add = |name: String, value: u64| x.push(Xstat { name, value });
        add(
            "negotiated_features".into(),
            s.features.load(Ordering::Relaxed),
        );
        add("connections".into(), s.connections.get());
        add("frontends_rejected".into(), s.rejected.get());
        add("early_vring_enables".into(), s.early_enables.get());
        add("device_status".into(), s.status.load(Ordering::Relaxed));
        for (i, v) in s.vrings.iter().enumerate() {
            let (dir, q) = if i % 2 == 0 {
                ("tx", i / 2)
            } else {
                ("rx", i / 2)
            };
            let c = &v.counters;
            add(format!("{dir}_q{q}_calls"), c.calls.get());
            add(format!("{dir}_q{q}_calls_lost"), c.calls_lost.get());
            add(format!("{dir}_q{q}_kick_arms"), c.arms.get());
            add(format!("{dir}_q{q}_kicks"), c.kicks.get());
            add(format!("{dir}_q{q}_ring_starts"), c.starts.get());
            add(format!("{dir}_q{q}_csum_partial"), c.csum_partial.get());
            add(format!("{dir}_q{q}_csum_completed"), c.csum_completed.get());
            if cfg!(feature = "fault-injection") && dir == "tx" {
                add(format!("tx_q{q}_faults_injected"), c.faults_injected.get());
            }
            if dir == "rx" {
                add(format!("rx_q{q}_left_at_stop"), c.left_at_stop.get());
                add(format!("rx_q{q}_busy_poll_hits"), c.busy_hits.get());
                add(format!("rx_q{q}_busy_poll_timeouts"), c.busy_timeouts.get());
            }
        }
    }
    fn last_error(&self) -> Option<String> {
        VhostUserDevice::last_error(self)
    }
}

impl VhostUserDevice {
    /// Why a ring of the current frontend stopped (its protocol broken),
    /// or else why the last frontend was dropped, if one was.
    pub fn last_error(&self) -> Option<String> {
        for (i, v) in self.shared.vrings.iter().enumerate() {
            if let Some(why) = v.lock().broken.clone() {
                return Some(format!("vring {i} stopped: {why}"));
            }
        }
        self.shared
            .last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for VhostUserDevice {
    fn drop(&mut self) {
        // The port stopped its queues before its device drops.
        self.shared.quit.store(true, Ordering::Relaxed);
        if let Some(c) = self
            .shared
            .closer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(p) = &self.path {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// An rx queue: the guest's TX vring of one pair.
struct BackendRx {
    slot: Arc<VringSlot>,
    pool: Mempool,
    stats: Arc<crossbeam_utils::CachePadded<QueueStats>>,
    live: LiveFlag,
    stamp: RxStamp,
    /// The guest's kick eventfd, for the run loop's sleep.
    kick: Option<Arc<File>>,
    kick_gen: u64,
    busy_poll: Option<BusyPoll>,
    /// The RX checksum offload was asked for: partial checksums from the
    /// guest stay partial, flagged.
    keep_partial: bool,
}

impl RxQueue for BackendRx {
    #[inline]
    fn rx_burst(&mut self, out: &mut Pkts, max: usize) -> usize {
        if !self.live.load(Ordering::Relaxed) {
            return 0;
        }
        let Some(mut v) = self.slot.vring.try_lock() else {
            return 0;
        };
        let n = v.dequeue(
            &self.pool,
            out,
            max,
            &self.stats,
            &self.slot.counters,
            (self.keep_partial, self.stamp.port()),
        );
        if n == 0 {
            // Idle: a call held for coalescing goes now.
            v.flush_call(&self.slot.counters);
        }
        if v.broken.is_some() {
            self.slot.running.store(false, Ordering::Release);
        }
        drop(v);
        // The dequeue set each frame's port.
        self.stamp.apply_types(out, n)
    }

    fn interrupt_fd(&self) -> Option<BorrowedFd<'_>> {
        self.kick.as_deref().map(|f| f.as_fd())
    }

    fn set_interrupt(&mut self, on: bool) -> Result<(), PmdError> {
        let mut v = self.slot.lock();
        let gen = self.slot.kick_gen.load(Ordering::Acquire);
        if gen != self.kick_gen {
            self.kick_gen = gen;
            self.kick = v.cfg.kick.clone();
        }
        if on {
            self.slot.counters.arms.add(1);
        } else if self.kick.as_deref().is_some_and(drain_eventfd) {
            self.slot.counters.kicks.add(1);
        }
        v.arm(on);
        Ok(())
    }

    fn has_work(&self) -> bool {
        self.slot.lock().has_work()
    }

    /// Never waits: while the control thread holds the vring (a
    /// vhost-user message), the count is unknown, as `rx_burst` then
    /// takes nothing.
    fn rx_pending(&self) -> Option<usize> {
        self.slot.vring.try_lock()?.pending()
    }

    fn busy_poll(&self) -> Option<BusyPoll> {
        self.busy_poll
    }

    fn busy_poll_done(&mut self, hit: bool) {
        let c = &self.slot.counters;
        if hit { &c.busy_hits } else { &c.busy_timeouts }.add(1);
    }
}

/// A tx queue: the guest's RX vring of one pair.
struct BackendTx {
    slot: Arc<VringSlot>,
    /// For returning sent mbufs in bulk (any pool's).
    pool: Mempool,
    stats: Arc<crossbeam_utils::CachePadded<QueueStats>>,
    live: LiveFlag,
    /// Whether calls may be held (else an idle round has nothing to do).
    coalescing: bool,
}

impl TxQueue for BackendTx {
    #[inline]
    fn tx_burst(&mut self, pkts: &mut Pkts) -> usize {
        if !self.live.load(Ordering::Relaxed) || pkts.is_empty() {
            return 0;
        }
        let Some(mut v) = self.slot.vring.try_lock() else {
            return 0;
        };
        let n = v.enqueue(pkts, &self.stats, &self.slot.counters);
        if v.broken.is_some() {
            self.slot.running.store(false, Ordering::Release);
        }
        drop(v);
        // Copied out: freed, in one pool operation when all were.
        if n == pkts.len() {
            self.pool.put_bulk(pkts);
        } else {
            pkts.drop_front(n);
        }
        n
    }

    /// Frames are copied out as they are sent, so none is in flight; an
    /// idle round's call sends a call held for coalescing.
    fn in_flight(&mut self) -> usize {
        if !self.coalescing {
            return 0;
        }
        if let Some(mut v) = self.slot.vring.try_lock() {
            v.flush_call(&self.slot.counters);
        }
        0
    }
}
