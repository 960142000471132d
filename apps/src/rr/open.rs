//! rr's open loop (`rr --rate R`): requests leave on a schedule of their
//! own, whether or not earlier ones were answered, and each latency is
//! measured from the request's *scheduled* send time. A server (or a
//! client) that stalls cannot hide its delay by slowing the requests down
//! (no coordinated omission, as wrk2 and memtier measure): every request
//! that should have left during a stall carries the stall in its latency.
//!
//! The schedule is fixed (one request every 1/R) or Poisson (exponential
//! gaps of mean 1/R, as independent users arrive). Requests go round the
//! sessions (so flows still spread over queues), each with a sequence
//! number; a window of the last [`WINDOW`] sequence numbers per session
//! tells an answer from a stray or a duplicate. Requests unanswered at the
//! end are counted lost, bar those sent after the newest answered one
//! (still in flight when the run stopped).
use super::{frame, histogram, ClientShared, SessionResult};
use rpmd_pmd::clock;
use rpmd_pmd::port::{BusyPoll, Pkts, RxQueue, TxQueue};
use rpmd_pmd::Mempool;
use rpmd_sched::Task;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::Duration;

/// Outstanding requests tracked per session (a power of two).
pub const WINDOW: usize = 4096;

/// The highest rate the client paces: one request every 100 ns, about
/// the shortest time one pass of its loop takes.
pub const MAX_RATE: f64 = 1e7;

/// How the gaps between requests are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrivals {
    /// One request every 1/R.
    Fixed,
    /// Exponential gaps of mean 1/R.
    Poisson,
}

/// The open-loop client task.
pub struct OpenClient {
    rx: Box<dyn RxQueue>,
    tx: Box<dyn TxQueue>,
    pool: Mempool,
    template: Vec<u8>,
    sessions: Vec<OpenSession>,
    /// Mean gap between requests, in clock ticks (fractional).
    gap: f64,
    arrivals: Arrivals,
    rng: u64,
    /// Next request's scheduled time and session (clock ticks).
    next_at: u64,
    next_session: usize,
    start: u64,
    warmup: u64,
    started: bool,
    inp: Pkts,
    out: Pkts,
    shared: Arc<ClientShared>,
}

#[repr(align(128))]
struct OpenSession {
    seq: u32,
    /// Bit per sequence number in the window: sent and not yet answered.
    outstanding: Box<[u64; WINDOW / 64]>,
    sent: u64,
    answered: u64,
    /// The newest sequence number answered.
    newest: Option<u32>,
    result: SessionResult,
}

impl OpenSession {
    /// Requests unanswered at the stop, less those still in flight (sent
    /// after the newest answered one: a stop, not a loss).
    fn lost(&self) -> u64 {
        let unanswered = self.sent - self.answered;
        let Some(newest) = self.newest else {
            return unanswered;
        };
        let after = self.seq.wrapping_sub(newest).wrapping_sub(1) as u64;
        let in_flight = (0..after.min(WINDOW as u64))
            .map(|i| self.seq.wrapping_sub(1).wrapping_sub(i as u32) as usize % WINDOW)
            .filter(|&b| self.outstanding[b / 64] & (1 << (b % 64)) != 0)
            .count() as u64;
        unanswered - in_flight.min(unanswered)
    }
}

/// Most requests one call sends to catch up a schedule it fell behind.
const CATCH_UP: usize = 32;

impl OpenClient {
    /// A client offering `rate` requests a second over `sessions`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        rx: Box<dyn RxQueue>,
        tx: Box<dyn TxQueue>,
        pool: Mempool,
        sessions: u16,
        req: usize,
        rate: f64,
        arrivals: Arrivals,
        warmup: Duration,
    ) -> (OpenClient, Arc<ClientShared>) {
        clock::init();
        let shared = Arc::new(ClientShared::default());
        let c = OpenClient {
            rx,
            tx,
            pool,
            template: frame::request_template(req),
            sessions: (0..sessions.max(1))
                .map(|_| OpenSession {
                    seq: 0,
                    outstanding: Box::new([0; WINDOW / 64]),
                    sent: 0,
                    answered: 0,
                    newest: None,
                    result: SessionResult {
                        transactions: 0,
                        lost: 0,
                        latency: histogram(),
                    },
                })
                .collect(),
            gap: clock::hz() as f64 / rate,
            arrivals,
            rng: 0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id()),
            next_at: 0,
            next_session: 0,
            start: 0,
            warmup: clock::ticks(warmup),
            started: false,
            inp: Pkts::new(),
            out: Pkts::new(),
            shared: shared.clone(),
        };
        (c, shared)
    }

    /// The next gap in ticks.
    fn draw_gap(&mut self) -> u64 {
        match self.arrivals {
            Arrivals::Fixed => self.gap as u64,
            Arrivals::Poisson => {
                // xorshift64*, then an exponential by inversion.
                self.rng ^= self.rng >> 12;
                self.rng ^= self.rng << 25;
                self.rng ^= self.rng >> 27;
                let r = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
                let u = ((r >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
                (-u.ln() * self.gap) as u64
            }
        }
    }

    /// Queues the requests whose time has come (at most [`CATCH_UP`]),
    /// each stamped with its scheduled time.
    fn send_due(&mut self, now: u64) -> usize {
        let mut sent = 0;
        while self.next_at <= now && self.out.len() < CATCH_UP {
            let Ok(mut m) = self.pool.get() else {
                break; // the pool is dry: the requests go when it refills
            };
            if !m.set_data_len(self.template.len()) {
                break;
            }
            let s = self.next_session;
            let d = m.data_mut();
            d.copy_from_slice(&self.template);
            let sess = &mut self.sessions[s];
            frame::patch_request(d, s as u16, sess.seq, self.next_at);
            let bit = sess.seq as usize % WINDOW;
            sess.outstanding[bit / 64] |= 1 << (bit % 64);
            sess.seq = sess.seq.wrapping_add(1);
            sess.sent += 1;
            let _ = self.out.push(m);
            self.next_session = (s + 1) % self.sessions.len();
            self.next_at += self.draw_gap().max(1);
            sent += 1;
        }
        if !self.out.is_empty() {
            self.tx.tx_burst(&mut self.out);
            // What the ring turned back stays queued: late, not lost.
        }
        sent
    }

    /// Records the responses in `inp`.
    fn take_responses(&mut self, now: u64) {
        let warm_from = self.start + self.warmup;
        while let Some(m) = self.inp.pop() {
            let hit = frame::parse(m.data()).and_then(|p| {
                let s = p.client_port.wrapping_sub(frame::BASE_PORT) as usize;
                let sess = self.sessions.get_mut(s)?;
                let bit = p.seq as usize % WINDOW;
                let mask = 1u64 << (bit % 64);
                let ok = p.kind == frame::RESPONSE
                    && sess.seq.wrapping_sub(p.seq) as usize <= WINDOW
                    && sess.outstanding[bit / 64] & mask != 0;
                ok.then(|| {
                    sess.outstanding[bit / 64] &= !mask;
                    sess.answered += 1;
                    let newer = sess
                        .newest
                        .is_none_or(|n| (p.seq.wrapping_sub(n) as i32) > 0);
                    if newer {
                        sess.newest = Some(p.seq);
                    }
                    (sess, p.stamp)
                })
            });
            let Some((sess, stamp)) = hit else {
                self.shared.stray.add(1);
                continue;
            };
            if stamp >= warm_from {
                sess.result.transactions += 1;
                let lat = clock::to_ns(now.saturating_sub(stamp));
                let _ = sess.result.latency.record(lat.max(1));
            }
            self.shared.transactions.add(1);
        }
    }
}

impl Task for OpenClient {
    fn run(&mut self, quota: usize) -> usize {
        let now = clock::now();
        if !self.started {
            self.started = true;
            self.start = now;
            self.next_at = now;
        }
        let n = self.rx.rx_burst(&mut self.inp, quota.clamp(1, 64));
        if n > 0 {
            self.take_responses(now);
        }
        n + self.send_due(now)
    }

    // The schedule is the client's own: its lcore should poll (--poll
    // spin), but an rx interrupt still wakes it where the port has one.
    fn wake_fd(&self) -> Option<BorrowedFd<'_>> {
        self.rx.interrupt_fd()
    }

    fn set_notify(&mut self, armed: bool) {
        let _ = self.rx.set_interrupt(armed);
    }

    fn has_work(&self) -> bool {
        !self.started || clock::now() >= self.next_at || self.rx.has_work()
    }

    fn busy_poll(&self) -> Option<BusyPoll> {
        self.rx.busy_poll()
    }

    fn busy_poll_done(&mut self, hit: bool) {
        self.rx.busy_poll_done(hit)
    }

    fn finish(&mut self) {
        let results = self
            .sessions
            .iter()
            .map(|s| {
                let mut r = s.result.clone();
                r.lost = s.lost();
                r
            })
            .collect();
        self.shared.publish(results);
        self.out.clear();
    }
}

/// A `--rate` value: positive, finite, and no more than [`MAX_RATE`].
pub fn rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r > 0.0 && r <= MAX_RATE => Ok(r),
        Ok(r) if r > MAX_RATE => Err(format!(
            "{s} transactions/s is beyond what the client can pace (at most {MAX_RATE:e}: one request every 100 ns)"
        )),
        Ok(_) => Err(format!("{s} is not a positive rate (transactions/s)")),
        Err(_) => Err(format!("{s:?} is not a rate (transactions/s)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_checked() {
        assert_eq!(rate("1e5"), Ok(1e5));
        assert!(rate("0").unwrap_err().contains("positive"));
        assert!(rate("-3").unwrap_err().contains("positive"));
        assert!(rate("1e9").unwrap_err().contains("pace"));
        assert!(rate("inf").unwrap_err().contains("pace"));
        assert!(rate("NaN").is_err() && rate("x").is_err());
    }
}
