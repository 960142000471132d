//! rr: request/response over any port, like netperf's TCP_RR.
//!
//! A client keeps N sessions; each has one request in flight at a time,
//! and sends the next as soon as the response to the last arrives, so a
//! session's transaction rate is the inverse of its round-trip time. The
//! server answers every request it receives. Both run as tasks on rpmd's
//! run loop, so its spin budget, yield and sleep modes apply to them
//! exactly as they would to an application.
//!
//! The client stamps each request with its clock; the response echoes the
//! stamp, and the difference is recorded in a per-session histogram
//! (hdrhistogram, nanoseconds). A request unanswered for the session
//! timeout is sent again with the same sequence number and counted lost.
//! That is the closed loop (the default); [`open`] is the open loop
//! (`--rate`): requests on a schedule, latency from the scheduled time.
pub mod frame;
pub mod open;

use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;
use rpmd_pmd::clock;
use rpmd_pmd::port::stats::Counter;
use rpmd_pmd::port::{BusyPoll, Pkts, RxQueue, TxQueue};
use rpmd_pmd::{Mbuf, Mempool};
use rpmd_sched::Task;
use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A latency histogram: 1 ns to 100 s, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// One session's result.
#[derive(Clone, Debug)]
pub struct SessionResult {
    /// Transactions completed (after the warm-up).
    pub transactions: u64,
    /// Requests sent again after the timeout.
    pub lost: u64,
    /// Round-trip times, ns.
    pub latency: Histogram<u64>,
}

/// What the client shares with the control thread. On cache lines of its
/// own: the client writes it every transaction.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct ClientShared {
    /// Transactions completed so far (all sessions, warm-up included), for
    /// the status line.
    pub transactions: Counter,
    /// Frames received that were not the expected response.
    pub stray: Counter,
    /// Per-session results, filled when the task finishes.
    pub results: Mutex<Option<Vec<SessionResult>>>,
}

impl ClientShared {
    /// Hands the sessions' results to the control thread (a client
    /// task's `finish`).
    pub fn publish(&self, results: Vec<SessionResult>) {
        *self.results.lock().unwrap_or_else(|e| e.into_inner()) = Some(results);
    }
}

/// Written every transaction by the client's lcore: on lines of their
/// own, so no allocation the server's lcore writes can share one (the
/// control thread allocates both sides' state one after the other).
#[repr(align(128))]
struct Session {
    seq: u32,
    sent: u64,
    result: SessionResult,
}

/// The client task.
pub struct Client {
    rx: Box<dyn RxQueue>,
    tx: Box<dyn TxQueue>,
    pool: Mempool,
    template: Vec<u8>,
    sessions: Vec<Session>,
    /// Clock ticks (`rpmd_pmd::clock`) throughout: stamps, start, timeouts.
    start: u64,
    warmup: u64,
    timeout: u64,
    next_timeout_check: u64,
    started: bool,
    inp: Pkts,
    out: Pkts,
    /// Responses of the current burst: session and the request's stamp.
    answered: Vec<(u16, u64)>,
    /// Calls of `run`, for the timeout check.
    calls: u32,
    shared: Arc<ClientShared>,
}

/// Most sessions per client (one queued request each fits one burst).
pub const MAX_SESSIONS: u16 = 256;

/// The client looks for lost requests every this many calls: a few µs
/// while its lcore spins, about 6 ms when it sleeps 100 µs at a time.
const TIMEOUT_POLLS: u32 = 64;

impl Client {
    /// A client of `sessions` sessions sending `req`-byte requests.
    pub fn new(
        rx: Box<dyn RxQueue>,
        tx: Box<dyn TxQueue>,
        pool: Mempool,
        sessions: u16,
        req: usize,
        warmup: Duration,
        timeout: Duration,
    ) -> (Client, Arc<ClientShared>) {
        let shared = Arc::new(ClientShared::default());
        let c = Client {
            rx,
            tx,
            pool,
            template: frame::request_template(req),
            sessions: (0..sessions)
                .map(|_| Session {
                    seq: 0,
                    sent: 0,
                    result: SessionResult {
                        transactions: 0,
                        lost: 0,
                        latency: histogram(),
                    },
                })
                .collect(),
            start: 0,
            warmup: clock::ticks(warmup),
            timeout: clock::ticks(timeout),
            next_timeout_check: 0,
            started: false,
            inp: Pkts::new(),
            out: Pkts::new(),
            answered: Vec::with_capacity(64),
            calls: 0,
            shared: shared.clone(),
        };
        (c, shared)
    }

    /// Queues session `s`'s current request; false when the pool is dry
    /// (the timeout check will retry it).
    fn queue_request(&mut self, s: usize, now: u64) -> bool {
        match self.pool.get() {
            Ok(m) => self.fill_request(m, s, now),
            Err(_) => false,
        }
    }

    /// Turns `m` (a fresh mbuf or a response just read) into session `s`'s
    /// current request and queues it; false when no buffer could hold it.
    /// Reusing the response spares a pool get and a free per transaction.
    #[inline]
    fn fill_request(&mut self, mut m: Mbuf, s: usize, now: u64) -> bool {
        let want = self.template.len();
        if !(m.nb_segs() == 1 && m.set_data_len(want)) {
            drop(m);
            let Ok(fresh) = self.pool.get() else {
                return false;
            };
            m = fresh;
            if !m.set_data_len(want) {
                return false;
            }
        }
        let d = m.data_mut();
        d.copy_from_slice(&self.template);
        let sess = &mut self.sessions[s];
        frame::patch_request(d, s as u16, sess.seq, now);
        sess.sent = now;
        // The burst has room: at most one request per session is queued
        // and sessions are capped at the burst size.
        self.out.push(m).is_ok()
    }

    /// The first call: every session's first request.
    #[cold]
    fn begin(&mut self) {
        self.started = true;
        self.start = clock::now();
        self.next_timeout_check = self.start;
        let now = self.start;
        for s in 0..self.sessions.len() {
            self.queue_request(s, now);
        }
    }

    /// Answers the `n` responses in `inp`: sends each session's next
    /// request, then records the transactions.
    #[inline(never)]
    fn answer(&mut self, n: usize) -> usize {
        // The critical path of a transaction runs from the response's
        // arrival to the next request's departure: check the response and
        // send the request first, and do the bookkeeping (histograms,
        // counters) once it is on its way.
        let now = clock::now();
        self.answered.clear();
        while let Some(m) = self.inp.pop() {
            let ok = frame::parse(m.data()).and_then(|p| {
                let s = p.client_port.wrapping_sub(frame::BASE_PORT) as usize;
                let sess = self.sessions.get(s)?;
                (p.kind == frame::RESPONSE && p.seq == sess.seq).then_some((s, p.stamp))
            });
            let Some((s, stamp)) = ok else {
                self.shared.stray.add(1);
                continue;
            };
            // Sessions number at most MAX_SESSIONS, so u16 holds them;
            // `answered` has room for a whole rx burst.
            self.answered.push((s as u16, stamp));
            let sess = &mut self.sessions[s];
            sess.seq = sess.seq.wrapping_add(1);
            self.fill_request(m, s, now);
        }
        let mut work = n;
        if !self.out.is_empty() {
            work += self.tx.tx_burst(&mut self.out);
        }
        let warm = now - self.start >= self.warmup;
        for &(s, stamp) in &self.answered {
            let r = &mut self.sessions[s as usize].result;
            if warm {
                r.transactions += 1;
                let rtt = clock::to_ns(now.saturating_sub(stamp));
                let _ = r.latency.record(rtt.max(1));
            }
        }
        self.shared.transactions.add(self.answered.len() as u64);
        work
    }

    /// Sends again the requests of sessions unanswered for the timeout,
    /// at most once per 1 % of the timeout.
    #[inline(never)]
    fn check_timeouts(&mut self) {
        let now = clock::now();
        if now >= self.next_timeout_check {
            self.next_timeout_check = now + self.timeout / 100;
            for s in 0..self.sessions.len() {
                if now.saturating_sub(self.sessions[s].sent) > self.timeout {
                    self.sessions[s].result.lost += 1;
                    self.queue_request(s, now);
                }
            }
        }
    }
}

impl Task for Client {
    // The lcore sleeps on the port's rx interrupt where it has one (its
    // sleep timer bounds how late a lost request is sent again).
    fn wake_fd(&self) -> Option<BorrowedFd<'_>> {
        self.rx.interrupt_fd()
    }

    fn set_notify(&mut self, armed: bool) {
        let _ = self.rx.set_interrupt(armed);
    }

    fn has_work(&self) -> bool {
        !self.started || !self.out.is_empty() || self.rx.has_work()
    }

    fn busy_poll(&self) -> Option<BusyPoll> {
        self.rx.busy_poll()
    }

    fn busy_poll_done(&mut self, hit: bool) {
        self.rx.busy_poll_done(hit)
    }

    /// An empty poll (most calls) is the rx burst and two tests; the work
    /// is out of line.
    fn run(&mut self, quota: usize) -> usize {
        if !self.started {
            self.begin();
        }
        // At most one response per session is due: asking for more would
        // only make the port look at the slot after the last one.
        let n = self
            .rx
            .rx_burst(&mut self.inp, quota.min(self.sessions.len()).max(1));
        let mut work = 0;
        if n > 0 {
            work = self.answer(n);
        } else if !self.out.is_empty() {
            // Requests a full ring turned back.
            work = self.tx.tx_burst(&mut self.out);
        }
        // Lost requests: looked for every TIMEOUT_POLLS calls (the clock
        // costs about 20 ns, a good share of an empty poll), and only when
        // nothing waits to be sent (a request still queued here is late,
        // not lost).
        self.calls = self.calls.wrapping_add(1);
        if self.calls % TIMEOUT_POLLS == 0 && self.out.is_empty() {
            self.check_timeouts();
        }
        work
    }

    fn finish(&mut self) {
        let results = self.sessions.iter().map(|s| s.result.clone()).collect();
        self.shared.publish(results);
        self.out.clear();
    }
}

/// The server task: answers every request on its queue.
pub struct Server {
    rx: Box<dyn RxQueue>,
    tx: Box<dyn TxQueue>,
    resp: usize,
    pkts: Pkts,
    out: Pkts,
    /// Requests answered, frames dropped (not rr, or not sent); on lines
    /// of their own, as the server's lcore writes them per request.
    pub counts: Arc<CachePadded<(Counter, Counter)>>,
}

impl Server {
    /// A server sending `resp`-byte responses.
    pub fn new(rx: Box<dyn RxQueue>, tx: Box<dyn TxQueue>, resp: usize) -> Server {
        Server {
            rx,
            tx,
            resp,
            pkts: Pkts::new(),
            out: Pkts::new(),
            counts: Arc::default(),
        }
    }

    /// Answers the `n` requests in `pkts` (out of line, so that an empty
    /// poll stays short).
    #[inline(never)]
    fn answer(&mut self, n: usize) -> usize {
        let want = frame::frame_len(self.resp);
        let mut bad = 0;
        while let Some(mut m) = self.pkts.pop() {
            let is_req = m.nb_segs() == 1
                && frame::parse(m.data()).is_some_and(|p| p.kind == frame::REQUEST);
            // One segment, so its data length is the frame's.
            if !(is_req && m.set_data_len(want)) {
                bad += 1;
                continue;
            }
            frame::make_response(m.data_mut(), self.resp);
            // `out` has the room: it is empty and no larger than `pkts`.
            let _ = self.out.push(m);
        }
        if bad > 0 {
            self.counts.1.add(bad);
        }
        let sent = self.tx.tx_burst(&mut self.out);
        self.counts.0.add(sent as u64);
        self.counts.1.add(self.out.len() as u64);
        self.out.clear();
        n
    }
}

impl Task for Server {
    /// Drains the queue until empty or the quota is met (the loop of
    /// `rpmd_sched::backlog::drain_rx`, written out: answering needs the
    /// whole task).
    fn run(&mut self, quota: usize) -> usize {
        let mut done = 0;
        while done < quota {
            let want = (quota - done).min(64);
            let n = self.rx.rx_burst(&mut self.pkts, want);
            if n == 0 {
                break;
            }
            done += self.answer(n);
            if n < want {
                break;
            }
        }
        done
    }

    // The lcore sleeps on the port's rx interrupt where it has one.
    rpmd_sched::rx_queue_notify!(rx);
}

/// Percentiles reported, as in netperf's output selectors.
pub const PERCENTILES: [f64; 5] = [50.0, 90.0, 95.0, 99.0, 99.9];

/// A summary of one histogram: count, mean and the [`PERCENTILES`] in ns.
pub fn summarize(h: &Histogram<u64>) -> (u64, f64, [u64; 5]) {
    (
        h.len(),
        h.mean(),
        PERCENTILES.map(|p| h.value_at_percentile(p)),
    )
}
