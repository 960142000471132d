//! Memory another process hands over: a vhost-user frontend's
//! SET_MEM_TABLE, a shared region of a peer.
//!
//! [`PeerMemory`] maps each region the peer describes (an fd, the offset
//! in it, its address in the peer's guest-physical space and in the
//! peer's own virtual space) and translates the peer's addresses into
//! ours. Everything about it is untrusted, so every check happens here,
//! once: a region must be non-empty, lie inside its file (a mapping past
//! the end of a file faults on access), and overlap no other region in
//! either address space; and a translation succeeds only for an (address,
//! length) pair wholly inside one region, with no arithmetic overflow.
//! Nothing the peer sends can make a translation reach outside the
//! mappings.
//!
//! A peer can also make its file shorter after the mapping (a mapping
//! past the end of its file raises SIGBUS): memfds that allow seals are
//! sealed against shrinking when mapped, and every mapping is watched
//! (the `fault` module), so that such a fault costs the peer its memory (the
//! owner sees [`PeerMemory::faulted`] and drops it), not the process.
//!
//! The peer can write the memory at any time, so no Rust reference into
//! it is ever made: translations give a [`PeerSpan`] (a raw pointer and a
//! length), and the copies [`PeerMemory::read`] and [`PeerMemory::write`]
//! make are the only accesses here. The rings a device side reads build
//! typed volatile views on spans (virtio's `vring` module).
#![allow(unsafe_code)]

use crate::Error;
use memmap2::{MmapOptions, MmapRaw};
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd};

mod fault;

/// One region as the peer describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerRegionInfo {
    /// Its first guest-physical address (descriptors name these).
    pub guest_addr: u64,
    /// Its length in bytes.
    pub size: u64,
    /// Its first address in the peer's own address space (vhost-user ring
    /// addresses name these).
    pub user_addr: u64,
    /// Where it starts in the fd.
    pub offset: u64,
}

struct Region {
    info: PeerRegionInfo,
    /// Leaves the fault table before `map` is unmapped (fields drop in
    /// order).
    watch: Option<fault::Watched>,
    map: MmapRaw,
}

/// A translated range: `len` bytes at `ptr`, inside one mapped region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerSpan {
    /// The first byte, in our address space.
    pub ptr: *mut u8,
    /// Bytes.
    pub len: usize,
}

/// A translated range that borrows the [`PeerMemory`] it lies in, so it
/// cannot outlive the mapping: the data path's way to translate once and
/// then prefetch and copy (each copy checked against the range).
#[derive(Clone, Copy, Debug)]
pub struct PeerSlice<'a> {
    ptr: *mut u8,
    len: usize,
    _mem: std::marker::PhantomData<&'a PeerMemory>,
}

impl PeerSlice<'_> {
    /// Bytes.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Starts loading the cache line of byte `at` (a hint; any `at` is
    /// harmless).
    #[inline(always)]
    pub fn prefetch(&self, at: usize) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch never faults and changes no memory, whatever
        // the address; SSE is part of x86_64's baseline.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(self.ptr.wrapping_add(at).cast());
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = at;
    }

    /// Starts loading the cache line of byte `at` for writing (PREFETCHW:
    /// the line arrives owned, so the copy into it does not wait for the
    /// other core to give it up; a NOP where unsupported).
    #[inline(always)]
    pub fn prefetch_write(&self, at: usize) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `prefetch`; PREFETCHW decodes as a NOP on x86_64
        // CPUs without it.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_ET0};
            _mm_prefetch::<_MM_HINT_ET0>(self.ptr.wrapping_add(at).cast());
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = at;
    }

    /// Copies `out.len()` bytes from offset `off`; false (nothing copied)
    /// if they are not all inside the range.
    #[inline(always)]
    pub fn read_at(&self, off: usize, out: &mut [u8]) -> bool {
        if off.checked_add(out.len()).is_none_or(|e| e > self.len) {
            return false;
        }
        // SAFETY: `off + out.len() <= len`, inside a mapping that the
        // borrow of its `PeerMemory` keeps alive; a copy out of memory
        // the peer may be writing races only on plain bytes.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(off), out.as_mut_ptr(), out.len()) };
        true
    }

    /// Copies `data` to offset `off`; false (nothing copied) if it does
    /// not fit inside the range.
    #[inline(always)]
    pub fn write_at(&self, off: usize, data: &[u8]) -> bool {
        if off.checked_add(data.len()).is_none_or(|e| e > self.len) {
            return false;
        }
        // SAFETY: as in `read_at`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(off), data.len()) };
        true
    }
}

/// The regions a peer shared, mapped, with address translation.
#[derive(Default)]
pub struct PeerMemory {
    regions: Vec<Region>,
}

impl std::fmt::Debug for PeerMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.regions.iter().map(|r| r.info))
            .finish()
    }
}

// SAFETY: the mappings are shared memory reached only through raw
// pointers and copies; moving or sharing the table between threads moves
// no reference into them.
unsafe impl Send for PeerMemory {}
// SAFETY: as above; `&PeerMemory` only translates and copies.
unsafe impl Sync for PeerMemory {}

fn bad(detail: String) -> Error {
    Error::Invalid {
        what: "peer memory region",
        detail,
    }
}

/// `a..a+len` as an end, if it does not overflow.
fn end(a: u64, len: u64) -> Option<u64> {
    a.checked_add(len)
}

fn overlap(a: u64, alen: u64, b: u64, blen: u64) -> bool {
    a < b.saturating_add(blen) && b < a.saturating_add(alen)
}

impl PeerMemory {
    /// No regions.
    pub fn new() -> Self {
        Self::default()
    }

    /// The regions, in the order added.
    pub fn regions(&self) -> Vec<PeerRegionInfo> {
        self.regions.iter().map(|r| r.info).collect()
    }

    /// Maps region `info` of `fd` (shared, read and write) after checking
    /// it: non-empty, no address overflow, inside the file, and
    /// overlapping no region already added, in guest or user addresses.
    pub fn add(&mut self, fd: BorrowedFd<'_>, info: PeerRegionInfo) -> Result<(), Error> {
        let i = info;
        if i.size == 0 {
            return Err(bad(format!("{i:x?}: empty")));
        }
        if end(i.guest_addr, i.size).is_none()
            || end(i.user_addr, i.size).is_none()
            || end(i.offset, i.size).is_none()
        {
            return Err(bad(format!("{i:x?}: addresses overflow")));
        }
        let len = usize::try_from(i.size)
            .map_err(|_| bad(format!("{i:x?}: larger than the address space")))?;
        if let Some(o) = self.regions.iter().find(|r| {
            overlap(r.info.guest_addr, r.info.size, i.guest_addr, i.size)
                || overlap(r.info.user_addr, r.info.size, i.user_addr, i.size)
        }) {
            return Err(bad(format!("{i:x?} overlaps {:x?}", o.info)));
        }
        let file = File::from(
            fd.try_clone_to_owned()
                .map_err(|e| Error::io("dup of a peer's fd", e))?,
        );
        // Sealed first, so that the size checked is the size that stays.
        fault::seal_against_shrinking(file.as_fd());
        let file_len = file
            .metadata()
            .map_err(|e| Error::io("fstat of a peer's fd", e))?
            .len();
        if i.offset + i.size > file_len {
            return Err(bad(format!(
                "{i:x?}: past the end of its file ({file_len} bytes)"
            )));
        }
        let map = MmapOptions::new()
            .offset(i.offset)
            .len(len)
            .map_raw(&file)
            .map_err(|e| bad(format!("{i:x?}: mmap: {e}")))?;
        let watch = fault::Watched::new(map.as_mut_ptr(), len);
        self.regions.push(Region {
            info: i,
            watch,
            map,
        });
        Ok(())
    }

    /// The first region an access found shorter than its mapping (its
    /// peer shrank the file: the mapping now holds private zeroes, and
    /// the peer should be dropped).
    pub fn faulted(&self) -> Option<PeerRegionInfo> {
        self.regions
            .iter()
            .find(|r| r.watch.as_ref().is_some_and(|w| w.faulted()))
            .map(|r| r.info)
    }

    /// Unmaps the region starting at guest address `guest_addr` with
    /// `size` bytes (vhost-user REM_MEM_REG); whether there was one.
    pub fn remove(&mut self, guest_addr: u64, size: u64) -> bool {
        let n = self.regions.len();
        self.regions
            .retain(|r| !(r.info.guest_addr == guest_addr && r.info.size == size));
        self.regions.len() != n
    }

    #[inline]
    fn find(&self, a: u64, len: u64, key: impl Fn(&PeerRegionInfo) -> u64) -> Option<PeerSpan> {
        let e = end(a, len)?;
        let n = usize::try_from(len).ok()?;
        self.regions.iter().find_map(|r| {
            let s = key(&r.info);
            (s <= a && e <= s + r.info.size).then(|| PeerSpan {
                // SAFETY: `a - s + len <= size`, the mapping's length, so
                // the pointer stays inside the mapping.
                ptr: unsafe { r.map.as_mut_ptr().add((a - s) as usize) },
                len: n,
            })
        })
    }

    /// `len` bytes at guest-physical address `a`, if one region holds
    /// them all.
    #[inline]
    pub fn translate(&self, a: u64, len: u64) -> Option<PeerSpan> {
        self.find(a, len, |i| i.guest_addr)
    }

    /// `len` bytes at guest-physical address `a` as a [`PeerSlice`], if
    /// one region holds them all.
    #[inline]
    pub fn slice(&self, a: u64, len: u64) -> Option<PeerSlice<'_>> {
        self.translate(a, len).map(|s| PeerSlice {
            ptr: s.ptr,
            len: s.len,
            _mem: std::marker::PhantomData,
        })
    }

    /// `len` bytes at the peer's own address `a` (vhost-user ring
    /// addresses), if one region holds them all.
    pub fn translate_user(&self, a: u64, len: u64) -> Option<PeerSpan> {
        self.find(a, len, |i| i.user_addr)
    }

    /// The guest-physical address of the peer's own address `a`.
    pub fn user_to_guest(&self, a: u64) -> Option<u64> {
        self.regions.iter().find_map(|r| {
            let i = r.info;
            (i.user_addr <= a && a < i.user_addr + i.size).then(|| a - i.user_addr + i.guest_addr)
        })
    }

    /// Copies `out.len()` bytes from guest address `a`.
    #[inline]
    pub fn read(&self, a: u64, out: &mut [u8]) -> Result<(), Error> {
        let s = self.translate(a, out.len() as u64).ok_or_else(|| {
            bad(format!(
                "read of {} bytes at {a:#x}: not inside one region",
                out.len()
            ))
        })?;
        // SAFETY: `s` lies inside a mapping (checked by `translate`); a
        // byte copy out of memory the peer may be writing is a data race
        // on plain bytes, which a copy tolerates (the peer's problem,
        // not a Rust reference's).
        unsafe { std::ptr::copy_nonoverlapping(s.ptr, out.as_mut_ptr(), s.len) };
        Ok(())
    }

    /// Copies `data` to guest address `a`.
    #[inline]
    pub fn write(&self, a: u64, data: &[u8]) -> Result<(), Error> {
        let s = self.translate(a, data.len() as u64).ok_or_else(|| {
            bad(format!(
                "write of {} bytes at {a:#x}: not inside one region",
                data.len()
            ))
        })?;
        // SAFETY: as in `read`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), s.ptr, s.len) };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DmaRegion, IovaMode, PageSize};

    fn shared(len: usize) -> DmaRegion {
        DmaRegion::with_page_size("peer", len, IovaMode::Va, PageSize::Base4K).unwrap()
    }

    fn info(guest_addr: u64, size: u64, user_addr: u64, offset: u64) -> PeerRegionInfo {
        PeerRegionInfo {
            guest_addr,
            size,
            user_addr,
            offset,
        }
    }

    #[test]
    fn regions_translate_both_address_spaces_and_copy() {
        let a = shared(64 << 10);
        let mut m = PeerMemory::new();
        // The second half of the file, at guest 0x10000 and user 0x7000_0000.
        m.add(a.fd(), info(0x1_0000, 32 << 10, 0x7000_0000, 32 << 10))
            .unwrap();
        m.write(0x1_0010, b"hello").unwrap();
        let mut got = [0u8; 5];
        m.read(0x1_0010, &mut got).unwrap();
        assert_eq!(&got, b"hello");
        // The same bytes through our own mapping of the file.
        let mine: Vec<u8> = (0..5)
            // SAFETY: inside the region, which nothing else writes now.
            .map(|k| unsafe { a.as_ptr().add((32 << 10) + 0x10 + k).read() })
            .collect();
        assert_eq!(mine, b"hello");
        let s = m.translate_user(0x7000_0010, 5).unwrap();
        assert_eq!(s, m.translate(0x1_0010, 5).unwrap());
        assert_eq!(m.user_to_guest(0x7000_0010), Some(0x1_0010));
        assert_eq!(m.user_to_guest(0x7000_8000), None);
    }

    #[test]
    fn nothing_a_peer_sends_reaches_outside_the_mappings() {
        let a = shared(16 << 10);
        let b = shared(16 << 10);
        let mut m = PeerMemory::new();
        m.add(a.fd(), info(0, 16 << 10, 0x1000_0000, 0)).unwrap();
        // Empty, overflowing, past the end of the file, overlapping.
        for (i, why) in [
            (info(1 << 20, 0, 0x2000_0000, 0), "empty"),
            (info(u64::MAX - 10, 4096, 0x2000_0000, 0), "overflow"),
            (info(1 << 20, 16 << 10, 0x2000_0000, 4096), "past the end"),
            (info(0x3000, 4096, 0x2000_0000, 0), "overlaps"),
            (info(1 << 20, 4096, 0x1000_3000, 0), "overlaps"),
        ] {
            let e = m.add(b.fd(), i).unwrap_err().to_string();
            assert!(e.contains(why), "{why}: {e}");
        }
        assert_eq!(m.regions().len(), 1);
        // Ranges crossing the end, past it, wrapping around, huge.
        assert!(m.translate((16 << 10) - 4, 8).is_none());
        assert!(m.translate(16 << 10, 1).is_none());
        assert!(m.translate(u64::MAX, 2).is_none());
        assert!(m.translate(8, u64::MAX).is_none());
        assert!(m.translate_user(0x1000_0000 + (16 << 10), 1).is_none());
        let mut buf = [0u8; 8];
        assert!(m.read((16 << 10) - 4, &mut buf).is_err());
        assert!(m.write(u64::MAX - 3, &buf).is_err());
        // A second region may sit right after the first.
        m.add(b.fd(), info(16 << 10, 16 << 10, 0x1000_4000, 0))
            .unwrap();
        assert!(m.translate((16 << 10) + 100, 8).is_some());
        assert!(
            m.translate((16 << 10) - 4, 8).is_none(),
            "a range across two regions is not one mapping"
        );
        assert!(m.remove(16 << 10, 16 << 10));
        assert!(!m.remove(16 << 10, 16 << 10));
        assert!(m.translate((16 << 10) + 100, 8).is_none());
    }
}
