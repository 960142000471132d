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
//!   `/proc/<tid>/task/<tid>/schedstat` (second field: nanoseconds spent
//!   runnable but waiting). If it grew since the last check, a sibling has
//!   been waiting for the CPU we are spinning on. Exact for the threads it
//!   knows; one `pread` per sibling per check.
//! - [`SignalKind::SiblingState`]: the scheduler state of those threads
//!   (`/proc/<tid>/task/<tid>/stat`, so a sibling may live in another
//!   process, as netperf servers do): a sibling in state `R` while we run
//!   on its CPU is waiting for it. The live form of the previous signal;
//!   one read per sibling per check.
//! - [`SignalKind::Overcommitted`]: the kernel's count of runnable tasks
//!   on all CPUs (`/proc/loadavg`'s fourth field) above the number of
//!   online CPUs: somebody somewhere waits for a CPU. Live, one read
//!   whatever the number of siblings, needs no thread ids (any process);
//!   like `Pressure` it cannot tell which CPU the waiter wants.
//! - [`SignalKind::RunQueue`]: no reading at all; every check is a
//!   `sched_yield`, which switches only when another task is queued on this
//!   CPU's run queue. The kernel's own `single_task_running()` answered by
//!   trying: exact for this CPU, any process, no thread ids, and the
//!   switch happens in the same system call.
//! - [`SignalKind::Pressure`]: `/proc/pressure/cpu`'s `some total`,
//!   microseconds during which some task anywhere waited for a CPU. Sees
//!   every thread but not which CPU: on a busy machine it also fires for
//!   waits on other CPUs, and then the yield is wasted (a `sched_yield`
//!   with nobody else queued returns at once).
//! - [`SignalKind::Preempted`]: this thread's involuntary context
//!   switches (`getrusage(RUSAGE_THREAD)`). Cheapest (one syscall), but it
//!   only tells after the fact that someone took the CPU from us.
//!
//! What each costs per check, and how soon a sibling process woken on
//! the spinner's CPU gets it when the spinner yields on it, is measured
//! by `yield_signal_cost` (figures in benches/RESULTS.md, "Run loop:
//! yield, spin budget"). The run loop reads its signal every
//! `signal_every` (2 µs by default) of spinning, so a check delays the
//! lcore's own next poll by at most its cost. `Siblings`, `Preempted`,
//! `Pressure` and `Overcommitted` are not live for a sibling on this CPU
//! (the first two tell after the sibling ran; the last two are
//! machine-wide and miss a waiter on an otherwise idle machine), and a
//! woken sibling waits about as long under them as with no signal.
//! `SiblingState` is live but reads a `/proc` file per sibling, so its
//! cost grows with their number; `RunQueue` is live, cheapest, and costs
//! the same whatever runs beside it: `yield_proc` (responders in separate
//! processes) uses it, `seeds yield` compares it with `SiblingState`.
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
    /// Scheduler state of these thread ids (siblings pinned to this CPU,
    /// in this or any other process): one in state `R` while we run is
    /// waiting for our CPU. Live, but a `/proc/<tid>/task/<tid>/stat`
    /// read costs microseconds, per sibling.
    SiblingState(Vec<i32>),
    /// More runnable tasks on the machine than online CPUs
    /// (`/proc/loadavg`): live and one read, but machine-wide.
    Overcommitted,
    /// Yield at every check and let the kernel's run queue decide (a
    /// yield that gives the CPU away counts as fired).
    RunQueue,
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
    /// Online CPUs (for `Overcommitted`).
    cpus: u64,
}

/// A `sched_yield` that took longer than this gave the CPU to another
/// task (one that finds the run queue empty takes well under it).
pub const SWITCHED: std::time::Duration = std::time::Duration::from_micros(5);

/// The calling thread's kernel thread id.
pub fn gettid() -> i32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// The CPU time thread `tid` of this process has used, in nanoseconds
/// (the first field of its `schedstat`); `None` for an unknown thread or
/// a kernel without schedstats.
pub fn thread_cpu_ns(tid: i32) -> Option<u64> {
    if tid <= 0 {
        return None;
    }
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    s.split_whitespace().next()?.parse().ok()
}

fn field(buf: &[u8], idx: usize) -> u64 {
    std::str::from_utf8(buf)
        .ok()
        .and_then(|s| s.split_whitespace().nth(idx))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn online_cpus() -> u64 {
    // SAFETY: sysconf takes a constant and has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    n.max(1) as u64
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
                .filter_map(|t| File::open(format!("/proc/{t}/task/{t}/schedstat")).ok())
                .collect(),
            SignalKind::SiblingState(tids) => tids
                .iter()
                .filter_map(|t| File::open(format!("/proc/{t}/task/{t}/stat")).ok())
                .collect(),
            SignalKind::Pressure => File::open("/proc/pressure/cpu").into_iter().collect(),
            SignalKind::Overcommitted => File::open("/proc/loadavg").into_iter().collect(),
            _ => Vec::new(),
        };
        let mut s = RunnableSignal {
            kind,
            files,
            last: 0,
            cpus: online_cpus(),
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
        let cpus = self.cpus;
        match &self.kind {
            SignalKind::Off | SignalKind::RunQueue => 0,
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
            SignalKind::Overcommitted => self.files.first().map_or(0, |f| {
                // "0.05 0.05 0.02 R/T last-pid": R counts this thread too.
                let n = f.read_at(&mut buf, 0).unwrap_or(0);
                let running = std::str::from_utf8(&buf[..n])
                    .ok()
                    .and_then(|s| s.split_whitespace().nth(3))
                    .and_then(|f| f.split_once('/'))
                    .and_then(|(r, _)| r.parse::<u64>().ok())
                    .unwrap_or(0);
                running.saturating_sub(cpus)
            }),
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
    /// `Preempted`: whether we were preempted since then; `RunQueue`
    /// cannot be read without yielding and never fires here: use
    /// [`RunnableSignal::yield_if_wanted`]).
    #[inline]
    pub fn fired(&mut self) -> bool {
        if self.kind == SignalKind::Off {
            return false;
        }
        let now = self.read();
        if let SignalKind::SiblingState(_) | SignalKind::Overcommitted = self.kind {
            // A level, not a counter: some sibling is runnable now.
            return now > 0;
        }
        let fired = now > self.last;
        self.last = now;
        fired
    }

    /// Checks, and gives the CPU away if another thread wants it: for
    /// [`SignalKind::RunQueue`] the `sched_yield` is the check; otherwise
    /// a `sched_yield` follows when the signal fired. Returns whether it
    /// yielded (for `RunQueue`: whether the yield took longer than
    /// [`SWITCHED`], i.e. another task ran; a yield that finds nobody
    /// queued returns in about a microsecond).
    #[inline]
    pub fn yield_if_wanted(&mut self) -> bool {
        match self.kind {
            SignalKind::Off => false,
            SignalKind::RunQueue => {
                let t = std::time::Instant::now();
                std::thread::yield_now();
                t.elapsed() > SWITCHED
            }
            _ => {
                let fired = self.fired();
                if fired {
                    std::thread::yield_now();
                }
                fired
            }
        }
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
    use std::time::{Duration, Instant};

    /// A thread spinning until `stop`, pinned to `cpu` when given; its
    /// thread id is in the returned cell once it runs.
    fn spinner(
        cpu: Option<core_affinity::CoreId>,
        stop: &Arc<AtomicBool>,
    ) -> (std::thread::JoinHandle<()>, Arc<AtomicI32>) {
        let tid = Arc::new(AtomicI32::new(0));
        let (t2, s2) = (tid.clone(), stop.clone());
        let h = std::thread::spawn(move || {
            if let Some(cpu) = cpu {
                core_affinity::set_for_current(cpu);
            }
            t2.store(gettid(), Ordering::SeqCst);
            while !s2.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        (h, tid)
    }

    /// Whether `f` turns true within `ms` milliseconds of asking.
    fn within(ms: u64, mut f: impl FnMut() -> bool) -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(ms) {
            if f() {
                return true;
            }
        }
        false
    }

    #[test]
    fn a_sibling_waiting_for_our_cpu_is_seen() {
        // Two threads pinned to one CPU: while one spins, the other waits.
        let cpu = core_affinity::get_core_ids().and_then(|c| c.first().copied());
        let Some(cpu) = cpu else { return };
        let stop = Arc::new(AtomicBool::new(false));
        let (h, tid) = spinner(Some(cpu), &stop);
        while tid.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        core_affinity::set_for_current(cpu);
        let tid = tid.load(Ordering::SeqCst);
        let mut sig = RunnableSignal::new(SignalKind::Siblings(vec![tid]));
        let mut pre = RunnableSignal::new(SignalKind::Preempted);
        let mut state = RunnableSignal::new(SignalKind::SiblingState(vec![tid]));
        let seen = within(200, || sig.fired());
        // The spinning sibling is runnable, waiting for the CPU we hold.
        let runnable = within(200, || state.fired());
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

    #[test]
    fn a_sibling_in_another_process_is_read() {
        // A spinning child process is in state R (running or waiting).
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("sh");
        let mut state = RunnableSignal::new(SignalKind::SiblingState(vec![child.id() as i32]));
        let runnable = within(500, || state.fired());
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            runnable,
            "the other process's thread never read as runnable"
        );
    }

    #[test]
    fn more_runnable_tasks_than_cpus_is_overcommitted() {
        let stop = Arc::new(AtomicBool::new(false));
        // One spinner per CPU, plus this thread: one more than the CPUs.
        let spinners: Vec<_> = (0..online_cpus()).map(|_| spinner(None, &stop).0).collect();
        let mut over = RunnableSignal::new(SignalKind::Overcommitted);
        let fired = within(500, || over.fired());
        stop.store(true, Ordering::Relaxed);
        for h in spinners {
            h.join().unwrap();
        }
        assert!(
            fired,
            "/proc/loadavg never showed more runnable tasks than CPUs"
        );
    }
}
