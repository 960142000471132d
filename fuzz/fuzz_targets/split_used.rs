//! A split virtqueue as a hostile device leaves it: the driver posts a
//! ring's worth of buffers, then the fuzzer writes the used ring (ids,
//! lengths, the index) however it likes, in several rounds. The queue
//! hands each buffer back at most once, never one it did not post, and
//! with every buffer it holds back in the pool once it is dropped.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rpmd_pmd::{DmaRegion, IovaMode, Mempool, MempoolConfig, PageSize};
use rpmd_virtio::split::{Layout, SplitQueue};
use std::collections::HashSet;
use std::sync::OnceLock;

/// Ring memory and a pool, made once (a region per run would make most
/// of the time system calls); every run zeroes the ring and leaves the
/// pool whole.
fn memory() -> &'static (DmaRegion, Mempool) {
    static M: OnceLock<(DmaRegion, Mempool)> = OnceLock::new();
    M.get_or_init(|| {
        let region = DmaRegion::with_page_size("fz-split", 64 << 10, IovaMode::Va, PageSize::Base4K)
            .expect("ring memory");
        let mut pc = MempoolConfig::new("fz-split", 256);
        pc.cache_size = 0;
        (region, Mempool::new(&pc).expect("pool"))
    })
}

fuzz_target!(|data: &[u8]| {
    let [sz, mode, rest @ ..] = data else { return };
    let size = 1u16 << (2 + sz % 5); // 4..=64
    let (region, pool) = memory();
    let layout = Layout::new(size).expect("layout");
    let mut q = SplitQueue::new(region, 0, layout).expect("queue");
    q.set_in_order(mode & 1 == 1);
    q.set_event_idx(mode & 2 == 2);
    let mut posted = HashSet::new();
    let fill = |q: &mut SplitQueue, posted: &mut HashSet<usize>| {
        while q.free() > 0 {
            let m = pool.get().expect("pool has room");
            let (addr, p) = (m.data_iova().raw(), m.buf_addr() as usize);
            if q.push(m, addr, 2048, true).is_err() {
                break;
            }
            posted.insert(p);
        }
        q.publish();
    };
    fill(&mut q, &mut posted);
    let used = region.as_ptr().wrapping_add(layout.used);
    let mut handed = 0usize;
    // Rounds: [n, idx lo, idx hi, then n entries of (id u32, len u32)].
    let mut input = rest;
    while let [n, lo, hi, tail @ ..] = input {
        let n = (*n as usize % (size as usize + 1)).min(tail.len() / 8);
        for i in 0..n {
            let e = &tail[8 * i..8 * i + 8];
            let slot = (i % size as usize) * 8;
            // SAFETY: the used ring's entries lie in the region (the
            // layout's used part: 4 bytes of flags and index, then 8 per
            // entry); the queue reads them only with volatile loads.
            unsafe { std::ptr::copy_nonoverlapping(e.as_ptr(), used.add(4 + slot), 8) };
        }
        // SAFETY: the used index, 2 bytes at offset 2 of the used part.
        unsafe { std::ptr::copy_nonoverlapping([*lo, *hi].as_ptr(), used.add(2), 2) };
        input = &tail[8 * n..];
        for _ in 0..4 * size as usize {
            match q.pop_used() {
                Some(Ok((m, _len))) => {
                    let p = m.buf_addr() as usize;
                    assert!(posted.remove(&p), "a buffer handed back twice, or never posted");
                    handed += 1;
                }
                Some(Err(_)) => {}
                None => break,
            }
        }
        if !q.is_broken() {
            fill(&mut q, &mut posted);
        }
    }
    drop(q);
    assert_eq!(pool.available(), 256, "{handed} handed back; every mbuf home");
});
