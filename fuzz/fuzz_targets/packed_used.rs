//! A packed virtqueue as a hostile device leaves it: the driver posts a
//! ring's worth of buffers, then the fuzzer rewrites descriptors (ids,
//! lengths, the AVAIL/USED flags that carry the wrap counters) however it
//! likes, in several rounds. Each buffer comes back at most once, only
//! buffers that were posted, and all are home once the queue is dropped.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rpmd_virtio::driver::packed::{PackedLayout, PackedQueue};
use rpmd_virtio::driver::Ring;

#[path = "common.rs"]
mod common;
use common::{memory, Posted, POOL};

fuzz_target!(|data: &[u8]| {
    let [sz, mode, rest @ ..] = data else { return };
    let size = 1u16 << (2 + sz % 5); // 4..=64
    let (region, pool) = memory();
    let layout = PackedLayout::new(size).expect("layout");
    let mut q = PackedQueue::new(region, 0, layout).expect("queue");
    q.set_in_order(mode & 1 == 1);
    let mut posted = Posted::default();
    let fill = |q: &mut PackedQueue, posted: &mut Posted| {
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
    let ring = region.as_ptr();
    // Rounds: [n, then n entries of (slot u8, id u16, len u32, flags u16)].
    let mut input = rest;
    while let [n, tail @ ..] = input {
        let n = (*n as usize % (size as usize + 1)).min(tail.len() / 9);
        for i in 0..n {
            let e = &tail[9 * i..9 * i + 9];
            let slot = e[0] as usize % size as usize;
            // A descriptor: addr u64, len u32, id u16, flags u16; the
            // device writes len, id and flags of those it uses.
            let mut d = [0u8; 8];
            d[..4].copy_from_slice(&e[3..7]);
            d[4..6].copy_from_slice(&e[1..3]);
            d[6..8].copy_from_slice(&e[7..9]);
            // SAFETY: descriptor `slot` lies in the ring's first 16 * size
            // bytes, in the region; the queue reads it with volatile and
            // atomic loads.
            unsafe { std::ptr::copy_nonoverlapping(d.as_ptr(), ring.add(16 * slot + 8), 8) };
        }
        input = &tail[9 * n..];
        for _ in 0..4 * size as usize {
            match q.pop_used() {
                Some(Ok((m, _len))) => {
                    posted.returned(&m);
                }
                Some(Err(_)) => {}
                None => break,
            }
        }
        fill(&mut q, &mut posted);
    }
    drop(q);
    assert_eq!(pool.available(), POOL as usize, "every mbuf home");
});
