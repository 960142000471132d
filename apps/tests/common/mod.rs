//! DPDK testpmd as the peer of the apps' tests: its `net_vhost` ports
//! (vhost-user backends the apps' virtio-user ports connect to), started
//! one at a time, and its final counters.
#![allow(dead_code)]
pub mod far;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One testpmd at a time: they pin the same CPUs.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub struct Testpmd {
    _serial: std::sync::MutexGuard<'static, ()>,
    pub child: std::process::Child,
    /// One vhost-user socket per port.
    pub socks: Vec<String>,
    pub log: String,
}

/// testpmd in forwarding mode `mode` with `ports` vhost-user ports (each
/// on its own socket, with `queues` queue pairs; `--port-topology=loop`
/// for one, paired for more), `extra` options after `--`. `None` (a
/// recorded skip, or a failure under CI) without root or dpdk-testpmd.
pub fn testpmd(
    tag: &str,
    mode: &str,
    ports: usize,
    queues: u16,
    extra: &[&str],
) -> Option<Testpmd> {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0
        || Command::new("dpdk-testpmd")
            .arg("--version")
            .output()
            .is_err()
    {
        let test = std::thread::current().name().unwrap_or(tag).to_string();
        rpmd_pmd::testing::missing_peer(
            &format!("apps {tag} {test}"),
            "needs root and dpdk-testpmd (apt-get install dpdk-dev)",
        );
        return None;
    }
    let id = format!("{}{tag}{mode}", std::process::id());
    let socks: Vec<String> = (0..ports)
        .map(|i| format!("/tmp/rpmd-{id}-{i}.sock"))
        .collect();
    let log = format!("/tmp/rpmd-{id}.log");
    // Line-buffered: testpmd's stdout to a file is block-buffered, and the
    // tests read its periodic statistics lines while it runs.
    // `--tx-first` sends its burst when forwarding starts, so that start
    // waits for the link (the app connecting).
    let tx_first = extra.contains(&"--tx-first");
    let mut cmd = Command::new("stdbuf");
    cmd.args(["-oL", "dpdk-testpmd"])
        .args(["--no-pci", "--no-huge", "-m", "1024", "--lcores", "0@0,1@1"])
        .arg(format!("--file-prefix=rpmd{id}"))
        .args(["--log-level=lib.eal:error"]);
    for (i, s) in socks.iter().enumerate() {
        cmd.args(["--vdev", &format!("net_vhost{i},iface={s},queues={queues}")]);
    }
    let topology = if ports == 1 { "loop" } else { "paired" };
    let child = cmd
        .args([
            "--",
            &format!("--forward-mode={mode}"),
            &format!("--port-topology={topology}"),
        ])
        .args(["--total-num-mbufs=8192", "-a"])
        .args((!tx_first).then_some("--disable-link-check"))
        .args([format!("--rxq={queues}"), format!("--txq={queues}")])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&log).ok()?)
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut t = Testpmd {
        _serial: serial,
        child,
        socks,
        log,
    };
    let started = Instant::now();
    while !t.socks.iter().all(|s| std::path::Path::new(s).exists()) {
        // (Dropping `t` stops testpmd.)
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no socket: {}",
            t.log
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Wait until forwarding has started: testpmd's start flushes its rx
    // queues, so a frame sent before it is dropped uncounted (the count
    // tests lost a ring's worth in a CI run). `--disable-link-check` lets
    // it start before the app connects, while its queues are empty. (With
    // `--stats-period` it prints statistics instead of the prompt; with
    // `--tx-first` testpmd keeps the link check and the tests do not
    // wait: its burst needs the app connected, and the test that uses it
    // counts frames circling, not an exact total.)
    let forwarding =
        |log: &str| log.contains("Press enter to exit") || log.contains("Port statistics");
    while !tx_first && !forwarding(&std::fs::read_to_string(&t.log).unwrap_or_default()) {
        if let Ok(Some(status)) = t.child.try_wait() {
            panic!("testpmd exited ({status}) before forwarding: {}", t.log);
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "not forwarding: {}",
            t.log
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(t)
}

/// A test that panics before `finish` must not leave testpmd pinned to
/// the CPUs for the next one.
impl Drop for Testpmd {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        for s in &self.socks {
            let _ = std::fs::remove_file(s);
        }
    }
}

/// Stops testpmd; returns port 0's final RX-packets, the last RX-bytes
/// its periodic port stats printed (with `--stats-period`; `u64::MAX`
/// without), and the log.
pub fn finish(t: Testpmd) -> (u64, u64, String) {
    let mut t = t;
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(t.child.id() as i32, libc::SIGINT) };
    let _ = t.child.wait();
    let log = std::fs::read_to_string(&t.log).unwrap_or_default();
    let tail = log
        .rfind("Forward statistics for port 0")
        .map(|i| log[i..].to_string())
        .unwrap_or_default();
    let after = |text: &str, key: &str| -> u64 {
        text.find(key)
            .and_then(|i| text[i + key.len()..].split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(u64::MAX)
    };
    let bytes = log
        .rfind("RX-bytes:")
        .map(|i| after(&log[i..], "RX-bytes:"))
        .unwrap_or(u64::MAX);
    (after(&tail, "RX-packets:"), bytes, log)
}
