//! Mempool and mbuf behaviour: counts, bounds, chains, bulk all-or-nothing,
//! cross-thread frees, and pools dropped with mbufs still out.
use rpmd_pmd::mbuf::RX_RSS_HASH;
use rpmd_pmd::{Error, IovaMode, Mbuf, Mempool, MempoolConfig};
use rpmd_ring::Burst;

fn pool(name: &str, size: u32, cache: u32) -> Mempool {
    let mut c = MempoolConfig::new(name, size);
    c.cache_size = cache;
    Mempool::new(&c).unwrap()
}

#[test]
fn every_mbuf_comes_back_and_exhaustion_is_typed() {
    for cache in [0, 16] {
        let p = pool("t-count", 64, cache);
        assert_eq!(p.available(), 64);
        let held: Vec<Mbuf> = (0..64).map(|_| p.get().unwrap()).collect();
        assert_eq!(p.available(), 0);
        match p.get() {
            Err(Error::Exhausted { pool, size, wanted }) => {
                assert_eq!((&*pool, size, wanted), ("t-count", 64, 1));
            }
            other => panic!("expected Exhausted, got {other:?}"),
        }
        let msg = p.get().unwrap_err().to_string();
        assert!(
            msg.contains("t-count") && msg.contains("exhausted"),
            "{msg}"
        );
        drop(held);
        assert_eq!(p.available(), 64, "cache {cache}");
    }
}

#[test]
fn bad_configs_are_errors() {
    let mut c = MempoolConfig::new("t-bad", 0);
    assert!(matches!(Mempool::new(&c), Err(Error::Invalid { .. })));
    c.size = 10;
    c.cache_size = 11;
    assert!(matches!(Mempool::new(&c), Err(Error::Invalid { .. })));
    c.cache_size = 600;
    c.size = 1000;
    assert!(Mempool::new(&c).unwrap_err().to_string().contains("512"));
    c.cache_size = 0;
    c.data_room = 65500;
    assert!(matches!(Mempool::new(&c), Err(Error::Invalid { .. })));
}

#[test]
fn data_bounds_and_addresses() {
    let p = pool("t-data", 8, 0);
    let mut m = p.get().unwrap();
    assert_eq!((m.data_len(), m.headroom(), m.tailroom()), (0, 128, 2048));
    assert_eq!(m.buf_len(), 2176);
    assert_eq!(m.data_iova().raw(), m.buf_iova().raw() + 128);
    assert_eq!(
        p.region().iova_of(m.data().as_ptr()),
        Some(m.data_iova()),
        "data IOVA matches the region's translation"
    );
    m.append(10).unwrap().copy_from_slice(b"0123456789");
    m.prepend(2).unwrap().copy_from_slice(b"ab");
    assert_eq!(m.data(), b"ab0123456789");
    assert_eq!((m.pkt_len(), m.headroom(), m.tailroom()), (12, 126, 2038));
    assert!(m.append(2039).is_none());
    assert!(m.prepend(127).is_none());
    assert!(m.adj(3));
    assert!(m.trim(4));
    assert_eq!(m.data(), b"12345");
    assert!(!m.adj(6) && !m.trim(6));
    // A prefetch is a hint: any offset, even far outside the buffer, is
    // harmless and changes nothing.
    for at in [0, -12, 4096, isize::MIN, isize::MAX] {
        m.prefetch(at);
    }
    assert_eq!(m.data(), b"12345");
    let max = m.buf_len() - m.headroom();
    assert!(m.set_data_len(max) && m.data_len() == max && m.tailroom() == 0);
    assert!(!m.set_data_len(max + 1));
    // A fresh buffer a device filled: 12 header bytes dropped in one step.
    let mut r = p.get().unwrap();
    let room = r.tailroom();
    assert!(!r.set_received(11, 12) && !r.set_received(room + 1, 12));
    assert_eq!(r.data_len(), 0, "unchanged after a refusal");
    assert!(r.set_received(76, 12));
    assert_eq!(
        (r.data_len(), r.pkt_len(), r.headroom()),
        (64, 64, 128 + 12)
    );
    // Bytes just before the data, written in place: the data start and
    // length stay; more than the headroom is refused.
    let head = r.headroom();
    r.before_data_mut(12).unwrap().fill(0xee);
    assert_eq!((r.headroom(), r.data_len()), (head, 64));
    assert!(r.before_data_mut(head + 1).is_none());
    assert_eq!(r.before_data_mut(head).map(|b| b.len()), Some(head));
    assert!(r.prepend(12).is_some_and(|h| h.iter().all(|&b| b == 0xee)));
    assert_eq!(m.data_len(), max);
    m.set_port(3);
    m.set_rss_hash(0xabcd);
    m.set_ol_flags(RX_RSS_HASH);
    drop(m);
    // A re-used mbuf comes back reset.
    let m = p.get().unwrap();
    assert_eq!(
        (m.data_len(), m.headroom(), m.port(), m.ol_flags()),
        (0, 128, u16::MAX, 0)
    );
}

#[test]
fn chains_free_every_segment() {
    let p = pool("t-chain", 8, 4);
    let mut a = p.get().unwrap();
    a.append(3).unwrap().copy_from_slice(b"abc");
    let mut b = p.get().unwrap();
    b.append(2).unwrap().copy_from_slice(b"de");
    let mut c = p.get().unwrap();
    c.append(1).unwrap().copy_from_slice(b"f");
    b.chain(c).unwrap();
    a.chain(b).unwrap();
    assert_eq!((a.nb_segs(), a.pkt_len()), (3, 6));
    let segs: Vec<&[u8]> = a.segments().collect();
    assert_eq!(segs, [&b"abc"[..], b"de", b"f"]);
    assert_eq!(p.available(), 5);
    drop(a);
    assert_eq!(p.available(), 8);
}

#[test]
fn bulk_is_all_or_nothing() {
    let p = pool("t-bulk", 8, 0);
    let mut b: Burst<Mbuf, 8> = Burst::new();
    p.get_bulk(&mut b, 5).unwrap();
    assert_eq!(b.len(), 5);
    let mut more: Burst<Mbuf, 8> = Burst::new();
    assert!(matches!(
        p.get_bulk(&mut more, 4),
        Err(Error::Exhausted { wanted: 4, .. })
    ));
    assert!(more.is_empty());
    assert_eq!(p.available(), 3);
    // No room in the burst: an error, nothing taken.
    assert!(matches!(p.get_bulk(&mut b, 4), Err(Error::Invalid { .. })));
    assert_eq!(p.available(), 3);
    p.put_bulk(&mut b);
    assert!(b.is_empty());
    assert_eq!(p.available(), 8);
}

#[test]
fn put_bulk_sends_foreign_mbufs_home() {
    let (p, q) = (pool("t-home-p", 4, 0), pool("t-home-q", 4, 0));
    let mut b: Burst<Mbuf, 8> = Burst::new();
    p.get_bulk(&mut b, 2).unwrap();
    q.get_bulk(&mut b, 3).unwrap();
    p.put_bulk(&mut b);
    assert_eq!((p.available(), q.available()), (4, 4));
}

/// A chain behind plain mbufs (checked and reset in one pass before it is
/// met): every segment of it goes home, and so do the others, reset.
#[test]
fn put_bulk_sends_a_chain_behind_plain_mbufs_home_whole() {
    let p = pool("t-chain", 8, 0);
    let mut b: Burst<Mbuf, 8> = Burst::new();
    for _ in 0..2 {
        let mut m = p.get().unwrap();
        m.append(40).unwrap();
        b.push(m).unwrap();
    }
    let mut head = p.get().unwrap();
    head.append(10).unwrap();
    let mut tail = p.get().unwrap();
    tail.append(20).unwrap();
    head.chain(tail).unwrap();
    b.push(head).unwrap();
    b.push(p.get().unwrap()).unwrap();
    assert_eq!(p.available(), 3);
    p.put_bulk(&mut b);
    assert!(b.is_empty());
    assert_eq!(p.available(), 8);
    let mut again: Burst<Mbuf, 8> = Burst::new();
    p.get_bulk(&mut again, 8).unwrap();
    assert!(again
        .iter()
        .all(|m| m.data_len() == 0 && m.nb_segs() == 1 && m.pkt_len() == 0));
}

#[test]
fn mbufs_cross_threads_and_nothing_is_lost() {
    let p = pool("t-threads", 1024, 64);
    let (tx, rx) = std::sync::mpsc::sync_channel::<Mbuf>(256);
    let p2 = p.clone();
    let producer = std::thread::spawn(move || {
        let mut b: Burst<Mbuf, 32> = Burst::new();
        // Fewer rounds under Miri, which interprets every step.
        let rounds = if cfg!(miri) { 300 } else { 20_000 };
        for i in 0..rounds {
            if p2.get_bulk(&mut b, 1 + i % 32).is_err() {
                std::thread::yield_now();
                continue;
            }
            while let Some(m) = b.pop() {
                tx.send(m).unwrap();
            }
        }
    });
    // Freed on this thread: into this thread's cache, then the ring.
    let consumer = std::thread::spawn(move || rx.into_iter().count());
    producer.join().unwrap();
    assert!(consumer.join().unwrap() > 0);
    assert_eq!(p.available(), 1024);
}

#[test]
#[cfg_attr(miri, ignore = "leaks the pool on purpose, which Miri reports")]
fn pool_dropped_with_mbufs_out_keeps_them_valid() {
    let p = pool("t-leak", 4, 0);
    let mut m = p.get().unwrap();
    drop(p);
    m.append(4).unwrap().copy_from_slice(b"live");
    assert_eq!(m.data(), b"live");
    drop(m);
}

#[test]
#[cfg_attr(miri, ignore = "mlock and pagemap: system calls Miri lacks")]
fn pa_mode_needs_root_or_says_why() {
    let mut c = MempoolConfig::new("t-pa", 512);
    c.iova_mode = IovaMode::Pa;
    match Mempool::new(&c) {
        Ok(p) => {
            let m = p.get().unwrap();
            assert_ne!(m.buf_iova().raw(), m.data().as_ptr() as u64 - 128);
        }
        Err(e) => {
            let s = e.to_string();
            assert!(s.contains("root") || s.contains("hugepages"), "{s}");
        }
    }
}

#[test]
fn raw_objects_move_untouched_and_find_their_own_pool() {
    use rpmd_pmd::PoolObjs;
    let mk = |name: &str, cache| {
        let mut c = MempoolConfig::new(name, 256);
        c.cache_size = cache;
        Mempool::new(&c).unwrap()
    };
    for cache in [0, 32] {
        let a = mk("raw-a", cache);
        let b = mk("raw-b", cache);
        let mut objs: PoolObjs<64> = PoolObjs::new();
        a.get_objs(&mut objs, 40).unwrap();
        assert!(a.get_objs(&mut objs, 30).is_err(), "room for 24 only");
        // One pool's objects per burst: b may not add to a's.
        let e = b.get_objs(&mut objs, 10).unwrap_err().to_string();
        assert!(e.contains("raw-b") && e.contains("another pool"), "{e}");
        assert_eq!((a.available(), b.available()), (216, 256));
        // Return 20 to a, then the rest through b: they go home to a.
        a.put_objs(&mut objs, 20);
        assert_eq!(objs.len(), 20);
        assert_eq!(a.available(), 236);
        b.put_objs(&mut objs, 100);
        assert!(objs.is_empty());
        assert_eq!((a.available(), b.available()), (256, 256));
        // Empty, the burst takes another pool's objects.
        b.get_objs(&mut objs, 5).unwrap();
        assert_eq!(b.available(), 251);
        drop(objs);
        assert_eq!(b.available(), 256, "dropping the burst returns them");
        // A raw object becomes a fresh mbuf; dropping either returns it.
        let mut objs: PoolObjs<4> = PoolObjs::new();
        a.get_objs(&mut objs, 2).unwrap();
        let m = objs.pop().unwrap().into_mbuf();
        assert_eq!((m.data_len(), m.headroom()), (0, 128));
        drop(m);
        drop(objs.pop());
        assert_eq!(a.available(), 256);
    }
}

#[test]
fn objects_bound_to_a_view_go_back_to_its_pool() {
    let mut c = MempoolConfig::new("bound", 256);
    c.cache_size = 32;
    let p = Mempool::new(&c).unwrap();
    let view = p.local();
    let mut objs = view.objs::<64>();
    objs.get(40).unwrap();
    assert!(objs.get(30).is_err(), "room for 24 only");
    assert_eq!((objs.len(), p.available()), (40, 216));
    objs.put(15);
    assert_eq!((objs.len(), p.available()), (25, 231));
    objs.put(100);
    assert!(objs.is_empty());
    assert_eq!(p.available(), 256);
    // One taken out returns on its own; dropping the rest returns them.
    objs.get(3).unwrap();
    let m = objs.pop().unwrap().into_mbuf();
    assert_eq!(m.headroom(), 128);
    drop(m);
    drop(objs);
    assert_eq!(p.available(), 256);
}

#[test]
fn a_local_view_uses_the_cache_of_its_thread() {
    let mut c = MempoolConfig::new("local", 1024);
    c.cache_size = 64;
    let p = Mempool::new(&c).unwrap();
    let l = p.local();
    let mut b: Burst<rpmd_pmd::Mbuf, 32> = Burst::new();
    l.get_bulk(&mut b, 32).unwrap();
    // The first get refilled this thread's cache: 64 stay cached.
    assert_eq!(p.available(), 1024 - 32);
    l.put_bulk(&mut b);
    assert_eq!(p.available(), 1024);
    let m = l.get().unwrap();
    // Another thread's view has its own cache; both see the same pool.
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut b: Burst<rpmd_pmd::Mbuf, 8> = Burst::new();
            p.local().get_bulk(&mut b, 8).unwrap();
            assert_eq!(p.available(), 1024 - 9);
        });
    });
    drop(m);
    assert_eq!(p.available(), 1024);
}

#[test]
fn buffers_are_found_by_region_offset() {
    // Enough mbufs to span several 2 MiB stretches of the layout.
    let p = pool("locate", 3000, 0);
    let base = p.region().as_ptr() as usize;
    let mut held = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..p.size() {
        let mut m = p.get().unwrap();
        let off = p.slot_of(&m).expect("our own mbuf").buf_offset;
        assert_eq!(off, m.buf_addr() as usize - base);
        let slot = p.buffer_at(off + 300).unwrap();
        assert_eq!((slot.buf_offset, slot.buf_len), (off, p.buf_len()));
        assert!(seen.insert(slot.index) && slot.index < p.size());
        assert!(p
            .buffer_at(off + p.buf_len())
            .is_none_or(|s| s.buf_offset != off));
        // A device-chosen data offset, then the room it must fit.
        assert!(m.set_received_at(256, 60));
        assert_eq!((m.headroom(), m.data_len(), m.pkt_len()), (256, 60, 60));
        assert!(!m.set_received_at(256, p.buf_len() - 255));
        held.push(m);
    }
    // Headers and offsets past the end belong to no buffer.
    let first = p.slot_of(&held[0]).unwrap().buf_offset;
    assert!(held
        .iter()
        .all(|m| p.slot_of(m).unwrap().buf_offset != first - 1));
    assert_eq!(p.buffer_at(p.region().len()), None);
    assert_eq!(p.buffer_at(usize::MAX), None);
    let other = pool("locate-other", 8, 0);
    assert_eq!(other.slot_of(&held[1]), None);
}

#[test]
fn copy_duplicates_data_and_metadata_across_segments() {
    let mut small = MempoolConfig::new("copy-small", 16);
    small.data_room = 100;
    small.cache_size = 0;
    let small = Mempool::new(&small).unwrap();
    let big = pool("copy-big", 16, 0);
    let mut m = big.get().unwrap();
    let data: Vec<u8> = (0..250u32).map(|i| i as u8).collect();
    m.append(250).unwrap().copy_from_slice(&data);
    m.set_port(3);
    m.set_packet_type(0x211);
    m.set_vlan_tci(42);
    let c = m.copy(&small).unwrap();
    assert_eq!(c.nb_segs(), 3, "250 bytes in 100-byte rooms");
    assert_eq!(c.pkt_len(), 250);
    assert_eq!(c.segments().flatten().copied().collect::<Vec<u8>>(), data);
    assert_eq!((c.port(), c.packet_type(), c.vlan_tci()), (3, 0x211, 42));
    // The copy is a copy: the original is untouched by writes to it.
    let mut back = c.copy(&big).unwrap();
    assert_eq!((back.nb_segs(), back.data()), (1, &data[..]));
    back.data_mut()[0] = 0xee;
    assert_eq!(m.data()[0], 0);
    drop((c, back));
    assert_eq!(small.available(), 16);
    // A pool that runs out: an error, and nothing taken.
    let hold: Vec<_> = (0..14).map(|_| small.get().unwrap()).collect();
    assert!(m.copy(&small).is_err());
    assert_eq!(small.available(), 2);
    drop(hold);
    assert_eq!(small.available(), 16);
}
