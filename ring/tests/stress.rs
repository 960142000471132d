//! Multi-threaded stress tests (DPDK's test_ring_stress role). They run in
//! release mode (`cargo test --release -p rpmd-ring --test stress`); debug
//! builds skip them. Each producer tags its items with its id and a
//! sequence number; consumers check that every item arrives exactly once
//! (a shared bitmap) and that each producer's items reach each consumer in
//! order.
#![cfg(not(loom))]

use rpmd_ring::{Consumer, Hts, Multi, Producer, Single, SyncMode};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SEQ_BITS: u32 = 40;

struct Report {
    moved: u64,
    total: u64,
    elapsed: Duration,
    finished: bool,
}

impl Report {
    fn mops(&self) -> f64 {
        self.moved as f64 / self.elapsed.as_secs_f64() / 1e6
    }
}

/// Small xorshift for batch sizes and operation choice.
fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// Retry policy of the *test* threads when the ring is full or empty: spin
/// a little, then yield (they may share a core with the thread they wait for).
fn backoff(fails: &mut u32) {
    *fails += 1;
    if *fails < 16 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

fn stress<P: SyncMode, C: SyncMode>(
    producers: Vec<Producer<u64, P, C>>,
    consumers: Vec<Consumer<u64, P, C>>,
    per_producer: u64,
    deadline: Duration,
) -> Report {
    let np = producers.len() as u64;
    let total = np * per_producer;
    let bitmap: Arc<Vec<AtomicU64>> =
        Arc::new((0..total.div_ceil(64)).map(|_| AtomicU64::new(0)).collect());
    let received = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut handles = Vec::new();

    for (pid, p) in producers.into_iter().enumerate() {
        let stop = stop.clone();
        handles.push(std::thread::spawn(move || {
            let mut r = rng(0x9e37_79b9 + pid as u64);
            let mut seq = 0u64;
            let mut buf = [0u64; 32];
            let mut fails = 0;
            while seq < per_producer && !stop.load(Ordering::Relaxed) {
                let k = ((r() % 32 + 1).min(per_producer - seq)) as usize;
                for (i, slot) in buf[..k].iter_mut().enumerate() {
                    *slot = ((pid as u64) << SEQ_BITS) | (seq + i as u64);
                }
                let moved = match r() % 3 {
                    0 => p.enqueue_bulk(&buf[..k]).n,
                    1 => p.enqueue_burst(&buf[..k]).n,
                    _ => usize::from(p.enqueue(buf[0]).is_ok()),
                };
                if moved == 0 {
                    backoff(&mut fails);
                } else {
                    fails = 0;
                }
                seq += moved as u64;
            }
        }));
    }
    for (cid, c) in consumers.into_iter().enumerate() {
        let (stop, bitmap, received, errors) = (
            stop.clone(),
            bitmap.clone(),
            received.clone(),
            errors.clone(),
        );
        handles.push(std::thread::spawn(move || {
            let mut r = rng(0x1234_5678 + cid as u64);
            let mut last = vec![u64::MAX; np as usize];
            let mut buf = [0u64; 32];
            let mut fails = 0;
            while received.load(Ordering::Relaxed) < total && !stop.load(Ordering::Relaxed) {
                let k = (r() % 32 + 1) as usize;
                let n = match r() % 3 {
                    0 => c.dequeue_bulk(&mut buf[..k]).n,
                    1 => c.dequeue_burst(&mut buf[..k]).n,
                    _ => match c.dequeue() {
                        Some(v) => {
                            buf[0] = v;
                            1
                        }
                        None => 0,
                    },
                };
                if n == 0 {
                    backoff(&mut fails);
                    continue;
                }
                fails = 0;
                for &tag in &buf[..n] {
                    let pid = (tag >> SEQ_BITS) as usize;
                    let seq = tag & ((1 << SEQ_BITS) - 1);
                    if pid >= np as usize || seq >= per_producer {
                        errors.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    // Per-producer order, as seen by this consumer.
                    if last[pid] != u64::MAX && seq <= last[pid] {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                    last[pid] = seq;
                    // Exactly once, across all consumers.
                    let bit = pid as u64 * per_producer + seq;
                    let old =
                        bitmap[(bit / 64) as usize].fetch_or(1 << (bit % 64), Ordering::Relaxed);
                    if old & (1 << (bit % 64)) != 0 {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                received.fetch_add(n as u64, Ordering::Relaxed);
            }
        }));
    }
    while received.load(Ordering::Relaxed) < total && start.elapsed() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    let moved = received.load(Ordering::Relaxed);
    assert_eq!(
        errors.load(Ordering::Relaxed),
        0,
        "duplicate, foreign or reordered items"
    );
    let finished = moved == total;
    if finished {
        let missing: u64 = bitmap
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let bits_here = (total - i as u64 * 64).min(64);
                let want = if bits_here == 64 {
                    u64::MAX
                } else {
                    (1 << bits_here) - 1
                };
                u64::from((w.load(Ordering::Relaxed) & want).count_ones() as u64 != bits_here)
            })
            .sum();
        assert_eq!(missing, 0, "items lost");
    }
    Report {
        moved,
        total,
        elapsed,
        finished,
    }
}

type Handles<P, C> = (Vec<Producer<u64, P, C>>, Vec<Consumer<u64, P, C>>);

fn build<P: SyncMode, C: SyncMode>(
    cap: usize,
    np: usize,
    nc: usize,
    clone_p: impl Fn(&Producer<u64, P, C>) -> Producer<u64, P, C>,
    clone_c: impl Fn(&Consumer<u64, P, C>) -> Consumer<u64, P, C>,
) -> Handles<P, C> {
    // Start near the top of the index space so the run crosses u32::MAX.
    let (p, c) = rpmd_ring::with_start_index::<u64, P, C>(cap, u32::MAX - 1000).unwrap();
    let mut ps: Vec<_> = (1..np).map(|_| clone_p(&p)).collect();
    ps.push(p);
    let mut cs: Vec<_> = (1..nc).map(|_| clone_c(&c)).collect();
    cs.push(c);
    (ps, cs)
}

const TEN_MILLION: u64 = 10_000_000;
const GENEROUS: Duration = Duration::from_secs(120);

fn expect_done(name: &str, r: Report) {
    eprintln!(
        "stress {name}: {}/{} items in {:.2?} ({:.1} M items/s)",
        r.moved,
        r.total,
        r.elapsed,
        r.mops()
    );
    assert!(
        r.finished,
        "{name}: only {} of {} items within {:?}",
        r.moved, r.total, GENEROUS
    );
}

#[test]
#[cfg_attr(debug_assertions, ignore = "release-mode stress test")]
fn spsc_ten_million() {
    let (ps, cs) = build::<Single, Single>(1024, 1, 1, |_| unreachable!(), |_| unreachable!());
    expect_done("SP/SC 1x1", stress(ps, cs, TEN_MILLION, GENEROUS));
}

#[test]
#[cfg_attr(debug_assertions, ignore = "release-mode stress test")]
fn mpmc_ten_million() {
    let (ps, cs) = build::<Multi, Multi>(1024, 2, 2, Clone::clone, Clone::clone);
    expect_done("MP/MC 2x2", stress(ps, cs, TEN_MILLION / 2, GENEROUS));
}

#[test]
#[cfg_attr(debug_assertions, ignore = "release-mode stress test")]
fn mpsc_and_spmc() {
    let (ps, cs) = build::<Multi, Single>(512, 3, 1, Clone::clone, |_| unreachable!());
    expect_done("MP/SC 3x1", stress(ps, cs, 1_000_000, GENEROUS));
    let (ps, cs) = build::<Single, Multi>(512, 1, 3, |_| unreachable!(), Clone::clone);
    expect_done("SP/MC 1x3", stress(ps, cs, 3_000_000, GENEROUS));
}

#[test]
#[cfg_attr(debug_assertions, ignore = "release-mode stress test")]
fn hts_ten_million() {
    let (ps, cs) = build::<Hts, Hts>(1024, 2, 2, Clone::clone, Clone::clone);
    expect_done("HTS 2x2", stress(ps, cs, TEN_MILLION / 2, GENEROUS));
}

/// More threads than cores: 4 producers and 4 consumers on (at most) 2
/// CPUs. The HTS ring must finish within a bound; plain MP/MC is reported
/// (it may convoy behind preempted threads), not asserted.
#[test]
#[cfg_attr(debug_assertions, ignore = "release-mode stress test")]
fn oversubscribed_4p4c_on_two_cores() {
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let items = 500_000u64; // per producer: 2 M in all
    let bound = Duration::from_secs(60);
    let (ps, cs) = build::<Hts, Hts>(256, 4, 4, Clone::clone, Clone::clone);
    let hts = stress(ps, cs, items, bound);
    let (ps, cs) = build::<Multi, Multi>(256, 4, 4, Clone::clone, Clone::clone);
    let mpmc = stress(ps, cs, items, bound);
    for (name, r) in [("HTS", &hts), ("MP/MC", &mpmc)] {
        eprintln!(
            "oversubscribed 4P+4C on {ncpu} CPUs, {name}: {}/{} items in {:.2?} ({:.2} M items/s){}",
            r.moved,
            r.total,
            r.elapsed,
            r.mops(),
            if r.finished { "" } else { " -- did NOT finish" }
        );
    }
    assert!(hts.finished, "HTS did not finish 4P+4C within {bound:?}");
}
