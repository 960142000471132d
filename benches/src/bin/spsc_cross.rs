//! `spsc_cross`: single-element throughput from CPU 0 to CPU 1, rpmd's
//! SP/SC ring against crossbeam's `ArrayQueue`, alternated (A B A B …),
//! medians. Both sides spin with crossbeam's `Backoff` when the queue is
//! full or empty.
//!
//! Cross-core single-element transfer is sensitive to what else the two
//! loops store: the ring's tail and slot stores wait in the store buffer
//! for lines the other core has just read, and any extra store per element
//! queues behind them. The first criterion harness called a non-inlined
//! dispatcher per element, whose register saves stalled the producer that
//! way (figures: benches/RESULTS.md, findings). Both loops
//! here are one queue call and a counter, and every run is reported.
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
