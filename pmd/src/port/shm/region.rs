//! The shared file behind a `shm:NAME` link and the rings inside it: the
//! only unsafe code of the shm port.
//!
//! Layout (every offset a multiple of 64, all integers native-endian,
//! since both sides run on the same machine):
//!
//! ```text
//! 0     Header: magic u64 (stored last by the creator), version u32,
//!       queues u32, slots u32, slot_size u32
//! 64    side 0 (A) owner pid: AtomicU32, 0 = free
//! 128   side 1 (B) owner pid: AtomicU32
//! 4096  rings, queue by queue, direction A->B then B->A, each:
//!         +0    head: AtomicU32, the producer's next index (its own line;
//!               only read when a side (re)starts)
//!         +64   tail: AtomicU32, the consumer's next index
//!         +128  slots x stride bytes; a slot is
//!                 +0   frame bytes 0..60
//!                 +60  ctrl: AtomicU32 = seq << 16 | frame length
//!                 +64  frame bytes 60.. (slot_size - 60, rounded up)
//! ```
//!
//! A frame's first 60 bytes share one cache line with the word that says
//! it is there. That is the point of the layout: a consumer waiting for
//! the next frame polls that line, and the producer's write of a small
//! frame moves one line from one core to the other, not three (data,
//! length, index): the round trip of a 60-byte request and its response
//! costs about what a single cache line's round trip costs
//! (`apps/src/bound.rs` measures that bound).
//!
//! Slot i of the free-running index carries seq = (i + 1) mod 2^16. Slots
//! number at most 32768, so a slot's seq differs from the one it held a
//! lap earlier, and a zeroed file (seq 0) holds no frame. The producer
//! writes the frame bytes and then the ctrl word with a Release store; the
//! consumer's Acquire load of the ctrl word pairs with it, so once it sees
//! the seq it expects, the bytes are complete. The consumer hands slots
//! back with a Release store of the tail, paired with the producer's
//! Acquire load of the tail before it overwrites them.
//!
//! The peer is another process and may be buggy: nothing here trusts a
//! length it wrote. Lengths are checked by the caller before a copy,
//! indices are masked, and every copy is bounds-checked against the slot,
//! so the worst a peer can do is hand us garbage bytes or no frames.
#![allow(unsafe_code)]

use crate::Error;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// "RPMDSHM1", little-endian.
pub(super) const MAGIC: u64 = u64::from_le_bytes(*b"RPMDSHM1");
/// Layout version.
pub(super) const VERSION: u32 = 1;
const HEADER_BYTES: usize = 4096;
const RING_HEADER: usize = 128;
/// Frame bytes in a slot's first line, before the ctrl word.
pub(super) const INLINE: usize = 60;

/// The geometry fixed when the file is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Geometry {
    pub queues: u32,
    pub slots: u32,
    pub slot_size: u32,
}

impl Geometry {
    /// Bytes per slot: the first line, then the rest of the largest frame.
    fn stride(&self) -> usize {
        64 + (self.slot_size as usize)
            .saturating_sub(INLINE)
            .next_multiple_of(64)
    }

    fn ring_bytes(&self) -> usize {
        RING_HEADER + self.slots as usize * self.stride()
    }

    /// Bytes of the whole file.
    pub fn file_bytes(&self) -> usize {
        HEADER_BYTES + 2 * self.queues as usize * self.ring_bytes()
    }

    /// Offset of the ring of queue `q`, direction `dir` (0 = A->B).
    fn ring_offset(&self, q: u32, dir: u32) -> usize {
        HEADER_BYTES + (2 * q as usize + dir as usize) * self.ring_bytes()
    }
}

/// A shared mapping of the whole file; unmapped on drop.
pub(super) struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; every access through it is
// atomic or a bounds-checked raw copy, none of which depends on the thread.
unsafe impl Send for Mapping {}
// SAFETY: as above; concurrent use is what the atomics are for.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base..base+len` is the mapping made in `map`, and no
        // reference into it outlives `self` (accessors borrow `self`).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

impl Mapping {
    /// Maps `len` bytes of `file` shared, read-write.
    pub fn map(file: &File, len: usize) -> Result<Mapping, Error> {
        // SAFETY: a fresh shared mapping of a file we hold open; the kernel
        // picks the address, so nothing of ours is replaced.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::sys(format!("mmap of a {len}-byte shm file")));
        }
        let base = NonNull::new(p.cast()).ok_or_else(|| Error::sys("mmap returned null"))?;
        Ok(Mapping { base, len })
    }

    /// The atomic u32 at `off`.
    ///
    /// # Panics
    /// When `off` is out of bounds or unaligned: offsets come from this
    /// module's layout, never from the peer.
    fn u32_at(&self, off: usize) -> &AtomicU32 {
        assert!(off % 4 == 0 && off + 4 <= self.len, "shm offset {off}");
        // SAFETY: in bounds and aligned (the base is page-aligned); an
        // AtomicU32 may alias memory other processes access atomically,
        // and the reference lives no longer than the mapping.
        unsafe { &*self.base.as_ptr().add(off).cast::<AtomicU32>() }
    }

    /// The magic word.
    pub fn magic(&self) -> &AtomicU64 {
        assert!(self.len >= HEADER_BYTES);
        // SAFETY: offset 0 of a page-aligned mapping of at least a page.
        unsafe { &*self.base.as_ptr().cast::<AtomicU64>() }
    }

    /// The header's geometry (as the creator wrote it; check it).
    pub fn read_geometry(&self) -> (u32, Geometry) {
        let version = self.u32_at(8).load(Ordering::Relaxed);
        let g = Geometry {
            queues: self.u32_at(12).load(Ordering::Relaxed),
            slots: self.u32_at(16).load(Ordering::Relaxed),
            slot_size: self.u32_at(20).load(Ordering::Relaxed),
        };
        (version, g)
    }

    /// Writes the header's geometry (the creator, before the magic).
    pub fn write_geometry(&self, g: &Geometry) {
        self.u32_at(8).store(VERSION, Ordering::Relaxed);
        self.u32_at(12).store(g.queues, Ordering::Relaxed);
        self.u32_at(16).store(g.slots, Ordering::Relaxed);
        self.u32_at(20).store(g.slot_size, Ordering::Relaxed);
    }

    /// The owner word of side `side` (0 or 1).
    pub fn owner(&self, side: u8) -> &AtomicU32 {
        self.u32_at(64 * (1 + side as usize))
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }
}

/// One direction of one queue, seen from one end. Holds raw pointers into
/// a [`Mapping`] that its owner keeps alive (an `Arc` next to it).
pub(super) struct RingView {
    head: NonNull<AtomicU32>,
    tail: NonNull<AtomicU32>,
    slots: NonNull<u8>,
    mask: u32,
    stride: usize,
    slot_size: usize,
}

// SAFETY: raw pointers into shared memory, accessed atomically or by
// bounds-checked copies; the owner keeps the mapping alive.
unsafe impl Send for RingView {}

/// Copies `n <= INLINE` bytes, inline: two overlapping fixed-size copies
/// of the largest power of two not above `n` (a `memcpy` call costs more
/// than the copy for a small frame), touching only `dst[..n]`.
///
/// # Safety
/// As `copy_nonoverlapping(src, dst, n)`.
#[inline(always)]
unsafe fn copy_line(src: *const u8, dst: *mut u8, n: usize) {
    use std::ptr::copy_nonoverlapping as copy;
    debug_assert!(n <= INLINE);
    // SAFETY: in every arm both copies lie inside `[0, n)` of `src` and
    // `dst`, which the caller guarantees valid and disjoint.
    unsafe {
        if n >= 32 {
            copy(src, dst, 32);
            copy(src.add(n - 32), dst.add(n - 32), 32);
        } else if n >= 16 {
            copy(src, dst, 16);
            copy(src.add(n - 16), dst.add(n - 16), 16);
        } else if n >= 8 {
            copy(src, dst, 8);
            copy(src.add(n - 8), dst.add(n - 8), 8);
        } else if n >= 4 {
            copy(src, dst, 4);
            copy(src.add(n - 4), dst.add(n - 4), 4);
        } else {
            for i in 0..n {
                *dst.add(i) = *src.add(i);
            }
        }
    }
}

/// The seq a slot of index `idx` carries when it holds a frame.
#[inline(always)]
pub(super) fn seq_of(idx: u32) -> u32 {
    idx.wrapping_add(1) & 0xffff
}

impl RingView {
    /// The ring of queue `q`, direction `dir`, in `map` laid out as `g`.
    pub fn new(map: &Mapping, g: &Geometry, q: u32, dir: u32) -> RingView {
        let off = g.ring_offset(q, dir);
        assert!(off + g.ring_bytes() <= map.len(), "ring beyond the mapping");
        let at = |o: usize| {
            // SAFETY: `off + o` is inside the ring, which the assert above
            // placed inside the mapping.
            unsafe { NonNull::new_unchecked(map.base.as_ptr().add(off + o)) }
        };
        RingView {
            head: at(0).cast(),
            tail: at(64).cast(),
            slots: at(RING_HEADER),
            mask: g.slots - 1,
            stride: g.stride(),
            slot_size: g.slot_size as usize,
        }
    }

    /// The producer's index, as last published (restarts read it).
    #[inline(always)]
    pub fn head(&self) -> &AtomicU32 {
        // SAFETY: aligned, inside the mapping the owner keeps alive.
        unsafe { self.head.as_ref() }
    }

    /// The consumer index.
    #[inline(always)]
    pub fn tail(&self) -> &AtomicU32 {
        // SAFETY: as for `head`.
        unsafe { self.tail.as_ref() }
    }

    /// Slots in the ring.
    #[inline(always)]
    pub fn slots(&self) -> u32 {
        self.mask + 1
    }

    /// Largest frame in bytes.
    #[inline(always)]
    pub fn slot_size(&self) -> usize {
        self.slot_size
    }

    #[inline(always)]
    fn slot(&self, idx: u32) -> *mut u8 {
        // SAFETY: the masked index is below `slots`, so the slot lies
        // inside the ring (see `new`).
        unsafe {
            self.slots
                .as_ptr()
                .add((idx & self.mask) as usize * self.stride)
        }
    }

    /// The ctrl word of the slot of index `idx` (any index; masked).
    #[inline(always)]
    pub fn ctrl(&self, idx: u32) -> &AtomicU32 {
        // SAFETY: +60 of a slot is inside its first line and 4-aligned
        // (slots are 64-byte aligned); atomics may alias memory another
        // process accesses atomically.
        unsafe { &*self.slot(idx).add(INLINE).cast::<AtomicU32>() }
    }

    /// Copies `src` into the slot of `idx` at frame byte `at` (producer).
    ///
    /// # Panics
    /// When `at + src.len()` exceeds the slot size; callers check first.
    #[inline(always)]
    pub fn write(&self, idx: u32, at: usize, src: &[u8]) {
        assert!(at + src.len() <= self.slot_size);
        let slot = self.slot(idx);
        let split = INLINE.saturating_sub(at).min(src.len());
        let (first, rest) = src.split_at(split);
        // SAFETY: frame bytes 0..60 live at slot offsets 0..60 and bytes
        // 60.. at 64..stride; the assert keeps both inside the slot. `src`
        // is our own memory, so it cannot overlap the shared slot.
        unsafe {
            copy_line(first.as_ptr(), slot.add(at), first.len());
            if !rest.is_empty() {
                let at2 = (at + split).max(INLINE) + 4;
                std::ptr::copy_nonoverlapping(rest.as_ptr(), slot.add(at2), rest.len());
            }
        }
    }

    /// Copies frame bytes `at..at + dst.len()` of the slot of `idx` into
    /// `dst` (consumer).
    ///
    /// # Panics
    /// When the range exceeds the slot size; callers check lengths first.
    #[inline(always)]
    pub fn read(&self, idx: u32, at: usize, dst: &mut [u8]) {
        assert!(at + dst.len() <= self.slot_size);
        let slot = self.slot(idx);
        let split = INLINE.saturating_sub(at).min(dst.len());
        let (first, rest) = dst.split_at_mut(split);
        // SAFETY: as in `write`. A misbehaving peer writing the slot at the
        // same time can only make the copied bytes garbage: they are plain
        // bytes with no invariants, and no reference into the slot exists.
        unsafe {
            copy_line(slot.add(at), first.as_mut_ptr(), first.len());
            if !rest.is_empty() {
                let at2 = (at + split).max(INLINE) + 4;
                std::ptr::copy_nonoverlapping(slot.add(at2), rest.as_mut_ptr(), rest.len());
            }
        }
    }
}

/// Whether process `pid` exists (`kill(pid, 0)` succeeds, or fails with
/// EPERM: it exists but belongs to someone else).
pub(super) fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid == 0 {
        return false;
    }
    // SAFETY: signal 0 sends nothing; it only checks that `pid` exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}
