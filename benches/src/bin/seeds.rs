//! `seeds`: the experiments behind rpmd's run-loop ideas.
//!
//! `seeds spin [--seconds S] [--runs N]`: one request/response session,
//! its responder under spin budget 0, a fixed 50 µs, and adaptive (0–200
//! µs), on a dense load (next request 10 µs after each reply) and a sparse
//! one (300 µs): transactions/s, RTT p50/p99, and the responder's CPU share
//! (time not asleep). Ends with `RESULT spin gain=<x>`: CPU of fixed 50 µs
//! ÷ adaptive on the sparse load, with adaptive's dense p99 held to 1.1×
//! fixed 50 µs.
//!
//! `seeds backlog [--seconds S] [--runs N]`: 1, 16 and 200
//! request/response flows into one interrupt-driven consumer lcore (spin
//! budget 0: it sleeps on an eventfd the producer signals while it is
//! armed), draining its input until empty or quota vs a snapshot of the
//! queue's length: transactions/s, wake-ups/s, polls per packet. Ends with
//! `RESULT backlog gain=<x>` (transactions/s until-empty ÷ snapshot,
//! geometric mean over the three flow counts).
//!
//! `seeds yield [--seconds S] [--runs N]`: request/response sessions whose
//! responders busy-poll on the same CPU. Each session is a pair of
//! `ring:` ports (in-memory, crossing threads); its responder is an lcore
//! pinned to CPU 0 that echoes every frame; one requester thread on CPU 1
//! keeps one 64-byte request outstanding per session, sending the next one
//! `--wire-us` (default 20) after each reply, which stands for the network
//! round trip of a real TCP_RR (the Linux experiment's transactions took
//! about 65 µs; in memory they take about 1 µs, and then a context switch
//! per transaction could never pay). With two sessions
//! both responders spin on CPU 0, so each waits for the other's time slice
//! unless the spinning one yields when the other has become runnable,
//! checked every 2 µs: `state`, the sibling lcore's scheduler state (with
//! one session, this thread's preemptions), or `runqueue`, a
//! `sched_yield` that switches only when the kernel has another task
//! queued on the CPU. Reports transactions/s with yield off, `state` and
//! `runqueue`, for 2 sessions and for 1 (where yielding must cost
//! nothing), interleaved rounds (the order rotated), medians, and ends
//! with `RESULT yield gain=<x>` (2 sessions, `state` ÷ off; the Linux
//! patch saw 1.52), `RESULT yield_single gain=<x>` (target ≥ 0.97) and
//! the same two for `runqueue` (`yield_runqueue`,
//! `yield_runqueue_single`). A run with yield on in which no lcore
//! yielded prints a warning (the signal never fired).
use rpmd_benches::tsc::pin;
use rpmd_benches::{median, Echo};
use rpmd_pmd::port::Pkts;
use rpmd_pmd::{Mempool, MempoolConfig, PortConfig, Queues, Registry};
use rpmd_sched::{Lcore, LcoreConfig, SignalKind, SpinPolicy, Task, TaskId};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the responders yield in `seeds yield`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum YieldMode {
    Off,
    /// The siblings' scheduler state (one session: own preemptions).
    State,
    /// A `sched_yield` at every check.
    RunQueue,
}

/// One configuration: `sessions` sessions, yielding by `mode`; returns
/// transactions per second over all sessions.
fn run_rr(sessions: usize, mode: YieldMode, secs: f64, wire: Duration) -> f64 {
    let yield_on = mode != YieldMode::Off;
    let reg = Registry::new();
    let mut cfg = MempoolConfig::new("seeds", 4096);
    cfg.cache_size = 64;
    let pool = Mempool::new(&cfg).expect("mempool");
    let conf = PortConfig::default();
    let mut mine = Vec::new();
    let mut lcores = Vec::new();
    for s in 0..sessions {
        let name = format!("ring:seed{s}");
        let mut a = reg.open(&name).expect("ring port");
        let mut b = reg.open(&name).expect("ring port");
        a.configure(&conf).expect("configure");
        b.configure(&conf).expect("configure");
        let qa = a.start().expect("start");
        let qb = b.start().expect("start");
        // Responders keep spinning (a long budget), as busy-polling
        // servers do; yielding is what differs.
        let l = rpmd_benches::responder_lcore(0);
        l.add(TaskId(s as u64), Echo::new(qb))
            .expect("the lcore runs");
        lcores.push(l);
        mine.push((a, b, qa));
    }
    if yield_on {
        for (i, l) in lcores.iter().enumerate() {
            let sib: Vec<i32> = lcores
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, o)| o.tid())
                .collect();
            // One session: no sibling shares CPU 0, so watch this thread's
            // own preemptions instead; its checks (a getrusage every 5 µs
            // of spinning) are the cost being measured.
            l.set_signal(if mode == YieldMode::RunQueue {
                SignalKind::RunQueue
            } else if sib.is_empty() {
                SignalKind::Preempted
            } else {
                SignalKind::SiblingState(sib)
            });
        }
    }
    std::thread::sleep(Duration::from_millis(50));
    let mut queues: Vec<Queues> = Vec::new();
    let mut ports = Vec::new();
    for (a, b, qa) in mine {
        queues.push(qa);
        ports.push((a, b));
    }
    let done = std::thread::scope(|sc| {
        sc.spawn(|| rpmd_benches::rr_requester(&mut queues, &pool, secs, wire))
            .join()
            .expect("requester")
    });
    if std::env::var_os("SEEDS_DEBUG").is_some() {
        for l in &lcores {
            let t = l.stats();
            eprintln!(
                "  lcore tid {}: rounds {} busy {} spins {} yields {} sleeps {}",
                l.tid(),
                t.rounds.get(),
                t.busy_polls.get(),
                t.spins.get(),
                t.yields.get(),
                t.sleeps.get()
            );
        }
    }
    let yields: u64 = lcores.iter().map(|l| l.stats().yields.get()).sum();
    if yield_on && sessions > 1 && yields == 0 {
        // The one way this experiment reads "no gain" by itself: the
        // signal never fired (a sibling's stat unreadable, or never
        // runnable while we spun). Say so beside the figure.
        println!("  warning: yield on, {sessions} sessions, but no lcore yielded in this run");
    }
    for l in lcores {
        l.stop().expect("no task panicked");
    }
    done
}

/// One session with the responder under `spin`; returns transactions/s,
/// RTT p50 and p99 in microseconds, and the responder's CPU share (time
/// not asleep ÷ wall time).
fn run_spin(spin: SpinPolicy, secs: f64, wire: Duration) -> (f64, f64, f64, f64) {
    let reg = Registry::new();
    let mut cfg = MempoolConfig::new("seeds-spin", 1024);
    cfg.cache_size = 32;
    let pool = Mempool::new(&cfg).expect("mempool");
    let conf = PortConfig::default();
    let mut a = reg.open("ring:spin").expect("ring port");
    let mut b = reg.open("ring:spin").expect("ring port");
    a.configure(&conf).expect("configure");
    b.configure(&conf).expect("configure");
    let mut qa = a.start().expect("start");
    let qb = b.start().expect("start");
    let l = Lcore::spawn(
        0,
        LcoreConfig {
            spin,
            signal: SignalKind::Off,
            ..Default::default()
        },
    )
    .expect("lcore on CPU 0");
    l.add(TaskId(0), Echo::new(qb)).expect("the lcore runs");
    std::thread::sleep(Duration::from_millis(20));
    let asleep0 = l.stats().sleep_ns.get();
    let t0 = Instant::now();
    let mut rtts: Vec<u32> = Vec::with_capacity(2_000_000);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            pin(1);
            let (mut tx, mut rx) = (Pkts::new(), Pkts::new());
            let end = t0 + Duration::from_secs_f64(secs);
            let mut next = Instant::now();
            while Instant::now() < end && rtts.len() < rtts.capacity() {
                while Instant::now() < next {
                    std::hint::spin_loop();
                }
                let Ok(mut m) = pool.get() else { continue };
                m.append(64).expect("room for 64 bytes");
                let _ = tx.push(m);
                let sent = Instant::now();
                if qa.tx_burst(0, &mut tx) != 1 {
                    tx.clear();
                    continue;
                }
                while qa.rx_burst(0, &mut rx, 32) == 0 {
                    std::hint::spin_loop();
                }
                let now = Instant::now();
                rx.clear();
                rtts.push((now - sent).as_nanos().min(u32::MAX as u128) as u32);
                next = now + wire;
            }
        });
    });
    let wall = t0.elapsed();
    let asleep = l.stats().sleep_ns.get() - asleep0;
    l.stop().expect("no task panicked");
    rtts.sort_unstable();
    let pct = |p: f64| {
        rtts.get(((rtts.len() as f64 * p) as usize).min(rtts.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0) as f64
            / 1000.0
    };
    let cpu = 1.0 - (asleep as f64 / wall.as_nanos() as f64).min(1.0);
    (
        rtts.len() as f64 / wall.as_secs_f64(),
        pct(0.5),
        pct(0.99),
        cpu,
    )
}

/// The backlog experiment's consumer: drains its input (flow ids) either
/// until empty or by snapshot, spends `work` per packet, and completes
/// each packet back to the producer.
struct Backlog {
    input: rpmd_ring::Consumer<u32, rpmd_ring::Single, rpmd_ring::Single>,
    done: rpmd_ring::Producer<u32, rpmd_ring::Single, rpmd_ring::Single>,
    until_empty: bool,
    work: Duration,
    wake: Arc<rpmd_pmd::function::EventFd>,
    armed: Arc<AtomicBool>,
}

impl Task for Backlog {
    fn run(&mut self, quota: usize) -> usize {
        let (done, work) = (&self.done, self.work);
        let f = |b: &mut rpmd_ring::Burst<u32, 32>| {
            for &flow in b.iter() {
                let until = Instant::now() + work;
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
                let _ = done.enqueue(flow);
            }
        };
        if self.until_empty {
            rpmd_sched::backlog::drain_until_empty(&self.input, quota, f)
        } else {
            rpmd_sched::backlog::drain_snapshot(&self.input, quota, f)
        }
    }
    fn wake_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        Some(self.wake.as_fd())
    }
    fn set_notify(&mut self, armed: bool) {
        self.armed.store(armed, SeqCst);
        if !armed {
            // Consume the interrupt, or the next sleep returns at once.
            let _ = self.wake.take();
        }
    }
    fn has_work(&self) -> bool {
        !self.input.is_empty()
    }
}

/// `flows` request/response flows into one interrupt-driven consumer
/// (spin budget 0); returns (transactions/s, sleeps per second, polls per
/// packet).
fn run_backlog(flows: usize, until_empty: bool, secs: f64) -> (f64, f64, f64) {
    let (in_tx, in_rx) =
        rpmd_ring::new::<u32, rpmd_ring::Single, rpmd_ring::Single>(1024).expect("ring");
    let (done_tx, done_rx) =
        rpmd_ring::new::<u32, rpmd_ring::Single, rpmd_ring::Single>(1024).expect("ring");
    let wake = Arc::new(rpmd_pmd::function::EventFd::new().expect("eventfd"));
    let armed = Arc::new(AtomicBool::new(false));
    let l = rpmd_benches::sleeping_lcore(0);
    l.add(
        TaskId(0),
        Backlog {
            input: in_rx,
            done: done_tx,
            until_empty,
            work: Duration::from_nanos(300),
            wake: wake.clone(),
            armed: armed.clone(),
        },
    )
    .expect("the lcore runs");
    std::thread::sleep(Duration::from_millis(20));
    let (sleeps0, rounds0, work0) = (
        l.stats().sleeps.get(),
        l.stats().rounds.get(),
        l.stats().work.get(),
    );
    let t0 = Instant::now();
    let (wake2, armed2) = (wake.clone(), armed.clone());
    let n = std::thread::scope(|sc| {
        sc.spawn(move || {
            let (wake, armed) = (wake2, armed2);
            pin(1);
            // Each flow keeps one request outstanding and sends the next
            // 2 µs after its completion (the client's think time).
            let mut due = vec![Instant::now(); flows];
            let mut out = vec![false; flows];
            let mut n = 0u64;
            let end = t0 + Duration::from_secs_f64(secs);
            loop {
                let now = Instant::now();
                if now >= end {
                    break;
                }
                while let Some(f) = done_rx.dequeue() {
                    out[f as usize] = false;
                    due[f as usize] = now + Duration::from_micros(2);
                    n += 1;
                }
                let mut sent = false;
                for f in 0..flows {
                    if !out[f] && now >= due[f] && in_tx.enqueue(f as u32).is_ok() {
                        out[f] = true;
                        sent = true;
                    }
                }
                // Interrupt: only when the consumer sleeps (armed).
                if sent && armed.load(SeqCst) {
                    let _ = wake.signal();
                }
            }
            n
        })
        .join()
        .expect("producer")
    });
    let el = t0.elapsed().as_secs_f64();
    let st = l.stats();
    let (sleeps, rounds, work) = (
        st.sleeps.get() - sleeps0,
        st.rounds.get() - rounds0,
        st.work.get() - work0,
    );
    l.stop().expect("no task panicked");
    (
        n as f64 / el,
        sleeps as f64 / el,
        rounds as f64 / work.max(1) as f64,
    )
}

/// `seeds yield`: off, `state` and `runqueue` once per round, the order
/// rotated; medians over rounds.
fn yield_experiment(runs: usize, secs: f64, wire: Duration) {
    let modes = [
        ("off", YieldMode::Off),
        ("state", YieldMode::State),
        ("runqueue", YieldMode::RunQueue),
    ];
    println!("request/response, responders busy-polling on CPU 0, requester on CPU 1, {} us wire time; {runs} interleaved rounds of {secs} s, medians", wire.as_secs_f64() * 1e6);
    println!(
        "{:<10} {:>12} {:>12} {:>12} {:>11} {:>14}",
        "sessions", "off tps", "state tps", "runqueue tps", "state/off", "runqueue/off"
    );
    let mut gains = Vec::new();
    let mut plot = rpmd_benches::PlotCsv::from_env(&["yield off", "state", "runqueue"]);
    for sessions in [2, 1] {
        let mut res: Vec<Vec<f64>> = modes.iter().map(|_| Vec::new()).collect();
        for r in 0..runs {
            for k in 0..modes.len() {
                let i = (k + r) % modes.len();
                res[i].push(run_rr(sessions, modes[i].1, secs, wire));
            }
        }
        let m: Vec<f64> = res.into_iter().map(median).collect();
        let (state, rq) = (m[1] / m[0].max(1.0), m[2] / m[0].max(1.0));
        println!(
            "{sessions:<10} {:>12.0} {:>12.0} {:>12.0} {state:>11.3} {rq:>14.3}",
            m[0], m[1], m[2]
        );
        plot.row(
            &format!("{sessions} sessions"),
            &[m[0] / 1e3, m[1] / 1e3, m[2] / 1e3],
        );
        gains.push((state, rq));
    }
    println!(
        "RESULT yield gain={:.3} (state / off, 2 sessions; target >= 1.52, the Linux patch's +52%)",
        gains[0].0
    );
    println!(
        "RESULT yield_single gain={:.3} (state / off, 1 session; target >= 0.97: no loss)",
        gains[1].0
    );
    println!(
        "RESULT yield_runqueue gain={:.3} (runqueue / off, 2 sessions; target >= 1.52)",
        gains[0].1
    );
    println!("RESULT yield_runqueue_single gain={:.3} (runqueue / off, 1 session; target >= 0.97: no loss)", gains[1].1);
}

type SpinRow = (f64, f64, f64, f64);

/// `seeds spin`: every policy once per round, the order rotated, fixed
/// 50 µs twice (its A/A, so the noise of a median p99 of about 2 µs is
/// seen, and is the tolerance when wider than 1.1x); medians over
/// rounds.
fn spin_experiment(runs: usize, secs: f64) {
    println!("request/response, one session, responder on CPU 0 (ring ports: no interrupts, so sleeping means a 100 us timer); {runs} interleaved rounds of {secs} s (dense: {} of {:.2} s), medians; fixed 50us twice per round (A/A)", 3 * runs, secs / 3.0);
    println!(
        "{:<22} {:<10} {:>10} {:>10} {:>10} {:>9}   p99 per round",
        "policy", "load", "tps", "p50 us", "p99 us", "CPU"
    );
    let policies = [
        ("fixed 0", SpinPolicy::Fixed(Duration::ZERO)),
        ("fixed 50us", SpinPolicy::Fixed(Duration::from_micros(50))),
        (
            "fixed 50us (A/A)",
            SpinPolicy::Fixed(Duration::from_micros(50)),
        ),
        ("adaptive 0-200us", SpinPolicy::adaptive()),
    ];
    let mut table: Vec<(&str, &str, SpinRow)> = Vec::new();
    for (load, wire) in [("dense", 10u64), ("sparse", 300)] {
        let mut res: Vec<Vec<SpinRow>> = policies.iter().map(|_| Vec::new()).collect();
        // Dense: each run draws where its ring's lines land, and a round's
        // p50 and p99 follow that draw (0.3 or 1.1 us at p50), so three
        // times the rounds, a third as long each, for a steadier median.
        let (rounds, each) = if load == "dense" {
            (3 * runs, secs / 3.0)
        } else {
            (runs, secs)
        };
        for r in 0..rounds {
            for k in 0..policies.len() {
                let i = (k + r) % policies.len();
                res[i].push(run_spin(policies[i].1, each, Duration::from_micros(wire)));
            }
        }
        for ((name, _), r) in policies.iter().zip(&res) {
            let m = |f: fn(&SpinRow) -> f64| median(r.iter().map(f).collect());
            let row = (m(|x| x.0), m(|x| x.1), m(|x| x.2), m(|x| x.3));
            let p99s: Vec<String> = r.iter().map(|x| format!("{:.1}", x.2)).collect();
            println!(
                "{name:<22} {:<10} {:>10.0} {:>10.1} {:>10.1} {:>8.0}%   {}",
                format!("{load} ({wire}us)"),
                row.0,
                row.1,
                row.2,
                row.3 * 100.0,
                p99s.join(" ")
            );
            table.push((load, name, row));
        }
    }
    spin_verdict(&table);
}

/// The spin experiment's summary line and RESULT from its table.
fn spin_verdict(table: &[(&str, &str, SpinRow)]) {
    let get = |load: &str, name: &str| {
        table
            .iter()
            .find(|t| t.0 == load && t.1 == name)
            .map(|t| t.2)
            .unwrap_or_default()
    };
    let (d50, daa, dad) = (
        get("dense", "fixed 50us"),
        get("dense", "fixed 50us (A/A)"),
        get("dense", "adaptive 0-200us"),
    );
    let (s50, sad) = (
        get("sparse", "fixed 50us"),
        get("sparse", "adaptive 0-200us"),
    );
    // Held to 1.1x fixed 50 us, or to what fixed 50 us's median p99
    // reads against its own A/A median when that is wider: a p99 inside
    // the A/A spread is parity.
    let aa = (daa.2 / d50.2.max(1e-9)).max(d50.2 / daa.2.max(1e-9));
    let allowed = 1.1f64.max(aa);
    let ratio = dad.2 / d50.2.max(1e-9);
    println!(
        "adaptive vs fixed 50us: dense p99 {:.1} vs {:.1} us ({ratio:.2}x; A/A {aa:.2}x); sparse CPU {:.0}% vs {:.0}%",
        dad.2,
        d50.2,
        sad.3 * 100.0,
        s50.3 * 100.0
    );
    println!(
        "RESULT spin gain={:.3} (CPU of fixed 50us / adaptive on the sparse load; target >= 1.0 with dense p99 within {allowed:.2}x fixed 50us, the larger of 1.1x and its A/A: {})",
        s50.3 / sad.3.max(1e-9),
        if ratio <= allowed { "met" } else { "not met" }
    );
}

/// `seeds backlog`: per flow count, snapshot, until-empty and snapshot
/// again (A/A) in each round, rotated; medians.
fn backlog_experiment(runs: usize, secs: f64) {
    println!("request/response flows into one interrupt-driven consumer (spin budget 0, 300 ns of work per packet); {runs} interleaved rounds of {secs} s, medians; snapshot twice per round (A/A)");
    println!(
        "{:<6} {:<15} {:>12} {:>12} {:>12}",
        "flows", "drain", "tps", "wakeups/s", "polls/pkt"
    );
    let (mut last, mut log_gain, mut log_aa) = ((0.0, 0.0), 0.0f64, 0.0f64);
    let modes = [
        ("snapshot", false),
        ("until-empty", true),
        ("snapshot (A/A)", false),
    ];
    for flows in [1usize, 16, 200] {
        let mut res: Vec<Vec<(f64, f64, f64)>> = modes.iter().map(|_| Vec::new()).collect();
        for r in 0..runs {
            for k in 0..modes.len() {
                let i = (k + r) % modes.len();
                res[i].push(run_backlog(flows, modes[i].1, secs));
            }
        }
        for ((name, _), r) in modes.iter().zip(&res) {
            let m = |f: fn(&(f64, f64, f64)) -> f64| median(r.iter().map(f).collect());
            println!(
                "{flows:<6} {name:<15} {:>12.0} {:>12.0} {:>12.3}",
                m(|x| x.0),
                m(|x| x.1),
                m(|x| x.2)
            );
        }
        let tps = |r: &Vec<(f64, f64, f64)>| median(r.iter().map(|x| x.0).collect());
        let wk = |r: &Vec<(f64, f64, f64)>| median(r.iter().map(|x| x.1).collect());
        last = (
            tps(&res[1]) / tps(&res[0]),
            wk(&res[1]) / wk(&res[0]).max(1e-9),
        );
        log_gain += last.0.ln() / 3.0;
        log_aa += (tps(&res[2]) / tps(&res[0])).ln().abs() / 3.0;
    }
    println!(
        "200 flows: until-empty vs snapshot: transactions {:+.1}%, wake-ups {:+.1}%",
        (last.0 - 1.0) * 100.0,
        (last.1 - 1.0) * 100.0
    );
    // Parity inside the A/A spread is parity: the target is no loss.
    let floor = (-log_aa).exp().min(1.0);
    let gain = log_gain.exp();
    println!("RESULT backlog gain={gain:.3} (transactions/s until-empty / snapshot, geometric mean over 1, 16 and 200 flows; A/A {:.3}; target >= 1.0, or >= {floor:.3} inside the A/A spread: {}; Linux: +1.6% with -11% interrupts)", (log_aa).exp(), if gain >= floor { "met" } else { "not met" });
}

fn main() {
    let mut args = std::env::args().skip(1);
    let what = args.next().unwrap_or_default();
    let (mut secs, mut runs, mut wire_us) = (2.0, 3, 20.0);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next().and_then(|v| v.parse::<f64>().ok())) {
            ("--seconds", Some(v)) if v > 0.0 => secs = v,
            ("--runs", Some(v)) if v >= 1.0 => runs = v as usize,
            ("--wire-us", Some(v)) if v >= 0.0 => wire_us = v,
            _ => {
                eprintln!("usage: seeds yield [--seconds S] [--runs N] [--wire-us W]");
                std::process::exit(2);
            }
        }
    }
    match what.as_str() {
        "yield" => yield_experiment(runs, secs, Duration::from_secs_f64(wire_us / 1e6)),
        "spin" => spin_experiment(runs, secs),
        "backlog" => backlog_experiment(runs, secs),
        _ => {
            eprintln!("usage: seeds yield|spin|backlog [--seconds S] [--runs N] [--wire-us W]");
            std::process::exit(2);
        }
    }
}
