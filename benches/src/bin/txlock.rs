//! `txlock`: N enqueuer threads feed one software TX queue that a drainer
//! thread empties into a sink sending at a fixed rate (the NIC), under
//! four locks: a plain test-and-set spin lock, `std::sync::Mutex`, the
//! Linux busylock scheme (a second lock that contended enqueuers take
//! first), and rpmd's `TxLock` (busylock plus priority for the drainer).
//!
//! `--cpus LIST` (default 0,1): the drainer has the first CPU to itself;
//! the enqueuers are spread over the others (on all of them when only one
//! is listed). `--enqueuers LIST` (default 2,4,8): the contended cases.
//! On the 2-vCPU test VMs every enqueuer shares CPU 1, so they are
//! preempted, sometimes while holding the lock, as on any oversubscribed
//! machine, while the drainer competes with them across cores for the
//! lock's cache line. The cliff the busylock patch fixed (N senders on N
//! CPUs, so N - 1 of them contend with the drainer at once and the queue
//! never drains) needs more CPUs than that: on a bigger machine, e.g.
//! `--cpus 0-15 --enqueuers 4,8,15`. Per lock and N: delivered packets/s,
//! drops (queue full), the p99 time an enqueue waited for the lock
//! (hdrhistogram), and from the drainer's side, the share of its time
//! spent waiting for the lock, its lock-acquisition latency (p50, p99,
//! max) and its mean batch (32 when the queue stays full).
//!
//! Two cases without contention price the lock itself: request/response
//! (one enqueuer sends one packet and waits until the drainer has
//! delivered it: every lock hand-off crosses cores, as in netperf TCP_RR,
//! where Linux gained 8 % by not taking the busylock) and one thread
//! enqueuing and draining alone.
//!
//! `--rr-only` skips the contended cases.
//!
//! Runs are interleaved: each of `--runs` rounds (default 3) runs every
//! lock once, the order rotated from round to round, and the figures are
//! medians over rounds, since single runs here swing by 2× or more.
//! Ends with `RESULT txlock worst_ratio=<x>`: the worst over the contended
//! cases of the best other lock's median delivered rate ÷ ours, and over
//! the two uncontended cases of the plain spin lock's rate ÷ ours (≤ 1.0:
//! ours delivers at least as much everywhere).
use hdrhistogram::Histogram;
use rpmd_benches::tsc::{pin, rdtsc};
use rpmd_sched::TxLock;
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const QUEUE: usize = 1024;
/// Sink cost per packet, standing in for the driver and wire: 4 Mpps,
/// below what the enqueuers offer, so the queue stays full and the drainer
/// is the bottleneck, the case the busylock is about. (At 100 ns, 10 Mpps,
/// the enqueuers on one CPU could not keep up: the drainer found 7 to 25
/// packets a batch, and delivered/s measured enqueue speed instead.)
const SINK_NS: u64 = 250;

trait Lock: Send + Sync {
    fn enqueue(&self, f: &mut dyn FnMut(&mut VecDeque<u64>));
    fn drain(&self, f: &mut dyn FnMut(&mut VecDeque<u64>));
}

fn backoff(n: &mut u32) {
    if *n < 64 {
        *n += 1;
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// A test-and-test-and-set spin lock, the same backoff as `TxLock`.
struct Spin {
    locked: AtomicBool,
    q: UnsafeCell<VecDeque<u64>>,
}

// SAFETY: `q` is only touched while `locked` is held (see `with`).
unsafe impl Sync for Spin {}

impl Spin {
    fn new() -> Self {
        Spin {
            locked: AtomicBool::new(false),
            q: UnsafeCell::new(VecDeque::with_capacity(QUEUE)),
        }
    }

    fn with(&self, f: &mut dyn FnMut(&mut VecDeque<u64>)) {
        let mut n = 0;
        while self.locked.load(Relaxed) || self.locked.swap(true, Acquire) {
            backoff(&mut n);
        }
        // SAFETY: the flag is ours until the Release store below, so this
        // is the only reference to the queue.
        f(unsafe { &mut *self.q.get() });
        self.locked.store(false, Release);
    }
}

impl Lock for Spin {
    fn enqueue(&self, f: &mut dyn FnMut(&mut VecDeque<u64>)) {
        self.with(f)
    }
    fn drain(&self, f: &mut dyn FnMut(&mut VecDeque<u64>)) {
        self.with(f)
    }
}

struct StdMutex(Mutex<VecDeque<u64>>);

impl Lock for StdMutex {
    fn enqueue(&self, f: &mut dyn FnMut(&mut VecDeque<u64>)) {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
    fn drain(&self, f: &mut dyn FnMut(&mut VecDeque<u64>)) {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Linux's scheme: contended enqueuers serialise on a busylock first; the
/// drainer competes like anyone.
struct Busylock {
    main: Spin,
    busy: AtomicBool,
}

impl Lock for Busylock {
    fn enqueue(&self, f: &mut dyn FnMut(&mut VecDeque<u64>)) {
        if self.main.locked.load(Relaxed) {
            let mut n = 0;
            while self.busy.load(Relaxed) || self.busy.swap(true, Acquire) {
                backoff(&mut n);
            }
            self.main.with(f);
            self.busy.store(false, Release);
        } else {
            self.main.with(f);
        }
    }
    fn drain(&self, f: &mut dyn FnMut(&mut VecDeque<u64>)) {
        self.main.with(f)
    }
}

struct Ours(TxLock<VecDeque<u64>>);

impl Lock for Ours {
    fn enqueue(&self, f: &mut dyn FnMut(&mut VecDeque<u64>)) {
        f(&mut self.0.lock_enqueue())
    }
    fn drain(&self, f: &mut dyn FnMut(&mut VecDeque<u64>)) {
        f(&mut self.0.lock_drain())
    }
}

struct Outcome {
    delivered: f64,
    drops: u64,
    p99_ns: u64,
    drain: DrainStats,
}

/// What the drainer saw: TSC ticks waiting for the lock, ticks in all,
/// batches and packets taken, and each acquisition's wait (ticks).
struct DrainStats {
    wait: u64,
    total: u64,
    batches: u64,
    packets: u64,
    acquire: Histogram<u64>,
}

impl Default for DrainStats {
    fn default() -> Self {
        DrainStats {
            wait: 0,
            total: 0,
            batches: 0,
            packets: 0,
            acquire: histogram(),
        }
    }
}

impl DrainStats {
    fn wait_pct(&self) -> f64 {
        100.0 * self.wait as f64 / self.total.max(1) as f64
    }
    fn mean_batch(&self) -> f64 {
        self.packets as f64 / self.batches.max(1) as f64
    }
    /// The drainer's lock-acquisition latency at quantile `q`, in ns.
    fn acquire_ns(&self, q: f64, hz: f64) -> f64 {
        self.acquire.value_at_quantile(q) as f64 * 1e9 / hz
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 10_000_000_000, 2).expect("histogram bounds are valid")
}

/// The state the drainer shares with the enqueuers and the main thread.
struct Shared {
    stop: Arc<AtomicBool>,
    /// Packets in the queue, readable without the lock: the drainer takes
    /// the lock only when there is something to send, as a qdisc runs only
    /// after an enqueue.
    queued: Arc<AtomicU64>,
    delivered: Arc<AtomicU64>,
}

/// Starts the drainer on `lock`: whenever the queue holds packets, it
/// takes up to 32 under the lock, then sends them to the sink (a fixed
/// cost per packet, outside the lock) and counts them delivered. Returns
/// the shared counters and its handle.
fn start_drainer(lock: Arc<dyn Lock>, cpu: usize) -> (Shared, std::thread::JoinHandle<DrainStats>) {
    let sh = Shared {
        stop: Arc::new(AtomicBool::new(false)),
        queued: Arc::new(AtomicU64::new(0)),
        delivered: Arc::new(AtomicU64::new(0)),
    };
    let (stop, queued, delivered) = (sh.stop.clone(), sh.queued.clone(), sh.delivered.clone());
    let handle = std::thread::spawn(move || {
        pin(cpu);
        let mut batch = [0u64; 32];
        let mut st = DrainStats::default();
        let t0 = rdtsc();
        while !stop.load(Relaxed) {
            if queued.load(Relaxed) == 0 {
                std::hint::spin_loop();
                continue;
            }
            let mut n = 0;
            let asked = rdtsc();
            let mut got = 0;
            lock.drain(&mut |q| {
                got = rdtsc();
                while n < 32 {
                    match q.pop_front() {
                        Some(v) => {
                            batch[n] = v;
                            n += 1;
                        }
                        None => break,
                    }
                }
            });
            queued.fetch_sub(n as u64, Relaxed);
            st.wait += got - asked;
            st.acquire.saturating_record(got - asked);
            st.batches += 1;
            st.packets += n as u64;
            std::hint::black_box(&batch);
            let until = Instant::now() + Duration::from_nanos(SINK_NS * n as u64);
            while Instant::now() < until {
                std::hint::spin_loop();
            }
            // Release: the request/response enqueuer reads it (Acquire)
            // before it sends the next packet.
            delivered.fetch_add(n as u64, Release);
        }
        st.total = rdtsc() - t0;
        st
    });
    (sh, handle)
}

fn run(lock: Arc<dyn Lock>, enqueuers: usize, cpus: &[usize], secs: f64) -> Outcome {
    let (
        Shared {
            stop,
            queued,
            delivered,
        },
        drainer,
    ) = start_drainer(lock.clone(), cpus[0]);
    let drops = Arc::new(AtomicU64::new(0));
    let others = if cpus.len() > 1 { &cpus[1..] } else { cpus };
    let hists: Vec<_> = (0..enqueuers)
        .map(|i| {
            let (lock, stop, drops, queued) =
                (lock.clone(), stop.clone(), drops.clone(), queued.clone());
            let cpu = others[i % others.len()];
            std::thread::spawn(move || {
                pin(cpu);
                let mut h = histogram();
                let mut seq = 0u64;
                while !stop.load(Relaxed) {
                    let t = Instant::now();
                    let mut full = false;
                    lock.enqueue(&mut |q| {
                        if q.len() < QUEUE {
                            q.push_back(seq);
                            queued.fetch_add(1, Relaxed);
                        } else {
                            full = true;
                        }
                    });
                    h.saturating_record(t.elapsed().as_nanos() as u64);
                    if full {
                        drops.fetch_add(1, Relaxed);
                    }
                    seq += 1;
                }
                h
            })
        })
        .collect();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Relaxed);
    let el = t0.elapsed().as_secs_f64();
    let mut h = histogram();
    for t in hists {
        h.add(t.join().expect("enqueuer"))
            .expect("histograms with the same bounds add");
    }
    let drain = drainer.join().expect("drainer");
    Outcome {
        drain,
        delivered: delivered.load(Relaxed) as f64 / el,
        drops: drops.load(Relaxed),
        p99_ns: h.value_at_quantile(0.99),
    }
}

/// Request/response: one enqueuer on CPU 1 sends one packet, then waits
/// until the drainer on CPU 0 has delivered it; transactions per second.
fn request_response(lock: Arc<dyn Lock>, cpus: &[usize], secs: f64) -> f64 {
    let (
        Shared {
            stop,
            queued,
            delivered,
        },
        d,
    ) = start_drainer(lock.clone(), cpus[0]);
    let client = {
        let stop = stop.clone();
        let cpu = *cpus.get(1).unwrap_or(&cpus[0]);
        std::thread::spawn(move || {
            pin(cpu);
            let t0 = Instant::now();
            let mut seq = 0u64;
            while !stop.load(Relaxed) {
                lock.enqueue(&mut |q| {
                    q.push_back(seq);
                    queued.fetch_add(1, Relaxed);
                });
                seq += 1;
                // Acquire: pairs with the drainer's Release count.
                while delivered.load(Acquire) < seq && !stop.load(Relaxed) {
                    std::hint::spin_loop();
                }
            }
            seq as f64 / t0.elapsed().as_secs_f64()
        })
    };
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Relaxed);
    let tps = client.join().expect("client");
    d.join().expect("drainer");
    tps
}

/// One thread, no contention: enqueue one packet then drain it;
/// nanoseconds per enqueue+drain pair.
fn uncontended(lock: &dyn Lock) -> f64 {
    let t = Instant::now();
    for i in 0..2_000_000u64 {
        lock.enqueue(&mut |q| q.push_back(i));
        lock.drain(&mut |q| {
            std::hint::black_box(q.pop_front());
        });
    }
    t.elapsed().as_nanos() as f64 / 2_000_000.0
}

const LOCKS: [&str; 4] = ["spin", "mutex", "busylock", "rpmd"];

fn make(name: &str) -> Arc<dyn Lock> {
    match name {
        "spin" => Arc::new(Spin::new()),
        "mutex" => Arc::new(StdMutex(Mutex::new(VecDeque::with_capacity(QUEUE)))),
        "busylock" => Arc::new(Busylock {
            main: Spin::new(),
            busy: AtomicBool::new(false),
        }),
        _ => Arc::new(Ours(TxLock::new(VecDeque::with_capacity(QUEUE)))),
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Runs `f` for every lock in each of `runs` rounds, the order rotated
/// per round; the per-lock results in `LOCKS` order.
fn interleaved<T>(runs: usize, mut f: impl FnMut(&str) -> T) -> Vec<Vec<T>> {
    let mut out: Vec<Vec<T>> = LOCKS.iter().map(|_| Vec::new()).collect();
    for r in 0..runs {
        for k in 0..LOCKS.len() {
            let i = (k + r) % LOCKS.len();
            out[i].push(f(LOCKS[i]));
        }
    }
    out
}

fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A list like `0-3,8,10-11`; `None` when malformed or empty.
fn list(v: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in v.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if a > b {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().ok()?),
        }
    }
    (!out.is_empty()).then_some(out)
}

fn list_arg(name: &str, default: &str) -> Vec<usize> {
    let v = std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .unwrap_or_else(|| default.to_string());
    list(&v).unwrap_or_else(|| {
        eprintln!("txlock: {name} takes a list like 0,1 or 0-3,8 (got {v:?})");
        std::process::exit(2);
    })
}

/// One lock's line of the contended table (medians over its runs);
/// returns its median delivered rate.
fn print_row(n: usize, name: &str, r: &[Outcome], hz: f64) -> f64 {
    let med = |f: &dyn Fn(&Outcome) -> f64| {
        let mut v: Vec<f64> = r.iter().map(f).collect();
        median(&mut v)
    };
    let per_run: Vec<String> = r
        .iter()
        .map(|o| format!("{:.2}M", o.delivered / 1e6))
        .collect();
    let m = med(&|o| o.delivered);
    let acq = |q: f64| med(&|o| o.drain.acquire_ns(q, hz));
    let acq = format!("{:.0}/{:.0}/{:.0}", acq(0.5), acq(0.99), acq(1.0));
    println!(
        "{n:<4} {name:<10} {m:>12.0} {:>10.0} {:>10.0} {:>9.1}% {:>6.1} {acq:>22}   {}",
        med(&|o| o.drops as f64),
        med(&|o| o.p99_ns as f64),
        med(&|o| o.drain.wait_pct()),
        med(&|o| o.drain.mean_batch()),
        per_run.join(" ")
    );
    m
}

fn main() {
    let secs: f64 = arg("--seconds", 2.0);
    let runs: usize = arg("--runs", 3usize).max(1);
    let cpus = list_arg("--cpus", "0,1");
    let enqueuers = list_arg("--enqueuers", "2,4,8");
    let hz = rpmd_benches::tsc::tsc_hz();
    let others = if cpus.len() > 1 {
        &cpus[1..]
    } else {
        &cpus[..]
    };
    println!(
        "1 drainer on CPU {}, N enqueuers on CPUs {others:?}; sink {SINK_NS} ns/packet (max {} Mpps); queue {QUEUE}; {secs} s per run; medians of {runs} interleaved runs",
        cpus[0],
        1000 / SINK_NS
    );
    println!(
        "{:<4} {:<10} {:>12} {:>10} {:>10} {:>10} {:>6} {:>22}   delivered/s per run",
        "N",
        "lock",
        "delivered/s",
        "drops",
        "p99 enq ns",
        "drain wait",
        "batch",
        "drainer acq ns p50/99/max"
    );
    let mut worst = 0.0f64;
    let ours = LOCKS.len() - 1;
    let contended: &[usize] = if std::env::args().any(|a| a == "--rr-only") {
        &[]
    } else {
        &enqueuers
    };
    let mut plot = rpmd_benches::PlotCsv::from_env(&LOCKS);
    for &n in contended {
        let res = interleaved(runs, |name| run(make(name), n, &cpus, secs));
        let med: Vec<f64> = LOCKS
            .iter()
            .zip(&res)
            .map(|(name, r)| print_row(n, name, r, hz))
            .collect();
        let mdel: Vec<f64> = med.iter().map(|m| m / 1e6).collect();
        plot.row(&format!("{n} enqueuers"), &mdel);
        let best_other = med[..ours].iter().cloned().fold(0.0, f64::max);
        let ratio = best_other / med[ours].max(1.0);
        println!("     best other / rpmd: {ratio:.3}");
        worst = worst.max(ratio);
    }
    println!("request/response, one packet in flight (transactions/s):");
    // Three times the rounds, a third as long each: single runs of this
    // case swing by ±10 %, and more of them give a steadier median.
    let res = interleaved(3 * runs, |name| {
        request_response(make(name), &cpus, secs / 3.0)
    });
    let mut rr = Vec::new();
    for (name, r) in LOCKS.iter().zip(res) {
        let mut r = r;
        let per_run: Vec<String> = r.iter().map(|x| format!("{:.0}k", x / 1e3)).collect();
        let m = median(&mut r);
        println!("  {name:<10} {m:>12.0}   {}", per_run.join(" "));
        rr.push(m);
    }
    let rr_ratio = rr[0] / rr[ours];
    println!("RESULT txlock_rr ratio={rr_ratio:.3} (plain spin lock / rpmd; target <= 1.0)");
    println!("uncontended enqueue+drain pair, one thread (ns):");
    let res = interleaved(runs.max(5), |name| uncontended(&*make(name)));
    let mut un = Vec::new();
    for (name, r) in LOCKS.iter().zip(res) {
        let mut r = r;
        let m = median(&mut r);
        println!("  {name:<10} {m:>8.1}");
        un.push(m);
    }
    let un_ratio = un[ours] / un[0];
    println!(
        "RESULT txlock_uncontended ratio={un_ratio:.3} (rpmd ns / plain spin lock ns; target <= 1.0)"
    );
    worst = worst.max(rr_ratio).max(un_ratio);
    println!("RESULT txlock worst_ratio={worst:.3}");
}
