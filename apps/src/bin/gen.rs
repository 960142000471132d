//! gen: testpmd's forwarding modes on any port.
//!
//! `gen --mode txonly --dev virtio-user:/tmp/vhost.sock --size 64 --flows 16`
//! sends; `--mode rxonly` receives and counts; io, mac, macswap and csum
//! send back what they receive (rx queue k to tx queue k), rewritten as
//! testpmd's modes do; flowgen sends flows and drops what comes in. With
//! no --dev it runs both ends of an in-process ring pair (tx on the first
//! lcore, rx on the second). Exit status: 0 done, 1 failure, 2 bad usage.
use clap::{Parser, ValueEnum};
use rpmd_apps::capture::{Captures, PcapSpec};
use rpmd_apps::cli;
use rpmd_apps::gen::{Flowgen, GenCounters, Io, Rewrite, RxOnly, TxOnly};
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
    /// As io, with the source MAC set to the port's and the destination
    /// to --eth-peer.
    Mac,
    /// As io, with source and destination MAC swapped.
    Macswap,
    /// As io, with IPv4 and UDP/TCP checksums checked (bad ones counted)
    /// and recomputed.
    Csum,
    /// Send frames over --flows flows (default 1024) and drop what is
    /// received.
    Flowgen,
}

impl Mode {
    /// Whether the mode sends back what it receives.
    fn forwards(self) -> bool {
        matches!(self, Mode::Io | Mode::Mac | Mode::Macswap | Mode::Csum)
    }
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
    #[arg(long, value_parser = cli::device)]
    dev: Option<String>,
    /// Cores (one; two without --dev: tx then rx).
    #[arg(short = 'l', long = "lcores", value_parser = cli::core_list)]
    cores: Option<String>,
    /// Frame bytes (60..=9000; testpmd's --txpkts).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(60..=9000))]
    size: u16,
    /// Flows to cycle over (UDP source port and source IP per flow;
    /// default 1, flowgen 1024).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=4096))]
    flows: Option<u16>,
    /// Frames per second to send (0 = as fast as the port takes them).
    #[arg(long, default_value_t = 0.0, value_parser = non_negative_rate, allow_hyphen_values = true)]
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
    /// Descriptors per rx queue (testpmd's --rxd).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u16).range(64..=32768))]
    rxd: u16,
    /// Descriptors per tx queue (testpmd's --txd).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u16).range(64..=32768))]
    txd: u16,
    /// Mbufs in the pool (testpmd's --total-num-mbufs).
    #[arg(long, default_value_t = 8192, value_parser = clap::value_parser!(u32).range(512..=1048576))]
    mbufs: u32,
    /// Bytes of buffer per mbuf, headroom (128) included (testpmd's
    /// --mbuf-size; default 2176).
    #[arg(long, default_value_t = 2176, value_parser = clap::value_parser!(u16).range(256..=65535))]
    mbuf_size: u16,
    /// mac mode: the destination MAC (testpmd's --eth-peer; default
    /// 02:00:00:00:00:00).
    #[arg(long, value_parser = parse_mac)]
    eth_peer: Option<[u8; 6]>,
    /// Capture frames to a pcapng file: PORT[:rx|tx|both]=FILE (port 0
    /// is --dev; without --dev, 0 sends and 1 receives).
    #[arg(long = "pcap", value_name = "PORT[:DIR]=FILE")]
    pcap: Vec<PcapSpec>,
    /// io modes: bursts of frames sent before forwarding starts (testpmd's
    /// `start tx_first N`).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=64))]
    tx_first: u16,
    /// txonly: write only each frame's headers, as testpmd's txonly does
    /// (the payload is what the mbuf holds; zeros unless the pool also
    /// receives), so that a comparison measures the port, not the copy.
    #[arg(long)]
    headers_only: bool,
    /// Seconds to run (default: until Ctrl-C).
    #[arg(long, value_parser = cli::seconds, allow_hyphen_values = true)]
    duration: Option<f64>,
    #[command(flatten)]
    poll: PollOpts,
    #[command(flatten)]
    telemetry: rpmd_apps::opts::TelemetryOpts,
    /// Machine-readable output: JSON Lines, each with a "type"
    /// ("progress" every second, "summary" at the end).
    #[arg(long)]
    json: bool,
}

fn non_negative_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!(
            "{s:?} is not a rate in frames per second (0 = line rate)"
        )),
    }
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<_> = s.split(':').collect();
    let bad = || format!("{s:?} is not a MAC address (write it 02:00:00:00:00:01)");
    if parts.len() != 6 {
        return Err(bad());
    }
    let mut m = [0u8; 6];
    for (b, p) in m.iter_mut().zip(parts) {
        *b = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    Ok(m)
}

fn main() -> ExitCode {
    let a = Args::parse();
    rpmd_apps::opts::init_logging();
    if let Err(e) = cli::check_devices(a.dev.as_slice()) {
        return e.report("gen");
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
    let reg = rpmd_apps::cli::registry();
    let mut pc = MempoolConfig::new("gen", a.mbufs);
    pc.cache_size = 256.min(a.mbufs / 4);
    pc.data_room = a.mbuf_size - pc.headroom;
    let pool = Mempool::new(&pc).map_err(|e| format!("mempool: {e}"))?;
    let mut rt = Runtime::start(&cores, a.poll.lcore_config()).map_err(|e| e.to_string())?;
    let devs = match &a.dev {
        Some(d) => vec![d.clone()],
        None => vec!["ring:gen".to_string(), "ring:gen".to_string()],
    };
    let (mut tx_counts, mut rx_counts) = (Counts::new(), Counts::new());
    let mut setup = Setup {
        a,
        reg: &reg,
        pool: &pool,
        cap: Captures::new(&a.pcap, &devs)?,
    };
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
        let counts = (&mut tx_counts, &mut rx_counts);
        ports.push(start_port(&mut setup, &mut rt, i, d, role, counts)?);
    }
    if !a.json {
        print_start(a, mode, &devs[0]);
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
    setup.cap.start()?;
    let usage = rpmd_apps::usage::Usage::start(&rt);
    let secs = status_until_done(a, &stop, &tx_counts, &rx_counts);
    let lcores = usage.read();
    let down = rt.shutdown();
    drop(telemetry);
    let ports = ports.lock().unwrap_or_else(|e| e.into_inner());
    print_summary(a, secs, &tx_counts, &rx_counts, &ports, &lcores);
    let mut captured = Vec::new();
    let capture = setup.cap.finish(&mut captured);
    if !a.json {
        captured.iter().for_each(|c| println!("  {}", c.line()));
    }
    let failed = down.map(drop).map_err(|e| e.to_string()).and(capture);
    // A task that panicked: after the summary, a failure.
    failed
}

/// The line gen starts with: what it drives, how, and how fast.
fn print_start(a: &Args, mode: Mode, dev: &str) {
    println!(
        "gen: {}, {}-byte frames, {} flow(s), rate {}, {}",
        if a.dev.is_none() {
            "txonly -> ring:gen -> rxonly".to_string()
        } else {
            format!("{mode:?} on {dev}").to_lowercase()
        },
        a.size,
        flows(a, mode),
        if a.rate > 0.0 {
            format!("{} pps", a.rate)
        } else {
            "max".into()
        },
        a.poll.describe()
    );
}

/// The flows to send over: --flows, else 1024 for flowgen and 1 for the
/// others.
fn flows(a: &Args, mode: Mode) -> u16 {
    a.flows
        .unwrap_or(if mode == Mode::Flowgen { 1024 } else { 1 })
}

/// What every port's tasks share.
struct Setup<'a> {
    a: &'a Args,
    reg: &'a Registry,
    pool: &'a Mempool,
    cap: Captures,
}

/// Opens and starts port `i` (`d`), and runs the tasks of `role` on it: one
/// per queue (a pair of rx and tx queue k for the modes that receive and
/// send), queue k on lcore (i + k) mod lcores; their counters go to
/// `counts`.
fn start_port(
    s: &mut Setup,
    rt: &mut Runtime,
    i: usize,
    d: &str,
    role: Mode,
    (tx_counts, rx_counts): (&mut Counts, &mut Counts),
) -> Result<Box<dyn rpmd_pmd::Port>, String> {
    let a = s.a;
    let mut p = s.reg.open(d).map_err(|e| e.to_string())?;
    p.configure(&PortConfig {
        rx_queues: a.rxq,
        tx_queues: a.txq,
        rx_desc: a.rxd,
        tx_desc: a.txd,
        ..PortConfig::with_pool(s.pool)
    })
    .map_err(|e| e.to_string())?;
    let mut q = p.start().map_err(|e| e.to_string())?;
    rpmd_apps::cli::promiscuous(p.as_mut(), d);
    let n = rt.lcores().len();
    let (size, burst) = (a.size as usize, a.burst as usize);
    let txonly = |tx, rate| {
        let (t, c) = TxOnly::new(tx, s.pool.clone(), size, flows(a, role), burst, rate);
        (t.headers_only(a.headers_only), c)
    };
    let (nrx, ntx) = (q.rx.len(), q.tx.len());
    let tasks = match role {
        Mode::Txonly => ntx,
        Mode::Rxonly => nrx,
        _ => nrx.min(ntx),
    };
    for k in 0..tasks {
        let lcore = (i + k) % n;
        let mut rx = || q.take_rx(k).map(|r| s.cap.rx(i, d, r));
        let rxq = if role == Mode::Txonly {
            None
        } else {
            Some(rx().map_err(|e| e.to_string())?)
        };
        let txq = if role == Mode::Rxonly {
            None
        } else {
            Some(s.cap.tx(i, d, q.take_tx(k).map_err(|e| e.to_string())?))
        };
        let added = match (role, rxq, txq) {
            (Mode::Txonly, _, Some(tx)) => {
                let (t, c) = txonly(tx, a.rate / a.txq as f64);
                tx_counts.push(c);
                rt.add(lcore, t)
            }
            (Mode::Rxonly, Some(rx), _) => {
                let (t, c) = RxOnly::new(rx, burst);
                rx_counts.push(c);
                rt.add(lcore, t)
            }
            (Mode::Flowgen, Some(rx), Some(tx)) => {
                let (t, c) = txonly(tx, a.rate / tasks as f64);
                let (r, rc) = RxOnly::new(rx, burst);
                tx_counts.push(c);
                rx_counts.push(rc);
                rt.add(lcore, Flowgen::new(t, r))
            }
            (mode, Some(rx), Some(tx)) if mode.forwards() => {
                let peer = a.eth_peer.unwrap_or([2, 0, 0, 0, 0, i as u8]);
                let rewrite = match mode {
                    Mode::Mac => Rewrite::Mac {
                        src: p.mac_addr(),
                        dst: rpmd_pmd::port::MacAddr(peer),
                    },
                    Mode::Macswap => Rewrite::MacSwap,
                    Mode::Csum => Rewrite::Csum,
                    _ => Rewrite::None,
                };
                let (t, c) = Io::new(rx, tx, s.pool.clone(), size, burst, a.tx_first as usize);
                rx_counts.push(c);
                rt.add(lcore, t.rewrite(rewrite))
            }
            _ => unreachable!("each mode takes the queues it needs"),
        };
        added.map_err(|e| e.to_string())?;
    }
    tracing::info!("{d}: {role:?} on {tasks} queue(s)");
    Ok(p)
}

/// Bad IPv4 and L4 checksums the csum tasks found.
fn bad_checksums(cs: &[Arc<GenCounters>]) -> (u64, u64) {
    cs.iter().fold((0, 0), |t, c| {
        (t.0 + c.csum.bad_ip.get(), t.1 + c.csum.bad_l4.get())
    })
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
            cli::json_line(
                "progress",
                serde_json::json!({"seconds": next.as_secs_f64(), "tx_packets": txp, "rx_packets": rxp,
                    "tx_mpps": txp as f64 / 1e6, "rx_mpps": rxp as f64 / 1e6,
                    "tx_gbps": txg, "rx_gbps": rxg, "tx_dropped": tx.2 - ltx.2}),
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
    lcores: &[rpmd_apps::usage::LcoreUsage],
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
            .map(|(n, s)| serde_json::json!({"device": n, "ipackets": s.ipackets, "opackets": s.opackets, "ibytes": s.ibytes, "obytes": s.obytes, "imissed": s.imissed, "ierrors": s.ierrors, "oerrors": s.oerrors, "rx_nombuf": s.rx_nombuf}))
            .collect();
        let (bad_ip, bad_l4) = bad_checksums(rx_counts);
        cli::json_line(
            "summary",
            serde_json::json!({"seconds": secs, "tx_packets": tx.0, "tx_bytes": tx.1, "tx_dropped": tx.2,
                "rx_packets": rx.0, "rx_bytes": rx.1, "tx_mpps": tx.0 as f64 / secs / 1e6, "rx_mpps": rx.0 as f64 / secs / 1e6,
                "tx_gbps": tx.1 as f64 * 8e-9 / secs, "rx_gbps": rx.1 as f64 * 8e-9 / secs,
                "tx_queue_packets": txq_packets, "rx_queue_packets": rxq_packets,
                "bad_ip_csum": bad_ip, "bad_l4_csum": bad_l4, "ports": ports,
                "poll": a.poll.describe(), "lcores": rpmd_apps::usage::json(lcores)}),
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
            "  {n}: ipackets {} opackets {} imissed {} ierrors {} oerrors {} rx_nombuf {}",
            s.ipackets, s.opackets, s.imissed, s.ierrors, s.oerrors, s.rx_nombuf
        );
    }
    if a.mode == Some(Mode::Csum) {
        let (ip, l4) = bad_checksums(rx_counts);
        println!("  csum: bad IPv4 checksums {ip}, bad L4 checksums {l4} (recomputed)");
    }
    for u in lcores {
        println!("  {}", u.line());
    }
}
