//! criterion benches of rpmd-ring against crossbeam-queue's `ArrayQueue`:
//! single, burst and bulk (8, 32, 128) for SP/SC and MP/MC rings, in one
//! thread (enqueue n, dequeue n) and across two pinned threads (CPU 0
//! enqueues, CPU 1 dequeues). Throughput is reported per element.
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crossbeam_queue::ArrayQueue;
use rpmd_benches::tsc::pin;
use rpmd_ring::{Consumer, Multi, Producer, Single, SyncMode};
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

const CAP: usize = 1024;
#[derive(Clone, Copy)]
enum Op {
    Single,
    Burst,
    Bulk,
}

const OPS: [(&str, Op, usize); 7] = [
    ("single", Op::Single, 1),
    ("burst8", Op::Burst, 8),
    ("burst32", Op::Burst, 32),
    ("burst128", Op::Burst, 128),
    ("bulk8", Op::Bulk, 8),
    ("bulk32", Op::Bulk, 32),
    ("bulk128", Op::Bulk, 128),
];

/// One transfer of `n` elements with the named operation; returns how many
/// moved.
trait Q: Send + Sync + 'static {
    fn put(&self, op: Op, src: &[u64]) -> usize;
    fn get(&self, op: Op, dst: &mut [u64]) -> usize;
}

struct Ring<P: SyncMode, C: SyncMode>(Producer<u64, P, C>, Consumer<u64, P, C>);

impl<P: SyncMode, C: SyncMode> Q for Ring<P, C>
where
    Producer<u64, P, C>: Sync,
    Consumer<u64, P, C>: Sync,
{
    #[inline]
    fn put(&self, op: Op, src: &[u64]) -> usize {
        match op {
            Op::Single => usize::from(self.0.enqueue(src[0]).is_ok()),
            Op::Burst => self.0.enqueue_burst(src).n,
            Op::Bulk => self.0.enqueue_bulk(src).n,
        }
    }
    #[inline]
    fn get(&self, op: Op, dst: &mut [u64]) -> usize {
        match op {
            Op::Single => match self.1.dequeue() {
                Some(v) => {
                    dst[0] = v;
                    1
                }
                None => 0,
            },
            Op::Burst => self.1.dequeue_burst(dst).n,
            Op::Bulk => self.1.dequeue_bulk(dst).n,
        }
    }
}

impl Q for ArrayQueue<u64> {
    #[inline]
    fn put(&self, _op: Op, src: &[u64]) -> usize {
        src.iter().take_while(|&&v| self.push(v).is_ok()).count()
    }
    #[inline]
    fn get(&self, _op: Op, dst: &mut [u64]) -> usize {
        let mut n = 0;
        for d in dst.iter_mut() {
            match self.pop() {
                Some(v) => *d = v,
                None => break,
            }
            n += 1;
        }
        n
    }
}

fn one_thread<T: Q>(c: &mut Criterion, name: &str, q: &T) {
    let mut g = c.benchmark_group("ring_1thread");
    for (label, op, n) in OPS {
        g.throughput(Throughput::Elements(n as u64));
        let src = vec![7u64; n];
        let mut dst = vec![0u64; n];
        g.bench_function(BenchmarkId::new(name, label), |b| {
            b.iter(|| {
                black_box(q.put(op, black_box(&src)));
                black_box(q.get(op, black_box(&mut dst)));
            })
        });
    }
    g.finish();
}

/// Moves `iters * n` elements from CPU 0 to CPU 1 and times it.
fn cross(q: &Arc<impl Q>, op: Op, n: usize, iters: u64) -> Duration {
    let total = iters * n as u64;
    let qc = q.clone();
    let consumer = std::thread::spawn(move || {
        pin(1);
        let mut dst = vec![0u64; n];
        let mut got = 0u64;
        while got < total {
            let k = qc.get(op, &mut dst[..n.min((total - got) as usize)]);
            if k == 0 {
                std::hint::spin_loop();
            }
            got += k as u64;
        }
    });
    pin(0);
    let src = vec![7u64; n];
    let start = Instant::now();
    let mut sent = 0u64;
    while sent < total {
        let k = q.put(op, &src[..n.min((total - sent) as usize)]);
        if k == 0 {
            std::hint::spin_loop();
        }
        sent += k as u64;
    }
    consumer.join().unwrap();
    start.elapsed()
}

fn two_threads<T: Q>(c: &mut Criterion, name: &str, q: Arc<T>) {
    let mut g = c.benchmark_group("ring_2threads");
    for (label, op, n) in OPS {
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(BenchmarkId::new(name, label), |b| {
            b.iter_custom(|iters| cross(&q, op, n, iters))
        });
    }
    g.finish();
}

fn ring<P: SyncMode, C: SyncMode>() -> Ring<P, C> {
    let (p, c) = rpmd_ring::new::<u64, P, C>(CAP).unwrap();
    Ring(p, c)
}

/// Single-mode ends are not `Sync`; wrap them for the two-thread bench,
/// where each end is still used by one thread only.
struct SpscPair(std::cell::UnsafeCell<Ring<Single, Single>>);

// SAFETY: `cross` calls `put` only from the producing thread and `get` only
// from the consuming thread, so each single-mode end has one user.
unsafe impl Sync for SpscPair {}

impl Q for SpscPair {
    fn put(&self, op: Op, src: &[u64]) -> usize {
        // SAFETY: only the producer end is touched, from one thread.
        let r = unsafe { &*self.0.get() };
        match op {
            Op::Single => usize::from(r.0.enqueue(src[0]).is_ok()),
            Op::Burst => r.0.enqueue_burst(src).n,
            Op::Bulk => r.0.enqueue_bulk(src).n,
        }
    }
    fn get(&self, op: Op, dst: &mut [u64]) -> usize {
        // SAFETY: only the consumer end is touched, from one thread.
        let r = unsafe { &*self.0.get() };
        match op {
            Op::Single => match r.1.dequeue() {
                Some(v) => {
                    dst[0] = v;
                    1
                }
                None => 0,
            },
            Op::Burst => r.1.dequeue_burst(dst).n,
            Op::Bulk => r.1.dequeue_bulk(dst).n,
        }
    }
}

fn benches(c: &mut Criterion) {
    let spsc = SpscPair(std::cell::UnsafeCell::new(ring::<Single, Single>()));
    one_thread(c, "spsc", &spsc);
    one_thread(c, "mpmc", &ring::<Multi, Multi>());
    one_thread(c, "arrayqueue", &ArrayQueue::<u64>::new(CAP));
    two_threads(c, "spsc", Arc::new(spsc));
    two_threads(c, "mpmc", Arc::new(ring::<Multi, Multi>()));
    two_threads(c, "arrayqueue", Arc::new(ArrayQueue::<u64>::new(CAP)));
}

criterion_group! {
    name = ring_benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20);
    targets = benches
}
criterion_main!(ring_benches);
