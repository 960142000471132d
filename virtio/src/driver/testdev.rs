//! Test support: the device's end of a split or packed ring, for unit
//! tests that play a device, well-behaved or hostile, without hand-coding
//! ring offsets. Reads and writes go through the typed views of
//! [`crate::vring`], volatile or atomic as a real device's would.
#![allow(unsafe_code)]

use crate::driver::packed::PackedLayout;
use crate::driver::split::Layout;
use crate::vring::{PackedView, SplitView};
use std::sync::atomic::Ordering;

pub(crate) use crate::vring::DescFields as Desc;

/// One-byte mbufs from `pool`, each holding its tag from `tags`, in a
/// burst (the "a run stops where `desc` refuses" tests).
pub(crate) fn tagged(
    pool: &rpmd_pmd::Mempool,
    tags: std::ops::Range<u8>,
) -> rpmd_ring::Burst<rpmd_pmd::Mbuf, 8> {
    let mut b = rpmd_ring::Burst::new();
    for i in tags {
        let mut m = pool.get().unwrap();
        m.append(1).unwrap()[0] = i;
        let _ = b.push(m);
    }
    b
}

/// The tags of the mbufs in `b`, in order.
pub(crate) fn tags_of(b: &rpmd_ring::Burst<rpmd_pmd::Mbuf, 8>) -> Vec<u8> {
    b.iter().map(|m| m.data()[0]).collect()
}

/// The device side of a split ring at `base` (the ring's region start plus
/// its offset).
pub(crate) struct SplitDevice {
    v: SplitView,
    /// Next avail entry to take, and next used entry to write.
    pub(crate) next_avail: u16,
    pub(crate) used: u16,
}

impl SplitDevice {
    /// The device of the queue at `base` laid out as `l`. `base` must
    /// point at the queue's `l.len` bytes, which outlive the device.
    pub(crate) fn new(base: *mut u8, l: Layout) -> SplitDevice {
        // SAFETY: the caller's promise above; the parts' offsets come from
        // the layout, inside `l.len` and aligned.
        let v = unsafe {
            SplitView::new(
                base.add(l.desc),
                base.add(l.avail),
                base.add(l.used),
                l.size,
            )
        };
        SplitDevice {
            v,
            next_avail: 0,
            used: 0,
        }
    }

    /// The driver's `avail.idx`.
    pub(crate) fn avail_idx(&self) -> u16 {
        self.v.avail_idx(Ordering::Acquire)
    }

    /// The head id in avail entry `k` (any index: taken mod the size).
    pub(crate) fn avail_entry(&self, k: u16) -> u16 {
        self.v.avail_entry(k)
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
        self.v.desc(id)
    }

    /// Overwrites descriptor `id`'s flags and next link (the table is
    /// shared memory: a hostile device can).
    pub(crate) fn set_desc_link(&self, id: u16, flags: u16, next: u16) {
        self.v.set_desc_link(id, flags, next)
    }

    /// Writes used entry `k` (mod the size) without publishing it.
    pub(crate) fn write_used(&self, k: u16, id: u32, len: u32) {
        self.v.set_used_elem(k, id, len)
    }

    /// Publishes `used.idx` (Release, as a device does after its entries).
    pub(crate) fn set_used_idx(&mut self, idx: u16) {
        self.used = idx;
        self.v.set_used_idx(idx, Ordering::Release)
    }

    /// Completes buffer `id` with length `len`: one used entry, published.
    pub(crate) fn complete(&mut self, id: u16, len: u32) {
        self.write_used(self.used, id as u32, len);
        self.set_used_idx(self.used.wrapping_add(1));
    }
}

/// The device side of a packed ring at `base`.
pub(crate) struct PackedDevice {
    v: PackedView,
    size: u16,
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
        // SAFETY: as in `SplitDevice::new`.
        let v = unsafe { PackedView::new(base, base.add(l.driver), base.add(l.device), l.size) };
        PackedDevice {
            v,
            size: l.size,
            next: 0,
            wrap: true,
        }
    }

    /// Descriptor `slot` (its id in `id_or_next`).
    pub(crate) fn desc(&self, slot: u16) -> Desc {
        let flags = self.v.flags(slot).load(Ordering::Acquire);
        let (addr, len, id) = self.v.desc(slot);
        Desc {
            addr,
            len,
            flags,
            id_or_next: id,
        }
    }

    /// Whether slot `slot` is available in the lap of wrap counter `wrap`.
    pub(crate) fn is_avail(&self, slot: u16, wrap: bool) -> bool {
        let f = self.v.flags(slot).load(Ordering::Acquire);
        (f & F_AVAIL != 0) == wrap && (f & F_USED != 0) != wrap
    }

    /// Writes a used descriptor naming buffer `id` into `slot`, in the lap
    /// of `wrap` (flags last, Release, as a device does).
    pub(crate) fn write_used(&self, slot: u16, id: u16, len: u32, wrap: bool) {
        self.v.set_used(slot, id, len);
        let f = if wrap { F_AVAIL | F_USED } else { 0 };
        self.v.flags(slot).store(f, Ordering::Release);
    }

    /// Completes the buffer at the device's position (taking `slots`
    /// slots), naming `id`: as a well-behaved device, in ring order.
    pub(crate) fn complete(&mut self, id: u16, len: u32, slots: u16) {
        self.write_used(self.next, id, len, self.wrap);
        self.next += slots;
        if self.next >= self.size {
            self.next -= self.size;
            self.wrap = !self.wrap;
        }
    }
}
