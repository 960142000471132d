//! The virtio-net data path, shared by the transports (virtio-user and
//! PCI): one RX and one TX split virtqueue per queue pair, refilled and
//! reclaimed in bursts. Only the doorbell differs: an eventfd write for
//! vhost-user, an MMIO write for PCI.
type PmdError = rpmd_pmd::Error;
use crate::consts::{CSUM_OFFSET_TCP, CSUM_OFFSET_UDP, NET_HDR_F_NEEDS_CSUM, NET_HDR_LEN};
pub(crate) use crate::driver::ring::Ring;
use crate::driver::split::{SplitQueue, Tokens, MAX_CHAIN};
use crate::fd::CallFd;
use crate::vring::NetHdr;
use crossbeam_utils::CachePadded;
use rpmd_pmd::domain::Reach;
use rpmd_pmd::endian::Le16;
use rpmd_pmd::function::Regs;
use rpmd_pmd::hdr::ETHER_HDR_LEN;
use rpmd_pmd::port::stats::QueueStats;
use rpmd_pmd::port::stats::StatsBlock;
use rpmd_pmd::port::{Pkts, Queues, RxQueue, RxStamp, TxQueue};
use rpmd_pmd::{mbuf, DmaRegion, Mbuf, Mempool};
use rpmd_ring::Burst;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{
    AtomicU8,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::{Arc, Mutex};
use vmm_sys_util::eventfd::EventFd;

/// How the driver tells the device that a queue has new buffers.
pub(crate) enum Kick {
    /// vhost-user: the queue's kick eventfd.
    Event(EventFd),
    /// PCI: the queue's index written to its notify address (§4.1.4.4).
    Mmio {
        regs: Arc<Regs>,
        off: u64,
        index: u16,
    },
    /// Legacy PCI: the queue's index written, 16 bits, to the I/O BAR's
    /// notify register (§4.1.4.8).
    Io16 {
        regs: Arc<Regs>,
        off: u64,
        index: u16,
    },
}

impl Kick {
    #[inline]
    pub(crate) fn kick(&self) {
        match self {
            Kick::Event(e) => {
                let _ = e.write(1);
            }
            // The index is written as 32 bits: QEMU decodes the queue from
            // the address, and every device accepts the write.
            Kick::Mmio { regs, off, index } => {
                let _ = regs.write32(*off, *index as u32);
            }
            Kick::Io16 { regs, off, index } => {
                let _ = regs.write16(*off, *index);
            }
        }
    }
}

/// What a queue handle shares with its port: a request to start its ring
/// over, and, once the handle is dropped, the mbufs its ring still had in
/// flight.
///
/// A restart is asked by virtio-user's reconnection watch before it
/// programs a new backend (packed rings, whose position a new backend
/// cannot be told, and every ring after a queue stopped trusting the
/// backend); the queue obliges at its next burst. A handle dropped while
/// the port runs parks its mbufs here instead of freeing them, since the
/// device may still write them: they go back to their pool when the port
/// stops (after the device stopped its rings), or when the watch restarts
/// the ring itself after the old backend is gone.
#[derive(Default)]
pub(crate) struct QueueHome {
    restart: AtomicU8,
    parked: Mutex<Parked>,
}

#[derive(Default)]
struct Parked {
    /// The handle was dropped.
    dropped: bool,
    /// Its ring's mbufs, until released.
    tokens: Option<Tokens>,
    /// The port stopped: a handle dropped now frees its mbufs at once.
    closed: bool,
}

impl QueueHome {
    const ASKED: u8 = 1;
    const DONE: u8 = 2;

    /// Asks for a restart (the watch, once the old backend is gone).
    pub(crate) fn ask(&self) {
        self.restart.store(Self::ASKED, Release);
    }

    /// Whether the queue has started over since it was asked, or has no
    /// handle to do it (the caller then restarts the ring itself).
    pub(crate) fn settled(&self) -> bool {
        self.restart.load(Acquire) == Self::DONE || self.handle_dropped()
    }

    /// Whether the queue's handle was dropped.
    pub(crate) fn handle_dropped(&self) -> bool {
        self.lock().dropped
    }

    /// The mbufs a dropped handle left, for the caller to release once no
    /// device uses its ring.
    pub(crate) fn take_parked(&self) -> Option<Tokens> {
        self.lock().tokens.take()
    }

    /// The port stopped, and the device with it: what is parked is
    /// returned for release, and a handle dropped from now on frees its
    /// mbufs at once.
    pub(crate) fn close(&self) -> Option<Tokens> {
        let mut p = self.lock();
        p.closed = true;
        p.tokens.take()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Parked> {
        self.parked.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The handle's drop: parks `t`, or frees it if the port stopped.
    fn park(&self, t: Tokens) {
        let mut p = self.lock();
        p.dropped = true;
        if !p.closed {
            p.tokens = Some(t);
        }
    }

    #[inline(always)]
    fn asked(&self) -> bool {
        self.restart.load(Relaxed) == Self::ASKED
    }

    /// Restarts `q` if asked; returns how many buffers were dropped.
    #[cold]
    fn serve<Q: Ring>(&self, q: &mut Q, stats: &QueueStats) -> usize {
        // Acquire: pairs with `ask`, made after the old backend hung up.
        if self.restart.load(Acquire) != Self::ASKED {
            return 0;
        }
        let n = q.restart();
        q.set_interrupts(false);
        stats.stopped.store(false, Relaxed);
        // Release: the ring's new state before the watch programs a
        // backend that reads it.
        self.restart.store(Self::DONE, Release);
        n
    }
}

pub(crate) struct VirtioRx<Q: Ring = SplitQueue> {
    pub(crate) q: Q,
    /// The backend writes it on completions while interrupts are armed
    /// (`None`: no rx interrupts).
    pub(crate) call: Option<CallFd>,
    pub(crate) mrg: bool,
    /// GUEST_CSUM negotiated: header checksum flags become mbuf flags.
    pub(crate) csum: bool,
    /// Each buffer is posted a header's length before its data start (see
    /// [`fresh_rx_slot`]); false only for a pool whose headroom is shorter than
    /// a header: its buffers are posted from their data start and every
    /// frame takes the general path.
    pub(crate) hdr_front: bool,
    pub(crate) pool: Mempool,
    pub(crate) kick: Kick,
    pub(crate) live: rpmd_pmd::port::LiveFlag,
    pub(crate) stats: Arc<CachePadded<QueueStats>>,
    pub(crate) _rings: Arc<DmaRegion>,
    pub(crate) refill: Burst<rpmd_pmd::Mbuf, 64>,
    pub(crate) stamp: RxStamp,
    /// Shared with the port (virtio-user's reconnection watch asks for
    /// restarts through it); the ring's mbufs wait there once the handle
    /// is dropped.
    pub(crate) home: Arc<QueueHome>,
}

pub(crate) struct VirtioTx<Q: Ring = SplitQueue> {
    pub(crate) q: Q,
    /// CSUM negotiated: mbuf checksum requests go into the header.
    pub(crate) csum: bool,
    pub(crate) pool: Mempool,
    pub(crate) done: Burst<rpmd_pmd::Mbuf, 64>,
    pub(crate) kick: Kick,
    pub(crate) live: rpmd_pmd::port::LiveFlag,
    pub(crate) stats: Arc<CachePadded<QueueStats>>,
    /// The memory the device can reach (registered in the port's DMA
    /// domain, or sent in a vhost-user memory table): frames elsewhere
    /// are dropped and counted.
    pub(crate) reach: Reach,
    pub(crate) _rings: Arc<DmaRegion>,
    /// As in [`VirtioRx`].
    pub(crate) home: Arc<QueueHome>,
    /// Fault injection (virtio-user's `fault_desc_every`, with the
    /// `fault-injection` feature): every Nth single-buffer frame goes out
    /// with a descriptor address outside the memory the backend was
    /// given, which a backend must drop and count (benches/soak.sh).
    #[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
    pub(crate) fault_desc_every: u32,
    #[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
    pub(crate) fault_tick: u32,
}

impl<Q: Ring> VirtioTx<Q> {
    /// The descriptor address for a buffer at `addr`: `addr`, except the
    /// faults `fault_desc_every` asks for (far past any user address).
    #[inline(always)]
    fn desc_addr(&mut self, addr: u64) -> u64 {
        #[cfg(feature = "fault-injection")]
        if self.fault_desc_every != 0 {
            self.fault_tick = self.fault_tick.wrapping_add(1);
            if self.fault_tick % self.fault_desc_every == 0 {
                return addr ^ (1 << 62);
            }
        }
        addr
    }
}

impl<Q: Ring> RxQueue for VirtioRx<Q> {
    fn rx_burst(&mut self, out: &mut Pkts, max: usize) -> usize {
        // `receive` sets each frame's port.
        let n = self.receive(out, max);
        self.stamp.apply_types(out, n)
    }

    fn interrupt_fd(&self) -> Option<BorrowedFd<'_>> {
        self.call.as_ref().map(|c| c.as_fd())
    }

    fn set_interrupt(&mut self, enabled: bool) -> Result<(), PmdError> {
        self.arm(enabled);
        Ok(())
    }

    fn has_work(&self) -> bool {
        self.q.has_used()
    }
}

impl<Q: Ring> VirtioRx<Q> {
    /// What `rx_burst` receives, each frame's port set, before the
    /// packet types.
    #[inline(always)]
    fn receive(&mut self, out: &mut Pkts, max: usize) -> usize {
        if !self.live.load(Relaxed) {
            return 0;
        }
        if self.home.asked() {
            self.serve_home();
        }
        // Refill what the last call took first: received frames then go
        // to the caller without waiting for it, and on an idle poll the
        // refill is off every frame's path (`compare.sh virtio`, rxonly
        // and io rows; benches/RESULTS.md, findings).
        self.refill();
        let room = max.min(out.capacity() - out.len());
        let mut bytes = 0;
        let fast = !self.csum && self.hdr_front;
        let mut n = match fast {
            true => self.take_lines(out, room, &mut bytes),
            false => 0,
        };
        while n < room {
            let Some(r) = self.q.pop_used() else { break };
            let Ok((mut m, len)) = r else {
                device_error(&self.stats, &self.q, 1);
                continue;
            };
            let len = len as usize;
            // The common case: one buffer per frame, no header field to
            // read.
            if fast && (!self.mrg || len < m.tailroom() + NET_HDR_LEN) {
                if !received(&mut m, len) {
                    // A length past the buffer, or short of the headers.
                    device_error(&self.stats, &self.q, 1);
                    continue;
                }
                bytes += len - NET_HDR_LEN;
                m.set_port(self.stamp.port());
                let _ = out.push(m);
                n += 1;
                continue;
            }
            let Some(mut m) = self.whole_frame(m, len) else {
                device_error(&self.stats, &self.q, 1);
                continue;
            };
            bytes += m.pkt_len();
            m.set_port(self.stamp.port());
            let _ = out.push(m);
            n += 1;
        }
        self.stats.packets.add(n as u64);
        self.stats.bytes.add(bytes as u64);
        n
    }

    /// The posted buffers go back to the pool (the queue's home asked);
    /// the refill posts new ones. Frames the device had completed in
    /// them are dropped with them, and counted.
    #[cold]
    fn serve_home(&mut self) {
        let unread = self.q.completed_unread();
        if self.home.serve(&mut self.q, &self.stats) != 0 {
            self.stats.errors.add(unread as u64);
        }
    }

    /// One-buffer frames in bulk (`Ring::pop_used_lines`; no header
    /// field to read: with mergeable buffers, a frame shorter than its
    /// buffer is all in it), at most `room`, their bytes added to
    /// `bytes`; how many. The rest go one by one. Only for buffers
    /// posted in front of their data start (`hdr_front`).
    #[allow(unsafe_code)]
    #[inline(always)]
    fn take_lines(&mut self, out: &mut Pkts, room: usize, bytes: &mut usize) -> usize {
        // A header and at most the posted buffer's data room; with
        // mergeable buffers, not a full buffer, which may start a longer
        // frame.
        let full = (self.pool.data_room() + NET_HDR_LEN) as u32;
        let lens = (NET_HDR_LEN + ETHER_HDR_LEN) as u32..full + u32::from(!self.mrg);
        let port = self.stamp.port();
        let (got, refused) = self.q.pop_used_lines(out, room, lens, |m, len| {
            let len = len as usize - NET_HDR_LEN;
            m.set_port(port);
            // SAFETY: `m` was posted by `refill` (or `build_handles`)
            // fresh from `self.pool` and has not been touched since: one
            // segment, its data start at the pool's headroom, the header's
            // length behind the posted address. `len` is the frame after
            // that header, which `lens` keeps within the pool's data room.
            unsafe { m.set_received_unchecked(len) };
            *bytes += len;
            true
        });
        if refused > 0 {
            device_error(&self.stats, &self.q, refused);
        }
        got
    }

    /// The frame that starts in used buffer `m` of `len` bytes, header
    /// included, when its header must be read: its further buffers
    /// (mergeable, §5.1.6.4 num_buffers) chained on, its checksum flags
    /// applied. `None` (its mbufs back to the pool) for a frame the
    /// device announced but did not deliver whole or got wrong.
    #[inline]
    fn whole_frame(&mut self, mut m: Mbuf, len: usize) -> Option<Mbuf> {
        // The device fills a buffer before it spills into the next, so
        // only a full buffer can start a multi-buffer frame; shorter ones
        // need not be read here (the frame bytes are cold in this core's
        // cache).
        let front = hdr_room(self.hdr_front);
        let full = len >= m.tailroom() + front;
        // The buffer was posted `front` bytes before the data start.
        if len < NET_HDR_LEN + ETHER_HDR_LEN || m.prepend(front).is_none() || !m.set_data_len(len) {
            return None;
        }
        let nbufs = if self.mrg && full {
            NetHdr::num_buffers_in(m.data()).max(1)
        } else {
            1
        };
        // §5.1.6.4: NEEDS_CSUM: intact data, partial checksum;
        // DATA_VALID: checked by the device.
        let h = match self.csum {
            true => NetHdr::from_bytes(m.data()),
            false => NetHdr::default(),
        };
        let _ = m.adj(NET_HDR_LEN);
        let mut ok = true;
        for _ in 1..nbufs {
            match self.q.pop_used() {
                Some(Ok((mut seg, l))) => {
                    // A further buffer holds frame bytes from its start.
                    let placed = seg.prepend(front).is_some() && seg.set_data_len(l as usize);
                    if !placed || m.chain(seg).is_err() {
                        ok = false;
                    }
                }
                _ => ok = false,
            }
        }
        // GUEST_CSUM is asked for only with the RX checksum offload, so
        // partial checksums stay partial.
        let offloaded = ok && (h.flags == 0 || crate::offload::rx(&mut m, &h, true).is_ok());
        offloaded.then_some(m)
    }
}

impl<Q: Ring> VirtioRx<Q> {
    /// Posts fresh buffers in every free slot (in bulk from the pool).
    #[inline]
    fn refill(&mut self) {
        let want = self.q.free().min(self.refill.capacity());
        if want == 0 {
            return;
        }
        if self.pool.get_bulk(&mut self.refill, want).is_err() {
            self.stats.nombuf.add(1);
        }
        let n = self.refill.len();
        // Fresh from the pool, every buffer has the pool's headroom and
        // data room, so only its address is read. Two instances, so that
        // the header's length is a constant in the common one.
        let (headroom, room) = (self.pool.headroom(), self.pool.data_room());
        let posted = match self.hdr_front {
            true => self.q.push_run(&mut self.refill, n, true, |m| {
                Some(fresh_rx_slot(m, headroom, room, hdr_room(true)))
            }),
            false => self.q.push_run(&mut self.refill, n, true, |m| {
                Some(fresh_rx_slot(m, headroom, room, hdr_room(false)))
            }),
        };
        if posted > 0 && self.q.publish() {
            self.kick.kick();
        }
    }

    /// Arms or disarms rx interrupts (the run loop's sleep).
    fn arm(&mut self, on: bool) {
        if on {
            // Nothing waits for the next rx_burst while asleep: every
            // slot the device can fill is posted before the wait.
            self.refill();
        }
        self.q.set_interrupts(on);
        if let (false, Some(c)) = (on, &self.call) {
            // Clear what the device signalled, so the next sleep waits.
            c.clear();
        }
    }
}

impl<Q: Ring> Drop for VirtioRx<Q> {
    fn drop(&mut self) {
        // The device may still write the posted buffers: they wait in the
        // home until it has stopped.
        self.home.park(self.q.take_tokens());
    }
}

impl<Q: Ring> Drop for VirtioTx<Q> {
    fn drop(&mut self) {
        self.home.park(self.q.take_tokens());
    }
}

impl<Q: Ring> VirtioTx<Q> {
    /// Starts the ring over if the watch asked; frames the old backend
    /// never finished are lost (errors, and no longer in flight).
    #[inline(always)]
    fn serve_restart(&mut self) {
        if self.home.asked() {
            let n = self.home.serve(&mut self.q, &self.stats);
            self.stats.errors.add(n as u64);
            self.stats.retired.add(n as u64);
        }
    }

    /// Takes back what the device has sent, returning it to the pool in
    /// bulk.
    #[inline]
    fn reclaim(&mut self) {
        loop {
            let bad = self.q.reclaim_into(&mut self.done);
            if bad > 0 {
                device_error(&self.stats, &self.q, bad);
            }
            if self.done.is_empty() {
                break;
            }
            self.stats.retired.add(self.done.len() as u64);
            let full = self.done.is_full();
            self.pool.put_bulk(&mut self.done);
            if !full {
                break;
            }
        }
    }
}

impl<Q: Ring> VirtioTx<Q> {
    /// Whether plain frames may take the run path: no checksum offload
    /// asked of the device, no faults injected.
    #[inline(always)]
    fn plain_frames_fast(&self) -> bool {
        #[cfg(feature = "fault-injection")]
        if self.fault_desc_every != 0 {
            return false;
        }
        !self.csum
    }

    /// Queues the leading one-segment frames of `pkts` (at most `room`)
    /// as one run of descriptors, unpublished, header first: each gets
    /// its zeroed virtio-net header in the headroom just before its data
    /// (the mbuf still describes the frame alone, as DPDK's driver leaves
    /// it) and is checked reachable by the device, header included, as
    /// its descriptor is written. Stops at the first frame that needs the
    /// one-by-one path, which stays first in `pkts`. How many, and their
    /// bytes (without headers).
    #[inline(always)]
    fn send_plain_run(&mut self, pkts: &mut Pkts, room: usize) -> (usize, usize) {
        let mut bytes = 0;
        let reach = &mut self.reach;
        // Tested from a local copy first: the descriptor stores could
        // alias the queue's own copy, which would then be loaded again
        // for every frame.
        let (start, end) = reach.first_span();
        let sent = self.q.push_run(pkts, room, false, |m| {
            let len = m.data_len();
            if m.nb_segs() != 1 {
                return None;
            }
            let h = m.before_data_mut(NET_HDR_LEN)?;
            clear_header(h);
            // Bytes of one buffer: the sum cannot wrap.
            let a = h.as_ptr() as u64;
            let in_first = start <= a && a + (NET_HDR_LEN + len) as u64 <= end;
            if !in_first && !reach.holds_at(h.as_ptr(), NET_HDR_LEN + len) {
                return None;
            }
            bytes += len;
            let hdr = NET_HDR_LEN as u64;
            Some((m.data_iova().raw() - hdr, (len + NET_HDR_LEN) as u32))
        });
        (sent, bytes)
    }
}

impl<Q: Ring> TxQueue for VirtioTx<Q> {
    fn in_flight(&mut self) -> usize {
        if !self.live.load(Relaxed) {
            return 0;
        }
        self.serve_restart();
        self.reclaim();
        self.q.size() as usize - self.q.free()
    }

    fn tx_burst(&mut self, pkts: &mut Pkts) -> usize {
        if !self.live.load(Relaxed) {
            return 0;
        }
        self.serve_restart();
        self.reclaim();
        self.reach.sync();
        let mut n = 0;
        let mut bytes = 0;
        // Descriptors free now: one per single-segment frame.
        let mut room = self.q.free();
        // The header goes in each frame's headroom, and clearing it reads
        // it. A frame just received from the device (io forwarding) has
        // that line in the device's core: start all the loads now, so the
        // misses overlap instead of stalling the loop below one by one.
        let ahead = room.min(pkts.len());
        for m in &pkts[..ahead] {
            m.prefetch(-(NET_HDR_LEN as isize));
        }
        if self.plain_frames_fast() {
            (n, bytes) = self.send_plain_run(pkts, room);
            room -= n;
        }
        while room > 0 {
            let Some(mut m) = pkts.pop() else { break };
            let len = m.pkt_len();
            let segs = m.nb_segs();
            let mut ok = segs <= MAX_CHAIN && m.prepend(NET_HDR_LEN).map(clear_header).is_some();
            if ok && self.csum && m.ol_flags() & (mbuf::TX_L4_MASK | mbuf::TX_IP_CKSUM) != 0 {
                ok = checksum_request(&mut m);
            }
            if segs == 1 {
                if !ok || !self.reach.holds(m.data()) {
                    // Not reachable by the backend, no room for the
                    // header, or a checksum request it cannot carry: dropped
                    // (it returns to its pool) and counted.
                    self.stats.errors.add(1);
                    continue;
                }
                let (addr, dl) = (self.desc_addr(m.data_iova().raw()), m.data_len() as u32);
                if let Err(m) = self.q.push(m, addr, dl, false) {
                    // The ring took nothing (it broke): the frame stays
                    // with the caller, as it was.
                    give_back(pkts, m);
                    break;
                }
                room -= 1;
            } else {
                let mut segs = [(0u64, 0u32); MAX_CHAIN];
                let mut k = 0;
                let mut reachable = ok;
                for ((iova, l), seg) in m.segment_iovas().zip(m.segments()).take(MAX_CHAIN) {
                    reachable &= self.reach.holds(seg);
                    segs[k] = (iova.raw(), l as u32);
                    k += 1;
                }
                if !reachable {
                    self.stats.errors.add(1);
                    continue;
                }
                if let Err(m) = self.q.push_chain(m, &segs[..k], k) {
                    // Not enough descriptors now: the frame stays with the
                    // caller, first in line, as it was.
                    give_back(pkts, m);
                    self.stats.full.add(1);
                    break;
                }
                room = self.q.free();
            }
            n += 1;
            bytes += len;
        }
        if self.q.free() == 0 {
            self.stats.full.add(1);
        }
        if n > 0 && self.q.publish() {
            self.kick.kick();
        }
        self.stats.packets.add(n as u64);
        self.stats.bytes.add(bytes as u64);
        n
    }
}

/// What a port's queue handles share; both transports build their
/// handles through [`build_handles`].
pub(crate) struct Handles<'a> {
    pub(crate) pool: &'a Mempool,
    pub(crate) rings: &'a Arc<DmaRegion>,
    /// Each queue's live flag (the layer's, per queue).
    pub(crate) rx_live: &'a [rpmd_pmd::port::LiveFlag],
    pub(crate) tx_live: &'a [rpmd_pmd::port::LiveFlag],
    pub(crate) stats: &'a StatsBlock,
    /// Makes each TX queue's view of the memory the device can reach.
    pub(crate) reach: &'a dyn Fn() -> Reach,
    /// Negotiated features (mergeable buffers, checksums).
    pub(crate) features: u64,
    /// Handles wanted: RX of pairs below `rx_queues`, TX below `tx_queues`.
    pub(crate) rx_queues: usize,
    pub(crate) tx_queues: usize,
    /// Port id and packet types for received mbufs.
    pub(crate) stamp: RxStamp,
    /// See [`VirtioTx::fault_desc_every`] (0: off; virtio-user only).
    pub(crate) fault_desc_every: u32,
}

/// One handle per wanted queue of `queues` (RX of pair p at 2p, TX at
/// 2p + 1, each with its doorbell): RX rings are filled with fresh
/// buffers and published first; an RX ring without a handle is left
/// empty, so that dropping it frees nothing the device could still write.
/// `call(p)` is pair p's rx interrupt, `home(k)` queue k's home.
pub(crate) fn build_handles<Q: Ring>(
    h: &Handles,
    queues: Vec<(Q, Kick)>,
    mut call: impl FnMut(usize) -> Option<CallFd>,
    mut home: impl FnMut(usize) -> Arc<QueueHome>,
) -> Result<Queues, PmdError> {
    use crate::consts::{VIRTIO_NET_F_CSUM, VIRTIO_NET_F_GUEST_CSUM, VIRTIO_NET_F_MRG_RXBUF};
    let (mut rx, mut tx) = (Vec::new(), Vec::new());
    let mut b: Burst<Mbuf, 64> = Burst::new();
    let hdr_front = h.pool.headroom() >= NET_HDR_LEN;
    let front = hdr_room(hdr_front);
    let (headroom, room) = (h.pool.headroom(), h.pool.data_room());
    for (k, (mut q, kick)) in queues.into_iter().enumerate() {
        let pair = k / 2;
        q.set_interrupts(false);
        if k % 2 == 0 && pair < h.rx_queues {
            while q.free() > 0 {
                h.pool.get_bulk(&mut b, q.free().min(64))?;
                while let Some(m) = b.pop() {
                    let (addr, len) = fresh_rx_slot(&m, headroom, room, front);
                    let _ = q.push(m, addr, len, true);
                }
            }
            if q.publish() {
                kick.kick();
            }
            rx.push(Box::new(VirtioRx {
                q,
                call: call(pair),
                mrg: h.features & VIRTIO_NET_F_MRG_RXBUF != 0,
                csum: h.features & VIRTIO_NET_F_GUEST_CSUM != 0,
                hdr_front,
                pool: h.pool.clone(),
                kick,
                live: h.rx_live[pair].clone(),
                stats: h.stats.rx(pair),
                _rings: h.rings.clone(),
                refill: Burst::new(),
                stamp: h.stamp,
                home: home(k),
            }) as Box<dyn RxQueue>);
        } else if k % 2 == 1 && pair < h.tx_queues {
            tx.push(Box::new(VirtioTx {
                q,
                csum: h.features & VIRTIO_NET_F_CSUM != 0,
                pool: h.pool.clone(),
                done: Burst::new(),
                kick,
                live: h.tx_live[pair].clone(),
                stats: h.stats.tx(pair),
                reach: (h.reach)(),
                _rings: h.rings.clone(),
                home: home(k),
                fault_desc_every: h.fault_desc_every,
                fault_tick: 0,
            }) as Box<dyn TxQueue>);
        }
    }
    Ok(Queues::new(rx, tx))
}

/// Where a receive buffer fresh from a pool of `headroom` and data `room`
/// is posted, and how long it is: from `front` bytes before its data
/// start (the header's length when it goes in the headroom) to its data
/// room's end. With the header in the headroom the device writes the
/// frame from the data start on, cache-line aligned, as DPDK posts its
/// buffers. Only the buffer's address is read: a fresh mbuf's data start
/// and tailroom are the pool's.
#[inline(always)]
fn fresh_rx_slot(m: &Mbuf, headroom: usize, room: usize, front: usize) -> (u64, u32) {
    (
        m.buf_iova().raw() + (headroom - front) as u64,
        (room + front) as u32,
    )
}

/// Bytes a buffer is posted before its data start: the header's length
/// when it goes in the headroom (`hdr_front`), else none.
#[inline(always)]
fn hdr_room(hdr_front: bool) -> usize {
    match hdr_front {
        true => NET_HDR_LEN,
        false => 0,
    }
}

/// Sets one-buffer frame `m` as received: the device wrote `len` bytes,
/// header first, from a header's length before its data start (see
/// [`fresh_rx_slot`]); false when `len` does not fit that.
#[inline(always)]
fn received(m: &mut Mbuf, len: usize) -> bool {
    len.checked_sub(NET_HDR_LEN)
        .is_some_and(|l| l >= ETHER_HDR_LEN && m.set_received(l, 0))
}

/// Counts `n` protocol violations of the device on a queue, and marks the
/// queue stopped when its ring no longer trusts the device.
#[cold]
fn device_error<Q: Ring>(stats: &QueueStats, q: &Q, n: usize) {
    stats.errors.add(n as u64);
    stats.device_errors.add(n as u64);
    if q.is_broken() {
        stats.stopped.store(true, Relaxed);
    }
}

/// Returns a frame `tx_burst` popped but could not queue to the front of
/// `pkts`, as it was: without the virtio-net header it was given.
#[cold]
fn give_back(pkts: &mut Pkts, mut m: Mbuf) {
    let _ = m.adj(NET_HDR_LEN);
    // The slot it came from is free, so this cannot fail.
    let _ = pkts.push_front(m);
}

/// Zeroes a TX header, writing only when it is not zero already (as
/// DPDK's driver does): a recycled mbuf's header usually is, and then its
/// cache line stays clean, so the device reads it without pulling it out
/// of this core's cache (`compare.sh virtio`, txonly rows;
/// benches/RESULTS.md, findings).
#[inline(always)]
fn clear_header(h: &mut [u8]) {
    // Two word loads (8 + 4 bytes), not a loop over the bytes.
    let (lo, hi) = h.split_at(h.len().min(8));
    let zero = <[u8; 8]>::try_from(lo).is_ok_and(|w| u64::from_ne_bytes(w) == 0)
        && <[u8; 4]>::try_from(hi).is_ok_and(|w| u32::from_ne_bytes(w) == 0);
    if !zero {
        h.fill(0);
    }
}

/// Turns the checksum requests of `m` (its header already prepended) into
/// header fields (§5.1.6.2): NEEDS_CSUM with `csum_start` at the L4 header
/// and `csum_offset` at its checksum field; the IPv4 header checksum,
/// which virtio cannot offload, computed here (as DPDK's driver does).
/// False for a request the frame cannot carry (lengths past its first
/// segment, SCTP).
#[cold]
fn checksum_request(m: &mut Mbuf) -> bool {
    let f = m.ol_flags();
    let (l2, l3) = m.tx_header_lens();
    let d = m.data_mut();
    let start = NET_HDR_LEN + l2 + l3;
    if l3 < 20 || start > d.len() {
        return false;
    }
    if f & mbuf::TX_IP_CKSUM != 0 {
        let ip = &mut d[NET_HDR_LEN + l2..start];
        let c = rpmd_pmd::net::ipv4_header_checksum(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
    }
    let off = match f & mbuf::TX_L4_MASK {
        0 => return true,
        mbuf::TX_TCP_CKSUM => CSUM_OFFSET_TCP,
        mbuf::TX_UDP_CKSUM => CSUM_OFFSET_UDP,
        _ => return false,
    };
    if start + off as usize + 2 > d.len() {
        return false;
    }
    // The header was cleared when it was prepended.
    let h = NetHdr {
        flags: NET_HDR_F_NEEDS_CSUM,
        csum_start: Le16::new((l2 + l3) as u16),
        csum_offset: Le16::new(off),
        ..NetHdr::default()
    };
    d[..NET_HDR_LEN].copy_from_slice(&h.to_bytes());
    true
}

/// The largest MTU a virtio-net port takes: mergeable buffers carry frames
/// over several mbufs; without them a frame and its header fit one.
pub(crate) fn max_mtu(want_mrg: bool, offered: u64) -> u16 {
    if want_mrg && offered & crate::consts::VIRTIO_NET_F_MRG_RXBUF != 0 {
        9600
    } else {
        2048 - 14 - NET_HDR_LEN as u16
    }
}

/// The configuration a start uses and its receive pool; an error naming
/// what is missing.
pub(crate) fn start_config(
    ctx: &rpmd_pmd::port::StartContext<'_>,
) -> Result<(rpmd_pmd::PortConfig, Mempool), PmdError> {
    let pool = ctx.conf.rx_pool.clone().ok_or_else(|| PmdError::Config {
        port: ctx.name.to_string(),
        what: "rx_pool",
        detail: "this port needs a mempool for receive buffers".into(),
    })?;
    Ok((ctx.conf.clone(), pool))
}

/// VIRTIO_F_RING_PACKED when `packed_vq=1` asks for it, an error naming
/// the offered features when the device lacks it (`how`: how to get it).
pub(crate) fn packed_feature(
    want: bool,
    offered: u64,
    port: &str,
    how: &str,
) -> Result<u64, PmdError> {
    use crate::consts::VIRTIO_F_RING_PACKED;
    if !want {
        return Ok(0);
    }
    if offered & VIRTIO_F_RING_PACKED == 0 {
        return Err(PmdError::Port {
            port: port.to_string(),
            detail: format!(
                "packed_vq=1, but the device offers no VIRTIO_F_RING_PACKED (features {offered:#x}){how}"
            ),
        });
    }
    Ok(VIRTIO_F_RING_PACKED)
}

/// The offloads a device offering `offered` supports: scatter and
/// multi-segment always; checksums with CSUM (TX) and GUEST_CSUM (RX).
pub(crate) fn offloads(offered: u64) -> rpmd_pmd::port::Offloads {
    use rpmd_pmd::port::Offloads;
    let mut o = Offloads::RX_SCATTER | Offloads::TX_MULTI_SEGS;
    if offered & crate::consts::VIRTIO_NET_F_CSUM != 0 {
        o = o | Offloads::TX_CHECKSUM;
    }
    if offered & crate::consts::VIRTIO_NET_F_GUEST_CSUM != 0 {
        o = o | Offloads::RX_CHECKSUM;
    }
    o
}

/// The checksum features to ask for: those of the offloads requested.
pub(crate) fn offload_features(requested: rpmd_pmd::port::Offloads) -> u64 {
    use rpmd_pmd::port::Offloads;
    let mut f = 0;
    if requested.contains(Offloads::TX_CHECKSUM) {
        f |= crate::consts::VIRTIO_NET_F_CSUM;
    }
    if requested.contains(Offloads::RX_CHECKSUM) {
        f |= crate::consts::VIRTIO_NET_F_GUEST_CSUM;
    }
    f
}

/// The per-queue counters plus, per tx queue, the frames the device has
/// not finished (`tx_qN_unfinished`: a queue the backend never serves
/// shows as frames posted and none completed), and the features offered
/// and negotiated.
pub(crate) fn feature_xstats(
    stats: &rpmd_pmd::port::stats::StatsBlock,
    offered: u64,
    features: u64,
    v: &mut Vec<rpmd_pmd::port::Xstat>,
) {
    for (i, q) in stats.tx_queues().iter().enumerate() {
        v.push(rpmd_pmd::port::Xstat {
            name: format!("tx_q{i}_unfinished"),
            value: q.packets.get().saturating_sub(q.retired.get()),
        });
    }
    for (name, value) in [
        ("offered_features", offered),
        ("negotiated_features", features),
    ] {
        v.push(rpmd_pmd::port::Xstat {
            name: name.into(),
            value,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::packed::PackedQueue;

    /// A header left over from receiving (num_buffers set) is zeroed; a
    /// zero one is left as it is.
    #[test]
    fn clear_header_zeroes_a_used_header() {
        let mut h = NetHdr {
            num_buffers: Le16::new(1),
            ..NetHdr::default()
        }
        .to_bytes();
        clear_header(&mut h);
        assert_eq!(h, [0; NET_HDR_LEN]);
        clear_header(&mut h);
        assert_eq!(h, [0; NET_HDR_LEN]);
    }

    /// A TX queue on a split ring of `size` in test memory; the pool's
    /// region is the shared one.
    fn tx_queue(name: &str, size: u16) -> (VirtioTx, Mempool, crate::driver::testdev::SplitDevice) {
        let (region, pool) = crate::driver::split::test_memory(name, 64);
        let l = crate::driver::split::Layout::new(size).unwrap();
        let q = SplitQueue::new(&region, 0, l).unwrap();
        let dev = crate::driver::testdev::SplitDevice::new(region.as_ptr(), l);
        (tx_handle(q, region, &pool), pool, dev)
    }

    /// A TX handle on `q`, with `pool`'s memory reachable by the device.
    fn tx_handle<Q: Ring>(q: Q, region: DmaRegion, pool: &Mempool) -> VirtioTx<Q> {
        let d = rpmd_pmd::DmaDomain::new();
        d.register_pool(pool).unwrap();
        VirtioTx {
            q,
            csum: false,
            pool: pool.clone(),
            done: Burst::new(),
            kick: Kick::Event(EventFd::new(libc::EFD_NONBLOCK).unwrap()),
            live: Arc::new(crossbeam_utils::CachePadded::new(
                std::sync::atomic::AtomicBool::new(true),
            )),
            stats: Arc::default(),
            reach: d.reach(None),
            _rings: Arc::new(region),
            home: Arc::default(),
            fault_desc_every: 0,
            fault_tick: 0,
        }
    }

    /// The run path on an in-order packed ring: plain frames go as one
    /// run, each with its header in its own slot; a frame the device
    /// cannot reach ends the run, is dropped and counted by the
    /// one-by-one path, and the frames behind it still go.
    #[test]
    fn a_run_of_plain_frames_stops_at_one_the_device_cannot_reach() {
        let (region, pool) = crate::driver::split::test_memory("ntr", 64);
        let (_other_region, foreign) = crate::driver::split::test_memory("ntr2", 4);
        let mut q = PackedQueue::new(
            &region,
            0,
            crate::driver::packed::PackedLayout::new(8).unwrap(),
        )
        .unwrap();
        q.set_in_order(true);
        let v = q.view();
        let mut tx = tx_handle(q, region, &pool);
        let mut pkts = Pkts::new();
        pkts.push(frame(&pool, 1, 1)).unwrap();
        pkts.push(frame(&pool, 2, 1)).unwrap();
        pkts.push(frame(&foreign, 9, 1)).unwrap();
        pkts.push(frame(&pool, 3, 1)).unwrap();
        let heads: Vec<u64> = pkts
            .iter()
            .map(|m| m.data_iova().raw() - NET_HDR_LEN as u64)
            .collect();
        assert_eq!(tx.tx_burst(&mut pkts), 3);
        assert!(pkts.is_empty());
        assert_eq!(tx.stats.errors.get(), 1, "the foreign frame");
        assert_eq!(tx.stats.bytes.get(), 180);
        assert_eq!(foreign.available(), 4, "dropped back to its pool");
        for (slot, want) in [heads[0], heads[1], heads[3]].into_iter().enumerate() {
            let (addr, len, id) = v.desc(slot as u16);
            assert_eq!((addr, len, id), (want, 72, slot as u16), "slot {slot}");
        }
        assert_eq!(tx.q.free(), 5);
        drop(tx);
    }

    fn frame(pool: &Mempool, tag: u8, segs: usize) -> Mbuf {
        let mut m = pool.get().unwrap();
        m.append(60).unwrap()[0] = tag;
        for _ in 1..segs {
            let mut s = pool.get().unwrap();
            s.append(100).unwrap();
            m.chain(s).unwrap();
        }
        m
    }

    /// Issue 21: a chain that finds too few descriptors is neither sent
    /// nor dropped: it stays first in the caller's burst, as it was, with
    /// the frames behind it; counted sent + left = given.
    #[test]
    fn a_chain_that_does_not_fit_stays_with_the_caller() {
        let (mut tx, pool, _dev) = tx_queue("nt1", 4);
        let mut pkts = Pkts::new();
        pkts.push(frame(&pool, 1, 1)).unwrap();
        pkts.push(frame(&pool, 2, 4)).unwrap();
        pkts.push(frame(&pool, 3, 1)).unwrap();
        assert_eq!(tx.tx_burst(&mut pkts), 1, "3 descriptors left, 4 wanted");
        assert_eq!(pkts.len(), 2);
        assert_eq!((pkts[0].data()[0], pkts[0].nb_segs()), (2, 4));
        assert_eq!(pkts[0].pkt_len(), 360, "no header left on it");
        assert_eq!(pkts[1].data()[0], 3);
        assert_eq!(tx.stats.errors.get(), 0);
        assert_eq!(tx.stats.packets.get(), 1);
        drop(pkts);
        tx.home.close();
        drop(tx);
        assert_eq!(pool.available(), 64, "closed first: freed at once");
    }

    /// `fault_desc_every=3`: every third frame goes out with a descriptor
    /// address far outside the memory table, the others as they are; a
    /// completion still brings each mbuf home.
    #[cfg(feature = "fault-injection")]
    #[test]
    fn every_nth_descriptor_is_written_outside_the_table_on_purpose() {
        let (mut tx, pool, mut dev) = tx_queue("nt9", 8);
        tx.fault_desc_every = 3;
        let mut pkts = Pkts::new();
        let mut addrs = Vec::new();
        for tag in 0..6 {
            let m = frame(&pool, tag, 1);
            addrs.push(m.data_iova().raw() - NET_HDR_LEN as u64);
            pkts.push(m).unwrap();
        }
        assert_eq!(tx.tx_burst(&mut pkts), 6);
        for (k, want) in addrs.iter().enumerate() {
            let head = dev.take().unwrap();
            let got = dev.desc(head).addr;
            let bad = k % 3 == 2;
            assert_eq!(got, if bad { want ^ (1 << 62) } else { *want }, "frame {k}");
            dev.complete(head, 0);
        }
        assert_eq!(tx.in_flight(), 0);
        drop(tx);
        assert_eq!(pool.available(), 64);
    }

    /// A device that moves the used index past what is in flight stops
    /// the queue: counted as a device error, marked stopped, and the
    /// frames offered afterwards stay with the caller.
    #[test]
    fn a_broken_ring_stops_the_queue_and_leaves_frames_with_the_caller() {
        let (mut tx, pool, mut dev) = tx_queue("nt2", 8);
        let mut pkts = Pkts::new();
        pkts.push(frame(&pool, 1, 1)).unwrap();
        assert_eq!(tx.tx_burst(&mut pkts), 1);
        dev.set_used_idx(40);
        pkts.push(frame(&pool, 2, 1)).unwrap();
        assert_eq!(tx.tx_burst(&mut pkts), 0);
        assert_eq!(pkts.len(), 1);
        assert_eq!(tx.stats.device_errors.get(), 1);
        assert!(tx.stats.stopped.load(Relaxed));
        drop(pkts);
        assert_eq!(pool.available(), 63, "the one in flight stays out");
        let home = tx.home.clone();
        drop(tx);
        assert_eq!(pool.available(), 63, "parked: the device may own it");
        assert_eq!(home.close().map(|t| t.count()), Some(1));
        assert_eq!(pool.available(), 64);
    }
}
