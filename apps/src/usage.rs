//! What each lcore cost over a run, as every app's summary shows it
//! beside its rates: CPU % (the kernel's account of the lcore thread's
//! time on a CPU, so a sleeping lcore reads near 0 % and a spinning one
//! 100 %), busy % (the share of the run spent in rounds that found work,
//! DPDK's `/eal/lcore/usage` busy cycles over total), packets, and how
//! the loop spent its idle time (spins, yields, sleeps, wake-ups).
//!
//! Take a [`Usage`] when the lcores start and [`Usage::read`] it before
//! they stop (their threads' CPU time is gone once they end).
use rpmd_sched::{LcoreStats, Runtime};
use serde_json::{json, Value};
use std::time::Instant;

/// The lcores' counters at the start of a run.
pub struct Usage {
    start: Instant,
    lcores: Vec<Start>,
}

struct Start {
    cpu: usize,
    stats: LcoreStats,
    cpu_ns: Option<u64>,
    busy_ns: u64,
    work: u64,
}

/// One lcore over the run so far.
#[derive(Clone, Debug, PartialEq)]
pub struct LcoreUsage {
    /// The CPU it is pinned to.
    pub cpu: usize,
    /// Its thread's CPU time, ns (`None`: the kernel keeps no
    /// per-thread account).
    pub cpu_ns: Option<u64>,
    /// That over the wall time, %.
    pub cpu_percent: Option<f64>,
    /// Time in rounds that found work over the wall time, %.
    pub busy_percent: f64,
    /// Packets (work units) its tasks did.
    pub packets: u64,
    /// Idle rounds spun (this and the next three: since the lcore
    /// started).
    pub spins: u64,
    /// Times it gave the CPU to another thread.
    pub yields: u64,
    /// Times it slept.
    pub sleeps: u64,
    /// Sleeps that ended in work.
    pub wakeups: u64,
    /// Wake-up latency p50 and p99 (ns, upper bounds of their buckets).
    pub wake_p50_ns: Option<u64>,
    /// See `wake_p50_ns`.
    pub wake_p99_ns: Option<u64>,
}

impl Usage {
    /// Starts counting `rt`'s lcores.
    pub fn start(rt: &Runtime) -> Usage {
        Usage::of(rt.lcores().iter().map(|l| (l.cpu(), l.stats_handle())))
    }

    /// Starts counting these lcores (CPU and counters).
    pub fn of(lcores: impl IntoIterator<Item = (usize, LcoreStats)>) -> Usage {
        let lcores = lcores
            .into_iter()
            .map(|(cpu, stats)| {
                let t = stats.telemetry();
                Start {
                    cpu,
                    cpu_ns: stats.cpu_time_ns(),
                    busy_ns: t.busy_ns.get(),
                    work: t.work.get(),
                    stats,
                }
            })
            .collect();
        Usage {
            start: Instant::now(),
            lcores,
        }
    }

    /// Each lcore since the start.
    pub fn read(&self) -> Vec<LcoreUsage> {
        let wall = self.start.elapsed().as_nanos().max(1) as f64;
        self.lcores
            .iter()
            .map(|s| {
                let t = s.stats.telemetry();
                let cpu_ns = s
                    .stats
                    .cpu_time_ns()
                    .zip(s.cpu_ns)
                    .map(|(now, then)| now.saturating_sub(then));
                let packets = t.work.get() - s.work;
                LcoreUsage {
                    cpu: s.cpu,
                    cpu_ns,
                    cpu_percent: cpu_ns.map(|c| (100.0 * c as f64 / wall).min(100.0)),
                    busy_percent: (100.0 * (t.busy_ns.get() - s.busy_ns) as f64 / wall).min(100.0),
                    packets,
                    spins: t.spins.get(),
                    yields: t.yields.get(),
                    sleeps: t.sleeps.get(),
                    wakeups: t.wakeups.get(),
                    wake_p50_ns: t.wake_quantile(0.5),
                    wake_p99_ns: t.wake_quantile(0.99),
                }
            })
            .collect()
    }
}

impl LcoreUsage {
    /// Its thread's CPU time per unit, in nanoseconds, for `n` units
    /// (packets, transactions).
    pub fn cpu_ns_per(&self, n: u64) -> Option<f64> {
        self.cpu_ns.filter(|_| n > 0).map(|c| c as f64 / n as f64)
    }

    /// CPU cycles (at the TSC's rate) per unit, for `n` units.
    pub fn cycles_per(&self, n: u64) -> Option<f64> {
        let hz = rpmd_pmd::clock::hz() as f64;
        self.cpu_ns_per(n).map(|ns| ns * hz / 1e9)
    }

    /// One line of an app's summary.
    pub fn line(&self) -> String {
        let us = |ns: Option<u64>| match ns {
            None => "-".to_string(),
            Some(u64::MAX) => ">8ms".to_string(),
            Some(n) => format!("<{:.1}us", n as f64 / 1e3),
        };
        format!(
            "lcore on cpu {}: cpu {} busy {:.1}% packets {} ({} cpu/packet) spins {} yields {} sleeps {} wake-ups {} (p50 {}, p99 {})",
            self.cpu,
            self.cpu_percent.map_or("-".into(), |c| format!("{c:.1}%")),
            self.busy_percent,
            self.packets,
            self.cpu_ns_per(self.packets)
                .map_or("-".into(), |c| format!("{c:.0} ns")),
            self.spins,
            self.yields,
            self.sleeps,
            self.wakeups,
            us(self.wake_p50_ns),
            us(self.wake_p99_ns),
        )
    }

    /// As one JSON object of a summary's `"lcores"` array.
    pub fn json(&self) -> Value {
        json!({
            "cpu": self.cpu,
            "cpu_percent": self.cpu_percent,
            "busy_percent": self.busy_percent,
            "packets": self.packets,
            "cpu_ns_per_packet": self.cpu_ns_per(self.packets),
            "spins": self.spins,
            "yields": self.yields,
            "sleeps": self.sleeps,
            "wakeups": self.wakeups,
            "wake_p50_ns": self.wake_p50_ns,
            "wake_p99_ns": self.wake_p99_ns,
        })
    }
}

/// The lcores' JSON array.
pub fn json(lcores: &[LcoreUsage]) -> Value {
    Value::Array(lcores.iter().map(LcoreUsage::json).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rpmd_sched::{LcoreConfig, PollMode, Task};

    struct Burn(bool);
    impl Task for Burn {
        fn run(&mut self, _quota: usize) -> usize {
            usize::from(self.0)
        }
    }

    #[test]
    fn a_sleeping_lcore_costs_little_and_a_busy_one_a_cpu() {
        let mut rt = Runtime::start("0", LcoreConfig::preset(PollMode::Interrupt)).unwrap();
        rt.add(0, Burn(false)).unwrap();
        let u = Usage::start(&rt);
        std::thread::sleep(std::time::Duration::from_millis(300));
        let idle = u.read().remove(0);
        rt.add(0, Burn(true)).unwrap();
        let u = Usage::start(&rt);
        std::thread::sleep(std::time::Duration::from_millis(300));
        let busy = u.read().remove(0);
        rt.shutdown().unwrap();
        let (i, b) = (idle.cpu_percent.unwrap(), busy.cpu_percent.unwrap());
        assert!(i < 20.0, "an lcore sleeping on a 100 us timer: {i}%");
        assert!(b > 50.0, "an lcore always busy: {b}%");
        assert!(busy.busy_percent > 50.0 && idle.busy_percent < 1.0);
        assert!(busy.line().starts_with("lcore on cpu 0: cpu "));
        assert_eq!(json(&[busy])[0]["cpu"], 0);
    }
}
