//! Draining an input queue: until empty or quota (Linux's
//! `process_backlog` after the 2023 change), or a snapshot of its length
//! (before it).
//!
//! The snapshot way reads how many items wait, processes that many and
//! returns, even if more arrived meanwhile; those wait for the next round,
//! or, if the task went to sleep, for a wake-up. Draining until empty
//! re-checks the queue after every batch and stops only when it is empty or
//! the quota is used, so a busy queue costs fewer rounds and wake-ups, and
//! the quota still bounds the round so other tasks get their turn.
use rpmd_pmd::port::{Pkts, RxQueue};
use rpmd_ring::{Burst, Consumer, SyncMode};

/// The drain on a port's rx queue, as every app's task does it: bursts
/// of up to `burst` into `pkts`, each handed to `f`, until the queue is
/// empty or `quota` packets were taken; returns how many. A burst shorter
/// than asked ends it (the queue ran dry within it), which spares the
/// empty poll that would only confirm so. Whatever `f` leaves in `pkts`
/// is freed.
///
/// ```
/// # use rpmd_pmd::{Mempool, MempoolConfig, PortConfig, Registry, Pkts};
/// # let pool = Mempool::new(&MempoolConfig::new("doc-drain", 256)).unwrap();
/// # let mut p = Registry::new().open("null").unwrap();
/// # p.configure(&PortConfig::with_pool(&pool)).unwrap();
/// # let mut q = p.start().unwrap();
/// # let mut rx = q.take_rx(0).unwrap();
/// let mut pkts = Pkts::new();
/// let mut seen = 0;
/// // null's rx never runs dry: the quota ends the drain.
/// let n = rpmd_sched::backlog::drain_rx(&mut *rx, &mut pkts, 32, 64, |b| seen += b.len());
/// assert_eq!((n, seen), (64, 64));
/// ```
#[inline]
pub fn drain_rx(
    rx: &mut dyn RxQueue,
    pkts: &mut Pkts,
    burst: usize,
    quota: usize,
    mut f: impl FnMut(&mut Pkts),
) -> usize {
    let mut taken = 0;
    while taken < quota {
        let want = burst.min(quota - taken).max(1);
        let n = rx.rx_burst(pkts, want);
        if n == 0 {
            break;
        }
        taken += n;
        f(pkts);
        pkts.clear();
        if n < want {
            break;
        }
    }
    taken
}

/// Dequeues batches of up to `N` from `input` and hands each to `f` until
/// the queue is empty or `quota` items were handled; returns the count.
#[inline]
pub fn drain_until_empty<T, P: SyncMode, C: SyncMode, const N: usize>(
    input: &Consumer<T, P, C>,
    quota: usize,
    f: impl FnMut(&mut Burst<T, N>),
) -> usize {
    drain_up_to(input, quota, f)
}

/// Reads the queue's length once and handles at most that many (and at
/// most `quota`), in batches of up to `N`; returns the count.
#[inline]
pub fn drain_snapshot<T, P: SyncMode, C: SyncMode, const N: usize>(
    input: &Consumer<T, P, C>,
    quota: usize,
    f: impl FnMut(&mut Burst<T, N>),
) -> usize {
    drain_up_to(input, input.len().min(quota), f)
}

/// Handles batches until `limit` items are done or the queue is empty.
#[inline(always)]
fn drain_up_to<T, P: SyncMode, C: SyncMode, const N: usize>(
    input: &Consumer<T, P, C>,
    limit: usize,
    mut f: impl FnMut(&mut Burst<T, N>),
) -> usize {
    let mut done = 0;
    let mut b: Burst<T, N> = Burst::new();
    while done < limit {
        let n = input.dequeue_burst_into(&mut b, (limit - done).min(N)).n;
        if n == 0 {
            break;
        }
        done += n;
        f(&mut b);
        b.clear();
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use rpmd_ring::Single;

    #[test]
    fn until_empty_sees_arrivals_and_snapshot_does_not() {
        let (p, c) = rpmd_ring::new::<u32, Single, Single>(256).unwrap();
        assert!(p.enqueue_bulk(&[1; 10]).n > 0);
        // Items arriving while the first batch is processed.
        let mut fed = false;
        let n = drain_until_empty::<_, _, _, 8>(&c, 64, |_| {
            if !fed {
                assert!(p.enqueue_bulk(&[2; 20]).n > 0);
                fed = true;
            }
        });
        assert_eq!(n, 30);
        assert!(p.enqueue_bulk(&[1; 10]).n > 0);
        let mut fed = false;
        let n = drain_snapshot::<_, _, _, 8>(&c, 64, |_| {
            if !fed {
                assert!(p.enqueue_bulk(&[2; 20]).n > 0);
                fed = true;
            }
        });
        assert_eq!(n, 10);
        assert_eq!(c.len(), 20);
        // The quota bounds both.
        assert!(p.enqueue_bulk(&[3; 100]).n > 0);
        assert_eq!(drain_until_empty::<_, _, _, 32>(&c, 64, |_| {}), 64);
        assert_eq!(drain_snapshot::<_, _, _, 32>(&c, 64, |_| {}), 56);
    }
}
