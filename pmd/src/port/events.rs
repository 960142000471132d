//! Link-status-change events (DPDK's `RTE_ETH_EVENT_INTR_LSC`): an fd an
//! app polls, or waits on, and then reads [`Port::link`](super::Port::link).
//!
//! A port hands out its [`LinkEvents`] from
//! [`Port::link_events`](super::Port::link_events); its device raises it
//! from whatever sees the link change (a control thread, a netlink
//! socket), and the generic port raises it at start and stop. An event
//! says the link *may* have changed: several changes may fold into one,
//! and the app reads the state it wants to act on.
use crate::function::EventFd;
use crate::Error;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The link events of one port; clones share one eventfd.
#[derive(Clone, Debug)]
pub struct LinkEvents(Arc<EventFd>);

impl LinkEvents {
    /// A new, quiet event source.
    pub fn new() -> Result<Self, Error> {
        EventFd::new().map(|e| LinkEvents(Arc::new(e)))
    }

    /// Says the link may have changed (the device's side). A failed
    /// write means the counter is at its limit, and a wake-up is pending
    /// anyway.
    pub fn raise(&self) {
        let _ = self.0.signal();
    }

    /// Waits up to `timeout` for an event and consumes those pending;
    /// whether there was one.
    pub fn wait(&self, timeout: Duration) -> Result<bool, Error> {
        self.0.wait(timeout).map(|n| n > 0)
    }

    /// Consumes pending events without waiting; how many were raised.
    pub fn take(&self) -> Result<u64, Error> {
        self.0.take()
    }
}

/// A device's side of its port's link events, for a device whose link
/// changes on a thread of its own (a control thread, a watch): it keeps
/// the events once the app asked for them and raises them when the link
/// it is told differs from the one it told last.
#[derive(Debug, Default)]
pub struct LinkNotifier {
    events: Mutex<Option<LinkEvents>>,
    told: AtomicBool,
}

impl LinkNotifier {
    /// Raises `events` from now on, the link being `up` now.
    pub fn attach(&self, events: &LinkEvents, up: bool) {
        let mut slot = self.events.lock().unwrap_or_else(|e| e.into_inner());
        self.told.store(up, Ordering::Release);
        *slot = Some(events.clone());
    }

    /// The link is `up` now: raises the events if that changed.
    pub fn note(&self, up: bool) {
        if self.told.swap(up, Ordering::AcqRel) == up {
            return;
        }
        if let Some(e) = self
            .events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            e.raise();
        }
    }
}

impl AsFd for LinkEvents {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// A watch round's wait on an interrupt's eventfd: up to `pace` for a
/// signal; whether one came. A wait that fails returns at once, so it is
/// counted in `failed` and the round sleeps `pace` instead: a
/// [`WatchThread`] reruns its round at once and would spin a CPU.
pub fn watch_wait(fd: &EventFd, pace: Duration, failed: &AtomicU64) -> bool {
    match fd.wait(pace) {
        Ok(n) => n > 0,
        Err(_) => {
            failed.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(pace);
            false
        }
    }
}

/// A thread that watches for a device's link changes: it runs `round`
/// over and over until dropped (the drop waits for the round in
/// progress, so a round must block for a bounded time, say a 100 ms
/// wait on an interrupt's eventfd), and it must also take that time when
/// its wait fails, or the thread spins a CPU ([`watch_wait`] does both).
/// Drivers
/// keep one while their port runs and raise their [`LinkEvents`] from
/// `round`.
pub struct WatchThread {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl WatchThread {
    /// Starts `round` on a thread named `name`. Without a thread (the
    /// system refused one) nothing is watched, and the app's link polls
    /// still see the link.
    pub fn spawn(name: &str, mut round: impl FnMut() + Send + 'static) -> WatchThread {
        let stop = Arc::new(AtomicBool::new(false));
        let quit = stop.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                while !quit.load(Ordering::Relaxed) {
                    round();
                }
            })
            .ok();
        WatchThread { stop, thread }
    }
}

impl Drop for WatchThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// /dev/null polls readable and reads 0 bytes: every wait on it fails
    /// at once, as a broken eventfd's would.
    #[test]
    fn a_failed_watch_wait_is_counted_and_takes_its_pace() {
        let null = std::fs::File::open("/dev/null").unwrap();
        let fd = EventFd::from_fd(null.into());
        assert!(fd.wait(Duration::from_secs(5)).is_err());
        let failed = AtomicU64::new(0);
        let t = std::time::Instant::now();
        for _ in 0..3 {
            assert!(!watch_wait(&fd, Duration::from_millis(20), &failed));
        }
        assert!(
            t.elapsed() >= Duration::from_millis(60),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(failed.load(Ordering::Relaxed), 3);
        let ok = EventFd::new().unwrap();
        ok.signal().unwrap();
        assert!(watch_wait(&ok, Duration::from_millis(20), &failed));
        assert_eq!(failed.load(Ordering::Relaxed), 3);
    }
}
