//! `seeds`: the experiments behind rpmd's run-loop ideas.
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
use rpmd_benches::tsc::pin;
use rpmd_pmd::port::Pkts;
use rpmd_pmd::{Mempool, MempoolConfig, PortConfig, Queues, Registry};
use rpmd_sched::{Lcore, LcoreConfig, SignalKind, SpinPolicy, Task, TaskId};
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
            Box::new(Echo {
                q: qb,
                pkts: Pkts::new(),
            }),
        );
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
        l.stop();
    }
    done
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
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
            for sessions in [2, 1] {
                let (mut off, mut on) = (Vec::new(), Vec::new());
                for _ in 0..runs {
                    off.push(run_rr(sessions, false, secs, wire));
                    on.push(run_rr(sessions, true, secs, wire));
                }
                let (off, on) = (median(off), median(on));
                println!("{sessions:<10} {off:>16.0} {on:>16.0} {:>8.3}", on / off);
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
        _ => {
            eprintln!("usage: seeds yield [--seconds S] [--runs N] [--wire-us W]");
            std::process::exit(2);
        }
    }
}
