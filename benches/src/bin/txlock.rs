//! `txlock`: N enqueuer threads feed one software TX queue that a drainer
//! thread empties into a sink sending at a fixed rate (the NIC), under
//! four locks: a plain test-and-set spin lock, `std::sync::Mutex`, the
//! Linux busylock scheme (a second lock that contended enqueuers take
//! first), and rpmd's `TxLock` (busylock plus priority for the drainer).
//!
//! The drainer has CPU 0 to itself; the N enqueuers share CPU 1, so they
//! are preempted, sometimes while holding the lock, as on any
//! oversubscribed machine, while the drainer competes with them across
//! cores for the lock's cache line. Each configuration runs `--seconds`
//! (default 2); per lock and N it prints delivered packets/s, drops (queue
//! full), and the p99 time an enqueue waited for the lock (log2 buckets).
//! N = 2 (as many as cores) and 4 (2 × cores). Ends with `RESULT txlock worst_ratio=<x>`: the worst,
//! over N, of the best other lock's delivered rate ÷ ours (≤ 1.0: ours
//! delivers at least as much everywhere).
use rpmd_benches::tsc::pin;
use rpmd_sched::TxLock;
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const QUEUE: usize = 1024;
/// Sink cost per packet, standing in for the driver and wire: 10 Mpps.
const SINK_NS: u64 = 100;

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
}

/// Log2 buckets of nanoseconds.
fn p99(h: &[u64; 40]) -> u64 {
    let total: u64 = h.iter().sum();
    let mut acc = 0;
    for (i, c) in h.iter().enumerate() {
        acc += c;
        if acc * 100 >= total * 99 {
            return 1 << i;
        }
    }
    1 << 39
}

fn run(lock: Arc<dyn Lock>, enqueuers: usize, secs: f64) -> Outcome {
    let stop = Arc::new(AtomicBool::new(false));
    // Packets in the queue, readable without the lock: the drainer takes
    // the lock only when there is something to send, as a qdisc runs only
    // after an enqueue.
    let queued = Arc::new(AtomicU64::new(0));
    let drops = Arc::new(AtomicU64::new(0));
    let delivered = Arc::new(AtomicU64::new(0));
    let drainer = {
        let (lock, stop, delivered, queued) = (
            lock.clone(),
            stop.clone(),
            delivered.clone(),
            queued.clone(),
        );
        std::thread::spawn(move || {
            pin(0);
            let mut batch = [0u64; 32];
            while !stop.load(Relaxed) {
                if queued.load(Relaxed) == 0 {
                    std::hint::spin_loop();
                    continue;
                }
                let mut n = 0;
                lock.drain(&mut |q| {
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
                std::hint::black_box(&batch);
                // The sink: a fixed cost per packet, outside the lock.
                let until = Instant::now() + Duration::from_nanos(SINK_NS * n as u64);
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
                delivered.fetch_add(n as u64, Relaxed);
                if n == 0 {
                    std::hint::spin_loop();
                }
            }
        })
    };
    let hists: Vec<_> = (0..enqueuers)
        .map(|i| {
            let (lock, stop, drops, queued) =
                (lock.clone(), stop.clone(), drops.clone(), queued.clone());
            std::thread::spawn(move || {
                let _ = i;
                pin(1);
                let mut h = [0u64; 40];
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
                    let ns = t.elapsed().as_nanos() as u64;
                    h[(64 - ns.max(1).leading_zeros() as usize).min(39)] += 1;
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
    let mut h = [0u64; 40];
    for t in hists {
        for (a, b) in h.iter_mut().zip(t.join().expect("enqueuer")) {
            *a += b;
        }
    }
    drainer.join().expect("drainer");
    Outcome {
        delivered: delivered.load(Relaxed) as f64 / el,
        drops: drops.load(Relaxed),
        p99_ns: p99(&h),
    }
}

/// One thread, no contention: enqueue one packet then drain it, per
/// lock; nanoseconds per enqueue+drain pair (median of 5 runs).
fn uncontended(lock: &dyn Lock) -> f64 {
    let mut runs: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            for i in 0..2_000_000u64 {
                lock.enqueue(&mut |q| q.push_back(i));
                lock.drain(&mut |q| {
                    std::hint::black_box(q.pop_front());
                });
            }
            t.elapsed().as_nanos() as f64 / 2_000_000.0
        })
        .collect();
    runs.sort_by(|a, b| a.total_cmp(b));
    runs[2]
}

fn main() {
    let secs: f64 = std::env::args()
        .skip_while(|a| a != "--seconds")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(2.0);
    println!(
        "1 drainer on CPU 0, N enqueuers on CPU 1; sink {SINK_NS} ns/packet (max {} Mpps); queue {QUEUE}; {secs} s each",
        1000 / SINK_NS
    );
    println!(
        "{:<4} {:<10} {:>14} {:>14} {:>12}",
        "N", "lock", "delivered/s", "drops", "p99 enq ns"
    );
    let mut worst = 0.0f64;
    for n in [2usize, 4] {
        let locks: Vec<(&str, Arc<dyn Lock>)> = vec![
            ("spin", Arc::new(Spin::new())),
            (
                "mutex",
                Arc::new(StdMutex(Mutex::new(VecDeque::with_capacity(QUEUE)))),
            ),
            (
                "busylock",
                Arc::new(Busylock {
                    main: Spin::new(),
                    busy: AtomicBool::new(false),
                }),
            ),
            (
                "rpmd",
                Arc::new(Ours(TxLock::new(VecDeque::with_capacity(QUEUE)))),
            ),
        ];
        let mut best_other = 0.0f64;
        let mut ours = 0.0;
        for (name, l) in locks {
            let o = run(l, n, secs);
            println!(
                "{n:<4} {name:<10} {:>14.0} {:>14} {:>12}",
                o.delivered, o.drops, o.p99_ns
            );
            if name == "rpmd" {
                ours = o.delivered;
            } else {
                best_other = best_other.max(o.delivered);
            }
        }
        worst = worst.max(best_other / ours.max(1.0));
    }
    println!("uncontended enqueue+drain pair, one thread (ns, median of 5):");
    let mut base = 0.0;
    let mut ours_u = 0.0;
    for (name, l) in [
        ("spin", Arc::new(Spin::new()) as Arc<dyn Lock>),
        (
            "mutex",
            Arc::new(StdMutex(Mutex::new(VecDeque::with_capacity(QUEUE)))),
        ),
        (
            "busylock",
            Arc::new(Busylock {
                main: Spin::new(),
                busy: AtomicBool::new(false),
            }),
        ),
        (
            "rpmd",
            Arc::new(Ours(TxLock::new(VecDeque::with_capacity(QUEUE)))),
        ),
    ] {
        let ns = uncontended(&*l);
        println!("  {name:<10} {ns:>8.1}");
        if name == "spin" {
            base = ns;
        }
        if name == "rpmd" {
            ours_u = ns;
        }
    }
    println!(
        "RESULT txlock_uncontended ratio={:.3} (rpmd / plain spin lock; target <= 1.0)",
        ours_u / base
    );
    println!("RESULT txlock worst_ratio={worst:.3}");
}
