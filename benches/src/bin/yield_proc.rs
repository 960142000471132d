//! `yield_proc`: seed 000 (leave the busy loop when another task is
//! runnable) with its responders in separate processes, as netperf
//! servers are.
//!
//! Each session is a link that crosses processes: an `shm:` link, or with
//! `--link vhost` a vhost-user one (the responder's `virtio-user:` port
//! into a `vhost-user:` backend port in this process, as a guest's into
//! vswitch's). Its responder is a process of its own (this program with
//! `--responder`),
//! one lcore pinned to CPU 0 busy-polling (spin budget 50 ms, so it never
//! sleeps) and echoing every frame; the requester, in this process on
//! CPU 1, keeps one 64-byte request outstanding per session and sends a
//! session's next request `--wire-us` (default 20) after its reply, the
//! network round trip of a real TCP_RR. All responders share CPU 0, so
//! without yielding a session waits for its responder's time slice.
//!
//! Signals compared (`--signals`, default `off,runqueue,state`): `off`;
//! `runqueue` ([`SignalKind::RunQueue`]: a `sched_yield` every 2 µs of
//! spinning, the cheapest live signal that crosses processes in
//! `yield_signal_cost`); `state` ([`SignalKind::SiblingState`]: the other
//! responders' scheduler state, their thread ids passed to each responder;
//! one `/proc` read per sibling per check). Sessions `--sessions` (default
//! 1,2,16,32,64, the seed's table and 1 for "no loss"); `--runs` rounds
//! (default 3) of `--seconds` (default 2), each round running every
//! signal once in a rotated order; medians.
//!
//! Ends with `RESULT yield_proc gain=<x>` (2 sessions, runqueue ÷ off;
//! target ≥ 1.4) and `RESULT yield_proc_single gain=<x>` (1 session;
//! target ≥ 0.97); `yield_proc_vhost` and `yield_proc_vhost_single` with
//! `--link vhost`.
use rpmd_benches::{median, Echo};
use rpmd_pmd::{Mempool, MempoolConfig, Port, PortConfig, Queues, Registry};
use rpmd_sched::{SignalKind, TaskId};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How a session's link crosses processes.
#[derive(Clone, Copy, PartialEq)]
enum Link {
    Shm,
    Vhost,
}

/// The device string of link `name` for the requester's side or the
/// responder's: shm with few slots, so 64 links stay small; or vhost-user
/// with the backend here and the responder's virtio-user port attached.
fn dev(link: Link, name: &str, requester: bool) -> String {
    match (link, requester) {
        (Link::Shm, _) => format!("shm:{name},slots=64"),
        (Link::Vhost, true) => format!("vhost-user:/tmp/{name}.sock,busyloop_us=0"),
        (Link::Vhost, false) => format!("virtio-user:/tmp/{name}.sock"),
    }
}

fn pool(name: &str, n: u32) -> Mempool {
    let mut cfg = MempoolConfig::new(name, n);
    cfg.cache_size = 32;
    Mempool::new(&cfg).expect("mempool")
}

fn open(reg: &Registry, dev: &str, pool: &Mempool) -> (Box<dyn Port>, Queues) {
    let mut p = reg.open(dev).unwrap_or_else(|e| panic!("{dev}: {e}"));
    p.configure(&PortConfig {
        rx_pool: Some(pool.clone()),
        ..PortConfig::default()
    })
    .expect("configure");
    let q = p.start().expect("start");
    (p, q)
}

/// The responder process: side B of `name`, an lcore on CPU 0 echoing.
/// Prints its lcore's thread id, reads one line (the signal and the other
/// responders' thread ids), prints `ready`, and runs until stdin closes.
fn responder(link: Link, name: &str) {
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let pool = pool("yp-responder", 512);
    let (_port, q) = open(&reg, &dev(link, name, false), &pool);
    let l = rpmd_benches::responder_lcore(0);
    l.add(TaskId(0), Echo::new(q)).expect("the lcore runs");
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", l.tid()).expect("stdout");
    out.flush().expect("stdout");
    let mut input = BufReader::new(std::io::stdin().lock());
    let mut line = String::new();
    input.read_line(&mut line).expect("the signal line");
    let mut words = line.split_whitespace();
    let me = l.tid();
    let kind = match words.next() {
        Some("runqueue") => SignalKind::RunQueue,
        Some("state") => SignalKind::SiblingState(
            words
                .filter_map(|w| w.parse().ok())
                .filter(|&t| t != me)
                .collect(),
        ),
        _ => SignalKind::Off,
    };
    l.set_signal(kind);
    writeln!(out, "ready").expect("stdout");
    out.flush().expect("stdout");
    // Until the requester is done (EOF).
    while input.read_line(&mut line).is_ok_and(|n| n > 0) {}
    if std::env::var_os("SEEDS_DEBUG").is_some() {
        let t = l.stats();
        eprintln!(
            "  responder {name}: busy {} spins {} yields {}",
            t.busy_polls.get(),
            t.spins.get(),
            t.yields.get()
        );
    }
    l.stop().expect("no task panicked");
}

/// One configuration: `sessions` responder processes under `signal`;
/// transactions per second over all sessions.
fn run(link: Link, sessions: usize, signal: &str, secs: f64, wire: Duration) -> f64 {
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let pool = pool("yp-requester", 1024);
    let exe = std::env::current_exe().expect("own path");
    let mut queues = Vec::new();
    let mut ports = Vec::new();
    let mut kids: Vec<(Child, BufReader<std::process::ChildStdout>)> = Vec::new();
    let mut tids = Vec::new();
    for s in 0..sessions {
        let name = format!("yp-{}-{s}", std::process::id());
        // Side A (or the backend) first, so the responder attaches.
        let (p, q) = open(&reg, &dev(link, &name, true), &pool);
        ports.push(p);
        queues.push(q);
        let kind = if link == Link::Vhost { "vhost" } else { "shm" };
        let mut c = Command::new(&exe)
            .args(["--link", kind, "--responder", &name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("a responder process");
        let mut r = BufReader::new(c.stdout.take().expect("piped"));
        let mut line = String::new();
        r.read_line(&mut line).expect("the responder's thread id");
        tids.push(line.trim().to_string());
        kids.push((c, r));
    }
    let line = format!("{signal} {}\n", tids.join(" "));
    for (c, r) in &mut kids {
        let stdin = c.stdin.as_mut().expect("piped");
        stdin.write_all(line.as_bytes()).expect("responder's stdin");
        stdin.flush().expect("responder's stdin");
        let mut ready = String::new();
        r.read_line(&mut ready).expect("the responder's ready");
    }
    let t0 = std::time::Instant::now();
    while !ports.iter().all(|p| p.link().up) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "a responder never attached"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    let tps = std::thread::scope(|sc| {
        sc.spawn(|| rpmd_benches::rr_requester(&mut queues, &pool, secs, wire))
            .join()
            .expect("requester")
    });
    for (mut c, _) in kids {
        drop(c.stdin.take());
        let _ = c.wait();
    }
    drop(queues);
    drop(ports);
    tps
}

fn list<T: std::str::FromStr>(v: &str) -> Option<Vec<T>> {
    v.split(',').map(|x| x.trim().parse().ok()).collect()
}

fn usage() -> ! {
    eprintln!("usage: yield_proc [--link shm|vhost] [--sessions 1,2,16,32,64] [--signals off,runqueue,state] [--seconds S] [--runs N] [--wire-us W]");
    std::process::exit(2);
}

/// The command line: sessions, signals, seconds, runs, wire µs.
struct Opts {
    link: Link,
    sessions: Vec<usize>,
    signals: Vec<String>,
    secs: f64,
    runs: usize,
    wire_us: f64,
}

/// Parses the options; `--responder NAME` runs the responder and exits.
fn opts() -> Opts {
    let mut args = std::env::args().skip(1);
    let mut o = Opts {
        link: Link::Shm,
        sessions: vec![2, 1, 16, 32, 64],
        signals: ["off", "runqueue", "state"].map(String::from).to_vec(),
        secs: 2.0,
        runs: 3,
        wire_us: 20.0,
    };
    while let Some(a) = args.next() {
        let v = args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--responder" => {
                responder(o.link, &v);
                std::process::exit(0);
            }
            "--link" => {
                o.link = match v.as_str() {
                    "shm" => Link::Shm,
                    "vhost" => Link::Vhost,
                    _ => usage(),
                }
            }
            "--sessions" => {
                o.sessions = list(&v)
                    .filter(|l| !l.contains(&0))
                    .unwrap_or_else(|| usage())
            }
            "--signals" => o.signals = list(&v).unwrap_or_else(|| usage()),
            "--seconds" => {
                o.secs = v
                    .parse()
                    .ok()
                    .filter(|&s| s > 0.0)
                    .unwrap_or_else(|| usage())
            }
            "--runs" => o.runs = v.parse().ok().filter(|&r| r > 0).unwrap_or_else(|| usage()),
            "--wire-us" => {
                o.wire_us = v
                    .parse()
                    .ok()
                    .filter(|&w| w >= 0.0)
                    .unwrap_or_else(|| usage())
            }
            _ => usage(),
        }
    }
    if o.signals
        .iter()
        .any(|s| !["off", "runqueue", "state"].contains(&s.as_str()))
    {
        usage();
    }
    o
}

fn main() {
    let Opts {
        link,
        sessions,
        signals,
        secs,
        runs,
        wire_us,
    } = opts();
    let wire = Duration::from_secs_f64(wire_us / 1e6);
    let over = match link {
        Link::Shm => "shm links",
        Link::Vhost => "vhost-user links (responders' virtio-user ports into backends here)",
    };
    println!("request/response over {over}, one responder process per session busy-polling on CPU 0, requester on CPU 1, {wire_us} us wire time; {runs} interleaved rounds of {secs} s, medians");
    print!("{:<10}", "sessions");
    for s in &signals {
        print!(" {:>14}", format!("{s} tps"));
    }
    println!("   gain over off");
    let mut gain = std::collections::HashMap::new();
    let mut plot =
        rpmd_benches::PlotCsv::from_env(&signals.iter().map(String::as_str).collect::<Vec<_>>());
    for &n in &sessions {
        let mut res: Vec<Vec<f64>> = signals.iter().map(|_| Vec::new()).collect();
        for r in 0..runs {
            for k in 0..signals.len() {
                let i = (k + r) % signals.len();
                res[i].push(run(link, n, &signals[i], secs, wire));
            }
        }
        let med: Vec<f64> = res.into_iter().map(median).collect();
        print!("{n:<10}");
        for m in &med {
            print!(" {m:>14.0}");
        }
        let off = signals.iter().position(|s| s == "off").map(|i| med[i]);
        let gains: Vec<String> = signals
            .iter()
            .zip(&med)
            .filter(|(s, _)| *s != "off")
            .map(|(s, m)| {
                let g = off.map_or(f64::NAN, |o| m / o.max(1.0));
                gain.insert((n, s.clone()), g);
                format!("{s} {g:.3}")
            })
            .collect();
        println!("   {}", gains.join(", "));
        plot.row(
            &format!("{n} sessions"),
            &med.iter().map(|m| m / 1e3).collect::<Vec<_>>(),
        );
    }
    let get = |n: usize| gain.get(&(n, "runqueue".to_string())).copied();
    let suite = if link == Link::Vhost {
        "yield_proc_vhost"
    } else {
        "yield_proc"
    };
    if let Some(g) = get(2) {
        println!("RESULT {suite} gain={g:.3} (2 sessions, runqueue / off; target >= 1.4, the seed: +43..75%)");
    }
    if let Some(g) = get(1) {
        println!("RESULT {suite}_single gain={g:.3} (1 session, runqueue / off; target >= 0.97: no loss)");
    }
}
