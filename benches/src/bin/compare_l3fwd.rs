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
//! receives back. Cases: lpm and em at 64 and 512 bytes; runs alternate
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
}

/// Writes the rule files: (lpm v4, lpm v6, em v4, em v6).
fn rule_files() -> (String, String, String, String) {
    let dir = std::env::temp_dir();
    let f = |name: &str, text: String| {
        let p = dir.join(format!("rpmd-cl3-{}-{name}", std::process::id()));
        std::fs::write(&p, text).expect("the rule files");
        p.display().to_string()
    };
    let em: String = (0..1024u32)
        .map(|k| {
            let d = std::net::Ipv4Addr::from(u32::from(std::net::Ipv4Addr::new(10, 253, 0, 0)) + k);
            format!("R10.254.0.0 {d} 1000 1001 0x11 {}\n", k & 1)
        })
        .collect();
    (
        f("lpm4", "R10.253.0.0/23 0\nR10.253.2.0/23 1\n".into()),
        f("lpm6", "R2001:db8::/32 0\n".into()),
        f("em4", em),
        f("em6", "R2001:db8::1 2001:db8::2 9 9 0x11 0\n".into()),
    )
}

fn rules(o: &Opts, lookup: &str) -> [String; 2] {
    let r = &o.rules;
    match lookup {
        "lpm" => [r.0.clone(), r.1.clone()],
        _ => [r.2.clone(), r.3.clone()],
    }
}

fn run_dpdk(o: &Opts, lookup: &str, size: usize) -> f64 {
    let [r4, r6] = rules(o, lookup);
    flowgen::measure(&o.huge, size, o.secs, Some("cl3dut"), |s| {
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
    })
}

fn run_ours(o: &Opts, lookup: &str, size: usize) -> f64 {
    let [r4, r6] = rules(o, lookup);
    flowgen::measure(&o.huge, size, o.secs, None, |s| {
        let mut c = Command::new(&o.ours);
        c.args(["-l", "1", "--poll", "spin", "--no-telemetry"])
            .args(["--dev", &format!("virtio-user:{}", s[0])])
            .args(["--dev", &format!("virtio-user:{}", s[1])])
            .args(["--lookup", lookup, "--rule-ipv4", &r4, "--rule-ipv6", &r6])
            .arg(format!("--duration={}", o.secs + 3.0))
            .args(["--json", "--period", "10"]);
        c
    })
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
    for (lookup, size) in [("lpm", 64), ("em", 64), ("lpm", 512), ("em", 512)] {
        let (mut d, mut r) = (Vec::new(), Vec::new());
        for i in 0..o.runs {
            d.push(run_dpdk(&o, lookup, size));
            r.push(run_ours(&o, lookup, size));
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
    flowgen::clean();
    for f in [&o.rules.0, &o.rules.1, &o.rules.2, &o.rules.3] {
        let _ = std::fs::remove_file(f);
    }
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
