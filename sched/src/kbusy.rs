//! Kernel busy polling as an idle lcore's sleep, the policy beside the
//! spin budget for ports whose device the kernel drives (AF_XDP sockets,
//! `rpmd_kernel`).
//!
//! With [`KernelBusyPoll`] in the lcore's configuration, the lcore sleeps
//! in `epoll_pwait2` on an epoll instance whose busy-poll parameters are
//! set (`EPIOCSPARAMS`, Linux 6.9): before it blocks, the kernel runs the
//! NAPI poll of the device behind the sockets it waits on, in this
//! thread, for up to `usecs`, and returns as soon as one is readable. So a
//! frame that arrives during that window is picked up by the lcore's own
//! call into the kernel rather than by an interrupt, softirq and wake-up,
//! which is the loop Linux's busy-poll patches (and seed 000's) tune. With
//! `prefer`, the kernel also holds back its own softirq processing of that
//! device while the application keeps polling (`SO_PREFER_BUSY_POLL`'s
//! epoll counterpart). Where the kernel has no such parameters, the lcore
//! says so once and sleeps as it would without them.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// The kernel busy-poll parameters of an lcore's sleep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelBusyPoll {
    /// How long the kernel polls the device before it blocks (µs).
    pub usecs: u32,
    /// Most packets per NAPI poll (the socket option's budget; 64 is
    /// NAPI's own).
    pub budget: u16,
    /// Ask the kernel to leave the device to us while we poll.
    pub prefer: bool,
}

/// An epoll instance with busy polling, and the fds it holds.
pub(crate) struct BusySleep {
    params: KernelBusyPoll,
    ep: OwnedFd,
    fds: Vec<RawFd>,
    events: Vec<libc::epoll_event>,
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn epoll(p: &KernelBusyPoll) -> io::Result<OwnedFd> {
    // SAFETY: a plain system call; a non-negative result is a new fd.
    let fd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
    // SAFETY: the fd was just created and is owned by nobody else.
    let ep = unsafe { OwnedFd::from_raw_fd(fd) };
    let params = libc::epoll_params {
        busy_poll_usecs: p.usecs,
        busy_poll_budget: p.budget,
        prefer_busy_poll: p.prefer as u8,
        __pad: 0,
    };
    // SAFETY: EPIOCSPARAMS reads one epoll_params, which `params` is.
    check(unsafe { libc::ioctl(ep.as_raw_fd(), libc::EPIOCSPARAMS, &params) })?;
    Ok(ep)
}

impl BusySleep {
    /// An epoll instance with `p` applied; an error where the kernel has
    /// no per-epoll busy polling (before 6.9) or refuses the values.
    pub(crate) fn new(p: KernelBusyPoll) -> io::Result<BusySleep> {
        Ok(BusySleep {
            params: p,
            ep: epoll(&p)?,
            fds: Vec::with_capacity(8),
            events: vec![libc::epoll_event { events: 0, u64: 0 }; 8],
        })
    }

    /// Sleeps until one of `fds` is readable or `timeout` passes, the
    /// kernel busy-polling their devices first. The set is registered
    /// again (a fresh instance) when it differs from the last one, or
    /// when `changed` says the tasks changed (an fd number may now name
    /// another file). An fd that reports an error or hang-up with nothing
    /// to read is added to `failed`.
    pub(crate) fn sleep(
        &mut self,
        fds: &[RawFd],
        changed: bool,
        timeout: Duration,
        failed: &mut Vec<RawFd>,
    ) {
        if changed || self.fds != fds {
            if let Ok(ep) = epoll(&self.params) {
                self.ep = ep;
            }
            self.fds.clear();
            for &fd in fds {
                let mut ev = libc::epoll_event {
                    events: libc::EPOLLIN as u32,
                    u64: fd as u64,
                };
                // SAFETY: `fd` is an open fd the lcore's tasks (or the lcore
                // itself) own for as long as they are registered; `ev` is valid.
                unsafe { libc::epoll_ctl(self.ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
                self.fds.push(fd);
            }
            self.events
                .resize(fds.len().max(1), libc::epoll_event { events: 0, u64: 0 });
        }
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: `events` has room for the count passed; `ts` is valid; no
        // signal mask.
        let n = unsafe {
            libc::epoll_pwait2(
                self.ep.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.len() as i32,
                &ts,
                std::ptr::null(),
            )
        };
        let bad = (libc::EPOLLERR | libc::EPOLLHUP) as u32;
        for ev in self.events.iter().take(n.max(0) as usize) {
            let (events, fd) = (ev.events, ev.u64 as RawFd);
            if events & bad != 0 && events & libc::EPOLLIN as u32 == 0 {
                failed.push(fd);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rpmd_pmd::function::EventFd;
    use std::os::fd::AsFd;
    use std::time::Instant;

    #[test]
    fn sleeps_until_readable_or_timeout() {
        let p = KernelBusyPoll {
            usecs: 20,
            budget: 64,
            prefer: true,
        };
        let mut b = match BusySleep::new(p) {
            Ok(b) => b,
            Err(e) => {
                let why = format!(
                    "no per-epoll busy polling in this kernel ({e}; EPIOCSPARAMS needs Linux 6.9)"
                );
                rpmd_pmd::testing::missing_capability(
                    "kbusy::sleeps_until_readable_or_timeout",
                    &why,
                );
                return;
            }
        };
        let e = EventFd::new().unwrap();
        let fds = [e.as_fd().as_raw_fd()];
        let t = Instant::now();
        b.sleep(&fds, false, Duration::from_millis(30), &mut Vec::new());
        assert!(
            t.elapsed() >= Duration::from_millis(25),
            "timed out, not woken"
        );
        e.signal().unwrap();
        let t = Instant::now();
        b.sleep(&fds, false, Duration::from_secs(5), &mut Vec::new());
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "woken by the readable fd"
        );
    }
}
