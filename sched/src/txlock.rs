//! [`TxLock`]: the lock in front of a TX queue shared by several lcores,
//! built so that the lcore draining the queue to the NIC is never starved
//! by the lcores filling it.
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
//! goes ahead of every waiting enqueuer. It announces itself in a drain
//! flag, and enqueuers do not try to take the lock while it is set. So:
//! - uncontended, an enqueue or dequeue is one compare-and-swap to lock and
//!   one store plus one load to unlock (no busylock cost: the busylock is
//!   only taken after a failed first try);
//! - contended, the dequeuer waits for at most the one critical section in
//!   progress, and enqueuers queue behind the busylock instead of hammering
//!   the lock's cache line.
//!
//! Waiting enqueuers spin a little, then sleep on a futex (the busylock is
//! a futex lock too), so on an oversubscribed core they leave the CPU to
//! the lock holder instead of spinning against it; the drainer spins and
//! yields, as it waits for one critical section at most.
//!
//! Memory ordering: taking the lock is an Acquire compare-and-swap and
//! releasing it a store that is at least Release (`L1`/`L2`, pairing with
//! each other), so everything done under the lock by one holder happens
//! before everything done by the next. Sleeping uses the Dekker pattern:
//! a sleeper counts itself then re-reads the lock word, the unlocker
//! stores the word then reads the count, all SeqCst (`S1`/`S2`), so no
//! wake-up is lost. The drain flag is only a hint about who may try; it
//! orders nothing and uses Relaxed.
#![allow(unsafe_code)]

use crossbeam_utils::CachePadded;
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::*};
use std::sync::Mutex;

const FREE: u32 = 0;
const LOCKED: u32 = 1;

/// Spins `n` times, then yields the CPU on every later call.
#[inline]
fn backoff(n: &mut u32) {
    if *n < 64 {
        *n += 1;
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// Sleeps while `*a == expected` (or until woken; spurious returns are
/// fine, callers re-check).
fn futex_wait(a: &AtomicU32, expected: u32) {
    // SAFETY: FUTEX_WAIT on a live, aligned u32 with no timeout; the kernel
    // only reads the word.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            a.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        )
    };
}

/// Wakes one thread sleeping on `a`.
fn futex_wake_one(a: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a live, aligned u32.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            a.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        )
    };
}

/// A lock around `T` (a software TX queue and the driver queue behind it)
/// that favours the side draining it; see the module docs.
pub struct TxLock<T> {
    state: CachePadded<AtomicU32>,
    /// Enqueuers asleep on `state`.
    sleepers: CachePadded<AtomicU32>,
    /// A drainer waits: enqueuers stand back.
    drain_waiting: CachePadded<AtomicBool>,
    /// The busylock: contended enqueuers queue here first (a futex lock,
    /// so queued enqueuers sleep instead of taking CPU from the holder).
    busy: Mutex<()>,
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
}

impl<T> TxLock<T> {
    /// A lock around `value`.
    pub fn new(value: T) -> Self {
        TxLock {
            state: CachePadded::new(AtomicU32::new(FREE)),
            sleepers: CachePadded::new(AtomicU32::new(0)),
            drain_waiting: CachePadded::new(AtomicBool::new(false)),
            busy: Mutex::new(()),
            value: UnsafeCell::new(value),
        }
    }

    /// One attempt: FREE -> LOCKED.
    #[inline(always)]
    fn try_take(&self) -> bool {
        // L1 (Acquire): pairs with L2 of the previous holder.
        self.state.load(Relaxed) == FREE
            && self
                .state
                .compare_exchange(FREE, LOCKED, Acquire, Relaxed)
                .is_ok()
    }

    /// Takes the lock to enqueue. Tries once; under contention queues on
    /// the busylock first, so at most one enqueuer competes with the owner;
    /// never takes the lock while a drainer is waiting; sleeps (futex)
    /// after a short spin instead of taking CPU from the holder.
    #[inline]
    pub fn lock_enqueue(&self) -> TxGuard<'_, T> {
        if !self.drain_waiting.load(Relaxed) && self.try_take() {
            return TxGuard { lock: self };
        }
        self.lock_enqueue_slow()
    }

    #[cold]
    fn lock_enqueue_slow(&self) -> TxGuard<'_, T> {
        let _busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        let mut n = 0;
        loop {
            if self.drain_waiting.load(Relaxed) {
                // A drainer goes first; it holds the lock for one batch.
                backoff(&mut n);
                continue;
            }
            if self.try_take() {
                return TxGuard { lock: self };
            }
            if n < 64 {
                n += 1;
                std::hint::spin_loop();
                continue;
            }
            // Sleep until an unlock. S1 (SeqCst): with S2 in `unlock`,
            // either we see the lock free (and the wait returns at once)
            // or the unlocker sees us counted and wakes us.
            self.sleepers.fetch_add(1, SeqCst);
            if self.state.load(SeqCst) == LOCKED {
                futex_wait(&self.state, LOCKED);
            }
            self.sleepers.fetch_sub(1, Relaxed);
            // Woken: spin again before the next sleep.
            n = 0;
        }
    }

    /// Takes the lock to drain. Announces itself first, so enqueuers stand
    /// back and only the critical section in progress is waited for.
    #[inline]
    pub fn lock_drain(&self) -> TxGuard<'_, T> {
        if self.try_take() {
            return TxGuard { lock: self };
        }
        // Relaxed: the flag only decides who tries; L1/L2 order the data.
        self.drain_waiting.store(true, Relaxed);
        let mut n = 0;
        while !self.try_take() {
            backoff(&mut n);
        }
        self.drain_waiting.store(false, Relaxed);
        TxGuard { lock: self }
    }

    /// Takes the lock if it is free (and no drainer waits), without waiting.
    pub fn try_lock(&self) -> Option<TxGuard<'_, T>> {
        (!self.drain_waiting.load(Relaxed) && self.try_take()).then_some(TxGuard { lock: self })
    }

    /// The value, through exclusive access to the lock.
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }

    /// The value back.
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }

    #[inline(always)]
    fn unlock(&self) {
        // L2 + S2 (SeqCst store): releases the data to the next holder
        // (pairs with L1) and orders the store before the sleeper count
        // read (pairs with S1).
        self.state.store(FREE, SeqCst);
        if self.sleepers.load(SeqCst) > 0 {
            futex_wake_one(&self.state);
        }
    }
}

impl<T> Drop for TxGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.unlock();
    }
}

impl<T> Deref for TxGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, so no other reference exists.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for TxGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as above, and `&mut self` makes this one unique.
        unsafe { &mut *self.lock.value.get() }
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

    #[test]
    fn a_waiting_drainer_goes_before_waiting_enqueuers() {
        let l = Arc::new(TxLock::new(Vec::<&str>::new()));
        let g = l.lock_enqueue();
        let (l2, l3) = (l.clone(), l.clone());
        let enq = std::thread::spawn(move || l2.lock_enqueue().push("enqueue"));
        std::thread::sleep(std::time::Duration::from_millis(20));
        let drain = std::thread::spawn(move || l3.lock_drain().push("drain"));
        // Wait until the drainer has announced itself.
        while !l.drain_waiting.load(Relaxed) {
            std::thread::yield_now();
        }
        drop(g);
        enq.join().unwrap();
        drain.join().unwrap();
        assert_eq!(*l.lock_enqueue(), vec!["drain", "enqueue"]);
        assert!(l.try_lock().is_some());
    }
}
