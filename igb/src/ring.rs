//! Descriptor rings: DMA memory the device reads and writes.
//!
//! A [`DescRing`] owns its memory and that memory's mapping for the
//! function (the mapping drops first). The device may write a
//! descriptor at any time after the tail register gave it over, so no
//! Rust reference into the ring is ever made: every access is a volatile
//! load or store of one [`Layout`] or one dword, at an index masked to
//! the ring, whose bounds were checked once when the ring was made.
#![allow(unsafe_code)]

use crate::desc::Layout;
use crate::Error;
use rpmd_pmd::domain::DmaGuard;
use rpmd_pmd::function::PciFunction;
use rpmd_pmd::{DmaRegion, IovaMode};

/// Bytes per descriptor.
pub const DESC: usize = 16;

/// A ring of `n` (a power of two) 16-byte descriptors, zeroed at first.
pub struct DescRing {
    // Field order: the mapping drops before the memory it maps.
    _map: DmaGuard,
    region: DmaRegion,
    start: *mut [u64; 2],
    mask: u32,
}

// SAFETY: `start` points into `region`, which the ring owns; volatile
// accesses from whichever thread owns the ring are sound.
unsafe impl Send for DescRing {}
// SAFETY: `&DescRing` offers only volatile loads and stores of whole
// descriptors or dwords, which are sound from any thread (as a device's
// are); which thread may post what is the queue's protocol, and the one
// other holder, a port's graveyard, never accesses it.
unsafe impl Sync for DescRing {}

impl DescRing {
    /// `n` descriptors (a power of two) mapped for `func` at IOVA = VA.
    pub fn new(func: &dyn PciFunction, what: &str, n: u32) -> Result<DescRing, Error> {
        let mem = |source| Error::Memory {
            what: what.to_string(),
            source,
        };
        if !n.is_power_of_two() {
            return Err(Error::Ring {
                what: what.to_string(),
                detail: format!("{n} descriptors: not a power of two"),
            });
        }
        let region = DmaRegion::new(what, n as usize * DESC, IovaMode::Va).map_err(mem)?;
        let map = func.map_dma(&region).map_err(mem)?;
        let start = region.as_ptr().cast::<[u64; 2]>();
        // Regions start on a page, so the ring meets the device's
        // 128-byte alignment and every descriptor its own 16.
        debug_assert!(start as usize % 128 == 0);
        Ok(DescRing {
            _map: map,
            region,
            start,
            mask: n - 1,
        })
    }

    /// Descriptors.
    pub fn len(&self) -> u32 {
        self.mask + 1
    }

    /// Whether the ring is empty (never: it has a power of two).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The device address of descriptor 0.
    pub fn iova(&self) -> u64 {
        self.region.as_ptr() as u64
    }

    /// Descriptor `i` (masked).
    #[inline(always)]
    fn at(&self, i: u32) -> *mut [u64; 2] {
        // SAFETY: `i & mask < n`, and the region holds `n` descriptors
        // (made so in `new`), so the pointer stays inside it.
        unsafe { self.start.add((i & self.mask) as usize) }
    }

    /// Writes `v` as descriptor `i`.
    #[inline(always)]
    pub fn put<T: Layout>(&self, i: u32, v: T) {
        // SAFETY: in bounds (`at`); 16-aligned, and `T` is 16 bytes with
        // an alignment of at most 16 (`Layout`); volatile, so no
        // reference into memory the device writes.
        unsafe { self.at(i).cast::<T>().write_volatile(v) }
    }

    /// Descriptor `i` read as `T`.
    #[inline(always)]
    pub fn get<T: Layout>(&self, i: u32) -> T {
        // SAFETY: as in `put`; any bit pattern is a `T` (`Layout`).
        unsafe { self.at(i).cast::<T>().read_volatile() }
    }

    /// Dword `k` (0-3) of descriptor `i`, alone: a status word read
    /// before the rest of the descriptor.
    #[inline(always)]
    pub fn dword(&self, i: u32, k: usize) -> u32 {
        // SAFETY: `k & 3` keeps the dword inside the 16-byte descriptor
        // (in bounds by `at`), 4-aligned; volatile.
        u32::from_le(unsafe { self.at(i).cast::<u32>().add(k & 3).read_volatile() })
    }
}
