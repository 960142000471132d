//! A cheap clock for poll loops: the time-stamp counter (DPDK's
//! `rte_rdtsc` / `rte_get_tsc_hz`).
//!
//! A poll loop reads the time every round. `Instant::now()` goes through
//! the vDSO's `clock_gettime`, which costs tens of nanoseconds on bare
//! metal and more under a hypervisor (it was a third of an rr round trip's
//! cycles on the 2-vCPU test VMs); `rdtsc` is a single instruction. The
//! counter ticks at a constant rate on CPUs that advertise `constant_tsc`
//! and `nonstop_tsc` (every x86 server of the last decade), and is
//! calibrated once against the monotonic clock. Elsewhere the clock falls
//! back to nanoseconds from `Instant`, at 1 GHz, so callers never care.
#![allow(unsafe_code)]

use std::sync::OnceLock;
use std::time::{Duration, Instant};

struct Calibration {
    /// Ticks per second.
    hz: u64,
    /// Nanoseconds per tick, as a 32.32 fixed-point number.
    ns_q32: u64,
    tsc: bool,
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn calibration() -> &'static Calibration {
    static CAL: OnceLock<Calibration> = OnceLock::new();
    CAL.get_or_init(|| {
        let tsc = cfg!(target_arch = "x86_64")
            && std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|s| {
                s.split_whitespace().any(|w| w == "constant_tsc")
                    && s.split_whitespace().any(|w| w == "nonstop_tsc")
            });
        let hz = if tsc {
            // 20 ms against the monotonic clock: parts in 10^5, plenty for
            // spin budgets and latency percentiles.
            let t0 = Instant::now();
            let c0 = raw();
            while t0.elapsed() < Duration::from_millis(20) {
                std::hint::spin_loop();
            }
            let c1 = raw();
            ((c1 - c0) as f64 / t0.elapsed().as_secs_f64()) as u64
        } else {
            1_000_000_000
        };
        let hz = hz.max(1);
        Calibration {
            hz,
            ns_q32: ((1_000_000_000u128 << 32) / hz as u128) as u64,
            tsc,
        }
    })
}

#[inline(always)]
fn raw() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` has no preconditions on x86_64 and touches no
        // memory.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        epoch().elapsed().as_nanos() as u64
    }
}

/// Forces the one-time calibration (20 ms); call it before a timed loop.
pub fn init() {
    let _ = calibration();
    let _ = epoch();
}

/// The clock now, in ticks (see [`hz`]). Monotonic on one thread; across
/// cores as consistent as the TSC (synchronised on constant-TSC CPUs).
#[inline(always)]
pub fn now() -> u64 {
    if calibration().tsc {
        raw()
    } else {
        epoch().elapsed().as_nanos() as u64
    }
}

/// Ticks per second.
pub fn hz() -> u64 {
    calibration().hz
}

/// Whether the clock is the TSC (false: nanoseconds from `Instant`).
pub fn is_tsc() -> bool {
    calibration().tsc
}

/// Ticks to nanoseconds.
#[inline(always)]
pub fn to_ns(ticks: u64) -> u64 {
    ((ticks as u128 * calibration().ns_q32 as u128) >> 32) as u64
}

/// A duration in ticks.
#[inline]
pub fn ticks(d: Duration) -> u64 {
    (d.as_nanos() * calibration().hz as u128 / 1_000_000_000) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_agree_with_the_monotonic_clock() {
        init();
        let (t, c) = (Instant::now(), now());
        std::thread::sleep(Duration::from_millis(30));
        let (dt, dc) = (t.elapsed(), now() - c);
        let ns = to_ns(dc) as f64;
        let real = dt.as_nanos() as f64;
        assert!((ns / real - 1.0).abs() < 0.05, "{ns} ns by ticks vs {real}");
        let back = to_ns(ticks(Duration::from_micros(50)));
        assert!((49_000..=50_001).contains(&back), "{back}");
    }
}
