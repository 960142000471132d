//! The AF_XDP queues against a kernel side played by the test: rings in
//! memfds mapped twice, descriptors written as a buggy or hostile kernel
//! might. Every address and length is checked before an mbuf is handed
//! out or freed, and the pool is whole at the end.
use super::*;
use crate::sys::{memfd, Mapping};
use rpmd_pmd::MempoolConfig;
use std::os::fd::AsFd;

const SIZE: u32 = 64;
const OFF: libc::xdp_ring_offset = libc::xdp_ring_offset {
    producer: 0,
    consumer: 64,
    flags: 128,
    desc: 256,
};
const LEN: usize = 256 + SIZE as usize * ring::DESC_ENTRY;

/// A ring for the queue and the kernel's view of the same memory.
fn ring_pair(entry: usize, producer: bool) -> (XskRing, Mapping) {
    let fd = memfd(LEN);
    let ours = XskRing::new(
        Mapping::new(fd.as_fd(), LEN, 0).unwrap(),
        &OFF,
        SIZE,
        entry,
        producer,
    )
    .unwrap();
    (ours, Mapping::new(fd.as_fd(), LEN, 0).unwrap())
}

fn socket() -> Arc<Socket> {
    Arc::new(Socket {
        fd: memfd(4096),
        graveyard: Default::default(),
        queue: 0,
        prog: None,
        zerocopy: false,
    })
}

fn pool(name: &str, n: u32) -> Mempool {
    let mut c = MempoolConfig::new(name, n);
    c.cache_size = 0;
    Mempool::new(&c).unwrap()
}

fn opts() -> Options {
    Options {
        queue: 0,
        queues: 1,
        mode: None,
        zerocopy: None,
        need_wakeup: true,
        busy_poll_us: 0,
        busy_budget: 64,
    }
}

fn live() -> Live {
    Arc::new(CachePadded::new(std::sync::atomic::AtomicBool::new(true)))
}

/// Plays the kernel's producer: entries `descs` on an RX ring.
fn produce_rx(k: &Mapping, descs: &[(u64, u32)]) {
    for (i, &(addr, len)) in descs.iter().enumerate() {
        let desc = XdpDesc {
            addr,
            len,
            options: 0,
        };
        k.write::<XdpDesc>(256 + i * ring::DESC_ENTRY, desc);
    }
    k.atomic_u32(0).store(descs.len() as u32, Ordering::Release);
}

#[test]
fn rx_hands_out_only_buffers_it_posted_with_lengths_that_fit() {
    let pool = pool("xdp-rx", 256);
    let (fill, kfill) = ring_pair(ring::ADDR_ENTRY, true);
    let (rx, krx) = ring_pair(ring::DESC_ENTRY, false);
    let stats: Arc<CachePadded<QueueStats>> = Arc::default();
    let mut h = XdpRx::new(
        socket(),
        fill,
        rx,
        pool.clone(),
        live(),
        stats.clone(),
        &opts(),
    );
    h.refill();
    let posted = kfill.atomic_u32(0).load(Ordering::Acquire);
    assert_eq!(posted, SIZE, "the whole fill ring is posted");
    let addr = |i: usize| kfill.read::<u64>(256 + i * ring::ADDR_ENTRY);
    // The kernel takes every fill entry, then reports frames.
    kfill.atomic_u32(64).store(posted, Ordering::Release);
    let shift = libc::XSK_UNALIGNED_BUF_OFFSET_SHIFT;
    let region = pool.region().len() as u64;
    produce_rx(
        &krx,
        &[
            (addr(0) + (256 << shift), 60),   // good: offset in the high bits
            (addr(1) + 256, 64),              // good: offset folded in
            (region + 4096, 60),              // outside the UMEM
            (addr(2) - 64, 60),               // in an mbuf header
            (addr(0) + (256 << shift), 60),   // the first buffer again
            (addr(3) + (256 << shift), 5000), // longer than the buffer
            (addr(4) + (2000 << shift), 300), // runs past the buffer's end
            (u64::MAX, 60),                   // nonsense
            (addr(5) + (256 << shift), 4),    // shorter than an Ethernet header
        ],
    );
    let mut out = Pkts::new();
    assert_eq!(h.rx_burst(&mut out, 32), 2);
    assert_eq!((out[0].data_len(), out[0].headroom()), (60, 256));
    assert_eq!((out[1].data_len(), out[1].headroom()), (64, 256));
    assert_eq!(stats.device_errors.get(), 7);
    assert_eq!(
        krx.atomic_u32(64).load(Ordering::Acquire),
        9,
        "every entry consumed"
    );
    // A consumer counter far ahead of what was produced reads as "full",
    // not as free space that would overwrite posted entries.
    kfill
        .atomic_u32(64)
        .store(posted + 100_000, Ordering::Release);
    h.refill();
    drop(out);
    drop(h);
    assert_eq!(
        pool.available(),
        pool.size(),
        "every mbuf back, posted ones too"
    );
}

#[test]
fn tx_sends_from_the_umem_copies_foreign_mbufs_and_checks_completions() {
    let pool = pool("xdp-tx", 64);
    let other = pool_other();
    let (comp, kcomp) = ring_pair(ring::ADDR_ENTRY, false);
    let (tx, ktx) = ring_pair(ring::DESC_ENTRY, true);
    let stats: Arc<CachePadded<QueueStats>> = Arc::default();
    let sock = socket();
    let mut h = XdpTx::new(sock.clone(), comp, tx, pool.clone(), live(), stats.clone());
    let mut b = Pkts::new();
    for (i, p) in [&pool, &pool, &other].into_iter().enumerate() {
        let mut m = p.get().unwrap();
        m.append(60).unwrap().fill(i as u8 + 1);
        b.push(m).ok();
    }
    assert_eq!(h.tx_burst(&mut b), 3);
    assert_eq!(ktx.atomic_u32(0).load(Ordering::Acquire), 3);
    assert_eq!(
        other.available(),
        other.size(),
        "the foreign mbuf was copied and freed"
    );
    let mut addrs = Vec::new();
    for i in 0..3 {
        let XdpDesc {
            addr: a,
            len,
            options,
        } = ktx.read::<XdpDesc>(256 + i * ring::DESC_ENTRY);
        assert_eq!(options, 0, "one buffer a frame");
        assert_eq!(len, 60);
        assert!(
            pool.buffer_at(a as usize).is_some(),
            "desc {i} inside the UMEM"
        );
        let frame = umem_bytes(&pool, a as usize, 60);
        assert!(
            frame.iter().all(|&x| x == i as u8 + 1),
            "desc {i} carries frame {i}"
        );
        addrs.push(a);
    }
    // Completions: two good, one nonsense, one repeated.
    for (i, a) in [addrs[0], 12345678, addrs[1], addrs[1]].iter().enumerate() {
        kcomp.write::<u64>(256 + i * ring::ADDR_ENTRY, *a);
    }
    kcomp.atomic_u32(0).store(4, Ordering::Release);
    assert_eq!(h.in_flight(), 1);
    assert_eq!(stats.device_errors.get(), 2);
    assert_eq!(pool.available(), pool.size() - 1);
    // The handle goes with a frame still posted: it is freed only with the
    // socket, once the kernel can no longer read it.
    drop(h);
    assert_eq!(pool.available(), pool.size() - 1);
    drop(sock);
    assert_eq!(pool.available(), pool.size());
}

fn pool_other() -> Mempool {
    pool("xdp-other", 8)
}

/// `len` bytes at UMEM offset `off`, read as the kernel reads them: through
/// a second shared mapping of the pool region's memfd.
fn umem_bytes(pool: &Mempool, off: usize, len: usize) -> Vec<u8> {
    let m = Mapping::new(pool.region().fd(), pool.region().len(), 0).unwrap();
    let mut v = vec![0u8; len];
    m.copy_out(off, &mut v);
    v
}
