//! `ring_perf`: the cases of DPDK's `ring_perf_autotest` (DPDK 22.11), run
//! on rpmd-ring with the same loop structure and iteration counts, timed
//! with the TSC.
//!
//! Each case prints a DPDK-style line and a machine-readable
//! `CASE <name> <cycles per element>` line. "Per element" means: per
//! enqueue+dequeue pair for `single`, per element enqueued and dequeued for
//! `burst`/`bulk` (DPDK 22.11 prints per call pair; `benches/compare.sh`
//! divides its figure by the size), per call for `empty`, and the sum of
//! both threads' cycles per element for the two-core cases (as DPDK).
//!
//! It also prints `FLOOR two_cas_round <cycles>`: a loop doing only the
//! locked and ordered work of one MP/MC enqueue and one dequeue of a
//! single element (on each of two lines: load the head, CAS it, store the
//! tail), with no slots and no checks. An MP/MC ring of DPDK's design does
//! at least this much per round; `compare_ring` prints it next to the
//! single-element MP/MC rows.
//!
//! Usage: `ring_perf [--quick] [--cores A,B]` (default cores 0,1).
use rpmd_benches::tsc::{pin, rdtsc};
use rpmd_ring::{Multi, Single, SyncMode};
use std::hint::black_box;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

const RING_SIZE: usize = 4096;
const MAX_BURST: usize = 32;
const BULK_SIZES: [usize; 2] = [8, 32];

struct Opts {
    shift_adj: u32,
    cores: (usize, usize),
}

fn report(api: &str, mode: &str, what: &str, dpdk_style: f64, per_elem: f64, case: String) {
    println!("{api}: {mode}: {what}: {dpdk_style:.2}   ({per_elem:.3} cycles/elem)");
    println!("CASE {case} {per_elem:.4}");
}

fn mode_name<P: SyncMode>() -> (&'static str, &'static str) {
    match P::name() {
        "single" => ("SP/SC", "spsc"),
        "multi" => ("MP/MC", "mpmc"),
        _ => ("HTS", "hts"),
    }
}

fn single<E: Copy + Default + Send, M: SyncMode>(o: &Opts, api: &str, pfx: &str) {
    let (p, c) = rpmd_ring::new::<E, M, M>(RING_SIZE).unwrap();
    let iterations = 1u64 << (24 - o.shift_adj);
    // Per round, as DPDK's loop: enqueue one value, dequeue it into memory
    // (`black_box` of the value: one store). The value enqueued is opaque
    // but stays in registers, and failures are counted and shown to
    // `black_box` once after the loop; passing each value and result
    // through `black_box` cost four more stack stores a round, each waited
    // for by the next locked instruction.
    let v = black_box(E::default());
    let mut failed = 0u64;
    let start = rdtsc();
    for _ in 0..iterations {
        failed += u64::from(p.enqueue(v).is_err());
        match c.dequeue() {
            Some(x) => {
                black_box(x);
            }
            None => failed += 1,
        }
    }
    let cyc = (rdtsc() - start) as f64 / iterations as f64;
    black_box(failed);
    let (m, short) = mode_name::<M>();
    report(api, m, "single", cyc, cyc, format!("{pfx}single_{short}"));
}

fn burst_bulk<E: Copy + Default + Send, M: SyncMode>(o: &Opts, api: &str, pfx: &str, bulk: bool) {
    let (p, c) = rpmd_ring::new::<E, M, M>(RING_SIZE).unwrap();
    let iterations = 1u64 << (23 - o.shift_adj);
    let mut buf = [E::default(); MAX_BURST];
    let (m, short) = mode_name::<M>();
    for size in BULK_SIZES {
        let n = black_box(size);
        let start = rdtsc();
        for _ in 0..iterations {
            if bulk {
                let _ = black_box(p.enqueue_bulk(&buf[..n]));
                let _ = black_box(c.dequeue_bulk(&mut buf[..n]));
            } else {
                let _ = black_box(p.enqueue_burst(&buf[..n]));
                let _ = black_box(c.dequeue_burst(&mut buf[..n]));
            }
        }
        let cyc = (rdtsc() - start) as f64 / iterations as f64;
        let kind = if bulk { "bulk" } else { "burst" };
        report(
            api,
            m,
            &format!("{kind} (size: {size})"),
            cyc,
            cyc / size as f64,
            format!("{pfx}{kind}{size}_{short}"),
        );
    }
}

fn empty<E: Copy + Default + Send, M: SyncMode>(o: &Opts, api: &str, pfx: &str) {
    let (_p, c) = rpmd_ring::new::<E, M, M>(RING_SIZE).unwrap();
    let iterations = 1u64 << (26 - o.shift_adj);
    let mut buf = [E::default(); MAX_BURST];
    let n = black_box(BULK_SIZES[0]);
    let start = rdtsc();
    for _ in 0..iterations {
        let _ = black_box(c.dequeue_bulk(&mut buf[..n]));
    }
    let cyc = (rdtsc() - start) as f64 / iterations as f64;
    let (m, short) = mode_name::<M>();
    report(
        api,
        m,
        "empty bulk (size: 8)",
        cyc,
        cyc,
        format!("{pfx}empty_{short}"),
    );
}

/// Enqueue on one core, dequeue on the other, bulk of `size`, 2^15 calls
/// each; the figure is the sum of both sides' cycles per element.
fn two_cores<E: Copy + Default + Send + 'static, M: SyncMode>(
    o: &Opts,
    api: &str,
    pfx: &str,
    size: usize,
) {
    let (p, c) = rpmd_ring::new::<E, M, M>(RING_SIZE).unwrap();
    let iterations = 1u64 << 15;
    let ready = Arc::new(AtomicU32::new(0));
    let barrier = |ready: &AtomicU32| {
        ready.fetch_add(1, Ordering::AcqRel);
        while ready.load(Ordering::Acquire) != 2 {
            std::hint::spin_loop();
        }
    };
    let r2 = ready.clone();
    let core_b = o.cores.1;
    let deq = std::thread::spawn(move || {
        pin(core_b);
        let mut buf = [E::default(); MAX_BURST];
        let n = black_box(size);
        barrier(&r2);
        let start = rdtsc();
        for _ in 0..iterations {
            while c.dequeue_bulk(&mut buf[..n]).n == 0 {
                std::hint::spin_loop();
            }
        }
        (rdtsc() - start) as f64 / (iterations * size as u64) as f64
    });
    let buf = [E::default(); MAX_BURST];
    let n = black_box(size);
    barrier(&ready);
    let start = rdtsc();
    for _ in 0..iterations {
        while p.enqueue_bulk(&buf[..n]).n == 0 {
            std::hint::spin_loop();
        }
    }
    let enq = (rdtsc() - start) as f64 / (iterations * size as u64) as f64;
    let deq = deq.join().unwrap();
    let (m, short) = mode_name::<M>();
    let cyc = enq + deq;
    report(
        api,
        m,
        &format!("bulk (size: {size})"),
        cyc,
        cyc,
        format!("{pfx}2core_bulk{size}_{short}"),
    );
}

/// One side's head and tail on a line of their own, as in a ring.
#[repr(align(128))]
struct Side {
    head: AtomicU32,
    tail: AtomicU32,
}

impl Side {
    fn new() -> Self {
        Side {
            head: AtomicU32::new(0),
            tail: AtomicU32::new(0),
        }
    }

    /// The atomic work of one single-element operation: load the head, CAS
    /// it one further (Release on success, as `Multi`'s H2), store the tail.
    #[inline(always)]
    fn step(&self) {
        let h = self.head.load(Ordering::Acquire);
        if self
            .head
            .compare_exchange_weak(h, h.wrapping_add(1), Ordering::Release, Ordering::Acquire)
            .is_ok()
        {
            self.tail.store(h.wrapping_add(1), Ordering::Release);
        }
    }
}

/// The floor of the single-element MP/MC rows; see the file's docs.
fn floor(o: &Opts) {
    let (prod, cons) = (Side::new(), Side::new());
    let iterations = 1u64 << (24 - o.shift_adj);
    let start = rdtsc();
    for _ in 0..iterations {
        prod.step();
        cons.step();
    }
    let cyc = (rdtsc() - start) as f64 / iterations as f64;
    println!("FLOOR two_cas_round {cyc:.4}");
}

fn run_all<E: Copy + Default + Send + 'static>(o: &Opts, api: &str, pfx: &str) {
    println!("\n### Testing single element enq/deq ###");
    single::<E, Single>(o, api, pfx);
    single::<E, Multi>(o, api, pfx);
    println!("\n### Testing burst enq/deq ###");
    burst_bulk::<E, Single>(o, api, pfx, false);
    burst_bulk::<E, Multi>(o, api, pfx, false);
    println!("\n### Testing bulk enq/deq ###");
    burst_bulk::<E, Single>(o, api, pfx, true);
    burst_bulk::<E, Multi>(o, api, pfx, true);
    println!("\n### Testing empty bulk deq ###");
    empty::<E, Single>(o, api, pfx);
    empty::<E, Multi>(o, api, pfx);
    println!("\n### Testing using two physical cores ###");
    for size in BULK_SIZES {
        two_cores::<E, Single>(o, api, pfx, size);
        two_cores::<E, Multi>(o, api, pfx, size);
    }
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        shift_adj: 0,
        cores: (0, 1),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => o.shift_adj = 4,
            "--cores" => {
                let v = args.next().ok_or("--cores needs A,B (two CPU numbers)")?;
                let (a, b) = v
                    .split_once(',')
                    .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
                    .ok_or_else(|| format!("--cores: expected A,B (e.g. 0,1), got {v:?}"))?;
                o.cores = (a, b);
            }
            "-h" | "--help" => {
                println!("usage: ring_perf [--quick] [--cores A,B]");
                std::process::exit(0);
            }
            _ => {
                return Err(format!(
                    "unknown argument {a:?}; usage: ring_perf [--quick] [--cores A,B]"
                ))
            }
        }
    }
    Ok(o)
}

/// A 16-byte element, like DPDK's `elem APIs: element size 16B` cases.
#[derive(Clone, Copy, Default)]
#[allow(dead_code)]
struct E16([u64; 2]);

fn main() {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("ring_perf: {e}");
            std::process::exit(2);
        }
    };
    if !pin(o.cores.0) {
        eprintln!("ring_perf: warning: could not pin to CPU {}", o.cores.0);
    }
    println!("TSC_HZ {:.0}", rpmd_benches::tsc::tsc_hz());
    floor(&o);
    run_all::<usize>(&o, "legacy APIs", "");
    run_all::<E16>(&o, "elem APIs: element size 16B", "e16_");
}
