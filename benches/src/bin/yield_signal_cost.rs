//! `yield_signal_cost`: what one check of each "another thread wants this
//! CPU" signal costs ([`rpmd_sched::signal`]), median of 5 runs of 20 000
//! checks, in nanoseconds. The run loop reads its signal every
//! `signal_every` while spinning, so this is the price of a check.
use rpmd_sched::signal::{gettid, RunnableSignal, SignalKind};
use std::time::Instant;

fn main() {
    let me = gettid();
    // A parked sibling thread, so the sibling signals read a real thread.
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        tx.send(gettid()).unwrap();
        let _ = stop_rx.recv();
    });
    let sib = rx.recv().unwrap();
    let _ = me;
    println!("{:<44} {:>10}", "signal", "ns/check");
    for (name, kind) in [
        ("Preempted (getrusage RUSAGE_THREAD)", SignalKind::Preempted),
        (
            "Siblings (run delay, 1 sibling schedstat)",
            SignalKind::Siblings(vec![sib]),
        ),
        (
            "SiblingState (state, 1 sibling stat)",
            SignalKind::SiblingState(vec![sib]),
        ),
        ("Pressure (/proc/pressure/cpu)", SignalKind::Pressure),
    ] {
        let mut s = RunnableSignal::new(kind);
        let mut runs: Vec<f64> = (0..5)
            .map(|_| {
                let t = Instant::now();
                let mut fired = 0;
                for _ in 0..20_000 {
                    fired += s.fired() as u32;
                }
                std::hint::black_box(fired);
                t.elapsed().as_nanos() as f64 / 20_000.0
            })
            .collect();
        runs.sort_by(|a, b| a.total_cmp(b));
        println!("{name:<44} {:>10.0}", runs[2]);
    }
    drop(stop_tx);
    h.join().unwrap();
}
