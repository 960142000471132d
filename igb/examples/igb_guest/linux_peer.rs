//! rpmd's igb port against Linux's igb driver and network stack on the
//! other 82576 (`--linux-peer BDF,MAC`): guest-test.sh has bound it to
//! `igb` with 10.9.0.2/24, and 10.9.1.2/24 on VLAN 100 over it.
//!
//! What Linux answers is what it computed from what rpmd sent, so every
//! answer checks rpmd's frames as Linux's stack parsed them: an ARP
//! reply, ICMP echo replies (payload, identifier and sequence back
//! unchanged, checksums valid), a port-unreachable for a UDP datagram
//! whose checksums rpmd's device filled (Linux drops one with a wrong
//! UDP checksum silently, so the answer proves the checksum right),
//! silence for one whose checksum is wrong, and echo replies over VLAN
//! 100, the tag inserted by rpmd's device and stripped by it on return.
use rpmd_pmd::mbuf::{RX_IP_CKSUM_GOOD, RX_VLAN_STRIPPED, TX_IP_CKSUM, TX_UDP_CKSUM, TX_VLAN};
use rpmd_pmd::net::{fold, ipv4_header_checksum, ones_sum, pseudo_header_sum};
use rpmd_pmd::port::{MacAddr, Offloads};
use rpmd_pmd::{Mbuf, Mempool, MempoolConfig, Pkts, Port, PortConfig, Queues, Registry};
use std::time::{Duration, Instant};

type R<T> = Result<T, String>;

const OURS: [u8; 4] = [10, 9, 0, 1];
const PEER: [u8; 4] = [10, 9, 0, 2];
const OURS_VLAN: [u8; 4] = [10, 9, 1, 1];
const PEER_VLAN: [u8; 4] = [10, 9, 1, 2];

/// rpmd's port facing a peer on the other 82576 (Linux's stack, or
/// DPDK's testpmd).
pub struct Peer {
    _reg: Registry,
    pool: Mempool,
    port: Box<dyn Port>,
    q: Queues,
    /// The port's MAC address, and the peer's.
    pub mac: MacAddr,
    /// See [`mac`](Self::mac).
    pub peer: MacAddr,
}

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

impl Peer {
    /// Opens `pci:bdf` facing Linux at `peer`.
    pub fn open(bdf: &str, peer: MacAddr) -> R<Peer> {
        let mut reg = Registry::new();
        rpmd_igb::register(&mut reg);
        let pool = Mempool::new(&MempoolConfig::new("igb-linux", 2048)).map_err(s)?;
        reg.domain().register_pool(&pool).map_err(s)?;
        let mut port = reg.open(&format!("pci:{bdf}")).map_err(s)?;
        port.configure(&PortConfig {
            offloads: Offloads(
                Offloads::RX_CHECKSUM.0
                    | Offloads::RX_VLAN_STRIP.0
                    | Offloads::TX_CHECKSUM.0
                    | Offloads::TX_VLAN_INSERT.0,
            ),
            ..PortConfig::with_pool(&pool)
        })
        .map_err(s)?;
        let q = port.start().map_err(s)?;
        let t = Instant::now();
        while !port.link().up {
            if t.elapsed() > Duration::from_secs(5) {
                return Err("link down".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let mac = port.mac_addr();
        Ok(Peer {
            _reg: reg,
            pool,
            port,
            q,
            mac,
            peer,
        })
    }

    /// Sends `frame` (with `flags`, `vlan` and header lengths for the
    /// offloads), then waits up to 2 s for a frame that `want` accepts,
    /// ignoring others (Linux's own traffic: router solicitations, ARP).
    pub fn ask(
        &mut self,
        frame: &[u8],
        flags: u64,
        vlan: u16,
        want: impl Fn(&Mbuf, &[u8]) -> bool,
    ) -> R<Option<(Mbuf, Vec<u8>)>> {
        let mut m = self.pool.get().map_err(s)?;
        m.append(frame.len())
            .ok_or("frame larger than an mbuf")?
            .copy_from_slice(frame);
        m.set_ol_flags(flags);
        m.set_vlan_tci(vlan);
        m.set_tx_header_lens(14, 20);
        let mut out = Pkts::new();
        let _ = out.push(m);
        let t = Instant::now();
        while !out.is_empty() && t.elapsed() < Duration::from_secs(2) {
            self.q.tx_burst(0, &mut out);
        }
        let mut inb = Pkts::new();
        while t.elapsed() < Duration::from_secs(2) {
            self.q.rx_burst(0, &mut inb, 32);
            while let Some(m) = inb.pop() {
                let b: Vec<u8> = m.segments().flat_map(|s| s.iter().copied()).collect();
                if want(&m, &b) {
                    return Ok(Some((m, b)));
                }
            }
        }
        Ok(None)
    }

    /// The port itself.
    pub fn port(&mut self) -> &mut dyn Port {
        &mut *self.port
    }

    /// The port's queues.
    pub fn queues(&mut self) -> &mut Queues {
        &mut self.q
    }

    /// Stops the port; every mbuf home.
    pub fn close(mut self) -> R<String> {
        self.port.stop().map_err(s)?;
        drop(self.q);
        drop(self.port);
        if self.pool.available() != self.pool.size() {
            return Err(format!(
                "{} of {} mbufs home",
                self.pool.available(),
                self.pool.size()
            ));
        }
        Ok("every mbuf home".into())
    }
}

/// An Ethernet header.
pub fn eth(dst: MacAddr, src: MacAddr, ty: u16) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&ty.to_be_bytes());
    f
}

/// An IPv4 header (checksum filled) for `len` bytes of `proto` payload.
fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, len: usize) -> Vec<u8> {
    let mut h = vec![0x45, 0, 0, 0, 0x43, 0x21, 0x40, 0, 64, proto, 0, 0];
    h[2..4].copy_from_slice(&((20 + len) as u16).to_be_bytes());
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    let c = ipv4_header_checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h
}

/// ARP: Linux answers who-has `peer_ip` (on VLAN `vlan` if not 0)
/// with its MAC; returns the reply's length and the requests it took.
/// As every ARP client does, the request goes again after 2 s without a
/// reply, three times at most: the first frame a port sends after its
/// start can be lost while the PF's driver is still applying what a VF
/// asked for (seen once in four guest runs on a VF, never on a PF), and
/// the count is reported, so a loss shows in the case's line.
fn arp_on(p: &mut Peer, ours: [u8; 4], peer_ip: [u8; 4], vlan: u16) -> R<(usize, u32)> {
    let mut f = eth(MacAddr([0xff; 6]), p.mac, 0x0806);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&p.mac.0);
    f.extend_from_slice(&ours);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&peer_ip);
    let mut want = eth(p.mac, p.peer, 0x0806);
    want.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 2]);
    want.extend_from_slice(&p.peer.0);
    want.extend_from_slice(&peer_ip);
    want.extend_from_slice(&p.mac.0);
    want.extend_from_slice(&ours);
    let flags = if vlan != 0 { TX_VLAN } else { 0 };
    let is_reply = move |m: &Mbuf, b: &[u8]| {
        let tagged = m.ol_flags() & RX_VLAN_STRIPPED != 0;
        let on_vlan = if vlan != 0 {
            tagged && m.vlan_tci() & 0xfff == vlan
        } else {
            !tagged
        };
        on_vlan && b.len() >= 42 && b[12..14] == [8, 6] && b[20..22] == [0, 2]
    };
    for tries in 1..=3 {
        match p.ask(&f, flags, vlan, is_reply)? {
            Some((_, b)) if b[..42] == want[..] => return Ok((b.len(), tries)),
            Some((_, b)) => return Err(format!("ARP reply {:02x?}, want {:02x?}", &b[..42], want)),
            None => {}
        }
    }
    Err(format!(
        "no ARP reply from Linux to 3 requests, 2 s apart (VLAN {vlan})"
    ))
}

/// ARP: Linux answers who-has 10.9.0.2 with its MAC.
pub fn arp(p: &mut Peer) -> R<String> {
    let (len, tries) = arp_on(p, OURS, PEER, 0)?;
    Ok(format!(
        "10.9.0.2 is {} (a {len}-byte reply to request {tries} of at most 3)",
        p.peer
    ))
}

/// An ICMP echo request of `payload` bytes to `dst` (from `src`).
fn echo(p: &Peer, src: [u8; 4], dst: [u8; 4], seq: u16, payload: usize) -> Vec<u8> {
    let mut icmp = vec![8, 0, 0, 0, 0x12, 0x34];
    icmp.extend_from_slice(&seq.to_be_bytes());
    icmp.extend((0..payload).map(|k| (k as u16).wrapping_mul(seq) as u8));
    let c = !fold(ones_sum(&icmp, 0));
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let mut f = eth(p.peer, p.mac, 0x0800);
    f.extend(ipv4(src, dst, 1, icmp.len()));
    f.extend(icmp);
    f
}

/// Whether `reply` (from offset `ip` on) answers `request`'s echo: type
/// 0, addresses swapped, identifier, sequence and payload unchanged,
/// both checksums valid.
fn answers(request: &[u8], reply: &[u8], ip: usize) -> bool {
    let (q, r) = (
        &request[14..],
        match reply.get(ip..) {
            Some(r) => r,
            None => return false,
        },
    );
    r.len() >= q.len()
        && r[9] == 1
        && r[12..16] == q[16..20]
        && r[16..20] == q[12..16]
        && r[20] == 0
        && r[24..q.len()] == q[24..]
        && ipv4_header_checksum(&r[..20]) == u16::from_be_bytes([r[10], r[11]])
        && fold(ones_sum(&r[20..q.len()], 0)) == 0xffff
}

/// Echo requests of 56 to 1472 bytes answered by Linux's stack.
pub fn ping(p: &mut Peer) -> R<String> {
    for (k, size) in [56usize, 500, 1000, 1472].into_iter().enumerate() {
        let f = echo(p, OURS, PEER, k as u16 + 1, size);
        let q = f.clone();
        let got = p.ask(&f, 0, 0, move |_, b| {
            b.len() > 34 && b[12..14] == [8, 0] && b[34] == 0 && answers(&q, b, 14)
        })?;
        let Some((m, _)) = got else {
            return Err(format!("no echo reply to a {size}-byte request"));
        };
        if m.ol_flags() & RX_IP_CKSUM_GOOD == 0 {
            return Err(format!(
                "reply flags {:#x}: the device did not vouch for its IPv4 checksum",
                m.ol_flags()
            ));
        }
    }
    Ok("4 sizes, 56-1472 bytes, answered intact".into())
}

/// A UDP datagram to a closed port: its checksums left to the device
/// (`offload`: IPv4 zero, UDP the pseudo-header sum, as DPDK's
/// `TX_UDP_CKSUM` asks), or computed here with the UDP one made wrong.
fn udp(p: &Peer, offload: bool) -> Vec<u8> {
    let payload = 64;
    let mut f = eth(p.peer, p.mac, 0x0800);
    let mut ip = ipv4(OURS, PEER, 17, 8 + payload);
    let ph = pseudo_header_sum(&ip).unwrap_or(0);
    if offload {
        ip[10..12].copy_from_slice(&[0, 0]);
    }
    f.extend_from_slice(&ip);
    let mut l4 = Vec::new();
    l4.extend_from_slice(&40000u16.to_be_bytes());
    l4.extend_from_slice(&9u16.to_be_bytes());
    l4.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    l4.extend_from_slice(&[0, 0]);
    l4.extend((0..payload).map(|k| k as u8));
    let field = if offload {
        ph
    } else {
        // The right checksum, then spoiled (never to 0: "none").
        let right = !fold(ones_sum(&l4, ph as u32));
        (right ^ 0x0f0f).max(1)
    };
    l4[6..8].copy_from_slice(&field.to_be_bytes());
    f.extend(l4);
    f
}

/// Linux answers a datagram whose checksums rpmd's device filled with
/// port unreachable (it drops a datagram with a wrong UDP checksum
/// silently, as the second, sent with a spoiled one, shows).
pub fn udp_checksums(p: &mut Peer) -> R<String> {
    let unreachable = |_: &Mbuf, b: &[u8]| {
        b.len() > 38 && b[12..14] == [8, 0] && b[23] == 1 && b[34] == 3 && b[35] == 3
    };
    let f = udp(p, true);
    if p.ask(&f, TX_IP_CKSUM | TX_UDP_CKSUM, 0, unreachable)?
        .is_none()
    {
        return Err("no port unreachable: Linux found the device's checksums wrong".into());
    }
    let f = udp(p, false);
    if p.ask(&f, 0, 0, unreachable)?.is_some() {
        return Err("Linux answered a datagram whose UDP checksum was wrong".into());
    }
    Ok("offloaded checksums accepted; a wrong one dropped by Linux".into())
}

/// ARP and echo over VLAN 100: tag inserted by the device on the way
/// out, stripped by it on the way back.
pub fn vlan_ping(p: &mut Peer) -> R<String> {
    arp_on(p, OURS_VLAN, PEER_VLAN, 100)?;
    let f = echo(p, OURS_VLAN, PEER_VLAN, 77, 200);
    let q = f.clone();
    let got = p.ask(&f, TX_VLAN, 100, move |m, b| {
        m.ol_flags() & RX_VLAN_STRIPPED != 0
            && b.len() > 34
            && b[12..14] == [8, 0]
            && answers(&q, b, 14)
    })?;
    match got {
        Some((m, _)) if m.vlan_tci() & 0xfff == 100 => {
            Ok("ARP and echo answered on VLAN 100, tags stripped".into())
        }
        Some((m, _)) => Err(format!("reply tagged {:#x}, want VLAN 100", m.vlan_tci())),
        None => Err("no echo reply on VLAN 100".into()),
    }
}
