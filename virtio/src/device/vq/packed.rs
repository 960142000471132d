//! The device side of a packed virtqueue (virtio 1.2 §2.8) in a
//! frontend's memory. A descriptor at `last_avail` is the driver's when
//! its AVAIL bit equals our wrap counter and its USED bit does not; a
//! chain runs over consecutive slots while NEXT is set, and its buffer id
//! is in its last descriptor. Chains are completed in the order taken, so
//! each used descriptor goes in the first slot of its own chain (where
//! the spec's used index is) and the used position is `last_avail`.
//!
//! The same rules as the split side: a chain is walked at most a ring's
//! length (one that does not end stops the ring), every buffer is copied
//! through `PeerMemory`, and a chain that breaks a rule is completed with
//! length 0 and counted.
use super::VRING_DESC_F_INDIRECT;
use super::{
    read_one, write_one, Delivered, FrameReader, Negotiated, Plan, Received, Ring, Vring,
    VringCounters,
};
use super::{MAX_BURST, MAX_HEADS};
use crate::consts::{VRING_DESC_F_NEXT, VRING_DESC_F_WRITE};
use crate::offload::HdrFields;
use crate::vring::{DescFields, DescLine, FlagBatch, PackedView};
use rpmd_pmd::peer::{PeerMemory, PeerSlice};
use rpmd_pmd::port::stats::QueueStats;
use rpmd_pmd::{Mbuf, Mempool, Pkts};
use std::sync::atomic::{fence, Ordering};

/// §2.8.10: event suppression flags.
pub(crate) const EVENT_ENABLE: u16 = 0;
pub(crate) const EVENT_DISABLE: u16 = 1;
pub(crate) const EVENT_DESC: u16 = 2;

/// §2.8.1: the AVAIL and USED flags.
const F_AVAIL: u16 = 1 << 7;
const F_USED: u16 = 1 << 15;

/// The flags of a used descriptor written with wrap counter `wrap`
/// (§2.8.1: AVAIL and USED both equal to it).
#[inline(always)]
fn used_flags(wrap: bool) -> u16 {
    if wrap {
        F_AVAIL | F_USED
    } else {
        0
    }
}

/// Whether the descriptor at `slot` is available for wrap counter `wrap`.
#[inline(always)]
fn avail_at(v: &PackedView, slot: u16, wrap: bool) -> bool {
    // Partner: the driver's Release store of a chain's first flags, the
    // last write that makes the chain available.
    let f = v.flags(slot).load(Ordering::Acquire);
    (f & F_AVAIL != 0) == wrap && (f & F_USED != 0) != wrap
}

/// The four descriptors from `slot`, if each is a one-descriptor chain
/// available for wrap counter `wrap`, direct, device-writable or not as
/// `write` says (`VRING_DESC_F_WRITE` or 0), within the ring's end: the
/// batched path tests their flags together (one cache line when `slot`
/// is a multiple of four) and then reads the four descriptors through the
/// same [`DescRun`] the driver's batched path uses.
#[inline(always)]
fn avail4(v: &PackedView, slot: u16, wrap: bool, write: u16) -> Option<DescLine> {
    let line = v.four(slot)?;
    let mask = F_AVAIL | F_USED | VRING_DESC_F_NEXT | VRING_DESC_F_INDIRECT | VRING_DESC_F_WRITE;
    let want = if wrap { F_AVAIL } else { F_USED } | write;
    // Partner of each load (Acquire): the driver's Release store of that
    // chain's flags.
    let bad = (0..4).fold(0, |acc, k| {
        acc | ((u16::from_le(line.flags(k).load(Ordering::Acquire)) & mask) ^ want)
    });
    (bad == 0).then_some(line)
}

pub(super) fn is_avail(vr: &Vring, v: &PackedView, slot: u16) -> bool {
    avail_at(v, slot, vr.avail_wrap)
}

/// `(slot, wrap)` moved on by `n` descriptors.
#[inline(always)]
fn advance(slot: u16, wrap: bool, n: u16, size: u16) -> (u16, bool) {
    let s = slot as u32 + n as u32;
    if s >= size as u32 {
        ((s - size as u32) as u16, !wrap)
    } else {
        (s as u16, wrap)
    }
}

/// Descriptors and buffer id of the chain at `slot`, or `None` if no
/// descriptor of a whole ring ends it.
fn chain_len(v: &PackedView, slot: u16) -> Option<(u16, u16)> {
    let size = v.size();
    let mut s = slot;
    for k in 1..=size {
        // The chain's first flags were loaded Acquire: the rest were
        // written before them.
        if v.flags(s).load(Ordering::Relaxed) & VRING_DESC_F_NEXT == 0 {
            return Some((k, v.id(s)));
        }
        s = advance(s, false, 1, size).0;
    }
    None
}

#[inline(always)]
fn desc(v: &PackedView, slot: u16) -> DescFields {
    let (addr, len, id) = v.desc(slot);
    DescFields {
        addr,
        len,
        flags: v.flags(slot).load(Ordering::Relaxed),
        id_or_next: id,
    }
}

/// The used descriptors of a burst of frames to the guest, each written
/// in its chain's first slot and made visible together ([`FlagBatch`],
/// the driver's own way of making a burst available): the driver, which
/// looks at its used position first, sees all that was published or none
/// of it. The entries of one descriptor line are held and written
/// together when the line is complete (or at `flush`): the driver polls
/// that line, so each write into it takes the line back from the
/// driver's core, and a line written between frame copies would be taken
/// several times.
#[derive(Default)]
struct UsedBatch {
    flags: FlagBatch,
    /// (slot, id, len, flags) not yet written, all in one line.
    line: [(u16, u16, u32, u16); 4],
    held: usize,
}

impl UsedBatch {
    #[inline(always)]
    fn put(&mut self, v: &PackedView, slot: u16, wrap: bool, id: u16, len: u32) {
        let f = used_flags(wrap);
        if self.held == self.line.len() || (self.held > 0 && slot & 3 == 0) {
            self.write_line(v);
        }
        self.line[self.held] = (slot, id, len, f);
        self.held += 1;
    }

    /// Writes the held entries: ids and lengths, then flags.
    #[inline(always)]
    fn write_line(&mut self, v: &PackedView) {
        for &(slot, id, len, _) in &self.line[..self.held] {
            v.set_used(slot, id, len);
        }
        for &(slot, _, _, f) in &self.line[..self.held] {
            self.flags.put(v, slot, f);
        }
        self.held = 0;
    }

    /// Publishes what was put so far; later puts start a new batch.
    #[inline(always)]
    fn flush(&mut self, v: &PackedView) {
        self.write_line(v);
        // Partner: the driver's Acquire load of the flags at its used
        // position before it reads the ids and lengths behind them.
        self.flags.publish(v);
    }

    #[inline(always)]
    fn publish(mut self, v: &PackedView) {
        self.flush(v);
    }
}

/// Writes a TX completion (length 0) for the chain at `slot` into `b`'s
/// burst.
#[inline(always)]
fn put_used(v: &PackedView, b: &mut FlagBatch, slot: u16, wrap: bool, id: u16) {
    v.set_used(slot, id, 0);
    b.put(v, slot, used_flags(wrap));
}

/// Chains available from `last_avail` (what a stop leaves untaken).
pub(super) fn available_chains(vr: &Vring, v: &PackedView) -> u64 {
    let (mut slot, mut wrap, mut n, mut seen) = (vr.last_avail, vr.avail_wrap, 0, 0u32);
    while seen < v.size() as u32 && avail_at(v, slot, wrap) {
        let Some((len, _)) = chain_len(v, slot) else {
            break;
        };
        (slot, wrap) = advance(slot, wrap, len, v.size());
        seen += len as u32;
        n += 1;
    }
    n
}

/// Arms or disarms kicks (the device event suppression structure).
pub(super) fn arm(vr: &Vring, v: &PackedView, on: bool) {
    if !on {
        v.set_device_event(0, EVENT_DISABLE);
        return;
    }
    if vr.neg.event_idx {
        v.set_device_event(vr.last_avail | (vr.avail_wrap as u16) << 15, EVENT_DESC);
    } else {
        v.set_device_event(0, EVENT_ENABLE);
    }
    // Partner: the driver's full barrier between making descriptors
    // available and reading the device event structure; then `has_work`
    // looks again.
    fence(Ordering::SeqCst);
}

/// Writes the call eventfd if the driver asked for an interrupt for the
/// used position moving from `old` to `new`.
pub(super) fn signal(
    vr: &Vring,
    v: &PackedView,
    old: (u16, bool),
    new: (u16, bool),
    c: &VringCounters,
) {
    let Some(call) = &vr.cfg.call else { return };
    // Partner: the driver's full barrier between writing its event
    // suppression and looking at the used descriptors again.
    fence(Ordering::SeqCst);
    let (off_wrap, flags) = v.driver_event();
    let want = match flags {
        EVENT_DISABLE => false,
        EVENT_DESC if vr.neg.event_idx => {
            // As DPDK's vhost_vring_call_packed: indices made linear
            // across the wrap, then §2.7.10's test.
            let size = v.size();
            let mut off = off_wrap & 0x7fff;
            let (n, mut o) = (new.0, old.0);
            if n <= o {
                o = o.wrapping_sub(size);
            }
            if new.1 != (off_wrap >> 15 != 0) {
                off = off.wrapping_sub(size);
            }
            n.wrapping_sub(off).wrapping_sub(1) < n.wrapping_sub(o)
        }
        _ => true,
    };
    if want {
        match crate::fd::signal_eventfd(call) {
            true => c.calls.add(1),
            false => c.calls_lost.add(1),
        }
    }
}

/// A chain found available at the start of a burst: (slot, wrap, length
/// in descriptors, buffer id, the buffer of a one-descriptor chain).
type Found<'a> = (u16, bool, u16, u16, Option<PeerSlice<'a>>);

/// The chain the guest made available at `cur`, if any, its buffer
/// translated and prefetched if it has one only; an error if the chain
/// does not end within the ring.
#[inline(never)]
fn guest_chain<'m>(
    v: &PackedView,
    mem: &'m PeerMemory,
    cur: (u16, bool),
    hdr: usize,
) -> Result<Option<Found<'m>>, String> {
    if !avail_at(v, cur.0, cur.1) {
        return Ok(None);
    }
    let Some((len, id)) = chain_len(v, cur.0) else {
        return Err(format!(
            "the chain at slot {} does not end within the ring",
            cur.0
        ));
    };
    let mut slice = None;
    if len == 1 {
        let d = desc(v, cur.0);
        if d.flags & (VRING_DESC_F_WRITE | VRING_DESC_F_INDIRECT) == 0 && d.len as usize >= hdr {
            slice = mem.slice(d.addr, d.len as u64);
        }
        if let Some(sl) = slice {
            sl.prefetch(hdr);
        }
    }
    Ok(Some((cur.0, cur.1, len, id, slice)))
}

/// The one-descriptor, device-writable chain the guest made available at
/// `cur`, if that is what is there, its buffer translated and prefetched.
#[inline(never)]
fn guest_buffer<'m>(v: &PackedView, mem: &'m PeerMemory, cur: (u16, bool)) -> Option<Found<'m>> {
    if !avail_at(v, cur.0, cur.1) {
        return None;
    }
    let d = desc(v, cur.0);
    if d.flags & (VRING_DESC_F_NEXT | VRING_DESC_F_INDIRECT) != 0
        || d.flags & VRING_DESC_F_WRITE == 0
    {
        return None;
    }
    let slice = mem.slice(d.addr, d.len as u64);
    if let Some(sl) = slice {
        sl.prefetch_write(0);
    }
    Some((cur.0, cur.1, 1, d.id_or_next, slice))
}

/// Dequeues up to `max` frames the guest sent (see `Vring::dequeue`).
pub(super) fn dequeue(
    vr: &mut Vring,
    pool: &Mempool,
    out: &mut Pkts,
    max: usize,
    st: &QueueStats,
    c: &VringCounters,
    (keep_partial, port): (bool, u16),
) -> usize {
    let Some(Ring::Packed(r)) = &vr.ring else {
        return 0;
    };
    let (v, mem) = (r.view(), r.mem());
    let (size, hdr) = (v.size(), vr.neg.hdr_len);
    let start = out.len();
    let n = max.min(MAX_BURST).min(out.capacity() - start);
    // First the burst's chains (their flags and first descriptors; a
    // one-descriptor chain's buffer translated and prefetched), then the
    // copies: the misses of a burst overlap.
    let mut found: [Found; MAX_BURST] = [(0, false, 0, 0, None); MAX_BURST];
    let (mut k, mut cur, mut fatal) = (0usize, (vr.last_avail, vr.avail_wrap), None);
    while k < n {
        let line = (k + 4 <= n).then(|| avail4(&v, cur.0, cur.1, 0));
        if let Some(line) = line.flatten() {
            for (j, f) in found[k..k + 4].iter_mut().enumerate() {
                let slot = cur.0 + j as u16;
                let (addr, len, id) = line.desc(j);
                let slice = (len as usize >= hdr)
                    .then(|| mem.slice(addr, len as u64))
                    .flatten();
                if let Some(sl) = slice {
                    sl.prefetch(hdr);
                }
                *f = (slot, cur.1, 1, id, slice);
            }
            cur = advance(cur.0, cur.1, 4, size);
            k += 4;
            continue;
        }
        match guest_chain(&v, mem, cur, hdr) {
            Ok(Some(f)) => found[k] = f,
            Ok(None) => break,
            Err(why) => {
                fatal = Some(why);
                break;
            }
        }
        cur = advance(cur.0, cur.1, found[k].2, size);
        k += 1;
    }
    if k > 0 && pool.get_bulk(out, k).is_err() {
        st.nombuf.add(k as u64);
        return 0;
    }
    let old = (vr.last_avail, vr.avail_wrap);
    let mut got = Received::new(start, port);
    // TX completions go straight in (with IN_ORDER, one for the burst):
    // the driver takes them back in its own time, unlike RX frames.
    let mut used = FlagBatch::default();
    let csum = vr.neg.csum;
    for (i, &(slot, wrap, len, id, slice)) in found[..k].iter().enumerate() {
        let m = &mut out[start + i];
        match slice {
            // The common frame: one buffer, header and frame, fitting one
            // mbuf, and no header field to read.
            Some(sl) if !csum && sl.len() - hdr <= m.tailroom() => {
                let n = sl.len() - hdr;
                let copied = m.append(n).is_some_and(|dst| sl.read_at(hdr, dst));
                got.frame(i, copied.then_some(()).ok_or(OUTSIDE), m, st);
            }
            _ => {
                let res = match slice {
                    // One buffer, header and frame, fitting one mbuf.
                    Some(sl) if sl.len() - hdr <= m.tailroom() => read_one(&sl, hdr, m, vr.neg),
                    _ => read_chain(mem, &v, (slot, len), hdr, m, pool),
                };
                let res = res.and_then(|h| vr.neg.rx_offloads(m, &h, keep_partial, c));
                got.frame(i, res, m, st);
            }
        }
        if !vr.neg.in_order {
            put_used(&v, &mut used, slot, wrap, id);
        }
    }
    if vr.neg.in_order && k > 0 {
        // §2.8.20: one used descriptor for the burst, in its first slot,
        // naming its last buffer (a TX completion carries no length).
        put_used(&v, &mut used, found[0].0, found[0].1, found[k - 1].3);
    }
    // Partner: the driver's Acquire load of the flags at its used
    // position before it reads the ids behind them.
    used.publish(&v);
    (vr.last_avail, vr.avail_wrap) = cur;
    end_burst(vr, &v, old, k, fatal, st, c);
    got.finish(out, k, st)
}

/// Why a buffer could not be read.
const OUTSIDE: &str = "a buffer outside its region";

/// Reads the chain of `len` descriptors at `slot` (a frame in several
/// buffers, or one the mbuf cannot take whole) into `m` and its segments.
fn read_chain(
    mem: &PeerMemory,
    v: &PackedView,
    (slot, len): (u16, u16),
    hdr: usize,
    m: &mut Mbuf,
    pool: &Mempool,
) -> Result<HdrFields, &'static str> {
    let mut rd = FrameReader::new(hdr);
    let mut s = slot;
    for _ in 0..len {
        rd.add(mem, &desc(v, s), m, pool)?;
        s = advance(s, false, 1, v.size()).0;
    }
    rd.finish(m)
}

/// Writes frame `m` into as many guest buffers as it needs from `from`
/// on (the general path: chains of descriptors, mergeable buffers),
/// their used entries into `used`; returns the position after them, or
/// `None` when the ring holds too few and `m` stays with the caller. A
/// frame a bad chain stopped is taken and counted in `done`; `fatal`
/// says why the ring must stop.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn enqueue_chained(
    v: &PackedView,
    mem: &PeerMemory,
    from: (u16, bool),
    m: &Mbuf,
    neg: Negotiated,
    (used, fatal, done): (&mut UsedBatch, &mut Option<String>, &mut Delivered),
    st: &QueueStats,
    c: &VringCounters,
) -> Option<(u16, bool)> {
    let need = neg.hdr_len + m.pkt_len();
    let mut plan = Plan::default();
    // Where each buffer of the plan starts: (slot, wrap).
    let mut at = [(0u16, false); MAX_HEADS];
    let (cur, bad, why) = gather_chains(v, mem, from, need, neg.mrg, (&mut plan, &mut at), st);
    *fatal = why;
    if !plan.fill(bad, need, mem, m, neg, c, st, done) {
        return None;
    }
    for (k, &(id, len)) in plan.heads[..plan.nheads].iter().enumerate() {
        used.put(v, at[k].0, at[k].1, id, len);
    }
    Some(cur)
}

/// Gathers into `plan` the guest buffers frame bytes `need` go into,
/// from `from` on (the general path: chains of descriptors, mergeable
/// buffers), and where each starts into `at`; returns the position after
/// them, whether a bad chain stopped it, and why the ring must stop if a
/// chain does not end within it. Too few buffers is not bad: `plan`
/// falls short.
fn gather_chains(
    v: &PackedView,
    mem: &PeerMemory,
    from: (u16, bool),
    need: usize,
    mrg: bool,
    (plan, at): (&mut Plan, &mut [(u16, bool); MAX_HEADS]),
    st: &QueueStats,
) -> ((u16, bool), bool, Option<String>) {
    plan.clear();
    let (size, mut cur) = (v.size(), from);
    while plan.cap < need && avail_at(v, cur.0, cur.1) {
        if plan.nheads == MAX_HEADS || (plan.nheads == 1 && !mrg) {
            return (cur, true, None);
        }
        let Some((len, id)) = chain_len(v, cur.0) else {
            let why = format!("the chain at slot {} does not end within the ring", cur.0);
            return (cur, true, Some(why));
        };
        at[plan.nheads] = cur;
        plan.begin(id);
        let mut s = cur.0;
        let mut bad = false;
        for _ in 0..len {
            if !bad && plan.add_desc(mem, &desc(v, s)).is_err() {
                st.device_errors.add(1);
                bad = true;
            }
            s = advance(s, false, 1, size).0;
        }
        cur = advance(cur.0, cur.1, len, size);
        if bad {
            return (cur, true, None);
        }
    }
    (cur, false, None)
}

/// Ends a burst that moved the device's position from `old` over
/// `chains` chains: signals the driver if it asked, and stops the ring
/// if the burst found it broken (`fatal`).
#[inline(always)]
fn end_burst(
    vr: &mut Vring,
    v: &PackedView,
    old: (u16, bool),
    chains: usize,
    fatal: Option<String>,
    st: &QueueStats,
    c: &VringCounters,
) {
    if chains > 0 {
        if let Some(from) = vr.hold_call(old, chains as u32) {
            signal(vr, v, from, (vr.last_avail, vr.avail_wrap), c);
        }
    }
    if let Some(why) = fatal {
        vr.break_ring(why, st);
    }
}

/// Enqueues frames from the front of `pkts` into the guest's RX buffers
/// (see `Vring::enqueue`).
pub(super) fn enqueue(
    vr: &mut Vring,
    pkts: &mut Pkts,
    st: &QueueStats,
    c: &VringCounters,
) -> usize {
    let Some(Ring::Packed(r)) = &vr.ring else {
        return 0;
    };
    let (v, mem) = (r.view(), r.mem());
    let size = v.size();
    let old = (vr.last_avail, vr.avail_wrap);
    let (mut taken, mut done, mut fatal) = (0usize, Delivered::default(), None);
    let hdr = vr.neg.hdr_len;
    // First the one-descriptor buffers the burst will likely use,
    // translated and prefetched; then the copies.
    let mut found: [Found; MAX_BURST] = [(0, false, 0, 0, None); MAX_BURST];
    let (mut nf, mut cur) = (0usize, (vr.last_avail, vr.avail_wrap));
    let want = pkts.len().min(MAX_BURST);
    while nf < want {
        let line = (nf + 4 <= want).then(|| avail4(&v, cur.0, cur.1, VRING_DESC_F_WRITE));
        if let Some(line) = line.flatten() {
            for (j, f) in found[nf..nf + 4].iter_mut().enumerate() {
                let slot = cur.0 + j as u16;
                let (addr, len, id) = line.desc(j);
                let slice = mem.slice(addr, len as u64);
                if let Some(sl) = slice {
                    sl.prefetch_write(0);
                }
                *f = (slot, cur.1, 1, id, slice);
            }
            cur = advance(cur.0, cur.1, 4, size);
            nf += 4;
            continue;
        }
        let Some(f) = guest_buffer(&v, mem, cur) else {
            break;
        };
        found[nf] = f;
        cur = advance(cur.0, cur.1, 1, size);
        nf += 1;
    }
    // Buffers of `found` used by the fast path so far; the first frame
    // that takes the general path ends it.
    let mut fast = 0usize;
    let mut used = UsedBatch::default();
    while taken < pkts.len() && fatal.is_none() {
        let m = &pkts[taken];
        let need = hdr + m.pkt_len();
        if fast < nf && fast == taken {
            let (slot, wrap, _, id, slice) = found[fast];
            if let Some(sl) = slice.filter(|sl| sl.len() >= need && m.nb_segs() == 1) {
                let ok = write_one(&sl, hdr, m, vr.neg, c);
                used.put(&v, slot, wrap, id, if ok { need as u32 } else { 0 });
                if slot & 3 == 3 {
                    // A line of the ring completed: the driver may take
                    // its frames while the rest of the burst is copied.
                    used.flush(&v);
                }
                (vr.last_avail, vr.avail_wrap) = advance(slot, wrap, 1, size);
                done.frame(ok, m, st);
                fast += 1;
                taken += 1;
                continue;
            }
        }
        let from = (vr.last_avail, vr.avail_wrap);
        let ways = (&mut used, &mut fatal, &mut done);
        let Some(cur) = enqueue_chained(&v, mem, from, m, vr.neg, ways, st, c) else {
            break;
        };
        (vr.last_avail, vr.avail_wrap) = cur;
        taken += 1;
    }
    used.publish(&v);
    let moved = if (vr.last_avail, vr.avail_wrap) != old {
        taken
    } else {
        0
    };
    end_burst(vr, &v, old, moved, fatal, st, c);
    done.count(st);
    taken
}
