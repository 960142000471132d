//! Per-thread lcore ids, the key of per-core state such as mempool caches
//! (DPDK's `rte_lcore_id()`).
//!
//! A thread gets the lowest free id in `0..MAX_LCORES` the first time it
//! asks, and gives it back when it exits. While a thread holds an id, no
//! other live thread has it, so per-id state can be used without locks by
//! the holder. After the id is returned (during thread exit), the thread
//! gets `None`, so code running in later thread-local destructors falls
//! back to shared paths instead of touching state another thread may now
//! own.
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many threads can hold an lcore id at once.
pub const MAX_LCORES: usize = 128;

static USED: [AtomicU64; MAX_LCORES / 64] = [const { AtomicU64::new(0) }; MAX_LCORES / 64];

struct Held(Option<usize>);

impl Held {
    fn acquire() -> Self {
        for (w, word) in USED.iter().enumerate() {
            let mut cur = word.load(Ordering::Relaxed);
            while cur != u64::MAX {
                let bit = (!cur).trailing_zeros();
                // Acquire: pairs with the Release in `drop`, so whatever the
                // previous holder did with per-id state happens before us.
                match word.compare_exchange_weak(
                    cur,
                    cur | 1 << bit,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return Held(Some(w * 64 + bit as usize)),
                    Err(now) => cur = now,
                }
            }
        }
        Held(None)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        FAST.set(DEAD);
        if let Some(id) = self.0 {
            // Release: pairs with the Acquire in `acquire`.
            USED[id / 64].fetch_and(!(1 << (id % 64)), Ordering::Release);
        }
    }
}

/// `FAST` before the thread asked for an id.
const UNKNOWN: u32 = 0;
/// `FAST` once the thread has no id (all taken, or given back at exit).
const DEAD: u32 = u32::MAX;

thread_local! {
    static ID: Held = Held::acquire();
    /// The id plus one, `UNKNOWN` or `DEAD`: a plain thread-local word
    /// (constant-initialised, no destructor), so the hot path is one load.
    static FAST: Cell<u32> = const { Cell::new(UNKNOWN) };
}

/// This thread's lcore id, or `None` when all ids are taken or the thread
/// is exiting.
#[inline(always)]
pub fn current() -> Option<usize> {
    match FAST.get() {
        UNKNOWN => slow(),
        DEAD => None,
        v => Some(v as usize - 1),
    }
}

/// Whether this thread holds lcore id `id` (one thread-local load).
#[inline(always)]
pub fn is_current(id: usize) -> bool {
    FAST.get() as usize == id + 1
}

#[cold]
fn slow() -> Option<usize> {
    let id = ID.try_with(|h| h.0).ok().flatten();
    if let Some(i) = id {
        FAST.set(i as u32 + 1);
    } else if FAST.get() == UNKNOWN {
        FAST.set(DEAD);
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_among_live_threads_and_reused() {
        let mine = current().unwrap();
        assert_eq!(current(), Some(mine), "stable within a thread");
        let (tx, rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let go_rx = std::sync::Arc::new(std::sync::Mutex::new(go_rx));
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let (tx, go) = (tx.clone(), go_rx.clone());
                std::thread::spawn(move || {
                    tx.send(current().unwrap()).unwrap();
                    let _ = go.lock().unwrap().recv();
                })
            })
            .collect();
        let mut ids: Vec<usize> = (0..4).map(|_| rx.recv().unwrap()).collect();
        ids.push(mine);
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 5, "live threads share no id");
        for _ in 0..4 {
            go_tx.send(()).unwrap();
        }
        for h in hs {
            h.join().unwrap();
        }
        // Ids come back: a new thread gets one again.
        assert!(std::thread::spawn(current).join().unwrap().is_some());
    }
}
