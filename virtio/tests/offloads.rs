//! Checksum offloads (VIRTIO_NET_F_CSUM / GUEST_CSUM) against DPDK
//! testpmd's `net_vhost`, which completes partial checksums itself when
//! the application behind it did not ask for them (as testpmd does not):
//! so a frame we send with a checksum request comes back with a full
//! checksum only if our header carried the request. Skipped, with a
//! message, where dpdk-testpmd is missing or we are not root.
mod common;

use common::*;
use rpmd_pmd::mbuf::{RX_L4_CKSUM_MASK, RX_L4_CKSUM_NONE, TX_IP_CKSUM, TX_TCP_CKSUM, TX_UDP_CKSUM};
use rpmd_pmd::net::{fold, ones_sum, pseudo_header_sum};
use rpmd_pmd::port::{Offloads, Pkts};
use rpmd_pmd::PortConfig;
use std::time::{Duration, Instant};

/// A started port on `t` with `offloads`, on a backend that offers both
/// checksum features.
fn open(t: &Testpmd, offloads: Offloads) -> Started {
    let conf = PortConfig {
        offloads,
        ..PortConfig::default()
    };
    let r = port_config(t, "", conf);
    let caps = r.0.capabilities().offloads;
    assert!(
        caps.contains(Offloads::TX_CHECKSUM | Offloads::RX_CHECKSUM),
        "testpmd's vhost offers CSUM and GUEST_CSUM; capabilities say {caps}"
    );
    r
}

/// Receives until `n` frames are in or 5 s pass.
fn receive(q: &mut rpmd_pmd::Queues, n: usize) -> Vec<rpmd_pmd::Mbuf> {
    let mut inb = Pkts::new();
    let mut got = Vec::new();
    let start = Instant::now();
    while got.len() < n && start.elapsed() < Duration::from_secs(5) {
        q.rx[0].rx_burst(&mut inb, 32);
        while let Some(m) = inb.pop() {
            got.push(m);
        }
    }
    got
}

/// Frames sent with TX_UDP_CKSUM | TX_IP_CKSUM (both checksum fields
/// holding only what DPDK's convention puts there) come back through
/// testpmd io with both checksums right; the same frame without the
/// request comes back as sent; a request the frame cannot carry is a
/// counted drop and its mbuf returns to the pool.
#[test]
fn checksum_requests_are_completed_by_the_backend() {
    let Some(t) = testpmd("csumtx") else { return };
    let (mut p, mut q, pool) = open(&t, Offloads::TX_CHECKSUM);
    let neg = xstat(p.as_ref(), "negotiated_features");
    assert_ne!(neg & 1, 0, "CSUM (bit 0) not negotiated: {neg:#x}");
    assert_eq!(neg & 2, 0, "GUEST_CSUM negotiated unasked: {neg:#x}");
    const N: u32 = 64;
    let mut out = Pkts::new();
    for tag in 0..N {
        let f = udp_frame(tag, 18 + tag as usize * 23);
        let mut m = pool.get().unwrap();
        m.append(f.len()).unwrap().copy_from_slice(&f);
        let ph = pseudo_header_sum(&f[14..34]).unwrap();
        m.data_mut()[40..42].copy_from_slice(&ph.to_be_bytes());
        if tag != 7 {
            m.set_tx_header_lens(14, 20);
            m.set_ol_flags(TX_UDP_CKSUM | TX_IP_CKSUM);
        }
        out.push(m).unwrap();
    }
    // A TCP request on a frame too short for a TCP header.
    let mut bad = pool.get().unwrap();
    let f = udp_frame(999, 4);
    bad.append(f.len()).unwrap().copy_from_slice(&f);
    bad.set_tx_header_lens(14, 20);
    bad.set_ol_flags(TX_TCP_CKSUM);
    out.push(bad).unwrap();
    let before = p.stats();
    while !out.is_empty() {
        q.tx[0].tx_burst(&mut out);
    }
    assert_eq!(p.stats().oerrors - before.oerrors, 1, "the bad request");
    let got = receive(&mut q, N as usize);
    assert_eq!(got.len(), N as usize);
    for m in &got {
        let tag = tag_of(m.data());
        let (ip_ok, udp_ok) = checksums_ok(m.data());
        if tag == 7 {
            assert!(!ip_ok && !udp_ok, "frame 7 asked for nothing");
            continue;
        }
        assert!(ip_ok && udp_ok, "frame {tag}: ip {ip_ok} udp {udp_ok}");
        // Everything but the checksums is as sent.
        let mut want = udp_frame(tag, 18 + tag as usize * 23);
        want[24..26].copy_from_slice(&m.data()[24..26]);
        want[40..42].copy_from_slice(&m.data()[40..42]);
        assert_eq!(m.data(), &want[..], "frame {tag}");
    }
    drop(got);
    p.stop().unwrap();
    drop(q);
    assert_eq!(pool.available(), pool.size(), "every mbuf back");
}

/// testpmd's csum engine asks its vhost port to checksum UDP in hardware.
/// With RX_CHECKSUM (GUEST_CSUM negotiated) the backend hands us partial
/// checksums marked NEEDS_CSUM: the mbufs say RX_L4_CKSUM_NONE, and
/// completing the sum in software gives the checksum the backend computes
/// itself for a port without GUEST_CSUM.
#[test]
fn partial_checksums_arrive_flagged_with_guest_csum() {
    let Some(t) = testpmd_cmds(
        "csumrx",
        "port stop 0\ncsum set udp hw 0\ncsum set ip sw 0\nport start 0\nset fwd csum\nstart",
    ) else {
        return;
    };
    const N: u32 = 32;
    let mut full = std::collections::HashMap::new();
    for rx_csum in [false, true] {
        // testpmd's commands take a moment, and each port reconnects.
        std::thread::sleep(Duration::from_millis(500));
        let offl = if rx_csum {
            Offloads::RX_CHECKSUM
        } else {
            Offloads::NONE
        };
        let (mut p, mut q, pool) = open(&t, offl);
        let mut out = Pkts::new();
        for tag in 0..N {
            let mut f = udp_frame(tag, 18 + tag as usize * 31);
            // Not zero: testpmd leaves a zero UDP checksum alone.
            f[40..42].copy_from_slice(&[0xde, 0xad]);
            let mut m = pool.get().unwrap();
            m.append(f.len()).unwrap().copy_from_slice(&f);
            out.push(m).unwrap();
        }
        while !out.is_empty() {
            q.tx[0].tx_burst(&mut out);
        }
        let got = receive(&mut q, N as usize);
        assert_eq!(got.len(), N as usize, "rx_csum {rx_csum}");
        for mut m in got {
            let tag = tag_of(m.data());
            let flags = m.ol_flags() & RX_L4_CKSUM_MASK;
            if !rx_csum {
                assert_eq!(flags, 0, "frame {tag}: flags without GUEST_CSUM");
                assert_eq!(checksums_ok(m.data()), (true, true), "frame {tag}");
                full.insert(tag, [m.data()[40], m.data()[41]]);
                continue;
            }
            assert_eq!(flags, RX_L4_CKSUM_NONE, "frame {tag}");
            assert!(!checksums_ok(m.data()).1, "frame {tag}: already full");
            // Complete it: the field holds the pseudo-header sum.
            let d = m.data_mut();
            let c = !fold(ones_sum(&d[34..], 0));
            d[40..42].copy_from_slice(&c.to_be_bytes());
            assert_eq!(checksums_ok(d), (true, true), "frame {tag}");
            assert_eq!([d[40], d[41]], full[&tag], "frame {tag}");
        }
        p.stop().unwrap();
        drop(q);
        assert_eq!(pool.available(), pool.size(), "every mbuf back");
    }
}
