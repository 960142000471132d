//! virtio-user against a real vhost-user backend: DPDK's testpmd with a
//! `net_vhost` port in io forwarding (every frame comes back). Skipped,
//! with a message, where dpdk-testpmd is missing or we are not root.
use rpmd_pmd::port::Pkts;
use rpmd_pmd::{Mempool, MempoolConfig, PortConfig, Registry};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One testpmd at a time: they pin the same CPUs.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Testpmd {
    _serial: std::sync::MutexGuard<'static, ()>,
    child: Child,
    sock: String,
    log: String,
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

fn testpmd(tag: &str) -> Option<Testpmd> {
    testpmd_mode(tag, "io")
}

/// Stops testpmd (SIGINT) and returns its log, which ends with the
/// forward statistics per port.
fn finish(t: Testpmd) -> String {
    let log = t.log.clone();
    drop(t);
    std::fs::read_to_string(&log).unwrap_or_default()
}

/// The `RX-packets` and `TX-packets` of testpmd's final forward statistics.
fn final_stats(log: &str) -> (u64, u64) {
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

fn testpmd_mode(tag: &str, mode: &str) -> Option<Testpmd> {
    testpmd_queues(tag, mode, 1)
}

fn testpmd_queues(tag: &str, mode: &str, queues: u16) -> Option<Testpmd> {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0
        || Command::new("dpdk-testpmd")
            .arg("--version")
            .output()
            .is_err()
    {
        eprintln!("skipping: needs root and dpdk-testpmd (apt-get install dpdk-dev)");
        return None;
    }
    let sock = format!("/tmp/rpmd-vt-{tag}-{}.sock", std::process::id());
    let log = format!("/tmp/rpmd-vt-{tag}-{}.log", std::process::id());
    let child = spawn_testpmd(
        &sock,
        &log,
        &format!("{tag}{}", std::process::id()),
        mode,
        queues,
    )?;
    Some(Testpmd {
        _serial: serial,
        child,
        sock,
        log,
    })
}

/// Starts testpmd with a `net_vhost` port listening on `sock` and waits
/// for the socket.
fn spawn_testpmd(sock: &str, log: &str, prefix: &str, mode: &str, queues: u16) -> Option<Child> {
    spawn_testpmd_as(sock, log, prefix, mode, queues, false)
}

/// As [`spawn_testpmd`]; with `client`, testpmd's vhost port connects to
/// our socket (and retries until it is there), so there is nothing to
/// wait for.
fn spawn_testpmd_as(
    sock: &str,
    log: &str,
    prefix: &str,
    mode: &str,
    queues: u16,
    client: bool,
) -> Option<Child> {
    if !client {
        let _ = std::fs::remove_file(sock);
    }
    let child = Command::new("dpdk-testpmd")
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
            "-a",
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

fn frame(tag: u32, len: usize) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|i| (i as u32 * 7 + tag) as u8).collect();
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f[14..18].copy_from_slice(&tag.to_le_bytes());
    f
}

#[test]
fn frames_sent_to_testpmd_come_back_byte_for_byte() {
    let Some(t) = testpmd("io") else { return };
    io_round_trip(&t, "");
}

/// The same over packed virtqueues (§2.8), which testpmd's vhost
/// negotiates when we ask.
#[test]
fn packed_rings_carry_frames_byte_for_byte() {
    let Some(t) = testpmd("iopk") else { return };
    io_round_trip(&t, ",packed_vq=1");
}

/// In-order use (VIRTIO_F_IN_ORDER, split rings) is negotiated when
/// testpmd's vhost offers it, and the round trip holds with it off too.
#[test]
fn in_order_on_when_offered_and_off_on_request() {
    let Some(t) = testpmd("ino") else { return };
    io_round_trip(&t, ",in_order=0");
}

fn io_round_trip(t: &Testpmd, opts: &str) {
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let pool = std::sync::Arc::new(Mempool::new(&MempoolConfig::new("vt", 4096)).unwrap());
    let mut p = reg.open(&format!("virtio-user:{}{opts}", t.sock)).unwrap();
    p.configure(&PortConfig {
        rx_pool: Some(pool.clone()),
        ..PortConfig::default()
    })
    .unwrap();
    let mut q = p.start().unwrap();
    assert!(p.link().up);
    const N: u32 = 1000;
    let sizes = [64usize, 1518, 60, 512];
    let mut sent = 0u32;
    let mut got = std::collections::HashMap::new();
    let mut out = Pkts::new();
    let mut inb = Pkts::new();
    let start = Instant::now();
    while got.len() < N as usize {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "only {} of {N} frames came back (sent {sent}); testpmd log: {}",
            got.len(),
            t.log
        );
        // At most 128 in flight, so the returns always fit our 256-slot
        // RX ring (io forwarding drops what does not fit).
        while sent < N && out.len() < 32 && (sent as usize) < got.len() + 128 {
            let len = sizes[sent as usize % sizes.len()];
            let mut m = pool.get().unwrap();
            m.append(len).unwrap().copy_from_slice(&frame(sent, len));
            out.push(m).unwrap();
            sent += 1;
        }
        q.tx_burst(0, &mut out);
        sent -= out.len() as u32;
        out.clear();
        q.rx_burst(0, &mut inb, 32);
        while let Some(m) = inb.pop() {
            let d = m.data();
            let tag = u32::from_le_bytes(d[14..18].try_into().unwrap());
            assert_eq!(
                d,
                &frame(tag, d.len())[..],
                "frame {tag} changed on the way"
            );
            got.insert(tag, d.len());
        }
    }
    for (tag, len) in &got {
        assert_eq!(*len, sizes[*tag as usize % sizes.len()]);
    }
    let s = p.stats();
    assert_eq!(s.opackets, N as u64);
    assert_eq!(s.ipackets, N as u64);
    let feats = p
        .xstats()
        .into_iter()
        .find(|x| x.name == "negotiated_features")
        .unwrap()
        .value;
    assert_eq!(
        feats & (1 << 34) != 0,
        opts.contains("packed_vq=1"),
        "RING_PACKED negotiated as asked: {feats:#x}"
    );
    let offered = p
        .xstats()
        .into_iter()
        .find(|x| x.name == "offered_features")
        .unwrap()
        .value;
    let in_order_wanted = !opts.contains("in_order=0") && !opts.contains("packed_vq=1");
    assert_eq!(
        feats & (1 << 35) != 0,
        in_order_wanted && offered & (1 << 35) != 0,
        "IN_ORDER negotiated when offered and wanted: offered {offered:#x}, negotiated {feats:#x}"
    );
    eprintln!("offered {offered:#x}, negotiated {feats:#x}");
    p.stop().unwrap();
    drop(q);
    drop(p);
    assert_eq!(pool.available(), 4096, "every mbuf back in the pool");
}

#[test]
fn a_missing_socket_is_a_clear_error() {
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let e = reg
        .open("virtio-user:/nonexistent/rpmd.sock")
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("cannot connect") && e.contains("/nonexistent/rpmd.sock"),
        "{e}"
    );
    let e = reg
        .open("virtio-user:/x.sock,queue_size=100")
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("power of two"), "{e}");
    let e = reg
        .open("virtio-user:/x.sock,queues=9")
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("1..=8 queue pairs"), "{e}");
}

/// Two queue pairs: testpmd's io forwarding returns what arrives on its
/// queue q on its queue q, so every frame we send on tx queue q comes back,
/// unchanged, on rx queue q.
#[test]
fn two_queue_pairs_each_carry_their_own_frames() {
    let Some(t) = testpmd_queues("mq", "io", 2) else {
        return;
    };
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let pool = std::sync::Arc::new(Mempool::new(&MempoolConfig::new("vtmq", 4096)).unwrap());
    let mut p = reg
        .open(&format!("virtio-user:{},queues=2", t.sock))
        .unwrap();
    assert_eq!(p.capabilities().max_rx_queues, 2);
    p.configure(&PortConfig {
        rx_queues: 2,
        tx_queues: 2,
        rx_pool: Some(pool.clone()),
        ..PortConfig::default()
    })
    .unwrap();
    let mut q = p.start().unwrap();
    let feats = p
        .xstats()
        .into_iter()
        .find(|x| x.name == "negotiated_features")
        .unwrap()
        .value;
    assert_ne!(
        feats & (1 << 22),
        0,
        "VIRTIO_NET_F_MQ negotiated: {feats:#x}"
    );
    const N: u32 = 400;
    let mut got = [0u32; 2];
    let mut sent = [0u32; 2];
    let mut inb = Pkts::new();
    let start = Instant::now();
    while got != [N, N] {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "got {got:?} of {N} per queue (sent {sent:?}); testpmd log: {}",
            t.log
        );
        for qi in 0..2u16 {
            let mut out = Pkts::new();
            let i = qi as usize;
            while sent[i] < N && out.len() < 32 && sent[i] < got[i] + 64 {
                // The tag says which queue sent it.
                let tag = qi as u32 * 100_000 + sent[i];
                let mut m = pool.get().unwrap();
                m.append(128).unwrap().copy_from_slice(&frame(tag, 128));
                out.push(m).unwrap();
                sent[i] += 1;
            }
            q.tx_burst(qi, &mut out);
            sent[i] -= out.len() as u32;
            q.rx_burst(qi, &mut inb, 32);
            while let Some(m) = inb.pop() {
                let d = m.data();
                let tag = u32::from_le_bytes(d[14..18].try_into().unwrap());
                assert_eq!(
                    tag / 100_000,
                    qi as u32,
                    "frame {tag} came back on rx queue {qi}"
                );
                assert_eq!(d, &frame(tag, d.len())[..], "frame {tag} changed");
                got[i] += 1;
            }
        }
    }
    let x = p.xstats();
    let val = |n: &str| x.iter().find(|s| s.name == n).map(|s| s.value);
    for qi in 0..2 {
        assert_eq!(val(&format!("rx_q{qi}_packets")), Some(N as u64), "{x:?}");
        assert_eq!(val(&format!("tx_q{qi}_packets")), Some(N as u64), "{x:?}");
    }
    p.stop().unwrap();
    drop(q);
    drop(p);
    assert_eq!(pool.available(), 4096, "every mbuf back in the pool");
}

fn port(
    t: &Testpmd,
) -> (
    Box<dyn rpmd_pmd::Port>,
    rpmd_pmd::Queues,
    std::sync::Arc<Mempool>,
) {
    port_with(t, "")
}

/// A started port on testpmd's socket, with extra device options.
fn port_with(
    t: &Testpmd,
    opts: &str,
) -> (
    Box<dyn rpmd_pmd::Port>,
    rpmd_pmd::Queues,
    std::sync::Arc<Mempool>,
) {
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let pool = std::sync::Arc::new(Mempool::new(&MempoolConfig::new("vts", 4096)).unwrap());
    let mut p = reg.open(&format!("virtio-user:{}{opts}", t.sock)).unwrap();
    p.configure(&PortConfig {
        rx_pool: Some(pool.clone()),
        ..PortConfig::default()
    })
    .unwrap();
    let q = p.start().unwrap();
    (p, q, pool)
}

#[test]
fn testpmd_rxonly_counts_exactly_what_we_sent() {
    rxonly_counts("rxo", "");
}

/// The same over packed rings.
#[test]
fn testpmd_rxonly_counts_exactly_what_we_sent_packed() {
    rxonly_counts("rxop", ",packed_vq=1");
}

fn rxonly_counts(tag: &str, opts: &str) {
    let Some(t) = testpmd_mode(tag, "rxonly") else {
        return;
    };
    let (mut p, mut q, pool) = port_with(&t, opts);
    const N: u64 = 20_000;
    let mut out = Pkts::new();
    let mut sent = 0;
    let start = Instant::now();
    while sent < N {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "sent only {sent}"
        );
        while out.len() < 32 && sent + (out.len() as u64) < N {
            let mut m = pool.get().unwrap();
            m.append(64).unwrap()[..6].copy_from_slice(&[0xff; 6]);
            out.push(m).unwrap();
        }
        sent += q.tx_burst(0, &mut out) as u64;
    }
    // Let the backend take the last ones off the ring.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(p.stats().opackets, N);
    let log = finish(t);
    let (rx, _) = final_stats(&log);
    assert_eq!(rx, N, "testpmd received {rx}, we sent {N}");
    p.stop().unwrap();
}

#[test]
fn testpmd_txonly_frames_all_arrive() {
    txonly_arrive("txo", "");
}

/// The same over packed rings.
#[test]
fn testpmd_txonly_frames_all_arrive_packed() {
    txonly_arrive("txop", ",packed_vq=1");
}

fn txonly_arrive(tag: &str, opts: &str) {
    let Some(t) = testpmd_mode(tag, "txonly") else {
        return;
    };
    let (mut p, mut q, _pool) = port_with(&t, opts);
    let mut inb = Pkts::new();
    let mut got = 0u64;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(1) {
        got += q.rx_burst(0, &mut inb, 32) as u64;
        for m in inb.iter() {
            assert_eq!(m.data_len(), 64);
        }
        inb.clear();
    }
    assert!(got > 10_000, "received only {got} in 1 s");
    // Stop receiving, then stop testpmd: what it counts as sent is what
    // we took plus what still sits in our RX ring (at most its 256 slots).
    p.stop().unwrap();
    let log = finish(t);
    let (_, tx) = final_stats(&log);
    assert_eq!(p.stats().ipackets, got);
    assert!(
        tx >= got && tx - got <= 256,
        "testpmd sent {tx}, we received {got}"
    );
}

/// A frame of `len` bytes in a chain of mbufs of at most 2000 bytes each.
fn chained(pool: &Mempool, bytes: &[u8]) -> rpmd_pmd::Mbuf {
    let mut chunks = bytes.chunks(2000);
    let mut head = pool.get().unwrap();
    let first = chunks.next().unwrap();
    head.append(first.len()).unwrap().copy_from_slice(first);
    for c in chunks {
        let mut m = pool.get().unwrap();
        m.append(c.len()).unwrap().copy_from_slice(c);
        head.chain(m).unwrap();
    }
    head
}

fn jumbo_round_trip(mrg: bool) {
    jumbo_round_trip_on(mrg, false)
}

fn jumbo_round_trip_on(mrg: bool, packed: bool) {
    let tag = match (mrg, packed) {
        (true, false) => "jm",
        (false, false) => "jn",
        (true, true) => "jmp",
        (false, true) => "jnp",
    };
    let Some(t) = testpmd_mode(tag, "io") else {
        return;
    };
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let pool = std::sync::Arc::new(Mempool::new(&MempoolConfig::new("vtj", 4096)).unwrap());
    let dev = format!(
        "virtio-user:{},mrg_rxbuf={},packed_vq={}",
        t.sock, mrg as u8, packed as u8
    );
    let mut p = reg.open(&dev).unwrap();
    p.configure(&PortConfig {
        rx_pool: Some(pool.clone()),
        ..PortConfig::default()
    })
    .unwrap();
    let mut q = p.start().unwrap();
    let sizes: &[usize] = if mrg {
        &[64, 1518, 9000, 4000]
    } else {
        &[64, 1518, 2000]
    };
    let n = 200u32;
    let mut out = Pkts::new();
    let mut inb = Pkts::new();
    let mut back = 0u32;
    let mut sent = 0u32;
    let start = Instant::now();
    while back < n {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{dev}: {back} of {n} back; log {}",
            t.log
        );
        if sent < n && sent < back + 16 {
            let len = sizes[sent as usize % sizes.len()];
            out.push(chained(&pool, &frame(sent, len))).unwrap();
            if q.tx_burst(0, &mut out) == 1 {
                sent += 1;
            }
            out.clear();
        }
        q.rx_burst(0, &mut inb, 32);
        while let Some(m) = inb.pop() {
            let bytes: Vec<u8> = m.segments().flatten().copied().collect();
            let tag = u32::from_le_bytes(bytes[14..18].try_into().unwrap());
            assert_eq!(
                bytes.len(),
                sizes[tag as usize % sizes.len()],
                "{dev}: frame {tag}"
            );
            assert_eq!(bytes, frame(tag, bytes.len()), "{dev}: frame {tag} changed");
            if bytes.len() > 2048 {
                assert!(m.nb_segs() > 1, "a jumbo frame arrives as a chain");
            }
            back += 1;
        }
    }
    p.stop().unwrap();
    drop((q, p));
    assert_eq!(pool.available(), 4096, "every mbuf back");
}

/// Jumbo frames over packed rings: chains of descriptors on TX,
/// mergeable buffers on RX.
#[test]
fn jumbo_frames_over_packed_rings() {
    jumbo_round_trip_on(true, true);
}

#[test]
fn jumbo_frames_with_mergeable_buffers() {
    jumbo_round_trip(true);
}

#[test]
fn chains_without_mergeable_buffers() {
    jumbo_round_trip(false);
}

/// A fake backend that answers the first request with `reply` bytes and
/// hangs up.
fn fake_backend(reply: Vec<u8>) -> (String, std::thread::JoinHandle<()>) {
    use std::io::{Read, Write};
    let path = format!("/tmp/rpmd-fake-{}-{}.sock", std::process::id(), reply.len());
    let _ = std::fs::remove_file(&path);
    let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let h = std::thread::spawn(move || {
        if let Ok((mut s, _)) = l.accept() {
            let mut hdr = [0u8; 12];
            // SET_OWNER has no reply; answer the next request (GET_FEATURES).
            let _ = s.read_exact(&mut hdr);
            let _ = s.read_exact(&mut hdr);
            let _ = s.write_all(&reply);
        }
    });
    (path, h)
}

#[test]
fn malformed_backend_replies_are_errors_not_panics() {
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    // Truncated: a header announcing 8 bytes, then nothing.
    let mut truncated = Vec::new();
    truncated.extend_from_slice(&1u32.to_le_bytes()); // GET_FEATURES
    truncated.extend_from_slice(&0x5u32.to_le_bytes()); // version 1, reply
    truncated.extend_from_slice(&8u32.to_le_bytes());
    // Garbage: a reply to the wrong request.
    let mut wrong = Vec::new();
    wrong.extend_from_slice(&7u32.to_le_bytes());
    wrong.extend_from_slice(&0x5u32.to_le_bytes());
    wrong.extend_from_slice(&8u32.to_le_bytes());
    wrong.extend_from_slice(&u64::MAX.to_le_bytes());
    // Features without VERSION_1.
    let mut legacy = Vec::new();
    legacy.extend_from_slice(&1u32.to_le_bytes());
    legacy.extend_from_slice(&0x5u32.to_le_bytes());
    legacy.extend_from_slice(&8u32.to_le_bytes());
    legacy.extend_from_slice(&(1u64 << 5).to_le_bytes());
    for (reply, want) in [
        (truncated, "GET_FEATURES"),
        (wrong, "GET_FEATURES"),
        (legacy, "VERSION_1"),
    ] {
        let (path, h) = fake_backend(reply);
        let e = reg
            .open(&format!("virtio-user:{path}"))
            .err()
            .expect("a bad backend must fail");
        let msg = e.to_string();
        assert!(msg.contains(want), "{msg}");
        h.join().unwrap();
        let _ = std::fs::remove_file(&path);
    }
}

#[test]
fn a_backend_that_never_answers_times_out() {
    let path = format!("/tmp/rpmd-mute-{}.sock", std::process::id());
    let _ = std::fs::remove_file(&path);
    let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
    // Accepts and holds the connection, never replying.
    let h = std::thread::spawn(move || {
        l.accept().map(|(s, _)| {
            std::thread::sleep(Duration::from_secs(2));
            drop(s)
        })
    });
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let t = Instant::now();
    let e = reg
        .open(&format!("virtio-user:{path},timeout_ms=200"))
        .err()
        .expect("no reply must fail");
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "waited {:?}",
        t.elapsed()
    );
    assert!(e.to_string().contains("GET_FEATURES"), "{e}");
    let _ = h.join();
    let _ = std::fs::remove_file(&path);
}

/// Waits up to `ms` for `fd` to become readable.
fn readable(fd: std::os::fd::BorrowedFd<'_>, ms: i32) -> bool {
    use std::os::fd::AsRawFd;
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut p, 1, ms) == 1 }
}

/// Event indices are negotiated with testpmd's vhost, and an armed rx
/// queue's interrupt eventfd fires when a frame comes back, while a
/// disarmed one stays quiet.
#[test]
fn rx_interrupts_with_event_indices() {
    let Some(t) = testpmd("irq") else { return };
    let (p, mut q, pool) = port(&t);
    assert!(p.capabilities().rx_interrupts);
    let feats = p
        .xstats()
        .into_iter()
        .find(|x| x.name == "negotiated_features")
        .unwrap()
        .value;
    assert_ne!(feats & (1 << 29), 0, "EVENT_IDX negotiated: {feats:#x}");
    let send = |q: &mut rpmd_pmd::Queues, tag: u32| {
        let mut out = Pkts::new();
        let mut m = pool.get().unwrap();
        m.append(64).unwrap().copy_from_slice(&frame(tag, 64));
        out.push(m).unwrap();
        assert_eq!(q.tx_burst(0, &mut out), 1);
    };
    let mut inb = Pkts::new();
    // Armed: quiet while nothing comes, readable once a frame is back.
    q.rx[0].set_interrupt(true).unwrap();
    assert!(!q.rx[0].has_work());
    assert!(!readable(q.rx[0].interrupt_fd().unwrap(), 100));
    send(&mut q, 1);
    assert!(
        readable(q.rx[0].interrupt_fd().unwrap(), 5000),
        "no interrupt for a returned frame; testpmd log: {}",
        t.log
    );
    assert!(q.rx[0].has_work());
    q.rx[0].set_interrupt(false).unwrap();
    assert_eq!(q.rx_burst(0, &mut inb, 32), 1);
    // Disarmed: the frame comes back without an interrupt.
    send(&mut q, 2);
    let t0 = Instant::now();
    while q.rx_burst(0, &mut inb, 32) == 0 {
        assert!(t0.elapsed() < Duration::from_secs(5), "frame 2 lost");
    }
    assert!(!readable(q.rx[0].interrupt_fd().unwrap(), 100));
    assert_eq!(inb.len(), 2);
}

/// testpmd killed mid-stream: the link goes down, the port keeps its
/// queues, and when a new testpmd listens on the same socket the port
/// reconnects by itself, the link comes back, and frames flow again.
#[test]
fn testpmd_killed_and_restarted_mid_stream() {
    let Some(mut t) = testpmd("rc") else { return };
    let (p, mut q, pool) = port(&t);
    let echo = |q: &mut rpmd_pmd::Queues, tag: u32| -> usize {
        let mut out = Pkts::new();
        for k in 0..8 {
            let mut m = pool.get().unwrap();
            m.append(64).unwrap().copy_from_slice(&frame(tag + k, 64));
            out.push(m).unwrap();
        }
        q.tx_burst(0, &mut out);
        let mut inb = Pkts::new();
        q.rx_burst(0, &mut inb, 32)
    };
    let flows = |q: &mut rpmd_pmd::Queues, what: &str| {
        let t0 = Instant::now();
        let mut got = 0;
        while got < 100 {
            assert!(
                t0.elapsed() < Duration::from_secs(15),
                "{what}: {got} frames back"
            );
            got += echo(q, 0);
        }
    };
    flows(&mut q, "before the kill");
    // SIGKILL: no goodbye on the socket.
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(t.child.id() as i32, libc::SIGKILL) };
    let _ = t.child.wait();
    let t0 = Instant::now();
    while p.link().up {
        assert!(t0.elapsed() < Duration::from_secs(5), "link still up");
        let _ = echo(&mut q, 1000);
        std::thread::sleep(Duration::from_millis(20));
    }
    // The data path keeps running while the backend is away.
    for _ in 0..20 {
        let _ = echo(&mut q, 2000);
    }
    t.child = spawn_testpmd(
        &t.sock,
        &t.log,
        &format!("rc2{}", std::process::id()),
        "io",
        1,
    )
    .expect("testpmd restarts");
    let t0 = Instant::now();
    while !p.link().up {
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "no reconnection; log: {}",
            t.log
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    flows(&mut q, "after the restart");
    let rc = p
        .xstats()
        .into_iter()
        .find(|x| x.name == "reconnects")
        .unwrap()
        .value;
    assert_eq!(rc, 1);
    let mut p = p;
    p.stop().unwrap();
    drop(q);
    drop(p);
    assert_eq!(pool.available(), 4096, "every mbuf back in the pool");
}

/// Server mode: we listen, testpmd's vhost port connects as a client
/// (`client=1`), frames round-trip; testpmd killed and started again
/// connects to us again and frames flow once more.
#[test]
fn server_mode_with_a_client_testpmd_that_comes_back() {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0
        || Command::new("dpdk-testpmd")
            .arg("--version")
            .output()
            .is_err()
    {
        eprintln!("skipping: needs root and dpdk-testpmd (apt-get install dpdk-dev)");
        return;
    }
    let id = std::process::id();
    let sock = format!("/tmp/rpmd-vt-srv-{id}.sock");
    let log = format!("/tmp/rpmd-vt-srv-{id}.log");
    let mut child = spawn_testpmd_as(&sock, &log, &format!("srv{id}"), "io", 1, true).unwrap();
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let pool = std::sync::Arc::new(Mempool::new(&MempoolConfig::new("vtsrv", 4096)).unwrap());
    let mut p = reg
        .open(&format!("virtio-user:{sock},server=1,timeout_ms=20000"))
        .unwrap_or_else(|e| panic!("{e}; testpmd log: {log}"));
    p.configure(&PortConfig {
        rx_pool: Some(pool.clone()),
        ..PortConfig::default()
    })
    .unwrap();
    let mut q = p.start().unwrap();
    let flows = |q: &mut rpmd_pmd::Queues, what: &str| {
        let t0 = Instant::now();
        let mut got = 0;
        let mut inb = Pkts::new();
        while got < 100 {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "{what}: {got} frames back; {log}"
            );
            let mut out = Pkts::new();
            for k in 0..8 {
                let mut m = pool.get().unwrap();
                m.append(64).unwrap().copy_from_slice(&frame(k, 64));
                out.push(m).unwrap();
            }
            q.tx_burst(0, &mut out);
            got += q.rx_burst(0, &mut inb, 32);
            inb.clear();
        }
    };
    flows(&mut q, "first client");
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    let t0 = Instant::now();
    while p.link().up {
        assert!(t0.elapsed() < Duration::from_secs(5), "link still up");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut child = spawn_testpmd_as(&sock, &log, &format!("srv2{id}"), "io", 1, true).unwrap();
    let t0 = Instant::now();
    while !p.link().up {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the client did not come back; {log}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    flows(&mut q, "second client");
    p.stop().unwrap();
    drop(q);
    drop(p);
    assert!(
        !std::path::Path::new(&sock).exists(),
        "our socket file is removed"
    );
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let _ = child.wait();
    drop(serial);
    assert_eq!(pool.available(), 4096, "every mbuf back in the pool");
}

/// testpmd's macswap forwarding: every frame comes back with its MAC
/// addresses swapped and every other byte as sent.
#[test]
fn macswap_returns_frames_with_addresses_swapped() {
    let Some(t) = testpmd_mode("msw", "macswap") else {
        return;
    };
    let (mut p, mut q, pool) = port(&t);
    const N: u32 = 500;
    let (mut sent, mut got) = (0u32, 0u32);
    let mut inb = Pkts::new();
    let start = Instant::now();
    while got < N {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{got} of {N} back; log {}",
            t.log
        );
        let mut out = Pkts::new();
        while sent < N && out.len() < 32 && sent < got + 128 {
            let mut m = pool.get().unwrap();
            m.append(128).unwrap().copy_from_slice(&frame(sent, 128));
            out.push(m).unwrap();
            sent += 1;
        }
        q.tx_burst(0, &mut out);
        sent -= out.len() as u32;
        q.rx_burst(0, &mut inb, 32);
        while let Some(m) = inb.pop() {
            let d = m.data();
            let tag = u32::from_le_bytes(d[14..18].try_into().unwrap());
            let want = frame(tag, d.len());
            assert_eq!(
                &d[..6],
                &want[6..12],
                "frame {tag}: destination is the old source"
            );
            assert_eq!(
                &d[6..12],
                &want[..6],
                "frame {tag}: source is the old destination"
            );
            assert_eq!(&d[12..], &want[12..], "frame {tag}: payload unchanged");
            got += 1;
        }
    }
    p.stop().unwrap();
}
