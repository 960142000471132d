//! `compare_mempool`: DPDK's `rte_mempool` against rpmd's mempool, case by
//! case, on the cases of DPDK's `mempool_perf_autotest`.
//!
//! DPDK side: `mempool_peer` (benches/dpdk/mempool_peer.c, built against
//! Debian's libdpdk by compare.sh) runs the autotest's loop for one case:
//! `rte_mempool_generic_get/put` of `void *` objects through the lcore's
//! default cache, on a pool made as the autotest makes it. (`dpdk-test`
//! itself runs all cases in a fixed order for 5 s each, about an hour, and
//! cannot interleave.) rpmd side: `mempool_perf` on raw objects bound to
//! the lcore's view (`LocalObjs`), the same level; with `--mbuf`, also on
//! `Mbuf` handles, for information.
//!
//! Runs are interleaved, DPDK then rpmd, `--runs` times per case; the table
//! shows medians and the ratio DPDK ÷ rpmd (≤ 1.0: we are at least as
//! fast), then `pairs`, the lowest and highest ratio of one run's DPDK
//! figure to the rpmd run after it, and ends with
//! `RESULT mempool worst_ratio=<x>`.
//!
//! With `--aa`, DPDK runs on both sides (A/A), ending `RESULT mempool_aa
//! worst_ratio=<x>`: how far a row at parity reads from 1.0 by noise.
//!
//! Usage: `compare_mempool --peer PATH [--runs N] [--seconds S] [--all]
//! [--mbuf] [--aa] [--huge-dir DIR]`
use rpmd_benches::median;
use std::process::{Command, Stdio};

fn rate(out: &[u8]) -> Option<f64> {
    String::from_utf8_lossy(out).lines().find_map(|l| {
        let (_, r) = l.trim().rsplit_once(" rate_persec=")?;
        r.trim().parse().ok()
    })
}

struct Opts {
    peer: String,
    runs: usize,
    secs: String,
    all: bool,
    mbuf: bool,
    huge: String,
    aa: bool,
}

fn usage() -> ! {
    eprintln!("usage: compare_mempool --peer PATH [--runs N] [--seconds S] [--all] [--mbuf] [--aa] [--huge-dir DIR]");
    std::process::exit(2)
}

fn opts() -> Opts {
    let mut o = Opts {
        peer: String::new(),
        runs: 3,
        secs: "1".into(),
        all: false,
        mbuf: false,
        huge: "/mnt/rpmd-huge".into(),
        aa: false,
    };
    let mut a = std::env::args().skip(1);
    while let Some(k) = a.next() {
        match k.as_str() {
            "--all" => o.all = true,
            "--mbuf" => o.mbuf = true,
            "--aa" => o.aa = true,
            "--peer" => o.peer = a.next().unwrap_or_else(|| usage()),
            "--huge-dir" => o.huge = a.next().unwrap_or_else(|| usage()),
            "--runs" => match a.next().and_then(|v| v.parse().ok()) {
                Some(n) if n > 0 => o.runs = n,
                _ => usage(),
            },
            "--seconds" => match a.next() {
                Some(v) if v.parse::<f64>().is_ok_and(|s| s > 0.0) => o.secs = v,
                _ => usage(),
            },
            _ => usage(),
        }
    }
    if o.peer.is_empty() {
        usage();
    }
    o
}

fn main() {
    let mut o = opts();
    // A/A: DPDK on both sides; there is no rpmd Mbuf column then.
    o.mbuf &= !o.aa;
    let ours = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("mempool_perf")))
        .unwrap_or_else(|| "mempool_perf".into());
    let list = Command::new(&ours)
        .args(if o.all {
            vec!["--list"]
        } else {
            vec!["--list", "--quick"]
        })
        .output()
        .unwrap_or_else(|e| {
            eprintln!("compare_mempool: cannot run {}: {e}", ours.display());
            std::process::exit(1)
        });
    let cases: Vec<String> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let dpdk_run = |case: &str| {
        Command::new(&o.peer)
            .args([
                "--no-pci",
                "-l",
                "0-1",
                "--file-prefix=rpmd-mpp",
                "--huge-unlink",
                "-m",
                "128",
            ])
            .args([
                "--huge-dir",
                &o.huge,
                "--log-level=lib.eal:error",
                "--log-level=lib.telemetry:error",
            ])
            .args(["--", "--seconds", &o.secs, "--case", case])
            .stdin(Stdio::null())
            .output()
            .ok()
            .and_then(|out| rate(&out.stdout))
    };
    let ours_run = |case: &str, mbuf: bool| {
        let mut c = Command::new(&ours);
        c.args(["--seconds", &o.secs, "--case", case]);
        if mbuf {
            c.arg("--mbuf");
        }
        c.output().ok().and_then(|out| rate(&out.stdout))
    };
    println!(
        "{} cases, {} interleaved runs each of {} s, medians (objects/s):",
        cases.len(),
        o.runs,
        o.secs
    );
    let (a, b, tag) = if o.aa {
        ("DPDK (A)", "DPDK (B)", "mempool_aa")
    } else {
        ("DPDK", "rpmd", "mempool")
    };
    print!(
        "{:<74} {a:>13} {b:>13} {:>9}",
        "case",
        if o.aa { "A/B" } else { "DPDK/rpmd" }
    );
    if o.mbuf {
        print!(" {:>13}", "rpmd Mbuf");
    }
    println!(" {:>11}", "pairs");
    let mut worst = (0.0f64, String::new());
    let mut plot = rpmd_benches::PlotCsv::from_env(&[a, b]);
    for case in &cases {
        let (mut d, mut r, mut m) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..o.runs {
            d.extend(dpdk_run(case));
            r.extend(if o.aa {
                dpdk_run(case)
            } else {
                ours_run(case, false)
            });
            if o.mbuf {
                m.extend(ours_run(case, true));
            }
        }
        if d.len() != o.runs || r.len() != o.runs {
            println!(
                "{case:<74} a run failed (DPDK {} of {}, rpmd {})",
                d.len(),
                o.runs,
                r.len()
            );
            worst = (f64::INFINITY, case.clone());
            continue;
        }
        // Each run's DPDK/rpmd, as interleaved: a row whose pairs fall on
        // both sides of 1.0 is at parity, and its median could read either.
        let pairs: Vec<f64> = d.iter().zip(&r).map(|(a, b)| a / b).collect();
        let lo = pairs.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = pairs.iter().copied().fold(0.0, f64::max);
        let (dm, rm) = (median(d), median(r));
        let ratio = dm / rm;
        plot.row(case, &[dm, rm]);
        if ratio > worst.0 {
            worst = (ratio, case.clone());
        }
        print!("{case:<74} {dm:>13.0} {rm:>13.0} {ratio:>9.3}");
        if o.mbuf {
            if m.is_empty() {
                print!(" {:>13}", "-");
            } else {
                print!(" {:>13.0}", median(m));
            }
        }
        println!(" {:>11}", format!("{lo:.2}-{hi:.2}"));
    }
    println!("worst case: {}", worst.1);
    println!("RESULT {tag} worst_ratio={:.3}", worst.0);
}
