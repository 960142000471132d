//! `ExactTable` against `HashMap` across random adds, replacements and
//! deletes up to a full table; bulk lookups against single ones; refusals
//! when full; and lookups on other threads while the writer adds, moves
//! and deletes, never missing a key that stays nor finding one never
//! added.
use rpmd_lookup::{Error, ExactTable};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

mod common;
use common::Rng;

/// An IPv4 5-tuple as two words (addresses, then ports and protocol).
fn tuple(src: u32, dst: u32, sport: u16, dport: u16, proto: u8) -> [u64; 2] {
    [
        (src as u64) << 32 | dst as u64,
        (sport as u64) << 24 | (dport as u64) << 8 | proto as u64,
    ]
}

fn key_n(n: u64) -> [u64; 2] {
    tuple(n as u32, !(n as u32), n as u16, 443, 6)
}

#[test]
fn agrees_with_a_hashmap_through_adds_replacements_and_deletes() {
    for seed in [1u64, 7, 42] {
        let mut rng = Rng(seed * 0x9e37_79b9);
        let mut t = ExactTable::<2>::new(4096, seed);
        let mut model: HashMap<[u64; 2], u64> = HashMap::new();
        // Keys from a small space, so that replacements and deletes hit.
        let key = |r: &mut Rng| {
            let v = r.next() % 6000;
            tuple(
                0x0a00_0000 | v as u32,
                0x0a01_0001,
                1000 + (v % 7) as u16,
                80,
                6,
            )
        };
        for step in 0..40_000 {
            let k = key(&mut rng);
            match rng.next() % 10 {
                0..=5 => {
                    let v = rng.next();
                    match t.add(&k, v) {
                        Ok(()) => {
                            model.insert(k, v);
                        }
                        Err(Error::Full { .. }) => {
                            assert!(!model.contains_key(&k), "a replacement refused");
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
                6..=7 => assert_eq!(t.delete(&k), model.remove(&k).is_some(), "step {step}"),
                _ => assert_eq!(t.lookup(&k), model.get(&k).copied(), "step {step}"),
            }
            assert_eq!(t.len(), model.len());
        }
        for (k, v) in &model {
            assert_eq!(t.lookup(k), Some(*v));
        }
        assert!(model.len() > 3000, "filled well past half: {}", model.len());
        let mut packed = ExactTable::<2>::with_buckets(4096, 512, seed);
        let mut n = 0;
        while packed.add(&key_n(n), n).is_ok() {
            n += 1;
        }
        assert!(n > 3800 && packed.moves() > 0, "{n} keys in 4096 slots");
        for i in 0..n {
            assert_eq!(packed.lookup(&key_n(i)), Some(i));
        }
    }
}

#[test]
fn a_full_table_refuses_and_keeps_what_it_has() {
    let mut t = ExactTable::<1>::new(1000, 3);
    let mut added = Vec::new();
    let mut refused = 0;
    for i in 0..1100u64 {
        match t.add(&[i * 0x1_0001], i) {
            Ok(()) => added.push(i),
            Err(Error::Full { what }) => {
                refused += 1;
                assert!(!what.is_empty());
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(added.len(), 1000, "every entry used before refusing");
    assert_eq!(refused, 100);
    for i in added {
        assert_eq!(t.lookup(&[i * 0x1_0001]), Some(i));
    }
    assert!(t.delete(&[0]));
    t.add(&[5_000_000], 9).unwrap();
    assert_eq!(t.lookup(&[5_000_000]), Some(9));
}

#[test]
fn bulk_lookups_equal_single_ones() {
    let mut t = ExactTable::<5>::new(2048, 11);
    let mut rng = Rng(5);
    let keys: Vec<[u64; 5]> = (0..300)
        .map(|_| std::array::from_fn(|_| rng.next()))
        .collect();
    for (i, k) in keys.iter().enumerate().step_by(2) {
        t.add(k, i as u64).unwrap();
    }
    let r = t.reader();
    let mut out = vec![None; keys.len()];
    r.lookup_bulk(&keys, &mut out);
    for (i, (k, o)) in keys.iter().zip(&out).enumerate() {
        assert_eq!(*o, r.lookup(k));
        assert_eq!(*o, (i % 2 == 0).then_some(i as u64));
    }
}

/// Readers on two threads look up keys that stay in the table (always
/// found, with their value) and keys never added (never found), while the
/// writer fills the table to where adds must move entries, deletes and
/// adds again, and replaces the stable keys' values with ones the readers
/// can check.
#[test]
fn lookups_never_miss_a_staying_key_while_the_writer_moves_entries() {
    const STABLE: u64 = 500;
    // As many entries as slots: the last adds must move entries.
    let mut t = ExactTable::<2>::with_buckets(4096, 512, 99);
    for i in 0..STABLE {
        t.add(&tuple(i as u32, 1, 1, 1, 17), i << 32).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let lookups = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..2)
        .map(|n| {
            let r = t.reader();
            let (stop, lookups) = (stop.clone(), lookups.clone());
            std::thread::spawn(move || {
                let mut i = n;
                while !stop.load(Ordering::Relaxed) {
                    let k = i % STABLE;
                    let v = r.lookup(&tuple(k as u32, 1, 1, 1, 17));
                    let v = v.unwrap_or_else(|| panic!("stable key {k} missed"));
                    assert_eq!(v >> 32, k, "a stable key's value from another key");
                    assert_eq!(
                        r.lookup(&tuple(k as u32, 2, 2, 2, 6)),
                        None,
                        "a key never added"
                    );
                    i += 1;
                    lookups.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut rng = Rng(17);
    let mut churn: Vec<[u64; 2]> = Vec::new();
    for round in 0..60u64 {
        // Fill until refused: the adds near the end move entries.
        loop {
            let k = tuple(rng.next() as u32 | 0x8000_0000, 3, 3, 3, 6);
            match t.add(&k, 0) {
                Ok(()) => churn.push(k),
                Err(_) => break,
            }
        }
        // Delete half of them, keep the rest.
        churn.retain(|k| {
            let keep = rng.next() % 2 == 0;
            keep || !t.delete(k)
        });
        for i in 0..STABLE {
            t.add(&tuple(i as u32, 1, 1, 1, 17), i << 32 | round)
                .unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().expect("a reader failed");
    }
    assert!(lookups.load(Ordering::Relaxed) > 1000);
    assert!(t.moves() > 1000, "entries moved: {}", t.moves());
}
