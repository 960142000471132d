//! "Is another thread waiting for this CPU?" from user space.
//!
//! Linux's busy-poll loop stops spinning as soon as another task is
//! runnable on the CPU (`single_task_running()`, a read of the run queue's
//! length). User space cannot read a run queue, so rpmd offers the signals
//! it can get, each measured (`cargo run --release -p rpmd-benches --bin
//! yield_signal_cost`; figures in benches/RESULTS.md):
//!
//! - [`SignalKind::Siblings`]: the run delay of known threads that
//!   share this CPU (other lcores pinned to it), from
//!   `/proc/thread-self/../<tid>/schedstat` (second field: nanoseconds spent
//!   runnable but waiting). If it grew since the last check, a sibling has
//!   been waiting for the CPU we are spinning on. Exact for the threads it
//!   knows; one `pread` per sibling per check.
//! - [`SignalKind::SiblingState`]: the scheduler state of those threads
//!   (`/proc/self/task/<tid>/stat`): a sibling in state `R` while we run on
//!   its CPU is waiting for it. The live form of the previous signal.
//! - [`SignalKind::Pressure`]: `/proc/pressure/cpu`'s `some total`,
//!   microseconds during which some task anywhere waited for a CPU. Sees
//!   every thread but not which CPU: on a busy machine it also fires for
//!   waits on other CPUs, and then the yield is wasted (a `sched_yield`
//!   with nobody else queued returns at once).
//! - [`SignalKind::Preempted`]: this thread's involuntary context
//!   switches (`getrusage(RUSAGE_THREAD)`). Cheapest (one syscall), but it
//!   only tells after the fact that someone took the CPU from us.
//!
//! Measured on the 2-vCPU test VMs (`yield_signal_cost`): `Preempted`
//! 276 ns per check, `Siblings` 628 ns, `SiblingState` 1351 ns, `Pressure`
//! 2696 ns. The run loop reads its signal every `signal_every` (2 µs by
//! default) of spinning, so a check delays the lcore's own next poll by at
//! most its cost. `Siblings` looked cheapest of the live ones but is not
//! live: the kernel adds a wait to the run delay only when the waiter
//! finally runs, so the sibling must already have had its turn. The
//! request/response experiment (`seeds yield`) therefore uses
//! `SiblingState`.
#![allow(unsafe_code)]

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;

/// Which signal to watch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum SignalKind {
    /// Never yield.
    #[default]
    Off,
    /// Run delay of these thread ids (siblings on this CPU). The kernel
    /// adds a wait to the run delay only when the waiting thread gets the
    /// CPU, so this tells that a sibling *has* waited, not that it waits.
    Siblings(Vec<i32>),
    /// Scheduler state of these thread ids (siblings pinned to this CPU):
    /// one in state `R` while we run is waiting for our CPU. Live, but a
    /// `/proc/<pid>/task/<tid>/stat` read costs microseconds.
    SiblingState(Vec<i32>),
    /// System-wide CPU pressure stall time.
    Pressure,
    /// This thread's involuntary context switches.
    Preempted,
}

/// A watched signal with its last reading.
#[derive(Debug)]
pub struct RunnableSignal {
    kind: SignalKind,
    files: Vec<File>,
    last: u64,
}

/// The calling thread's kernel thread id.
pub fn gettid() -> i32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::gettid() }
}

fn field(buf: &[u8], idx: usize) -> u64 {
    std::str::from_utf8(buf)
        .ok()
        .and_then(|s| s.split_whitespace().nth(idx))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn involuntary_switches() -> u64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` is a valid rusage to fill; RUSAGE_THREAD is supported on
    // Linux since 2.6.26.
    let r = unsafe { libc::getrusage(libc::RUSAGE_THREAD, ru.as_mut_ptr()) };
    if r != 0 {
        return 0;
    }
    // SAFETY: getrusage succeeded and filled the struct (zeroed before).
    unsafe { ru.assume_init() }.ru_nivcsw as u64
}

impl RunnableSignal {
    /// Opens what `kind` needs; a signal that cannot be read (no
    /// `/proc/pressure`, a sibling gone) reads as "nobody waiting".
    pub fn new(kind: SignalKind) -> Self {
        let files = match &kind {
            SignalKind::Siblings(tids) => tids
                .iter()
                .filter_map(|t| File::open(format!("/proc/self/task/{t}/schedstat")).ok())
                .collect(),
            SignalKind::SiblingState(tids) => tids
                .iter()
                .filter_map(|t| File::open(format!("/proc/self/task/{t}/stat")).ok())
                .collect(),
            SignalKind::Pressure => File::open("/proc/pressure/cpu").into_iter().collect(),
            _ => Vec::new(),
        };
        let mut s = RunnableSignal {
            kind,
            files,
            last: 0,
        };
        s.last = s.read();
        s
    }

    /// Whether this signal can ever fire.
    pub fn is_off(&self) -> bool {
        self.kind == SignalKind::Off
    }

    fn read(&mut self) -> u64 {
        let mut buf = [0u8; 256];
        match &self.kind {
            SignalKind::Off => 0,
            SignalKind::Preempted => involuntary_switches(),
            SignalKind::Siblings(_) => self
                .files
                .iter()
                .map(|f| {
                    let n = f.read_at(&mut buf, 0).unwrap_or(0);
                    field(&buf[..n], 1)
                })
                .sum(),
            SignalKind::SiblingState(_) => self
                .files
                .iter()
                .filter(|f| {
                    let n = f.read_at(&mut buf, 0).unwrap_or(0);
                    // "pid (comm) S ...": the state follows the last ')'.
                    let b = &buf[..n];
                    b.iter()
                        .rposition(|&c| c == b')')
                        .and_then(|i| b.get(i + 2))
                        .is_some_and(|&c| c == b'R')
                })
                .count() as u64,
            SignalKind::Pressure => {
                let Some(f) = self.files.first_mut() else {
                    return 0;
                };
                let mut s = String::new();
                // /proc/pressure files must be reread from the start.
                let _ = std::io::Seek::rewind(f);
                let _ = f.read_to_string(&mut s);
                s.lines()
                    .find(|l| l.starts_with("some"))
                    .and_then(|l| l.rsplit_once("total="))
                    .and_then(|(_, v)| v.trim().parse().ok())
                    .unwrap_or(0)
            }
        }
    }

    /// Whether another thread waited for a CPU since the last check (for
    /// `Preempted`: whether we were preempted since then).
    #[inline]
    pub fn fired(&mut self) -> bool {
        if self.kind == SignalKind::Off {
            return false;
        }
        let now = self.read();
        if let SignalKind::SiblingState(_) = self.kind {
            // A level, not a counter: some sibling is runnable now.
            return now > 0;
        }
        let fired = now > self.last;
        self.last = now;
        fired
    }

    /// Forgets what happened so far (call when spinning starts).
    pub fn reset(&mut self) {
        self.last = self.read();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
    use std::sync::Arc;

    #[test]
    fn a_sibling_waiting_for_our_cpu_is_seen() {
        // Two threads pinned to one CPU: while one spins, the other waits.
        let cpu = core_affinity::get_core_ids().and_then(|c| c.first().copied());
        let Some(cpu) = cpu else { return };
        let tid = Arc::new(AtomicI32::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (t2, s2) = (tid.clone(), stop.clone());
        let h = std::thread::spawn(move || {
            core_affinity::set_for_current(cpu);
            t2.store(gettid(), Ordering::SeqCst);
            while !s2.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        while tid.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        core_affinity::set_for_current(cpu);
        let mut sig = RunnableSignal::new(SignalKind::Siblings(vec![tid.load(Ordering::SeqCst)]));
        let mut pre = RunnableSignal::new(SignalKind::Preempted);
        let mut state =
            RunnableSignal::new(SignalKind::SiblingState(vec![tid.load(Ordering::SeqCst)]));
        let t0 = std::time::Instant::now();
        let mut seen = false;
        while t0.elapsed() < std::time::Duration::from_millis(200) && !seen {
            seen = sig.fired();
        }
        // The spinning sibling is runnable, waiting for the CPU we hold.
        let mut runnable = false;
        let t1 = std::time::Instant::now();
        while t1.elapsed() < std::time::Duration::from_millis(200) && !runnable {
            runnable = state.fired();
        }
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
        assert!(runnable, "the sibling never showed as runnable");
        assert!(
            seen,
            "the sibling's run delay never grew while we held its CPU"
        );
        // We shared a CPU with a spinner for a while: we were preempted.
        assert!(pre.fired());
        assert!(!RunnableSignal::new(SignalKind::Off).fired());
    }
}
