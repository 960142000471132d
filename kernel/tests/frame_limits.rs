//! Frames longer than an interface takes or a ring slot holds, on
//! af_packet over a veth pair: a frame past the egress MTU is dropped and
//! counted without holding back the frames after it (the kernel used to
//! stop its TX ring at it); a frame longer than the RX slot (the MTU
//! raised under a running port) is dropped and counted, never passed on
//! cut; and the kernel's own drops reach `imissed` (af_packet, TAP).
mod common;
use common::*;
use rpmd_pmd::port::Pkts;
use std::time::{Duration, Instant};

/// A frame of `len` bytes from `src` to broadcast, IPv4 ethertype.
fn frame(len: usize, tag: u8) -> Vec<u8> {
    let mut f = vec![tag; len];
    f[..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, tag]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f
}

/// `n` UDP datagrams from namespace `ns` to `ip` (routed to rpmd's side),
/// as fast as the socket takes them.
fn flood(ns: &str, ip: &str, n: u32) {
    let ip = ip.to_string();
    in_netns(ns, move || {
        let s = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        for i in 0..n {
            let _ = s.send_to(&i.to_be_bytes(), format!("{ip}:9"));
        }
    });
}

fn lab(test: &str) -> Option<(Lab, String, String)> {
    if !lab_available(test) {
        return None;
    }
    let mut lab = Lab::new();
    let ns = lab.netns("a");
    let net = (lab.tag.parse::<u64>().unwrap_or(0) % 200 + 20) as u8;
    let root = lab.veth("fl", &ns, "eth0", &format!("10.78.{net}.1/24"), 1);
    Some((lab, ns, root))
}

#[test]
fn an_oversized_frame_is_dropped_and_counted_and_the_rest_still_leave() {
    let Some((_lab, ns, root)) = lab("an_oversized_frame_is_dropped") else {
        return;
    };
    let pool = pool("fl-tx", 1024);
    let (port, mut q) = start(&format!("af_packet:{root}"), &pool, 1);
    let (rx0, _) = kernel_counts(&ns, "eth0");
    let mut p = Pkts::new();
    for (i, len) in [60usize, 2000, 60, 1514, 1515]
        .into_iter()
        .chain(std::iter::repeat_n(100, 40))
        .enumerate()
    {
        let mut m = pool.get().unwrap();
        m.append(len).unwrap().copy_from_slice(&frame(len, i as u8));
        p.push(m).unwrap();
        if p.len() == 32 {
            while !p.is_empty() {
                q.tx_burst(0, &mut p);
            }
        }
    }
    while !p.is_empty() {
        q.tx_burst(0, &mut p);
    }
    let want = 43; // all but the 2000- and 1515-byte frames
    let t = Instant::now();
    while kernel_counts(&ns, "eth0").0 - rx0 < want {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the peer got {} of {want}: frames after the long one held back",
            kernel_counts(&ns, "eth0").0 - rx0
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let s = port.stats();
    assert_eq!((s.opackets, s.oerrors), (want, 2));
    drop(q);
    drop(port);
    assert_eq!(pool.available(), pool.size());
}

#[test]
fn a_frame_longer_than_the_slot_is_dropped_and_counted_not_cut() {
    let Some((_lab, ns, root)) = lab("a_frame_longer_than_the_slot") else {
        return;
    };
    let pool = pool("fl-rx", 1024);
    let (port, mut q) = start(&format!("af_packet:{root}"), &pool, 1);
    // Raised under the running port: its slots hold 1500-byte frames.
    sh_ok(&format!("ip link set dev {root} mtu 9000"));
    sh_ok(&format!("ip netns exec {ns} ip link set dev eth0 mtu 9000"));
    let mac = sh(&format!("cat /sys/class/net/{root}/address"));
    let peer_ip = "10.78.250.2";
    sh_ok(&format!(
        "ip netns exec {ns} ip route add {peer_ip}/32 dev eth0 && \
         ip netns exec {ns} ip neigh add {peer_ip} lladdr {} dev eth0",
        mac.trim()
    ));
    // Three 3000- and three 8000-byte echo requests, then small ones.
    for size in [2958, 7958, 100] {
        // Unanswered (nobody has the address): sent is all that counts.
        let _ = sh_ok(&format!(
            "ip netns exec {ns} ping -c 3 -i 0.05 -W 0.1 -s {size} {peer_ip}"
        ));
    }
    let mut p = Pkts::new();
    let (mut small, mut long) = (0, 0);
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(500) || small < 3 {
        assert!(t.elapsed() < Duration::from_secs(5), "{small} small frames");
        q.rx_burst(0, &mut p, 32);
        for m in p.iter() {
            match m.pkt_len() {
                n if n > 1518 => long += 1,
                142 => small += 1,
                _ => {}
            }
        }
        p.clear();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(long, 0, "no frame longer than a slot is passed on");
    let s = port.stats();
    assert!(s.ierrors >= 6, "{s:?}");
    drop(q);
    drop(port);
    assert_eq!(pool.available(), pool.size());
}

/// Frames the kernel drops because the RX ring is full are `imissed`.
#[test]
fn the_kernels_ring_drops_are_imissed() {
    let Some((_lab, ns, root)) = lab("the_kernels_ring_drops_are_imissed") else {
        return;
    };
    let pool = pool("fl-miss", 1024);
    let (port, q) = start(&format!("af_packet:{root},frames=64"), &pool, 1);
    let mac = sh(&format!("cat /sys/class/net/{root}/address"));
    let peer_ip = "10.78.251.2";
    sh_ok(&format!(
        "ip netns exec {ns} ip route add {peer_ip}/32 dev eth0 && \
         ip netns exec {ns} ip neigh add {peer_ip} lladdr {} dev eth0",
        mac.trim()
    ));
    // Nobody reads the ring: past its 64 slots, the kernel drops.
    flood(&ns, peer_ip, 300);
    let s = port.stats();
    assert!(s.imissed >= 200, "{s:?}");
    drop(q);
    drop(port);
}

/// Frames the kernel drops on their way into a TAP nobody reads are
/// `imissed` (the interface's tx_dropped).
#[test]
fn the_kernels_drops_into_a_tap_are_imissed() {
    if !lab_available("the_kernels_drops_into_a_tap_are_imissed") {
        return;
    }
    let lab = Lab::new();
    let name = format!("rm{}", lab.tag);
    let pool = pool("fl-tap", 1024);
    let (port, q) = start(&format!("tap:{name},queues=1"), &pool, 1);
    let net = (lab.tag.parse::<u64>().unwrap_or(0) % 200 + 20) as u8;
    sh(&format!(
        "ip addr add 10.97.{net}.1/24 dev {name} && ip link set {name} up && \
         ip neigh add 10.97.{net}.2 lladdr 02:00:00:00:00:09 dev {name}"
    ));
    let s = std::net::UdpSocket::bind(format!("10.97.{net}.1:0")).unwrap();
    for i in 0..3000u32 {
        let _ = s.send_to(&i.to_be_bytes(), format!("10.97.{net}.2:9"));
    }
    let st = port.stats();
    assert!(st.imissed >= 1000, "{st:?}");
    drop(q);
    drop(port);
}

/// AF_XDP: frames the kernel cannot deliver because the port's rings are
/// full (nobody reads) are `imissed` (rx_dropped and rx_ring_full).
#[test]
fn af_xdps_drops_are_imissed() {
    let Some((_lab, ns, root)) = lab("af_xdps_drops_are_imissed") else {
        return;
    };
    let pool = pool("fl-xdp", 1024);
    let (port, q) = start(&format!("af_xdp:{root},mode=skb"), &pool, 1);
    let mac = sh(&format!("cat /sys/class/net/{root}/address"));
    let peer_ip = "10.78.252.2";
    sh_ok(&format!(
        "ip netns exec {ns} ip route add {peer_ip}/32 dev eth0 && \
         ip netns exec {ns} ip neigh add {peer_ip} lladdr {} dev eth0",
        mac.trim()
    ));
    flood(&ns, peer_ip, 3000);
    let s = port.stats();
    assert!(s.imissed >= 1000, "{s:?}");
    drop(q);
    drop(port);
}
