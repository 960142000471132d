//! `rpmd_lookup::ExactTable` under any sequence of adds, replacements,
//! deletes and lookups (5 bytes an operation: kind, then a key drawn from
//! a small space so that operations meet), checked against a `HashMap`,
//! in a table small enough to fill: a full table must refuse and change
//! nothing; every key added stays found, with its last value, through the
//! moves that make room.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rpmd_lookup::{Error, ExactTable};
use std::collections::HashMap;

fuzz_target!(|data: &[u8]| {
    let seed = data.first().copied().unwrap_or(0) as u64;
    // 64 entries in 8 buckets of 8: full tables and moves come quickly.
    let mut t = ExactTable::<2>::with_buckets(64, 8, seed);
    let mut model: HashMap<[u64; 2], u64> = HashMap::new();
    for (i, op) in data.chunks_exact(5).take(512).enumerate() {
        let k = u32::from_le_bytes([op[1], op[2], op[3], op[4]]) % 200;
        let key = [k as u64 * 0x9e37_79b9, (k as u64) << 7];
        match op[0] % 4 {
            0 | 1 => match t.add(&key, i as u64) {
                Ok(()) => {
                    model.insert(key, i as u64);
                }
                Err(Error::Full { .. }) => assert!(!model.contains_key(&key)),
                Err(e) => panic!("{e}"),
            },
            2 => assert_eq!(t.delete(&key), model.remove(&key).is_some()),
            _ => assert_eq!(t.lookup(&key), model.get(&key).copied()),
        }
        assert_eq!(t.len(), model.len());
    }
    for (k, v) in &model {
        assert_eq!(t.lookup(k), Some(*v));
    }
});
