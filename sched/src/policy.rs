//! How long an idle lcore keeps polling before it sleeps: the spin budget.
//!
//! Linux's busy polling (`busy_read`, vhost's `busyloop_timeout`) spins for
//! a fixed time, 50 µs typically, after the last packet. A fixed budget is
//! wrong both ways: when packets come every 10 µs, 50 µs of spinning per gap
//! is fine but sleeping would cost a wake-up per packet; when they come
//! every millisecond, every gap burns 50 µs of CPU for nothing.
//!
//! [`SpinPolicy::Adaptive`] keeps an exponentially weighted average of the
//! idle gaps that ended in work (how long the lcore waited before the next
//! packet). When gaps are short it spins up to twice the average, so a
//! typical gap is covered, and never less than `busy_read`'s 50 µs (within
//! its bounds): in dense traffic a gap far beyond the average is a stall of
//! the peer (its vCPU descheduled), not the end of the traffic, and
//! sleeping through it would cost a wake-up where the fixed default does
//! not, while spinning 50 µs costs no more than the default does. When the
//! average gap is longer than the maximum budget, spinning would rarely
//! pay off and the budget drops to the minimum, so the lcore goes to sleep
//! almost at once.
use std::time::Duration;

/// The spin budget rule.
///
/// ```
/// use rpmd_sched::SpinPolicy;
/// use std::time::Duration;
/// assert_eq!(SpinPolicy::default(), SpinPolicy::adaptive()); // the default
/// let busy_read = SpinPolicy::Fixed(Duration::from_micros(50));
/// let never = SpinPolicy::Fixed(Duration::ZERO); // sleep as soon as idle
/// let always = SpinPolicy::Always; // never sleep (DPDK's plain poll mode)
/// # let _ = (busy_read, never, always);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpinPolicy {
    /// Spin this long after the last work, then sleep (0 = never spin).
    Fixed(Duration),
    /// Never sleep: poll every round whatever the traffic (DPDK's plain
    /// poll mode; `--poll spin`).
    Always,
    /// Spin between `min` and `max`, adapted to the recent idle gaps.
    Adaptive {
        /// Shortest budget.
        min: Duration,
        /// Longest budget.
        max: Duration,
    },
}

impl Default for SpinPolicy {
    /// [`SpinPolicy::adaptive`]: the budget follows the traffic.
    fn default() -> Self {
        SpinPolicy::adaptive()
    }
}

impl SpinPolicy {
    /// Adaptive between 0 and 200 µs.
    pub fn adaptive() -> Self {
        SpinPolicy::Adaptive {
            min: Duration::ZERO,
            max: Duration::from_micros(200),
        }
    }
}

/// `busy_read`'s usual 50 µs: the adaptive budget's floor while gaps are
/// shorter than its maximum.
const BUSY_READ_NS: u64 = 50_000;

/// The running state of a policy on one lcore.
#[derive(Clone, Debug)]
pub struct Budget {
    policy: SpinPolicy,
    /// Average idle gap that ended in work, in nanoseconds.
    avg_gap_ns: u64,
}

impl Budget {
    /// A budget following `policy`, starting at its maximum.
    pub fn new(policy: SpinPolicy) -> Self {
        Budget {
            policy,
            avg_gap_ns: 0,
        }
    }

    /// The current budget.
    #[inline]
    pub fn current(&self) -> Duration {
        match self.policy {
            SpinPolicy::Fixed(d) => d,
            SpinPolicy::Always => Duration::MAX,
            SpinPolicy::Adaptive { min, max } => {
                let max_ns = max.as_nanos() as u64;
                if self.avg_gap_ns > max_ns {
                    min
                } else {
                    let want = (2 * self.avg_gap_ns).max(BUSY_READ_NS);
                    Duration::from_nanos(want.clamp(min.as_nanos() as u64, max_ns))
                }
            }
        }
    }

    /// Records that work arrived after `gap` of idleness (spinning or
    /// sleeping). Weight 1/8 for the new sample.
    #[inline]
    pub fn observe_gap(&mut self, gap: Duration) {
        let g = gap.as_nanos().min(u64::MAX as u128) as u64;
        self.avg_gap_ns = if self.avg_gap_ns == 0 {
            g
        } else {
            self.avg_gap_ns - self.avg_gap_ns / 8 + g / 8
        };
    }

    /// The average gap, for telemetry.
    pub fn average_gap(&self) -> Duration {
        Duration::from_nanos(self.avg_gap_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_is_fixed_and_adaptive_follows_the_gaps() {
        let mut f = Budget::new(SpinPolicy::Fixed(Duration::from_micros(50)));
        f.observe_gap(Duration::from_millis(5));
        assert_eq!(f.current(), Duration::from_micros(50));

        let mut a = Budget::new(SpinPolicy::adaptive());
        for _ in 0..50 {
            a.observe_gap(Duration::from_micros(10));
        }
        // Twice the 10 µs average is under busy_read's 50 µs: the floor.
        assert_eq!(a.current(), Duration::from_micros(50));
        for _ in 0..50 {
            a.observe_gap(Duration::from_micros(40));
        }
        let b = a.current();
        assert!(
            b >= Duration::from_micros(74) && b <= Duration::from_micros(82),
            "{b:?}"
        );
        // Rare packets: the average passes the maximum, spinning stops.
        for _ in 0..50 {
            a.observe_gap(Duration::from_millis(2));
        }
        assert_eq!(a.current(), Duration::ZERO);
        // Back to back again: the budget comes back.
        for _ in 0..80 {
            a.observe_gap(Duration::from_micros(30));
        }
        assert!(
            a.current() >= Duration::from_micros(50),
            "{:?}",
            a.current()
        );
        assert!(a.current() <= Duration::from_micros(200));
    }
}
