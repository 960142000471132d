//! Ready-made tasks and the multi-lcore runtime.
//!
//! - [`Forward`]: receive on one port queue, optionally process the burst,
//!   transmit on another (an l2fwd lcore's work); sleeps on the rx queue's
//!   interrupt eventfd where the port has one.
//! - [`RxTask`]: any work on one rx queue (an [`RxWork`] or a closure),
//!   with the queue's interrupt handed to the lcore like `Forward`'s.
//! - [`Timer`]: runs a closure every period (stats, TX buffer flushes).
//! - [`Runtime`]: lcores started from a DPDK-style core list (`-l 0-1`).
use crate::lcore::{Lcore, LcoreConfig, Stopped, Task, TaskId};
use crate::{parse_cores, Error};
use rpmd_pmd::port::{Pkts, RxQueue, TxQueue};
use std::time::{Duration, Instant};

/// What a [`Forward`] task does with each received burst before sending
/// it (rewrite MACs, count, drop); may leave the burst empty.
pub type BurstFn = Box<dyn FnMut(&mut Pkts) + Send>;

/// rx queue → (process) → tx queue. Packets the tx queue does not take are
/// dropped and counted.
///
/// ```
/// # use rpmd_pmd::{Mempool, MempoolConfig, PortConfig, Registry, Pkts};
/// # use rpmd_sched::Forward;
/// # let pool = Mempool::new(&MempoolConfig::new("doc-fwd", 256)).unwrap();
/// # let mut p = Registry::new().open("null").unwrap();
/// # p.configure(&PortConfig::with_pool(&pool)).unwrap();
/// # let mut q = p.start().unwrap();
/// // Swap the MAC addresses of every frame on its way through.
/// let swap = |pkts: &mut Pkts| {
///     for m in pkts.iter_mut() {
///         if let Ok(mut eth) = rpmd_pmd::hdr::Ethernet::new_checked(m.data_mut()) {
///             eth.swap_addrs();
///         }
///     }
/// };
/// let task = Forward::new(q.take_rx(0)?, q.take_tx(0)?, 32).with(Box::new(swap));
/// # Ok::<(), rpmd_pmd::Error>(())
/// ```
pub struct Forward {
    rx: Box<dyn RxQueue>,
    tx: Box<dyn TxQueue>,
    f: Option<BurstFn>,
    pkts: Pkts,
    burst: usize,
    /// Packets dropped because the tx queue was full.
    pub dropped: u64,
}

impl Forward {
    /// Forwards from `rx` to `tx` in bursts of `burst` (at most 256).
    pub fn new(rx: Box<dyn RxQueue>, tx: Box<dyn TxQueue>, burst: usize) -> Self {
        Forward {
            rx,
            tx,
            f: None,
            pkts: Pkts::new(),
            burst: burst.clamp(1, rpmd_pmd::port::MAX_BURST),
            dropped: 0,
        }
    }

    /// Applies `f` to every burst before it is sent.
    pub fn with(mut self, f: BurstFn) -> Self {
        self.f = Some(f);
        self
    }
}

impl Task for Forward {
    fn run(&mut self, quota: usize) -> usize {
        let mut done = 0;
        // Until the rx queue is empty or the quota is met.
        while done < quota {
            let n = self
                .rx
                .rx_burst(&mut self.pkts, self.burst.min(quota - done));
            if n == 0 {
                if done == 0 {
                    // An idle round: take back what the tx queue has
                    // finished sending now, not on the next burst's path.
                    self.tx.in_flight();
                }
                break;
            }
            done += n;
            if let Some(f) = self.f.as_mut() {
                f(&mut self.pkts);
            }
            self.tx.tx_burst(&mut self.pkts);
            self.dropped += self.pkts.len() as u64;
            self.pkts.clear();
        }
        done
    }

    crate::rx_queue_notify!(rx);

    fn finish(&mut self) {
        // Whatever was received has been sent or counted; nothing is held.
        self.pkts.clear();
    }
}

/// What an [`RxTask`] does with its rx queue each round: receive up to
/// `quota` packets and handle them, returning how many it did. Closures
/// `FnMut(&mut dyn RxQueue, usize) -> usize` are `RxWork`; a struct is the
/// place for state that [`Stopped::take`](crate::Stopped::take) should
/// hand back.
pub trait RxWork: Send {
    /// One round's work on `rx`.
    fn work(&mut self, rx: &mut dyn RxQueue, quota: usize) -> usize;

    /// Runs once when the task leaves its lcore.
    fn finish(&mut self) {}
}

impl<F: FnMut(&mut dyn RxQueue, usize) -> usize + Send> RxWork for F {
    fn work(&mut self, rx: &mut dyn RxQueue, quota: usize) -> usize {
        self(rx, quota)
    }
}

/// A task that polls one rx queue: it forwards the queue's interrupt
/// eventfd, arming and pending-work check to its lcore, so the lcore can
/// sleep on the interrupt as it does for [`Forward`]. Write the work (an
/// [`RxWork`]) and leave the [`Task`] plumbing to this.
///
/// ```
/// # use rpmd_pmd::{Mempool, MempoolConfig, PortConfig, Registry, Pkts};
/// use rpmd_pmd::port::RxQueue;
/// use rpmd_sched::{LcoreConfig, Runtime, RxTask};
/// # let pool = Mempool::new(&MempoolConfig::new("doc-rxtask", 256)).unwrap();
/// # let mut p = Registry::new().open("null").unwrap();
/// # p.configure(&PortConfig::with_pool(&pool)).unwrap();
/// # let mut q = p.start().unwrap();
/// // A closure is an RxWork: receive and drop (testpmd's rxonly).
/// let mut pkts = Pkts::new();
/// let rxonly = move |rx: &mut dyn RxQueue, quota: usize| {
///     let n = rx.rx_burst(&mut pkts, quota.min(32));
///     pkts.clear();
///     n
/// };
/// let mut rt = Runtime::start("0", LcoreConfig::default())?;
/// rt.add(0, RxTask::new(q.take_rx(0)?, rxonly))?;
/// rt.shutdown()?;
/// # Ok::<(), rpmd_sched::Error>(())
/// ```
pub struct RxTask<W> {
    rx: Box<dyn RxQueue>,
    /// The work, with whatever state it keeps.
    pub work: W,
}

impl<W: RxWork> RxTask<W> {
    /// A task running `work` on `rx`.
    pub fn new(rx: Box<dyn RxQueue>, work: W) -> Self {
        RxTask { rx, work }
    }

    /// The queue and the work, taken apart (after a stop).
    pub fn into_parts(self) -> (Box<dyn RxQueue>, W) {
        (self.rx, self.work)
    }
}

impl<W: RxWork> Task for RxTask<W> {
    #[inline]
    fn run(&mut self, quota: usize) -> usize {
        self.work.work(&mut *self.rx, quota)
    }

    crate::rx_queue_notify!(rx);

    fn finish(&mut self) {
        self.work.finish();
    }
}

/// Writes the [`Task`] methods that hand one rx queue's interrupt,
/// pending-work check and busy-poll policy to the lcore (`wake_fd`,
/// `set_notify`, `has_work`, `busy_poll`, `busy_poll_done`), for a task
/// whose queue is its field `$rx` (a `Box<dyn RxQueue>`). Use it inside
/// the `impl Task` block, as [`Forward`] and [`RxTask`] do.
///
/// ```
/// use rpmd_pmd::port::RxQueue;
/// use rpmd_sched::Task;
/// struct Drop0 {
///     rx: Box<dyn RxQueue>,
/// }
/// impl Task for Drop0 {
///     fn run(&mut self, _quota: usize) -> usize {
///         0
///     }
///     rpmd_sched::rx_queue_notify!(rx);
/// }
/// ```
#[macro_export]
macro_rules! rx_queue_notify {
    ($rx:ident) => {
        fn wake_fd(&self) -> Option<::std::os::fd::BorrowedFd<'_>> {
            self.$rx.interrupt_fd()
        }

        fn set_notify(&mut self, armed: bool) {
            let _ = self.$rx.set_interrupt(armed);
        }

        fn has_work(&self) -> bool {
            self.$rx.has_work()
        }

        fn busy_poll(&self) -> Option<$crate::BusyPoll> {
            self.$rx.busy_poll()
        }

        fn busy_poll_done(&mut self, hit: bool) {
            self.$rx.busy_poll_done(hit)
        }
    };
}

/// Runs `f` every `period` (checked each round; never more often).
///
/// ```
/// use rpmd_sched::{LcoreConfig, Runtime, Timer};
/// use std::time::Duration;
/// let mut rt = Runtime::start("0", LcoreConfig::default())?;
/// let tick = Timer::new(Duration::from_millis(100), Box::new(|| println!("tick")));
/// rt.add(0, tick)?;
/// rt.shutdown()?;
/// # Ok::<(), rpmd_sched::Error>(())
/// ```
pub struct Timer {
    period: Duration,
    next: Instant,
    f: Box<dyn FnMut() + Send>,
}

impl Timer {
    /// A timer running `f` every `period`, first after one period.
    pub fn new(period: Duration, f: Box<dyn FnMut() + Send>) -> Self {
        Timer {
            period,
            next: Instant::now() + period,
            f,
        }
    }
}

impl Task for Timer {
    fn run(&mut self, _quota: usize) -> usize {
        let now = Instant::now();
        if now < self.next {
            return 0;
        }
        (self.f)();
        self.next = now + self.period;
        // Timer work keeps the lcore awake no more than other work does.
        1
    }
}

/// A set of lcores started from a core list: `add` places tasks,
/// `shutdown` stops every lcore and returns the tasks (see the crate
/// docs for a whole app).
///
/// ```
/// use rpmd_sched::{LcoreConfig, Runtime, SpinPolicy};
/// let cfg = LcoreConfig {
///     spin: SpinPolicy::adaptive(), // spin 0-200 µs after the last work
///     ..LcoreConfig::default()
/// };
/// let rt = Runtime::start("0", cfg)?;
/// assert_eq!(rt.lcores()[0].cpu(), 0);
/// rt.shutdown()?;
/// # Ok::<(), rpmd_sched::Error>(())
/// ```
#[derive(Debug)]
pub struct Runtime {
    lcores: Vec<Lcore>,
    next_id: u64,
}

impl Runtime {
    /// Starts one lcore per core in `cores` (DPDK's `-l` syntax).
    pub fn start(cores: &str, cfg: LcoreConfig) -> Result<Runtime, Error> {
        let list = parse_cores(cores)?;
        let mut lcores = Vec::with_capacity(list.len());
        for c in list {
            lcores.push(Lcore::spawn(c, cfg.clone())?);
        }
        Ok(Runtime { lcores, next_id: 1 })
    }

    /// The lcores, in core-list order.
    pub fn lcores(&self) -> &[Lcore] {
        &self.lcores
    }

    /// Adds `task` to lcore `i` (index in the core list); returns its id.
    pub fn add<T: Task + 'static>(&mut self, i: usize, task: T) -> Result<TaskId, Error> {
        let l = self.lcores.get(i).ok_or_else(|| {
            Error::Setup(format!(
                "no lcore {i}: the runtime has {}",
                self.lcores.len()
            ))
        })?;
        let id = TaskId(self.next_id);
        self.next_id += 1;
        l.add(id, task)?;
        Ok(id)
    }

    /// Removes a task from whichever lcore runs it.
    pub fn remove(&self, id: TaskId) {
        for l in &self.lcores {
            l.remove(id);
        }
    }

    /// Stops every lcore after its tasks finish and returns the tasks
    /// (take each back with [`Stopped::take`] and the id [`add`](Self::add)
    /// gave). The first lcore that died (a task panicked) is reported as
    /// [`Error::LcoreDied`] instead, after every lcore has stopped.
    pub fn shutdown(self) -> Result<Stopped, Error> {
        let mut all = Stopped::default();
        let mut died = None;
        for l in self.lcores {
            match l.stop() {
                Ok(s) => all.extend(s),
                Err(e) => {
                    died.get_or_insert(e);
                }
            }
        }
        died.map_or(Ok(all), Err)
    }
}
