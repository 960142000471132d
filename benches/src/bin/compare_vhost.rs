//! `compare_vhost`: rpmd's vhost-user backend (`vhost-user:`) against
//! DPDK's (`net_vhost` in testpmd), both on CPU 0, facing the same peer on
//! CPU 1: DPDK testpmd with `net_virtio_user`, in the same roles:
//!
//! - rxonly: the peer sends (txonly), the backend takes and frees;
//! - txonly: the backend sends, the peer counts (rxonly);
//! - io: the peer and the backend echo, one burst of 32 in flight.
//!
//! 64- and 1518-byte frames, split and packed rings. Every row is read
//! from the same place, the peer's `--stats-period 1` lines (its Tx-pps
//! when it sends, else its Rx-pps; the first second dropped), so DPDK's
//! backend and ours are measured by the same program. Each round runs
//! DPDK, rpmd, DPDK again (the A/A column shows the noise), `--runs`
//! rounds of `--seconds`, medians, the ratio DPDK ÷ rpmd, ending with
//! `RESULT vhost worst_ratio=<x> geomean=<g>`. Then the pairs: our
//! virtio-user against our backend vs testpmd against testpmd, each
//! counted at its sender (`RESULT vhost-pair ...`).
//!
//! `--ours-only ROLE-SIZE-RING` (e.g. io-64-packed): only our backend,
//! once, under the same peer for `--seconds`, printing `frames N` (what
//! it sent in io and txonly, took in rxonly): what
//! `benches/vhost_instr.sh` counts instructions over.
//!
//! Usage: `compare_vhost --huge-dir DIR [--runs N] [--seconds S] [--rows ROLE-SIZE-RING,...] [--ours-only ROLE-SIZE-RING]`
use rpmd_benches::tsc::pin;
use rpmd_benches::{median, testpmd, wait_sock, Proc};
use rpmd_pmd::port::Pkts;
use rpmd_pmd::{Mempool, MempoolConfig, PortConfig, Registry};
use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq, Debug)]
enum Role {
    RxOnly,
    TxOnly,
    Io,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::RxOnly => "rxonly",
            Role::TxOnly => "txonly",
            Role::Io => "io",
        }
    }
    /// The peer's forwarding mode for this backend role.
    fn peer(self) -> &'static str {
        match self {
            Role::RxOnly => "txonly",
            Role::TxOnly => "rxonly",
            Role::Io => "io",
        }
    }
}

struct Row {
    role: Role,
    size: usize,
    packed: bool,
}

/// The peer (DPDK's virtio-user on CPU 1) for `row` for `secs` (plus a
/// warm-up second): its Mpps, from its periodic stats.
fn run_peer(row: &Row, secs: f64, huge: &str, sock: &str, prefix: &str) -> f64 {
    let mut b = testpmd(
        1,
        prefix,
        huge,
        &format!(
            "net_virtio_user0,path={sock},queues=1,packed_vq={}",
            row.packed as u8
        ),
        &["--single-file-segments"],
        row.role.peer(),
        row.size,
        row.role == Role::Io,
    );
    std::thread::sleep(Duration::from_secs_f64(secs + 1.5));
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(b.id() as i32, libc::SIGINT) };
    let mut out = String::new();
    if let Some(mut o) = b.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    let _ = b.wait();
    remove_files(huge, prefix);
    let key = if row.role == Role::RxOnly {
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

/// --single-file-segments leaves its files behind.
fn remove_files(huge: &str, prefix: &str) {
    if let Ok(rd) = std::fs::read_dir(huge) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with(prefix) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// DPDK's backend (testpmd `net_vhost` on CPU 0) under the peer.
fn run_dpdk(row: &Row, secs: f64, huge: &str, sock: &str) -> f64 {
    let _ = std::fs::remove_file(sock);
    let a = Proc(testpmd(
        0,
        "cvhA",
        huge,
        &format!("net_vhost0,iface={sock},queues=1"),
        &["--huge-unlink"],
        row.role.name(),
        row.size,
        false,
    ));
    wait_sock(sock);
    let r = run_peer(row, secs, huge, sock, "cvhB");
    drop(a);
    r
}

/// The backend's side of `role` on `port`'s queues until `stop`; frames
/// handled counted in `count`.
fn serve(
    role: Role,
    size: usize,
    q: &mut rpmd_pmd::Queues,
    pool: &Mempool,
    stop: &AtomicBool,
    count: &AtomicU64,
) {
    let mut tmpl = vec![0u8; size];
    tmpl[..12].copy_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2]);
    tmpl[12] = 0x08;
    let mut b = Pkts::new();
    let (mut n, mut iter) = (0u64, 0u32);
    let prof = std::env::var_os("CVH_DEBUG").is_some();
    loop {
        iter = iter.wrapping_add(1);
        if iter % 1024 == 0 && stop.load(Ordering::Relaxed) {
            break;
        }
        match role {
            Role::RxOnly => {
                n += q.rx_burst(0, &mut b, 32) as u64;
                pool.put_bulk(&mut b);
            }
            Role::TxOnly => {
                if pool.get_bulk(&mut b, 32).is_ok() {
                    // Headers only, as testpmd's txonly writes them.
                    for m in b.iter_mut() {
                        m.append(size).expect("room")[..14].copy_from_slice(&tmpl[..14]);
                    }
                }
                n += q.tx_burst(0, &mut b) as u64;
                b.clear();
            }
            // Cycles per busy round only under CVH_DEBUG: the clock
            // reads must not weigh on the measured runs.
            Role::Io if prof => {
                let t0 = rpmd_benches::tsc::rdtsc();
                if q.rx_burst(0, &mut b, 32) > 0 {
                    let t1 = rpmd_benches::tsc::rdtsc();
                    n += q.tx_burst(0, &mut b) as u64;
                    let t2 = rpmd_benches::tsc::rdtsc();
                    b.clear();
                    PROF[0].fetch_add(t1 - t0, Ordering::Relaxed);
                    PROF[1].fetch_add(t2 - t1, Ordering::Relaxed);
                    PROF[2].fetch_add(1, Ordering::Relaxed);
                }
            }
            Role::Io => {
                if q.rx_burst(0, &mut b, 32) > 0 {
                    n += q.tx_burst(0, &mut b) as u64;
                    b.clear();
                }
            }
        }
    }
    count.store(n, Ordering::Relaxed);
}

/// `ROLE-SIZE-RING` (as `--rows` names them) as a row.
fn parse_row(name: &str) -> Option<Row> {
    let mut it = name.split('-');
    let role = match it.next()? {
        "rxonly" => Role::RxOnly,
        "txonly" => Role::TxOnly,
        "io" => Role::Io,
        _ => return None,
    };
    let size = it
        .next()?
        .parse()
        .ok()
        .filter(|s| (60..=9000).contains(s))?;
    let packed = match it.next()? {
        "split" => false,
        "packed" => true,
        _ => return None,
    };
    it.next().is_none().then_some(Row { role, size, packed })
}

/// Our backend (a thread on CPU 0) under the peer.
fn run_ours(row: &Row, secs: f64, huge: &str, sock: &str) -> f64 {
    run_ours_counted(row, secs, huge, sock).0
}

/// [`run_ours`], and the frames our backend handled.
fn run_ours_counted(row: &Row, secs: f64, huge: &str, sock: &str) -> (f64, u64) {
    let _ = std::fs::remove_file(sock);
    let stop = AtomicBool::new(false);
    let count = AtomicU64::new(0);
    let ready = AtomicBool::new(false);
    let mpps = std::thread::scope(|s| {
        s.spawn(|| our_backend(row.role, row.size, sock, "cvh", &ready, &stop, &count));
        while !ready.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let r = run_peer(row, secs, huge, sock, "cvhR");
        stop.store(true, Ordering::Relaxed);
        r
    });
    (mpps, count.load(Ordering::Relaxed))
}

/// Our backend on CPU 0 at `sock` in `role` (its pool named `pool`),
/// `ready` once it listens, until `stop`; with `CVH_DEBUG` set, its
/// cycles per busy round and non-zero xstats on stderr.
fn our_backend(
    role: Role,
    size: usize,
    sock: &str,
    pool: &str,
    ready: &AtomicBool,
    stop: &AtomicBool,
    count: &AtomicU64,
) {
    pin(0);
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let pool = Mempool::new(&MempoolConfig::new(pool, 16384)).expect("mempool");
    let mut p = reg
        .open(&format!("vhost-user:{sock}"))
        .expect("vhost-user port");
    p.configure(&PortConfig::with_pool(&pool))
        .expect("configure");
    let mut q = p.start().expect("start");
    ready.store(true, Ordering::Release);
    serve(role, size, &mut q, &pool, stop, count);
    if std::env::var_os("CVH_DEBUG").is_some() {
        let k = PROF[2].load(Ordering::Relaxed).max(1);
        eprintln!(
            "  per busy round: rx {} cycles, tx {} cycles, {k} rounds",
            PROF[0].load(Ordering::Relaxed) / k,
            PROF[1].load(Ordering::Relaxed) / k
        );
        for x in p.xstats().iter().filter(|x| x.value != 0) {
            eprintln!("  {} = {}", x.name, x.value);
        }
    }
    let _ = p.stop();
}

/// Our virtio-user (CPU 1) sending into our backend (CPU 0, rxonly):
/// Mpps counted at the sender.
fn run_pair_ours(size: usize, packed: bool, secs: f64, sock: &str) -> f64 {
    let _ = std::fs::remove_file(sock);
    let stop = AtomicBool::new(false);
    let count = AtomicU64::new(0);
    let ready = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| our_backend(Role::RxOnly, size, sock, "cvhp", &ready, &stop, &count));
        while !ready.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let r = s
            .spawn(|| {
                pin(1);
                let mut reg = Registry::new();
                rpmd_virtio::register(&mut reg);
                let pool = Mempool::new(&MempoolConfig::new("cvhf", 16384)).expect("mempool");
                let mut p = reg
                    .open(&format!("virtio-user:{sock},packed_vq={}", packed as u8))
                    .expect("virtio-user port");
                p.configure(&PortConfig::with_pool(&pool))
                    .expect("configure");
                let mut q = p.start().expect("start");
                let mut b = Pkts::new();
                let warm = Instant::now() + Duration::from_millis(1000);
                let end = warm + Duration::from_secs_f64(secs);
                let (mut n, mut t0, mut iter) = (0u64, None, 0u32);
                loop {
                    iter = iter.wrapping_add(1);
                    if iter % 64 == 0 {
                        let now = Instant::now();
                        if now >= end {
                            break;
                        }
                        if t0.is_none() && now >= warm {
                            t0 = Some(now);
                            n = 0;
                        }
                    }
                    if pool.get_bulk(&mut b, 32).is_ok() {
                        for m in b.iter_mut() {
                            m.append(size).expect("room")[..12].fill(2);
                        }
                    }
                    n += q.tx_burst(0, &mut b) as u64;
                    b.clear();
                }
                let el = t0.map(|t| t.elapsed().as_secs_f64()).unwrap_or(1.0);
                let _ = p.stop();
                n as f64 / el / 1e6
            })
            .join()
            .expect("sender");
        stop.store(true, Ordering::Relaxed);
        r
    })
}

/// testpmd's virtio-user (CPU 1, txonly) into testpmd's vhost (CPU 0,
/// rxonly), at the sender.
fn run_pair_dpdk(size: usize, packed: bool, secs: f64, huge: &str, sock: &str) -> f64 {
    run_dpdk(
        &Row {
            role: Role::RxOnly,
            size,
            packed,
        },
        secs,
        huge,
        sock,
    )
}

static PROF: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

fn geomean(v: &[f64]) -> f64 {
    (v.iter().map(|x| x.ln()).sum::<f64>() / v.len().max(1) as f64).exp()
}

fn main() {
    let mut a = std::env::args().skip(1);
    let (mut huge, mut runs, mut secs) = ("/mnt/rpmd-huge".to_string(), 3usize, 2.0f64);
    let mut rows_only: Option<Vec<String>> = None;
    let mut ours_only: Option<String> = None;
    while let Some(k) = a.next() {
        match (k.as_str(), a.next()) {
            ("--huge-dir", Some(v)) => huge = v,
            ("--ours-only", Some(v)) => ours_only = Some(v),
            ("--rows", Some(v)) => rows_only = Some(v.split(',').map(str::to_string).collect()),
            ("--runs", Some(v)) if v.parse::<usize>().is_ok_and(|n| n > 0) => {
                runs = v.parse().unwrap_or(3)
            }
            ("--seconds", Some(v)) if v.parse::<f64>().is_ok_and(|s| s > 0.0) => {
                secs = v.parse().unwrap_or(2.0)
            }
            _ => {
                eprintln!("usage: compare_vhost --huge-dir DIR [--runs N] [--seconds S] [--rows ROLE-SIZE-RING,...] [--ours-only ROLE-SIZE-RING]");
                std::process::exit(2);
            }
        }
    }
    let sock = format!("/tmp/rpmd-cvh-{}.sock", std::process::id());
    if let Some(name) = ours_only {
        let Some(row) = parse_row(&name) else {
            eprintln!("compare_vhost: --ours-only {name}: ROLE-SIZE-RING, e.g. io-64-packed");
            std::process::exit(2);
        };
        let (mpps, frames) = run_ours_counted(&row, secs, &huge, &sock);
        println!("{name}: {mpps:.3} Mpps at the peer, frames {frames}");
        let _ = std::fs::remove_file(&sock);
        return;
    }
    println!("backend on CPU 0 (DPDK net_vhost or rpmd vhost-user:) vs DPDK virtio-user peer on CPU 1; {runs} rounds of DPDK, rpmd, DPDK of {secs} s; medians, measured at the peer");
    println!(
        "{:<8} {:>6} {:>7} {:>10} {:>10} {:>10} {:>10}",
        "backend", "bytes", "ring", "DPDK Mpps", "rpmd Mpps", "DPDK/rpmd", "A/A"
    );
    let mut plot = rpmd_benches::PlotCsv::from_env(&["DPDK", "rpmd", "DPDK again"]);
    let (mut ratios, mut worst) = (Vec::new(), (0.0f64, String::new()));
    for packed in [false, true] {
        let ring = if packed { "packed" } else { "split" };
        for role in [Role::RxOnly, Role::TxOnly, Role::Io] {
            for size in [64usize, 1518] {
                let name = format!("{}-{size}-{ring}", role.name());
                if rows_only.as_ref().is_some_and(|r| !r.contains(&name)) {
                    continue;
                }
                let row = Row { role, size, packed };
                let (mut d, mut r, mut d2) = (Vec::new(), Vec::new(), Vec::new());
                for k in 1..=runs {
                    d.push(run_dpdk(&row, secs, &huge, &sock));
                    r.push(run_ours(&row, secs, &huge, &sock));
                    d2.push(run_dpdk(&row, secs, &huge, &sock));
                    eprintln!(
                        "  {name} round {k}: DPDK {:.2} rpmd {:.2} DPDK {:.2} Mpps",
                        d[k - 1],
                        r[k - 1],
                        d2[k - 1]
                    );
                }
                let (dm, rm, dm2) = (median(d), median(r), median(d2));
                let ratio = if rm > 0.0 { dm / rm } else { f64::INFINITY };
                let aa = if dm2 > 0.0 { dm / dm2 } else { f64::INFINITY };
                plot.row(&name, &[dm, rm, dm2]);
                println!(
                    "{:<8} {:>6} {:>7} {:>10.2} {:>10.2} {:>10.3} {:>10.3}",
                    role.name(),
                    size,
                    ring,
                    dm,
                    rm,
                    ratio,
                    aa
                );
                ratios.push(ratio);
                if ratio > worst.0 {
                    worst = (ratio, name);
                }
            }
        }
    }
    println!("worst row: {}", worst.1);
    println!(
        "RESULT vhost worst_ratio={:.3} geomean={:.3}",
        worst.0,
        geomean(&ratios)
    );
    // The pairs, both ends one project's.
    if rows_only.is_none() {
        println!("pairs: virtio-user txonly (CPU 1) into vhost-user rxonly (CPU 0), at the sender");
        println!(
            "{:<8} {:>6} {:>7} {:>10} {:>10} {:>10}",
            "pair", "bytes", "ring", "DPDK Mpps", "rpmd Mpps", "DPDK/rpmd"
        );
        let mut pr = Vec::new();
        for packed in [false, true] {
            for size in [64usize, 1518] {
                let (mut d, mut r) = (Vec::new(), Vec::new());
                for _ in 0..runs {
                    d.push(run_pair_dpdk(size, packed, secs, &huge, &sock));
                    r.push(run_pair_ours(size, packed, secs, &sock));
                }
                let (dm, rm) = (median(d), median(r));
                let ratio = if rm > 0.0 { dm / rm } else { f64::INFINITY };
                let ring = if packed { "packed" } else { "split" };
                plot.row(&format!("pair-{size}-{ring}"), &[dm, rm, 0.0]);
                println!(
                    "{:<8} {:>6} {:>7} {:>10.2} {:>10.2} {:>10.3}",
                    "txonly", size, ring, dm, rm, ratio
                );
                pr.push(ratio);
            }
        }
        println!(
            "RESULT vhost-pair worst_ratio={:.3} geomean={:.3}",
            pr.iter().cloned().fold(0.0, f64::max),
            geomean(&pr)
        );
    }
    let _ = std::fs::remove_file(&sock);
}
