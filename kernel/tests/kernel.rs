//! Each kernel-attached port against the Linux stack over veth pairs (and
//! a TAP) in network namespaces this test makes and removes: ARP and ping
//! answered from rpmd's side, UDP payloads from a kernel socket echoed
//! back byte for byte, counters that agree with the kernel's, several
//! queues, and the errors a user meets.
mod common;
use common::*;
use rpmd_pmd::port::Pkts;
use std::net::UdpSocket;
use std::time::Duration;

/// Ping and UDP from namespace `ns` (address `.1`) to rpmd (`.2`) through
/// `dev`, whose kernel side is `peer` in `ns`; then the counters.
fn exchange(dev: &str, ns: &str, peer: &str, net: u8, queues: u16) {
    let pool = pool(&format!("x{net}"), 4096);
    let (port, mut q) = start(dev, &pool, queues);
    let mut resp = Responder::new([10, 77, net, 2]);
    // Take in whatever a stack sent of its own accord around the start
    // (a frame sent before the kernel's counters are first read but taken
    // after would be one too many on rpmd's side), then read both sides'
    // counters as the baseline.
    serve(&mut q, &pool, &mut resp, Duration::from_millis(300), |_| {
        false
    });
    let (krx0, ktx0) = kernel_counts(ns, peer);
    let st0 = port.stats();
    // Ping from the namespace's stack: ARP first, then echo requests.
    let pns = ns.to_string();
    let ping = std::thread::spawn(move || {
        sh_ok(&format!(
            "ip netns exec {pns} ping -c 3 -i 0.2 -W 2 10.77.{net}.2"
        ))
    });
    serve(&mut q, &pool, &mut resp, Duration::from_secs(8), |_| {
        ping.is_finished()
    });
    assert!(
        ping.join().unwrap(),
        "{dev}: ping through rpmd failed (answered {})",
        resp.answered
    );
    // UDP from a kernel socket in the namespace, many source ports (to
    // spread over queues), each payload echoed back.
    let n = 64usize;
    let sns = ns.to_string();
    let client = std::thread::spawn(move || {
        in_netns(&sns, move || {
            let mut ok = 0;
            for i in 0..n {
                let s = UdpSocket::bind(format!("10.77.{net}.1:0")).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                let payload: Vec<u8> = (0..(100 + i * 13)).map(|b| (b * 7 + i) as u8).collect();
                s.send_to(&payload, format!("10.77.{net}.2:9000")).unwrap();
                let mut buf = [0u8; 2048];
                match s.recv_from(&mut buf) {
                    Ok((len, _)) => {
                        assert_eq!(&buf[..len], &payload[..], "echo {i} differs");
                        ok += 1;
                    }
                    Err(_) => break,
                }
            }
            ok
        })
    });
    serve(&mut q, &pool, &mut resp, Duration::from_secs(20), |_| {
        client.is_finished()
    });
    assert_eq!(client.join().unwrap(), n, "{dev}: UDP echoes");
    assert_eq!(resp.udp_seen.len(), n);
    // Quiet, then the counters of both sides agree.
    serve(&mut q, &pool, &mut resp, Duration::from_millis(500), |_| {
        false
    });
    let (krx, ktx) = kernel_counts(ns, peer);
    let st = port.stats();
    assert_eq!(
        st.ipackets - st0.ipackets,
        ktx - ktx0,
        "{dev}: rpmd rx vs kernel tx"
    );
    assert_eq!(
        st.opackets - st0.opackets,
        krx - krx0,
        "{dev}: rpmd tx vs kernel rx"
    );
    if queues > 1 {
        // Every queue carried frames, both ways (the flows spread over
        // the rx queues, and each reply leaves by its request's queue).
        let x = port.xstats();
        for dir in ["rx", "tx"] {
            let per: Vec<u64> = (0..queues)
                .map(|q| {
                    let name = format!("{dir}_q{q}_packets");
                    x.iter().find(|x| x.name == name).map_or(0, |x| x.value)
                })
                .collect();
            eprintln!("{dev}: per-queue {dir} {per:?}");
            assert!(
                per.iter().all(|&n| n > 0),
                "{dev}: a {dir} queue idle: {per:?}"
            );
        }
    }
    drop(q);
    drop(port);
    assert_eq!(pool.available(), pool.size(), "{dev}: every mbuf back");
}

fn veth_case(test: &str, kind: &str, opts: &str, queues: u32) {
    if !lab_available(test) {
        return;
    }
    let mut lab = Lab::new();
    let ns = lab.netns("a");
    let net = (lab.tag.parse::<u64>().unwrap_or(0) % 200 + 20) as u8;
    let root = lab.veth("rv", &ns, "eth0", &format!("10.77.{net}.1/24"), queues);
    exchange(
        &format!("{kind}:{root}{opts}"),
        &ns,
        "eth0",
        net,
        queues as u16,
    );
    assert!(
        !sh(&format!("ip link show {root}")).contains("prog/xdp"),
        "{kind}: XDP program left attached"
    );
}

#[test]
fn af_packet_talks_to_the_kernel() {
    veth_case("af_packet_talks_to_the_kernel", "af_packet", "", 1);
}

#[test]
fn af_packet_qdisc_bypass_and_two_queues() {
    veth_case(
        "af_packet_qdisc_bypass_and_two_queues",
        "af_packet",
        ",qdisc_bypass=1",
        2,
    );
}

#[test]
fn af_packet_v3_talks_to_the_kernel() {
    veth_case(
        "af_packet_v3_talks_to_the_kernel",
        "af_packet",
        ",version=3",
        1,
    );
}

#[test]
fn af_xdp_native_talks_to_the_kernel() {
    veth_case(
        "af_xdp_native_talks_to_the_kernel",
        "af_xdp",
        ",mode=native",
        1,
    );
}

#[test]
fn af_xdp_skb_mode_talks_to_the_kernel() {
    veth_case(
        "af_xdp_skb_mode_talks_to_the_kernel",
        "af_xdp",
        ",mode=skb,need_wakeup=0",
        1,
    );
}

#[test]
fn af_xdp_two_queues_with_busy_polling() {
    veth_case(
        "af_xdp_two_queues_with_busy_polling",
        "af_xdp",
        ",queues=2,busy_poll_us=20,busy_budget=32",
        2,
    );
}

#[test]
fn tap_talks_to_the_kernel() {
    if !lab_available("tap_talks_to_the_kernel") {
        return;
    }
    let mut lab = Lab::new();
    let ns = lab.netns("t");
    let net = (lab.tag.parse::<u64>().unwrap_or(0) % 200 + 20) as u8;
    let name = format!("rt{}", lab.tag);
    let pool = pool("tap", 4096);
    let (port, mut q) = start(&format!("tap:{name}"), &pool, 1);
    assert!(port.link().up, "a started TAP is up");
    // Hand the interface to the namespace's stack (the fd keeps working).
    sh(&format!("ip link set {name} netns {ns} && ip -n {ns} addr add 10.77.{net}.1/24 dev {name} && ip -n {ns} link set {name} up"));
    let mut resp = Responder::new([10, 77, net, 2]);
    let pns = ns.clone();
    let ping = std::thread::spawn(move || {
        sh_ok(&format!(
            "ip netns exec {pns} ping -c 3 -i 0.2 -W 2 10.77.{net}.2"
        ))
    });
    serve(&mut q, &pool, &mut resp, Duration::from_secs(8), |_| {
        ping.is_finished()
    });
    assert!(ping.join().unwrap(), "tap: ping through rpmd failed");
    let (krx, _) = kernel_counts(&ns, &name);
    assert!(krx >= 4, "the namespace's stack received rpmd's replies");
    drop(q);
    drop(port);
    assert_eq!(pool.available(), pool.size());
    assert!(
        !sh_ok(&format!("ip -n {ns} link show {name}")),
        "the TAP goes with its port"
    );
}

#[test]
fn tap_two_queues_carry_frames_both_ways() {
    if !lab_available("tap_two_queues_carry_frames_both_ways") {
        return;
    }
    let lab = Lab::new();
    let name = format!("rq{}", lab.tag);
    let pool = pool("tapq", 4096);
    let (port, mut q) = start(&format!("tap:{name},queues=2"), &pool, 2);
    assert_eq!((q.rx.len(), q.tx.len()), (2, 2));
    // Frames written on either queue reach the kernel's interface.
    for tx in q.tx.iter_mut() {
        let mut b = Pkts::new();
        for _ in 0..10 {
            let mut m = pool.get().unwrap();
            let f = m.append(60).unwrap();
            f.fill(0);
            f[..6].copy_from_slice(&[0xff; 6]);
            f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
            f[12..14].copy_from_slice(&[0x88, 0xb5]);
            b.push(m).ok();
        }
        while !b.is_empty() {
            tx.tx_burst(&mut b);
        }
    }
    let rx = sh(&format!("cat /sys/class/net/{name}/statistics/rx_packets"))
        .trim()
        .parse::<u64>()
        .unwrap();
    assert_eq!(rx, 20);
    assert_eq!(port.stats().opackets, 20);
    // And the kernel's frames reach both queues: UDP flows routed out of
    // the TAP (to a neighbour with a fixed address), which the TAP
    // spreads over its queues by flow.
    let net = (lab.tag.parse::<u64>().unwrap_or(0) % 200 + 20) as u8;
    sh(&format!(
        "ip addr add 10.98.{net}.1/24 dev {name} && ip link set {name} up && \
         ip neigh add 10.98.{net}.2 lladdr 02:00:00:00:00:09 dev {name}"
    ));
    for i in 0..64u16 {
        let s = std::net::UdpSocket::bind(format!("10.98.{net}.1:{}", 20000 + i)).unwrap();
        s.send_to(&[i as u8; 32], format!("10.98.{net}.2:9"))
            .unwrap();
    }
    let mut per = [0usize; 2];
    let t = std::time::Instant::now();
    while per.iter().sum::<usize>() < 64 && t.elapsed() < Duration::from_secs(3) {
        for (i, rx) in q.rx.iter_mut().enumerate() {
            let mut b = Pkts::new();
            rx.rx_burst(&mut b, 32);
            per[i] += b.iter().filter(|m| m.data().len() == 74).count();
        }
    }
    assert!(per.iter().all(|&n| n > 0), "a TAP rx queue idle: {per:?}");
    drop(q);
    drop(port);
    assert_eq!(pool.available(), pool.size());
}

/// The control path answers from the kernel's interface: promiscuous and
/// all-multicast are the interface flags, MTU and MAC are the kernel's,
/// and the kernel's own counters are xstats.
#[test]
fn control_path_is_the_kernel_interface() {
    if !lab_available("control_path_is_the_kernel_interface") {
        return;
    }
    let mut lab = Lab::new();
    let ns = lab.netns("c");
    let root = lab.veth("rc", &ns, "eth0", "10.76.0.1/24", 1);
    for kind in ["af_packet", "af_xdp"] {
        let pool = pool(&format!("ctl-{kind}"), 2048);
        let (mut port, q) = start(&format!("{kind}:{root}"), &pool, 1);
        let flags = || sh(&format!("ip link show {root}"));
        port.set_promiscuous(true).unwrap();
        assert!(port.promiscuous() && flags().contains("PROMISC"), "{kind}");
        port.set_promiscuous(false).unwrap();
        assert!(
            !port.promiscuous() && !flags().contains("PROMISC"),
            "{kind}"
        );
        port.set_allmulticast(true).unwrap();
        assert!(
            port.allmulticast() && flags().contains("ALLMULTI"),
            "{kind}"
        );
        port.set_allmulticast(false).unwrap();
        let mac = sh(&format!("cat /sys/class/net/{root}/address"));
        assert_eq!(port.mac_addr().to_string(), mac.trim(), "{kind}");
        assert!(port.link().up, "{kind}");
        assert_eq!(port.mtu(), 1500);
        assert!(
            port.set_mtu(1400).is_err(),
            "{kind}: MTU change while started"
        );
        if kind == "af_xdp" {
            // A second port on the same queue: refused, the first unharmed.
            let mut reg = rpmd_pmd::Registry::new();
            rpmd_kernel::register(&mut reg);
            let mut p2 = reg.open(&format!("af_xdp:{root}")).unwrap();
            let conf = rpmd_pmd::PortConfig {
                rx_pool: Some(pool.clone()),
                ..Default::default()
            };
            p2.configure(&conf).unwrap();
            let e = p2.start().expect_err("the queue is taken").to_string();
            assert!(e.contains("another AF_XDP socket holds that queue"), "{e}");
            drop(p2);
            assert!(
                sh(&format!("ip link show {root}")).contains("prog/xdp"),
                "the first port's program stays"
            );
        }
        let names: Vec<String> = port.xstats().into_iter().map(|x| x.name).collect();
        let want = if kind == "af_xdp" {
            "xdp_q0_rx_dropped"
        } else {
            "kernel_packet_drops"
        };
        assert!(
            names.iter().any(|n| n == want) && names.iter().any(|n| n == "kernel_rx_dropped"),
            "{kind}: {names:?}"
        );
        drop(q);
        port.stop().unwrap();
        assert!(
            !port.link().up,
            "{kind}: a stopped port reports its link down"
        );
        port.set_mtu(1400).unwrap();
        assert_eq!(sh(&format!("cat /sys/class/net/{root}/mtu")).trim(), "1400");
        port.set_mtu(1500).unwrap();
        // A second start on the same port (its first queues gone).
        let q = port
            .start()
            .unwrap_or_else(|e| panic!("{kind}: restart: {e}"));
        assert!(port.link().up, "{kind}: up again");
        // An app's promiscuous mode does not outlive its port.
        port.set_promiscuous(true).unwrap();
        drop(q);
        drop(port);
        assert!(!flags().contains("PROMISC"), "{kind}: mode put back");
        assert_eq!(pool.available(), pool.size(), "{kind}");
    }
    // Zero-copy where the driver has none (veth): an error that says so.
    let pool = pool("zc", 2048);
    let mut reg = rpmd_pmd::Registry::new();
    rpmd_kernel::register(&mut reg);
    let mut p = reg.open(&format!("af_xdp:{root},zerocopy=1")).unwrap();
    let conf = rpmd_pmd::PortConfig {
        rx_pool: Some(pool.clone()),
        ..Default::default()
    };
    p.configure(&conf).unwrap();
    let e = p.start().expect_err("zero-copy on veth").to_string();
    assert!(e.contains("zero-copy") && e.contains("zerocopy=0"), "{e}");
    drop(p);
    assert!(
        !sh(&format!("ip link show {root}")).contains("prog/xdp"),
        "nothing left attached"
    );
    assert_eq!(pool.available(), pool.size());
}

/// Link events from the kernel's own notices: the far end of a veth
/// going down takes the port's carrier away and raises its events, and
/// coming back raises them again; the port's own stop and start do too.
#[test]
fn link_events_follow_the_kernel_interface() {
    if !lab_available("link_events_follow_the_kernel_interface") {
        return;
    }
    let mut lab = Lab::new();
    let ns = lab.netns("l");
    let root = lab.veth("rl", &ns, "eth0", "10.75.0.1/24", 1);
    for kind in ["af_packet", "af_xdp"] {
        let pool = pool(&format!("lsc-{kind}"), 2048);
        let (mut port, q) = start(&format!("{kind}:{root}"), &pool, 1);
        let ev = port.link_events().unwrap();
        assert!(port.link().up, "{kind}");
        // Whatever the start and the veth's set-up left pending.
        while ev.wait(Duration::from_millis(200)).unwrap() {}
        let wait_for = |up: bool, what: &str| {
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            let mut raised = false;
            while std::time::Instant::now() < deadline {
                raised |= ev.wait(Duration::from_millis(100)).unwrap();
                if raised && port.link().up == up {
                    return;
                }
            }
            panic!(
                "{kind}: {what}: raised {raised}, link up {}",
                port.link().up
            );
        };
        sh(&format!("ip -n {ns} link set eth0 down"));
        wait_for(false, "far end down");
        sh(&format!("ip -n {ns} link set eth0 up"));
        wait_for(true, "far end up");
        drop(q);
        port.stop().unwrap();
        assert!(
            ev.wait(Duration::from_secs(1)).unwrap(),
            "{kind}: stop raises"
        );
        assert!(!port.link().up);
        drop(port);
        assert_eq!(pool.available(), pool.size(), "{kind}");
    }
}
