//! `compare_virtio`: rpmd's virtio-user port against DPDK's own virtio-user
//! driver (`net_virtio_user`), both facing the same DPDK vhost-user backend
//! (testpmd with `net_vhost`, on CPU 0), in the same roles, on CPU 1:
//!
//! - txonly: the driver sends, the backend counts (rxonly);
//! - rxonly: the backend sends (txonly), the driver counts;
//! - io: the backend echoes (io, loop topology), the driver echoes back,
//!   one burst of 32 in flight.
//!
//! 64- and 1518-byte frames, split and packed rings. Runs alternate DPDK, rpmd per
//! case, `--runs` times, `--seconds` each; Mpps medians and the ratio
//! DPDK ÷ rpmd, ending with `RESULT virtio worst_ratio=<x>`.
//!
//! DPDK's Mpps come from its driver side's `--stats-period 1` lines
//! (Tx-pps or Rx-pps, the first second dropped); ours from counting.
//!
//! Usage: `compare_virtio --huge-dir DIR [--runs N] [--seconds S] [--rows ROLE-SIZE-RING,...]`
//! (`--rows txonly-64-split,io-64-split`: only those rows).
//! `CV_BURSTS=1`: each io run of ours prints how many frames its polls
//! took (whole bursts back, or four-frame pieces).
use rpmd_benches::tsc::pin;
use rpmd_benches::{median, testpmd, wait_sock, Proc};
use rpmd_pmd::port::Pkts;
use rpmd_pmd::{Mempool, MempoolConfig, PortConfig, Registry};
use std::io::Read;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq, Debug)]
enum Role {
    TxOnly,
    RxOnly,
    Io,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::TxOnly => "txonly",
            Role::RxOnly => "rxonly",
            Role::Io => "io",
        }
    }
    /// The backend's forwarding mode for this driver role.
    fn backend(self) -> &'static str {
        match self {
            Role::TxOnly => "rxonly",
            Role::RxOnly => "txonly",
            Role::Io => "io",
        }
    }
}

/// The vhost-user backend (testpmd with `net_vhost` on CPU 0) in the
/// mode that serves `role`, once its socket exists.
fn backend(prefix: &str, role: Role, size: usize, huge: &str, sock: &str) -> Proc {
    let _ = std::fs::remove_file(sock);
    let a = Proc(testpmd(
        0,
        prefix,
        huge,
        &format!("net_vhost0,iface={sock},queues=1"),
        &["--huge-unlink"],
        role.backend(),
        size,
        false,
    ));
    wait_sock(sock);
    a
}

/// DPDK's virtio-user driver in `role`: Mpps from its periodic stats.
fn run_dpdk(role: Role, size: usize, packed: bool, secs: f64, huge: &str, sock: &str) -> f64 {
    let a = backend("cvA", role, size, huge, sock);
    let mut b = testpmd(
        1,
        "cvB",
        huge,
        &format!(
            "net_virtio_user0,path={sock},queues=1,packed_vq={}",
            packed as u8
        ),
        &["--single-file-segments"],
        role.name(),
        size,
        // io: one burst in flight, as ours.
        role == Role::Io,
    );
    std::thread::sleep(Duration::from_secs_f64(secs + 1.5));
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(b.id() as i32, libc::SIGINT) };
    let mut out = String::new();
    if let Some(mut o) = b.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    let _ = b.wait();
    drop(a);
    // --single-file-segments leaves its files behind.
    if let Ok(rd) = std::fs::read_dir(huge) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with("cvB") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let key = if role == Role::TxOnly {
        "Tx-pps:"
    } else {
        "Rx-pps:"
    };
    let vals: Vec<f64> = out
        .lines()
        .filter_map(|l| {
            let i = l.find(key)?;
            l[i + key.len()..].split_whitespace().next()?.parse().ok()
        })
        .skip(1)
        .filter(|&v: &f64| v > 0.0)
        .collect();
    median(vals) / 1e6
}

/// Our virtio-user port in `role`.
fn run_ours(role: Role, size: usize, packed: bool, secs: f64, huge: &str, sock: &str) -> f64 {
    let a = backend("cvR", role, size, huge, sock);
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            pin(1);
            let mut reg = Registry::new();
            rpmd_virtio::register(&mut reg);
            let pool = Mempool::new(&MempoolConfig::new("cv", 16384)).expect("mempool");
            let mut p = reg
                .open(&format!("virtio-user:{sock},packed_vq={}", packed as u8))
                .expect("virtio-user port");
            p.configure(&PortConfig {
                rx_pool: Some(pool.clone()),
                ..PortConfig::default()
            })
            .expect("configure");
            let mut q = p.start().expect("start");
            let mut tmpl = vec![0u8; size];
            tmpl[..12].copy_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2]);
            tmpl[12] = 0x08;
            let mut b = Pkts::new();
            let mut count = 0u64;
            let warm = Instant::now() + Duration::from_millis(500);
            let mut t0 = None;
            let end = warm + Duration::from_secs_f64(secs);
            if role == Role::Io {
                let _ = pool.get_bulk(&mut b, 32);
                for m in b.iter_mut() {
                    m.append(size).expect("room").copy_from_slice(&tmpl);
                }
                q.tx_burst(0, &mut b);
                b.clear();
            }
            let mut iter = 0u32;
            let mut bursts = [0u64; 33];
            loop {
                // The clock every 64 rounds, not every round: testpmd's
                // forwarding loop reads no clock, and a clock_gettime here
                // costs 40 ns, a quarter of an empty io round.
                iter = iter.wrapping_add(1);
                if iter % 64 == 0 {
                    let now = Instant::now();
                    if now >= end {
                        break;
                    }
                    if t0.is_none() && now >= warm {
                        t0 = Some(now);
                        count = 0;
                    }
                }
                match role {
                    Role::TxOnly => {
                        if pool.get_bulk(&mut b, 32).is_ok() {
                            // Headers only, as testpmd's txonly writes them.
                            for m in b.iter_mut() {
                                m.append(size).expect("room")[..14].copy_from_slice(&tmpl[..14]);
                            }
                        }
                        count += q.tx_burst(0, &mut b) as u64;
                        b.clear();
                    }
                    Role::RxOnly => {
                        count += q.rx_burst(0, &mut b, 32) as u64;
                        // Freed in bulk, as testpmd's rxonly does.
                        pool.put_bulk(&mut b);
                    }
                    Role::Io => {
                        let n = q.rx_burst(0, &mut b, 32);
                        count += n as u64;
                        bursts[n.min(32)] += 1;
                        if n > 0 {
                            q.tx_burst(0, &mut b);
                            b.clear();
                        } else {
                            // An empty poll, as the run loop's Forward task
                            // and spin: take back what the backend has sent
                            // (off the next burst's round trip), pause.
                            q.tx[0].in_flight();
                            std::hint::spin_loop();
                        }
                    }
                }
            }
            let el = t0.map(|t| t.elapsed().as_secs_f64()).unwrap_or(1.0);
            if std::env::var_os("CV_BURSTS").is_some() && role == Role::Io {
                // How the 32 frames in flight come back: whole bursts, or
                // pieces (the slow rhythm of benches/RESULTS.md).
                let polls: u64 = bursts.iter().sum();
                let frames: u64 = bursts.iter().enumerate().map(|(k, c)| k as u64 * c).sum();
                eprintln!(
                    "  polls {polls}, frames {frames}, empty {:.2}, frames per non-empty poll {:.1}; polls by frames 1..=32: {:?}",
                    bursts[0] as f64 / polls.max(1) as f64,
                    frames as f64 / (polls - bursts[0]).max(1) as f64,
                    &bursts[1..]
                );
            }
            if std::env::var_os("CV_DEBUG").is_some() {
                for x in p.xstats() {
                    eprintln!("  {} = {}", x.name, x.value);
                }
            }
            let _ = p.stop();
            drop(q);
            count as f64 / el / 1e6
        })
        .join()
        .expect("driver thread")
    });
    drop(a);
    r
}

fn main() {
    let mut a = std::env::args().skip(1);
    let (mut huge, mut runs, mut secs) = ("/mnt/rpmd-huge".to_string(), 3usize, 3.0f64);
    let mut only: Option<String> = None;
    let mut rows: Option<Vec<String>> = None;
    while let Some(k) = a.next() {
        match (k.as_str(), a.next()) {
            // `--ours-only ROLE-SIZE[-packed]` (e.g. txonly-64): just our
            // side, once (for profiling under callgrind).
            ("--ours-only", Some(v)) => only = Some(v),
            ("--huge-dir", Some(v)) => huge = v,
            ("--rows", Some(v)) => rows = Some(v.split(',').map(str::to_string).collect()),
            ("--runs", Some(v)) if v.parse::<usize>().is_ok_and(|n| n > 0) => {
                runs = v.parse().unwrap_or(3)
            }
            ("--seconds", Some(v)) if v.parse::<f64>().is_ok_and(|s| s > 0.0) => {
                secs = v.parse().unwrap_or(3.0)
            }
            _ => {
                eprintln!("usage: compare_virtio --huge-dir DIR [--runs N] [--seconds S] [--ours-only ROLE-SIZE[-packed]] [--rows ROLE-SIZE-RING,...]");
                std::process::exit(2);
            }
        }
    }
    let sock = format!("/tmp/rpmd-cv-{}.sock", std::process::id());
    if let Some(o) = only {
        let packed = o.ends_with("-packed");
        let o = o.trim_end_matches("-packed").trim_end_matches("-split");
        let (r, sz) = o.split_once('-').unwrap_or(("txonly", "64"));
        let role = match r {
            "rxonly" => Role::RxOnly,
            "io" => Role::Io,
            _ => Role::TxOnly,
        };
        let mpps = run_ours(role, sz.parse().unwrap_or(64), packed, secs, &huge, &sock);
        println!("rpmd {} {sz}: {mpps:.2} Mpps", role.name());
        return;
    }
    println!("driver on CPU 1 vs DPDK vhost-user backend (testpmd) on CPU 0; split ring; {runs} interleaved runs of {secs} s, medians");
    println!(
        "{:<8} {:>6} {:>7} {:>10} {:>10} {:>10}",
        "role", "bytes", "ring", "DPDK Mpps", "rpmd Mpps", "DPDK/rpmd"
    );
    let mut worst = (0.0f64, String::new());
    let mut plot = rpmd_benches::PlotCsv::from_env(&["DPDK", "rpmd"]);
    for packed in [false, true] {
        let ring = if packed { "packed" } else { "split" };
        for role in [Role::TxOnly, Role::RxOnly, Role::Io] {
            for size in [64usize, 1518] {
                let row = format!("{}-{size}-{ring}", role.name());
                if rows.as_ref().is_some_and(|r| !r.contains(&row)) {
                    continue;
                }
                let (mut d, mut r) = (Vec::new(), Vec::new());
                for k in 1..=runs {
                    d.push(run_dpdk(role, size, packed, secs, &huge, &sock));
                    r.push(run_ours(role, size, packed, secs, &huge, &sock));
                    // Each pair on stderr: the swings are the story on
                    // these VMs, and a median hides them.
                    eprintln!(
                        "  {row} run {k}: DPDK {:.2} rpmd {:.2} Mpps",
                        d[k - 1],
                        r[k - 1]
                    );
                }
                let (dm, rm) = (median(d), median(r));
                let ratio = if rm > 0.0 { dm / rm } else { f64::INFINITY };
                plot.row(&row, &[dm, rm]);
                println!(
                    "{:<8} {:>6} {:>7} {:>10.2} {:>10.2} {:>10.3}",
                    role.name(),
                    size,
                    ring,
                    dm,
                    rm,
                    ratio
                );
                if ratio > worst.0 {
                    worst = (ratio, format!("{} {size} {ring}", role.name()));
                }
            }
        }
    }
    let _ = std::fs::remove_file(&sock);
    println!("worst row: {}", worst.1);
    println!("RESULT virtio worst_ratio={:.3}", worst.0);
}
