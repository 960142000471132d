//! The shm port's link file as another process may leave it. Two modes,
//! by the input's first byte:
//!
//! - a live link: our side A creates the file and starts; the fuzzer, as
//!   side B's process, then writes words anywhere in the file (ring
//!   heads and tails, slot ctrl words with any seq and length, frame
//!   bytes, the header, the owner pids) between our rx and tx bursts;
//! - a file found on open: the fuzzer writes a header (version,
//!   geometry), owner pids, a size and words, and our port opens the name
//!   as the second side, which must refuse what does not fit or join.
//!
//! Whatever the file holds: no panic, no frame longer than the slot size,
//! a tx burst never takes more than it was given, and every mbuf back in
//! the pool at the end.
#![no_main]
use libfuzzer_sys::fuzz_target;
#[path = "once_pool.rs"]
mod once_pool;
use rpmd_pmd::port::Pkts;
use rpmd_pmd::{Mempool, PortConfig, Registry};
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;

const POOL: u32 = 256;
const SLOT_SIZE: usize = 256;

fn pool() -> &'static Mempool {
    once_pool::pool("fz-shm", POOL)
}

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(Registry::new)
}

fn name() -> String {
    format!("fz{}", std::process::id())
}

fn path() -> String {
    format!("/dev/shm/rpmd-shm-{}", name())
}

/// Writes `(offset, value)` words from `input` (6 bytes each: a word
/// index of 16 bits, times 4, and a 32-bit value) into the file, past
/// its magic (see the file-found mode).
fn scribble(file: &std::fs::File, len: u64, input: &[u8]) {
    for w in input.chunks_exact(6) {
        let off = 8 + u16::from_le_bytes([w[0], w[1]]) as u64 * 4 % len.saturating_sub(8).max(4);
        let _ = file.write_at(&w[2..6], off);
    }
}

fuzz_target!(|data: &[u8]| {
    let [mode, rest @ ..] = data else { return };
    let pool = pool();
    let reg = registry();
    let _ = std::fs::remove_file(path());
    let dev = format!("shm:{},slots=8,slot_size={SLOT_SIZE}", name());
    if mode & 1 == 1 {
        // A file found on open: header, pids, size and words from the input.
        let Some((head, words)) = rest.split_first_chunk::<24>() else {
            return;
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path())
            .expect("a file in /dev/shm");
        // At least the header's page, with the magic: a file without them
        // is waited for (2 s: its creator may be writing it), which the
        // port's tests cover and would stall the fuzzer here.
        let size = 4096 + u16::from_le_bytes([head[22], head[23]]) as u64 * 64;
        let _ = file.set_len(size);
        let _ = file.write_at(b"RPMDSHM1", 0);
        // Version and geometry as the input has them.
        let _ = file.write_at(&head[8..22], 8);
        scribble(&file, size, words);
        if let Ok(mut p) = reg.open(&dev) {
            exercise(p.as_mut(), pool, None);
        }
    } else {
        let Ok(mut p) = reg.open(&dev) else { return };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path())
            .ok();
        exercise(p.as_mut(), pool, file.as_ref().map(|f| (f, rest)));
    }
    let _ = std::fs::remove_file(path());
    assert_eq!(
        pool.available(),
        POOL as usize,
        "every mbuf back in the pool"
    );
});

/// Starts `p`, then bursts: rx and tx, with the peer's words in between
/// when `peer` is given (the file and the input, in rounds of 8 words).
fn exercise(p: &mut dyn rpmd_pmd::Port, pool: &Mempool, peer: Option<(&std::fs::File, &[u8])>) {
    if p.configure(&PortConfig::with_pool(pool)).is_err() {
        return;
    }
    let Ok(mut q) = p.start() else { return };
    let rounds: Vec<&[u8]> = match peer {
        Some((_, input)) => input.chunks(48).collect(),
        None => vec![&[]; 2],
    };
    let len = peer
        .and_then(|(f, _)| f.metadata().ok())
        .map_or(0, |m| m.len());
    let mut pkts = Pkts::new();
    for r in rounds {
        if let Some((f, _)) = peer {
            scribble(f, len, r);
        }
        let n = q.rx_burst(0, &mut pkts, 32);
        assert_eq!(n, pkts.len());
        for m in pkts.iter() {
            assert!(m.pkt_len() <= SLOT_SIZE, "a frame of {} bytes", m.pkt_len());
        }
        pkts.clear();
        for k in 0..4usize {
            let Ok(mut m) = pool.get() else { break };
            if let Some(b) = m.append(60 + k * 50) {
                b.fill(k as u8);
            }
            let _ = pkts.push(m);
        }
        let given = pkts.len();
        let n = q.tx_burst(0, &mut pkts);
        assert!(n <= given, "took {n} of {given}");
        pkts.clear();
    }
    drop(q);
    let _ = p.stop();
}
