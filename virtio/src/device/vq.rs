//! The device side of a split virtqueue in a vhost-user frontend's memory:
//! dequeue (the guest's TX ring into mbufs, the port's rx) and enqueue
//! (mbufs into the guest's RX buffers, the port's tx).
//!
//! Everything in the ring is the frontend's and untrusted. Indices and
//! heads are checked against the ring size, chains are walked at most
//! `size` steps, every buffer is copied through [`PeerMemory`], which
//! refuses a range not wholly inside one region, and the device's own
//! positions (`last_avail`, `used_idx`) live here, never re-read from the
//! ring. A chain that breaks a rule is completed with length 0 (the
//! frontend gets its buffer back, as Linux and DPDK drivers expect of a
//! buffer the device could not use) and counted in `device_errors`; an
//! avail index more than a ring ahead of ours stops the ring until the
//! frontend sets it up again.
//!
//! Each fence and ordered access names its partner on the driver's side
//! by the labels the split driver uses (`V1`-`V4`, `driver::split`).
use crate::consts::{
    VRING_AVAIL_F_NO_INTERRUPT, VRING_DESC_F_NEXT, VRING_DESC_F_WRITE, VRING_USED_F_NO_NOTIFY,
};
use crate::vring::{NetHdr, PeerPacked, PeerSplit, SplitView};

mod chain;
mod packed;
use crate::offload;
use chain::{Delivered, FrameReader, Plan, Received};
use rpmd_pmd::peer::PeerMemory;
use rpmd_pmd::port::stats::{Counter, QueueStats};
use rpmd_pmd::{Mbuf, Mempool, Pkts};
use rpmd_ring::{TxGuard, TxLock};
use std::fs::File;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// §2.7.5: an indirect descriptor table (not offered, so never valid).
pub(super) const VRING_DESC_F_INDIRECT: u16 = 4;

/// Most bytes a frame from the guest may have (a 9000-byte MTU with
/// room to spare); longer chains are dropped, so a hostile chain cannot
/// empty the pool.
pub(crate) const MAX_FRAME: usize = 16 << 10;

/// Most frames one dequeue takes (one bit each in a mask).
pub(super) const MAX_BURST: usize = 32;

/// Most guest buffers one frame may span on enqueue, and descriptors
/// across them.
pub(super) const MAX_HEADS: usize = 16;
const MAX_SEGS: usize = 32;

/// What the frontend set up for one vring (written by the control
/// thread).
#[derive(Default)]
pub(crate) struct VringConfig {
    pub(crate) num: u16,
    /// Descriptor table, avail and used rings, at the frontend's own
    /// addresses.
    pub(crate) addrs: Option<(u64, u64, u64)>,
    pub(crate) base: u16,
    /// SET_VRING_KICK was received (with an fd, or none for polling).
    pub(crate) kicked: bool,
    pub(crate) kick: Option<Arc<File>>,
    pub(crate) call: Option<File>,
    pub(crate) enabled: bool,
}

/// What the negotiated features mean for the data path.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Negotiated {
    /// The net header before each frame: 12 bytes with VERSION_1 or
    /// MRG_RXBUF, else 10.
    pub(crate) hdr_len: usize,
    pub(crate) mrg: bool,
    pub(crate) event_idx: bool,
    /// VIRTIO_F_RING_PACKED.
    pub(crate) packed: bool,
    /// VIRTIO_NET_F_CSUM: the guest's frames may carry NEEDS_CSUM.
    pub(crate) csum: bool,
    /// VIRTIO_NET_F_GUEST_CSUM: frames to the guest may be partial.
    pub(crate) guest_csum: bool,
    /// VIRTIO_F_IN_ORDER: a packed ring's TX burst may be completed with
    /// one used descriptor naming its last buffer (§2.8.20).
    pub(crate) in_order: bool,
    /// Fault injection (the port's `fault_used_every`, with the
    /// `fault-injection` feature): every Nth used entry of the guest's RX
    /// ring names no descriptor; 0: off.
    #[cfg(feature = "fault-injection")]
    pub(crate) fault_every: u32,
    /// Call coalescing (the port's `call_coalesce`): a call the driver
    /// asked for waits until this many chains have been completed since
    /// the last one, or until the queue is next found idle; 0 or 1: off.
    pub(crate) call_coalesce: u32,
}

/// Counters of one vring besides the queue's.
#[derive(Default)]
pub(crate) struct VringCounters {
    /// Call eventfd writes (interrupts to the guest).
    pub(crate) calls: Counter,
    /// Calls that could not be written (the frontend let its eventfd's
    /// count reach the limit).
    pub(crate) calls_lost: Counter,
    /// Times the queue armed kicks before the lcore slept.
    pub(crate) arms: Counter,
    /// Kicks found when waking.
    pub(crate) kicks: Counter,
    /// Ring starts (set-ups and restarts).
    pub(crate) starts: Counter,
    /// Busy polls of this (guest TX) ring that found frames, and that ran
    /// out of budget (the run loop's report; `busyloop_us`).
    pub(crate) busy_hits: Counter,
    pub(crate) busy_timeouts: Counter,
    /// Checksums left partial (kept partial from the guest; NEEDS_CSUM to
    /// it) and completed in software, per direction ([`offload`]).
    pub(crate) csum_partial: Counter,
    pub(crate) csum_completed: Counter,
    /// Used entries written wrong on purpose (`fault_used_every`).
    pub(crate) faults_injected: Counter,
    /// Entries the driver had made available that the ring never took
    /// because the frontend stopped it first (its TX frames lost there).
    pub(crate) left_at_stop: Counter,
}

impl VringCounters {
    /// Counts what became of a checksum request.
    fn count(&self, o: offload::Outcome) {
        match o {
            offload::Outcome::Plain => {}
            offload::Outcome::Partial => self.csum_partial.add(1),
            offload::Outcome::Completed => self.csum_completed.add(1),
        }
    }
}

/// One vring: its set-up and the device's position, behind the lock the
/// data path tries once a burst (DPDK's per-queue access lock): rpmd's
/// one lock, [`TxLock`], whose priority side the control thread takes, so
/// that it waits for the burst in progress and no other.
pub(crate) struct VringSlot {
    pub(crate) vring: TxLock<Vring>,
    pub(crate) counters: VringCounters,
    /// Whether the ring runs (kept beside the mutex for `link`).
    pub(crate) running: AtomicBool,
    /// Bumped when the kick fd changes, so a queue refreshes its copy.
    pub(crate) kick_gen: AtomicU64,
}

impl VringSlot {
    pub(crate) fn new() -> Self {
        VringSlot {
            vring: TxLock::new(Vring::default()),
            counters: VringCounters::default(),
            running: AtomicBool::new(false),
            kick_gen: AtomicU64::new(0),
        }
    }

    /// The vring, locked (waiting for a burst in progress; bursts that
    /// find the control thread waiting skip).
    pub(crate) fn lock(&self) -> TxGuard<'_, Vring> {
        self.vring.lock_drain()
    }
}

/// A running ring, of either layout.
enum Ring {
    Split(PeerSplit),
    Packed(PeerPacked),
}

/// The device state of one vring.
#[derive(Default)]
pub(crate) struct Vring {
    pub(crate) cfg: VringConfig,
    pub(crate) neg: Negotiated,
    ring: Option<Ring>,
    /// Split: the next avail entry; packed: the next descriptor slot.
    last_avail: u16,
    /// Split: our used index (packed rings complete each chain in its own
    /// slots, so the used position is `last_avail`).
    used_idx: u16,
    /// Packed: the driver's wrap counter we expect at `last_avail`.
    avail_wrap: bool,
    /// Why the ring stopped on its own, if it did.
    pub(crate) broken: Option<String>,
    /// A held call (coalescing): where the used position stood at the
    /// last call, and the chains completed since.
    held_from: Option<(u16, bool)>,
    held_chains: u32,
    /// Used entries written to the guest's RX ring (fault injection).
    #[cfg(feature = "fault-injection")]
    fault_tick: std::cell::Cell<u32>,
}

/// §2.7.10: whether an index moving from `old` to `new` passes `event`.
fn need_event(event: u16, new: u16, old: u16) -> bool {
    new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
}

impl Vring {
    /// Whether the ring runs.
    pub(crate) fn running(&self) -> bool {
        self.ring.is_some()
    }

    /// (Re)starts the ring on `mem` if everything it needs was set up
    /// (memory, size, addresses, kick, enabled); `Ok(false)` when
    /// something is still missing, an error when the frontend's addresses
    /// do not lie in its memory.
    pub(crate) fn start(&mut self, mem: Option<&Arc<PeerMemory>>) -> Result<bool, String> {
        // A running ring moved to new memory keeps its place.
        let resume = self.ring.take().is_some();
        let c = &self.cfg;
        let (Some(mem), Some((d, a, u)), true, true) = (mem, c.addrs, c.kicked, c.enabled) else {
            return Ok(false);
        };
        if c.num == 0 {
            return Ok(false);
        }
        if self.neg.packed {
            let ring = PeerPacked::new(mem.clone(), c.num, d, a, u)?;
            if !resume {
                self.last_avail = c.base & 0x7fff;
                self.avail_wrap = c.base & 0x8000 != 0;
                if self.last_avail >= c.num {
                    return Err(format!("base {:#x} past a ring of {}", c.base, c.num));
                }
            }
            self.broken = None;
            ring.view().set_device_event(0, packed::EVENT_DISABLE);
            self.ring = Some(Ring::Packed(ring));
            return Ok(true);
        }
        let ring = PeerSplit::new(mem.clone(), c.num, d, a, u)?;
        let v = ring.view();
        // As DPDK does: a used index other than the base (a frontend that
        // restarted, a base from an earlier backend) is where we resume.
        if !resume {
            let used = v.used_idx(Ordering::Acquire);
            self.last_avail = if used != c.base { used } else { c.base };
            self.used_idx = self.last_avail;
        }
        self.broken = None;
        // We poll: no kicks until the queue arms them.
        if !self.neg.event_idx {
            v.set_used_flags(VRING_USED_F_NO_NOTIFY);
        }
        self.ring = Some(Ring::Split(ring));
        Ok(true)
    }

    /// Stops the ring and returns where the next available entry is
    /// (GET_VRING_BASE).
    pub(crate) fn stop(&mut self, c: &VringCounters) -> u16 {
        // A held call goes with the ring: the driver is stopping it.
        self.held_from = None;
        self.held_chains = 0;
        match self.ring.take() {
            Some(Ring::Split(r)) => {
                let v = r.view();
                let left = v.avail_idx(Ordering::Acquire).wrapping_sub(self.last_avail);
                if left <= v.size() {
                    c.left_at_stop.add(left as u64);
                }
                self.cfg.base = self.last_avail;
            }
            Some(Ring::Packed(r)) => {
                c.left_at_stop
                    .add(packed::available_chains(self, &r.view()));
                self.cfg.base = self.last_avail | (self.avail_wrap as u16) << 15;
            }
            None => {}
        }
        self.cfg.base
    }

    /// Call coalescing: the used position to signal from when a call for
    /// `chains` more completions, starting at `from`, is due now; `None`
    /// while it is held.
    #[inline]
    pub(super) fn hold_call(&mut self, from: (u16, bool), chains: u32) -> Option<(u16, bool)> {
        if self.neg.call_coalesce <= 1 {
            return Some(from);
        }
        let start = *self.held_from.get_or_insert(from);
        self.held_chains += chains;
        if self.held_chains < self.neg.call_coalesce {
            return None;
        }
        self.held_from = None;
        self.held_chains = 0;
        Some(start)
    }

    /// Sends a held call, if there is one (the queue was found idle).
    pub(crate) fn flush_call(&mut self, c: &VringCounters) {
        let Some(from) = self.held_from.take() else {
            return;
        };
        self.held_chains = 0;
        match &self.ring {
            Some(Ring::Split(r)) => self.signal(&r.view(), from.0, self.used_idx, c),
            Some(Ring::Packed(r)) => {
                packed::signal(self, &r.view(), from, (self.last_avail, self.avail_wrap), c)
            }
            None => {}
        }
    }

    pub(super) fn break_ring(&mut self, why: String, st: &QueueStats) {
        st.device_errors.add(1);
        st.errors.add(1);
        self.broken = Some(why);
        self.ring = None;
    }

    /// Writes the call eventfd if the driver wants an interrupt for the
    /// used index moving from `old` to `new`.
    fn signal(&self, v: &SplitView, old: u16, new: u16, c: &VringCounters) {
        let Some(call) = &self.cfg.call else { return };

        // Partner: the driver's V4, its full barrier between writing
        // used_event (or avail.flags) and reading used.idx again (Linux's
        // virtqueue_enable_cb_prepare and virtqueue_poll).
        fence(Ordering::SeqCst);
        let want = if self.neg.event_idx {
            need_event(v.used_event(), new, old)
        } else {
            v.avail_flags() & VRING_AVAIL_F_NO_INTERRUPT == 0
        };
        if want {
            match crate::fd::signal_eventfd(call) {
                true => c.calls.add(1),
                false => c.calls_lost.add(1),
            }
        }
    }

    /// Arms (`on`) or disarms kicks before and after the lcore sleeps.
    pub(crate) fn arm(&mut self, on: bool) {
        let v = match &self.ring {
            Some(Ring::Split(r)) => r.view(),
            Some(Ring::Packed(r)) => return packed::arm(self, &r.view(), on),
            None => return,
        };
        if on {
            if self.neg.event_idx {
                v.set_avail_event(self.last_avail);
            } else {
                v.set_used_flags(0);
            }
            // Partner: the driver's V3, its full barrier between
            // publishing avail.idx and reading avail_event or used.flags
            // (Linux's virtqueue_kick_prepare); then `has_work` looks
            // again.
            fence(Ordering::SeqCst);
        } else if !self.neg.event_idx {
            v.set_used_flags(VRING_USED_F_NO_NOTIFY);
        }
        // With event indices a stale avail_event stops kicks by itself.
    }

    /// Whether the driver made buffers available we have not taken.
    pub(crate) fn has_work(&self) -> bool {
        match &self.ring {
            Some(Ring::Split(r)) => r.view().avail_idx(Ordering::Acquire) != self.last_avail,
            Some(Ring::Packed(r)) => packed::is_avail(self, &r.view(), self.last_avail),
            None => false,
        }
    }

    /// How many chains the driver made available that we have not taken
    /// (split rings: at most the ring's size, whatever the driver wrote
    /// into avail.idx); `None` for packed rings, where counting means
    /// walking the descriptors.
    pub(crate) fn pending(&self) -> Option<usize> {
        match &self.ring {
            Some(Ring::Split(r)) => {
                let n = r
                    .view()
                    .avail_idx(Ordering::Acquire)
                    .wrapping_sub(self.last_avail);
                Some(usize::from(n).min(usize::from(self.cfg.num)))
            }
            Some(Ring::Packed(_)) => None,
            None => Some(0),
        }
    }

    /// The id of the used entry that completes RX chain `head`: `head`,
    /// except that with the `fault-injection` feature and
    /// `fault_used_every=N` every Nth entry names a descriptor past the
    /// ring (benches/soak.sh: the driver must notice and recover).
    #[inline(always)]
    fn rx_used_id(&self, head: u16, _c: &VringCounters) -> u32 {
        #[cfg(feature = "fault-injection")]
        if self.neg.fault_every != 0 {
            let tick = self.fault_tick.get().wrapping_add(1);
            self.fault_tick.set(tick);
            if tick % self.neg.fault_every == 0 {
                _c.faults_injected.add(1);
                return u32::from(u16::MAX);
            }
        }
        head as u32
    }

    /// Dequeues up to `max` frames the guest sent into mbufs from `pool`,
    /// appended to `out`, each with port id `port`; returns how many.
    /// `keep_partial`: the application asked for the RX checksum offload
    /// ([`offload`]). The two go together as `(keep_partial, port)`.
    pub(crate) fn dequeue(
        &mut self,
        pool: &Mempool,
        out: &mut Pkts,
        max: usize,
        st: &QueueStats,
        c: &VringCounters,
        (keep_partial, port): (bool, u16),
    ) -> usize {
        let (v, mem) = match &self.ring {
            Some(Ring::Split(r)) => (r.view(), r.mem()),
            Some(Ring::Packed(_)) => {
                return packed::dequeue(self, pool, out, max, st, c, (keep_partial, port))
            }
            None => return 0,
        };
        let pending = match self.avail_ahead(&v) {
            Ok(n) => n,
            Err(avail) => return self.avail_overrun(avail, v.size(), st),
        };
        if pending == 0 {
            return 0;
        }
        let start = out.len();
        let n = (pending as usize)
            .min(max)
            .min(MAX_BURST)
            .min(out.capacity() - start);
        if n == 0 {
            return 0;
        }
        if pool.get_bulk(out, n).is_err() {
            st.nombuf.add(n as u64);
            return 0;
        }
        let old_used = self.used_idx;
        let hdr = self.neg.hdr_len;
        // First the burst's heads and first descriptors (independent
        // loads, so their misses overlap), each single-buffer frame's
        // buffer translated and prefetched; then the copies.
        let mut firsts = [(0u16, None); MAX_BURST];
        for (k, f) in firsts[..n].iter_mut().enumerate() {
            let head = v.avail_entry(self.last_avail.wrapping_add(k as u16));
            let d = v.desc(head);
            let single = d.flags & (VRING_DESC_F_NEXT | VRING_DESC_F_WRITE | VRING_DESC_F_INDIRECT)
                == 0
                && d.len as usize >= hdr;
            let slice = if single && head < v.size() {
                mem.slice(d.addr, d.len as u64)
            } else {
                None
            };
            if let Some(sl) = slice {
                sl.prefetch(hdr);
                if sl.len() > hdr + 64 {
                    sl.prefetch(hdr + 64);
                }
            }
            *f = (head, slice);
        }
        let (mut got, mut fatal) = (Received::new(start, port), None);
        for i in 0..n {
            let (head, slice) = firsts[i];
            if head >= v.size() {
                // Nothing to complete: the entry names no descriptor.
                fatal = Some(format!("avail entry {} names head {head}", self.last_avail));
                got.lose_from(i, n);
                break;
            }
            self.last_avail = self.last_avail.wrapping_add(1);
            let m = &mut out[start + i];
            let res = match slice {
                // One buffer, header and frame, fitting one mbuf.
                Some(sl) if sl.len() - hdr <= m.tailroom() => read_one(&sl, hdr, m, self.neg),
                _ => read_chain(mem, &v, head, hdr, m, pool),
            };
            let res = res.and_then(|h| self.neg.rx_offloads(m, &h, keep_partial, c));
            got.frame(i, res, m, st);
            v.set_used_elem(self.used_idx, head as u32, 0);
            self.used_idx = self.used_idx.wrapping_add(1);
        }
        self.publish_used(&v, old_used, fatal, st, c);
        got.finish(out, n, st)
    }

    /// Enqueues frames from the front of `pkts` into the guest's RX
    /// buffers; returns how many were taken (sent, or dropped as too
    /// large for the buffers or for a bad chain, counted in `errors`),
    /// which the caller frees.
    pub(crate) fn enqueue(&mut self, pkts: &mut Pkts, st: &QueueStats, c: &VringCounters) -> usize {
        let (v, mem) = match &self.ring {
            Some(Ring::Split(r)) => (r.view(), r.mem()),
            Some(Ring::Packed(_)) => return packed::enqueue(self, pkts, st, c),
            None => return 0,
        };
        let free = match self.avail_ahead(&v) {
            Ok(n) => n,
            Err(avail) => return self.avail_overrun(avail, v.size(), st),
        };
        let old_used = self.used_idx;
        let hdr = self.neg.hdr_len;
        // First the heads the burst will likely use, each one-buffer
        // chain translated and its first line prefetched; then the copies.
        let nb = (free as usize).min(pkts.len()).min(MAX_BURST);
        let mut bufs = [(0u16, None); MAX_BURST];
        for (k, b) in bufs[..nb].iter_mut().enumerate() {
            let head = v.avail_entry(self.last_avail.wrapping_add(k as u16));
            let d = v.desc(head);
            let one = d.flags & (VRING_DESC_F_NEXT | VRING_DESC_F_INDIRECT) == 0
                && d.flags & VRING_DESC_F_WRITE != 0;
            let slice = if one && head < v.size() {
                mem.slice(d.addr, d.len as u64)
            } else {
                None
            };
            if let Some(sl) = slice {
                sl.prefetch_write(0);
            }
            *b = (head, slice);
        }
        let mut plan = Plan::default();
        let (mut taken, mut used_heads, mut done) = (0usize, 0u16, Delivered::default());
        let mut fatal = None;
        while taken < pkts.len() && fatal.is_none() {
            let m = &pkts[taken];
            let need = hdr + m.pkt_len();
            if let Some(&(head, Some(sl))) = bufs[..nb].get(used_heads as usize) {
                // One buffer that holds the header and a one-segment frame.
                if sl.len() >= need && m.nb_segs() == 1 {
                    let ok = write_one(&sl, hdr, m, self.neg, c);
                    let id = self.rx_used_id(head, c);
                    v.set_used_elem(self.used_idx, id, if ok { need as u32 } else { 0 });
                    self.used_idx = self.used_idx.wrapping_add(1);
                    self.last_avail = self.last_avail.wrapping_add(1);
                    used_heads += 1;
                    taken += 1;
                    done.frame(ok, m, st);
                    continue;
                }
            }
            let room = free - used_heads;
            let bad = self.gather_chain(&v, mem, need, room, &mut plan, &mut fatal, st);
            if !plan.fill(bad, need, mem, m, self.neg, c, st, &mut done) {
                break;
            }
            for &(head, len) in &plan.heads[..plan.nheads] {
                let id = self.rx_used_id(head, c);
                v.set_used_elem(self.used_idx, id, len);
                self.used_idx = self.used_idx.wrapping_add(1);
            }
            used_heads += plan.nheads as u16;
            self.last_avail = self.last_avail.wrapping_add(plan.nheads as u16);
            taken += 1;
        }
        self.publish_used(&v, old_used, fatal, st, c);
        done.count(st);
        taken
    }

    /// Gathers into `plan` the guest buffers frame bytes `need` go
    /// into, at most `room` of them, from the device's avail position
    /// (the general path: chains of descriptors, mergeable buffers);
    /// true if a bad chain stopped it (`fatal` says why when the ring
    /// must stop). Too few buffers is not bad: `plan` falls short.
    #[allow(clippy::too_many_arguments)]
    fn gather_chain(
        &self,
        v: &SplitView,
        mem: &PeerMemory,
        need: usize,
        room: u16,
        plan: &mut Plan,
        fatal: &mut Option<String>,
        st: &QueueStats,
    ) -> bool {
        plan.clear();
        while plan.cap < need {
            if plan.nheads as u16 == room {
                return false;
            }
            if plan.nheads == MAX_HEADS || (plan.nheads == 1 && !self.neg.mrg) {
                return true;
            }
            let at = self.last_avail.wrapping_add(plan.nheads as u16);
            let head = v.avail_entry(at);
            if head >= v.size() {
                // Nothing to complete: the entry names no descriptor.
                *fatal = Some(format!("avail entry {at} names head {head}"));
                return true;
            }
            if plan.gather(mem, v, head).is_err() {
                st.device_errors.add(1);
                return true;
            }
        }
        false
    }

    /// How many entries the driver has made available past the
    /// device's position, or its avail.idx when that runs more than a
    /// ring ahead.
    #[inline(always)]
    fn avail_ahead(&self, v: &SplitView) -> Result<u16, u16> {
        // Partner: the driver's V1, its Release store of avail.idx after
        // writing the entries and descriptors.
        let avail = v.avail_idx(Ordering::Acquire);
        let ahead = avail.wrapping_sub(self.last_avail);
        if ahead > v.size() {
            return Err(avail);
        }
        Ok(ahead)
    }

    /// Stops the ring: the driver's avail.idx ran more than a ring ahead
    /// of the device's position. Returns 0, the frames moved.
    #[cold]
    fn avail_overrun(&mut self, avail: u16, size: u16, st: &QueueStats) -> usize {
        let why = format!(
            "avail.idx {avail} is {} entries ahead of the device's {} in a ring of {size}",
            avail.wrapping_sub(self.last_avail),
            self.last_avail,
        );
        self.break_ring(why, st);
        0
    }

    /// Publishes the used entries written since `old_used`, signals the
    /// driver if it asked, and stops the ring if the burst found it
    /// broken (`fatal`).
    #[inline(always)]
    fn publish_used(
        &mut self,
        v: &SplitView,
        old_used: u16,
        fatal: Option<String>,
        st: &QueueStats,
        c: &VringCounters,
    ) {
        let done = self.used_idx.wrapping_sub(old_used);
        if done != 0 {
            // Partner: the driver's V2, its Acquire load of used.idx
            // before it reads or reuses the buffers.
            v.set_used_idx(self.used_idx, Ordering::Release);
            if let Some((from, _)) = self.hold_call((old_used, false), u32::from(done)) {
                self.signal(v, from, self.used_idx, c);
            }
        }
        if let Some(why) = fatal {
            self.break_ring(why, st);
        }
    }
}

/// Writes the net header and the one-segment frame `m` into the one
/// buffer `sl`, which holds both; false if `sl` left its region.
#[inline(always)]
fn write_one(
    sl: &rpmd_pmd::peer::PeerSlice,
    hdr: usize,
    m: &Mbuf,
    neg: Negotiated,
    c: &VringCounters,
) -> bool {
    let mut h = [0u8; NetHdr::LEN];
    h[NetHdr::NUM_BUFFERS_AT] = 1; // little-endian
    let patches = neg.tx_offloads(m, &mut h, c);
    // The header is written only where the buffer does not hold it
    // already. A guest refills the same buffers, so in steady traffic it
    // mostly does, and its line then stays shared by both cores instead
    // of moving here and back for every frame (DPDK's vhost and virtio
    // drivers skip equal header fields for the same reason).
    // (Fixed-size reads and compares: no calls to memcpy and bcmp.)
    let mut cur = [0u8; 12];
    let same = match hdr {
        12 => sl.read_at(0, &mut cur) && cur == h,
        _ => sl.read_at(0, &mut cur[..10]) && cur[..10] == h[..10],
    };
    (same || sl.write_at(0, &h[..hdr]))
        && sl.write_at(hdr, m.data())
        && patches.iter().all(|(at, v)| sl.write_at(hdr + at, v))
}

/// Copies the frame in the one buffer `sl` (a net header of `hdr` bytes,
/// then the frame, which fits `m`) into `m`; returns the header's offload
/// fields (read only with CSUM, else zero).
#[inline(always)]
fn read_one(
    sl: &rpmd_pmd::peer::PeerSlice,
    hdr: usize,
    m: &mut Mbuf,
    neg: Negotiated,
) -> Result<offload::HdrFields, &'static str> {
    let mut h = [0u8; 10];
    let dst = m.append(sl.len() - hdr).unwrap_or_default();
    if sl.read_at(hdr, dst) && (!neg.csum || sl.read_at(0, &mut h)) {
        Ok(h)
    } else {
        Err("a buffer outside its region")
    }
}

impl Negotiated {
    /// Fills the offload fields of the net header `h` for the frame `m`
    /// (nothing unless its mbuf asks; see [`offload::tx_header`]), counted;
    /// the fields to write over its copy.
    #[inline(always)]
    pub(super) fn tx_offloads(
        &self,
        m: &Mbuf,
        h: &mut [u8; NetHdr::LEN],
        c: &VringCounters,
    ) -> offload::Patches {
        if m.ol_flags() & offload::TX_FLAGS == 0 {
            return offload::Patches::default();
        }
        // Typed only here, off the common path (a frame that asks for
        // nothing keeps the constant header bytes).
        let mut hdr = NetHdr::from_bytes(h);
        let p = offload::tx_header(m, self.guest_csum, &mut hdr);
        *h = hdr.to_bytes();
        c.count(p.outcome);
        p
    }

    /// Applies a received frame's header fields `h` to its mbuf (nothing
    /// unless CSUM was negotiated; see [`offload`]); `keep_partial`: the
    /// application asked for the RX checksum offload.
    #[inline(always)]
    pub(super) fn rx_offloads(
        &self,
        m: &mut Mbuf,
        h: &offload::HdrFields,
        keep_partial: bool,
        c: &VringCounters,
    ) -> Result<(), &'static str> {
        if self.csum && h[NetHdr::FLAGS_AT] != 0 {
            c.count(offload::rx(m, &NetHdr::from_bytes(h), keep_partial)?);
        }
        Ok(())
    }
}

/// Copies the frame of the chain at `head` into `m`, after the `hdr`
/// bytes of the net header, chaining segments from `pool` when it does
/// not fit one mbuf; returns the header's offload fields; the error
/// names the rule the chain broke.
fn read_chain(
    mem: &PeerMemory,
    v: &SplitView,
    head: u16,
    hdr: usize,
    m: &mut Mbuf,
    pool: &Mempool,
) -> Result<offload::HdrFields, &'static str> {
    let size = v.size();
    let mut r = FrameReader::new(hdr);
    let mut id = head;
    for _ in 0..size {
        let d = v.desc(id);
        r.add(mem, &d, m, pool)?;
        if d.flags & VRING_DESC_F_NEXT == 0 {
            return r.finish(m);
        }
        id = d.id_or_next;
        if id >= size {
            return Err("a next link outside the descriptor table");
        }
    }
    Err("a chain longer than the ring (a loop)")
}

#[cfg(test)]
mod tests {
    use super::need_event;

    #[test]
    fn event_index_arithmetic_wraps() {
        assert!(need_event(5, 6, 5));
        assert!(!need_event(5, 5, 4));
        assert!(need_event(0xffff, 0, 0xfffe));
        assert!(!need_event(10, 20, 15));
    }
}
