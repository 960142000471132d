//! Internet checksums (RFC 1071) for checksum offloads: the pseudo-header
//! sum a sender puts in the L4 checksum field before asking the device to
//! finish it (as DPDK's `rte_ipv4_phdr_cksum`), the IPv4 header checksum,
//! and the full one's-complement sum to check or complete a checksum in
//! software; and [`rss`], the Toeplitz hash receive-side scaling uses.

pub mod rss;

/// One's-complement sum of `bytes` (big-endian 16-bit words, an odd last
/// byte padded with zero) added to `init`, not folded.
pub fn ones_sum(bytes: &[u8], init: u32) -> u32 {
    let mut sum = init as u64;
    let mut words = bytes.chunks_exact(2);
    for w in &mut words {
        sum += u16::from_be_bytes([w[0], w[1]]) as u64;
    }
    if let [b] = words.remainder() {
        sum += (*b as u64) << 8;
    }
    // Fold the carries back so the result fits 32 bits again.
    while sum > 0xffff_ffff {
        sum = (sum & 0xffff_ffff) + (sum >> 32);
    }
    sum as u32
}

/// A checksum `csum` updated for bytes `old` becoming `new` without
/// summing the rest again (RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m')):
/// `old` and `new` are the same even number of bytes, at an even offset
/// of what the checksum covers.
pub fn checksum_update(csum: u16, old: &[u8], new: &[u8]) -> u16 {
    debug_assert!(old.len() == new.len() && old.len() % 2 == 0);
    let mut sum = !csum as u32;
    for (o, n) in old.chunks_exact(2).zip(new.chunks_exact(2)) {
        sum += !u16::from_be_bytes([o[0], o[1]]) as u32;
        sum += u16::from_be_bytes([n[0], n[1]]) as u32;
    }
    !fold(sum)
}

/// Folds a 32-bit one's-complement sum to 16 bits.
pub fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The IPv4 pseudo-header sum (source, destination, protocol, L4 length),
/// folded and not complemented: what goes into the TCP/UDP checksum field
/// of a frame sent with `TX_TCP_CKSUM`/`TX_UDP_CKSUM`.
pub fn pseudo_header_sum(ipv4_header: &[u8]) -> Option<u16> {
    if ipv4_header.len() < 20 {
        return None;
    }
    let ihl = (ipv4_header[0] & 0xf) as usize * 4;
    let total = u16::from_be_bytes([ipv4_header[2], ipv4_header[3]]) as usize;
    let l4_len = total.checked_sub(ihl)?;
    let sum = ones_sum(&ipv4_header[12..20], ipv4_header[9] as u32 + l4_len as u32);
    Some(fold(sum))
}

/// The IPv4 pseudo-header sum without the L4 length (source,
/// destination, protocol), folded and not complemented: what goes into
/// the TCP checksum field of a frame sent with `TX_TCP_SEG`, whose
/// segments' lengths the device adds (DPDK's `rte_ipv4_phdr_cksum` with
/// `RTE_MBUF_F_TX_TCP_SEG`).
pub fn pseudo_header_sum_tso(ipv4_header: &[u8]) -> Option<u16> {
    let addrs = ipv4_header.get(12..20)?;
    Some(fold(ones_sum(addrs, ipv4_header[9] as u32)))
}

/// The checksum of an IPv4 header (its checksum field counted as zero).
pub fn ipv4_header_checksum(ipv4_header: &[u8]) -> u16 {
    let ihl = ((ipv4_header.first().copied().unwrap_or(0) & 0xf) as usize * 4)
        .clamp(20, ipv4_header.len().max(20))
        .min(ipv4_header.len());
    let h = &ipv4_header[..ihl];
    let sum = ones_sum(h, 0);
    // Take the stored checksum back out of the sum.
    let stored = h
        .get(10..12)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .unwrap_or(0);
    let sum = fold(sum) as u32 + (!stored) as u32;
    !fold(sum)
}

/// One's-complement sum, not folded, of the bytes from offset `from` of a
/// frame held in `segments` (in order) as if they were contiguous: a
/// segment that starts at an odd offset of the frame adds its own sum
/// byte-swapped (RFC 1071 §2(B)).
pub fn ones_sum_segments<'a>(segments: impl IntoIterator<Item = &'a [u8]>, from: usize) -> u32 {
    let (mut sum, mut skip, mut odd) = (0u64, from, false);
    for seg in segments {
        if skip >= seg.len() {
            skip -= seg.len();
            continue;
        }
        let part = &seg[skip..];
        skip = 0;
        let s = fold(ones_sum(part, 0));
        sum += if odd { s.swap_bytes() } else { s } as u64;
        odd ^= part.len() % 2 == 1;
    }
    fold((sum & 0xffff_ffff) as u32 + (sum >> 32) as u32) as u32
}

/// The value that completes a partial TCP/UDP checksum: `sum` is the
/// one's-complement sum of the L4 header and payload with the checksum
/// field holding the pseudo-header sum (what a sender leaves for a
/// device to finish). UDP sends a computed zero as 0xffff (RFC 768).
pub fn complete_checksum(sum: u32, udp: bool) -> u16 {
    match !fold(sum) {
        0 if udp => 0xffff,
        c => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sum_over_segments_matches_the_contiguous_one_at_any_split() {
        let frame: Vec<u8> = (0..97u32).map(|i| (i * 37 + 11) as u8).collect();
        for from in [0, 1, 14, 33] {
            let whole = fold(ones_sum(&frame[from..], 0));
            for a in 0..frame.len() {
                for b in [a, a + 1, a + 7].map(|b| b.min(frame.len())) {
                    let segs = [&frame[..a], &frame[a..b], &frame[b..]];
                    let got = fold(ones_sum_segments(segs, from));
                    assert_eq!(got, whole, "from {from}, split at {a} and {b}");
                }
            }
        }
    }

    #[test]
    fn a_completed_udp_zero_is_sent_as_all_ones() {
        assert_eq!(complete_checksum(0xffff, true), 0xffff);
        assert_eq!(complete_checksum(0xffff, false), 0);
        assert_eq!(complete_checksum(0x1234, true), !0x1234);
    }

    // RFC 1071 §3's example words sum to ddf2 (folded).
    #[test]
    fn rfc1071_example() {
        let b = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(ones_sum(&b, 0)), 0xddf2);
    }

    #[test]
    fn ipv4_header_checksum_of_a_known_header() {
        // A header from a capture, checksum 0xb861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(ipv4_header_checksum(&h), 0xb861);
        h[10] = 0;
        h[11] = 0;
        assert_eq!(ipv4_header_checksum(&h), 0xb861);
        assert_eq!(pseudo_header_sum(&h[..4]), None);
    }
}
