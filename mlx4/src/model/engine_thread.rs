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
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Weak};
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
}

/// A BAR2 write waiting for the engine.
pub(super) struct Rung {
    off: u64,
    width: u8,
    v: u64,
    due: Instant,
}

/// The driver's side: where doorbells go.
pub(super) struct Doorbells {
    tx: Sender<Rung>,
    timing: EngineTiming,
    /// xorshift state for the jitter.
    seed: std::sync::atomic::AtomicU64,
}

impl Doorbells {
    /// Starts the engine thread for `model`; it ends when the model goes.
    pub(super) fn start(model: &Arc<Mlx4Model>, timing: EngineTiming) -> Doorbells {
        let (tx, rx) = channel();
        let weak = Arc::downgrade(model);
        let spawned = std::thread::Builder::new()
            .name("mlx4-model-engine".into())
            .spawn(move || run(weak, rx, timing.cpu));
        if let Err(e) = spawned {
            // Without its thread the queue is never drained: the card
            // looks dead, as one whose engines stopped.
            eprintln!("mlx4 model: no engine thread: {e}");
        }
        Doorbells {
            tx,
            timing,
            seed: std::sync::atomic::AtomicU64::new(0x9e37_79b9_7f4a_7c15),
        }
    }

    /// Queues a BAR2 write for the engine.
    pub(super) fn ring(&self, off: u64, width: u8, v: u64) {
        let j = self.timing.jitter.as_nanos() as u64;
        let extra = if j == 0 { 0 } else { self.random() % (j + 1) };
        let due = Instant::now() + self.timing.delay + Duration::from_nanos(extra);
        let _ = self.tx.send(Rung { off, width, v, due });
    }

    fn random(&self) -> u64 {
        use std::sync::atomic::Ordering::Relaxed;
        let mut x = self.seed.load(Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.seed.store(x, Relaxed);
        x
    }
}

/// The engine thread: each queued write, once due, as the model would
/// have done it in the doorbell.
fn run(model: Weak<Mlx4Model>, rx: Receiver<Rung>, cpu: Option<usize>) {
    if let Some(cpu) = cpu {
        if let Some(core) =
            core_affinity::get_core_ids().and_then(|c| c.into_iter().find(|c| c.id == cpu))
        {
            core_affinity::set_for_current(core);
        }
    }
    while let Ok(r) = rx.recv() {
        // Short waits spin (a sleep would oversleep them); long ones sleep.
        loop {
            let now = Instant::now();
            if now >= r.due {
                break;
            }
            let left = r.due - now;
            if left > Duration::from_micros(100) {
                std::thread::sleep(left - Duration::from_micros(50));
            } else {
                std::hint::spin_loop();
            }
        }
        let Some(m) = model.upgrade() else { return };
        Bar2(m).perform(r.off, r.width, r.v);
    }
}
