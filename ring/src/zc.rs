//! Zero-copy access (DPDK's `rte_ring_*_zc_*` and peek API): reserve slots,
//! write or read the values in place, then commit.
//!
//! Offered for [`Single`](crate::Single) and [`Hts`](crate::Hts) sides only,
//! where at most one operation per side is in progress, so a commit may
//! publish fewer slots than were reserved and give the rest back. The
//! reservation borrows the handle mutably; while it lives, other threads'
//! operations on the same side of an `Hts` ring wait (they spin, then yield).
//! Do not hold one across a blocking call, and do not enqueue through a
//! clone of the same handle in the same thread while it is held: that
//! thread would wait for itself.
#![allow(unsafe_code)]
use crate::mode::{Behavior, SyncMode, ZeroCopyMode};
use crate::ring::{Consumer, Producer, Shared};
use std::marker::PhantomData;

/// Slots reserved for enqueue; fill them with [`EnqueueZc::push`]. Dropping
/// or [`commit`](EnqueueZc::commit)ting publishes the values pushed so far
/// and releases the other reserved slots.
pub struct EnqueueZc<'a, T, P: SyncMode, C: SyncMode> {
    ring: &'a Shared<T, P, C>,
    start: u32,
    reserved: u32,
    written: u32,
    _handle: PhantomData<&'a mut ()>,
}

/// Values reserved for dequeue; read them in place ([`DequeueZc::get`],
/// [`DequeueZc::as_slices`]) or move them out ([`DequeueZc::take`]).
/// Dropping or [`commit`](DequeueZc::commit)ting removes the values taken so
/// far from the ring; the others stay in it, in order.
pub struct DequeueZc<'a, T, P: SyncMode, C: SyncMode> {
    ring: &'a Shared<T, P, C>,
    start: u32,
    reserved: u32,
    taken: u32,
    _handle: PhantomData<&'a mut ()>,
}

impl<T, P: ZeroCopyMode, C: SyncMode> Producer<T, P, C> {
    /// Reserves up to `n` free slots (fewer when fewer are free; maybe 0).
    pub fn enqueue_zc_burst(&mut self, n: usize) -> EnqueueZc<'_, T, P, C> {
        self.enqueue_zc(n, Behavior::Variable)
    }

    /// Reserves exactly `n` free slots, or returns `None` when fewer are
    /// free.
    pub fn enqueue_zc_bulk(&mut self, n: usize) -> Option<EnqueueZc<'_, T, P, C>> {
        let g = self.enqueue_zc(n, Behavior::Fixed);
        (g.reserved != 0 || n == 0).then_some(g)
    }

    fn enqueue_zc(&mut self, n: usize, b: Behavior) -> EnqueueZc<'_, T, P, C> {
        let n = n.min(u32::MAX as usize) as u32;
        let r = self.ring.reserve_enqueue(n, b);
        EnqueueZc {
            ring: &self.ring,
            start: r.start,
            reserved: r.n,
            written: 0,
            _handle: PhantomData,
        }
    }
}

impl<T, P: SyncMode, C: ZeroCopyMode> Consumer<T, P, C> {
    /// Reserves up to `n` values (fewer when the ring holds fewer; maybe 0).
    pub fn dequeue_zc_burst(&mut self, n: usize) -> DequeueZc<'_, T, P, C> {
        self.dequeue_zc(n, Behavior::Variable)
    }

    /// Reserves exactly `n` values, or returns `None` when the ring holds
    /// fewer.
    pub fn dequeue_zc_bulk(&mut self, n: usize) -> Option<DequeueZc<'_, T, P, C>> {
        let g = self.dequeue_zc(n, Behavior::Fixed);
        (g.reserved != 0 || n == 0).then_some(g)
    }

    fn dequeue_zc(&mut self, n: usize, b: Behavior) -> DequeueZc<'_, T, P, C> {
        let n = n.min(u32::MAX as usize) as u32;
        let r = self.ring.reserve_dequeue(n, b);
        DequeueZc {
            ring: &self.ring,
            start: r.start,
            reserved: r.n,
            taken: 0,
            _handle: PhantomData,
        }
    }
}

impl<T, P: SyncMode, C: SyncMode> EnqueueZc<'_, T, P, C> {
    /// Slots reserved.
    pub fn len(&self) -> usize {
        self.reserved as usize
    }

    /// Whether no slot was reserved.
    pub fn is_empty(&self) -> bool {
        self.reserved == 0
    }

    /// Values written so far.
    pub fn written(&self) -> usize {
        self.written as usize
    }

    /// Writes `value` straight into the next reserved slot; gives it back
    /// when all reserved slots are written.
    pub fn push(&mut self, value: T) -> Result<(), T> {
        if self.written == self.reserved {
            return Err(value);
        }
        let p = self
            .ring
            .slots
            .slot_ptr(self.start.wrapping_add(self.written));
        // SAFETY: the slot is reserved for us and still empty (`written`
        // counts the filled ones).
        unsafe { p.write(value) };
        self.written += 1;
        Ok(())
    }

    /// Publishes the values written; releases the rest of the reservation.
    pub fn commit(self) {}
}

impl<T, P: SyncMode, C: SyncMode> Drop for EnqueueZc<'_, T, P, C> {
    fn drop(&mut self) {
        if self.reserved != 0 {
            // `ready: false` is always correct (a mode that waits then
            // checks); the zero-copy modes never wait anyway.
            self.ring.publish_enqueue(self.start, self.written, false);
        }
    }
}

impl<T, P: SyncMode, C: SyncMode> DequeueZc<'_, T, P, C> {
    /// Values reserved (including those already taken).
    pub fn len(&self) -> usize {
        self.reserved as usize
    }

    /// Whether nothing was reserved.
    pub fn is_empty(&self) -> bool {
        self.reserved == 0
    }

    /// The `i`-th reserved value not yet taken, read in place.
    pub fn get(&self, i: usize) -> Option<&T> {
        let left = (self.reserved - self.taken) as usize;
        if i >= left {
            return None;
        }
        let p = self
            .ring
            .slots
            .slot_ptr(self.start.wrapping_add(self.taken + i as u32));
        // SAFETY: the slot is reserved for us and full; producers do not
        // touch it until we publish, which needs `&mut self`/`self`.
        Some(unsafe { &*p })
    }

    /// The reserved values not yet taken, in place, as two slices (the
    /// second is non-empty when the reservation wraps around the array).
    pub fn as_slices(&self) -> (&[T], &[T]) {
        let left = (self.reserved - self.taken) as usize;
        let first_idx = self.start.wrapping_add(self.taken);
        let cap = self.ring.slots_len();
        let off = (first_idx as usize) & (cap - 1);
        let first = left.min(cap - off);
        // SAFETY: both ranges are reserved, full slots (see `get`).
        unsafe {
            (
                std::slice::from_raw_parts(self.ring.slots.slot_ptr(first_idx), first),
                std::slice::from_raw_parts(self.ring.slots.slot_ptr(0), left - first),
            )
        }
    }

    /// Moves the next reserved value out.
    pub fn take(&mut self) -> Option<T> {
        if self.taken == self.reserved {
            return None;
        }
        let p = self
            .ring
            .slots
            .slot_ptr(self.start.wrapping_add(self.taken));
        self.taken += 1;
        // SAFETY: the slot is reserved and full; counting it as taken first
        // means it is never read twice.
        Some(unsafe { p.read() })
    }

    /// Removes the values taken from the ring; the others stay in it.
    pub fn commit(self) {}

    /// Removes the first `n` reserved values from the ring (at most the
    /// reservation): those taken, and any not taken, which are dropped in
    /// place. The rest stay in the ring.
    pub fn commit_n(mut self, n: usize) {
        let n = (n.min(self.reserved as usize)) as u32;
        if n > self.taken {
            // SAFETY: slots `taken..n` are reserved and full.
            unsafe {
                self.ring
                    .slots
                    .drop_range(self.start.wrapping_add(self.taken), n - self.taken)
            };
            self.taken = n;
        }
    }
}

impl<T, P: SyncMode, C: SyncMode> Drop for DequeueZc<'_, T, P, C> {
    fn drop(&mut self) {
        if self.reserved != 0 {
            // As in `EnqueueZc`'s drop.
            self.ring.publish_dequeue(self.start, self.taken, false);
        }
    }
}
