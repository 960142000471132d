//! The port API through the software ports: device strings, configuration
//! checks, ring pairs, null, loopback and the fault-injecting wrapper.
use rpmd_pmd::port::{Offloads, Pkts, Port, PortConfig};
use rpmd_pmd::testing::{Faults, Faulty, LoopbackDriver};
use rpmd_pmd::{Error, Mempool, MempoolConfig, Registry};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

fn pool(name: &str, n: u32) -> Mempool {
    let mut c = MempoolConfig::new(name, n);
    c.cache_size = 0;
    Mempool::new(&c).unwrap()
}

/// A frame whose bytes say which (tag) it is.
fn frame(p: &Mempool, tag: u32, len: usize) -> rpmd_pmd::Mbuf {
    let mut m = p.get().unwrap();
    let d = m.append(len).unwrap();
    for (i, b) in d.iter_mut().enumerate() {
        *b = (tag as usize * 31 + i) as u8;
    }
    d[..4].copy_from_slice(&tag.to_le_bytes());
    m
}

fn check(m: &rpmd_pmd::Mbuf, tag: u32, len: usize) {
    let d = m.data();
    assert_eq!(d.len(), len);
    assert_eq!(u32::from_le_bytes(d[..4].try_into().unwrap()), tag);
    for (i, b) in d.iter().enumerate().skip(4) {
        assert_eq!(*b, (tag as usize * 31 + i) as u8, "frame {tag} byte {i}");
    }
}

fn conf(q: u16) -> PortConfig {
    PortConfig {
        rx_queues: q,
        tx_queues: q,
        ..PortConfig::default()
    }
}

#[test]
fn unknown_and_malformed_strings_list_the_accepted_forms() {
    let r = Registry::new();
    for (s, want) in [
        ("foo:bar", "no driver for device kind `foo`"),
        // A kind another rpmd crate registers says which (issue 26).
        (
            "virtio-user:/tmp/x.sock",
            "rpmd_virtio::register(&mut registry)",
        ),
        ("Ring:x", "lowercase"),
        ("ring", "needs a ring name"),
        ("ring:x,bogus=1", "unknown option `bogus`"),
        ("null:x", "takes no `:x` part"),
        ("pci", "needs an address"),
    ] {
        let e = r.open(s).err().expect(s);
        let msg = e.to_string();
        assert!(msg.contains(want), "{s}: {msg}");
        assert!(matches!(e, Error::DeviceString { .. }), "{s}: {e:?}");
        for form in ["pci:DDDD:BB:DD.F", "ring:NAME", "null["] {
            assert!(
                msg.contains(form),
                "{s}: accepted forms missing {form}: {msg}"
            );
        }
    }
    let e = r.open("pci:00:1f.9").err().unwrap().to_string();
    assert!(e.contains("malformed") && e.contains("function"), "{e}");
    let e = r.open("pci:0000:7f:1f.7").err().unwrap().to_string();
    assert!(e.contains("no such device"), "{e}");
    let e = r.open("ring:x,size=1000").err().unwrap().to_string();
    assert!(e.contains("power of two"), "{e}");
}

#[test]
fn configuration_is_checked_against_capabilities() {
    let r = Registry::new();
    let mut p = r.open("ring:cfg,queues=2").unwrap();
    let caps = p.capabilities();
    assert_eq!((caps.max_rx_queues, caps.max_tx_queues), (2, 2));
    for (c, want) in [
        (conf(0), "rx_queues"),
        (conf(3), "rx_queues"),
        (
            PortConfig {
                offloads: Offloads::TX_TSO | Offloads::TX_MULTI_SEGS,
                ..conf(1)
            },
            "tx-tso not offered",
        ),
        (
            PortConfig {
                mtu: Some(20),
                ..conf(1)
            },
            "mtu",
        ),
    ] {
        let e = p.configure(&c).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
    let e = p.start().err().unwrap().to_string();
    assert!(e.contains("start before configure"), "{e}");
    let mut n = r.open("null").unwrap();
    let e = n.configure(&conf(1)).unwrap_err().to_string();
    assert!(e.contains("rx_pool"), "{e}");
    p.configure(&conf(2)).unwrap();
    assert!(p.set_mtu(9000).is_ok() && p.mtu() == 9000);
    assert!(p.set_mtu(10_000).is_err());
    p.set_promiscuous(false).unwrap();
    assert!(!p.promiscuous());
}

#[test]
fn ring_pair_carries_frames_in_order_on_every_queue() {
    let r = Registry::new();
    let mp = pool("ringpair", 4096);
    let mut a = r.open("ring:pair,queues=2,size=256").unwrap();
    let mut b = r.open("ring:pair").unwrap();
    assert!(r.open("ring:pair").is_err(), "a third side must be refused");
    assert_ne!(a.mac_addr(), b.mac_addr());
    a.configure(&conf(2)).unwrap();
    b.configure(&conf(2)).unwrap();
    let mut qa = a.start().unwrap();
    let mut qb = b.start().unwrap();
    assert!(a.link().up && b.link().up);
    let mut tag = 0u32;
    for q in 0..2u16 {
        for round in 0..20 {
            let mut out = Pkts::new();
            for _ in 0..32 {
                out.push(frame(&mp, tag, 60 + round)).unwrap();
                tag += 1;
            }
            assert_eq!(qa.tx_burst(q, &mut out), 32);
            let mut got = Pkts::new();
            assert_eq!(qb.rx_burst(q, &mut got, 32), 32);
            for (i, m) in got.iter().enumerate() {
                check(m, tag - 32 + i as u32, 60 + round);
            }
            // And back the other way.
            assert_eq!(qb.tx_burst(q, &mut got), 32);
            let mut back = Pkts::new();
            assert_eq!(qa.rx_burst(q, &mut back, 64), 32);
        }
    }
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!(
        (sa.opackets, sa.ipackets, sb.ipackets, sb.opackets),
        (1280, 1280, 1280, 1280)
    );
    assert_eq!(sa.obytes, sb.ibytes);
    assert_eq!(
        sa.obytes,
        2 * (0..20).map(|r| 32 * (60 + r) as u64).sum::<u64>()
    );
    assert!(a
        .xstats()
        .iter()
        .any(|x| x.name == "tx_q1_packets" && x.value == 640));
    a.reset_stats();
    assert_eq!(a.stats().opackets, 0);
    drop((qa, qb));
    assert_eq!(mp.available(), 4096, "every frame back in the pool");
}

#[test]
fn full_ring_leaves_unsent_frames_with_the_caller_and_drop_frees_all() {
    let r = Registry::new();
    let mp = pool("ringfull", 512);
    let mut a = r.open("ring:full,size=64").unwrap();
    a.configure(&conf(1)).unwrap();
    let mut q = a.start().unwrap();
    let mut out = Pkts::new();
    for t in 0..100 {
        out.push(frame(&mp, t, 64)).unwrap();
    }
    assert_eq!(q.tx_burst(0, &mut out), 64);
    assert_eq!(out.len(), 36);
    check(&out[0], 64, 64);
    assert_eq!(
        a.xstats()
            .iter()
            .find(|x| x.name == "tx_q0_full")
            .unwrap()
            .value,
        1
    );
    drop(out);
    // 64 frames sit in a ring no one reads; dropping the ports frees them.
    drop(q);
    drop(a);
    assert_eq!(mp.available(), 512);
}

#[test]
fn stop_kills_handles_and_restart_needs_them_dropped() {
    let r = Registry::new();
    let mp = pool("ringstop", 64);
    let mut a = r.open("ring:stop").unwrap();
    let mut b = r.open("ring:stop").unwrap();
    a.configure(&conf(1)).unwrap();
    b.configure(&conf(1)).unwrap();
    let mut qa = a.start().unwrap();
    let mut qb = b.start().unwrap();
    a.stop().unwrap();
    assert!(!a.link().up);
    let mut out = Pkts::new();
    out.push(frame(&mp, 1, 64)).unwrap();
    assert_eq!(qa.tx_burst(0, &mut out), 0, "a stopped port sends nothing");
    let e = a.start().err().unwrap().to_string();
    assert!(e.contains("still alive"), "{e}");
    drop(qa);
    let mut qa = a.start().unwrap();
    assert_eq!(qa.tx_burst(0, &mut out), 1);
    let mut got = Pkts::new();
    assert_eq!(qb.rx_burst(0, &mut got, 32), 1);
    assert_eq!(qb.rx_burst(7, &mut got, 32), 0, "no such queue");
}

#[test]
fn ring_pair_crosses_threads() {
    let r = Registry::new();
    let mp = pool("ringthreads", 2048);
    let mut a = r.open("ring:threads").unwrap();
    let mut b = r.open("ring:threads").unwrap();
    a.configure(&conf(1)).unwrap();
    b.configure(&conf(1)).unwrap();
    let mut qa = a.start().unwrap();
    let mut qb = b.start().unwrap();
    const N: u32 = 200_000;
    let mp2 = mp.clone();
    let tx = std::thread::spawn(move || {
        let mut tag = 0;
        let mut out = Pkts::new();
        while tag < N || !out.is_empty() {
            while tag < N && out.len() < 32 {
                match mp2.get() {
                    Ok(mut m) => {
                        m.append(64).unwrap()[..4].copy_from_slice(&tag.to_le_bytes());
                        out.push(m).unwrap();
                        tag += 1;
                    }
                    Err(_) => break,
                }
            }
            qa.tx_burst(0, &mut out);
            std::hint::spin_loop();
        }
    });
    let mut want = 0u32;
    let mut got = Pkts::new();
    while want < N {
        qb.rx_burst(0, &mut got, 32);
        while let Some(m) = got.pop() {
            assert_eq!(u32::from_le_bytes(m.data()[..4].try_into().unwrap()), want);
            want += 1;
        }
    }
    tx.join().unwrap();
    assert_eq!(b.stats().ipackets, N as u64);
    assert_eq!(mp.available(), 2048);
}

#[test]
fn null_port_produces_and_swallows_frames_and_counts_pool_misses() {
    let r = Registry::new();
    let mp = pool("null", 100);
    let mut n = r.open("null,size=128").unwrap();
    n.configure(&PortConfig {
        rx_pool: Some(mp.clone()),
        ..conf(2)
    })
    .unwrap();
    let mut q = n.start().unwrap();
    let mut got = Pkts::new();
    assert_eq!(q.rx_burst(1, &mut got, 32), 32);
    assert!(got.iter().all(|m| m.data_len() == 128));
    assert_eq!(q.rx_burst(0, &mut got, 32), 32);
    assert_eq!(
        q.rx_burst(0, &mut got, 64),
        36,
        "pool ran dry: a short burst"
    );
    assert_eq!(q.rx_burst(0, &mut got, 64), 0);
    let s = n.stats();
    assert_eq!((s.ipackets, s.ibytes), (100, 12_800));
    assert!(s.rx_nombuf >= 1);
    assert_eq!(q.tx_burst(0, &mut got), 100);
    assert!(got.is_empty());
    assert_eq!(n.stats().opackets, 100);
    assert_eq!(mp.available(), 100);
}

#[test]
fn loopback_and_injected_faults() {
    let mut r = Registry::new();
    r.register(Box::new(LoopbackDriver));
    let mp = pool("faults", 256);
    let faults = Arc::new(Faults::default());
    let mut p = Faulty::wrap(r.open("loopback,queues=1").unwrap(), faults.clone());
    faults.fail_configure.store(true, Relaxed);
    assert!(p
        .configure(&conf(1))
        .unwrap_err()
        .to_string()
        .contains("injected"));
    p.configure(&conf(1)).unwrap();
    faults.fail_start.store(true, Relaxed);
    assert!(p.start().is_err());
    let mut q = p.start().unwrap();
    assert!(p.link().up);
    faults.link_down.store(true, Relaxed);
    assert!(!p.link().up);

    // Partial TX: the unsent frames stay with the caller, in order.
    faults.tx_limit.store(5, Relaxed);
    let mut out = Pkts::new();
    for t in 0..12 {
        out.push(frame(&mp, t, 64)).unwrap();
    }
    assert_eq!(q.tx_burst(0, &mut out), 5);
    assert_eq!(out.len(), 7);
    for (i, m) in out.iter().enumerate() {
        check(m, 5 + i as u32, 64);
    }
    assert_eq!(q.tx_burst(0, &mut out), 5);
    assert_eq!(q.tx_burst(0, &mut out), 2);

    // RX drops: every 3rd of the 12 looped-back frames, counted as ierrors.
    faults.rx_drop_every.store(3, Relaxed);
    let mut got = Pkts::new();
    got.push(frame(&mp, 99, 64)).unwrap();
    assert_eq!(q.rx_burst(0, &mut got, 32), 8);
    check(&got[0], 99, 64);
    let tags: Vec<u32> = got[1..]
        .iter()
        .map(|m| u32::from_le_bytes(m.data()[..4].try_into().unwrap()))
        .collect();
    assert_eq!(tags, vec![0, 1, 3, 4, 6, 7, 9, 10]);
    assert_eq!(p.stats().ierrors, 4);
    drop(got);
    assert_eq!(mp.available(), 256, "dropped frames went back to the pool");
}

#[test]
fn received_mbufs_carry_the_port_id_and_packet_type_of_every_software_port() {
    let p = pool("t-stamp", 256);
    let reg = Registry::new();
    // Ports are numbered in the order the registry opens them.
    let mut null = reg.open("null,size=60").unwrap();
    let name = format!("t-stamp-{}", std::process::id());
    let mut a = reg.open(&format!("ring:{name}")).unwrap();
    let mut b = reg.open(&format!("ring:{name}")).unwrap();
    let mut shm_a = reg.open_as(&format!("shm:{name}"), 40).unwrap();
    let mut shm_b = reg.open(&format!("shm:{name}")).unwrap();
    let typed = PortConfig {
        rx_ptypes: true,
        ..PortConfig::with_pool(&p)
    };
    let mut qs = Vec::new();
    for port in [&mut null, &mut a, &mut b, &mut shm_a, &mut shm_b] {
        port.configure(&typed).unwrap();
        qs.push(port.start().unwrap());
    }
    let mut got = Pkts::new();
    assert_eq!(qs[0].rx_burst(0, &mut got, 4), 4);
    assert!(got.iter().all(|m| m.port() == 0));
    got.clear();
    let udp = rpmd_pmd::hdr::tests_support::udp_frame(53);
    let mut out = Pkts::new();
    for q in [1, 3] {
        let mut m = p.get().unwrap();
        m.append(udp.len()).unwrap().copy_from_slice(&udp);
        out.push(m).unwrap();
        assert_eq!(qs[q].tx_burst(0, &mut out), 1);
    }
    // ring b is port 2; shm b is port 4 (shm a took id 40 out of order,
    // which does not move the count).
    for (q, want) in [(2, 2), (4, 3)] {
        let t0 = std::time::Instant::now();
        while qs[q].rx_burst(0, &mut got, 1) == 0 {
            assert!(t0.elapsed().as_secs() < 5, "no frame on port {want}");
        }
        let m = got.pop().unwrap();
        assert_eq!(m.port(), want);
        let t = rpmd_pmd::hdr::PacketType(m.packet_type());
        assert_eq!(t.to_string(), "L2_ETHER L3_IPV4 L4_UDP");
    }
    drop(qs);
    assert_eq!(p.available(), 256);
}

#[test]
fn queues_are_taken_one_by_one_and_not_twice() {
    let p = pool("t-take", 64);
    let reg = Registry::new();
    let mut port = reg.open("null").unwrap();
    port.configure(&PortConfig {
        rx_queues: 2,
        ..PortConfig::with_pool(&p)
    })
    .unwrap();
    let mut q = port.start().unwrap();
    let mut rx1 = q.take_rx(1).unwrap();
    let mut got = Pkts::new();
    assert_eq!(rx1.rx_burst(&mut got, 2), 2);
    // The slot left behind receives nothing; queue 0 is still in place.
    assert_eq!(q.rx_burst(1, &mut got, 2), 0);
    assert_eq!(q.rx_burst(0, &mut got, 2), 2);
    let again = q.take_rx(1).map(|_| ()).unwrap_err().to_string();
    assert!(again.contains("taken already"), "{again}");
    let none = q.take_tx(5).map(|_| ()).unwrap_err().to_string();
    assert!(none.contains("does not exist"), "{none}");
    assert!(q.take_tx(0).is_ok());
}

#[test]
fn the_pool_may_be_dropped_before_the_ports_and_queues_using_it() {
    let reg = Registry::new();
    let name = format!("t-order-{}", std::process::id());
    let pool = pool("t-order", 128);
    let watch = pool.clone();
    let mut a = reg.open(&format!("shm:{name}")).unwrap();
    let mut b = reg.open(&format!("shm:{name}")).unwrap();
    a.configure(&PortConfig::with_pool(&pool)).unwrap();
    b.configure(&PortConfig::with_pool(&pool)).unwrap();
    let (mut qa, mut qb) = (a.start().unwrap(), b.start().unwrap());
    let mut out = Pkts::new();
    out.push(frame(&pool, 1, 60)).unwrap();
    qa.tx_burst(0, &mut out);
    drop(pool); // the app's handle first: the ports hold theirs
    let mut got = Pkts::new();
    let t0 = std::time::Instant::now();
    while qb.rx_burst(0, &mut got, 1) == 0 {
        assert!(t0.elapsed().as_secs() < 5);
    }
    check(&got[0], 1, 60);
    drop(got);
    drop((qa, qb, a, b));
    assert_eq!(watch.available(), 128, "every mbuf back, nothing leaked");
}

/// The same for a `ring:` pair, whose rings hold the mbufs themselves: the
/// app drops its pool (every handle of its own) and its registry while
/// frames sit in the ring; the ports keep the pool alive (no leak, no
/// warning), the frames arrive intact, and the pool goes with the last
/// ring end.
#[test]
fn a_ring_pair_keeps_the_pool_of_the_frames_in_its_rings() {
    let leaked = rpmd_pmd::mbuf::pool::leaked_pools();
    let reg = Registry::new();
    let name = format!("t-ring-order-{}", std::process::id());
    let pool = pool("t-ring-order", 128);
    let mut a = reg.open(&format!("ring:{name}")).unwrap();
    let mut b = reg.open(&format!("ring:{name}")).unwrap();
    a.configure(&PortConfig::with_pool(&pool)).unwrap();
    b.configure(&PortConfig::with_pool(&pool)).unwrap();
    let (mut qa, mut qb) = (a.start().unwrap(), b.start().unwrap());
    let mut out = Pkts::new();
    for i in 0..10 {
        out.push(frame(&pool, i, 60)).unwrap();
    }
    assert_eq!(qa.tx_burst(0, &mut out), 10);
    drop(pool);
    drop(reg);
    assert_eq!(
        rpmd_pmd::mbuf::pool::leaked_pools(),
        leaked,
        "warned while in use"
    );
    // Half taken; the other half stays in the ring to the end.
    let mut got = Pkts::new();
    assert_eq!(qb.rx_burst(0, &mut got, 5), 5);
    for (i, m) in got.iter().enumerate() {
        check(m, i as u32, 60);
    }
    drop(got);
    drop((qa, a));
    drop((qb, b));
    assert_eq!(
        rpmd_pmd::mbuf::pool::leaked_pools(),
        leaked,
        "nothing leaked"
    );
}

/// Per-queue start and stop, and deferred start (DPDK's
/// `rx_deferred_start` and `rte_eth_dev_{rx,tx}_queue_{start,stop}`), on
/// the software ports: a stopped or deferred queue's handle takes and
/// gives nothing, its neighbours go on, and bad indices are errors.
#[test]
fn queues_start_and_stop_one_by_one_and_may_start_deferred() {
    let mut r = Registry::new();
    r.register(Box::new(LoopbackDriver));
    let mp = pool("queuectl", 1024);
    for dev in ["null,size=64", "loopback,queues=2"] {
        let mut p = r.open(dev).unwrap();
        let bad = PortConfig {
            rx_deferred: vec![2],
            ..conf(2)
        };
        let e = p.configure(&bad).unwrap_err().to_string();
        assert!(
            e.contains("rx_deferred") && e.contains("queue 2"),
            "{dev}: {e}"
        );
        assert!(p.rx_queue_start(0).is_err(), "{dev}: a stopped port");
        let c = PortConfig {
            rx_pool: Some(mp.clone()),
            rx_deferred: vec![1],
            tx_deferred: vec![0],
            ..conf(2)
        };
        p.configure(&c).unwrap();
        let mut q = p.start().unwrap();
        let send = |q: &mut rpmd_pmd::Queues, queue: u16| {
            let mut out = Pkts::new();
            out.push(frame(&mp, 1, 64)).unwrap();
            q.tx_burst(queue, &mut out)
        };
        let recv = |q: &mut rpmd_pmd::Queues, queue: u16| {
            let mut got = Pkts::new();
            q.rx_burst(queue, &mut got, 1)
        };
        // tx 0 deferred, tx 1 live; rx 0 live, rx 1 deferred.
        assert_eq!(send(&mut q, 0), 0, "{dev}: a deferred tx queue");
        assert_eq!(send(&mut q, 1), 1, "{dev}");
        assert_eq!(recv(&mut q, 1), 0, "{dev}: a deferred rx queue");
        p.rx_queue_start(1).unwrap();
        // (On loopback, the frame sent on tx 1 waited for it.)
        assert_eq!(recv(&mut q, 1), 1, "{dev}");
        p.tx_queue_start(0).unwrap();
        assert_eq!(send(&mut q, 0), 1, "{dev}");
        p.rx_queue_stop(0).unwrap();
        assert_eq!(recv(&mut q, 0), 0, "{dev}: a stopped rx queue");
        p.tx_queue_stop(1).unwrap();
        assert_eq!(send(&mut q, 1), 0, "{dev}: a stopped tx queue");
        p.rx_queue_start(0).unwrap();
        assert_eq!(recv(&mut q, 0), 1, "{dev}");
        let e = p.tx_queue_stop(2).unwrap_err().to_string();
        assert!(e.contains("tx queue 2 does not exist"), "{dev}: {e}");
        // A port stop silences every queue; the next start starts them
        // all but the deferred ones again.
        p.stop().unwrap();
        assert_eq!(recv(&mut q, 0), 0);
        drop(q);
        let mut q = p.start().unwrap();
        assert_eq!(send(&mut q, 1), 1, "{dev}");
        assert_eq!(send(&mut q, 0), 0, "{dev}: deferred again");
        p.stop().unwrap();
    }
    assert_eq!(mp.available(), 1024, "every mbuf back");
}

/// Link events on the software ports: null's link follows its start and
/// stop, which raise them; shm's also follows its peer, which it cannot
/// watch, so it says so rather than stay silent.
#[test]
fn link_events_are_raised_or_refused_plainly() {
    let r = Registry::new();
    let mp = pool("lsc", 256);
    let mut p = r.open("null").unwrap();
    let ev = p.link_events().unwrap();
    assert!(!ev.wait(std::time::Duration::ZERO).unwrap());
    p.configure(&PortConfig::with_pool(&mp)).unwrap();
    let q = p.start().unwrap();
    assert!(ev.take().unwrap() > 0 && p.link().up, "start raises");
    p.stop().unwrap();
    assert!(ev.take().unwrap() > 0 && !p.link().up, "stop raises");
    drop(q);
    let name = format!("shm:lsc-{}", std::process::id());
    let mut s = r.open(&name).unwrap();
    let e = s.link_events().unwrap_err().to_string();
    assert!(e.contains("cannot see its link change"), "{e}");
}
