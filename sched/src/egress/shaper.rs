//! The scheduler itself, with no lock and no clock of its own: frames
//! go into per-class queues ([`Shaper::enqueue`]) and come out by class
//! priority and tokens ([`Shaper::dequeue`], told the time). The shared
//! egress wraps it in the TX lock; tests drive it in virtual time.
//!
//! Tokens are kept in nanobytes (bytes × 10⁹), so that a bucket refills by
//! `elapsed_ns × rate` exactly, with no rounding that would drift the
//! delivered rate over a long run.
//!
//! A frame leaves when the port bucket holds its length. Which class's
//! head frame goes is HTB's choice on one level: first, in priority
//! order, a class within its guaranteed rate (its own bucket holds the
//! frame, and its ceiling bucket does too); else, in priority order, a
//! class that may borrow (its ceiling bucket holds the frame). A sent
//! frame is charged to the port and the ceiling buckets, and to the
//! class's own bucket only when it was sent within the guarantee
//! (borrowed bytes are not owed back, as in HTB's `htb_charge_class`).
use super::spec::{Classify, EgressConfig};
use rpmd_pmd::hdr::{EtherType, Ethernet, Ipv4, Ipv6};
use rpmd_pmd::port::stats::Counter;
use rpmd_pmd::port::Pkts;
use rpmd_pmd::Mbuf;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Nanobytes per byte.
const NANO: i128 = 1_000_000_000;

/// A token bucket.
#[derive(Debug)]
struct Bucket {
    /// Bytes per second.
    rate: u64,
    /// Tokens now and at most, in nanobytes.
    tokens: i128,
    cap: i128,
    /// When it was last refilled (ns).
    last: u64,
}

impl Bucket {
    /// A full bucket of `burst` bytes filling at `rate` bytes per second.
    fn new(rate: u64, burst: u64) -> Self {
        let cap = burst as i128 * NANO;
        Bucket {
            rate,
            tokens: cap,
            cap,
            last: 0,
        }
    }

    fn refill(&mut self, now: u64) {
        let dt = now.saturating_sub(self.last) as i128;
        self.last = now.max(self.last);
        self.tokens = (self.tokens + dt * self.rate as i128).min(self.cap);
    }

    fn holds(&self, bytes: usize) -> bool {
        self.tokens >= bytes as i128 * NANO
    }

    fn take(&mut self, bytes: usize) {
        self.tokens -= bytes as i128 * NANO;
    }

    /// The time (ns, on the refill clock) from which it holds `bytes`.
    fn ready_at(&self, bytes: usize) -> u64 {
        let short = bytes as i128 * NANO - self.tokens;
        if short <= 0 {
            return self.last;
        }
        let rate = self.rate.max(1) as i128;
        self.last.saturating_add(((short + rate - 1) / rate) as u64)
    }
}

/// `ready_at` for a bucket that may be absent (absent: at once).
fn ready_at(b: &Option<Bucket>, bytes: usize) -> u64 {
    b.as_ref().map_or(0, |b| b.ready_at(bytes))
}

/// `holds` for a bucket that may be absent (absent: unlimited).
fn holds(b: &Option<Bucket>, bytes: usize) -> bool {
    b.as_ref().is_none_or(|b| b.holds(bytes))
}

/// One class's counters, readable while lcores use the egress. Written
/// only under the egress's lock, so one writer at a time.
#[derive(Debug, Default)]
pub struct ClassStats {
    /// The class's name.
    pub name: String,
    /// Frames queued.
    pub enqueued: Counter,
    /// Frames the device took.
    pub sent: Counter,
    /// Bytes the device took.
    pub sent_bytes: Counter,
    /// Frames dropped: the queue was full (tail drop), the frame was
    /// longer than the bucket, or still queued when the egress closed.
    pub dropped: Counter,
    /// Frames waiting now.
    pub depth: AtomicUsize,
}

/// One class: its queue and buckets.
#[derive(Debug)]
struct Class {
    queue: VecDeque<Mbuf>,
    limit: usize,
    own: Option<Bucket>,
    ceil: Option<Bucket>,
}

/// The scheduler of one port (see the module docs).
#[derive(Debug)]
pub struct Shaper {
    cfg: EgressConfig,
    port: Option<Bucket>,
    classes: Vec<Class>,
    /// The class each key value goes to.
    by_key: [u8; 64],
    default_class: u8,
    /// When the next frame may leave (ns): see [`Shaper::ready_at`].
    ready_at: u64,
}

impl Shaper {
    /// A scheduler for `cfg` with its buckets full at time 0; its queues'
    /// room is allocated here, never on the data path.
    pub fn new(cfg: &EgressConfig) -> Self {
        let burst = cfg.burst;
        let classes = cfg
            .classes
            .iter()
            .map(|c| Class {
                queue: VecDeque::with_capacity(cfg.limit),
                limit: cfg.limit,
                own: c.rate.map(|r| Bucket::new(r, burst)),
                ceil: c.ceil.map(|r| Bucket::new(r, burst)),
            })
            .collect();
        let mut by_key = [0u8; 64];
        for (k, slot) in by_key.iter_mut().enumerate() {
            *slot = cfg.class_of_key(Some(k as u8)) as u8;
        }
        Shaper {
            port: cfg.rate.map(|r| Bucket::new(r, burst)),
            classes,
            by_key,
            default_class: cfg.default_class() as u8,
            cfg: cfg.clone(),
            ready_at: u64::MAX,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &EgressConfig {
        &self.cfg
    }

    /// Fresh counters, one per class, for [`enqueue`](Self::enqueue) and
    /// [`dequeue`](Self::dequeue) to write.
    pub fn new_stats(&self) -> Vec<ClassStats> {
        self.cfg
            .classes
            .iter()
            .map(|c| ClassStats {
                name: c.name.clone(),
                ..ClassStats::default()
            })
            .collect()
    }

    /// The class of a frame.
    #[inline]
    pub fn classify(&self, frame: &[u8]) -> usize {
        let key = match self.cfg.classify {
            Classify::None => return self.default_class as usize,
            Classify::Pcp => pcp(frame),
            Classify::Dscp => dscp(frame),
        };
        match key {
            Some(k) => self.by_key[(k & 63) as usize] as usize,
            None => self.default_class as usize,
        }
    }

    /// Queues every frame of `pkts` in its class, or drops it (queue full,
    /// or longer than the bucket could ever hold) and counts it; `pkts`
    /// ends empty.
    pub fn enqueue(&mut self, pkts: &mut Pkts, stats: &[ClassStats]) {
        let too_long = self
            .cfg
            .rate
            .map_or(usize::MAX, |_| self.cfg.burst as usize);
        while let Some(m) = pkts.pop() {
            let c = self.classify(m.data());
            let class = &mut self.classes[c];
            if class.queue.len() >= class.limit || m.pkt_len() > too_long {
                stats[c].dropped.add(1);
                continue; // `m` goes back to its pool here
            }
            if class.queue.is_empty() {
                self.ready_at = 0; // a new head: it may go at once
            }
            class.queue.push_back(m);
            stats[c].enqueued.add(1);
            stats[c].depth.store(class.queue.len(), Relaxed);
        }
    }

    /// Moves up to `max` frames that may leave at time `now_ns` into
    /// `out` (its room permitting), charging their tokens and telling
    /// `each` every frame's class and length; returns how many.
    pub fn dequeue(
        &mut self,
        now_ns: u64,
        out: &mut Pkts,
        max: usize,
        stats: &[ClassStats],
        mut each: impl FnMut(usize, usize),
    ) -> usize {
        self.refill(now_ns);
        let mut n = 0;
        while n < max && !out.is_full() {
            let Some((c, within)) = self.pick() else {
                break;
            };
            let class = &mut self.classes[c];
            let len = class.queue.front().map_or(0, Mbuf::pkt_len);
            if !holds(&self.port, len) {
                break; // the port gate: nobody goes before this frame
            }
            let Some(m) = class.queue.pop_front() else {
                break;
            };
            if let Some(p) = self.port.as_mut() {
                p.take(len);
            }
            if let Some(b) = class.ceil.as_mut() {
                b.take(len);
            }
            if within {
                if let Some(b) = class.own.as_mut() {
                    b.take(len);
                }
            }
            stats[c].depth.store(class.queue.len(), Relaxed);
            each(c, len);
            if let Err(m) = out.push(m) {
                drop(m); // unreachable: `out` was checked for room
            }
            n += 1;
        }
        self.ready_at = if n == max || out.is_full() {
            now_ns // stopped by the caller's room: more may go now
        } else {
            self.next_ready()
        };
        n
    }

    /// The earliest time (ns) at which a frame may leave, as of the last
    /// dequeue or enqueue: 0 after a frame arrived at an empty class,
    /// `u64::MAX` when nothing is queued. A drainer that reads the clock
    /// below it can skip the lock: nothing would leave.
    pub fn ready_at(&self) -> u64 {
        self.ready_at
    }

    /// When the earliest head frame can leave, by the port's and its
    /// ceiling's tokens (a class's own bucket only decides whether it
    /// borrows).
    fn next_ready(&self) -> u64 {
        self.classes
            .iter()
            .filter_map(|c| {
                let len = c.queue.front()?.pkt_len();
                Some(ready_at(&self.port, len).max(ready_at(&c.ceil, len)))
            })
            .min()
            .unwrap_or(u64::MAX)
    }

    /// The next class to send from and whether within its guarantee.
    fn pick(&self) -> Option<(usize, bool)> {
        let head = |c: &Class| c.queue.front().map(Mbuf::pkt_len);
        let within = self
            .classes
            .iter()
            .position(|c| head(c).is_some_and(|len| holds(&c.own, len) && holds(&c.ceil, len)));
        if let Some(c) = within {
            return Some((c, true));
        }
        self.classes
            .iter()
            .position(|c| head(c).is_some_and(|len| holds(&c.ceil, len)))
            .map(|c| (c, false))
    }

    fn refill(&mut self, now: u64) {
        if let Some(p) = self.port.as_mut() {
            p.refill(now);
        }
        for c in self.classes.iter_mut() {
            for b in [c.own.as_mut(), c.ceil.as_mut()].into_iter().flatten() {
                b.refill(now);
            }
        }
    }

    /// Frames queued in every class.
    pub fn backlog(&self) -> usize {
        self.classes.iter().map(|c| c.queue.len()).sum()
    }

    /// Drops every queued frame, counting each as dropped (closing).
    pub fn clear(&mut self, stats: &[ClassStats]) {
        self.ready_at = u64::MAX;
        for (c, class) in self.classes.iter_mut().enumerate() {
            stats[c].dropped.add(class.queue.len() as u64);
            class.queue.clear();
            stats[c].depth.store(0, Relaxed);
        }
    }

    /// Starts the buckets' clock at `now_ns` (full), for a scheduler whose
    /// time does not start at 0.
    pub fn start_at(&mut self, now_ns: u64) {
        if let Some(p) = self.port.as_mut() {
            p.last = now_ns;
        }
        for c in self.classes.iter_mut() {
            for b in [c.own.as_mut(), c.ceil.as_mut()].into_iter().flatten() {
                b.last = now_ns;
            }
        }
    }
}

/// The outer VLAN tag's priority, if the frame has one.
fn pcp(frame: &[u8]) -> Option<u8> {
    let eth = Ethernet::new_checked(frame).ok()?;
    if !eth.ethertype().is_vlan() {
        return None;
    }
    Some(*eth.payload().first()? >> 5)
}

/// The IP DSCP, past up to two VLAN tags.
fn dscp(frame: &[u8]) -> Option<u8> {
    let eth = Ethernet::new_checked(frame).ok()?;
    let (_, t, p) = eth.untagged()?;
    match t {
        EtherType::IPV4 => Ipv4::new_checked(p).ok().map(|ip| ip.dscp()),
        EtherType::IPV6 => Ipv6::new_checked(p).ok().map(|ip| ip.dscp()),
        _ => None,
    }
}
