//! gen: testpmd-style transmit-only and receive-only tasks.
//!
//! [`TxOnly`] sends UDP/IPv4 frames of a fixed size as fast as the port
//! takes them, or at a set rate, cycling over N flows (the UDP source port
//! and the last byte of the source IP differ per flow, as testpmd's
//! `--txonly-multi-flow` does). Frames are built once from an etherparse
//! template; per frame only the flow fields are patched. [`RxOnly`]
//! receives and frees, counting frames and bytes. [`Io`] sends back what
//! it receives, rewritten as one of testpmd's forwarding modes has it
//! ([`Rewrite`]); [`Flowgen`] sends flows and drops what comes in.
use crate::fwd::CsumCounters;
pub use crate::fwd::Rewrite;
use rpmd_pmd::clock;
use rpmd_pmd::port::stats::Counter;
use rpmd_pmd::port::{Pkts, RxQueue, TxQueue};
use rpmd_pmd::{Mbuf, Mempool};
use rpmd_sched::{backlog, Task};
use std::sync::Arc;

/// Frames and bytes moved, frames that found the port full (tx only).
#[derive(Debug, Default)]
pub struct GenCounters {
    /// Frames sent or received.
    pub packets: Counter,
    /// Bytes sent or received.
    pub bytes: Counter,
    /// Frames not taken by a full tx queue (freed, as testpmd does).
    pub dropped: Counter,
    /// Bad checksums found (csum mode).
    pub csum: CsumCounters,
}

/// A UDP/IPv4 frame of `size` bytes (60..=9000) for flow 0.
pub fn template(size: usize) -> Vec<u8> {
    let size = size.max(60);
    let payload = vec![0u8; size.saturating_sub(14 + 20 + 8)];
    let b = etherparse::PacketBuilder::ethernet2(
        [0x02, 0, 0, 0, 0x67, 0x01],
        [0x02, 0, 0, 0, 0x67, 0x02],
    )
    .ipv4([198, 18, 0, 1], [198, 18, 1, 1], 64)
    .udp(9, 9);
    let mut f = Vec::with_capacity(size);
    b.write(&mut f, &payload)
        .expect("writing into a Vec cannot fail");
    // No UDP checksum (allowed for IPv4): flows patch the ports.
    f[40] = 0;
    f[41] = 0;
    f
}

/// Patches `f` (a [`template`]) for flow `flow`: UDP source port 1024 +
/// flow, source IP last byte = flow, with the IPv4 checksum adjusted.
#[inline]
pub fn set_flow(f: &mut [u8], flow: u16) {
    f[34..36].copy_from_slice(&(1024 + flow).to_be_bytes());
    let old = f[29];
    let new = flow as u8;
    f[29] = new;
    // RFC 1624 incremental update: HC' = ~(~HC + ~m + m').
    let hc = u16::from_be_bytes([f[24], f[25]]);
    let mut sum = (!hc as u32) + (!(old as u16) as u32) + new as u32;
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

/// Transmit-only.
pub struct TxOnly {
    tx: Box<dyn TxQueue>,
    pool: Mempool,
    frame: Vec<u8>,
    flows: u16,
    flow: u16,
    burst: usize,
    /// Ticks per frame at the set rate (0 = as fast as possible).
    gap: u64,
    next: u64,
    pkts: Pkts,
    counters: Arc<GenCounters>,
    /// Write only the headers per frame, as testpmd's txonly does, and
    /// leave the payload as the mbuf has it.
    headers_only: bool,
}

/// Bytes of a [`template`]'s headers: Ethernet, IPv4, UDP.
const HEADERS: usize = 14 + 20 + 8;

impl TxOnly {
    /// Writes only the Ethernet/IPv4/UDP headers of each frame, as
    /// testpmd's txonly does (the payload is whatever the mbuf held: zeros
    /// in a pool only this task sends from). Per-frame work then matches
    /// testpmd's, which is what a comparison of ports wants.
    pub fn headers_only(mut self, on: bool) -> Self {
        self.headers_only = on;
        self
    }
    /// Sends `size`-byte frames over `flows` flows in bursts of `burst`,
    /// at `rate` frames/s (0 = line rate).
    pub fn new(
        tx: Box<dyn TxQueue>,
        pool: Mempool,
        size: usize,
        flows: u16,
        burst: usize,
        rate: f64,
    ) -> (TxOnly, Arc<GenCounters>) {
        let counters = Arc::new(GenCounters::default());
        let gap = if rate > 0.0 {
            (clock::hz() as f64 / rate).max(1.0) as u64
        } else {
            0
        };
        let t = TxOnly {
            tx,
            pool,
            frame: template(size),
            flows: flows.max(1),
            flow: 0,
            burst: burst.clamp(1, rpmd_pmd::port::MAX_BURST),
            gap,
            next: 0,
            pkts: Pkts::new(),
            counters: counters.clone(),
            headers_only: false,
        };
        (t, counters)
    }
}

/// Most bursts one round sends to catch up after a sleep.
const CATCH_UP_BURSTS: u64 = 8;

/// Copies `frame` into `m` (empty), chaining segments from `pool` for
/// what does not fit its data room (frames above about 2 KiB); false when
/// the pool has no segment left (the frame is then incomplete).
/// With `headers_only`, only the first [`HEADERS`] bytes are written.
fn fill(m: &mut Mbuf, frame: &[u8], pool: &Mempool, headers_only: bool) -> bool {
    let first = frame.len().min(m.tailroom());
    let Some(d) = m.append(first) else {
        return false;
    };
    let w = if headers_only {
        first.min(HEADERS)
    } else {
        first
    };
    d[..w].copy_from_slice(&frame[..w]);
    let mut rest = &frame[first..];
    while !rest.is_empty() {
        let Ok(mut seg) = pool.get() else {
            return false;
        };
        let k = rest.len().min(seg.tailroom());
        match seg.append(k) {
            Some(d) if !headers_only => d.copy_from_slice(&rest[..k]),
            Some(_) => {}
            None => return false,
        }
        if m.chain(seg).is_err() {
            return false;
        }
        rest = &rest[k..];
    }
    true
}

impl TxOnly {
    /// Sends one burst of `n` frames; returns how many the port took.
    fn send(&mut self, n: usize) -> usize {
        if self.pool.get_bulk(&mut self.pkts, n).is_err() {
            return 0;
        }
        let len = self.frame.len();
        let mut built = 0;
        for m in self.pkts.iter_mut() {
            if !fill(m, &self.frame, &self.pool, self.headers_only) {
                break;
            }
            if self.flows > 1 {
                // The headers sit in the first segment.
                set_flow(m.data_mut(), self.flow);
                self.flow = (self.flow + 1) % self.flows;
            }
            built += 1;
        }
        // Frames the pool could not complete are not sent (counted as
        // dropped, as frames the port did not take).
        self.counters.dropped.add((self.pkts.len() - built) as u64);
        self.pkts.truncate(built);
        let sent = self.tx.tx_burst(&mut self.pkts);
        self.counters.packets.add(sent as u64);
        self.counters.bytes.add((sent * len) as u64);
        self.counters.dropped.add(self.pkts.len() as u64);
        self.pkts.clear();
        sent
    }
}

impl Task for TxOnly {
    fn finish(&mut self) {
        // Let the frames already queued go out before the port stops
        // (bounded: a device that stopped taking them is not waited for).
        let t = std::time::Instant::now();
        while self.tx.in_flight() > 0 && t.elapsed() < std::time::Duration::from_secs(1) {
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }

    fn run(&mut self, _quota: usize) -> usize {
        if self.gap == 0 {
            return self.send(self.burst);
        }
        let now = clock::now();
        if self.next == 0 {
            self.next = now;
        }
        if now < self.next {
            return 0;
        }
        // Frames due since `next`: after a sleep of the lcore that may be
        // several bursts; more than a few bursts of credit is not banked.
        let bank = self.gap * self.burst as u64 * CATCH_UP_BURSTS;
        let start = self.next.max(now.saturating_sub(bank));
        let mut due = (now - start) / self.gap + 1;
        self.next = start + self.gap * due;
        let mut sent = 0;
        while due > 0 {
            let n = due.min(self.burst as u64) as usize;
            sent += self.send(n);
            due -= n as u64;
        }
        sent
    }
}

/// Receive-only.
pub struct RxOnly {
    rx: Box<dyn RxQueue>,
    burst: usize,
    pkts: Pkts,
    counters: Arc<GenCounters>,
}

impl RxOnly {
    /// Receives in bursts of `burst` and frees.
    pub fn new(rx: Box<dyn RxQueue>, burst: usize) -> (RxOnly, Arc<GenCounters>) {
        let counters = Arc::new(GenCounters::default());
        let t = RxOnly {
            rx,
            burst: burst.clamp(1, rpmd_pmd::port::MAX_BURST),
            pkts: Pkts::new(),
            counters: counters.clone(),
        };
        (t, counters)
    }
}

impl Task for RxOnly {
    /// Drains the queue until empty or the quota is met.
    fn run(&mut self, quota: usize) -> usize {
        let c = &self.counters;
        backlog::drain_rx(&mut *self.rx, &mut self.pkts, self.burst, quota, |b| {
            let bytes: usize = b.iter().map(|m| m.pkt_len()).sum();
            c.packets.add(b.len() as u64);
            c.bytes.add(bytes as u64);
        })
    }

    fn finish(&mut self) {
        // Count what already arrived, so a stop loses nothing in flight;
        // bounded, since a peer that keeps sending would never let the
        // queue run dry (256 bursts cover every default ring depth).
        for _ in 0..256 {
            if self.run(usize::MAX) == 0 {
                break;
            }
        }
    }
}

/// Receive and send back on the same port (testpmd's io mode with one
/// port and the loop topology): what one rx burst brought goes out of the
/// paired tx queue; what the port does not take is dropped and counted.
/// `tx_first` bursts of frames are sent first (testpmd's `start
/// tx_first N`), so two io ends facing each other keep frames bouncing.
pub struct Io {
    rx: Box<dyn RxQueue>,
    /// Sends the first bursts and owns the tx queue.
    tx: TxOnly,
    tx_first: usize,
    burst: usize,
    pkts: Pkts,
    counters: Arc<GenCounters>,
    rewrite: Rewrite,
}

impl Io {
    /// Rewrites each frame as forwarding mode `r` does before sending it.
    pub fn rewrite(mut self, r: Rewrite) -> Self {
        self.rewrite = r;
        self
    }

    /// Forwards `rx` to `tx` in bursts of `burst`, after `tx_first`
    /// bursts of `size`-byte frames from `pool`.
    pub fn new(
        rx: Box<dyn RxQueue>,
        tx: Box<dyn TxQueue>,
        pool: Mempool,
        size: usize,
        burst: usize,
        tx_first: usize,
    ) -> (Io, Arc<GenCounters>) {
        let (first, _) = TxOnly::new(tx, pool, size, 1, burst, 0.0);
        let counters = Arc::new(GenCounters::default());
        let t = Io {
            rx,
            tx: first,
            tx_first,
            burst: burst.clamp(1, rpmd_pmd::port::MAX_BURST),
            pkts: Pkts::new(),
            counters: counters.clone(),
            rewrite: Rewrite::None,
        };
        (t, counters)
    }
}

impl Task for Io {
    fn run(&mut self, quota: usize) -> usize {
        let tx = &mut self.tx;
        while self.tx_first > 0 {
            tx.send(tx.burst);
            self.tx_first -= 1;
        }
        let (c, rewrite) = (&self.counters, self.rewrite);
        backlog::drain_rx(&mut *self.rx, &mut self.pkts, self.burst, quota, |b| {
            let bytes: usize = b.iter().map(|m| m.pkt_len()).sum();
            c.packets.add(b.len() as u64);
            c.bytes.add(bytes as u64);
            if rewrite != Rewrite::None {
                for m in b.iter_mut() {
                    rewrite.apply(m, &c.csum);
                }
            }
            tx.tx.tx_burst(b);
            c.dropped.add(b.len() as u64);
        })
    }

    rpmd_sched::rx_queue_notify!(rx);
}

/// testpmd's flowgen: sends frames over many flows (as [`TxOnly`]) and
/// receives and drops whatever arrives on the paired rx queue.
pub struct Flowgen {
    tx: TxOnly,
    rx: RxOnly,
}

impl Flowgen {
    /// Sends as `tx` does (make it with the flows wanted) and drains
    /// `rx`, in one task; each keeps its own counters.
    pub fn new(tx: TxOnly, rx: RxOnly) -> Flowgen {
        Flowgen { tx, rx }
    }
}

impl Task for Flowgen {
    fn run(&mut self, quota: usize) -> usize {
        self.tx.run(quota) + self.rx.run(quota)
    }

    fn finish(&mut self) {
        self.tx.finish();
        self.rx.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{NetSlice, SlicedPacket};

    /// A 9000-byte frame becomes a chain holding exactly its bytes; a pool
    /// that runs dry mid-chain is reported, and nothing leaks.
    #[test]
    fn large_frames_become_chains() {
        let mut pc = rpmd_pmd::MempoolConfig::new("gen-fill", 8);
        pc.cache_size = 0;
        let pool = Mempool::new(&pc).unwrap();
        let frame = template(9000);
        let mut m = pool.get().unwrap();
        assert!(fill(&mut m, &frame, &pool, false));
        assert_eq!((m.pkt_len(), m.nb_segs()), (9000, 5));
        let bytes: Vec<u8> = m.segments().flat_map(|s| s.iter().copied()).collect();
        assert_eq!(bytes, frame);
        let mut short = pool.get().unwrap();
        assert!(
            !fill(&mut short, &frame, &pool, false),
            "3 mbufs left, 5 needed"
        );
        drop((m, short));
        assert_eq!(pool.available(), 8);
    }

    #[test]
    fn flows_keep_the_ipv4_checksum_valid() {
        for size in [60, 64, 1518] {
            let mut f = template(size);
            assert_eq!(f.len(), size);
            for flow in [0u16, 1, 7, 255, 300] {
                set_flow(&mut f, flow);
                let p = SlicedPacket::from_ethernet(&f).unwrap();
                let Some(NetSlice::Ipv4(ip)) = p.net else {
                    panic!("not ipv4")
                };
                let h = ip.header().to_header();
                assert_eq!(h.header_checksum, h.calc_header_checksum(), "flow {flow}");
                assert_eq!(h.source[3], flow as u8);
            }
        }
    }
}
