//! Time-stamp counter reads (DPDK's `rte_rdtsc`) and its frequency.
#![allow(unsafe_code)]

use std::time::{Duration, Instant};

/// Reads the time-stamp counter (cycles at the constant TSC rate).
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` has no preconditions on x86_64 and touches no memory.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Measures the TSC frequency in Hz against the monotonic clock (100 ms).
pub fn tsc_hz() -> f64 {
    let t0 = Instant::now();
    let c0 = rdtsc();
    while t0.elapsed() < Duration::from_millis(100) {
        std::hint::spin_loop();
    }
    let c1 = rdtsc();
    (c1 - c0) as f64 / t0.elapsed().as_secs_f64()
}

/// Pins the calling thread to CPU `cpu`; returns whether it worked.
pub fn pin(cpu: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id: cpu })
}
