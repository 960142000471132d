//! The traffic source and sink of the forwarding comparisons
//! (`compare_l2fwd`, `compare_l3fwd`): DPDK's testpmd in flowgen mode with
//! two `net_vhost` ports on CPU 0. It sends on both ports (UDP from
//! 10.254.0.0 to 10.253.0.0 + flow, ports 1000 → 1001, 1024 flows, TTL
//! 64) and receives and frees what the device under test, on CPU 1 with a
//! virtio-user port on each socket, sends back. Both devices under test
//! are measured the same way: the frames per second the generator
//! receives.
use crate::{median, Proc};
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The generator's two vhost-user sockets.
pub fn socks() -> [String; 2] {
    [0, 1].map(|i| format!("/tmp/rpmd-fg-{}-{i}.sock", std::process::id()))
}

/// Starts the generator with `size`-byte frames, hugepages from `huge`,
/// statistics every second; returns once both sockets exist.
pub fn start(huge: &str, size: usize) -> Proc {
    let s = socks();
    for p in &s {
        let _ = std::fs::remove_file(p);
    }
    let child = Command::new("dpdk-testpmd")
        .args(["--no-pci", "--lcores", "0@0,1@0", "--file-prefix=clgen"])
        .args(["--huge-dir", huge, "-m", "512", "--huge-unlink"])
        .args(["--log-level=lib.eal:error", "--log-level=user1:error"])
        .args(["--vdev", &format!("net_vhost0,iface={},queues=1", s[0])])
        .args(["--vdev", &format!("net_vhost1,iface={},queues=1", s[1])])
        .args(["--", "--forward-mode=flowgen", "--total-num-mbufs=16384"])
        .arg(format!("--txpkts={size}"))
        .args(["-a", "--stats-period", "1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("dpdk-testpmd (apt-get install dpdk-dev)");
    let t = Instant::now();
    while !s.iter().all(|p| std::path::Path::new(p).exists()) {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "generator made no sockets"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    Proc(child)
}

/// Stops the generator and returns its per-second Rx-pps, one pair
/// (port 0, port 1) a second, the first two seconds dropped.
fn stop(mut g: Proc) -> Vec<[f64; 2]> {
    // SAFETY: kill has no memory preconditions.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(g.0.id() as i32, libc::SIGINT)
    };
    let mut out = String::new();
    if let Some(mut o) = g.0.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    drop(g);
    let key = "Rx-pps:";
    let vals: Vec<f64> = out
        .lines()
        .filter_map(|l| {
            let i = l.find(key)?;
            l[i + key.len()..].split_whitespace().next()?.parse().ok()
        })
        .collect();
    vals.chunks_exact(2).map(|c| [c[0], c[1]]).skip(2).collect()
}

/// Stops the generator and returns the median of its per-second Rx-pps
/// in Mpps, both ports summed, the first two seconds dropped.
pub fn rate(g: Proc) -> f64 {
    total(&stop(g))
}

fn total(per_sec: &[[f64; 2]]) -> f64 {
    median(per_sec.iter().map(|p| p[0] + p[1]).collect()) / 1e6
}

/// Measures one device under test: starts the generator with
/// `size`-byte frames, starts the command `dut` makes from the
/// generator's two sockets, lets it run `secs` (plus the two seconds
/// [`rate`] drops and a margin), stops both, and returns the generator's
/// rate in Mpps. `dpdk_prefix`: the `--file-prefix` of a DPDK device under
/// test run with `--single-file-segments`, whose files are removed after.
pub fn measure(
    huge: &str,
    size: usize,
    secs: f64,
    dpdk_prefix: Option<&str>,
    dut: impl FnOnce(&[String; 2]) -> Command,
) -> f64 {
    total(&measure_ports(huge, size, secs, dpdk_prefix, dut))
}

/// As [`measure`], but returns what the generator received each second
/// on each port (frames per second): which port a device under test sent
/// its frames to.
pub fn measure_ports(
    huge: &str,
    size: usize,
    secs: f64,
    dpdk_prefix: Option<&str>,
    dut: impl FnOnce(&[String; 2]) -> Command,
) -> Vec<[f64; 2]> {
    let g = start(huge, size);
    let log_path = std::env::temp_dir().join(format!("rpmd-dut-{}.log", std::process::id()));
    let log = std::fs::File::create(&log_path).expect("the device under test's log");
    let mut cmd = dut(&socks());
    let child = cmd
        .stdout(log.try_clone().expect("the device under test's log"))
        .stderr(log)
        .spawn()
        .expect("the device under test (dpdk-testpmd, DPDK's l3fwd, or an rpmd app built with --release)");
    let dut = Proc(child);
    std::thread::sleep(Duration::from_secs_f64(secs + 2.5));
    let per_sec = stop(g);
    match dpdk_prefix {
        Some(p) => stop_dpdk(dut, huge, p),
        None => drop(dut),
    }
    if total(&per_sec) <= 0.0 {
        // A device under test that forwarded nothing failed: say why.
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(12).collect();
        eprintln!("  the device under test forwarded nothing: {cmd:?}");
        for l in tail.iter().rev() {
            eprintln!("    | {l}");
        }
    }
    let _ = std::fs::remove_file(&log_path);
    per_sec
}

/// A DPDK program as the device under test on CPU 1: `--no-pci`, its
/// EAL options (`eal`, e.g. the lcores), file prefix `prefix`, 1 GB of
/// hugepages (l3fwd's exact-match tables take over 400 MB) in one file
/// per segment list (a virtio-user port shares them by fd), and a
/// `net_virtio_user` port on each socket; the caller adds `--` and the
/// program's own options.
pub fn dpdk_dut(program: &str, eal: &[&str], prefix: &str, huge: &str, s: &[String; 2]) -> Command {
    let mut c = Command::new(program);
    c.arg("--no-pci")
        .args(eal)
        .arg(format!("--file-prefix={prefix}"))
        .args(["--huge-dir", huge, "-m", "1024", "--single-file-segments"])
        .args(["--log-level=lib.eal:error", "--log-level=user1:error"])
        .args([
            "--vdev",
            &format!("net_virtio_user0,path={},queues=1", s[0]),
        ])
        .args([
            "--vdev",
            &format!("net_virtio_user1,path={},queues=1", s[1]),
        ])
        .stdin(Stdio::piped());
    c
}

/// Removes the socket files.
pub fn clean() {
    for p in socks() {
        let _ = std::fs::remove_file(p);
    }
}

/// Stops a DPDK device under test that used `--single-file-segments`
/// with file prefix `prefix`, and removes the files it leaves behind.
pub fn stop_dpdk(mut dut: Proc, huge: &str, prefix: &str) {
    // SAFETY: kill has no memory preconditions.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(dut.0.id() as i32, libc::SIGINT)
    };
    let _ = dut.0.wait();
    if let Ok(rd) = std::fs::read_dir(huge) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with(prefix) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}
