//! `spsc_cross`: single-element throughput from CPU 0 to CPU 1, rpmd's
//! SP/SC ring against crossbeam's `ArrayQueue`, alternated (A B A B …),
//! medians. Both sides spin with crossbeam's `Backoff` when the queue is
//! full or empty.
//!
//! Cross-core single-element transfer is bimodal: when the consumer keeps
//! up, it finds the queue empty after each element and every element costs
//! a cache-line round trip; when the producer stays ahead, both sides work
//! from cached views of the other's index and whole lines of elements move
//! at once. Which regime a run lands in depends on small differences in
//! the two loops (code layout included), so this program reports every run.
//!
//! Usage: `spsc_cross [--runs N] [--items N]`
use crossbeam_queue::ArrayQueue;
use crossbeam_utils::Backoff;
use rpmd_benches::median;
use rpmd_benches::tsc::pin;
use rpmd_ring::Single;
use std::sync::Arc;
use std::time::Instant;

/// Runs `produce` on CPU 0 and `consume` on CPU 1; returns M items/s.
fn run(
    items: u64,
    produce: impl FnMut() -> bool,
    consume: impl FnMut() -> bool + Send + 'static,
) -> f64 {
    let mut consume = consume;
    let c = std::thread::spawn(move || {
        pin(1);
        let b = Backoff::new();
        let mut got = 0;
        while got < items {
            if consume() {
                got += 1;
                b.reset();
            } else {
                b.spin();
            }
        }
    });
    pin(0);
    let mut produce = produce;
    let b = Backoff::new();
    let start = Instant::now();
    let mut sent = 0;
    while sent < items {
        if produce() {
            sent += 1;
            b.reset();
        } else {
            b.spin();
        }
    }
    c.join().unwrap();
    items as f64 / start.elapsed().as_secs_f64() / 1e6
}

fn main() {
    let mut runs = 5usize;
    let mut items = 20_000_000u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next().and_then(|v| v.parse::<u64>().ok());
        match (a.as_str(), v) {
            ("--runs", Some(v)) if v > 0 => runs = v as usize,
            ("--items", Some(v)) if v > 0 => items = v,
            _ => {
                eprintln!(
                    "spsc_cross: bad argument {a:?}; usage: spsc_cross [--runs N] [--items N]"
                );
                std::process::exit(2);
            }
        }
    }
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for i in 0..runs {
        let (p, c) = rpmd_ring::new::<u64, Single, Single>(1024).unwrap();
        let r = run(
            items,
            move || p.enqueue(7).is_ok(),
            move || c.dequeue().is_some(),
        );
        let q = Arc::new(ArrayQueue::<u64>::new(1024));
        let q2 = q.clone();
        let a = run(items, move || q.push(7).is_ok(), move || q2.pop().is_some());
        println!(
            "run {}: rpmd SP/SC {r:7.1} M/s   ArrayQueue {a:7.1} M/s   ratio {:.2}",
            i + 1,
            r / a
        );
        ours.push(r);
        theirs.push(a);
    }
    let (r, a) = (median(ours), median(theirs));
    println!("median: rpmd SP/SC {r:.1} M/s, ArrayQueue {a:.1} M/s");
    println!("RESULT spsc_cross ratio={:.2}", r / a);
}
