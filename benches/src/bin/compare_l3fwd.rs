//! `compare_l3fwd`: rpmd's l3fwd against DPDK's own l3fwd example (built
//! from the dpdk-doc package's sources against libdpdk, as a DPDK user
//! builds it) between the same two vhost-user ports.
//!
//! The generator is testpmd flowgen on CPU 0 ([`rpmd_benches::flowgen`]):
//! UDP from 10.254.0.0 to 10.253.0.0 + flow, 1024 flows, on both ports.
//! The router under test runs on CPU 1 with a virtio-user port on each of
//! the generator's sockets and the same rules: LPM, 10.253.0.0/23 to
//! port 0 and 10.253.2.0/23 to port 1; EM, the 1024 flows' 5-tuples, even
//! flows to port 0 and odd ones to port 1 (both in DPDK's rule-file
//! format, with one IPv6 rule each, as DPDK's l3fwd wants both files).
//! Both are measured the same way: the frames per second the generator
//! receives back. Before the timed runs each router is run once with rules
//! that send every flow to port 0: the generator must then receive on port
//! 0 only. A rule file a router reads differently (DPDK's l3fwd sends a
//! frame no rule matches back out of its input port) fails the suite
//! instead of timing a router that looks nothing up. Cases: lpm and em at 64 and 512 bytes; runs alternate
//! DPDK, rpmd. Each row's ratio is DPDK's Mpps ÷ rpmd's, that is rpmd's
//! time per frame over DPDK's: below 1, rpmd is faster. The run ends with
//! `RESULT l3fwd worst_ratio=<x> geomean=<y>`.
//!
//! Usage: `compare_l3fwd --dpdk-l3fwd PATH [--l3fwd PATH] [--huge-dir DIR] [--runs N] [--seconds S]`
use rpmd_benches::{flowgen, median};
use std::process::Command;

struct Opts {
    dpdk: String,
    ours: String,
    huge: String,
    runs: usize,
    secs: f64,
    rules: (String, String, String, String),
    /// The same rules with every route to port 0: (lpm v4, em v4).
    to_port0: (String, String),
}

/// Writes a rule file named `name` (in the temporary directory).
fn rule_file(name: &str, text: String) -> String {
    let p = std::env::temp_dir().join(format!("rpmd-cl3-{}-{name}", std::process::id()));
    std::fs::write(&p, text).expect("the rule files");
    p.display().to_string()
}

/// The generator's 1024 flows as exact-match rules, flow k to port
/// `port(k)`, in DPDK's order: destination, source, their ports.
fn em_rules(port: impl Fn(u32) -> u32) -> String {
    (0..1024u32)
        .map(|k| {
            let d = std::net::Ipv4Addr::from(u32::from(std::net::Ipv4Addr::new(10, 253, 0, 0)) + k);
            format!("R{d} 10.254.0.0 1001 1000 0x11 {}\n", port(k))
        })
        .collect()
}

/// Writes the rule files: (lpm v4, lpm v6, em v4, em v6).
fn rule_files() -> (String, String, String, String) {
    (
        rule_file("lpm4", "R10.253.0.0/23 0\nR10.253.2.0/23 1\n".into()),
        rule_file("lpm6", "R2001:db8::/32 0\n".into()),
        rule_file("em4", em_rules(|k| k & 1)),
        rule_file("em6", "R2001:db8::1 2001:db8::2 9 9 0x11 0\n".into()),
    )
}

fn rules(o: &Opts, lookup: &str) -> [String; 2] {
    let r = &o.rules;
    match lookup {
        "lpm" => [r.0.clone(), r.1.clone()],
        _ => [r.2.clone(), r.3.clone()],
    }
}

/// Which router a run measures.
#[derive(Clone, Copy)]
enum Router {
    Dpdk,
    Rpmd,
}

/// Runs `router` with rules `r` (IPv4, IPv6) for `secs` and returns the
/// generator's per-second rates on each port.
fn run(
    o: &Opts,
    router: Router,
    lookup: &str,
    r: [String; 2],
    size: usize,
    secs: f64,
) -> Vec<[f64; 2]> {
    let prefix = match router {
        Router::Dpdk => Some("cl3dut"),
        Router::Rpmd => None,
    };
    flowgen::measure_ports(&o.huge, size, secs, prefix, |s| match router {
        Router::Dpdk => dpdk_command(o, lookup, &r, s),
        Router::Rpmd => ours_command(o, lookup, &r, s, secs),
    })
}

/// Runs `router` with every route to port 0 and checks that the generator
/// received on port 0 only: the router read the rules as meant and looked
/// every frame up.
fn check_routing(o: &Opts, router: Router, lookup: &str) -> Result<(), String> {
    let r4 = match lookup {
        "lpm" => o.to_port0.0.clone(),
        _ => o.to_port0.1.clone(),
    };
    let r6 = rules(o, lookup)[1].clone();
    let per_sec = run(o, router, lookup, [r4, r6], 64, 1.0);
    let port = |i: usize| median(per_sec.iter().map(|p| p[i]).collect());
    let (p0, p1) = (port(0), port(1));
    let name = match router {
        Router::Dpdk => "DPDK's l3fwd",
        Router::Rpmd => "rpmd's l3fwd",
    };
    if p0 <= 0.0 || p1 > p0 * 0.01 {
        return Err(format!(
            "{name} --lookup {lookup} with every route to port 0: the generator received {p0:.0} frames/s on port 0 and {p1:.0} on port 1 (a frame no rule matches goes back out of its input port in DPDK's l3fwd and is dropped in rpmd's)"
        ));
    }
    eprintln!(
        "  routing check {lookup}: {name} sent {p0:.0} frames/s to port 0, {p1:.0} to port 1"
    );
    Ok(())
}

/// DPDK's l3fwd on the generator's sockets `s` with rules `r` (v4, v6).
fn dpdk_command(o: &Opts, lookup: &str, [r4, r6]: &[String; 2], s: &[String; 2]) -> Command {
    let mut c = flowgen::dpdk_dut(&o.dpdk, &["-l", "1"], "cl3dut", &o.huge, s);
    c.args([
        "--",
        "-p",
        "0x3",
        "--config",
        "(0,0,1),(1,0,1)",
        "--parse-ptype",
    ])
    .arg(format!("--lookup={lookup}"))
    .arg(format!("--rule_ipv4={r4}"))
    .arg(format!("--rule_ipv6={r6}"));
    c
}

/// rpmd's l3fwd on the generator's sockets `s` with rules `r`, for `secs`.
fn ours_command(
    o: &Opts,
    lookup: &str,
    [r4, r6]: &[String; 2],
    s: &[String; 2],
    secs: f64,
) -> Command {
    let mut c = Command::new(&o.ours);
    c.args(["-l", "1", "--poll", "spin", "--no-telemetry"])
        .args(["--dev", &format!("virtio-user:{}", s[0])])
        .args(["--dev", &format!("virtio-user:{}", s[1])])
        .args(["--lookup", lookup, "--rule-ipv4", r4, "--rule-ipv6", r6])
        .arg(format!("--duration={}", secs + 3.0))
        .args(["--json", "--period", "10"]);
    c
}

fn opts() -> Opts {
    let mut a = std::env::args().skip(1);
    let mut o = Opts {
        dpdk: String::new(),
        ours: "target/release/l3fwd".into(),
        huge: "/mnt/rpmd-huge".into(),
        runs: 3,
        secs: 4.0,
        rules: Default::default(),
        to_port0: Default::default(),
    };
    while let Some(k) = a.next() {
        match (k.as_str(), a.next()) {
            ("--dpdk-l3fwd", Some(v)) => o.dpdk = v,
            ("--l3fwd", Some(v)) => o.ours = v,
            ("--huge-dir", Some(v)) => o.huge = v,
            ("--runs", Some(v)) if v.parse::<usize>().is_ok_and(|n| n > 0) => {
                o.runs = v.parse().unwrap_or(3)
            }
            ("--seconds", Some(v)) if v.parse::<f64>().is_ok_and(|s| s >= 1.0) => {
                o.secs = v.parse().unwrap_or(4.0)
            }
            _ => {
                eprintln!("usage: compare_l3fwd --dpdk-l3fwd PATH [--l3fwd PATH] [--huge-dir DIR] [--runs N] [--seconds S>=1]");
                std::process::exit(2);
            }
        }
    }
    if o.dpdk.is_empty() {
        eprintln!(
            "compare_l3fwd: --dpdk-l3fwd PATH is required (compare.sh builds it from dpdk-doc)"
        );
        std::process::exit(2);
    }
    o.rules = rule_files();
    o.to_port0 = (
        rule_file("lpm4-0", "R10.253.0.0/22 0\n".into()),
        rule_file("em4-0", em_rules(|_| 0)),
    );
    o
}

fn main() {
    let o = opts();
    println!("generator: testpmd flowgen on two vhost-user ports, CPU 0; router on CPU 1: DPDK's l3fwd (net_virtio_user) vs rpmd's l3fwd (virtio-user, --poll spin); {} interleaved runs of {} s, medians of the generator's Rx-pps", o.runs, o.secs);
    println!(
        "{:<6} {:>6} {:>10} {:>10} {:>10}",
        "lookup", "bytes", "DPDK Mpps", "rpmd Mpps", "DPDK/rpmd"
    );
    let mut plot = rpmd_benches::PlotCsv::from_env(&["DPDK", "rpmd"]);
    let (mut worst, mut logs, mut n) = (0.0f64, 0.0f64, 0);
    let mut failed = Vec::new();
    let checks: Vec<String> = ["lpm", "em"]
        .into_iter()
        .flat_map(|l| [(Router::Dpdk, l), (Router::Rpmd, l)])
        .filter_map(|(router, l)| check_routing(&o, router, l).err())
        .collect();
    if !checks.is_empty() {
        remove_files(&o);
        for c in &checks {
            eprintln!("compare_l3fwd: no RESULT: {c}");
        }
        std::process::exit(1);
    }
    // Mpps, both ports, the median second.
    let rate = |router, lookup, size| {
        let v = run(&o, router, lookup, rules(&o, lookup), size, o.secs);
        median(v.iter().map(|p| p[0] + p[1]).collect()) / 1e6
    };
    for (lookup, size) in [("lpm", 64), ("em", 64), ("lpm", 512), ("em", 512)] {
        let (mut d, mut r) = (Vec::new(), Vec::new());
        for i in 0..o.runs {
            d.push(rate(Router::Dpdk, lookup, size));
            r.push(rate(Router::Rpmd, lookup, size));
            eprintln!(
                "  {lookup} {size} run {}: DPDK {:.3} rpmd {:.3} Mpps",
                i + 1,
                d[i],
                r[i]
            );
        }
        let (dm, rm) = (median(d), median(r));
        if dm <= 0.0 || rm <= 0.0 {
            failed.push(format!("{lookup} {size}"));
        }
        let ratio = if rm > 0.0 { dm / rm } else { f64::INFINITY };
        println!("{lookup:<6} {size:>6} {dm:>10.3} {rm:>10.3} {ratio:>10.3}");
        plot.row(&format!("{lookup} {size}"), &[dm, rm]);
        worst = worst.max(ratio);
        logs += ratio.ln();
        n += 1;
    }
    remove_files(&o);
    // A router that forwarded nothing is a failed run, not a ratio.
    if !failed.is_empty() {
        eprintln!(
            "compare_l3fwd: no RESULT: a router forwarded nothing in {} (its log above)",
            failed.join(", ")
        );
        std::process::exit(1);
    }
    println!(
        "RESULT l3fwd worst_ratio={worst:.3} geomean={:.3}",
        (logs / n as f64).exp()
    );
}

fn remove_files(o: &Opts) {
    flowgen::clean();
    let r = &o.rules;
    for f in [&r.0, &r.1, &r.2, &r.3, &o.to_port0.0, &o.to_port0.1] {
        let _ = std::fs::remove_file(f);
    }
}
