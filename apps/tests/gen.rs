//! gen end to end: the embedded pair, rate limiting, and both directions
//! against DPDK testpmd (gen txonly -> testpmd rxonly, with testpmd's
//! count matching ours exactly; testpmd txonly -> gen rxonly).
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn gen(args: &[&str]) -> (i32, Value, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_gen"))
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let last = stdout.lines().last().unwrap_or("{}").to_string();
    let v: Value = serde_json::from_str(&last).unwrap_or(Value::Null);
    (
        o.status.code().unwrap_or(-1),
        v["summary"].clone(),
        format!("{stdout}{err}"),
    )
}

#[test]
fn embedded_pair_receives_what_it_sends_at_the_set_rate() {
    let (rc, s, log) = gen(&["--duration", "1"]);
    assert_eq!(rc, 0, "{log}");
    let tx = s["tx_packets"].as_u64().unwrap();
    assert!(tx > 100_000, "{log}");
    assert_eq!(
        s["rx_packets"].as_u64(),
        Some(tx),
        "every frame sent arrives: {log}"
    );
    let (rc, s, log) = gen(&["--duration", "2", "--rate", "50000", "--flows", "4"]);
    assert_eq!(rc, 0, "{log}");
    let pps = s["tx_packets"].as_f64().unwrap() / s["seconds"].as_f64().unwrap();
    assert!(
        (40_000.0..60_000.0).contains(&pps),
        "{pps} pps for 50000: {log}"
    );
}

#[test]
fn bad_options_name_themselves() {
    for (args, want) in [
        (vec!["--size", "10"], "--size"),
        (vec!["--mode", "fwd"], "--mode"),
        (vec!["--dev", "nope:x", "--duration", "1"], "no driver"),
    ] {
        let (rc, _, log) = gen(&args);
        assert!(rc == 1 || rc == 2, "{args:?}: {rc}");
        assert!(log.contains(want), "{args:?}: {log}");
    }
}

/// One testpmd at a time: they pin the same CPUs.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Testpmd {
    _serial: std::sync::MutexGuard<'static, ()>,
    child: std::process::Child,
    sock: String,
    log: String,
}

fn testpmd(mode: &str) -> Option<Testpmd> {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0
        || Command::new("dpdk-testpmd")
            .arg("--version")
            .output()
            .is_err()
    {
        let test = std::thread::current()
            .name()
            .unwrap_or("apps gen")
            .to_string();
        rpmd_pmd::testing::missing_peer(
            &format!("apps gen {test}"),
            "needs root and dpdk-testpmd (apt-get install dpdk-dev)",
        );
        return None;
    }
    let id = format!("{}{mode}", std::process::id());
    let sock = format!("/tmp/rpmd-gen-{id}.sock");
    let log = format!("/tmp/rpmd-gen-{id}.log");
    let child = Command::new("dpdk-testpmd")
        .args(["--no-pci", "--no-huge", "-m", "1024", "--lcores", "0@0,1@1"])
        .arg(format!("--file-prefix=rpmdgen{id}"))
        .args(["--log-level=lib.eal:error"])
        .args(["--vdev", &format!("net_vhost0,iface={sock},queues=1")])
        .args([
            "--",
            &format!("--forward-mode={mode}"),
            "--port-topology=loop",
        ])
        .args(["--total-num-mbufs=8192", "-a", "--txpkts=64"])
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&log).ok()?)
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let t = Instant::now();
    while !std::path::Path::new(&sock).exists() {
        assert!(t.elapsed() < Duration::from_secs(30), "no socket: {log}");
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(Testpmd {
        _serial: serial,
        child,
        sock,
        log,
    })
}

/// Stops testpmd and returns its final RX-packets for port 0.
fn finish(t: Testpmd) -> (u64, String) {
    let mut t = t;
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(t.child.id() as i32, libc::SIGINT) };
    let _ = t.child.wait();
    let _ = std::fs::remove_file(&t.sock);
    let log = std::fs::read_to_string(&t.log).unwrap_or_default();
    let tail = log
        .rfind("Forward statistics for port 0")
        .map(|i| log[i..].to_string())
        .unwrap_or_default();
    let rx = tail
        .find("RX-packets:")
        .and_then(|i| tail[i + 11..].split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX);
    (rx, log)
}

#[test]
fn gen_txonly_into_testpmd_rxonly_counts_match() {
    let Some(t) = testpmd("rxonly") else { return };
    let dev = format!("virtio-user:{}", t.sock);
    let (rc, s, log) = gen(&[
        "--mode",
        "txonly",
        "--dev",
        &dev,
        "-l",
        "0",
        "--duration",
        "1.5",
        "--rate",
        "200000",
        "--flows",
        "8",
    ]);
    let (tp_rx, tp_log) = finish(t);
    assert_eq!(rc, 0, "{log}");
    let sent = s["tx_packets"].as_u64().unwrap();
    assert!(sent > 100_000, "{log}");
    assert_eq!(
        tp_rx, sent,
        "testpmd rxonly saw {tp_rx}, gen sent {sent}\n{tp_log}"
    );
}

#[test]
fn testpmd_txonly_into_gen_rxonly() {
    let Some(t) = testpmd("txonly") else { return };
    let dev = format!("virtio-user:{}", t.sock);
    let (rc, s, log) = gen(&[
        "--mode",
        "rxonly",
        "--dev",
        &dev,
        "-l",
        "0",
        "--duration",
        "1.5",
    ]);
    let _ = finish(t);
    assert_eq!(rc, 0, "{log}");
    let got = s["rx_packets"].as_u64().unwrap();
    assert!(got > 10_000, "{log}");
    assert_eq!(
        s["rx_bytes"].as_u64(),
        Some(got * 64),
        "64-byte frames: {log}"
    );
}
