//! rr: request/response transactions over any port, like netperf TCP_RR.
//!
//! `rr` alone runs client and server in one process over a shm: port
//! pair (the in-memory port with the shortest round trip). Across processes: `rr --role server --dev shm:X -l 0` and
//! `rr --role client --dev shm:X -l 1`, or two virtio-user ports to a
//! vhost-user switch (DPDK testpmd). Exit status: 0 done, 1 failure (no
//! transaction completed, a port or peer missing), 2 bad usage.
use clap::{Parser, ValueEnum};
use crossbeam_utils::CachePadded;
use rpmd_apps::bound::Bound;
use rpmd_apps::cli;
use rpmd_apps::opts::PollOpts;
use rpmd_apps::rr::open::{Arrivals, OpenClient};
use rpmd_apps::rr::{self, frame, Client, ClientShared, Server, SessionResult};
use rpmd_apps::usage::{LcoreUsage, Usage};
use rpmd_pmd::port::stats::Counter;
use rpmd_pmd::{Mempool, MempoolConfig, PortConfig, Registry};
use rpmd_sched::Runtime;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ArrivalsOpt {
    /// One request every 1/rate.
    Fixed,
    /// Exponential gaps of mean 1/rate.
    Poisson,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Role {
    /// Client and server in this process (the default).
    Both,
    /// Send requests and measure.
    Client,
    /// Answer requests.
    Server,
}

/// Request/response transactions over rpmd ports, like netperf TCP_RR:
/// N sessions, one transaction in flight each; transactions/s and latency
/// percentiles per session and in total.
#[derive(Parser, Debug)]
#[command(name = "rr", version)]
struct Args {
    /// What this process does.
    #[arg(long, value_enum, default_value_t = Role::Both)]
    role: Role,
    /// The port (a device string: shm:NAME, virtio-user:PATH, ring:NAME,
    /// pci:ADDR). With --role both: the client's port, the server taking a
    /// second --dev or the other end of the same shm:/ring: name (default
    /// shm:rr-PID).
    #[arg(long = "dev", value_parser = cli::device)]
    devices: Vec<String>,
    /// Cores: with --role both, server then client (0-1); otherwise the
    /// one core to run on (default: server 0, client 1).
    #[arg(short = 'l', long = "lcores", value_parser = cli::core_list)]
    cores: Option<String>,
    /// Concurrent sessions (flows), each with one transaction in flight.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=rr::MAX_SESSIONS as i64))]
    sessions: u16,
    /// Request payload bytes (netperf's default 1).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1458))]
    req_size: u16,
    /// Response payload bytes.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1458))]
    resp_size: u16,
    /// Seconds to run (the server: until Ctrl-C when not given).
    #[arg(long, value_parser = cli::seconds, allow_hyphen_values = true)]
    duration: Option<f64>,
    /// Seconds at the start whose transactions are not recorded.
    #[arg(long, default_value_t = 0.0, value_parser = cli::seconds_or_zero, allow_hyphen_values = true)]
    warmup: f64,
    /// A request unanswered this long (ms) is sent again and counted lost.
    #[arg(long, default_value_t = 100)]
    timeout_ms: u64,
    /// Open loop: offer this many transactions a second on a schedule of
    /// their own, whatever the answers, latency measured from each
    /// request's scheduled send time (no coordinated omission). Default:
    /// closed loop (one transaction in flight per session).
    #[arg(long, value_parser = rr::open::rate, allow_hyphen_values = true)]
    rate: Option<f64>,
    /// The open loop's schedule: fixed gaps of 1/rate, or Poisson
    /// arrivals (exponential gaps of mean 1/rate).
    #[arg(long, value_enum, default_value_t = ArrivalsOpt::Fixed, requires = "rate")]
    arrivals: ArrivalsOpt,
    #[command(flatten)]
    poll: PollOpts,
    #[command(flatten)]
    telemetry: rpmd_apps::opts::TelemetryOpts,
    /// Seconds to wait for the client's link (the peer may be starting).
    #[arg(long, default_value_t = 10.0, value_parser = cli::seconds, allow_hyphen_values = true)]
    link_timeout: f64,
    /// Skip the cache-line round-trip bound measured before the run.
    #[arg(long)]
    no_bound: bool,
    /// The other core for the bound (client role; default: another core).
    #[arg(long)]
    bound_core: Option<usize>,
    /// Per-session lines even with many sessions (default: up to 8).
    #[arg(long)]
    per_session: bool,
    /// Write the latency distribution (all sessions) to this CSV file:
    /// `latency_ns,percentile` rows, for a CDF plot.
    #[arg(long)]
    cdf: Option<std::path::PathBuf>,
    /// Draw the latency CDF (all sessions) into this PNG (gnuplot; Debian
    /// package gnuplot-nox).
    #[arg(long)]
    plot: Option<std::path::PathBuf>,
    /// Machine-readable output: JSON Lines, each with a "type"
    /// ("progress" every second, "summary" at the end).
    #[arg(long)]
    json: bool,
}

fn pool(name: &str) -> Result<Mempool, String> {
    let mut c = MempoolConfig::new(name, 4096);
    c.cache_size = 256;
    Mempool::new(&c).map_err(|e| format!("mempool: {e}"))
}

fn open(
    reg: &Registry,
    dev: &str,
    pool: &Mempool,
) -> Result<(Box<dyn rpmd_pmd::Port>, rpmd_pmd::Queues), String> {
    let mut p = reg.open(dev).map_err(|e| e.to_string())?;
    p.configure(&PortConfig {
        rx_pool: Some(pool.clone()),
        ..PortConfig::default()
    })
    .map_err(|e| e.to_string())?;
    let q = p.start().map_err(|e| e.to_string())?;
    cli::promiscuous(p.as_mut(), dev);
    Ok((p, q))
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn main() -> ExitCode {
    let a = Args::parse();
    rpmd_apps::opts::init_logging();
    if let Err(e) = cli::check_devices(&a.devices) {
        return e.report("rr");
    }
    if a.role != Role::Both && a.devices.len() != 1 {
        eprintln!("rr: --role client and --role server take exactly one --dev (e.g. --dev shm:rr)");
        return ExitCode::from(2);
    }
    match run(&a) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rr: {e}");
            ExitCode::from(1)
        }
    }
}

type ServerCounts = Arc<CachePadded<(Counter, Counter)>>;
type Bounds = Option<(Bound, Bound)>;

fn run(a: &Args) -> Result<ExitCode, String> {
    let cores = a.cores.clone().unwrap_or_else(|| {
        match a.role {
            Role::Both => "0-1",
            Role::Server => "0",
            Role::Client => "1",
        }
        .to_string()
    });
    let list = rpmd_sched::parse_cores(&cores).map_err(|e| e.to_string())?;
    // Ctrl-C from here on ends the run cleanly, even while waiting for
    // the link: the ports are dropped (an shm port removes its file) and
    // a summary printed.
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    if let Err(e) = ctrlc::set_handler(move || s2.store(true, Relaxed)) {
        tracing::warn!("cannot catch Ctrl-C: {e}");
    }
    let reg = rpmd_apps::cli::registry();
    let pool = pool("rr")?;
    let (client_dev, server_dev) = devices(a)?;
    // The bound first, while the cores are idle.
    let client_core = *list.last().ok_or("empty core list")?;
    let bound = measure_bound(a, &list, client_core);
    let mut ports = Vec::new();
    let mut server_counts = None;
    let mut client_shared = None;
    let mut rt = Runtime::start(&cores, a.poll.lcore_config()).map_err(|e| e.to_string())?;
    let last = rt.lcores().len() - 1;
    if let Some(d) = &server_dev {
        let (p, mut q) = open(&reg, d, &pool)?;
        tracing::info!("server on {d} ({}), lcore {}", p.mac_addr(), list[0]);
        let s = Server::new(q.rx.remove(0), q.tx.remove(0), a.resp_size as usize);
        server_counts = Some(s.counts.clone());
        rt.add(0, s).map_err(|e| e.to_string())?;
        ports.push(p);
    }
    if let Some(d) = &client_dev {
        let (p, q) = open(&reg, d, &pool)?;
        tracing::info!("client on {d} ({}), lcore {}", p.mac_addr(), list[last]);
        let started = start_client(a, &mut rt, last, d, p.as_ref(), q, &pool, &stop)?;
        ports.push(p);
        let Some(shared) = started else {
            rt.shutdown().map_err(|e| e.to_string())?;
            print_stopped(a, d);
            return Ok(ExitCode::SUCCESS);
        };
        client_shared = Some(shared);
    }
    if !a.json {
        println!(
            "rr: {:?}, {}, {} session(s), request {} B, response {} B ({}/{}-byte frames), {}",
            a.role,
            a.rate.map_or("closed loop".into(), |r| format!(
                "open loop at {r} transactions/s ({:?} arrivals)",
                a.arrivals
            )
            .to_lowercase()),
            a.sessions,
            a.req_size,
            a.resp_size,
            frame::frame_len(a.req_size as usize),
            frame::frame_len(a.resp_size as usize),
            a.poll.describe()
        );
    }
    // Held here until the end whether or not telemetry runs: dropping a
    // port stops it.
    let ports = Arc::new(std::sync::Mutex::new(ports));
    let telemetry = serve_telemetry(a, &ports, &rt, &pool);
    let usage = Usage::start(&rt);
    let secs = status_until_done(a, &stop, client_shared.as_deref(), server_counts.as_ref());
    let lcores = usage.read();
    let down = rt.shutdown();
    drop(telemetry);
    let counts = (
        client_shared.as_ref().map(|c| c.transactions.get()),
        server_counts.as_ref().map(|c| c.0.get()),
    );
    let sides = sides(a, &lcores, counts);
    let Some(shared) = client_shared else {
        print_server_summary(a, secs, server_counts.as_ref(), &sides);
        down.map_err(|e| e.to_string())?;
        return Ok(ExitCode::SUCCESS);
    };
    // A client task that panicked has no results: say why.
    down.map_err(|e| e.to_string())?;
    report_client(a, &shared, secs, bound, &sides)
}

/// Each side's lcore (server, client) with its CPU share and the CPU
/// cycles it spent per transaction, from its thread's own CPU time.
struct Side {
    role: &'static str,
    usage: LcoreUsage,
    cycles_per_transaction: Option<f64>,
}

impl Side {
    fn json(&self) -> serde_json::Value {
        let mut v = self.usage.json();
        v["role"] = self.role.into();
        v["cycles_per_transaction"] = self.cycles_per_transaction.into();
        v
    }

    fn line(&self) -> String {
        format!(
            "{} {}, {} cycles/transaction",
            self.role,
            self.usage.line(),
            self.cycles_per_transaction
                .map_or("-".into(), |c| format!("{c:.0}"))
        )
    }
}

/// The sides of this run: lcore 0 serves and the last one sends (the
/// same lcore when only one runs); `counts` are the client's and the
/// server's transactions.
fn sides(a: &Args, lcores: &[LcoreUsage], counts: (Option<u64>, Option<u64>)) -> Vec<Side> {
    let (client, server) = counts;
    let side = |role, u: &LcoreUsage, n: Option<u64>| Side {
        role,
        cycles_per_transaction: n.and_then(|n| u.cycles_per(n)),
        usage: u.clone(),
    };
    match (a.role, lcores) {
        (Role::Server, [s, ..]) => vec![side("server", s, server)],
        (Role::Client, [c, ..]) => vec![side("client", c, client)],
        (Role::Both, [one]) => vec![side("server+client", one, client)],
        (Role::Both, [s, .., c]) => vec![side("server", s, server), side("client", c, client)],
        _ => Vec::new(),
    }
}

/// DPDK telemetry on rr's ports (server's first), lcores and pool.
fn serve_telemetry(
    a: &Args,
    ports: &Arc<std::sync::Mutex<Vec<Box<dyn rpmd_pmd::Port>>>>,
    rt: &Runtime,
    pool: &Mempool,
) -> Option<rpmd_apps::telemetry::Server> {
    let n = ports.lock().map_or(0, |p| p.len());
    a.telemetry.start(
        "rr",
        rpmd_apps::telemetry::Sources::new(ports, (0..n).collect(), rt, vec![pool.clone()]),
    )
}

/// The client's and the server's device strings, by role.
fn devices(a: &Args) -> Result<(Option<String>, Option<String>), String> {
    Ok(match (a.role, a.devices.as_slice()) {
        (Role::Both, []) => {
            // The fastest in-memory port for small frames (see shm's docs).
            let d = format!("shm:rr-{}", std::process::id());
            (Some(d.clone()), Some(d))
        }
        (Role::Both, [d]) => (Some(d.clone()), Some(d.clone())),
        (Role::Both, [c, s]) => (Some(c.clone()), Some(s.clone())),
        (Role::Both, _) => return Err("--role both takes at most two --dev".into()),
        (Role::Client, [d]) => (Some(d.clone()), None),
        (Role::Server, [d]) => (None, Some(d.clone())),
        _ => unreachable!("checked in main"),
    })
}

/// The cache-line round trip between the client's core and another (one
/// line and two), unless the run has no client or `--no-bound`.
fn measure_bound(a: &Args, list: &[usize], client_core: usize) -> Bounds {
    if a.no_bound || a.role == Role::Server {
        return None;
    }
    let other = match a.role {
        Role::Both if list.len() > 1 => Some(list[0]),
        _ => a.bound_core.or_else(|| {
            core_affinity::get_core_ids()?
                .into_iter()
                .map(|c| c.id)
                .find(|&c| c != client_core)
        }),
    };
    let m = |two| {
        other.and_then(|o| {
            rpmd_apps::bound::measure(client_core, o, Duration::from_millis(300), two)
        })
    };
    let b = m(false).zip(m(true));
    if b.is_none() {
        tracing::warn!("no cache-line bound: needs two cores to pin to");
    }
    b
}

/// Waits for the client port's link (a peer process may still be
/// starting), then runs the client on lcore `at`; `None` when `stop` came
/// first (Ctrl-C).
#[allow(clippy::too_many_arguments)]
fn start_client(
    a: &Args,
    rt: &mut Runtime,
    at: usize,
    d: &str,
    p: &dyn rpmd_pmd::Port,
    mut q: rpmd_pmd::Queues,
    pool: &Mempool,
    stop: &AtomicBool,
) -> Result<Option<Arc<ClientShared>>, String> {
    let t0 = Instant::now();
    while !p.link().up && t0.elapsed().as_secs_f64() < a.link_timeout {
        if stop.load(Relaxed) {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    if !p.link().up {
        return Err(format!(
            "{d}: link down after {} s; is the server running?",
            a.link_timeout
        ));
    }
    let (rx, tx) = (q.rx.remove(0), q.tx.remove(0));
    let warmup = Duration::from_secs_f64(a.warmup);
    let shared = if let Some(rate) = a.rate {
        let arrivals = match a.arrivals {
            ArrivalsOpt::Fixed => Arrivals::Fixed,
            ArrivalsOpt::Poisson => Arrivals::Poisson,
        };
        let req = a.req_size as usize;
        let (c, shared) = OpenClient::new(
            rx,
            tx,
            pool.clone(),
            a.sessions,
            req,
            rate,
            arrivals,
            warmup,
        );
        rt.add(at, c).map_err(|e| e.to_string())?;
        shared
    } else {
        let timeout = Duration::from_millis(a.timeout_ms);
        let (c, shared) = Client::new(
            rx,
            tx,
            pool.clone(),
            a.sessions,
            a.req_size as usize,
            warmup,
            timeout,
        );
        rt.add(at, c).map_err(|e| e.to_string())?;
        shared
    };
    Ok(Some(shared))
}

/// The summary of a run stopped before its link came up.
fn print_stopped(a: &Args, d: &str) {
    if a.json {
        println!(
            "{}",
            serde_json::json!({"type": "summary", "role": format!("{:?}", a.role).to_lowercase(), "stopped": "before the link came up", "device": d, "transactions": 0})
        );
    } else {
        println!("summary: stopped before the link of {d} came up; no transactions");
    }
}

/// Prints the rate once a second until Ctrl-C or `--duration`; the
/// seconds it ran.
fn status_until_done(
    a: &Args,
    stop: &AtomicBool,
    client: Option<&ClientShared>,
    server: Option<&ServerCounts>,
) -> f64 {
    let t0 = Instant::now();
    let mut last_count = 0;
    let mut next = Duration::from_secs(1);
    let end = a.duration.map(Duration::from_secs_f64);
    while !stop.load(Relaxed) && end.is_none_or(|d| t0.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(10));
        if t0.elapsed() < next {
            continue;
        }
        // The keys of the summary: tps (client), answered_per_s (server).
        let (key, what, now) = match (client, server) {
            (Some(c), _) => ("tps", "trans/s", c.transactions.get()),
            (None, Some(s)) => ("answered_per_s", "answered/s", s.0.get()),
            _ => ("tps", "", 0),
        };
        let rate = now - last_count;
        if a.json {
            cli::json_line(
                "progress",
                serde_json::json!({"seconds": next.as_secs_f64(), key: rate}),
            );
        } else {
            println!("[{:6.1}s] {rate} {what}", next.as_secs_f64());
        }
        last_count = now;
        next += Duration::from_secs(1);
    }
    t0.elapsed().as_secs_f64()
}

fn print_server_summary(a: &Args, secs: f64, server: Option<&ServerCounts>, sides: &[Side]) {
    let (n, dropped) = server.map(|c| (c.0.get(), c.1.get())).unwrap_or_default();
    if a.json {
        println!(
            "{}",
            serde_json::json!({"type": "summary", "role": "server", "seconds": secs, "answered": n,
                "answered_per_s": n as f64 / secs.max(1e-9), "dropped": dropped,
                "poll": a.poll.describe(), "lcores": sides.iter().map(Side::json).collect::<Vec<_>>()})
        );
    } else {
        println!("summary: answered {n} requests in {secs:.1} s, dropped {dropped}");
        sides.iter().for_each(|s| println!("  {}", s.line()));
    }
}

/// The client's latency summary (JSON or a table), the CDF file if
/// asked; exit 1 when no transaction completed.
fn report_client(
    a: &Args,
    shared: &ClientShared,
    secs: f64,
    bound: Bounds,
    sides: &[Side],
) -> Result<ExitCode, String> {
    let results: Vec<SessionResult> = shared
        .results
        .lock()
        .map_err(|_| "client results poisoned")?
        .take()
        .ok_or("the client task did not finish")?;
    let measured = (secs - a.warmup).max(1e-9);
    let mut total = rr::histogram();
    for r in &results {
        let _ = total.add(&r.latency);
    }
    let mut csv = String::from("latency_ns,percentile\n");
    for v in total.iter_quantiles(20) {
        csv += &format!("{},{:.4}\n", v.value_iterated_to(), v.percentile());
    }
    if let Some(path) = &a.cdf {
        std::fs::write(path, &csv).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let Some(png) = &a.plot {
        plot_cdf(&csv, png, a.sessions)?;
    }
    if a.json {
        print_json_summary(a, shared, &results, &total, (measured, bound), sides);
    } else {
        print_table(a, &results, &total, measured, bound);
        sides.iter().for_each(|s| println!("{}", s.line()));
    }
    if total.is_empty() {
        eprintln!(
            "rr: no transaction completed; is the path between client and server forwarding?"
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// Draws the CDF in `csv` into `png` with gnuplot.
fn plot_cdf(csv: &str, png: &std::path::Path, sessions: u16) -> Result<(), String> {
    let data = png.with_extension("cdf.csv");
    std::fs::write(&data, csv).map_err(|e| format!("{}: {e}", data.display()))?;
    let script = format!(
        "set terminal png size 800,500; set output '{}'; set logscale x; set grid; \
         set xlabel 'round trip (us)'; set ylabel 'percentile'; set key right bottom; \
         set datafile separator ','; set title 'rr latency CDF, {sessions} session(s)'; \
         plot '{}' every ::1 using ($1/1000):2 with lines lw 2 title 'all sessions'",
        png.display(),
        data.display()
    );
    let out = std::process::Command::new("gnuplot")
        .args(["-e", &script])
        .output()
        .map_err(|e| format!("--plot needs gnuplot (apt-get install gnuplot-nox): {e}"))?;
    let _ = std::fs::remove_file(&data);
    if !out.status.success() {
        return Err(format!(
            "gnuplot could not draw {}: {}",
            png.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

fn print_json_summary(
    a: &Args,
    shared: &ClientShared,
    results: &[SessionResult],
    total: &hdrhistogram::Histogram<u64>,
    (measured, bound): (f64, Bounds),
    sides: &[Side],
) {
    let (count, mean, pct) = rr::summarize(total);
    let lost: u64 = results.iter().map(|r| r.lost).sum();
    let ratio = bound.map(|(b, _)| pct[0] as f64 / b.p50_ns);
    let ratio2 = bound.map(|(_, b2)| pct[0] as f64 / b2.p50_ns);
    let sess: Vec<_> = results
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let (n, mean, p) = rr::summarize(&r.latency);
            serde_json::json!({"session": i, "transactions": n, "tps": n as f64 / measured, "lost": r.lost,
                "mean_ns": mean, "p50_ns": p[0], "p90_ns": p[1], "p95_ns": p[2], "p99_ns": p[3], "p999_ns": p[4]})
        })
        .collect();
    println!(
        "{}",
        serde_json::json!({"type": "summary",
            "role": format!("{:?}", a.role).to_lowercase(), "seconds": measured, "sessions": sess,
            "transactions": count, "tps": count as f64 / measured, "lost": lost, "stray": shared.stray.get(),
            "mean_ns": mean, "p50_ns": pct[0], "p90_ns": pct[1], "p95_ns": pct[2], "p99_ns": pct[3], "p999_ns": pct[4],
            "bound_p50_ns": bound.map(|b| b.0.p50_ns), "bound_min_ns": bound.map(|b| b.0.min_ns),
            "p50_over_bound": ratio, "two_line_p50_ns": bound.map(|b| b.1.p50_ns),
            "p50_over_two_line": ratio2, "poll": a.poll.describe(),
            "offered_tps": a.rate, "arrivals": a.rate.map(|_| format!("{:?}", a.arrivals).to_lowercase()),
            "lcores": sides.iter().map(Side::json).collect::<Vec<_>>()})
    );
}

fn print_table(
    a: &Args,
    results: &[SessionResult],
    total: &hdrhistogram::Histogram<u64>,
    measured: f64,
    bound: Bounds,
) {
    let (count, _, pct) = rr::summarize(total);
    let lost: u64 = results.iter().map(|r| r.lost).sum();
    println!(
        "{:>8} {:>12} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6}",
        "session",
        "transactions",
        "trans/s",
        "p50 us",
        "p90 us",
        "p95 us",
        "p99 us",
        "p99.9 us",
        "lost"
    );
    let row = |name: &str, n: u64, p: &[u64], lost: u64| {
        println!(
            "{name:>8} {n:>12} {:>12.0} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {lost:>6}",
            n as f64 / measured,
            us(p[0]),
            us(p[1]),
            us(p[2]),
            us(p[3]),
            us(p[4]),
        );
    };
    let show = a.per_session || results.len() <= 8;
    for (i, r) in results.iter().enumerate().filter(|_| show) {
        let (n, _, p) = rr::summarize(&r.latency);
        row(&i.to_string(), n, &p, r.lost);
    }
    row("total", count, &pct, lost);
    if let Some((b, b2)) = bound {
        println!(
            "bound: cache-line round trip core {}<->{}: p50 {:.3} us (min {:.3}); rr p50 = {:.2}x the bound",
            b.cores.0,
            b.cores.1,
            b.p50_ns / 1000.0,
            b.min_ns / 1000.0,
            pct[0] as f64 / b.p50_ns
        );
        println!(
            "       request line + response line: p50 {:.3} us; rr p50 = {:.2}x that",
            b2.p50_ns / 1000.0,
            pct[0] as f64 / b2.p50_ns
        );
    }
}
