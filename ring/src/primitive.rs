//! The synchronisation primitives the ring is built from, swapped for loom's
//! model-checked versions under `--cfg loom` (the crossbeam-utils pattern).

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// A hint that we are busy-waiting (`pause` on x86).
#[inline(always)]
pub(crate) fn spin_hint() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// Gives the CPU away: used by waiters that may be waiting on a preempted
/// thread.
#[inline]
pub(crate) fn yield_cpu() {
    #[cfg(not(loom))]
    std::thread::yield_now();
    #[cfg(loom)]
    loom::thread::yield_now();
}
