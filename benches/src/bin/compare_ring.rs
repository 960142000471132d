//! `compare_ring`: runs DPDK's `ring_perf_autotest` (from `dpdk-test`) and
//! our `ring_perf` alternately (A B A B …) and prints, per case, the median
//! cycles per element of each and the ratio ours / DPDK, then `pairs`, the
//! lowest and highest ratio of one rpmd run to the DPDK run before it (a
//! row whose pairs fall on both sides of 1.0 is at parity, and its median
//! can read either), ending with `RESULT ring worst_ratio=<x>` (the largest
//! median ratio; ≤ 1.0 means we are at least as fast on every row). Before
//! that it prints the single-element MP/MC rows as multiples of the floor
//! that `ring_perf` measures (`FLOOR two_cas_round`). Driven by
//! `benches/compare.sh ring`, which installs DPDK and mounts hugepages
//! first.
//!
//! With `--aa`, DPDK runs against itself (A/A): the same table with two
//! DPDK runs per round, ending `RESULT ring_aa worst_ratio=<x>`. It shows
//! how far a row at parity reads from 1.0 on this machine by noise alone.
//!
//! Usage: `compare_ring [--runs N] [--aa] [--huge-dir DIR] [--dpdk-test PATH] [--cores A,B]`
use rpmd_benches::median;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

type Cases = BTreeMap<String, f64>;

/// Parses `ring_perf_autotest` output (DPDK 22.11) into our case names,
/// converted to cycles per element like `ring_perf`'s `CASE` lines.
fn parse_dpdk(out: &str) -> Cases {
    let mut cases = Cases::new();
    let mut section = "";
    for line in out.lines() {
        let line = line.trim();
        if let Some(h) = line.strip_prefix("### Testing ") {
            section = if h.starts_with("single") {
                "single"
            } else if h.starts_with("burst") {
                "burst"
            } else if h.starts_with("bulk") {
                "bulk"
            } else if h.starts_with("empty") {
                "empty"
            } else if h.contains("two physical cores") {
                "2core"
            } else {
                ""
            };
            continue;
        }
        let (pfx, rest) = if let Some(r) = line.strip_prefix("legacy APIs: ") {
            ("", r)
        } else if let Some(r) = line.strip_prefix("elem APIs: element size 16B: ") {
            ("e16_", r)
        } else {
            continue;
        };
        let Some((mode, rest)) = rest.split_once(": ") else {
            continue;
        };
        let m = match mode {
            "SP/SC" => "spsc",
            "MP/MC" => "mpmc",
            _ => continue,
        };
        let Some((what, val)) = rest.rsplit_once(": ") else {
            continue;
        };
        let Ok(v) = val.trim().parse::<f64>() else {
            continue;
        };
        let size: Option<f64> = what
            .split_once("size: ")
            .and_then(|(_, s)| s.trim_end_matches(')').trim().parse().ok());
        let (name, per_elem) = match (section, size) {
            ("single", _) => (format!("{pfx}single_{m}"), v),
            ("burst", Some(n)) => (format!("{pfx}burst{n}_{m}"), v / n),
            ("bulk", Some(n)) => (format!("{pfx}bulk{n}_{m}"), v / n),
            ("empty", _) => (format!("{pfx}empty_{m}"), v),
            ("2core", Some(n)) => (format!("{pfx}2core_bulk{n}_{m}"), v),
            _ => continue,
        };
        cases.insert(name, per_elem);
    }
    cases
}

struct Opts {
    runs: usize,
    aa: bool,
    huge_dir: String,
    dpdk_test: String,
    cores: String,
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        runs: 3,
        aa: false,
        huge_dir: "/mnt/rpmd-huge".into(),
        dpdk_test: "dpdk-test".into(),
        cores: "0,1".into(),
    };
    let mut a = std::env::args().skip(1);
    while let Some(k) = a.next() {
        let mut val = || a.next().ok_or(format!("{k} needs a value"));
        match k.as_str() {
            "--runs" => o.runs = val()?.parse().map_err(|e| format!("--runs: {e}"))?,
            "--aa" => o.aa = true,
            "--huge-dir" => o.huge_dir = val()?,
            "--dpdk-test" => o.dpdk_test = val()?,
            "--cores" => o.cores = val()?,
            _ => return Err(format!("unknown argument {k:?}; usage: compare_ring [--runs N] [--aa] [--huge-dir DIR] [--dpdk-test PATH] [--cores A,B]")),
        }
    }
    if o.runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    Ok(o)
}

fn run(cmd: &mut Command, what: &str) -> Result<String, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!(
            "{what} failed ({}):\n{}\n{}",
            out.status,
            text,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(text)
}

fn main() {
    let o = parse_args().unwrap_or_else(|e| {
        eprintln!("compare_ring: {e}");
        std::process::exit(2)
    });
    let ours_bin: PathBuf = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("ring_perf")))
        .unwrap_or_else(|| "ring_perf".into());
    let lcores = o.cores.clone();
    let mut dpdk_runs: Vec<Cases> = Vec::new();
    let mut our_runs: Vec<Cases> = Vec::new();
    let mut floors: Vec<f64> = Vec::new();
    let dpdk_once = || {
        let d = run(
            Command::new(&o.dpdk_test)
                .env("DPDK_TEST", "ring_perf_autotest")
                .args([
                    "--no-pci",
                    "-l",
                    &lcores,
                    "--file-prefix=rpmd-cmp",
                    "--huge-unlink",
                    "-m",
                    "128",
                ])
                .args(["--huge-dir", &o.huge_dir, "--log-level=lib.eal:error"]),
            "dpdk-test",
        )
        .unwrap_or_else(|e| {
            eprintln!("compare_ring: {e}");
            std::process::exit(1)
        });
        let d = parse_dpdk(&d);
        if d.is_empty() {
            eprintln!("compare_ring: no ring_perf_autotest results in dpdk-test output");
            std::process::exit(1);
        }
        d
    };
    for i in 0..o.runs {
        eprintln!("run {}/{}: DPDK ring_perf_autotest", i + 1, o.runs);
        dpdk_runs.push(dpdk_once());
        if o.aa {
            eprintln!(
                "run {}/{}: DPDK ring_perf_autotest again (A/A)",
                i + 1,
                o.runs
            );
            our_runs.push(dpdk_once());
            continue;
        }
        eprintln!("run {}/{}: rpmd ring_perf", i + 1, o.runs);
        let r = run(
            Command::new(&ours_bin).args(["--cores", &o.cores]),
            "ring_perf",
        )
        .unwrap_or_else(|e| {
            eprintln!("compare_ring: {e}");
            std::process::exit(1)
        });
        our_runs.push(rpmd_benches::cases(&r));
        floors.extend(r.lines().find_map(|l| {
            l.strip_prefix("FLOOR two_cas_round ")?
                .trim()
                .parse::<f64>()
                .ok()
        }));
    }
    let (a, b, tag) = if o.aa {
        ("DPDK (A)", "DPDK (B)", "ring_aa")
    } else {
        ("DPDK", "rpmd", "ring")
    };
    println!(
        "ring_perf_autotest vs {}: cycles per element (TSC), median of {} interleaved runs",
        if o.aa {
            "itself (A/A)"
        } else {
            "rpmd ring_perf"
        },
        o.runs
    );
    println!(
        "{:<24} {a:>12} {b:>12} {:>12} {:>13}",
        "case",
        format!("{b}/{a}").replace("DPDK ", ""),
        "pairs"
    );
    let mut worst = (0.0f64, String::new());
    let mut plot = rpmd_benches::PlotCsv::from_env(&[a, b]);
    for name in dpdk_runs[0].keys() {
        let d: Vec<f64> = dpdk_runs
            .iter()
            .filter_map(|r| r.get(name).copied())
            .collect();
        let ours: Vec<f64> = our_runs
            .iter()
            .filter_map(|r| r.get(name).copied())
            .collect();
        if ours.is_empty() {
            println!(
                "{name:<24} {:>12.3} {:>12} {:>12}",
                median(d),
                "missing",
                "-"
            );
            worst = (f64::INFINITY, name.clone());
            continue;
        }
        let pairs: Vec<f64> = dpdk_runs
            .iter()
            .zip(&our_runs)
            .filter_map(|(d, r)| Some(r.get(name)? / d.get(name)?))
            .collect();
        let lo = pairs.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = pairs.iter().copied().fold(0.0, f64::max);
        let (dm, om) = (median(d), median(ours));
        let ratio = om / dm;
        plot.row(name, &[dm, om]);
        println!("{name:<24} {dm:>12.3} {om:>12.3} {ratio:>12.3} {lo:>6.2}-{hi:<6.2}");
        if ratio > worst.0 {
            worst = (ratio, name.clone());
        }
    }
    if !floors.is_empty() {
        // The single-element MP/MC rows against the least any MP/MC ring of
        // this design can spend on a round (see ring_perf's docs).
        let f = median(floors);
        println!("floor: two CAS and two tail stores on two lines, no slots: {f:.3} cycles");
        for name in ["single_mpmc", "e16_single_mpmc"] {
            let at = |runs: &[Cases]| {
                median(runs.iter().filter_map(|r| r.get(name).copied()).collect()) / f
            };
            println!(
                "  {name}: DPDK {:.2}x floor, rpmd {:.2}x floor",
                at(&dpdk_runs),
                at(&our_runs)
            );
        }
    }
    println!("worst row: {}", worst.1);
    println!("RESULT {tag} worst_ratio={:.3}", worst.0);
}
