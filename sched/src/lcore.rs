//! Lcores: pinned worker threads that run tasks in rounds.
//!
//! Each lcore loops over its tasks, giving each up to `quota` units of work
//! per round (backlog drain: a task works until its input is empty or the
//! quota is met, so co-scheduled tasks get their turn). A round that finds
//! work starts the next at once. A round that finds none starts the spin:
//! the lcore keeps polling until the spin budget ([`SpinPolicy`]) runs
//! out, checking every few microseconds whether another thread waits for
//! this CPU ([`RunnableSignal`]) and yielding the CPU when one does. When
//! the budget is spent it sleeps: it arms its tasks' notifications, checks
//! once more for work (closing the race with a packet that arrived
//! meanwhile), and blocks on their wake-up eventfds and its own command
//! eventfd, with a timeout, so it also sleeps when no task has an eventfd.
//! With [`KernelBusyPoll`] it sleeps in an epoll with busy polling
//! instead, so the kernel polls the devices of the tasks' sockets first
//! (see [`crate::kbusy`]). With `complete_short_rounds` (NAPI's
//! completion) a round in which every task stayed under its quota goes
//! to that sleep at once, as a driver's poll that completes re-enables
//! its interrupt; work found when arming is polled without sleeping and
//! counted (`armed_with_work`).
//!
//! Commands (add a task, remove one, stop) reach an lcore through a
//! lock-free queue (crossbeam `ArrayQueue`) plus an eventfd that wakes it
//! if it sleeps. On stop, or when a task is removed, the task's `finish`
//! runs on its lcore, so work it accepted is completed or handed on.
#![allow(unsafe_code)]

use crate::kbusy::{BusySleep, KernelBusyPoll};
use crate::policy::{Budget, SpinPolicy};
use crate::signal::{RunnableSignal, SignalKind};
use crate::{Error, Telemetry};
use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
use rpmd_pmd::clock;
use rpmd_pmd::function::EventFd;
use rpmd_pmd::port::BusyPoll;
use std::any::Any;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Work an lcore runs. Only `run` is required; a task that polls an rx
/// queue should be an [`RxTask`](crate::RxTask) (or forward the three
/// notification methods to its queue), or its lcore sleeps on a timer
/// instead of the queue's interrupt.
///
/// ```
/// use rpmd_sched::{LcoreConfig, Runtime, Task};
/// struct Count(u64);
/// impl Task for Count {
///     fn run(&mut self, quota: usize) -> usize {
///         self.0 += 1;
///         quota.min(1) // one unit of work a round
///     }
/// }
/// let mut rt = Runtime::start("0", LcoreConfig::default())?;
/// let id = rt.add(0, Count(0))?;
/// while rt.lcores()[0].stats().work.get() == 0 {
///     std::thread::yield_now(); // the lcore calibrates its clock first
/// }
/// let n = rt.shutdown()?.take::<Count>(id).unwrap().0;
/// assert!(n > 0);
/// # Ok::<(), rpmd_sched::Error>(())
/// ```
pub trait Task: Send {
    /// Does up to `quota` units of work (packets) and returns how many it
    /// did. Must not block.
    fn run(&mut self, quota: usize) -> usize;

    /// An eventfd that becomes readable when work arrives while
    /// notifications are armed (an rx interrupt); `None` if the task has
    /// none, and the lcore then sleeps on a timer.
    fn wake_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// Every eventfd that wakes this task: a task that polls several
    /// queues hands each queue's interrupt to `each`. The default hands
    /// over [`wake_fd`](Self::wake_fd)'s.
    fn wake_fds(&self, each: &mut dyn FnMut(BorrowedFd<'_>)) {
        if let Some(fd) = self.wake_fd() {
            each(fd);
        }
    }

    /// Arms (`true`) or disarms notifications around a sleep.
    fn set_notify(&mut self, _armed: bool) {}

    /// Whether work is waiting, checked after arming and before sleeping.
    fn has_work(&self) -> bool {
        false
    }

    /// The busy-poll policy of the queue this task polls
    /// ([`RxQueue::busy_poll`](rpmd_pmd::port::RxQueue::busy_poll)):
    /// when one or more of an lcore's tasks declare one, their longest
    /// budget replaces the lcore's spin policy, and when none of them
    /// wants the others polled meanwhile, the others wait for their
    /// wake-ups during the spin. `None`: no policy of its own.
    fn busy_poll(&self) -> Option<BusyPoll> {
        None
    }

    /// How a busy poll of this task's queue ended: `true` when the task
    /// found work during the spin, `false` when the budget ran out.
    fn busy_poll_done(&mut self, _hit: bool) {}

    /// Runs once when the task leaves its lcore (removal or shutdown):
    /// complete or hand on whatever work it accepted.
    fn finish(&mut self) {}
}

/// How an lcore holds a task: on cache lines of its own. A task's state
/// (its bursts' indices, counters) is written every round by its lcore;
/// two tasks boxed next to each other on the heap and run by two lcores
/// would otherwise share a line, which then crosses between the cores on
/// every round. Measured with rr over shm: the server's and the client's
/// boxes were adjacent, and the shared line cost about 170 ns of each
/// 840 ns round trip.
impl<T: Task> Task for CachePadded<T> {
    #[inline]
    fn run(&mut self, quota: usize) -> usize {
        (**self).run(quota)
    }

    fn wake_fd(&self) -> Option<BorrowedFd<'_>> {
        (**self).wake_fd()
    }

    fn wake_fds(&self, each: &mut dyn FnMut(BorrowedFd<'_>)) {
        (**self).wake_fds(each)
    }

    fn set_notify(&mut self, armed: bool) {
        (**self).set_notify(armed)
    }

    fn has_work(&self) -> bool {
        (**self).has_work()
    }

    fn busy_poll(&self) -> Option<BusyPoll> {
        (**self).busy_poll()
    }

    fn busy_poll_done(&mut self, hit: bool) {
        (**self).busy_poll_done(hit)
    }

    fn finish(&mut self) {
        (**self).finish()
    }
}

/// A task as an lcore holds it: padded (above) and able to give itself
/// back as `Any`, so that [`Stopped::take`] can return it by type.
trait Held: Task {
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send>;
}

impl<T: Task + 'static> Held for CachePadded<T> {
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        Box::new(CachePadded::into_inner(*self))
    }
}

/// The tasks an lcore (or a whole [`Runtime`](crate::Runtime)) ran until
/// it stopped, each after its `finish`: results leave the run loop in the
/// tasks themselves, with no `Arc` needed.
#[derive(Default)]
pub struct Stopped {
    tasks: Vec<(TaskId, Box<dyn Any + Send>)>,
}

impl Stopped {
    /// Takes back task `id`, if it was still on its lcore at the stop and
    /// is a `T`.
    pub fn take<T: Task + 'static>(&mut self, id: TaskId) -> Option<T> {
        let i = self
            .tasks
            .iter()
            .position(|(t, a)| *t == id && a.is::<T>())?;
        let (_, any) = self.tasks.swap_remove(i);
        any.downcast::<T>().ok().map(|b| *b)
    }

    /// Ids of the tasks held.
    pub fn ids(&self) -> impl Iterator<Item = TaskId> + '_ {
        self.tasks.iter().map(|(id, _)| *id)
    }

    /// How many tasks are held.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    pub(crate) fn extend(&mut self, other: Stopped) {
        self.tasks.extend(other.tasks);
    }
}

impl std::fmt::Debug for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.ids()).finish()
    }
}

/// How an lcore polls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LcoreConfig {
    /// Spin budget after a round without work.
    pub spin: SpinPolicy,
    /// Most work units per task per round (Linux's backlog quota: 64).
    pub quota: usize,
    /// Which "another thread wants this CPU" signal to watch while spinning.
    pub signal: SignalKind,
    /// How often the signal is read while spinning.
    pub signal_every: Duration,
    /// Longest sleep while a task has no eventfd (a port without rx
    /// interrupts is polled this often when idle).
    pub sleep: Duration,
    /// Longest sleep when every task has an eventfd to wake it (a safety
    /// net only: an idle lcore on interrupts then costs next to nothing).
    pub interrupt_sleep: Duration,
    /// Sleep in an epoll with kernel busy polling (None: `ppoll`).
    pub kernel_busy_poll: Option<KernelBusyPoll>,
    /// NAPI's completion: after a round in which every task did work but
    /// less than its quota, arm their notifications and sleep at once (as
    /// `napi_complete_done` re-enables the interrupt), instead of polling
    /// until a round finds nothing. Work that came in during the round is
    /// found when arming (counted in `armed_with_work`: the interrupt a
    /// device would raise at once) and polled without sleeping.
    pub complete_short_rounds: bool,
}

impl Default for LcoreConfig {
    /// [`PollMode::Adaptive`]: what every app runs unless told otherwise.
    fn default() -> Self {
        LcoreConfig::preset(PollMode::Adaptive)
    }
}

/// The run loop's presets, as a DPDK user knows them (the apps'
/// `--poll`): always poll, sleep on interrupts, or the adaptive mix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PollMode {
    /// Poll every round and never sleep or yield: DPDK's plain poll
    /// mode, the lowest latency at a whole CPU per lcore.
    Spin,
    /// Sleep on the queues' interrupts as soon as a round finds nothing
    /// (DPDK's `l3fwd-power` interrupt mode): the least CPU.
    Interrupt,
    /// The default: spin within a budget that follows the traffic
    /// ([`SpinPolicy::adaptive`]), stop spinning when another thread is
    /// queued on this CPU ([`SignalKind::RunQueue`]), then sleep on the
    /// queues' interrupts.
    #[default]
    Adaptive,
}

impl PollMode {
    /// Every mode, in the order the apps list them.
    pub const ALL: [PollMode; 3] = [PollMode::Spin, PollMode::Interrupt, PollMode::Adaptive];

    /// The mode's name on a command line.
    pub fn name(self) -> &'static str {
        match self {
            PollMode::Spin => "spin",
            PollMode::Interrupt => "interrupt",
            PollMode::Adaptive => "adaptive",
        }
    }
}

impl std::str::FromStr for PollMode {
    type Err = String;

    fn from_str(s: &str) -> Result<PollMode, String> {
        PollMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("{s:?} is not a poll mode (spin, interrupt or adaptive)"))
    }
}

impl std::fmt::Display for PollMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl LcoreConfig {
    /// The configuration of a preset; the fields can be changed after.
    ///
    /// ```
    /// use rpmd_sched::{LcoreConfig, PollMode, SignalKind, SpinPolicy};
    /// let c = LcoreConfig::default();
    /// assert_eq!((c.spin, c.signal), (SpinPolicy::adaptive(), SignalKind::RunQueue));
    /// assert_eq!(LcoreConfig::preset(PollMode::Spin).spin, SpinPolicy::Always);
    /// ```
    pub fn preset(mode: PollMode) -> LcoreConfig {
        let (spin, signal) = match mode {
            PollMode::Spin => (SpinPolicy::Always, SignalKind::Off),
            PollMode::Interrupt => (SpinPolicy::Fixed(Duration::ZERO), SignalKind::Off),
            PollMode::Adaptive => (SpinPolicy::adaptive(), SignalKind::RunQueue),
        };
        LcoreConfig {
            spin,
            quota: 64,
            signal,
            signal_every: Duration::from_micros(2),
            sleep: Duration::from_micros(100),
            interrupt_sleep: Duration::from_millis(10),
            kernel_busy_poll: None,
            complete_short_rounds: false,
        }
    }

    /// The preset these settings are, if they are one (options may have
    /// changed a field since).
    pub fn mode(&self) -> Option<PollMode> {
        PollMode::ALL
            .into_iter()
            .find(|m| LcoreConfig::preset(*m) == *self)
    }

    /// One line a person reads: the preset's name (or `custom`), then
    /// every setting.
    pub fn describe(&self) -> String {
        let spin = match self.spin {
            SpinPolicy::Always => "always (never sleeps)".to_string(),
            SpinPolicy::Fixed(d) => format!("fixed {} us", d.as_micros()),
            SpinPolicy::Adaptive { min, max } => {
                format!("adaptive {}-{} us", min.as_micros(), max.as_micros())
            }
        };
        let signal = match &self.signal {
            SignalKind::Off => "off".to_string(),
            SignalKind::RunQueue => format!("runqueue every {} us", self.signal_every.as_micros()),
            k => format!("{k:?} every {} us", self.signal_every.as_micros()).to_lowercase(),
        };
        let kernel = match self.kernel_busy_poll {
            Some(k) => format!(", kernel busy poll {} us", k.usecs),
            None => String::new(),
        };
        format!(
            "poll {}: spin {spin}, yield {signal}, drain quota {}, sleep on interrupts (at most {} ms; {} us for a queue without){kernel}",
            self.mode().map_or("custom", PollMode::name),
            self.quota,
            self.interrupt_sleep.as_millis(),
            self.sleep.as_micros(),
        )
    }
}

/// Identifies a task on a runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TaskId(pub u64);

enum Command {
    Add(TaskId, Box<dyn Held>),
    Remove(TaskId),
    Signal(SignalKind),
    Stop,
}

struct Shared {
    commands: ArrayQueue<Command>,
    wake: EventFd,
    stats: Telemetry,
    tid: AtomicI32,
    /// How it polls (as started).
    config: LcoreConfig,
    /// Whether its sleeps busy-poll in the kernel: 0 before the lcore
    /// starts, 1 yes, 2 no (not asked for, or refused by the kernel).
    kernel_busy: std::sync::atomic::AtomicU8,
}

/// An lcore's counters, shared with the lcore (see
/// [`Lcore::stats_handle`]).
#[derive(Clone)]
pub struct LcoreStats(Arc<Shared>);

impl LcoreStats {
    /// The counters (one writer: the lcore; reads are relaxed).
    pub fn telemetry(&self) -> &Telemetry {
        &self.0.stats
    }

    /// How the lcore polls (its configuration as started).
    pub fn config(&self) -> &LcoreConfig {
        &self.0.config
    }

    /// Whether the lcore's sleeps busy-poll in the kernel (its
    /// `kernel_busy_poll`, where the kernel has per-epoll busy polling:
    /// Linux 6.9); `None` until the lcore has started.
    pub fn kernel_busy_polling(&self) -> Option<bool> {
        match self.0.kernel_busy.load(Ordering::Acquire) {
            0 => None,
            k => Some(k == 1),
        }
    }

    /// The CPU time its thread has used, in nanoseconds, from the kernel's
    /// own account (`/proc/self/task/TID/schedstat`); `None` when the
    /// kernel keeps none. Read by control threads, never by the lcore.
    pub fn cpu_time_ns(&self) -> Option<u64> {
        crate::signal::thread_cpu_ns(self.0.tid.load(Ordering::Acquire))
    }
}

impl std::fmt::Debug for LcoreStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LcoreStats")
            .field("rounds", &self.0.stats.rounds.get())
            .finish()
    }
}

/// A running lcore, seen from the control side.
pub struct Lcore {
    cpu: usize,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Stopped>>,
}

impl std::fmt::Debug for Lcore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lcore").field("cpu", &self.cpu).finish()
    }
}

impl Lcore {
    /// Starts an lcore pinned to `cpu`.
    pub fn spawn(cpu: usize, cfg: LcoreConfig) -> Result<Lcore, Error> {
        let shared = Arc::new(Shared {
            commands: ArrayQueue::new(256),
            wake: EventFd::new()?,
            stats: Telemetry::default(),
            tid: AtomicI32::new(0),
            config: cfg.clone(),
            kernel_busy: std::sync::atomic::AtomicU8::new(0),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("lcore{cpu}"))
            .spawn(move || {
                let pinned = core_affinity::get_core_ids()
                    .and_then(|ids| ids.into_iter().find(|c| c.id == cpu))
                    .is_some_and(core_affinity::set_for_current);
                s.tid.store(
                    if pinned { crate::signal::gettid() } else { -1 },
                    Ordering::Release,
                );
                run(&s, cfg)
            })
            .map_err(|source| Error::Spawn { cpu, source })?;
        // The thread stores its id (or -1) first thing; if it died before
        // that, stop waiting.
        while shared.tid.load(Ordering::Acquire) == 0 && !thread.is_finished() {
            std::thread::yield_now();
        }
        if shared.tid.load(Ordering::Acquire) <= 0 {
            let _ = shared.commands.push(Command::Stop);
            let _ = thread.join();
            return Err(Error::Setup(format!(
                "cannot pin an lcore to CPU {cpu} (no such CPU, or not allowed)"
            )));
        }
        Ok(Lcore {
            cpu,
            shared,
            thread: Some(thread),
        })
    }

    fn send(&self, mut c: Command) {
        // The queue is bounded; a full queue means the lcore is behind, so
        // wait for room rather than lose a command, unless the lcore has
        // died (a task panicked) and will never make room.
        while let Err(back) = self.shared.commands.push(c) {
            if self.thread.as_ref().is_none_or(|t| t.is_finished()) {
                return;
            }
            c = back;
            std::thread::yield_now();
        }
        let _ = self.shared.wake.signal();
    }

    /// Adds a task; it runs from the lcore's next round. It is boxed on
    /// cache lines of its own (see the `Task` impl for `CachePadded`).
    /// Fails when the lcore has died (a task panicked): the task would
    /// never run.
    pub fn add<T: Task + 'static>(&self, id: TaskId, task: T) -> Result<(), Error> {
        if !self.is_alive() {
            return Err(Error::LcoreDied {
                cpu: self.cpu,
                message: "its thread has ended (the panic's message comes with stop)".into(),
            });
        }
        self.send(Command::Add(id, Box::new(CachePadded::new(task))));
        Ok(())
    }

    /// Whether the lcore's thread still runs (a task that panics ends it).
    pub fn is_alive(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// A handle on this lcore's counters that outlives borrows of the
    /// runtime (for a telemetry thread).
    pub fn stats_handle(&self) -> LcoreStats {
        LcoreStats(self.shared.clone())
    }

    /// Removes a task; its `finish` runs on the lcore.
    pub fn remove(&self, id: TaskId) {
        self.send(Command::Remove(id));
    }

    /// Changes the signal watched while spinning (for instance to the
    /// sibling lcores on the same CPU, once their thread ids are known).
    pub fn set_signal(&self, kind: SignalKind) {
        self.send(Command::Signal(kind));
    }

    /// The CPU it is pinned to.
    pub fn cpu(&self) -> usize {
        self.cpu
    }

    /// The lcore thread's kernel id (for sibling signals).
    pub fn tid(&self) -> i32 {
        self.shared.tid.load(Ordering::Acquire)
    }

    /// Its counters.
    pub fn stats(&self) -> &Telemetry {
        &self.shared.stats
    }

    /// Stops it after its tasks finish, and waits; returns the tasks. A
    /// task that panicked comes back as [`Error::LcoreDied`] with the
    /// panic's message.
    pub fn stop(mut self) -> Result<Stopped, Error> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> Result<Stopped, Error> {
        let Some(t) = self.thread.take() else {
            return Ok(Stopped::default());
        };
        self.send(Command::Stop);
        t.join().map_err(|p| Error::LcoreDied {
            cpu: self.cpu,
            message: p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(not a string)".into()),
        })
    }
}

impl Drop for Lcore {
    fn drop(&mut self) {
        let _ = self.stop_inner();
    }
}

/// Sleeps until one of `pfd`'s fds is readable or `timeout` passes.
fn sleep_on(pfd: &mut [libc::pollfd], timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `pfd` is a live array of `pfd.len()` pollfds; `ts` is valid;
    // no signal mask is passed.
    unsafe {
        libc::ppoll(
            pfd.as_mut_ptr(),
            pfd.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
}

fn pollin(fd: BorrowedFd<'_>) -> libc::pollfd {
    libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }
}

/// Hands every task's wake-up eventfds to `each`; whether every task had
/// at least one.
fn wake_fds_of(tasks: &[(TaskId, Box<dyn Held>)], each: &mut dyn FnMut(BorrowedFd<'_>)) -> bool {
    let mut all = !tasks.is_empty();
    for (_, t) in tasks {
        let mut any = false;
        t.wake_fds(&mut |fd| {
            any = true;
            each(fd);
        });
        all &= any;
    }
    all
}

/// How long an idle lcore sleeps at most: until an interrupt when every
/// task has one, else the short timer that polls the others.
fn sleep_timeout(cfg: &LcoreConfig, every_task_has_an_interrupt: bool) -> Duration {
    if every_task_has_an_interrupt {
        cfg.sleep.max(cfg.interrupt_sleep)
    } else {
        cfg.sleep
    }
}

/// While spinning, the clock is read every this many empty rounds.
const CLOCK_EVERY: u32 = 8;

/// The lcore's loop.
/// An lcore's loop: poll every task; after a round with work, account
/// it; after an empty one, spin within the budget (yielding when the
/// signal fires), then arm the tasks' notifications and sleep.
fn run(s: &Shared, cfg: LcoreConfig) -> Stopped {
    let mut p = Poller::new(cfg);
    let busy = if p.busy_sleep.is_some() { 1 } else { 2 };
    s.kernel_busy.store(busy, Ordering::Release);
    loop {
        // `is_empty` is two plain loads, where `pop` on an empty queue
        // issues a full fence, which would wait for the stores of a frame
        // just sent before this round could poll.
        if !s.commands.is_empty() && p.take_commands(s) {
            let tasks = std::mem::take(&mut p.tasks);
            let tasks = tasks.into_iter().map(|(id, mut t)| {
                t.finish();
                (id, t.into_any())
            });
            return Stopped {
                tasks: tasks.collect(),
            };
        }
        // While a spin that leaves the other tasks to their wake-ups
        // lasts, only the busy-polling tasks run.
        let exclusive = p.spin_exclusive && p.spinning;
        let mut work = 0;
        let mut found = 0u64;
        let mut filled = false;
        for (i, (_, t)) in p.tasks.iter_mut().enumerate() {
            if exclusive && !p.spin_task[i] {
                continue;
            }
            let w = t.run(p.cfg.quota);
            work += w;
            filled |= w >= p.cfg.quota;
            found |= u64::from(w != 0) << (i & 63);
        }
        s.stats.rounds.add(1);
        if work > 0 {
            p.busy_round(&s.stats, work, found);
            if p.cfg.complete_short_rounds && !filled {
                p.sleep(s);
            }
        } else {
            p.empty_round(s);
        }
    }
}

/// The loop's state between rounds. Times are clock ticks (the TSC;
/// `rpmd_pmd::clock`): `Instant::now()` would cost more than the rest of a
/// busy round.
struct Poller {
    cfg: LcoreConfig,
    tasks: Vec<(TaskId, Box<dyn Held>)>,
    budget: Budget,
    signal: RunnableSignal,
    signal_every: u64,
    /// A fixed budget in ticks, converted once (a 128-bit division).
    fixed_spin: Option<u64>,
    /// Start of the current idle period, when its spin ends, when to read
    /// the signal next, and when the last sleep ended.
    idle_start: Option<u64>,
    spin_end: u64,
    next_check: u64,
    woke: Option<u64>,
    /// Reused across sleeps: an interrupt-driven lcore sleeps once per
    /// packet burst, which must not cost an allocation.
    pfds: Vec<libc::pollfd>,
    /// The kernel busy-poll sleep, when configured and offered by the
    /// kernel; `raw_fds` is its reused fd list, `tasks_changed` set when a
    /// command changed the tasks.
    busy_sleep: Option<BusySleep>,
    raw_fds: Vec<std::os::fd::RawFd>,
    tasks_changed: bool,
    /// Wake-up fds that reported an error or hang-up with nothing to read
    /// (a packet socket or TAP whose interface was deleted): left out of
    /// later sleeps, which would otherwise return at once, for good (the
    /// lcore would spin a CPU). Still counted as interrupts for the
    /// sleep's length. Forgotten when the tasks change.
    broken_fds: Vec<std::os::fd::RawFd>,
    /// The clock is read once per round that finds work, and once every
    /// CLOCK_EVERY rounds while spinning: each `rdtsc` costs about 20 ns
    /// here, and an empty round is the time a packet waits to be noticed.
    /// Each read charges the time since the previous one (`last`) to busy
    /// or idle, so up to CLOCK_EVERY - 1 spinning rounds before work are
    /// counted as busy.
    last: u64,
    empty_rounds: u32,
    /// The last clock read found the spin budget not yet spent.
    spinning: bool,
    /// From the tasks' busy-poll policies, recomputed when the tasks
    /// change: the longest declared budget (ticks), which replaces the
    /// lcore's; which tasks declared a budget above zero; whether all of
    /// those leave the other tasks to their wake-ups while they spin.
    declared_spin: Option<u64>,
    spin_task: Vec<bool>,
    exclusive: bool,
    /// This spin polls only the spin tasks; the others are armed.
    spin_exclusive: bool,
    /// A spin of declared budgets ran this idle period and its outcome is
    /// not yet told to the tasks.
    spun: bool,
}

impl Poller {
    fn new(cfg: LcoreConfig) -> Poller {
        rpmd_pmd::clock::init();
        let busy_sleep = cfg.kernel_busy_poll.and_then(|p| match BusySleep::new(p) {
            Ok(b) => Some(b),
            Err(e) => {
                eprintln!("rpmd: warning: no kernel busy polling for the lcore's sleep ({e}; per-epoll busy polling needs Linux 6.9); sleeping without it");
                None
            }
        });
        Poller {
            budget: Budget::new(cfg.spin),
            signal: RunnableSignal::new(cfg.signal.clone()),
            signal_every: clock::ticks(cfg.signal_every),
            fixed_spin: match cfg.spin {
                SpinPolicy::Fixed(d) => Some(clock::ticks(d)),
                SpinPolicy::Always => Some(u64::MAX),
                SpinPolicy::Adaptive { .. } => None,
            },
            cfg,
            tasks: Vec::new(),
            idle_start: None,
            spin_end: 0,
            next_check: 0,
            woke: None,
            pfds: Vec::with_capacity(8),
            busy_sleep,
            raw_fds: Vec::with_capacity(8),
            tasks_changed: true,
            broken_fds: Vec::new(),
            last: clock::now(),
            empty_rounds: 0,
            spinning: false,
            declared_spin: None,
            spin_task: Vec::new(),
            exclusive: false,
            spin_exclusive: false,
            spun: false,
        }
    }

    /// Applies the queued commands; whether one was Stop.
    #[cold]
    fn take_commands(&mut self, s: &Shared) -> bool {
        let mut stop = false;
        let mut changed = false;
        self.end_exclusive();
        while let Some(c) = s.commands.pop() {
            match c {
                Command::Add(id, t) => {
                    self.tasks.push((id, t));
                    changed = true;
                }
                Command::Remove(id) => {
                    changed = true;
                    if let Some(i) = self.tasks.iter().position(|t| t.0 == id) {
                        let (_, mut t) = self.tasks.remove(i);
                        t.finish();
                    }
                }
                Command::Signal(k) => self.signal = RunnableSignal::new(k),
                Command::Stop => stop = true,
            }
        }
        if changed {
            self.tasks_changed = true;
            self.broken_fds.clear();
            self.plan_spin();
        }
        stop
    }

    /// Reads the tasks' busy-poll policies.
    #[cold]
    fn plan_spin(&mut self) {
        let polls: Vec<Option<BusyPoll>> = self.tasks.iter().map(|(_, t)| t.busy_poll()).collect();
        self.spin_task = polls
            .iter()
            .map(|p| p.is_some_and(|b| !b.budget.is_zero()))
            .collect();
        let declared = polls.iter().flatten();
        self.declared_spin = declared.clone().map(|b| b.budget).max().map(clock::ticks);
        let mut spinners = declared.filter(|b| !b.budget.is_zero());
        self.exclusive = spinners.clone().next().is_some() && spinners.all(|b| !b.poll_others);
        // The next empty round starts an idle period under this plan.
        self.idle_start = None;
        self.spun = false;
    }

    /// Starts a spin that leaves the other tasks to their wake-ups.
    #[cold]
    fn begin_exclusive(&mut self) {
        for (i, (_, t)) in self.tasks.iter_mut().enumerate() {
            if !self.spin_task[i] {
                t.set_notify(true);
            }
        }
        self.spin_exclusive = true;
    }

    /// Ends it: the other tasks are disarmed and polled again.
    #[cold]
    fn end_exclusive(&mut self) {
        if !std::mem::take(&mut self.spin_exclusive) {
            return;
        }
        for (i, (_, t)) in self.tasks.iter_mut().enumerate() {
            if !self.spin_task[i] {
                t.set_notify(false);
            }
        }
    }

    /// Whether one of the tasks sitting out the spin was woken (vhost's
    /// `vhost_has_work()`, which ends its busy loop): a zero-timeout poll
    /// of their wake-up fds.
    #[cold]
    fn others_woke(&mut self) -> bool {
        self.pfds.clear();
        for (i, (_, t)) in self.tasks.iter().enumerate() {
            if !self.spin_task[i] {
                t.wake_fds(&mut |fd| self.pfds.push(pollin(fd)));
            }
        }
        if self.pfds.is_empty() {
            return false;
        }
        sleep_on(&mut self.pfds, Duration::ZERO);
        self.pfds.iter().any(|p| p.revents & libc::POLLIN != 0)
    }

    /// Tells the busy-polling tasks how their spin ended: a hit for each
    /// that found work (`found`, one bit a task), or a timeout for all.
    #[cold]
    fn tell_spin(&mut self, found: Option<u64>) {
        self.spun = false;
        for (i, (_, t)) in self.tasks.iter_mut().enumerate() {
            if !self.spin_task[i] {
                continue;
            }
            match found {
                Some(f) if f & (1 << (i & 63)) != 0 => t.busy_poll_done(true),
                Some(_) => {}
                None => t.busy_poll_done(false),
            }
        }
    }

    /// A round that did `work`: busy time, the idle gap it ended (which
    /// the adaptive budget learns from), the wake-up latency after a
    /// sleep.
    #[inline(always)]
    fn busy_round(&mut self, st: &Telemetry, work: usize, found: u64) {
        let now = clock::now();
        st.busy_polls.add(1);
        st.work.add(work as u64);
        st.busy_ns.add(clock::to_ns(now - self.last));
        if let Some(start) = self.idle_start.take() {
            self.budget
                .observe_gap(Duration::from_nanos(clock::to_ns(self.last - start)));
            if self.spun {
                self.tell_spin(Some(found));
            }
            self.end_exclusive();
        }
        if let Some(w) = self.woke.take() {
            st.record_wake(clock::to_ns(now.saturating_sub(w)));
        }
        self.last = now;
        self.empty_rounds = 0;
        self.spinning = false;
    }

    /// A round without work: spin while the budget lasts (the clock read
    /// every CLOCK_EVERY rounds, the signal every `signal_every`), then
    /// sleep.
    #[inline(always)]
    fn empty_round(&mut self, s: &Shared) {
        let st = &s.stats;
        st.empty_polls.add(1);
        self.empty_rounds = self.empty_rounds.wrapping_add(1);
        if self.spinning && self.empty_rounds % CLOCK_EVERY != 0 {
            st.spins.add(1);
            std::hint::spin_loop();
            return;
        }
        let now = clock::now();
        st.idle_ns.add(clock::to_ns(now - self.last));
        self.last = now;
        if self.idle_start.is_none() {
            self.idle_start = Some(now);
            let spin = self
                .declared_spin
                .or(self.fixed_spin)
                .unwrap_or_else(|| clock::ticks(self.budget.current()));
            self.spin_end = now.saturating_add(spin);
            self.signal.reset();
            self.next_check = now + self.signal_every;
            self.spun = self.declared_spin.is_some_and(|t| t > 0);
            if self.spun && self.exclusive {
                self.begin_exclusive();
            }
        }
        self.spinning = now < self.spin_end;
        if self.spinning {
            st.spins.add(1);
            if now >= self.next_check && (self.spin_exclusive || !self.signal.is_off()) {
                self.next_check = now + self.signal_every;
                if self.spin_exclusive && self.others_woke() {
                    self.end_exclusive();
                }
                if self.signal.yield_if_wanted() {
                    st.yields.add(1);
                }
            }
            std::hint::spin_loop();
            return;
        }
        self.sleep(s);
    }

    /// Budget spent: sleeps until work or a command arrives. Arms first,
    /// then looks once more, so work that came in between is not slept
    /// through. (Later empty rounds of this idle period sleep at once.)
    #[cold]
    fn sleep(&mut self, s: &Shared) {
        let st = &s.stats;
        self.woke = None;
        if self.spun {
            self.tell_spin(None);
        }
        // Tasks that sat out the spin are armed already.
        let armed = std::mem::take(&mut self.spin_exclusive);
        for (i, (_, t)) in self.tasks.iter_mut().enumerate() {
            if !armed || self.spin_task[i] {
                t.set_notify(true);
            }
        }
        if self.tasks.iter().any(|(_, t)| t.has_work()) {
            st.armed_with_work.add(1);
        } else if s.commands.is_empty() {
            st.sleeps.add(1);
            let z = clock::now();
            // Every task with an interrupt: sleep until one fires (the
            // timer a safety net); else the short timer polls the rest.
            let broken = &mut self.broken_fds;
            if let Some(b) = self.busy_sleep.as_mut() {
                self.raw_fds.clear();
                self.raw_fds.push(s.wake.as_fd().as_raw_fd());
                let all = wake_fds_of(&self.tasks, &mut |fd| {
                    if !broken.contains(&fd.as_raw_fd()) {
                        self.raw_fds.push(fd.as_raw_fd());
                    }
                });
                let timeout = sleep_timeout(&self.cfg, all);
                b.sleep(
                    &self.raw_fds,
                    std::mem::take(&mut self.tasks_changed),
                    timeout,
                    broken,
                );
            } else {
                self.pfds.clear();
                self.pfds.push(pollin(s.wake.as_fd()));
                let all = wake_fds_of(&self.tasks, &mut |fd| {
                    if !broken.contains(&fd.as_raw_fd()) {
                        self.pfds.push(pollin(fd));
                    }
                });
                sleep_on(&mut self.pfds, sleep_timeout(&self.cfg, all));
                let failed = libc::POLLERR | libc::POLLHUP | libc::POLLNVAL;
                for p in &self.pfds[1..] {
                    if p.revents & failed != 0 && p.revents & libc::POLLIN == 0 {
                        broken.push(p.fd);
                    }
                }
            }
            let w = clock::now();
            st.sleep_ns.add(clock::to_ns(w - z));
            self.woke = Some(w);
            self.last = w;
            let _ = s.wake.take();
        }
        for (_, t) in self.tasks.iter_mut() {
            t.set_notify(false);
        }
    }
}
