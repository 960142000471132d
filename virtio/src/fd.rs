//! The rx "call" eventfd as a borrowable fd, for the run loop's sleep:
//! the `vhost` crate speaks `vmm_sys_util::EventFd`, which offers only a
//! raw fd. The one unsafe line outside the descriptor rings.
#![allow(unsafe_code)]

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use vmm_sys_util::eventfd::EventFd;

/// An eventfd the backend writes when it completes RX buffers while
/// interrupts are armed.
pub(crate) struct CallFd(pub(crate) EventFd);

impl AsFd for CallFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the `EventFd` owns the fd and lives as long as `self`,
        // which the returned borrow cannot outlive.
        unsafe { BorrowedFd::borrow_raw(self.0.as_raw_fd()) }
    }
}
