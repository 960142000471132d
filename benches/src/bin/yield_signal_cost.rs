//! `yield_signal_cost`: what each "another thread wants this CPU" signal
//! ([`rpmd_sched::signal`]) costs per check, and how soon a sibling that
//! becomes runnable gets the CPU when a spinner yields on it.
//!
//! The sibling is another process (as netperf servers are), pinned to CPU
//! 0 like the spinner: it blocks on a pipe, and when woken works for 200
//! µs (it wants the CPU for a while, as a responder serving a request
//! does), then blocks again. The spinner, on CPU 0 in this process, checks
//! its signal after every 2 µs of spinning (the run loop's `signal_every`)
//! and yields the CPU when it fires. A waker on CPU 1 writes to the pipe
//! every 2 ms and the sibling reports when it ran: the wake-to-run
//! latency, p50/p99/max over 300 wake-ups, per signal. `Off` is the
//! scheduler's own answer (wake-up preemption or the end of the
//! spinner's time slice).
//!
//! Cost: median of 5 runs of 20 000 checks, in nanoseconds, the sibling
//! asleep. `--sibling` is the child's own mode.
use hdrhistogram::Histogram;
use rpmd_benches::tsc::{pin, rdtsc, tsc_hz};
use rpmd_sched::signal::{gettid, RunnableSignal, SignalKind};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The child: pinned to CPU 0, prints its thread id, then for every byte
/// read reports the TSC when it got the CPU and works for 200 µs.
fn sibling() {
    pin(0);
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", gettid()).expect("stdout");
    out.flush().expect("stdout");
    let hz = tsc_hz();
    let work = (hz * 200e-6) as u64;
    let mut b = [0u8; 1];
    while std::io::stdin().read_exact(&mut b).is_ok() {
        let ran = rdtsc();
        if out.write_all(&ran.to_le_bytes()).is_err() || out.flush().is_err() {
            return;
        }
        while rdtsc() - ran < work {
            std::hint::spin_loop();
        }
    }
}

/// One check as the run loop makes it (yielding when it fires).
fn cost(kind: &SignalKind) -> f64 {
    let mut s = RunnableSignal::new(kind.clone());
    let runs: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            let mut fired = 0;
            for _ in 0..20_000 {
                fired += s.yield_if_wanted() as u32;
            }
            std::hint::black_box(fired);
            t.elapsed().as_nanos() as f64 / 20_000.0
        })
        .collect();
    rpmd_benches::median(runs)
}

/// Wake-to-run latency of the sibling in ns, p50, p99, max, while a
/// spinner on its CPU yields on `kind`.
fn latency(kind: &SignalKind, child: &mut std::process::Child, hz: f64) -> (u64, u64, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let kind = kind.clone();
    let spinner = std::thread::spawn(move || {
        pin(0);
        let mut sig = RunnableSignal::new(kind);
        let every = (hz * 2e-6) as u64;
        while !s2.load(Relaxed) {
            let t = rdtsc();
            while rdtsc() - t < every {
                std::hint::spin_loop();
            }
            sig.yield_if_wanted();
        }
    });
    pin(1);
    let (stdin, stdout) = (
        child.stdin.as_mut().expect("piped"),
        child.stdout.as_mut().expect("piped"),
    );
    let mut h = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 2).expect("bounds");
    let mut ran = [0u8; 8];
    for _ in 0..300 {
        std::thread::sleep(Duration::from_millis(2));
        let woke = rdtsc();
        stdin.write_all(b"w").expect("sibling's stdin");
        stdin.flush().expect("sibling's stdin");
        stdout.read_exact(&mut ran).expect("sibling's report");
        let dt = u64::from_le_bytes(ran).saturating_sub(woke);
        h.saturating_record((dt as f64 * 1e9 / hz) as u64);
    }
    stop.store(true, Relaxed);
    spinner.join().expect("spinner");
    (h.value_at_quantile(0.5), h.value_at_quantile(0.99), h.max())
}

fn main() {
    if std::env::args().any(|a| a == "--sibling") {
        return sibling();
    }
    let exe = std::env::current_exe().expect("own path");
    let mut child = Command::new(exe)
        .arg("--sibling")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the sibling process");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().expect("piped"))
        .read_line(&mut line)
        .expect("the sibling's thread id");
    let sib: i32 = line.trim().parse().expect("a thread id");
    pin(1);
    let hz = tsc_hz();
    println!("sibling: thread {sib} of process {}, on CPU 0 with the spinner; waker on CPU 1; 300 wake-ups per signal", child.id());
    println!(
        "{:<44} {:>9} {:>11} {:>11} {:>11}",
        "signal", "ns/check", "wake p50", "wake p99", "wake max"
    );
    let kinds = [
        ("Off (the scheduler alone)", SignalKind::Off),
        ("Preempted (getrusage RUSAGE_THREAD)", SignalKind::Preempted),
        (
            "Siblings (run delay, 1 sibling schedstat)",
            SignalKind::Siblings(vec![sib]),
        ),
        (
            "SiblingState (state, 1 sibling stat)",
            SignalKind::SiblingState(vec![sib]),
        ),
        ("Overcommitted (/proc/loadavg)", SignalKind::Overcommitted),
        ("Pressure (/proc/pressure/cpu)", SignalKind::Pressure),
        ("RunQueue (sched_yield every check)", SignalKind::RunQueue),
    ];
    for (name, kind) in kinds {
        let ns = cost(&kind);
        let (p50, p99, max) = latency(&kind, &mut child, hz);
        let us = |ns: u64| format!("{:.1} us", ns as f64 / 1e3);
        println!(
            "{name:<44} {ns:>9.0} {:>11} {:>11} {:>11}",
            us(p50),
            us(p99),
            us(max)
        );
    }
    drop(child.stdin.take());
    let _ = child.wait();
}
