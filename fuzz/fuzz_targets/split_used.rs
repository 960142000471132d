//! A split virtqueue as a hostile device leaves it: the driver posts a
//! ring's worth of buffers, then the fuzzer writes the used ring (ids,
//! lengths, the index) however it likes, in several rounds. The queue
//! hands each buffer back at most once, never one it did not post, and
//! with every buffer it holds back in the pool once it is dropped.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rpmd_virtio::driver::split::{Layout, SplitQueue};
use rpmd_virtio::driver::Ring;

#[path = "common.rs"]
mod common;
use common::{memory, Posted, POOL};

fuzz_target!(|data: &[u8]| {
    let [sz, mode, rest @ ..] = data else { return };
    let size = 1u16 << (2 + sz % 5); // 4..=64
    let (region, pool) = memory();
    let layout = Layout::new(size).expect("layout");
    let mut q = SplitQueue::new(region, 0, layout).expect("queue");
    q.set_in_order(mode & 1 == 1);
    q.set_event_idx(mode & 2 == 2);
    let mut posted = Posted::default();
    let fill = |q: &mut SplitQueue, posted: &mut Posted| {
        while q.free() > 0 {
            let (addr, m) = posted.post(pool);
            if let Err(m) = q.push(m, addr, 2048, true) {
                posted.refused(&m);
                break;
            }
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
                    posted.returned(&m);
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
    assert_eq!(
        pool.available(),
        POOL as usize,
        "{handed} handed back; every mbuf home"
    );
});
