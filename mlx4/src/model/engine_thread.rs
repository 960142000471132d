//! The card's engines on a thread of their own ([`EngineTiming`]), as a
//! NIC works beside the CPU that feeds it.
//!
//! Without it the model does everything a doorbell starts (the TX
//! engine's DMA reads of WQEs and data, the wire, the RX engine's writes
//! of frames, CQEs and events) inside the driver's doorbell write, on the
//! driver's thread, so a CQE is always in the driver's cache and never
//! late. With it, BAR2 writes are queued and this thread performs them
//! after a delay with jitter, in the order they were rung (a later
//! doorbell never overtakes an earlier one, as posted writes to one BAR
//! do not), pinned to a CPU of its own when asked: completions and
//! frames then arrive from another core, when they arrive.
use super::engine::Bar2;
use super::Mlx4Model;
use crossbeam_queue::ArrayQueue;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// When the engine thread performs a doorbell's work.
#[derive(Clone, Copy, Debug)]
pub struct EngineTiming {
    /// At least this long after the doorbell.
    pub delay: Duration,
    /// Plus up to this much more, at random.
    pub jitter: Duration,
    /// The CPU to pin the engine thread to.
    pub cpu: Option<usize>,
    /// Every frame the RX engine writes, and every CQE and EQE, is first
    /// written as a poison pattern and its contents only a microsecond
    /// later (an entry's owner byte last, as ever): a driver that reads a
    /// buffer before its CQE, or an entry before its owner bit, reads
    /// poison.
    pub poison: bool,
}

/// The pattern [`EngineTiming::poison`] writes first.
pub(super) static POISON: [u8; 16384] = [0xa5; 16384];

/// The pause between the poison and the contents.
pub(super) fn poison_pause() {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_micros(1) {
        std::hint::spin_loop();
    }
}

/// A BAR2 write waiting for the engine.
struct Rung {
    off: u64,
    width: u8,
    v: u64,
    due: Instant,
}

/// Doorbells that may wait at once; a driver ringing more waits for room.
const QUEUE: usize = 4096;

/// How long the engine keeps looking for work before it parks (a NIC
/// never sleeps; a model shares the machine with the tests).
const SPIN: Duration = Duration::from_micros(200);

/// What the driver's side and the engine thread share.
struct Shared {
    queue: ArrayQueue<Rung>,
    /// The engine is parked, or about to: a doorbell must unpark it.
    parked: AtomicBool,
    /// The model is gone: the engine ends.
    closed: AtomicBool,
    /// Doorbells rung, and done: equal when the engine has caught up.
    rung: AtomicU64,
    done: AtomicU64,
    /// Nanoseconds drivers spent waiting for room in the queue.
    waited_ns: AtomicU64,
}

/// The driver's side: where doorbells go.
pub(super) struct Doorbells {
    shared: Arc<Shared>,
    engine: Option<Thread>,
    timing: EngineTiming,
    /// xorshift state for the jitter.
    seed: AtomicU64,
}

impl Doorbells {
    /// Starts the engine thread for `model`; it ends when the model goes.
    pub(super) fn start(model: &Arc<Mlx4Model>, timing: EngineTiming) -> Doorbells {
        let shared = Arc::new(Shared {
            queue: ArrayQueue::new(QUEUE),
            parked: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            rung: AtomicU64::new(0),
            done: AtomicU64::new(0),
            waited_ns: AtomicU64::new(0),
        });
        let (weak, s2) = (Arc::downgrade(model), shared.clone());
        let spawned = std::thread::Builder::new()
            .name("mlx4-model-engine".into())
            .spawn(move || run(weak, &s2, timing.cpu));
        let engine = match spawned {
            Ok(h) => Some(h.thread().clone()),
            Err(e) => {
                // Without its thread nothing is done: the card looks dead,
                // as one whose engines stopped.
                eprintln!("mlx4 model: no engine thread: {e}");
                None
            }
        };
        Doorbells {
            shared,
            engine,
            timing,
            seed: AtomicU64::new(0x9e37_79b9_7f4a_7c15),
        }
    }

    /// Queues a BAR2 write for the engine (no system call unless the
    /// engine parked).
    pub(super) fn ring(&self, off: u64, width: u8, v: u64) {
        let j = self.timing.jitter.as_nanos() as u64;
        let extra = if j == 0 { 0 } else { self.random() % (j + 1) };
        let due = Instant::now() + self.timing.delay + Duration::from_nanos(extra);
        let mut r = Rung { off, width, v, due };
        self.shared.rung.fetch_add(1, Ordering::SeqCst);
        if let Err(back) = self.shared.queue.push(r) {
            // Full: the engine is behind. The wait is the model's, not
            // the driver's (a real doorbell is a posted write): counted
            // apart.
            let t0 = Instant::now();
            r = back;
            while let Err(back) = self.shared.queue.push(r) {
                r = back;
                self.wake();
                std::hint::spin_loop();
            }
            let waited = t0.elapsed().as_nanos() as u64;
            self.shared.waited_ns.fetch_add(waited, Ordering::Relaxed);
        }
        self.wake();
    }

    /// Waits (at most a second) until the engine has done every doorbell
    /// rung so far: a BAR0 or config access does not pass the BAR2
    /// writes before it, as PCIe keeps posted writes in order and a read
    /// behind them.
    pub(super) fn flush(&self) {
        let want = self.shared.rung.load(Ordering::SeqCst);
        let t0 = Instant::now();
        while self.shared.done.load(Ordering::SeqCst) < want {
            self.wake();
            if self.engine.is_none() || t0.elapsed() > Duration::from_secs(1) {
                return;
            }
            std::hint::spin_loop();
        }
    }

    /// Nanoseconds drivers spent waiting for room in the queue (the
    /// engine behind).
    pub(super) fn waited_ns(&self) -> u64 {
        self.shared.waited_ns.load(Ordering::Relaxed)
    }

    fn wake(&self) {
        // Pairs with the engine's SeqCst store of `parked` before its last
        // look at the queue: either it sees this push or this sees it
        // parked.
        if self.shared.parked.load(Ordering::SeqCst) {
            if let Some(t) = &self.engine {
                t.unpark();
            }
        }
    }

    fn random(&self) -> u64 {
        let mut x = self.seed.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.seed.store(x, Ordering::Relaxed);
        x
    }
}

impl Drop for Doorbells {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        if let Some(t) = &self.engine {
            t.unpark();
        }
    }
}

/// Waits until `due`: short waits spin (a sleep would oversleep them).
fn wait_until(due: Instant) {
    loop {
        let now = Instant::now();
        if now >= due {
            return;
        }
        let left = due - now;
        if left > Duration::from_micros(100) {
            std::thread::sleep(left - Duration::from_micros(50));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// The engine thread: each queued write, once due, as the model would
/// have done it in the doorbell; parks when idle for a while.
fn run(model: Weak<Mlx4Model>, shared: &Shared, cpu: Option<usize>) {
    // By number: the CPUs the spawning thread may use (what
    // `get_core_ids` lists) need not include it.
    if let Some(cpu) = cpu {
        core_affinity::set_for_current(core_affinity::CoreId { id: cpu });
    }
    let mut idle_since = Instant::now();
    while !shared.closed.load(Ordering::SeqCst) {
        if let Some(r) = shared.queue.pop() {
            wait_until(r.due);
            let Some(m) = model.upgrade() else { return };
            Bar2(m).perform(r.off, r.width, r.v);
            shared.done.fetch_add(1, Ordering::SeqCst);
            idle_since = Instant::now();
            continue;
        }
        if idle_since.elapsed() < SPIN {
            std::hint::spin_loop();
            continue;
        }
        shared.parked.store(true, Ordering::SeqCst);
        if shared.queue.is_empty() && !shared.closed.load(Ordering::SeqCst) {
            std::thread::park_timeout(Duration::from_millis(50));
        }
        shared.parked.store(false, Ordering::SeqCst);
        idle_since = Instant::now();
        if model.strong_count() == 0 {
            return;
        }
    }
}
