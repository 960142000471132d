//! Shared helpers for rpmd's benchmark programs: TSC reads and thread
//! pinning, so every program measures the same way DPDK's perf tests do.
#![deny(missing_docs)]
// `unsafe` only where re-allowed: tsc (rdtsc) and `Proc`'s SIGINT.
#![deny(unsafe_code)]

pub mod tsc;

use std::process::Child;
use std::time::{Duration, Instant};

/// A peer process (testpmd, an rpmd app) stopped when dropped: SIGINT, so
/// it prints its final statistics and exits cleanly, then SIGKILL after
/// 5 s if it has not.
pub struct Proc(pub Child);

#[allow(unsafe_code)]
impl Drop for Proc {
    fn drop(&mut self) {
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGINT) };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The median of `v` (the mean of the middle two for an even count; 0 for
/// none): how every comparison reduces its interleaved runs.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn medians() {
        assert_eq!(super::median(vec![]), 0.0);
        assert_eq!(super::median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
