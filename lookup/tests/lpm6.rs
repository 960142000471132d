//! `Lpm6` against a naive reference (the longest of a list of routes that
//! covers an address, by a linear scan), across random adds and deletes
//! over prefixes that share their top bits (so that routes nest), and the
//! edges: a default route, /128s, level boundaries, replacement, groups
//! given back, full tables, refused input.
use rpmd_lookup::lpm6::MAX_NEXT_HOP;
use rpmd_lookup::testing::{linear_scan, mask};
use rpmd_lookup::{Error, Lpm6, Lpm6Config};
use std::collections::BTreeMap;

mod common;
use common::Rng;

/// An address: 2001:db8::/32 three times in four, with a few bits of
/// variety at each level (so that routes nest), else anywhere.
fn addr(rng: &mut Rng) -> u128 {
    let low = (rng.next() as u128) << 64 | rng.next() as u128;
    let pick = rng.next();
    let mixed = low & !(0x00f0_f0f0_f0f0_f0f0_00f0_f0f0_f0f0_f0f0u128) & u128::MAX >> 8;
    match pick % 4 {
        0 => low,
        _ => 0x2001_0db8u128 << 96 | (mixed & (u128::MAX >> 32)),
    }
}

#[test]
fn agrees_with_a_linear_scan_through_adds_and_deletes() {
    for seed in [3u64, 9, 27] {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut t = Lpm6::new(Lpm6Config {
            max_rules: 2000,
            groups: 4096,
        });
        let mut routes: BTreeMap<(u8, u128), u32> = BTreeMap::new();
        let total = t.free_groups();
        let mut live: Vec<(u8, u128)> = Vec::new();
        for step in 0..3000 {
            if rng.next() % 3 != 0 || live.is_empty() {
                let depth = [0u8, 8, 16, 17, 24, 32, 33, 40, 48, 56, 64, 96, 127, 128]
                    [(rng.next() % 14) as usize];
                let p = addr(&mut rng) & mask::<u128>(depth);
                let nh = (rng.next() as u32) & MAX_NEXT_HOP;
                t.add(p, depth, nh).unwrap();
                if routes.insert((depth, p), nh).is_none() {
                    live.push((depth, p));
                }
            } else {
                let (d, p) = live.swap_remove((rng.next() as usize) % live.len());
                t.delete(p, d).unwrap();
                routes.remove(&(d, p));
            }
            for _ in 0..8 {
                // An address under a known route, or anywhere.
                let a = match live.get((rng.next() as usize) % live.len().max(1)) {
                    Some(&(d, p)) if rng.next() % 2 == 0 => p | (addr(&mut rng) & !mask::<u128>(d)),
                    _ => addr(&mut rng),
                };
                assert_eq!(t.lookup(a), linear_scan(&routes, a), "step {step}, {a:#x}");
            }
        }
        let addrs: Vec<u128> = (0..100).map(|_| addr(&mut rng)).collect();
        let mut out = vec![None; 100];
        t.lookup_bulk(&addrs, &mut out);
        for (a, o) in addrs.iter().zip(&out) {
            assert_eq!(*o, t.lookup(*a));
        }
        for (d, p) in live {
            t.delete(p, d).unwrap();
        }
        assert!(t.is_empty());
        assert_eq!(t.free_groups(), total, "every group given back");
        assert_eq!(t.lookup(addr(&mut rng)), None);
    }
}

#[test]
fn edges_replacements_and_refusals() {
    let mut t = Lpm6::new(Lpm6Config {
        max_rules: 4,
        groups: 15,
    });
    let a: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0001;
    t.add(0, 0, 1).unwrap();
    assert_eq!(t.lookup(a), Some(1), "the default route");
    t.add(a, 128, 2).unwrap();
    assert_eq!(t.lookup(a), Some(2));
    assert_eq!(t.lookup(a + 1), Some(1));
    assert_eq!(
        t.free_groups(),
        1,
        "a /128 takes a group per level below the first"
    );
    t.add(a, 128, 3).unwrap();
    assert_eq!((t.lookup(a), t.len()), (Some(3), 2), "replaced, not added");
    // Another /128 elsewhere needs 14 more groups: refused, nothing changed.
    let b = 0xfe80u128 << 112 | 5;
    assert!(matches!(t.add(b, 128, 4), Err(Error::Full { .. })));
    assert_eq!((t.lookup(b), t.len()), (Some(1), 2));
    // Under the first /128's path it needs none.
    t.add(a | 0xff, 120, 5).unwrap();
    assert_eq!(t.lookup(a | 0x80), Some(5));
    assert_eq!(t.lookup(a), Some(3));
    assert!(matches!(t.add(a, 129, 1), Err(Error::Depth { .. })));
    assert!(matches!(
        t.add(a, 64, MAX_NEXT_HOP + 1),
        Err(Error::NextHop { .. })
    ));
    assert!(matches!(t.delete(a, 64), Err(Error::NoRoute { .. })));
    t.add(a, 64, 6).unwrap();
    assert!(matches!(
        t.add(a, 48, 7),
        Err(Error::Full { what: "routes" })
    ));
    t.delete(a, 128).unwrap();
    assert_eq!(
        t.lookup(a),
        Some(5),
        "falls back to the /120 that covers it"
    );
    t.delete(a | 0xff, 120).unwrap();
    assert_eq!(t.lookup(a), Some(6), "then to the /64");
    t.delete(a, 64).unwrap();
    assert_eq!(t.lookup(a), Some(1));
    assert_eq!(t.free_groups(), 15);
}
