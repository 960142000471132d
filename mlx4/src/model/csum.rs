//! What the model's RX engine reports of a frame's headers in its CQE
//! (digest §3.3): IPv4 / IPv6, TCP / UDP, IPv4 header checksum OK
//! (IPOK), and an L4 checksum verified (`checksum = 0xffff`, badfcs_enc
//! bit 2), for untagged Ethernet II frames. Fragments are flagged and
//! their L4 not checked.
use crate::prm::cq as c;
use crate::prm::layout::Cqe;
use crate::prm::mem::Wire;
use rpmd_pmd::endian::Be16;
use rpmd_pmd::net::{fold, ones_sum};

const TCP: u8 = 6;
const UDP: u8 = 17;

/// A CQE with the status, badfcs_enc and checksum fields for `frame`.
pub(super) fn classify(frame: &[u8]) -> Cqe {
    let mut e = Cqe::zeroed();
    let Some(ethertype) = frame.get(12..14) else {
        return e;
    };
    let l3 = &frame[14..];
    let (mut status, mut l4_ok) = (0u16, false);
    match u16::from_be_bytes([ethertype[0], ethertype[1]]) {
        0x0800 if l3.len() >= 20 && l3[0] >> 4 == 4 => {
            status |= c::ST_IPV4;
            let ihl = (l3[0] & 0xf) as usize * 4;
            let total = u16::from_be_bytes([l3[2], l3[3]]) as usize;
            if ihl < 20 || total < ihl || total > l3.len() {
                return e;
            }
            if fold(ones_sum(&l3[..ihl], 0)) == 0xffff {
                status |= c::ST_IPOK;
            }
            let frag = u16::from_be_bytes([l3[6], l3[7]]) & 0x3fff != 0;
            if frag {
                status |= c::ST_IPV4F;
            } else {
                let proto = l3[9];
                status |= match proto {
                    TCP => c::ST_TCP,
                    UDP => c::ST_UDP,
                    _ => 0,
                };
                let l4 = &l3[ihl..total];
                let pseudo = ones_sum(&l3[12..20], proto as u32 + l4.len() as u32);
                let udp_zero = proto == UDP && l4.get(6..8) == Some(&[0, 0]);
                l4_ok = matches!(proto, TCP | UDP)
                    && (udp_zero || fold(ones_sum(l4, pseudo)) == 0xffff);
            }
        }
        0x86dd if l3.len() >= 40 && l3[0] >> 4 == 6 => {
            status |= c::ST_IPV6;
            status |= match l3[6] {
                TCP => c::ST_TCP,
                UDP => c::ST_UDP,
                _ => 0,
            };
        }
        _ => {}
    }
    e.status = Be16::new(status);
    if l4_ok {
        e.checksum = Be16::new(0xffff);
        e.badfcs_enc = 1 << 2;
    }
    e
}

/// What the TX engine does with a send WQE's checksum flags (srcrb bit 4:
/// the IPv4 header checksum, bit 5: the TCP or UDP checksum): each is
/// computed whole, over the pseudo-header for L4, whatever the field held;
/// frames that are not IPv4 TCP or UDP are left as they are.
pub(super) fn fill(frame: &mut [u8], srcrb: u32) {
    use crate::prm::wqe::{SRCRB_IP_CSUM, SRCRB_L4_CSUM};
    if srcrb & (SRCRB_IP_CSUM | SRCRB_L4_CSUM) == 0 || frame.get(12..14) != Some(&[0x08, 0x00]) {
        return;
    }
    let l3 = &mut frame[14..];
    if l3.len() < 20 || l3[0] >> 4 != 4 {
        return;
    }
    let ihl = (l3[0] & 0xf) as usize * 4;
    let total = u16::from_be_bytes([l3[2], l3[3]]) as usize;
    if ihl < 20 || total < ihl || total > l3.len() {
        return;
    }
    if srcrb & SRCRB_IP_CSUM != 0 {
        l3[10..12].fill(0);
        let c = !fold(ones_sum(&l3[..ihl], 0));
        l3[10..12].copy_from_slice(&c.to_be_bytes());
    }
    let (proto, at) = (
        l3[9],
        match l3[9] {
            TCP => 16,
            UDP => 6,
            _ => return,
        },
    );
    let frag = u16::from_be_bytes([l3[6], l3[7]]) & 0x3fff != 0;
    if srcrb & SRCRB_L4_CSUM == 0 || frag || total - ihl < at + 2 {
        return;
    }
    let pseudo = ones_sum(&l3[12..20], proto as u32 + (total - ihl) as u32);
    let l4 = &mut l3[ihl..total];
    l4[at..at + 2].fill(0);
    let c = rpmd_pmd::net::complete_checksum(ones_sum(l4, pseudo), proto == UDP);
    l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
}
