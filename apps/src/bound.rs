//! The lower bound for a request/response round trip between two cores:
//! one cache line bounced there and back.
//!
//! Two threads pinned to the two cores take turns writing a counter in one
//! shared cache line: the pinger writes an odd value and spins until the
//! ponger has written the next even one. Nothing a packet path does
//! between two cores can be faster than that (a request and a response
//! are at least one such round trip), so rr reports its median latency as
//! a multiple of this median.
//!
//! A second figure is closer to what any port can reach: requests travel
//! in one line and responses in another (a port has a ring per
//! direction), each line written by one side and polled by the other.
//! On the 2-vCPU test VMs it costs about twice the single line.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The measured bound.
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    /// Median round trip, ns (median over batches of the batch mean).
    pub p50_ns: f64,
    /// Fastest batch's mean round trip, ns.
    pub min_ns: f64,
    /// The two cores.
    pub cores: (usize, usize),
    /// Whether requests and responses used separate lines.
    pub two_lines: bool,
}

fn pin(core: usize) -> bool {
    core_affinity::get_core_ids()
        .and_then(|ids| ids.into_iter().find(|c| c.id == core))
        .is_some_and(core_affinity::set_for_current)
}

type Lines = [crossbeam_utils::CachePadded<AtomicU64>; 2];

/// Bounces a cache line between `a` and `b` for about `time` (with
/// `two_lines`, a request line and a response line), in batches of 1000
/// round trips; `None` when either core cannot be pinned to.
pub fn measure(a: usize, b: usize, time: Duration, two_lines: bool) -> Option<Bound> {
    const BATCH: u64 = 1000;
    let lines: Arc<Lines> = Arc::default();
    let resp = usize::from(two_lines);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (l2, s2) = (lines.clone(), stop.clone());
    let ponger = std::thread::spawn(move || {
        if !pin(b) {
            s2.store(true, Ordering::Relaxed);
            return false;
        }
        let mut want = 1;
        loop {
            // Acquire/Release: the value itself is the message; the
            // orderings only keep the exchange honest (no reordering of
            // the spin around the store).
            while l2[0].load(Ordering::Acquire) != want {
                if s2.load(Ordering::Relaxed) {
                    return true;
                }
                std::hint::spin_loop();
            }
            l2[resp].store(want + 1, Ordering::Release);
            want += 2;
        }
    });
    // The pinger is a thread of its own too: pinning the caller would
    // narrow the affinity its later threads (the lcores) inherit.
    let (l3, s3) = (lines.clone(), stop.clone());
    let pinger = std::thread::spawn(move || {
        let (lines, stop) = (l3, s3);
        let pinned = pin(a);
        let mut means = Vec::new();
        let t0 = Instant::now();
        let mut v = 0u64;
        while pinned && !stop.load(Ordering::Relaxed) && t0.elapsed() < time {
            let t = Instant::now();
            for _ in 0..BATCH {
                lines[0].store(v + 1, Ordering::Release);
                while lines[resp].load(Ordering::Acquire) != v + 2 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    std::hint::spin_loop();
                }
                v += 2;
            }
            means.push(t.elapsed().as_nanos() as f64 / BATCH as f64);
        }
        stop.store(true, Ordering::Relaxed);
        (pinned, means)
    });
    let (pinned, mut means) = pinger.join().unwrap_or((false, Vec::new()));
    stop.store(true, Ordering::Relaxed);
    let ok = ponger.join().unwrap_or(false);
    if !pinned || !ok || means.is_empty() {
        return None;
    }
    means.sort_by(f64::total_cmp);
    Some(Bound {
        p50_ns: means[means.len() / 2],
        min_ns: means[0],
        cores: (a, b),
        two_lines,
    })
}
