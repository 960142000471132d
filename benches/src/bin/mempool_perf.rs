//! `mempool_perf`: the cases of DPDK's `mempool_perf_autotest` on rpmd's
//! mempool. Each lcore repeatedly takes `n_keep` mbufs in bulks of
//! `n_get_bulk` and returns them in bulks of `n_put_bulk`, for `--seconds`
//! (DPDK: 5); `rate_persec` is objects taken and returned per second,
//! summed over lcores, printed in DPDK's format.
//!
//! Pool as DPDK's test: 2 × (512 + 512) − 1 objects, cache 0 or 512.
//! `constant_n` is printed for format parity; the bulk size is a run-time
//! value in both variants here.
//!
//! Usage: `mempool_perf [--quick] [--seconds S] [--case "cache=C cores=K n_get_bulk=G n_put_bulk=P n_keep=N constant_n=X"]...`
use rpmd_benches::tsc::pin;
use rpmd_pmd::{Mbuf, Mempool, MempoolConfig};
use rpmd_ring::Burst;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const MAX_KEEP: usize = 512;

#[derive(Clone, Copy, Debug, PartialEq)]
struct Case {
    cache: u32,
    cores: usize,
    get: usize,
    put: usize,
    keep: usize,
    constant_n: u8,
}

impl Case {
    fn parse(s: &str) -> Option<Case> {
        let mut c = Case {
            cache: 0,
            cores: 1,
            get: 1,
            put: 1,
            keep: 32,
            constant_n: 0,
        };
        for kv in s.split_whitespace() {
            let (k, v) = kv.split_once('=')?;
            match k {
                "cache" => c.cache = v.parse().ok()?,
                "cores" => c.cores = v.parse().ok()?,
                "n_get_bulk" => c.get = v.parse().ok()?,
                "n_put_bulk" => c.put = v.parse().ok()?,
                "n_keep" => c.keep = v.parse().ok()?,
                "constant_n" => c.constant_n = v.parse().ok()?,
                "mempool_autotest" | "rate_persec" => {}
                _ => return None,
            }
        }
        let ok = matches!(c.cache, 0 | 512)
            && (1..=2).contains(&c.cores)
            && [1, 4, 8, 16, 32].contains(&c.get)
            && [1, 4, 8, 16, 32].contains(&c.put)
            && [32, 128, 512].contains(&c.keep)
            && c.keep % c.get == 0
            && c.keep % c.put == 0;
        ok.then_some(c)
    }

    fn label(&self) -> String {
        format!(
            "cache={} cores={} n_get_bulk={} n_put_bulk={} n_keep={} constant_n={}",
            self.cache, self.cores, self.get, self.put, self.keep, self.constant_n
        )
    }
}

/// All cases of DPDK's test for cache 0/512 and 1/2 cores.
fn all_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for cache in [0, 512] {
        for cores in [1, 2] {
            for keep in [32, 128, 512] {
                for get in [1, 4, 8, 32] {
                    for put in [1, 4, 8, 32] {
                        for constant_n in [0, 1] {
                            v.push(Case {
                                cache,
                                cores,
                                get,
                                put,
                                keep,
                                constant_n,
                            });
                        }
                    }
                }
            }
        }
    }
    v
}

/// A representative subset: both cache settings and core counts, single
/// and 32-object bulks.
fn quick_cases() -> Vec<Case> {
    all_cases()
        .into_iter()
        .filter(|c| c.constant_n == 0 && c.keep == 32 && c.get == c.put && c.get != 4)
        .collect()
}

/// One lcore's loop; returns objects taken and returned.
fn lcore_loop(pool: &Mempool, c: Case, stop: &AtomicBool) -> u64 {
    let mut kept: Burst<Mbuf, MAX_KEEP> = Burst::new();
    let mut done = 0u64;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..1024 {
            while kept.len() < c.keep {
                if let Err(e) = pool.get_bulk(&mut kept, c.get) {
                    eprintln!("mempool_perf: {e}");
                    std::process::exit(1);
                }
            }
            while !kept.is_empty() {
                // Return `put` at a time, like rte_mempool_generic_put.
                let mut b: Burst<Mbuf, 32> = Burst::new();
                for _ in 0..c.put {
                    if let Some(m) = kept.pop() {
                        let _ = b.push(m);
                    }
                }
                pool.put_bulk(&mut b);
            }
            done += c.keep as u64;
        }
    }
    done
}

fn run(c: Case, secs: f64) -> u64 {
    let mut cfg = MempoolConfig::new("mempool_perf", (2 * (MAX_KEEP + 512) - 1) as u32);
    cfg.cache_size = c.cache;
    cfg.data_room = 2048 - 128 - 128; // 2048-byte objects, as DPDK's test
    let pool = Mempool::new(&cfg).unwrap_or_else(|e| {
        eprintln!("mempool_perf: {e}");
        std::process::exit(1)
    });
    let stop = Arc::new(AtomicBool::new(false));
    let total = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(Barrier::new(c.cores + 1));
    let threads: Vec<_> = (0..c.cores)
        .map(|cpu| {
            let (pool, stop, total, barrier) =
                (pool.clone(), stop.clone(), total.clone(), barrier.clone());
            std::thread::spawn(move || {
                pin(cpu);
                barrier.wait();
                let n = lcore_loop(&pool, c, &stop);
                total.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    (total.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()) as u64
}

fn main() {
    let mut secs = 5.0;
    let mut cases: Vec<Case> = Vec::new();
    let mut quick = false;
    let mut args = std::env::args().skip(1);
    let usage = "usage: mempool_perf [--quick] [--seconds S] [--case \"cache=C cores=K n_get_bulk=G n_put_bulk=P n_keep=N constant_n=X\"]...";
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--seconds" => match args.next().and_then(|v| v.parse::<f64>().ok()) {
                Some(s) if s > 0.0 => secs = s,
                _ => {
                    eprintln!("mempool_perf: --seconds needs a positive number; {usage}");
                    std::process::exit(2);
                }
            },
            "--case" => match args.next().as_deref().and_then(Case::parse) {
                Some(c) => cases.push(c),
                None => {
                    eprintln!("mempool_perf: bad --case (cache 0|512, cores 1|2, bulks 1|4|8|16|32, n_keep 32|128|512); {usage}");
                    std::process::exit(2);
                }
            },
            "-h" | "--help" => {
                println!("{usage}");
                return;
            }
            _ => {
                eprintln!("mempool_perf: unknown argument {a:?}; {usage}");
                std::process::exit(2);
            }
        }
    }
    if cases.is_empty() {
        cases = if quick { quick_cases() } else { all_cases() };
        if quick && secs == 5.0 {
            secs = 1.0;
        }
    }
    for c in cases {
        println!(
            "mempool_autotest {} rate_persec={}",
            c.label(),
            run(c, secs)
        );
    }
}
