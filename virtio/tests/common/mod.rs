//! What the testpmd test binaries share: starting and stopping DPDK
//! testpmd with a `net_vhost` port, its statistics, tagged frames, and a
//! started virtio-user port on its socket. Each binary uses a part.
#![allow(dead_code)]
use rpmd_pmd::{Mempool, MempoolConfig, PortConfig, Registry};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One testpmd at a time: they pin the same CPUs.
pub static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub struct Testpmd {
    pub _serial: std::sync::MutexGuard<'static, ()>,
    pub child: Child,
    pub sock: String,
    pub log: String,
    /// Started with `-a`: it forwards by itself once up, after flushing
    /// its queues (so the port helpers wait for that before returning).
    pub auto_start: bool,
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        // SIGINT: testpmd stops its ports and exits cleanly.
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.sock);
    }
}

pub fn testpmd(tag: &str) -> Option<Testpmd> {
    testpmd_mode(tag, "io")
}

/// Stops testpmd (SIGINT) and returns its log, which ends with the
/// forward statistics per port.
pub fn finish(t: Testpmd) -> String {
    let log = t.log.clone();
    drop(t);
    std::fs::read_to_string(&log).unwrap_or_default()
}

/// The `RX-packets` and `TX-packets` of testpmd's final forward statistics.
pub fn final_stats(log: &str) -> (u64, u64) {
    let tail = log
        .rfind("Forward statistics for port 0")
        .map(|i| &log[i..])
        .unwrap_or("");
    let num = |key: &str| -> u64 {
        tail.find(key)
            .and_then(|i| tail[i + key.len()..].split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(u64::MAX)
    };
    (num("RX-packets:"), num("TX-packets:"))
}

pub fn testpmd_mode(tag: &str, mode: &str) -> Option<Testpmd> {
    testpmd_queues(tag, mode, 1)
}

pub fn testpmd_queues(tag: &str, mode: &str, queues: u16) -> Option<Testpmd> {
    testpmd_run(tag, mode, queues, None)
}

/// An interactive testpmd (`-i`) that is given `cmds` (lines of testpmd
/// commands, e.g. `set fwd csum`, `start`) once its socket exists.
pub fn testpmd_cmds(tag: &str, cmds: &str) -> Option<Testpmd> {
    testpmd_run(tag, "io", 1, Some(cmds))
}

/// Whether testpmd can run here (root, dpdk-testpmd installed); says why
/// not on stderr.
pub fn can_run_testpmd() -> bool {
    // SAFETY: geteuid has no preconditions.
    let ok = unsafe { libc::geteuid() } == 0
        && Command::new("dpdk-testpmd")
            .arg("--version")
            .output()
            .is_ok();
    if !ok {
        let test = std::thread::current()
            .name()
            .unwrap_or("virtio")
            .to_string();
        rpmd_pmd::testing::missing_peer(
            &format!("virtio {test}"),
            "needs root and dpdk-testpmd (apt-get install dpdk-dev)",
        );
    }
    ok
}

fn testpmd_run(tag: &str, mode: &str, queues: u16, cmds: Option<&str>) -> Option<Testpmd> {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run_testpmd() {
        return None;
    }
    let sock = format!("/tmp/rpmd-vt-{tag}-{}.sock", std::process::id());
    let log = format!("/tmp/rpmd-vt-{tag}-{}.log", std::process::id());
    let mut child = spawn_testpmd_as(
        &sock,
        &log,
        &format!("{tag}{}", std::process::id()),
        mode,
        queues,
        false,
        cmds.is_some(),
    )?;
    if let Some(c) = cmds {
        use std::io::Write;
        let stdin = child.stdin.as_mut()?;
        stdin.write_all(c.as_bytes()).ok()?;
        stdin.write_all(b"\n").ok()?;
        stdin.flush().ok()?;
    }
    Some(Testpmd {
        _serial: serial,
        child,
        sock,
        log,
        auto_start: cmds.is_none(),
    })
}

/// Starts testpmd with a `net_vhost` port listening on `sock` and waits
/// for the socket.
pub fn spawn_testpmd(
    sock: &str,
    log: &str,
    prefix: &str,
    mode: &str,
    queues: u16,
) -> Option<Child> {
    spawn_testpmd_as(sock, log, prefix, mode, queues, false, false)
}

/// As [`spawn_testpmd`]; with `client`, testpmd's vhost port connects to
/// our socket (and retries until it is there), so there is nothing to
/// wait for; `interactive`: `-i` instead of starting to forward.
pub fn spawn_testpmd_as(
    sock: &str,
    log: &str,
    prefix: &str,
    mode: &str,
    queues: u16,
    client: bool,
    interactive: bool,
) -> Option<Child> {
    if !client {
        let _ = std::fs::remove_file(sock);
    }
    // Line-buffered, so that its log shows when it starts forwarding
    // (`forwarding`) while it runs.
    let child = Command::new("stdbuf")
        .args(["-oL", "dpdk-testpmd"])
        .args(["--no-pci", "--no-huge", "-m", "1024", "--lcores", "0@0,1@1"])
        .arg(format!("--file-prefix=rpmdvt{prefix}"))
        .args(["--log-level=lib.eal:error"])
        .arg("--vdev")
        .arg(format!(
            "net_vhost0,iface={sock},queues={queues}{}",
            if client { ",client=1" } else { "" }
        ))
        .arg("--")
        .arg(format!("--forward-mode={mode}"))
        .arg(format!("--rxq={queues}"))
        .arg(format!("--txq={queues}"))
        .args([
            "--port-topology=loop",
            "--total-num-mbufs=8192",
            if interactive { "-i" } else { "-a" },
            "--txpkts=64",
        ])
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(log).ok()?)
        .stderr(std::fs::File::options().append(true).open(log).ok()?)
        .spawn()
        .ok()?;
    let t = Instant::now();
    while !client && !std::path::Path::new(sock).exists() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "testpmd made no socket; log: {log}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(child)
}

/// Waits (at most 30 s) until a non-interactive testpmd forwards: it
/// drops what reached its queues before (`flush_fwd_rx_queues`), and it
/// checks the link first, so a frontend that sends as soon as its link is
/// up can lose a ring's worth.
pub fn wait_forwarding(t: &Testpmd) {
    let s = Instant::now();
    while !std::fs::read_to_string(&t.log)
        .unwrap_or_default()
        .contains("Press enter to exit")
    {
        assert!(
            s.elapsed() < Duration::from_secs(30),
            "testpmd never started forwarding; log: {}",
            t.log
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn frame(tag: u32, len: usize) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|i| (i as u32 * 7 + tag) as u8).collect();
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f[14..18].copy_from_slice(&tag.to_le_bytes());
    f
}

/// A started port with its queues and the pool its RX queues fill from.
pub type Started = (Box<dyn rpmd_pmd::Port>, rpmd_pmd::Queues, Mempool);

pub fn port(t: &Testpmd) -> Started {
    port_with(t, "")
}

/// A started port on testpmd's socket, with extra device options.
pub fn port_with(t: &Testpmd, opts: &str) -> Started {
    port_config(t, opts, PortConfig::default())
}

/// A started port on testpmd's socket configured as `conf` (its rx_pool,
/// when it names none, set here: 4096 mbufs).
pub fn port_config(t: &Testpmd, opts: &str, conf: PortConfig) -> Started {
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let pool = match &conf.rx_pool {
        Some(p) => p.clone(),
        None => Mempool::new(&MempoolConfig::new("vts", 4096)).unwrap(),
    };
    let mut p = reg.open(&format!("virtio-user:{}{opts}", t.sock)).unwrap();
    p.configure(&PortConfig {
        rx_pool: Some(pool.clone()),
        ..conf
    })
    .unwrap();
    let q = p.start().unwrap();
    if t.auto_start {
        wait_forwarding(t);
    }
    (p, q, pool)
}

/// The named extended statistic of `p` (panics if there is none).
pub fn xstat(p: &dyn rpmd_pmd::Port, name: &str) -> u64 {
    p.xstats()
        .into_iter()
        .find(|x| x.name == name)
        .unwrap_or_else(|| panic!("no xstat {name}"))
        .value
}

/// Waits up to `ms` for `fd` to become readable.
pub fn readable(fd: std::os::fd::BorrowedFd<'_>, ms: i32) -> bool {
    use std::os::fd::AsRawFd;
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut p, 1, ms) == 1 }
}

/// An Ethernet/IPv4/UDP frame carrying `tag`, both checksums zero.
pub fn udp_frame(tag: u32, payload: usize) -> Vec<u8> {
    let mut f = vec![0u8; 42 + payload];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((20 + 8 + payload) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
    f[34..36].copy_from_slice(&4000u16.to_be_bytes());
    f[36..38].copy_from_slice(&5000u16.to_be_bytes());
    f[38..40].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
    for (i, b) in f[42..].iter_mut().enumerate() {
        *b = (i as u32 * 13 + tag) as u8;
    }
    f[42..46].copy_from_slice(&tag.to_le_bytes());
    f
}

/// Whether the UDP checksum of `f` verifies (the sum over pseudo-header
/// and datagram is all ones), and the IPv4 header's too.
pub fn checksums_ok(f: &[u8]) -> (bool, bool) {
    let ip = &f[14..34];
    let ip_ok = rpmd_pmd::net::fold(rpmd_pmd::net::ones_sum(ip, 0)) == 0xffff;
    let udp = &f[34..];
    let phdr = rpmd_pmd::net::pseudo_header_sum(ip).unwrap() as u32;
    let udp_ok = rpmd_pmd::net::fold(rpmd_pmd::net::ones_sum(udp, phdr)) == 0xffff;
    (ip_ok, udp_ok)
}

/// The tag `udp_frame` put in a frame.
pub fn tag_of(f: &[u8]) -> u32 {
    u32::from_le_bytes([f[42], f[43], f[44], f[45]])
}
