//! `af_xdp:IFNAME[,queue=Q][,queues=N][,mode=native|skb][,zerocopy=0|1]
//! [,need_wakeup=0|1][,busy_poll_us=U][,busy_budget=B]`: AF_XDP sockets,
//! like DPDK's `net_af_xdp`.
//!
//! The UMEM of every socket is the port's rx mempool region itself
//! (unaligned-chunk mode, one chunk per mbuf buffer), so a frame the
//! kernel writes lands in an mbuf: RX hands that mbuf out without a copy,
//! and TX of that pool's mbufs passes their address to the kernel. Mbufs
//! of other pools are copied into one of ours first. Each queue is one
//! socket bound to interface queue `queue + i`, with its fill, completion,
//! RX and TX rings (`ring`); the mbufs posted to the kernel wait in a
//! table indexed by their pool index, and an address the kernel gives back
//! that names no posted buffer is counted as a device error, never
//! followed. The XDP program is libxdp's default (`prog`).
//!
//! Kernel busy polling (`busy_poll_us`): the socket gets
//! SO_PREFER_BUSY_POLL, SO_BUSY_POLL and SO_BUSY_POLL_BUDGET, and every
//! receive poll makes one non-blocking recvfrom, in which the kernel runs
//! the device's NAPI poll for us instead of in softirq context: the
//! application's loop drives the device, as in the kernel's own
//! busy-poll loop. Without it, the kernel is woken only when it asks
//! (need_wakeup) and an idle lcore may sleep on the socket fd.
mod prog;
mod ring;

use crate::netdev::{driver, Netdev};
use crate::port::{frame_len, rx_pool, Backend, KernelPort, Live};
use crate::sys::{self, Mapping};
use crossbeam_utils::CachePadded;
use prog::{Attachment, Mode};
use ring::XskRing;
use rpmd_pmd::port::stats::{QueueStats, StatsBlock};
use rpmd_pmd::port::{
    Capabilities, DevArgs, Driver, Offloads, Pkts, Port, PortConfig, Queues, RxQueue, TxQueue,
    Xstat,
};
use rpmd_pmd::{DmaDomain, Error, Mbuf, Mempool};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Where the kernel puts a received frame in a chunk (XDP_PACKET_HEADROOM).
const XDP_HEADROOM: usize = 256;

/// The `af_xdp` driver.
pub struct AfXdpDriver;

#[derive(Clone)]
struct Options {
    queue: u32,
    queues: u16,
    mode: Option<Mode>,
    zerocopy: Option<bool>,
    need_wakeup: bool,
    busy_poll_us: u32,
    busy_budget: u32,
}

impl Driver for AfXdpDriver {
    fn kind(&self) -> &'static str {
        "af_xdp"
    }

    fn usage(&self) -> &'static str {
        "af_xdp:IFNAME[,queue=Q][,queues=N][,mode=native|skb][,zerocopy=0|1][,need_wakeup=0|1][,busy_poll_us=U][,busy_budget=B]  AF_XDP sockets on a kernel interface"
    }

    fn open(&self, args: &DevArgs, _: &DmaDomain) -> Result<Box<dyn Port>, Error> {
        args.only_options(&[
            "queue",
            "queues",
            "mode",
            "zerocopy",
            "need_wakeup",
            "busy_poll_us",
            "busy_budget",
        ])?;
        let ifname = args.require_target("an interface name")?.to_string();
        let bad = |detail: String| Error::Config {
            port: args.raw().into(),
            what: "device options",
            detail,
        };
        let mode = match args.opt("mode") {
            None => None,
            Some("native" | "drv") => Some(Mode::Native),
            Some("skb" | "generic") => Some(Mode::Skb),
            Some(m) => return Err(bad(format!("mode={m}; native or skb"))),
        };
        let zerocopy = args
            .opt("zerocopy")
            .map(|_| args.opt_bool("zerocopy", false))
            .transpose()?;
        let busy_poll_us = args.opt_u64("busy_poll_us", 0)?;
        let busy_budget = args.opt_u64("busy_budget", 64)?;
        if busy_poll_us > 1_000_000 || !(1..=1024).contains(&busy_budget) {
            return Err(bad(format!("busy_poll_us={busy_poll_us} (at most 1000000), busy_budget={busy_budget} (1..=1024)")));
        }
        let dev = Netdev::open(args.raw(), &ifname)?;
        let have = dev.queue_count(true).max(dev.queue_count(false));
        let queue = args.opt_u64("queue", 0)?;
        let queues = args.opt_u64("queues", 1)?;
        if !(1..=16).contains(&queues) || queue + queues > have as u64 {
            return Err(bad(format!(
                "queue={queue},queues={queues}: {ifname} has {have} queue(s) (0..{have}); set them with ethtool -L, or numrxqueues/numtxqueues for veth"
            )));
        }
        let opts = Options {
            queue: queue as u32,
            queues: queues as u16,
            mode,
            zerocopy,
            need_wakeup: args.opt_bool("need_wakeup", true)?,
            busy_poll_us: busy_poll_us as u32,
            busy_budget: busy_budget as u32,
        };
        Ok(Box::new(KernelPort::new(
            args.raw(),
            dev,
            AfXdp {
                opts,
                socks: Vec::new(),
                prog: None,
            },
        )))
    }
}

struct AfXdp {
    opts: Options,
    socks: Vec<Arc<Socket>>,
    prog: Option<Arc<Attachment>>,
}

/// One socket: its fd and where it is bound; the rings belong to the
/// queue handles.
struct Socket {
    /// Declared first: dropped (closed) before `graveyard`, so the kernel
    /// has let go of the UMEM before the mbufs it held are freed.
    fd: OwnedFd,
    /// Mbufs still posted to the kernel when their queue handle went:
    /// freed only once the socket is closed (the kernel may write a fill
    /// buffer, or read a TX one, until then).
    graveyard: std::sync::Mutex<Vec<Posted>>,
    queue: u32,
    /// None only in unit tests, which play the kernel's side of the rings.
    prog: Option<Arc<Attachment>>,
    zerocopy: bool,
}

impl Socket {
    fn bury(&self, p: &mut Posted) {
        let p = std::mem::replace(p, Posted { slots: Vec::new() });
        self.graveyard
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(p);
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        // The kernel also drops the entry when the socket closes; clearing
        // it first stops redirects to a socket on its way out.
        if let Some(p) = &self.prog {
            p.remove(self.queue);
        }
    }
}

/// A socket's four rings before they are split between the handles.
struct RingSet {
    fill: XskRing,
    comp: XskRing,
    rx: XskRing,
    tx: XskRing,
}

impl Backend for AfXdp {
    fn driver(&self) -> &'static str {
        "af_xdp"
    }

    fn capabilities(&self, _: &Netdev) -> Capabilities {
        Capabilities {
            max_rx_queues: self.opts.queues,
            max_tx_queues: self.opts.queues,
            min_desc: 64,
            max_desc: 8192,
            desc_pow2: true,
            offloads: Offloads::TX_MULTI_SEGS,
            min_mtu: 68,
            max_mtu: 3500,
            rx_interrupts: true,
            needs_rx_pool: true,
        }
    }

    fn start(
        &mut self,
        port: &str,
        dev: &Netdev,
        conf: &PortConfig,
        stats: &StatsBlock,
        live: &Live,
    ) -> Result<Queues, Error> {
        let pool = rx_pool(port, conf)?;
        let chunk = pool.buf_len();
        let mtu = dev.mtu()?;
        if frame_len(mtu) + XDP_HEADROOM > chunk {
            return Err(Error::Config {
                port: port.into(),
                what: "MTU",
                detail: format!(
                    "{} has MTU {mtu}: a frame of {} bytes after the kernel's {XDP_HEADROOM}-byte XDP headroom does not fit the rx pool's {chunk}-byte mbuf buffers; lower the MTU (ip link set dev {} mtu {}) or use mbufs with a larger data room",
                    dev.name,
                    frame_len(mtu),
                    dev.name,
                    chunk.saturating_sub(XDP_HEADROOM + 18)
                ),
            });
        }
        let n = conf.rx_queues.max(conf.tx_queues) as u32;
        let entries = dev
            .queue_count(true)
            .max(dev.queue_count(false))
            .max(self.opts.queue + n);
        let prog = prog::attach(&dev.name, dev.ifindex, self.opts.mode, entries).map_err(|e| {
            Error::Port {
                port: port.into(),
                detail: e,
            }
        })?;
        let mut q = Queues {
            rx: Vec::new(),
            tx: Vec::new(),
        };
        let mut socks = Vec::new();
        for i in 0..n {
            let (sock, rings) = self.open_socket(port, dev, &pool, &prog, i, conf)?;
            let sock = Arc::new(sock);
            socks.push(sock.clone());
            let RingSet { fill, comp, rx, tx } = rings;
            if i < conf.rx_queues as u32 {
                let mut h = XdpRx::new(
                    sock.clone(),
                    fill,
                    rx,
                    pool.clone(),
                    live.clone(),
                    stats.rx(i as usize),
                    &self.opts,
                );
                h.refill();
                q.rx.push(Box::new(h));
            }
            if i < conf.tx_queues as u32 {
                q.tx.push(Box::new(XdpTx::new(
                    sock,
                    comp,
                    tx,
                    pool.clone(),
                    live.clone(),
                    stats.tx(i as usize),
                )));
            }
        }
        self.socks = socks;
        self.prog = Some(prog);
        Ok(q)
    }

    fn stop(&mut self, _: &Netdev) {
        self.socks.clear();
        self.prog = None;
    }

    fn xstats(&self, out: &mut Vec<Xstat>) {
        for (i, s) in self.socks.iter().enumerate() {
            if let Ok((st, _)) = sys::getsockopt::<libc::xdp_statistics>(
                s.fd.as_fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
            ) {
                for (name, v) in [
                    ("rx_dropped", st.rx_dropped),
                    ("rx_invalid_descs", st.rx_invalid_descs),
                    ("tx_invalid_descs", st.tx_invalid_descs),
                    ("rx_ring_full", st.rx_ring_full),
                    ("rx_fill_ring_empty_descs", st.rx_fill_ring_empty_descs),
                    ("tx_ring_empty_descs", st.tx_ring_empty_descs),
                ] {
                    out.push(Xstat {
                        name: format!("xdp_q{i}_{name}"),
                        value: v,
                    });
                }
            }
            out.push(Xstat {
                name: format!("xdp_q{i}_zerocopy"),
                value: s.zerocopy as u64,
            });
        }
        if let Some(p) = &self.prog {
            out.push(Xstat {
                name: "xdp_mode_native".into(),
                value: (p.mode == Mode::Native) as u64,
            });
        }
    }
}

impl AfXdp {
    /// Socket `i`: UMEM, rings, bind, map entry, busy-poll options.
    fn open_socket(
        &self,
        port: &str,
        dev: &Netdev,
        pool: &Mempool,
        prog: &Arc<Attachment>,
        i: u32,
        conf: &PortConfig,
    ) -> Result<(Socket, RingSet), Error> {
        let e = |what: &'static str| {
            move |err: std::io::Error| {
                let hint = match err.raw_os_error() {
                    Some(libc::EPERM) => {
                        " (AF_XDP needs CAP_NET_RAW and CAP_NET_ADMIN: run as root)"
                    }
                    Some(libc::EAFNOSUPPORT) => {
                        " (this kernel has no AF_XDP: CONFIG_XDP_SOCKETS; use af_packet)"
                    }
                    Some(libc::ENOMEM | libc::ENOBUFS) => {
                        " (the UMEM is pinned: raise ulimit -l, or run as root)"
                    }
                    _ => "",
                };
                driver(port, &format!("{what}{hint}"), err)
            }
        };
        let fd =
            sys::socket(libc::AF_XDP, libc::SOCK_RAW, 0).map_err(e("opening an AF_XDP socket"))?;
        let b = fd.as_fd();
        let region = pool.region();
        let reg = libc::xdp_umem_reg {
            addr: region.as_ptr() as u64,
            len: region.len() as u64,
            chunk_size: pool.buf_len() as u32,
            headroom: 0,
            flags: libc::XDP_UMEM_UNALIGNED_CHUNK_FLAG,
            tx_metadata_len: 0,
        };
        sys::setsockopt(b, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg).map_err(|err| {
            if err.raw_os_error() == Some(libc::EINVAL) {
                let what = format!(
                    "registering the mempool as UMEM (its {}-byte mbuf buffers are AF_XDP's chunks: the kernel takes 2048 to 4096 bytes, more only on hugepages)",
                    pool.buf_len()
                );
                return driver(port, &what, err);
            }
            e("registering the mempool as UMEM")(err)
        })?;
        let (rx_n, tx_n) = (conf.rx_desc as u32, conf.tx_desc as u32);
        for (opt, n, what) in [
            (libc::XDP_UMEM_FILL_RING, rx_n, "sizing the fill ring"),
            (
                libc::XDP_UMEM_COMPLETION_RING,
                tx_n,
                "sizing the completion ring",
            ),
            (libc::XDP_RX_RING, rx_n, "sizing the RX ring"),
            (libc::XDP_TX_RING, tx_n, "sizing the TX ring"),
        ] {
            sys::setsockopt(b, libc::SOL_XDP, opt, &n).map_err(e(what))?;
        }
        let (off, _) =
            sys::getsockopt::<libc::xdp_mmap_offsets>(b, libc::SOL_XDP, libc::XDP_MMAP_OFFSETS)
                .map_err(e("reading the ring offsets"))?;
        let map = |o: &libc::xdp_ring_offset,
                   n: u32,
                   entry: usize,
                   pgoff: u64,
                   producer: bool|
         -> Result<XskRing, Error> {
            let len = o.desc as usize + n as usize * entry;
            let m = Mapping::new(b, len, pgoff).map_err(e("mapping a ring"))?;
            XskRing::new(m, o, n, entry, producer).ok_or_else(|| Error::Port {
                port: port.into(),
                detail: "the kernel's ring offsets fall outside the ring mapping".into(),
            })
        };
        let rings = RingSet {
            fill: map(&off.fr, rx_n, 8, libc::XDP_UMEM_PGOFF_FILL_RING, true)?,
            comp: map(
                &off.cr,
                tx_n,
                8,
                libc::XDP_UMEM_PGOFF_COMPLETION_RING,
                false,
            )?,
            rx: map(&off.rx, rx_n, 16, libc::XDP_PGOFF_RX_RING as u64, false)?,
            tx: map(&off.tx, tx_n, 16, libc::XDP_PGOFF_TX_RING as u64, true)?,
        };
        let queue = self.opts.queue + i;
        let mut flags = 0u16;
        if self.opts.need_wakeup {
            flags |= libc::XDP_USE_NEED_WAKEUP;
        }
        match self.opts.zerocopy {
            Some(true) => flags |= libc::XDP_ZEROCOPY,
            Some(false) => flags |= libc::XDP_COPY,
            None => {}
        }
        let sxdp = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: flags,
            sxdp_ifindex: dev.ifindex,
            sxdp_queue_id: queue,
            sxdp_shared_umem_fd: 0,
        };
        bind_queue(b, &sxdp).map_err(|err| {
            if self.opts.zerocopy == Some(true) && matches!(err.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EINVAL)) {
                return driver(port, &format!("binding to {} queue {queue} in zero-copy mode ({} offers no AF_XDP zero-copy: use zerocopy=0)", dev.name, dev.name), err);
            }
            let hint = if err.raw_os_error() == Some(libc::EBUSY) { " (another AF_XDP socket holds that queue)" } else { "" };
            driver(port, &format!("binding to {} queue {queue}{hint}", dev.name), err)
        })?;
        let zerocopy = sys::getsockopt::<libc::xdp_options>(b, libc::SOL_XDP, libc::XDP_OPTIONS)
            .map(|(o, _)| o.flags & libc::XDP_OPTIONS_ZEROCOPY != 0)
            .unwrap_or(false);
        if self.opts.busy_poll_us > 0 {
            for (opt, v, what) in [
                (libc::SO_PREFER_BUSY_POLL, 1i32, "SO_PREFER_BUSY_POLL"),
                (
                    libc::SO_BUSY_POLL,
                    self.opts.busy_poll_us as i32,
                    "SO_BUSY_POLL",
                ),
                (
                    libc::SO_BUSY_POLL_BUDGET,
                    self.opts.busy_budget as i32,
                    "SO_BUSY_POLL_BUDGET",
                ),
            ] {
                sys::setsockopt(b, libc::SOL_SOCKET, opt, &v).map_err(e(what))?;
            }
        }
        prog.insert(queue, sys::raw(&fd)).map_err(|d| Error::Port {
            port: port.into(),
            detail: d,
        })?;
        Ok((
            Socket {
                fd,
                graveyard: Default::default(),
                queue,
                prog: Some(prog.clone()),
                zerocopy,
            },
            rings,
        ))
    }
}

/// Binds an AF_XDP socket to its queue. A queue whose previous socket was
/// just closed stays taken until the kernel's deferred release of that
/// socket's buffer pool has run (a work item): EBUSY is retried for up to
/// a second before it is an error.
fn bind_queue(fd: BorrowedFd<'_>, sxdp: &libc::sockaddr_xdp) -> std::io::Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        match sys::bind(fd, sxdp) {
            Err(e)
                if e.raw_os_error() == Some(libc::EBUSY)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            r => return r,
        }
    }
}

/// Mbufs the kernel holds, by pool index.
struct Posted {
    slots: Vec<Option<Mbuf>>,
}

impl Posted {
    fn new(n: usize) -> Posted {
        Posted {
            slots: (0..n).map(|_| None).collect(),
        }
    }
}

#[repr(align(128))]
struct XdpRx {
    sock: Arc<Socket>,
    fill: XskRing,
    rx: XskRing,
    pool: Mempool,
    posted: Posted,
    spare: Pkts,
    live: Live,
    stats: Arc<CachePadded<QueueStats>>,
    busy_poll: bool,
}

impl XdpRx {
    fn new(
        sock: Arc<Socket>,
        fill: XskRing,
        rx: XskRing,
        pool: Mempool,
        live: Live,
        stats: Arc<CachePadded<QueueStats>>,
        o: &Options,
    ) -> XdpRx {
        let posted = Posted::new(pool.size());
        XdpRx {
            sock,
            fill,
            rx,
            pool,
            posted,
            spare: Pkts::new(),
            live,
            stats,
            busy_poll: o.busy_poll_us > 0,
        }
    }

    /// Posts free mbufs to the fill ring, 32 at a time, while it has room
    /// for a whole batch.
    fn refill(&mut self) {
        const BATCH: u32 = 32;
        while self.fill.free(BATCH) >= BATCH {
            let short = BATCH as usize - self.spare.len().min(BATCH as usize);
            if short > 0 && self.pool.get_bulk(&mut self.spare, short).is_err() {
                self.stats.nombuf.add(1);
                break;
            }
            let mut k = 0;
            while k < BATCH {
                let Some(m) = self.spare.pop() else { break };
                // Always ours: the spares come from the UMEM pool.
                let Some((off, slot)) = self
                    .pool
                    .buffer_offset(&m)
                    .and_then(|o| Some((o, self.pool.buffer_at(o)?)))
                else {
                    break;
                };
                self.fill.put_addr(k, off as u64);
                self.posted.slots[slot.index] = Some(m);
                k += 1;
            }
            self.fill.submit(k);
            if k < BATCH {
                break;
            }
        }
    }

    /// The posted mbuf holding a frame the kernel reported, with its data
    /// set; None (counted) for an address or length that names none.
    fn take(&mut self, addr: u64, len: u32) -> Option<Mbuf> {
        let base = addr & libc::XSK_UNALIGNED_BUF_ADDR_MASK;
        let at = base.checked_add(addr >> libc::XSK_UNALIGNED_BUF_OFFSET_SHIFT)? as usize;
        let slot = self.pool.buffer_at(at)?;
        let mut m = self.posted.slots[slot.index].take()?;
        if m.set_received_at(at - slot.buf_offset, len as usize) && len >= 14 {
            Some(m)
        } else {
            // In range but cut short or empty: the buffer comes back free.
            drop(m);
            None
        }
    }
}

impl Drop for XdpRx {
    fn drop(&mut self) {
        self.sock.bury(&mut self.posted);
    }
}

impl RxQueue for XdpRx {
    fn rx_burst(&mut self, out: &mut Pkts, max: usize) -> usize {
        let room = max.min(out.capacity() - out.len()) as u32;
        if room == 0 || !self.live.load(Ordering::Relaxed) {
            return 0;
        }
        let n = self.rx.ready(room);
        if n == 0 {
            if self.busy_poll || self.fill.needs_wakeup() {
                sys::kick_recv(self.sock.fd.as_fd());
            }
            return 0;
        }
        let (mut got, mut bytes, mut bad) = (0usize, 0u64, 0u64);
        for i in 0..n {
            let (addr, len) = self.rx.desc(i);
            match self.take(addr, len) {
                Some(m) => {
                    bytes += len as u64;
                    out.push(m).ok();
                    got += 1;
                }
                None => bad += 1,
            }
        }
        self.rx.release(n);
        self.refill();
        if self.busy_poll {
            sys::kick_recv(self.sock.fd.as_fd());
        }
        self.stats.packets.add(got as u64);
        self.stats.bytes.add(bytes);
        if bad > 0 {
            self.stats.errors.add(bad);
            self.stats.device_errors.add(bad);
        }
        got
    }

    fn interrupt_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.sock.fd.as_fd())
    }

    fn set_interrupt(&mut self, _enabled: bool) -> Result<(), Error> {
        Ok(())
    }

    fn has_work(&self) -> bool {
        self.rx.has_entries()
    }
}

#[repr(align(128))]
struct XdpTx {
    sock: Arc<Socket>,
    comp: XskRing,
    tx: XskRing,
    pool: Mempool,
    posted: Posted,
    live: Live,
    stats: Arc<CachePadded<QueueStats>>,
}

impl XdpTx {
    fn new(
        sock: Arc<Socket>,
        comp: XskRing,
        tx: XskRing,
        pool: Mempool,
        live: Live,
        stats: Arc<CachePadded<QueueStats>>,
    ) -> XdpTx {
        let posted = Posted::new(pool.size());
        XdpTx {
            sock,
            comp,
            tx,
            pool,
            posted,
            live,
            stats,
        }
    }

    /// Frees what the kernel has sent.
    fn reap(&mut self) {
        let n = self.comp.ready(u32::MAX);
        let mut bad = 0;
        for i in 0..n {
            let addr = self.comp.addr(i) as usize;
            match self
                .pool
                .buffer_at(addr)
                .and_then(|s| self.posted.slots[s.index].take())
            {
                Some(m) => drop(m),
                None => bad += 1,
            }
        }
        if n > 0 {
            self.comp.release(n);
            self.stats.retired.add((n - bad) as u64);
        }
        if bad > 0 {
            self.stats.device_errors.add(bad as u64);
        }
    }

    /// An mbuf of our UMEM pool holding `m`'s frame: `m` itself, or a
    /// copy (another pool's mbuf, or a chain).
    fn in_umem(&self, m: Mbuf) -> Option<Mbuf> {
        if m.nb_segs() == 1 && self.pool.buffer_offset(&m).is_some() {
            return Some(m);
        }
        let mut c = self.pool.get().ok()?;
        let buf = c.append(m.pkt_len())?;
        let mut at = 0;
        for s in m.segments() {
            buf[at..at + s.len()].copy_from_slice(s);
            at += s.len();
        }
        Some(c)
    }
}

impl Drop for XdpTx {
    fn drop(&mut self) {
        self.sock.bury(&mut self.posted);
    }
}

impl TxQueue for XdpTx {
    fn tx_burst(&mut self, pkts: &mut Pkts) -> usize {
        if pkts.is_empty() || !self.live.load(Ordering::Relaxed) {
            return 0;
        }
        self.reap();
        let want = pkts.len() as u32;
        let free = self.tx.free(want).min(want);
        let (mut k, mut bytes, mut errors) = (0u32, 0u64, 0u64);
        for _ in 0..free {
            let Some(m) = pkts.pop() else { break };
            let Some(m) = self.in_umem(m) else {
                errors += 1;
                continue;
            };
            let Some((off, slot)) = self
                .pool
                .buffer_offset(&m)
                .and_then(|o| Some((o, self.pool.buffer_at(o)?)))
            else {
                errors += 1;
                continue;
            };
            let len = m.data_len();
            self.tx.put_desc(k, (off + m.headroom()) as u64, len as u32);
            self.posted.slots[slot.index] = Some(m);
            bytes += len as u64;
            k += 1;
        }
        if k > 0 {
            self.tx.submit(k);
            if self.tx.needs_wakeup() || !self.sock.zerocopy {
                let _ = sys::kick_send(self.sock.fd.as_fd());
            }
        }
        self.stats.packets.add(k as u64);
        self.stats.bytes.add(bytes);
        if errors > 0 {
            self.stats.errors.add(errors);
        }
        if !pkts.is_empty() {
            self.stats.full.add(1);
        }
        (k as u64 + errors) as usize
    }

    fn in_flight(&mut self) -> usize {
        self.reap();
        self.posted.slots.iter().filter(|s| s.is_some()).count()
    }
}

#[cfg(test)]
mod tests;
