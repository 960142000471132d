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

/// The operation under test, a const generic of every loop below so that
/// each case compiles to its own loop around exactly one ring call. (With
/// the operation a run-time value, the per-element call went through a
/// dispatcher that saved six registers before every single enqueue; in the
/// two-thread case those stack stores queued behind the ring's stores in
/// the store buffer, and the harness measured them.)
const SINGLE: u8 = 0;
const BURST: u8 = 1;
const BULK: u8 = 2;

/// Evaluates `$body` with the const `$OP` set to the operation `$op`
/// names: the one place a run-time operation becomes a const generic.
macro_rules! with_op {
    ($op:expr, $OP:ident => $body:expr) => {
        match $op {
            SINGLE => {
                const $OP: u8 = SINGLE;
                $body
            }
            BURST => {
                const $OP: u8 = BURST;
                $body
            }
            _ => {
                const $OP: u8 = BULK;
                $body
            }
        }
    };
}

/// The enqueue end of a queue under test: one transfer of up to `src.len()`
/// elements with operation `OP`; returns how many moved.
trait Tx: Send + 'static {
    fn put<const OP: u8>(&mut self, src: &[u64]) -> usize;
}

/// The dequeue end of a queue under test.
trait Rx: Send + 'static {
    fn get<const OP: u8>(&mut self, dst: &mut [u64]) -> usize;
}

impl<P: SyncMode, C: SyncMode> Tx for Producer<u64, P, C> {
    #[inline(always)]
    fn put<const OP: u8>(&mut self, src: &[u64]) -> usize {
        match OP {
            SINGLE => usize::from(self.enqueue(src[0]).is_ok()),
            BURST => self.enqueue_burst(src).n,
            _ => self.enqueue_bulk(src).n,
        }
    }
}

impl<P: SyncMode, C: SyncMode> Rx for Consumer<u64, P, C> {
    #[inline(always)]
    fn get<const OP: u8>(&mut self, dst: &mut [u64]) -> usize {
        match OP {
            SINGLE => match self.dequeue() {
                Some(v) => {
                    dst[0] = v;
                    1
                }
                None => 0,
            },
            BURST => self.dequeue_burst(dst).n,
            _ => self.dequeue_bulk(dst).n,
        }
    }
}

/// `ArrayQueue` has no batch operations: bursts and bulks are loops of
/// single pushes and pops.
impl Tx for Arc<ArrayQueue<u64>> {
    #[inline(always)]
    fn put<const OP: u8>(&mut self, src: &[u64]) -> usize {
        match OP {
            SINGLE => usize::from(self.push(src[0]).is_ok()),
            _ => src.iter().take_while(|&&v| self.push(v).is_ok()).count(),
        }
    }
}

impl Rx for Arc<ArrayQueue<u64>> {
    #[inline(always)]
    fn get<const OP: u8>(&mut self, dst: &mut [u64]) -> usize {
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

/// Every case: (label, operation, elements per call).
const OPS: [(&str, u8, usize); 7] = [
    ("single", SINGLE, 1),
    ("burst8", BURST, 8),
    ("burst32", BURST, 32),
    ("burst128", BURST, 128),
    ("bulk8", BULK, 8),
    ("bulk32", BULK, 32),
    ("bulk128", BULK, 128),
];

fn one_thread(c: &mut Criterion, name: &str, (mut tx, mut rx): (impl Tx, impl Rx)) {
    let mut g = c.benchmark_group("ring_1thread");
    for (label, op, n) in OPS {
        g.throughput(Throughput::Elements(n as u64));
        let id = BenchmarkId::new(name, label);
        let (src, dst) = (&vec![7u64; n][..], &mut vec![0u64; n][..]);
        with_op!(op, OP => g.bench_function(id, |b| {
            b.iter(|| round::<OP>(&mut tx, &mut rx, src, dst))
        }));
    }
    g.finish();
}

/// One single-thread round: enqueue `n`, dequeue `n`.
#[inline(always)]
fn round<const OP: u8>(tx: &mut impl Tx, rx: &mut impl Rx, src: &[u64], dst: &mut [u64]) {
    black_box(tx.put::<OP>(black_box(src)));
    black_box(rx.get::<OP>(black_box(dst)));
}

/// A consumer thread pinned to CPU 1 that lives across samples (spawning
/// and migrating a thread per sample cost more than a small sample's
/// transfer) and drains the number of elements it is told to.
struct Drainer {
    cmd: mpsc::Sender<(u8, usize, u64)>,
    done: mpsc::Receiver<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Drainer {
    fn spawn(mut rx: impl Rx) -> Self {
        let (cmd, cmd_rx) = mpsc::channel::<(u8, usize, u64)>();
        let (done_tx, done) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            pin(1);
            while let Ok((op, n, total)) = cmd_rx.recv() {
                with_op!(op, OP => drain::<OP>(&mut rx, n, total));
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

/// The drainer's loop: takes `total` elements, `n` per call.
fn drain<const OP: u8>(rx: &mut impl Rx, n: usize, total: u64) {
    let mut dst = [0u64; 128];
    let backoff = Backoff::new();
    let mut got = 0u64;
    // `total` is a multiple of `n` and the producer sends exactly `total`,
    // so full-size requests never overshoot.
    while got < total {
        let k = rx.get::<OP>(&mut dst[..n]);
        if k == 0 {
            backoff.spin();
        } else {
            backoff.reset();
        }
        got += k as u64;
    }
}

/// Moves `iters * n` elements from CPU 0 to the drainer on CPU 1 and times
/// it. Both sides spin with crossbeam's `Backoff` when the queue is full or
/// empty, the policy crossbeam's own channels use, so neither queue is
/// measured in a poll loop tuned for it.
fn cross<const OP: u8>(tx: &mut impl Tx, d: &Drainer, n: usize, iters: u64) -> Duration {
    let total = iters * n as u64;
    pin(0);
    let src = [7u64; 128];
    let start = Instant::now();
    d.cmd.send((OP, n, total)).unwrap();
    let mut sent = 0u64;
    let backoff = Backoff::new();
    while sent < total {
        // A burst may move fewer than `n`; send only what is missing so
        // exactly `total` elements go through.
        let k = tx.put::<OP>(&src[..n.min((total - sent) as usize)]);
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
        let id = BenchmarkId::new(name, label);
        with_op!(op, OP => g.bench_function(id, |b| {
            b.iter_custom(|iters| cross::<OP>(&mut tx, &d, n, iters))
        }));
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
