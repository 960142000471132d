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
mod socket;

use crate::netdev::{check_ifname, Netdev};
use crate::port::{frame_len, kernel_port, rx_pool, Backend, Live, KERNEL_FEATURES};
use crate::sys;
use crossbeam_utils::CachePadded;
use prog::{Attachment, Mode};
use ring::{XdpDesc, XskRing};
use rpmd_pmd::port::features::Declared;
use rpmd_pmd::port::stats::QueueStats;
use rpmd_pmd::port::{
    Capabilities, DevArgs, Driver, Offloads, Pkts, Port, PortConfig, Queues, RxQueue, RxStamp,
    TxQueue, Xstat,
};
use rpmd_pmd::{BufferSlot, DmaDomain, Error, Mbuf, Mempool};
use socket::{RingSet, Socket};
use std::os::fd::{AsFd, BorrowedFd};
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
    fn features(&self) -> &'static [Declared] {
        KERNEL_FEATURES
    }

    fn kind(&self) -> &'static str {
        "af_xdp"
    }

    fn usage(&self) -> &'static str {
        "af_xdp:IFNAME[,queue=Q][,queues=N][,mode=native|skb][,zerocopy=0|1][,need_wakeup=0|1][,busy_poll_us=U][,busy_budget=B]  AF_XDP sockets on a kernel interface"
    }

    fn check(&self, args: &DevArgs) -> Result<(), Error> {
        options(args).map(drop)
    }

    fn open(&self, args: &DevArgs, _: &DmaDomain) -> Result<Box<dyn Port>, Error> {
        let (ifname, opts) = options(args)?;
        let dev = Netdev::open(args.raw(), &ifname)?;
        let have = dev.queue_count(true).max(dev.queue_count(false)) as u64;
        let (queue, queues) = (opts.queue as u64, opts.queues as u64);
        if queue + queues > have {
            return Err(Error::Config {
                port: args.raw().into(),
                what: "device options",
                detail: format!(
                    "queue={queue},queues={queues}: {ifname} has {have} queue(s) (0..{have}); set them with ethtool -L, or numrxqueues/numtxqueues for veth"
                ),
            });
        }
        Ok(Box::new(kernel_port(
            args,
            dev,
            AfXdp {
                opts,
                socks: Vec::new(),
                prog: None,
                missed_closed: 0,
            },
        )))
    }
}

struct AfXdp {
    opts: Options,
    socks: Vec<Arc<Socket>>,
    prog: Option<Arc<Attachment>>,
    /// Frames the kernel dropped on sockets closed by earlier stops.
    missed_closed: u64,
}

impl AfXdp {
    /// Frames the kernel dropped on the open sockets: rx_dropped (which
    /// counts frames lost for want of a fill-ring buffer too;
    /// rx_fill_ring_empty_descs counts the same events) and rx_ring_full
    /// (not in it). DPDK's net_af_xdp reports rx_dropped as imissed.
    fn missed_live(&self) -> u64 {
        self.socks
            .iter()
            .filter_map(|s| {
                sys::getsockopt::<libc::xdp_statistics>(
                    s.fd.as_fd(),
                    libc::SOL_XDP,
                    libc::XDP_STATISTICS,
                )
                .ok()
            })
            .map(|(st, _)| st.rx_dropped + st.rx_ring_full)
            .sum()
    }
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
        dev: &Netdev,
        ctx: &rpmd_pmd::port::StartContext<'_>,
    ) -> Result<Queues, Error> {
        let (port, conf, stats, stamp) = (ctx.name, ctx.conf, ctx.stats, ctx.stamp);
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
        let mut q = Queues::default();
        let mut socks = Vec::new();
        for i in 0..n {
            let (sock, rings) = socket::open(
                port,
                dev,
                &pool,
                &prog,
                &self.opts,
                self.opts.queue + i,
                conf,
            )?;
            let sock = Arc::new(sock);
            socks.push(sock.clone());
            let RingSet { fill, comp, rx, tx } = rings;
            if i < conf.rx_queues as u32 {
                let mut h = XdpRx::new(
                    sock.clone(),
                    fill,
                    rx,
                    pool.clone(),
                    ctx.rx_live[i as usize].clone(),
                    stats.rx(i as usize),
                    &self.opts,
                );
                h.stamp = stamp;
                h.refill();
                q.rx.push(Box::new(h));
            }
            if i < conf.tx_queues as u32 {
                q.tx.push(Box::new(XdpTx::new(
                    sock,
                    comp,
                    tx,
                    pool.clone(),
                    ctx.tx_live[i as usize].clone(),
                    stats.tx(i as usize),
                )));
            }
        }
        self.socks = socks;
        self.prog = Some(prog);
        Ok(q)
    }

    fn stop(&mut self, _: &Netdev) {
        // The sockets' drops are kept before the sockets go.
        self.missed_closed += self.missed_live();
        self.socks.clear();
        self.prog = None;
    }

    fn missed(&self, _: &Netdev) -> u64 {
        self.missed_closed + self.missed_live()
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

/// The interface name and options `args` asks for (the queues are
/// checked against the interface's when it is opened).
fn options(args: &DevArgs) -> Result<(String, Options), Error> {
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
    check_ifname(args.raw(), &ifname)?;
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
        return Err(bad(format!(
            "busy_poll_us={busy_poll_us} (at most 1000000), busy_budget={busy_budget} (1..=1024)"
        )));
    }
    let queue = args.opt_u64("queue", 0)?;
    let queues = args.opt_u64("queues", 1)?;
    if !(1..=16).contains(&queues) || queue > u16::MAX as u64 {
        return Err(bad(format!(
            "queue={queue},queues={queues}: queues 1..=16, from a queue the interface has"
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
    Ok((ifname, opts))
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

    /// Records `m` (of `pool`) as handed to the kernel; its UMEM address,
    /// or `m` back if it is not one of the pool's.
    fn post(&mut self, pool: &Mempool, m: Mbuf) -> Result<u64, Mbuf> {
        // Always ours in the port: the spares come from the UMEM pool.
        let Some(slot) = pool.slot_of(&m) else {
            return Err(m);
        };
        self.slots[slot.index] = Some(m);
        Ok(slot.buf_offset as u64)
    }

    /// The posted mbuf holding a frame an RX entry reported (`addr` in
    /// unaligned-chunk form: offset in the top 16 bits), with its data
    /// set; None for an address or length that names none (a buffer it
    /// names but whose length does not fit comes back free).
    fn take_rx(&mut self, pool: &Mempool, addr: u64, len: u32) -> Option<Mbuf> {
        let base = addr & libc::XSK_UNALIGNED_BUF_ADDR_MASK;
        let at = base.checked_add(addr >> libc::XSK_UNALIGNED_BUF_OFFSET_SHIFT)? as usize;
        let slot = pool.buffer_at(at)?;
        let mut m = self.slots[slot.index].take()?;
        if m.set_received_at(at - slot.buf_offset, len as usize) && len >= 14 {
            Some(m)
        } else {
            // In range but cut short or empty: the buffer comes back free.
            drop(m);
            None
        }
    }

    /// Frees the posted mbuf a completion entry names; false if it names
    /// none.
    fn complete(&mut self, pool: &Mempool, addr: u64) -> bool {
        let slot = usize::try_from(addr).ok().and_then(|a| pool.buffer_at(a));
        slot.and_then(|s| self.slots[s.index].take()).is_some()
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
    stamp: RxStamp,
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
            stamp: RxStamp::new(0, &PortConfig::default()),
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
                let Ok(addr) = self.posted.post(&self.pool, m) else {
                    break;
                };
                self.fill.put_addr(k, addr);
                k += 1;
            }
            self.fill.submit(k);
            if k < BATCH {
                break;
            }
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
            let XdpDesc { addr, len, .. } = self.rx.desc(i);
            match self.posted.take_rx(&self.pool, addr, len) {
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
        self.stamp.apply(out, got)
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
            if !self.posted.complete(&self.pool, self.comp.addr(i)) {
                bad += 1;
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

    /// An mbuf of our UMEM pool holding `m`'s frame, and where it sits:
    /// `m` itself, or a copy (another pool's mbuf, or a chain).
    fn in_umem(&self, m: Mbuf) -> Option<(Mbuf, BufferSlot)> {
        if m.nb_segs() == 1 {
            if let Some(slot) = self.pool.slot_of(&m) {
                return Some((m, slot));
            }
        }
        let mut c = self.pool.get().ok()?;
        let buf = c.append(m.pkt_len())?;
        let mut at = 0;
        for s in m.segments() {
            buf[at..at + s.len()].copy_from_slice(s);
            at += s.len();
        }
        let slot = self.pool.slot_of(&c)?;
        Some((c, slot))
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
            let Some((m, slot)) = self.in_umem(m) else {
                errors += 1;
                continue;
            };
            let len = m.data_len();
            let desc = XdpDesc {
                addr: (slot.buf_offset + m.headroom()) as u64,
                len: len as u32,
                options: 0,
            };
            self.tx.put_desc(k, desc);
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

/// Test support (fuzz target `xdp_entries`): the table of mbufs posted to
/// the kernel and the code that turns the kernel's RX and completion
/// entries back into them, without a socket: the port's own `Posted`.
pub mod testing {
    use super::Posted;
    use rpmd_pmd::{Mbuf, Mempool};

    /// Posted mbufs of one pool, as a queue holds them.
    pub struct XdpEntries {
        pool: Mempool,
        posted: Posted,
    }

    impl XdpEntries {
        /// An empty table for `pool` (the UMEM).
        pub fn new(pool: &Mempool) -> XdpEntries {
            XdpEntries {
                pool: pool.clone(),
                posted: Posted::new(pool.size()),
            }
        }

        /// Posts a free mbuf of the pool, as a fill or TX entry would;
        /// its UMEM address, or None when the pool is empty.
        pub fn post(&mut self) -> Option<u64> {
            let m = self.pool.get().ok()?;
            self.posted.post(&self.pool, m).ok()
        }

        /// What an RX entry `(addr, len)` gives: the posted mbuf with the
        /// frame, or None (a bad entry, counted by the port).
        pub fn rx_entry(&mut self, addr: u64, len: u32) -> Option<Mbuf> {
            self.posted.take_rx(&self.pool, addr, len)
        }

        /// Whether a completion entry `addr` named a posted mbuf (freed).
        pub fn completion(&mut self, addr: u64) -> bool {
            self.posted.complete(&self.pool, addr)
        }
    }
}
