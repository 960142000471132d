//! loom model checks of the head/tail protocol (small capacities, 2–3
//! threads). Run with
//! `RUSTFLAGS="--cfg loom" cargo test --release -p rpmd-ring --test loom`.
//! loom explores every interleaving (up to its preemption bound) and the
//! weak-memory behaviours C11 allows; the slots are loom cells, so a slot
//! read racing with a write (a missing or wrong ordering) fails the test.
#![cfg(loom)]

use loom::thread;
use rpmd_ring::{Hts, Multi, Single, SyncMode};

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.max_branches = 100_000;
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b.check(f);
}

/// One producer pushes 3 values through a 2-slot ring (so it wraps and
/// waits for the consumer); the consumer sees them in order.
fn spsc_in_order<P: SyncMode, C: SyncMode>() {
    model(|| {
        let (p, c) = rpmd_ring::with_start_index::<u32, P, C>(2, u32::MAX).unwrap();
        let t = thread::spawn(move || {
            for i in 0..3u32 {
                let mut v = i;
                while let Err(back) = p.enqueue(v) {
                    v = back;
                    thread::yield_now();
                }
            }
        });
        let mut got = Vec::new();
        while got.len() < 3 {
            match c.dequeue() {
                Some(v) => got.push(v),
                None => thread::yield_now(),
            }
        }
        t.join().unwrap();
        assert_eq!(got, [0, 1, 2]);
    });
}

#[test]
fn spsc_single() {
    spsc_in_order::<Single, Single>();
}

#[test]
fn mpmc_as_spsc() {
    spsc_in_order::<Multi, Multi>();
}

#[test]
fn hts_as_spsc() {
    spsc_in_order::<Hts, Hts>();
}

/// Two producers race for the head while a consumer polls concurrently
/// (a bounded number of times, to keep the model finite), then drains.
fn two_producers<P: rpmd_ring::SharedMode, C: SyncMode>() {
    model(|| {
        let (p, c) = rpmd_ring::new::<u32, P, C>(2).unwrap();
        let p2 = p.clone();
        let a = thread::spawn(move || p.enqueue(1).unwrap());
        let b = thread::spawn(move || p2.enqueue_bulk(&[2]).n);
        let mut got = Vec::new();
        let mut buf = [0u32; 2];
        // Concurrent polls: whatever is seen must be fully written.
        let n = c.dequeue_burst(&mut buf).n;
        got.extend_from_slice(&buf[..n]);
        a.join().unwrap();
        assert_eq!(b.join().unwrap(), 1);
        assert_eq!(drained_sorted(&c, got), [1, 2]);
    });
}

/// `got` plus whatever is left in the ring, sorted: the check that every
/// value arrived exactly once, once the other threads have been joined.
fn drained_sorted<P: SyncMode, C: SyncMode>(
    c: &rpmd_ring::Consumer<u32, P, C>,
    mut got: Vec<u32>,
) -> Vec<u32> {
    while let Some(v) = c.dequeue() {
        got.push(v);
    }
    got.sort();
    got
}

#[test]
fn mp_two_producers() {
    two_producers::<Multi, Single>();
}

#[test]
fn hts_two_producers() {
    two_producers::<Hts, Single>();
}

/// Two consumers race for 2 values in bursts; each value is taken once.
fn two_consumers<P: SyncMode, C: rpmd_ring::SharedMode>() {
    model(|| {
        let (p, c) = rpmd_ring::new::<u32, P, C>(2).unwrap();
        assert_eq!(p.enqueue_bulk(&[7, 8]).n, 2);
        let c2 = c.clone();
        let take = |c: rpmd_ring::Consumer<u32, P, C>| {
            thread::spawn(move || {
                let mut buf = [0u32; 2];
                let n = c.dequeue_burst(&mut buf).n;
                buf[..n].to_vec()
            })
        };
        let a = take(c);
        let b = take(c2);
        let mut all = a.join().unwrap();
        all.extend(b.join().unwrap());
        all.sort();
        assert_eq!(all, [7, 8]);
    });
}

#[test]
fn mc_two_consumers() {
    two_consumers::<Single, Multi>();
}

#[test]
fn hts_two_consumers() {
    two_consumers::<Single, Hts>();
}

/// Two consumers poll (twice each, yielding between) while the producer
/// publishes two values. The consumer that loads the producer tail stores
/// it in its side's cache; the other may then take a value through that
/// cached tail without loading the tail itself, and must still see the
/// value fully written. Fails with the cache's load (C2) or store (C1)
/// made Relaxed, and with `Multi`'s head CAS Relaxed on success (H2: a
/// consumer then paired another's new head with an older producer tail
/// and read a slot not yet written). With one poll each, as first
/// written, neither consumer ever got a value while the other did, and
/// none of these failed.
fn consumers_share_a_cached_tail<C: rpmd_ring::SharedMode>() {
    model(|| {
        let (p, c) = rpmd_ring::new::<u32, Single, C>(2).unwrap();
        let c2 = c.clone();
        let poll = |c: &rpmd_ring::Consumer<u32, Single, C>| {
            c.dequeue().or_else(|| {
                thread::yield_now();
                c.dequeue()
            })
        };
        let prod = thread::spawn(move || assert_eq!(p.enqueue_bulk(&[7, 8]).n, 2));
        let other = thread::spawn(move || poll(&c2));
        let mut all: Vec<u32> = poll(&c).into_iter().collect();
        all.extend(other.join().unwrap());
        prod.join().unwrap();
        assert_eq!(drained_sorted(&c, all), [7, 8]);
    });
}

#[test]
fn mc_consumers_share_a_cached_tail() {
    consumers_share_a_cached_tail::<Multi>();
}

#[test]
fn hts_consumers_share_a_cached_tail() {
    consumers_share_a_cached_tail::<Hts>();
}

/// `TxLock`, the lock's two waiting sides: an enqueuer (through the
/// busylock when it finds the lock taken) and a drainer each change the
/// guarded value; loom's cell reports any two accesses the lock's L1/L2
/// orderings fail to separate, and both changes are kept.
#[test]
fn txlock_excludes_enqueuer_and_drainer() {
    use loom::sync::Arc;
    use rpmd_ring::TxLock;
    model(|| {
        let l = Arc::new(TxLock::new((0u32, 0u32)));
        let e = l.clone();
        let enqueuer = thread::spawn(move || {
            let mut g = e.lock_enqueue();
            g.0 += 1;
            g.1 += 10;
        });
        {
            let mut g = l.lock_drain();
            g.0 += 1;
            g.1 += 1000;
        }
        enqueuer.join().unwrap();
        assert_eq!(*l.lock_enqueue(), (2, 1010));
    });
}

/// Two enqueuers, one of them behind the busylock while the other holds
/// the lock: both changes are kept, none races.
#[test]
fn txlock_excludes_two_enqueuers() {
    use loom::sync::Arc;
    use rpmd_ring::TxLock;
    model(|| {
        let l = Arc::new(TxLock::new(0u32));
        let e = l.clone();
        let other = thread::spawn(move || *e.lock_enqueue() += 1);
        *l.lock_enqueue() += 2;
        other.join().unwrap();
        assert_eq!(*l.lock_enqueue(), 3);
    });
}

/// A try beside a waiting drainer (the vhost-user backend's queue burst
/// and its control thread): whatever the interleaving, the try either
/// gets in alone or stands back, and the drainer always gets in.
#[test]
fn txlock_try_stands_back_for_a_waiting_drainer() {
    use loom::sync::Arc;
    use rpmd_ring::TxLock;
    model(|| {
        let l = Arc::new(TxLock::new(Vec::<u8>::new()));
        let held = l.lock_enqueue();
        let d = l.clone();
        let drainer = thread::spawn(move || d.lock_drain().push(1));
        // Give the drainer its chance to announce; then whoever tries
        // while it waits is refused, and after the release both get in.
        thread::yield_now();
        drop(held);
        if let Some(mut g) = l.try_lock() {
            g.push(2);
        }
        drainer.join().unwrap();
        let v = l.lock_enqueue().clone();
        assert!(v.contains(&1) && v.len() <= 2);
    });
}
