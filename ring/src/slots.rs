//! The element array: `capacity` slots, each either empty or holding one `T`.
//!
//! Slot ownership is decided entirely by the head/tail protocol in
//! `ring.rs`: a thread only touches slots it reserved by moving a head, and
//! the tail stores/loads named there order those accesses between threads.
//! This module only does the copying, as at most two contiguous runs per
//! batch (before and after the end of the array; one value is one slot
//! move). Under `--cfg loom` each slot is a loom `UnsafeCell`, so the
//! model checker sees every access and reports any two that race.
#![allow(unsafe_code)]

use std::mem::MaybeUninit;

#[cfg(not(loom))]
type Cell<T> = std::cell::UnsafeCell<MaybeUninit<T>>;
#[cfg(loom)]
type Cell<T> = loom::cell::UnsafeCell<MaybeUninit<T>>;

/// Alignment of the slot array: two cache lines, the unit the adjacent-line
/// prefetcher moves (as the ring's head/tail padding). Eight pointer-sized
/// slots from an aligned index then share one line; with the allocator's
/// default 16-byte alignment every burst of 8 crossing cores touched two.
#[cfg(not(loom))]
const SLOT_ALIGN: usize = 128;

pub(crate) struct Slots<T> {
    /// `mask + 1` cells, allocated with [`Slots::layout`].
    #[cfg(not(loom))]
    ptr: std::ptr::NonNull<Cell<T>>,
    #[cfg(loom)]
    cells: Box<[Cell<T>]>,
    mask: u32,
    _owns: std::marker::PhantomData<T>,
}

impl<T> Slots<T> {
    /// The array's layout for `n` slots; `None` when it overflows.
    #[cfg(not(loom))]
    fn layout(n: usize) -> Option<std::alloc::Layout> {
        let bytes = n.checked_mul(std::mem::size_of::<T>())?;
        // Never zero-sized (zero-sized `T`), which `alloc` does not allow.
        std::alloc::Layout::from_size_align(
            bytes.max(SLOT_ALIGN),
            SLOT_ALIGN.max(std::mem::align_of::<T>()),
        )
        .ok()
    }

    /// Allocates `capacity` empty slots; `capacity` is a power of two.
    /// `None` when the memory cannot be had.
    #[cfg(not(loom))]
    pub(crate) fn new(capacity: u32) -> Option<Self> {
        let layout = Self::layout(capacity as usize)?;
        // SAFETY: the layout's size is not zero (at least `SLOT_ALIGN`).
        // The memory stays uninitialised: every cell is a `MaybeUninit`.
        let p = unsafe { std::alloc::alloc(layout) };
        Some(Slots {
            ptr: std::ptr::NonNull::new(p.cast::<Cell<T>>())?,
            mask: capacity - 1,
            _owns: std::marker::PhantomData,
        })
    }

    /// Allocates `capacity` empty slots; `capacity` is a power of two.
    #[cfg(loom)]
    pub(crate) fn new(capacity: u32) -> Option<Self> {
        let n = capacity as usize;
        let mut v: Vec<Cell<T>> = Vec::new();
        v.try_reserve_exact(n).ok()?;
        v.extend((0..n).map(|_| Cell::new(MaybeUninit::uninit())));
        Some(Slots {
            cells: v.into_boxed_slice(),
            mask: capacity - 1,
            _owns: std::marker::PhantomData,
        })
    }

    #[cfg(not(loom))]
    #[inline(always)]
    fn len(&self) -> usize {
        self.mask as usize + 1
    }

    /// Raw pointer to slot `idx & mask`.
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) fn slot_ptr(&self, idx: u32) -> *mut T {
        let i = (idx & self.mask) as usize;
        // SAFETY: `i <= mask`, so the offset stays inside the `mask + 1`
        // cells allocated; `UnsafeCell<MaybeUninit<T>>` has the layout of
        // `T`.
        unsafe { self.ptr.as_ptr().add(i) as *mut T }
    }

    /// Moves `n` values from `src` into slots `idx..idx + n` (modulo size).
    ///
    /// # Safety
    /// The caller owns those slots (reserved through the head) and they are
    /// empty; `src` holds `n` initialised values, which the ring now owns
    /// (the caller must forget them); `n <= capacity`.
    #[inline(always)]
    pub(crate) unsafe fn write(&self, idx: u32, src: *const T, n: usize) {
        #[cfg(not(loom))]
        {
            if n == 1 {
                // One value, the pool's and single calls' case: one slot
                // never wraps, so skip the run arithmetic.
                // SAFETY: per this function's contract the slot is ours
                // and empty, and `src` holds one value.
                unsafe { self.slot_ptr(idx).write(src.read()) };
                return;
            }
            let start = (idx & self.mask) as usize;
            let first = self.len() - start;
            // SAFETY: per this function's contract the destination slots
            // are ours, and each run stays inside the array (`n <= first`
            // in the first branch; `first` and `n - first <= capacity`
            // otherwise); source and destination never overlap (the
            // caller's buffer is not ring memory).
            unsafe {
                if n <= first {
                    // The common case: no wrap, one run.
                    copy_small(src, self.slot_ptr(idx), n);
                } else {
                    copy_small(src, self.slot_ptr(idx), first);
                    copy_small(src.add(first), self.slot_ptr(0), n - first);
                }
            }
        }
        #[cfg(loom)]
        for k in 0..n {
            let i = (idx.wrapping_add(k as u32) & self.mask) as usize;
            // SAFETY: as above; loom checks the slot access.
            self.cells[i].with_mut(|p| unsafe { (*p).write(src.add(k).read()) });
        }
    }

    /// Moves `n` values out of slots `idx..idx + n` into `dst`.
    ///
    /// # Safety
    /// The caller owns those slots (reserved through the head) and they are
    /// full; `dst` has room for `n` values and does not hold live values
    /// that need dropping; afterwards the slots are logically empty.
    #[inline(always)]
    pub(crate) unsafe fn read(&self, idx: u32, dst: *mut T, n: usize) {
        #[cfg(not(loom))]
        {
            if n == 1 {
                // As in `write`.
                // SAFETY: per this function's contract the slot is ours and
                // full, and `dst` has room for one value.
                unsafe { dst.write(self.slot_ptr(idx).read()) };
                return;
            }
            let start = (idx & self.mask) as usize;
            let first = self.len() - start;
            // SAFETY: per this function's contract; runs and overlap as in
            // `write`.
            unsafe {
                if n <= first {
                    copy_small(self.slot_ptr(idx), dst, n);
                } else {
                    copy_small(self.slot_ptr(idx), dst, first);
                    copy_small(self.slot_ptr(0), dst.add(first), n - first);
                }
            }
        }
        #[cfg(loom)]
        for k in 0..n {
            let i = (idx.wrapping_add(k as u32) & self.mask) as usize;
            // SAFETY: as above; loom checks the slot access.
            self.cells[i].with_mut(|p| unsafe { dst.add(k).write((*p).assume_init_read()) });
        }
    }

    /// Drops the values in slots `idx..idx + n`.
    ///
    /// # Safety
    /// As for [`Slots::read`]: the slots are the caller's and full.
    pub(crate) unsafe fn drop_range(&self, idx: u32, n: u32) {
        for k in 0..n {
            let i = idx.wrapping_add(k);
            #[cfg(not(loom))]
            // SAFETY: the slot is full and owned by the caller.
            unsafe {
                self.slot_ptr(i).drop_in_place()
            };
            #[cfg(loom)]
            self.cells[(i & self.mask) as usize]
                // SAFETY: the slot is full and owned by the caller.
                .with_mut(|p| unsafe { (*p).assume_init_drop() });
        }
    }
}

/// Copies `n` elements. Short copies (up to 128 bytes: 16 pointers) are an
/// inlined loop, as in DPDK's ring, four elements at a time (for pointers,
/// two 16-byte vector moves) and then one at a time; a call into the C
/// library's `memcpy` costs more than that. Longer ones go to `memcpy`,
/// which moves whole vectors. The compiler fences stop LLVM from
/// recognising the loops as a `memcpy` idiom and turning them back into
/// the call; they emit no instruction.
///
/// # Safety
/// As for `ptr::copy_nonoverlapping`.
#[cfg(not(loom))]
#[inline(always)]
unsafe fn copy_small<T>(src: *const T, dst: *mut T, n: usize) {
    if n * std::mem::size_of::<T>() <= 128 {
        let mut k = 0;
        while k + 4 <= n {
            // SAFETY: `k + 4 <= n`, both ranges valid for `n` elements;
            // `[T; 4]` has `T`'s alignment.
            unsafe {
                dst.add(k)
                    .cast::<[T; 4]>()
                    .write(src.add(k).cast::<[T; 4]>().read())
            };
            std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
            k += 4;
        }
        while k < n {
            // SAFETY: `k < n`, both ranges valid for `n` elements.
            unsafe { dst.add(k).write(src.add(k).read()) };
            std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
            k += 1;
        }
    } else {
        // SAFETY: forwarded contract.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
    }
}

#[cfg(not(loom))]
impl<T> Drop for Slots<T> {
    fn drop(&mut self) {
        // Values still in slots were dropped by the ring (`drop_range`);
        // this frees the memory only.
        if let Some(layout) = Self::layout(self.len()) {
            // SAFETY: `ptr` came from `alloc` with this same layout (same
            // length, so `layout` succeeded then and does now).
            unsafe { std::alloc::dealloc(self.ptr.as_ptr().cast(), layout) };
        }
    }
}

// SAFETY: slots are only accessed under the head/tail protocol, which hands
// each slot to one thread at a time; values cross threads, hence `T: Send`.
unsafe impl<T: Send> Sync for Slots<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Slots<T> {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{Slots, SLOT_ALIGN};

    #[repr(align(256))]
    struct Wide(#[allow(dead_code)] u8);

    fn aligned<T>(cap: u32, align: usize) {
        let s = Slots::<T>::new(cap).expect("allocates");
        assert_eq!(s.slot_ptr(0) as usize % align, 0);
        assert_eq!(s.slot_ptr(cap) as usize, s.slot_ptr(0) as usize);
    }

    #[test]
    fn the_array_starts_on_a_128_byte_boundary_whatever_the_element() {
        aligned::<u64>(2048, SLOT_ALIGN);
        aligned::<u8>(1, SLOT_ALIGN);
        aligned::<[u64; 2]>(64, SLOT_ALIGN);
        aligned::<()>(1024, SLOT_ALIGN);
        aligned::<Wide>(4, 256);
    }

    #[test]
    fn an_array_whose_size_overflows_is_refused() {
        // 2^31 slots of 2^40 bytes: the byte count overflows `usize`.
        assert!(Slots::<[u8; 1 << 40]>::new(1 << 31).is_none());
    }
}
