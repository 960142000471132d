//! The notification and busy-poll methods of a [`Task`](crate::Task)
//! that polls several rx queues itself (l2fwd's and vswitch's lcores):
//! every queue's interrupt wakes the lcore, and the queues' busy-poll
//! policies combine into the task's.
//!
//! ```
//! use rpmd_pmd::port::{BusyPoll, RxQueue};
//! use rpmd_sched::{multi, Task};
//! use std::os::fd::BorrowedFd;
//! struct Poller(Vec<Box<dyn RxQueue>>);
//! impl Task for Poller {
//!     fn run(&mut self, _quota: usize) -> usize {
//!         0 // (receive from each queue)
//!     }
//!     fn wake_fds(&self, each: &mut dyn FnMut(BorrowedFd<'_>)) {
//!         multi::wake_fds(self.0.iter(), each)
//!     }
//!     fn set_notify(&mut self, armed: bool) {
//!         multi::set_notify(self.0.iter_mut(), armed)
//!     }
//!     fn has_work(&self) -> bool {
//!         multi::has_work(self.0.iter())
//!     }
//!     fn busy_poll(&self) -> Option<BusyPoll> {
//!         multi::busy_poll(self.0.iter())
//!     }
//!     fn busy_poll_done(&mut self, hit: bool) {
//!         multi::busy_poll_done(self.0.iter_mut(), hit)
//!     }
//! }
//! ```
use rpmd_pmd::port::{BusyPoll, RxQueue};
use std::os::fd::BorrowedFd;

/// Hands each queue's interrupt eventfd to `each` ([`Task::wake_fds`](crate::Task::wake_fds)).
pub fn wake_fds<'a>(
    queues: impl Iterator<Item = &'a Box<dyn RxQueue>>,
    each: &mut dyn FnMut(BorrowedFd<'_>),
) {
    for q in queues {
        if let Some(fd) = q.interrupt_fd() {
            each(fd);
        }
    }
}

/// Arms or disarms every queue's interrupt.
pub fn set_notify<'a>(queues: impl Iterator<Item = &'a mut Box<dyn RxQueue>>, armed: bool) {
    for q in queues {
        let _ = q.set_interrupt(armed);
    }
}

/// Whether any queue has packets waiting.
pub fn has_work<'a>(mut queues: impl Iterator<Item = &'a Box<dyn RxQueue>>) -> bool {
    queues.any(|q| q.has_work())
}

/// The task's policy: the longest budget its queues declare (`None` when
/// none does). All its queues are polled while it spins, since the task
/// polls them together; the lcore's other tasks sit the spin out only
/// when every queue that declares a budget says so.
pub fn busy_poll<'a>(queues: impl Iterator<Item = &'a Box<dyn RxQueue>>) -> Option<BusyPoll> {
    let mut policy: Option<BusyPoll> = None;
    for b in queues.filter_map(|q| q.busy_poll()) {
        let p = policy.get_or_insert(BusyPoll {
            budget: b.budget,
            poll_others: false,
        });
        p.budget = p.budget.max(b.budget);
        p.poll_others |= b.poll_others && !b.budget.is_zero();
    }
    policy
}

/// Tells every queue with a policy how the task's busy poll ended.
pub fn busy_poll_done<'a>(queues: impl Iterator<Item = &'a mut Box<dyn RxQueue>>, hit: bool) {
    for q in queues {
        if q.busy_poll().is_some() {
            q.busy_poll_done(hit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rpmd_pmd::port::Pkts;
    use std::time::Duration;

    struct Q(Option<BusyPoll>);
    impl RxQueue for Q {
        fn rx_burst(&mut self, _out: &mut Pkts, _max: usize) -> usize {
            0
        }
        fn busy_poll(&self) -> Option<BusyPoll> {
            self.0
        }
    }

    fn bp(us: u64, poll_others: bool) -> Option<BusyPoll> {
        Some(BusyPoll {
            budget: Duration::from_micros(us),
            poll_others,
        })
    }

    fn queues(p: &[Option<BusyPoll>]) -> Vec<Box<dyn RxQueue>> {
        p.iter()
            .map(|&b| Box::new(Q(b)) as Box<dyn RxQueue>)
            .collect()
    }

    #[test]
    fn policies_combine_into_the_longest_budget() {
        assert_eq!(busy_poll(queues(&[None, None]).iter()), None);
        // The longest budget; others polled if any spinning queue wants it.
        let q = queues(&[bp(20, false), None, bp(50, true)]);
        assert_eq!(busy_poll(q.iter()), bp(50, true));
        // Every spinning queue declines RX polling: the others sit out.
        let q = queues(&[bp(20, false), bp(50, false)]);
        assert_eq!(busy_poll(q.iter()), bp(50, false));
        // A zero budget's rx_poll does not count.
        let q = queues(&[bp(0, true), bp(30, false)]);
        assert_eq!(busy_poll(q.iter()), bp(30, false));
    }
}
