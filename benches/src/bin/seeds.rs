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
//! unless the spinning one yields when the other has become runnable
//! (signal: the sibling lcore's scheduler state, checked every 2 µs). Reports
//! transactions/s, yield off vs on, for 2 sessions and for 1 (where
//! yielding must cost nothing), interleaved runs, medians, and ends with
//! `RESULT yield gain=<x>` (2 sessions, on ÷ off; the Linux patch saw
//! 1.52) and `RESULT yield_single gain=<x>` (target ≥ 0.97).
use rpmd_benches::median;
use rpmd_benches::tsc::pin;
use rpmd_pmd::port::Pkts;
use rpmd_pmd::{Mempool, MempoolConfig, PortConfig, Queues, Registry};
use rpmd_sched::{Lcore, LcoreConfig, SignalKind, SpinPolicy, Task, TaskId};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Echoes every frame back where it came from.
struct Echo {
    q: Queues,
    pkts: Pkts,
}

impl Task for Echo {
    fn run(&mut self, quota: usize) -> usize {
        let n = self.q.rx_burst(0, &mut self.pkts, quota.min(32));
        if n > 0 {
            self.q.tx_burst(0, &mut self.pkts);
            self.pkts.clear();
        }
        n
    }
}

/// One configuration: `sessions` sessions, yield on or off; returns
/// transactions per second over all sessions.
fn run_rr(sessions: usize, yield_on: bool, secs: f64, wire: Duration) -> f64 {
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
        let l = Lcore::spawn(
            0,
            LcoreConfig {
                spin: SpinPolicy::Fixed(Duration::from_millis(50)),
                signal_every: Duration::from_micros(2),
                ..Default::default()
            },
        )
        .expect("lcore on CPU 0");
        l.add(
            TaskId(s as u64),
            Echo {
                q: qb,
                pkts: Pkts::new(),
            },
        )
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
            l.set_signal(if sib.is_empty() {
                SignalKind::Preempted
            } else {
                SignalKind::SiblingState(sib)
            });
        }
    }
    std::thread::sleep(Duration::from_millis(50));
    let done = std::thread::scope(|sc| {
        sc.spawn(|| {
            pin(1);
            let mut outstanding = vec![false; sessions];
            let mut next_send = vec![Instant::now(); sessions];
            let mut done = 0u64;
            let mut tx = Pkts::new();
            let mut rx = Pkts::new();
            let t0 = Instant::now();
            let end = t0 + Duration::from_secs_f64(secs);
            loop {
                let now = Instant::now();
                if now >= end {
                    break;
                }
                for (s, (_, _, q)) in mine.iter_mut().enumerate() {
                    if !outstanding[s] && now >= next_send[s] {
                        if let Ok(mut m) = pool.get() {
                            m.append(64).expect("room for 64 bytes")[0] = s as u8;
                            let _ = tx.push(m);
                            if q.tx_burst(0, &mut tx) == 1 {
                                outstanding[s] = true;
                            }
                            tx.clear();
                        }
                    }
                    if q.rx_burst(0, &mut rx, 32) > 0 {
                        done += rx.len() as u64;
                        rx.clear();
                        outstanding[s] = false;
                        next_send[s] = Instant::now() + wire;
                    }
                }
            }
            done as f64 / t0.elapsed().as_secs_f64()
        })
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
            ..Default::default()
        },
    )
    .expect("lcore on CPU 0");
    l.add(
        TaskId(0),
        Echo {
            q: qb,
            pkts: Pkts::new(),
        },
    )
    .expect("the lcore runs");
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
    wake: Arc<rpmd_pmd::vfio::EventFd>,
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
    let wake = Arc::new(rpmd_pmd::vfio::EventFd::new().expect("eventfd"));
    let armed = Arc::new(AtomicBool::new(false));
    let l = Lcore::spawn(
        0,
        LcoreConfig {
            spin: SpinPolicy::Fixed(Duration::ZERO),
            sleep: Duration::from_millis(10),
            ..Default::default()
        },
    )
    .expect("lcore on CPU 0");
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
        "yield" => {
            let wire = Duration::from_secs_f64(wire_us / 1e6);
            println!("request/response, responders busy-polling on CPU 0, requester on CPU 1, {wire_us} us wire time; {runs} interleaved runs of {secs} s, medians");
            println!(
                "{:<10} {:>16} {:>16} {:>8}",
                "sessions", "yield off tps", "yield on tps", "on/off"
            );
            let mut gains = Vec::new();
            let mut plot = rpmd_benches::PlotCsv::from_env(&["yield off", "yield on"]);
            for sessions in [2, 1] {
                let (mut off, mut on) = (Vec::new(), Vec::new());
                for _ in 0..runs {
                    off.push(run_rr(sessions, false, secs, wire));
                    on.push(run_rr(sessions, true, secs, wire));
                }
                let (off, on) = (median(off), median(on));
                println!("{sessions:<10} {off:>16.0} {on:>16.0} {:>8.3}", on / off);
                plot.row(&format!("{sessions} sessions"), &[off / 1e3, on / 1e3]);
                gains.push(on / off);
            }
            println!(
                "RESULT yield gain={:.3} (target >= 1.52, the Linux patch's +52%)",
                gains[0]
            );
            println!(
                "RESULT yield_single gain={:.3} (target >= 0.97: no loss with one session)",
                gains[1]
            );
        }
        "spin" => {
            println!("request/response, one session, responder on CPU 0 (ring ports: no interrupts, so sleeping means a 100 us timer); {runs} runs of {secs} s, medians");
            println!(
                "{:<22} {:<10} {:>10} {:>10} {:>10} {:>9}",
                "policy", "load", "tps", "p50 us", "p99 us", "CPU"
            );
            let policies = [
                ("fixed 0", SpinPolicy::Fixed(Duration::ZERO)),
                ("fixed 50us", SpinPolicy::Fixed(Duration::from_micros(50))),
                ("adaptive 0-200us", SpinPolicy::adaptive()),
            ];
            let mut table = Vec::new();
            for (load, wire) in [("dense", 10u64), ("sparse", 300)] {
                for (name, p) in policies {
                    let mut r = Vec::new();
                    for _ in 0..runs {
                        r.push(run_spin(p, secs, Duration::from_micros(wire)));
                    }
                    let m = |f: fn(&(f64, f64, f64, f64)) -> f64| median(r.iter().map(f).collect());
                    let row = (m(|x| x.0), m(|x| x.1), m(|x| x.2), m(|x| x.3));
                    println!(
                        "{name:<22} {:<10} {:>10.0} {:>10.1} {:>10.1} {:>8.0}%",
                        format!("{load} ({wire}us)"),
                        row.0,
                        row.1,
                        row.2,
                        row.3 * 100.0
                    );
                    table.push((load, name, row));
                }
            }
            let get = |load: &str, name: &str| {
                table
                    .iter()
                    .find(|t| t.0 == load && t.1 == name)
                    .map(|t| t.2)
                    .unwrap_or_default()
            };
            let (d50, dad) = (get("dense", "fixed 50us"), get("dense", "adaptive 0-200us"));
            let (s50, sad) = (
                get("sparse", "fixed 50us"),
                get("sparse", "adaptive 0-200us"),
            );
            println!(
                "adaptive vs fixed 50us: dense p99 {:.1} vs {:.1} us; sparse CPU {:.0}% vs {:.0}%",
                dad.2,
                d50.2,
                sad.3 * 100.0,
                s50.3 * 100.0
            );
            println!(
                "RESULT spin gain={:.3} (CPU of fixed 50us / adaptive on the sparse load; target >= 1.0 with dense p99 no worse than 1.1x fixed 50us: {})",
                s50.3 / sad.3.max(1e-9),
                if dad.2 <= 1.1 * d50.2 { "met" } else { "not met" }
            );
        }
        "backlog" => {
            println!("request/response flows into one interrupt-driven consumer (spin budget 0, 300 ns of work per packet); {runs} interleaved runs of {secs} s, medians");
            println!(
                "{:<6} {:<12} {:>12} {:>12} {:>12}",
                "flows", "drain", "tps", "wakeups/s", "polls/pkt"
            );
            let mut last = (0.0, 0.0);
            let mut log_gain = 0.0f64;
            for flows in [1usize, 16, 200] {
                let (mut snap, mut full) = (Vec::new(), Vec::new());
                for _ in 0..runs {
                    snap.push(run_backlog(flows, false, secs));
                    full.push(run_backlog(flows, true, secs));
                }
                for (name, r) in [("snapshot", &snap), ("until-empty", &full)] {
                    let m = |f: fn(&(f64, f64, f64)) -> f64| median(r.iter().map(f).collect());
                    println!(
                        "{flows:<6} {name:<12} {:>12.0} {:>12.0} {:>12.3}",
                        m(|x| x.0),
                        m(|x| x.1),
                        m(|x| x.2)
                    );
                }
                let tps = |r: &Vec<(f64, f64, f64)>| median(r.iter().map(|x| x.0).collect());
                let wk = |r: &Vec<(f64, f64, f64)>| median(r.iter().map(|x| x.1).collect());
                last = (tps(&full) / tps(&snap), wk(&full) / wk(&snap).max(1e-9));
                log_gain += last.0.ln() / 3.0;
            }
            println!(
                "200 flows: until-empty vs snapshot: transactions {:+.1}%, wake-ups {:+.1}%",
                (last.0 - 1.0) * 100.0,
                (last.1 - 1.0) * 100.0
            );
            println!("RESULT backlog gain={:.3} (transactions/s until-empty / snapshot, geometric mean over 1, 16 and 200 flows; target >= 1.0, Linux: +1.6% with -11% interrupts)", log_gain.exp());
        }
        _ => {
            eprintln!("usage: seeds yield|spin|backlog [--seconds S] [--runs N] [--wire-us W]");
            std::process::exit(2);
        }
    }
}
