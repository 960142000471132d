//! `Lpm4` against a naive reference (the longest of a list of routes that
//! covers an address, found by a linear scan), across random adds and
//! deletes, and the edges: a default route, /32s, /24-/25 boundaries,
//! replacement, full tables, refused input.
use rpmd_lookup::lpm::MAX_NEXT_HOP;
use rpmd_lookup::testing::{linear_scan, mask};
use rpmd_lookup::{Error, Lpm4, Lpm4Config};
use std::collections::BTreeMap;

mod common;
use common::Rng;

/// The reference: routes by (length, prefix).
#[derive(Default)]
struct Naive(BTreeMap<(u8, u32), u32>);
impl Naive {
    fn lookup(&self, a: u32) -> Option<u32> {
        linear_scan(&self.0, a)
    }
}

fn small() -> Lpm4 {
    Lpm4::new(Lpm4Config {
        max_rules: 4096,
        groups: 64,
    })
}

/// Addresses worth checking for these routes: each prefix's first and
/// last address, their neighbours, and random ones.
fn probes(routes: &Naive, rng: &mut Rng) -> Vec<u32> {
    let mut v = Vec::new();
    for &(d, p) in routes.0.keys() {
        let last = p | !mask::<u32>(d);
        v.extend([p, last, p.wrapping_sub(1), last.wrapping_add(1)]);
    }
    v.extend((0..256).map(|_| rng.next() as u32));
    v
}

#[test]
fn random_adds_and_deletes_match_a_linear_scan() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..4 {
        let mut t = small();
        let mut n = Naive::default();
        // Prefixes clustered in a few /16s so that routes nest and share
        // groups; every length from 0 to 32.
        let bases: Vec<u32> = (0..4).map(|_| (rng.next() as u32) & 0xffff_0000).collect();
        for step in 0..400 {
            let d = rng.below(33) as u8;
            let base = bases[rng.below(4) as usize];
            let p = (base | (rng.next() as u32 & 0xffff)) & mask::<u32>(d);
            if rng.below(3) == 0 && !n.0.is_empty() {
                let k =
                    *n.0.keys()
                        .nth(rng.below(n.0.len() as u64) as usize)
                        .unwrap();
                t.delete(k.1, k.0).unwrap();
                n.0.remove(&k);
            } else {
                let nh = rng.below(1 << 20) as u32;
                match t.add(p, d, nh) {
                    Ok(()) => {
                        n.0.insert((d, p), nh);
                    }
                    Err(Error::Full { .. }) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            if step % 20 == 0 {
                for a in probes(&n, &mut rng) {
                    assert_eq!(
                        t.lookup(a),
                        n.lookup(a),
                        "round {round} step {step}: {a:#x}"
                    );
                }
            }
        }
        assert_eq!(t.len(), n.0.len());
        let addrs = probes(&n, &mut rng);
        let mut out = vec![None; addrs.len()];
        t.lookup_bulk(&addrs, &mut out);
        for (a, got) in addrs.iter().zip(&out) {
            assert_eq!(*got, n.lookup(*a), "bulk: {a:#x}");
        }
        // Every route deleted: nothing answers, every group given back.
        let keys: Vec<_> = n.0.keys().copied().collect();
        for (d, p) in keys {
            t.delete(p, d).unwrap();
        }
        assert!(t.is_empty());
        assert_eq!(t.free_groups(), 64, "round {round}: groups given back");
        for a in probes(&n, &mut rng) {
            assert_eq!(t.lookup(a), None);
        }
    }
}

#[test]
fn a_default_route_and_host_routes() {
    let mut t = small();
    assert_eq!(t.lookup(0x0a00_0001), None);
    t.add(0, 0, 7).unwrap(); // /0, which rte_lpm refuses
    assert_eq!(t.lookup(0x0a00_0001), Some(7));
    assert_eq!(t.lookup(u32::MAX), Some(7));
    t.add(0x0a00_0001, 32, 9).unwrap();
    t.add(0x0a00_0000, 24, 8).unwrap();
    t.add(0x0a00_0080, 25, 10).unwrap();
    assert_eq!(t.lookup(0x0a00_0001), Some(9));
    assert_eq!(t.lookup(0x0a00_0002), Some(8));
    assert_eq!(t.lookup(0x0a00_0081), Some(10));
    assert_eq!(t.lookup(0x0a00_0100), Some(7));
    // The same route again replaces its next hop.
    t.add(0x0a00_0000, 24, 11).unwrap();
    assert_eq!((t.lookup(0x0a00_0002), t.len()), (Some(11), 4));
    // Deleting falls back to the next-longest route.
    t.delete(0x0a00_0080, 25).unwrap();
    assert_eq!(t.lookup(0x0a00_0081), Some(11));
    t.delete(0x0a00_0000, 24).unwrap();
    assert_eq!(t.lookup(0x0a00_0002), Some(7));
    assert_eq!(t.lookup(0x0a00_0001), Some(9));
    t.delete(0x0a00_0001, 32).unwrap();
    assert_eq!(t.free_groups(), 64);
    // Bits past the length are ignored.
    t.add(0xc0a8_01ff, 24, 3).unwrap();
    assert_eq!(t.routes().last(), Some((0xc0a8_0100, 24, 3)));
}

#[test]
fn full_tables_and_bad_input_are_errors_that_change_nothing() {
    let mut t = Lpm4::new(Lpm4Config {
        max_rules: 3,
        groups: 1,
    });
    t.add(0x0a00_0001, 32, 1).unwrap();
    // A second /24 with a long route needs a second group.
    let e = t.add(0x0b00_0001, 32, 2).unwrap_err();
    assert!(matches!(e, Error::Full { .. }), "{e}");
    assert_eq!((t.lookup(0x0b00_0001), t.len()), (None, 1));
    t.add(0x0a00_0002, 32, 2).unwrap(); // same /24: the same group
    t.add(0x0c00_0000, 8, 3).unwrap();
    let e = t.add(0x0d00_0000, 8, 4).unwrap_err();
    assert_eq!(e, Error::Full { what: "routes" });
    t.add(0x0c00_0000, 8, 5).unwrap(); // a replacement needs no room
    assert_eq!(t.lookup(0x0c01_0203), Some(5));
    assert_eq!(
        t.add(0, 33, 1).unwrap_err(),
        Error::Depth { depth: 33, max: 32 }
    );
    assert!(matches!(
        t.add(0, 8, MAX_NEXT_HOP + 1).unwrap_err(),
        Error::NextHop { .. }
    ));
    let e = t.delete(0x0e00_0000, 8).unwrap_err().to_string();
    assert_eq!(e, "no route 14.0.0.0/8");
}
