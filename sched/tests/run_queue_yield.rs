//! `SignalKind::RunQueue` answers "is anyone queued on this CPU?" by
//! yielding. Whether a yield switched depends on what else runs on the
//! CPU, so this test sits alone in its own binary: in the crate's unit
//! tests, the other tests' threads (spinners, egress lcores) share the CPU
//! and a yield rightly switches to them.

use rpmd_sched::signal::{gettid, RunnableSignal};
use rpmd_sched::SignalKind;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Yields over 1000 checks with nobody else queued on purpose. The machine
/// may still run something on this CPU for a while (a CI runner's own
/// threads), so the quietest of a few rounds counts.
fn fewest_switches_alone(rq: &mut RunnableSignal) -> usize {
    (0..5)
        .map(|_| {
            let switched = (0..1000).filter(|_| rq.yield_if_wanted()).count();
            std::thread::sleep(Duration::from_millis(20));
            switched
        })
        .min()
        .unwrap_or(0)
}

#[test]
fn a_run_queue_yield_gives_the_cpu_to_a_sibling_and_returns_alone() {
    let cpu = core_affinity::get_core_ids().and_then(|c| c.first().copied());
    let Some(cpu) = cpu else { return };
    core_affinity::set_for_current(cpu);
    let mut rq = RunnableSignal::new(SignalKind::RunQueue);
    assert!(!rq.fired(), "RunQueue is not read without yielding");
    let alone = fewest_switches_alone(&mut rq);
    // A spinner pinned to our CPU waits for it: a yield hands it over.
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicI32::new(0));
    let (s2, t2) = (stop.clone(), started.clone());
    let spinner = std::thread::spawn(move || {
        core_affinity::set_for_current(cpu);
        t2.store(gettid(), Ordering::SeqCst);
        while !s2.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
    });
    let t0 = Instant::now();
    let mut gave = false;
    while !gave && t0.elapsed() < Duration::from_millis(500) {
        gave = rq.yield_if_wanted() && started.load(Ordering::SeqCst) != 0;
    }
    stop.store(true, Ordering::Relaxed);
    spinner.join().unwrap();
    assert!(gave, "no yield gave the CPU to the waiting sibling");
    assert!(
        alone < 500,
        "{alone} of 1000 yields switched with nobody queued (the quietest of 5 rounds)"
    );
}
