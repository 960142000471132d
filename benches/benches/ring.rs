//! criterion benches of rpmd-ring against crossbeam-queue's `ArrayQueue`:
//! single, burst and bulk (8, 32, 128) for SP/SC and MP/MC rings, in one
//! thread (enqueue n, dequeue n) and across two pinned threads (CPU 0
//! enqueues, CPU 1 dequeues, both spinning with crossbeam's `Backoff` when
//! the queue is full or empty). Throughput is reported per element.
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crossbeam_queue::ArrayQueue;
use crossbeam_utils::Backoff;
use rpmd_benches::tsc::pin;
use rpmd_ring::{Consumer, Multi, Producer, Single, SyncMode};
use std::hint::black_box;
use std::sync::{mpsc, Arc};
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

/// The enqueue end of a queue under test: one transfer of up to `src.len()`
/// elements with operation `op`; returns how many moved.
trait Tx: Send + 'static {
    fn put(&mut self, op: Op, src: &[u64]) -> usize;
}

/// The dequeue end of a queue under test.
trait Rx: Send + 'static {
    fn get(&mut self, op: Op, dst: &mut [u64]) -> usize;
}

impl<P: SyncMode, C: SyncMode> Tx for Producer<u64, P, C> {
    #[inline]
    fn put(&mut self, op: Op, src: &[u64]) -> usize {
        match op {
            Op::Single => usize::from(self.enqueue(src[0]).is_ok()),
            Op::Burst => self.enqueue_burst(src).n,
            Op::Bulk => self.enqueue_bulk(src).n,
        }
    }
}

impl<P: SyncMode, C: SyncMode> Rx for Consumer<u64, P, C> {
    #[inline]
    fn get(&mut self, op: Op, dst: &mut [u64]) -> usize {
        match op {
            Op::Single => match self.dequeue() {
                Some(v) => {
                    dst[0] = v;
                    1
                }
                None => 0,
            },
            Op::Burst => self.dequeue_burst(dst).n,
            Op::Bulk => self.dequeue_bulk(dst).n,
        }
    }
}

/// `ArrayQueue` has no batch operations: bursts and bulks are loops of
/// single pushes and pops.
impl Tx for Arc<ArrayQueue<u64>> {
    #[inline]
    fn put(&mut self, _op: Op, src: &[u64]) -> usize {
        src.iter().take_while(|&&v| self.push(v).is_ok()).count()
    }
}

impl Rx for Arc<ArrayQueue<u64>> {
    #[inline]
    fn get(&mut self, _op: Op, dst: &mut [u64]) -> usize {
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

fn one_thread(c: &mut Criterion, name: &str, (mut tx, mut rx): (impl Tx, impl Rx)) {
    let mut g = c.benchmark_group("ring_1thread");
    for (label, op, n) in OPS {
        g.throughput(Throughput::Elements(n as u64));
        let src = vec![7u64; n];
        let mut dst = vec![0u64; n];
        g.bench_function(BenchmarkId::new(name, label), |b| {
            b.iter(|| {
                black_box(tx.put(op, black_box(&src)));
                black_box(rx.get(op, black_box(&mut dst)));
            })
        });
    }
    g.finish();
}

/// A consumer thread pinned to CPU 1 that lives across samples (spawning
/// and migrating a thread per sample cost more than a small sample's
/// transfer) and drains the number of elements it is told to.
struct Drainer {
    cmd: mpsc::Sender<(Op, usize, u64)>,
    done: mpsc::Receiver<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Drainer {
    fn spawn(mut rx: impl Rx) -> Self {
        let (cmd, cmd_rx) = mpsc::channel::<(Op, usize, u64)>();
        let (done_tx, done) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            pin(1);
            let mut dst = vec![0u64; 128];
            while let Ok((op, n, total)) = cmd_rx.recv() {
                let backoff = Backoff::new();
                let mut got = 0u64;
                // `total` is a multiple of `n` and the producer sends exactly
                // `total`, so full-size requests never overshoot.
                while got < total {
                    let k = rx.get(op, &mut dst[..n]);
                    if k == 0 {
                        backoff.spin();
                    } else {
                        backoff.reset();
                    }
                    got += k as u64;
                }
                done_tx.send(()).unwrap();
            }
        });
        Drainer { cmd, done, thread }
    }

    fn stop(self) {
        drop(self.cmd);
        self.thread.join().unwrap();
    }
}

/// Moves `iters * n` elements from CPU 0 to the drainer on CPU 1 and times
/// it. Both sides spin with crossbeam's `Backoff` when the queue is full or
/// empty, the policy crossbeam's own channels use, so neither queue is
/// measured in a poll loop tuned for it.
fn cross(tx: &mut impl Tx, d: &Drainer, op: Op, n: usize, iters: u64) -> Duration {
    let total = iters * n as u64;
    pin(0);
    let src = vec![7u64; n];
    let start = Instant::now();
    d.cmd.send((op, n, total)).unwrap();
    let mut sent = 0u64;
    let backoff = Backoff::new();
    while sent < total {
        // A burst may move fewer than `n`; send only what is missing so
        // exactly `total` elements go through.
        let left = total - sent;
        let k = if left >= n as u64 {
            tx.put(op, &src)
        } else {
            tx.put(op, &src[..left as usize])
        };
        if k == 0 {
            backoff.spin();
        } else {
            backoff.reset();
        }
        sent += k as u64;
    }
    d.done.recv().unwrap();
    start.elapsed()
}

fn two_threads(c: &mut Criterion, name: &str, (mut tx, rx): (impl Tx, impl Rx)) {
    let mut g = c.benchmark_group("ring_2threads");
    let d = Drainer::spawn(rx);
    for (label, op, n) in OPS {
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(BenchmarkId::new(name, label), |b| {
            b.iter_custom(|iters| cross(&mut tx, &d, op, n, iters))
        });
    }
    g.finish();
    d.stop();
}

fn ring<P: SyncMode, C: SyncMode>() -> (Producer<u64, P, C>, Consumer<u64, P, C>) {
    rpmd_ring::new::<u64, P, C>(CAP).unwrap()
}

fn array_queue() -> (Arc<ArrayQueue<u64>>, Arc<ArrayQueue<u64>>) {
    let q = Arc::new(ArrayQueue::new(CAP));
    (q.clone(), q)
}

fn benches(c: &mut Criterion) {
    one_thread(c, "spsc", ring::<Single, Single>());
    one_thread(c, "mpmc", ring::<Multi, Multi>());
    one_thread(c, "arrayqueue", array_queue());
    two_threads(c, "spsc", ring::<Single, Single>());
    two_threads(c, "mpmc", ring::<Multi, Multi>());
    two_threads(c, "arrayqueue", array_queue());
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
