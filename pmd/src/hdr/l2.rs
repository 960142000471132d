//! Link-layer views: Ethernet, VLAN tags, ARP.
use super::{be16, need, put16, Field, HdrError, Header};

pub use crate::port::MacAddr;

/// An EtherType (host order).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct EtherType(pub u16);

impl EtherType {
    /// IPv4.
    pub const IPV4: EtherType = EtherType(0x0800);
    /// ARP.
    pub const ARP: EtherType = EtherType(0x0806);
    /// IPv6.
    pub const IPV6: EtherType = EtherType(0x86dd);
    /// 802.1Q VLAN tag.
    pub const VLAN: EtherType = EtherType(0x8100);
    /// 802.1ad service tag (QinQ).
    pub const QINQ: EtherType = EtherType(0x88a8);

    /// Whether a VLAN tag follows.
    pub fn is_vlan(self) -> bool {
        self == Self::VLAN || self == Self::QINQ
    }
}

/// An Ethernet II header (14 bytes) and what follows.
#[derive(Clone, Copy, Debug)]
pub struct Ethernet<T> {
    b: T,
}

impl<T: AsRef<[u8]>> Ethernet<T> {
    /// Header length.
    pub const LEN: usize = super::ETHER_HDR_LEN;

    /// A view of `b`, which must hold at least the 14-byte header.
    pub fn new_checked(b: T) -> Result<Self, HdrError> {
        need(Header::Ethernet, b.as_ref(), Self::LEN)?;
        Ok(Ethernet { b })
    }

    /// Destination address.
    pub fn dst(&self) -> MacAddr {
        let b = self.b.as_ref();
        MacAddr([b[0], b[1], b[2], b[3], b[4], b[5]])
    }

    /// Source address.
    pub fn src(&self) -> MacAddr {
        let b = self.b.as_ref();
        MacAddr([b[6], b[7], b[8], b[9], b[10], b[11]])
    }

    /// The EtherType field (a VLAN TPID when the frame is tagged).
    pub fn ethertype(&self) -> EtherType {
        EtherType(be16(self.b.as_ref(), 12))
    }

    /// The bytes after the 14-byte header.
    pub fn payload(&self) -> &[u8] {
        &self.b.as_ref()[Self::LEN..]
    }

    /// Past up to two VLAN tags: how many there were, the inner EtherType
    /// and what follows it; `None` if a tag is cut short.
    pub fn untagged(&self) -> Option<(usize, EtherType, &[u8])> {
        let (mut t, mut p) = (self.ethertype(), self.payload());
        let mut tags = 0;
        while t.is_vlan() && tags < 2 {
            let v = Vlan::new_checked(p).ok()?;
            t = v.ethertype();
            p = &p[Vlan::<&[u8]>::LEN..];
            tags += 1;
        }
        Some((tags, t, p))
    }

    /// The bytes viewed.
    pub fn into_inner(self) -> T {
        self.b
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ethernet<T> {
    /// Sets the destination address.
    pub fn set_dst(&mut self, m: MacAddr) {
        self.b.as_mut()[0..6].copy_from_slice(&m.0);
    }

    /// Sets the source address.
    pub fn set_src(&mut self, m: MacAddr) {
        self.b.as_mut()[6..12].copy_from_slice(&m.0);
    }

    /// Swaps source and destination (testpmd's macswap).
    pub fn swap_addrs(&mut self) {
        let b = self.b.as_mut();
        for i in 0..6 {
            b.swap(i, i + 6);
        }
    }

    /// Sets the EtherType.
    pub fn set_ethertype(&mut self, t: EtherType) {
        put16(self.b.as_mut(), 12, t.0);
    }

    /// The bytes after the header, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.b.as_mut()[Self::LEN..]
    }
}

/// An 802.1Q/802.1ad tag as it follows the TPID: TCI, then the inner
/// EtherType (4 bytes).
#[derive(Clone, Copy, Debug)]
pub struct Vlan<T> {
    b: T,
}

impl<T: AsRef<[u8]>> Vlan<T> {
    /// Tag length after the TPID.
    pub const LEN: usize = 4;

    /// A view of `b` (the bytes after an Ethernet header whose EtherType
    /// is a VLAN TPID).
    pub fn new_checked(b: T) -> Result<Self, HdrError> {
        need(Header::Vlan, b.as_ref(), Self::LEN)?;
        Ok(Vlan { b })
    }

    /// The whole tag control information (PCP, DEI, VID).
    pub fn tci(&self) -> u16 {
        be16(self.b.as_ref(), 0)
    }

    /// The VLAN id (12 bits).
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// The priority code point (3 bits).
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// The EtherType of what follows the tag.
    pub fn ethertype(&self) -> EtherType {
        EtherType(be16(self.b.as_ref(), 2))
    }

    /// The bytes after the tag.
    pub fn payload(&self) -> &[u8] {
        &self.b.as_ref()[Self::LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Vlan<T> {
    /// Sets the tag control information.
    pub fn set_tci(&mut self, tci: u16) {
        put16(self.b.as_mut(), 0, tci);
    }
}

/// An ARP packet for IPv4 over Ethernet (28 bytes).
#[derive(Clone, Copy, Debug)]
pub struct Arp<T> {
    b: T,
}

impl<T: AsRef<[u8]>> Arp<T> {
    /// Length of an Ethernet/IPv4 ARP packet.
    pub const LEN: usize = 28;
    /// Operation: request.
    pub const REQUEST: u16 = 1;
    /// Operation: reply.
    pub const REPLY: u16 = 2;

    /// A view of `b`: hardware type 1 (Ethernet), protocol IPv4, address
    /// lengths 6 and 4; other ARP variants are refused.
    pub fn new_checked(b: T) -> Result<Self, HdrError> {
        let s = b.as_ref();
        need(Header::Arp, s, Self::LEN)?;
        let bad = |field, value| HdrError::Malformed {
            what: Header::Arp,
            field,
            value,
        };
        if be16(s, 0) != 1 {
            return Err(bad(Field::HardwareType, be16(s, 0) as u32));
        }
        if be16(s, 2) != 0x0800 {
            return Err(bad(Field::ProtocolType, be16(s, 2) as u32));
        }
        if s[4] != 6 || s[5] != 4 {
            return Err(bad(
                Field::AddressLengths,
                u16::from_be_bytes([s[4], s[5]]) as u32,
            ));
        }
        Ok(Arp { b })
    }

    /// Operation ([`REQUEST`](Self::REQUEST) or [`REPLY`](Self::REPLY)).
    pub fn operation(&self) -> u16 {
        be16(self.b.as_ref(), 6)
    }

    /// Sender hardware address.
    pub fn sender_mac(&self) -> MacAddr {
        let b = self.b.as_ref();
        MacAddr([b[8], b[9], b[10], b[11], b[12], b[13]])
    }

    /// Sender IPv4 address.
    pub fn sender_ip(&self) -> [u8; 4] {
        let b = self.b.as_ref();
        [b[14], b[15], b[16], b[17]]
    }

    /// Target hardware address.
    pub fn target_mac(&self) -> MacAddr {
        let b = self.b.as_ref();
        MacAddr([b[18], b[19], b[20], b[21], b[22], b[23]])
    }

    /// Target IPv4 address.
    pub fn target_ip(&self) -> [u8; 4] {
        let b = self.b.as_ref();
        [b[24], b[25], b[26], b[27]]
    }
}
