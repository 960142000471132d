//! `compare_lookup`: DPDK's lookup perf autotests (`dpdk-test`:
//! `lpm_perf_autotest`, `fib_perf_autotest`, `lpm6_perf_autotest`,
//! `hash_readwrite_lf_perf_autotest`) against `lookup_perf`, rpmd-lookup
//! under the same loops, in interleaved rounds: DPDK (A), rpmd, DPDK
//! again (A', its A/A). Prints per row the medians of cycles per lookup,
//! rpmd ÷ DPDK and A' ÷ A, and ends with `RESULT lookup worst_ratio=<x>
//! geomean=<y> aa_worst=<z>` (`aa_worst`: the A/A row farthest from 1,
//! as a ratio ≥ 1). The route sets' depth distributions are the ones
//! DPDK's first run prints; `hash_readwrite_perf_autotest` needs three
//! cores and skips itself on two, so it has no row here.
//!
//! Usage: `compare_lookup [--runs N] [--huge-dir DIR] [--dpdk-test PATH] [--cores A,B]`
use rpmd_benches::median;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

type Cases = BTreeMap<String, f64>;

const TESTS: [&str; 4] = [
    "lpm_perf_autotest",
    "fib_perf_autotest",
    "lpm6_perf_autotest",
    "hash_readwrite_lf_perf_autotest",
];

/// The number after `key` on the first line that has it.
fn after(out: &str, key: &str) -> Option<f64> {
    let l = out.lines().find(|l| l.contains(key))?;
    let rest = &l[l.find(key)? + key.len()..];
    rest.split_whitespace().next()?.parse().ok()
}

/// One autotest's rows.
fn parse_dpdk(test: &str, out: &str) -> Cases {
    let mut c = Cases::new();
    let mut put = |k: &str, v: Option<f64>| {
        if let Some(v) = v {
            c.insert(k.to_string(), v);
        }
    };
    match test {
        "lpm_perf_autotest" => {
            put("lpm_single", after(out, "Average LPM Lookup:"));
            put("lpm_bulk", after(out, "BULK LPM Lookup:"));
            put("lpm_x4", after(out, "LPM LookupX4:"));
        }
        "fib_perf_autotest" => put("fib_bulk", after(out, "BULK FIB Lookup:")),
        "lpm6_perf_autotest" => {
            put("lpm6_single", after(out, "Average LPM Lookup:"));
            put("lpm6_bulk", after(out, "BULK LPM Lookup:"));
        }
        _ => {
            // Each "Test: ..." is followed by its first reader count's
            // "Cycles per lookup" (one reader: the only count two cores
            // allow).
            let mut test = "";
            for l in out.lines() {
                if let Some(t) = l.strip_prefix("Test: ") {
                    test = t;
                } else if let Some(v) = l.strip_prefix("Cycles per lookup: ") {
                    let row = match test {
                        t if t.contains("no key-shifts, read - hit") => "hash_hit",
                        t if t.contains("no key-shifts, Hash lookup - miss") => "hash_miss",
                        t if t.contains("(non-shift-path)") => "hash_ks_hit_nsp",
                        t if t.contains("(shift-path)") => "hash_ks_hit_sp",
                        t if t.contains("key shift, Hash lookup - miss") => "hash_ks_miss",
                        _ => continue,
                    };
                    if !c.contains_key(row) {
                        c.insert(row.to_string(), v.trim().parse().unwrap_or(f64::NAN));
                    }
                }
            }
        }
    }
    c
}

/// The route distribution a DPDK run prints: `D:N,...`.
fn distribution(out: &str) -> String {
    let mut lines = out.lines().skip_while(|l| !l.starts_with("DEPTH"));
    lines.next();
    let mut s = String::new();
    for l in lines.skip(1) {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (Some(d), Some(n)) = (
            f.first().and_then(|d| d.parse::<u32>().ok()),
            f.get(1).and_then(|n| n.parse::<u64>().ok()),
        ) else {
            break;
        };
        if n > 0 {
            s.push_str(&format!("{d}:{n},"));
        }
    }
    s
}

fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| {
        eprintln!("compare_lookup: cannot run {what}: {e}");
        std::process::exit(1)
    });
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        eprintln!(
            "compare_lookup: {what} failed ({}):\n{text}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        std::process::exit(1);
    }
    text
}

struct Opts {
    runs: usize,
    huge_dir: String,
    dpdk_test: String,
    cores: String,
}

fn opts() -> Opts {
    let mut o = Opts {
        runs: 3,
        huge_dir: "/mnt/rpmd-huge".into(),
        dpdk_test: "dpdk-test".into(),
        cores: "0,1".into(),
    };
    let mut a = std::env::args().skip(1);
    while let Some(k) = a.next() {
        let v = a.next().unwrap_or_else(|| {
            eprintln!("compare_lookup: {k} needs a value");
            std::process::exit(2)
        });
        match k.as_str() {
            "--runs" => o.runs = v.parse().unwrap_or(0),
            "--huge-dir" => o.huge_dir = v,
            "--dpdk-test" => o.dpdk_test = v,
            "--cores" => o.cores = v,
            _ => {
                eprintln!("compare_lookup: unknown argument {k:?}; usage: compare_lookup [--runs N] [--huge-dir DIR] [--dpdk-test PATH] [--cores A,B]");
                std::process::exit(2)
            }
        }
    }
    if o.runs == 0 {
        eprintln!("compare_lookup: --runs must be at least 1");
        std::process::exit(2);
    }
    o
}

/// One round of every DPDK test: the rows, and each test's raw output.
fn dpdk_round(o: &Opts) -> (Cases, BTreeMap<&'static str, String>) {
    let mut rows = Cases::new();
    let mut raw = BTreeMap::new();
    for t in TESTS {
        let out = run(
            Command::new(&o.dpdk_test)
                .env("DPDK_TEST", t)
                .args(["--no-pci", "-l", &o.cores, "--file-prefix=rpmd-lookup"])
                .args(["--huge-unlink", "-m", "512", "--huge-dir", &o.huge_dir])
                .arg("--log-level=lib.eal:error"),
            t,
        );
        let r = parse_dpdk(t, &out);
        if r.is_empty() {
            eprintln!("compare_lookup: no rows in {t}'s output:\n{out}");
            std::process::exit(1);
        }
        rows.extend(r);
        raw.insert(t, out);
    }
    (rows, raw)
}

fn main() {
    let o = opts();
    let ours_bin: PathBuf = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("lookup_perf")))
        .unwrap_or_else(|| "lookup_perf".into());
    let (mut a, mut ours, mut a2) = (Vec::new(), Vec::new(), Vec::new());
    let mut dist = (String::new(), String::new());
    for i in 0..o.runs {
        eprintln!("round {}/{}: DPDK", i + 1, o.runs);
        let (rows, raw) = dpdk_round(&o);
        if i == 0 {
            dist = (
                distribution(&raw["lpm_perf_autotest"]),
                distribution(&raw["lpm6_perf_autotest"]),
            );
        }
        a.push(rows);
        eprintln!("round {}/{}: rpmd", i + 1, o.runs);
        ours.push(rpmd_benches::cases(&run(
            Command::new(&ours_bin).args([
                "--lpm-depths",
                &dist.0,
                "--lpm6-depths",
                &dist.1,
                "--cores",
                &o.cores,
            ]),
            "lookup_perf",
        )));
        eprintln!("round {}/{}: DPDK again (A/A)", i + 1, o.runs);
        a2.push(dpdk_round(&o).0);
    }
    report(&a, &ours, &a2);
}

fn report(a: &[Cases], ours: &[Cases], a2: &[Cases]) {
    let col =
        |runs: &[Cases], k: &str| median(runs.iter().filter_map(|r| r.get(k).copied()).collect());
    println!(
        "DPDK's lookup autotests vs rpmd-lookup: cycles per lookup (TSC), medians of {} interleaved rounds",
        a.len()
    );
    println!(
        "{:<18} {:>10} {:>10} {:>11} {:>10} {:>8}",
        "row", "DPDK", "rpmd", "rpmd/DPDK", "DPDK A/A", "verdict"
    );
    let mut plot = rpmd_benches::PlotCsv::from_env(&["DPDK", "rpmd"]);
    let (mut worst, mut logs, mut aa_worst) = (0.0f64, 0.0f64, 1.0f64);
    let mut n = 0;
    for k in a[0].keys() {
        let (d, r, d2) = (col(a, k), col(ours, k), col(a2, k));
        let (ratio, aa) = (r / d, d2 / d);
        let spread = aa.max(1.0 / aa);
        let verdict = if ratio <= 1.0 {
            "ahead"
        } else if ratio <= spread {
            "parity"
        } else {
            "behind"
        };
        println!("{k:<18} {d:>10.1} {r:>10.1} {ratio:>11.3} {aa:>10.3} {verdict:>8}");
        plot.row(k, &[d, r]);
        worst = worst.max(ratio);
        aa_worst = aa_worst.max(spread);
        logs += ratio.ln();
        n += 1;
    }
    let geomean = (logs / n.max(1) as f64).exp();
    println!("RESULT lookup worst_ratio={worst:.3} geomean={geomean:.3} aa_worst={aa_worst:.3}");
}
