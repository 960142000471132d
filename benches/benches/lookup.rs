//! criterion benches of the lookup tables: IPv4 longest-prefix match
//! (`Lpm4`, 1000 random routes of /8 to /32 plus a default, as
//! `lpm_perf_autotest` draws them), IPv6 (`Lpm6`, 1000 routes of /32 to
//! /64 and a default, addresses under them) and the exact-match flow table
//! (`ExactTable`, 16-byte IPv4 5-tuples in a table 3/4 full), single
//! lookups and bursts of 32, hits and misses. Throughput is per lookup.
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rpmd_lookup::{ExactTable, Lpm4, Lpm4Config, Lpm6, Lpm6Config};
use std::hint::black_box;

/// xorshift64*: deterministic.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn lpm(c: &mut Criterion) {
    let mut rng = Rng(1);
    let mut t = Lpm4::new(Lpm4Config::default());
    t.add(0, 0, 0).unwrap();
    for i in 1..=1000u32 {
        let depth = 8 + (rng.next() % 25) as u8;
        let _ = t.add(rng.next() as u32, depth, i);
    }
    let addrs: Vec<u32> = (0..4096).map(|_| rng.next() as u32).collect();
    lookups(
        c,
        "lpm4",
        &addrs,
        |a| t.lookup(a),
        |a, o| t.lookup_bulk(a, o),
    );
}

fn lpm6(c: &mut Criterion) {
    let mut rng = Rng(3);
    let mut t = Lpm6::new(Lpm6Config::default());
    t.add(0, 0, 0).unwrap();
    // 1000 routes of /32 to /64 under 2000::/3, as global unicast tables.
    let prefixes: Vec<(u128, u8)> = (0..1000)
        .map(|_| {
            let p = (0x2u128 << 124) | ((rng.next() as u128) << 60 >> 4);
            (p, 32 + (rng.next() % 33) as u8)
        })
        .collect();
    for (i, &(p, d)) in prefixes.iter().enumerate() {
        let _ = t.add(p, d, i as u32 + 1);
    }
    // Addresses under the routes (most lookups in a router hit one).
    let addrs: Vec<u128> = (0..4096)
        .map(|i| prefixes[i % prefixes.len()].0 | (rng.next() as u128))
        .collect();
    lookups(
        c,
        "lpm6",
        &addrs,
        |a| t.lookup(a),
        |a, o| t.lookup_bulk(a, o),
    );
}

/// Single lookups of 4096 `addrs` in turn, and bursts of 32, in group
/// `name`.
fn lookups<A: Copy>(
    c: &mut Criterion,
    name: &str,
    addrs: &[A],
    one: impl Fn(A) -> Option<u32>,
    bulk: impl Fn(&[A], &mut [Option<u32>]),
) {
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(1));
    let mut i = 0;
    g.bench_function("lookup", |b| {
        b.iter(|| {
            i = (i + 1) & 4095;
            black_box(one(black_box(addrs[i])))
        })
    });
    g.throughput(Throughput::Elements(32));
    let mut out = [None; 32];
    let mut j = 0;
    g.bench_function("lookup_bulk_32", |b| {
        b.iter(|| {
            j = (j + 32) & 4095;
            bulk(black_box(&addrs[j..j + 32]), &mut out);
            black_box(&out);
        })
    });
    g.finish();
}

fn exact(c: &mut Criterion) {
    let mut rng = Rng(2);
    let mut t = ExactTable::<2>::new(65536, 7);
    let keys: Vec<[u64; 2]> = (0..49152)
        .map(|_| [rng.next(), rng.next() & 0xff_ffff_ffff])
        .collect();
    for (i, k) in keys.iter().enumerate() {
        t.add(k, i as u64).unwrap();
    }
    let misses: Vec<[u64; 2]> = (0..4096).map(|_| [rng.next(), 1 << 63]).collect();
    let r = t.reader();
    let mut g = c.benchmark_group("exact");
    g.throughput(Throughput::Elements(1));
    let mut i = 0;
    g.bench_function("lookup_hit", |b| {
        b.iter(|| {
            i = (i + 7919) % keys.len();
            black_box(r.lookup(black_box(&keys[i])))
        })
    });
    g.bench_function("lookup_miss", |b| {
        b.iter(|| {
            i = (i + 1) & 4095;
            black_box(r.lookup(black_box(&misses[i])))
        })
    });
    g.throughput(Throughput::Elements(32));
    let mut out = [None; 32];
    let mut j = 0;
    g.bench_function("lookup_bulk_32_hit", |b| {
        b.iter(|| {
            j = (j + 32 * 37) % (keys.len() - 32);
            r.lookup_bulk(black_box(&keys[j..j + 32]), &mut out);
            black_box(&out);
        })
    });
    g.finish();
}

criterion_group!(benches, lpm, lpm6, exact);
criterion_main!(benches);
