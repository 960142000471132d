//! [`TxLock`]: the lock in front of a TX queue shared by several lcores,
//! built so that the lcore draining the queue to the NIC is never starved
//! by the lcores filling it. It is rpmd's one hand-written lock: the
//! vhost-user backend puts each vring behind it too (the queue's bursts
//! try it, the control thread takes the draining side and so waits for
//! one burst at most), and `tests/loom.rs` model-checks it.
//!
//! The problem (Linux qdisc, "busylock"): many CPUs enqueue packets into a
//! qdisc under its root lock while one CPU dequeues them to the driver,
//! taking the same lock for every batch. Under contention a plain spin
//! lock is won by whoever retries fastest, usually the enqueuers, so the
//! dequeuer waits, the queue fills, packets drop and throughput collapses.
//! Linux added a second lock, the busylock: an enqueuer that finds the root
//! lock contended first takes the busylock, so at most one enqueuer at a
//! time competes with the dequeuer.
//!
//! `TxLock` keeps that and adds the half Linux lacks: a waiting dequeuer
//! goes ahead of every waiting enqueuer. It announces itself in the lock
//! flag beside the lock flag (same cache line), and enqueuers do not try to
//! take the lock while it is set. So:
//! - uncontended, an enqueue or dequeue is one compare-exchange to lock
//!   and one store to unlock, as with a plain spin lock, plus one load of the drain flag from
//!   the same line (no busylock cost: the busylock is only taken after a
//!   failed first try);
//! - contended, the dequeuer waits for at most the one critical section in
//!   progress, and enqueuers queue behind the busylock instead of hammering
//!   the lock's cache line.
//!
//! The flags and the guarded value share a cache line (as far as the
//! value reaches), so handing the lock to another core moves the queue's
//! indices with it in one transfer: in the request/response benchmark
//! this took `TxLock` from 2–10 % below a plain spin lock (whose flag sat
//! beside its queue) to level with it or above.
//!
//! Waiting spins a little, then yields the CPU, so a preempted lock holder
//! on a shared core is not spun against for a whole time slice.
//!
//! Memory ordering: taking the lock is an Acquire compare-exchange and
//! releasing it a Release store (`L1`/`L2`, pairing with each other), so
//! everything done
//! under the lock by one holder happens before everything done by the
//! next. The drain and busylock flags only decide who may try; they order
//! no data.
//!
//! (Versions that slept on a futex after spinning were slower on the test
//! machines, uncontended by the extra read-modify-write on unlock, and
//! contended by the wake-ups; see benches/RESULTS.md.)
#![allow(unsafe_code)]

use crate::primitive::{spin_hint, yield_cpu, AtomicBool, Ordering::*};
use crossbeam_utils::CachePadded;
use std::ops::{Deref, DerefMut};

#[cfg(loom)]
use loom::cell::UnsafeCell;
#[cfg(not(loom))]
use std::cell::UnsafeCell;

/// Sets `flag` if it is clear (Acquire); whether this call set it.
#[inline(always)]
fn set(flag: &AtomicBool) -> bool {
    flag.compare_exchange(false, true, Acquire, Relaxed).is_ok()
}

/// Spins `n` times, then yields the CPU on every later call.
#[inline]
fn backoff(n: &mut u32) {
    if *n < 64 {
        *n += 1;
        spin_hint();
    } else {
        yield_cpu();
    }
}

/// The lock's flags, one cache line: whether it is held, whether a drainer
/// waits, whether the busylock is held. Separate bytes, so the holder
/// releases with a plain store that cannot clobber the others.
#[repr(C)]
struct Flags {
    locked: AtomicBool,
    drain: AtomicBool,
    busy: AtomicBool,
}

/// A lock around `T` (a software TX queue and the driver queue behind it)
/// that favours the side draining it; see the module docs.
///
/// ```
/// use rpmd_ring::TxLock;
/// let q = TxLock::new(Vec::<u32>::new());
/// q.lock_enqueue().push(1); // producers: behind the busylock
/// let drained: Vec<u32> = q.lock_drain().drain(..).collect(); // the drainer goes first
/// assert_eq!(drained, [1]);
/// ```
pub struct TxLock<T> {
    f: CachePadded<Locked<T>>,
}

/// The flags and the value side by side, so a lock hand-off between
/// cores moves the value's first bytes (a queue's indices) with the flags
/// in one line transfer.
#[repr(C)]
struct Locked<T> {
    flags: Flags,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands out `&mut T` to one holder at a time; `T` moves
// between threads with the holder, so `T: Send` suffices.
unsafe impl<T: Send> Sync for TxLock<T> {}
// SAFETY: owning the lock owns `T`.
unsafe impl<T: Send> Send for TxLock<T> {}

/// Holds the lock; dropping it releases the lock.
pub struct TxGuard<'a, T> {
    lock: &'a TxLock<T>,
    /// loom's record of the access, ended before the release.
    #[cfg(loom)]
    access: Option<loom::cell::MutPtr<T>>,
}

impl<'a, T> TxGuard<'a, T> {
    /// The guard of `lock`, just taken.
    #[inline(always)]
    fn held(lock: &'a TxLock<T>) -> Self {
        TxGuard {
            lock,
            #[cfg(loom)]
            access: Some(lock.f.value.get_mut()),
        }
    }
}

impl<T> TxLock<T> {
    /// A lock around `value`.
    pub fn new(value: T) -> Self {
        TxLock {
            f: CachePadded::new(Locked {
                flags: Flags {
                    locked: AtomicBool::new(false),
                    drain: AtomicBool::new(false),
                    busy: AtomicBool::new(false),
                },
                value: UnsafeCell::new(value),
            }),
        }
    }

    /// One attempt: test, then test-and-set. (A compare-exchange, not a
    /// swap: one locked instruction either way, but a failed one writes
    /// nothing, and loom can model the spin around it.)
    #[inline(always)]
    fn try_take(&self) -> bool {
        // L1 (Acquire): pairs with L2 of the previous holder.
        !self.f.flags.locked.load(Relaxed) && set(&self.f.flags.locked)
    }

    /// Takes the lock to enqueue. Tries once; under contention takes the
    /// busylock first, so at most one enqueuer competes with the owner,
    /// and never takes the lock while a drainer is waiting for it.
    #[inline]
    pub fn lock_enqueue(&self) -> TxGuard<'_, T> {
        if !self.f.flags.drain.load(Relaxed) && self.try_take() {
            return TxGuard::held(self);
        }
        self.lock_enqueue_slow()
    }

    #[cold]
    fn lock_enqueue_slow(&self) -> TxGuard<'_, T> {
        let mut n = 0;
        // The busylock. Its orderings only decide who competes; the data
        // is ordered by L1/L2.
        while self.f.flags.busy.load(Relaxed) || !set(&self.f.flags.busy) {
            backoff(&mut n);
        }
        let mut n = 0;
        while self.f.flags.drain.load(Relaxed) || !self.try_take() {
            backoff(&mut n);
        }
        self.f.flags.busy.store(false, Release);
        TxGuard::held(self)
    }

    /// Takes the lock to drain. Announces itself first, so waiting
    /// enqueuers stand back and only the critical section in progress is
    /// waited for.
    #[inline]
    pub fn lock_drain(&self) -> TxGuard<'_, T> {
        // One try, then announce at once. (A first wait of 32 tries
        // without announcing, meant to save the line two writes, let the
        // enqueuers take turns ahead of the drainer in front of a shaper:
        // its p99 acquisition was 1.5-2x the plain spin lock's, against
        // 0.7-0.9 µs with the early announcement; benches/RESULTS.md.)
        if self.try_take() {
            return TxGuard::held(self);
        }
        // Relaxed: the flag only decides who tries. One drainer at a time
        // (the drain side is single by design), so clearing it is ours.
        self.f.flags.drain.store(true, Relaxed);
        let mut n = 0;
        while !self.try_take() {
            backoff(&mut n);
        }
        self.f.flags.drain.store(false, Relaxed);
        TxGuard::held(self)
    }

    /// Takes the lock if it is free (and no drainer waits), without waiting.
    pub fn try_lock(&self) -> Option<TxGuard<'_, T>> {
        (!self.f.flags.drain.load(Relaxed) && self.try_take()).then(|| TxGuard::held(self))
    }

    /// The value, through exclusive access to the lock.
    #[cfg(not(loom))]
    pub fn get_mut(&mut self) -> &mut T {
        self.f.value.get_mut()
    }

    /// The value back.
    pub fn into_inner(self) -> T {
        self.f.into_inner().value.into_inner()
    }
}

impl<T> Drop for TxGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        #[cfg(loom)]
        drop(self.access.take());
        // L2 (Release): pairs with L1 of the next holder.
        self.lock.f.flags.locked.store(false, Release);
    }
}

impl<T> Deref for TxGuard<'_, T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        #[cfg(not(loom))]
        // SAFETY: the guard holds the lock, so no other reference exists.
        return unsafe { &*self.lock.f.value.get() };
        #[cfg(loom)]
        // SAFETY: as above; loom tracks the access until the release.
        return unsafe { self.access.as_ref().expect("held").deref() };
    }
}

impl<T> DerefMut for TxGuard<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        #[cfg(not(loom))]
        // SAFETY: as above, and `&mut self` makes this one unique.
        return unsafe { &mut *self.lock.f.value.get() };
        #[cfg(loom)]
        // SAFETY: as above.
        return unsafe { self.access.as_ref().expect("held").deref() };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn excludes_and_counts_exactly() {
        let l = Arc::new(TxLock::new(0u64));
        let hs: Vec<_> = (0..4)
            .map(|i| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        if i == 0 {
                            *l.lock_drain() += 1;
                        } else {
                            *l.lock_enqueue() += 1;
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(Arc::try_unwrap(l).ok().unwrap().into_inner(), 80_000);
    }

    /// Priority is the common case, not a guarantee: an enqueuer that
    /// read the drain flag just before the drainer set it may still win
    /// the release. Natively that window is a few instructions; Miri's
    /// scheduler opens it, so the test does not run there (loom's models
    /// check the exclusion, not the priority, for every interleaving).
    #[test]
    #[cfg_attr(miri, ignore)]
    fn a_waiting_drainer_goes_before_waiting_enqueuers() {
        let l = Arc::new(TxLock::new(Vec::<&str>::new()));
        let g = l.lock_enqueue();
        let (l2, l3) = (l.clone(), l.clone());
        let enq = std::thread::spawn(move || l2.lock_enqueue().push("enqueue"));
        std::thread::sleep(std::time::Duration::from_millis(20));
        let drain = std::thread::spawn(move || l3.lock_drain().push("drain"));
        // Wait until the drainer has announced itself (bounded, so a
        // broken lock fails the test instead of hanging it).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !l.f.flags.drain.load(Relaxed) {
            assert!(
                std::time::Instant::now() < deadline,
                "the drainer never announced itself"
            );
            std::thread::yield_now();
        }
        drop(g);
        enq.join().unwrap();
        drain.join().unwrap();
        assert_eq!(*l.lock_enqueue(), vec!["drain", "enqueue"]);
        assert!(l.try_lock().is_some());
    }
}
