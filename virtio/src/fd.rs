//! File-descriptor plumbing of virtio-user: the rx "call" eventfd as a
//! borrowable fd, for the run loop's sleep (the `vhost` crate speaks
//! `vmm_sys_util::EventFd`, which offers only a raw fd), and the check
//! that the backend hung up. The only unsafe code outside the descriptor
//! rings.
#![allow(unsafe_code)]

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use vmm_sys_util::eventfd::EventFd;

/// An eventfd signalled when the device completes RX buffers while
/// interrupts are armed: the vhost-user backend's call eventfd, or the
/// MSI-X vector VFIO routes to an eventfd (PCI).
pub(crate) enum CallFd {
    Vhost(EventFd),
    Msix(rpmd_pmd::function::EventFd),
}

impl CallFd {
    /// Consumes what was signalled, so that the next wait blocks.
    pub(crate) fn clear(&self) {
        match self {
            CallFd::Vhost(e) => {
                let _ = e.read();
            }
            CallFd::Msix(e) => {
                let _ = e.take();
            }
        }
    }
}

impl AsFd for CallFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            // SAFETY: the `EventFd` owns the fd and lives as long as
            // `self`, which the returned borrow cannot outlive.
            CallFd::Vhost(e) => unsafe { BorrowedFd::borrow_raw(e.as_raw_fd()) },
            CallFd::Msix(e) => e.as_fd(),
        }
    }
}

/// Whether the peer of socket `fd` hung up, waiting up to `ms`
/// milliseconds (`poll` with POLLRDHUP; other events are left alone, so a
/// reply on its way is not consumed).
pub(crate) fn hung_up(fd: BorrowedFd<'_>, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd, for the duration of the call.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    n == 1 && p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
}

/// Reads what was signalled on eventfd `f` if anything was (a `poll`
/// first, so an fd another process owns need not be non-blocking);
/// whether there was.
pub(crate) fn drain_eventfd(f: &std::fs::File) -> bool {
    use std::io::Read;
    let mut p = libc::pollfd {
        fd: f.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, for the duration of the call.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    if n != 1 || p.revents & libc::POLLIN == 0 {
        return false;
    }
    let mut b = [0u8; 8];
    let mut r: &std::fs::File = f;
    r.read(&mut b).is_ok()
}

/// Copies up to `buf.len()` bytes waiting on stream socket `s` without
/// consuming them (`MSG_PEEK`; any descriptors passed with them stay
/// queued too); blocks until some arrive, as the read that follows would
/// (an idle frontend is no fault; the port's drop shuts the socket down,
/// which ends the wait). Returns how many were copied, 0 at end of stream
/// or on an error (which the next read reports).
pub(crate) fn peek(s: &std::os::unix::net::UnixStream, buf: &mut [u8]) -> usize {
    loop {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the
        // duration of the call; the fd is borrowed from a live socket.
        let n = unsafe {
            libc::recv(
                s.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_PEEK,
            )
        };
        if n >= 0 {
            return n as usize;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return 0;
        }
    }
}

/// As [`peek`], and then, while fewer than `want` bytes are queued (a
/// message whose body has not arrived with its header), peeks again
/// every millisecond for at most `limit`, or until the peer hangs up.
/// Returns how many were copied.
pub(crate) fn peek_at_least(
    s: &std::os::unix::net::UnixStream,
    buf: &mut [u8],
    want: usize,
    limit: std::time::Duration,
) -> usize {
    let start = std::time::Instant::now();
    let mut n = peek(s, buf);
    while n < want.min(buf.len()) && n > 0 && start.elapsed() < limit {
        // The millisecond's wait, ended early by a hang-up.
        if hung_up(s.as_fd(), 1) {
            return peek(s, buf);
        }
        n = peek(s, buf);
    }
    n
}

/// Checks that `f`, an fd a vhost-user frontend handed over for a kick or
/// a call, is an eventfd (as Linux's vhost requires), and makes it
/// non-blocking: the data path writes calls into it, and a write into an
/// eventfd whose count the frontend pushed near its limit would otherwise
/// block the lcore (and every port on it) until the frontend reads.
/// QEMU's and DPDK's eventfds are non-blocking already.
pub(crate) fn peer_eventfd(f: &std::fs::File) -> Result<(), String> {
    let fd = f.as_raw_fd();
    let kind = std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|e| format!("unknown ({e})"));
    if kind != "anon_inode:[eventfd]" {
        return Err(format!("fd is {kind}, not an eventfd"));
    }
    // SAFETY: fcntl on an fd `f` owns, with no pointer arguments.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(format!(
            "making the eventfd non-blocking: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Adds 1 to a peer's eventfd (checked by [`peer_eventfd`], so it never
/// blocks); false if the write failed (the count at its limit).
#[inline]
pub(crate) fn signal_eventfd(f: &std::fs::File) -> bool {
    use std::io::Write;
    let mut w: &std::fs::File = f;
    w.write(&1u64.to_ne_bytes()).is_ok()
}
