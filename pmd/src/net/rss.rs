//! Receive-side scaling: the Toeplitz hash NICs spread flows with, and
//! the key most of them (and DPDK's PMDs) use by default. Drivers program
//! the key into their device; tests and device models compute the hash
//! the device should have given a frame.

/// The 40-byte Toeplitz key of Microsoft's RSS specification, whose
/// verification table the hash below is tested against; DPDK's default
/// for most PMDs.
pub const RSS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// The Toeplitz hash of `input` under `key`: for every set bit of the
/// input, from the first byte's top bit on, the 32 key bits starting at
/// that bit's position are XORed in (bits past the key's end are 0).
pub fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    let bit = |i: usize| key.get(i / 8).map_or(0, |b| (b >> (7 - i % 8)) as u32 & 1);
    let mut window = (0..32).fold(0u32, |w, i| w << 1 | bit(i));
    let mut h = 0;
    for (i, byte) in input.iter().enumerate() {
        for j in 0..8 {
            if byte >> (7 - j) & 1 == 1 {
                h ^= window;
            }
            window = window << 1 | bit(32 + 8 * i + j);
        }
    }
    h
}

/// The hash input of an IPv4 flow: source and destination addresses,
/// then (for TCP and UDP hashing) source and destination ports, all in
/// network order; `ports` None for an address-only hash.
pub fn ipv4_input(src: [u8; 4], dst: [u8; 4], ports: Option<(u16, u16)>) -> Vec<u8> {
    let mut v = [src, dst].concat();
    if let Some((sp, dp)) = ports {
        v.extend_from_slice(&sp.to_be_bytes());
        v.extend_from_slice(&dp.to_be_bytes());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Microsoft's RSS verification suite, IPv4 (the first rows).
    #[test]
    fn toeplitz_matches_the_specifications_verification_table() {
        let key = RSS_KEY;
        // (source, port, destination, port, IP-only hash, with ports)
        type Row = ([u8; 4], u16, [u8; 4], u16, u32, u32);
        let rows: [Row; 3] = [
            (
                [66, 9, 149, 187],
                2794,
                [161, 142, 100, 80],
                1766,
                0x323e_8fc2,
                0x51cc_c178,
            ),
            (
                [199, 92, 111, 2],
                14230,
                [65, 69, 140, 83],
                4739,
                0xd718_262a,
                0xc626_b0ea,
            ),
            (
                [24, 19, 198, 95],
                12898,
                [12, 22, 207, 184],
                38024,
                0xd2d0_a5de,
                0x5c2b_394a,
            ),
        ];
        for (src, sport, dst, dport, ip, tcp) in rows {
            let input = ipv4_input(src, dst, None);
            assert_eq!(toeplitz(&key, &input), ip, "{src:?} -> {dst:?}");
            let input = ipv4_input(src, dst, Some((sport, dport)));
            assert_eq!(
                toeplitz(&key, &input),
                tcp,
                "{src:?}:{sport} -> {dst:?}:{dport}"
            );
        }
    }
}
