//! Issue 26: the data path allocates nothing, not even on failure: a get
//! from an empty pool returns its error without building a String (the
//! pool's name is shared). Counted with a global allocator of this test
//! binary's own.
use rpmd_pmd::{Mempool, MempoolConfig};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator, counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

#[test]
fn a_failed_get_allocates_nothing() {
    let mut c = MempoolConfig::new("no-alloc", 64);
    c.cache_size = 0;
    let p = Mempool::new(&c).unwrap();
    let held: Vec<_> = (0..64).map(|_| p.get().unwrap()).collect();
    let mut burst = rpmd_ring::Burst::<rpmd_pmd::Mbuf, 32>::new();
    let before = ALLOCS.load(Ordering::Relaxed);
    for _ in 0..1000 {
        assert!(p.get().is_err());
        assert!(p.get_bulk(&mut burst, 8).is_err());
    }
    assert_eq!(
        ALLOCS.load(Ordering::Relaxed),
        before,
        "allocations on failed gets"
    );
    drop(held);
}
