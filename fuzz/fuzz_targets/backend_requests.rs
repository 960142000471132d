//! The vhost-user backend's control side as a hostile frontend drives it:
//! a sequence of messages whose request codes, flags, sizes and bodies the
//! fuzzer chooses (region tables, ring sizes and addresses, vring indices,
//! features, config ranges), some with a shared-memory fd or an eventfd
//! attached, sent down a socket the backend serves
//! (`device::testing::serve_frontend`, the port's own handler). It must
//! refuse what is wrong with a reason, never panic and never hang: the
//! frontend's end is shut after the last message, so the backend must
//! come back once it has read them.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rpmd_pmd::{DmaRegion, IovaMode, PageSize};
use rpmd_virtio::device::testing::serve_frontend;
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::OnceLock;
use vmm_sys_util::eventfd::EventFd;
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

/// A region to hand over as guest memory, and an eventfd to hand over as
/// kick, call or error fd, made once.
fn fds() -> &'static (DmaRegion, EventFd) {
    static F: OnceLock<(DmaRegion, EventFd)> = OnceLock::new();
    F.get_or_init(|| {
        let r = DmaRegion::with_page_size("fz-req", 1 << 20, IovaMode::Va, PageSize::Base4K)
            .expect("guest memory");
        (r, EventFd::new(libc::EFD_NONBLOCK).expect("eventfd"))
    })
}

/// Sends the messages `msgs` describes down `ours`, then shuts its write
/// side: [request, flags, body length, fds, body...]. The length in the
/// header is the body's, except that flag bit 6 makes it the raw byte (a
/// size that lies).
fn send_messages(ours: &UnixStream, msgs: &[u8]) {
    let (mem, ev) = fds();
    let mut rest = msgs;
    while let [req, flags, len, nfd, tail @ ..] = rest {
        let n = (*len as usize).min(tail.len());
        let size = if flags & 0x40 != 0 {
            *len as u32
        } else {
            n as u32
        };
        let mut m = Vec::with_capacity(12 + n);
        m.extend_from_slice(&(*req as u32 % 48).to_le_bytes());
        m.extend_from_slice(&(0x1 | (*flags as u32 & 0x8)).to_le_bytes());
        m.extend_from_slice(&size.to_le_bytes());
        m.extend_from_slice(&tail[..n]);
        let raw = match nfd % 4 {
            1 => vec![mem.fd().as_raw_fd()],
            2 => vec![ev.as_raw_fd()],
            3 => vec![mem.fd().as_raw_fd(), ev.as_raw_fd()],
            _ => Vec::new(),
        };
        if ours.send_with_fds(&[&m[..]], &raw).is_err() {
            break;
        }
        rest = &tail[n..];
    }
    let _ = ours.shutdown(Shutdown::Write);
}

fuzz_target!(|data: &[u8]| {
    let [pairs, msgs @ ..] = data else { return };
    let _ = fds();
    let (ours, theirs) = UnixStream::pair().expect("socket pair");
    let replies = ours.try_clone().expect("socket clone");
    std::thread::scope(|s| {
        // The frontend sends while the backend reads (more than a socket
        // buffer must not wait on itself), and its replies are read and
        // dropped, as a frontend that waits for none.
        let sender = s.spawn(|| send_messages(&ours, msgs));
        let reader = s.spawn(move || {
            let mut sink = [0u8; 4096];
            while matches!(std::io::Read::read(&mut &replies, &mut sink), Ok(n) if n > 0) {}
        });
        // Refused or not, the backend returns once the messages are read.
        let _why = serve_frontend(theirs, (*pairs % 4) as u16 + 1);
        // Joined, so that the threads are gone (thread-locals freed) before
        // the leak check, not only done with their closures.
        let _ = sender.join();
        let _ = reader.join();
    });
});
