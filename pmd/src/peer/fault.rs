//! Surviving a peer that shrinks a file under one of our mappings.
//!
//! Touching a shared mapping past the end of its file raises SIGBUS, and
//! SIGBUS kills the process: a vhost-user frontend that truncates the
//! memfd it shared would take every port of the app with it. The file's
//! size is checked when it is mapped, and a memfd that allows sealing is
//! sealed against shrinking then ([`seal_against_shrinking`]); what cannot
//! be sealed (a hugetlbfs file, a memfd made without `MFD_ALLOW_SEALING`)
//! is watched instead.
//!
//! Each mapping of a peer's is entered in a fixed table ([`Watched`]). A
//! SIGBUS handler, installed with the first entry, looks the faulting
//! address up: inside a watched mapping, it maps anonymous zeroed memory
//! over the whole mapping (the faulting access is then retried, and
//! succeeds on memory no longer shared with anyone) and counts the fault;
//! the mapping's owner sees the count ([`Watched::faulted`]) and drops the
//! peer. Anywhere else the fault goes to the handler installed before
//! (Rust's own, for stack overflows), or to the default action: a SIGBUS
//! that is not ours ends the process as it always did.
//!
//! The handler reads only atomics and makes two system calls (`mmap`, and
//! `sigaction` to restore the default): nothing that allocates or locks.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};

/// Peer mappings watched at once: every port's regions together (a
/// vhost-user frontend has at most 32).
const SLOTS: usize = 1024;

const PAGE: usize = 4096;

struct Slot {
    taken: AtomicBool,
    /// The mapping's first page; 0 while the slot is not published.
    start: AtomicUsize,
    len: AtomicUsize,
    faults: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)] // a template for the array
const FREE: Slot = Slot {
    taken: AtomicBool::new(false),
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    faults: AtomicU64::new(0),
};

static TABLE: [Slot; SLOTS] = [FREE; SLOTS];

/// The SIGBUS action before ours, to pass on faults that are not ours.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();
static INSTALL: Once = Once::new();

/// A peer mapping entered in the table; leaves it when dropped (before
/// the mapping is unmapped: the owner drops it first).
#[derive(Debug)]
pub(crate) struct Watched {
    slot: usize,
}

impl Watched {
    /// Watches the `len` bytes at `ptr`; `None` when the table is full
    /// (the mapping is then unwatched, as every mapping was before).
    pub(crate) fn new(ptr: *mut u8, len: usize) -> Option<Watched> {
        install();
        let start = ptr as usize & !(PAGE - 1);
        let len = (ptr as usize - start + len).div_ceil(PAGE) * PAGE;
        let slot = TABLE.iter().position(|s| {
            s.taken
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })?;
        let s = &TABLE[slot];
        s.faults.store(0, Ordering::Relaxed);
        s.len.store(len, Ordering::Relaxed);
        // Partner: the handler's Acquire load of `start` (it then sees
        // `len`).
        s.start.store(start, Ordering::Release);
        Some(Watched { slot })
    }

    /// Whether an access faulted past the end of the file (the mapping
    /// now holds private zeroes).
    pub(crate) fn faulted(&self) -> bool {
        TABLE[self.slot].faults.load(Ordering::Acquire) != 0
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let s = &TABLE[self.slot];
        s.start.store(0, Ordering::Release);
        s.taken.store(false, Ordering::Release);
    }
}

/// Adds `F_SEAL_SHRINK` to a memfd that allows seals and has not got it
/// (nothing can then make the file shorter, the peer included); whether
/// the file is now sealed against shrinking. Files without seals
/// (hugetlbfs, a memfd made without `MFD_ALLOW_SEALING`) answer false.
pub(crate) fn seal_against_shrinking(fd: BorrowedFd<'_>) -> bool {
    // SAFETY: fcntl on a valid fd, with no pointer arguments.
    let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    if seals < 0 {
        return false;
    }
    if seals & libc::F_SEAL_SHRINK != 0 {
        return true;
    }
    if seals & libc::F_SEAL_SEAL != 0 {
        return false;
    }
    // SAFETY: as above.
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) == 0 }
}

fn install() {
    INSTALL.call_once(|| {
        // SAFETY: a zeroed sigaction is a valid value (no handler, empty
        // mask); `sigaction` reads and writes the two valid structs we
        // give it. The handler is async-signal-safe (see the module doc).
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) != 0 {
                return;
            }
            let _ = PREVIOUS.set(old);
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_sigbus as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(libc::SIGBUS, &act, std::ptr::null_mut());
        }
    });
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel hands a SA_SIGINFO handler a valid siginfo.
    let addr = unsafe { (*info).si_addr() } as usize;
    for s in &TABLE {
        let start = s.start.load(Ordering::Acquire);
        let len = s.len.load(Ordering::Relaxed);
        if start == 0 || addr < start || addr - start >= len {
            continue;
        }
        // SAFETY: `start..start + len` is one of our peer mappings (its
        // owner keeps it mapped while it is in the table, and the access
        // that faulted is the owner's); replacing it with private
        // anonymous memory of the same size changes what it holds, not
        // whether it is mapped.
        let p = unsafe {
            libc::mmap(
                start as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            // Partner: `Watched::faulted`'s Acquire load.
            s.faults.fetch_add(1, Ordering::Release);
            return;
        }
        break;
    }
    pass_on(sig, info, ctx);
}

/// Hands a fault that is not ours to the action there was before ours:
/// its handler, or the default (restored, so that the access faults again
/// and the process ends as it would have without us).
fn pass_on(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let old = PREVIOUS.get();
    let handler = old.map_or(libc::SIG_DFL, |o| o.sa_sigaction);
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // SAFETY: a zeroed sigaction with SIG_DFL is valid; sigaction is
        // async-signal-safe.
        unsafe {
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &dfl, std::ptr::null_mut());
        }
        return;
    }
    let flags = old.map_or(0, |o| o.sa_flags);
    // SAFETY: `handler` is the address of the handler that was installed
    // for SIGBUS, of the type its flags say; it is called as the kernel
    // would have called it.
    unsafe {
        if flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(handler);
            f(sig, info, ctx);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
            f(sig);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memfd(flags: libc::c_uint) -> std::fs::File {
        use std::os::fd::FromRawFd;
        // SAFETY: a valid NUL-terminated name; the fd returned is ours.
        let fd = unsafe { libc::memfd_create(c"rpmd-fault-test".as_ptr(), flags) };
        assert!(fd >= 0);
        // SAFETY: `fd` is a fresh fd nothing else owns.
        unsafe { std::fs::File::from_raw_fd(fd) }
    }

    #[test]
    fn a_shrunk_file_faults_into_private_zeroes_not_the_process() {
        use std::os::fd::AsFd;
        let f = memfd(libc::MFD_CLOEXEC);
        f.set_len(64 << 10).unwrap();
        assert!(
            !seal_against_shrinking(f.as_fd()),
            "no seals without ALLOW_SEALING"
        );
        let map = memmap2::MmapOptions::new()
            .len(64 << 10)
            .map_raw(&f)
            .unwrap();
        let w = Watched::new(map.as_mut_ptr(), 64 << 10).unwrap();
        // SAFETY: inside the mapping, while the file is long enough.
        unsafe { map.as_mut_ptr().add(100).write_volatile(7) };
        assert!(!w.faulted());
        f.set_len(0).unwrap();
        // SAFETY: inside the mapping; past the file's end now, which the
        // handler turns into private memory.
        let v = unsafe { map.as_mut_ptr().add(40 << 10).read_volatile() };
        assert_eq!(v, 0);
        assert!(w.faulted());
        // SAFETY: as above; the whole mapping was replaced.
        unsafe { map.as_mut_ptr().add(100).write_volatile(9) };
        drop(w);
    }

    #[test]
    fn a_memfd_that_allows_seals_is_sealed_against_shrinking() {
        use std::os::fd::AsFd;
        let f = memfd(libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING);
        f.set_len(8192).unwrap();
        assert!(seal_against_shrinking(f.as_fd()));
        assert!(seal_against_shrinking(f.as_fd()), "twice is fine");
        assert!(f.set_len(4096).is_err(), "shrinking refused");
        f.set_len(16384).unwrap();
    }
}
