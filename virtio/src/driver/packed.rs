//! The driver side of a packed virtqueue (virtio 1.2 §2.8) in DMA memory.
//!
//! One ring of 16-byte descriptors {addr, len, id, flags} that both sides
//! write: the driver makes descriptors available in ring order, and the
//! device writes each used buffer back into the ring, in the order it
//! finished them, as one descriptor carrying the buffer's id. Whose turn a
//! descriptor is shows in two flag bits, AVAIL and USED, read against a
//! wrap counter that flips each time an index passes the end of the ring
//! (§2.8.1): available means AVAIL = wrap and USED = !wrap, used means both
//! equal the device's wrap. After the ring come the driver and device
//! event-suppression areas (§2.8.10), 4 bytes each.
//!
//! Buffers are mbufs, as in [`crate::driver::split`]: buffer ids come from a free
//! stack, `tokens[id]` holds the mbuf, `chain[id]` how many descriptors it
//! took, so a used descriptor (one per buffer) frees the right number of
//! ring slots. With IN_ORDER (§2.8.9) a buffer's id is its first slot,
//! so bursts of one-descriptor buffers go in and come back as runs of
//! consecutive slots ([`PackedQueue::push_run`]; the in-order reclaim),
//! each reached through a [`DescRun`](crate::vring::DescRun) checked once
//! to lie inside the ring.
//!
//! Ordering: the driver writes a burst's descriptors and publishes them
//! at once at `publish` ([`FlagBatch`]: every flags word but the burst's
//! first stored Relaxed, then the first with Release, `P1`, pairing with
//! the device's Acquire read of it; the device takes descriptors in ring
//! order, so it cannot see the later ones first). Not per cache line: a
//! device that starts on the first line of a burst while the rest is
//! written hands back four-frame pieces, and the two sides can settle
//! into that rhythm for a whole run at half the rate (`compare.sh
//! virtio`, io 64 packed; benches/RESULTS.md). The driver reads a used
//! descriptor's flags with an Acquire load before its id and length
//! (`P2`, pairing with the device's Release store of the flags after
//! writing them; [`PackedQueue::pop_used4`] reads a line of four). A
//! SeqCst fence orders publication before reading the device's event flags when deciding to
//! notify (`P3`, pairing with the device's fence between writing its flags
//! and re-reading the ring), and another orders our event flags before the
//! next look at the ring (`P4`).
#![allow(unsafe_code)]

use crate::consts::{VRING_DESC_F_NEXT, VRING_DESC_F_WRITE};
use crate::driver::Ring;
use crate::vring::{FlagBatch, PackedView};
use crate::Error;
use rpmd_pmd::{DmaRegion, Mbuf};
use rpmd_ring::Burst;
use std::mem::MaybeUninit;
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};

/// §2.8.1: the AVAIL and USED flag bits.
const F_AVAIL: u16 = 1 << 7;
const F_USED: u16 = 1 << 15;
/// §2.8.10: event suppression flags.
const EVENT_ENABLE: u16 = 0;
const EVENT_DISABLE: u16 = 1;

/// Byte offsets of the parts of a packed queue.
#[derive(Clone, Copy, Debug)]
pub struct PackedLayout {
    /// Entries (a power of two here, at most 32768).
    pub size: u16,
    /// Driver event suppression area.
    pub driver: usize,
    /// Device event suppression area.
    pub device: usize,
    /// Bytes in all (page multiple).
    pub len: usize,
}

impl PackedLayout {
    /// The layout of a queue of `size` entries.
    pub fn new(size: u16) -> Result<PackedLayout, Error> {
        if !size.is_power_of_two() || size > 32768 {
            return Err(Error::Config(format!(
                "queue size {size}: a power of two up to 32768"
            )));
        }
        let driver = 16 * size as usize;
        let device = driver + 64;
        Ok(PackedLayout {
            size,
            driver,
            device,
            len: (device + 64).next_multiple_of(4096),
        })
    }
}

/// One packed virtqueue, driver side.
pub struct PackedQueue {
    base: *mut u8,
    /// The ring and event areas, typed (the device's end uses the same).
    ring: PackedView,
    iova_base: u64,
    layout: PackedLayout,
    /// Next ring slot to make available, and its wrap counter.
    next_avail: u16,
    avail_wrap: bool,
    /// Next ring slot the device will write used, and its wrap counter.
    next_used: u16,
    used_wrap: bool,
    /// Ring slots not holding an available or unreclaimed descriptor.
    free_slots: usize,
    free_ids: Vec<u16>,
    tokens: Vec<Option<NonNull<u8>>>,
    /// Descriptors of the buffer whose id indexes it: 1 unless a chain
    /// of several is in flight under that id (reset to 1 when it comes
    /// back), so one-descriptor pushes need not write it.
    chain: Vec<u16>,
    /// Chains of several descriptors in flight: while there are none,
    /// every slot in flight holds a one-descriptor buffer.
    chains: usize,
    /// The flags of the descriptors added since the last `publish`.
    batch: FlagBatch,
    /// VIRTIO_F_IN_ORDER (§2.8.9): a buffer's id is the slot of its first
    /// descriptor, and the device may write one used descriptor for a
    /// batch, naming the batch's last buffer.
    in_order: bool,
    /// In order: the last buffer of a batch being handed back whose used
    /// descriptor was already read.
    batch_end: Option<u16>,
    /// The device wrote a used descriptor the queue cannot account for
    /// (naming no buffer in flight): its position in the ring is then
    /// unknown, so every operation is refused until
    /// [`restart`](Self::restart); the buffers in flight stay with the
    /// queue, since the device may still own them.
    broken: bool,
}

// SAFETY: the queue owns its slice of the region and the mbufs in flight;
// moving it to another thread moves that ownership.
unsafe impl Send for PackedQueue {}

impl PackedQueue {
    /// A queue in `region` at byte `offset` (4096-aligned, leaving
    /// `layout.len` bytes); the memory is zeroed here.
    pub fn new(
        region: &DmaRegion,
        offset: usize,
        layout: PackedLayout,
    ) -> Result<PackedQueue, Error> {
        let (base, iova_base) = crate::driver::split::ring_memory(region, offset, layout.len)?;
        let n = layout.size as usize;
        // SAFETY: `ring_memory` checked the layout's `len` bytes at `base`
        // are inside the region, which outlives the queue; the ring and
        // the two event areas are within them, 16- and 4-aligned.
        let ring = unsafe {
            PackedView::new(
                base,
                base.add(layout.driver),
                base.add(layout.device),
                layout.size,
            )
        };
        Ok(PackedQueue {
            base,
            ring,
            iova_base,
            layout,
            next_avail: 0,
            avail_wrap: true,
            next_used: 0,
            used_wrap: true,
            free_slots: n,
            free_ids: (0..layout.size).rev().collect(),
            tokens: vec![None; n],
            chain: vec![1; n],
            chains: 0,
            batch: FlagBatch::default(),
            in_order: false,
            batch_end: None,
            broken: false,
        })
    }

    /// Uses descriptors in order (VIRTIO_F_IN_ORDER was negotiated); call
    /// before the queue is used.
    pub fn set_in_order(&mut self, on: bool) {
        self.in_order = on;
    }

    /// A buffer id for a buffer about to start at `next_avail`.
    #[inline(always)]
    fn alloc_id(&mut self) -> Option<u16> {
        if self.in_order {
            Some(self.next_avail)
        } else {
            self.free_ids.pop()
        }
    }

    /// The flags word of descriptor `slot`, which the device also
    /// accesses atomically.
    #[inline(always)]
    fn flags(&self, slot: u16) -> &AtomicU16 {
        self.ring.flags(slot)
    }

    /// The typed view of the ring, for tests that play the device.
    #[cfg(test)]
    pub(crate) fn view(&self) -> PackedView {
        self.ring
    }

    /// Whether descriptor `slot` (the next used one) holds a used buffer.
    /// Never while no buffer is in flight, whatever its flags say: the
    /// device has nothing to hand back then.
    #[inline]
    fn is_used(&self, slot: u16) -> bool {
        if self.broken || self.free_slots == self.layout.size as usize {
            return false;
        }
        // P2 (Acquire): pairs with the device's Release store of the flags.
        let f = u16::from_le(self.flags(slot).load(Ordering::Acquire));
        let w = self.used_wrap;
        (f & F_AVAIL != 0) == w && (f & F_USED != 0) == w
    }

    /// Writes descriptor `slot` and returns the flags that make it
    /// available (stored by the caller).
    #[inline]
    fn write_desc(&mut self, addr: u64, len: u32, id: u16, mut flags: u16) -> (u16, u16) {
        let slot = self.next_avail;
        if self.avail_wrap {
            flags |= F_AVAIL;
        } else {
            flags |= F_USED;
        }
        // The slot is free (counted in `free_slots`), so the device does
        // not read it until its flags say so.
        self.ring.set_desc(slot, addr, len, id);
        self.next_avail += 1;
        if self.next_avail == self.layout.size {
            self.next_avail = 0;
            self.avail_wrap = !self.avail_wrap;
        }
        self.free_slots -= 1;
        (slot, flags)
    }

    /// Takes four used buffers at once, the batch path of DPDK's packed
    /// receive in portable Rust: when the next used slot starts a cache
    /// line whose four descriptors are all used (one flags test for the
    /// line), each naming a distinct one-descriptor buffer in flight (in
    /// order: its own slot) with a length in `lens`. `None` otherwise,
    /// taking nothing: [`pop_used`](Self::pop_used) then handles the tail,
    /// chains, an in-order batch written as one descriptor, and every
    /// descriptor that breaks a rule.
    #[inline(always)]
    pub fn pop_used4(&mut self, lens: Range<u32>) -> Option<[(Mbuf, u32); 4]> {
        let (slot, size) = (self.next_used, self.layout.size);
        if slot % 4 != 0
            || self.broken
            || self.batch_end.is_some()
            || self.free_slots + 4 > size as usize
        {
            return None;
        }
        let line = self.ring.run(slot, 4)?;
        // P2, a line at a time: Acquire loads of the four flags words
        // before their ids and lengths.
        let want = if self.used_wrap { F_AVAIL | F_USED } else { 0 };
        if (0..4).any(|k| {
            u16::from_le(line.flags(k).load(Ordering::Acquire)) & (F_AVAIL | F_USED) != want
        }) {
            return None;
        }
        let used: [(u16, u32); 4] = std::array::from_fn(|k| line.used(k));
        let mut raw = [NonNull::dangling(); 4];
        for (k, &(id, len)) in used.iter().enumerate() {
            let ours = if self.in_order {
                id == slot + k as u16
            } else {
                id < size && used[..k].iter().all(|u| u.0 != id)
            };
            if !ours || !lens.contains(&len) || self.chain[id as usize] != 1 {
                return None;
            }
            raw[k] = self.tokens[id as usize]?;
        }
        for &(id, _) in &used {
            self.tokens[id as usize] = None;
            if !self.in_order {
                self.free_ids.push(id);
            }
        }
        self.advance_used(4);
        Some(std::array::from_fn(|k| {
            // SAFETY: each pointer came from `into_raw` in `push`, was in
            // flight (its token, now cleared, held it) and is distinct;
            // the device returned the buffers, so it no longer touches
            // them.
            let m = unsafe { Mbuf::from_raw(raw[k]) };
            (m, used[k].1)
        }))
    }

    /// The descriptors of buffer `id`, which came back: a chain's entry
    /// goes back to 1.
    #[inline(always)]
    fn chain_done(&mut self, id: u16) -> u16 {
        let count = self.chain[id as usize];
        if count > 1 {
            self.chain[id as usize] = 1;
            self.chains -= 1;
        }
        count
    }

    /// Moves past `count` used slots.
    #[inline(always)]
    fn advance_used(&mut self, count: u16) {
        self.next_used += count;
        if self.next_used >= self.layout.size {
            self.next_used -= self.layout.size;
            self.used_wrap = !self.used_wrap;
        }
        self.free_slots += count as usize;
    }

    /// A used descriptor naming no buffer in flight: the ring's position
    /// is lost (how many slots the device meant it to cover is unknown),
    /// so the queue breaks.
    #[cold]
    fn skip_bad(&mut self, id: u16) -> Result<(Mbuf, u32), Error> {
        self.broken = true;
        self.batch_end = None;
        Err(Error::Peer(format!(
            "packed ring: used descriptor at slot {} names buffer {id}, which is not in flight; queue stopped until restarted",
            self.next_used
        )))
    }
}

impl Ring for PackedQueue {
    /// Starts the ring over as `new` left it (wrap counters 1, every slot
    /// free), for a device that begins there (a new vhost-user backend
    /// after a reconnection): every buffer in flight returns to its pool,
    /// and their number is returned. Only while no device uses the ring.
    /// Notifications end up enabled; the caller sets them as it wants.
    fn restart(&mut self) -> usize {
        let dropped = crate::driver::split::release_tokens(&mut self.tokens);
        // SAFETY: the queue's own memory (checked in `new`), which no
        // device accesses now.
        unsafe { self.base.write_bytes(0, self.layout.len) };
        self.next_avail = 0;
        self.avail_wrap = true;
        self.next_used = 0;
        self.used_wrap = true;
        self.free_slots = self.layout.size as usize;
        self.free_ids.clear();
        self.free_ids.extend((0..self.layout.size).rev());
        self.chain.fill(1);
        self.chains = 0;
        self.batch.clear();
        self.batch_end = None;
        self.broken = false;
        dropped
    }

    /// IOVAs of the descriptor ring, the driver area and the device area.
    fn addresses(&self) -> (u64, u64, u64) {
        (
            self.iova_base,
            self.iova_base + self.layout.driver as u64,
            self.iova_base + self.layout.device as u64,
        )
    }

    /// Entries.
    fn size(&self) -> u16 {
        self.layout.size
    }

    /// Buffers that can be added now (one descriptor each).
    fn free(&self) -> usize {
        if self.broken {
            0
        } else if self.in_order {
            self.free_slots
        } else {
            self.free_slots.min(self.free_ids.len())
        }
    }

    /// Asks the device not to interrupt (we poll), or to interrupt on the
    /// next used buffer.
    fn set_interrupts(&mut self, on: bool) {
        let flags = if on { EVENT_ENABLE } else { EVENT_DISABLE };
        // The driver event area's flags, ours to write.
        self.ring.set_driver_flags(flags);
        // P4: the arming before the caller's next look at the ring (pairs
        // with the device's fence between writing a used descriptor and
        // reading our event flags), so a buffer used just before the
        // arming is either seen or interrupts.
        crate::driver::split::full_fence();
    }

    /// Whether a used buffer waits.
    fn has_used(&self) -> bool {
        self.is_used(self.next_used)
    }

    /// Buffers the device has marked used that were not taken yet: 1 if
    /// the next one is (a packed ring's used descriptors can be counted
    /// only by walking them, which a restart after a fault of the device
    /// does not trust), else 0.
    fn completed_unread(&self) -> usize {
        let f = u16::from_le(self.flags(self.next_used).load(Ordering::Acquire));
        let w = self.used_wrap;
        usize::from(
            self.free_slots != self.layout.size as usize
                && (f & F_AVAIL != 0) == w
                && (f & F_USED != 0) == w,
        )
    }

    /// Takes the mbufs in flight out of the queue, which must not be used
    /// afterwards (see [`Tokens`](crate::driver::split::Tokens)).
    fn take_tokens(&mut self) -> crate::driver::split::Tokens {
        crate::driver::split::Tokens::take(&mut self.tokens)
    }

    /// Whether the device broke the protocol (see the `broken` field).
    fn is_broken(&self) -> bool {
        self.broken
    }

    /// Adds `m` as one descriptor (device-writable for RX), without
    /// publishing; gives `m` back when the ring is full.
    #[inline(always)]
    fn push(&mut self, m: Mbuf, addr: u64, len: u32, device_writes: bool) -> Result<(), Mbuf> {
        if self.free_slots == 0 || self.broken {
            return Err(m);
        }
        let Some(id) = self.alloc_id() else {
            return Err(m);
        };
        let w = if device_writes { VRING_DESC_F_WRITE } else { 0 };
        let (slot, f) = self.write_desc(addr, len, id, w);
        self.batch.put(&self.ring, slot, f);
        self.tokens[id as usize] = Some(m.into_raw());
        Ok(())
    }

    /// Adds a chain of descriptors (one per `(address, length)`, linked
    /// with NEXT, all carrying the buffer id) holding `m`; those from index
    /// `writable_from` on are device-writable.
    fn push_chain(
        &mut self,
        m: Mbuf,
        segs: &[(u64, u32)],
        writable_from: usize,
    ) -> Result<(), Mbuf> {
        let n = segs.len();
        if n == 0 || n > self.free() || n > crate::driver::split::MAX_CHAIN {
            return Err(m);
        }
        let Some(id) = self.alloc_id() else {
            return Err(m);
        };
        // Flags in ring order: the burst's first is held back until
        // `publish`, so the device never sees half a chain.
        for (k, &(addr, len)) in segs.iter().enumerate() {
            let next = if k + 1 < n { VRING_DESC_F_NEXT } else { 0 };
            let w = if k >= writable_from {
                VRING_DESC_F_WRITE
            } else {
                0
            };
            let (slot, f) = self.write_desc(addr, len, id, w | next);
            self.batch.put(&self.ring, slot, f);
        }
        self.tokens[id as usize] = Some(m.into_raw());
        if n > 1 {
            self.chain[id as usize] = n as u16;
            self.chains += 1;
        }
        Ok(())
    }

    /// Adds up to `count` one-segment mbufs from the front of `bufs`, one
    /// descriptor each (`desc(m)`: its address and length), as far as the
    /// ring has room and until `desc` refuses one (`None`), without
    /// publishing; returns how many it took (they leave `bufs`, in
    /// order). In order (§2.8.9), a buffer's id is its slot, so the
    /// burst goes in as runs of consecutive slots: every
    /// descriptor of a run written first, then the ids' tokens and the
    /// flags (the batched half of DPDK's packed enqueue, in portable
    /// Rust). Other queues go through [`push`](Self::push) one by one.
    #[inline(always)]
    fn push_run<const N: usize>(
        &mut self,
        bufs: &mut Burst<Mbuf, N>,
        count: usize,
        device_writes: bool,
        mut desc: impl FnMut(&mut Mbuf) -> Option<(u64, u32)>,
    ) -> usize {
        let want = count.min(bufs.len()).min(self.free());
        if !self.in_order {
            let push = |m, a, l| self.push(m, a, l, device_writes);
            return crate::driver::split::push_each(bufs, want, desc, push);
        }
        let w = if device_writes { VRING_DESC_F_WRITE } else { 0 };
        let mut done = 0;
        while done < want {
            let slot = self.next_avail;
            let run = (want - done).min(usize::from(self.layout.size - slot));
            let f = w | if self.avail_wrap { F_AVAIL } else { F_USED };
            let Some(descs) = self.ring.run(slot, run) else {
                break;
            };
            let mbufs = &mut bufs[..run];
            // The slots are free (counted in `free_slots`): the device
            // reads none of them before its flags say so.
            // Indexed by the run's own length, so that the run's bound
            // test folds into the loop's (an iterator over `mbufs` kept one
            // per descriptor: `benches/virtio_instr.sh`).
            let mut k = 0;
            while k < descs.len() {
                let Some((addr, len)) = desc(&mut mbufs[k]) else {
                    break;
                };
                descs.set_desc(k, addr, len, slot + k as u16);
                k += 1;
            }
            // A buffer `desc` refused ends the run, and the push.
            let (run, stop) = (k, k < run);
            let descs = descs.first(run);
            let mbufs = &bufs[..run];
            let from = usize::from(slot);
            let tokens = &mut self.tokens[from..from + run];
            for (k, m) in mbufs.iter().enumerate() {
                // SAFETY: a bitwise copy of an mbuf of `bufs`, which
                // forgets the run's mbufs right after this loop: the token
                // becomes its one owner. Nothing in between can panic.
                tokens[k] = Some(unsafe { std::ptr::read(m) }.into_raw());
            }
            // SAFETY: the first `run` mbufs were moved into tokens above.
            unsafe { bufs.forget_front(run) };
            self.batch.put_run(&descs, slot, f);
            self.next_avail += run as u16;
            if self.next_avail == self.layout.size {
                self.next_avail = 0;
                self.avail_wrap = !self.avail_wrap;
            }
            self.free_slots -= run;
            done += run;
            if stop {
                break;
            }
        }
        done
    }

    /// Publishes what `push` added; returns whether the device wants a
    /// notification.
    #[inline]
    fn publish(&mut self) -> bool {
        // P1.
        if !self.batch.publish(&self.ring) {
            return false;
        }
        // P3: publication before reading what the device asks for.
        crate::driver::split::full_fence();
        // The device event area's flags, which the device writes.
        self.ring.device_flags() != EVENT_DISABLE
    }

    /// Takes the next used buffer: the mbuf and the length the device
    /// wrote. A used descriptor naming no buffer in flight is an error (a
    /// misbehaving peer); it is skipped.
    #[inline(always)]
    fn pop_used(&mut self) -> Option<Result<(Mbuf, u32), Error>> {
        let slot = self.next_used;
        let (len, id) = if let Some(end) = self.batch_end {
            // In order: the rest of a batch whose used descriptor named
            // `end`; these buffers' own slots were not written.
            if end == slot {
                self.batch_end = None;
            }
            (0, slot)
        } else {
            if !self.is_used(slot) {
                return None;
            }
            // A used descriptor, written by the device before the flags
            // read in `is_used`.
            let (id, len) = self.ring.used(slot);
            if self.in_order && id != slot {
                // §2.8.9: one used descriptor for a batch ending at buffer
                // `id`, which must be in flight; this slot's buffer is the
                // batch's first.
                if id >= self.layout.size || self.tokens[id as usize].is_none() {
                    return Some(self.skip_bad(id));
                }
                self.batch_end = Some(id);
                (0, slot)
            } else {
                (len, id)
            }
        };
        let tok = (id < self.layout.size)
            .then(|| self.tokens[id as usize].take())
            .flatten();
        let Some(p) = tok else {
            self.batch_end = None;
            return Some(self.skip_bad(id));
        };
        let count = self.chain_done(id);
        self.advance_used(count);
        if !self.in_order {
            self.free_ids.push(id);
        }
        // SAFETY: `p` came from `into_raw` in `push`, and the device
        // returned the buffer, so it no longer touches it.
        Some(Ok((unsafe { Mbuf::from_raw(p) }, len)))
    }

    /// Takes used one-descriptor buffers into `out`, whole lines of four
    /// at a time, up to `room` of them, each with a length in `lens`:
    /// each goes to `accept` with its length first, and one it refuses is
    /// dropped (back to its pool). Stops at the first line that is not
    /// whole, for `pop_used` to go on. Returns how many went into `out`,
    /// and how many were refused.
    #[inline(always)]
    fn pop_used_lines<const N: usize>(
        &mut self,
        out: &mut Burst<Mbuf, N>,
        room: usize,
        lens: Range<u32>,
        accept: impl FnMut(&mut Mbuf, u32) -> bool,
    ) -> (usize, usize) {
        if self.in_order && self.chains == 0 {
            return self.lines_in_order(out, room, lens, accept);
        }
        self.lines_by_id(out, room, lens, accept)
    }

    /// Takes every used buffer that fits in `out`; returns how many used
    /// descriptors named no buffer in flight (at most one: the queue then
    /// breaks).
    #[inline]
    fn reclaim_into<const N: usize>(&mut self, out: &mut Burst<Mbuf, N>) -> usize {
        if self.in_order {
            return self.reclaim_in_order(out);
        }
        let mut bad = 0;
        while !out.is_full() {
            match self.pop_used() {
                Some(Ok((m, _))) => {
                    let _ = out.push(m);
                }
                Some(Err(_)) => bad += 1,
                None => break,
            }
        }
        bad
    }
}

impl PackedQueue {
    /// `reclaim_into` in order: buffers complete in ring order, a used
    /// descriptor naming buffer `id` completing every buffer up to `id`;
    /// the mbufs go straight into the burst's free slots.
    #[inline]
    fn reclaim_in_order<const N: usize>(&mut self, out: &mut Burst<Mbuf, N>) -> usize {
        let mut bad = 0;
        let spare = out.spare_capacity_mut();
        let mut k = 0;
        while k < spare.len() {
            let slot = self.next_used;
            let end = match self.batch_end {
                Some(e) => e,
                None => {
                    if !self.is_used(slot) {
                        break;
                    }
                    // The id of a used descriptor, written by the device
                    // before the flags read in `is_used`.
                    let id = self.ring.id(slot);
                    if id >= self.layout.size || self.tokens[id as usize].is_none() {
                        let _ = self.skip_bad(id);
                        bad += 1;
                        break;
                    }
                    id
                }
            };
            // Up to `end`, one-descriptor buffers go as a run (the device
            // usually writes one used descriptor for a whole burst).
            let span = if end >= slot {
                end - slot + 1
            } else {
                self.layout.size - slot
            };
            let taken = self.take_run(slot, usize::from(span), &mut spare[k..]);
            if taken > 0 {
                k += taken;
                let last = slot + taken as u16 - 1;
                self.batch_end = (last != end).then_some(end);
                self.advance_used(taken as u16);
                continue;
            }
            // A chain's first slot, or a slot holding no buffer.
            let Some(p) = self.tokens[slot as usize].take() else {
                let _ = self.skip_bad(slot);
                bad += 1;
                break;
            };
            // SAFETY: `p` came from `into_raw` in `push`; the device used
            // the buffer (in order, everything up to `end`).
            spare[k].write(unsafe { Mbuf::from_raw(p) });
            k += 1;
            self.batch_end = (slot != end).then_some(end);
            let count = self.chain_done(slot);
            self.advance_used(count);
        }
        // SAFETY: the first `k` spare slots were written above, and `k` is
        // at most the spare capacity.
        unsafe { out.assume_init_back(k) };
        bad
    }
}

impl PackedQueue {
    /// Takes the buffers of the `span` completed slots from `slot` into
    /// `out` while each is one descriptor, stopping at a chain or a slot
    /// holding no buffer (for the one-by-one path to judge); returns how
    /// many it took.
    #[inline(always)]
    fn take_run(&mut self, slot: u16, span: usize, out: &mut [MaybeUninit<Mbuf>]) -> usize {
        let from = usize::from(slot);
        let n = span.min(out.len());
        let tokens = &mut self.tokens[from..from + n];
        let mut k = 0;
        if self.chains == 0 {
            // Every slot in flight holds a one-descriptor buffer.
            while k < n {
                let Some(p) = tokens[k].take() else { break };
                // SAFETY: `p` came from `into_raw` in a push; the device
                // used the buffer (in order, every buffer up to the run's
                // end).
                out[k].write(unsafe { Mbuf::from_raw(p) });
                k += 1;
            }
            return k;
        }
        let chain = &self.chain[from..from + n];
        while k < n && chain[k] == 1 {
            let Some(p) = tokens[k].take() else { break };
            // SAFETY: `p` came from `into_raw` in a push; the device used
            // the buffer (in order, every buffer up to the run's end).
            out[k].write(unsafe { Mbuf::from_raw(p) });
            k += 1;
        }
        k
    }
}

impl PackedQueue {
    /// `pop_used_lines` for any queue, a line at a time through
    /// [`pop_used4`](Self::pop_used4).
    #[inline(always)]
    fn lines_by_id<const N: usize>(
        &mut self,
        out: &mut Burst<Mbuf, N>,
        room: usize,
        lens: Range<u32>,
        mut accept: impl FnMut(&mut Mbuf, u32) -> bool,
    ) -> (usize, usize) {
        let spare = out.spare_capacity_mut();
        let room = room.min(spare.len());
        let (mut n, mut refused) = (0, 0);
        while n + 4 <= room {
            let Some(four) = self.pop_used4(lens.clone()) else {
                break;
            };
            for (mut m, len) in four {
                if accept(&mut m, len) {
                    spare[n].write(m);
                    n += 1;
                } else {
                    refused += 1;
                }
            }
        }
        // SAFETY: the first `n` spare slots were written above, and `n` is
        // at most the spare capacity.
        unsafe { out.assume_init_back(n) };
        (n, refused)
    }

    /// `pop_used_lines` in order with no chain in flight: every slot in
    /// flight holds the one-descriptor buffer whose id is the slot, so a
    /// line is whole when its four flags say used and each descriptor
    /// names its own slot; its tokens are taken as a run. The flags,
    /// ids and lengths are each tested for the line at once, and the
    /// ring's position kept in locals until the end (DPDK's packed
    /// batch receive does the same tests with vector compares).
    #[inline(always)]
    fn lines_in_order<const N: usize>(
        &mut self,
        out: &mut Burst<Mbuf, N>,
        room: usize,
        lens: Range<u32>,
        mut accept: impl FnMut(&mut Mbuf, u32) -> bool,
    ) -> (usize, usize) {
        if self.broken || self.batch_end.is_some() {
            return (0, 0);
        }
        let spare = out.spare_capacity_mut();
        let room = room.min(spare.len());
        let size = usize::from(self.layout.size);
        let (mut slot, mut wrap) = (usize::from(self.next_used), self.used_wrap);
        let mut in_flight = size - self.free_slots;
        let span = lens.end.wrapping_sub(lens.start);
        let (mut n, mut refused, mut taken) = (0, 0, 0);
        while n + 4 <= room && in_flight >= 4 {
            let Some(line) = self.ring.four(slot as u16) else {
                break;
            };
            // P2, a line at a time: Acquire loads of the four flags words
            // before their ids and lengths.
            let f: [u16; 4] =
                std::array::from_fn(|k| u16::from_le(line.flags(k).load(Ordering::Acquire)));
            let mask = F_AVAIL | F_USED;
            let used = match wrap {
                true => f[0] & f[1] & f[2] & f[3] & mask == mask,
                false => (f[0] | f[1] | f[2] | f[3]) & mask == 0,
            };
            if !used {
                break;
            }
            let d: [(u16, u32); 4] = std::array::from_fn(|k| line.used(k));
            let ids = d
                .iter()
                .enumerate()
                .fold(0, |acc, (k, &(id, _))| acc | (id ^ (slot + k) as u16));
            let fit = d
                .iter()
                .all(|&(_, len)| len.wrapping_sub(lens.start) < span);
            if ids != 0 || !fit {
                break;
            }
            let tokens = &mut self.tokens[slot..slot + 4];
            let [Some(p0), Some(p1), Some(p2), Some(p3)] = *tokens else {
                break;
            };
            tokens.fill(None);
            slot += 4;
            in_flight -= 4;
            taken += 4;
            if slot == size {
                slot = 0;
                wrap = !wrap;
            }
            // SAFETY: each pointer came from `into_raw` in a push and its
            // token is now cleared; the device used the buffers (each
            // descriptor named its own slot), so it no longer touches them.
            let mut four = [p0, p1, p2, p3].map(|p| unsafe { Mbuf::from_raw(p) });
            let kept: [bool; 4] = std::array::from_fn(|k| accept(&mut four[k], d[k].1));
            if kept == [true; 4] {
                for (dst, m) in spare[n..n + 4].iter_mut().zip(four) {
                    dst.write(m);
                }
                n += 4;
                continue;
            }
            for (m, keep) in four.into_iter().zip(kept) {
                if keep {
                    spare[n].write(m);
                    n += 1;
                } else {
                    refused += 1;
                }
            }
        }
        self.next_used = slot as u16;
        self.used_wrap = wrap;
        self.free_slots += taken;
        // SAFETY: the first `n` spare slots were written above, and `n` is
        // at most the spare capacity.
        unsafe { out.assume_init_back(n) };
        (n, refused)
    }
}

impl Drop for PackedQueue {
    fn drop(&mut self) {
        crate::driver::split::release_tokens(&mut self.tokens);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::split::test_memory;

    /// A restart mid-lap: the buffers in flight go back to the pool and
    /// the ring begins again at slot 0 with wrap counter 1.
    #[test]
    fn restart_returns_buffers_and_begins_at_slot_zero() {
        let (region, pool) = test_memory("pqr", 16);
        let mut q = PackedQueue::new(&region, 0, PackedLayout::new(4).unwrap()).unwrap();
        for _ in 0..3 {
            let m = pool.get().unwrap();
            let a = m.data_iova().raw();
            q.push(m, a, 100, true).unwrap();
        }
        q.publish();
        assert_eq!(pool.available(), 13);
        assert_eq!(q.restart(), 3);
        assert_eq!(pool.available(), 16);
        assert_eq!(q.free(), 4);
        let m = pool.get().unwrap();
        let a = m.data_iova().raw();
        q.push(m, a, 100, true).unwrap();
        q.publish();
        let f = q.view().flags(0).load(Ordering::Acquire);
        assert_eq!(f & (F_AVAIL | F_USED), F_AVAIL, "slot 0, wrap counter 1");
    }

    /// In order (§2.8.9): one used descriptor for a batch of three
    /// buffers (the middle one a chain) hands all three back, in order,
    /// and the next used descriptor is looked for after the batch.
    #[test]
    fn in_order_batches_complete_with_one_used_descriptor() {
        let (region, pool) = test_memory("pqi", 16);
        let mut q = PackedQueue::new(&region, 0, PackedLayout::new(8).unwrap()).unwrap();
        q.set_in_order(true);
        let v = q.view();
        let set_used = |s: u16, id: u16, wrap: bool| {
            let f = if wrap { F_AVAIL | F_USED } else { 0 };
            // The test plays the device: the id, then the flags (Release).
            let (_, len, _) = v.desc(s);
            v.set_used(s, id, len);
            v.flags(s).store(f, Ordering::Release);
        };
        let mut tag = 0u8;
        let mut push = |q: &mut PackedQueue, chain: bool| {
            let mut m = pool.get().unwrap();
            m.append(1).unwrap()[0] = tag;
            tag += 1;
            if chain {
                q.push_chain(m, &[(0x1000, 10), (0x2000, 20)], 2).unwrap();
            } else {
                let a = m.data_iova().raw();
                q.push(m, a, 100, false).unwrap();
            }
        };
        push(&mut q, false);
        push(&mut q, true);
        push(&mut q, false);
        q.publish();
        assert_eq!(q.free(), 4);
        // Buffers sit at slots 0, 1-2 and 3; the device writes one used
        // descriptor at slot 0 naming buffer 3.
        set_used(0, 3, true);
        let mut got = Vec::new();
        while let Some(r) = q.pop_used() {
            got.push(r.unwrap().0.data().first().copied());
        }
        assert_eq!(got, vec![Some(0), Some(1), Some(2)]);
        assert_eq!(q.free(), 8);
        assert!(q.pop_used().is_none(), "slot 4 is not used yet");
        // The same through reclaim_into (the TX path): two buffers at
        // slots 4 and 5, one used descriptor naming 5.
        push(&mut q, false);
        push(&mut q, false);
        q.publish();
        set_used(4, 5, true);
        let mut b: Burst<Mbuf, 8> = Burst::new();
        assert_eq!(q.reclaim_into(&mut b), 0);
        let tags: Vec<u8> = b.iter().map(|m| m.data()[0]).collect();
        assert_eq!(tags, vec![3, 4]);
        drop(b);
        assert_eq!(q.free(), 8);
        // A batch naming a buffer not in flight is an error, skipped.
        push(&mut q, false);
        q.publish();
        set_used(6, 0, true);
        assert!(q.pop_used().unwrap().is_err());
    }

    /// In order, bursts go in as runs of consecutive slots (ids are
    /// slots; the first flags held back until `publish`), as far as the
    /// ring has room; one used descriptor naming the last buffer hands
    /// them back across the wrap in pieces as small as the caller's
    /// burst, a chain among them taken on its own.
    #[test]
    fn in_order_runs_go_in_and_come_back_across_the_wrap() {
        let (region, pool) = test_memory("pqrun", 32);
        let mut q = PackedQueue::new(&region, 0, PackedLayout::new(8).unwrap()).unwrap();
        q.set_in_order(true);
        let v = q.view();
        // The test plays the device: the id, then the flags (Release).
        let set_used = |s: u16, id: u16, wrap: bool| {
            v.set_used(s, id, 0);
            let f = if wrap { F_AVAIL | F_USED } else { 0 };
            v.flags(s).store(f, Ordering::Release);
        };
        let desc = |m: &mut Mbuf| Some((m.data_iova().raw(), 100));
        let mut tag = 0u8;
        let mut fill = |n: usize| {
            let mut b: Burst<Mbuf, 8> = Burst::new();
            for _ in 0..n {
                let mut m = pool.get().unwrap();
                m.append(1).unwrap()[0] = tag;
                tag += 1;
                b.push(m).unwrap();
            }
            b
        };
        let tags = |b: &Burst<Mbuf, 8>| b.iter().map(|m| m.data()[0]).collect::<Vec<_>>();
        let avail = |s: u16, wrap: bool| {
            let f = v.flags(s).load(Ordering::Acquire);
            (f & F_AVAIL != 0) == wrap && (f & F_USED != 0) != wrap
        };
        // Slots 0-4 (tags 0-4), back through one used descriptor.
        let mut b = fill(5);
        let first = b[0].data_iova().raw();
        assert_eq!(q.push_run(&mut b, 5, false, desc), 5);
        assert!(b.is_empty());
        assert_eq!(v.desc(0), (first, 100, 0));
        assert_eq!(v.desc(4).2, 4, "in order, a buffer's id is its slot");
        assert!(!avail(0, true), "the first flags wait for publish");
        assert!((1..5).all(|s| avail(s, true)));
        q.publish();
        assert!(avail(0, true));
        set_used(0, 4, true);
        let mut out: Burst<Mbuf, 8> = Burst::new();
        assert_eq!(q.reclaim_into(&mut out), 0);
        assert_eq!(tags(&out), vec![0, 1, 2, 3, 4]);
        out.clear();
        // Slots 5-6 (5, 6), a chain at 7 and 0 (7), then 1-2 (8, 9) and,
        // of four more, the two the ring has room for (3-4: 10, 11).
        let mut b = fill(2);
        assert_eq!(q.push_run(&mut b, 2, false, desc), 2);
        let m = fill(1).pop().unwrap();
        q.push_chain(m, &[(0x1000, 10), (0x2000, 20)], 2).unwrap();
        let mut b = fill(2);
        assert_eq!(q.push_run(&mut b, 2, false, desc), 2);
        let mut b = fill(4);
        assert_eq!(q.push_run(&mut b, 4, false, desc), 2, "room for two");
        assert_eq!(tags(&b), vec![12, 13], "the rest stay, in order");
        assert_eq!(q.free(), 0);
        assert_eq!(v.desc(1).2, 1);
        q.publish();
        assert!((5..8).all(|s| avail(s, true)) && (0..5).all(|s| avail(s, false)));
        // One used descriptor at slot 5 names the last buffer (slot 4).
        set_used(5, 4, true);
        let mut small: Burst<Mbuf, 3> = Burst::new();
        let mut got = Vec::new();
        for want in [3, 3, 1, 0] {
            assert_eq!(q.reclaim_into(&mut small), 0);
            assert_eq!(small.len(), want);
            got.extend(small.iter().map(|m| m.data()[0]));
            small.clear();
        }
        assert_eq!(got, vec![5, 6, 7, 8, 9, 10, 11]);
        assert_eq!(q.free(), 8);
        drop(b);
        drop(q);
        assert_eq!(pool.available(), 32);
    }

    /// A burst becomes visible at once: nothing of six descriptors shows
    /// (the first one's flags are held back, the others are stored) until
    /// `publish`, which shows all of them; a chain is published whole.
    #[test]
    fn a_burst_is_published_at_once_first_flags_last() {
        let (region, pool) = test_memory("pl", 64);
        let mut q = PackedQueue::new(&region, 0, PackedLayout::new(16).unwrap()).unwrap();
        let v = q.view();
        let avail = |s: u16| {
            // The test reads the flags as a device would.
            let f = v.flags(s).load(Ordering::Acquire);
            f & F_AVAIL != 0 && f & F_USED == 0
        };
        let push = |q: &mut PackedQueue| {
            let m = pool.get().unwrap();
            let a = m.data_iova().raw();
            q.push(m, a, 100, false).unwrap();
        };
        for _ in 0..6 {
            push(&mut q);
        }
        // The device reads in ring order: the first one's flags hide all.
        assert!(!avail(0), "the burst's first flags wait for publish");
        assert!((1..6).all(avail), "the others are written");
        assert!(q.publish(), "device events enabled: kick");
        assert!((0..6).all(avail));
        assert!(!q.publish(), "nothing new to publish");
        let m = pool.get().unwrap();
        let a = m.data_iova().raw();
        q.push_chain(m, &[(a, 10), (a + 10, 10), (a + 20, 10)], 3)
            .unwrap();
        assert!(!avail(6), "a chain's head is its burst's first");
        assert!(q.publish());
        assert!((6..9).all(avail));
    }

    /// Plays the device: takes available descriptors in ring order and
    /// writes them back used, in reverse order of buffers.
    #[test]
    fn buffers_and_chains_round_trip_across_the_wrap() {
        let (region, pool) = test_memory("pq", 64);
        let l = PackedLayout::new(4).unwrap();
        let mut q = PackedQueue::new(&region, 0, l).unwrap();
        let v = q.view();
        // The test plays the device on its own memory.
        let flags = |s: usize| v.flags(s as u16).load(Ordering::Acquire);
        let set_used = |s: usize, id: u16, len: u32, wrap: bool| {
            let f = if wrap { F_AVAIL | F_USED } else { 0 };
            // The flags last, with Release, as a device.
            v.set_used(s as u16, id, len);
            v.flags(s as u16).store(f, Ordering::Release);
        };
        let id_at = |s: usize| v.id(s as u16);
        let mut device_wrap = true;
        let mut slot = 0usize;
        for round in 0..3u8 {
            for k in 0..3u8 {
                let mut m = pool.get().unwrap();
                m.append(1).unwrap()[0] = round * 10 + k;
                let a = m.data_iova().raw();
                q.push(m, a, 100, true).unwrap();
            }
            assert!(q.batch.is_pending());
            assert!(q.publish(), "device events enabled: kick");
            // The device sees three available descriptors.
            let mut ids = Vec::new();
            for _ in 0..3 {
                let f = flags(slot % 4);
                let avail = (f & F_AVAIL != 0) == device_wrap && (f & F_USED != 0) != device_wrap;
                assert!(avail, "slot {} flags {f:#x}", slot % 4);
                ids.push(id_at(slot % 4));
                slot += 1;
                if slot % 4 == 0 {
                    device_wrap = !device_wrap;
                }
            }
            // Used in reverse order, written from the first used slot on.
            let mut used_slot = slot - 3;
            let mut w = (used_slot / 4) % 2 == 0;
            for (j, id) in ids.iter().rev().enumerate() {
                set_used(used_slot % 4, *id, 10 + j as u32, w);
                used_slot += 1;
                if used_slot % 4 == 0 {
                    w = !w;
                }
            }
            let mut got = Vec::new();
            while let Some(r) = q.pop_used() {
                let (m, len) = r.unwrap();
                got.push((m.data()[0], len));
            }
            assert_eq!(
                got,
                vec![(round * 10 + 2, 10), (round * 10 + 1, 11), (round * 10, 12)]
            );
            assert_eq!(q.free(), 4);
        }
        // A chain of two takes two slots and comes back as one buffer.
        let m = pool.get().unwrap();
        q.push_chain(m, &[(0x1000, 10), (0x2000, 20)], 2).unwrap();
        assert_eq!(q.free(), 2);
        q.publish();
        let id = id_at(slot % 4);
        assert_eq!(flags(slot % 4) & VRING_DESC_F_NEXT, VRING_DESC_F_NEXT);
        let w = (slot / 4) % 2 == 0;
        set_used(slot % 4, id, 30, w);
        assert!(q.pop_used().unwrap().is_ok());
        assert_eq!(q.free(), 4);
        // With nothing in flight, a used descriptor is not even looked at
        // (one naming a buffer not in flight while others are breaks the
        // queue: `used_descriptors_naming_no_buffer_in_flight_...`).
        let slot = slot + 2;
        set_used(slot % 4, 3, 1, (slot / 4) % 2 == 0);
        assert!(q.pop_used().is_none());
        assert_eq!(q.free(), 4);
        drop(q);
        assert_eq!(pool.available(), 64);
    }

    /// Issue 21: a packed queue of `size` with `n` single RX buffers
    /// (tagged 0..n) posted and published.
    fn posted(
        name: &str,
        size: u16,
        in_order: bool,
        n: u8,
    ) -> (
        DmaRegion,
        rpmd_pmd::Mempool,
        PackedQueue,
        crate::driver::testdev::PackedDevice,
    ) {
        let (region, pool) = test_memory(name, 16);
        let l = PackedLayout::new(size).unwrap();
        let mut q = PackedQueue::new(&region, 0, l).unwrap();
        q.set_in_order(in_order);
        for i in 0..n {
            let mut m = pool.get().unwrap();
            m.append(1).unwrap()[0] = i;
            let a = m.data_iova().raw();
            q.push(m, a, 100, true).unwrap();
        }
        q.publish();
        let dev = crate::driver::testdev::PackedDevice::new(region.as_ptr(), l);
        (region, pool, q, dev)
    }

    /// Used flags where nothing is in flight are not a completion: the
    /// ring's free count never passes its size.
    #[test]
    fn used_flags_with_nothing_in_flight_are_ignored() {
        for in_order in [false, true] {
            let (_region, pool, mut q, dev) = posted("pqh1", 4, in_order, 0);
            dev.write_used(0, 0, 64, true);
            assert!(!q.has_used());
            assert!(q.pop_used().is_none());
            let mut out: Burst<Mbuf, 8> = Burst::new();
            assert_eq!(q.reclaim_into(&mut out), 0);
            assert_eq!(q.free(), 4);
            assert!(!q.is_broken());
            drop(q);
            assert_eq!(pool.available(), 16);
        }
    }

    /// A used descriptor naming a buffer not in flight (out of range, or
    /// one already handed back) breaks the queue, on both completion
    /// paths and in both modes: the buffers still in flight stay with the
    /// queue until a restart returns them.
    #[test]
    fn used_descriptors_naming_no_buffer_in_flight_break_the_queue() {
        for in_order in [false, true] {
            for dup in [false, true] {
                for reclaim in [false, true] {
                    let (_region, pool, mut q, mut dev) = posted("pqh2", 8, in_order, 3);
                    assert!((0..3).all(|s| dev.is_avail(s, true)));
                    let id0 = dev.desc(0).id_or_next;
                    dev.complete(id0, 60, 1);
                    let bad = if dup { id0 } else { 200 };
                    dev.complete(bad, 60, 1);
                    let mut out: Burst<Mbuf, 8> = Burst::new();
                    let case = format!("in_order {in_order} dup {dup} reclaim {reclaim}");
                    if reclaim {
                        assert_eq!(q.reclaim_into(&mut out), 1, "{case}");
                        assert_eq!(out.len(), 1, "{case}: the good one");
                    } else {
                        assert!(q.pop_used().unwrap().is_ok(), "{case}");
                        assert!(matches!(q.pop_used(), Some(Err(Error::Peer(_)))));
                        assert!(q.pop_used().is_none(), "{case}");
                    }
                    drop(out);
                    assert!(q.is_broken(), "{case}");
                    assert_eq!(q.free(), 0);
                    let m = pool.get().unwrap();
                    assert!(q.push(m, 0, 64, true).is_err(), "{case}");
                    assert_eq!(pool.available(), 14, "{case}: 2 still in flight");
                    assert_eq!(q.restart(), 2);
                    assert_eq!(pool.available(), 16);
                }
            }
        }
    }

    /// The batched receive takes a line of four used one-buffer
    /// descriptors at once, and takes nothing, leaving it to `pop_used`,
    /// when the line is incomplete, a length reaches the limit, an id is
    /// not the buffer the line can hold (in order: its own slot; else a
    /// repeated id) or the next used slot does not start a line.
    #[test]
    fn four_used_buffers_are_taken_as_a_line_or_not_at_all() {
        for in_order in [false, true] {
            let (_region, pool, mut q, mut dev) = posted("pq4", 16, in_order, 12);
            let ids: Vec<u16> = (0..12).map(|s| dev.desc(s).id_or_next).collect();
            for (k, &id) in ids[..3].iter().enumerate() {
                dev.complete(id, 60 + k as u32, 1);
            }
            assert!(q.pop_used4(0..u32::MAX).is_none(), "three of a line");
            dev.complete(ids[3], 63, 1);
            assert!(q.pop_used4(0..63).is_none(), "a length at the limit");
            let four = q.pop_used4(0..64).expect("a whole line");
            let got: Vec<(u8, u32)> = four.iter().map(|(m, l)| (m.data()[0], *l)).collect();
            assert_eq!(got, [(0, 60), (1, 61), (2, 62), (3, 63)]);
            drop(four);
            assert_eq!(q.free(), 8);
            // Slots 4..8 with a bad id at slot 6 (out of range, or a
            // repeat); the single path judges it.
            let bad = if in_order { 200 } else { ids[4] };
            for id in [ids[4], ids[5], bad, ids[7]] {
                dev.complete(id, 70, 1);
            }
            assert!(q.pop_used4(0..u32::MAX).is_none(), "in order {in_order}");
            assert!(q.pop_used().unwrap().is_ok());
            assert!(q.pop_used4(0..u32::MAX).is_none(), "slot 5 starts no line");
            assert!(q.pop_used().unwrap().is_ok());
            assert!(matches!(q.pop_used(), Some(Err(Error::Peer(_)))));
            assert!(q.is_broken() && q.pop_used4(0..u32::MAX).is_none());
            q.restart();
            drop(q);
            assert_eq!(pool.available(), 16, "every mbuf back");
        }
    }

    /// The in-order line path: whole lines of buffers that name their own
    /// slots come out, across the ring's wrap, each length in range; a
    /// line with a length out of range, a wrong id or an unused slot
    /// stops it, leaving the line to `pop_used`; and while a chain is in
    /// flight the path gives way to the one that reads each buffer's id.
    #[test]
    fn in_order_lines_come_out_whole_and_stop_at_what_they_cannot_take() {
        let (_region, pool, mut q, mut dev) = posted("pql", 8, true, 8);
        let mut out: Burst<Mbuf, 16> = Burst::new();
        let accept = |_: &mut Mbuf, _: u32| true;
        for s in 0..8 {
            dev.complete(s, 20 + u32::from(s), 1);
        }
        assert_eq!(q.pop_used_lines(&mut out, 16, 12..64, accept), (8, 0));
        let first: Vec<u8> = out.iter().map(|m| m.data()[0]).collect();
        assert_eq!(first, (0..8).collect::<Vec<u8>>());
        assert_eq!(q.free(), 8);
        out.clear();
        // Second lap (wrap counter 0): slots 0-3 whole, 4-7 with one
        // length past the range.
        let mut refill: Burst<Mbuf, 8> = Burst::new();
        pool.get_bulk(&mut refill, 8).unwrap();
        let posted = q.push_run(&mut refill, 8, true, |m| Some((m.data_iova().raw(), 100)));
        assert_eq!(posted, 8);
        q.publish();
        for s in 0..8 {
            dev.complete(s, if s == 6 { 64 } else { 30 }, 1);
        }
        assert_eq!(q.pop_used_lines(&mut out, 16, 12..64, accept), (4, 0));
        assert_eq!(q.pop_used_lines(&mut out, 16, 12..64, accept), (0, 0));
        assert_eq!(out.len(), 4);
        for _ in 0..4 {
            assert!(matches!(q.pop_used(), Some(Ok(_))), "the rest one by one");
        }
        out.clear();
        // A chain in flight: the line path reads ids again (a line of
        // one-descriptor buffers still comes out, the chain does not).
        let m = pool.get().unwrap();
        q.push_chain(m, &[(0x1000, 10), (0x2000, 20)], 0).unwrap();
        pool.get_bulk(&mut refill, 6).unwrap();
        assert_eq!(
            q.push_run(&mut refill, 6, true, |m| Some((m.data_iova().raw(), 100))),
            6
        );
        q.publish();
        dev.complete(0, 30, 2);
        for s in 2..8 {
            dev.complete(s, 30, 1);
        }
        assert_eq!(q.pop_used_lines(&mut out, 16, 12..64, accept), (0, 0));
        assert!(matches!(q.pop_used(), Some(Ok(_))), "the chain");
        assert!(matches!(q.pop_used(), Some(Ok(_))));
        assert!(matches!(q.pop_used(), Some(Ok(_))));
        assert_eq!(q.pop_used_lines(&mut out, 16, 12..64, accept), (4, 0));
        drop(out);
        q.restart();
        drop(q);
        assert_eq!(pool.available(), 16, "every mbuf back");
    }

    /// `push_run` stops at the first buffer `desc` refuses: it and those
    /// after it stay in the burst, in order, and nothing of them is in the
    /// ring.
    #[test]
    fn a_run_stops_at_the_first_buffer_desc_refuses() {
        for in_order in [false, true] {
            let (_region, pool, mut q, _dev) = posted("pqr", 8, in_order, 0);
            let mut b = crate::driver::testdev::tagged(&pool, 0..5);
            let took = q.push_run(&mut b, 5, false, |m| {
                (m.data()[0] != 3).then(|| (m.data_iova().raw(), 1))
            });
            assert_eq!(took, 3, "in order {in_order}");
            let left = crate::driver::testdev::tags_of(&b);
            assert_eq!(left, [3, 4]);
            assert_eq!(q.free(), 5);
            drop(b);
            q.restart();
            drop(q);
            assert_eq!(pool.available(), 16);
        }
    }
}
