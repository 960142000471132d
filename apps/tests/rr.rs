//! rr end to end: one process over shm, two processes over shm, two
//! processes through DPDK testpmd (two vhost-user ports, io forwarding),
//! and the errors a user meets first.
use serde_json::Value;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// One test of this file at a time: each pins processes to the same two
/// CPUs, and the shm test measures its core-to-core bound, which a
/// testpmd spinning beside it (two_processes_through_testpmd) distorts
/// by a thousandfold.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn rr() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rr"))
}

fn out(o: Output) -> (i32, String, String) {
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The JSON summary of a client run.
fn summary(stdout: &str) -> Value {
    let last = stdout.lines().last().unwrap_or("{}");
    let v: Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(v["type"], "summary", "{stdout}");
    v
}

fn check_client(s: &Value, sessions: usize, min_tps: f64) {
    let tps = s["tps"].as_f64().unwrap();
    assert!(tps >= min_tps, "{tps} transactions/s: {s}");
    assert_eq!(s["sessions"].as_array().unwrap().len(), sessions, "{s}");
    let sum: u64 = s["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["transactions"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, s["transactions"].as_u64().unwrap());
    for x in s["sessions"].as_array().unwrap() {
        assert!(x["transactions"].as_u64().unwrap() > 0, "idle session: {s}");
    }
    let p = |k: &str| s[k].as_u64().unwrap();
    assert!(0 < p("p50_ns") && p("p50_ns") <= p("p90_ns"));
    assert!(p("p90_ns") <= p("p99_ns") && p("p99_ns") <= p("p999_ns"));
    assert_eq!(s["stray"].as_u64(), Some(0), "{s}");
}

#[test]
fn one_process_over_shm_reports_percentiles_per_session() {
    let _serial = serial();
    // The client turns each response's mbuf into the next request: a
    // response longer than the request is trimmed, a shorter one grown. A
    // request it built wrong would be dropped by the server (lost) and a
    // response mismatched (stray).
    for (req, resp) in [("64", "200"), ("1200", "1")] {
        let (rc, o, e) = out(rr()
            .args(["--sessions", "4", "--duration", "1", "--json"])
            .args(["--req-size", req, "--resp-size", resp])
            .output()
            .unwrap());
        assert_eq!(rc, 0, "{o}{e}");
        let s = summary(&o);
        check_client(&s, 4, 1000.0);
        assert_eq!(s["lost"].as_u64(), Some(0), "{s}");
        assert!(s["bound_p50_ns"].as_f64().unwrap() > 0.0, "{s}");
        assert!(s["p50_over_bound"].as_f64().unwrap() > 0.5, "{s}");
        // A progress line per second before the summary, with the
        // summary's key for the rate.
        let first: Value = serde_json::from_str(o.lines().next().unwrap()).unwrap();
        assert!(first["type"] == "progress" && first["tps"].is_u64(), "{o}");
    }
}

fn server(dev: &str, core: &str, extra: &[&str]) -> Child {
    rr().args(["--role", "server", "--dev", dev, "-l", core])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn stop(mut c: Child) -> (i32, String, String) {
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        if let Ok(Some(_)) = c.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = c.kill();
    out(c.wait_with_output().unwrap())
}

#[test]
fn two_processes_over_shm() {
    let _serial = serial();
    let dev = format!("shm:rrt-{}", std::process::id());
    let srv = server(&dev, "0", &[]);
    let (rc, o, e) = out(rr()
        .args(["--role", "client", "--dev", &dev, "-l", "1", "--json"])
        .args(["--sessions", "2", "--duration", "1", "--no-bound"])
        .output()
        .unwrap());
    let (src, so, se) = stop(srv);
    assert_eq!(rc, 0, "client: {o}{e}\nserver: {so}{se}");
    assert_eq!(src, 0, "server: {so}{se}");
    let s = summary(&o);
    check_client(&s, 2, 1000.0);
    assert!(so.contains("summary: answered"), "{so}");
}

/// Issue 26: Ctrl-C while the client waits for its link ends the run
/// cleanly: exit 0, a summary, and the shm file removed (it used to exit
/// 130 and leave the file behind).
#[test]
fn ctrl_c_during_the_link_wait_exits_cleanly_and_removes_the_shm_file() {
    let _serial = serial();
    let name = format!("rr-ctrlc-{}", std::process::id());
    let mut c = rr()
        .args([
            "--role",
            "client",
            "--dev",
            &format!("shm:{name}"),
            "--no-bound",
        ])
        .args(["--link-timeout", "30", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let file = std::path::Path::new("/dev/shm").join(format!("rpmd-shm-{name}"));
    let t0 = Instant::now();
    while !file.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "no {}",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) && c.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = c.kill();
    let (rc, o, e) = out(c.wait_with_output().unwrap());
    assert_eq!(rc, 0, "{o}{e}");
    let s = summary(&o);
    assert_eq!(s["transactions"], 0, "{o}");
    assert!(s["stopped"].as_str().unwrap().contains("link"), "{o}");
    assert!(!file.exists(), "{} left behind", file.display());
}

#[test]
fn a_missing_server_and_bad_options_are_clear_errors() {
    let _serial = serial();
    let (rc, _, e) = out(rr()
        .args(["--role", "client", "--dev", "shm:rr-nobody", "--no-bound"])
        .args(["--link-timeout", "0.3", "--duration", "1"])
        .output()
        .unwrap());
    assert_eq!(rc, 1, "{e}");
    assert!(e.contains("is the server running"), "{e}");
    for (args, want) in [
        (vec!["--role", "client"], "exactly one --dev"),
        (vec!["--sessions", "0"], "--sessions"),
        (vec!["--req-size", "9000"], "--req-size"),
        (vec!["--yield", "sometimes"], "--yield"),
        (vec!["--dev", "bogus:x", "--duration", "1"], "no driver"),
    ] {
        let (rc, o, e) = out(rr().args(&args).output().unwrap());
        assert!(rc == 2 || rc == 1, "{args:?}: rc {rc}");
        assert!(e.contains(want), "{args:?}: {o}{e}");
    }
}

/// DPDK testpmd with two vhost-user ports forwarding to each other (io):
/// the client's virtio-user port on one, the server's on the other.
#[test]
fn two_processes_through_testpmd() {
    let _serial = serial();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0
        || Command::new("dpdk-testpmd")
            .arg("--version")
            .output()
            .is_err()
    {
        let test = std::thread::current()
            .name()
            .unwrap_or("apps rr")
            .to_string();
        rpmd_pmd::testing::missing_peer(
            &format!("apps rr {test}"),
            "needs root and dpdk-testpmd (apt-get install dpdk-dev)",
        );
        return;
    }
    let id = std::process::id();
    let socks = [0, 1].map(|i| format!("/tmp/rpmd-rr-{id}-{i}.sock"));
    let log = format!("/tmp/rpmd-rr-{id}.log");
    let mut tp = Command::new("dpdk-testpmd")
        .args(["--no-pci", "--no-huge", "-m", "1024", "--lcores", "0@0,1@1"])
        .arg(format!("--file-prefix=rpmdrr{id}"))
        .args(["--log-level=lib.eal:error"])
        .args(["--vdev", &format!("net_vhost0,iface={},queues=1", socks[0])])
        .args(["--vdev", &format!("net_vhost1,iface={},queues=1", socks[1])])
        .args(["--", "--forward-mode=io", "--total-num-mbufs=8192", "-a"])
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !socks.iter().all(|s| std::path::Path::new(s).exists()) {
        assert!(t.elapsed() < Duration::from_secs(30), "no sockets; {log}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Three pollers on two cores: ours sleep when idle (spin 0) so the
    // transactions still flow; this proves the path, not the speed.
    let srv = server(
        &format!("virtio-user:{}", socks[1]),
        "0",
        &["--spin-us", "0", "--sleep-us", "20"],
    );
    let (rc, o, e) = out(rr()
        .args(["--role", "client", "-l", "1", "--json", "--no-bound"])
        .args(["--dev", &format!("virtio-user:{}", socks[0])])
        .args(["--duration", "2", "--spin-us", "0", "--sleep-us", "20"])
        .output()
        .unwrap());
    let (src, so, se) = stop(srv);
    // SAFETY: as above.
    unsafe { libc::kill(tp.id() as i32, libc::SIGINT) };
    let _ = tp.wait();
    for s in &socks {
        let _ = std::fs::remove_file(s);
    }
    assert_eq!(rc, 0, "client: {o}{e}\nserver: {so}{se}");
    assert_eq!(src, 0, "server: {so}{se}");
    check_client(&summary(&o), 1, 50.0);
}

/// `--plot` draws the latency CDF as a PNG (with gnuplot), and the JSON
/// progress lines carry the summary's key for the same rate.
#[test]
fn plot_draws_the_latency_cdf() {
    let _serial = serial();
    if Command::new("gnuplot").arg("--version").output().is_err() {
        rpmd_pmd::testing::missing_peer(
            "apps rr plot_draws_the_latency_cdf",
            "gnuplot (Debian package gnuplot-nox)",
        );
        return;
    }
    let png = std::env::temp_dir().join(format!("rr-plot-{}.png", std::process::id()));
    let o = rr()
        .args([
            "--duration",
            "2.2",
            "--no-bound",
            "--no-telemetry",
            "--json",
            "--plot",
        ])
        .arg(&png)
        .output()
        .unwrap();
    let (rc, stdout, err) = out(o);
    assert_eq!(rc, 0, "{stdout}{err}");
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    assert!(
        bytes.len() > 2000,
        "with something drawn: {} bytes",
        bytes.len()
    );
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let progress: Vec<_> = lines.iter().filter(|l| l["type"] == "progress").collect();
    assert!(
        !progress.is_empty() && progress.iter().all(|p| p["tps"].is_u64()),
        "{stdout}"
    );
    assert!(summary(&stdout)["tps"].is_f64());
    let _ = std::fs::remove_file(&png);
}
