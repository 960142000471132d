//! DMA memory: regions that devices and vhost-user peers can reach.
//!
//! A [`DmaRegion`] is a memfd mapped shared into this process, so it can be
//! handed to a vhost-user peer by file descriptor ([`DmaRegion::fd`]).
//! It is backed by 2 MiB hugepages (`MFD_HUGETLB`) when the system has free
//! ones, and falls back to normal 4 KiB pages otherwise, warning once with
//! the command that reserves hugepages.
//!
//! Every region knows the I/O virtual address (IOVA) a device must use for
//! it ([`IovaMode`]):
//! - [`IovaMode::Va`]: IOVA = virtual address. For devices behind an IOMMU
//!   that the region is mapped into (VFIO's `VFIO_IOMMU_MAP_DMA`), and for
//!   vhost-user peers, which translate through the memory table.
//! - [`IovaMode::Pa`]: IOVA = physical address, read from
//!   `/proc/self/pagemap` once at creation (pages are populated and locked,
//!   so they do not move). For devices that bypass the IOMMU, like legacy
//!   virtio. Needs root.
//!
//! Translation is O(1): a subtraction for `Va`, a table lookup by page index
//! for `Pa`.
//!
//! Regions are placed at virtual addresses from 4 GiB upwards (a hint, like
//! DPDK's base-virtaddr), so that IOVA = VA fits IOMMUs with narrow address
//! widths: QEMU's emulated VT-d, for one, translates only 39 bits, and a
//! default mmap lands near 2^47. If the hint range is taken the kernel picks
//! the address and [`crate::vfio::Container::map_dma`] reports a VA beyond
//! the IOMMU's aperture.
//!
//! Memory a device may write is never turned into a Rust reference here:
//! the region hands out raw pointers, and the types built on it (mbufs,
//! descriptor rings) decide when software owns a piece of it.
#![allow(unsafe_code)]

use crate::Error;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

/// An I/O virtual address: what a device puts on the bus to reach memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Iova(u64);

impl Iova {
    /// Wraps a raw IOVA.
    pub const fn new(raw: u64) -> Self {
        Iova(raw)
    }

    /// The raw value, for descriptors.
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// `self + off`, or `None` on overflow.
    pub fn checked_add(self, off: u64) -> Option<Iova> {
        self.0.checked_add(off).map(Iova)
    }
}

/// How a region's IOVAs are derived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IovaMode {
    /// IOVA = virtual address (VFIO with an IOMMU, vhost-user).
    Va,
    /// IOVA = physical address (devices without an IOMMU in the way).
    Pa,
}

/// The page size backing a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageSize {
    /// 4 KiB base pages (fallback).
    Base4K,
    /// 2 MiB hugepages.
    Huge2M,
    /// 1 GiB hugepages (where the system has them reserved).
    Huge1G,
}

impl PageSize {
    /// Bytes per page.
    pub const fn bytes(self) -> usize {
        match self {
            PageSize::Base4K => 4096,
            PageSize::Huge2M => 2 << 20,
            PageSize::Huge1G => 1 << 30,
        }
    }
}

/// Physical address lookup for [`IovaMode::Pa`]: one entry per page.
enum Translation {
    Va,
    Pa { shift: u32, page_pa: Box<[u64]> },
}

/// A shareable, pinned memory region with known IOVAs.
pub struct DmaRegion {
    map: Mapping,
    base: *mut u8,
    file: File,
    page: PageSize,
    tr: Translation,
}

// SAFETY: the region is plain memory plus an fd; `base` is only a cached
// pointer into the mapping, which lives as long as `self`. Who may access
// which bytes is decided by the types built on the region.
unsafe impl Send for DmaRegion {}
// SAFETY: as above; `&DmaRegion` offers raw pointers and translations only.
unsafe impl Sync for DmaRegion {}

static FALLBACK_WARNING: Once = Once::new();

/// Creates a memfd backed by pages of `page` size.
#[cfg(not(miri))]
fn memfd(name: &str, page: PageSize) -> Result<File, Error> {
    let cname = std::ffi::CString::new(name.replace('\0', "_")).map_err(|e| Error::Invalid {
        what: "region name",
        detail: e.to_string(),
    })?;
    let flags = libc::MFD_CLOEXEC
        | match page {
            PageSize::Base4K => 0,
            PageSize::Huge2M => libc::MFD_HUGETLB | libc::MFD_HUGE_2MB,
            PageSize::Huge1G => libc::MFD_HUGETLB | libc::MFD_HUGE_1GB,
        };
    // SAFETY: `cname` is a valid NUL-terminated string; memfd_create has no
    // other preconditions.
    let fd = unsafe { libc::memfd_create(cname.as_ptr(), flags) };
    if fd < 0 {
        return Err(Error::sys(format!("memfd_create({name})")));
    }
    // SAFETY: `fd` is a new descriptor that nothing else owns.
    Ok(unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// Under Miri, which has neither memfds nor shared mappings, a region is
/// heap memory (scripts/miri.sh runs with isolation off, so the file can
/// be /dev/null); the rest of the crate, the unsafe core Miri checks, is
/// the same.
#[cfg(miri)]
fn memfd(name: &str, _page: PageSize) -> Result<File, Error> {
    File::open("/dev/null").map_err(|source| Error::Sys {
        what: format!("the stand-in file of {name} under Miri"),
        source,
    })
}

/// A shared mapping of a memfd, unmapped on drop. (memmap2 cannot take an
/// address hint, which IOVA = VA under narrow IOMMUs needs.)
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        #[cfg(not(miri))]
        // SAFETY: `ptr..ptr+len` is a mapping we made and nobody else
        // unmaps; the region (and every pointer into it) is gone.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len)
        };
        #[cfg(miri)]
        // SAFETY: allocated by `map` with this layout; the region (and
        // every pointer into it) is gone.
        unsafe {
            std::alloc::dealloc(self.ptr, miri_layout(self.len))
        };
    }
}

/// The layout of a region's heap memory under Miri.
#[cfg(miri)]
fn miri_layout(len: usize) -> std::alloc::Layout {
    std::alloc::Layout::from_size_align(len, 4096).expect("a page-aligned layout")
}

/// Zeroed heap memory for a region under Miri (see `memfd`).
#[cfg(miri)]
fn map(_file: &File, len: usize, _align: usize, what: &str) -> Result<Mapping, Error> {
    // SAFETY: the layout has a non-zero size (regions are never empty).
    let p = unsafe { std::alloc::alloc_zeroed(miri_layout(len)) };
    if p.is_null() {
        return Err(Error::Invalid {
            what: "region under Miri",
            detail: format!("{len} bytes of {what} could not be allocated"),
        });
    }
    Ok(Mapping { ptr: p, len })
}

/// Lowest address hint: 4 GiB, above where a 32-bit device could reach and
/// far below the 39-bit limit of a narrow IOMMU.
#[cfg(not(miri))]
const HINT_BASE: u64 = 1 << 32;
/// Hints stop where the narrowest IOMMU we know of (VT-d with 39-bit
/// guest address width) ends.
#[cfg(not(miri))]
const HINT_LIMIT: u64 = 1 << 39;
/// Next address hint; advanced past every region placed.
#[cfg(not(miri))]
static NEXT_HINT: AtomicU64 = AtomicU64::new(HINT_BASE);

/// Sizes, populates and maps `file` shared, at a low address when one is
/// free (see the module docs).
#[cfg(not(miri))]
fn map(file: &File, len: usize, align: usize, what: &str) -> Result<Mapping, Error> {
    file.set_len(len as u64).map_err(|source| Error::Sys {
        what: format!("ftruncate {what} to {len} bytes"),
        source,
    })?;
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    let flags = libc::MAP_SHARED | libc::MAP_POPULATE;
    // Hints are aligned to the page size, as hugetlb mappings need (and
    // every hint stays at least 2 MiB aligned).
    let align = (align as u64).max(2 << 20);
    let span = (len as u64).next_multiple_of(2 << 20);
    for _ in 0..16 {
        let Ok(prev) = NEXT_HINT.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |h| {
            h.next_multiple_of(align).checked_add(span)
        }) else {
            break;
        };
        let hint = prev.next_multiple_of(align);
        if hint.saturating_add(span) > HINT_LIMIT {
            break;
        }
        // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping;
        // the fd is a memfd of at least `len` bytes.
        let p = unsafe {
            libc::mmap(
                hint as *mut libc::c_void,
                len,
                prot,
                flags | libc::MAP_FIXED_NOREPLACE,
                file.as_raw_fd(),
                0,
            )
        };
        if p != libc::MAP_FAILED {
            if p as u64 == hint {
                return Ok(Mapping { ptr: p.cast(), len });
            }
            // A kernel without MAP_FIXED_NOREPLACE placed it elsewhere.
            // SAFETY: the mapping we just made, unused.
            unsafe { libc::munmap(p, len) };
            break;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
            return Err(Error::sys(format!("mmap {len} bytes of {what}")));
        }
    }
    // SAFETY: as above, anywhere the kernel likes.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, file.as_raw_fd(), 0) };
    if p == libc::MAP_FAILED {
        return Err(Error::sys(format!("mmap {len} bytes of {what}")));
    }
    Ok(Mapping { ptr: p.cast(), len })
}

impl DmaRegion {
    /// Creates a region of at least `len` bytes (rounded up to whole pages)
    /// on hugepages when possible (1 GiB pages for regions of 1 GiB or more
    /// when enough are free, else 2 MiB), else on 4 KiB pages with one
    /// warning.
    pub fn new(name: &str, len: usize, mode: IovaMode) -> Result<Self, Error> {
        let gig = PageSize::Huge1G.bytes();
        if len >= gig {
            let free = crate::hugepages::pool(gig as u64)
                .ok()
                .flatten()
                .map_or(0, |p| p.free);
            if free >= len.div_ceil(gig) as u64 {
                if let Ok(r) = Self::with_page_size(name, len, mode, PageSize::Huge1G) {
                    return Ok(r);
                }
            }
        }
        match Self::with_page_size(name, len, mode, PageSize::Huge2M) {
            Ok(r) => Ok(r),
            Err(Error::Sys { .. }) => {
                FALLBACK_WARNING.call_once(|| {
                    eprintln!(
                        "rpmd: warning: no free 2 MiB hugepages for DMA memory; using 4 KiB pages, \
                         which is slower. Reserve hugepages as root, e.g. \
                         `echo 512 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages`."
                    )
                });
                Self::with_page_size(name, len, mode, PageSize::Base4K)
            }
            Err(e) => Err(e),
        }
    }

    /// Creates a region on pages of exactly `page` size, or fails.
    pub fn with_page_size(
        name: &str,
        len: usize,
        mode: IovaMode,
        page: PageSize,
    ) -> Result<Self, Error> {
        if len == 0 {
            return Err(Error::Invalid {
                what: "region length",
                detail: "0 bytes".into(),
            });
        }
        let len = len
            .checked_next_multiple_of(page.bytes())
            .ok_or_else(|| Error::Invalid {
                what: "region length",
                detail: format!(
                    "{len} bytes overflows when rounded up to {} pages",
                    page.bytes()
                ),
            })?;
        let file = memfd(name, page)?;
        let map = map(&file, len, page.bytes(), name)?;
        let base = map.ptr;
        if mode == IovaMode::Pa {
            // Keep 4 KiB pages resident so their frames do not change;
            // hugetlb pages are never swapped or migrated under us.
            // SAFETY: `base..base+len` is our mapping.
            if unsafe { libc::mlock(base.cast(), len) } != 0 {
                return Err(Error::sys(format!(
                    "mlock {len} bytes of {name} (raise RLIMIT_MEMLOCK or run as root)"
                )));
            }
        }
        let tr = match mode {
            IovaMode::Va => Translation::Va,
            IovaMode::Pa => Translation::Pa {
                shift: page.bytes().trailing_zeros(),
                page_pa: physical_addresses(base as usize, len, page.bytes())?,
            },
        };
        Ok(DmaRegion {
            map,
            base,
            file,
            page,
            tr,
        })
    }

    /// Bytes in the region.
    pub fn len(&self) -> usize {
        self.map.len
    }

    /// Whether the region is empty (never: creation rejects 0 bytes).
    pub fn is_empty(&self) -> bool {
        self.map.len == 0
    }

    /// The first byte. Valid for [`len`](Self::len) bytes while `self` lives.
    pub fn as_ptr(&self) -> *mut u8 {
        self.base
    }

    /// The page size backing the region.
    pub fn page_size(&self) -> PageSize {
        self.page
    }

    /// The IOVA mode the region was created with.
    pub fn iova_mode(&self) -> IovaMode {
        match self.tr {
            Translation::Va => IovaMode::Va,
            Translation::Pa { .. } => IovaMode::Pa,
        }
    }

    /// The memfd, to share the region with a vhost-user peer
    /// (`SET_MEM_TABLE`) or to map it into a VFIO container.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// IOVA of the byte at `offset`, or `None` past the end.
    #[inline]
    pub fn iova(&self, offset: usize) -> Option<Iova> {
        (offset < self.len()).then(|| self.iova_in_bounds(offset))
    }

    /// IOVA of the byte at `offset`; `offset < len` is the caller's promise
    /// (checked in debug builds). The hot-path form of [`iova`](Self::iova).
    #[inline(always)]
    pub fn iova_in_bounds(&self, offset: usize) -> Iova {
        debug_assert!(offset < self.len());
        match &self.tr {
            Translation::Va => Iova(self.base as u64 + offset as u64),
            Translation::Pa { shift, page_pa } => {
                let mask = (1usize << shift) - 1;
                Iova(page_pa[offset >> shift] + (offset & mask) as u64)
            }
        }
    }

    /// IOVA of a pointer into the region, or `None` if it points elsewhere.
    #[inline]
    pub fn iova_of(&self, ptr: *const u8) -> Option<Iova> {
        (ptr as usize)
            .checked_sub(self.base as usize)
            .and_then(|off| self.iova(off))
    }
}

impl std::fmt::Debug for DmaRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DmaRegion")
            .field("base", &self.base)
            .field("len", &self.len())
            .field("page", &self.page)
            .field("iova_mode", &self.iova_mode())
            .finish()
    }
}

/// Reads the physical address of each `page`-sized page of `va..va+len`
/// from /proc/self/pagemap (one 64-bit entry per 4 KiB page: bit 63 =
/// present, bits 0–54 = page frame number).
fn physical_addresses(va: usize, len: usize, page: usize) -> Result<Box<[u64]>, Error> {
    const PATH: &str = "/proc/self/pagemap";
    let file_err = |source| Error::File {
        path: PATH.into(),
        source,
        hint: Some("needs root to show frame numbers"),
    };
    let mut f = File::open(PATH).map_err(file_err)?;
    let mut out = Vec::with_capacity(len / page);
    for p in (va..va + len).step_by(page) {
        let mut entry = [0u8; 8];
        f.seek(SeekFrom::Start((p / 4096 * 8) as u64))
            .map_err(file_err)?;
        f.read_exact(&mut entry).map_err(file_err)?;
        let e = u64::from_le_bytes(entry);
        let pfn = e & ((1 << 55) - 1);
        if e >> 63 == 0 || pfn == 0 {
            return Err(Error::NoPhysAddr);
        }
        out.push(pfn * 4096);
    }
    Ok(out.into_boxed_slice())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn va_region_translates_and_bounds_checks() {
        let r = DmaRegion::with_page_size("t-va", 10_000, IovaMode::Va, PageSize::Base4K).unwrap();
        assert_eq!(r.len(), 12288);
        assert_eq!(r.iova(0), Some(Iova::new(r.as_ptr() as u64)));
        assert!((r.as_ptr() as u64) < HINT_LIMIT, "placed below 2^39");
        assert_eq!(r.iova(12287).unwrap().raw(), r.as_ptr() as u64 + 12287);
        assert_eq!(r.iova(12288), None);
        // SAFETY: in bounds of the region.
        let p = unsafe { r.as_ptr().add(100) };
        assert_eq!(r.iova_of(p).unwrap().raw(), r.as_ptr() as u64 + 100);
        assert_eq!(r.iova_of(std::ptr::null()), None);
    }

    #[test]
    fn gigabyte_pages_work_or_fail_cleanly() {
        match DmaRegion::with_page_size("t-1g", 4096, IovaMode::Va, PageSize::Huge1G) {
            Ok(r) => {
                assert_eq!((r.len(), r.page_size()), (1 << 30, PageSize::Huge1G));
                assert_eq!(r.as_ptr() as usize % (1 << 30), 0, "1 GiB aligned");
                // SAFETY: in bounds of the region.
                unsafe { r.as_ptr().add((1 << 30) - 1).write(1) };
            }
            // No 1 GiB pages reserved here: a system error, not a panic.
            Err(e) => assert!(matches!(e, Error::Sys { .. }), "{e}"),
        }
    }

    #[test]
    fn zero_length_is_an_error() {
        let e = DmaRegion::new("t0", 0, IovaMode::Va).unwrap_err();
        assert!(e.to_string().contains("region length"), "{e}");
    }

    #[test]
    fn region_is_shareable_by_fd() {
        let r = DmaRegion::with_page_size("t-fd", 4096, IovaMode::Va, PageSize::Base4K).unwrap();
        // SAFETY: in bounds; nothing else uses the region.
        unsafe { r.as_ptr().add(7).write(0xa5) };
        // Map the same memfd a second time, as a vhost-user peer would.
        let dup = File::from(r.fd().try_clone_to_owned().unwrap());
        // SAFETY: read-only view of our own memfd.
        let view = unsafe { memmap2::Mmap::map(&dup) }.unwrap();
        assert_eq!(view[7], 0xa5);
    }

    #[test]
    fn pa_mode_reads_frames_when_root() {
        // SAFETY: geteuid has no preconditions.
        let is_root = unsafe { libc::geteuid() } == 0;
        match DmaRegion::with_page_size("t-pa", 8192, IovaMode::Pa, PageSize::Base4K) {
            Ok(r) => {
                assert!(is_root);
                let a = r.iova(0).unwrap().raw();
                assert_eq!(a % 4096, 0);
                assert_eq!(r.iova(5).unwrap().raw(), a + 5);
                assert_ne!(a, r.as_ptr() as u64, "a physical address, not the VA");
            }
            Err(Error::NoPhysAddr) => assert!(!is_root),
            Err(e) if !is_root => eprintln!("PA mode unavailable without root: {e}"),
            Err(e) => panic!("PA mode failed as root: {e}"),
        }
    }
}
