//! What testpmd's forwarding modes do to a frame between receiving and
//! sending it, for gen's `--mode io|mac|macswap|csum` (and `flowgen`,
//! which sends flows and drops what it receives).
//!
//! - io: nothing.
//! - mac: source = the port's MAC, destination = the peer's
//!   (testpmd's `--eth-peer`; default `02:00:00:00:00:<port>`).
//! - macswap: source and destination swapped.
//! - csum: the IPv4 header checksum and the UDP/TCP checksum (over IPv4
//!   or IPv6) checked, the bad ones counted, and all of them computed
//!   again in software (testpmd's csum engine without hardware offload).
use rpmd_pmd::hdr::{EtherType, Ethernet, IpProto, Ipv4, Ipv6, MacAddr, Tcp, Udp};
use rpmd_pmd::port::stats::Counter;
use rpmd_pmd::Mbuf;

/// The rewrite of one forwarding mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rewrite {
    /// io: frames go out as they came.
    None,
    /// mac: set both addresses.
    Mac {
        /// The sending port's address.
        src: MacAddr,
        /// The peer's.
        dst: MacAddr,
    },
    /// macswap: swap the addresses.
    MacSwap,
    /// csum: check and recompute the checksums.
    Csum,
}

/// Counters of the csum mode (testpmd's `Bad-ipcsum`, `Bad-l4csum`).
#[derive(Debug, Default)]
pub struct CsumCounters {
    /// IPv4 headers whose checksum was wrong.
    pub bad_ip: Counter,
    /// UDP/TCP checksums that were wrong.
    pub bad_l4: Counter,
}

impl Rewrite {
    /// Applies the rewrite to `m`'s first segment (where the headers are).
    #[inline]
    pub fn apply(&self, m: &mut Mbuf, csum: &CsumCounters) {
        match *self {
            Rewrite::None => {}
            Rewrite::Mac { src, dst } => {
                if let Ok(mut eth) = Ethernet::new_checked(m.data_mut()) {
                    eth.set_src(src);
                    eth.set_dst(dst);
                }
            }
            Rewrite::MacSwap => {
                if let Ok(mut eth) = Ethernet::new_checked(m.data_mut()) {
                    eth.swap_addrs();
                }
            }
            Rewrite::Csum => checksums(m.data_mut(), csum),
        }
    }
}

/// Checks and refills the checksums of an Ethernet/IP/UDP-or-TCP frame;
/// other frames pass untouched.
fn checksums(frame: &mut [u8], c: &CsumCounters) {
    let Ok(mut eth) = Ethernet::new_checked(frame) else {
        return;
    };
    match eth.ethertype() {
        EtherType::IPV4 => {
            let Ok(mut ip) = Ipv4::new_checked(eth.payload_mut()) else {
                return;
            };
            if !ip.checksum_ok() {
                c.bad_ip.add(1);
                ip.fill_checksum();
            }
            if ip.is_fragment() {
                return;
            }
            let (pseudo, proto) = (ip.pseudo_sum(), ip.protocol());
            l4(ip.payload_mut(), proto, pseudo, true, c);
        }
        EtherType::IPV6 => {
            let Ok(mut ip) = Ipv6::new_checked(eth.payload_mut()) else {
                return;
            };
            let (pseudo, proto) = (ip.pseudo_sum(), ip.next_header());
            l4(ip.payload_mut(), proto, pseudo, false, c);
        }
        _ => {}
    }
}

/// The UDP or TCP checksum of `seg` under `pseudo`: counted when wrong,
/// then stored right. Over IPv4 a zero UDP checksum means none.
fn l4(seg: &mut [u8], proto: IpProto, pseudo: u32, v4: bool, c: &CsumCounters) {
    match proto {
        IpProto::UDP => {
            let Ok(mut u) = Udp::new_checked(seg) else {
                return;
            };
            if v4 && u.checksum() == 0 {
                return;
            }
            if u.compute_checksum(pseudo) != u.checksum() {
                c.bad_l4.add(1);
                u.fill_checksum(pseudo);
            }
        }
        IpProto::TCP => {
            let Ok(mut t) = Tcp::new_checked(seg) else {
                return;
            };
            if t.compute_checksum(pseudo) != t.checksum() {
                c.bad_l4.add(1);
                t.fill_checksum(pseudo);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rpmd_pmd::{Mempool, MempoolConfig};

    fn mbuf(pool: &Mempool, f: &[u8]) -> Mbuf {
        let mut m = pool.get().unwrap();
        m.append(f.len()).unwrap().copy_from_slice(f);
        m
    }

    #[test]
    fn each_mode_rewrites_as_testpmd_does() {
        let mut pc = MempoolConfig::new("fwd-modes", 16);
        pc.cache_size = 0;
        let pool = Mempool::new(&pc).unwrap();
        let c = CsumCounters::default();
        let mut f = crate::gen::template(64);
        crate::gen::set_flow(&mut f, 3);
        let (src, dst) = (MacAddr([2, 0, 0, 0, 0, 9]), MacAddr([2, 0, 0, 0, 0, 1]));
        let mut m = mbuf(&pool, &f);
        Rewrite::Mac { src, dst }.apply(&mut m, &c);
        assert_eq!((&m.data()[..6], &m.data()[6..12]), (&dst.0[..], &src.0[..]));
        Rewrite::MacSwap.apply(&mut m, &c);
        assert_eq!((&m.data()[..6], &m.data()[6..12]), (&src.0[..], &dst.0[..]));
        assert_eq!(&m.data()[12..], &f[12..], "only the addresses change");
        // csum: a good frame passes, bad ones are counted and fixed.
        Rewrite::Csum.apply(&mut m, &c);
        assert_eq!((c.bad_ip.get(), c.bad_l4.get()), (0, 0));
        let mut bad = f.clone();
        bad[24] ^= 0xff; // IPv4 checksum
        bad[40..42].copy_from_slice(&[0x12, 0x34]); // a wrong UDP checksum
        let mut m = mbuf(&pool, &bad);
        Rewrite::Csum.apply(&mut m, &c);
        assert_eq!((c.bad_ip.get(), c.bad_l4.get()), (1, 1));
        let eth = Ethernet::new_checked(m.data()).unwrap();
        let ip = Ipv4::new_checked(eth.payload()).unwrap();
        assert!(ip.checksum_ok());
        let udp = Udp::new_checked(ip.payload()).unwrap();
        assert_eq!(udp.compute_checksum(ip.pseudo_sum()), udp.checksum());
        Rewrite::Csum.apply(&mut m, &c);
        assert_eq!((c.bad_ip.get(), c.bad_l4.get()), (1, 1), "fixed for good");
        // Not IP, or cut short: untouched.
        let mut short = mbuf(&pool, &f[..20]);
        Rewrite::Csum.apply(&mut short, &c);
        assert_eq!(short.data(), &f[..20]);
    }
}
