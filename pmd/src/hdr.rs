//! Checked views of the headers an app reads and rewrites: Ethernet,
//! 802.1Q/802.1ad VLAN tags, ARP, IPv4, IPv6, UDP and TCP, over a byte
//! slice (an mbuf's [`data`](crate::Mbuf::data) or
//! [`data_mut`](crate::Mbuf::data_mut)).
//!
//! In smoltcp's style: `new_checked` looks at the bytes once (length,
//! version, header length) and fails with a [`HdrError`] naming what is
//! wrong; after that every accessor is a plain read at a fixed offset that
//! cannot go out of bounds, with no allocation. A view over `&mut [u8]`
//! also has setters. `payload` gives what follows the header, ready for
//! the next view:
//!
//! ```
//! use rpmd_pmd::hdr::{EtherType, Ethernet, IpProto, Ipv4, Udp};
//! # let frame = rpmd_pmd::hdr::tests_support::udp_frame(53);
//! let eth = Ethernet::new_checked(&frame[..]).unwrap();
//! assert_eq!(eth.ethertype(), EtherType::IPV4);
//! let ip = Ipv4::new_checked(eth.payload()).unwrap();
//! assert_eq!(ip.protocol(), IpProto::UDP);
//! let udp = Udp::new_checked(ip.payload()).unwrap();
//! assert_eq!(udp.dst_port(), 53);
//! ```
//!
//! Multi-byte fields are big-endian on the wire and host order here.
//! [`PacketType`] classifies a frame as DPDK's `RTE_PTYPE_*` does, for
//! drivers that fill [`Mbuf::packet_type`](crate::Mbuf::packet_type).

use crate::net::{fold, ones_sum};
use std::fmt;

mod ip;
mod l2;
#[cfg(test)]
mod tests;

pub use ip::{IpProto, Ipv4, Ipv6, Tcp, Udp};
pub use l2::{Arp, EtherType, Ethernet, MacAddr, Vlan};

/// Bytes of an Ethernet header without a tag: the shortest frame a NIC
/// driver hands out. A device that reports a shorter one is wrong (a NIC
/// drops runts unless told to store bad frames, which rpmd never asks),
/// so the drivers drop it and count it as the device's error, as Linux's
/// virtio_net does (`len < hdr_len + ETH_HLEN`).
pub const ETHER_HDR_LEN: usize = 14;

/// The header a view is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Header {
    /// Ethernet II.
    Ethernet,
    /// An 802.1Q tag.
    Vlan,
    /// ARP for IPv4 over Ethernet.
    Arp,
    /// IPv4, with options.
    Ipv4,
    /// IPv6's fixed header.
    Ipv6,
    /// UDP.
    Udp,
    /// TCP, with options.
    Tcp,
}

impl std::fmt::Display for Header {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Header::Ethernet => "Ethernet",
            Header::Vlan => "VLAN",
            Header::Arp => "ARP",
            Header::Ipv4 => "IPv4",
            Header::Ipv6 => "IPv6",
            Header::Udp => "UDP",
            Header::Tcp => "TCP",
        })
    }
}

/// A header field whose value no valid header has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// IPv4's or IPv6's version.
    Version,
    /// IPv4's header length (IHL).
    HeaderLength,
    /// IPv4's total length.
    TotalLength,
    /// UDP's length.
    Length,
    /// TCP's data offset.
    DataOffset,
    /// ARP's hardware type (1, Ethernet, is what is taken).
    HardwareType,
    /// ARP's protocol type (IPv4 is what is taken).
    ProtocolType,
    /// ARP's hardware and protocol address lengths (6 and 4).
    AddressLengths,
}

impl std::fmt::Display for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Field::Version => "version",
            Field::HeaderLength => "header length",
            Field::TotalLength => "total length",
            Field::Length => "length",
            Field::DataOffset => "data offset",
            Field::HardwareType => "hardware type",
            Field::ProtocolType => "protocol type",
            Field::AddressLengths => "address lengths",
        })
    }
}

/// What makes bytes not a header of the kind asked for; both parts are
/// enums a caller can match.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HdrError {
    /// Fewer bytes than the header needs.
    #[error("{what} header truncated: {need} bytes needed, {have} present")]
    Truncated {
        /// The header.
        what: Header,
        /// Bytes it needs (with its options).
        need: usize,
        /// Bytes there are.
        have: usize,
    },
    /// A version or length field that no header of this kind has.
    #[error("{what}: {field} is {value}, which no valid header has")]
    Malformed {
        /// The header.
        what: Header,
        /// The field.
        field: Field,
        /// Its value.
        value: u32,
    },
}

/// Fails unless `b` has at least `need` bytes.
fn need(what: Header, b: &[u8], need: usize) -> Result<(), HdrError> {
    if b.len() < need {
        return Err(HdrError::Truncated {
            what,
            need,
            have: b.len(),
        });
    }
    Ok(())
}

/// A big-endian u16 at `at` (callers checked the length).
#[inline(always)]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline(always)]
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline(always)]
fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline(always)]
fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// The UDP or TCP checksum of `l4` (header with its checksum field
/// counted as zero, and payload) under the pseudo-header sum `pseudo`.
fn l4_checksum(l4: &[u8], pseudo: u32, csum_at: usize) -> u16 {
    let stored = be16(l4, csum_at) as u32;
    // Take the stored field back out of the sum (adding its complement).
    let sum = ones_sum(l4, pseudo) + (!stored & 0xffff);
    !fold(sum)
}

/// A frame's layers as DPDK's packet types name them (`RTE_PTYPE_L2_*`,
/// `L3_*`, `L4_*`, the same bit values), found by looking at the headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PacketType(pub u32);

impl PacketType {
    /// `RTE_PTYPE_L2_ETHER`.
    pub const L2_ETHER: u32 = 0x0000_0001;
    /// `RTE_PTYPE_L2_ETHER_ARP`.
    pub const L2_ETHER_ARP: u32 = 0x0000_0003;
    /// `RTE_PTYPE_L2_ETHER_VLAN`.
    pub const L2_ETHER_VLAN: u32 = 0x0000_0006;
    /// `RTE_PTYPE_L2_ETHER_QINQ`.
    pub const L2_ETHER_QINQ: u32 = 0x0000_0007;
    /// `RTE_PTYPE_L3_IPV4` (no options).
    pub const L3_IPV4: u32 = 0x0000_0010;
    /// `RTE_PTYPE_L3_IPV4_EXT` (with options).
    pub const L3_IPV4_EXT: u32 = 0x0000_0030;
    /// `RTE_PTYPE_L3_IPV6`.
    pub const L3_IPV6: u32 = 0x0000_0040;
    /// `RTE_PTYPE_L4_TCP`.
    pub const L4_TCP: u32 = 0x0000_0100;
    /// `RTE_PTYPE_L4_UDP`.
    pub const L4_UDP: u32 = 0x0000_0200;
    /// `RTE_PTYPE_L4_FRAG`.
    pub const L4_FRAG: u32 = 0x0000_0300;
    /// `RTE_PTYPE_L4_ICMP`.
    pub const L4_ICMP: u32 = 0x0000_0500;
    /// `RTE_PTYPE_L2_MASK`.
    pub const L2_MASK: u32 = 0x0000_000f;
    /// `RTE_PTYPE_L3_MASK`.
    pub const L3_MASK: u32 = 0x0000_00f0;
    /// `RTE_PTYPE_L4_MASK`.
    pub const L4_MASK: u32 = 0x0000_0f00;

    /// Classifies `frame` (an Ethernet frame): 0 when it is not even
    /// Ethernet; the layers found otherwise, as far as they parse.
    pub fn of(frame: &[u8]) -> PacketType {
        let Ok(eth) = Ethernet::new_checked(frame) else {
            return PacketType(0);
        };
        let (l2, ethertype, l3) = match eth.untagged() {
            Some((0, t, p)) => (Self::L2_ETHER, t, p),
            Some((1, t, p)) => (Self::L2_ETHER_VLAN, t, p),
            Some((_, t, p)) => (Self::L2_ETHER_QINQ, t, p),
            None => return PacketType(Self::L2_ETHER),
        };
        let (l3, proto) = match ethertype {
            EtherType::ARP => return PacketType(Self::L2_ETHER_ARP),
            EtherType::IPV4 => match Ipv4::new_checked(l3) {
                Ok(ip) if ip.is_fragment() => return PacketType(l2 | ip_l3(&ip) | Self::L4_FRAG),
                Ok(ip) => (ip_l3(&ip), ip.protocol()),
                Err(_) => return PacketType(l2),
            },
            EtherType::IPV6 => match Ipv6::new_checked(l3) {
                Ok(ip) => (Self::L3_IPV6, ip.next_header()),
                Err(_) => return PacketType(l2),
            },
            _ => return PacketType(l2),
        };
        let l4 = match proto {
            IpProto::TCP => Self::L4_TCP,
            IpProto::UDP => Self::L4_UDP,
            IpProto::ICMP | IpProto::ICMPV6 => Self::L4_ICMP,
            _ => 0,
        };
        PacketType(l2 | l3 | l4)
    }
}

fn ip_l3(ip: &Ipv4<&[u8]>) -> u32 {
    if ip.header_len() > 20 {
        PacketType::L3_IPV4_EXT
    } else {
        PacketType::L3_IPV4
    }
}

impl fmt::Display for PacketType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l2 = match self.0 & Self::L2_MASK {
            0 => "",
            Self::L2_ETHER => "L2_ETHER",
            Self::L2_ETHER_ARP => "L2_ETHER_ARP",
            Self::L2_ETHER_VLAN => "L2_ETHER_VLAN",
            Self::L2_ETHER_QINQ => "L2_ETHER_QINQ",
            _ => "L2_?",
        };
        let l3 = match self.0 & Self::L3_MASK {
            0 => "",
            Self::L3_IPV4 => " L3_IPV4",
            Self::L3_IPV4_EXT => " L3_IPV4_EXT",
            Self::L3_IPV6 => " L3_IPV6",
            _ => " L3_?",
        };
        let l4 = match self.0 & Self::L4_MASK {
            0 => "",
            Self::L4_TCP => " L4_TCP",
            Self::L4_UDP => " L4_UDP",
            Self::L4_FRAG => " L4_FRAG",
            Self::L4_ICMP => " L4_ICMP",
            _ => " L4_?",
        };
        write!(f, "{l2}{l3}{l4}")
    }
}

/// Frames for doc examples and tests.
#[doc(hidden)]
pub mod tests_support {
    /// A 60-byte Ethernet/IPv4/UDP frame to `dport` with valid checksums.
    pub fn udp_frame(dport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut f[14..];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&28u16.to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
        let c = crate::net::ipv4_header_checksum(&ip[..20]);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        ip[20..22].copy_from_slice(&1024u16.to_be_bytes());
        ip[22..24].copy_from_slice(&dport.to_be_bytes());
        ip[24..26].copy_from_slice(&8u16.to_be_bytes());
        f
    }
}
