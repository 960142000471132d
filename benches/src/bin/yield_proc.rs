//! `yield_proc`: seed 000 (leave the busy loop when another task is
//! runnable) with its responders in separate processes, as netperf
//! servers are.
//!
//! Each session is a link that crosses processes: an `shm:` link; with
//! `--link vhost` a vhost-user one (the responder's `virtio-user:` port
//! into a `vhost-user:` backend port in this process, as a guest's into
//! vswitch's); or with `--link vswitch` a path through rpmd's `vswitch` app
//! in a process of its own (see [`switched`]: it shares CPU 1 with the
//! requester, and on two CPUs their context switches bound the rate).
//! Its responder is a process of its own (this program with
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
//! signal once in a rotated order; medians of the rates, and each gain
//! the median over rounds of the ratio within a round (the machine's slow
//! phases span several rounds and hit every signal alike).
//!
//! Ends with `RESULT yield_proc gain=<x>` (2 sessions, runqueue ÷ off;
//! target ≥ 1.4) and `RESULT yield_proc_single gain=<x>` (1 session;
//! target ≥ 0.97); `yield_proc_vhost` and `yield_proc_vhost_single` with
//! `--link vhost`; `yield_proc_vswitch`, `_single` and `_16` (16
//! sessions, target ≥ 1.43, the seed's) with `--link vswitch`.
use rpmd_benches::{median, wait_link_up, Echo};
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
    /// Through the `vswitch` app: a process of its own.
    Vswitch,
}

impl Link {
    fn name(self) -> &'static str {
        match self {
            Link::Shm => "shm",
            Link::Vhost => "vhost",
            Link::Vswitch => "vswitch",
        }
    }
}

/// The device string of link `name` for the requester's side or the
/// responder's: shm with few slots, so 64 links stay small; or vhost-user
/// with the backend here and the responder's virtio-user port attached.
fn dev(link: Link, name: &str, requester: bool) -> String {
    match (link, requester) {
        (Link::Shm, _) => format!("shm:{name},slots=64"),
        (Link::Vhost, true) => format!("vhost-user:/tmp/{name}.sock,busyloop_us=0"),
        (Link::Vhost | Link::Vswitch, false) => format!("virtio-user:/tmp/{name}.sock"),
        (Link::Vswitch, true) => format!("vhost-user:/tmp/{name}.sock,busyloop_us=0"),
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
    let (port, q) = open(&reg, &dev(link, name, false), &pool);
    let l = rpmd_benches::responder_lcore(0);
    if link == Link::Vswitch {
        let what = format!("{name}: the switch never answered");
        wait_link_up(&[&*port], Duration::from_secs(20), &what);
        let index = name.rsplit('-').next().and_then(|i| i.parse().ok());
        let mac = switched::station(index.expect("a session's name ends in its index"));
        l.add(TaskId(0), switched::Reply::new(q, mac))
            .expect("the lcore runs");
    } else {
        l.add(TaskId(0), Echo::new(q)).expect("the lcore runs");
    }
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
        Some("preempted") => SignalKind::Preempted,
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

/// Spawns one responder process per name and hands each the signal line;
/// returns them once all are ready.
fn spawn_responders(link: Link, names: &[String], signal: &str) -> Vec<Child> {
    let exe = std::env::current_exe().expect("own path");
    let mut kids: Vec<(Child, BufReader<std::process::ChildStdout>)> = Vec::new();
    let mut tids = Vec::new();
    for name in names {
        let mut c = Command::new(&exe)
            .args(["--link", link.name(), "--responder", name])
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
    kids.into_iter().map(|(c, _)| c).collect()
}

/// One configuration: `sessions` responder processes under `signal`;
/// transactions per second over all sessions.
fn run(link: Link, sessions: usize, signal: &str, secs: f64, wire: Duration) -> f64 {
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let pool = pool("yp-requester", 1024);
    let names: Vec<String> = (0..sessions)
        .map(|s| format!("yp-{}-{s}", std::process::id()))
        .collect();
    let switch_port = format!("yp-{}-requester", std::process::id());
    let switch = (link == Link::Vswitch).then(|| switched::Switch::start(&switch_port, &names));
    // Side A (or the backend, or the switch) first, so the responder attaches.
    let (mut ports, mut queues): (Vec<_>, Vec<_>) = if link == Link::Vswitch {
        vec![open(
            &reg,
            &format!("virtio-user:/tmp/{switch_port}.sock"),
            &pool,
        )]
    } else {
        names
            .iter()
            .map(|n| open(&reg, &dev(link, n, true), &pool))
            .collect()
    }
    .into_iter()
    .unzip();
    let kids = spawn_responders(link, &names, signal);
    let all: Vec<&dyn Port> = ports.iter().map(|p| &**p).collect();
    wait_link_up(&all, Duration::from_secs(20), "a responder never attached");
    std::thread::sleep(Duration::from_millis(50));
    let tps = std::thread::scope(|sc| {
        sc.spawn(|| match link {
            Link::Vswitch => switched::requester(&mut queues[0], &pool, sessions, secs, wire),
            _ => rpmd_benches::rr_requester(&mut queues, &pool, secs, wire),
        })
        .join()
        .expect("requester")
    });
    for mut c in kids {
        drop(c.stdin.take());
        let _ = c.wait();
    }
    drop(queues);
    ports.clear();
    drop(switch);
    assert!(
        tps > 0.0,
        "no transaction completed over the {} links",
        link.name()
    );
    tps
}

fn list<T: std::str::FromStr>(v: &str) -> Option<Vec<T>> {
    v.split(',').map(|x| x.trim().parse().ok()).collect()
}

fn usage() -> ! {
    eprintln!("usage: yield_proc [--link shm|vhost|vswitch] [--sessions 1,2,16,32,64] [--signals off,runqueue,state] [--seconds S] [--runs N] [--wire-us W]");
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
                    "vswitch" => Link::Vswitch,
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
    if o.link == Link::Vswitch && o.sessions.iter().any(|&n| n > 255) {
        eprintln!("yield_proc: at most 255 sessions through the switch (one address byte each)");
        std::process::exit(2);
    }
    if o.signals
        .iter()
        .any(|s| !["off", "runqueue", "preempted", "state"].contains(&s.as_str()))
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
        Link::Vswitch => "rpmd's vswitch (a process on CPU 1, sleeping when idle; every port virtio-user into its vhost-user ports)",
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
        // Every run, for the spread (SEEDS_DEBUG): a process's rate can
        // sit in one of two clusters, and a median of few runs hides it.
        if std::env::var_os("SEEDS_DEBUG").is_some() {
            for (s, r) in signals.iter().zip(&res) {
                let runs: Vec<String> = r.iter().map(|v| format!("{v:.0}")).collect();
                eprintln!("  {n} sessions, {s}: {}", runs.join(" "));
            }
        }
        // A gain is the median over rounds of the ratio within a round:
        // the machine drifts between a fast and a slow phase (one session
        // through the switch: 19-21 k/s against 32-34 k/s, runs of
        // several rounds, whatever the signal), and runs next to each
        // other share a phase where medians taken apart may not.
        let off = signals.iter().position(|s| s == "off");
        let paired = |i: usize| -> f64 {
            off.map_or(f64::NAN, |o| {
                median(
                    res[i]
                        .iter()
                        .zip(&res[o])
                        .map(|(v, b)| v / b.max(1.0))
                        .collect(),
                )
            })
        };
        let gains: Vec<String> = (0..signals.len())
            .filter(|&i| Some(i) != off)
            .map(|i| {
                let g = paired(i);
                gain.insert((n, signals[i].clone()), g);
                format!("{} {g:.3}", signals[i])
            })
            .collect();
        let med: Vec<f64> = res.into_iter().map(median).collect();
        print!("{n:<10}");
        for m in &med {
            print!(" {m:>14.0}");
        }
        println!("   {}", gains.join(", "));
        plot.row(
            &format!("{n} sessions"),
            &med.iter().map(|m| m / 1e3).collect::<Vec<_>>(),
        );
    }
    let get = |n: usize| gain.get(&(n, "runqueue".to_string())).copied();
    let suite = match link {
        Link::Shm => "yield_proc",
        Link::Vhost => "yield_proc_vhost",
        Link::Vswitch => "yield_proc_vswitch",
    };
    match (link, get(2)) {
        (Link::Vswitch, Some(g)) => println!("RESULT {suite} gain={g:.3} (2 sessions, runqueue / off; the issue's target >= 1.4 needs a CPU for the switch: here it shares CPU 1 with the requester, and their context switches cap two sessions together near one's rate)"),
        (_, Some(g)) => println!("RESULT {suite} gain={g:.3} (2 sessions, runqueue / off; target >= 1.4, the seed: +43..75%)"),
        (_, None) => {}
    }
    if link == Link::Vswitch {
        if let Some(g) = get(16) {
            println!("RESULT {suite}_16 gain={g:.3} (16 sessions, runqueue / off; target >= 1.43, the seed's gain at 16)");
        }
    }
    if let Some(g) = get(1) {
        println!("RESULT {suite}_single gain={g:.3} (1 session, runqueue / off; target >= 0.97: no loss)");
    }
}

/// `--link vswitch`: the sessions cross rpmd's `vswitch` app, a process of
/// its own on CPU 1 beside the requester. The switch has a vhost-user port
/// for the requester's virtio-user port and one for each responder's; it
/// learns the stations' addresses from the frames they send. Its lcore
/// sleeps whenever idle (spin 0) and wakes on the ports' kicks, so the
/// requester's busy loop and the switch share CPU 1 without a time slice
/// between them.
mod switched {
    use rpmd_pmd::port::Pkts;
    use rpmd_pmd::{Mempool, Queues};
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    /// The requester's address.
    const REQUESTER: [u8; 6] = [2, 0, 0, 0, 0, 1];

    /// Session `s`'s responder address (locally administered unicast).
    pub fn station(s: u8) -> [u8; 6] {
        [2, 0, 0, 0, 1, s]
    }

    /// The session a station address names.
    fn session_of(mac: &[u8]) -> Option<usize> {
        (mac.len() == 6 && mac[..5] == station(0)[..5]).then(|| usize::from(mac[5]))
    }

    /// The switch process, stopped (SIGINT, as Ctrl-C) when dropped.
    pub struct Switch(Child);

    impl Switch {
        /// Starts `vswitch` (beside this program) on CPU 1 with a vhost-user
        /// port for `requester` and one per responder, and waits for their
        /// sockets.
        pub fn start(requester: &str, responders: &[String]) -> Switch {
            let exe = std::env::current_exe()
                .expect("own path")
                .with_file_name("vswitch");
            let mut cmd = Command::new(&exe);
            cmd.args(["-l", "1", "--spin-us", "0", "--sleep-us", "1000"])
                .args(["--period", "3600", "--mbufs", "8192"])
                .env("RUST_LOG", "warn");
            let names = std::iter::once(requester).chain(responders.iter().map(String::as_str));
            for n in names.clone() {
                cmd.arg("--dev")
                    .arg(format!("vhost-user:/tmp/{n}.sock,busyloop_us=0"));
            }
            if std::env::var_os("SEEDS_DEBUG").is_none() {
                cmd.stdout(Stdio::null());
            }
            let child = cmd.spawn().unwrap_or_else(|e| {
                panic!(
                    "{}: {e} (build it: cargo build --release -p rpmd-apps --bin vswitch)",
                    exe.display()
                )
            });
            let mut sw = Switch(child);
            let socks: Vec<String> = names.map(|n| format!("/tmp/{n}.sock")).collect();
            let socks: Vec<&str> = socks.iter().map(String::as_str).collect();
            rpmd_benches::wait_socks(&socks, Some(&mut sw.0));
            sw
        }
    }

    impl Drop for Switch {
        fn drop(&mut self) {
            // As Ctrl-C: the switch stops its ports and exits. Only while it
            // runs: once reaped, its pid may name another process.
            if let Ok(None) = self.0.try_wait() {
                let pid = self.0.id().to_string();
                let _ = Command::new("kill").args(["-INT", &pid]).status();
            }
            let _ = self.0.wait();
        }
    }

    /// A responder behind the switch: answers the frames addressed to its
    /// station (others are floods meant for another) from that station.
    pub struct Reply {
        q: Queues,
        mac: [u8; 6],
        pkts: Pkts,
    }

    impl Reply {
        pub fn new(q: Queues, mac: [u8; 6]) -> Self {
            Reply {
                q,
                mac,
                pkts: Pkts::new(),
            }
        }
    }

    impl rpmd_sched::Task for Reply {
        fn run(&mut self, quota: usize) -> usize {
            let n = self.q.rx_burst(0, &mut self.pkts, quota.min(32));
            if n > 0 {
                let mac = self.mac;
                self.pkts.retain(|m| m.data().get(..6) == Some(&mac[..]));
                for m in self.pkts.iter_mut() {
                    let d = m.data_mut();
                    d.copy_within(6..12, 0);
                    d[6..12].copy_from_slice(&mac);
                }
                self.q.tx_burst(0, &mut self.pkts);
                self.pkts.clear();
            }
            n
        }
    }

    /// The requester on CPU 1: one 64-byte request outstanding per session
    /// on its one port, addressed to the session's station, the next sent
    /// `wire` after the reply; a request unanswered for 10 ms is taken as
    /// lost and sent again. Replies in the first 100 ms (while the switch
    /// learns) are not counted. It yields the CPU whenever a poll finds
    /// nothing, so the switch, woken by a kick, runs at once rather than
    /// after this loop's time slice. Transactions per second.
    pub fn requester(
        q: &mut Queues,
        pool: &Mempool,
        sessions: usize,
        secs: f64,
        wire: Duration,
    ) -> f64 {
        rpmd_benches::tsc::pin(1);
        let lost_after = Duration::from_millis(10);
        let mut sent: Vec<Option<Instant>> = vec![None; sessions];
        let mut next = vec![Instant::now(); sessions];
        let (mut tx, mut rx) = (Pkts::new(), Pkts::new());
        let start = Instant::now() + Duration::from_millis(100);
        let end = start + Duration::from_secs_f64(secs);
        let mut done = 0u64;
        loop {
            let now = Instant::now();
            if now >= end {
                break;
            }
            for s in 0..sessions {
                if sent[s].is_some_and(|t| now >= t + lost_after) {
                    sent[s] = None;
                }
                if sent[s].is_some() || now < next[s] {
                    continue;
                }
                let Ok(mut m) = pool.get() else { break };
                if let Some(d) = m.append(64) {
                    d[..6].copy_from_slice(&station(s as u8));
                    d[6..12].copy_from_slice(&REQUESTER);
                    d[12..14].copy_from_slice(&[0x88, 0xb5]);
                    let _ = tx.push(m);
                    if q.tx_burst(0, &mut tx) == 1 {
                        sent[s] = Some(now);
                    }
                }
                tx.clear();
            }
            if q.rx_burst(0, &mut rx, 32) == 0 {
                // The switch shares this CPU: let it in when it has been
                // woken (a no-op when nothing else is runnable here).
                std::thread::yield_now();
            }
            if !rx.is_empty() {
                let now = Instant::now();
                for m in rx.iter() {
                    let Some(s) = m.data().get(6..12).and_then(session_of) else {
                        continue;
                    };
                    if s < sessions && sent[s].take().is_some() {
                        next[s] = now + wire;
                        done += u64::from(now >= start);
                    }
                }
                rx.clear();
            }
        }
        done as f64 / secs
    }
}
