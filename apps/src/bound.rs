//! The lower bound for a request/response round trip between two cores:
//! one cache line bounced there and back.
//!
//! Two threads pinned to the two cores take turns writing a counter in one
//! shared cache line: the pinger writes an odd value and spins until the
//! ponger has written the next even one; every 1000 round trips both
//! move to the next of 64 lines, so the figure does not hang on where one
//! address lives (see [`measure`]). Nothing a packet path does
//! between two cores can be faster than that (a request and a response
//! are at least one such round trip), so rr reports its median latency as
//! a multiple of this median.
//!
//! A second figure is closer to what any port can reach: requests travel
//! in one line and responses in another (a port has a ring per
//! direction), each line written by one side and polled by the other.
//! On the 2-vCPU test VMs it costs about twice the single line.
use crossbeam_utils::CachePadded;
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

/// Line pairs the measurement rotates over, a batch on each in turn.
const LINES: usize = 64;

/// Bounces a cache line between `a` and `b` for about `time` (with
/// `two_lines`, a request line and a response line), in batches of 1000
/// round trips; `None` when either core cannot be pinned to.
///
/// Each batch uses the next of `LINES` (64) lines (or line pairs), so the
/// median is the machine's, not one address's: on a mesh the round trip
/// depends on which LLC slice an address hashes to, and one process's
/// single line read anywhere from 144 to 190 ns here while the median
/// over 48 lines stayed within a few ns from one process to the next. A
/// port's ring spreads its slots over as many lines.
pub fn measure(a: usize, b: usize, time: Duration, two_lines: bool) -> Option<Bound> {
    const BATCH: u64 = 1000;
    const GIVE_UP: Duration = Duration::from_secs(30);
    // Request lines first, then response lines (used with `two_lines`).
    let lines: Arc<Vec<CachePadded<AtomicU64>>> =
        Arc::new((0..2 * LINES).map(|_| CachePadded::default()).collect());
    let resp = if two_lines { LINES } else { 0 };
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (l2, s2) = (lines.clone(), stop.clone());
    let ponger = std::thread::spawn(move || {
        if !pin(b) {
            s2.store(true, Ordering::Relaxed);
            return false;
        }
        // Both sides move to the next line after each BATCH round trips,
        // so neither tells the other which line is in play.
        let mut want = 1;
        let mut trips = 0u64;
        loop {
            let k = (trips / BATCH) as usize % LINES;
            // Acquire/Release: the value itself is the message; the
            // orderings only keep the exchange honest (no reordering of
            // the spin around the store).
            while l2[k].load(Ordering::Acquire) != want {
                if s2.load(Ordering::Relaxed) {
                    return true;
                }
                std::hint::spin_loop();
            }
            l2[resp + k].store(want + 1, Ordering::Release);
            want += 2;
            trips += 1;
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
        let mut k = 0;
        while pinned && t0.elapsed() < time {
            let t = Instant::now();
            for _ in 0..BATCH {
                lines[k].store(v + 1, Ordering::Release);
                let mut spins = 0u32;
                while lines[resp + k].load(Ordering::Acquire) != v + 2 {
                    spins = spins.wrapping_add(1);
                    // A ponger that stopped (or never pinned) ends the
                    // wait; so does half a minute past the time (room for
                    // a ponger starved by other threads on a busy
                    // machine), looked at rarely so that the clock stays
                    // off the round trip.
                    if stop.load(Ordering::Relaxed)
                        || (spins % 65536 == 0 && t0.elapsed() > time + GIVE_UP)
                    {
                        stop.store(true, Ordering::Relaxed);
                        return (false, means);
                    }
                    std::hint::spin_loop();
                }
                v += 2;
            }
            means.push(t.elapsed().as_nanos() as f64 / BATCH as f64);
            k = (k + 1) % LINES;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Both sides rotate over the lines in step: a measurement long enough
    /// to visit every line more than once finishes with every batch.
    #[test]
    fn rotation_keeps_both_sides_in_step() {
        if core_affinity::get_core_ids().map_or(0, |c| c.len()) < 2 {
            return;
        }
        for two in [false, true] {
            let b = measure(0, 1, Duration::from_millis(200), two).expect("two cores");
            assert!(b.p50_ns > 0.0 && b.min_ns <= b.p50_ns, "{b:?}");
        }
    }
}
