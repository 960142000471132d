//! AF_XDP ring entries as the kernel (or whatever wrote the shared rings)
//! leaves them: RX entries (an address in unaligned-chunk form, with an
//! offset in its top 16 bits, and a length) and completion entries (an
//! address), against the table of mbufs the port posted
//! (`rpmd_kernel::xdp::testing::XdpEntries`, the port's own code).
//!
//! Whatever the entries say: an entry gives back only an mbuf that was
//! posted and not yet given back, an RX frame has the entry's length and
//! lies inside its buffer, and every mbuf is back in the pool at the end.
#![no_main]
use libfuzzer_sys::fuzz_target;
#[path = "once_pool.rs"]
mod once_pool;
use rpmd_kernel::xdp::testing::XdpEntries;
use rpmd_pmd::Mempool;
use std::collections::HashSet;

const POOL: u32 = 64;

fn pool() -> &'static Mempool {
    once_pool::pool("fz-xdp", POOL)
}

fuzz_target!(|data: &[u8]| {
    let [n, rest @ ..] = data else { return };
    let pool = pool();
    let mut t = XdpEntries::new(pool);
    let posted: Vec<u64> = (0..*n as u32 % (POOL + 1))
        .filter_map(|_| t.post())
        .collect();
    let mut out: HashSet<u64> = posted.iter().copied().collect();
    // Entries of 12 bytes: kind and which posted address to start from,
    // an offset or a raw address, a length.
    for e in rest.chunks_exact(12) {
        let base = posted
            .get(e[1] as usize % posted.len().max(1))
            .copied()
            .unwrap_or(0);
        let word = u64::from_le_bytes(e[2..10].try_into().unwrap());
        let addr = match e[0] % 4 {
            // A posted buffer, with an offset in the unaligned form.
            0 => base | (word & 0xffff) << 48,
            // A posted buffer moved by a few bytes.
            1 => base.wrapping_add(word % 4096),
            // Anything.
            _ => word,
        };
        let len = u16::from_le_bytes([e[10], e[11]]) as u32;
        if e[0] & 4 == 0 {
            if let Some(m) = t.rx_entry(addr, len) {
                assert_eq!(m.pkt_len(), len as usize, "the entry's length");
                let slot = pool.slot_of(&m).expect("one of the pool's mbufs");
                assert!(
                    out.remove(&(slot.buf_offset as u64)),
                    "given back twice, or never posted"
                );
                assert!(
                    m.headroom() + m.data_len() <= slot.buf_len,
                    "past its buffer"
                );
            }
        } else if t.completion(addr) {
            let slot = pool.buffer_at(addr as usize).expect("a buffer of the pool");
            assert!(
                out.remove(&(slot.buf_offset as u64)),
                "completed twice, or never posted"
            );
        }
    }
    drop(t);
    assert_eq!(
        pool.available(),
        POOL as usize,
        "every mbuf back in the pool"
    );
});
