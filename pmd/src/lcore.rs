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
//!
//! A [`Pin`] keeps the thread's id from being given back while it lives
//! (a thread exiting with a pin alive gives its id back when the last pin
//! is dropped), so code holding one may use per-id state without checking
//! on every access that the id is still this thread's; this is how a
//! mempool's [`Local`](crate::Local) view uses its cache.
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
            if PINS.get() > 0 {
                // A pin outlives the thread-local: the last unpin gives
                // the id back.
                PARKED.set(id as u32 + 1);
            } else {
                release(id);
            }
        }
    }
}

fn release(id: usize) {
    // Release: pairs with the Acquire in `acquire`.
    USED[id / 64].fetch_and(!(1 << (id % 64)), Ordering::Release);
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
    /// Live [`Pin`]s on this thread (constant-initialised, no destructor,
    /// so usable in any thread-local destructor).
    static PINS: Cell<u32> = const { Cell::new(0) };
    /// The id plus one, when `Held` was dropped while pins were alive; 0
    /// otherwise.
    static PARKED: Cell<u32> = const { Cell::new(0) };
}

/// Keeps this thread's lcore id its own while alive, even past the
/// thread-local that normally gives it back at thread exit. Not `Send`: it
/// pins the thread that made it. Forgetting a pin keeps the id taken for
/// good (a leak of one id, nothing worse).
#[derive(Debug)]
pub struct Pin {
    id: usize,
    _thread: std::marker::PhantomData<*const ()>,
}

impl Pin {
    /// Pins this thread's id, or `None` when it has none.
    #[inline]
    pub fn new() -> Option<Pin> {
        let id = current()?;
        PINS.set(PINS.get() + 1);
        Some(Pin {
            id,
            _thread: std::marker::PhantomData,
        })
    }

    /// The pinned id: this thread's for as long as the pin lives.
    #[inline(always)]
    pub fn id(&self) -> usize {
        self.id
    }
}

impl Drop for Pin {
    #[inline]
    fn drop(&mut self) {
        let left = PINS.get() - 1;
        PINS.set(left);
        if left == 0 {
            let parked = PARKED.replace(0);
            if parked != 0 {
                release(parked as usize - 1);
            }
        }
    }
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

    fn taken(id: usize) -> bool {
        USED[id / 64].load(Ordering::Acquire) & (1 << (id % 64)) != 0
    }

    #[test]
    fn a_pin_alive_at_thread_exit_keeps_the_id_until_it_drops() {
        /// Drops its pin from a thread-local destructor registered before
        /// the id's, so it runs after the id's `Held` is gone.
        struct Late(
            std::cell::RefCell<Option<Pin>>,
            std::sync::mpsc::Sender<bool>,
        );
        impl Drop for Late {
            fn drop(&mut self) {
                let pin = self.0.borrow_mut().take().unwrap();
                let id = pin.id();
                // The thread has given up its id by now (Held dropped),
                // but the id is not free while the pin lives...
                let _ = self.1.send(current().is_none() && taken(id));
                drop(pin);
                // ...and is given back with it. (Not checked through
                // `taken`: another test's thread may take the id at once.)
                let _ = self.1.send(PINS.get() == 0 && PARKED.get() == 0);
            }
        }
        thread_local! {
            static LATE: std::cell::OnceCell<Late> = const { std::cell::OnceCell::new() };
        }
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // Registered first, so destroyed after `ID` (destructors run in
            // reverse order of registration).
            LATE.with(|l| {
                let _ = l.set(Late(std::cell::RefCell::new(None), tx));
            });
            let pin = Pin::new().unwrap();
            LATE.with(|l| *l.get().unwrap().0.borrow_mut() = Some(pin));
        })
        .join()
        .unwrap();
        assert!(rx.recv().unwrap(), "id kept while the pin lived");
        assert!(rx.recv().unwrap(), "id given back with the last pin");
    }
}
