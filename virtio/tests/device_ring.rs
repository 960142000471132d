//! The backend's device side through its test-support ring
//! (`device::testing::DeviceRing`, what the `backend_ring` fuzz target
//! drives): a driver's well-formed split and packed descriptors give the
//! frames back byte for byte, and crashes the fuzzer finds become cases
//! here.
use rpmd_pmd::peer::PeerRegionInfo;
use rpmd_pmd::port::Pkts;
use rpmd_pmd::{DmaRegion, IovaMode, Mempool, MempoolConfig, PageSize};
use rpmd_virtio::device::testing::{DeviceRing, RingOptions};

const REGION: usize = 256 << 10;
const BUFS: usize = 0x8000;

fn region() -> DmaRegion {
    DmaRegion::with_page_size("devring", REGION, IovaMode::Va, PageSize::Base4K).unwrap()
}

fn put(r: &DmaRegion, off: usize, bytes: &[u8]) {
    assert!(off + bytes.len() <= REGION);
    // SAFETY: inside the region; no backend call is in progress.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), r.as_ptr().add(off), bytes.len()) };
}

fn get(r: &DmaRegion, off: usize, len: usize) -> Vec<u8> {
    assert!(off + len <= REGION);
    let mut v = vec![0u8; len];
    // SAFETY: inside the region; no backend call is in progress.
    unsafe { std::ptr::copy_nonoverlapping(r.as_ptr().add(off), v.as_mut_ptr(), len) };
    v
}

fn ring(r: &DmaRegion, opts: RingOptions) -> DeviceRing {
    let base = r.as_ptr() as u64;
    let info = PeerRegionInfo {
        guest_addr: base,
        size: REGION as u64,
        user_addr: base,
        offset: 0,
    };
    DeviceRing::new(r.fd(), info, 8, (base, base + 0x2000, base + 0x4000), opts).unwrap()
}

fn desc(addr: u64, len: u32, a: u16, b: u16) -> [u8; 16] {
    let mut d = [0u8; 16];
    d[..8].copy_from_slice(&addr.to_le_bytes());
    d[8..12].copy_from_slice(&len.to_le_bytes());
    d[12..14].copy_from_slice(&a.to_le_bytes());
    d[14..16].copy_from_slice(&b.to_le_bytes());
    d
}

/// A ring whose driver made one buffer of `len` bytes available at
/// `BUFS`: device-writable for RX (`writable`; packed buffer id 3), or
/// a frame with its net header for TX (packed buffer id 5).
fn ring_with_one_buffer(r: &DmaRegion, packed: bool, len: u32, writable: bool) -> DeviceRing {
    let base = r.as_ptr() as u64;
    let q = ring(
        r,
        RingOptions {
            packed,
            ..Default::default()
        },
    );
    let write = if writable { 2 } else { 0 };
    if packed {
        // Driver wrap counter 1: AVAIL set, USED clear.
        let id = if writable { 3 } else { 5 };
        put(r, 0, &desc(base + BUFS as u64, len, id, 1 << 7 | write));
    } else {
        put(r, 0, &desc(base + BUFS as u64, len, write, 0));
        put(r, 0x2000 + 4, &0u16.to_le_bytes());
        put(r, 0x2000 + 2, &1u16.to_le_bytes());
    }
    q
}

/// A TX ring with one frame of `len` bytes (header included) to take.
fn tx_ring_with_one_buffer(r: &DmaRegion, packed: bool, len: u32) -> DeviceRing {
    ring_with_one_buffer(r, packed, len, false)
}

/// An RX ring whose driver made one writable buffer of 2 KiB available.
fn rx_ring_with_one_buffer(r: &DmaRegion, packed: bool) -> DeviceRing {
    ring_with_one_buffer(r, packed, 2048, true)
}

#[test]
fn split_and_packed_tx_frames_come_out_whole_and_rx_frames_go_in() {
    let pool = Mempool::new(&MempoolConfig::new("devring", 256)).unwrap();
    for packed in [false, true] {
        let r = region();
        let mut frame = vec![0u8; 12];
        frame.extend((0..200u32).map(|i| i as u8));
        put(&r, BUFS, &frame);
        let mut tx = tx_ring_with_one_buffer(&r, packed, 212);
        let mut pkts = Pkts::new();
        assert_eq!(tx.dequeue(&pool, &mut pkts, 32), 1, "packed={packed}");
        assert_eq!(pkts[0].data(), &frame[12..]);
        assert_eq!(tx.device_errors(), 0);
        pkts.clear();
        drop(tx);

        // RX: one writable buffer of 2 KiB; the frame lands after a header.
        let r = region();
        let mut rx = rx_ring_with_one_buffer(&r, packed);
        let mut m = pool.get().unwrap();
        m.append(100).unwrap().fill(0xab);
        pkts.push(m).unwrap();
        assert_eq!(rx.enqueue(&mut pkts), 1, "packed={packed}");
        pkts.clear();
        assert_eq!(get(&r, BUFS + 12, 100), vec![0xab; 100]);
        assert!(rx.broken().is_none());
    }
    assert_eq!(pool.available(), 256, "every mbuf home");
}

/// A driver's TX buffers too short for a net header and an Ethernet
/// header (the header only, and 13 frame bytes after it) are the
/// driver's errors, dropped and counted, as Linux's tun refuses them
/// from vhost-net; 14 bytes go through. Split and packed.
#[test]
fn runts_from_the_driver_are_its_errors() {
    let pool = Mempool::new(&MempoolConfig::new("devring-runt", 256)).unwrap();
    for packed in [false, true] {
        // Buffer lengths: header + 0, header + 13, header + 14.
        for (len, whole) in [(12u32, false), (25, false), (26, true)] {
            let r = region();
            put(&r, BUFS, &[0x5a; 64]);
            let mut tx = tx_ring_with_one_buffer(&r, packed, len);
            let mut pkts = Pkts::new();
            let got = tx.dequeue(&pool, &mut pkts, 32);
            assert_eq!(got, whole as usize, "packed={packed} len={len}");
            assert_eq!(
                tx.device_errors(),
                !whole as u64,
                "packed={packed} len={len}"
            );
            assert!(tx.broken().is_none(), "a runt does not break the ring");
        }
    }
    assert_eq!(pool.available(), 256, "every mbuf home");
}

/// The net header in front of a frame given to the driver is the right
/// one whatever its buffer held before: bytes of another header (written
/// over), or the same header (the backend then leaves it as it is).
#[test]
fn a_net_header_is_right_whatever_the_buffer_held() {
    let pool = Mempool::new(&MempoolConfig::new("devring-hdr", 256)).unwrap();
    let mut want = [0u8; 12];
    want[10] = 1; // num_buffers
    for packed in [false, true] {
        for held in [[0xffu8; 12], want] {
            let r = region();
            put(&r, BUFS, &held);
            let mut rx = rx_ring_with_one_buffer(&r, packed);
            let mut pkts = Pkts::new();
            let mut m = pool.get().unwrap();
            m.append(60).unwrap().fill(0x5a);
            pkts.push(m).unwrap();
            assert_eq!(rx.enqueue(&mut pkts), 1, "packed={packed}");
            pkts.clear();
            assert_eq!(get(&r, BUFS, 12), want, "packed={packed} held={held:?}");
            assert_eq!(get(&r, BUFS + 12, 60), vec![0x5a; 60]);
        }
    }
    assert_eq!(pool.available(), 256, "every mbuf home");
}

/// A packed ring's batched path (four one-descriptor chains tested and
/// taken together) and the single path give the same frames, ids and
/// drops: a line of four, then a chain of two, a single, a slot not yet
/// available; then a line of four whose third breaks the batch's rule (a
/// device-writable buffer in a TX ring), which goes the single way and is
/// dropped alone. The same lines of writable buffers take frames in order.
#[test]
fn packed_batches_of_four_take_what_the_single_path_would() {
    let pool = Mempool::new(&MempoolConfig::new("devring-b4", 256)).unwrap();
    let r = region();
    let base = r.as_ptr() as u64;
    let frame = |k: usize| {
        let mut f = vec![0u8; 12];
        f.extend(std::iter::repeat_n(k as u8 + 1, 60));
        f
    };
    let buf = |k: usize| BUFS + 256 * k;
    for k in 0..8 {
        put(&r, buf(k), &frame(k));
    }
    let avail = 1u16 << 7; // wrap counter 1: AVAIL set, USED clear
    let post = |slot: usize, k: usize, len: u32, flags: u16| {
        put(
            &r,
            16 * slot,
            &desc(base + buf(k) as u64, len, 10 + k as u16, flags),
        );
    };
    let mut tx = ring(
        &r,
        RingOptions {
            packed: true,
            ..Default::default()
        },
    );
    for k in 0..4 {
        post(k, k, 72, avail);
    }
    // A chain of two (header, then the frame), a single, then slot 7
    // still the driver's.
    put(&r, 16 * 4, &desc(base + buf(4) as u64, 12, 0, avail | 1));
    put(&r, 16 * 5, &desc(base + buf(4) as u64 + 12, 60, 14, avail));
    post(6, 6, 72, avail);
    let mut pkts = Pkts::new();
    assert_eq!(tx.dequeue(&pool, &mut pkts, 32), 6);
    let got: Vec<Vec<u8>> = pkts.iter().map(|m| m.data().to_vec()).collect();
    let want: Vec<Vec<u8>> = [0, 1, 2, 3, 4, 6]
        .iter()
        .map(|&k| frame(k)[12..].to_vec())
        .collect();
    assert_eq!(got, want);
    pkts.clear();
    // Used descriptors in each chain's first slot, ids in order.
    for (slot, id) in [(0, 10), (1, 11), (2, 12), (3, 13), (4, 14), (6, 16)] {
        let d = get(&r, 16 * slot, 16);
        assert_eq!(u16::from_le_bytes([d[12], d[13]]), id, "slot {slot}");
        assert_eq!(
            u16::from_le_bytes([d[14], d[15]]) & (1 << 7 | 1 << 15),
            1 << 7 | 1 << 15
        );
    }
    assert_eq!(tx.device_errors(), 0);
    drop(tx);

    let mut tx = ring(
        &r,
        RingOptions {
            packed: true,
            ..Default::default()
        },
    );
    for k in 0..4 {
        post(k, k, 72, if k == 2 { avail | 2 } else { avail });
    }
    assert_eq!(tx.dequeue(&pool, &mut pkts, 32), 3);
    assert_eq!(pkts[2].data(), &frame(3)[12..]);
    assert_eq!(tx.device_errors(), 1);
    pkts.clear();
    drop(tx);

    let mut rx = ring(
        &r,
        RingOptions {
            packed: true,
            ..Default::default()
        },
    );
    for k in 0..8 {
        post(k, k, 256, avail | 2);
    }
    for k in 0..6u8 {
        let mut m = pool.get().unwrap();
        m.append(50).unwrap().fill(0x40 + k);
        pkts.push(m).unwrap();
    }
    assert_eq!(rx.enqueue(&mut pkts), 6);
    pkts.clear();
    for k in 0..6 {
        assert_eq!(
            get(&r, buf(k) + 12, 50),
            vec![0x40 + k as u8; 50],
            "buffer {k}"
        );
        let d = get(&r, 16 * k, 16);
        assert_eq!(u16::from_le_bytes([d[12], d[13]]), 10 + k as u16);
        assert_eq!(u32::from_le_bytes(d[8..12].try_into().unwrap()), 62);
    }
    assert!(rx.broken().is_none());
    drop(rx);
    assert_eq!(pool.available(), 256, "every mbuf home");
}

/// With IN_ORDER a packed TX burst is completed by one used descriptor
/// in its first slot naming its last buffer (§2.8.20); the other slots
/// are left as the driver wrote them.
#[test]
fn an_in_order_packed_tx_burst_is_completed_with_one_used_descriptor() {
    let pool = Mempool::new(&MempoolConfig::new("devring-io", 256)).unwrap();
    let r = region();
    let base = r.as_ptr() as u64;
    let mut frame = vec![0u8; 12];
    frame.extend([7u8; 60]);
    let avail = 1u16 << 7;
    for k in 0..6 {
        put(&r, BUFS + 256 * k, &frame);
        put(
            &r,
            16 * k,
            &desc(base + (BUFS + 256 * k) as u64, 72, 20 + k as u16, avail),
        );
    }
    let opts = RingOptions {
        packed: true,
        in_order: true,
        ..Default::default()
    };
    let mut tx = ring(&r, opts);
    let mut pkts = Pkts::new();
    assert_eq!(tx.dequeue(&pool, &mut pkts, 32), 6);
    assert!(pkts.iter().all(|m| m.data() == &frame[12..]));
    pkts.clear();
    let flags = |slot: usize| {
        let d = get(&r, 16 * slot, 16);
        (
            u16::from_le_bytes([d[12], d[13]]),
            u16::from_le_bytes([d[14], d[15]]),
        )
    };
    assert_eq!(
        flags(0),
        (25, avail | 1 << 15),
        "one used descriptor, the last id"
    );
    for slot in 1..6 {
        assert_eq!(
            flags(slot),
            (20 + slot as u16, avail),
            "slot {slot} as posted"
        );
    }
    drop(tx);
    assert_eq!(pool.available(), 256, "every mbuf home");
}

// Checksum offloads (`crate::offload` through the rings).

use rpmd_pmd::mbuf::{RX_L4_CKSUM_GOOD, RX_L4_CKSUM_NONE, TX_IP_CKSUM, TX_TCP_CKSUM, TX_UDP_CKSUM};
use rpmd_pmd::net::{fold, ones_sum, pseudo_header_sum};

/// An Ethernet/IPv4 frame with a TCP or UDP header and `payload` bytes,
/// as a sender that leaves its checksums to the device has it: the IPv4
/// checksum zero, the L4 one holding the pseudo-header sum.
fn partial_frame(tcp: bool, payload: usize) -> Vec<u8> {
    let l4 = if tcp { 20 } else { 8 };
    let mut f = vec![0u8; 34 + l4 + payload];
    f[..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((20 + l4 + payload) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = if tcp { 6 } else { 17 };
    ip[12..20].copy_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    f[34..38].copy_from_slice(&[0x0f, 0xa0, 0x13, 0x88]);
    if tcp {
        f[46] = 5 << 4;
    } else {
        f[38..40].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
    }
    for (i, b) in f[34 + l4..].iter_mut().enumerate() {
        *b = (i * 7 + 3) as u8;
    }
    let p = pseudo_header_sum(&f[14..34]).unwrap();
    let at = if tcp { 50 } else { 40 };
    f[at..at + 2].copy_from_slice(&p.to_be_bytes());
    f
}

/// Whether the L4 checksum of `f` verifies, and the IPv4 header's.
fn checksums_ok(f: &[u8]) -> (bool, bool) {
    let phdr = pseudo_header_sum(&f[14..34]).unwrap() as u32;
    (
        fold(ones_sum(&f[34..], phdr)) == 0xffff,
        fold(ones_sum(&f[14..34], 0)) == 0xffff,
    )
}

/// A net header with NEEDS_CSUM at (`start`, `off`).
fn needs_csum(start: u16, off: u16) -> [u8; 12] {
    let mut h = [0u8; 12];
    h[0] = 1;
    h[6..8].copy_from_slice(&start.to_le_bytes());
    h[8..10].copy_from_slice(&off.to_le_bytes());
    h
}

/// Posts, on a split ring, one chain per entry of `chains` (buffers as
/// (offset in the region, length)), device-writable if `write`.
fn post_split(r: &DmaRegion, chains: &[&[(usize, u32)]], write: bool) {
    let base = r.as_ptr() as u64;
    let mut slot = 0u16;
    for (k, bufs) in chains.iter().enumerate() {
        put(r, 0x2000 + 4 + 2 * k, &slot.to_le_bytes());
        for (i, &(off, len)) in bufs.iter().enumerate() {
            let next = u16::from(i + 1 < bufs.len());
            let flags = next | if write { 2 } else { 0 };
            put(
                r,
                16 * slot as usize,
                &desc(base + off as u64, len, flags, slot + 1),
            );
            slot += 1;
        }
    }
    put(r, 0x2000 + 2, &(chains.len() as u16).to_le_bytes());
}

fn opts(csum: bool, guest_csum: bool, keep_partial: bool) -> RingOptions {
    RingOptions {
        csum,
        guest_csum,
        keep_partial,
        mrg: true,
        ..Default::default()
    }
}

/// The guest's partial checksums: completed in software by default (in
/// one buffer and in a chain that splits the header and the frame at odd
/// offsets), carried on flagged under the RX offload, ignored without
/// CSUM; offsets outside the frame drop it, its mbufs back in the pool.
#[test]
fn partial_checksums_from_the_guest_are_completed_or_kept() {
    let pool = Mempool::new(&MempoolConfig::new("devring-cs", 256)).unwrap();
    for tcp in [false, true] {
        let f = partial_frame(tcp, 301);
        let off = if tcp { 16 } else { 6 };
        let mut buf = needs_csum(34, off).to_vec();
        buf.extend_from_slice(&f);
        let n = buf.len() as u32;
        let layouts: [&[(usize, u32)]; 2] = [
            &[(BUFS, n)],
            &[(BUFS, 5), (BUFS + 5, 40), (BUFS + 45, n - 45)],
        ];
        for chain in layouts {
            for (csum, keep) in [(true, false), (true, true), (false, false)] {
                let r = region();
                put(&r, BUFS, &buf);
                post_split(&r, &[chain], false);
                let mut tx = ring(&r, opts(csum, false, keep));
                let mut pkts = Pkts::new();
                let case = format!("tcp {tcp}, {} bufs, csum {csum}, keep {keep}", chain.len());
                assert_eq!(tx.dequeue(&pool, &mut pkts, 32), 1, "{case}");
                let m = &pkts[0];
                let data: Vec<u8> = m.segments().flatten().copied().collect();
                let l4 = if tcp { TX_TCP_CKSUM } else { TX_UDP_CKSUM };
                if csum && !keep {
                    assert!(checksums_ok(&data).0, "{case}");
                    assert_eq!(m.ol_flags(), 0, "{case}");
                } else {
                    assert_eq!(data, f, "{case}: as the guest left it");
                    let want = if csum { RX_L4_CKSUM_NONE | l4 } else { 0 };
                    assert_eq!(m.ol_flags(), want, "{case}");
                    if csum {
                        assert_eq!(m.tx_header_lens(), (14, 20), "{case}");
                    }
                }
                pkts.clear();
            }
        }
    }
    // csum_start + csum_offset past the frame: dropped and counted.
    let r = region();
    let mut buf = needs_csum(34, 2000).to_vec();
    buf.extend_from_slice(&partial_frame(false, 40));
    put(&r, BUFS, &buf);
    post_split(&r, &[&[(BUFS, buf.len() as u32)]], false);
    let mut tx = ring(&r, opts(true, false, false));
    let mut pkts = Pkts::new();
    assert_eq!(tx.dequeue(&pool, &mut pkts, 32), 0);
    assert_eq!(tx.errors(), 1);
    drop(tx);
    assert_eq!(pool.available(), 256, "every mbuf home");
}

/// Frames asking for checksums reach a guest without GUEST_CSUM
/// completed on its copy (the mbuf left as it was, for the other ports
/// that may hold it) and one with GUEST_CSUM as NEEDS_CSUM at the L4
/// header; the IPv4 checksum is computed either way; a frame found good
/// is DATA_VALID to a GUEST_CSUM guest. Both through the one-buffer path
/// and through mergeable buffers that split a two-segment frame.
#[test]
fn checksum_requests_reach_the_guest_completed_or_partial() {
    let pool = Mempool::new(&MempoolConfig::new("devring-ct", 256)).unwrap();
    for tcp in [false, true] {
        let f = partial_frame(tcp, 500);
        let l4 = if tcp { TX_TCP_CKSUM } else { TX_UDP_CKSUM };
        for guest_csum in [false, true] {
            for merged in [false, true] {
                let r = region();
                let bufs: Vec<(usize, u32)> = if merged {
                    vec![(BUFS, 301), (BUFS + 0x1000, 2048)]
                } else {
                    vec![(BUFS, 2048)]
                };
                let chains: Vec<&[(usize, u32)]> = bufs.iter().map(std::slice::from_ref).collect();
                post_split(&r, &chains, true);
                let mut rx = ring(&r, opts(true, guest_csum, false));
                let mut m = pool.get().unwrap();
                let cut = if merged { 77 } else { f.len() };
                m.append(cut).unwrap().copy_from_slice(&f[..cut]);
                if merged {
                    let mut tail = pool.get().unwrap();
                    tail.append(f.len() - cut)
                        .unwrap()
                        .copy_from_slice(&f[cut..]);
                    m.chain(tail).unwrap();
                }
                m.set_ol_flags(l4 | TX_IP_CKSUM);
                m.set_tx_header_lens(14, 20);
                let mut pkts = Pkts::new();
                pkts.push(m).unwrap();
                let case = format!("tcp {tcp}, guest_csum {guest_csum}, merged {merged}");
                assert_eq!(rx.enqueue(&mut pkts), 1, "{case}");
                let sent: Vec<u8> = pkts[0].segments().flatten().copied().collect();
                assert_eq!(sent, f, "{case}: the mbuf is left as it was");
                pkts.clear();
                let mut got = get(&r, BUFS, bufs[0].1 as usize);
                if merged {
                    got.extend(get(&r, BUFS + 0x1000, 2048));
                }
                let (h, frame) = (&got[..12], &got[12..12 + f.len()]);
                let (l4_ok, ip_ok) = checksums_ok(frame);
                assert!(ip_ok, "{case}");
                if guest_csum {
                    let off = if tcp { 16u16 } else { 6 };
                    assert_eq!(&h[..10], &needs_csum(34, off)[..10], "{case}");
                    assert_eq!(&frame[34..], &f[34..], "{case}: L4 left partial");
                } else {
                    assert_eq!(h[0], 0, "{case}");
                    assert!(l4_ok, "{case}");
                }
            }
        }
    }
    for guest_csum in [false, true] {
        let r = region();
        post_split(&r, &[&[(BUFS, 2048)]], true);
        let mut rx = ring(&r, opts(true, guest_csum, false));
        let mut m = pool.get().unwrap();
        m.append(60).unwrap().fill(1);
        m.set_ol_flags(RX_L4_CKSUM_GOOD);
        let mut pkts = Pkts::new();
        pkts.push(m).unwrap();
        assert_eq!(rx.enqueue(&mut pkts), 1);
        pkts.clear();
        assert_eq!(
            get(&r, BUFS, 1)[0],
            if guest_csum { 2 } else { 0 },
            "DATA_VALID"
        );
    }
    assert_eq!(pool.available(), 256, "every mbuf home");
}
