//! The pool a port-driving fuzz target takes its mbufs from: made once
//! per process (a pool per run would make most of the time system
//! calls), with no per-lcore cache, so that "every mbuf home" is a count.
use rpmd_pmd::{Mempool, MempoolConfig};
use std::sync::OnceLock;

/// The process's pool of `n` mbufs named `name` (both taken from the
/// first call).
pub fn pool(name: &str, n: u32) -> &'static Mempool {
    static P: OnceLock<Mempool> = OnceLock::new();
    P.get_or_init(|| {
        let mut pc = MempoolConfig::new(name, n);
        pc.cache_size = 0;
        Mempool::new(&pc).expect("pool")
    })
}
