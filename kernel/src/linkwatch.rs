//! Link events of a kernel interface from the kernel's own notices:
//! rtnetlink's link group (`RTMGRP_LINK`), which announces every change of
//! an interface's flags, carrier and existence (`RTM_NEWLINK`,
//! `RTM_DELLINK`). A thread per watched port reads the socket and raises
//! the port's [`LinkEvents`] for messages naming its interface (and when
//! the kernel dropped messages for want of room, since one may have been
//! ours).
use crate::sys;
use rpmd_pmd::port::LinkEvents;
use rpmd_pmd::Error;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// `RTM_NEWLINK` and `RTM_DELLINK` (linux/rtnetlink.h).
const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;
/// `RTMGRP_LINK` (linux/rtnetlink.h).
const RTMGRP_LINK: u32 = 1;
/// `struct nlmsghdr`: length, type, flags, sequence, port id.
const NLMSG_HDRLEN: usize = 16;
/// `struct ifinfomsg`'s `ifi_index`, after family, pad and type.
const IFI_INDEX: usize = 4;
/// How often the thread looks at its quit flag.
const POLL_MS: i32 = 100;

/// `struct sockaddr_nl`.
#[repr(C)]
#[derive(Clone, Copy)]
struct SockaddrNl {
    family: u16,
    pad: u16,
    pid: u32,
    groups: u32,
}

/// A running watch; stops (and joins its thread) when dropped.
pub(crate) struct LinkWatch {
    quit: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LinkWatch {
    /// Watches interface `ifindex` (in the calling thread's network
    /// namespace) and raises `events` on its changes.
    pub(crate) fn start(port: &str, ifindex: u32, events: LinkEvents) -> Result<LinkWatch, Error> {
        let err = |what: &str, e: std::io::Error| crate::netdev::driver(port, what, e);
        let fd = sys::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE)
            .map_err(|e| err("a netlink socket for link events", e))?;
        let addr = SockaddrNl {
            family: libc::AF_NETLINK as u16,
            pad: 0,
            pid: 0,
            groups: RTMGRP_LINK,
        };
        sys::bind(fd.as_fd(), &addr).map_err(|e| err("joining rtnetlink's link group", e))?;
        let quit = Arc::new(AtomicBool::new(false));
        let q = quit.clone();
        let thread = std::thread::Builder::new()
            .name("rpmd-linkwatch".into())
            .spawn(move || run(fd, ifindex, events, q))
            .map_err(|e| err("the link-event thread", e))?;
        Ok(LinkWatch {
            quit,
            thread: Some(thread),
        })
    }
}

impl Drop for LinkWatch {
    fn drop(&mut self) {
        self.quit.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(fd: OwnedFd, ifindex: u32, events: LinkEvents, quit: Arc<AtomicBool>) {
    let mut buf = vec![0u8; 16 * 1024];
    while !quit.load(Ordering::Relaxed) {
        if !sys::poll_in(fd.as_fd(), POLL_MS) {
            continue;
        }
        match sys::read(fd.as_fd(), &mut buf) {
            Ok(n) if names(&buf[..n], ifindex) => events.raise(),
            Ok(_) => {}
            // The kernel dropped notices (the socket's buffer was full):
            // ours may have been among them.
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => events.raise(),
            Err(_) => {}
        }
    }
}

/// Whether the netlink messages in `buf` include a link message about
/// interface `ifindex`. Lengths are the kernel's; a short or overlong
/// one ends the walk.
fn names(buf: &[u8], ifindex: u32) -> bool {
    let mut off = 0;
    while let Some(hdr) = buf.get(off..off + NLMSG_HDRLEN) {
        let len = u32::from_ne_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]) as usize;
        let ty = u16::from_ne_bytes([hdr[4], hdr[5]]);
        if len < NLMSG_HDRLEN || off + len > buf.len() {
            return false;
        }
        let at = off + NLMSG_HDRLEN + IFI_INDEX;
        if matches!(ty, RTM_NEWLINK | RTM_DELLINK) && at + 4 <= off + len {
            let i = &buf[at..at + 4];
            if i32::from_ne_bytes([i[0], i[1], i[2], i[3]]) as u32 == ifindex {
                return true;
            }
        }
        // NLMSG_ALIGN: messages start on four-byte boundaries.
        off += (len + 3) & !3;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(ty: u16, index: i32) -> Vec<u8> {
        let mut m = vec![0u8; NLMSG_HDRLEN + 16];
        let len = m.len() as u32;
        m[..4].copy_from_slice(&len.to_ne_bytes());
        m[4..6].copy_from_slice(&ty.to_ne_bytes());
        m[NLMSG_HDRLEN + IFI_INDEX..NLMSG_HDRLEN + IFI_INDEX + 4]
            .copy_from_slice(&index.to_ne_bytes());
        m
    }

    #[test]
    fn only_link_messages_about_the_interface_count() {
        let mut buf = msg(RTM_NEWLINK, 3);
        buf.extend(msg(RTM_DELLINK, 7));
        assert!(names(&buf, 7) && names(&buf, 3));
        assert!(!names(&buf, 5));
        assert!(!names(&msg(20, 7), 7), "an address message");
        let mut short = msg(RTM_NEWLINK, 7);
        short[..4].copy_from_slice(&8u32.to_ne_bytes());
        assert!(!names(&short, 7), "a length below the header ends the walk");
        assert!(!names(&buf[..20], 3), "a truncated message");
    }
}
