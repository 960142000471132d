//! The vhost-user backend against DPDK testpmd's `net_virtio_user`: the
//! frontend is DPDK's. testpmd's txonly into us, us into its rxonly
//! (frame for frame against its counters), its io loop (byte for byte),
//! with mergeable buffers and in-order use on and off, two queue pairs,
//! both socket roles, testpmd killed and restarted under a running port,
//! and the checksum offloads both ways (its csum engine's partial
//! checksums, our requests completed or passed on as NEEDS_CSUM).
//! Skipped, with a message (a failure under CI=true), where dpdk-testpmd
//! is missing or we are not root.
mod common;

use common::{can_run_testpmd, checksums_ok, final_stats, frame, tag_of, udp_frame};
use common::{Testpmd, SERIAL};
use rpmd_pmd::mbuf::{RX_L4_CKSUM_NONE, TX_IP_CKSUM, TX_UDP_CKSUM};
use rpmd_pmd::net::pseudo_header_sum;
use rpmd_pmd::port::{Offloads, Pkts};
use rpmd_pmd::{Mempool, MempoolConfig, Port, PortConfig, Queues, Registry};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// testpmd with a `net_virtio_user` port on `sock` (with `vopts`), in
/// forwarding `mode`, `queues` pairs.
fn virtio_testpmd(tag: &str, sock: &str, vopts: &str, mode: &str, queues: u16) -> Testpmd {
    virtio_testpmd_with(tag, sock, vopts, mode, queues, &[], None)
}

/// As [`virtio_testpmd`], with `extra` testpmd options and, with `cmds`,
/// interactive (`-i`) running those commands.
fn virtio_testpmd_with(
    tag: &str,
    sock: &str,
    vopts: &str,
    mode: &str,
    queues: u16,
    extra: &[&str],
    cmds: Option<&str>,
) -> Testpmd {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let log = format!("/tmp/rpmd-bt-{tag}-{}.log", std::process::id());
    // Line-buffered, so the log shows when forwarding starts.
    let child = Command::new("stdbuf")
        .args(["-oL", "dpdk-testpmd"])
        .args(["--no-pci", "--no-huge", "-m", "1024", "--lcores", "0@0,1@1"])
        .arg(format!("--file-prefix=rpmdbt{tag}{}", std::process::id()))
        .args(["--log-level=lib.eal:error"])
        // The vectorized packed path needs AVX-512 allowed (EAL's default
        // limit is 256 bits); without it testpmd quietly takes another.
        .args(
            vopts
                .contains("vectorized=1")
                .then_some("--force-max-simd-bitwidth=512"),
        )
        .arg("--vdev")
        .arg(format!(
            "net_virtio_user0,path={sock},queues={queues}{vopts}"
        ))
        .arg("--")
        .arg(format!("--forward-mode={mode}"))
        .arg(format!("--rxq={queues}"))
        .arg(format!("--txq={queues}"))
        .args([
            "--port-topology=loop",
            "--total-num-mbufs=8192",
            if cmds.is_some() { "-i" } else { "-a" },
            "--txpkts=64",
        ])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::options().append(true).open(&log).unwrap())
        .spawn()
        .expect("dpdk-testpmd");
    let mut child = child;
    if let Some(c) = cmds {
        use std::io::Write;
        let stdin = child.stdin.as_mut().expect("testpmd's stdin");
        stdin.write_all(c.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }
    Testpmd {
        _serial: serial,
        child,
        // Our socket: the Testpmd's drop must not remove it, so a copy
        // under another name.
        sock: format!("{sock}.testpmd"),
        log,
        auto_start: cmds.is_none(),
    }
}

struct Backend {
    port: Box<dyn Port>,
    q: Queues,
    pool: Mempool,
    sock: String,
}

fn backend(tag: &str, opts: &str, queues: u16) -> Backend {
    backend_with(tag, opts, queues, Offloads::NONE)
}

fn backend_with(tag: &str, opts: &str, queues: u16, offloads: Offloads) -> Backend {
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let sock = format!("/tmp/rpmd-bt-{tag}-{}.sock", std::process::id());
    let pool = Mempool::new(&MempoolConfig::new(&format!("bt{tag}"), 8192)).unwrap();
    let mut port = reg.open(&format!("vhost-user:{sock}{opts}")).unwrap();
    port.configure(&PortConfig {
        rx_queues: queues,
        tx_queues: queues,
        offloads,
        ..PortConfig::with_pool(&pool)
    })
    .unwrap();
    let q = port.start().unwrap();
    Backend {
        port,
        q,
        pool,
        sock,
    }
}

/// Waits for our link to go `up` (or down) and, going up, for testpmd to
/// forward: it drops what arrived before (`flush_fwd_rx_queues`).
fn wait_link(b: &Backend, up: bool, t: &Testpmd) {
    let s = Instant::now();
    // (Interactive, its `start` shows the forwarding set-up instead.)
    let forwarding = || {
        let log = std::fs::read_to_string(&t.log).unwrap_or_default();
        log.contains("Press enter to exit") || log.contains("csum packet forwarding - ports=")
    };
    while b.port.link().up != up || (up && !forwarding()) {
        assert!(
            s.elapsed() < Duration::from_secs(30),
            "link never went {}; testpmd log: {}",
            if up { "up" } else { "down" },
            std::fs::read_to_string(&t.log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// SIGINT to testpmd, polling `b`'s rx queues until it has exited;
/// returns its log.
fn stop_polling(b: &mut Backend, mut t: Testpmd) -> String {
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(t.child.id() as i32, libc::SIGINT) };
    let s = Instant::now();
    let mut inb = Pkts::new();
    while s.elapsed() < Duration::from_secs(10) {
        for q in 0..b.q.rx.len() as u16 {
            b.q.rx_burst(q, &mut inb, 32);
            inb.clear();
        }
        if let Ok(Some(_)) = t.child.try_wait() {
            break;
        }
    }
    let log = std::fs::read_to_string(&t.log).unwrap_or_default();
    drop(t);
    log
}

fn finish(b: Backend) {
    let Backend {
        mut port,
        q,
        pool,
        sock,
    } = b;
    port.stop().unwrap();
    drop(q);
    drop(port);
    assert_eq!(pool.available(), 8192, "every mbuf back in the pool");
    assert!(!std::path::Path::new(&sock).exists());
}

#[test]
fn testpmd_txonly_into_us_frame_for_frame() {
    txonly_into_us("tx", "");
}

#[test]
fn testpmd_txonly_into_us_over_packed_vectorized_rings() {
    txonly_into_us("txpv", ",packed_vq=1,in_order=1,vectorized=1,mrg_rxbuf=0");
}

#[test]
fn testpmd_txonly_into_us_over_packed_rings() {
    txonly_into_us("txp", ",packed_vq=1");
}

fn txonly_into_us(tag: &str, vopts: &str) {
    if !can_run_testpmd() {
        return;
    }
    let mut b = backend(tag, "", 1);
    let t = virtio_testpmd(tag, &b.sock, vopts, "txonly", 1);
    wait_link(&b, true, &t);
    let mut inb = Pkts::new();
    let s = Instant::now();
    while s.elapsed() < Duration::from_secs(2) {
        b.q.rx_burst(0, &mut inb, 32);
        for m in inb.iter() {
            assert_eq!(m.pkt_len(), 64);
        }
        inb.clear();
    }
    let log = stop_polling(&mut b, t);
    let (_, tx) = final_stats(&log);
    let st = b.port.stats();
    assert!(st.ipackets > 10_000, "{st:?}");
    // What testpmd's last bursts left in the ring when it stopped it is
    // counted, not received.
    let left = b
        .port
        .xstats()
        .iter()
        .find(|x| x.name == "rx_q0_left_at_stop")
        .unwrap()
        .value;
    assert!(left <= 256, "{left}");
    assert_eq!(
        st.ipackets + left,
        tx,
        "testpmd's TX-packets against our ipackets and what its stop left"
    );
    assert_eq!(st.ierrors, 0);
    finish(b);
}

#[test]
fn us_into_testpmd_rxonly_frame_for_frame() {
    us_into_rxonly("rx", "");
}

#[test]
fn us_into_testpmd_rxonly_over_packed_rings() {
    us_into_rxonly("rxp", ",packed_vq=1");
}

/// DPDK's vectorized packed path (AVX-512, in order, no mergeable
/// buffers; testpmd must be allowed 512-bit SIMD), which takes used
/// descriptors four at a time.
#[test]
fn us_into_testpmd_rxonly_over_packed_vectorized_rings() {
    us_into_rxonly("rxv", ",packed_vq=1,in_order=1,vectorized=1,mrg_rxbuf=0");
}

fn us_into_rxonly(tag: &str, vopts: &str) {
    if !can_run_testpmd() {
        return;
    }
    let mut b = backend(tag, "", 1);
    let t = virtio_testpmd(tag, &b.sock, vopts, "rxonly", 1);
    wait_link(&b, true, &t);
    const N: u64 = 200_000;
    let mut out = Pkts::new();
    let mut sent = 0u64;
    let s = Instant::now();
    while sent < N {
        assert!(s.elapsed() < Duration::from_secs(20), "sent only {sent}");
        while out.len() < 32 && sent + (out.len() as u64) < N {
            let mut m = b.pool.get().unwrap();
            m.append(64)
                .unwrap()
                .copy_from_slice(&frame(sent as u32 + out.len() as u32, 64));
            out.push(m).unwrap();
        }
        sent += b.q.tx_burst(0, &mut out) as u64;
    }
    // testpmd's rxonly takes what is in its ring, then stops.
    std::thread::sleep(Duration::from_millis(500));
    let log = stop_polling(&mut b, t);
    let (rx, _) = final_stats(&log);
    assert_eq!(b.port.stats().opackets, N);
    assert_eq!(rx, N, "testpmd's RX-packets against what we sent");
    finish(b);
}

/// `n` tagged frames to testpmd's io loop and back, each checked byte for
/// byte, on every queue.
fn io_loop(b: &mut Backend, n: u32, sizes: &[usize]) {
    for q in 0..b.q.rx.len() as u16 {
        let mut got = std::collections::HashSet::new();
        let (mut sent, mut out, mut inb) = (0u32, Pkts::new(), Pkts::new());
        let s = Instant::now();
        while got.len() < n as usize {
            assert!(
                s.elapsed() < Duration::from_secs(20),
                "queue {q}: {} of {n} came back (sent {sent}); xstats {:?}",
                got.len(),
                b.port
                    .xstats()
                    .iter()
                    .filter(|x| x.value != 0)
                    .map(|x| format!("{}={}", x.name, x.value))
                    .collect::<Vec<_>>()
            );
            // io forwarding drops what the way back has no room for: at
            // most 64 in flight; a lost frame is sent again.
            if s.elapsed() > Duration::from_secs(10) && sent >= n {
                sent = 0;
            }
            while sent < n && out.len() < 32 && (sent as usize) < got.len() + 64 {
                if !got.contains(&sent) {
                    let mut m = b.pool.get().unwrap();
                    let len = sizes[sent as usize % sizes.len()];
                    m.append(len).unwrap().copy_from_slice(&frame(sent, len));
                    out.push(m).unwrap();
                }
                sent += 1;
            }
            b.q.tx_burst(q, &mut out);
            sent -= out.len() as u32;
            out.clear();
            b.q.rx_burst(q, &mut inb, 32);
            while let Some(m) = inb.pop() {
                let d = m.data();
                let tag = u32::from_le_bytes(d[14..18].try_into().unwrap());
                assert_eq!(d.len(), sizes[tag as usize % sizes.len()]);
                assert!(d == &frame(tag, d.len())[..], "frame {tag} changed");
                got.insert(tag);
            }
        }
    }
}

const SIZES: [usize; 4] = [64, 1518, 60, 512];

fn io_case(tag: &str, bopts: &str, vopts: &str, queues: u16) {
    if !can_run_testpmd() {
        return;
    }
    let mut b = backend(tag, bopts, queues);
    let t = virtio_testpmd(tag, &b.sock, vopts, "io", queues);
    wait_link(&b, true, &t);
    io_loop(&mut b, 2000, &SIZES);
    let f = b
        .port
        .xstats()
        .iter()
        .find(|x| x.name == "negotiated_features")
        .unwrap()
        .value;
    eprintln!("{tag}: negotiated {f:#x}");
    assert_eq!(f & (1 << 15) != 0, !vopts.contains("mrg_rxbuf=0"));
    assert_eq!(f & (1 << 34) != 0, vopts.contains("packed_vq=1"));
    assert_eq!(f & (1 << 35) != 0, !vopts.contains("in_order=0"));
    // DPDK's virtio-user takes the STATUS protocol feature: ACKNOWLEDGE,
    // DRIVER, FEATURES_OK and DRIVER_OK (SET_STATUS, checked back with
    // GET_STATUS).
    assert_eq!(xstat(&b, "device_status"), 0xf);
    drop(t);
    finish(b);
}

#[test]
fn io_loop_split_defaults() {
    io_case("iod", "", "", 1);
}

#[test]
fn io_loop_without_mergeable_buffers() {
    io_case("iom", "", ",mrg_rxbuf=0", 1);
}

#[test]
fn io_loop_without_in_order() {
    io_case("ioi", "", ",in_order=0,mrg_rxbuf=0", 1);
}

#[test]
fn io_loop_packed() {
    io_case("iop", "", ",packed_vq=1", 1);
}

#[test]
fn io_loop_packed_without_mergeable_buffers_or_in_order() {
    io_case("iopn", "", ",packed_vq=1,mrg_rxbuf=0,in_order=0", 1);
}

#[test]
fn io_loop_packed_vectorized() {
    io_case(
        "iopv",
        "",
        ",packed_vq=1,in_order=1,vectorized=1,mrg_rxbuf=0",
        1,
    );
}

#[test]
fn io_loop_two_queue_pairs() {
    io_case("ioq", ",queues=2", "", 2);
}

#[test]
fn io_loop_with_us_as_the_client() {
    if !can_run_testpmd() {
        return;
    }
    let mut b = backend("cli", ",client=1", 1);
    let t = virtio_testpmd("cli", &b.sock, ",server=1", "io", 1);
    wait_link(&b, true, &t);
    io_loop(&mut b, 1000, &SIZES);
    drop(t);
    finish(b);
}

#[test]
fn testpmd_killed_and_restarted_mid_stream_in_both_roles() {
    if !can_run_testpmd() {
        return;
    }
    for (tag, bopts, vopts) in [("ks", "", ""), ("kc", ",client=1", ",server=1")] {
        let mut b = backend(tag, bopts, 1);
        let mut t = virtio_testpmd(tag, &b.sock, vopts, "io", 1);
        wait_link(&b, true, &t);
        io_loop(&mut b, 500, &SIZES);
        // Killed with frames in flight: no goodbye on the socket.
        let mut out = Pkts::new();
        for i in 0..32 {
            let mut m = b.pool.get().unwrap();
            m.append(64).unwrap().copy_from_slice(&frame(i, 64));
            out.push(m).unwrap();
        }
        b.q.tx_burst(0, &mut out);
        out.clear();
        t.child.kill().unwrap();
        let _ = t.child.wait();
        drop(t);
        wait_link(&b, false, &virtio_like_log());
        if bopts.contains("client") {
            // testpmd's server socket outlives it; the next one needs the
            // path free.
            let _ = std::fs::remove_file(&b.sock);
        } else {
            // Our socket stays; testpmd's next instance connects to it.
            assert!(std::path::Path::new(&b.sock).exists());
        }
        let t = virtio_testpmd(&format!("{tag}2"), &b.sock, vopts, "io", 1);
        wait_link(&b, true, &t);
        io_loop(&mut b, 500, &SIZES);
        let conns = b
            .port
            .xstats()
            .iter()
            .find(|x| x.name == "connections")
            .unwrap()
            .value;
        assert_eq!(conns, 2);
        drop(t);
        finish(b);
    }
}

/// A stand-in for `wait_link`'s log argument when no testpmd runs.
fn virtio_like_log() -> Testpmd {
    Testpmd {
        _serial: SERIAL.lock().unwrap_or_else(|e| e.into_inner()),
        child: Command::new("true").spawn().unwrap(),
        sock: "/nonexistent".into(),
        log: "/nonexistent".into(),
        auto_start: false,
    }
}

fn xstat(b: &Backend, name: &str) -> u64 {
    b.port
        .xstats()
        .iter()
        .find(|x| x.name == name)
        .map_or(0, |x| x.value)
}

/// `n` UDP frames tagged 0..n, sent on queue 0 (the UDP checksum field
/// holding the pseudo-header sum and TX_UDP_CKSUM | TX_IP_CKSUM set, if
/// `ask`), until that many came back or 10 s passed; what came back.
fn udp_round_trip(b: &mut Backend, n: u32, ask: bool) -> Vec<rpmd_pmd::Mbuf> {
    let mut out = Pkts::new();
    for tag in 0..n {
        let mut f = udp_frame(tag, 18 + tag as usize * 29);
        let ph = pseudo_header_sum(&f[14..34]).unwrap();
        f[40..42].copy_from_slice(&ph.to_be_bytes());
        let mut m = b.pool.get().unwrap();
        m.append(f.len()).unwrap().copy_from_slice(&f);
        if ask {
            m.set_tx_header_lens(14, 20);
            m.set_ol_flags(TX_UDP_CKSUM | TX_IP_CKSUM);
        }
        out.push(m).unwrap();
    }
    let (mut got, mut inb, s) = (Vec::new(), Pkts::new(), Instant::now());
    while got.len() < n as usize && s.elapsed() < Duration::from_secs(10) {
        if !out.is_empty() {
            b.q.tx_burst(0, &mut out);
        }
        b.q.rx_burst(0, &mut inb, 32);
        while let Some(m) = inb.pop() {
            got.push(m);
        }
    }
    assert_eq!(got.len(), n as usize, "frames back");
    got
}

/// Frames asking for checksums reach DPDK's virtio-user, which takes no
/// GUEST_CSUM, completed by us: its io loop returns them with both
/// checksums right and nothing else changed.
#[test]
fn checksum_requests_reach_testpmd_completed() {
    if !can_run_testpmd() {
        return;
    }
    let mut b = backend_with("csq", "", 1, Offloads::TX_CHECKSUM);
    let t = virtio_testpmd("csq", &b.sock, "", "io", 1);
    wait_link(&b, true, &t);
    const N: u32 = 64;
    let got = udp_round_trip(&mut b, N, true);
    for m in &got {
        let tag = tag_of(m.data());
        assert_eq!(checksums_ok(m.data()), (true, true), "frame {tag}");
        let mut want = udp_frame(tag, 18 + tag as usize * 29);
        want[24..26].copy_from_slice(&m.data()[24..26]);
        want[40..42].copy_from_slice(&m.data()[40..42]);
        assert_eq!(m.data(), &want[..], "frame {tag}");
    }
    assert_eq!(xstat(&b, "tx_q0_csum_completed"), N as u64);
    drop(got);
    drop(t);
    finish(b);
}

/// With `--rx-offloads=0xc` (TCP and UDP checksums) DPDK's virtio-user
/// takes GUEST_CSUM: our requests go as NEEDS_CSUM headers, which its
/// driver accepts as partial checksums (one whose offsets it could not
/// place it would complete itself, in place), so its io loop returns the
/// frames still partial.
#[test]
fn checksum_requests_reach_testpmd_partial_with_guest_csum() {
    if !can_run_testpmd() {
        return;
    }
    let mut b = backend_with("csg", "", 1, Offloads::TX_CHECKSUM);
    let t = virtio_testpmd_with("csg", &b.sock, "", "io", 1, &["--rx-offloads=0xc"], None);
    wait_link(&b, true, &t);
    const N: u32 = 64;
    let got = udp_round_trip(&mut b, N, true);
    for m in &got {
        let tag = tag_of(m.data());
        let mut want = udp_frame(tag, 18 + tag as usize * 29);
        let ph = pseudo_header_sum(&want[14..34]).unwrap();
        want[40..42].copy_from_slice(&ph.to_be_bytes());
        want[24..26].copy_from_slice(&m.data()[24..26]);
        assert_eq!(m.data(), &want[..], "frame {tag}: partial, as sent");
        assert!(checksums_ok(m.data()).0, "frame {tag}: IPv4 checksum");
    }
    assert_eq!(xstat(&b, "tx_q0_csum_partial"), N as u64);
    assert_ne!(xstat(&b, "negotiated_features") & 2, 0, "GUEST_CSUM");
    drop(got);
    drop(t);
    finish(b);
}

/// testpmd's csum engine asks its virtio-user port for UDP checksums in
/// hardware, so the frames it returns carry NEEDS_CSUM: we complete them
/// in software (flags clear) unless the application asked for the RX
/// checksum offload, when they stay partial and say so (RX_L4_CKSUM_NONE
/// with TX_UDP_CKSUM and the header lengths, for the port they leave by).
#[test]
fn partial_checksums_from_testpmd_are_completed_or_kept() {
    if !can_run_testpmd() {
        return;
    }
    let cmds =
        "port stop 0\ncsum set udp hw 0\ncsum set ip sw 0\nport start 0\nset fwd csum\nstart";
    for keep in [false, true] {
        let offl = if keep {
            Offloads::RX_CHECKSUM
        } else {
            Offloads::NONE
        };
        let tag = if keep { "cspk" } else { "cspc" };
        let mut b = backend_with(tag, "", 1, offl);
        let t = virtio_testpmd_with(tag, &b.sock, "", "io", 1, &[], Some(cmds));
        wait_link(&b, true, &t);
        // Its port restart reconnects: let that settle.
        std::thread::sleep(Duration::from_millis(300));
        wait_link(&b, true, &t);
        const N: u32 = 64;
        let got = udp_round_trip(&mut b, N, false);
        for m in &got {
            let tag = tag_of(m.data());
            let (udp_ok, ip_ok) = (checksums_ok(m.data()).1, checksums_ok(m.data()).0);
            assert!(ip_ok, "frame {tag}: testpmd's IPv4 checksum");
            if keep {
                assert_eq!(m.ol_flags(), RX_L4_CKSUM_NONE | TX_UDP_CKSUM, "frame {tag}");
                assert_eq!(m.tx_header_lens(), (14, 20), "frame {tag}");
                let ph = pseudo_header_sum(&m.data()[14..34]).unwrap();
                assert_eq!(m.data()[40..42], ph.to_be_bytes(), "frame {tag}: partial");
            } else {
                assert_eq!(m.ol_flags(), 0, "frame {tag}");
                assert!(udp_ok, "frame {tag}: UDP checksum completed");
            }
        }
        let (partial, done) = (
            xstat(&b, "rx_q0_csum_partial"),
            xstat(&b, "rx_q0_csum_completed"),
        );
        assert_eq!(
            (partial, done),
            if keep { (N as u64, 0) } else { (0, N as u64) }
        );
        drop(got);
        drop(t);
        finish(b);
    }
}
