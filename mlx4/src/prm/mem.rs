//! Memory the device reads and writes by DMA: command mailboxes and the
//! firmware area.
//!
//! A [`DevBuf`] owns a [`DmaRegion`] mapped for one function (its guard
//! unmaps it when the buffer drops, after the device has been told to let
//! go of it). The device may write the bytes whenever a command runs, so no
//! Rust reference into them is ever made: [`DevBuf::write`] and
//! [`DevBuf::read`] are bounds-checked volatile copies, the only accesses.
#![allow(unsafe_code)]

use crate::Error;
use rpmd_pmd::domain::DmaGuard;
use rpmd_pmd::function::PciFunction;
use rpmd_pmd::{DmaRegion, IovaMode};

/// A hardware layout that can travel as bytes: a `#[repr(C)]` struct of
/// byte-order integers and byte arrays, with no padding.
///
/// # Safety
/// The type must have no padding bytes and accept every bit pattern
/// (each layout in [`super::layout`] asserts its size, and every field is
/// an integer, a byte-order integer or an array of them).
pub unsafe trait Wire: Copy {
    /// All zeros, a valid value by the trait's contract.
    fn zeroed() -> Self {
        // SAFETY: every bit pattern, zeros included, is a valid `Self`.
        unsafe { std::mem::zeroed() }
    }

    /// The bytes as the device sees them.
    fn bytes(&self) -> &[u8] {
        // SAFETY: `Self` has no padding, so all `size_of` bytes are
        // initialised; the slice borrows `self` and is read-only.
        unsafe { std::slice::from_raw_parts((self as *const Self).cast(), size_of::<Self>()) }
    }

    /// A value from the first `size_of::<Self>()` bytes of `b`, if there
    /// are that many.
    fn from_bytes(b: &[u8]) -> Option<Self> {
        if b.len() < size_of::<Self>() {
            return None;
        }
        // SAFETY: `b` holds enough bytes (checked), any bit pattern is a
        // valid `Self`, and the unaligned read copies them out.
        Some(unsafe { b.as_ptr().cast::<Self>().read_unaligned() })
    }
}

// SAFETY: integers accept every bit pattern and have no padding.
unsafe impl Wire for u8 {}
// SAFETY: as above.
unsafe impl Wire for u32 {}
// SAFETY: as above.
unsafe impl Wire for u64 {}

/// A DMA buffer of one function's, at IOVA = VA.
pub struct DevBuf {
    // Field order: the mapping goes before the memory it maps.
    _map: DmaGuard,
    region: DmaRegion,
    len: usize,
}

impl DevBuf {
    /// `len` zeroed bytes, mapped for `func`, starting on a page (4 KiB
    /// at least, so a mailbox's alignment holds).
    pub fn new(func: &dyn PciFunction, what: &str, len: usize) -> Result<DevBuf, Error> {
        let region = DmaRegion::new(what, len, IovaMode::Va).map_err(|e| Error::Memory {
            what: what.to_string(),
            source: e,
        })?;
        let map = func.map_dma(&region).map_err(|e| Error::Memory {
            what: format!("mapping {what} for the device"),
            source: e,
        })?;
        Ok(DevBuf {
            _map: map,
            region,
            len,
        })
    }

    /// Bytes usable.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty (never: regions have a length).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address of byte 0.
    pub fn iova(&self) -> u64 {
        self.region.as_ptr() as u64
    }

    /// Copies `data` to byte `off`; false if it does not fit.
    pub fn write(&self, off: usize, data: &[u8]) -> bool {
        if off.checked_add(data.len()).is_none_or(|e| e > self.len) {
            return false;
        }
        let base = self.region.as_ptr();
        for (i, &b) in data.iter().enumerate() {
            // SAFETY: `off + i < len` (checked above), inside the region,
            // which lives as long as `self`; a volatile byte store makes
            // no reference into memory the device may write.
            unsafe { base.add(off + i).write_volatile(b) };
        }
        true
    }

    /// Fills `out` from byte `off`; false if it does not fit.
    pub fn read(&self, off: usize, out: &mut [u8]) -> bool {
        if off.checked_add(out.len()).is_none_or(|e| e > self.len) {
            return false;
        }
        let base = self.region.as_ptr();
        for (i, b) in out.iter_mut().enumerate() {
            // SAFETY: as for `write`: in bounds, volatile, no reference.
            *b = unsafe { base.add(off + i).read_volatile() };
        }
        true
    }

    /// Writes layout `v` at byte `off`; false if it does not fit.
    pub fn put<T: Wire>(&self, off: usize, v: &T) -> bool {
        if self.fits::<T>(off) {
            // SAFETY: `off..off + size_of::<T>()` is inside the region
            // and aligned for `T` (checked by `fits`); a volatile store of
            // a `Wire` value makes no reference into device memory.
            unsafe { self.region.as_ptr().add(off).cast::<T>().write_volatile(*v) };
            return true;
        }
        self.write(off, v.bytes())
    }

    /// Layout `T` read from byte `off` in one volatile load (aligned), or
    /// None if it does not fit.
    pub fn get<T: Wire>(&self, off: usize) -> Option<T> {
        if self.fits::<T>(off) {
            // SAFETY: in bounds and aligned (`fits`); every bit pattern is
            // a `T` (`Wire`); volatile, so no reference is made.
            return Some(unsafe { self.region.as_ptr().add(off).cast::<T>().read_volatile() });
        }
        let mut b = vec![0u8; size_of::<T>()];
        self.read(off, &mut b).then(|| T::from_bytes(&b)).flatten()
    }

    /// The byte at `off` (0 past the end).
    pub fn load8(&self, off: usize) -> u8 {
        self.get::<u8>(off).unwrap_or(0)
    }

    /// Stores big-endian `v` at `off` (4-aligned; ignored past the end).
    pub fn store_be32(&self, off: usize, v: u32) {
        self.put(off, &v.to_be());
    }

    /// Whether a `T` at `off` lies inside the buffer, aligned.
    fn fits<T>(&self, off: usize) -> bool {
        off % align_of::<T>() == 0 && off.checked_add(size_of::<T>()).is_some_and(|e| e <= self.len)
    }

    /// Zeroes the whole buffer.
    pub fn clear(&self) {
        let zeros = [0u8; 256];
        let mut at = 0;
        while at < self.len {
            let n = zeros.len().min(self.len - at);
            self.write(at, &zeros[..n]);
            at += n;
        }
    }
}

/// A ring inside a [`DevBuf`]: `entries` (a power of two) of `STRIDE`
/// bytes from byte `base`, its bounds checked once when it is made, so
/// that the data path's accesses need none: an entry's index is masked,
/// and the byte offset inside it is a constant checked at compile time.
pub struct RingMem<const STRIDE: usize> {
    buf: std::sync::Arc<DevBuf>,
    /// Byte `base` of `buf`, kept so that an access loads no pointer
    /// through the shared buffer (a store there could alias it).
    start: *mut u8,
    mask: u32,
}

// SAFETY: `start` points into `buf`'s region, which the ring keeps alive
// (the `Arc`) and which any thread may access (volatile, like `DevBuf`).
unsafe impl<const STRIDE: usize> Send for RingMem<STRIDE> {}

impl<const STRIDE: usize> RingMem<STRIDE> {
    /// The ring, if it fits in `buf` and starts 8-aligned (what its
    /// accesses need).
    pub fn new(buf: std::sync::Arc<DevBuf>, base: usize, entries: u32) -> Option<Self> {
        let fits = (entries as usize)
            .checked_mul(STRIDE)
            .and_then(|n| n.checked_add(base))
            .is_some_and(|end| end <= buf.len);
        let aligned = base % 8 == 0 && STRIDE % 8 == 0;
        if !(entries.is_power_of_two() && fits && aligned) {
            return None;
        }
        // SAFETY: `base <= len` (checked above), so the pointer stays
        // inside the region or one past its end.
        let start = unsafe { buf.region.as_ptr().add(base) };
        Some(RingMem {
            buf,
            start,
            mask: entries - 1,
        })
    }

    /// The buffer the ring lies in.
    pub fn buf(&self) -> &DevBuf {
        &self.buf
    }

    /// The address of byte `AT` of entry `index` (masked).
    #[inline(always)]
    fn at<T, const AT: usize>(&self, index: u32) -> *mut T {
        const {
            assert!(AT + size_of::<T>() <= STRIDE && AT % align_of::<T>() == 0);
            assert!(align_of::<T>() <= 8);
        }
        let off = (index & self.mask) as usize * STRIDE + AT;
        // SAFETY: `base + off + size_of::<T>() <= base + entries * STRIDE
        // <= len` (the index is masked below `entries`, `AT + size <=
        // STRIDE` at compile time, the rest checked in `new`), so the
        // pointer stays inside the region.
        unsafe { self.start.add(off).cast() }
    }

    /// Writes `v` at byte `AT` of entry `index`.
    #[inline(always)]
    pub fn put<T: Wire, const AT: usize>(&self, index: u32, v: T) {
        let p = self.at::<T, AT>(index);
        // SAFETY: in bounds (`at`), aligned (`base` and `STRIDE` are
        // multiples of 8 and `AT` of `T`'s alignment, which is at most
        // 8 for every `Wire` layout here), volatile: no reference into
        // memory the device writes.
        unsafe { p.write_volatile(v) }
    }

    /// Writes `f(i)` at byte `AT` of each entry `i` of the `count` from
    /// `from` on (indices wrap).
    #[inline(always)]
    pub fn put_each<T: Wire, const AT: usize>(&self, from: u32, count: u32, f: impl Fn(u32) -> T) {
        for k in 0..count {
            let i = from.wrapping_add(k);
            self.put::<T, AT>(i, f(i));
        }
    }

    /// Reads the `T` at byte `AT` of entry `index`.
    #[inline(always)]
    pub fn get<T: Wire, const AT: usize>(&self, index: u32) -> T {
        let p = self.at::<T, AT>(index);
        // SAFETY: as in `put`; every bit pattern is a `T` (`Wire`).
        unsafe { p.read_volatile() }
    }
}
