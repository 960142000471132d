//! Test support: the device's end of a split or packed ring, for unit
//! tests that play a device, well-behaved or hostile, without hand-coding
//! ring offsets. Reads and writes go through the ring's own [`Layout`] and
//! [`PackedLayout`], volatile or atomic as a real device's would.
#![allow(unsafe_code)]

use crate::packed::PackedLayout;
use crate::split::Layout;
use std::sync::atomic::{AtomicU16, Ordering};

/// A descriptor as the device reads it: address, length, flags, next (or
/// buffer id, for packed rings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Desc {
    pub(crate) addr: u64,
    pub(crate) len: u32,
    pub(crate) id_or_next: u16,
    pub(crate) flags: u16,
}

/// The device side of a split ring at `base` (the ring's region start plus
/// its offset).
pub(crate) struct SplitDevice {
    base: *mut u8,
    l: Layout,
    /// Next avail entry to take, and next used entry to write.
    pub(crate) next_avail: u16,
    pub(crate) used: u16,
}

impl SplitDevice {
    /// The device of the queue at `base` laid out as `l`. `base` must
    /// point at the queue's `l.len` bytes, which outlive the device.
    pub(crate) fn new(base: *mut u8, l: Layout) -> SplitDevice {
        SplitDevice {
            base,
            l,
            next_avail: 0,
            used: 0,
        }
    }

    fn at<T>(&self, off: usize) -> *mut T {
        assert!(off + std::mem::size_of::<T>() <= self.l.len, "offset {off}");
        // SAFETY: inside the queue's memory (asserted above).
        unsafe { self.base.add(off).cast() }
    }

    /// The driver's `avail.idx`.
    pub(crate) fn avail_idx(&self) -> u16 {
        // SAFETY: a 2-aligned u16 inside the queue (checked by `at`).
        unsafe { AtomicU16::from_ptr(self.at(self.l.avail + 2)).load(Ordering::Acquire) }
    }

    /// The head id in avail entry `k` (any index: taken mod the size).
    pub(crate) fn avail_entry(&self, k: u16) -> u16 {
        let slot = (k & (self.l.size - 1)) as usize;
        // SAFETY: as in `avail_idx`.
        unsafe { self.at::<u16>(self.l.avail + 4 + 2 * slot).read_volatile() }
    }

    /// Takes the next available head, if the driver published one.
    pub(crate) fn take(&mut self) -> Option<u16> {
        (self.next_avail != self.avail_idx()).then(|| {
            let id = self.avail_entry(self.next_avail);
            self.next_avail = self.next_avail.wrapping_add(1);
            id
        })
    }

    /// Descriptor `id` of the table.
    pub(crate) fn desc(&self, id: u16) -> Desc {
        let d = self.l.desc + 16 * id as usize;
        // SAFETY: as in `avail_idx`.
        unsafe {
            Desc {
                addr: self.at::<u64>(d).read_volatile(),
                len: self.at::<u32>(d + 8).read_volatile(),
                flags: self.at::<u16>(d + 12).read_volatile(),
                id_or_next: self.at::<u16>(d + 14).read_volatile(),
            }
        }
    }

    /// Overwrites descriptor `id`'s flags and next link (the table is
    /// shared memory: a hostile device can).
    pub(crate) fn set_desc_link(&self, id: u16, flags: u16, next: u16) {
        let d = self.l.desc + 16 * id as usize;
        // SAFETY: as in `avail_idx`.
        unsafe {
            self.at::<u16>(d + 12).write_volatile(flags);
            self.at::<u16>(d + 14).write_volatile(next);
        }
    }

    /// Writes used entry `k` (mod the size) without publishing it.
    pub(crate) fn write_used(&self, k: u16, id: u32, len: u32) {
        let e = self.l.used + 4 + 8 * (k & (self.l.size - 1)) as usize;
        // SAFETY: as in `avail_idx`.
        unsafe {
            self.at::<u32>(e).write_volatile(id);
            self.at::<u32>(e + 4).write_volatile(len);
        }
    }

    /// Publishes `used.idx` (Release, as a device does after its entries).
    pub(crate) fn set_used_idx(&mut self, idx: u16) {
        self.used = idx;
        // SAFETY: as in `avail_idx`.
        unsafe { AtomicU16::from_ptr(self.at(self.l.used + 2)).store(idx, Ordering::Release) };
    }

    /// Completes buffer `id` with length `len`: one used entry, published.
    pub(crate) fn complete(&mut self, id: u16, len: u32) {
        self.write_used(self.used, id as u32, len);
        self.set_used_idx(self.used.wrapping_add(1));
    }
}

/// The device side of a packed ring at `base`.
pub(crate) struct PackedDevice {
    base: *mut u8,
    l: PackedLayout,
    /// Next slot to take and to write used, with their wrap counters.
    pub(crate) next: u16,
    pub(crate) wrap: bool,
}

/// §2.8.1's AVAIL and USED flag bits.
pub(crate) const F_AVAIL: u16 = 1 << 7;
pub(crate) const F_USED: u16 = 1 << 15;

impl PackedDevice {
    /// The device of the packed queue at `base` laid out as `l` (`base`
    /// as in [`SplitDevice::new`]).
    pub(crate) fn new(base: *mut u8, l: PackedLayout) -> PackedDevice {
        PackedDevice {
            base,
            l,
            next: 0,
            wrap: true,
        }
    }

    fn at<T>(&self, off: usize) -> *mut T {
        assert!(off + std::mem::size_of::<T>() <= self.l.len, "offset {off}");
        // SAFETY: inside the queue's memory (asserted above).
        unsafe { self.base.add(off).cast() }
    }

    fn flags(&self, slot: u16) -> &AtomicU16 {
        // SAFETY: the flags of descriptor `slot`, 2-aligned, in the ring.
        unsafe { AtomicU16::from_ptr(self.at(16 * slot as usize + 14)) }
    }

    /// Descriptor `slot` (its id in `id_or_next`).
    pub(crate) fn desc(&self, slot: u16) -> Desc {
        let d = 16 * slot as usize;
        let flags = self.flags(slot).load(Ordering::Acquire);
        // SAFETY: inside the ring (checked by `at`).
        unsafe {
            Desc {
                addr: self.at::<u64>(d).read_volatile(),
                len: self.at::<u32>(d + 8).read_volatile(),
                id_or_next: self.at::<u16>(d + 12).read_volatile(),
                flags,
            }
        }
    }

    /// Whether slot `slot` is available in the lap of wrap counter `wrap`.
    pub(crate) fn is_avail(&self, slot: u16, wrap: bool) -> bool {
        let f = self.flags(slot).load(Ordering::Acquire);
        (f & F_AVAIL != 0) == wrap && (f & F_USED != 0) != wrap
    }

    /// Writes a used descriptor naming buffer `id` into `slot`, in the lap
    /// of `wrap` (flags last, Release, as a device does).
    pub(crate) fn write_used(&self, slot: u16, id: u16, len: u32, wrap: bool) {
        let d = 16 * slot as usize;
        // SAFETY: inside the ring (checked by `at`).
        unsafe {
            self.at::<u32>(d + 8).write_volatile(len);
            self.at::<u16>(d + 12).write_volatile(id);
        }
        let f = if wrap { F_AVAIL | F_USED } else { 0 };
        self.flags(slot).store(f, Ordering::Release);
    }

    /// Completes the buffer at the device's position (taking `slots`
    /// slots), naming `id`: as a well-behaved device, in ring order.
    pub(crate) fn complete(&mut self, id: u16, len: u32, slots: u16) {
        self.write_used(self.next, id, len, self.wrap);
        self.next += slots;
        if self.next >= self.l.size {
            self.next -= self.l.size;
            self.wrap = !self.wrap;
        }
    }
}
