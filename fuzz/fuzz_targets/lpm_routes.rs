//! `rpmd_lookup::Lpm4` under any sequence of route adds, deletes and
//! lookups (6 bytes an operation: kind, prefix length, address), checked
//! against a linear scan of the routes; a length past 32 must be refused,
//! a full table must refuse and change nothing. One table is reused
//! across inputs (its 64 MiB first table made once) and emptied after
//! each.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rpmd_lookup::testing::{linear_scan, mask};
use rpmd_lookup::{Error, Lpm4, Lpm4Config};
use std::cell::RefCell;
use std::collections::BTreeMap;

thread_local! {
    static TABLE: RefCell<Lpm4> = RefCell::new(Lpm4::new(Lpm4Config { max_rules: 48, groups: 8 }));
}



fuzz_target!(|data: &[u8]| {
    TABLE.with(|t| {
        let mut t = t.borrow_mut();
        let mut routes = BTreeMap::new();
        for op in data.chunks_exact(6).take(64) {
            // Lengths 8-32 mostly; 0-7 (a route over 2^17 or more
            // first-table entries, slow under the sanitizer) and 33 (to be
            // refused) rarely.
            let depth = match op[1] {
                b @ 248.. => b - 248,
                247 => 33,
                b => 8 + b % 25,
            };
            let addr = u32::from_be_bytes([op[2], op[3], op[4], op[5]]);
            let key = (depth, addr & mask::<u32>(depth.min(32)));
            match op[0] % 4 {
                0 | 1 => match t.add(addr, depth, addr & 0xffff) {
                    Ok(()) => {
                        routes.insert(key, addr & 0xffff);
                    }
                    Err(Error::Depth { .. }) => assert!(depth > 32),
                    Err(Error::Full { .. }) => assert!(!routes.contains_key(&key)),
                    Err(e) => panic!("{e}"),
                },
                2 => {
                    let r = t.delete(addr, depth);
                    assert_eq!(r.is_ok(), depth <= 32 && routes.remove(&key).is_some());
                }
                _ => assert_eq!(t.lookup(addr), linear_scan(&routes, addr)),
            }
        }
        assert_eq!(t.len(), routes.len());
        for &(d, p) in routes.keys() {
            for a in [
                p,
                p | !mask::<u32>(d),
                p.wrapping_sub(1),
                (p | !mask::<u32>(d)).wrapping_add(1),
            ] {
                assert_eq!(t.lookup(a), linear_scan(&routes, a));
            }
        }
        for (d, p) in routes.keys().copied().collect::<Vec<_>>() {
            t.delete(p, d).unwrap();
        }
        assert!(t.is_empty());
        assert_eq!(t.free_groups(), 8, "every group given back");
    });
});
