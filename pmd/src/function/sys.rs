//! The system calls behind a PCI function's register windows and
//! interrupts, whoever provides the function: region reads and writes at
//! fd offsets, BAR mappings, eventfds. Every `unsafe` block of
//! `function` is here, each with its reason; the functions themselves are
//! safe to call.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Reads `buf.len()` bytes at `offset` of a device fd (a region access).
pub(crate) fn pread_exact(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<()> {
    // SAFETY: `buf` is valid for writes of its length.
    let n = unsafe {
        libc::pread(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            offset as i64,
        )
    };
    match n {
        n if n < 0 => Err(io::Error::last_os_error()),
        n if n as usize != buf.len() => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("short read: {n} of {} bytes", buf.len()),
        )),
        _ => Ok(()),
    }
}

/// Writes all of `buf` at `offset` of a device fd.
pub(crate) fn pwrite_all(fd: BorrowedFd<'_>, buf: &[u8], offset: u64) -> io::Result<()> {
    // SAFETY: `buf` is valid for reads of its length.
    let n = unsafe {
        libc::pwrite(
            fd.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            offset as i64,
        )
    };
    match n {
        n if n < 0 => Err(io::Error::last_os_error()),
        n if n as usize != buf.len() => Err(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("short write: {n} of {} bytes", buf.len()),
        )),
        _ => Ok(()),
    }
}

/// Maps `size` bytes at `offset` of a device fd (a BAR) shared, read-write.
pub(crate) fn mmap_region(fd: BorrowedFd<'_>, offset: u64, size: usize) -> io::Result<*mut u8> {
    // SAFETY: a fresh mapping anywhere the kernel chooses; it aliases no
    // Rust object. The caller owns it and unmaps it with `munmap_region`.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            offset as i64,
        )
    };
    if p == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(p.cast())
    }
}

/// Unmaps a mapping made by [`mmap_region`].
pub(crate) fn munmap_region(ptr: *mut u8, size: usize) {
    // SAFETY: `ptr..ptr+size` is a mapping from `mmap_region` whose owner
    // is dropping it; no pointer into it survives.
    unsafe { libc::munmap(ptr.cast(), size) };
}

/// A new non-blocking eventfd.
pub(crate) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes no pointers.
    let fd = check(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Waits up to `timeout_ms` for `fd` to become readable; `Ok(false)` on
/// timeout.
pub(crate) fn poll_readable(fd: BorrowedFd<'_>, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = check(unsafe { libc::poll(&mut p, 1, timeout_ms) })?;
    Ok(n > 0)
}

/// Reads an eventfd's counter (resetting it); 0 when it was not signalled.
pub(crate) fn eventfd_read(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut v = 0u64;
    // SAFETY: reads 8 bytes into a live u64.
    let n = unsafe { libc::read(fd.as_raw_fd(), (&raw mut v).cast(), 8) };
    if n == 8 {
        return Ok(v);
    }
    let e = io::Error::last_os_error();
    if n < 0 && e.kind() == io::ErrorKind::WouldBlock {
        Ok(0)
    } else {
        Err(e)
    }
}

/// Adds `v` to an eventfd's counter.
pub(crate) fn eventfd_write(fd: BorrowedFd<'_>, v: u64) -> io::Result<()> {
    // SAFETY: writes 8 bytes from a live u64.
    let n = unsafe { libc::write(fd.as_raw_fd(), (&raw const v).cast(), 8) };
    if n == 8 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
