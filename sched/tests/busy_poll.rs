//! Queues' busy-poll policies in the run loop (vhost_net's
//! `busyloop_timeout`): a declared budget replaces the lcore's spin; the
//! queue hears of each hit and timeout; without RX busy polling the
//! lcore's other tasks sit out the spin until their wake-ups.
mod common;

use common::wait_for;
use rpmd_pmd::function::EventFd;
use rpmd_pmd::port::BusyPoll;
use rpmd_ring::{Consumer, Producer, Single};
use rpmd_sched::{Lcore, LcoreConfig, SignalKind, SpinPolicy, Task, TaskId};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::Arc;
use std::time::Duration;

/// Counts shared with the test.
#[derive(Default)]
struct Seen {
    done: AtomicU64,
    armed: AtomicBool,
    hits: AtomicU64,
    timeouts: AtomicU64,
}

struct Queue {
    input: Consumer<u64, Single, Single>,
    wake: Arc<EventFd>,
    seen: Arc<Seen>,
    policy: Option<BusyPoll>,
}

impl Task for Queue {
    fn run(&mut self, quota: usize) -> usize {
        let mut buf = [0u64; 32];
        let n = self.input.dequeue_burst(&mut buf[..quota.min(32)]).n;
        self.seen.done.fetch_add(n as u64, Relaxed);
        n
    }
    fn wake_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.wake.as_fd())
    }
    fn set_notify(&mut self, armed: bool) {
        if !armed {
            let _ = self.wake.take();
        }
        self.seen.armed.store(armed, SeqCst);
    }
    fn has_work(&self) -> bool {
        !self.input.is_empty()
    }
    fn busy_poll(&self) -> Option<BusyPoll> {
        self.policy
    }
    fn busy_poll_done(&mut self, hit: bool) {
        let c = if hit {
            &self.seen.hits
        } else {
            &self.seen.timeouts
        };
        c.fetch_add(1, Relaxed);
    }
}

struct Feed {
    tx: Producer<u64, Single, Single>,
    wake: Arc<EventFd>,
    seen: Arc<Seen>,
}

fn queue(policy: Option<BusyPoll>) -> (Feed, Queue) {
    let (tx, rx) = rpmd_ring::new::<u64, Single, Single>(256).unwrap();
    let wake = Arc::new(EventFd::new().unwrap());
    let seen = Arc::new(Seen::default());
    let feed = Feed {
        tx,
        wake: wake.clone(),
        seen: seen.clone(),
    };
    (
        feed,
        Queue {
            input: rx,
            wake,
            seen,
            policy,
        },
    )
}

/// An lcore that would not spin at all (its own policy: sleep at once),
/// and that never gives a spin up for another thread (what these tests
/// count is the declared budget's spin, not the machine's load).
fn lcore() -> Lcore {
    let cfg = LcoreConfig {
        spin: SpinPolicy::Fixed(Duration::ZERO),
        sleep: Duration::from_secs(5),
        signal: SignalKind::Off,
        ..Default::default()
    };
    Lcore::spawn(0, cfg).unwrap()
}

fn busy(ms: u64, poll_others: bool) -> Option<BusyPoll> {
    Some(BusyPoll {
        budget: Duration::from_millis(ms),
        poll_others,
    })
}

#[test]
fn a_declared_budget_replaces_the_lcore_spin_and_hears_hits_and_timeouts() {
    let _one = common::one_at_a_time();
    let l = lcore();
    let (feed, q) = queue(busy(400, true));
    l.add(TaskId(1), q).unwrap();
    // Idle from the start: one spin of 400 ms, then a timeout and a sleep.
    wait_for("the first timeout", || {
        feed.seen.timeouts.load(Relaxed) == 1
    });
    wait_for("a sleep", || feed.seen.armed.load(SeqCst));
    let sleeps = l.stats().sleeps.get();
    // Woken by an interrupt: a wake-up, not a hit.
    feed.tx.enqueue(1).unwrap();
    feed.wake.signal().unwrap();
    wait_for("the first item", || feed.seen.done.load(Relaxed) == 1);
    // Within the spin that follows, an item with no interrupt is found.
    std::thread::sleep(Duration::from_millis(20));
    feed.tx.enqueue(2).unwrap();
    wait_for("the second item", || feed.seen.done.load(Relaxed) == 2);
    // (The hit is told after the round that found the item.)
    wait_for("a hit", || feed.seen.hits.load(Relaxed) == 1);
    assert_eq!(l.stats().sleeps.get(), sleeps, "no sleep inside the budget");
    wait_for("the second timeout", || {
        feed.seen.timeouts.load(Relaxed) == 2
    });
    l.stop().unwrap();
}

#[test]
fn a_zero_budget_sleeps_at_once() {
    let _one = common::one_at_a_time();
    let l = Lcore::spawn(0, LcoreConfig::default()).unwrap(); // its own spin: 50 us
    let (feed, q) = queue(busy(0, true));
    l.add(TaskId(1), q).unwrap();
    wait_for("a sleep", || l.stats().sleeps.get() > 0);
    // Counted from here: an idle period the lcore began before the task
    // (and its zero budget) arrived spins for the lcore's own budget.
    let spun_before = l.stats().spins.get();
    for i in 0..20 {
        wait_for("armed", || feed.seen.armed.load(SeqCst));
        feed.tx.enqueue(i).unwrap();
        feed.wake.signal().unwrap();
        wait_for("the item", || feed.seen.done.load(Relaxed) == i + 1);
    }
    let s = l.stats();
    assert!(s.sleeps.get() >= 20, "every item found the lcore asleep");
    assert_eq!(s.spins.get(), spun_before, "nothing spun");
    assert_eq!(
        feed.seen.hits.load(Relaxed) + feed.seen.timeouts.load(Relaxed),
        0
    );
    l.stop().unwrap();
}

/// rx_poll=0: while the busy-polling queue spins, the other queue is armed
/// and not polled; its interrupt ends that, as vhost_has_work() ends
/// vhost_net's TX busy loop. rx_poll=1: it is polled throughout.
#[test]
fn without_rx_polling_the_others_wait_for_their_wake_ups() {
    let _one = common::one_at_a_time();
    for poll_others in [false, true] {
        let l = lcore();
        let (a, qa) = queue(busy(2000, poll_others));
        let (b, qb) = queue(None);
        l.add(TaskId(1), qa).unwrap();
        l.add(TaskId(2), qb).unwrap();
        // Start a spin: an item on a, after a sleep.
        wait_for("a sleep", || l.stats().sleeps.get() > 0);
        a.tx.enqueue(1).unwrap();
        a.wake.signal().unwrap();
        wait_for("a's item", || a.seen.done.load(Relaxed) == 1);
        let timeouts = a.seen.timeouts.load(Relaxed);
        // Now spinning for up to 2 s. An item for b, without its interrupt.
        b.tx.enqueue(1).unwrap();
        if poll_others {
            wait_for("b polled during the spin", || {
                b.seen.done.load(Relaxed) == 1
            });
            assert!(!b.seen.armed.load(SeqCst));
        } else {
            std::thread::sleep(Duration::from_millis(100));
            assert_eq!(b.seen.done.load(Relaxed), 0, "b sat out the spin");
            assert!(b.seen.armed.load(SeqCst), "armed for its wake-up");
            b.wake.signal().unwrap();
            wait_for("b after its wake-up", || b.seen.done.load(Relaxed) == 1);
            assert_eq!(a.seen.timeouts.load(Relaxed), timeouts, "within a's spin");
        }
        // a goes on being busy-polled: an item without interrupt, once
        // the lcore is idle again, is a hit.
        std::thread::sleep(Duration::from_millis(10));
        a.tx.enqueue(2).unwrap();
        wait_for("a's second item", || a.seen.done.load(Relaxed) == 2);
        // (The hit is told after the round that found the item.)
        wait_for("a hit", || a.seen.hits.load(Relaxed) >= 1);
        l.stop().unwrap();
    }
}
