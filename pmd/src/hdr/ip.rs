//! Network- and transport-layer views: IPv4, IPv6, UDP, TCP.
use super::{be16, be32, l4_checksum, need, put16, put32, Field, HdrError, Header};
use crate::net::{checksum_update, ipv4_header_checksum, ones_sum};

/// An IP protocol number (IPv4 protocol, IPv6 next header).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct IpProto(pub u8);

impl IpProto {
    /// ICMP.
    pub const ICMP: IpProto = IpProto(1);
    /// TCP.
    pub const TCP: IpProto = IpProto(6);
    /// UDP.
    pub const UDP: IpProto = IpProto(17);
    /// ICMPv6.
    pub const ICMPV6: IpProto = IpProto(58);
}

fn malformed(what: Header, field: Field, value: u32) -> HdrError {
    HdrError::Malformed { what, field, value }
}

/// An IPv4 header with its options. The view ends at the header's total
/// length, so an Ethernet pad after the datagram is not payload.
#[derive(Clone, Copy, Debug)]
pub struct Ipv4<T> {
    b: T,
    hlen: usize,
    total: usize,
}

impl<T: AsRef<[u8]>> Ipv4<T> {
    /// A view of `b`: version 4, header length at least 20 and within the
    /// total length, total length within `b`.
    pub fn new_checked(b: T) -> Result<Self, HdrError> {
        let s = b.as_ref();
        need(Header::Ipv4, s, 20)?;
        if s[0] >> 4 != 4 {
            return Err(malformed(Header::Ipv4, Field::Version, (s[0] >> 4) as u32));
        }
        let hlen = (s[0] & 0xf) as usize * 4;
        if hlen < 20 {
            return Err(malformed(Header::Ipv4, Field::HeaderLength, hlen as u32));
        }
        let total = be16(s, 2) as usize;
        if total < hlen {
            return Err(malformed(Header::Ipv4, Field::TotalLength, total as u32));
        }
        need(Header::Ipv4, s, total)?;
        Ok(Ipv4 { b, hlen, total })
    }

    /// Header length with options, in bytes.
    pub fn header_len(&self) -> usize {
        self.hlen
    }

    /// Total length (header and payload).
    pub fn total_len(&self) -> usize {
        self.total
    }

    /// The Differentiated Services code point: the type-of-service
    /// byte's upper six bits (RFC 2474).
    pub fn dscp(&self) -> u8 {
        self.b.as_ref()[1] >> 2
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.b.as_ref()[8]
    }

    /// The protocol of the payload.
    pub fn protocol(&self) -> IpProto {
        IpProto(self.b.as_ref()[9])
    }

    /// The header checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.b.as_ref(), 10)
    }

    /// Whether the header checksum is right.
    #[inline]
    pub fn checksum_ok(&self) -> bool {
        let h = self.header();
        // A header without options: the one's-complement sum of all of it,
        // its checksum field included, is 0xffff exactly when the field is
        // right (RFC 1071 §4.1). One's-complement addition is addition
        // modulo 0xffff, so that sum is 0xffff exactly when the plain sum
        // of the words is a nonzero multiple of 0xffff; and as 0x10000 is
        // 1 modulo 0xffff, the words may be taken 32 bits at a time, in
        // native order (a byte swap multiplies the sum by 0x100, prime to
        // 0xffff: §2(B)). A field of 0xffff, which no sender computes,
        // takes the exact path.
        if let Ok(w) = <&[u8; 20]>::try_from(h) {
            let mut sum = 0u64;
            for k in 0..5 {
                sum +=
                    u32::from_ne_bytes([w[4 * k], w[4 * k + 1], w[4 * k + 2], w[4 * k + 3]]) as u64;
            }
            if sum % 0xffff == 0 && sum != 0 && self.checksum() != 0xffff {
                return true;
            }
        }
        ipv4_header_checksum(h) == self.checksum()
    }

    /// Source address.
    pub fn src(&self) -> [u8; 4] {
        be32(self.b.as_ref(), 12).to_be_bytes()
    }

    /// Destination address.
    pub fn dst(&self) -> [u8; 4] {
        be32(self.b.as_ref(), 16).to_be_bytes()
    }

    /// Whether this is a fragment (more fragments, or an offset).
    pub fn is_fragment(&self) -> bool {
        be16(self.b.as_ref(), 6) & 0x3fff != 0
    }

    /// The header, options included.
    pub fn header(&self) -> &[u8] {
        &self.b.as_ref()[..self.hlen]
    }

    /// The payload, up to the total length.
    pub fn payload(&self) -> &[u8] {
        &self.b.as_ref()[self.hlen..self.total]
    }

    /// The pseudo-header sum for the payload's UDP/TCP checksum.
    pub fn pseudo_sum(&self) -> u32 {
        let b = self.b.as_ref();
        let len = (self.total - self.hlen) as u32;
        ones_sum(&b[12..20], self.protocol().0 as u32 + len)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4<T> {
    /// Sets the source address (the checksum is not updated).
    pub fn set_src(&mut self, a: [u8; 4]) {
        put32(self.b.as_mut(), 12, u32::from_be_bytes(a));
    }

    /// Sets the destination address (the checksum is not updated).
    pub fn set_dst(&mut self, a: [u8; 4]) {
        put32(self.b.as_mut(), 16, u32::from_be_bytes(a));
    }

    /// Sets the time to live (the checksum is not updated).
    pub fn set_ttl(&mut self, ttl: u8) {
        self.b.as_mut()[8] = ttl;
    }

    /// Computes and stores the header checksum.
    pub fn fill_checksum(&mut self) {
        let c = ipv4_header_checksum(self.header());
        put16(self.b.as_mut(), 10, c);
    }

    /// A router's hop: the time to live one less, the header checksum
    /// updated to match (RFC 1624), the new TTL returned; `None`, with
    /// nothing changed, when the datagram has no hop left (TTL 0 or 1:
    /// drop it and count it expired).
    pub fn decrement_ttl(&mut self) -> Option<u8> {
        let b = self.b.as_mut();
        let ttl = b[8];
        if ttl <= 1 {
            return None;
        }
        // RFC 1624 eqn. 3 with m = ttl:proto and m' = m - 0x100, so
        // ~m + m' is 0xfeff whatever the word: HC' = ~(~HC + 0xfeff), one
        // fold enough (at most 0x1fefe). What `checksum_update` computes
        // for these two words, without its loops.
        let sum = !be16(b, 10) as u32 + 0xfeff;
        let c = !((sum & 0xffff) + (sum >> 16)) as u16;
        b[8] = ttl - 1;
        put16(b, 10, c);
        Some(ttl - 1)
    }

    /// Sets the source address with the header checksum updated to match
    /// (the L4 checksum covers it too: see `Udp::rewrite_address`).
    pub fn rewrite_src(&mut self, a: [u8; 4]) {
        self.rewrite_address(12, a);
    }

    /// Sets the destination address with the header checksum updated.
    pub fn rewrite_dst(&mut self, a: [u8; 4]) {
        self.rewrite_address(16, a);
    }

    fn rewrite_address(&mut self, at: usize, a: [u8; 4]) {
        let b = self.b.as_mut();
        let old = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        let c = checksum_update(be16(b, 10), &old, &a);
        b[at..at + 4].copy_from_slice(&a);
        put16(b, 10, c);
    }

    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (h, t) = (self.hlen, self.total);
        &mut self.b.as_mut()[h..t]
    }
}

/// An IPv6 fixed header (40 bytes); extension headers are payload. The
/// view ends at the payload length.
#[derive(Clone, Copy, Debug)]
pub struct Ipv6<T> {
    b: T,
    end: usize,
}

impl<T: AsRef<[u8]>> Ipv6<T> {
    /// Fixed header length.
    pub const LEN: usize = 40;

    /// A view of `b`: version 6, the payload length within `b`.
    pub fn new_checked(b: T) -> Result<Self, HdrError> {
        let s = b.as_ref();
        need(Header::Ipv6, s, Self::LEN)?;
        if s[0] >> 4 != 6 {
            return Err(malformed(Header::Ipv6, Field::Version, (s[0] >> 4) as u32));
        }
        let end = Self::LEN + be16(s, 4) as usize;
        need(Header::Ipv6, s, end)?;
        Ok(Ipv6 { b, end })
    }

    /// Payload length (extension headers included).
    pub fn payload_len(&self) -> usize {
        self.end - Self::LEN
    }

    /// The next header's protocol.
    pub fn next_header(&self) -> IpProto {
        IpProto(self.b.as_ref()[6])
    }

    /// The Differentiated Services code point: the traffic class's
    /// upper six bits (RFC 2474), which straddle the first two bytes.
    pub fn dscp(&self) -> u8 {
        let s = self.b.as_ref();
        ((s[0] & 0x0f) << 2) | (s[1] >> 6)
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.b.as_ref()[7]
    }

    /// Source address.
    pub fn src(&self) -> [u8; 16] {
        self.b.as_ref()[8..24].try_into().expect("16 bytes")
    }

    /// Destination address.
    pub fn dst(&self) -> [u8; 16] {
        self.b.as_ref()[24..40].try_into().expect("16 bytes")
    }

    /// The payload.
    pub fn payload(&self) -> &[u8] {
        &self.b.as_ref()[Self::LEN..self.end]
    }

    /// The pseudo-header sum for an upper-layer checksum, when the next
    /// header is the upper layer (no extension headers).
    pub fn pseudo_sum(&self) -> u32 {
        let b = self.b.as_ref();
        let len = self.payload_len() as u32;
        ones_sum(
            &b[8..40],
            self.next_header().0 as u32 + (len >> 16) + (len & 0xffff),
        )
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6<T> {
    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = self.end;
        &mut self.b.as_mut()[Self::LEN..end]
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, h: u8) {
        self.b.as_mut()[7] = h;
    }
}

/// A UDP header (8 bytes); the view ends at the UDP length.
#[derive(Clone, Copy, Debug)]
pub struct Udp<T> {
    b: T,
    len: usize,
}

impl<T: AsRef<[u8]>> Udp<T> {
    /// Header length.
    pub const LEN: usize = 8;

    /// A view of `b`: the length field at least 8 and within `b`.
    pub fn new_checked(b: T) -> Result<Self, HdrError> {
        let s = b.as_ref();
        need(Header::Udp, s, Self::LEN)?;
        let len = be16(s, 4) as usize;
        if len < Self::LEN {
            return Err(malformed(Header::Udp, Field::Length, len as u32));
        }
        need(Header::Udp, s, len)?;
        Ok(Udp { b, len })
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.b.as_ref(), 0)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.b.as_ref(), 2)
    }

    /// The length field (header and payload).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the datagram carries no payload.
    pub fn is_empty(&self) -> bool {
        self.len == Self::LEN
    }

    /// The checksum field (0: none, over IPv4).
    pub fn checksum(&self) -> u16 {
        be16(self.b.as_ref(), 6)
    }

    /// The checksum this datagram should carry under `pseudo` (from
    /// [`Ipv4::pseudo_sum`] or [`Ipv6::pseudo_sum`]); 0 is sent as
    /// 0xffff.
    pub fn compute_checksum(&self, pseudo: u32) -> u16 {
        match l4_checksum(&self.b.as_ref()[..self.len], pseudo, 6) {
            0 => 0xffff,
            c => c,
        }
    }

    /// The payload, up to the UDP length.
    pub fn payload(&self) -> &[u8] {
        &self.b.as_ref()[Self::LEN..self.len]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Udp<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, p: u16) {
        put16(self.b.as_mut(), 0, p);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, p: u16) {
        put16(self.b.as_mut(), 2, p);
    }

    /// Computes and stores the checksum under `pseudo`.
    pub fn fill_checksum(&mut self, pseudo: u32) {
        let c = self.compute_checksum(pseudo);
        put16(self.b.as_mut(), 6, c);
    }

    /// Sets the source port with the checksum updated to match.
    pub fn rewrite_src_port(&mut self, p: u16) {
        self.rewrite(0, &p.to_be_bytes());
    }

    /// Sets the destination port with the checksum updated to match.
    pub fn rewrite_dst_port(&mut self, p: u16) {
        self.rewrite(2, &p.to_be_bytes());
    }

    /// Updates the checksum for an address of the pseudo-header changing
    /// from `old` to `new` (after `Ipv4::rewrite_src` or `rewrite_dst`).
    pub fn rewrite_address(&mut self, old: [u8; 4], new: [u8; 4]) {
        self.update_checksum(&old, &new);
    }

    fn rewrite(&mut self, at: usize, new: &[u8; 2]) {
        let b = self.b.as_mut();
        let old = [b[at], b[at + 1]];
        b[at..at + 2].copy_from_slice(new);
        self.update_checksum(&old, new);
    }

    /// RFC 1624 on the checksum field; a zero checksum (none sent, which
    /// IPv4 allows) stays zero, and a computed zero is sent as 0xffff.
    fn update_checksum(&mut self, old: &[u8], new: &[u8]) {
        let b = self.b.as_mut();
        let c = be16(b, 6);
        if c == 0 {
            return;
        }
        let c = match checksum_update(c, old, new) {
            0 => 0xffff,
            c => c,
        };
        put16(b, 6, c);
    }
}

/// A TCP header with its options; the payload is the rest of the slice.
#[derive(Clone, Copy, Debug)]
pub struct Tcp<T> {
    b: T,
    hlen: usize,
}

impl<T: AsRef<[u8]>> Tcp<T> {
    /// A view of `b`: data offset at least 5 words and within `b`.
    pub fn new_checked(b: T) -> Result<Self, HdrError> {
        let s = b.as_ref();
        need(Header::Tcp, s, 20)?;
        let hlen = (s[12] >> 4) as usize * 4;
        if hlen < 20 {
            return Err(malformed(Header::Tcp, Field::DataOffset, hlen as u32));
        }
        need(Header::Tcp, s, hlen)?;
        Ok(Tcp { b, hlen })
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.b.as_ref(), 0)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.b.as_ref(), 2)
    }

    /// Sequence number.
    pub fn seq(&self) -> u32 {
        be32(self.b.as_ref(), 4)
    }

    /// Acknowledgement number.
    pub fn ack(&self) -> u32 {
        be32(self.b.as_ref(), 8)
    }

    /// The flag bits (FIN 0x01, SYN 0x02, RST 0x04, PSH 0x08, ACK 0x10,
    /// URG 0x20, ECE 0x40, CWR 0x80).
    pub fn flags(&self) -> u8 {
        self.b.as_ref()[13]
    }

    /// Header length with options.
    pub fn header_len(&self) -> usize {
        self.hlen
    }

    /// The checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.b.as_ref(), 16)
    }

    /// The checksum the segment (the whole slice) should carry under
    /// `pseudo`.
    pub fn compute_checksum(&self, pseudo: u32) -> u16 {
        l4_checksum(self.b.as_ref(), pseudo, 16)
    }

    /// The payload.
    pub fn payload(&self) -> &[u8] {
        &self.b.as_ref()[self.hlen..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Tcp<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, p: u16) {
        put16(self.b.as_mut(), 0, p);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, p: u16) {
        put16(self.b.as_mut(), 2, p);
    }

    /// Computes and stores the checksum under `pseudo`.
    pub fn fill_checksum(&mut self, pseudo: u32) {
        let c = self.compute_checksum(pseudo);
        put16(self.b.as_mut(), 16, c);
    }

    /// Sets the source port with the checksum updated to match.
    pub fn rewrite_src_port(&mut self, p: u16) {
        self.rewrite(0, &p.to_be_bytes());
    }

    /// Sets the destination port with the checksum updated to match.
    pub fn rewrite_dst_port(&mut self, p: u16) {
        self.rewrite(2, &p.to_be_bytes());
    }

    /// Updates the checksum for an address of the pseudo-header changing
    /// from `old` to `new` (after `Ipv4::rewrite_src` or `rewrite_dst`).
    pub fn rewrite_address(&mut self, old: [u8; 4], new: [u8; 4]) {
        let b = self.b.as_mut();
        let c = checksum_update(be16(b, 16), &old, &new);
        put16(b, 16, c);
    }

    fn rewrite(&mut self, at: usize, new: &[u8; 2]) {
        let b = self.b.as_mut();
        let old = [b[at], b[at + 1]];
        b[at..at + 2].copy_from_slice(new);
        let c = checksum_update(be16(b, 16), &old, new);
        put16(b, 16, c);
    }
}
