//! The ring crate's error type.

/// Why a ring could not be created.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// A capacity of zero was asked for.
    #[error("ring capacity must be at least 1, got 0")]
    ZeroCapacity,
    /// The capacity is not a power of two (indices are masked, not divided).
    #[error("ring capacity must be a power of two, got {capacity} (next: {})", capacity.next_power_of_two())]
    NotPowerOfTwo {
        /// The capacity asked for.
        capacity: usize,
    },
    /// The capacity exceeds [`MAX_CAPACITY`](crate::MAX_CAPACITY).
    #[error("ring capacity {capacity} is above the maximum {max}")]
    TooLarge {
        /// The capacity asked for.
        capacity: usize,
        /// The largest allowed.
        max: usize,
    },
    /// The slot array could not be allocated.
    #[error("out of memory allocating a ring of {capacity} slots")]
    Alloc {
        /// The capacity asked for.
        capacity: usize,
    },
}
