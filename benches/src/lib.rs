//! Shared helpers for rpmd's benchmark programs: TSC reads and thread
//! pinning, so every program measures the same way DPDK's perf tests do;
//! peer processes (`Proc`, `testpmd`, `wait_sock`) and medians.
#![deny(missing_docs)]
// `unsafe` only where re-allowed: tsc (rdtsc) and `Proc`'s SIGINT.
#![deny(unsafe_code)]

pub mod flowgen;
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

/// The `CASE <name> <value>` lines a benchmark program prints
/// (`ring_perf`, `lookup_perf`), by name.
pub fn cases(out: &str) -> std::collections::BTreeMap<String, f64> {
    out.lines()
        .filter_map(|l| {
            let mut it = l.strip_prefix("CASE ")?.split_whitespace();
            Some((it.next()?.to_string(), it.next()?.parse().ok()?))
        })
        .collect()
}

/// The rows of a comparison's table for `compare.sh` to plot: when
/// `RPMD_PLOT_CSV` names a file, it gets a header (`row,` and the column
/// names) and one line per row (its name and values); otherwise nothing
/// is written.
pub struct PlotCsv(Option<std::io::BufWriter<std::fs::File>>);

impl PlotCsv {
    /// The file of `RPMD_PLOT_CSV`, with these columns.
    pub fn from_env(columns: &[&str]) -> PlotCsv {
        use std::io::Write;
        let f = std::env::var_os("RPMD_PLOT_CSV").and_then(|p| std::fs::File::create(p).ok());
        let mut w = f.map(std::io::BufWriter::new);
        if let Some(w) = w.as_mut() {
            let _ = writeln!(w, "row,{}", columns.join(","));
        }
        PlotCsv(w)
    }

    /// One row: its name (commas become spaces) and its values.
    pub fn row(&mut self, name: &str, values: &[f64]) {
        use std::io::Write;
        if let Some(w) = self.0.as_mut() {
            let v: Vec<String> = values.iter().map(f64::to_string).collect();
            let _ = writeln!(w, "{},{}", name.replace(',', " "), v.join(","));
        }
    }
}

#[allow(clippy::too_many_arguments)]
/// DPDK's testpmd on `cpu` (both its lcores there) with one `vdev`, in
/// forwarding mode `mode` with `size`-byte frames (`--tx-first` for io
/// loops), printing its statistics every second on a piped stdout; stdin
/// piped too (testpmd exits at its end). `extra` goes before `--vdev`.
pub fn testpmd(
    cpu: usize,
    prefix: &str,
    huge: &str,
    vdev: &str,
    extra: &[&str],
    mode: &str,
    size: usize,
    tx_first: bool,
) -> Child {
    let mut c = std::process::Command::new("dpdk-testpmd");
    c.args(["--no-pci", "--lcores"])
        .arg(format!("0@{cpu},1@{cpu}"))
        .arg(format!("--file-prefix={prefix}"))
        .args([
            "--huge-dir",
            huge,
            "-m",
            "256",
            "--log-level=lib.eal:error",
            "--log-level=user1:error",
        ])
        .args(extra)
        .args(["--vdev", vdev, "--"])
        .arg(format!("--forward-mode={mode}"))
        .arg(format!("--txpkts={size}"))
        .args([
            "--port-topology=loop",
            "--total-num-mbufs=16384",
            "-a",
            "--stats-period",
            "1",
        ])
        .args(if tx_first {
            &["--tx-first"][..]
        } else {
            &[][..]
        })
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    c.spawn().expect("dpdk-testpmd (apt-get install dpdk-dev)")
}

/// Waits (at most 30 s, else panics) for a backend's socket at `sock`,
/// then 200 ms more for it to listen.
pub fn wait_sock(sock: &str) {
    wait_socks(&[sock], None);
}

/// [`wait_sock`] for every socket of `socks`, the 200 ms once; with
/// `process`, the one that makes them, panics as soon as it exits.
pub fn wait_socks(socks: &[&str], mut process: Option<&mut Child>) {
    let t = Instant::now();
    while !socks.iter().all(|s| std::path::Path::new(s).exists()) {
        if let Some(Ok(Some(status))) = process.as_deref_mut().map(Child::try_wait) {
            panic!("the backend's process exited ({status}) before making {socks:?}; its message is above");
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "backend made no socket among {socks:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
}

/// Waits (at most `within`, else panics naming `what`) until every port
/// of `ports` reports its link up: a vhost-user backend once its driver
/// has attached, a virtio-user port once its backend has answered.
pub fn wait_link_up(ports: &[&dyn rpmd_pmd::Port], within: Duration, what: &str) {
    let t = Instant::now();
    while !ports.iter().all(|p| p.link().up) {
        assert!(t.elapsed() < within, "{what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The responder of the request/response experiments: echoes every
/// frame back on queue 0 of the port it came from.
pub struct Echo {
    q: rpmd_pmd::Queues,
    pkts: rpmd_pmd::port::Pkts,
}

impl Echo {
    /// An echo on `q`.
    pub fn new(q: rpmd_pmd::Queues) -> Self {
        Echo {
            q,
            pkts: rpmd_pmd::port::Pkts::new(),
        }
    }
}

impl rpmd_sched::Task for Echo {
    fn run(&mut self, quota: usize) -> usize {
        let n = self.q.rx_burst(0, &mut self.pkts, quota.min(32));
        if n > 0 {
            self.q.tx_burst(0, &mut self.pkts);
            self.pkts.clear();
        }
        n
    }
}

/// An lcore on `cpu` that busy-polls as responders of the yield
/// experiments do: a spin budget of 50 ms (it never sleeps while work
/// comes), its yield signal read every 2 µs of spinning, off until the
/// experiment sets one; yielding is what the experiments vary.
pub fn responder_lcore(cpu: usize) -> rpmd_sched::Lcore {
    rpmd_sched::Lcore::spawn(
        cpu,
        rpmd_sched::LcoreConfig {
            spin: rpmd_sched::SpinPolicy::Fixed(Duration::from_millis(50)),
            signal: rpmd_sched::SignalKind::Off,
            signal_every: Duration::from_micros(2),
            ..Default::default()
        },
    )
    .expect("an lcore on its CPU")
}

/// An lcore on `cpu` that sleeps as soon as it is idle (spin budget 0,
/// a 10 ms timer behind its tasks' interrupts): the consumer of the
/// backlog experiments, where every idle moment costs a wake-up.
pub fn sleeping_lcore(cpu: usize) -> rpmd_sched::Lcore {
    rpmd_sched::Lcore::spawn(cpu, sleeping_config()).expect("an lcore on its CPU")
}

/// As [`sleeping_lcore`], with NAPI's completion: a round in which the
/// task did less than its quota ends the polling (arm, and sleep unless
/// work is already waiting), as a NIC driver's poll that completes
/// re-enables its interrupt.
pub fn napi_lcore(cpu: usize) -> rpmd_sched::Lcore {
    let cfg = rpmd_sched::LcoreConfig {
        complete_short_rounds: true,
        ..sleeping_config()
    };
    rpmd_sched::Lcore::spawn(cpu, cfg).expect("an lcore on its CPU")
}

fn sleeping_config() -> rpmd_sched::LcoreConfig {
    rpmd_sched::LcoreConfig {
        spin: rpmd_sched::SpinPolicy::Fixed(Duration::ZERO),
        signal: rpmd_sched::SignalKind::Off,
        sleep: Duration::from_millis(10),
        ..Default::default()
    }
}

/// The requester of the yield experiments (`seeds yield`, `yield_proc`),
/// pinned to CPU 1: keeps one 64-byte request outstanding on queue 0 of
/// each of `sessions`, sending a session's next request `wire` after its
/// reply (the network round trip of a real TCP_RR), for `secs`; returns
/// transactions per second over all sessions.
pub fn rr_requester(
    sessions: &mut [rpmd_pmd::Queues],
    pool: &rpmd_pmd::Mempool,
    secs: f64,
    wire: Duration,
) -> f64 {
    use rpmd_pmd::port::Pkts;
    tsc::pin(1);
    let n = sessions.len();
    let mut outstanding = vec![false; n];
    let mut next_send = vec![Instant::now(); n];
    let mut done = 0u64;
    let (mut tx, mut rx) = (Pkts::new(), Pkts::new());
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(secs);
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        for (s, q) in sessions.iter_mut().enumerate() {
            if !outstanding[s] && now >= next_send[s] {
                if let Ok(mut m) = pool.get() {
                    if let Some(d) = m.append(64) {
                        d[0] = s as u8;
                        let _ = tx.push(m);
                        outstanding[s] = q.tx_burst(0, &mut tx) == 1;
                    }
                    tx.clear();
                }
            }
            if q.rx_burst(0, &mut rx, 32) > 0 {
                done += rx.len() as u64;
                rx.clear();
                outstanding[s] = false;
                next_send[s] = Instant::now() + wire;
            }
        }
    }
    done as f64 / t0.elapsed().as_secs_f64()
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
