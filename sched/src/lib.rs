//! rpmd's per-core run loop: the runtime ideas that let a poll-mode
//! framework share a machine well, each taken from a Linux networking
//! change and redone in user space.
//!
//! - [`lcore`]: worker threads pinned to CPUs (from a core list like
//!   DPDK's `-l 0-1`, see [`parse_cores`]), each running [`Task`]s in
//!   rounds with a per-task quota; tasks come and go through a lock-free
//!   command queue; stopping runs every task's `finish`.
//! - [`policy`]: the **spin budget** after an idle round, fixed (50 µs like
//!   `busy_read`) or **adaptive** to the recent idle gaps; then the lcore
//!   sleeps on its tasks' eventfds (rx interrupts) or a short timer.
//!   A queue can bring its own **busy-poll policy** (vhost_net's
//!   `busyloop_timeout`: [`Task::busy_poll`], from
//!   `RxQueue::busy_poll`): the longest budget declared on an lcore
//!   replaces its spin, and when the busy-polling queues ask for it the
//!   lcore's other tasks sit the spin out, armed, until their wake-ups
//!   (no RX busy polling). [`multi`] combines the policies and
//!   interrupts of a task that polls several queues.
//! - [`signal`]: **yield when another thread wants this CPU**: cheap
//!   user-space stand-ins for the kernel's `single_task_running()`,
//!   checked every few microseconds while spinning.
//! - [`backlog`]: **drain until empty or quota**, re-checking the queue,
//!   versus processing a snapshot of its length.
//! - [`txlock`]: the **dequeue-prioritised lock** in front of a TX queue
//!   shared by several lcores (the qdisc busylock problem); it lives in
//!   `rpmd-ring`, beside the rings, where loom checks it, and the
//!   vhost-user backend's vrings sit behind it too.
//! - [`egress`]: an **egress scheduler** shared by lcores (port rate,
//!   strict-priority classes by VLAN PCP or DSCP with HTB-style
//!   borrowing, tail drop counted per class) in front of one TX queue,
//!   behind the `TxLock` with the draining lcore first.
//! - [`tasks`]: ready-made tasks ([`Forward`]: rx queue to tx queue,
//!   sleeping on the rx interrupt; [`Timer`]) and the [`Runtime`] that
//!   starts lcores from a core list.
//! - [`Telemetry`]: per-lcore counters: rounds, busy and empty polls, work,
//!   busy and idle time, spins, yields, sleeps, wake-ups.
//!
//! A whole app's run loop, with ports from [`rpmd_pmd`]: two `null`
//! ports forwarded into each other by [`Forward`] tasks on one lcore, then
//! stopped, with the tasks (and what they counted) handed back:
//!
//! ```
//! use rpmd_pmd::{Mempool, MempoolConfig, PortConfig, Registry};
//! use rpmd_sched::{Forward, LcoreConfig, Runtime};
//!
//! # fn main() -> Result<(), rpmd_sched::Error> {
//! let pool = Mempool::new(&MempoolConfig::new("doc-pool", 1024))?;
//! let reg = Registry::new();
//! let (mut a, mut b) = (reg.open("null")?, reg.open("null")?);
//! a.configure(&PortConfig::with_pool(&pool))?;
//! b.configure(&PortConfig::with_pool(&pool))?;
//! let (mut qa, mut qb) = (a.start()?, b.start()?);
//!
//! let mut rt = Runtime::start("0", LcoreConfig::default())?;
//! let fwd = Forward::new(qa.take_rx(0)?, qb.take_tx(0)?, 32);
//! let id = rt.add(0, fwd)?;
//! while rt.lcores()[0].stats().work.get() < 1000 {
//!     std::thread::yield_now();
//! }
//! let mut stopped = rt.shutdown()?; // an lcore whose task panicked is an Err
//! let fwd: Forward = stopped.take(id).expect("it ran to the end");
//! assert_eq!(fwd.dropped, 0); // null's tx takes everything
//! # Ok(())
//! # }
//! ```
//!
//! `unsafe` is limited to system calls (`ppoll`, `getrusage`, `gettid`)
//! and the lock's cell, each with its reason.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod backlog;
pub mod egress;
pub mod kbusy;
pub mod lcore;
pub mod multi;
pub mod policy;
pub mod signal;
pub mod tasks;
pub use rpmd_ring::txlock;

pub use egress::{Egress, EgressConfig, EgressTx};
pub use kbusy::KernelBusyPoll;
pub use lcore::{Lcore, LcoreConfig, LcoreStats, PollMode, Stopped, Task, TaskId};
pub use policy::SpinPolicy;
pub use rpmd_pmd::port::BusyPoll;
pub use signal::SignalKind;
pub use tasks::{Forward, Runtime, RxTask, RxWork, Timer};
pub use txlock::TxLock;

use rpmd_pmd::port::stats::Counter;

/// Errors of the run loop.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A core list could not be parsed.
    #[error("core list {input:?}: {reason} (write it like DPDK's -l: 0-3 or 0,2,4-5)")]
    CoreList {
        /// The list given.
        input: String,
        /// What is wrong.
        reason: String,
    },
    /// An lcore could not be started.
    #[error("lcore setup: {0}")]
    Setup(String),
    /// An lcore's thread could not be created; the OS error is the
    /// source.
    #[error("lcore setup: spawning the thread for CPU {cpu}: {source}")]
    Spawn {
        /// The CPU it was to be pinned to.
        cpu: usize,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A port operation failed (so that an app's set-up can use `?` on
    /// both crates' calls with this one error type).
    #[error(transparent)]
    Port(#[from] rpmd_pmd::Error),
    /// An egress specification could not be used.
    #[error("egress {spec:?}: {reason}")]
    Egress {
        /// The specification given.
        spec: String,
        /// What is wrong.
        reason: String,
    },
    /// An lcore's thread has ended: one of its tasks panicked.
    #[error("lcore on CPU {cpu} died: a task panicked: {message}")]
    LcoreDied {
        /// The CPU it was pinned to.
        cpu: usize,
        /// The panic's message (known once the thread is joined).
        message: String,
    },
}

/// Per-lcore counters (one writer: the lcore).
#[derive(Debug, Default)]
pub struct Telemetry {
    /// Rounds over the tasks.
    pub rounds: Counter,
    /// Rounds that found work.
    pub busy_polls: Counter,
    /// Rounds that found none.
    pub empty_polls: Counter,
    /// Work units (packets) done.
    pub work: Counter,
    /// Nanoseconds in rounds that found work.
    pub busy_ns: Counter,
    /// Nanoseconds in rounds that found none.
    pub idle_ns: Counter,
    /// Idle rounds run while spinning.
    pub spins: Counter,
    /// Times the CPU was yielded to another thread.
    pub yields: Counter,
    /// Sleeps.
    pub sleeps: Counter,
    /// Times the tasks were armed to sleep and work was already waiting
    /// (polled again at once).
    pub armed_with_work: Counter,
    /// Nanoseconds asleep.
    pub sleep_ns: Counter,
    /// Sleeps that ended in work on the next round.
    pub wakeups: Counter,
    /// Nanoseconds from waking to the end of the first busy round, summed.
    pub wake_ns: Counter,
    /// The same latencies as a histogram: bucket `i` counts those below
    /// `128 << i` ns (and at least half that, bar bucket 0); the last
    /// bucket takes everything longer. See [`Telemetry::wake_quantile`].
    pub wake_hist: [Counter; WAKE_BUCKETS],
}

/// Buckets of [`Telemetry::wake_hist`]: 128 ns to 8.4 ms and above.
pub const WAKE_BUCKETS: usize = 17;

impl Telemetry {
    /// Counts one wake-up latency of `ns` nanoseconds.
    #[inline]
    pub fn record_wake(&self, ns: u64) {
        self.wake_ns.add(ns);
        self.wakeups.add(1);
        self.wake_hist[wake_bucket(ns)].add(1);
    }

    /// The wake-up latency below which a fraction `q` (0..=1) of the
    /// wake-ups fell, as the upper bound of its bucket (within a factor of
    /// two); `None` before the first wake-up, `u64::MAX` for the last
    /// bucket.
    pub fn wake_quantile(&self, q: f64) -> Option<u64> {
        let counts: Vec<u64> = self.wake_hist.iter().map(Counter::get).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let want = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return Some(if i + 1 == WAKE_BUCKETS {
                    u64::MAX
                } else {
                    128 << i
                });
            }
        }
        Some(u64::MAX)
    }
}

/// The histogram bucket of a latency of `ns`.
fn wake_bucket(ns: u64) -> usize {
    // Bucket i holds [64 << i, 128 << i); bucket 0 everything below 128.
    let b = (64 - (ns >> 7).leading_zeros()) as usize;
    b.min(WAKE_BUCKETS - 1)
}

#[cfg(test)]
mod wake_tests {
    use super::*;

    #[test]
    fn buckets_and_quantiles() {
        assert_eq!(wake_bucket(0), 0);
        assert_eq!(wake_bucket(127), 0);
        assert_eq!(wake_bucket(128), 1);
        assert_eq!(wake_bucket(255), 1);
        assert_eq!(wake_bucket(256), 2);
        assert_eq!(wake_bucket(u64::MAX), WAKE_BUCKETS - 1);
        let t = Telemetry::default();
        assert_eq!(t.wake_quantile(0.5), None);
        for _ in 0..90 {
            t.record_wake(1_000); // bucket 3: below 1024 ns
        }
        for _ in 0..10 {
            t.record_wake(50_000); // bucket 9: below 65536 ns
        }
        assert_eq!(t.wake_quantile(0.5), Some(1024));
        assert_eq!(t.wake_quantile(0.9), Some(1024));
        assert_eq!(t.wake_quantile(0.99), Some(65536));
        assert_eq!(t.wakeups.get(), 100);
        assert_eq!(t.wake_ns.get(), 90 * 1_000 + 10 * 50_000);
    }
}

/// Parses a DPDK-style core list: `0-3`, `0,2,4-5`, `1`.
///
/// ```
/// assert_eq!(rpmd_sched::parse_cores("0,2-3").unwrap(), vec![0, 2, 3]);
/// assert!(rpmd_sched::parse_cores("3-1").is_err());
/// ```
pub fn parse_cores(s: &str) -> Result<Vec<usize>, Error> {
    let bad = |reason: String| Error::CoreList {
        input: s.to_string(),
        reason,
    };
    let mut v = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let a: usize = a
            .trim()
            .parse()
            .map_err(|_| bad(format!("{part:?} is not a core or range")))?;
        let b: usize = b
            .trim()
            .parse()
            .map_err(|_| bad(format!("{part:?} is not a core or range")))?;
        if a > b {
            return Err(bad(format!("range {part:?} runs backwards")));
        }
        if b >= 1024 {
            return Err(bad(format!("core {b} is out of range")));
        }
        for c in a..=b {
            if v.contains(&c) {
                return Err(bad(format!("core {c} given twice")));
            }
            v.push(c);
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    #[test]
    fn core_lists_parse_like_dpdk() {
        assert_eq!(super::parse_cores("0-1").unwrap(), vec![0, 1]);
        assert_eq!(super::parse_cores("0,2,4-5").unwrap(), vec![0, 2, 4, 5]);
        for bad in ["", "a", "3-1", "0,0", "1-", "5000"] {
            let e = super::parse_cores(bad).unwrap_err().to_string();
            assert!(e.contains("DPDK's -l"), "{bad}: {e}");
        }
    }
}
