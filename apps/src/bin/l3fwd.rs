//! l3fwd: route IPv4 and IPv6 frames between ports, like DPDK's l3fwd.
//!
//! Prints per-port rates every second and a summary at exit, with drops
//! by reason (`--json`: JSON Lines, each with a `"type"`: `"progress"` or
//! `"summary"`). Exit status: 0 done, 1 failure, 2 bad usage.
use clap::Parser;
use rpmd_apps::cli;
use rpmd_apps::l3fwd::routes::{self, Lookup, Rule, Sizes};
use rpmd_apps::l3fwd::{Config, L3fwd, PortTotals, Reason};
use rpmd_apps::opts::PollOpts;
use rpmd_pmd::port::MacAddr;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// Layer-3 forwarding by longest-prefix match (--lookup lpm) or exact
/// 5-tuple match (--lookup em), like DPDK's l3fwd. Without rule files,
/// DPDK l3fwd's built-in rules: 198.18.K.0/24 and 2001:200:0:K::/64 to
/// port K (em: the UDP flow 198.18.K.0 -> 198.18.K.1, 9 -> 9).
#[derive(Parser, Debug)]
#[command(name = "l3fwd", version)]
struct Args {
    /// Cores to run on, DPDK style (0-1, 0,2).
    #[arg(short = 'l', long = "lcores", default_value = "0", value_parser = cli::core_list)]
    cores: String,
    /// Port mask in hex (bit i = port i, the i-th --dev; default: all).
    #[arg(short = 'p', long = "portmask", value_parser = cli::port_mask)]
    portmask: Option<u64>,
    /// A port, as a device string (virtio-user:PATH, vhost-user:PATH,
    /// shm:NAME, af_xdp:IFACE, pci:ADDR, ...); repeat for each.
    #[arg(long = "dev", value_parser = cli::device)]
    devices: Vec<String>,
    /// The lookup: lpm (longest-prefix match) or em (exact match).
    #[arg(long, default_value = "lpm")]
    lookup: Lookup,
    /// Exact match (DPDK's legacy flag; --lookup em).
    #[arg(short = 'E', conflicts_with_all = ["lookup", "lpm"])]
    em: bool,
    /// Longest-prefix match (DPDK's legacy flag; --lookup lpm).
    #[arg(short = 'L', conflicts_with = "lookup")]
    lpm: bool,
    /// IPv4 rules: `[R]PREFIX/LEN PORT [MAC]` (lpm) or
    /// `[R]DST SRC DPORT SPORT PROTO PORT [MAC]` (em, destination first as
    /// in DPDK's); DPDK's files load and route as they do in DPDK.
    #[arg(long = "rule-ipv4", alias = "rule_ipv4", value_name = "FILE")]
    rule_ipv4: Option<String>,
    /// IPv6 rules, in the same forms.
    #[arg(long = "rule-ipv6", alias = "rule_ipv6", value_name = "FILE")]
    rule_ipv6: Option<String>,
    /// Rx queues and their lcores: (port,queue,lcore)[,(port,queue,lcore)...]
    #[arg(long = "config", value_parser = parse_config)]
    config: Option<QueueMap>,
    /// Rx queues per port without --config (1..=8), spread over the lcores.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=8))]
    queues: u16,
    /// Next-hop MAC of port X where a rule names none: X,MM:MM:MM:MM:MM:MM
    /// (default 02:00:00:00:00:X); repeat for each port.
    #[arg(long = "eth-dest", value_parser = parse_eth_dest)]
    eth_dest: Vec<(usize, MacAddr)>,
    /// Promiscuous mode on every port.
    #[arg(short = 'P')]
    promiscuous: bool,
    /// Most IPv4 and IPv6 routes each.
    #[arg(long, default_value_t = 65536, value_parser = clap::value_parser!(u32).range(1..=(1 << 24)))]
    max_routes: u32,
    /// IPv4 second-level groups (one per /24 holding longer routes).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=(1 << 24)))]
    lpm_groups: u32,
    /// Most exact-match flows per family.
    #[arg(long, default_value_t = 65536, value_parser = clap::value_parser!(u32).range(1..=(1 << 24)))]
    max_flows: u32,
    /// Burst size (1..=256).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=256))]
    burst: u16,
    #[command(flatten)]
    poll: PollOpts,
    #[command(flatten)]
    report: rpmd_apps::opts::ReportOpts,
    #[command(flatten)]
    telemetry: rpmd_apps::opts::TelemetryOpts,
}

/// `--config`'s (port, queue, lcore) triples.
#[derive(Clone, Debug)]
struct QueueMap(Vec<(usize, u16, usize)>);

/// `(port,queue,lcore),...`
fn parse_config(s: &str) -> Result<QueueMap, String> {
    let bad = || format!("{s:?}: want (port,queue,lcore)[,(port,queue,lcore)...]");
    let mut out = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let body = rest.strip_prefix('(').ok_or_else(bad)?;
        let (inner, tail) = body.split_once(')').ok_or_else(bad)?;
        let f: Vec<&str> = inner.split(',').map(str::trim).collect();
        let [p, q, l] = f[..] else { return Err(bad()) };
        let num = |v: &str| v.parse::<usize>().map_err(|_| bad());
        let q = u16::try_from(num(q)?).map_err(|_| bad())?;
        out.push((num(p)?, q, num(l)?));
        rest = tail
            .trim_start()
            .strip_prefix(',')
            .unwrap_or(tail)
            .trim_start();
    }
    if out.is_empty() {
        return Err(bad());
    }
    Ok(QueueMap(out))
}

fn parse_eth_dest(s: &str) -> Result<(usize, MacAddr), String> {
    let (p, m) = s
        .split_once(',')
        .ok_or_else(|| format!("{s:?}: want PORT,MM:MM:MM:MM:MM:MM"))?;
    let p = p
        .parse()
        .map_err(|_| format!("{p:?} is not a port number"))?;
    let m = m.parse::<MacAddr>().map_err(|e| format!("{s:?}: {e}"))?;
    Ok((p, m))
}

/// The rules of both files (their family checked), or DPDK's built-in.
fn load_rules(a: &Args, lookup: Lookup) -> Result<Vec<Rule>, String> {
    if a.rule_ipv4.is_none() && a.rule_ipv6.is_none() {
        return Ok(routes::defaults(lookup));
    }
    let mut all = Vec::new();
    for (file, v6) in [(&a.rule_ipv4, false), (&a.rule_ipv6, true)] {
        let Some(file) = file else { continue };
        let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
        let rules = routes::parse(&text, file, lookup)?;
        if let Some(r) = rules
            .iter()
            .find(|r| matches!(r, Rule::Prefix6(..) | Rule::Flow6(..)) != v6)
        {
            let opt = if v6 { "--rule-ipv6" } else { "--rule-ipv4" };
            return Err(format!("{file}: {r:?} is not of {opt}'s family"));
        }
        all.extend(rules);
    }
    Ok(all)
}

fn config(a: &Args) -> Result<Config, String> {
    let lookup = if a.em { Lookup::Em } else { a.lookup };
    let n = a.devices.len();
    if n == 0 {
        return Err("no --dev: give each port as a device string".into());
    }
    let portmask = a.portmask.unwrap_or(rpmd_apps::l2fwd::all_ports(n));
    rpmd_apps::l2fwd::check_portmask(portmask, n)?;
    let mut sizes = Sizes::default();
    sizes.lpm4.max_rules = a.max_routes;
    sizes.lpm4.groups = a.lpm_groups;
    sizes.lpm6.max_rules = a.max_routes;
    sizes.flows = a.max_flows as usize;
    Ok(Config {
        cores: a.cores.clone(),
        devices: a.devices.clone(),
        portmask,
        lookup,
        rules: load_rules(a, lookup)?,
        sizes,
        queue_map: a.config.clone().map(|m| m.0).unwrap_or_default(),
        queues: a.queues,
        eth_dest: a.eth_dest.iter().copied().collect::<BTreeMap<_, _>>(),
        promiscuous: a.promiscuous,
        burst: a.burst as usize,
        lcore: a.poll.lcore_config(),
        mbufs: 8192,
        telemetry: a.telemetry.prefix(),
    })
}

fn progress(l: &L3fwd, now: &[PortTotals], last: &[PortTotals], t: Duration, dt: f64, json: bool) {
    let rate = |a: u64, b: u64| (a - b) as f64 / dt;
    if json {
        let ports: Vec<_> = now
            .iter()
            .zip(last)
            .zip(&l.port_ids)
            .map(|((n, o), id)| serde_json::json!({"port": id, "rx_pps": rate(n.rx, o.rx), "tx_pps": rate(n.tx, o.tx), "dropped": n.dropped() - o.dropped()}))
            .collect();
        let tx: u64 = now.iter().zip(last).map(|(n, o)| n.tx - o.tx).sum();
        cli::json_line(
            "progress",
            serde_json::json!({"seconds": t.as_secs_f64(), "ports": ports, "mpps": tx as f64 / dt / 1e6}),
        );
        return;
    }
    let parts: Vec<String> = now
        .iter()
        .zip(last)
        .zip(&l.port_ids)
        .map(|((n, o), id)| {
            format!(
                "port {id}: rx {:.2} Mpps tx {:.2} Mpps drop {}",
                rate(n.rx, o.rx) / 1e6,
                rate(n.tx, o.tx) / 1e6,
                n.dropped() - o.dropped()
            )
        })
        .collect();
    let tx: u64 = now.iter().zip(last).map(|(n, o)| n.tx - o.tx).sum();
    println!(
        "[{:6.1}s] {} | total {:.2} Mpps",
        t.as_secs_f64(),
        parts.join(" | "),
        tx as f64 / dt / 1e6
    );
}

fn summary(
    l: &L3fwd,
    cfg: &Config,
    elapsed: f64,
    lcores: &[rpmd_apps::usage::LcoreUsage],
    json: bool,
) {
    let end = l.totals();
    let device = l.port_stats();
    let fwd: u64 = end.iter().map(|e| e.tx).sum();
    let mpps = fwd as f64 / elapsed / 1e6;
    if json {
        let mut s = l.json();
        for (k, p) in s["ports"].as_array_mut().into_iter().flatten().enumerate() {
            p["device"] = serde_json::json!(l.names.get(k));
            p["port_stats"] = device
                .get(k)
                .map(cli::device_drops_json)
                .unwrap_or_default();
        }
        s["seconds"] = serde_json::json!(elapsed);
        s["forwarded"] = serde_json::json!(fwd);
        s["mpps"] = serde_json::json!(mpps);
        s["poll"] = serde_json::json!(cfg.lcore.describe());
        s["lcores"] = rpmd_apps::usage::json(lcores);
        cli::json_line("summary", s);
        return;
    }
    let dropped: u64 = end.iter().map(PortTotals::dropped).sum();
    println!(
        "summary: forwarded {fwd} frames in {elapsed:.1} s ({mpps:.2} Mpps), dropped {dropped}"
    );
    for (k, e) in end.iter().enumerate() {
        let reasons: Vec<String> = Reason::ALL
            .iter()
            .zip(e.drops)
            .map(|(r, n)| format!("{} {n}", r.name()))
            .collect();
        println!(
            "  port {} ({}): rx {} tx {} dropped {} ({}){}",
            l.port_ids[k],
            l.names[k],
            e.rx,
            e.tx,
            e.dropped(),
            reasons.join(", "),
            device.get(k).map(cli::device_drops).unwrap_or_default()
        );
    }
    for u in lcores {
        println!("  {}", u.line());
    }
}

fn main() -> ExitCode {
    let a = Args::parse();
    rpmd_apps::opts::init_logging();
    if let Err(e) = cli::check_devices(&a.devices) {
        return e.report("l3fwd");
    }
    let cfg = match config(&a) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("l3fwd: {e}");
            return ExitCode::from(cli::USAGE);
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    if let Err(e) = ctrlc::set_handler(move || s2.store(true, Relaxed)) {
        eprintln!("l3fwd: cannot catch Ctrl-C: {e}");
    }
    let mut l = match L3fwd::start(&cfg) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("l3fwd: {e}");
            return ExitCode::from(cli::FAILURE);
        }
    };
    if !a.report.json {
        let t = &l.tables;
        println!(
            "l3fwd: ports {:?}, lcores {}, lookup {}: {} rules, {} next hops{}",
            l.names,
            a.cores,
            t.lookup.name(),
            t.rules,
            t.hops.len(),
            match t.skipped {
                0 => String::new(),
                k => format!(" ({k} rules skipped: their ports are not in use)"),
            }
        );
        println!("l3fwd: {}", cfg.lcore.describe());
    }
    let mut last = l.totals();
    let mut last_t = Duration::ZERO;
    let mut links = rpmd_apps::link::LinkWatch::default();
    let ran = cli::run_periodically(
        a.report.duration.map(Duration::from_secs_f64),
        Duration::from_secs_f64(a.report.period),
        &stop,
        |t| {
            let now = l.totals();
            progress(
                &l,
                &now,
                &last,
                t,
                (t - last_t).as_secs_f64().max(1e-9),
                a.report.json,
            );
            for line in links.changes(&l.link_states(), &l.port_ids, &l.names) {
                eprintln!("l3fwd: {line}");
            }
            (last, last_t) = (now, t);
        },
    );
    let lcores = l.lcore_report();
    let down = l.stop();
    summary(
        &l,
        &cfg,
        ran.max(Duration::from_millis(1)).as_secs_f64(),
        &lcores,
        a.report.json,
    );
    if let Err(e) = down {
        eprintln!("l3fwd: {e}");
        return ExitCode::from(cli::FAILURE);
    }
    ExitCode::SUCCESS
}
