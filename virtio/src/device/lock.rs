//! The lock each vring sits behind: taken by its queue once a burst
//! (try-lock: a burst that finds the control thread in the ring skips),
//! and by the control thread for a message that changes the ring (it
//! waits at most one burst). One locked instruction to take it and a plain
//! Release store to give it back, as DPDK's `rte_spinlock` in front of
//! each vhost queue, where `std::sync::Mutex` costs a second locked
//! instruction on every poll (its unlock swaps). The one unsafe module of
//! the backend.
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

/// A value behind a try-lock.
pub(crate) struct QueueLock<T> {
    held: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, and `held` lets one
// guard exist at a time (the swap below is the mutual exclusion), so
// sharing the lock between threads shares no unsynchronised access; `T:
// Send` since the value moves between the threads that hold it.
unsafe impl<T: Send> Sync for QueueLock<T> {}

impl<T> QueueLock<T> {
    pub(crate) fn new(value: T) -> Self {
        QueueLock {
            held: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// The value, unless someone holds it.
    #[inline(always)]
    pub(crate) fn try_lock(&self) -> Option<QueueGuard<'_, T>> {
        // Partner of both: the Release store in `QueueGuard::drop`, which
        // publishes the last holder's writes to the value.
        if self.held.load(Ordering::Relaxed) || self.held.swap(true, Ordering::Acquire) {
            return None;
        }
        Some(QueueGuard(self))
    }

    /// The value, waiting for its holder (a queue in a burst) to let go.
    pub(crate) fn lock(&self) -> QueueGuard<'_, T> {
        loop {
            if let Some(g) = self.try_lock() {
                return g;
            }
            std::thread::yield_now();
        }
    }
}

/// Access to the value while the lock is held.
pub(crate) struct QueueGuard<'a, T>(&'a QueueLock<T>);

impl<T> Deref for QueueGuard<'_, T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (`held` was false and we set
        // it), so no other reference to the value exists.
        unsafe { &*self.0.value.get() }
    }
}

impl<T> DerefMut for QueueGuard<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this one unique.
        unsafe { &mut *self.0.value.get() }
    }
}

impl<T> Drop for QueueGuard<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        // Partner: the Acquire swap of the next `try_lock`.
        self.0.held.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::QueueLock;
    use std::sync::Arc;

    #[test]
    fn one_holder_at_a_time_and_writes_carry_over() {
        let l = Arc::new(QueueLock::new(0u64));
        let g = l.try_lock().unwrap();
        assert!(l.try_lock().is_none());
        drop(g);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        *l.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*l.lock(), 40_000);
    }
}
