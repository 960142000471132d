//! [`EventFd`]: how a PCI function's interrupts (MSI-X vectors through
//! VFIO, or a device model's) and the run loop's wake-ups reach a thread.
use super::sys;
use crate::Error;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

/// An eventfd signalled by an interrupt.
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    /// A new, non-blocking eventfd.
    pub fn new() -> Result<Self, Error> {
        sys::eventfd()
            .map(EventFd)
            .map_err(|e| Error::io("eventfd", e))
    }

    /// An eventfd made elsewhere: a duplicate of a queue's
    /// [`interrupt_fd`](crate::port::RxQueue::interrupt_fd), to wait on it
    /// as the run loop does. `fd` must be an eventfd.
    pub fn from_fd(fd: OwnedFd) -> Self {
        EventFd(fd)
    }

    /// A second handle on the same eventfd (a device model keeps one to
    /// signal, a queue hands one to the run loop).
    pub fn try_clone(&self) -> Result<Self, Error> {
        self.0
            .try_clone()
            .map(EventFd)
            .map_err(|e| Error::io("dup eventfd", e))
    }

    /// Waits up to `timeout` for a signal; returns the count consumed, or
    /// `Ok(0)` on timeout.
    pub fn wait(&self, timeout: Duration) -> Result<u64, Error> {
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        let ready =
            sys::poll_readable(self.0.as_fd(), ms).map_err(|e| Error::io("poll eventfd", e))?;
        if !ready {
            return Ok(0);
        }
        self.take()
    }

    /// Consumes pending signals without waiting; `Ok(0)` if none.
    pub fn take(&self) -> Result<u64, Error> {
        sys::eventfd_read(self.0.as_fd()).map_err(|e| Error::io("read eventfd", e))
    }

    /// Signals it (as a device interrupt would), for tests and wake-ups.
    pub fn signal(&self) -> Result<(), Error> {
        sys::eventfd_write(self.0.as_fd(), 1).map_err(|e| Error::io("write eventfd", e))
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}
