//! An egress scheduler in front of one device TX queue, shared by any
//! number of lcores: where [`TxLock`] earns its keep.
//!
//! Every lcore that sends to the port holds an [`EgressTx`], a
//! [`TxQueue`] like any other. Its `tx_burst` classifies the frames and
//! queues them (or drops and counts them: tail drop) under the lock's
//! enqueue side, then tries to become the drainer. One lcore at a time
//! drains (the `running` flag: Linux's `__QDISC_STATE_RUNNING`): under
//! the lock's drain side, which goes ahead of every waiting enqueuer, it
//! takes the frames the classes and tokens allow ([`Shaper`]), hands them
//! to the device's TX queue and keeps what the device did not take for
//! its next turn. An lcore that finds another draining leaves its frames
//! queued for it, as a CPU finding the qdisc running does.
//!
//! Frames waiting for tokens leave when some lcore drains again: every
//! handle drains in [`TxQueue::in_flight`], which the apps call on idle
//! rounds, and reports the backlog there so that a task can keep its
//! lcore awake ([`Egress::backlog`]).
//!
//! Without a rate ([`EgressConfig::fifo`]) the scheduler is one FIFO: the
//! shared path for lcores that outnumber a port's TX queues. Ports with a
//! queue per lcore and no shaping use none of this (no lock).
use crate::txlock::TxLock;
use crossbeam_utils::CachePadded;
use rpmd_pmd::port::{Pkts, TxQueue};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::Arc;
use std::time::Instant;

pub mod shaper;
pub mod spec;

pub use shaper::{ClassStats, Shaper};
pub use spec::{ClassConfig, Classify, EgressConfig};

/// Frames taken from the scheduler per device burst.
const BURST: usize = 32;

/// Device bursts per drain, at most (a drainer's turn is bounded, so
/// that enqueuers are not held off for long).
const BURSTS_PER_DRAIN: usize = 8;

/// What the lock guards: the scheduler, the device queue, and frames the
/// device did not take yet.
struct State {
    shaper: Shaper,
    txq: Box<dyn TxQueue>,
    out: Pkts,
    /// The class and length of each frame in `out`, in order.
    out_tags: VecDeque<(u8, u32)>,
}

/// A port's shared egress; hand each lcore an [`EgressTx`] from
/// [`Egress::handle`].
pub struct Egress {
    state: TxLock<State>,
    /// A drainer is at work.
    running: CachePadded<AtomicBool>,
    /// Frames queued in the scheduler, and frames taken from it that the
    /// device has not taken yet, as of the last drain.
    queued: CachePadded<AtomicUsize>,
    held: AtomicUsize,
    /// The device queue's unfinished frames, as of the last drain.
    device_in_flight: AtomicUsize,
    /// The scheduler's [`Shaper::ready_at`], published under the lock:
    /// a drainer that finds the clock below it does not take the lock
    /// (HTB's watchdog, without a timer).
    ready_at: CachePadded<AtomicU64>,
    stats: Vec<ClassStats>,
    epoch: Instant,
    cfg: EgressConfig,
}

impl Egress {
    /// An egress for `cfg` in front of `txq`.
    pub fn new(cfg: &EgressConfig, txq: Box<dyn TxQueue>) -> Arc<Egress> {
        let shaper = Shaper::new(cfg);
        let stats = shaper.new_stats();
        Arc::new(Egress {
            state: TxLock::new(State {
                shaper,
                txq,
                out: Pkts::new(),
                out_tags: VecDeque::with_capacity(BURST),
            }),
            running: CachePadded::new(AtomicBool::new(false)),
            queued: CachePadded::new(AtomicUsize::new(0)),
            held: AtomicUsize::new(0),
            device_in_flight: AtomicUsize::new(0),
            ready_at: CachePadded::new(AtomicU64::new(u64::MAX)),
            stats,
            epoch: Instant::now(),
            cfg: cfg.clone(),
        })
    }

    /// A handle for one lcore.
    pub fn handle(self: &Arc<Self>) -> EgressTx {
        EgressTx {
            egress: self.clone(),
        }
    }

    /// The per-class counters, in the configuration's class order.
    pub fn stats(&self) -> &[ClassStats] {
        &self.stats
    }

    /// Frames waiting in the scheduler or for room in the device queue,
    /// as of the last drain: work for some lcore to do.
    pub fn backlog(&self) -> usize {
        self.queued.load(Relaxed) + self.held.load(Relaxed)
    }

    /// Queues `pkts` (all of them: what does not fit is dropped and
    /// counted per class).
    fn enqueue(&self, pkts: &mut Pkts) {
        let mut g = self.state.lock_enqueue();
        g.shaper.enqueue(pkts, &self.stats);
        self.ready_at.store(g.shaper.ready_at(), Relaxed);
        self.queued.store(g.shaper.backlog(), Relaxed);
    }

    /// Drains if no other lcore is draining: sends what the classes and
    /// tokens allow. Returns how many frames the device took.
    pub fn drain(&self) -> usize {
        let now = self.epoch.elapsed().as_nanos() as u64;
        // Relaxed: a stale value costs one early or late drain, never a
        // frame (the next drain or enqueue publishes it again).
        if now < self.ready_at.load(Relaxed) && self.held.load(Relaxed) == 0 {
            return 0;
        }
        // Acquire: pairs with the previous drainer's Release below, so at
        // most one thread is on the lock's drain side at a time.
        if self.running.swap(true, Acquire) {
            return 0;
        }
        let mut sent = 0;
        {
            let mut g = self.state.lock_drain();
            let State {
                shaper,
                txq,
                out,
                out_tags,
            } = &mut *g;
            for _ in 0..BURSTS_PER_DRAIN {
                let room = BURST.saturating_sub(out.len());
                shaper.dequeue(now, out, room, &self.stats, |c, len| {
                    out_tags.push_back((c as u8, len as u32))
                });
                if out.is_empty() {
                    break;
                }
                let n = txq.tx_burst(out);
                sent += n;
                for (c, len) in out_tags.drain(..n.min(out_tags.len())) {
                    self.stats[c as usize].sent.add(1);
                    self.stats[c as usize].sent_bytes.add(len as u64);
                }
                if !out.is_empty() {
                    break; // the device is full: the rest waits in `out`
                }
            }
            self.held.store(out.len(), Relaxed);
            self.queued.store(shaper.backlog(), Relaxed);
            self.ready_at.store(shaper.ready_at(), Relaxed);
            self.device_in_flight.store(txq.in_flight(), Relaxed);
        }
        self.running.store(false, Release);
        sent
    }

    /// Drops whatever is still queued, counting it, and hands back the
    /// device queue's unfinished count (an app stopping).
    pub fn close(&self) -> usize {
        // The drain side is single: wait out a drainer at work (the apps
        // close after their lcores have stopped, so none is).
        while self.running.swap(true, Acquire) {
            std::thread::yield_now();
        }
        let left = self.clear();
        self.running.store(false, Release);
        left
    }

    /// `close` with the drain side held.
    fn clear(&self) -> usize {
        let mut g = self.state.lock_drain();
        let State {
            shaper,
            txq,
            out,
            out_tags,
        } = &mut *g;
        shaper.clear(&self.stats);
        for (c, _) in out_tags.drain(..) {
            self.stats[c as usize].dropped.add(1);
        }
        out.clear();
        let left = txq.in_flight();
        self.queued.store(0, Relaxed);
        self.held.store(0, Relaxed);
        self.ready_at.store(u64::MAX, Relaxed);
        self.device_in_flight.store(left, Relaxed);
        left
    }

    /// The configuration.
    pub fn config(&self) -> &EgressConfig {
        &self.cfg
    }

    /// The port rate in bytes per second (`None`: unshaped).
    pub fn rate(&self) -> Option<u64> {
        self.cfg.rate
    }
}

/// One lcore's handle on a shared [`Egress`].
pub struct EgressTx {
    egress: Arc<Egress>,
}

impl EgressTx {
    /// The egress behind it.
    pub fn egress(&self) -> &Arc<Egress> {
        &self.egress
    }
}

impl TxQueue for EgressTx {
    /// Takes every frame (queued, or dropped and counted by its class),
    /// then drains if no other lcore is.
    fn tx_burst(&mut self, pkts: &mut Pkts) -> usize {
        let n = pkts.len();
        if n > 0 {
            self.egress.enqueue(pkts);
        }
        self.egress.drain();
        n
    }

    /// Drains, then answers the frames still waiting anywhere on the way
    /// out.
    fn in_flight(&mut self) -> usize {
        self.egress.drain();
        self.egress.backlog() + self.egress.device_in_flight.load(Relaxed)
    }
}

#[cfg(test)]
mod tests;
