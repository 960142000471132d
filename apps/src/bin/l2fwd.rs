//! l2fwd: forward frames between port pairs, like DPDK's l2fwd.
//!
//! With no `--dev`, runs the embedded topology (no NIC needed). Prints
//! per-port statistics every second and a summary at exit (`--json`: JSON
//! Lines, each with a `"type"`: `"progress"` or `"summary"`). Exit status:
//! 0 done, 1 failure, 2 bad usage.
use clap::Parser;
use rpmd_apps::cli;
use rpmd_apps::l2fwd::{Config, L2fwd};
use rpmd_apps::opts::PollOpts;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// Layer-2 forwarding between port pairs (0-1, 2-3, ...), like DPDK's
/// l2fwd. With no --dev it runs an embedded topology: two in-process ports
/// fed by a built-in generator and drained by a built-in sink.
#[derive(Parser, Debug)]
#[command(name = "l2fwd", version)]
struct Args {
    /// Cores to run on, DPDK style (0-1, 0,2).
    #[arg(short = 'l', long = "lcores", default_value = "0-1", value_parser = cli::core_list)]
    cores: String,
    /// Port mask in hex (bit i = port i, the i-th --dev; default: all).
    #[arg(short = 'p', long = "portmask", value_parser = cli::port_mask)]
    portmask: Option<u64>,
    /// Rx queues per forwarding lcore.
    #[arg(short = 'q', default_value_t = 1)]
    rx_per_lcore: usize,
    /// Queue pairs per port (1..=8): rx queue q of a port forwards to tx
    /// queue q of its pair (like testpmd's --rxq/--txq).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=8))]
    queues: u16,
    /// Rx queues per port, when not --queues (1..=8): rx queue q forwards
    /// to tx queue q mod --txq; a tx queue that several rx queues feed is
    /// shared behind rpmd's TX lock.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=8))]
    rxq: Option<u16>,
    /// Tx queues per port, when not --queues (1..=8).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=8))]
    txq: Option<u16>,
    /// Shape every output port:
    /// `RATE[,burst=SIZE][,limit=FRAMES][,by=pcp|dscp,classes=NAME:KEYS[:RATE[:CEIL]]/...]`,
    /// rates in tc's units (100mbit, 1gbit, 10mbps); one shaper per port,
    /// shared by every lcore sending to it.
    #[arg(long, value_name = "SPEC", value_parser = rpmd_apps::egress::tx_rate)]
    tx_rate: Option<rpmd_sched::EgressConfig>,
    /// A port, as a device string (pci:ADDR, virtio-user:PATH, ring:NAME, null); repeat for each.
    #[arg(long = "dev", value_parser = cli::device)]
    devices: Vec<String>,
    /// Do not rewrite MAC addresses.
    #[arg(long)]
    no_mac_updating: bool,
    /// Burst size (1..=256).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=256))]
    burst: u16,
    #[command(flatten)]
    poll: PollOpts,
    #[command(flatten)]
    report: rpmd_apps::opts::ReportOpts,
    /// A mempool per port (each port transmits the other's mbufs).
    #[arg(long)]
    per_port_pool: bool,
    #[command(flatten)]
    telemetry: rpmd_apps::opts::TelemetryOpts,
    /// Capture a port's frames to a pcapng file, like dpdk-dumpcap:
    /// PORT[:rx|tx|both]=FILE (ports numbered as the --dev list); repeat
    /// for more ports (the same FILE takes several).
    #[arg(long = "pcap", value_name = "PORT[:DIR]=FILE")]
    pcap: Vec<rpmd_apps::capture::PcapSpec>,
}

/// A port's rx, tx, dropped and tx bytes.
type Totals = (u64, u64, u64, u64);

fn totals(l: &L2fwd) -> Vec<Totals> {
    l.port_totals()
}

fn main() -> ExitCode {
    let a = Args::parse();
    rpmd_apps::opts::init_logging();
    let cfg = match config(&a) {
        Ok(cfg) => cfg,
        Err(e) => return e.report("l2fwd"),
    };
    if !a.report.json {
        print_start(&a, &cfg);
    }
    // Caught from before the start: a Ctrl-C while ports come up ends the
    // run cleanly too (ports stopped and dropped: an XDP program detached).
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    if let Err(e) = ctrlc::set_handler(move || s2.store(true, Relaxed)) {
        eprintln!("l2fwd: cannot catch Ctrl-C: {e}");
    }
    let mut l = match L2fwd::start(&cfg) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("l2fwd: {e}");
            return ExitCode::from(1);
        }
    };
    let ran = run(&a, &mut l, &stop);
    // The time the forwarding really ran (a run shorter than a period has
    // no report to go by).
    let elapsed = ran.max(Duration::from_millis(1)).as_secs_f64();
    let lcores = l.lcore_report();
    let down = l.stop();
    if a.report.json {
        summary_json(&l, &cfg, elapsed, &lcores);
    } else {
        print_summary(&l, elapsed, &lcores);
    }
    if let Err(e) = down {
        eprintln!("l2fwd: {e}");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// The forwarder's configuration from the command line, or what is
/// wrong with it.
fn config(a: &Args) -> Result<Config, cli::Exit> {
    cli::check_devices(&a.devices)?;
    // The embedded topology has two ports.
    let n = if a.devices.is_empty() {
        2
    } else {
        a.devices.len()
    };
    let portmask = a.portmask.unwrap_or(rpmd_apps::l2fwd::all_ports(n));
    rpmd_apps::l2fwd::check_portmask(portmask, n).map_err(|e| cli::Exit::Usage(e.to_string()))?;
    let used = portmask.count_ones();
    if used < 2 || used % 2 != 0 {
        return Err(cli::Exit::Usage(format!("l2fwd needs an even number of ports (pairs 0-1, 2-3, ...); the port mask selects {used}")));
    }
    Ok(Config {
        cores: a.cores.clone(),
        devices: a.devices.clone(),
        portmask,
        rx_per_lcore: a.rx_per_lcore,
        queues: a.queues,
        rxq: a.rxq,
        txq: a.txq,
        tx_rate: a.tx_rate.clone(),
        mac_updating: !a.no_mac_updating,
        burst: a.burst as usize,
        lcore: a.poll.lcore_config(),
        mbufs: 8192,
        per_port_pool: a.per_port_pool,
        telemetry: a.telemetry.prefix(),
        pcap: a.pcap.clone(),
    })
}

fn print_start(a: &Args, cfg: &Config) {
    if a.devices.is_empty() {
        println!("l2fwd: no --dev given: embedded topology: generator -> ring:l2fwd-a (port 0) -> l2fwd -> ring:l2fwd-b (port 1) -> sink, and back; lcores {}", a.cores);
    } else {
        println!("l2fwd: ports {:?}, lcores {}", a.devices, a.cores);
    }
    println!("l2fwd: {}", cfg.lcore.describe());
    if let Some(e) = &cfg.tx_rate {
        println!(
            "l2fwd: every output port shaped: {}",
            rpmd_apps::egress::describe(e)
        );
    }
}

/// Forwards until Ctrl-C or `--duration`, printing each period's rates
/// and each link change; returns how long it forwarded.
fn run(a: &Args, l: &mut L2fwd, stop: &AtomicBool) -> Duration {
    let mut last = totals(l);
    let mut last_t = Duration::ZERO;
    let json = a.report.json;
    let mut links = rpmd_apps::link::LinkWatch::default();
    l.run_for(
        a.report.duration.map(Duration::from_secs_f64),
        Duration::from_secs_f64(a.report.period),
        stop,
        |l, t| {
            let now = totals(l);
            let dt = (t - last_t).as_secs_f64().max(1e-9);
            print_progress(json, l, &now, &last, t, dt);
            let (ids, names) = l.port_labels();
            for line in links.changes(&l.link_states(), ids, names) {
                eprintln!("l2fwd: {line}");
            }
            last = now;
            last_t = t;
        },
    )
}

/// One period's line: the rates from `last` to `now`, over `dt` seconds.
fn print_progress(json: bool, l: &L2fwd, now: &[Totals], last: &[Totals], t: Duration, dt: f64) {
    let mut rows = Vec::new();
    for (i, (n, o)) in now.iter().zip(last).enumerate() {
        let rx = (n.0 - o.0) as f64 / dt;
        let tx = (n.1 - o.1) as f64 / dt;
        let gbps = (n.3 - o.3) as f64 * 8.0 / dt / 1e9;
        rows.push((l.port_ids[i], rx, tx, n.2 - o.2, gbps));
    }
    let total_tx: f64 = rows.iter().map(|r| r.2).sum();
    if json {
        let ports: Vec<_> = rows
            .iter()
            .map(|r| serde_json::json!({"port": r.0, "rx_pps": r.1, "tx_pps": r.2, "dropped": r.3, "tx_gbps": r.4}))
            .collect();
        cli::json_line(
            "progress",
            serde_json::json!({"seconds": t.as_secs_f64(), "ports": ports, "mpps": total_tx / 1e6}),
        );
    } else {
        let parts: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "port {}: rx {:.2} Mpps tx {:.2} Mpps drop {} ({:.2} Gbit/s)",
                    r.0,
                    r.1 / 1e6,
                    r.2 / 1e6,
                    r.3,
                    r.4
                )
            })
            .collect();
        println!(
            "[{:6.1}s] {} | total {:.2} Mpps",
            t.as_secs_f64(),
            parts.join(" | "),
            total_tx / 1e6
        );
    }
}

/// Frames forwarded and dropped over all ports.
fn forwarded(end: &[Totals]) -> (u64, u64) {
    (end.iter().map(|e| e.1).sum(), end.iter().map(|e| e.2).sum())
}

fn summary_json(l: &L2fwd, cfg: &Config, elapsed: f64, lcores: &[rpmd_apps::usage::LcoreUsage]) {
    let (end, device) = (totals(l), l.port_stats());
    let (fwd, dropped) = forwarded(&end);
    let gen = l.gen.as_ref().map(|g| (g.0.get(), g.1.get()));
    let ports: Vec<_> = end
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let qs: Vec<_> = l.counters[i * l.queues..(i + 1) * l.queues]
                .iter()
                .map(|c| serde_json::json!({"rx": c.rx.get(), "tx": c.tx.get(), "dropped": c.dropped.get()}))
                .collect();
            let dev = device.get(i).map(cli::device_drops_json);
            serde_json::json!({"port": l.port_ids[i], "device": l.names.get(i), "rx": e.0, "tx": e.1, "dropped": e.2, "tx_bytes": e.3, "queues": qs, "port_stats": dev})
        })
        .collect();
    let captured: Vec<_> = l.captured.iter().map(|c| c.json()).collect();
    cli::json_line(
        "summary",
        serde_json::json!({"seconds": elapsed, "forwarded": fwd, "dropped": dropped, "mpps": fwd as f64 / elapsed / 1e6, "generated": gen.map(|g| g.0), "sunk": gen.map(|g| g.1), "ports": ports, "captures": captured,
            "poll": cfg.lcore.describe(), "lcores": rpmd_apps::usage::json(lcores),
            "egress": rpmd_apps::egress::json(l.egress())}),
    );
}

fn print_summary(l: &L2fwd, elapsed: f64, lcores: &[rpmd_apps::usage::LcoreUsage]) {
    let (end, device) = (totals(l), l.port_stats());
    let (fwd, dropped) = forwarded(&end);
    println!(
        "summary: forwarded {fwd} frames in {elapsed:.1} s ({:.2} Mpps), dropped {dropped}",
        fwd as f64 / elapsed / 1e6
    );
    for (i, e) in end.iter().enumerate() {
        println!(
            "  port {} ({}): rx {} tx {} dropped {}{}",
            l.port_ids[i],
            l.names.get(i).map(String::as_str).unwrap_or("?"),
            e.0,
            e.1,
            e.2,
            device.get(i).map(cli::device_drops).unwrap_or_default()
        );
    }
    if let Some(g) = &l.gen {
        println!(
            "  embedded generator sent {}, sink received {}",
            g.0.get(),
            g.1.get()
        );
    }
    for u in lcores {
        println!("  {}", u.line());
    }
    for c in &l.captured {
        println!("  {}", c.line());
    }
    for line in rpmd_apps::egress::summary_lines(l.egress(), elapsed) {
        println!("  {line}");
    }
}
