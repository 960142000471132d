//! `rpmd_lookup::Lpm6` under any sequence of route adds, deletes and
//! lookups (5 bytes an operation: kind, prefix length, and three bytes
//! spread over the address so that routes nest), checked against a linear
//! scan of the routes; a length past 128 must be refused, a full table
//! must refuse and change nothing, and every group must come back once
//! the routes are gone.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rpmd_lookup::testing::{linear_scan, mask};
use rpmd_lookup::{Error, Lpm6, Lpm6Config};
use std::collections::BTreeMap;



fuzz_target!(|data: &[u8]| {
    let mut t = Lpm6::new(Lpm6Config {
        max_rules: 32,
        groups: 40,
    });
    let total = t.free_groups();
    let mut routes = BTreeMap::new();
    for op in data.chunks_exact(5).take(64) {
        let depth = match op[1] {
            250.. => 129,
            b => b % 129,
        };
        // Three bytes at three levels: routes meet at every depth.
        let addr = 0x2001_0db8u128 << 96
            | (op[2] as u128) << 88
            | (op[3] as u128) << 56
            | (op[4] as u128) << 8;
        let key = (depth, addr & mask::<u128>(depth.min(128)));
        match op[0] % 4 {
            0 | 1 => match t.add(addr, depth, op[4] as u32) {
                Ok(()) => {
                    routes.insert(key, op[4] as u32);
                }
                Err(Error::Depth { .. }) => assert!(depth > 128),
                Err(Error::Full { .. }) => assert!(!routes.contains_key(&key)),
                Err(e) => panic!("{e}"),
            },
            2 => {
                let r = t.delete(addr, depth);
                assert_eq!(r.is_ok(), depth <= 128 && routes.remove(&key).is_some());
            }
            _ => assert_eq!(t.lookup(addr | 0x7f), linear_scan(&routes, addr | 0x7f)),
        }
        assert_eq!(t.len(), routes.len());
    }
    for &(d, p) in routes.keys() {
        t.delete(p, d).unwrap();
    }
    assert_eq!(t.free_groups(), total);
});
