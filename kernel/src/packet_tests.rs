//! The packet socket's RX parsing against ring contents a buggy or
//! hostile kernel might leave, with the kernel's side played in a memfd:
//! offsets and lengths outside the slot or block are dropped and counted,
//! never followed, and every slot or block is handed back.
use super::*;
use crate::sys::memfd;
use rpmd_pmd::MempoolConfig;

fn rx(
    v3: bool,
    slots: u32,
    slot: usize,
) -> (PacketRx, Mapping, Arc<CachePadded<QueueStats>>, Mempool) {
    let len = slots as usize * slot * 2;
    let fd = memfd(len);
    let kernel = Mapping::new(fd.as_fd(), len, 0).unwrap();
    let rings = Rings {
        map: Mapping::new(fd.as_fd(), len, 0).unwrap(),
        fd: Arc::new(fd),
        frame_size: if v3 { 2048 } else { slot },
        frames: if v3 {
            slots * slot as u32 / 2048
        } else {
            slots
        },
        hdr: if v3 { V3 } else { V2 },
        v3_blocks: if v3 { slots } else { 0 },
        block_size: slot,
        tx_base: slots as usize * slot,
        tx_mtu: 1500,
    };
    let mut c = MempoolConfig::new(if v3 { "pkt-v3" } else { "pkt-v2" }, 64);
    c.cache_size = 0;
    let pool = Mempool::new(&c).unwrap();
    let stats: Arc<CachePadded<QueueStats>> = Arc::default();
    let live: Live = Arc::new(CachePadded::new(std::sync::atomic::AtomicBool::new(true)));
    let q = PacketRx {
        rings: Arc::new(rings),
        cur: Cursor::default(),
        pool: pool.clone(),
        live,
        stats: stats.clone(),
        stamp: rpmd_pmd::port::RxStamp::new(
            7,
            &rpmd_pmd::PortConfig {
                rx_ptypes: true,
                ..Default::default()
            },
        ),
    };
    (q, kernel, stats, pool)
}

/// Writes a frame header at `at` for version `h` and `len` bytes of
/// frame data at `at + mac`.
fn frame(k: &Mapping, h: &Hdr, at: usize, status: u32, mac: u16, snap: u32, fill: u8) {
    k.write::<u16>(at + h.mac, mac);
    k.write::<u32>(at + h.snaplen, snap);
    let room = k.len().saturating_sub(at + mac as usize).min(snap as usize);
    k.copy_in(at + mac as usize, &vec![fill; room]);
    k.write::<u32>(at + h.status, status);
}

#[test]
fn v2_slots_with_bad_offsets_are_dropped_and_handed_back() {
    let (mut q, k, stats, pool) = rx(false, 4, 2048);
    frame(&k, &V2, 0, TP_STATUS_USER, 64, 60, 1);
    frame(&k, &V2, 2048, TP_STATUS_USER, 2040, 60, 2); // runs past its slot
    frame(&k, &V2, 4096, TP_STATUS_USER, 64, 5, 3); // shorter than Ethernet
    frame(
        &k,
        &V2,
        6144,
        TP_STATUS_USER | TP_STATUS_VLAN_VALID,
        64,
        60,
        4,
    );
    k.write::<u16>(6144 + V2.vlan_tci, 5);
    let mut out = Pkts::new();
    assert_eq!(q.rx_burst(&mut out, 32), 2);
    assert!(out.iter().all(|m| m.port() == 7), "the stamp's port id");
    assert_eq!((out[0].data_len(), out[0].data()[0]), (60, 1));
    // The stripped tag is back: 0x8100, TCI 5, then the rest.
    assert_eq!(out[1].data_len(), 64);
    assert_eq!(&out[1].data()[12..16], &[0x81, 0, 0, 5]);
    assert_eq!(stats.errors.get(), 2);
    for s in 0..4 {
        assert_eq!(
            k.read::<u32>(s * 2048),
            TP_STATUS_KERNEL,
            "slot {s} handed back"
        );
    }
    drop(out);
    drop(q);
    assert_eq!(pool.available(), pool.size());
}

#[test]
fn v3_blocks_with_bad_counts_and_offsets_end_early_and_are_handed_back() {
    let (mut q, k, stats, pool) = rx(true, 2, 4096);
    // Block 0: three frames announced; the second's next offset jumps out
    // of the block, so the third is never read.
    k.write::<u32>(B_NUM_PKTS, 3);
    k.write::<u32>(B_FIRST, 48);
    frame(&k, &V3, 48, 0, 48, 60, 1);
    k.write::<u32>(48, 128);
    frame(&k, &V3, 176, 0, 48, 60, 2);
    k.write::<u32>(176, 100_000);
    k.write::<u32>(B_STATUS, TP_STATUS_USER);
    // Block 1: one frame whose length runs past the block.
    k.write::<u32>(4096 + B_NUM_PKTS, 1);
    k.write::<u32>(4096 + B_FIRST, 48);
    frame(&k, &V3, 4096 + 48, 0, 48, 4000, 3);
    k.write::<u32>(4096 + B_STATUS, TP_STATUS_USER);
    let mut out = Pkts::new();
    let mut got = 0;
    for _ in 0..4 {
        got += q.rx_burst(&mut out, 32);
    }
    assert_eq!(got, 2);
    assert_eq!((out[0].data()[0], out[1].data()[0]), (1, 2));
    assert_eq!(stats.device_errors.get(), 1, "the frame past the block");
    assert_eq!(stats.errors.get(), 1, "the frame longer than its block");
    assert_eq!(k.read::<u32>(B_STATUS), TP_STATUS_KERNEL);
    assert_eq!(k.read::<u32>(4096 + B_STATUS), TP_STATUS_KERNEL);
    drop(out);
    drop(q);
    assert_eq!(pool.available(), pool.size());
}
