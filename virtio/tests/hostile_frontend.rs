//! Hostile frontends against the vhost-user backend: a frontend of the
//! test's own (rust-vmm's `vhost` crate for the messages, rings written by
//! hand in a memfd it shares) that sends what no good frontend would.
//! Each message case must end the connection with an error naming the
//! cause, each ring case must drop and count the descriptor (or stop the
//! ring), and after every case a good frontend (our virtio-user port)
//! must be served and carry frames, with every mbuf back in its pool.
mod common;
mod frontend;

use frontend::*;

#[test]
fn hostile_tx_descriptors_are_dropped_and_counted() {
    let mut b = backend("tx");
    let mut g = Guest::connect(&b.sock);
    g.handshake();
    g.ring(0, RX_RING).unwrap();
    g.ring(1, TX_RING).unwrap();
    let v = g.view(TX_RING);
    let good = tx_frame(&g, 0, 7, 100);
    let d = |addr, len, flags, next| DescFields {
        addr,
        len,
        flags,
        id_or_next: next,
    };
    // 0: outside the memory table; 1: a loop (1 -> 1); 2: device-writable;
    // 3: length past the end of the region; 4: a chain whose next link is
    // past the table; 5: good.
    v.set_desc(0, d(0x10, 100, 0, 0));
    v.set_desc(1, d(good.0, good.1, F_NEXT, 1));
    v.set_desc(2, d(good.0, good.1, F_WRITE, 0));
    v.set_desc(3, d(g.base() + (1 << 20) - 10, 100, 0, 0));
    v.set_desc(4, d(good.0, 12, F_NEXT, 500));
    v.set_desc(5, d(good.0, good.1, 0, 0));
    for k in 0..6 {
        v.set_avail_entry(k, k);
    }
    v.set_avail_idx(6, Ordering::Release);
    let mut p = Pkts::new();
    let t = Instant::now();
    while v.used_idx(Ordering::Acquire) != 6 {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "entries not completed"
        );
        b.q.rx_burst(0, &mut p, 32);
    }
    assert_eq!(p.len(), 1, "only the good frame is received");
    assert_eq!(p[0].data(), &common::frame(7, 100)[..]);
    p.clear();
    let s = b.port.stats();
    assert_eq!(s.ierrors, 5, "{:?}", b.port.xstats());
    assert_eq!(xstat(&b.port, "rx_q0_device_errors"), 5);
    for k in 0..6 {
        assert_eq!(v.used_elem(k), (k as u32, 0), "every chain given back");
    }
    // An avail index a thousand entries ahead: the ring stops, the link
    // goes down, the error says why, and nothing hangs.
    v.set_avail_idx(1006, Ordering::Release);
    b.q.rx_burst(0, &mut p, 32);
    assert!(p.is_empty());
    assert!(!b.port.link().up);
    let e = b.port.last_error().unwrap();
    assert!(e.contains("ahead"), "{e}");
    drop(g);
    wait_link_down_then_good(&mut b);
    finish(b);
}

#[test]
fn hostile_rx_buffers_drop_the_frame_and_count() {
    let mut b = backend("rx");
    let mut g = Guest::connect(&b.sock);
    g.handshake();
    g.ring(0, RX_RING).unwrap();
    g.ring(1, TX_RING).unwrap();
    let v = g.view(RX_RING);
    let buf = g.base() + BUFS as u64;
    let d = |addr, len, flags, next| DescFields {
        addr,
        len,
        flags,
        id_or_next: next,
    };
    // 0: read-only; 1: outside the memory table; 2: a loop; 3: too small
    // for the frame (no mergeable buffers); 4: good.
    v.set_desc(0, d(buf, 2048, 0, 0));
    v.set_desc(1, d(0x10, 2048, F_WRITE, 0));
    v.set_desc(2, d(buf, 1, F_WRITE | F_NEXT, 2));
    v.set_desc(3, d(buf, 20, F_WRITE, 0));
    v.set_desc(4, d(buf + 4096, 2048, F_WRITE, 0));
    for k in 0..5 {
        v.set_avail_entry(k, k);
    }
    v.set_avail_idx(5, Ordering::Release);
    let mut p = Pkts::new();
    for i in 0..5 {
        let mut m = b.pool.get().unwrap();
        m.append(100)
            .unwrap()
            .copy_from_slice(&common::frame(i, 100));
        p.push(m).unwrap();
    }
    let t = Instant::now();
    while !p.is_empty() {
        assert!(t.elapsed() < Duration::from_secs(5));
        b.q.tx_burst(0, &mut p);
    }
    assert_eq!(v.used_idx(Ordering::Acquire), 5);
    for k in 0..4 {
        assert_eq!(
            v.used_elem(k),
            (k as u32, 0),
            "bad buffer {k} given back empty"
        );
    }
    assert_eq!(v.used_elem(4), (4, 112));
    let mut got = vec![0u8; 100];
    // SAFETY: inside our region; the backend finished writing it (used
    // index read with Acquire above).
    unsafe {
        std::ptr::copy_nonoverlapping(g.mem.as_ptr().add(BUFS + 4096 + 12), got.as_mut_ptr(), 100)
    };
    assert_eq!(got, common::frame(4, 100), "the frame after the bad ones");
    let s = b.port.stats();
    assert_eq!((s.opackets, s.oerrors), (1, 4));
    drop(g);
    wait_link_down_then_good(&mut b);
    finish(b);
}

#[test]
fn hostile_messages_end_the_connection_with_the_cause() {
    let mut b = backend("msg");
    refused(&mut b, 1, "did not offer", |g| {
        g.fe.set_owner().unwrap();
        let _ = g.fe.set_features(VERSION_1 | 1 << 55);
        // Without REPLY_ACK nothing answers SET_FEATURES: a request that
        // needs a reply shows the connection closed.
        let _ = g.fe.get_features();
    });
    refused(&mut b, 2, "overlaps", |g| {
        g.fe.set_owner().unwrap();
        g.fe.set_features(VERSION_1).unwrap();
        let base = g.base();
        let r = [
            g.region(0, 64 << 10, base),
            g.region(64 << 10, 64 << 10, base + (32 << 10)),
        ];
        let _ = g.fe.set_mem_table(&r);
        let _ = g.fe.get_features();
    });
    refused(&mut b, 3, "past the end", |g| {
        g.fe.set_owner().unwrap();
        g.fe.set_features(VERSION_1).unwrap();
        let r = [g.region(512 << 10, 1 << 20, g.base())];
        let _ = g.fe.set_mem_table(&r);
        let _ = g.fe.get_features();
    });
    refused(&mut b, 4, "not inside one memory region", |g| {
        g.handshake();
        let base = g.base();
        g.fe.set_vring_num(0, RING).unwrap();
        let _ = g.fe.set_vring_addr(
            0,
            &VringConfigData {
                queue_max_size: RING,
                queue_size: RING,
                flags: 0,
                desc_table_addr: base + (1 << 20) - 512,
                used_ring_addr: base,
                avail_ring_addr: base + 0x2000,
                log_addr: None,
            },
        );
        let _ = g.fe.set_vring_kick(0, &g.kick[0]);
        let _ = g.fe.get_features();
    });
    refused(&mut b, 5, "this port has 2 vrings", |g| {
        g.handshake();
        let _ = g.fe.set_vring_num(5, RING);
        let _ = g.fe.get_features();
    });
    refused(&mut b, 6, "size 3", |g| {
        g.handshake();
        let _ = g.fe.set_vring_num(1, 3);
        let _ = g.fe.get_features();
    });
    finish(b);
}

#[test]
fn truncated_oversized_and_unknown_messages_and_hang_ups() {
    let mut b = backend("raw");
    let sock = b.sock.clone();
    // SET_FEATURES claiming 8 bytes, with 4, then a hang-up.
    let mut m = header(2, 8);
    m.extend_from_slice(&[1, 2, 3, 4]);
    raw(&sock, &m);
    wait_xstat(&b, "connections", 1);
    good_frontend_works(&mut b);
    // A size far past any message.
    raw(&sock, &header(2, 0x10_0000));
    wait_xstat(&b, "connections", 3);
    good_frontend_works(&mut b);
    // An unknown request.
    let mut m = header(999, 8);
    m.extend_from_slice(&[0; 8]);
    raw(&sock, &m);
    wait_xstat(&b, "connections", 5);
    good_frontend_works(&mut b);
    // A frontend that hangs up mid-handshake.
    {
        let g = Guest::connect(&sock);
        g.fe.set_owner().unwrap();
        g.fe.get_features().unwrap();
    }
    wait_xstat(&b, "connections", 7);
    good_frontend_works(&mut b);
    assert!(xstat(&b.port, "frontends_rejected") >= 2);
    finish(b);
}

/// A frontend that stalls does not hold the backend: one that sends half
/// a message and waits is dropped (the message is short), and one that
/// sends requests and never reads the replies, until they fill the
/// socket, is dropped after the peer timeout (5 s). Each time the cause
/// is named and the next frontend is served.
#[test]
fn a_frontend_that_stalls_is_dropped_after_the_timeout() {
    let mut b = backend("stall");
    let sock = b.sock.clone();
    // SET_FEATURES claiming 8 bytes, with 4, and the connection kept open.
    let half = UnixStream::connect(&sock).unwrap();
    let mut m = header(2, 8);
    m.extend_from_slice(&[1, 2, 3, 4]);
    (&half).write_all(&m).unwrap();
    wait_rejected(&b, 1, Duration::from_secs(8));
    drop(half);
    good_frontend_works(&mut b);
    // GET_FEATURES (1) with a reply wanted, again and again, none read:
    // sent without blocking until our own buffer is full too.
    let mute = UnixStream::connect(&sock).unwrap();
    mute.set_nonblocking(true).unwrap();
    let get = header(1, 0);
    let mut sent = 0;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(2) {
        // A whole header or nothing (12 bytes, far under a socket's
        // buffer); a partial write would leave the stream mid-message.
        match (&mute).write(&get) {
            Ok(12) => sent += 1,
            Ok(n) => panic!("a partial write of {n} bytes"),
            Err(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    assert!(sent > 100, "{sent} requests");
    wait_rejected(&b, 2, Duration::from_secs(8));
    assert!(t.elapsed() >= Duration::from_secs(4), "{:?}", t.elapsed());
    let why = b.port.last_error().unwrap_or_default();
    assert!(why.contains("frontend dropped"), "{why}");
    drop(mute);
    good_frontend_works(&mut b);
    finish(b);
}

#[test]
fn bad_socket_paths_say_why() {
    let reg = {
        let mut r = rpmd_pmd::Registry::new();
        rpmd_virtio::register(&mut r);
        r
    };
    let file = format!("/tmp/rpmd-hf-file-{}", std::process::id());
    std::fs::write(&file, b"not a socket").unwrap();
    let e = reg
        .open(&format!("vhost-user:{file}"))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("is not a socket"), "{e}");
    std::fs::remove_file(&file).unwrap();
    let e = reg
        .open("vhost-user:/nonexistent-dir/x.sock")
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("No such file or directory"), "{e}");
    // A live backend's socket is not taken over.
    let b = backend("live");
    let e = reg
        .open(&format!("vhost-user:{}", b.sock))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("another process is listening"), "{e}");
    for bad in [
        "vhost-user:/tmp/x.sock,queues=9",
        "vhost-user:/tmp/x.sock,mtu=20",
        "vhost-user:/tmp/x.sock,nope=1",
    ] {
        assert!(reg.open(bad).is_err(), "{bad}");
    }
    finish(b);
}

/// QEMU's virtio-net sends SET_VRING_ENABLE for each vring when the
/// device is created, before SET_FEATURES, and never again; the `vhost`
/// crate refuses it there. The backend keeps what it asked, so rings that
/// need an enable (PROTOCOL_FEATURES negotiated) run once set up, and the
/// connection survives.
#[test]
fn an_enable_before_the_features_is_kept() {
    const PROTOCOL_FEATURES: u64 = 1 << 30;
    let mut b = backend("early");
    let mut s = UnixStream::connect(&b.sock).unwrap();
    for vring in 0..2u32 {
        let mut m = header(18, 8); // SET_VRING_ENABLE
        m.extend_from_slice(&vring.to_le_bytes());
        m.extend_from_slice(&1u32.to_le_bytes());
        s.write_all(&m).unwrap();
    }
    let mut g = Guest::with(Frontend::from_stream(s, 16));
    g.handshake_with(VERSION_1 | PROTOCOL_FEATURES);
    g.ring(0, RX_RING).unwrap();
    g.ring(1, TX_RING).unwrap();
    assert_eq!(xstat(&b.port, "early_vring_enables"), 2);
    let v = g.view(TX_RING);
    let f = tx_frame(&g, 0, 9, 200);
    v.set_desc(
        0,
        DescFields {
            addr: f.0,
            len: f.1,
            flags: 0,
            id_or_next: 0,
        },
    );
    v.set_avail_entry(0, 0);
    v.set_avail_idx(1, Ordering::Release);
    let mut p = Pkts::new();
    let t = Instant::now();
    while p.is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the enabled ring carries nothing; last error {:?}",
            b.port.last_error()
        );
        b.q.rx_burst(0, &mut p, 32);
    }
    assert_eq!(p[0].data(), &common::frame(9, 200)[..]);
    assert!(b.port.link().up);
    assert_eq!(xstat(&b.port, "frontends_rejected"), 0);
    p.clear();
    drop(g);
    wait_link_down_then_good(&mut b);
    finish(b);
}

/// SET_STATUS and GET_STATUS (protocol feature STATUS), which the
/// `vhost` crate refuses, are served: the status set comes back, an ack
/// goes out when one is asked for with REPLY_ACK, and a status wider than
/// a byte, or either message without STATUS negotiated, ends the
/// connection naming why.
#[test]
fn device_status_is_kept_and_reported() {
    const SET_FEATURES: u32 = 2;
    const SET_OWNER: u32 = 3;
    const SET_PROTOCOL_FEATURES: u32 = 16;
    const SET_STATUS: u32 = 39;
    const GET_STATUS: u32 = 40;
    const V1: u32 = 1;
    const NEED_REPLY: u32 = 8;
    const REPLY: u32 = 4;
    const STATUS: u64 = 1 << 16;
    const REPLY_ACK: u64 = 1 << 3;
    let mut b = backend("status");
    let start = |protocol: u64| {
        let mut s = UnixStream::connect(&b.sock).unwrap();
        request(&mut s, SET_OWNER, V1, &[], false);
        request(
            &mut s,
            SET_PROTOCOL_FEATURES,
            V1,
            &protocol.to_le_bytes(),
            false,
        );
        let f = VERSION_1 | 1 << 30;
        request(&mut s, SET_FEATURES, V1, &f.to_le_bytes(), false);
        s
    };
    let mut s = start(STATUS | REPLY_ACK);
    // ACKNOWLEDGE | DRIVER | FEATURES_OK, acked; then DRIVER_OK, not.
    let ack = request(
        &mut s,
        SET_STATUS,
        V1 | NEED_REPLY,
        &0xbu64.to_le_bytes(),
        true,
    );
    assert_eq!(ack, Some((SET_STATUS, V1 | REPLY, 0)));
    assert_eq!(
        request(&mut s, GET_STATUS, V1, &[], true),
        Some((GET_STATUS, V1 | REPLY, 0xb))
    );
    request(&mut s, SET_STATUS, V1, &0xfu64.to_le_bytes(), false);
    assert_eq!(
        request(&mut s, GET_STATUS, V1, &[], true),
        Some((GET_STATUS, V1 | REPLY, 0xf))
    );
    assert_eq!(xstat(&b.port, "device_status"), 0xf);
    request(&mut s, SET_STATUS, V1, &0x1ffu64.to_le_bytes(), false);
    wait_xstat(&b, "frontends_rejected", 1);
    let e = b.port.last_error().unwrap_or_default();
    assert!(e.contains("a device status is one byte"), "{e}");
    drop(s);
    // Without STATUS negotiated.
    let mut s = start(REPLY_ACK);
    request(&mut s, GET_STATUS, V1, &[], false);
    wait_xstat(&b, "frontends_rejected", 2);
    let e = b.port.last_error().unwrap_or_default();
    assert!(e.contains("without the STATUS protocol feature"), "{e}");
    drop(s);
    assert_eq!(
        xstat(&b.port, "device_status"),
        0,
        "forgotten with the frontend"
    );
    good_frontend_works(&mut b);
    finish(b);
}
