//! The ConnectX-3 port on the device model, through the registry as an
//! app opens it: frames both ways between the two cabled ports checked
//! byte for byte, checksum flags, MAC steering, promiscuous and
//! all-multicast modes, link events, a second start, and nothing leaked
//! or left mapped at the end.
use rpmd_mlx4::model::{Mlx4Model, ModelOptions, RxOutcome, PORT_MAC};
use rpmd_pmd::mbuf::{RX_IP_CKSUM_GOOD, RX_L4_CKSUM_GOOD};
use rpmd_pmd::port::{MacAddr, Port};
use rpmd_pmd::{Mempool, Pkts, PortConfig, Queues, Registry};

mod common;
use common::*;

fn registry() -> Registry {
    let mut reg = Registry::new();
    rpmd_mlx4::register(&mut reg);
    reg
}

#[test]
fn the_registry_opens_both_ports_of_one_model_card() {
    let reg = registry();
    let a = reg.open("mlx4-model:reg,port=1,wire=1").unwrap();
    let b = reg.open("mlx4-model:reg,port=2").unwrap();
    assert_eq!((a.driver(), a.mac_addr()), ("mlx4", MacAddr(PORT_MAC)));
    // The firmware's version, as QUERY_FW gave it (the model: 2.42.5000).
    assert_eq!(a.fw_version().as_deref(), Some("2.42.5000"));
    assert_eq!(b.mac_addr(), MacAddr(mac2()));
    for (bad, why) in [
        ("mlx4-model:reg,port=3", "ports 1..=2"),
        ("mlx4-model:reg,queues=2", "queues"),
        ("mlx4-model", "model name"),
    ] {
        let e = reg.open(bad).err().unwrap().to_string();
        assert!(e.contains(why), "{bad}: {e}");
    }
    assert!(reg.accepted_forms().contains("mlx4-model:NAME"));
    assert!(reg.accepted_forms().contains("mlx4 15b3:1003"));
}

/// The device's own counters (DUMP_ETH_STATS) reach the port: frames a
/// receive ring left unpolled had no room for are dropped in the device
/// and are the port's `imissed`, which reset_stats zeroes; frames and
/// bytes both ways are xstats, counted from the port's open.
#[test]
fn device_drops_are_imissed_and_its_counters_are_xstats() {
    let p = pool("mlx4-eth-ctr");
    let (_model, mut a, mut b) = cabled("ctr");
    a.configure(&conf(&p)).unwrap();
    b.configure(&conf(&p)).unwrap();
    let mut qa = a.start().unwrap();
    let mut qb = b.start().unwrap();
    // 320 frames of 100 bytes at a 256-entry ring nobody polls.
    let sent = 320u64;
    for round in 0..sent / 32 {
        let mut pkts = Pkts::new();
        for k in 0..32 {
            pkts.push(mbuf_of(&p, &udp_frame(mac2(), 100, (round * 32 + k) as u8)))
                .unwrap();
        }
        assert_eq!(qa.tx_burst(0, &mut pkts), 32);
    }
    let mut taken = 0u64;
    loop {
        let mut got = Pkts::new();
        let n = qb.rx_burst(0, &mut got, 32) as u64;
        if n == 0 {
            break;
        }
        taken += n;
    }
    let missed = b.stats().imissed;
    assert!(taken > 0 && taken < sent, "taken {taken}");
    assert_eq!(missed, sent - taken, "every frame taken or missed");
    let x = |port: &dyn Port, name: &str| {
        let all = port.xstats();
        all.iter()
            .find(|x| x.name == name)
            .unwrap_or_else(|| panic!("no xstat {name}: {all:?}"))
            .value
    };
    assert_eq!(x(a.as_ref(), "tx_packets_phy"), sent);
    assert_eq!(x(a.as_ref(), "tx_bytes_phy"), sent * 100);
    assert_eq!(x(b.as_ref(), "rx_packets_phy"), sent);
    assert_eq!(x(b.as_ref(), "rx_bytes_phy"), sent * 100);
    assert_eq!(x(b.as_ref(), "rx_missed_errors"), missed);
    assert_eq!(x(b.as_ref(), "rx_dropped_phy"), missed);
    assert_eq!(x(a.as_ref(), "rx_packets_phy"), 0, "per port");
    b.reset_stats();
    assert_eq!(b.stats().imissed, 0);
    drop((qa, qb));
    a.stop().unwrap();
    b.stop().unwrap();
}

/// Receive interrupts through MSI-X: an armed queue's vector fires on
/// the next frame, once per arming; disarmed, frames raise nothing.
#[test]
fn an_armed_queue_is_interrupted_once_by_the_next_frame() {
    use rpmd_pmd::function::EventFd;
    use std::time::Duration;
    let p = pool("mlx4-eth-irq");
    let (_model, mut a, mut b) = cabled("irq");
    assert!(b.capabilities().rx_interrupts);
    a.configure(&conf(&p)).unwrap();
    b.configure(&conf(&p)).unwrap();
    let mut qa = a.start().unwrap();
    let mut qb = b.start().unwrap();
    let fd = qb.rx[0].interrupt_fd().expect("an interrupt fd");
    let fd = EventFd::from_fd(fd.try_clone_to_owned().unwrap());
    let mut send = |seq: u8| {
        let mut pkts = Pkts::new();
        pkts.push(mbuf_of(&p, &udp_frame(mac2(), 60, seq))).unwrap();
        assert_eq!(qa.tx_burst(0, &mut pkts), 1);
    };
    let short = Duration::from_millis(20);
    // Not armed: a frame raises nothing.
    send(1);
    assert_eq!(fd.wait(short).unwrap(), 0, "unarmed");
    let mut got = Pkts::new();
    assert_eq!(qb.rx_burst(0, &mut got, 32), 1);
    for round in 0..3u8 {
        qb.rx[0].set_interrupt(true).unwrap();
        assert!(!qb.rx[0].has_work());
        assert_eq!(fd.wait(short).unwrap(), 0, "round {round}: armed, idle");
        send(2 + 2 * round);
        assert!(
            fd.wait(Duration::from_secs(1)).unwrap() >= 1,
            "round {round}: the frame wakes it"
        );
        send(3 + 2 * round);
        assert_eq!(fd.wait(short).unwrap(), 0, "round {round}: once per arming");
        qb.rx[0].set_interrupt(false).unwrap();
        let mut got = Pkts::new();
        assert_eq!(qb.rx_burst(0, &mut got, 32), 2, "round {round}");
    }
    drop((qa, qb, got));
    a.stop().unwrap();
    b.stop().unwrap();
    // Restarted, the queues are interrupted again.
    let mut qa = a.start().unwrap();
    let mut qb = b.start().unwrap();
    let fd = qb.rx[0]
        .interrupt_fd()
        .expect("an interrupt fd after restart");
    let fd = EventFd::from_fd(fd.try_clone_to_owned().unwrap());
    qb.rx[0].set_interrupt(true).unwrap();
    let mut pkts = Pkts::new();
    pkts.push(mbuf_of(&p, &udp_frame(mac2(), 60, 9))).unwrap();
    assert_eq!(qa.tx_burst(0, &mut pkts), 1);
    assert!(
        fd.wait(Duration::from_secs(1)).unwrap() >= 1,
        "after restart"
    );
    drop((qa, qb));
}

/// An idle receive queue says it has no work, so an idle lcore sleeps
/// instead of spinning (it used to answer yes always); a completion
/// waiting is work until it is taken.
#[test]
fn has_work_is_a_completion_waiting() {
    let p = pool("mlx4-eth-work");
    let (_model, mut a, mut b) = cabled("work");
    a.configure(&conf(&p)).unwrap();
    b.configure(&conf(&p)).unwrap();
    let mut qa = a.start().unwrap();
    let mut qb = b.start().unwrap();
    assert!(!qb.rx[0].has_work(), "an idle queue");
    let mut pkts = Pkts::new();
    pkts.push(mbuf_of(&p, &udp_frame(mac2(), 60, 1))).unwrap();
    assert_eq!(qa.tx_burst(0, &mut pkts), 1);
    assert!(qb.rx[0].has_work(), "a frame came over the cable");
    let mut got = Pkts::new();
    assert_eq!(qb.rx_burst(0, &mut got, 32), 1);
    assert!(!qb.rx[0].has_work(), "the frame was taken");
    drop((qa, qb, got));
    a.stop().unwrap();
    b.stop().unwrap();
}

#[test]
fn frames_cross_the_cable_both_ways_byte_for_byte() {
    let p = pool("mlx4-eth-both");
    let (model, mut a, mut b) = cabled("both");
    assert_eq!(a.mac_addr(), MacAddr(PORT_MAC));
    assert_eq!(b.mac_addr(), MacAddr(mac2()));
    a.configure(&conf(&p)).unwrap();
    b.configure(&conf(&p)).unwrap();
    let mut qa = a.start().unwrap();
    let mut qb = b.start().unwrap();
    assert!(a.link().up && b.link().up, "INIT_PORT's events read");
    assert_eq!(a.link().speed_mbps, 40_000);
    // A to B, every length from the smallest to a full MTU frame.
    for (i, len) in [60usize, 64, 128, 333, 1000, 1514].into_iter().enumerate() {
        let frames: Vec<Vec<u8>> = (0..8)
            .map(|k| udp_frame(mac2(), len, (i * 8 + k) as u8))
            .collect();
        let got = send_recv(&mut qa, &mut qb, &p, &frames);
        assert_eq!(got.len(), frames.len(), "length {len}");
        for ((data, flags), want) in got.iter().zip(&frames) {
            assert_eq!(data, want, "length {len}: the frame as sent");
            assert_eq!(
                *flags & (RX_IP_CKSUM_GOOD | RX_L4_CKSUM_GOOD),
                RX_IP_CKSUM_GOOD | RX_L4_CKSUM_GOOD
            );
        }
    }
    // B to A, and many bursts so both rings wrap several times.
    for round in 0..40u8 {
        let frames: Vec<Vec<u8>> = (0..32)
            .map(|k| udp_frame(PORT_MAC, 64 + k, round))
            .collect();
        let got = send_recv(&mut qb, &mut qa, &p, &frames);
        let got: Vec<Vec<u8>> = got.into_iter().map(|g| g.0).collect();
        assert_eq!(got, frames, "round {round}");
    }
    // A corrupted checksum is not flagged good.
    let mut bad = udp_frame(mac2(), 100, 1);
    bad[50] ^= 0xff;
    let got = send_recv(&mut qa, &mut qb, &p, &[bad.clone()]);
    assert_eq!(got[0].0, bad);
    assert_eq!(got[0].1 & RX_L4_CKSUM_GOOD, 0);
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!((sa.opackets, sb.ipackets), (8 * 6 + 1, 8 * 6 + 1));
    assert_eq!((sb.opackets, sa.ipackets), (40 * 32, 40 * 32));
    drop((qa, qb));
    a.stop().unwrap();
    b.stop().unwrap();
    assert!(!a.link().up);
    drop((a, b));
    assert_eq!(p.available(), p.size(), "every mbuf back in its pool");
    assert!(model.violations().is_empty(), "{:?}", model.violations());
    assert!(
        !model.running() && !model.owned(),
        "the card closed with its last port"
    );
    assert_eq!(model.mapped_regions(), 0, "nothing left mapped");
}

/// One model, one port up, frames from the host side.
struct HostSide {
    model: std::sync::Arc<Mlx4Model>,
    port: Box<dyn Port>,
    q: Queues,
    pool: Mempool,
}

fn host_side(name: &str) -> HostSide {
    let model = Mlx4Model::new("0000:00:0b.0".parse().unwrap(), ModelOptions::default());
    let domain = rpmd_pmd::DmaDomain::new();
    let func = model.open(&domain).unwrap();
    let hca = rpmd_mlx4::Hca::open(func, &rpmd_mlx4::Options::default()).unwrap();
    let card = std::sync::Arc::new(std::sync::Mutex::new(hca));
    let mut port: Box<dyn Port> = Box::new(rpmd_mlx4::ethdev::open_port(name, card, 1, 0).unwrap());
    let pool = pool(name);
    port.configure(&conf(&pool)).unwrap();
    let q = port.start().unwrap();
    HostSide {
        model,
        port,
        q,
        pool,
    }
}

fn drain(h: &mut HostSide) -> usize {
    let mut got = Pkts::new();
    h.q.rx_burst(0, &mut got, 32)
}

/// A receive completion claiming fewer bytes than an Ethernet header, or
/// more than the buffer holds, is the device's error: the frame is
/// dropped and counted (ierrors, the queue's device errors), its buffer
/// goes back to the ring, and the frames after it arrive whole.
#[test]
fn completions_with_impossible_lengths_are_the_devices_errors() {
    let mut h = host_side("mlx4-eth-len");
    let f = udp_frame(PORT_MAC, 100, 7);
    for claimed in [0, 1, 13, 100_000] {
        let out = h.model.inject_claiming(1, &f, claimed);
        assert_eq!(out, RxOutcome::Delivered(1), "{claimed}");
    }
    assert_eq!(h.model.inject(1, &f), RxOutcome::Delivered(1));
    let mut got = Pkts::new();
    assert_eq!(h.q.rx_burst(0, &mut got, 32), 1, "the whole frame only");
    assert_eq!(got[0].data(), &f[..]);
    drop(got);
    assert_eq!(h.port.stats().ierrors, 4);
    let dev_errors = h
        .port
        .xstats()
        .iter()
        .find(|x| x.name == "rx_q0_device_errors")
        .map(|x| x.value);
    assert_eq!(dev_errors, Some(4));
    // The dropped frames' buffers went back: a ring's worth still fits.
    for k in 0..256 {
        assert_eq!(h.model.inject(1, &f), RxOutcome::Delivered(1), "frame {k}");
    }
    while drain(&mut h) > 0 {}
    drop(h.q);
    h.port.stop().unwrap();
    drop(h.port);
    assert_eq!(h.pool.available(), h.pool.size(), "every mbuf home");
}

#[test]
fn steering_takes_its_own_mac_broadcast_and_the_modes() {
    let mut h = host_side("mlx4-eth-steer");
    let other = [0x02, 0x11, 0x22, 0x33, 0x44, 0x55];
    let group = [0x01, 0x00, 0x5e, 0x00, 0x00, 0x07];
    let f = |dst| udp_frame(dst, 64, 0);
    assert_eq!(h.model.inject(1, &f(PORT_MAC)), RxOutcome::Delivered(1));
    assert_eq!(h.model.inject(1, &f([0xff; 6])), RxOutcome::Delivered(1));
    assert_eq!(h.model.inject(1, &f(other)), RxOutcome::NotSteered);
    assert_eq!(h.model.inject(1, &f(group)), RxOutcome::NotSteered);
    assert_eq!(
        h.model.inject(2, &f(PORT_MAC)),
        RxOutcome::LinkDown,
        "port 2 is not up"
    );
    assert_eq!(drain(&mut h), 2);
    h.port.set_promiscuous(true).unwrap();
    assert_eq!(h.model.inject(1, &f(other)), RxOutcome::Delivered(1));
    assert_eq!(
        h.model.inject(1, &f(group)),
        RxOutcome::Delivered(1),
        "promiscuous takes multicast too"
    );
    h.port.set_promiscuous(false).unwrap();
    assert_eq!(h.model.inject(1, &f(other)), RxOutcome::NotSteered);
    h.port.set_allmulticast(true).unwrap();
    assert_eq!(h.model.inject(1, &f(group)), RxOutcome::Delivered(1));
    assert_eq!(h.model.inject(1, &f(other)), RxOutcome::NotSteered);
    h.port.set_allmulticast(false).unwrap();
    // Filters: many groups, so chains through the AMGM half are made and
    // unmade.
    let groups: Vec<MacAddr> = (0..40u8)
        .map(|i| MacAddr([0x01, 0, 0x5e, 0, 1, i]))
        .collect();
    h.port.set_mac_filter(&[MacAddr(other)], &groups).unwrap();
    assert_eq!(h.model.inject(1, &f(other)), RxOutcome::Delivered(1));
    for g in &groups {
        assert_eq!(h.model.inject(1, &f(g.0)), RxOutcome::Delivered(1), "{g}");
        drain(&mut h);
    }
    h.port.set_mac_filter(&[], &groups[20..]).unwrap();
    assert_eq!(h.model.inject(1, &f(other)), RxOutcome::NotSteered);
    for (i, g) in groups.iter().enumerate() {
        let want = if i >= 20 {
            RxOutcome::Delivered(1)
        } else {
            RxOutcome::NotSteered
        };
        assert_eq!(h.model.inject(1, &f(g.0)), want, "{g}");
        drain(&mut h);
    }
    assert_eq!(
        h.model.inject(1, &f(PORT_MAC)),
        RxOutcome::Delivered(1),
        "own MAC kept"
    );
    drain(&mut h);
    assert!(
        h.model.violations().is_empty(),
        "{:?}",
        h.model.violations()
    );
    let HostSide { port, q, pool, .. } = h;
    drop((q, port));
    assert_eq!(pool.available(), pool.size());
}

#[test]
fn a_full_receive_ring_drops_at_the_device_and_recovers() {
    let mut h = host_side("mlx4-eth-full");
    let f = udp_frame(PORT_MAC, 64, 3);
    let mut delivered = 0;
    for _ in 0..300 {
        if h.model.inject(1, &f) == RxOutcome::Delivered(1) {
            delivered += 1;
        }
    }
    assert_eq!(delivered, 256, "one frame per posted WQE");
    assert_eq!(h.model.stats().rx_no_wqe, 44);
    let mut got = 0;
    while got < 256 {
        let n = drain(&mut h);
        assert!(n > 0);
        got += n;
    }
    assert_eq!(h.model.inject(1, &f), RxOutcome::Delivered(1), "refilled");
    assert_eq!(drain(&mut h), 1);
    assert!(
        h.model.violations().is_empty(),
        "{:?}",
        h.model.violations()
    );
}

#[test]
fn link_follows_the_cable_and_a_second_start_works() {
    let mut h = host_side("mlx4-eth-link");
    assert!(h.port.link().up);
    h.model.set_link(1, false);
    assert!(!h.port.link().up);
    h.model.set_link(1, true);
    assert!(h.port.link().up);
    drop(std::mem::take(&mut h.q));
    h.port.stop().unwrap();
    let qps = h.model.qps();
    assert!(qps.is_empty(), "every QP reset at stop: {qps:?}");
    h.q = h.port.start().unwrap();
    let f = udp_frame(PORT_MAC, 200, 9);
    assert_eq!(h.model.inject(1, &f), RxOutcome::Delivered(1));
    let mut got = Pkts::new();
    assert_eq!(h.q.rx_burst(0, &mut got, 32), 1);
    assert_eq!(got[0].data(), &f[..]);
    // Sent frames reach the host-side sink.
    let mut pkts = Pkts::new();
    pkts.push(mbuf_of(&h.pool, &f)).unwrap();
    assert_eq!(h.q.tx_burst(0, &mut pkts), 1);
    assert_eq!(h.model.take_sent(1), vec![f]);
    assert!(
        h.model.violations().is_empty(),
        "{:?}",
        h.model.violations()
    );
}

/// Link events by interrupt: pulling and plugging a cable raises the
/// port's events through the async EQ's vector and the card's watcher,
/// with nobody polling the link, for each port of the card apart.
#[test]
fn link_events_come_by_interrupt_for_each_port() {
    use std::time::Duration;
    let p = pool("mlx4-eth-lsc");
    let (model, mut a, mut b) = cabled("lsc");
    a.configure(&conf(&p)).unwrap();
    b.configure(&conf(&p)).unwrap();
    let qa = a.start().unwrap();
    let qb = b.start().unwrap();
    let ea = a.link_events().expect("link events by interrupt");
    let eb = b.link_events().unwrap();
    let settle = Duration::from_millis(300);
    let _ = (ea.wait(settle), eb.wait(settle));
    let (_, _) = (ea.take(), eb.take());
    let long = Duration::from_secs(2);
    model.set_link(2, false);
    assert!(eb.wait(long).unwrap(), "port 2's cable pulled");
    assert!(!b.link().up && a.link().up);
    model.set_link(2, true);
    assert!(eb.wait(long).unwrap(), "port 2's cable back");
    assert!(b.link().up);
    let _ = eb.take();
    model.set_link(1, false);
    assert!(ea.wait(long).unwrap(), "port 1's cable pulled");
    assert!(!a.link().up);
    assert!(
        !eb.wait(Duration::from_millis(100)).unwrap(),
        "port 2 unchanged"
    );
    drop((qa, qb));
    a.stop().unwrap();
    b.stop().unwrap();
}

#[test]
fn pci_device_strings_find_the_driver_by_id_and_share_the_card() {
    let opts = ModelOptions {
        wire: true,
        ..ModelOptions::default()
    };
    let model = Mlx4Model::new("0000:00:0a.0".parse().unwrap(), opts);
    let mut bus = rpmd_pmd::function::ModelBus::new();
    let m = model.clone();
    bus.insert(model.describe(), Box::new(move |d| m.open(d)));
    let mut reg = Registry::empty().with_bus(Box::new(bus));
    rpmd_mlx4::register(&mut reg);
    let p = pool("mlx4-eth-pci");
    let mut a = reg.open("pci:0000:00:0a.0").unwrap();
    let mut b = reg.open("pci:0000:00:0a.0,port=2").unwrap();
    assert_eq!(model.resets(), 1, "the second port found the card up");
    assert_eq!((a.driver(), b.mac_addr()), ("mlx4", MacAddr(mac2())));
    for (bad, why) in [
        ("pci:0000:00:0a.0,port=3", "ports 1..=2"),
        ("pci:0000:00:0a.0,queues=2", "queues"),
    ] {
        let e = reg.open(bad).err().unwrap().to_string();
        assert!(e.contains(why), "{bad}: {e}");
    }
    a.configure(&conf(&p)).unwrap();
    b.configure(&conf(&p)).unwrap();
    let mut qa = a.start().unwrap();
    let mut qb = b.start().unwrap();
    let frames: Vec<Vec<u8>> = (0..4).map(|k| udp_frame(mac2(), 128, k)).collect();
    let got: Vec<Vec<u8>> = send_recv(&mut qa, &mut qb, &p, &frames)
        .into_iter()
        .map(|g| g.0)
        .collect();
    assert_eq!(got, frames);
    drop((qa, qb, a, b));
    assert!(!model.running(), "the card closed with its last port");
    assert!(model.violations().is_empty(), "{:?}", model.violations());
    assert_eq!(p.available(), p.size());
}

/// A UDP/IPv4 frame of flow `k` (source port 1000 + k) to `dst`.
fn flow_frame(dst: [u8; 6], k: u16) -> Vec<u8> {
    let mut f = udp_frame(dst, 80, k as u8);
    f[34..36].copy_from_slice(&(1000 + k).to_be_bytes());
    f
}

#[test]
fn rss_spreads_flows_over_the_receive_queues_and_keeps_each_on_one() {
    let model = Mlx4Model::new("0000:00:0b.0".parse().unwrap(), ModelOptions::default());
    let func = model.open(&rpmd_pmd::DmaDomain::new()).unwrap();
    let hca = rpmd_mlx4::Hca::open(func, &rpmd_mlx4::Options::default()).unwrap();
    let card = std::sync::Arc::new(std::sync::Mutex::new(hca));
    let mut port = rpmd_mlx4::ethdev::open_port("mlx4-eth-rss", card, 1, 0).unwrap();
    let p = pool("mlx4-eth-rss");
    let three = PortConfig {
        rx_queues: 3,
        ..conf(&p)
    };
    let e = port.configure(&three).unwrap_err().to_string();
    assert!(e.contains("power of two"), "{e}");
    let four = PortConfig {
        rx_queues: 4,
        ..conf(&p)
    };
    port.configure(&four).unwrap();
    let mut q = port.start().unwrap();
    let mut queue_of = std::collections::HashMap::new();
    for round in 0..3 {
        for k in 0..64u16 {
            let f = flow_frame(PORT_MAC, k);
            assert_eq!(model.inject(1, &f), RxOutcome::Delivered(1));
            let got: Vec<(u16, u32)> = (0..4u16)
                .flat_map(|rxq| {
                    let mut pkts = Pkts::new();
                    q.rx_burst(rxq, &mut pkts, 32);
                    pkts.iter()
                        .map(|m| {
                            assert_eq!(m.data(), &f[..]);
                            assert_ne!(m.ol_flags() & rpmd_pmd::mbuf::RX_RSS_HASH, 0);
                            (rxq, m.rss_hash())
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            assert_eq!(got.len(), 1, "flow {k}: one frame, on one queue");
            let (rxq, hash) = got[0];
            assert_eq!(
                hash & 3,
                rxq as u32,
                "flow {k}: the hash's low bits pick the queue"
            );
            let first = *queue_of.entry(k).or_insert(got[0]);
            assert_eq!(
                first, got[0],
                "flow {k}, round {round}: same queue, same hash"
            );
        }
    }
    let mut per_queue = [0; 4];
    for (rxq, _) in queue_of.values() {
        per_queue[*rxq as usize] += 1;
    }
    assert!(
        per_queue.iter().all(|&n| n > 0),
        "64 flows over 4 queues: {per_queue:?}"
    );
    // Frames with nothing to hash go to queue 0.
    let mut arp = udp_frame(PORT_MAC, 60, 0);
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    assert_eq!(model.inject(1, &arp), RxOutcome::Delivered(1));
    let mut pkts = Pkts::new();
    assert_eq!(q.rx_burst(0, &mut pkts, 32), 1);
    drop((pkts, q));
    port.stop().unwrap();
    assert!(model.qps().is_empty(), "{:?}", model.qps());
    drop(port);
    assert!(model.violations().is_empty(), "{:?}", model.violations());
    assert_eq!(p.available(), p.size());
}

#[test]
fn the_device_fills_the_checksums_a_send_asks_for() {
    let mut h = host_side("mlx4-eth-txcsum");
    let want = udp_frame([0x02, 9, 9, 9, 9, 9], 300, 4);
    let mut blank = want.clone();
    blank[24..26].fill(0);
    blank[40..42].copy_from_slice(&[0xab, 0xcd]);
    let mut pkts = Pkts::new();
    let mut m = mbuf_of(&h.pool, &blank);
    m.set_ol_flags(rpmd_pmd::mbuf::TX_IP_CKSUM | rpmd_pmd::mbuf::TX_UDP_CKSUM);
    m.set_tx_header_lens(14, 20);
    pkts.push(m).unwrap();
    pkts.push(mbuf_of(&h.pool, &blank)).unwrap();
    assert_eq!(h.q.tx_burst(0, &mut pkts), 2);
    let sent = h.model.take_sent(1);
    assert_eq!(sent[0], want, "both checksums filled");
    assert_eq!(
        sent[1], blank,
        "a frame that asked for nothing is left alone"
    );
    assert!(h
        .port
        .capabilities()
        .offloads
        .contains(rpmd_pmd::port::Offloads::TX_CHECKSUM));
    assert!(
        h.model.violations().is_empty(),
        "{:?}",
        h.model.violations()
    );
}

/// Per-queue stop and start on the hardware driver: a stopped tx queue
/// takes nothing, a stopped rx queue hands out nothing while the device
/// still fills its ring, and the frames wait there for its start. A
/// handle dropped while its queue is stopped but the port runs leaves its
/// posted buffers to the port (the device may still write them) until the
/// port stops: nothing is freed early or lost.
#[test]
fn queues_stop_and_start_one_by_one_on_the_device() {
    let p = pool("mlx4-eth-qctl");
    let (_model, mut a, mut b) = cabled("qctl");
    a.configure(&conf(&p)).unwrap();
    b.configure(&conf(&p)).unwrap();
    let mut qa = a.start().unwrap();
    let mut qb = b.start().unwrap();
    let frames: Vec<Vec<u8>> = (0..4).map(|i| udp_frame(mac2(), 128, i)).collect();
    a.tx_queue_stop(0).unwrap();
    let mut pkts = Pkts::new();
    pkts.push(mbuf_of(&p, &frames[0])).unwrap();
    assert_eq!(qa.tx_burst(0, &mut pkts), 0, "a stopped tx queue");
    drop(pkts);
    a.tx_queue_start(0).unwrap();
    b.rx_queue_stop(0).unwrap();
    let mut pkts = Pkts::new();
    for f in &frames {
        pkts.push(mbuf_of(&p, f)).unwrap();
    }
    assert_eq!(qa.tx_burst(0, &mut pkts), 4);
    let mut got = Pkts::new();
    assert_eq!(qb.rx_burst(0, &mut got, 32), 0, "a stopped rx queue");
    b.rx_queue_start(0).unwrap();
    assert_eq!(
        qb.rx_burst(0, &mut got, 32),
        4,
        "the frames waited in the ring"
    );
    for (m, f) in got.iter().zip(&frames) {
        assert_eq!(m.data(), &f[..]);
    }
    drop(got);
    b.rx_queue_stop(0).unwrap();
    let posted = p.available();
    drop(qb);
    assert_eq!(p.available(), posted, "the device may still write them");
    b.stop().unwrap();
    a.stop().unwrap();
    drop(qa);
    assert_eq!(p.available(), 2048, "all back once the QPs are reset");
}
