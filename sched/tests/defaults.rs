//! The run loop's ideas as every app gets them by default
//! (`LcoreConfig::default()`, `--poll adaptive`): it yields to a thread
//! that wants its CPU, drains a queue to the quota and to empty, sleeps
//! when idle and wakes on work, and adapts its spin budget. Each test
//! checks behaviour (counts, or one mode against another in the same
//! test), never a fixed time.
mod common;

use common::wait_for;
use rpmd_pmd::port::Pkts;
use rpmd_pmd::{clock, Mempool, MempoolConfig, PortConfig, Registry};
use rpmd_sched::policy::Budget;
use rpmd_sched::{
    backlog, Forward, Lcore, LcoreConfig, PollMode, SignalKind, SpinPolicy, Task, TaskId,
};
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn pin(cpu: usize) {
    let id = core_affinity::get_core_ids()
        .and_then(|ids| ids.into_iter().find(|c| c.id == cpu))
        .expect("the CPU exists");
    assert!(core_affinity::set_for_current(id), "pin to CPU {cpu}");
}

/// A trickle of work: one unit every `every`, so the loop's idle gaps
/// stay under its spin budget and it keeps spinning.
struct Trickle {
    every: u64,
    next: u64,
}

impl Task for Trickle {
    fn run(&mut self, _quota: usize) -> usize {
        let now = clock::now();
        if now < self.next {
            return 0;
        }
        self.next = now + self.every;
        1
    }
}

/// Round trips a thread pinned to CPU 0 completes with a partner on CPU
/// 1 in `secs`, while an lcore configured as `cfg` spins on CPU 0.
fn sibling_round_trips(cfg: LcoreConfig, secs: f64) -> (u64, u64) {
    clock::init();
    let lcore = Lcore::spawn(0, cfg).unwrap();
    lcore
        .add(
            TaskId(1),
            Trickle {
                every: clock::ticks(Duration::from_micros(20)),
                next: 0,
            },
        )
        .unwrap();
    wait_for("the trickle", || lcore.stats().work.get() > 100);
    let (a, b) = UnixDatagram::pair().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    // The sibling: answers each ping at once, then blocks for the next
    // (200 ms at most, so a partner that died cannot hang the test).
    b.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let sibling = std::thread::spawn(move || {
        pin(0);
        let mut buf = [0u8; 1];
        while !s2.load(Relaxed) {
            if b.recv(&mut buf).is_ok() {
                let _ = b.send(&buf);
            }
        }
    });
    // The partner on CPU 1, in a thread of its own (a pinned test thread
    // would pass its one-CPU mask to the lcores of the next run).
    // It polls its socket rather than blocking, so that its CPU never
    // idles: a round trip is then the sibling's wait for CPU 0 and not
    // also the partner's own wake-up from idle.
    let partner = std::thread::spawn(move || {
        pin(1);
        a.set_nonblocking(true).unwrap();
        let t = Instant::now();
        let mut trips = 0u64;
        let mut buf = [0u8; 1];
        while t.elapsed().as_secs_f64() < secs {
            a.send(&[1]).unwrap();
            let asked = Instant::now();
            while asked.elapsed() < Duration::from_millis(200) {
                if a.recv(&mut buf).is_ok() {
                    trips += 1;
                    break;
                }
                std::hint::spin_loop();
            }
        }
        stop.store(true, Relaxed);
        let _ = a.send(&[0]);
        trips
    });
    let trips = partner.join().unwrap();
    sibling.join().unwrap();
    let yields = lcore.stats().yields.get();
    lcore.stop().unwrap();
    (trips, yields)
}

#[test]
fn the_default_yields_its_spin_to_a_sibling_that_needs_the_cpu() {
    let _one = common::one_at_a_time();
    if cpus() < 2 {
        eprintln!("needs two CPUs: the sibling's partner runs on the other");
        return;
    }
    let off = LcoreConfig {
        signal: SignalKind::Off,
        ..LcoreConfig::default()
    };
    // Interleaved, three times each: the better of each mode.
    let mut best = [0u64; 2];
    let mut yields = 0;
    for _ in 0..3 {
        best[0] = best[0].max(sibling_round_trips(off.clone(), 0.5).0);
        let (t, y) = sibling_round_trips(LcoreConfig::default(), 0.5);
        best[1] = best[1].max(t);
        yields += y;
    }
    eprintln!(
        "sibling round trips: default {}, yield off {} ({yields} yields)",
        best[1], best[0]
    );
    assert!(yields > 0, "the default lcore never yielded");
    // Measured: about twice on the first hosts; 1.45-1.52x on an Intel
    // guest with Linux 6.18, whose scheduler hands a woken sibling the
    // CPU from a spinning lcore quickly even with the yield off (CI read
    // 1.447 against the 1.5x this asked once). The partner's own wake-up
    // on an idle CPU bounds the rest. 1.25x keeps a margin on both.
    assert!(
        4 * best[1] >= 5 * best[0],
        "round trips of a sibling on the spinning lcore's CPU: {} with the default, {} with the yield off",
        best[1],
        best[0]
    );
}

/// Both ends of `ring:NAME`, started: the ports (kept alive by the
/// caller) and their queues.
type RingPair = (
    Vec<Box<dyn rpmd_pmd::Port>>,
    rpmd_pmd::Queues,
    rpmd_pmd::Queues,
);

fn ring_pair(name: &str, pool: &Mempool) -> RingPair {
    let reg = Registry::new();
    let (mut a, mut b) = (
        reg.open(&format!("ring:{name},size=1024")).unwrap(),
        reg.open(&format!("ring:{name}")).unwrap(),
    );
    a.configure(&PortConfig::with_pool(pool)).unwrap();
    b.configure(&PortConfig::with_pool(pool)).unwrap();
    let (qa, qb) = (a.start().unwrap(), b.start().unwrap());
    (vec![a, b], qa, qb)
}

fn send(q: &mut rpmd_pmd::Queues, pool: &Mempool, n: usize) {
    let mut pkts = Pkts::new();
    let mut left = n;
    while left > 0 {
        let k = left.min(32);
        pool.get_bulk(&mut pkts, k).unwrap();
        for m in pkts.iter_mut() {
            m.append(60).unwrap().fill(0xab);
        }
        assert_eq!(q.tx_burst(0, &mut pkts), k);
        left -= k;
    }
}

#[test]
fn a_queue_is_drained_to_the_quota_in_one_round_and_to_empty_across_rounds() {
    let pool = Mempool::new(&MempoolConfig::new("drain-test", 2048)).unwrap();
    let (_ports, mut far, mut near) = ring_pair("drain-test", &pool);
    // Three quotas and a bit waiting; bursts of 32 under a quota of 64.
    send(&mut far, &pool, 200);
    let mut fwd = Forward::new(near.take_rx(0).unwrap(), near.take_tx(0).unwrap(), 32);
    let rounds: Vec<usize> = (0..5).map(|_| fwd.run(64)).collect();
    assert_eq!(rounds, [64, 64, 64, 8, 0]);
    // The same with the helper every app's task uses.
    send(&mut far, &pool, 100);
    let (mut rx, mut pkts, mut seen) = (far.take_rx(0).unwrap(), Pkts::new(), 0);
    // What Forward sent back comes first: 200 frames, then the 100 more
    // on their way through the forwarder.
    let mut rounds = Vec::new();
    loop {
        let n = backlog::drain_rx(&mut *rx, &mut pkts, 32, 64, |b| seen += b.len());
        rounds.push(n);
        if n == 0 {
            break;
        }
        let _ = fwd.run(64);
    }
    assert_eq!(rounds[..3], [64, 64, 64], "{rounds:?}");
    assert_eq!(seen, 300, "every frame once: {rounds:?}");
}

#[test]
fn an_idle_lcore_sleeps_and_a_frame_wakes_it() {
    let _one = common::one_at_a_time();
    let pool = Mempool::new(&MempoolConfig::new("idle-test", 1024)).unwrap();
    let (_ports, mut far, mut near) = ring_pair("idle-test", &pool);
    let lcore = Lcore::spawn(0, LcoreConfig::default()).unwrap();
    let tid = lcore.tid();
    let fwd = Forward::new(near.take_rx(0).unwrap(), near.take_tx(0).unwrap(), 32);
    lcore.add(TaskId(1), fwd).unwrap();
    // Let it settle, then measure two seconds of idleness.
    std::thread::sleep(Duration::from_millis(100));
    let cpu0 = rpmd_sched::signal::thread_cpu_ns(tid).expect("schedstat");
    let sleeps0 = lcore.stats().sleeps.get();
    std::thread::sleep(Duration::from_secs(2));
    let cpu = rpmd_sched::signal::thread_cpu_ns(tid).unwrap() - cpu0;
    // ring: has no rx interrupt, so the idle lcore wakes on its 100 us
    // timer: 5-20 % of a CPU on these VMs (each wake-up is slow in a
    // guest; CI once read 401 ms against a bound of 400), where spinning
    // would take all of it: half of it is the bound.
    assert!(
        cpu < 1_000_000_000,
        "an idle lcore used {} ms of CPU in 2 s",
        cpu / 1_000_000
    );
    assert!(lcore.stats().sleeps.get() > sleeps0, "it slept");
    // A frame wakes it and is forwarded.
    let work0 = lcore.stats().work.get();
    send(&mut far, &pool, 1);
    wait_for("the frame", || lcore.stats().work.get() > work0);
    lcore.stop().unwrap();
}

#[test]
fn an_lcore_on_an_interrupt_sleeps_for_good_and_wakes_on_it() {
    let _one = common::one_at_a_time();
    // A task with an eventfd: the idle lcore sleeps on it (no timer
    // wake-ups to speak of) and one signal wakes it.
    struct OnFd {
        fd: Arc<rpmd_pmd::function::EventFd>,
        done: Arc<AtomicU64>,
    }
    impl Task for OnFd {
        fn run(&mut self, _quota: usize) -> usize {
            let n = self.fd.take().unwrap_or(0) as usize;
            self.done.fetch_add(n as u64, Relaxed);
            n
        }
        fn wake_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
            use std::os::fd::AsFd;
            Some(self.fd.as_fd())
        }
    }
    let fd = Arc::new(rpmd_pmd::function::EventFd::new().unwrap());
    let done = Arc::new(AtomicU64::new(0));
    // The default: every task has an interrupt, so the timer behind it
    // is a safety net (10 ms), not a 100 us poll.
    let lcore = Lcore::spawn(0, LcoreConfig::default()).unwrap();
    let tid = lcore.tid();
    lcore
        .add(
            TaskId(1),
            OnFd {
                fd: fd.clone(),
                done: done.clone(),
            },
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let cpu0 = rpmd_sched::signal::thread_cpu_ns(tid).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let cpu = rpmd_sched::signal::thread_cpu_ns(tid).unwrap() - cpu0;
    assert!(
        cpu < 20_000_000,
        "{} ms of CPU in 2 s asleep",
        cpu / 1_000_000
    );
    fd.signal().unwrap();
    wait_for("the wake-up", || done.load(Relaxed) > 0);
    assert!(lcore.stats().wakeups.get() > 0);
    lcore.stop().unwrap();
}

#[test]
fn the_adaptive_budget_grows_with_dense_traffic_and_shrinks_when_sparse() {
    let _one = common::one_at_a_time();
    let mut b = Budget::new(LcoreConfig::default().spin);
    for _ in 0..50 {
        b.observe_gap(Duration::from_micros(60));
    }
    let dense = b.current();
    assert!(dense >= Duration::from_micros(100), "{dense:?}");
    for _ in 0..50 {
        b.observe_gap(Duration::from_millis(3));
    }
    let sparse = b.current();
    assert!(sparse < Duration::from_micros(10), "{sparse:?}");
    // And on a running lcore: dense traffic keeps it spinning (no
    // sleeps), sparse traffic lets it sleep between units.
    let run = |every_us: u64| {
        let lcore = Lcore::spawn(0, LcoreConfig::default()).unwrap();
        let every = clock::ticks(Duration::from_micros(every_us));
        lcore.add(TaskId(1), Trickle { every, next: 0 }).unwrap();
        wait_for("warm-up", || lcore.stats().work.get() >= 40);
        let (s0, w0) = (lcore.stats().sleeps.get(), lcore.stats().work.get());
        wait_for("more work", || lcore.stats().work.get() >= w0 + 100);
        let sleeps = lcore.stats().sleeps.get() - s0;
        lcore.stop().unwrap();
        sleeps
    };
    clock::init();
    let (dense, sparse) = (run(20), run(2_000));
    assert!(
        sparse >= 50 && dense * 10 < sparse,
        "sleeps over 100 units: {dense} at one per 20 us, {sparse} at one per 2 ms"
    );
}

#[test]
fn presets_are_what_their_names_say() {
    let _one = common::one_at_a_time();
    let spin = LcoreConfig::preset(PollMode::Spin);
    assert_eq!(
        (spin.spin, &spin.signal),
        (SpinPolicy::Always, &SignalKind::Off)
    );
    let irq = LcoreConfig::preset(PollMode::Interrupt);
    assert_eq!(irq.spin, SpinPolicy::Fixed(Duration::ZERO));
    assert_eq!(LcoreConfig::default().mode(), Some(PollMode::Adaptive));
    assert!(LcoreConfig::default()
        .describe()
        .starts_with("poll adaptive: "));
    let custom = LcoreConfig {
        quota: 8,
        ..LcoreConfig::default()
    };
    assert!(custom.describe().starts_with("poll custom: "));
    assert_eq!("spin".parse::<PollMode>(), Ok(PollMode::Spin));
    assert!("fast"
        .parse::<PollMode>()
        .unwrap_err()
        .contains("spin, interrupt or adaptive"));
    // Spin never sleeps, even when idle for a while.
    let lcore = Lcore::spawn(0, spin).unwrap();
    lcore
        .add(
            TaskId(1),
            Trickle {
                every: u64::MAX,
                next: u64::MAX,
            },
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(lcore.stats().sleeps.get(), 0);
    lcore.stop().unwrap();
}
