//! The backend's device side through its test-support ring
//! (`backend::testing::DeviceRing`, what the `backend_ring` fuzz target
//! drives): a driver's well-formed split and packed descriptors give the
//! frames back byte for byte, and crashes the fuzzer finds become cases
//! here.
use rpmd_pmd::peer::PeerRegionInfo;
use rpmd_pmd::port::Pkts;
use rpmd_pmd::{DmaRegion, IovaMode, Mempool, MempoolConfig, PageSize};
use rpmd_virtio::backend::testing::{DeviceRing, RingOptions};

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

#[test]
fn split_and_packed_tx_frames_come_out_whole_and_rx_frames_go_in() {
    let pool = Mempool::new(&MempoolConfig::new("devring", 256)).unwrap();
    for packed in [false, true] {
        let r = region();
        let base = r.as_ptr() as u64;
        let mut frame = vec![0u8; 12];
        frame.extend((0..200u32).map(|i| i as u8));
        put(&r, BUFS, &frame);
        let mut tx = ring(
            &r,
            RingOptions {
                packed,
                ..Default::default()
            },
        );
        if packed {
            // Driver wrap counter 1: AVAIL set, USED clear; buffer id 5.
            put(&r, 0, &desc(base + BUFS as u64, 212, 5, 1 << 7));
        } else {
            put(&r, 0, &desc(base + BUFS as u64, 212, 0, 0));
            put(&r, 0x2000 + 4, &0u16.to_le_bytes());
            put(&r, 0x2000 + 2, &1u16.to_le_bytes());
        }
        let mut pkts = Pkts::new();
        assert_eq!(tx.dequeue(&pool, &mut pkts, 32), 1, "packed={packed}");
        assert_eq!(pkts[0].data(), &frame[12..]);
        assert_eq!(tx.device_errors(), 0);
        pkts.clear();
        drop(tx);

        // RX: one writable buffer of 2 KiB; the frame lands after a header.
        let r = region();
        let base = r.as_ptr() as u64;
        let mut rx = ring(
            &r,
            RingOptions {
                packed,
                ..Default::default()
            },
        );
        if packed {
            put(&r, 0, &desc(base + BUFS as u64, 2048, 3, 1 << 7 | 2));
        } else {
            put(&r, 0, &desc(base + BUFS as u64, 2048, 2, 0));
            put(&r, 0x2000 + 4, &0u16.to_le_bytes());
            put(&r, 0x2000 + 2, &1u16.to_le_bytes());
        }
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
