//! The driver side of a split virtqueue (virtio 1.2 §2.7) in DMA memory.
//!
//! Layout, in one region the device (or vhost-user backend) maps:
//! descriptor table (16 bytes × size, §2.7.5), available ring (flags, idx,
//! `ring[size]`, used_event; §2.7.6) and used ring (flags, idx, `ring[size]`
//! of {id, len}, avail_event; §2.7.8), each aligned as §2.7 requires.
//!
//! Buffers are mbufs: a descriptor points at an mbuf's data, and the mbuf's
//! raw handle waits in `tokens[id]` until the device returns descriptor
//! `id` through the used ring; then it becomes an `Mbuf` again. Free
//! descriptors form a stack, so completions may come in any order.
//!
//! The device can write the whole region, so what freeing and accounting
//! need is kept privately (chain links in `next`, lengths in `chain_len`,
//! the count in flight) and the device's entries are only checked
//! against it: an id not in flight is counted and skipped; a `used.idx`
//! step larger than the buffers in flight, or in order an entry naming
//! another buffer than the one due, breaks the queue (`is_broken`: it
//! refuses everything and keeps its buffers, which the device may still
//! own, until `restart`).
//!
//! Memory shared with the other side is only touched through the typed
//! view of [`crate::vring`] (volatile accesses to descriptors and ring
//! entries, atomics for the two indices): the driver publishes `avail.idx` with a Release store after
//! writing descriptors and ring entries (`V1`, pairing with the device's
//! Acquire read of it), and reads `used.idx` with an Acquire load (`V2`,
//! pairing with the device's Release store after writing used entries).
//! Before deciding whether to notify, a SeqCst fence orders the `avail.idx`
//! store before the read of `used.flags`, or of `avail_event` with
//! VIRTIO_F_EVENT_IDX (`V3`, pairing with the device's fence between
//! writing either and re-reading `avail.idx`). Arming interrupts writes
//! `avail.flags` or `used_event` and is followed by a SeqCst fence before
//! the caller looks at the used ring once more (`V4`, pairing with the
//! device's fence between publishing `used.idx` and reading them), so a
//! completion that raced with the arming is either seen or interrupts.
//!
//! With VIRTIO_F_EVENT_IDX (§2.7.7.2, §2.7.10) the device asks for a kick
//! when the avail index passes its `avail_event`, and interrupts when the
//! used index passes our `used_event`; [`need_event`] is the comparison of
//! both. While we poll, `used_event` trails the used index by one lap, so
//! the device never interrupts.
#![allow(unsafe_code)]

use crate::consts::{
    VRING_AVAIL_F_NO_INTERRUPT, VRING_DESC_F_NEXT, VRING_DESC_F_WRITE, VRING_USED_F_NO_NOTIFY,
};
use crate::driver::Ring;
use crate::vring::{DescFields, SplitView};
use crate::Error;
use rpmd_pmd::{DmaRegion, Mbuf};
use rpmd_ring::Burst;
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

/// Most descriptors in one chain (a 9000-byte frame in 2 KiB mbufs needs 5).
pub const MAX_CHAIN: usize = 32;

/// Byte offsets of the three parts in a queue's region.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// Entries (a power of two, at most 32768).
    pub size: u16,
    /// Descriptor table offset.
    pub desc: usize,
    /// Available ring offset.
    pub avail: usize,
    /// Used ring offset.
    pub used: usize,
    /// Bytes in all.
    pub len: usize,
}

impl Layout {
    /// The layout of a queue of `size` entries (§2.7: descriptors 16-byte
    /// aligned, avail 2-byte, used 4-byte; used on its own page here).
    pub fn new(size: u16) -> Result<Layout, Error> {
        if !size.is_power_of_two() || size > 32768 {
            return Err(Error::Config(format!(
                "queue size {size}: a power of two up to 32768"
            )));
        }
        let n = size as usize;
        let desc = 0;
        let avail = desc + 16 * n;
        let used = (avail + 6 + 2 * n).next_multiple_of(4096);
        let len = (used + 6 + 8 * n).next_multiple_of(4096);
        Ok(Layout {
            size,
            desc,
            avail,
            used,
            len,
        })
    }
}

/// One split virtqueue, driver side.
pub struct SplitQueue {
    base: *mut u8,
    /// The three parts, typed (the device's end uses the same view).
    ring: SplitView,
    iova_base: u64,
    layout: Layout,
    mask: u16,
    /// Next `avail.idx` to publish (shadow).
    avail_idx: u16,
    /// Next used entry to read.
    last_used: u16,
    /// `used.idx` as last read: the entries from `last_used` up to it are
    /// published, so `pop_used` reads the index (a line the device keeps
    /// writing) only once it has taken them all, as DPDK reads it once per
    /// burst. Every path that advances `last_used` stops at this value
    /// (`reclaim_into` stores the index it read here for that reason),
    /// and `restart` zeroes both.
    seen_used: u16,
    free: Vec<u16>,
    tokens: Vec<Option<NonNull<u8>>>,
    /// The `NEXT` link of each descriptor as we wrote it. The device can
    /// write the descriptor table too, so freeing a chain follows these,
    /// never the table (issue 21: a backend that rewrote links corrupted
    /// the free stack).
    next: Vec<u16>,
    /// Buffers in flight: posted and not yet completed. A `used.idx` that
    /// moves by more than this is a device error.
    in_flight: u16,
    /// The device broke the protocol in a way the queue cannot recover
    /// from by itself (a used index past what is in flight): every
    /// operation is refused until [`restart`](Self::restart).
    broken: bool,
    /// VIRTIO_F_EVENT_IDX negotiated.
    event_idx: bool,
    /// VIRTIO_F_IN_ORDER negotiated: descriptors are handed out in table
    /// order and come back in the order they were made available.
    in_order: bool,
    /// In order: the next descriptor to hand out, and how many are free.
    io_next: u16,
    io_free: usize,
    /// In order: the head descriptor of the oldest buffer in flight (the
    /// next to complete; buffers take consecutive descriptors).
    io_oldest: u16,
    /// Descriptors in the buffer each head starts (both modes; private).
    chain_len: Vec<u16>,
    /// Buffers of several descriptors in flight: while there are none,
    /// in order, the buffer due is always the next descriptor.
    chains: usize,
    /// The head made available at each avail index (mod the size): our
    /// own copy of the avail ring, which the device can write. In order,
    /// the buffer made available at index k completes as used entry k.
    heads: Vec<u16>,
    /// `avail.idx` at the last publish (for the event-index test).
    published: u16,
}

/// A full barrier between our stores to a ring and our next loads from it
/// (store→load order, which Release/Acquire do not give), against the
/// other side, which runs on another core or in another process. On
/// x86-64 a locked read-modify-write of the stack, as Linux's and DPDK's
/// `smp_mb` are: it orders ordinary (write-back) memory as `mfence` does
/// (both projects chose it over `mfence` as the cheaper of the two; not
/// measured separately here). Elsewhere a sequentially consistent fence.
#[inline(always)]
pub(crate) fn full_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: ORs zero into the word at the top of our own stack, which
    // changes neither it nor anything else (only the flags, which the asm
    // does not promise to preserve); the lock prefix makes it a full
    // barrier, and the asm block is a compiler barrier for memory.
    unsafe {
        std::arch::asm!("lock or dword ptr [rsp], 0")
    };
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(Ordering::SeqCst);
}

/// The `used.idx` of the queue at `offset` in `region` laid out as
/// `layout`, as the device last wrote it (for reprogramming a backend
/// that replaced a dead one).
pub fn used_idx(region: &DmaRegion, offset: usize, layout: &Layout) -> u16 {
    if offset + layout.len > region.len() {
        return 0;
    }
    // SAFETY: a queue inside the region (checked above), laid out as
    // `layout` (its parts aligned); the view is used for one atomic load.
    let v = unsafe {
        let base = region.as_ptr().add(offset);
        SplitView::new(
            base.add(layout.desc),
            base.add(layout.avail),
            base.add(layout.used),
            layout.size,
        )
    };
    v.used_idx(Ordering::Acquire)
}

/// §2.7.10 (`vring_need_event`): whether moving an index from `old` to
/// `new` passes `event`, i.e. `event` is in `old..new` (mod 2^16).
#[inline(always)]
pub fn need_event(event: u16, new: u16, old: u16) -> bool {
    new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
}

// SAFETY: the queue owns its slice of the region and the mbufs in flight;
// moving it to another thread moves that ownership.
unsafe impl Send for SplitQueue {}

impl SplitQueue {
    /// A queue in `region` at byte `offset` (which must leave `layout.len`
    /// bytes and be 4096-aligned); the memory is zeroed here.
    pub fn new(region: &DmaRegion, offset: usize, layout: Layout) -> Result<SplitQueue, Error> {
        let (base, iova_base) = ring_memory(region, offset, layout.len)?;
        let n = layout.size as usize;
        // SAFETY: `ring_memory` checked that the layout's `len` bytes at
        // `base` are inside the region, which outlives the queue (callers
        // keep it in an Arc beside the queue); the parts' offsets are
        // within `len` and aligned as §2.7 requires (`Layout::new`).
        let ring = unsafe {
            SplitView::new(
                base.add(layout.desc),
                base.add(layout.avail),
                base.add(layout.used),
                layout.size,
            )
        };
        Ok(SplitQueue {
            base,
            ring,
            iova_base,
            layout,
            mask: layout.size - 1,
            avail_idx: 0,
            last_used: 0,
            seen_used: 0,
            free: (0..layout.size).rev().collect(),
            tokens: vec![None; n],
            next: vec![0; n],
            in_flight: 0,
            broken: false,
            event_idx: false,
            in_order: false,
            io_next: 0,
            io_free: n,
            io_oldest: 0,
            chain_len: vec![0; n],
            chains: 0,
            heads: vec![0; n],
            published: 0,
        })
    }

    /// Uses descriptors in order (VIRTIO_F_IN_ORDER was negotiated, §2.7.9):
    /// descriptors are handed out in table order, chains link `x` to
    /// `x + 1`, and a completion is the oldest buffer in flight whatever id
    /// the used entry names (a device may write one entry for a batch).
    /// Call before the queue is used.
    pub fn set_in_order(&mut self, on: bool) {
        self.in_order = on;
    }

    /// A free descriptor id.
    #[inline(always)]
    fn alloc(&mut self) -> Option<u16> {
        if self.in_order {
            if self.io_free == 0 {
                return None;
            }
            let id = self.io_next;
            self.io_next = id.wrapping_add(1) & self.mask;
            self.io_free -= 1;
            Some(id)
        } else {
            self.free.pop()
        }
    }

    /// In order: the oldest buffer in flight, now completed (the caller
    /// checked that one is in flight); its descriptors are free again.
    /// Returns its head and the mbuf.
    #[inline(always)]
    fn complete_oldest(&mut self) -> (u16, Option<Mbuf>) {
        let id = self.io_oldest;
        let n = self.chain_len[id as usize].max(1);
        if n > 1 {
            self.chains -= 1;
        }
        self.io_oldest = id.wrapping_add(n) & self.mask;
        self.io_free += n as usize;
        self.in_flight -= 1;
        // SAFETY: the token came from `into_raw` in `push`; the device used
        // this buffer (in order, everything before the used index).
        let m = self.tokens[id as usize]
            .take()
            .map(|p| unsafe { Mbuf::from_raw(p) });
        (id, m)
    }

    /// Reads `used.idx` (V2, Acquire: pairs with the device's Release
    /// store of it; the entries before the value read are complete) and
    /// checks its step: entries published and not yet taken can never
    /// outnumber the buffers in flight. A larger step (an index that
    /// jumped ahead or back) breaks the queue; `None` then.
    #[inline(always)]
    fn load_used(&mut self) -> Option<u16> {
        let used = self.ring.used_idx(Ordering::Acquire);
        if used.wrapping_sub(self.last_used) > self.in_flight {
            self.broken = true;
            return None;
        }
        self.seen_used = used;
        Some(used)
    }

    /// Uses event indices for notifications (VIRTIO_F_EVENT_IDX was
    /// negotiated); call before the queue is used.
    pub fn set_event_idx(&mut self, on: bool) {
        self.event_idx = on;
    }

    /// The typed view of the ring, for tests that play the device.
    #[cfg(test)]
    pub(crate) fn view(&self) -> SplitView {
        self.ring
    }

    /// Returns the descriptors of the buffer headed by `head` (in flight:
    /// its token was just taken) to the free stack, following the links
    /// we keep privately.
    #[inline(always)]
    fn release(&mut self, head: u16) {
        self.in_flight -= 1;
        if self.chain_len[head as usize] > 1 {
            self.chains -= 1;
        }
        let mut id = head;
        for _ in 1..self.chain_len[head as usize] {
            self.free.push(id);
            id = self.next[id as usize];
        }
        self.free.push(id);
    }

    /// `reclaim_into` in order: everything before `used` is done, in
    /// order, so no entry is read but the last, whose id must be the head
    /// of the last buffer it completes (a device may write one entry for
    /// a batch); checked before anything is completed, since a wrong one
    /// means the device's order and ours have parted (the queue breaks).
    /// The mbufs go straight into the burst's free slots.
    #[inline(always)]
    fn reclaim_in_order<const N: usize>(&mut self, out: &mut Burst<Mbuf, N>, used: u16) -> usize {
        let spare = out.spare_capacity_mut();
        // `load_used` checked that `used` is at most `in_flight` ahead.
        let due = used.wrapping_sub(self.last_used) as usize;
        if due == 0 {
            return 0;
        }
        if due <= spare.len() {
            // The head of the buffer made available at index used - 1.
            let last = self.heads[(used.wrapping_sub(1) & self.mask) as usize];
            // The used entry before `used`, published by the device.
            let id = self.ring.used_id(used.wrapping_sub(1));
            if id != last as u32 {
                self.broken = true;
                return 1;
            }
        }
        let mut k = 0;
        while self.last_used != used && k < spare.len() {
            self.last_used = self.last_used.wrapping_add(1);
            if let (_, Some(m)) = self.complete_oldest() {
                spare[k].write(m);
                k += 1;
            }
        }
        // SAFETY: the first `k` spare slots were written just above, and
        // `k` is at most the spare capacity.
        unsafe { out.assume_init_back(k) };
        0
    }

    #[cold]
    fn broken_error(&self) -> Error {
        Error::Peer(format!(
            "used index moved past the {} buffers in flight; queue stopped until restarted",
            self.in_flight
        ))
    }
}

impl Ring for SplitQueue {
    /// Buffers the device has marked used that were not taken yet (by its
    /// used index, at most what is in flight): what a restart drops that
    /// the device had filled.
    fn completed_unread(&self) -> usize {
        // V2 (Acquire), as in `load_used`.
        let used = self.ring.used_idx(Ordering::Acquire);
        used.wrapping_sub(self.last_used).min(self.in_flight) as usize
    }

    /// Starts the ring over as `new` left it, for a device that begins at
    /// index 0 (a new vhost-user backend after a reconnection): every
    /// buffer in flight returns to its pool, and their number is returned.
    /// Only while no device uses the ring. Notifications end up
    /// unsuppressed; the caller sets them as it wants.
    fn restart(&mut self) -> usize {
        let dropped = release_tokens(&mut self.tokens);
        // SAFETY: the queue's own memory (checked in `new`), which no
        // device accesses now.
        unsafe { self.base.write_bytes(0, self.layout.len) };
        let n = self.layout.size;
        self.avail_idx = 0;
        self.last_used = 0;
        self.seen_used = 0;
        self.free.clear();
        self.free.extend((0..n).rev());
        self.next.fill(0);
        self.in_flight = 0;
        self.broken = false;
        self.chain_len.fill(0);
        self.chains = 0;
        self.io_next = 0;
        self.io_free = n as usize;
        self.io_oldest = 0;
        self.published = 0;
        dropped
    }

    /// Takes the mbufs in flight out of the queue, which must not be used
    /// afterwards (see [`Tokens`]).
    fn take_tokens(&mut self) -> Tokens {
        Tokens::take(&mut self.tokens)
    }

    /// Whether the device broke the protocol (a used index moved past the
    /// buffers in flight): the queue then refuses everything until
    /// [`restart`](Self::restart), and the buffers in flight stay with it,
    /// since the device may still own them.
    fn is_broken(&self) -> bool {
        self.broken
    }

    /// Whether completions wait in the used ring.
    #[inline]
    fn has_used(&self) -> bool {
        // V2 (Acquire), as in `load_used`.
        !self.broken
            && (self.seen_used != self.last_used
                || self.ring.used_idx(Ordering::Acquire) != self.last_used)
    }

    /// IOVAs of descriptor table, available ring and used ring.
    fn addresses(&self) -> (u64, u64, u64) {
        (
            self.iova_base + self.layout.desc as u64,
            self.iova_base + self.layout.avail as u64,
            self.iova_base + self.layout.used as u64,
        )
    }

    /// Entries.
    fn size(&self) -> u16 {
        self.layout.size
    }

    /// Free descriptors.
    fn free(&self) -> usize {
        if self.broken {
            0
        } else if self.in_order {
            self.io_free
        } else {
            self.free.len()
        }
    }

    /// Asks the other side not to interrupt (we poll), or to interrupt on
    /// the next completion. After arming, look at the used ring once more
    /// ([`has_used`](Self::has_used)): a completion published just before
    /// the arming raises no interrupt.
    fn set_interrupts(&mut self, on: bool) {
        // §2.7.7.1: with event indices the flags stay 0 and `used_event`
        // says when to interrupt: at the next used entry, or one lap away.
        let (flags, event) = match (self.event_idx, on) {
            (false, true) => (0, 0),
            (false, false) => (VRING_AVAIL_F_NO_INTERRUPT, 0),
            (true, true) => (0, self.last_used),
            (true, false) => (0, self.last_used.wrapping_sub(1)),
        };
        // Only we write avail.flags and used_event.
        self.ring.set_avail_flags(flags);
        if self.event_idx {
            self.ring.set_used_event(event);
        }
        // V4: the arming before the caller's next look at used.idx.
        full_fence();
    }

    /// Adds `m` as one descriptor (device-writable for RX) at the next
    /// avail slot, without publishing. Gives `m` back when no descriptor is
    /// free.
    #[inline(always)]
    fn push(&mut self, m: Mbuf, addr: u64, len: u32, device_writes: bool) -> Result<(), Mbuf> {
        if self.broken {
            return Err(m);
        }
        let Some(id) = self.alloc() else {
            return Err(m);
        };
        self.chain_len[id as usize] = 1;
        // Descriptor `id` is free (ours until published), and the avail
        // slot at `avail_idx` is past the published `avail.idx` (the
        // device does not read it yet); only the driver writes either.
        let flags = if device_writes { VRING_DESC_F_WRITE } else { 0 };
        self.ring.set_desc_single(id, addr, len, flags);
        // Written only when it changes (as DPDK's driver does): in order,
        // the ring holds the same ids every lap, and its lines then stay
        // clean in the device's cache instead of moving to this core and
        // back for every frame.
        if self.ring.avail_entry(self.avail_idx) != id {
            self.ring.set_avail_entry(self.avail_idx, id);
        }
        self.tokens[id as usize] = Some(m.into_raw());
        self.in_flight += 1;
        self.heads[(self.avail_idx & self.mask) as usize] = id;
        self.avail_idx = self.avail_idx.wrapping_add(1);
        Ok(())
    }

    /// Adds up to `count` one-segment mbufs from the front of `bufs`
    /// through [`push`](Self::push), each at `desc(m)`; how many went in.
    #[inline(always)]
    fn push_run<const N: usize>(
        &mut self,
        bufs: &mut Burst<Mbuf, N>,
        count: usize,
        device_writes: bool,
        desc: impl FnMut(&mut Mbuf) -> Option<(u64, u32)>,
    ) -> usize {
        let count = count.min(self.free());
        if self.in_order {
            return self.push_run_in_order(bufs, count, device_writes, desc);
        }
        push_each(bufs, count, desc, |m, a, l| {
            self.push(m, a, l, device_writes)
        })
    }

    /// Adds a chain of descriptors (one per `(address, length)` in `segs`,
    /// linked with `NEXT`) holding `m`, at the next avail slot; those from
    /// index `writable_from` on are device-writable. Gives `m` back when
    /// fewer than `segs.len()` descriptors are free.
    fn push_chain(
        &mut self,
        m: Mbuf,
        segs: &[(u64, u32)],
        writable_from: usize,
    ) -> Result<(), Mbuf> {
        let n = segs.len();
        if n == 0 || n > self.free() || n > MAX_CHAIN {
            // `free()` is 0 on a broken queue.
            return Err(m);
        }
        let mut ids = [0u16; MAX_CHAIN];
        for id in ids.iter_mut().take(n) {
            *id = self.alloc().unwrap_or(0);
        }
        self.chain_len[ids[0] as usize] = n as u16;
        if n > 1 {
            self.chains += 1;
        }
        for (k, (&(addr, len), &id)) in segs.iter().zip(&ids[..n]).enumerate() {
            let mut flags: u16 = if k >= writable_from {
                VRING_DESC_F_WRITE
            } else {
                0
            };
            let next = if k + 1 < n {
                flags |= VRING_DESC_F_NEXT;
                ids[k + 1]
            } else {
                0
            };
            self.next[id as usize] = next;
            // Descriptor `id` is free: ours until published.
            self.ring.set_desc(
                id,
                DescFields {
                    addr,
                    len,
                    flags,
                    id_or_next: next,
                },
            );
        }
        let head = ids[0];
        // The avail slot for the next index, ours until published.
        self.ring.set_avail_entry(self.avail_idx, head);
        self.tokens[head as usize] = Some(m.into_raw());
        self.in_flight += 1;
        self.heads[(self.avail_idx & self.mask) as usize] = head;
        self.avail_idx = self.avail_idx.wrapping_add(1);
        Ok(())
    }

    /// Used one-buffer frames into `out` as [`Ring::pop_used_lines`]
    /// asks, in order with no chain in flight (else none: `pop_used`
    /// takes them).
    #[inline(always)]
    fn pop_used_lines<const N: usize>(
        &mut self,
        out: &mut Burst<Mbuf, N>,
        room: usize,
        lens: Range<u32>,
        accept: impl FnMut(&mut Mbuf, u32) -> bool,
    ) -> (usize, usize) {
        if !self.in_order || self.broken || self.chains != 0 {
            return (0, 0);
        }
        self.lines_in_order(out, room, lens, accept)
    }

    /// Takes every completed buffer that fits in `out` (reading `used.idx`
    /// once); returns how many used entries were wrong (naming no buffer
    /// in flight, or, in order, not the buffer due), for the caller to
    /// count, plus one when this call found the queue broken. The batch
    /// form of [`pop_used`](Self::pop_used), for TX completions.
    #[inline]
    fn reclaim_into<const N: usize>(&mut self, out: &mut Burst<Mbuf, N>) -> usize {
        if self.broken {
            return 0;
        }
        let Some(used) = self.load_used() else {
            return 1;
        };
        if self.in_order {
            return self.reclaim_in_order(out, used);
        }
        let mut bad = 0;
        while self.last_used != used && !out.is_full() {
            // A used entry the device published before `used`.
            let id = self.ring.used_id(self.last_used);
            self.last_used = self.last_used.wrapping_add(1);
            match (id < self.layout.size as u32)
                .then(|| self.tokens[id as usize].take())
                .flatten()
            {
                Some(p) => {
                    self.release(id as u16);
                    // SAFETY: as in `pop_used`.
                    let _ = out.push(unsafe { Mbuf::from_raw(p) });
                }
                None => bad += 1,
            }
        }
        bad
    }

    /// Publishes what `push` added; returns whether the other side wants a
    /// notification (kick).
    #[inline]
    fn publish(&mut self) -> bool {
        // V1 (Release): descriptors and ring entries before the index.
        self.ring.set_avail_idx(self.avail_idx, Ordering::Release);
        // V3: the index store before reading what the device asks for.
        full_fence();
        if self.event_idx {
            let (old, new) = (self.published, self.avail_idx);
            self.published = new;
            // avail_event: the device writes it (a volatile read).
            return need_event(self.ring.avail_event(), new, old);
        }
        self.ring.used_flags() & VRING_USED_F_NO_NOTIFY == 0
    }

    /// Takes the next completed buffer: the mbuf and the length the device
    /// wrote. A used entry naming a descriptor that is not in flight (in
    /// order: not the buffer due) is an error (a misbehaving peer),
    /// counted by the caller and skipped; in order, the buffer due is
    /// then returned to its pool, not delivered. A used index that moved
    /// past the buffers in flight breaks the queue: one error, then
    /// `None` until [`restart`](Self::restart).
    #[inline(always)]
    fn pop_used(&mut self) -> Option<Result<(Mbuf, u32), Error>> {
        if self.broken {
            return None;
        }
        if self.seen_used == self.last_used {
            // Read the index again only when the entries before the last
            // value read are all taken: within a burst the index line
            // would otherwise move from the device's core for every frame.
            match self.load_used() {
                None => return Some(Err(self.broken_error())),
                Some(u) if u == self.last_used => return None,
                Some(_) => {}
            }
        }
        // A used entry the device wrote before it published `used`.
        let (id, len) = self.ring.used_elem(self.last_used);
        self.last_used = self.last_used.wrapping_add(1);
        if self.in_order {
            // The index step was checked: a buffer is in flight. An entry
            // naming another one means the device's order and ours have
            // parted, and the buffer due may still be the device's.
            let due = self.io_oldest;
            if id != due as u32 {
                self.broken = true;
                return Some(Err(Error::Peer(format!(
                    "in-order used entry names descriptor {id} where descriptor {due} was due; queue stopped until restarted"
                ))));
            }
            let (_, m) = self.complete_oldest();
            return m.map(|m| Ok((m, len)));
        }
        let tok = (id < self.layout.size as u32)
            .then(|| self.tokens[id as usize].take())
            .flatten();
        match tok {
            Some(p) => {
                self.release(id as u16);
                // SAFETY: `p` came from `into_raw` in `push`, and the device
                // returned the descriptor, so it no longer touches the mbuf.
                Some(Ok((unsafe { Mbuf::from_raw(p) }, len)))
            }
            None => Some(Err(Error::Peer(format!(
                "used ring names descriptor {id}, which is not in flight (queue of {})",
                self.layout.size
            )))),
        }
    }
}

impl SplitQueue {
    /// `push_run` in order: the buffers take the next descriptors and
    /// avail slots in turn, so the loop writes each one's descriptor,
    /// avail entry (only where it changed) and heads entry, and the
    /// queue's indices move once for the run; the tokens follow. Stops
    /// at the first buffer `desc` refuses.
    #[inline(always)]
    fn push_run_in_order<const N: usize>(
        &mut self,
        bufs: &mut Burst<Mbuf, N>,
        count: usize,
        device_writes: bool,
        mut desc: impl FnMut(&mut Mbuf) -> Option<(u64, u32)>,
    ) -> usize {
        // `free()` (which `count` is within) is 0 on a broken queue.
        let want = count.min(bufs.len()).min(self.io_free);
        let flags = if device_writes { VRING_DESC_F_WRITE } else { 0 };
        let (mask, first) = (self.mask, self.io_next);
        let (mut id, mut idx) = (first, self.avail_idx);
        let mbufs = &mut bufs[..want];
        let mut k = 0;
        while k < want {
            let Some((addr, len)) = desc(&mut mbufs[k]) else {
                break;
            };
            // Descriptor `id` is free and the avail slot at `idx` is past
            // the published index: ours until published.
            self.ring.set_desc_single(id, addr, len, flags);
            if self.ring.avail_entry(idx) != id {
                self.ring.set_avail_entry(idx, id);
            }
            self.chain_len[usize::from(id)] = 1;
            self.heads[usize::from(idx & mask)] = id;
            id = id.wrapping_add(1) & mask;
            idx = idx.wrapping_add(1);
            k += 1;
        }
        let tokens = &mut self.tokens[..usize::from(mask) + 1];
        for (j, m) in bufs[..k].iter().enumerate() {
            let t = usize::from(first.wrapping_add(j as u16) & mask);
            // SAFETY: a bitwise copy of an mbuf of `bufs`, which forgets
            // the run's mbufs right after this loop: the token becomes its
            // one owner. `t` is masked to the ring's size, the length of
            // `tokens`, so nothing in between can panic.
            tokens[t] = Some(unsafe { std::ptr::read(m) }.into_raw());
        }
        // SAFETY: the first `k` mbufs were moved into tokens above.
        unsafe { bufs.forget_front(k) };
        self.io_next = id;
        self.io_free -= k;
        self.in_flight += k as u16;
        self.avail_idx = idx;
        k
    }

    /// `pop_used_lines` in order with no chain in flight: the buffer due
    /// is the next descriptor every time, so each used entry is checked
    /// against it and its length against `lens` and taken, with no other
    /// test a frame; `used.idx` is read once for the burst. The first
    /// entry that is not what is due, or has a length outside `lens`,
    /// stops it for `pop_used` to judge, as does an index that moved past
    /// what is in flight (`pop_used` reports it and breaks the queue).
    #[inline(always)]
    fn lines_in_order<const N: usize>(
        &mut self,
        out: &mut Burst<Mbuf, N>,
        room: usize,
        lens: Range<u32>,
        mut accept: impl FnMut(&mut Mbuf, u32) -> bool,
    ) -> (usize, usize) {
        if self.seen_used == self.last_used {
            // V2, as in `load_used`, without breaking the queue here.
            let used = self.ring.used_idx(Ordering::Acquire);
            if used.wrapping_sub(self.last_used) > self.in_flight {
                return (0, 0);
            }
            self.seen_used = used;
        }
        let spare = out.spare_capacity_mut();
        let due = usize::from(self.seen_used.wrapping_sub(self.last_used));
        let n = due.min(room).min(spare.len());
        let span = lens.end.wrapping_sub(lens.start);
        let (mut kept, mut refused) = (0, 0);
        for _ in 0..n {
            // A used entry the device wrote before it published the index.
            let (id, len) = self.ring.used_elem(self.last_used);
            if id != u32::from(self.io_oldest) || len.wrapping_sub(lens.start) >= span {
                break;
            }
            self.last_used = self.last_used.wrapping_add(1);
            let (_, m) = self.complete_oldest();
            let Some(mut m) = m else {
                // No buffer behind the entry due (the in-order invariant
                // rules it out): counted with the refused, never silent.
                refused += 1;
                continue;
            };
            if accept(&mut m, len) {
                spare[kept].write(m);
                kept += 1;
            } else {
                refused += 1;
            }
        }
        // SAFETY: the first `kept` spare slots were written above, and
        // `kept` is at most the spare capacity.
        unsafe { out.assume_init_back(kept) };
        (kept, refused)
    }
}

/// A ring's `len` bytes at `offset` in `region` (4096-aligned, inside it),
/// zeroed: their address and IOVA. For both ring types.
pub(crate) fn ring_memory(
    region: &DmaRegion,
    offset: usize,
    len: usize,
) -> Result<(*mut u8, u64), Error> {
    if offset % 4096 != 0 || offset.checked_add(len).is_none_or(|e| e > region.len()) {
        return Err(Error::Config(format!(
            "queue of {len} bytes at offset {offset} does not fit the {}-byte ring region",
            region.len()
        )));
    }
    // SAFETY: in bounds (checked above); the other side has not been told
    // about this memory yet.
    let base = unsafe { region.as_ptr().add(offset) };
    // SAFETY: as above.
    unsafe { base.write_bytes(0, len) };
    Ok((base, region.iova(offset).map(|i| i.raw()).unwrap_or(0)))
}

/// Moves up to `count` mbufs from the front of `bufs` into a ring through
/// `push` (the mbuf, and its address and length from `desc`), one by
/// one; one `desc` refuses, or `push` gives back (the ring is full or
/// broken), returns to the front of `bufs` and ends the run. How many
/// went in.
#[inline(always)]
pub(crate) fn push_each<const N: usize>(
    bufs: &mut Burst<Mbuf, N>,
    count: usize,
    mut desc: impl FnMut(&mut Mbuf) -> Option<(u64, u32)>,
    mut push: impl FnMut(Mbuf, u64, u32) -> Result<(), Mbuf>,
) -> usize {
    let mut n = 0;
    while n < count {
        let Some(mut m) = bufs.pop() else { break };
        let Some((addr, len)) = desc(&mut m) else {
            // The slot it left is free, so this cannot fail.
            let _ = bufs.push_front(m);
            break;
        };
        if let Err(m) = push(m, addr, len) {
            // The slot it left is free, so this cannot fail.
            let _ = bufs.push_front(m);
            break;
        }
        n += 1;
    }
    n
}

/// Returns every mbuf a ring still holds (its tokens, from
/// [`Mbuf::into_raw`]) to its pool; how many. Only while no device uses
/// the ring: the port stops the other side first.
pub(crate) fn release_tokens(tokens: &mut [Option<NonNull<u8>>]) -> usize {
    let mut n = 0;
    for t in tokens.iter_mut() {
        if let Some(p) = t.take() {
            // SAFETY: from `into_raw`, handed back once (`take`); the
            // device no longer touches the buffer.
            drop(unsafe { Mbuf::from_raw(p) });
            n += 1;
        }
    }
    n
}

impl Drop for SplitQueue {
    fn drop(&mut self) {
        release_tokens(&mut self.tokens);
    }
}

/// The mbufs a ring had in flight, taken out of it
/// ([`Ring::take_tokens`])
/// when its queue handle is dropped while a device may still use them:
/// kept until the device has stopped, then returned to their pools on
/// drop.
pub struct Tokens(Vec<Option<NonNull<u8>>>);

// SAFETY: the tokens are owned mbuf handles (`Mbuf` is `Send`); moving
// them to another thread moves that ownership.
unsafe impl Send for Tokens {}

impl Tokens {
    /// Takes every token out of `tokens`, leaving it empty (the ring it
    /// belongs to must not be used again).
    pub(crate) fn take(tokens: &mut Vec<Option<NonNull<u8>>>) -> Tokens {
        Tokens(std::mem::take(tokens))
    }

    /// How many mbufs it holds.
    #[cfg(test)]
    pub(crate) fn count(&self) -> usize {
        self.0.iter().filter(|t| t.is_some()).count()
    }
}

impl Drop for Tokens {
    fn drop(&mut self) {
        release_tokens(&mut self.0);
    }
}

/// Zeroes the `len` bytes of a ring at `offset` in `region` (bounds
/// checked), for a ring that starts over without its queue handle. Only
/// while no device uses the ring.
pub(crate) fn zero_ring(region: &DmaRegion, offset: usize, len: usize) -> Result<(), Error> {
    if offset.checked_add(len).is_none_or(|e| e > region.len()) {
        return Err(Error::Config(format!(
            "ring of {len} bytes at offset {offset} is outside the {}-byte ring region",
            region.len()
        )));
    }
    // SAFETY: inside the region (checked above), which no device accesses
    // now (the caller's promise) and no queue handle owns any more.
    unsafe { region.as_ptr().add(offset).write_bytes(0, len) };
    Ok(())
}

/// Ring memory (64 KiB of 4 KiB pages) and an uncached pool of `objs`
/// mbufs, for the rings' unit tests.
#[cfg(test)]
pub(crate) fn test_memory(name: &str, objs: u32) -> (DmaRegion, rpmd_pmd::Mempool) {
    use rpmd_pmd::{IovaMode, Mempool, MempoolConfig, PageSize};
    let region = DmaRegion::with_page_size(name, 64 << 10, IovaMode::Va, PageSize::Base4K)
        .expect("test ring memory");
    let mut pc = MempoolConfig::new(name, objs);
    pc.cache_size = 0;
    (region, Mempool::new(&pc).expect("test pool"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A restart, in order or not: in-flight buffers back to the pool,
    /// the avail index at 0, every descriptor free again.
    #[test]
    fn restart_returns_buffers_and_begins_at_index_zero() {
        let (region, pool) = test_memory("vqr", 16);
        for in_order in [false, true] {
            let mut q = SplitQueue::new(&region, 0, Layout::new(8).unwrap()).unwrap();
            q.set_in_order(in_order);
            for _ in 0..5 {
                let m = pool.get().unwrap();
                let a = m.data_iova().raw();
                q.push(m, a, 100, true).unwrap();
            }
            q.publish();
            assert_eq!(q.restart(), 5);
            assert_eq!(pool.available(), 16);
            assert_eq!(q.free(), 8);
            let m = pool.get().unwrap();
            let a = m.data_iova().raw();
            q.push(m, a, 100, true).unwrap();
            q.publish();
            let idx = used_idx(&region, 0, &q.layout);
            assert_eq!(idx, 0);
            let avail = q.view().avail_idx(Ordering::Relaxed);
            assert_eq!(avail, 1, "in_order {in_order}");
        }
    }

    /// Plays the device: completes avail entries in reverse order.
    #[test]
    fn buffers_round_trip_and_bad_ids_are_errors() {
        let (region, pool) = test_memory("vq", 64);
        let l = Layout::new(8).unwrap();
        let mut q = SplitQueue::new(&region, 0, l).unwrap();
        for i in 0..8u8 {
            let mut m = pool.get().unwrap();
            m.append(1).unwrap()[0] = i;
            let a = m.data_iova().raw();
            q.push(m, a, 100, true).unwrap();
        }
        assert!(
            q.push(pool.get().unwrap(), 0, 1, false).is_err(),
            "no free descriptor"
        );
        assert!(q.publish(), "no NO_NOTIFY flag: kick");
        // The test plays the device.
        let v = q.view();
        assert_eq!(v.avail_idx(Ordering::Acquire), 8);
        for k in 0..8u16 {
            let id = v.avail_entry(7 - k);
            v.set_used_elem(k, id as u32, 10 + k as u32);
        }
        v.set_used_idx(8, Ordering::Release);
        let mut seen = Vec::new();
        while let Some(r) = q.pop_used() {
            let (m, len) = r.unwrap();
            seen.push((m.data()[0], len));
        }
        assert_eq!(
            seen,
            (0..8).map(|k| (7 - k as u8, 10 + k)).collect::<Vec<_>>()
        );
        assert_eq!(q.free(), 8);
        // A chain of three descriptors comes back as one used entry and
        // frees all three; before it, an entry naming a descriptor not in
        // flight is an error and skipped.
        let m = pool.get().unwrap();
        q.push_chain(m, &[(0x1000, 10), (0x2000, 20), (0x3000, 30)], 3)
            .unwrap();
        assert_eq!(q.free(), 5);
        assert!(
            q.push_chain(pool.get().unwrap(), &[(0, 1); 6], 6).is_err(),
            "5 free"
        );
        q.publish();
        // avail index 8 sits in ring slot 8 % 8 = 0.
        let head = v.avail_entry(8);
        assert_eq!(v.desc(head).flags, crate::consts::VRING_DESC_F_NEXT);
        // Used index 8 sits in ring slot 0: a bad id; 9 in slot 1.
        v.set_used_elem(8, 99, 0);
        v.set_used_idx(9, Ordering::Release);
        assert!(matches!(q.pop_used(), Some(Err(Error::Peer(_)))));
        v.set_used_elem(9, head as u32, 0);
        v.set_used_idx(10, Ordering::Release);
        assert!(q.pop_used().unwrap().is_ok());
        assert_eq!(q.free(), 8);
        assert!(Layout::new(6).is_err());
        drop(q);
        assert_eq!(pool.available(), 64);
    }

    /// The used index is read once per batch: entries published before a
    /// read are all taken, none past it, whether `reclaim_into` or
    /// `pop_used` read it last.
    #[test]
    fn used_entries_are_taken_up_to_the_index_read_and_no_further() {
        let (region, pool) = test_memory("vqu", 16);
        let l = Layout::new(8).unwrap();
        let mut q = SplitQueue::new(&region, 0, l).unwrap();
        for _ in 0..4 {
            let m = pool.get().unwrap();
            let a = m.data_iova().raw();
            q.push(m, a, 100, false).unwrap();
        }
        q.publish();
        let v = q.view();
        // Plays the device: completes the first `n` buffers, in order.
        let complete = |n: u16| {
            for k in 0..n {
                v.set_used_elem(k, v.avail_entry(k) as u32, 0);
            }
            v.set_used_idx(n, Ordering::Release);
        };
        complete(2);
        // A one-slot burst takes one of the two; the other is still due.
        let mut one: Burst<Mbuf, 1> = Burst::new();
        assert_eq!(q.reclaim_into(&mut one), 0);
        assert_eq!(one.len(), 1);
        assert!(q.has_used());
        assert!(q.pop_used().unwrap().is_ok());
        // Nothing past the index: the unpublished entry 2 is not read.
        assert!(q.pop_used().is_none());
        assert!(!q.has_used());
        complete(4);
        assert!(q.pop_used().unwrap().is_ok());
        assert!(q.pop_used().unwrap().is_ok());
        assert!(q.pop_used().is_none());
        drop(one);
        drop(q);
        assert_eq!(pool.available(), 16);
    }

    #[test]
    fn event_indices_decide_kicks_and_interrupts() {
        // §2.7.10's vring_need_event, including the wrap at 2^16.
        assert!(need_event(5, 6, 5));
        assert!(!need_event(6, 6, 5));
        assert!(need_event(0xffff, 2, 0xfffe));
        assert!(!need_event(3, 2, 0xfffe));
        let (region, pool) = test_memory("vqe", 64);
        let l = Layout::new(8).unwrap();
        let mut q = SplitQueue::new(&region, 0, l).unwrap();
        q.set_event_idx(true);
        let v = q.view();
        // The device wants a kick once avail.idx passes 2.
        v.set_avail_event(2);
        let push = |q: &mut SplitQueue| {
            let m = pool.get().unwrap();
            let a = m.data_iova().raw();
            q.push(m, a, 64, true).unwrap();
        };
        push(&mut q);
        push(&mut q);
        assert!(!q.publish(), "0 -> 2 does not pass 2");
        push(&mut q);
        assert!(q.publish(), "2 -> 3 passes 2");
        push(&mut q);
        assert!(!q.publish(), "3 -> 4: already kicked for 2");
        // Interrupts: off = one lap behind, on = at the next used entry.
        q.set_interrupts(false);
        let read = || v.used_event();
        assert_eq!(read(), 0xffff);
        assert_eq!(v.avail_flags(), 0, "flags stay 0 with event indices");
        q.set_interrupts(true);
        assert_eq!(read(), 0);
        assert!(!q.has_used());
    }

    /// In order: descriptors go out in table order, and one used entry
    /// naming the batch's last buffer completes the whole batch.
    #[test]
    fn in_order_batches_complete_with_one_used_entry() {
        let (region, pool) = test_memory("vqi", 64);
        let l = Layout::new(4).unwrap();
        let mut q = SplitQueue::new(&region, 0, l).unwrap();
        q.set_in_order(true);
        let v = q.view();
        for round in 0..3u32 {
            for k in 0..3u8 {
                let mut m = pool.get().unwrap();
                m.append(1).unwrap()[0] = k;
                let a = m.data_iova().raw();
                q.push(m, a, 64, false).unwrap();
            }
            q.publish();
            // The test plays the device.
            let ids: Vec<u16> = (0..3u32)
                .map(|k| v.avail_entry((round * 3 + k) as u16))
                .collect();
            let first = (round * 3 % 4) as u16;
            assert_eq!(
                ids,
                vec![first, (first + 1) % 4, (first + 2) % 4],
                "table order"
            );
            // One used entry for the batch, naming its last buffer.
            v.set_used_elem((round * 3 + 2) as u16, ids[2] as u32, 0);
            v.set_used_idx(((round + 1) * 3) as u16, Ordering::Release);
            let mut out: Burst<Mbuf, 8> = Burst::new();
            assert_eq!(q.reclaim_into(&mut out), 0);
            assert_eq!(
                out.iter().map(|m| m.data()[0]).collect::<Vec<_>>(),
                vec![0, 1, 2]
            );
            assert_eq!(q.free(), 4);
        }
        drop(q);
        assert_eq!(pool.available(), 64);
    }

    /// Issue 21: posts `n` single RX buffers (tagged 0..n) and one chain of
    /// `chain` descriptors, published; the pool has `objs` mbufs.
    fn posted(
        name: &str,
        objs: u32,
        size: u16,
        in_order: bool,
        n: u8,
    ) -> (
        DmaRegion,
        rpmd_pmd::Mempool,
        SplitQueue,
        crate::driver::testdev::SplitDevice,
    ) {
        let (region, pool) = test_memory(name, objs);
        let l = Layout::new(size).unwrap();
        let mut q = SplitQueue::new(&region, 0, l).unwrap();
        q.set_in_order(in_order);
        for i in 0..n {
            let mut m = pool.get().unwrap();
            m.append(1).unwrap()[0] = i;
            let a = m.data_iova().raw();
            q.push(m, a, 100, true).unwrap();
        }
        q.publish();
        let dev = crate::driver::testdev::SplitDevice::new(region.as_ptr(), l);
        (region, pool, q, dev)
    }

    /// The in-order bulk receive: entries naming the buffer due, each
    /// length in range, come out up to the used index in one call; an
    /// entry naming another buffer or a length out of range stops it for
    /// `pop_used` (which breaks the queue on the wrong id); an index past
    /// what is in flight is left for `pop_used` to report; a chain in
    /// flight turns it off.
    #[test]
    fn in_order_used_entries_come_out_in_bulk_up_to_what_they_cannot_take() {
        let accept = |_: &mut Mbuf, _: u32| true;
        let (_region, pool, mut q, mut dev) = posted("vql", 16, 8, true, 8);
        let mut out: Burst<Mbuf, 16> = Burst::new();
        for id in 0..5 {
            let head = dev.take().unwrap();
            assert_eq!(head, id);
            dev.complete(head, if id == 3 { 64 } else { 20 });
        }
        assert_eq!(q.pop_used_lines(&mut out, 16, 12..64, accept), (3, 0));
        assert_eq!(q.pop_used_lines(&mut out, 16, 12..64, accept), (0, 0));
        assert!(
            matches!(q.pop_used(), Some(Ok((_, 64)))),
            "left to pop_used"
        );
        assert_eq!(q.pop_used_lines(&mut out, 16, 12..65, accept), (1, 0));
        let tags: Vec<u8> = out.iter().map(|m| m.data()[0]).collect();
        assert_eq!(tags, [0, 1, 2, 4]);
        // An entry naming another buffer: nothing here, and pop_used
        // breaks the queue.
        let head = dev.take().unwrap();
        dev.complete(head + 1, 20);
        assert_eq!(q.pop_used_lines(&mut out, 16, 12..64, accept), (0, 0));
        assert!(matches!(q.pop_used(), Some(Err(Error::Peer(_)))));
        assert!(q.is_broken());
        assert_eq!(q.pop_used_lines(&mut out, 16, 12..64, accept), (0, 0));
        q.restart();
        // An index past what is in flight: not taken, not broken here.
        let m = pool.get().unwrap();
        let a = m.data_iova().raw();
        q.push(m, a, 100, true).unwrap();
        q.publish();
        dev = crate::driver::testdev::SplitDevice::new(_region.as_ptr(), Layout::new(8).unwrap());
        dev.set_used_idx(3);
        assert_eq!(q.pop_used_lines(&mut out, 16, 12..64, accept), (0, 0));
        assert!(!q.is_broken());
        assert!(matches!(q.pop_used(), Some(Err(_))) && q.is_broken());
        q.restart();
        // A chain in flight: the bulk path stays off until it is back.
        let mut dev =
            crate::driver::testdev::SplitDevice::new(_region.as_ptr(), Layout::new(8).unwrap());
        let m = pool.get().unwrap();
        q.push_chain(m, &[(0x1000, 10), (0x2000, 20)], 0).unwrap();
        let m = pool.get().unwrap();
        let a = m.data_iova().raw();
        q.push(m, a, 100, true).unwrap();
        q.publish();
        let chain = dev.take().unwrap();
        dev.complete(chain, 30);
        let single = dev.take().unwrap();
        dev.complete(single, 20);
        assert_eq!(q.pop_used_lines(&mut out, 16, 12..64, accept), (0, 0));
        assert!(matches!(q.pop_used(), Some(Ok((_, 30)))), "the chain");
        assert_eq!(q.pop_used_lines(&mut out, 16, 12..64, accept), (1, 0));
        drop(out);
        q.restart();
        drop(q);
        assert_eq!(pool.available(), 16, "every mbuf back");
    }

    /// `push_run` in both modes: buffers go in until `desc` refuses one,
    /// which stays first in the burst with those after it; in order, the
    /// run takes consecutive descriptors across the table's end, each in
    /// its avail slot, and they complete in that order.
    #[test]
    fn a_run_goes_in_until_desc_refuses_and_completes_in_order() {
        for in_order in [false, true] {
            let (_region, pool, mut q, mut dev) = posted("vqr", 16, 8, in_order, 0);
            use crate::driver::testdev::{tagged, tags_of as tag};
            let fill = |n: u8, from: u8| tagged(&pool, from..from + n);
            let desc = |m: &mut Mbuf| (m.data()[0] != 3).then(|| (m.data_iova().raw(), 1));
            let mut b = fill(5, 0);
            assert_eq!(q.push_run(&mut b, 5, false, desc), 3, "in order {in_order}");
            assert_eq!(tag(&b), [3, 4]);
            drop(b);
            // Six more, of which the table has room for five; then the
            // device completes all eight.
            let mut b = fill(6, 10);
            assert_eq!(q.push_run(&mut b, 6, false, desc), 5, "room for five");
            q.publish();
            let mut heads = Vec::new();
            while let Some(h) = dev.take() {
                heads.push(h);
                dev.complete(h, 0);
            }
            assert_eq!(heads.len(), 8);
            if in_order {
                assert_eq!(heads, [0, 1, 2, 3, 4, 5, 6, 7]);
            }
            let mut out: Burst<Mbuf, 16> = Burst::new();
            assert_eq!(q.reclaim_into(&mut out), 0);
            let got: Vec<u8> = out.iter().map(|m| m.data()[0]).collect();
            assert_eq!(got, [0, 1, 2, 10, 11, 12, 13, 14]);
            drop((b, out));
            drop(q);
            assert_eq!(pool.available(), 16);
        }
    }

    /// A device that rewrites the NEXT links of a posted chain (the table
    /// is shared memory) into a loop cannot grow the free stack: freeing
    /// follows the links the driver keeps for itself.
    #[test]
    fn rewritten_chain_links_leave_the_free_stack_intact() {
        let (_region, pool, mut q, mut dev) = posted("vqh1", 16, 8, false, 0);
        for _ in 0..2 {
            let m = pool.get().unwrap();
            q.push_chain(m, &[(0x1000, 10), (0x2000, 20), (0x3000, 30)], 3)
                .unwrap();
        }
        q.publish();
        assert_eq!(q.free(), 2);
        for _ in 0..2 {
            let head = dev.take().unwrap();
            let d = dev.desc(head);
            assert_ne!(d.flags & VRING_DESC_F_NEXT, 0);
            // A self-loop on the head, and the second link out of range.
            dev.set_desc_link(head, VRING_DESC_F_NEXT, head);
            dev.set_desc_link(d.id_or_next, VRING_DESC_F_NEXT, 999);
            dev.complete(head, 0);
        }
        let mut out: Burst<Mbuf, 8> = Burst::new();
        assert_eq!(q.reclaim_into(&mut out), 0);
        assert_eq!(out.len(), 2);
        assert_eq!(q.free(), 8, "exactly the table, no id twice");
        let mut ids = q.free.clone();
        ids.sort_unstable();
        assert_eq!(ids, (0..8).collect::<Vec<_>>());
        drop(out);
        drop(q);
        assert_eq!(pool.available(), 16);
    }

    /// A used index that moves ahead by more than is in flight, or back,
    /// breaks the queue: one error, then nothing, on both completion
    /// paths and in both modes; the buffers in flight are neither
    /// delivered nor returned (the device may still own them) until a
    /// restart, which returns them all.
    #[test]
    fn a_used_index_past_the_buffers_in_flight_breaks_the_queue() {
        for in_order in [false, true] {
            for step in [5u16, 0xffff, 200] {
                let (_region, pool, mut q, mut dev) = posted("vqh2", 16, 8, in_order, 4);
                dev.set_used_idx(step);
                let via_reclaim = step == 200;
                if via_reclaim {
                    let mut out: Burst<Mbuf, 8> = Burst::new();
                    assert_eq!(q.reclaim_into(&mut out), 1, "one error");
                    assert!(out.is_empty());
                    assert_eq!(q.reclaim_into(&mut out), 0, "then nothing");
                } else {
                    assert!(matches!(q.pop_used(), Some(Err(Error::Peer(_)))));
                    assert!(q.pop_used().is_none());
                }
                assert!(q.is_broken() && !q.has_used(), "{in_order} {step}");
                assert_eq!(q.free(), 0);
                let m = pool.get().unwrap();
                assert!(q.push(m, 0, 64, true).is_err(), "no new buffers");
                assert_eq!(pool.available(), 12, "the 4 in flight stay out");
                assert_eq!(q.restart(), 4);
                assert!(!q.is_broken());
                assert_eq!(pool.available(), 16);
            }
        }
        // A step equal to what is in flight is fine.
        let (_region, _pool, mut q, mut dev) = posted("vqh3", 16, 8, false, 4);
        for k in 0..4 {
            let id = dev.take().unwrap();
            dev.write_used(k, id as u32, 1);
        }
        dev.set_used_idx(4);
        assert_eq!((0..4).filter_map(|_| q.pop_used()).count(), 4);
        assert!(!q.is_broken());
    }

    /// In order, a used entry must name the buffer due: an out-of-range or
    /// duplicate id is not delivered as a good frame, and it breaks the
    /// queue (the device's order and ours have parted, so the buffers in
    /// flight stay out of the pool until a restart).
    #[test]
    fn in_order_entries_naming_another_buffer_break_the_queue() {
        for bad in [99u32, 0] {
            let (_region, pool, mut q, mut dev) = posted("vqh4", 16, 8, true, 4);
            let ids: Vec<u16> = (0..4).map(|_| dev.take().unwrap()).collect();
            dev.write_used(0, ids[0] as u32, 60);
            dev.write_used(1, bad, 60);
            dev.write_used(2, ids[2] as u32, 60);
            dev.set_used_idx(3);
            let got: Vec<_> = std::iter::from_fn(|| q.pop_used()).collect();
            assert_eq!(got.len(), 2, "bad id {bad}");
            assert!(matches!(&got[0], Ok((m, 60)) if m.data()[0] == 0));
            assert!(matches!(got[1], Err(Error::Peer(_))));
            drop(got);
            assert!(q.is_broken());
            assert_eq!(pool.available(), 13, "3 stay out while broken");
            assert_eq!(q.restart(), 3);
            assert_eq!(pool.available(), 16);
        }
        // TX in order: a batch's last entry must name its last buffer,
        // checked before any is completed.
        let (_region, _pool, mut q, mut dev) = posted("vqh5", 16, 8, true, 3);
        let ids: Vec<u16> = (0..3).map(|_| dev.take().unwrap()).collect();
        let mut out: Burst<Mbuf, 8> = Burst::new();
        dev.write_used(2, ids[1] as u32, 0);
        dev.set_used_idx(3);
        assert_eq!(q.reclaim_into(&mut out), 1, "wrong id in the last entry");
        assert!(out.is_empty() && q.is_broken());
        // The right one completes the batch.
        let (_region, _pool, mut q, mut dev) = posted("vqh6", 16, 8, true, 3);
        let ids: Vec<u16> = (0..3).map(|_| dev.take().unwrap()).collect();
        dev.write_used(2, ids[2] as u32, 0);
        dev.set_used_idx(3);
        assert_eq!(q.reclaim_into(&mut out), 0);
        assert_eq!(out.len(), 3);
    }
}
