//! The virtqueue layouts both sides share (virtio 1.2 §2.7, §2.8), as
//! typed little-endian `#[repr(C)]` structures, and views that read and
//! write them in memory the other side can write at any time.
//!
//! The driver side ([`crate::driver::split`], [`crate::driver::packed`]) and every device
//! side (the test devices, the PCI device model, the vhost-user backend
//! to come) go through these views, so the offsets live here once. A
//! view holds raw pointers, never references: each access is one volatile
//! read or write of a field, or an atomic access to an index or flags
//! word, whose ordering the caller chooses and documents against its
//! partner on the other side.
//!
//! Making a view is `unsafe` (the caller promises the memory); using one
//! is not, and every index is reduced modulo the ring size, so no value
//! read from the ring can move an access outside it.
#![allow(unsafe_code)]

use rpmd_pmd::endian::{Le16, Le32, Le64};
use std::mem::offset_of;
use std::ptr::addr_of_mut;
use std::sync::atomic::{AtomicU16, Ordering};

/// §5.1.6: the virtio-net header in front of every frame, in bytes each
/// side owns (an mbuf's headroom, a copy read out of the peer's memory):
/// plain data, read and written whole through [`from_bytes`](Self::from_bytes)
/// and [`to_bytes`](Self::to_bytes) at the offsets of this layout. It is
/// 12 bytes with VERSION_1 or mergeable buffers; a legacy header without
/// them stops before `num_buffers` (10 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetHdr {
    /// NEEDS_CSUM, DATA_VALID.
    pub flags: u8,
    /// GSO_NONE (rpmd negotiates no segmentation offload).
    pub gso_type: u8,
    /// Length of the headers to copy into each segment (GSO).
    pub hdr_len: Le16,
    /// Bytes per segment (GSO).
    pub gso_size: Le16,
    /// Where the checksum starts being computed (NEEDS_CSUM).
    pub csum_start: Le16,
    /// Where past `csum_start` the checksum goes (NEEDS_CSUM).
    pub csum_offset: Le16,
    /// How many used buffers carry the frame (mergeable RX buffers).
    pub num_buffers: Le16,
}

const _: () = assert!(size_of::<NetHdr>() == 12);
const _: () = assert!(offset_of!(NetHdr, hdr_len) == 2);
const _: () = assert!(offset_of!(NetHdr, csum_start) == 6);
const _: () = assert!(offset_of!(NetHdr, csum_offset) == 8);
const _: () = assert!(offset_of!(NetHdr, num_buffers) == 10);
const _: () = assert!(NetHdr::LEN == crate::consts::NET_HDR_LEN);

impl NetHdr {
    /// Bytes of the whole header.
    pub const LEN: usize = size_of::<NetHdr>();
    /// Where `flags` lies in the header's bytes.
    pub const FLAGS_AT: usize = offset_of!(NetHdr, flags);
    /// Where `num_buffers` lies in the header's bytes.
    pub const NUM_BUFFERS_AT: usize = offset_of!(NetHdr, num_buffers);

    /// The little-endian field at `off` of `b`, 0 past its end.
    #[inline(always)]
    fn le16_at(b: &[u8], off: usize) -> Le16 {
        match b.get(off..off + 2) {
            Some(&[lo, hi]) => Le16::new(u16::from_le_bytes([lo, hi])),
            _ => Le16::new(0),
        }
    }

    /// The header in the first bytes of `b`; fields past its end (a
    /// legacy 10-byte header) read 0.
    #[inline(always)]
    pub fn from_bytes(b: &[u8]) -> NetHdr {
        NetHdr {
            flags: b.first().copied().unwrap_or(0),
            gso_type: b.get(1).copied().unwrap_or(0),
            hdr_len: Self::le16_at(b, offset_of!(NetHdr, hdr_len)),
            gso_size: Self::le16_at(b, offset_of!(NetHdr, gso_size)),
            csum_start: Self::le16_at(b, offset_of!(NetHdr, csum_start)),
            csum_offset: Self::le16_at(b, offset_of!(NetHdr, csum_offset)),
            num_buffers: Self::le16_at(b, offset_of!(NetHdr, num_buffers)),
        }
    }

    /// The header as it lies in memory.
    #[inline(always)]
    pub fn to_bytes(&self) -> [u8; 12] {
        let mut b = [0u8; 12];
        b[0] = self.flags;
        b[1] = self.gso_type;
        for (off, v) in [
            (offset_of!(NetHdr, hdr_len), self.hdr_len),
            (offset_of!(NetHdr, gso_size), self.gso_size),
            (offset_of!(NetHdr, csum_start), self.csum_start),
            (offset_of!(NetHdr, csum_offset), self.csum_offset),
            (offset_of!(NetHdr, num_buffers), self.num_buffers),
        ] {
            b[off..off + 2].copy_from_slice(&v.get().to_le_bytes());
        }
        b
    }

    /// `num_buffers` of the header in the first bytes of `b` (the one
    /// field the RX path reads of every mergeable frame).
    #[inline(always)]
    pub fn num_buffers_in(b: &[u8]) -> u16 {
        Self::le16_at(b, offset_of!(NetHdr, num_buffers)).get()
    }
}

/// §2.7.5: a split-ring descriptor.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default)]
pub struct SplitDesc {
    addr: Le64,
    len: Le32,
    flags: Le16,
    next: Le16,
}

const _: () = assert!(size_of::<SplitDesc>() == 16);
const _: () = assert!(offset_of!(SplitDesc, len) == 8);
const _: () = assert!(offset_of!(SplitDesc, flags) == 12);
const _: () = assert!(offset_of!(SplitDesc, next) == 14);

/// §2.7.8: a used-ring element.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UsedElem {
    id: Le32,
    len: Le32,
}

const _: () = assert!(size_of::<UsedElem>() == 8);
const _: () = assert!(offset_of!(UsedElem, len) == 4);

/// The head of the avail and used rings: flags, then the index (§2.7.6,
/// §2.7.8); the entries follow, then the event word.
#[repr(C)]
struct RingHeader {
    flags: Le16,
    idx: Le16,
}

const _: () = assert!(size_of::<RingHeader>() == 4);

/// §2.8.13: a packed-ring descriptor.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default)]
pub struct PackedDesc {
    addr: Le64,
    len: Le32,
    id: Le16,
    flags: Le16,
}

const _: () = assert!(size_of::<PackedDesc>() == 16);
const _: () = assert!(offset_of!(PackedDesc, len) == 8);
const _: () = assert!(offset_of!(PackedDesc, id) == 12);
const _: () = assert!(offset_of!(PackedDesc, flags) == 14);

/// §2.8.14: a packed ring's event suppression structure.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EventSuppress {
    off_wrap: Le16,
    flags: Le16,
}

const _: () = assert!(size_of::<EventSuppress>() == 4);
const _: () = assert!(offset_of!(EventSuppress, flags) == 2);

/// A descriptor's fields in host order (split: `id_or_next` is `next`;
/// packed: the buffer id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct DescFields {
    /// Buffer address (an IOVA).
    pub addr: u64,
    /// Buffer length.
    pub len: u32,
    /// Flags (NEXT, WRITE, INDIRECT; packed: AVAIL, USED).
    pub flags: u16,
    /// Next descriptor (split) or buffer id (packed).
    pub id_or_next: u16,
}

/// Bytes of the three parts of a split ring of `size` entries: the
/// descriptor table, the avail ring (with `used_event`), the used ring
/// (with `avail_event`).
pub const fn split_sizes(size: u16) -> (usize, usize, usize) {
    let n = size as usize;
    (
        size_of::<SplitDesc>() * n,
        size_of::<RingHeader>() + 2 * n + 2,
        size_of::<RingHeader>() + size_of::<UsedElem>() * n + 2,
    )
}

/// A split ring in shared memory: its three parts, wherever they are.
#[derive(Clone, Copy, Debug)]
pub struct SplitView {
    desc: *mut SplitDesc,
    avail: *mut RingHeader,
    used: *mut RingHeader,
    mask: u16,
}

// SAFETY: a view is a set of addresses; every access through it is
// volatile or atomic, which any thread may make (see `new`).
unsafe impl Send for SplitView {}

impl SplitView {
    /// The ring of `size` entries (a power of two) whose parts start at
    /// `desc`, `avail` and `used`.
    ///
    /// # Safety
    /// The parts must be valid for reads and writes of
    /// [`split_sizes`]`(size)` bytes each, aligned as §2.7 requires (16,
    /// 2 and 4), for as long as the view or a copy of it is used; nothing
    /// may hold a Rust reference into them.
    pub unsafe fn new(desc: *mut u8, avail: *mut u8, used: *mut u8, size: u16) -> SplitView {
        debug_assert!(size.is_power_of_two());
        SplitView {
            desc: desc.cast(),
            avail: avail.cast(),
            used: used.cast(),
            mask: size.wrapping_sub(1),
        }
    }

    /// Entries.
    #[inline(always)]
    pub fn size(&self) -> u16 {
        self.mask.wrapping_add(1)
    }

    #[inline(always)]
    fn d(&self, id: u16) -> *mut SplitDesc {
        // SAFETY: `id & mask` is inside the table of `size` descriptors
        // (`new`'s contract).
        unsafe { self.desc.add((id & self.mask) as usize) }
    }

    /// Descriptor `id` (mod the size).
    #[inline(always)]
    pub fn desc(&self, id: u16) -> DescFields {
        let d = self.d(id);
        // SAFETY: `d` is a descriptor of the table; fields are read
        // volatile, one access each.
        unsafe {
            DescFields {
                addr: addr_of_mut!((*d).addr).read_volatile().get(),
                len: addr_of_mut!((*d).len).read_volatile().get(),
                flags: addr_of_mut!((*d).flags).read_volatile().get(),
                id_or_next: addr_of_mut!((*d).next).read_volatile().get(),
            }
        }
    }

    /// Writes descriptor `id` (mod the size).
    #[inline(always)]
    pub fn set_desc(&self, id: u16, f: DescFields) {
        let d = self.d(id);
        // SAFETY: as in `desc`.
        unsafe {
            addr_of_mut!((*d).addr).write_volatile(Le64::new(f.addr));
            addr_of_mut!((*d).len).write_volatile(Le32::new(f.len));
            addr_of_mut!((*d).flags).write_volatile(Le16::new(f.flags));
            addr_of_mut!((*d).next).write_volatile(Le16::new(f.id_or_next));
        }
    }

    /// Writes descriptor `id` (mod the size) as a single buffer (`next`
    /// 0) in two 8-byte stores: the address, then length, flags and next
    /// together (bytes 8..16 of the layout), which the data path's RX
    /// refill and TX do once per frame.
    #[inline(always)]
    pub fn set_desc_single(&self, id: u16, addr: u64, len: u32, flags: u16) {
        let d = self.d(id);
        let rest = len as u64 | (flags as u64) << 32;
        // SAFETY: as in `desc`; `len`, `flags` and `next` are the 8
        // 8-aligned bytes after `addr` (offsets asserted above), written
        // as one little-endian word.
        unsafe {
            addr_of_mut!((*d).addr).write_volatile(Le64::new(addr));
            addr_of_mut!((*d).len)
                .cast::<Le64>()
                .write_volatile(Le64::new(rest));
        }
    }

    /// Writes only descriptor `id`'s flags and next link.
    #[inline(always)]
    pub fn set_desc_link(&self, id: u16, flags: u16, next: u16) {
        let d = self.d(id);
        // SAFETY: as in `desc`.
        unsafe {
            addr_of_mut!((*d).flags).write_volatile(Le16::new(flags));
            addr_of_mut!((*d).next).write_volatile(Le16::new(next));
        }
    }

    #[inline(always)]
    fn atomic(&self, p: *mut Le16) -> &AtomicU16 {
        // SAFETY: `p` is a 2-aligned word of the ring (`new`'s contract),
        // only ever accessed atomically or volatile; the reference is a
        // handle for one atomic access, not a claim on the memory.
        unsafe { AtomicU16::from_ptr(p.cast()) }
    }

    /// Loads `avail.idx`.
    #[inline(always)]
    pub fn avail_idx(&self, o: Ordering) -> u16 {
        // SAFETY: the header of the avail ring (`new`'s contract).
        u16::from_le(
            self.atomic(unsafe { addr_of_mut!((*self.avail).idx) })
                .load(o),
        )
    }

    /// Stores `avail.idx`.
    #[inline(always)]
    pub fn set_avail_idx(&self, v: u16, o: Ordering) {
        // SAFETY: as in `avail_idx`.
        self.atomic(unsafe { addr_of_mut!((*self.avail).idx) })
            .store(v.to_le(), o)
    }

    /// `avail.flags` (NO_INTERRUPT).
    #[inline(always)]
    pub fn avail_flags(&self) -> u16 {
        // SAFETY: as in `avail_idx`.
        unsafe { addr_of_mut!((*self.avail).flags).read_volatile().get() }
    }

    /// Writes `avail.flags`.
    #[inline(always)]
    pub fn set_avail_flags(&self, v: u16) {
        // SAFETY: as in `avail_idx`.
        unsafe { addr_of_mut!((*self.avail).flags).write_volatile(Le16::new(v)) }
    }

    #[inline(always)]
    fn avail_slot(&self, k: u16) -> *mut Le16 {
        // SAFETY: entry `k & mask` of the avail ring, after its header.
        unsafe {
            self.avail
                .add(1)
                .cast::<Le16>()
                .add((k & self.mask) as usize)
        }
    }

    /// The head in avail entry `k` (mod the size).
    #[inline(always)]
    pub fn avail_entry(&self, k: u16) -> u16 {
        // SAFETY: an entry of the avail ring.
        unsafe { self.avail_slot(k).read_volatile().get() }
    }

    /// Writes avail entry `k` (mod the size).
    #[inline(always)]
    pub fn set_avail_entry(&self, k: u16, head: u16) {
        // SAFETY: an entry of the avail ring.
        unsafe { self.avail_slot(k).write_volatile(Le16::new(head)) }
    }

    #[inline(always)]
    fn used_event_ptr(&self) -> *mut Le16 {
        // SAFETY: the word after the avail ring's `size` entries.
        unsafe { self.avail.add(1).cast::<Le16>().add(self.size() as usize) }
    }

    /// `used_event` (§2.7.10), the driver's interrupt threshold.
    #[inline(always)]
    pub fn used_event(&self) -> u16 {
        // SAFETY: inside the avail ring's bytes.
        unsafe { self.used_event_ptr().read_volatile().get() }
    }

    /// Writes `used_event`.
    #[inline(always)]
    pub fn set_used_event(&self, v: u16) {
        // SAFETY: inside the avail ring's bytes.
        unsafe { self.used_event_ptr().write_volatile(Le16::new(v)) }
    }

    /// Loads `used.idx`.
    #[inline(always)]
    pub fn used_idx(&self, o: Ordering) -> u16 {
        // SAFETY: the header of the used ring (`new`'s contract).
        u16::from_le(
            self.atomic(unsafe { addr_of_mut!((*self.used).idx) })
                .load(o),
        )
    }

    /// Stores `used.idx`.
    #[inline(always)]
    pub fn set_used_idx(&self, v: u16, o: Ordering) {
        // SAFETY: as in `used_idx`.
        self.atomic(unsafe { addr_of_mut!((*self.used).idx) })
            .store(v.to_le(), o)
    }

    /// `used.flags` (NO_NOTIFY).
    #[inline(always)]
    pub fn used_flags(&self) -> u16 {
        // SAFETY: as in `used_idx`.
        unsafe { addr_of_mut!((*self.used).flags).read_volatile().get() }
    }

    /// Writes `used.flags`.
    #[inline(always)]
    pub fn set_used_flags(&self, v: u16) {
        // SAFETY: as in `used_idx`.
        unsafe { addr_of_mut!((*self.used).flags).write_volatile(Le16::new(v)) }
    }

    #[inline(always)]
    fn used_slot(&self, k: u16) -> *mut UsedElem {
        // SAFETY: element `k & mask` of the used ring, after its header.
        unsafe {
            self.used
                .add(1)
                .cast::<UsedElem>()
                .add((k & self.mask) as usize)
        }
    }

    /// Used element `k` (mod the size): (id, len).
    #[inline(always)]
    pub fn used_elem(&self, k: u16) -> (u32, u32) {
        let e = self.used_slot(k);
        // SAFETY: an element of the used ring.
        unsafe {
            (
                addr_of_mut!((*e).id).read_volatile().get(),
                addr_of_mut!((*e).len).read_volatile().get(),
            )
        }
    }

    /// Only the id of used element `k` (mod the size).
    #[inline(always)]
    pub fn used_id(&self, k: u16) -> u32 {
        let e = self.used_slot(k);
        // SAFETY: an element of the used ring.
        unsafe { addr_of_mut!((*e).id).read_volatile().get() }
    }

    /// Writes used element `k` (mod the size).
    #[inline(always)]
    pub fn set_used_elem(&self, k: u16, id: u32, len: u32) {
        let e = self.used_slot(k);
        // SAFETY: an element of the used ring.
        unsafe {
            addr_of_mut!((*e).id).write_volatile(Le32::new(id));
            addr_of_mut!((*e).len).write_volatile(Le32::new(len));
        }
    }

    #[inline(always)]
    fn avail_event_ptr(&self) -> *mut Le16 {
        // SAFETY: the word after the used ring's `size` elements.
        unsafe {
            self.used
                .add(1)
                .cast::<UsedElem>()
                .add(self.size() as usize)
                .cast()
        }
    }

    /// `avail_event` (§2.7.10), the device's kick threshold.
    #[inline(always)]
    pub fn avail_event(&self) -> u16 {
        // SAFETY: inside the used ring's bytes.
        unsafe { self.avail_event_ptr().read_volatile().get() }
    }

    /// Writes `avail_event`.
    #[inline(always)]
    pub fn set_avail_event(&self, v: u16) {
        // SAFETY: inside the used ring's bytes.
        unsafe { self.avail_event_ptr().write_volatile(Le16::new(v)) }
    }
}

/// A packed ring in shared memory: the descriptor ring and the two event
/// suppression structures.
#[derive(Clone, Copy, Debug)]
pub struct PackedView {
    desc: *mut PackedDesc,
    driver_event: *mut EventSuppress,
    device_event: *mut EventSuppress,
    size: u16,
}

// SAFETY: as for `SplitView`.
unsafe impl Send for PackedView {}

impl PackedView {
    /// The ring of `size` descriptors at `desc`, with the driver's and the
    /// device's event suppression structures.
    ///
    /// # Safety
    /// `desc` must be valid for `16 * size` bytes (16-aligned) and each
    /// event structure for 4 (4-aligned), for as long as the view or a
    /// copy is used; nothing may hold a Rust reference into them.
    pub unsafe fn new(
        desc: *mut u8,
        driver_event: *mut u8,
        device_event: *mut u8,
        size: u16,
    ) -> PackedView {
        PackedView {
            desc: desc.cast(),
            driver_event: driver_event.cast(),
            device_event: device_event.cast(),
            size,
        }
    }

    /// Descriptors.
    #[inline(always)]
    pub fn size(&self) -> u16 {
        self.size
    }

    #[inline(always)]
    fn d(&self, slot: u16) -> *mut PackedDesc {
        let slot = if slot < self.size {
            slot
        } else {
            slot % self.size.max(1)
        };
        // SAFETY: `slot < size`, inside the ring (`new`'s contract).
        unsafe { self.desc.add(slot as usize) }
    }

    /// The flags word of descriptor `slot`, for atomic access (the
    /// ownership handoff).
    #[inline(always)]
    pub fn flags(&self, slot: u16) -> &AtomicU16 {
        // SAFETY: a 2-aligned word of the ring, only accessed atomically
        // or volatile.
        unsafe { AtomicU16::from_ptr(addr_of_mut!((*self.d(slot)).flags).cast()) }
    }

    /// Address, length and id of descriptor `slot` (the flags are read
    /// on their own, atomically, before these).
    #[inline(always)]
    pub fn desc(&self, slot: u16) -> (u64, u32, u16) {
        self.one(slot).desc(0)
    }

    /// Writes address, length and id of descriptor `slot` (not its flags).
    #[inline(always)]
    pub fn set_desc(&self, slot: u16, addr: u64, len: u32, id: u16) {
        self.one(slot).set_desc(0, addr, len, id)
    }

    /// Id and length of descriptor `slot` (a used descriptor, as the
    /// driver reads it).
    #[inline(always)]
    pub fn used(&self, slot: u16) -> (u16, u32) {
        self.one(slot).used(0)
    }

    /// Descriptor `slot` (taken modulo the size, as `d`) as a run of one,
    /// whose accessors the whole-ring ones share.
    #[inline(always)]
    fn one(&self, slot: u16) -> DescRun {
        DescRun {
            first: self.d(slot),
            len: 1,
        }
    }

    /// Only the id of descriptor `slot`.
    #[inline(always)]
    pub fn id(&self, slot: u16) -> u16 {
        let d = self.d(slot);
        // SAFETY: `d` is a descriptor of the ring (`d`'s modulo, `new`'s
        // contract); a volatile field read.
        unsafe { addr_of_mut!((*d).id).read_volatile().get() }
    }

    /// Writes only the length and id (a device's used descriptor).
    #[inline(always)]
    pub fn set_used(&self, slot: u16, id: u16, len: u32) {
        let d = self.d(slot);
        // SAFETY: as in `id`; volatile field writes.
        unsafe {
            addr_of_mut!((*d).len).write_volatile(Le32::new(len));
            addr_of_mut!((*d).id).write_volatile(Le16::new(id));
        }
    }

    /// The driver's event suppression (off_wrap, flags).
    #[inline(always)]
    pub fn driver_event(&self) -> (u16, u16) {
        let e = self.driver_event;
        // SAFETY: the 4-byte structure (`new`'s contract).
        unsafe {
            (
                addr_of_mut!((*e).off_wrap).read_volatile().get(),
                addr_of_mut!((*e).flags).read_volatile().get(),
            )
        }
    }

    /// Writes the driver's event suppression.
    #[inline(always)]
    pub fn set_driver_event(&self, off_wrap: u16, flags: u16) {
        let e = self.driver_event;
        // SAFETY: as in `driver_event`.
        unsafe {
            addr_of_mut!((*e).off_wrap).write_volatile(Le16::new(off_wrap));
            addr_of_mut!((*e).flags).write_volatile(Le16::new(flags));
        }
    }

    /// Writes only the flags of the driver's event suppression.
    #[inline(always)]
    pub fn set_driver_flags(&self, flags: u16) {
        let e = self.driver_event;
        // SAFETY: as in `driver_event`.
        unsafe { addr_of_mut!((*e).flags).write_volatile(Le16::new(flags)) }
    }

    /// Only the flags of the device's event suppression.
    #[inline(always)]
    pub fn device_flags(&self) -> u16 {
        let e = self.device_event;
        // SAFETY: as in `driver_event`.
        unsafe { addr_of_mut!((*e).flags).read_volatile().get() }
    }

    /// The device's event suppression (off_wrap, flags).
    #[inline(always)]
    pub fn device_event(&self) -> (u16, u16) {
        let e = self.device_event;
        // SAFETY: as in `driver_event`.
        unsafe {
            (
                addr_of_mut!((*e).off_wrap).read_volatile().get(),
                addr_of_mut!((*e).flags).read_volatile().get(),
            )
        }
    }

    /// Writes the device's event suppression.
    #[inline(always)]
    pub fn set_device_event(&self, off_wrap: u16, flags: u16) {
        let e = self.device_event;
        // SAFETY: as in `driver_event`.
        unsafe {
            addr_of_mut!((*e).off_wrap).write_volatile(Le16::new(off_wrap));
            addr_of_mut!((*e).flags).write_volatile(Le16::new(flags));
        }
    }
}

/// `len` consecutive descriptors of a packed ring, checked once to lie
/// inside it ([`PackedView::run`]): a batched path's accesses are in
/// bounds by the loop that walks the run, not by a test of the slot each.
/// Raw like the view it came from, and under the same contract.
#[derive(Clone, Copy)]
pub struct DescRun {
    first: *mut PackedDesc,
    len: usize,
}

impl PackedView {
    /// Descriptors `slot..slot + len`, or `None` if they pass the ring's
    /// end.
    #[inline(always)]
    pub fn run(&self, slot: u16, len: usize) -> Option<DescRun> {
        (usize::from(slot) + len <= usize::from(self.size)).then(|| DescRun {
            // SAFETY: `slot + len <= size`: inside the ring (`new`'s
            // contract).
            first: unsafe { self.desc.add(usize::from(slot)) },
            len,
        })
    }
}

/// Four consecutive descriptors of a packed ring (a cache line's worth):
/// a [`DescRun`] whose length is a constant, so that the accessors' bound
/// checks fold away in a loop unrolled over the four.
#[derive(Clone, Copy)]
pub struct DescLine {
    first: *mut PackedDesc,
}

impl PackedView {
    /// Descriptors `slot..slot + 4`, or `None` if they pass the ring's
    /// end.
    #[inline(always)]
    pub fn four(&self, slot: u16) -> Option<DescLine> {
        let run = self.run(slot, 4)?;
        Some(DescLine { first: run.first })
    }
}

impl DescLine {
    #[inline(always)]
    fn run(&self) -> DescRun {
        DescRun {
            first: self.first,
            len: 4,
        }
    }

    /// The flags word of the line's descriptor `k`, for atomic access.
    #[inline(always)]
    pub fn flags(&self, k: usize) -> &AtomicU16 {
        // SAFETY: `run` is the line `PackedView::four` checked to lie
        // inside the ring; the reference lives no longer than `self`,
        // which lives no longer than the ring (`new`'s contract).
        unsafe { &*(self.run().flags(k) as *const AtomicU16) }
    }

    /// Id and length of the line's descriptor `k` (a used descriptor).
    #[inline(always)]
    pub fn used(&self, k: usize) -> (u16, u32) {
        self.run().used(k)
    }

    /// Address, length and id of the line's descriptor `k` (its flags
    /// read on their own, atomically, before these).
    #[inline(always)]
    pub fn desc(&self, k: usize) -> (u64, u32, u16) {
        self.run().desc(k)
    }
}

impl DescRun {
    /// Descriptors in the run.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the run is empty.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The run's first `len` descriptors (all of them if it is shorter).
    #[inline(always)]
    pub fn first(&self, len: usize) -> DescRun {
        DescRun {
            first: self.first,
            len: len.min(self.len),
        }
    }

    #[inline(always)]
    fn at(&self, k: usize) -> *mut PackedDesc {
        assert!(k < self.len, "descriptor {k} of a run of {}", self.len);
        // SAFETY: `k < len`: inside the run, which `PackedView::run`
        // checked to lie inside the ring.
        unsafe { self.first.add(k) }
    }

    /// The flags word of the run's descriptor `k`, for atomic access.
    #[inline(always)]
    pub fn flags(&self, k: usize) -> &AtomicU16 {
        // SAFETY: as in `PackedView::flags`.
        unsafe { AtomicU16::from_ptr(addr_of_mut!((*self.at(k)).flags).cast()) }
    }

    /// Writes address, length and id of the run's descriptor `k`.
    #[inline(always)]
    pub fn set_desc(&self, k: usize, addr: u64, len: u32, id: u16) {
        let d = self.at(k);
        // SAFETY: a descriptor of the ring; volatile field writes.
        unsafe {
            addr_of_mut!((*d).addr).write_volatile(Le64::new(addr));
            addr_of_mut!((*d).len).write_volatile(Le32::new(len));
            addr_of_mut!((*d).id).write_volatile(Le16::new(id));
        }
    }

    /// Address, length and id of the run's descriptor `k` (its flags
    /// read on their own, atomically, before these).
    #[inline(always)]
    pub fn desc(&self, k: usize) -> (u64, u32, u16) {
        let d = self.at(k);
        // SAFETY: as in `set_desc`; volatile field reads.
        unsafe {
            (
                addr_of_mut!((*d).addr).read_volatile().get(),
                addr_of_mut!((*d).len).read_volatile().get(),
                addr_of_mut!((*d).id).read_volatile().get(),
            )
        }
    }

    /// Id and length of the run's descriptor `k` (a used descriptor).
    #[inline(always)]
    pub fn used(&self, k: usize) -> (u16, u32) {
        let d = self.at(k);
        // SAFETY: as in `set_desc`; volatile field reads.
        unsafe {
            (
                addr_of_mut!((*d).id).read_volatile().get(),
                addr_of_mut!((*d).len).read_volatile().get(),
            )
        }
    }
}

/// The flags words of one burst of packed descriptors, made visible to
/// the other side at once, as both sides of a packed ring hand over
/// descriptors: the driver making buffers available, the device marking
/// them used (DPDK's vhost flushes its shadow used ring the same way).
///
/// Each descriptor's other fields are written before its flags are
/// [`put`](Self::put); the burst's first flags word is held back and the
/// others are stored Relaxed; [`publish`](Self::publish) stores the first
/// with Release. The other side takes descriptors in ring order from the
/// first, reading its flags with Acquire (the partner of that store), so
/// it sees the whole burst or none of it, never a line still being
/// written. Whole bursts also keep the two sides from settling into a
/// rhythm of four-descriptor pieces, which halved the rate of runs that
/// fell into it (`compare.sh virtio`, io 64 packed; benches/RESULTS.md).
#[derive(Debug, Default)]
pub struct FlagBatch {
    first: Option<(u16, u16)>,
}

impl FlagBatch {
    /// Adds flags `f` (host order) of `slot`, whose other fields are
    /// written; slots are put in ring order.
    #[inline(always)]
    pub fn put(&mut self, v: &PackedView, slot: u16, f: u16) {
        if self.first.is_none() {
            self.first = Some((slot, f));
        } else {
            // Relaxed: the other side reads past the first only after the
            // Release store in `publish`.
            v.flags(slot).store(f.to_le(), Ordering::Relaxed);
        }
    }

    /// Adds flags `f` (host order) of every descriptor of `run`, whose
    /// other fields are written; `run` starts at ring slot `slot` and
    /// follows what was put before, in ring order.
    #[inline(always)]
    pub fn put_run(&mut self, run: &DescRun, slot: u16, f: u16) {
        let mut k = 0;
        if self.first.is_none() && !run.is_empty() {
            self.first = Some((slot, f));
            k = 1;
        }
        while k < run.len() {
            // Relaxed, as in `put`.
            run.flags(k).store(f.to_le(), Ordering::Relaxed);
            k += 1;
        }
    }

    /// Whether flags wait for `publish`.
    #[inline(always)]
    pub fn is_pending(&self) -> bool {
        self.first.is_some()
    }

    /// Makes the burst visible (the first flags word, Release: pairs with
    /// the other side's Acquire load of it); false if nothing was put.
    #[inline(always)]
    pub fn publish(&mut self, v: &PackedView) -> bool {
        match self.first.take() {
            Some((slot, f)) => {
                v.flags(slot).store(f.to_le(), Ordering::Release);
                true
            }
            None => false,
        }
    }

    /// Forgets what was put (a ring started over).
    pub fn clear(&mut self) {
        self.first = None;
    }
}

/// Where `len` bytes at the peer's own address `addr` are mapped, checked
/// to lie inside one region and `align`-aligned; the error names `what`.
fn peer_part(
    mem: &rpmd_pmd::peer::PeerMemory,
    what: &str,
    addr: u64,
    len: usize,
    align: usize,
) -> Result<*mut u8, String> {
    let s = mem.translate_user(addr, len as u64).ok_or_else(|| {
        format!("{what} ({len} bytes at {addr:#x}) is not inside one memory region")
    })?;
    if s.ptr as usize % align != 0 || addr as usize % align != 0 {
        return Err(format!("{what} at {addr:#x} is not {align}-aligned"));
    }
    Ok(s.ptr)
}

/// A split ring that lies in memory a peer shared (a vhost-user
/// frontend's memory table), with that memory kept mapped for as long as
/// the view: the only way a device side builds a view on peer memory.
/// Crate-private, since a view is `Copy`: the crate keeps every copy
/// inside the lifetime of the `PeerSplit` it came from.
pub(crate) struct PeerSplit {
    view: SplitView,
    /// Keeps the mappings the view points into.
    mem: std::sync::Arc<rpmd_pmd::peer::PeerMemory>,
}

impl PeerSplit {
    /// The ring of `size` entries whose descriptor table, avail and used
    /// rings start at the peer's own addresses `desc`, `avail` and `used`
    /// (vhost-user SET_VRING_ADDR), each checked to lie wholly inside one
    /// region of `mem` and aligned as §2.7 requires; the error says which
    /// part failed and why.
    pub(crate) fn new(
        mem: std::sync::Arc<rpmd_pmd::peer::PeerMemory>,
        size: u16,
        desc: u64,
        avail: u64,
        used: u64,
    ) -> Result<PeerSplit, String> {
        if !size.is_power_of_two() {
            return Err(format!("ring size {size} is not a power of two"));
        }
        let (d, a, u) = split_sizes(size);
        let part = |what: &str, addr: u64, len: usize, align: usize| {
            peer_part(&mem, what, addr, len, align)
        };
        let (dp, ap, up) = (
            part("descriptor table", desc, d, 16)?,
            part("avail ring", avail, a, 2)?,
            part("used ring", used, u, 4)?,
        );
        // SAFETY: each part lies inside one mapping of `mem` (checked by
        // `translate_user`), aligned (checked above), and `mem`, kept in
        // the returned value, keeps the mappings alive as long as the
        // view; the peer's writes are why every access is volatile or
        // atomic.
        let view = unsafe { SplitView::new(dp, ap, up, size) };
        Ok(PeerSplit { view, mem })
    }

    /// The memory the ring lies in (and its buffers, for the copies).
    #[inline(always)]
    pub(crate) fn mem(&self) -> &rpmd_pmd::peer::PeerMemory {
        &self.mem
    }

    /// The view; a copy must not outlive `self`.
    #[inline(always)]
    pub(crate) fn view(&self) -> SplitView {
        self.view
    }
}

/// A packed ring in memory a peer shared, with that memory kept mapped
/// for as long as the view (as [`PeerSplit`]).
pub(crate) struct PeerPacked {
    view: PackedView,
    mem: std::sync::Arc<rpmd_pmd::peer::PeerMemory>,
}

impl PeerPacked {
    /// The ring of `size` descriptors at the peer's own address `desc`,
    /// with the driver's and the device's event suppression structures at
    /// `driver` and `device` (vhost-user SET_VRING_ADDR's avail and used
    /// addresses), each checked to lie inside one region of `mem` and
    /// aligned as §2.8 requires.
    pub(crate) fn new(
        mem: std::sync::Arc<rpmd_pmd::peer::PeerMemory>,
        size: u16,
        desc: u64,
        driver: u64,
        device: u64,
    ) -> Result<PeerPacked, String> {
        if size == 0 || size > 32768 {
            return Err(format!("ring size {size} (1..=32768)"));
        }
        let part = |what: &str, addr: u64, len: usize, align: usize| {
            peer_part(&mem, what, addr, len, align)
        };
        let (dp, drv, dev) = (
            part(
                "descriptor ring",
                desc,
                size_of::<PackedDesc>() * size as usize,
                16,
            )?,
            part("driver event area", driver, size_of::<EventSuppress>(), 4)?,
            part("device event area", device, size_of::<EventSuppress>(), 4)?,
        );
        // SAFETY: the ring and both event structures lie inside mappings
        // of `mem` (checked by `translate_user`), aligned (checked above);
        // `mem`, kept in the returned value, keeps them mapped as long as
        // the view.
        let view = unsafe { PackedView::new(dp, drv, dev, size) };
        Ok(PeerPacked { view, mem })
    }

    /// The memory the ring lies in.
    #[inline(always)]
    pub(crate) fn mem(&self) -> &rpmd_pmd::peer::PeerMemory {
        &self.mem
    }

    /// The view; a copy must not outlive `self`.
    #[inline(always)]
    pub(crate) fn view(&self) -> PackedView {
        self.view
    }
}

#[cfg(test)]
mod tests {
    /// The header reads back what it wrote, at the spec's offsets, and a
    /// legacy 10-byte header reads `num_buffers` as 0.
    #[test]
    fn the_net_header_round_trips_at_the_spec_offsets() {
        let h = NetHdr {
            flags: 1,
            gso_type: 0,
            hdr_len: Le16::new(0x0201),
            gso_size: Le16::new(0x0403),
            csum_start: Le16::new(34),
            csum_offset: Le16::new(16),
            num_buffers: Le16::new(3),
        };
        let b = h.to_bytes();
        assert_eq!(b, [1, 0, 1, 2, 3, 4, 34, 0, 16, 0, 3, 0]);
        assert_eq!(NetHdr::from_bytes(&b), h);
        assert_eq!(NetHdr::num_buffers_in(&b), 3);
        let legacy = NetHdr::from_bytes(&b[..10]);
        assert_eq!((legacy.num_buffers.get(), legacy.csum_start.get()), (0, 34));
        assert_eq!(NetHdr::from_bytes(&[]), NetHdr::default());
    }

    use super::*;

    #[test]
    fn split_parts_are_where_the_spec_puts_them() {
        assert_eq!(split_sizes(256), (4096, 4 + 512 + 2, 4 + 2048 + 2));
        let mut mem = vec![0u64; 1024];
        let base = mem.as_mut_ptr().cast::<u8>();
        // SAFETY: 8 KiB of zeroed memory hold all three parts of a ring
        // of 8 at these offsets, suitably aligned.
        let v = unsafe { SplitView::new(base, base.add(128), base.add(4096), 8) };
        v.set_desc(
            9,
            DescFields {
                addr: 0x1122,
                len: 7,
                flags: 1,
                id_or_next: 3,
            },
        );
        v.set_avail_entry(10, 5);
        v.set_avail_idx(11, Ordering::Release);
        v.set_used_event(4);
        v.set_used_elem(15, 6, 60);
        v.set_used_idx(1, Ordering::Release);
        v.set_avail_event(2);
        let bytes = |off: usize, n: usize| -> Vec<u8> {
            // SAFETY: inside `mem`, which nothing else touches now.
            (0..n)
                .map(|i| unsafe { base.add(off + i).read() })
                .collect()
        };
        // Index 9 of 8 is descriptor 1, little-endian fields.
        assert_eq!(
            bytes(16, 16),
            [0x22, 0x11, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 1, 0, 3, 0]
        );
        assert_eq!(bytes(128, 4), [0, 0, 11, 0]);
        assert_eq!(bytes(128 + 4 + 2 * 2, 2), [5, 0]);
        assert_eq!(bytes(128 + 4 + 16, 2), [4, 0], "used_event after 8 entries");
        assert_eq!(bytes(4096 + 4 + 8 * 7, 8), [6, 0, 0, 0, 60, 0, 0, 0]);
        assert_eq!(
            bytes(4096 + 4 + 64, 2),
            [2, 0],
            "avail_event after 8 elements"
        );
        assert_eq!(v.desc(1).addr, 0x1122);
        assert_eq!(v.used_elem(7), (6, 60));
        assert_eq!(v.avail_idx(Ordering::Acquire), 11);
    }

    #[test]
    fn packed_slots_stay_inside_the_ring() {
        let mut mem = vec![0u64; 64];
        let base = mem.as_mut_ptr().cast::<u8>();
        // SAFETY: 512 bytes: a ring of 4 (64 bytes) and two event words.
        let v = unsafe { PackedView::new(base, base.add(256), base.add(260), 4) };
        v.set_desc(6, 0xab, 9, 2);
        v.flags(6).store(0x80, Ordering::Release);
        assert_eq!(v.desc(2), (0xab, 9, 2), "slot 6 of 4 is slot 2");
        assert_eq!(v.flags(2).load(Ordering::Acquire), 0x80);
        v.set_driver_event(0x8003, 2);
        assert_eq!(v.driver_event(), (0x8003, 2));
        assert_eq!(v.device_event(), (0, 0));
    }
}
