//! Port statistics: per-queue counters written by the lcore that owns the
//! queue, summed on demand by the control path.
//!
//! Each queue has its own [`QueueStats`] on its own cache lines. Only the
//! queue's owner writes it, so an increment is a relaxed load and store, not
//! a locked read-modify-write; readers on other threads see each counter
//! as a whole value, a little stale at worst. Resetting never writes the
//! counters (that would race with the owner): it records a baseline that
//! later reads subtract.
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// The basic counters of DPDK's `rte_eth_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Packets received.
    pub ipackets: u64,
    /// Packets sent.
    pub opackets: u64,
    /// Bytes received.
    pub ibytes: u64,
    /// Bytes sent.
    pub obytes: u64,
    /// Packets the port dropped because rx queues were full.
    pub imissed: u64,
    /// Erroneous received packets.
    pub ierrors: u64,
    /// Failed transmissions.
    pub oerrors: u64,
    /// Receive buffer allocation failures.
    pub rx_nombuf: u64,
}

impl PortStats {
    fn minus(self, b: PortStats) -> PortStats {
        PortStats {
            ipackets: self.ipackets.wrapping_sub(b.ipackets),
            opackets: self.opackets.wrapping_sub(b.opackets),
            ibytes: self.ibytes.wrapping_sub(b.ibytes),
            obytes: self.obytes.wrapping_sub(b.obytes),
            imissed: self.imissed.wrapping_sub(b.imissed),
            ierrors: self.ierrors.wrapping_sub(b.ierrors),
            oerrors: self.oerrors.wrapping_sub(b.oerrors),
            rx_nombuf: self.rx_nombuf.wrapping_sub(b.rx_nombuf),
        }
    }
}

/// A named counter (DPDK's xstats).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Xstat {
    /// Name, e.g. `rx_q0_packets`.
    pub name: String,
    /// Value.
    pub value: u64,
}

/// A counter with one writer.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`. Only the owning thread may call it (a second writer would
    /// lose counts, though never corrupt memory).
    #[inline(always)]
    pub fn add(&self, n: u64) {
        // Relaxed: the counter orders nothing; readers only want a value
        // that some write produced.
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }

    /// The value now.
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// The counters of one queue (rx queues use the `rx_*`-meaning fields,
/// tx queues the others).
#[derive(Debug, Default)]
pub struct QueueStats {
    /// Packets received or sent.
    pub packets: Counter,
    /// Bytes received or sent.
    pub bytes: Counter,
    /// Receive errors or failed transmissions.
    pub errors: Counter,
    /// RX: packets dropped for lack of descriptors.
    pub missed: Counter,
    /// RX: buffer allocation failures.
    pub nombuf: Counter,
    /// TX: bursts that found the queue full.
    pub full: Counter,
    /// TX: frames no longer in flight, for drivers that learn it: sent by
    /// the device, or given up when its ring started over (`packets`
    /// minus this is what the device has not finished).
    pub retired: Counter,
    /// What the device wrote that broke its protocol (a used entry naming
    /// no buffer in flight, an index that jumped): each is also an error.
    pub device_errors: Counter,
    /// The queue stopped trusting its device (set by the owner, cleared
    /// when the queue starts over); the port reports its link down
    /// meanwhile ([`StatsBlock::any_stopped`]).
    pub stopped: AtomicBool,
}

/// The counters of a port: one [`QueueStats`] per queue plus the reset
/// baseline.
#[derive(Debug, Default)]
pub struct StatsBlock {
    rx: Vec<Arc<CachePadded<QueueStats>>>,
    tx: Vec<Arc<CachePadded<QueueStats>>>,
    baseline: Mutex<(PortStats, Vec<u64>)>,
}

impl StatsBlock {
    /// Counters for `rx` and `tx` queues. Counts of earlier blocks are
    /// carried over by the caller if wanted (drivers keep one block per
    /// configure).
    pub fn new(rx: u16, tx: u16) -> Self {
        StatsBlock {
            rx: (0..rx).map(|_| Arc::default()).collect(),
            tx: (0..tx).map(|_| Arc::default()).collect(),
            baseline: Mutex::default(),
        }
    }

    /// The counters of rx queue `q`, for its handle.
    pub fn rx(&self, q: usize) -> Arc<CachePadded<QueueStats>> {
        self.rx[q].clone()
    }

    /// The counters of tx queue `q`, for its handle.
    pub fn tx(&self, q: usize) -> Arc<CachePadded<QueueStats>> {
        self.tx[q].clone()
    }

    /// The tx queues' counters, in queue order.
    pub fn tx_queues(&self) -> &[Arc<CachePadded<QueueStats>>] {
        &self.tx
    }

    fn raw(&self) -> PortStats {
        let mut s = PortStats::default();
        for q in &self.rx {
            s.ipackets += q.packets.get();
            s.ibytes += q.bytes.get();
            s.ierrors += q.errors.get();
            s.imissed += q.missed.get();
            s.rx_nombuf += q.nombuf.get();
        }
        for q in &self.tx {
            s.opackets += q.packets.get();
            s.obytes += q.bytes.get();
            s.oerrors += q.errors.get();
        }
        s
    }

    fn raw_x(&self) -> Vec<Xstat> {
        let mut v = Vec::new();
        for (i, q) in self.rx.iter().enumerate() {
            for (n, c) in [
                ("packets", &q.packets),
                ("bytes", &q.bytes),
                ("errors", &q.errors),
                ("missed", &q.missed),
                ("nombuf", &q.nombuf),
                ("device_errors", &q.device_errors),
            ] {
                v.push(Xstat {
                    name: format!("rx_q{i}_{n}"),
                    value: c.get(),
                });
            }
        }
        for (i, q) in self.tx.iter().enumerate() {
            for (n, c) in [
                ("packets", &q.packets),
                ("bytes", &q.bytes),
                ("errors", &q.errors),
                ("full", &q.full),
                ("device_errors", &q.device_errors),
            ] {
                v.push(Xstat {
                    name: format!("tx_q{i}_{n}"),
                    value: c.get(),
                });
            }
        }
        v
    }

    /// Whether any queue stopped trusting its device (see
    /// [`QueueStats::stopped`]).
    pub fn any_stopped(&self) -> bool {
        self.rx
            .iter()
            .chain(&self.tx)
            .any(|q| q.stopped.load(Relaxed))
    }

    /// Clears every queue's stopped flag: a new start trusts its device
    /// again.
    pub fn clear_stopped(&self) {
        for q in self.rx.iter().chain(&self.tx) {
            q.stopped.store(false, Relaxed);
        }
    }

    /// Sums since the last reset.
    pub fn stats(&self) -> PortStats {
        let b = self.baseline.lock().unwrap_or_else(|e| e.into_inner());
        self.raw().minus(b.0)
    }

    /// Per-queue counters since the last reset.
    pub fn xstats(&self) -> Vec<Xstat> {
        let b = self.baseline.lock().unwrap_or_else(|e| e.into_inner());
        let mut v = self.raw_x();
        for (x, base) in v.iter_mut().zip(b.1.iter()) {
            x.value = x.value.wrapping_sub(*base);
        }
        v
    }

    /// Makes the current values the new zero.
    pub fn reset(&self) {
        let mut b = self.baseline.lock().unwrap_or_else(|e| e.into_inner());
        *b = (
            self.raw(),
            self.raw_x().into_iter().map(|x| x.value).collect(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_queues_and_resets_by_baseline() {
        let s = StatsBlock::new(2, 1);
        s.rx(0).packets.add(3);
        s.rx(1).packets.add(4);
        s.rx(1).bytes.add(400);
        s.tx(0).packets.add(5);
        s.rx(0).nombuf.add(1);
        let st = s.stats();
        assert_eq!(
            (st.ipackets, st.ibytes, st.opackets, st.rx_nombuf),
            (7, 400, 5, 1)
        );
        let x = s.xstats();
        assert!(x.contains(&Xstat {
            name: "rx_q1_packets".into(),
            value: 4
        }));
        s.reset();
        assert_eq!(s.stats(), PortStats::default());
        s.tx(0).packets.add(2);
        assert_eq!(s.stats().opackets, 2);
        assert!(s
            .xstats()
            .iter()
            .all(|x| x.value == 0 || x.name == "tx_q0_packets"));
    }
}
