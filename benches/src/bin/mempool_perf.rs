//! `mempool_perf`: the cases of DPDK's `mempool_perf_autotest` on rpmd's
//! mempool. Each lcore repeatedly takes `n_keep` objects in bulks of
//! `n_get_bulk` and returns them in bulks of `n_put_bulk`, for `--seconds`
//! (DPDK: 5); `rate_persec` is objects taken and returned per second,
//! summed over lcores, printed in DPDK's format.
//!
//! Two levels: raw objects ([`LocalObjs`](rpmd_pmd::LocalObjs), the
//! default), which like DPDK's test (`rte_mempool_generic_get/put` on
//! `void *`) never touch the objects; and `--mbuf`, owning [`Mbuf`]
//! handles, whose return reads and resets each header (like
//! `rte_pktmbuf_free`).
//!
//! Pool as DPDK's test: 2 × (512 + 512) − 1 objects, cache 0 or 512.
//! `constant_n` is printed for format parity; the bulk size is a run-time
//! value in both variants here.
//!
//! `--list` prints the selected cases' labels instead of running them.
//!
//! Usage: `mempool_perf [--quick] [--mbuf] [--list] [--seconds S] [--case "cache=C cores=K n_get_bulk=G n_put_bulk=P n_keep=N constant_n=X"]...`
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

/// A representative subset: both cache settings and core counts; single,
/// 8- and 32-object bulks with 32 kept; single and 32-object bulks with
/// 128 kept; and one mixed bulk (get 1, put 32).
fn quick_cases() -> Vec<Case> {
    all_cases()
        .into_iter()
        .filter(|c| {
            c.constant_n == 0
                && ((c.keep == 32 && c.get == c.put && c.get != 4)
                    || (c.keep == 128 && c.get == c.put && (c.get == 1 || c.get == 32))
                    || (c.keep == 32 && c.get == 1 && c.put == 32))
        })
        .collect()
}

/// `RPMD_MEMPOOL_BLOCKS=K` stops each lcore after K blocks of 1024 rounds
/// (for instruction counting under callgrind, where time means little).
fn max_blocks() -> u64 {
    std::env::var("RPMD_MEMPOOL_BLOCKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX)
}

fn die(e: rpmd_pmd::Error) -> ! {
    eprintln!("mempool_perf: {e}");
    std::process::exit(1)
}

/// One lcore's loop on raw objects; returns objects taken and returned.
fn lcore_loop_raw(pool: &Mempool, c: Case, stop: &AtomicBool) -> u64 {
    // The lcore's view, taken once, as DPDK's test takes its cache.
    let pool = pool.local();
    // The objects bound to that view, as the test's array is used with
    // one pool and cache.
    let mut kept = pool.objs::<MAX_KEEP>();
    let mut done = 0u64;
    let mut blocks = max_blocks();
    while !stop.load(Ordering::Relaxed) && blocks > 0 {
        blocks -= 1;
        for _ in 0..1024 {
            while kept.len() < c.keep {
                if let Err(e) = kept.get(c.get) {
                    die(e);
                }
            }
            while !kept.is_empty() {
                kept.put(c.put);
            }
            done += c.keep as u64;
        }
    }
    done
}

/// One lcore's loop on mbufs; returns mbufs taken and returned.
fn lcore_loop_mbuf(pool: &Mempool, c: Case, stop: &AtomicBool) -> u64 {
    let pool = pool.local();
    let mut kept: Burst<Mbuf, MAX_KEEP> = Burst::new();
    let mut done = 0u64;
    let mut blocks = max_blocks();
    while !stop.load(Ordering::Relaxed) && blocks > 0 {
        blocks -= 1;
        for _ in 0..1024 {
            while kept.len() < c.keep {
                if let Err(e) = pool.get_bulk(&mut kept, c.get) {
                    die(e);
                }
            }
            if c.put == c.keep {
                pool.put_bulk(&mut kept);
            }
            while !kept.is_empty() {
                // Return `put` at a time, like rte_pktmbuf_free_bulk.
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

fn run(c: Case, secs: f64, mbuf: bool) -> u64 {
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
                let n = if mbuf {
                    lcore_loop_mbuf(&pool, c, &stop)
                } else {
                    lcore_loop_raw(&pool, c, &stop)
                };
                total.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    if max_blocks() == u64::MAX {
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
    }
    for t in threads {
        t.join().unwrap();
    }
    (total.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()) as u64
}

fn main() {
    let mut secs = 5.0;
    let mut cases: Vec<Case> = Vec::new();
    let mut quick = false;
    let mut mbuf = false;
    let mut list = false;
    let mut args = std::env::args().skip(1);
    let usage = "usage: mempool_perf [--quick] [--mbuf] [--list] [--seconds S] [--case \"cache=C cores=K n_get_bulk=G n_put_bulk=P n_keep=N constant_n=X\"]...";
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--mbuf" => mbuf = true,
            "--list" => list = true,
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
    if list {
        for c in cases {
            println!("{}", c.label());
        }
        return;
    }
    for c in cases {
        println!(
            "mempool_autotest {} rate_persec={}",
            c.label(),
            run(c, secs, mbuf)
        );
    }
}
