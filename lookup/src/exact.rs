//! Exact-match flow table, as DPDK's `rte_hash` in its lock-free
//! read/write mode (`RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF`): any number
//! of lcores look keys up while one writer adds, replaces and deletes,
//! and no lookup takes a lock, allocates or waits for the writer.
//!
//! **Layout.** Keys are `W` 64-bit words (a 5-tuple of IPv4 fits two;
//! IPv6's, five) kept in a key store beside their values; the buckets
//! hold, per slot, a 32-bit signature of the key's hash and the key's
//! index in the store. A key lives in one of two buckets: its primary
//! (from the hash) or its alternative (the primary XOR a hash of the
//! signature, so either one finds the other), as in cuckoo hashing. A
//! lookup reads at most two buckets, and only the keys whose signatures
//! match.
//!
//! **Adding** writes the key and value into a free store entry, then
//! publishes its index in a free slot of either bucket (Release; the
//! readers' Acquire load of the index is its partner). When both are full,
//! the writer makes room by moving a chain of entries each to its other
//! bucket (breadth-first, at most [`MAX_MOVES`] deep): every move first
//! publishes the entry in its new slot, then bumps the table's change
//! counter, then clears the old slot.
//!
//! **Lookups** read the change counter, search both buckets, and if they
//! found nothing read the counter again: a change means an entry may have
//! moved behind them, and they search again. A store entry carries a
//! sequence number the writer makes odd while it rewrites the entry, so a
//! lookup never accepts a key read half before and half after a reuse.
//!
//! All of it is atomics: no `unsafe`.
use crate::Error;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// Slots per bucket.
const SLOTS: usize = 8;
/// The longest chain of moves an add makes room with.
pub const MAX_MOVES: usize = 4;
/// A slot's index when empty (store indices are kept plus one).
const EMPTY: u32 = 0;

/// A bucket: per slot the key's signature and its store index plus one.
/// One cache line, aligned to one: a lookup's bucket is one miss, and the
/// writer's stores to a neighbour never touch its line.
#[derive(Debug)]
#[repr(C, align(64))]
struct Bucket {
    sig: [AtomicU32; SLOTS],
    idx: [AtomicU32; SLOTS],
}

const _: () = assert!(std::mem::size_of::<Bucket>() == 64);

impl Default for Bucket {
    fn default() -> Self {
        Bucket {
            sig: std::array::from_fn(|_| AtomicU32::new(0)),
            idx: std::array::from_fn(|_| AtomicU32::new(EMPTY)),
        }
    }
}

/// A store entry: the key's words, its value and the sequence number
/// (odd while the writer rewrites the entry). Aligned to 32 bytes, so
/// that no entry of up to seven key words straddles two cache lines.
#[derive(Debug)]
#[repr(C, align(32))]
struct Entry<const W: usize> {
    seq: AtomicU32,
    key: [AtomicU64; W],
    value: AtomicU64,
}

impl<const W: usize> Default for Entry<W> {
    fn default() -> Self {
        Entry {
            seq: AtomicU32::new(0),
            key: std::array::from_fn(|_| AtomicU64::new(0)),
            value: AtomicU64::new(0),
        }
    }
}

/// What readers and the writer share.
#[derive(Debug)]
struct Table<const W: usize> {
    buckets: Box<[Bucket]>,
    entries: Box<[Entry<W>]>,
    /// Bumped after every move of an entry between buckets.
    changes: AtomicU32,
    mask: usize,
    seed: u64,
}

/// The reading side: lookups, from any number of threads (clone it).
#[derive(Clone, Debug)]
pub struct ExactReader<const W: usize>(Arc<Table<W>>);

/// The writing side, of which there is one: adds, replaces and deletes.
/// Lookups work here too.
#[derive(Debug)]
pub struct ExactTable<const W: usize> {
    t: Arc<Table<W>>,
    /// Free store entries.
    free: Vec<u32>,
}

/// A key's hash: the primary bucket, the signature (never 0, so an empty
/// slot's signature never matches) and the alternative bucket.
#[derive(Clone, Copy, Debug)]
struct Place {
    prim: usize,
    alt: usize,
    sig: u32,
}

/// A 64-bit mix of the key's words (multiply and xor-shift, as
/// wyhash-style mixers do; good spread over 5-tuples whose fields differ
/// in a few bits).
#[inline]
fn hash<const W: usize>(key: &[u64; W], seed: u64) -> u64 {
    let mut h = seed ^ (W as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for &w in key {
        h = (h ^ w).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 31;
    }
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 29)
}

impl<const W: usize> Table<W> {
    #[inline]
    fn place(&self, key: &[u64; W]) -> Place {
        let h = hash(key, self.seed);
        let sig = ((h >> 32) as u32) | 1;
        let prim = h as usize & self.mask;
        Place {
            prim,
            alt: self.other(prim, sig),
            sig,
        }
    }

    /// The other bucket of an entry in bucket `b` with signature `sig`.
    #[inline]
    fn other(&self, b: usize, sig: u32) -> usize {
        (b ^ (sig.wrapping_mul(0x5bd1_e995) >> 3) as usize) & self.mask
    }

    /// The value of `key` in bucket `b`, if a slot there holds it
    /// (always inlined: a bulk lookup calls it once a key, and the call
    /// cost as much as the search of a key found in its first slot).
    #[inline(always)]
    fn search(&self, b: usize, sig: u32, key: &[u64; W]) -> Option<u64> {
        let bucket = &self.buckets[b];
        for s in 0..SLOTS {
            if bucket.sig[s].load(Ordering::Relaxed) != sig {
                continue;
            }
            // Acquire: pairs with the writer's Release store of the index
            // (`publish`); the entry's words are written before it.
            let idx = bucket.idx[s].load(Ordering::Acquire);
            if idx == EMPTY {
                continue;
            }
            if let Some(v) = self.entries[idx as usize - 1].read_if(key) {
                return Some(v);
            }
        }
        None
    }

    fn lookup(&self, key: &[u64; W]) -> Option<u64> {
        let p = self.place(key);
        loop {
            // Acquire: pairs with the writer's bump after a move (`shift`).
            let before = self.changes.load(Ordering::Acquire);
            if let Some(v) = self
                .search(p.prim, p.sig, key)
                .or_else(|| self.search(p.alt, p.sig, key))
            {
                return Some(v);
            }
            // The searches' loads come before the second read of the
            // counter; pairs with the writer's Release bump.
            fence(Ordering::Acquire);
            if self.changes.load(Ordering::Relaxed) == before {
                return None;
            }
        }
    }
}

impl<const W: usize> Entry<W> {
    /// The value, if the entry holds `key` (read whole: a rewrite under
    /// way or in between makes it read again).
    #[inline]
    fn read_if(&self, key: &[u64; W]) -> Option<u64> {
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let same = self
                .key
                .iter()
                .zip(key)
                .all(|(a, b)| a.load(Ordering::Relaxed) == *b);
            let v = self.value.load(Ordering::Relaxed);
            // The key and value loads come before the second read of the
            // sequence; pairs with the writer's Release in `write`.
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == s1 {
                return same.then_some(v);
            }
        }
    }

    /// Rewrites the entry (the writer only).
    fn write(&self, key: &[u64; W], value: u64) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        // The odd sequence is visible before any word changes; pairs with
        // the readers' Acquire fence in `read_if`.
        fence(Ordering::Release);
        for (a, b) in self.key.iter().zip(key) {
            a.store(*b, Ordering::Relaxed);
        }
        self.value.store(value, Ordering::Relaxed);
        // Release: the words come before the even sequence; pairs with
        // the readers' Acquire load of it.
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }
}

impl<const W: usize> ExactTable<W> {
    /// A table for `capacity` keys (rounded up to whole buckets, at least
    /// one), hashed with `seed`. Buckets are half as many again as the
    /// keys need, so that adds rarely move entries.
    pub fn new(capacity: usize, seed: u64) -> Self {
        let need = capacity.max(1).div_ceil(SLOTS) * 3 / 2;
        Self::with_buckets(capacity, need, seed)
    }

    /// A table for `capacity` keys in `buckets` buckets of eight slots
    /// (rounded up to a power of two, at least two): fewer buckets pack
    /// the keys tighter, and adds move entries more often.
    pub fn with_buckets(capacity: usize, buckets: usize, seed: u64) -> Self {
        let buckets = buckets.max(2).next_power_of_two();
        let capacity = capacity.max(1);
        let t = Table {
            buckets: crate::pages::huge_vec(buckets, Bucket::default).into_boxed_slice(),
            entries: crate::pages::huge_vec(capacity, Entry::default).into_boxed_slice(),
            changes: AtomicU32::new(0),
            mask: buckets - 1,
            seed,
        };
        ExactTable {
            t: Arc::new(t),
            free: (0..capacity as u32).rev().collect(),
        }
    }

    /// A reader for lookups on other threads.
    pub fn reader(&self) -> ExactReader<W> {
        ExactReader(self.t.clone())
    }

    /// How many keys the table holds.
    pub fn len(&self) -> usize {
        self.t.entries.len() - self.free.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many times an add has moved an entry to its other bucket.
    pub fn moves(&self) -> u32 {
        self.t.changes.load(Ordering::Relaxed)
    }

    /// The value of `key`.
    pub fn lookup(&self, key: &[u64; W]) -> Option<u64> {
        self.t.lookup(key)
    }

    /// The two buckets `key` may live in, its primary first: for tools
    /// that study where keys land and which adds move others.
    pub fn buckets_of(&self, key: &[u64; W]) -> [usize; 2] {
        let p = self.t.place(key);
        [p.prim, p.alt]
    }

    /// The slot holding `key`: (bucket, slot, store index).
    fn find(&self, key: &[u64; W]) -> Option<(usize, usize, u32)> {
        let p = self.t.place(key);
        for b in [p.prim, p.alt] {
            let bucket = &self.t.buckets[b];
            for s in 0..SLOTS {
                let idx = bucket.idx[s].load(Ordering::Relaxed);
                if idx != EMPTY
                    && bucket.sig[s].load(Ordering::Relaxed) == p.sig
                    && self.t.entries[idx as usize - 1].read_if(key).is_some()
                {
                    return Some((b, s, idx));
                }
            }
        }
        None
    }

    /// Adds `key` with `value`, or replaces its value. A table with no
    /// free entry, or whose two buckets for the key stay full after
    /// [`MAX_MOVES`] moves, refuses it: nothing is dropped silently.
    pub fn add(&mut self, key: &[u64; W], value: u64) -> Result<(), Error> {
        if let Some((_, _, idx)) = self.find(key) {
            self.t.entries[idx as usize - 1].write(key, value);
            return Ok(());
        }
        let Some(&e) = self.free.last() else {
            return Err(Error::Full {
                what: "every key entry is in use",
            });
        };
        let p = self.t.place(key);
        let slot = self
            .empty_slot(p.prim)
            .map(|s| (p.prim, s))
            .or_else(|| self.empty_slot(p.alt).map(|s| (p.alt, s)))
            .or_else(|| self.make_room(p.prim).map(|s| (p.prim, s)))
            .or_else(|| self.make_room(p.alt).map(|s| (p.alt, s)));
        let Some((b, s)) = slot else {
            return Err(Error::Full {
                what: "both buckets of the key stay full after the allowed moves",
            });
        };
        self.free.pop();
        self.t.entries[e as usize].write(key, value);
        self.publish(b, s, p.sig, e + 1);
        Ok(())
    }

    /// Deletes `key`; whether it was there. Its store entry is reused by
    /// a later add, which readers that still look at it tell apart by
    /// its sequence number.
    pub fn delete(&mut self, key: &[u64; W]) -> bool {
        let Some((b, s, idx)) = self.find(key) else {
            return false;
        };
        // Release: an empty slot is seen no earlier than the writes
        // before it.
        self.t.buckets[b].idx[s].store(EMPTY, Ordering::Release);
        self.free.push(idx - 1);
        true
    }

    fn empty_slot(&self, b: usize) -> Option<usize> {
        let bucket = &self.t.buckets[b];
        (0..SLOTS).find(|&s| bucket.idx[s].load(Ordering::Relaxed) == EMPTY)
    }

    /// Puts store index `idx` with `sig` in slot `s` of bucket `b`.
    fn publish(&self, b: usize, s: usize, sig: u32, idx: u32) {
        let bucket = &self.t.buckets[b];
        bucket.sig[s].store(sig, Ordering::Relaxed);
        // Release: the entry's words and the signature come before the
        // index; pairs with the readers' Acquire load in `search`.
        bucket.idx[s].store(idx, Ordering::Release);
    }

    /// Frees a slot of bucket `b` by moving a chain of entries each to
    /// its other bucket (breadth-first over at most [`MAX_MOVES`] moves);
    /// the slot freed in `b`.
    fn make_room(&self, b: usize) -> Option<usize> {
        // (bucket, slot, parent in `path`)
        let mut path: Vec<(usize, usize, usize)> = Vec::new();
        let mut frontier = vec![(b, usize::MAX)];
        for _ in 0..MAX_MOVES {
            let mut next = Vec::new();
            for &(fb, parent) in &frontier {
                for s in 0..SLOTS {
                    let sig = self.t.buckets[fb].sig[s].load(Ordering::Relaxed);
                    let to = self.t.other(fb, sig);
                    path.push((fb, s, parent));
                    let me = path.len() - 1;
                    if let Some(free) = self.empty_slot(to) {
                        return self.shift(&path, me, to, free);
                    }
                    next.push((to, me));
                }
            }
            frontier = next;
        }
        None
    }

    /// Moves the chain ending at `path[at]` one step each, from the end
    /// (into `to`'s slot `free`) back to the start; the slot freed in the
    /// first bucket. A chain that runs into itself (a destination no
    /// longer empty) stops there, every move made so far complete.
    fn shift(
        &self,
        path: &[(usize, usize, usize)],
        at: usize,
        to: usize,
        free: usize,
    ) -> Option<usize> {
        let (mut dst_b, mut dst_s, mut i) = (to, free, at);
        loop {
            let (b, s, parent) = path[i];
            if self.t.buckets[dst_b].idx[dst_s].load(Ordering::Relaxed) != EMPTY {
                return None;
            }
            let src = &self.t.buckets[b];
            let sig = src.sig[s].load(Ordering::Relaxed);
            let idx = src.idx[s].load(Ordering::Relaxed);
            self.publish(dst_b, dst_s, sig, idx);
            // The entry is in both buckets now; the bump tells lookups
            // that may have searched the new one before it arrived and
            // the old one after it left to search again. Release: pairs
            // with the readers' Acquire fence before their second read.
            self.t.changes.fetch_add(1, Ordering::Release);
            src.idx[s].store(EMPTY, Ordering::Release);
            if parent == usize::MAX {
                return Some(s);
            }
            (dst_b, dst_s, i) = (b, s, parent);
        }
    }
}

impl<const W: usize> ExactReader<W> {
    /// The value of `key`.
    #[inline]
    pub fn lookup(&self, key: &[u64; W]) -> Option<u64> {
        self.0.lookup(key)
    }

    /// The values of a burst of keys, into `out` (as long as `keys`):
    /// every key's buckets are found first, then searched, so that their
    /// cache misses overlap.
    pub fn lookup_bulk(&self, keys: &[[u64; W]], out: &mut [Option<u64>]) {
        if keys.is_empty() {
            return;
        }
        let t = &*self.0;
        let mut places = [Place {
            prim: 0,
            alt: 0,
            sig: 0,
        }; 64];
        for (chunk, outs) in keys.chunks(64).zip(out.chunks_mut(64)) {
            for (p, k) in places.iter_mut().zip(chunk) {
                *p = t.place(k);
                // Touch the primary bucket's signatures early.
                std::hint::black_box(t.buckets[p.prim].sig[0].load(Ordering::Relaxed));
            }
            // Acquire: pairs with the writer's bump after a move (`shift`),
            // as in the single lookup.
            let before = t.changes.load(Ordering::Acquire);
            let mut missed = false;
            for ((p, k), o) in places.iter().zip(chunk).zip(outs.iter_mut()) {
                *o = t
                    .search(p.prim, p.sig, k)
                    .or_else(|| t.search(p.alt, p.sig, k));
                missed |= o.is_none();
            }
            // A miss is final unless an entry moved while the pass ran:
            // the searches' loads come before the second read of the
            // counter (pairs with the writer's Release bump).
            fence(Ordering::Acquire);
            if missed && t.changes.load(Ordering::Relaxed) != before {
                for (k, o) in chunk.iter().zip(outs.iter_mut()) {
                    if o.is_none() {
                        *o = t.lookup(k);
                    }
                }
            }
        }
    }
}
