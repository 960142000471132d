//! vswitch: a learning layer-2 switch across rpmd ports.
//!
//! `vswitch --dev shm:a --dev virtio-user:/tmp/b.sock --dev af_packet:eth1`
//! switches between the three; with no `--dev`, a demo of three stations
//! behind three in-process ports. Prints per-port rates every period and
//! a summary at exit (`--json`: JSON Lines with a "type"). Exit status: 0
//! done, 1 failure, 2 bad usage.
use clap::Parser;
use rpmd_apps::cli;
use rpmd_apps::opts::PollOpts;
use rpmd_apps::vswitch::{Config, Totals, VSwitch};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A learning layer-2 switch across rpmd ports (MAC learning with ageing,
/// flooding of unknown and broadcast destinations). With no --dev: a demo
/// of three stations behind three in-process ports.
#[derive(Parser, Debug)]
#[command(name = "vswitch", version)]
struct Args {
    /// Cores, DPDK style (default: 0 with --dev, 0-1 for the demo, whose
    /// stations take the last).
    #[arg(short = 'l', long = "lcores", value_parser = cli::core_list)]
    cores: Option<String>,
    /// A port, as a device string; repeat for each (at least two).
    #[arg(long = "dev", value_parser = cli::device)]
    devices: Vec<String>,
    /// Rx queues per port, spread over the lcores (each lcore also has a
    /// tx queue of its own on every port).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=8))]
    queues: u16,
    /// Burst size.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=256))]
    burst: u16,
    /// Seconds a learned address lives without traffic from it.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u32).range(1..=86400))]
    ageing: u32,
    /// Mbufs in the pool (receive buffers and flood copies).
    #[arg(long, default_value_t = 16384, value_parser = clap::value_parser!(u32).range(1024..=1048576))]
    mbufs: u32,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long, value_parser = cli::seconds, allow_hyphen_values = true)]
    duration: Option<f64>,
    /// Seconds between statistics lines.
    #[arg(long, default_value_t = 1.0, value_parser = cli::seconds, allow_hyphen_values = true)]
    period: f64,
    #[command(flatten)]
    poll: PollOpts,
    #[command(flatten)]
    telemetry: rpmd_apps::opts::TelemetryOpts,
    /// Capture a port's frames to a pcapng file: PORT[:rx|tx|both]=FILE
    /// (ports numbered as the --dev list).
    #[arg(long = "pcap", value_name = "PORT[:DIR]=FILE")]
    pcap: Vec<rpmd_apps::capture::PcapSpec>,
    /// Machine-readable output: JSON Lines, each with a "type"
    /// ("progress" every period, "summary" at the end).
    #[arg(long)]
    json: bool,
    /// Add each port's non-zero extended statistics to the summary.
    #[arg(long)]
    xstats: bool,
    /// Shape a port's egress:
    /// `PORT=RATE[,burst=SIZE][,limit=FRAMES][,by=pcp|dscp,classes=NAME:KEYS[:RATE[:CEIL]]/...]`,
    /// rates in tc's units (100mbit, 1gbit); classes highest priority
    /// first, KEYS like 5-7+default. Every lcore sends to the port through
    /// one shaper. Repeat for more ports.
    #[arg(long = "egress", value_name = "PORT=SPEC", value_parser = rpmd_apps::egress::port_egress)]
    egress: Vec<(usize, rpmd_sched::EgressConfig)>,
}

const COLS: [&str; 5] = ["rx", "tx", "dropped", "flooded", "filtered"];

fn port_json(v: &VSwitch, t: &Totals, per_s: Option<f64>) -> Vec<serde_json::Value> {
    t.iter()
        .enumerate()
        .map(|(p, c)| {
            let mut o = serde_json::json!({"port": p, "device": v.names[p]});
            for (k, x) in COLS.iter().zip(c) {
                o[*k] = match per_s {
                    Some(dt) => serde_json::json!(*x as f64 / dt),
                    None => serde_json::json!(x),
                };
            }
            o
        })
        .collect()
}

fn main() -> ExitCode {
    let a = Args::parse();
    rpmd_apps::opts::init_logging();
    let cfg = match config(&a) {
        Ok(cfg) => cfg,
        Err(e) => return e.report("vswitch"),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    if let Err(e) = ctrlc::set_handler(move || s2.store(true, Relaxed)) {
        tracing::warn!("cannot catch Ctrl-C: {e}");
    }
    let mut v = match VSwitch::start(&cfg) {
        Ok(v) => v,
        Err(e) => return cli::Exit::Failure(e).report("vswitch"),
    };
    if !a.json {
        print_start(&v, &cfg);
    }
    let t0 = Instant::now();
    run(&a, &v, &stop, t0);
    let secs = t0.elapsed().as_secs_f64().max(1e-3);
    let (learned, lcores) = (v.learned(), v.lcore_report());
    let down = v.stop();
    let summary = Summary {
        secs,
        learned,
        lcores,
        end: v.totals(),
        xstats: if a.xstats {
            nonzero_xstats(&v)
        } else {
            Vec::new()
        },
        device: v.port_stats(),
    };
    if a.json {
        summary.json(&v, &cfg);
    } else {
        summary.print(&v);
    }
    match down {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => cli::Exit::Failure(e).report("vswitch"),
    }
}

/// The switch's configuration from the command line, or what is wrong
/// with it.
fn config(a: &Args) -> Result<Config, cli::Exit> {
    cli::check_devices(&a.devices)?;
    if a.devices.len() == 1 {
        return Err(cli::Exit::Usage(
            "a switch needs at least two ports (--dev, repeated)".into(),
        ));
    }
    let embedded = a.devices.is_empty();
    let nports = if embedded {
        rpmd_apps::vswitch::demo::devices().len()
    } else {
        a.devices.len()
    };
    rpmd_apps::egress::check_ports(&a.egress, nports).map_err(cli::Exit::Usage)?;
    Ok(Config {
        cores: a
            .cores
            .clone()
            .unwrap_or_else(|| if embedded { "0-1" } else { "0" }.into()),
        devices: a.devices.clone(),
        queues: a.queues,
        burst: a.burst as usize,
        ageing: a.ageing,
        lcore: a.poll.lcore_config(),
        mbufs: a.mbufs,
        telemetry: a.telemetry.prefix(),
        pcap: a.pcap.clone(),
        egress: a.egress.clone(),
    })
}

fn print_start(v: &VSwitch, cfg: &Config) {
    println!(
        "vswitch: {} ports {:?}, lcores {}{}",
        v.names.len(),
        v.names,
        cfg.cores,
        if cfg.devices.is_empty() {
            " (demo: three stations behind in-process ports)"
        } else {
            ""
        }
    );
    println!("vswitch: {}", cfg.lcore.describe());
    for e in &v.egress {
        println!(
            "vswitch: port {} egress: {}",
            e.port,
            rpmd_apps::egress::describe(e.egress.config())
        );
    }
}

/// Runs until Ctrl-C or `--duration`, printing each period's rates and
/// each link change.
fn run(a: &Args, v: &VSwitch, stop: &AtomicBool, t0: Instant) {
    let period = Duration::from_secs_f64(a.period);
    let (mut next, mut last, mut last_t) = (period, v.totals(), Duration::ZERO);
    let mut links = rpmd_apps::link::LinkWatch::default();
    let end = a.duration.map(Duration::from_secs_f64);
    while !stop.load(Relaxed) && end.is_none_or(|d| t0.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(10));
        let t = t0.elapsed();
        if t < next {
            continue;
        }
        let now = v.totals();
        let dt = (t - last_t).as_secs_f64().max(1e-9);
        let delta: Totals = now
            .iter()
            .zip(&last)
            .map(|(n, o)| std::array::from_fn(|i| n[i] - o[i]))
            .collect();
        print_progress(a.json, v, &delta, t, dt);
        let ids: Vec<usize> = (0..v.names.len()).collect();
        for line in links.changes(&v.link_states(), &ids, &v.names) {
            eprintln!("vswitch: {line}");
        }
        (last, last_t) = (now, t);
        next += period;
    }
}

/// One period's line: the rates of `delta`, counted over `dt` seconds.
fn print_progress(json: bool, v: &VSwitch, delta: &Totals, t: Duration, dt: f64) {
    let mpps = delta.iter().map(|d| d[1]).sum::<u64>() as f64 / dt / 1e6;
    if json {
        let ports = port_json(v, delta, Some(dt));
        cli::json_line(
            "progress",
            serde_json::json!({"seconds": t.as_secs_f64(), "mpps": mpps, "learned": v.learned(), "ports": ports}),
        );
        return;
    }
    let parts: Vec<String> = delta
        .iter()
        .enumerate()
        .map(|(p, d)| {
            format!(
                "port {p}: rx {:.2} tx {:.2} Mpps, {} flooded",
                d[0] as f64 / dt / 1e6,
                d[1] as f64 / dt / 1e6,
                d[3]
            )
        })
        .collect();
    println!(
        "[{:6.1}s] {} | {} learned | total {mpps:.2} Mpps",
        t.as_secs_f64(),
        parts.join(" | "),
        v.learned()
    );
}

/// Each port's non-zero extended statistics.
fn nonzero_xstats(v: &VSwitch) -> Vec<Vec<(String, u64)>> {
    let nonzero = |x: Vec<rpmd_pmd::port::Xstat>| {
        x.into_iter()
            .filter(|s| s.value != 0)
            .map(|s| (s.name, s.value))
            .collect()
    };
    v.xstats().into_iter().map(nonzero).collect()
}

/// What the switch did, read after it stopped.
struct Summary {
    secs: f64,
    learned: usize,
    lcores: Vec<rpmd_apps::usage::LcoreUsage>,
    end: Totals,
    xstats: Vec<Vec<(String, u64)>>,
    device: Vec<rpmd_pmd::port::PortStats>,
}

impl Summary {
    fn sent(&self) -> u64 {
        self.end.iter().map(|e| e[1]).sum()
    }

    /// The demo stations' counts: sent, delivered, broadcasts,
    /// misdelivered.
    fn demo(v: &VSwitch) -> Option<[u64; 4]> {
        let d = v.demo.as_ref()?;
        Some([
            d.sent.get(),
            d.delivered.get(),
            d.broadcasts.get(),
            d.misdelivered.get(),
        ])
    }

    fn json(&self, v: &VSwitch, cfg: &Config) {
        let mut ports = port_json(v, &self.end, None);
        for (o, d) in ports.iter_mut().zip(&self.device) {
            o["port_stats"] = cli::device_drops_json(d);
        }
        for (o, x) in ports.iter_mut().zip(&self.xstats) {
            o["xstats"] = x
                .iter()
                .map(|(k, n)| (k.clone(), serde_json::json!(n)))
                .collect();
        }
        let caps: Vec<_> = v.captured.iter().map(|c| c.json()).collect();
        let demo = Self::demo(v).map(|d| serde_json::json!({"sent": d[0], "delivered": d[1], "broadcasts": d[2], "misdelivered": d[3]}));
        let (secs, sent) = (self.secs, self.sent());
        cli::json_line(
            "summary",
            serde_json::json!({"seconds": secs, "mpps": sent as f64 / secs / 1e6, "sent": sent, "learned": self.learned, "ports": ports, "demo": demo, "captures": caps,
                "poll": cfg.lcore.describe(), "lcores": rpmd_apps::usage::json(&self.lcores),
                "egress": rpmd_apps::egress::json(&v.egress)}),
        );
    }

    fn print(&self, v: &VSwitch) {
        let (secs, sent) = (self.secs, self.sent());
        println!(
            "summary: sent {sent} frames in {secs:.1} s ({:.2} Mpps), {} addresses learned",
            sent as f64 / secs / 1e6,
            self.learned
        );
        for (p, e) in self.end.iter().enumerate() {
            println!(
                "  port {p} ({}): rx {} tx {} dropped {} flooded {} filtered {}{}",
                v.names[p],
                e[0],
                e[1],
                e[2],
                e[3],
                e[4],
                self.device
                    .get(p)
                    .map(cli::device_drops)
                    .unwrap_or_default()
            );
            if let Some(x) = self.xstats.get(p) {
                let line: Vec<String> = x.iter().map(|(k, n)| format!("{k}={n}")).collect();
                println!("    xstats: {}", line.join(" "));
            }
        }
        if let Some([s, d, b, m]) = Self::demo(v) {
            println!("  demo stations: sent {s}, delivered {d}, broadcasts {b}, misdelivered {m} (floods before learning)");
        }
        for u in &self.lcores {
            println!("  {}", u.line());
        }
        for c in &v.captured {
            println!("  {}", c.line());
        }
        for line in rpmd_apps::egress::summary_lines(&v.egress, secs) {
            println!("  {line}");
        }
    }
}
