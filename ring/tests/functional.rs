//! Functional tests of every mode and operation (DPDK's test_ring.c role).
#![cfg(not(loom))]

use rpmd_ring::{Burst, Error, Hts, Multi, Single, SyncMode, MAX_CAPACITY};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A value that counts its drops, to prove each one is dropped exactly once.
#[derive(Debug)]
struct Tracked {
    id: u64,
    drops: Arc<AtomicUsize>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn bad_capacities_are_typed_errors() {
    assert_eq!(
        rpmd_ring::new::<u8, Multi, Multi>(0).unwrap_err(),
        Error::ZeroCapacity
    );
    assert_eq!(
        rpmd_ring::new::<u8, Multi, Multi>(1000).unwrap_err(),
        Error::NotPowerOfTwo { capacity: 1000 }
    );
    assert_eq!(
        rpmd_ring::new::<u8, Single, Single>(MAX_CAPACITY * 2).unwrap_err(),
        Error::TooLarge {
            capacity: MAX_CAPACITY * 2,
            max: MAX_CAPACITY
        }
    );
    let msg = rpmd_ring::new::<u8, Multi, Multi>(1000)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("power of two") && msg.contains("1024"),
        "{msg}"
    );
    // The smallest ring works and holds one value.
    let (p, c) = rpmd_ring::new::<u8, Single, Single>(1).unwrap();
    assert_eq!(p.enqueue(7), Ok(()));
    assert_eq!(p.enqueue(8), Err(8));
    assert_eq!(c.dequeue(), Some(7));
}

/// The same tests for every mode pair, with indices starting at `start`.
fn single_ops<P: SyncMode, C: SyncMode>(start: u32) {
    let (p, c) = rpmd_ring::with_start_index::<u64, P, C>(8, start).unwrap();
    assert_eq!(p.capacity(), 8);
    assert!(c.is_empty());
    assert_eq!(c.dequeue(), None);
    for i in 0..8 {
        assert_eq!(p.enqueue(i), Ok(()));
        assert_eq!(p.len(), i as usize + 1);
    }
    // Full: the value comes back.
    assert_eq!(p.enqueue(99), Err(99));
    assert_eq!(p.free(), 0);
    for i in 0..8 {
        assert_eq!(c.dequeue(), Some(i));
    }
    assert_eq!(c.dequeue(), None);
    assert!(p.is_empty());
}

fn wraps_around<P: SyncMode, C: SyncMode>(start: u32) {
    // Odd batch sizes walk the indices across u32::MAX and across the end
    // of the slot array many times; FIFO order must hold throughout.
    let (p, c) = rpmd_ring::with_start_index::<u64, P, C>(16, start).unwrap();
    let (mut next_in, mut next_out) = (0u64, 0u64);
    for round in 0..200u64 {
        let k = (round % 7 + 1) as usize;
        let src: Vec<u64> = (next_in..next_in + k as u64).collect();
        let t = p.enqueue_bulk(&src);
        assert_eq!(t.n, k);
        next_in += k as u64;
        assert_eq!(p.len(), (next_in - next_out) as usize);
        let mut dst = vec![0u64; (round % 5 + 1) as usize];
        let t = c.dequeue_burst(&mut dst);
        for v in &dst[..t.n] {
            assert_eq!(*v, next_out);
            next_out += 1;
        }
        // `left` is a lower bound (it may come from the cached producer
        // tail), exact when the burst came back short.
        let actual = (next_in - next_out) as usize;
        assert!(t.left <= actual, "left {} > {actual}", t.left);
        if t.n < dst.len() {
            assert_eq!((t.left, actual), (0, 0));
        }
        while next_in - next_out > 8 {
            assert_eq!(c.dequeue(), Some(next_out));
            next_out += 1;
        }
    }
    while let Some(v) = c.dequeue() {
        assert_eq!(v, next_out);
        next_out += 1;
    }
    assert_eq!(next_in, next_out);
}

fn bulk_vs_burst<P: SyncMode, C: SyncMode>(start: u32) {
    let (p, c) = rpmd_ring::with_start_index::<u32, P, C>(8, start).unwrap();
    // Bulk: all or nothing, with the free space after the call.
    assert_eq!(p.enqueue_bulk(&[1, 2, 3, 4, 5]).n, 5);
    let t = p.enqueue_bulk(&[6, 7, 8, 9, 10]);
    assert_eq!((t.n, t.left), (0, 3));
    assert_eq!(p.len(), 5);
    // Burst: as many as fit.
    let t = p.enqueue_burst(&[6, 7, 8, 9, 10]);
    assert_eq!((t.n, t.left), (3, 0));
    // A bulk larger than the capacity can never succeed.
    let (p2, c2) = rpmd_ring::with_start_index::<u32, P, C>(8, start).unwrap();
    assert_eq!(p2.enqueue_bulk(&[0; 9]).n, 0);
    assert!(c2.is_empty());
    // A burst larger than the capacity fills the ring.
    assert_eq!(p2.enqueue_burst(&[0; 20]).n, 8);
    drop((p2, c2));

    let mut big = [0u32; 9];
    let t = c.dequeue_bulk(&mut big);
    assert_eq!((t.n, t.left), (0, 8));
    let mut three = [0u32; 3];
    let t = c.dequeue_bulk(&mut three);
    assert_eq!((t.n, t.left), (3, 5));
    assert_eq!(three, [1, 2, 3]);
    let mut ten = [0u32; 10];
    let t = c.dequeue_burst(&mut ten);
    assert_eq!((t.n, t.left), (5, 0));
    assert_eq!(&ten[..5], &[4, 5, 6, 7, 8]);
    let t = c.dequeue_burst(&mut ten);
    assert_eq!((t.n, t.left), (0, 0));
    let t = c.dequeue_bulk(&mut ten[..0]);
    assert_eq!(t.n, 0);
}

fn owned_bursts<P: SyncMode, C: SyncMode>(start: u32) {
    let drops = Arc::new(AtomicUsize::new(0));
    let mk = |id| Tracked {
        id,
        drops: drops.clone(),
    };
    {
        let (p, c) = rpmd_ring::with_start_index::<Tracked, P, C>(4, start).unwrap();
        let mut b: Burst<Tracked, 8> = Burst::new();
        for i in 0..6 {
            b.push(mk(i)).unwrap();
        }
        // Bulk of 6 into 4 slots: nothing moves.
        assert_eq!(p.enqueue_bulk_from(&mut b).n, 0);
        assert_eq!(b.len(), 6);
        // Burst: 4 move, 2 stay at the front of the burst, in order.
        let t = p.enqueue_burst_from(&mut b);
        assert_eq!((t.n, t.left), (4, 0));
        assert_eq!(b.iter().map(|t| t.id).collect::<Vec<_>>(), vec![4, 5]);
        assert_eq!(drops.load(Ordering::SeqCst), 0);

        let mut out: Burst<Tracked, 8> = Burst::new();
        // out has 6 free slots; bulk of 7 cannot fit in `out`.
        out.push(mk(100)).unwrap();
        out.push(mk(101)).unwrap();
        assert_eq!(c.dequeue_bulk_into(&mut out, 7).n, 0);
        assert_eq!(c.dequeue_bulk_into(&mut out, 3).n, 3);
        assert_eq!(
            out.iter().map(|t| t.id).collect::<Vec<_>>(),
            vec![100, 101, 0, 1, 2]
        );
        let first = out.pop().unwrap();
        assert_eq!(first.id, 100);
        drop(first);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        // Room for 4 (8 - 4 held), ring holds 1: burst gets 1.
        let t = c.dequeue_burst_into(&mut out, 8);
        assert_eq!((t.n, t.left), (1, 0));
        assert_eq!(out.last().unwrap().id, 3);
        // Refill the ring and leave values in it for the drop check.
        assert_eq!(p.enqueue_bulk_from(&mut b).n, 2);
        assert!(b.is_empty());
        assert_eq!(p.enqueue(mk(200)).map_err(|t| t.id), Ok(()));
        assert_eq!(c.len(), 3);
        // Dropping `out` (5 values) and the ring (3 values).
    }
    // 6 + 2 + 1 values were made; each dropped exactly once.
    assert_eq!(drops.load(Ordering::SeqCst), 9);
}

#[test]
fn a_drained_burst_yields_in_order_and_drops_what_is_left_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mk = |id| Tracked {
        id,
        drops: drops.clone(),
    };
    let mut b: Burst<Tracked, 8> = Burst::new();
    for i in 0..6 {
        b.push(mk(i)).unwrap();
    }
    drop(b.pop());
    let mut d = b.drain();
    assert_eq!(d.len(), 5);
    assert_eq!(d.next().map(|t| t.id), Some(1));
    assert_eq!(d.next().map(|t| t.id), Some(2));
    drop(d);
    assert!(b.is_empty());
    assert_eq!(drops.load(Ordering::SeqCst), 6, "each value dropped once");
    // Refilled after a drain: from the front again.
    b.push(mk(7)).unwrap();
    assert_eq!(b.drain().map(|t| t.id).collect::<Vec<_>>(), vec![7]);
    std::mem::forget(b.drain());
    assert_eq!(drops.load(Ordering::SeqCst), 7);
}

fn drop_remaining<P: SyncMode, C: SyncMode>(start: u32) {
    let drops = Arc::new(AtomicUsize::new(0));
    let (p, c) = rpmd_ring::with_start_index::<Tracked, P, C>(8, start).unwrap();
    for id in 0..20 {
        let v = Tracked {
            id,
            drops: drops.clone(),
        };
        if let Err(v) = p.enqueue(v) {
            // Full: the value came back; drop one from the ring to make room.
            drop(c.dequeue().unwrap());
            assert!(p.enqueue(v).is_ok());
        }
    }
    assert_eq!(drops.load(Ordering::SeqCst), 12);
    drop(p);
    assert_eq!(drops.load(Ordering::SeqCst), 12, "consumer still alive");
    drop(c);
    assert_eq!(drops.load(Ordering::SeqCst), 20);
}

/// Every batch length from 1 to 20 (one value, the copy loop's runs of
/// four and their remainders, and past 16 pointers the `memcpy` path)
/// starting at every slot of the array, so that each length is also split
/// at every point by the end of the array.
#[test]
fn every_length_at_every_offset() {
    for start in (0..32u32).chain([u32::MAX - 9]) {
        for len in 1..=20usize {
            let (p, c) = rpmd_ring::with_start_index::<u64, Single, Single>(32, start).unwrap();
            let src: Vec<u64> = (0..len as u64).map(|v| v * 3 + 1).collect();
            assert_eq!(p.enqueue_bulk(&src).n, len);
            let mut dst = vec![0u64; len];
            assert_eq!(c.dequeue_bulk(&mut dst).n, len, "start {start} len {len}");
            assert_eq!(dst, src, "start {start} len {len}");
            // Wide elements and owned values through the same paths.
            let (p, c) =
                rpmd_ring::with_start_index::<[u64; 2], Single, Single>(32, start).unwrap();
            let src: Vec<[u64; 2]> = (0..len as u64).map(|v| [v, !v]).collect();
            assert_eq!(p.enqueue_bulk(&src).n, len);
            let mut dst = vec![[0u64; 2]; len];
            assert_eq!(c.dequeue_bulk(&mut dst).n, len);
            assert_eq!(dst, src, "start {start} len {len}");
            let (p, c) = rpmd_ring::with_start_index::<String, Single, Single>(32, start).unwrap();
            let mut b = Burst::<String, 32>::new();
            for v in 0..len {
                b.push(v.to_string()).unwrap();
            }
            assert_eq!(p.enqueue_bulk_from(&mut b).n, len);
            assert_eq!(c.dequeue_bulk_into(&mut b, len).n, len);
            let got: Vec<String> = std::iter::from_fn(|| b.pop()).collect();
            let want: Vec<String> = (0..len).map(|v| v.to_string()).collect();
            assert_eq!(got, want, "start {start} len {len}");
        }
    }
}

macro_rules! for_modes {
    ($($name:ident: $p:ty, $c:ty;)*) => {$(
        mod $name {
            use super::*;
            const STARTS: [u32; 3] = [0, u32::MAX - 2, u32::MAX / 2 + 1];
            #[test] fn single_ops() { for s in STARTS { super::single_ops::<$p, $c>(s) } }
            #[test] fn wraps_around() { for s in STARTS { super::wraps_around::<$p, $c>(s) } }
            #[test] fn bulk_vs_burst() { for s in STARTS { super::bulk_vs_burst::<$p, $c>(s) } }
            #[test] fn owned_bursts() { for s in STARTS { super::owned_bursts::<$p, $c>(s) } }
            #[test] fn drop_remaining() { for s in STARTS { super::drop_remaining::<$p, $c>(s) } }
        }
    )*};
}

for_modes! {
    spsc: Single, Single;
    mpmc: Multi, Multi;
    spmc: Single, Multi;
    mpsc: Multi, Single;
    hts: Hts, Hts;
    hts_sc: Hts, Single;
    sp_hts: Single, Hts;
}

#[test]
fn zero_copy_enqueue_partial_commit() {
    fn run<P: rpmd_ring::ZeroCopyMode>() {
        let (mut p, c) = rpmd_ring::with_start_index::<String, P, Single>(8, u32::MAX - 1).unwrap();
        {
            let mut z = p.enqueue_zc_burst(5);
            assert_eq!(z.len(), 5);
            z.push("a".into()).unwrap();
            z.push("b".into()).unwrap();
            z.commit(); // publishes 2, gives 3 back
        }
        assert_eq!(c.len(), 2);
        assert!(p.enqueue_zc_bulk(7).is_none());
        {
            let mut z = p.enqueue_zc_bulk(6).unwrap();
            for s in ["c", "d", "e", "f", "g", "h"] {
                z.push(s.into()).unwrap();
            }
            assert_eq!(z.push("x".into()), Err("x".to_string()));
            // dropped: commits all six
        }
        let z = p.enqueue_zc_burst(3);
        assert!(z.is_empty());
        drop(z);
        let all: Vec<String> = std::iter::from_fn(|| c.dequeue()).collect();
        assert_eq!(all, ["a", "b", "c", "d", "e", "f", "g", "h"]);
        // A reservation dropped with nothing written publishes nothing.
        drop(p.enqueue_zc_burst(4));
        assert!(c.is_empty());
        assert_eq!(p.enqueue("z".into()), Ok(()));
        assert_eq!(c.dequeue().as_deref(), Some("z"));
    }
    run::<Single>();
    run::<Hts>();
}

#[test]
fn zero_copy_dequeue_in_place() {
    fn run<C: rpmd_ring::ZeroCopyMode>() {
        let drops = Arc::new(AtomicUsize::new(0));
        let (p, mut c) = rpmd_ring::with_start_index::<Tracked, Single, C>(8, 5).unwrap();
        for id in 0..8 {
            p.enqueue(Tracked {
                id,
                drops: drops.clone(),
            })
            .unwrap();
        }
        // Consume 6 and add 6: the data now straddles the end of the array.
        for _ in 0..6 {
            drop(c.dequeue());
        }
        for id in 8..14 {
            p.enqueue(Tracked {
                id,
                drops: drops.clone(),
            })
            .unwrap();
        }
        assert_eq!(drops.load(Ordering::SeqCst), 6);
        {
            let mut z = c.dequeue_zc_bulk(5).unwrap();
            let (a, b) = z.as_slices();
            let ids: Vec<u64> = a.iter().chain(b).map(|t| t.id).collect();
            assert_eq!(ids, [6, 7, 8, 9, 10]);
            assert_eq!(z.get(1).unwrap().id, 7);
            assert!(z.get(5).is_none());
            let t = z.take().unwrap();
            assert_eq!(t.id, 6);
            drop(t);
            z.commit(); // only the taken one leaves the ring
        }
        assert_eq!(c.len(), 7);
        assert!(c.dequeue_zc_bulk(8).is_none());
        {
            let z = c.dequeue_zc_burst(100);
            assert_eq!(z.len(), 7);
            z.commit_n(3); // 7, 8, 9 dropped in place
        }
        assert_eq!(drops.load(Ordering::SeqCst), 10);
        assert_eq!(c.dequeue().unwrap().id, 10);
        drop((p, c));
        assert_eq!(drops.load(Ordering::SeqCst), 14);
    }
    run::<Single>();
    run::<Hts>();
}

#[test]
fn handles_debug_and_len() {
    let (p, c) = rpmd_ring::new::<u8, Hts, Multi>(32).unwrap();
    let p2 = p.clone();
    let c2 = c.clone();
    p2.enqueue(1).unwrap();
    assert_eq!(c2.len(), 1);
    let s = format!("{p:?} {c:?}");
    assert!(
        s.contains("hts") && s.contains("multi") && s.contains("len: 1"),
        "{s}"
    );
}

#[test]
fn uninit_dequeue_fills_a_burst_in_place() {
    use rpmd_ring::{Burst, Single};
    let (p, c) = rpmd_ring::new::<String, Single, Single>(8).unwrap();
    for i in 0..2 {
        p.enqueue(i.to_string()).unwrap();
    }
    let mut b: Burst<String, 4> = Burst::new();
    b.push("x".into()).unwrap();
    assert_eq!(b.pop().as_deref(), Some("x"));
    b.push("y".into()).unwrap();
    // A bulk of 3 (the spare slots) with 2 in the ring: nothing moves.
    let spare = b.spare_capacity_mut();
    assert_eq!(spare.len(), 3);
    assert_eq!(c.dequeue_bulk_uninit(spare).n, 0);
    for i in 2..5 {
        p.enqueue(i.to_string()).unwrap();
    }
    let spare = b.spare_capacity_mut();
    let t = c.dequeue_bulk_uninit(&mut spare[..2]);
    assert_eq!(t.n, 2);
    assert_eq!(c.len(), 3);
    // SAFETY: the ring initialised the two slots it reported.
    unsafe { b.assume_init_back(2) };
    assert_eq!(&b[..], &["y", "0", "1"]);
    let t = c.dequeue_burst_uninit(b.spare_capacity_mut());
    assert_eq!(t.n, 1);
    // SAFETY: as above.
    unsafe { b.assume_init_back(1) };
    assert_eq!(&b[..], &["y", "0", "1", "2"]);
    // Move two out by hand, then forget them in the burst.
    // SAFETY: the first two values are read out exactly once and forgotten.
    let (a, z) = unsafe { (std::ptr::read(&b[0]), std::ptr::read(&b[1])) };
    // SAFETY: those two were read out above and must not drop again.
    unsafe { b.forget_front(2) };
    assert_eq!((a.as_str(), z.as_str()), ("y", "0"));
    assert_eq!(&b[..], &["1", "2"]);
    assert_eq!(c.len(), 2, "3 and 4 stay in the ring and drop with it");
}

#[test]
fn drop_front_drops_exactly_the_first_n() {
    use rpmd_ring::Burst;
    use std::rc::Rc;
    let token = Rc::new(());
    let mut b: Burst<Rc<()>, 8> = Burst::new();
    for _ in 0..5 {
        b.push(token.clone()).unwrap();
    }
    b.drop_front(2);
    assert_eq!((b.len(), Rc::strong_count(&token)), (3, 4));
    b.drop_front(10);
    assert_eq!((b.len(), Rc::strong_count(&token)), (0, 1));
    b.push(token.clone()).unwrap();
    assert_eq!(b.len(), 1, "the burst is usable after draining");
    for _ in 0..3 {
        b.push(token.clone()).unwrap();
    }
    b.truncate(5);
    assert_eq!((b.len(), Rc::strong_count(&token)), (4, 5));
    b.truncate(1);
    assert_eq!((b.len(), Rc::strong_count(&token)), (1, 2));
}

/// `push_front` undoes a `pop`, keeps the order whether or not the front
/// slot is free, and refuses a full burst; nothing is dropped twice.
#[test]
fn push_front_puts_a_popped_value_back_in_order() {
    let mut b: Burst<String, 3> = Burst::new();
    assert!(b.push_front("c".into()).is_ok(), "empty: front slot 0");
    b.push("d".into()).unwrap();
    let c = b.pop().unwrap();
    b.push_front(c).unwrap();
    assert_eq!(&b[..], &["c".to_string(), "d".to_string()]);
    // start == 0: the values move back one slot.
    b.push_front("b".into()).unwrap();
    assert_eq!(&b[..], &["b", "c", "d"].map(String::from));
    assert_eq!(b.push_front("a".into()), Err("a".to_string()), "full");
    assert_eq!(b.pop().as_deref(), Some("b"));
    assert_eq!(b.len(), 2);
}
