//! Shared helpers for rpmd's benchmark programs: TSC reads and thread
//! pinning, so every program measures the same way DPDK's perf tests do.
#![deny(missing_docs)]

pub mod tsc;
