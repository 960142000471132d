//! `compare_l2fwd`: rpmd's l2fwd against DPDK's testpmd forwarding between
//! the same two vhost-user ports.
//!
//! The generator is testpmd with two `net_vhost` ports in flowgen mode on
//! CPU 0 ([`rpmd_benches::flowgen`]): it sends on both ports and receives
//! (and frees) what comes back.
//! The device under test runs on CPU 1 with two virtio-user ports, one per
//! vhost port, forwarding 0 -> 1 and 1 -> 0: either DPDK's testpmd
//! (`net_virtio_user`, io or mac forwarding) or rpmd's l2fwd (`--no-mac-
//! updating` for io, MAC rewrite for mac). Both are measured the same way:
//! the frames per second the generator receives back (its `Rx-pps`, both
//! ports summed, medians over the run with the first two seconds dropped).
//! Runs alternate DPDK, rpmd.
//!
//! Cases: io and mac forwarding at 64 and 1518 bytes, burst 32; with
//! `--sweep`, io at 64 bytes for bursts 1, 2, 4, ... 256 as well. Prints a
//! table with DPDK ÷ rpmd ratios, writes the rows as CSV (`--csv FILE`),
//! and ends with `RESULT l2fwd worst_ratio=<x>` (and `RESULT l2fwd_batch`
//! for the sweep).
//!
//! Usage: `compare_l2fwd --l2fwd PATH --huge-dir DIR [--runs N]
//! [--seconds S] [--sweep] [--csv FILE]`
use rpmd_benches::{flowgen, median};
use std::process::Command;

struct Opts {
    l2fwd: String,
    huge: String,
    runs: usize,
    secs: f64,
}

fn run_dpdk(o: &Opts, mode: &str, size: usize, burst: usize) -> f64 {
    flowgen::measure(&o.huge, size, o.secs, Some("cldut"), |s| {
        let mut c = flowgen::dpdk_dut(
            "dpdk-testpmd",
            &["--lcores", "0@1,1@1"],
            "cldut",
            &o.huge,
            s,
        );
        c.arg("--")
            .arg(format!("--forward-mode={mode}"))
            .arg(format!("--burst={burst}"))
            .args(["--total-num-mbufs=16384", "-a"]);
        c
    })
}

fn run_ours(o: &Opts, mode: &str, size: usize, burst: usize) -> f64 {
    flowgen::measure(&o.huge, size, o.secs, None, |s| {
        let mut c = Command::new(&o.l2fwd);
        c.args(["-l", "1", "--dev"])
            .arg(format!("virtio-user:{}", s[0]))
            .arg("--dev")
            .arg(format!("virtio-user:{}", s[1]))
            .arg(format!("--burst={burst}"))
            .arg(format!("--duration={}", o.secs + 3.0))
            .args(["--json", "--period", "10"]);
        if mode == "io" {
            c.arg("--no-mac-updating");
        }
        c
    })
}

fn main() {
    let mut a = std::env::args().skip(1);
    let mut o = Opts {
        l2fwd: "target/release/l2fwd".into(),
        huge: "/mnt/rpmd-huge".into(),
        runs: 3,
        secs: 4.0,
    };
    let (mut sweep, mut csv) = (false, None::<String>);
    while let Some(k) = a.next() {
        match k.as_str() {
            "--sweep" => sweep = true,
            _ => match (k.as_str(), a.next()) {
                ("--l2fwd", Some(v)) => o.l2fwd = v,
                ("--huge-dir", Some(v)) => o.huge = v,
                ("--csv", Some(v)) => csv = Some(v),
                ("--runs", Some(v)) if v.parse::<usize>().is_ok_and(|n| n > 0) => {
                    o.runs = v.parse().unwrap_or(3)
                }
                ("--seconds", Some(v)) if v.parse::<f64>().is_ok_and(|s| s >= 1.0) => {
                    o.secs = v.parse().unwrap_or(4.0)
                }
                _ => {
                    eprintln!("usage: compare_l2fwd [--l2fwd PATH] [--huge-dir DIR] [--runs N] [--seconds S>=1] [--sweep] [--csv FILE]");
                    std::process::exit(2);
                }
            },
        }
    }
    println!("generator: testpmd flowgen on two vhost-user ports, CPU 0; device under test on CPU 1: testpmd (net_virtio_user) vs rpmd l2fwd (virtio-user); {} interleaved runs of {} s, medians of the generator's Rx-pps", o.runs, o.secs);
    println!(
        "{:<6} {:>6} {:>6} {:>10} {:>10} {:>10}",
        "mode", "bytes", "burst", "DPDK Mpps", "rpmd Mpps", "DPDK/rpmd"
    );
    let mut rows = Vec::new();
    let mut cases: Vec<(&str, usize, usize)> = vec![
        ("io", 64, 32),
        ("mac", 64, 32),
        ("io", 1518, 32),
        ("mac", 1518, 32),
    ];
    if sweep {
        for b in [1, 2, 4, 8, 16, 64, 128, 256] {
            cases.push(("io", 64, b));
        }
    }
    for (mode, size, burst) in cases {
        let (mut d, mut r) = (Vec::new(), Vec::new());
        for _ in 0..o.runs {
            d.push(run_dpdk(&o, mode, size, burst));
            r.push(run_ours(&o, mode, size, burst));
        }
        let (dm, rm) = (median(d), median(r));
        let ratio = if rm > 0.0 { dm / rm } else { f64::INFINITY };
        println!("{mode:<6} {size:>6} {burst:>6} {dm:>10.3} {rm:>10.3} {ratio:>10.3}");
        rows.push((mode, size, burst, dm, rm, ratio));
    }
    if let Some(path) = csv {
        let mut s = String::from("mode,bytes,burst,dpdk_mpps,rpmd_mpps,ratio\n");
        for (m, sz, b, d, r, x) in &rows {
            s += &format!("{m},{sz},{b},{d:.4},{r:.4},{x:.4}\n");
        }
        if let Err(e) = std::fs::write(&path, s) {
            eprintln!("compare_l2fwd: {path}: {e}");
        }
    }
    flowgen::clean();
    // A side that forwarded nothing is a failed run, not a ratio.
    let failed: Vec<String> = rows
        .iter()
        .filter(|r| r.3 <= 0.0 || r.4 <= 0.0)
        .map(|r| format!("{} {} burst {}", r.0, r.1, r.2))
        .collect();
    if !failed.is_empty() {
        eprintln!(
            "compare_l2fwd: no RESULT: a forwarder forwarded nothing in {} (its log above)",
            failed.join(", ")
        );
        std::process::exit(1);
    }
    let worst = |f: &dyn Fn(usize) -> bool| {
        rows.iter()
            .filter(|r| f(r.2))
            .map(|r| r.5)
            .fold(0.0f64, f64::max)
    };
    println!("RESULT l2fwd worst_ratio={:.3}", worst(&|b| b == 32));
    if sweep {
        println!("RESULT l2fwd_batch worst_ratio={:.3}", worst(&|_| true));
    }
}
