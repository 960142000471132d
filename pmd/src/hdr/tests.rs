//! The views against frames etherparse builds (its checksums are the
//! reference), and against bytes that are not what they claim.
use super::tests_support::udp_frame;
use super::*;
use etherparse::PacketBuilder;

fn built(b: etherparse::PacketBuilderStep<etherparse::UdpHeader>, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    b.write(&mut out, payload).unwrap();
    out
}

#[test]
fn ipv4_udp_fields_and_checksums_match_etherparse() {
    let f = built(
        PacketBuilder::ethernet2([1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12])
            .ipv4([192, 168, 1, 1], [192, 168, 1, 2], 33)
            .udp(4000, 53),
        b"hello, checksum",
    );
    let eth = Ethernet::new_checked(&f[..]).unwrap();
    assert_eq!(eth.dst(), MacAddr([7, 8, 9, 10, 11, 12]));
    assert_eq!(eth.src().to_string(), "01:02:03:04:05:06");
    let ip = Ipv4::new_checked(eth.payload()).unwrap();
    assert_eq!(
        (ip.src(), ip.dst(), ip.ttl()),
        ([192, 168, 1, 1], [192, 168, 1, 2], 33)
    );
    assert!(ip.checksum_ok());
    let udp = Udp::new_checked(ip.payload()).unwrap();
    assert_eq!((udp.src_port(), udp.dst_port()), (4000, 53));
    assert_eq!(udp.payload(), b"hello, checksum");
    assert_eq!(udp.compute_checksum(ip.pseudo_sum()), udp.checksum());
    assert_eq!(
        PacketType::of(&f).0,
        PacketType::L2_ETHER | PacketType::L3_IPV4 | PacketType::L4_UDP
    );
}

#[test]
fn ipv6_tcp_checksum_matches_etherparse() {
    let mut f = Vec::new();
    PacketBuilder::ethernet2([1; 6], [2; 6])
        .ipv6([1; 16], [2; 16], 64)
        .tcp(1234, 80, 99, 4096)
        .syn()
        .write(&mut f, b"GET /")
        .unwrap();
    let eth = Ethernet::new_checked(&f[..]).unwrap();
    assert_eq!(eth.ethertype(), EtherType::IPV6);
    let ip = Ipv6::new_checked(eth.payload()).unwrap();
    assert_eq!(ip.next_header(), IpProto::TCP);
    let tcp = Tcp::new_checked(ip.payload()).unwrap();
    assert_eq!((tcp.src_port(), tcp.dst_port(), tcp.seq()), (1234, 80, 99));
    assert_eq!(tcp.flags() & 0x02, 0x02);
    assert_eq!(tcp.payload(), b"GET /");
    assert_eq!(tcp.compute_checksum(ip.pseudo_sum()), tcp.checksum());
    assert_eq!(PacketType::of(&f).to_string(), "L2_ETHER L3_IPV6 L4_TCP");
}

#[test]
fn setters_rewrite_and_checksums_refill() {
    let mut f = udp_frame(7);
    let mut eth = Ethernet::new_checked(&mut f[..]).unwrap();
    let (d, s) = (eth.dst(), eth.src());
    eth.swap_addrs();
    assert_eq!((eth.dst(), eth.src()), (s, d));
    let mut ip = Ipv4::new_checked(eth.payload_mut()).unwrap();
    ip.set_dst([10, 9, 8, 7]);
    assert!(!ip.checksum_ok());
    ip.fill_checksum();
    assert!(ip.checksum_ok());
    let pseudo = ip.pseudo_sum();
    let mut udp = Udp::new_checked(ip.payload_mut()).unwrap();
    udp.set_dst_port(9);
    udp.fill_checksum(pseudo);
    // etherparse agrees with what we stored.
    let p = etherparse::SlicedPacket::from_ethernet(&f).unwrap();
    let Some(etherparse::TransportSlice::Udp(u)) = p.transport else {
        panic!("not UDP")
    };
    let Some(etherparse::NetSlice::Ipv4(v4)) = p.net else {
        panic!("not IPv4")
    };
    let want = u
        .to_header()
        .calc_checksum_ipv4(&v4.header().to_header(), u.payload())
        .unwrap();
    assert_eq!(u.checksum(), want);
    assert_eq!(u.destination_port(), 9);
}

#[test]
fn padding_after_the_datagram_is_not_payload() {
    let f = udp_frame(53); // 14 + 28 bytes of datagram, padded to 60
    let eth = Ethernet::new_checked(&f[..]).unwrap();
    let ip = Ipv4::new_checked(eth.payload()).unwrap();
    assert_eq!(ip.payload().len(), 8);
    assert!(Udp::new_checked(ip.payload()).unwrap().is_empty());
}

#[test]
fn vlan_tags_are_walked_and_classified() {
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&[0x88, 0xa8, 0x00, 0x64, 0x81, 0x00, 0x20, 0x0a, 0x08, 0x06]);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&[0; 20]);
    let eth = Ethernet::new_checked(&f[..]).unwrap();
    let v = Vlan::new_checked(eth.payload()).unwrap();
    assert_eq!((v.vid(), v.ethertype()), (100, EtherType::VLAN));
    let (tags, t, rest) = eth.untagged().unwrap();
    assert_eq!((tags, t), (2, EtherType::ARP));
    let arp = Arp::new_checked(rest).unwrap();
    assert_eq!(arp.operation(), Arp::<&[u8]>::REQUEST);
    assert_eq!(PacketType::of(&f).0, PacketType::L2_ETHER_ARP);
}

#[test]
fn bytes_that_are_not_the_header_are_refused_with_the_reason() {
    let f = udp_frame(1);
    assert_eq!(
        Ethernet::new_checked(&f[..10]).unwrap_err(),
        HdrError::Truncated {
            what: Header::Ethernet,
            need: 14,
            have: 10
        }
    );
    let mut ip = f[14..].to_vec();
    ip[0] = 0x65;
    let e = Ipv4::new_checked(&ip[..]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "IPv4: version is 6, which no valid header has"
    );
    ip[0] = 0x44;
    assert!(matches!(
        Ipv4::new_checked(&ip[..]),
        Err(HdrError::Malformed {
            field: Field::HeaderLength,
            ..
        })
    ));
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&900u16.to_be_bytes()); // longer than the frame
    assert!(matches!(
        Ipv4::new_checked(&ip[..]),
        Err(HdrError::Truncated { need: 900, .. })
    ));
    let mut udp = f[34..42].to_vec();
    udp[4..6].copy_from_slice(&3u16.to_be_bytes());
    assert!(Udp::new_checked(&udp[..]).is_err());
    let mut tcp = [0u8; 20];
    tcp[12] = 0xf0; // 60-byte header in 20 bytes
    assert!(matches!(
        Tcp::new_checked(&tcp[..]),
        Err(HdrError::Truncated { need: 60, .. })
    ));
    assert!(Ipv6::new_checked(&[0x60; 39][..]).is_err());
    assert!(Arp::new_checked(&[0u8; 28][..]).is_err());
    assert_eq!(PacketType::of(&f[..13]).0, 0);
}

#[test]
fn every_cut_of_every_frame_parses_or_errs_without_panicking() {
    let f = udp_frame(5);
    for cut in 0..=f.len() {
        let _ = PacketType::of(&f[..cut]);
        if let Ok(ip) = Ipv4::new_checked(&f[14.min(cut)..cut]) {
            let _ = Udp::new_checked(ip.payload()).map(|u| u.compute_checksum(ip.pseudo_sum()));
        }
        let _ = Tcp::new_checked(&f[..cut]).map(|t| t.payload().len());
        let _ = Ipv6::new_checked(&f[..cut]).map(|i| i.pseudo_sum());
    }
}

/// xorshift64*, for the property tests below.
fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed >> 12;
    *seed ^= *seed << 25;
    *seed ^= *seed >> 27;
    seed.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// A UDP or TCP frame of random addresses, ports, TTL and payload, with
/// every checksum right (etherparse).
fn random_frame(seed: &mut u64, tcp: bool) -> Vec<u8> {
    let r = rng(seed);
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]).ipv4(
        (r as u32).to_be_bytes(),
        ((r >> 32) as u32).to_be_bytes(),
        (rng(seed) % 255) as u8 + 1,
    );
    let payload: Vec<u8> = (0..rng(seed) % 64).map(|_| rng(seed) as u8).collect();
    let (sp, dp) = (rng(seed) as u16, rng(seed) as u16);
    let mut f = Vec::new();
    if tcp {
        b.tcp(sp, dp, rng(seed) as u32, 1024)
            .write(&mut f, &payload)
            .unwrap();
    } else {
        b.udp(sp, dp).write(&mut f, &payload).unwrap();
    }
    f
}

#[test]
fn incremental_checksum_updates_equal_a_full_recompute() {
    let mut seed = 0x1234_5678_9abc_def1u64;
    for i in 0..2000 {
        let tcp = i % 2 == 1;
        let mut f = random_frame(&mut seed, tcp);
        let (a, b) = (
            (rng(&mut seed) as u32).to_be_bytes(),
            (rng(&mut seed) as u32).to_be_bytes(),
        );
        let (sp, dp) = (rng(&mut seed) as u16, rng(&mut seed) as u16);
        let (old_src, old_dst, ttl) = {
            let ip = Ipv4::new_checked(&f[14..]).unwrap();
            (ip.src(), ip.dst(), ip.ttl())
        };
        let mut ip = Ipv4::new_checked(&mut f[14..]).unwrap();
        match ip.decrement_ttl() {
            Some(t) => assert_eq!(t, ttl - 1),
            None => assert_eq!(ttl, 1),
        }
        ip.rewrite_src(a);
        ip.rewrite_dst(b);
        assert!(ip.checksum_ok(), "frame {i}: IPv4 header checksum");
        let pseudo = ip.pseudo_sum();
        let l4 = ip.payload_mut();
        if tcp {
            let mut t = Tcp::new_checked(l4).unwrap();
            t.rewrite_address(old_src, a);
            t.rewrite_address(old_dst, b);
            t.rewrite_src_port(sp);
            t.rewrite_dst_port(dp);
            assert_eq!(t.checksum(), t.compute_checksum(pseudo), "frame {i}: TCP");
        } else {
            let mut u = Udp::new_checked(l4).unwrap();
            u.rewrite_address(old_src, a);
            u.rewrite_address(old_dst, b);
            u.rewrite_src_port(sp);
            u.rewrite_dst_port(dp);
            assert_eq!(u.checksum(), u.compute_checksum(pseudo), "frame {i}: UDP");
        }
    }
}

#[test]
fn no_hop_left_changes_nothing_and_a_zero_udp_checksum_stays_zero() {
    let mut f = udp_frame(9);
    f[14 + 8] = 1;
    let mut ip = Ipv4::new_checked(&mut f[14..]).unwrap();
    ip.fill_checksum();
    let before = f.clone();
    assert_eq!(
        Ipv4::new_checked(&mut f[14..]).unwrap().decrement_ttl(),
        None
    );
    assert_eq!(f, before);
    f[40..42].copy_from_slice(&[0, 0]); // no UDP checksum
    let mut u = Udp::new_checked(&mut f[34..]).unwrap();
    u.rewrite_dst_port(53);
    assert_eq!((u.dst_port(), u.checksum()), (53, 0));
}

#[test]
fn mac_addresses_parse_as_they_print() {
    let m: MacAddr = "02:aB:cd:EF:00:9f".parse().unwrap();
    assert_eq!(m, MacAddr([0x02, 0xab, 0xcd, 0xef, 0x00, 0x9f]));
    assert_eq!(m.to_string().parse::<MacAddr>().unwrap(), m);
    assert_eq!("02-ab-cd-ef-00-9f".parse::<MacAddr>().unwrap(), m);
    for bad in [
        "",
        "02:ab:cd:ef:00",
        "02:ab:cd:ef:00:9f:01",
        "02:ab:cd:ef:00:+f",
        "02:ab:cd:ef:00:zz",
        "2:ab:cd:ef:00:9f",
        "02:ab-cd:ef:00:9f",
    ] {
        let e = bad.parse::<MacAddr>().unwrap_err().to_string();
        assert!(e.contains("is not a MAC address"), "{bad}: {e}");
    }
}

/// `checksum_ok`'s fast path (an option-less header summed whole as
/// 32-bit words) says what the exact comparison says, for every stored
/// value near the right one and for headers whose right checksum is 0
/// (stored as 0x0000, or as 0xffff, which only the exact path refuses).
#[test]
fn checksum_ok_agrees_with_the_exact_comparison() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..20_000u32 {
        let mut h = [0u8; 20];
        for b in h.iter_mut() {
            *b = next() as u8;
        }
        h[0] = 0x45;
        h[2..4].copy_from_slice(&20u16.to_be_bytes());
        let right = crate::net::ipv4_header_checksum(&h);
        let stored = match round % 4 {
            0 => right,
            1 => right.wrapping_add(1 + (next() % 3) as u16),
            2 => 0xffff,
            _ => next() as u16,
        };
        h[10..12].copy_from_slice(&stored.to_be_bytes());
        let ip = Ipv4::new_checked(&h[..]).unwrap();
        assert_eq!(ip.checksum_ok(), stored == right, "header {h:02x?}");
    }
    // A header whose right checksum is 0: 0x0000 passes, 0xffff does not.
    let mut h = [
        0x45u8, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let s = crate::net::ones_sum(&h, 0);
    let fix = 0xffffu32 - crate::net::fold(s) as u32;
    h[12..14].copy_from_slice(&(fix as u16).to_be_bytes());
    assert_eq!(crate::net::ipv4_header_checksum(&h), 0);
    assert!(Ipv4::new_checked(&h[..]).unwrap().checksum_ok());
    h[10..12].copy_from_slice(&[0xff, 0xff]);
    assert!(!Ipv4::new_checked(&h[..]).unwrap().checksum_ok());
}

/// `decrement_ttl`'s checksum is RFC 1624's update of the TTL word, for
/// every TTL and stored checksums across the range, and a right header
/// stays right.
#[test]
fn decrement_ttl_is_the_rfc_1624_update() {
    for ttl in 2..=255u8 {
        for (k, stored) in [0u16, 1, 0x00ff, 0x0100, 0x7fff, 0xfeff, 0xfffe, 0xffff]
            .into_iter()
            .enumerate()
        {
            let proto = (k as u8).wrapping_mul(37);
            let mut h = [
                0x45u8, 0, 0, 20, 0, 0, 0, 0, ttl, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
            ];
            h[10..12].copy_from_slice(&stored.to_be_bytes());
            let want = crate::net::checksum_update(stored, &[ttl, proto], &[ttl - 1, proto]);
            let mut ip = Ipv4::new_checked(&mut h[..]).unwrap();
            assert_eq!(ip.decrement_ttl(), Some(ttl - 1));
            assert_eq!(
                (ip.ttl(), ip.checksum()),
                (ttl - 1, want),
                "ttl {ttl} checksum {stored:#06x}"
            );
        }
        let mut h = [
            0x45u8, 0, 0, 20, 0, 0, 0, 0, ttl, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        let c = crate::net::ipv4_header_checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        let mut ip = Ipv4::new_checked(&mut h[..]).unwrap();
        ip.decrement_ttl();
        assert!(ip.checksum_ok(), "ttl {ttl}");
    }
}
