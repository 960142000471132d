//! What the two ring targets share: ring memory and a pool made once, and
//! the check that a queue hands each posted buffer back at most once.
use rpmd_pmd::{DmaRegion, IovaMode, Mbuf, Mempool, MempoolConfig, PageSize};
use std::collections::HashSet;
use std::sync::OnceLock;

/// Mbufs in the pool.
pub const POOL: u32 = 256;

/// Ring memory and a pool, made once (a region per run would make most
/// of the time system calls); every run zeroes the ring and leaves the
/// pool whole.
pub fn memory() -> &'static (DmaRegion, Mempool) {
    static M: OnceLock<(DmaRegion, Mempool)> = OnceLock::new();
    M.get_or_init(|| {
        let region = DmaRegion::with_page_size("fz-ring", 64 << 10, IovaMode::Va, PageSize::Base4K)
            .expect("ring memory");
        let mut pc = MempoolConfig::new("fz-ring", POOL);
        pc.cache_size = 0;
        (region, Mempool::new(&pc).expect("pool"))
    })
}

/// The buffers in flight, by address.
#[derive(Default)]
pub struct Posted(HashSet<usize>);

impl Posted {
    /// A fresh mbuf to post: its IOVA, and the mbuf (recorded as posted).
    pub fn post(&mut self, pool: &Mempool) -> (u64, Mbuf) {
        let m = pool.get().expect("the pool has room for a ring's worth");
        self.0.insert(m.buf_addr() as usize);
        (m.data_iova().raw(), m)
    }

    /// A buffer the queue refused: no longer in flight.
    pub fn refused(&mut self, m: &Mbuf) {
        self.0.remove(&(m.buf_addr() as usize));
    }

    /// A buffer the queue handed back: it must be one in flight.
    pub fn returned(&mut self, m: &Mbuf) {
        assert!(
            self.0.remove(&(m.buf_addr() as usize)),
            "a buffer handed back twice, or never posted"
        );
    }
}
