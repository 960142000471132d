//! virtio-user against a real vhost-user backend: DPDK's testpmd with a
//! `net_vhost` port in io forwarding (every frame comes back). Skipped,
//! with a message, where dpdk-testpmd is missing or we are not root.
mod common;

use common::*;
use rpmd_pmd::port::Pkts;
use rpmd_pmd::{Mempool, MempoolConfig, PortConfig, Registry};
use std::time::{Duration, Instant};

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

/// In-order use (VIRTIO_F_IN_ORDER) is negotiated when testpmd's vhost
/// offers it, and the round trip holds with it off too, on both rings.
#[test]
fn in_order_on_when_offered_and_off_on_request() {
    let Some(t) = testpmd("ino") else { return };
    io_round_trip(&t, ",in_order=0");
}

#[test]
fn packed_rings_without_in_order() {
    let Some(t) = testpmd("inop") else { return };
    io_round_trip(&t, ",packed_vq=1,in_order=0");
}

fn io_round_trip(t: &Testpmd, opts: &str) {
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let pool = Mempool::new(&MempoolConfig::new("vt", 4096)).unwrap();
    let mut p = reg.open(&format!("virtio-user:{}{opts}", t.sock)).unwrap();
    p.configure(&PortConfig {
        rx_pool: Some(pool.clone()),
        ..PortConfig::default()
    })
    .unwrap();
    let mut q = p.start().unwrap();
    assert!(p.link().up);
    wait_forwarding(t);
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
            "only {} of {N} frames came back (sent {sent}); link {}; xstats {:?}; testpmd log: {}",
            got.len(),
            p.link().up,
            p.xstats()
                .iter()
                .filter(|x| x.value != 0)
                .map(|x| format!("{}={}", x.name, x.value))
                .collect::<Vec<_>>(),
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
    // Everything came back, so nothing is left in flight.
    assert_eq!(q.tx[0].in_flight(), 0);
    let s = p.stats();
    assert_eq!(s.opackets, N as u64);
    assert_eq!(s.ipackets, N as u64);
    let feats = xstat(p.as_ref(), "negotiated_features");
    assert_eq!(
        feats & (1 << 34) != 0,
        opts.contains("packed_vq=1"),
        "RING_PACKED negotiated as asked: {feats:#x}"
    );
    let offered = xstat(p.as_ref(), "offered_features");
    let in_order_wanted = !opts.contains("in_order=0");
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
    // Frames sent before testpmd forwards are flushed, not counted (the
    // helper waits until it forwards).
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

/// A pool without headroom: the header cannot go in front of the data,
/// so the buffers are posted from their data start and the frame follows
/// the header there.
#[test]
fn testpmd_txonly_frames_arrive_in_a_pool_without_headroom() {
    let Some(t) = testpmd_mode("txo0", "txonly") else {
        return;
    };
    let mut cfg = MempoolConfig::new("vts0", 4096);
    cfg.headroom = 0;
    let conf = PortConfig {
        rx_pool: Some(Mempool::new(&cfg).unwrap()),
        ..PortConfig::default()
    };
    let (mut p, mut q, _pool) = port_config(&t, "", conf);
    let mut inb = Pkts::new();
    let start = Instant::now();
    let mut got = 0;
    while got < 1000 && start.elapsed() < Duration::from_secs(5) {
        got += q.rx_burst(0, &mut inb, 32);
        for m in inb.iter() {
            assert_eq!((m.data_len(), m.headroom()), (64, 12));
        }
        inb.clear();
    }
    assert!(got >= 1000, "received only {got} in 5 s");
    p.stop().unwrap();
    finish(t);
}

fn txonly_arrive(tag: &str, opts: &str) {
    let Some(t) = testpmd_mode(tag, "txonly") else {
        return;
    };
    let (mut p, mut q, pool) = port_with(&t, opts);
    let mut inb = Pkts::new();
    let mut got = 0u64;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(1) {
        got += q.rx_burst(0, &mut inb, 32) as u64;
        for m in inb.iter() {
            assert_eq!(m.data_len(), 64);
            // The header went into the headroom: the frame starts on the
            // data room's first byte, cache-line aligned, as in DPDK.
            assert_eq!(m.headroom(), pool.headroom(), "frame start");
            assert_eq!(m.data().as_ptr() as usize % 64, 0, "frame start");
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
    let pool = Mempool::new(&MempoolConfig::new("vtj", 4096)).unwrap();
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
    wait_forwarding(&t);
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

/// A device that never completes a buffer: testpmd connected but not
/// forwarding (interactive, never `start`ed), so nothing polls its vhost
/// queues. TX fills the ring and then takes nothing, counted, without
/// waiting; RX yields nothing; stop answers; every mbuf comes back.
#[test]
fn a_backend_that_never_uses_buffers_stalls_nothing() {
    let Some(t) = testpmd_cmds("idle", "show port info 0") else {
        return;
    };
    let (mut p, mut q, pool) = port(&t);
    let size = 256;
    let mut out = Pkts::new();
    let mut sent = 0;
    let t0 = Instant::now();
    for round in 0..40u32 {
        for i in 0..32 {
            let f = frame(round * 32 + i, 64);
            let mut m = pool.get().unwrap();
            m.append(f.len()).unwrap().copy_from_slice(&f);
            out.push(m).unwrap();
        }
        sent += q.tx[0].tx_burst(&mut out);
        // What was not taken stays with us; dropping it frees it.
        out.clear();
    }
    let mut inb = Pkts::new();
    assert_eq!(q.rx[0].rx_burst(&mut inb, 32), 0);
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "40 bursts took {:?}",
        t0.elapsed()
    );
    assert_eq!(sent, size, "the ring holds {size}; it took {sent}");
    assert_eq!(q.tx[0].in_flight(), size, "none of them finished");
    let s = p.stats();
    assert_eq!(s.opackets, size as u64);
    let full = p
        .xstats()
        .iter()
        .find(|x| x.name.ends_with("full"))
        .map(|x| x.value)
        .unwrap_or(0);
    assert!(full > 0, "a full TX ring is counted: {:?}", p.xstats());
    p.stop().unwrap();
    drop(q);
    drop(p);
    assert_eq!(pool.available(), pool.size(), "every mbuf back");
}
