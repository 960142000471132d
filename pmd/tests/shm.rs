//! The `shm:NAME` port: frames between two ports of one process and of two
//! processes, jumbo frames, a peer that writes garbage, a peer that died.
//!
//! The second process is this test binary run again on the ignored test
//! `peer`, with the link name in `RPMD_SHM_PEER`.
use rpmd_pmd::port::{Offloads, Pkts, Port, PortConfig, Queues};
use rpmd_pmd::{Mbuf, Mempool, MempoolConfig, Registry};
use std::os::unix::fs::FileExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

fn pool(name: &str, n: u32) -> Mempool {
    let mut c = MempoolConfig::new(name, n);
    c.cache_size = 0;
    Mempool::new(&c).unwrap()
}

fn conf(pool: &Mempool) -> PortConfig {
    PortConfig {
        rx_pool: Some(pool.clone()),
        offloads: Offloads::RX_SCATTER | Offloads::TX_MULTI_SEGS,
        ..PortConfig::default()
    }
}

/// Both sides of link `n` in this process, side A opened with `opts`
/// (e.g. `,slots=64`), configured with `conf(p)` and started.
fn pair(r: &Registry, n: &str, opts: &str, p: &Mempool) -> [(Box<dyn Port>, Queues); 2] {
    let mut a = r.open(&format!("shm:{n}{opts}")).unwrap();
    let mut b = r.open(&format!("shm:{n}")).unwrap();
    a.configure(&conf(p)).unwrap();
    b.configure(&conf(p)).unwrap();
    let qa = a.start().unwrap();
    let qb = b.start().unwrap();
    [(a, qa), (b, qb)]
}

/// A unique link name per test and process.
fn name(test: &str) -> String {
    format!("t{}-{test}", std::process::id())
}

fn byte(tag: u32, i: usize) -> u8 {
    (tag as usize * 31 + i * 7) as u8
}

/// A frame of `len` bytes tagged `tag`, in two segments when `split`.
fn frame(p: &Mempool, tag: u32, len: usize, split: bool) -> Mbuf {
    let fill = |m: &mut Mbuf, from: usize, n: usize| {
        let d = m.append(n).unwrap();
        for (i, b) in d.iter_mut().enumerate() {
            *b = byte(tag, from + i);
        }
    };
    let first = if split { len / 2 } else { len }.min(2048);
    let mut m = p.get().unwrap();
    fill(&mut m, 0, first);
    let mut at = first;
    while at < len {
        let mut s = p.get().unwrap();
        let n = (len - at).min(2048);
        fill(&mut s, at, n);
        m.chain(s).map_err(|_| "chain").unwrap();
        at += n;
    }
    m.data_mut()[..4].copy_from_slice(&tag.to_le_bytes());
    m
}

fn check(m: &Mbuf, tag: u32, len: usize) {
    assert_eq!(m.pkt_len(), len, "frame {tag}");
    let bytes: Vec<u8> = m.segments().flatten().copied().collect();
    assert_eq!(u32::from_le_bytes(bytes[..4].try_into().unwrap()), tag);
    for (i, b) in bytes.iter().enumerate().skip(4) {
        assert_eq!(*b, byte(tag, i), "frame {tag} byte {i}");
    }
}

#[test]
fn small_frames_of_every_length_cross_whole_and_in_two_segments() {
    // Every length around the slot's first line (60 bytes beside the ctrl
    // word), each copy size class of the inline copy, split at every
    // offset the halves give.
    let n = name("small");
    let p = pool("shm-small", 1024);
    let r = Registry::new();
    let [(_a, mut qa), (_b, mut qb)] = pair(&r, &n, ",slots=64", &p);
    let cases: Vec<(usize, bool)> = (4..=70)
        .map(|l| (l, false))
        .chain((8..=70).map(|l| (l, true)))
        .collect();
    for (c, chunk) in cases.chunks(32).enumerate() {
        let mut burst = Pkts::new();
        for (k, &(len, split)) in chunk.iter().enumerate() {
            let tag = (c * 100 + k) as u32;
            burst.push(frame(&p, tag, len, split)).unwrap();
        }
        assert_eq!(qa.tx_burst(0, &mut burst), chunk.len());
        let mut out = Pkts::new();
        assert_eq!(qb.rx_burst(0, &mut out, 32), chunk.len());
        for (k, m) in out.iter().enumerate() {
            check(m, (c * 100 + k) as u32, chunk[k].0);
        }
    }
}

#[test]
fn pair_in_one_process_carries_frames_byte_for_byte() {
    let n = name("pair");
    let p = pool("shm-pair", 4096);
    let r = Registry::new();
    let mut a = r.open(&format!("shm:{n},slots=64,slot_size=9728")).unwrap();
    let mut b = r.open(&format!("shm:{n}")).unwrap();
    assert_ne!(a.mac_addr(), b.mac_addr());
    let e = r.open(&format!("shm:{n}")).err().unwrap().to_string();
    assert!(e.contains("already joins two live ports"), "{e}");
    assert_eq!(b.capabilities().max_mtu, 9710, "B inherits A's geometry");
    a.configure(&conf(&p)).unwrap();
    b.configure(&conf(&p)).unwrap();
    let mut qa = a.start().unwrap();
    let mut qb = b.start().unwrap();
    assert!(a.link().up && b.link().up);
    let sizes = [60usize, 64, 1518, 2048, 2049, 9000, 9728];
    let mut out = Pkts::new();
    let mut sent = 0u32;
    for round in 0..20u32 {
        let mut burst = Pkts::new();
        for (k, &len) in sizes.iter().enumerate() {
            let tag = round * 100 + k as u32;
            burst.push(frame(&p, tag, len, k % 2 == 1)).unwrap();
        }
        assert_eq!(qa.tx_burst(0, &mut burst), sizes.len());
        sent += sizes.len() as u32;
        assert_eq!(qb.rx_burst(0, &mut out, 32), sizes.len());
        for (k, m) in out.iter().enumerate() {
            check(m, round * 100 + k as u32, sizes[k]);
        }
        // And back the other way, unchanged.
        assert_eq!(qb.tx_burst(0, &mut out), sizes.len());
        let mut back = Pkts::new();
        assert_eq!(qa.rx_burst(0, &mut back, 32), sizes.len());
        for (k, m) in back.iter().enumerate() {
            check(m, round * 100 + k as u32, sizes[k]);
        }
    }
    let total: u64 = sizes.iter().sum::<usize>() as u64 * 20;
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!((sa.opackets, sa.obytes), (sent as u64, total));
    assert_eq!((sb.ipackets, sb.ibytes), (sent as u64, total));
    assert_eq!((sb.opackets, sa.ipackets), (sent as u64, sent as u64));
    // A full ring leaves the rest with the caller.
    let mut burst = Pkts::new();
    for t in 0..100 {
        burst.push(frame(&p, t, 64, false)).unwrap();
    }
    assert_eq!(qa.tx_burst(0, &mut burst), 64);
    assert_eq!(burst.len(), 36);
    drop((burst, qa, qb, out));
    drop(a);
    drop(b);
    assert_eq!(p.available(), p.size(), "every mbuf back in its pool");
    assert!(
        !std::path::Path::new(&format!("/dev/shm/rpmd-shm-{n}")).exists(),
        "the last side removes the file"
    );
}

#[test]
fn options_and_names_are_checked() {
    let r = Registry::new();
    let n = name("opts");
    let _a = r.open(&format!("shm:{n},queues=2")).unwrap();
    for (s, want) in [
        (format!("shm:{n},queues=1"), "exists with queues=2"),
        ("shm:a/b".to_string(), "name \"a/b\""),
        ("shm:.x".to_string(), "not starting with a dot"),
        ("shm:x,slots=1000".to_string(), "power of two"),
        ("shm:x,slot_size=10".to_string(), "64..=16384"),
        ("shm:x,bogus=1".to_string(), "unknown option"),
    ] {
        let e = r.open(&s).err().expect(&s).to_string();
        assert!(e.contains(want), "{s}: {e}");
    }
    let b = r.open(&format!("shm:{n}")).unwrap();
    assert_eq!(b.capabilities().max_rx_queues, 2);
}

#[test]
fn garbage_from_the_peer_is_counted_not_trusted() {
    let n = name("garbage");
    let p = pool("shm-garbage", 256);
    let r = Registry::new();
    let [(_a, _qa), (b, mut qb)] = pair(&r, &n, ",slots=16", &p);
    // Write the A->B ring of queue 0 as a broken peer would. Slots start
    // 128 bytes into the ring, 2112 bytes apart (slot_size 2048), the ctrl
    // word (seq << 16 | length) 60 bytes into each. Slot 0 claims 65535
    // bytes, slot 1 zero bytes, slot 2 is a good 100 bytes, slot 3 carries
    // the wrong seq (so it is no frame yet).
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/dev/shm/rpmd-shm-{n}"))
        .unwrap();
    let ctrl = |slot: u64, v: u32| {
        f.write_at(&v.to_ne_bytes(), 4096 + 128 + slot * 2112 + 60)
            .unwrap();
    };
    ctrl(0, 1 << 16 | 0xffff);
    ctrl(1, 2 << 16);
    ctrl(2, 3 << 16 | 100);
    ctrl(3, 99 << 16 | 100);
    let mut out = Pkts::new();
    assert_eq!(qb.rx_burst(0, &mut out, 32), 1, "only the sane slot");
    assert_eq!(out[0].pkt_len(), 100);
    assert_eq!(b.stats().ierrors, 2);
    assert_eq!(qb.rx_burst(0, &mut out, 32), 0, "a wrong seq is no frame");
    assert_eq!(b.stats().ierrors, 2);
    drop(out);
    drop(qb);
    assert_eq!(p.available(), p.size(), "every mbuf back in its pool");
}

fn spawn_peer(link: &str, mode: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "peer",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RPMD_SHM_PEER", link)
        .env("RPMD_SHM_PEER_MODE", mode)
        .spawn()
        .unwrap()
}

/// The other process: echoes every frame back until a frame tagged
/// u32::MAX arrives (mode `echo`), or opens the link and exits without
/// closing it (mode `die`).
#[test]
#[ignore = "run by the other tests as a second process"]
fn peer() {
    let Ok(link) = std::env::var("RPMD_SHM_PEER") else {
        return;
    };
    let p = pool("shm-peer", 1024);
    let r = Registry::new();
    let mut port = r.open(&format!("shm:{link}")).unwrap();
    if std::env::var("RPMD_SHM_PEER_MODE").as_deref() == Ok("die") {
        // Exit without running destructors: the side stays claimed by a
        // dead pid, as after a crash.
        std::process::exit(0);
    }
    port.configure(&conf(&p)).unwrap();
    let mut q = port.start().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut b = Pkts::new();
    while Instant::now() < deadline {
        q.rx_burst(0, &mut b, 32);
        let stop = b
            .iter()
            .any(|m| m.pkt_len() >= 4 && m.data()[..4] == u32::MAX.to_le_bytes());
        while !b.is_empty() {
            q.tx_burst(0, &mut b);
        }
        if stop {
            return;
        }
    }
    panic!("peer: no stop frame within 20 s");
}

#[test]
fn two_processes_exchange_frames() {
    let n = name("xproc");
    let p = pool("shm-xproc", 2048);
    let r = Registry::new();
    let mut a = r.open(&format!("shm:{n},slots=256")).unwrap();
    a.configure(&conf(&p)).unwrap();
    let mut q = a.start().unwrap();
    let mut child = spawn_peer(&n, "echo");
    let deadline = Instant::now() + Duration::from_secs(15);
    while !a.link().up {
        assert!(Instant::now() < deadline, "peer never joined");
        std::thread::sleep(Duration::from_millis(2));
    }
    let total = 10_000u32;
    let (mut sent, mut got) = (0u32, 0u32);
    let mut out = Pkts::new();
    while got < total {
        assert!(Instant::now() < deadline, "{got}/{total} echoed");
        if sent < total && sent - got < 128 {
            let mut b = Pkts::new();
            for t in sent..(sent + 32).min(total) {
                b.push(frame(&p, t, 60 + (t as usize % 1400), false))
                    .unwrap();
            }
            sent += q.tx_burst(0, &mut b) as u32;
            drop(b);
            // Frames not taken are re-made next round with the same tags.
        }
        q.rx_burst(0, &mut out, 32);
        for m in out.iter() {
            check(m, got, 60 + (got as usize % 1400));
            got += 1;
        }
        out.clear();
    }
    let mut stop = Pkts::new();
    stop.push(frame(&p, u32::MAX, 64, false)).unwrap();
    assert_eq!(q.tx_burst(0, &mut stop), 1);
    assert!(child.wait().unwrap().success());
    assert_eq!(a.stats().ipackets, total as u64);
    // The peer is gone: the link says so.
    assert!(!a.link().up);
}

#[test]
fn a_dead_peers_side_and_a_stale_file_are_taken_over() {
    let n = name("stale");
    let r = Registry::new();
    // A peer that dies holding side A leaves a stale file behind.
    assert!(spawn_peer(&n, "die").wait().unwrap().success());
    let path = format!("/dev/shm/rpmd-shm-{n}");
    assert!(std::path::Path::new(&path).exists());
    let a = r.open(&format!("shm:{n}")).unwrap();
    // Now a live A exists; a peer that dies holding side B leaves A
    // alone, and B can be opened again afterwards.
    assert!(spawn_peer(&n, "die").wait().unwrap().success());
    let b = r.open(&format!("shm:{n}")).unwrap();
    assert_ne!(a.mac_addr(), b.mac_addr());
    drop((a, b));
    assert!(!std::path::Path::new(&path).exists());
}
