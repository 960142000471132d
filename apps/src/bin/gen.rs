//! gen: testpmd-style txonly / rxonly on any port.
//!
//! `gen --mode txonly --dev virtio-user:/tmp/vhost.sock --size 64 --flows 16`
//! sends; `--mode rxonly` receives and counts. With no --dev it runs both
//! ends of an in-process ring pair (tx on the first lcore, rx on the
//! second). Exit status: 0 done, 1 failure, 2 bad usage.
use clap::{Parser, ValueEnum};
use rpmd_apps::gen::{GenCounters, Io, RxOnly, TxOnly};
use rpmd_apps::opts::PollOpts;
use rpmd_pmd::{Mempool, MempoolConfig, PortConfig, Registry};
use rpmd_sched::Runtime;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Send frames.
    Txonly,
    /// Receive and free frames.
    Rxonly,
    /// Receive and send back on the same port (rx queue k to tx queue k),
    /// after --tx-first bursts.
    Io,
}

/// Transmit-only / receive-only traffic, like testpmd's txonly and rxonly
/// forwarding modes.
#[derive(Parser, Debug)]
#[command(name = "gen", version)]
struct Args {
    /// What to do (default with --dev: txonly).
    #[arg(long, value_enum)]
    mode: Option<Mode>,
    /// The port, as a device string (virtio-user:PATH, shm:NAME, ring:NAME,
    /// null, pci:ADDR). Without it: both ends of ring:gen in this process.
    #[arg(long)]
    dev: Option<String>,
    /// Cores (one; two without --dev: tx then rx).
    #[arg(short = 'l', long = "lcores")]
    cores: Option<String>,
    /// Frame bytes (60..=9000; testpmd's --txpkts).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(60..=9000))]
    size: u16,
    /// Flows to cycle over (UDP source port and source IP per flow).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=4096))]
    flows: u16,
    /// Frames per second to send (0 = as fast as the port takes them).
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// Burst size.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=256))]
    burst: u16,
    /// Rx queues to receive on (rxonly), one task each, spread over the
    /// lcores (testpmd's --rxq).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=8))]
    rxq: u16,
    /// Tx queues to send on (txonly), one task each sending at rate /
    /// txq (testpmd's --txq).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=8))]
    txq: u16,
    /// io: bursts of frames sent before forwarding starts (testpmd's
    /// `start tx_first N`).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=64))]
    tx_first: u16,
    /// txonly: write only each frame's headers, as testpmd's txonly does
    /// (the payload is what the mbuf holds; zeros unless the pool also
    /// receives), so that a comparison measures the port, not the copy.
    #[arg(long)]
    headers_only: bool,
    /// Seconds to run (default: until Ctrl-C).
    #[arg(long)]
    duration: Option<f64>,
    #[command(flatten)]
    poll: PollOpts,
    #[command(flatten)]
    telemetry: rpmd_apps::opts::TelemetryOpts,
    /// Machine-readable output: one JSON object per line.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let a = Args::parse();
    rpmd_apps::opts::init_logging();
    if a.duration.is_some_and(|d| d <= 0.0) || a.rate < 0.0 {
        eprintln!("gen: --duration must be positive and --rate not negative");
        return ExitCode::from(2);
    }
    if a.size > 2048 && a.dev.is_none() {
        eprintln!("gen: --size above 2048 needs a port with multi-segment frames (--dev)");
        return ExitCode::from(2);
    }
    match run(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gen: {e}");
            ExitCode::from(1)
        }
    }
}

/// Counters of the queues gen drives, one per task.
type Counts = Vec<Arc<GenCounters>>;

fn run(a: &Args) -> Result<(), String> {
    // Caught from before the ports start: a Ctrl-C while they come up
    // ends the run cleanly too (an XDP program detached, a TAP removed).
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    if let Err(e) = ctrlc::set_handler(move || s2.store(true, Relaxed)) {
        tracing::warn!("cannot catch Ctrl-C: {e}");
    }
    let embedded = a.dev.is_none();
    let mode = a.mode.unwrap_or(Mode::Txonly);
    let cores = a
        .cores
        .clone()
        .unwrap_or_else(|| if embedded { "0-1" } else { "1" }.into());
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    rpmd_kernel::register(&mut reg);
    let mut pc = MempoolConfig::new("gen", 8192);
    pc.cache_size = 256;
    let pool = Mempool::new(&pc).map_err(|e| format!("mempool: {e}"))?;
    let mut rt = Runtime::start(&cores, a.poll.lcore_config()).map_err(|e| e.to_string())?;
    let devs = match &a.dev {
        Some(d) => vec![d.clone()],
        None => vec!["ring:gen".to_string(), "ring:gen".to_string()],
    };
    let (mut tx_counts, mut rx_counts) = (Counts::new(), Counts::new());
    let mut ports = Vec::new();
    for (i, d) in devs.iter().enumerate() {
        // The embedded topology sends on its first port, receives on the
        // second.
        let role = if embedded {
            if i == 0 {
                Mode::Txonly
            } else {
                Mode::Rxonly
            }
        } else {
            mode
        };
        let counts = if role == Mode::Txonly {
            &mut tx_counts
        } else {
            &mut rx_counts
        };
        ports.push(start_port(a, &reg, &mut rt, &pool, i, d, role, counts)?);
    }
    if !a.json {
        println!(
            "gen: {}, {}-byte frames, {} flow(s), rate {}, {}",
            if embedded {
                "txonly -> ring:gen -> rxonly".to_string()
            } else {
                format!("{mode:?} on {}", devs[0]).to_lowercase()
            },
            a.size,
            a.flows,
            if a.rate > 0.0 {
                format!("{} pps", a.rate)
            } else {
                "max".into()
            },
            a.poll.describe()
        );
    }
    let ports = Arc::new(std::sync::Mutex::new(ports));
    let telemetry = a.telemetry.start(
        "gen",
        rpmd_apps::telemetry::Sources::new(
            &ports,
            (0..devs.len()).collect(),
            &rt,
            vec![pool.clone()],
        ),
    );
    let secs = status_until_done(a, &stop, &tx_counts, &rx_counts);
    let down = rt.shutdown();
    drop(telemetry);
    let ports = ports.lock().unwrap_or_else(|e| e.into_inner());
    print_summary(a, secs, &tx_counts, &rx_counts, &ports);
    // A task that panicked: after the summary, a failure.
    down.map(drop).map_err(|e| e.to_string())
}

/// Opens and starts port `i` (`d`), and runs a txonly, rxonly or io task
/// (`role`) per queue (io: per rx/tx pair), queue k on lcore (i + k) mod
/// lcores; their counters go to `counts`.
#[allow(clippy::too_many_arguments)]
fn start_port(
    a: &Args,
    reg: &Registry,
    rt: &mut Runtime,
    pool: &Mempool,
    i: usize,
    d: &str,
    role: Mode,
    counts: &mut Counts,
) -> Result<Box<dyn rpmd_pmd::Port>, String> {
    let mut p = reg.open(d).map_err(|e| e.to_string())?;
    p.configure(&PortConfig {
        rx_pool: Some(pool.clone()),
        rx_queues: a.rxq,
        tx_queues: a.txq,
        ..PortConfig::default()
    })
    .map_err(|e| e.to_string())?;
    let q = p.start().map_err(|e| e.to_string())?;
    let n = rt.lcores().len();
    if role == Mode::Io {
        for (k, (rxq, txq)) in q.rx.into_iter().zip(q.tx).enumerate() {
            let (t, c) = Io::new(
                rxq,
                txq,
                pool.clone(),
                a.size as usize,
                a.burst as usize,
                a.tx_first as usize,
            );
            rt.add((i + k) % n, t).map_err(|e| e.to_string())?;
            counts.push(c);
        }
    } else if role == Mode::Txonly {
        for (k, txq) in q.tx.into_iter().enumerate() {
            let (t, c) = TxOnly::new(
                txq,
                pool.clone(),
                a.size as usize,
                a.flows,
                a.burst as usize,
                a.rate / a.txq as f64,
            );
            let t = t.headers_only(a.headers_only);
            rt.add((i + k) % n, t).map_err(|e| e.to_string())?;
            counts.push(c);
        }
    } else {
        for (k, rxq) in q.rx.into_iter().enumerate() {
            let (t, c) = RxOnly::new(rxq, a.burst as usize);
            rt.add((i + k) % n, t).map_err(|e| e.to_string())?;
            counts.push(c);
        }
    }
    tracing::info!(
        "{d}: {role:?} on {} queue(s)",
        if role == Mode::Txonly { a.txq } else { a.rxq }
    );
    Ok(p)
}

/// Packets, bytes and drops summed over `cs`.
fn read(cs: &[Arc<GenCounters>]) -> (u64, u64, u64) {
    cs.iter().fold((0, 0, 0), |t, c| {
        (
            t.0 + c.packets.get(),
            t.1 + c.bytes.get(),
            t.2 + c.dropped.get(),
        )
    })
}

/// Prints rates once a second until Ctrl-C or `--duration`; the seconds
/// it ran.
fn status_until_done(a: &Args, stop: &AtomicBool, tx_counts: &Counts, rx_counts: &Counts) -> f64 {
    let t0 = Instant::now();
    let end = a.duration.map(Duration::from_secs_f64);
    let mut next = Duration::from_secs(1);
    let (mut ltx, mut lrx) = (read(tx_counts), read(rx_counts));
    while !stop.load(Relaxed) && end.is_none_or(|d| t0.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(10));
        if t0.elapsed() < next {
            continue;
        }
        let (tx, rx) = (read(tx_counts), read(rx_counts));
        let (txp, rxp) = (tx.0 - ltx.0, rx.0 - lrx.0);
        let (txg, rxg) = ((tx.1 - ltx.1) as f64 * 8e-9, (rx.1 - lrx.1) as f64 * 8e-9);
        if a.json {
            println!(
                "{}",
                serde_json::json!({"t": next.as_secs_f64(), "tx_pps": txp, "rx_pps": rxp, "tx_gbps": txg, "rx_gbps": rxg, "tx_dropped": tx.2 - ltx.2})
            );
        } else {
            println!(
                "[{:6.1}s] tx {:.3} Mpps ({txg:.2} Gbit/s, {} dropped) | rx {:.3} Mpps ({rxg:.2} Gbit/s)",
                next.as_secs_f64(),
                txp as f64 / 1e6,
                tx.2 - ltx.2,
                rxp as f64 / 1e6
            );
        }
        (ltx, lrx) = (tx, rx);
        next += Duration::from_secs(1);
    }
    t0.elapsed().as_secs_f64()
}

fn print_summary(
    a: &Args,
    secs: f64,
    tx_counts: &Counts,
    rx_counts: &Counts,
    ports: &[Box<dyn rpmd_pmd::Port>],
) {
    let (tx, rx) = (read(tx_counts), read(rx_counts));
    let per_queue =
        |cs: &[Arc<GenCounters>]| -> Vec<u64> { cs.iter().map(|c| c.packets.get()).collect() };
    let (txq_packets, rxq_packets) = (per_queue(tx_counts), per_queue(rx_counts));
    let stats: Vec<_> = ports
        .iter()
        .map(|p| (p.name().to_string(), p.stats()))
        .collect();
    if a.json {
        let ports: Vec<_> = stats
            .iter()
            .map(|(n, s)| serde_json::json!({"device": n, "ipackets": s.ipackets, "opackets": s.opackets, "ibytes": s.ibytes, "obytes": s.obytes, "ierrors": s.ierrors, "oerrors": s.oerrors, "rx_nombuf": s.rx_nombuf}))
            .collect();
        println!(
            "{}",
            serde_json::json!({"summary": {"seconds": secs, "tx_packets": tx.0, "tx_bytes": tx.1, "tx_dropped": tx.2,
                "rx_packets": rx.0, "rx_bytes": rx.1, "tx_mpps": tx.0 as f64 / secs / 1e6, "rx_mpps": rx.0 as f64 / secs / 1e6,
                "tx_queue_packets": txq_packets, "rx_queue_packets": rxq_packets,
                "ports": ports}})
        );
        return;
    }
    println!(
        "summary: {secs:.1} s: tx {} frames ({:.3} Mpps, {} dropped), rx {} frames ({:.3} Mpps)",
        tx.0,
        tx.0 as f64 / secs / 1e6,
        tx.2,
        rx.0,
        rx.0 as f64 / secs / 1e6
    );
    for (n, s) in &stats {
        println!(
            "  {n}: ipackets {} opackets {} ierrors {} oerrors {} rx_nombuf {}",
            s.ipackets, s.opackets, s.ierrors, s.oerrors, s.rx_nombuf
        );
    }
}
