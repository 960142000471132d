//! `lookup_perf`: rpmd-lookup's tables under the loops of DPDK's
//! `dpdk-test` lookup autotests, so that `compare_lookup` can put each of
//! our rows beside DPDK's in the same run. Prints `CASE <name> <cycles per
//! lookup>` lines.
//!
//! - `lpm_single`, `lpm_bulk`, `lpm_x4` (`lpm_perf_autotest`): the route
//!   set has the depth distribution `--lpm-depths` gives (compare_lookup
//!   parses the one DPDK's run prints), each depth's prefixes evenly spaced
//!   from a random start over 0/1 .. 223/8 (classes A to C, so 1 address in
//!   8 has no route, as in DPDK's set); a table with 2048 second-level
//!   groups, as DPDK's, so long prefixes past that are refused, as
//!   DPDK's are; 1024 batches of 4096 random addresses looked up one at a
//!   time, in bulks of 32, and in fours.
//! - `fib_bulk` (`fib_perf_autotest`): the same kind of set, every route
//!   added (enough groups), bulks of 32.
//! - `lpm6_single`, `lpm6_bulk` (`lpm6_perf_autotest`): `--lpm6-depths`'s
//!   distribution over random prefixes in random order; 100000 addresses
//!   made as DPDK's test makes them from its data file's routes (random,
//!   each given a route's prefix, 400 in a row per route, routes in
//!   order), looked up 1024 times, one at a time and in one bulk call.
//! - `hash_*` (`hash_readwrite_lf_perf_autotest`, one reader and one
//!   writer, single lookups): 4-byte keys in a table of 2^22 entries in
//!   2^19 buckets of 8; keys are sorted, as DPDK's test sorts them, into
//!   those that go in without moving others, those whose add moves
//!   entries, and those that are never added; a reader on CPU 1 looks up a
//!   set while the writer on CPU 0 adds (or has added) another:
//!   `hash_hit` (no-move keys, all added first), `hash_miss` (absent keys
//!   while the no-move keys go in), `hash_ks_hit_nsp` and `hash_ks_hit_sp`
//!   (present keys off and on the moving keys' buckets while those go in),
//!   `hash_ks_miss` (absent keys while they go in).
//!
//! Usage: `lookup_perf --lpm-depths D:N,... --lpm6-depths D:N,... [--only PREFIX] [--cores A,B]`
use rpmd_benches::tsc::{pin, rdtsc};
use rpmd_lookup::{ExactTable, Lpm4, Lpm4Config, Lpm6, Lpm6Config};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

const ITERATIONS: usize = 1 << 10;
const BATCH: usize = 1 << 12;
const BULK: usize = 32;

/// splitmix64: the bench's own random numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// `D:N,...` into (depth, count) pairs.
fn depths(s: &str) -> Vec<(u8, u32)> {
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (d, n) = p.split_once(':').expect("D:N");
            (d.parse().expect("depth"), n.parse().expect("count"))
        })
        .collect()
}

/// IPv4 routes with the distribution `dist`, within classes A-C.
fn routes4(dist: &[(u8, u32)], rng: &mut Rng) -> Vec<(u32, u8)> {
    let mut out = Vec::new();
    for &(depth, n) in dist {
        // Prefixes of `depth` bits below 0xE0000000: 7/8 of the space.
        let range = ((1u64 << depth) * 7 / 8).max(1);
        let step = (range / n.max(1) as u64).max(1);
        let mut p = rng.next() % range;
        for _ in 0..n {
            let shift = 32 - depth as u32;
            out.push((((p << shift) & 0xffff_ffff) as u32, depth));
            p = (p + step) % range;
        }
    }
    // Interleave the depths, as the order of adds matters to neither
    // table's lookups but shuffles where each lands.
    for i in (1..out.len()).rev() {
        out.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    out
}

fn case(name: &str, cycles: f64) {
    println!("CASE {name} {cycles:.1}");
}

/// Cycles per lookup of `look` over ITERATIONS fresh batches.
fn batches(rng: &mut Rng, mut look: impl FnMut(&[u32]) -> u64) -> f64 {
    let mut batch = vec![0u32; BATCH];
    let mut cycles = 0;
    let mut hits = 0;
    for _ in 0..ITERATIONS {
        batch.iter_mut().for_each(|a| *a = rng.next() as u32);
        let t = rdtsc();
        hits += look(&batch);
        cycles += rdtsc() - t;
    }
    std::hint::black_box(hits);
    cycles as f64 / (ITERATIONS * BATCH) as f64
}

fn lpm4(dist: &[(u8, u32)], groups: u32, rng: &mut Rng) -> Lpm4 {
    let rules = routes4(dist, rng);
    let mut t = Lpm4::new(Lpm4Config {
        max_rules: 2_000_000,
        groups,
    });
    let added = rules
        .iter()
        .filter(|&&(p, d)| t.add(p, d, 0xaa).is_ok())
        .count();
    eprintln!("lpm: {} routes, {added} added", rules.len());
    t
}

/// Cycles per lookup in bulks of 32.
fn bulks(t: &Lpm4, rng: &mut Rng) -> f64 {
    let mut out = [None; BULK];
    batches(rng, |b| {
        b.chunks(BULK)
            .map(|c| {
                t.lookup_bulk(c, &mut out);
                out.iter().filter(|h| h.is_some()).count() as u64
            })
            .sum()
    })
}

fn lpm_rows(dist: &[(u8, u32)], rng: &mut Rng) {
    let t = lpm4(dist, 2048, rng);
    case(
        "lpm_single",
        batches(rng, |b| {
            b.iter().map(|&a| t.lookup(a).is_some() as u64).sum()
        }),
    );
    case("lpm_bulk", bulks(&t, rng));
    case(
        "lpm_x4",
        batches(rng, |b| {
            b.chunks_exact(4)
                .map(|c| {
                    let four = t.lookup4([c[0], c[1], c[2], c[3]]);
                    four.iter().filter(|h| h.is_some()).count() as u64
                })
                .sum()
        }),
    );
}

fn fib_rows(dist: &[(u8, u32)], rng: &mut Rng) {
    let t = lpm4(dist, 1 << 16, rng);
    case("fib_bulk", bulks(&t, rng));
}

fn lpm6_rows(dist: &[(u8, u32)], rng: &mut Rng) {
    let mut t = Lpm6::new(Lpm6Config {
        max_rules: 1_000_000,
        groups: 1 << 16,
    });
    let r128 = |r: &mut Rng| (r.next() as u128) << 64 | r.next() as u128;
    let mut order = Vec::new();
    for &(depth, n) in dist {
        for _ in 0..n {
            let p = r128(rng) & !u128::MAX.checked_shr(depth as u32).unwrap_or(0);
            order.push((p, depth));
        }
    }
    for i in (1..order.len()).rev() {
        order.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    let added = order
        .iter()
        .filter(|&&(p, d)| t.add(p, d, 0xaa).is_ok())
        .count();
    eprintln!("lpm6: {added} routes added");
    // As DPDK's test makes its addresses: random, each given a route's
    // prefix, 400 in a row per route, routes in the order they were added
    // (so 100000 addresses cover the first quarter of the 1000).
    let ips: Vec<u128> = (0..100_000)
        .map(|i| {
            let (p, d) = order[(i / 400) % order.len()];
            let host = r128(rng) & u128::MAX.checked_shr(d as u32).unwrap_or(0);
            p | host
        })
        .collect();
    let per = (ITERATIONS * ips.len()) as f64;
    let t0 = rdtsc();
    let mut hits = 0u64;
    for _ in 0..ITERATIONS {
        hits += ips
            .iter()
            .map(|&a| t.lookup(a).is_some() as u64)
            .sum::<u64>();
    }
    case("lpm6_single", (rdtsc() - t0) as f64 / per);
    let mut out = vec![None; ips.len()];
    let t0 = rdtsc();
    for _ in 0..ITERATIONS {
        t.lookup_bulk(&ips, &mut out);
        hits += out.iter().filter(|h| h.is_some()).count() as u64;
    }
    case("lpm6_bulk", (rdtsc() - t0) as f64 / per);
    std::hint::black_box(hits);
}

const HASH_ENTRIES: usize = 1 << 22;

/// DPDK's key sets for one table: added without moves, added with moves,
/// never added; and the no-move keys on and off the moving keys' buckets.
struct KeySets {
    no_ks: Vec<[u64; 1]>,
    ks: Vec<[u64; 1]>,
    absent: Vec<[u64; 1]>,
    shift_path: Vec<[u64; 1]>,
    non_shift_path: Vec<[u64; 1]>,
}

fn table() -> ExactTable<1> {
    ExactTable::with_buckets(HASH_ENTRIES, HASH_ENTRIES / 8, 0x5eed)
}

fn key_sets(rng: &mut Rng) -> KeySets {
    let mut t = table();
    let mut keys: Vec<[u64; 1]> = (0..HASH_ENTRIES)
        .map(|_| [rng.next() as u32 as u64])
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let (mut no_ks, mut ks, mut absent) = (Vec::new(), Vec::new(), Vec::new());
    let mut moved_buckets = std::collections::HashSet::new();
    for k in keys {
        let before = t.moves();
        if t.add(&k, k[0]).is_err() {
            absent.push(k);
        } else if t.moves() != before {
            moved_buckets.extend(t.buckets_of(&k));
            ks.push(k);
        } else {
            no_ks.push(k);
        }
    }
    // Keys never generated for the table: as many again.
    absent.extend((0..HASH_ENTRIES).map(|_| [(rng.next() as u32 as u64) | 1 << 40]));
    let (shift_path, non_shift_path) = no_ks
        .iter()
        .partition(|k| t.buckets_of(k).iter().any(|b| moved_buckets.contains(b)));
    eprintln!(
        "hash: {} keys without moves, {} with, {} absent, {} on the moves' buckets, {} off",
        no_ks.len(),
        ks.len(),
        absent.len(),
        Vec::len(&shift_path),
        Vec::len(&non_shift_path)
    );
    KeySets {
        no_ks,
        ks,
        absent,
        shift_path,
        non_shift_path,
    }
}

/// One reader on `cpus.1` looks up `read` (expecting hits or misses) in
/// passes until the writer on `cpus.0` has added `write` after `first`;
/// returns its cycles per lookup. With no `write`, one pass after `first`.
fn reader_writer(
    first: &[[u64; 1]],
    write: Option<&[[u64; 1]]>,
    read: Arc<Vec<[u64; 1]>>,
    hit: bool,
    cpus: (usize, usize),
) -> f64 {
    let mut t = table();
    for k in first {
        t.add(k, k[0]).expect("the no-move keys fit");
    }
    let done = Arc::new(AtomicBool::new(write.is_none()));
    let cycles = Arc::new(AtomicU64::new(0));
    let reads = Arc::new(AtomicU64::new(0));
    let r = t.reader();
    let (d, c, n) = (done.clone(), cycles.clone(), reads.clone());
    let reader = std::thread::spawn(move || {
        pin(cpus.1);
        let mut passes = 0u64;
        let t0 = rdtsc();
        loop {
            for k in read.iter() {
                if r.lookup(k).is_some() != hit {
                    panic!("key {k:?}: hit should be {hit}");
                }
            }
            passes += 1;
            if d.load(Ordering::Acquire) {
                break;
            }
        }
        c.store(rdtsc() - t0, Ordering::Relaxed);
        n.store(passes * read.len() as u64, Ordering::Relaxed);
    });
    pin(cpus.0);
    if let Some(w) = write {
        for k in w {
            let _ = t.add(k, k[0]);
        }
        done.store(true, Ordering::Release);
    }
    reader.join().expect("the reader");
    cycles.load(Ordering::Relaxed) as f64 / reads.load(Ordering::Relaxed).max(1) as f64
}

fn hash_rows(rng: &mut Rng, cpus: (usize, usize)) {
    let s = key_sets(rng);
    let a = |v: &Vec<[u64; 1]>| Arc::new(v.clone());
    case(
        "hash_hit",
        reader_writer(&s.no_ks, None, a(&s.no_ks), true, cpus),
    );
    case(
        "hash_miss",
        reader_writer(&[], Some(&s.no_ks), a(&s.absent), false, cpus),
    );
    let ks = Some(&s.ks[..]);
    case(
        "hash_ks_hit_nsp",
        reader_writer(&s.no_ks, ks, a(&s.non_shift_path), true, cpus),
    );
    case(
        "hash_ks_hit_sp",
        reader_writer(&s.no_ks, ks, a(&s.shift_path), true, cpus),
    );
    case(
        "hash_ks_miss",
        reader_writer(&s.no_ks, ks, a(&s.absent), false, cpus),
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |k: &str| {
        args.iter()
            .position(|a| a == k)
            .map(|i| args[i + 1].clone())
    };
    let only = opt("--only").unwrap_or_default();
    let cpus = opt("--cores")
        .and_then(|c| {
            let (a, b) = c.split_once(',')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .unwrap_or((0, 1));
    let mut rng = Rng(rdtsc());
    pin(cpus.0);
    let want = |p: &str| only.is_empty() || p.starts_with(&only) || only.starts_with(p);
    if let Some(d) = opt("--lpm-depths") {
        if want("lpm_") {
            lpm_rows(&depths(&d), &mut rng);
        }
        if want("fib") {
            fib_rows(&depths(&d), &mut rng);
        }
    }
    if let (Some(d), true) = (opt("--lpm6-depths"), want("lpm6")) {
        lpm6_rows(&depths(&d), &mut rng);
    }
    if want("hash") {
        hash_rows(&mut rng, cpus);
    }
}
