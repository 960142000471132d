//! `compare_mempool`: DPDK's `mempool_perf_autotest` against our
//! `mempool_perf` on the same cases. DPDK's test runs every case for 5 s
//! (about an hour in all), so `--dpdk-seconds S` stops it after S seconds
//! and compares the cases it finished; ours then runs exactly those cases,
//! each for `--seconds` (default 5, as DPDK). Prints DPDK and rpmd
//! `rate_persec` and the ratio DPDK ÷ rpmd per case (≤ 1.0: we are at least
//! as fast), ending with `RESULT mempool worst_ratio=<x>`.
//!
//! Usage: `compare_mempool [--dpdk-seconds S] [--seconds S] [--huge-dir DIR]`
use std::process::{Command, Stdio};

fn parse(out: &str) -> Vec<(String, f64)> {
    out.lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("mempool_autotest ")?;
            let (case, rate) = rest.rsplit_once(" rate_persec=")?;
            Some((case.to_string(), rate.trim().parse().ok()?))
        })
        .collect()
}

fn main() {
    let mut dpdk_secs = 0u64;
    let mut secs = "5".to_string();
    let mut huge = "/mnt/rpmd-huge".to_string();
    let mut a = std::env::args().skip(1);
    while let Some(k) = a.next() {
        let v = a.next();
        match (k.as_str(), v) {
            ("--dpdk-seconds", Some(v)) if v.parse::<u64>().is_ok() => {
                dpdk_secs = v.parse().unwrap_or(0)
            }
            ("--seconds", Some(v)) if v.parse::<f64>().is_ok_and(|s| s > 0.0) => secs = v,
            ("--huge-dir", Some(v)) => huge = v,
            _ => {
                eprintln!("compare_mempool: bad argument {k:?}; usage: compare_mempool [--dpdk-seconds S] [--seconds S] [--huge-dir DIR]");
                std::process::exit(2);
            }
        }
    }
    eprintln!(
        "DPDK mempool_perf_autotest ({})",
        if dpdk_secs == 0 {
            "all cases, about an hour".to_string()
        } else {
            format!("first {dpdk_secs} s")
        }
    );
    let mut cmd = Command::new("timeout");
    cmd.arg(if dpdk_secs == 0 {
        "7200".to_string()
    } else {
        dpdk_secs.to_string()
    })
    .args([
        "stdbuf",
        "-oL",
        "dpdk-test",
        "--no-pci",
        "-l",
        "0-1",
        "--file-prefix=rpmd-mp",
        "--huge-unlink",
        "-m",
        "128",
    ])
    .args(["--huge-dir", &huge, "--log-level=lib.eal:error"])
    .env("DPDK_TEST", "mempool_perf_autotest")
    .stdin(Stdio::null());
    let out = match cmd.output() {
        Ok(o) => String::from_utf8_lossy(&o.stdout).into_owned(),
        Err(e) => {
            eprintln!("compare_mempool: cannot run dpdk-test: {e}");
            std::process::exit(1);
        }
    };
    let dpdk = parse(&out);
    if dpdk.is_empty() {
        eprintln!("compare_mempool: dpdk-test finished no case:\n{out}");
        std::process::exit(1);
    }
    let ours_bin = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("mempool_perf")))
        .unwrap_or_else(|| "mempool_perf".into());
    println!(
        "{:<78} {:>12} {:>12} {:>8}",
        "case", "DPDK/s", "rpmd/s", "DPDK/rpmd"
    );
    let mut worst = 0.0f64;
    for (case, d) in &dpdk {
        let r = Command::new(&ours_bin)
            .args(["--seconds", &secs, "--case", case])
            .output();
        let ours = r
            .ok()
            .map(|o| parse(&String::from_utf8_lossy(&o.stdout)))
            .and_then(|v| v.first().map(|x| x.1));
        match ours {
            Some(o) if o > 0.0 => {
                let ratio = d / o;
                worst = worst.max(ratio);
                println!("{case:<78} {d:>12.0} {o:>12.0} {ratio:>8.3}");
            }
            _ => {
                println!("{case:<78} {d:>12.0} {:>12} {:>8}", "failed", "-");
                worst = f64::INFINITY;
            }
        }
    }
    println!("RESULT mempool worst_ratio={worst:.3}");
}
