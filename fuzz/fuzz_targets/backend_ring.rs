//! The vhost-user backend's device side (split and packed rings) as a
//! hostile driver leaves them: the fuzzer writes descriptors (addresses
//! inside and outside the shared region, lengths, NEXT/WRITE/INDIRECT
//! and packed AVAIL/USED flags, next links and buffer ids) and the avail
//! index, in rounds, and the backend takes frames from them (the guest's
//! TX) or copies frames into them (the guest's RX). It must never touch
//! memory outside the region (every access is checked against the memory
//! table; one that was not would fault here), never hand out a frame
//! longer than its limit, never take more than it was given, and leave
//! every mbuf back in its pool. With the checksum features the buffers
//! hold fuzzed net headers (NEEDS_CSUM offsets, DATA_VALID) and the
//! frames sent carry fuzzed checksum requests and header lengths.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rpmd_pmd::mbuf::{RX_L4_CKSUM_GOOD, TX_IP_CKSUM, TX_TCP_CKSUM, TX_UDP_CKSUM};
use rpmd_pmd::peer::PeerRegionInfo;
use rpmd_pmd::port::Pkts;
use rpmd_pmd::{DmaRegion, IovaMode, Mempool, MempoolConfig, PageSize};
use rpmd_virtio::device::testing::{DeviceRing, RingOptions};
use std::sync::OnceLock;

/// The driver's region: the ring's parts in the first 32 KiB, buffers
/// after them.
const REGION: usize = 256 << 10;
const BUFS: u64 = 0x8000;
const POOL: u32 = 512;

fn memory() -> &'static (DmaRegion, Mempool) {
    static M: OnceLock<(DmaRegion, Mempool)> = OnceLock::new();
    M.get_or_init(|| {
        let region = DmaRegion::with_page_size("fz-be", REGION, IovaMode::Va, PageSize::Base4K)
            .expect("driver memory");
        let mut pc = MempoolConfig::new("fz-be", POOL);
        pc.cache_size = 0;
        (region, Mempool::new(&pc).expect("pool"))
    })
}

/// Writes `bytes` at `off` of the region.
fn put(region: &DmaRegion, off: usize, bytes: &[u8]) {
    assert!(off + bytes.len() <= REGION);
    // SAFETY: inside the region (asserted); the backend reads and writes
    // ring memory only with volatile or atomic accesses, and this run's
    // backend calls are not in progress.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), region.as_ptr().add(off), bytes.len()) };
}

fuzz_target!(|data: &[u8]| {
    let [mode, sz, rest @ ..] = data else { return };
    let num = 1u16 << (2 + sz % 5); // 4..=64
    let opts = RingOptions {
        packed: mode & 1 != 0,
        mrg: mode & 2 != 0,
        event_idx: mode & 4 != 0,
        csum: mode & 16 != 0,
        guest_csum: mode & 32 != 0,
        keep_partial: mode & 64 != 0,
        in_order: mode & 128 != 0,
    };
    let rx = mode & 8 != 0;
    let (region, pool) = memory();
    put(region, 0, &[0u8; BUFS as usize]);
    // The buffers' first 16 KiB: the input's first bytes over and over,
    // so that headers (and the frames after them) vary (a buffer there
    // starts at a multiple of 8, as every fuzzed address does).
    let pattern = &rest[..rest.len().min(96)];
    if !pattern.is_empty() {
        let mut fill = [0u8; 16 << 10];
        for chunk in fill.chunks_mut(pattern.len()) {
            chunk.copy_from_slice(&pattern[..chunk.len()]);
        }
        put(region, BUFS as usize, &fill);
    }
    let base = region.as_ptr() as u64;
    let info = PeerRegionInfo {
        guest_addr: base,
        size: REGION as u64,
        user_addr: base,
        offset: 0,
    };
    // Split: descriptors, avail ring, used ring; packed: descriptors,
    // driver event area, device event area.
    let (desc, avail, used) = (0u64, 0x2000u64, 0x4000u64);
    let Ok(mut ring) = DeviceRing::new(
        region.fd(),
        info,
        num,
        (base + desc, base + avail, base + used),
        opts,
    ) else {
        return;
    };
    let mut idx = 0u16;
    let mut input = rest;
    // Rounds: [count, count descriptor writes of 8 bytes, avail entries
    // count, that many heads, index step].
    while let [cnt, tail @ ..] = input {
        let cnt = (*cnt as usize % (num as usize + 1)).min(tail.len() / 8);
        for w in tail[..8 * cnt].chunks_exact(8) {
            let slot = (w[0] as u16 % num) as usize;
            let flags = u16::from_le_bytes([w[1], w[2]]);
            let len = u16::from_le_bytes([w[3], w[4]]) as u32;
            // Half of the offsets fall past the region's end.
            let addr = base + BUFS + u16::from_le_bytes([w[5], w[6]]) as u64 * 8;
            let next = w[7] as u16 % (num + 2);
            let mut d = [0u8; 16];
            d[..8].copy_from_slice(&addr.to_le_bytes());
            d[8..12].copy_from_slice(&len.to_le_bytes());
            if opts.packed {
                d[12..14].copy_from_slice(&next.to_le_bytes()); // buffer id
                d[14..16].copy_from_slice(&flags.to_le_bytes());
            } else {
                d[12..14].copy_from_slice(&flags.to_le_bytes());
                d[14..16].copy_from_slice(&next.to_le_bytes());
            }
            put(region, desc as usize + 16 * slot, &d);
        }
        let mut rest = &tail[8 * cnt..];
        if !opts.packed {
            let [nav, t @ ..] = rest else { break };
            let nav = (*nav as usize % (num as usize + 1)).min(t.len());
            for (k, h) in t[..nav].iter().enumerate() {
                let at = (idx.wrapping_add(k as u16) % num) as usize;
                let head = (*h as u16 % (num + 2)).to_le_bytes();
                put(region, avail as usize + 4 + 2 * at, &head);
            }
            let [step, t2 @ ..] = &t[nav..] else { break };
            idx = idx.wrapping_add(*step as u16);
            put(region, avail as usize + 2, &idx.to_le_bytes());
            rest = t2;
        }
        input = rest;
        let mut pkts = Pkts::new();
        if rx {
            for k in 0..8usize {
                let Ok(mut m) = pool.get() else { break };
                let len = 60 + (k * 271) % 1900;
                if let Some(b) = m.append(len) {
                    b.fill(k as u8);
                }
                // Checksum requests and header lengths from the input.
                if let Some(&[f, l2, l3]) = pattern.get(3 * k..3 * k + 3) {
                    let flags = [0, TX_TCP_CKSUM, TX_UDP_CKSUM, TX_IP_CKSUM | TX_TCP_CKSUM];
                    let mut ol = flags[f as usize % 4];
                    if f & 4 != 0 {
                        ol |= RX_L4_CKSUM_GOOD;
                    }
                    m.set_ol_flags(ol);
                    m.set_tx_header_lens(l2 as u16, l3 as u16 * 4);
                }
                let _ = pkts.push(m);
            }
            let given = pkts.len();
            let n = ring.enqueue(&mut pkts);
            assert!(n <= given, "took {n} of {given}");
            pkts.clear();
        } else {
            let n = ring.dequeue(pool, &mut pkts, 32);
            assert_eq!(n, pkts.len());
            for m in pkts.iter() {
                let len = m.pkt_len();
                assert!((14..=16 << 10).contains(&len), "a frame of {len} bytes");
            }
            pkts.clear();
        }
        if ring.broken().is_some() {
            break;
        }
    }
    let _ = ring.device_errors();
    drop(ring);
    assert_eq!(pool.available(), POOL as usize, "every mbuf home");
});
