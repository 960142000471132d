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
//! Frames to send must live in shared memory: mbufs of the port's
//! `rx_pool`. Others are dropped and counted (`oerrors`), since the backend
//! could not reach them.
//!
//! Device string: `virtio-user:PATH[,queues=Q][,queue_size=N][,mrg_rxbuf=0|1][,event_idx=0|1][,timeout_ms=T]`
//! (Q queue pairs, 1..=8, default 1: more than one needs a backend that
//! offers VIRTIO_NET_F_MQ and the vhost-user MQ protocol feature, and the
//! pairs are enabled with SET_VRING_ENABLE; N a power of two, default 256;
//! event indices (VIRTIO_F_EVENT_IDX) on by default when offered;
//! T bounds every wait for a backend reply,
//! default 5000; mergeable RX buffers on by default when the
//! backend offers them: frames larger than an mbuf arrive as chains, and
//! chains are sent as descriptor chains). The backend must be listening (as testpmd's `net_vhost`
//! does by default).
use crate::consts::{
    NET_HDR_LEN, VHOST_USER_F_PROTOCOL_FEATURES, VIRTIO_F_VERSION_1, VIRTIO_NET_F_MQ,
    VIRTIO_NET_F_MRG_RXBUF, VIRTIO_RING_F_EVENT_IDX,
};
use crate::fd::CallFd;
use crate::split::{Layout, SplitQueue, MAX_CHAIN};
use crate::Error;
use crossbeam_utils::CachePadded;
use rpmd_pmd::port::stats::{QueueStats, StatsBlock};
use rpmd_pmd::port::{
    Capabilities, DevArgs, Driver, Link, MacAddr, Offloads, Pkts, Port, PortConfig, PortStats,
    Queues, RxQueue, TxQueue, Xstat,
};
use rpmd_pmd::{DmaRegion, IovaMode, Mempool};
use rpmd_ring::Burst;
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::Duration;
use vhost::vhost_user::message::VhostUserProtocolFeatures;
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vmm_sys_util::eventfd::EventFd;

type PmdError = rpmd_pmd::Error;

fn perr(port: &str, e: impl std::fmt::Display) -> PmdError {
    PmdError::Port {
        port: port.to_string(),
        detail: e.to_string(),
    }
}

/// The vhost-user connection, with a deadline on every request: the
/// `vhost` crate waits for replies without one (it retries timed-out reads
/// forever), so a watchdog shuts the socket down when a request runs past
/// `timeout`, and the pending read fails at once. The port is then dead;
/// the error names the request.
struct Control {
    fe: Frontend,
    sock: UnixStream,
    timeout: Duration,
    port: String,
}

impl Control {
    fn call<T>(
        &mut self,
        what: &str,
        f: impl FnOnce(&mut Frontend) -> Result<T, vhost::Error>,
    ) -> Result<T, PmdError> {
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let (sock, timeout) = (&self.sock, self.timeout);
        let fe = &mut self.fe;
        let r = std::thread::scope(|s| {
            s.spawn(move || {
                if let Err(RecvTimeoutError::Timeout) = wait.recv_timeout(timeout) {
                    let _ = sock.shutdown(Shutdown::Both);
                }
            });
            let r = f(fe);
            let _ = done.send(());
            r
        });
        r.map_err(|e| {
            perr(
                &self.port,
                format!(
                    "vhost-user {what}: {e} (no reply within {:?}?)",
                    self.timeout
                ),
            )
        })
    }
}

/// The `virtio-user` driver.
pub struct VirtioUserDriver;

impl Driver for VirtioUserDriver {
    fn kind(&self) -> &'static str {
        "virtio-user"
    }

    fn usage(&self) -> &'static str {
        "virtio-user:PATH[,queues=Q][,queue_size=N][,mrg_rxbuf=0|1][,event_idx=0|1][,timeout_ms=T]  virtio-net driven over a vhost-user socket"
    }

    fn open(&self, args: &DevArgs) -> Result<Box<dyn Port>, PmdError> {
        args.only_options(&[
            "queues",
            "queue_size",
            "mrg_rxbuf",
            "event_idx",
            "timeout_ms",
        ])?;
        let want_event_idx = args.opt_bool("event_idx", true)?;
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
            .map_err(|e| perr(args.raw(), e))?;
        let sock = UnixStream::connect(&path).map_err(|e| {
            perr(
                args.raw(),
                format!("cannot connect to the vhost-user socket {path}: {e} (is the backend running and listening?)"),
            )
        })?;
        let watch = sock
            .try_clone()
            .map_err(|e| perr(args.raw(), format!("socket: {e}")))?;
        let mut ctl = Control {
            fe: Frontend::from_stream(sock, 2 * MAX_PAIRS as u64),
            sock: watch,
            timeout,
            port: args.raw().to_string(),
        };
        ctl.call("SET_OWNER", |fe| fe.set_owner())?;
        let offered = ctl.call("GET_FEATURES", |fe| fe.get_features())?;
        if offered & VIRTIO_F_VERSION_1 == 0 {
            return Err(perr(
                args.raw(),
                format!("the backend offers no VERSION_1 (features {offered:#x}); legacy backends are not supported"),
            ));
        }
        let proto = if pairs > 1 {
            multiqueue(&mut ctl, offered, pairs)?;
            true
        } else {
            false
        };
        Ok(Box::new(VirtioUserPort {
            name: args.raw().to_string(),
            ctl,
            offered,
            pairs,
            proto,
            want_mrg: mrg,
            want_event_idx,
            features: 0,
            layout,
            mac: MacAddr::from_name(&path, 0x76),
            conf: None,
            started: false,
            live: Arc::new(AtomicBool::new(false)),
            stats: StatsBlock::new(0, 0),
            promisc: true,
            allmulti: true,
            mtu: 1500,
            rings: None,
            active: 0,
        }))
    }
}

/// Most queue pairs a port sets up.
pub const MAX_PAIRS: u16 = 8;

/// Negotiates what several queue pairs need: the MQ device feature, and
/// the vhost-user protocol features (MQ) that let us ask the backend how
/// many queues it has and enable each ring.
fn multiqueue(ctl: &mut Control, offered: u64, pairs: u16) -> Result<(), PmdError> {
    let port = ctl.port.clone();
    let need = VIRTIO_NET_F_MQ | VHOST_USER_F_PROTOCOL_FEATURES;
    if offered & need != need {
        return Err(perr(
            &port,
            format!("queues={pairs} needs a backend offering VIRTIO_NET_F_MQ and vhost-user protocol features (features {offered:#x}); start it with more queues (testpmd: net_vhost0,iface=...,queues={pairs})"),
        ));
    }
    let proto = ctl.call("GET_PROTOCOL_FEATURES", |fe| fe.get_protocol_features())?;
    if !proto.contains(VhostUserProtocolFeatures::MQ) {
        return Err(perr(
            &port,
            format!(
                "queues={pairs}: the backend has no vhost-user MQ protocol feature ({proto:?})"
            ),
        ));
    }
    ctl.call("SET_PROTOCOL_FEATURES", |fe| {
        fe.set_protocol_features(VhostUserProtocolFeatures::MQ)
    })?;
    let n = ctl.call("GET_QUEUE_NUM", |fe| fe.get_queue_num())?;
    // DPDK answers with queue pairs, QEMU's backends with vrings; either
    // way fewer than we need is an error.
    if n < pairs as u64 {
        return Err(perr(
            &port,
            format!("queues={pairs}: the backend has {n} queues"),
        ));
    }
    Ok(())
}

/// A virtio-user port.
pub struct VirtioUserPort {
    name: String,
    ctl: Control,
    offered: u64,
    /// Queue pairs (the `queues` option).
    pairs: u16,
    /// Whether protocol features were negotiated (rings then need
    /// SET_VRING_ENABLE).
    proto: bool,
    want_mrg: bool,
    want_event_idx: bool,
    features: u64,
    layout: Layout,
    mac: MacAddr,
    conf: Option<PortConfig>,
    started: bool,
    live: Arc<AtomicBool>,
    stats: StatsBlock,
    promisc: bool,
    allmulti: bool,
    mtu: u16,
    rings: Option<Arc<DmaRegion>>,
    /// Vrings set up by the last start.
    active: usize,
}

/// Bounds of memory the backend can reach (the pool's region).
#[derive(Clone, Copy)]
struct Shared {
    start: u64,
    end: u64,
}

struct VirtioRx {
    q: SplitQueue,
    /// The backend writes it on completions while interrupts are armed.
    call: CallFd,
    mrg: bool,
    pool: Arc<Mempool>,
    kick: EventFd,
    live: Arc<AtomicBool>,
    stats: Arc<CachePadded<QueueStats>>,
    _rings: Arc<DmaRegion>,
    refill: Burst<rpmd_pmd::Mbuf, 64>,
}

struct VirtioTx {
    q: SplitQueue,
    pool: Arc<Mempool>,
    done: Burst<rpmd_pmd::Mbuf, 64>,
    kick: EventFd,
    live: Arc<AtomicBool>,
    stats: Arc<CachePadded<QueueStats>>,
    shared: Shared,
    _rings: Arc<DmaRegion>,
}

impl RxQueue for VirtioRx {
    fn rx_burst(&mut self, out: &mut Pkts, max: usize) -> usize {
        if !self.live.load(Relaxed) {
            return 0;
        }
        let room = max.min(out.capacity() - out.len());
        let mut n = 0;
        let mut bytes = 0;
        while n < room {
            let Some(r) = self.q.pop_used() else { break };
            match r {
                Ok((mut m, len)) => {
                    let len = len as usize;
                    // The device fills a buffer before it spills into the
                    // next, so only a full buffer can start a multi-buffer
                    // frame; shorter ones need not be read here (the frame
                    // bytes are cold in this core's cache).
                    let full = len >= m.tailroom();
                    if len < NET_HDR_LEN || !m.set_data_len(len) {
                        self.stats.errors.add(1);
                        continue;
                    }
                    // §5.1.6.4: with mergeable buffers, num_buffers says how
                    // many used buffers carry this frame.
                    let nbufs = if self.mrg && full {
                        let h = m.data();
                        u16::from_le_bytes([h[10], h[11]]).max(1)
                    } else {
                        1
                    };
                    let _ = m.adj(NET_HDR_LEN);
                    let mut ok = true;
                    for _ in 1..nbufs {
                        match self.q.pop_used() {
                            Some(Ok((mut seg, l))) => {
                                if !seg.set_data_len(l as usize) || m.chain(seg).is_err() {
                                    ok = false;
                                }
                            }
                            _ => ok = false,
                        }
                    }
                    if !ok {
                        // A frame the backend announced but did not deliver
                        // whole: dropped (its mbufs return to the pool).
                        self.stats.errors.add(1);
                        continue;
                    }
                    bytes += m.pkt_len();
                    let _ = out.push(m);
                    n += 1;
                }
                Err(_) => self.stats.errors.add(1),
            }
        }
        self.stats.packets.add(n as u64);
        self.stats.bytes.add(bytes as u64);
        // Refill what was taken.
        let want = self.q.free().min(self.refill.capacity());
        if want > 0 && self.pool.get_bulk(&mut self.refill, want).is_err() {
            self.stats.nombuf.add(1);
        }
        let mut posted = false;
        while let Some(m) = self.refill.pop() {
            let (addr, room) = (m.data_iova().raw(), m.tailroom() as u32);
            if self.q.push(m, addr, room, true).is_err() {
                break;
            }
            posted = true;
        }
        if posted && self.q.publish() {
            let _ = self.kick.write(1);
        }
        n
    }

    fn interrupt_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.call.as_fd())
    }

    fn set_interrupt(&mut self, enabled: bool) -> Result<(), PmdError> {
        self.arm(enabled);
        Ok(())
    }

    fn has_work(&self) -> bool {
        self.q.has_used()
    }
}

impl VirtioRx {
    /// Arms or disarms rx interrupts (the run loop's sleep).
    fn arm(&mut self, on: bool) {
        self.q.set_interrupts(on);
        if !on {
            // Clear what the backend signalled, so the next sleep waits.
            let _ = self.call.0.read();
        }
    }
}

impl TxQueue for VirtioTx {
    fn tx_burst(&mut self, pkts: &mut Pkts) -> usize {
        if !self.live.load(Relaxed) {
            return 0;
        }
        // Reclaim sent buffers first, returning them in bulk.
        loop {
            let bad = self.q.reclaim_into(&mut self.done);
            self.stats.errors.add(bad as u64);
            if self.done.is_empty() {
                break;
            }
            let full = self.done.is_full();
            self.pool.put_bulk(&mut self.done);
            if !full {
                break;
            }
        }
        let mut n = 0;
        let mut bytes = 0;
        while self.q.free() > 0 {
            let Some(mut m) = pkts.pop() else { break };
            let len = m.pkt_len();
            let ok =
                m.nb_segs() <= MAX_CHAIN && m.prepend(NET_HDR_LEN).map(|h| h.fill(0)).is_some();
            if m.nb_segs() == 1 {
                let addr = m.data_iova().raw();
                if !ok || addr < self.shared.start || addr + m.data_len() as u64 > self.shared.end {
                    // Not reachable by the backend, or no room for the
                    // header: dropped (it returns to its pool) and counted.
                    self.stats.errors.add(1);
                    continue;
                }
                let dl = m.data_len() as u32;
                if let Err(m) = self.q.push(m, addr, dl, false) {
                    drop(m);
                    break;
                }
            } else {
                let mut segs = [(0u64, 0u32); MAX_CHAIN];
                let mut k = 0;
                let mut reachable = ok;
                for (iova, l) in m.segment_iovas().take(MAX_CHAIN) {
                    let a = iova.raw();
                    reachable &= a >= self.shared.start && a + l as u64 <= self.shared.end;
                    segs[k] = (a, l as u32);
                    k += 1;
                }
                if !reachable {
                    self.stats.errors.add(1);
                    continue;
                }
                if let Err(m) = self.q.push_chain(m, &segs[..k], false) {
                    // Not enough descriptors now: dropped, counted as full.
                    drop(m);
                    self.stats.full.add(1);
                    break;
                }
            }
            n += 1;
            bytes += len;
        }
        if self.q.free() == 0 {
            self.stats.full.add(1);
        }
        if n > 0 && self.q.publish() {
            let _ = self.kick.write(1);
        }
        self.stats.packets.add(n as u64);
        self.stats.bytes.add(bytes as u64);
        n
    }
}

impl VirtioUserPort {
    fn setup(&mut self) -> Result<Queues, PmdError> {
        let name = self.name.clone();
        let conf = self
            .conf
            .clone()
            .ok_or_else(|| perr(&name, "start before configure"))?;
        let pool = conf
            .rx_pool
            .clone()
            .ok_or_else(|| perr(&name, "no rx_pool"))?;
        let l = self.layout;
        // Pair q: RX on vring 2q, TX on vring 2q + 1.
        let pairs = conf.rx_queues.max(conf.tx_queues) as usize;
        let rings = Arc::new(DmaRegion::new(
            "virtio-user rings",
            2 * pairs * l.len,
            IovaMode::Va,
        )?);
        let mut want = VIRTIO_F_VERSION_1;
        if self.want_mrg {
            want |= VIRTIO_NET_F_MRG_RXBUF;
        }
        if self.want_event_idx {
            want |= VIRTIO_RING_F_EVENT_IDX;
        }
        let event_idx = self.offered & want & VIRTIO_RING_F_EVENT_IDX != 0;
        let mut queues = Vec::with_capacity(2 * pairs);
        for i in 0..2 * pairs {
            let mut q = SplitQueue::new(&rings, i * l.len, l).map_err(|e| perr(&name, e))?;
            q.set_event_idx(event_idx);
            q.set_interrupts(false);
            queues.push(q);
        }
        if self.proto {
            want |= VIRTIO_NET_F_MQ | VHOST_USER_F_PROTOCOL_FEATURES;
        }
        self.features = self.offered & want;
        let features = self.features;
        self.ctl
            .call("SET_FEATURES", |fe| fe.set_features(features))?;
        let pr = pool.region();
        let mem = [
            VhostUserMemoryRegionInfo {
                guest_phys_addr: pr.as_ptr() as u64,
                memory_size: pr.len() as u64,
                userspace_addr: pr.as_ptr() as u64,
                mmap_offset: 0,
                mmap_handle: pr.fd().as_raw_fd(),
            },
            VhostUserMemoryRegionInfo {
                guest_phys_addr: rings.as_ptr() as u64,
                memory_size: rings.len() as u64,
                userspace_addr: rings.as_ptr() as u64,
                mmap_offset: 0,
                mmap_handle: rings.fd().as_raw_fd(),
            },
        ];
        self.ctl
            .call("SET_MEM_TABLE", |fe| fe.set_mem_table(&mem))?;
        let mut kicks = Vec::new();
        let mut calls = Vec::new();
        for (i, q) in queues.iter().enumerate() {
            let ev = |e: std::io::Error| perr(&name, format!("eventfd: {e}"));
            let kick = EventFd::new(libc::EFD_NONBLOCK).map_err(ev)?;
            let call = EventFd::new(libc::EFD_NONBLOCK).map_err(ev)?;
            let (desc, avail, used) = q.addresses();
            let size = q.size();
            self.ctl
                .call("SET_VRING_NUM", |fe| fe.set_vring_num(i, size))?;
            self.ctl
                .call("SET_VRING_BASE", |fe| fe.set_vring_base(i, 0))?;
            let cfg = VringConfigData {
                queue_max_size: size,
                queue_size: size,
                flags: 0,
                desc_table_addr: desc,
                used_ring_addr: used,
                avail_ring_addr: avail,
                log_addr: None,
            };
            self.ctl
                .call("SET_VRING_ADDR", |fe| fe.set_vring_addr(i, &cfg))?;
            self.ctl
                .call("SET_VRING_CALL", |fe| fe.set_vring_call(i, &call))?;
            self.ctl
                .call("SET_VRING_KICK", |fe| fe.set_vring_kick(i, &kick))?;
            kicks.push(kick);
            calls.push(CallFd(call));
        }
        if self.proto {
            // With protocol features, rings start disabled (vhost-user
            // spec, "Ring states").
            for i in 0..2 * pairs {
                self.ctl
                    .call("SET_VRING_ENABLE", |fe| fe.set_vring_enable(i, true))?;
            }
        }
        self.stats = StatsBlock::new(conf.rx_queues, conf.tx_queues);
        self.live = Arc::new(AtomicBool::new(true));
        self.rings = Some(rings.clone());
        self.active = 2 * pairs;
        let shared = Shared {
            start: pr.as_ptr() as u64,
            end: pr.as_ptr() as u64 + pr.len() as u64,
        };
        let mrg = self.features & VIRTIO_NET_F_MRG_RXBUF != 0;
        let (mut rx, mut tx) = (Vec::new(), Vec::new());
        let mut b: Burst<rpmd_pmd::Mbuf, 64> = Burst::new();
        for (i, ((mut q, kick), call)) in queues.into_iter().zip(kicks).zip(calls).enumerate() {
            let pair = i / 2;
            if i % 2 == 0 {
                // Fill the RX ring.
                while q.free() > 0 {
                    let k = q.free().min(64);
                    pool.get_bulk(&mut b, k)?;
                    while let Some(m) = b.pop() {
                        let (addr, room) = (m.data_iova().raw(), m.tailroom() as u32);
                        let _ = q.push(m, addr, room, true);
                    }
                }
                if q.publish() {
                    let _ = kick.write(1);
                }
                if pair < conf.rx_queues as usize {
                    rx.push(Box::new(VirtioRx {
                        q,
                        call,
                        mrg,
                        pool: pool.clone(),
                        kick,
                        live: self.live.clone(),
                        stats: self.stats.rx(pair),
                        _rings: rings.clone(),
                        refill: Burst::new(),
                    }) as Box<dyn RxQueue>);
                }
            } else if pair < conf.tx_queues as usize {
                tx.push(Box::new(VirtioTx {
                    q,
                    pool: pool.clone(),
                    done: Burst::new(),
                    kick,
                    live: self.live.clone(),
                    stats: self.stats.tx(pair),
                    shared,
                    _rings: rings.clone(),
                }) as Box<dyn TxQueue>);
            }
        }
        Ok(Queues { rx, tx })
    }
}

impl Port for VirtioUserPort {
    fn driver(&self) -> &'static str {
        "virtio-user"
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_rx_queues: self.pairs,
            max_tx_queues: self.pairs,
            min_desc: 1,
            max_desc: u16::MAX,
            desc_pow2: false,
            min_mtu: 68,
            // Mergeable buffers carry frames over several mbufs.
            max_mtu: if self.want_mrg && self.offered & VIRTIO_NET_F_MRG_RXBUF != 0 {
                9600
            } else {
                2048 - 14 - NET_HDR_LEN as u16
            },
            offloads: Offloads::RX_SCATTER | Offloads::TX_MULTI_SEGS,
            rx_interrupts: true,
            needs_rx_pool: true,
        }
    }
    fn configure(&mut self, conf: &PortConfig) -> Result<(), PmdError> {
        if self.started {
            return Err(perr(&self.name, "configure while started; stop it first"));
        }
        conf.validate(&self.name, &self.capabilities())?;
        self.conf = Some(conf.clone());
        Ok(())
    }
    fn start(&mut self) -> Result<Queues, PmdError> {
        if self.started {
            return Err(perr(&self.name, "already started"));
        }
        let q = self.setup()?;
        self.started = true;
        Ok(q)
    }
    fn stop(&mut self) -> Result<(), PmdError> {
        self.live.store(false, Relaxed);
        if self.started {
            for i in 0..self.active {
                // GET_VRING_BASE stops the ring in the backend.
                let _ = self.ctl.call("GET_VRING_BASE", |fe| fe.get_vring_base(i));
            }
        }
        self.started = false;
        Ok(())
    }
    fn link(&self) -> Link {
        Link {
            up: self.started,
            speed_mbps: 10_000,
            full_duplex: true,
        }
    }
    fn mac_addr(&self) -> MacAddr {
        self.mac
    }
    fn set_promiscuous(&mut self, on: bool) -> Result<(), PmdError> {
        self.promisc = on;
        Ok(())
    }
    fn promiscuous(&self) -> bool {
        self.promisc
    }
    fn set_allmulticast(&mut self, on: bool) -> Result<(), PmdError> {
        self.allmulti = on;
        Ok(())
    }
    fn allmulticast(&self) -> bool {
        self.allmulti
    }
    fn set_mtu(&mut self, mtu: u16) -> Result<(), PmdError> {
        let c = self.capabilities();
        if mtu < c.min_mtu || mtu > c.max_mtu {
            return Err(PmdError::Config {
                port: self.name.clone(),
                what: "mtu",
                detail: format!("{mtu}; this port takes {}..={}", c.min_mtu, c.max_mtu),
            });
        }
        self.mtu = mtu;
        Ok(())
    }
    fn mtu(&self) -> u16 {
        self.mtu
    }
    fn stats(&self) -> PortStats {
        self.stats.stats()
    }
    fn xstats(&self) -> Vec<Xstat> {
        let mut v = self.stats.xstats();
        v.push(Xstat {
            name: "negotiated_features".into(),
            value: self.features,
        });
        v
    }
    fn reset_stats(&mut self) {
        self.stats.reset();
    }
}

impl Drop for VirtioUserPort {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
