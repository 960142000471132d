//! Deliberate driver defects, for the tests that show the model catches
//! them (built only with the `defects` feature; never for use).
//!
//! The asynchronous model (`model::EngineTiming`) exists so that a driver
//! that reads a completion before the device has finished writing it
//! fails a test. These switches build exactly such a driver out of the
//! real one, so a test can run the whole data path with the defect and
//! see it fail, beside the same run without it.
use std::sync::atomic::{AtomicU8, Ordering};

/// A defect the driver can be switched into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Defect {
    /// The driver as shipped.
    None = 0,
    /// Every completion queue reads a CQE's body before its owner bit
    /// (as a driver prefetching the next entry would), looking at the
    /// owner bit a couple of microseconds later.
    ReadAheadOfOwner = 1,
}

static ACTIVE: AtomicU8 = AtomicU8::new(Defect::None as u8);

/// Switches every queue of this process into `defect`.
pub fn set(defect: Defect) {
    ACTIVE.store(defect as u8, Ordering::SeqCst);
}

/// Whether `defect` is switched on.
pub(crate) fn active(defect: Defect) -> bool {
    ACTIVE.load(Ordering::Relaxed) == defect as u8
}
