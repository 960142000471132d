//! The system calls and shared mappings of kernel-attached ports: the
//! crate's `unsafe`, each block with its reason. Everything above this
//! module is safe code over [`Mapping`] (bounds-checked volatile and
//! atomic access to memory the kernel also writes) and plain fds.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::mem::{size_of, MaybeUninit};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicU32;

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// `socket(2)`, close-on-exec.
pub(crate) fn socket(
    domain: libc::c_int,
    ty: libc::c_int,
    proto: libc::c_int,
) -> io::Result<OwnedFd> {
    // SAFETY: plain system call; a non-negative result is a new fd we own.
    let fd = check(unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) })?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens a character device read-write, close-on-exec.
pub(crate) fn open_rw(path: &str) -> io::Result<OwnedFd> {
    let c = CString::new(path).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a NUL-terminated path; the result is a new fd or -1.
    let fd = check(unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) })?;
    // SAFETY: as in `socket`.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(2)` with a plain-data value.
pub(crate) fn setsockopt<T: Copy>(
    fd: BorrowedFd<'_>,
    level: i32,
    name: i32,
    v: &T,
) -> io::Result<()> {
    // SAFETY: `v` points to `size_of::<T>()` readable bytes for the call.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (v as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// `getsockopt(2)` into a plain-data value (zeroed first, so a shorter
/// answer from an older kernel leaves the rest zero); also the length the
/// kernel wrote.
pub(crate) fn getsockopt<T: Copy>(
    fd: BorrowedFd<'_>,
    level: i32,
    name: i32,
) -> io::Result<(T, usize)> {
    let mut v = MaybeUninit::<T>::zeroed();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `v` has room for `len` bytes; the kernel writes at most that.
    check(unsafe {
        libc::getsockopt(fd.as_raw_fd(), level, name, v.as_mut_ptr().cast(), &mut len)
    })?;
    // SAFETY: zero-initialised plain data (the callers' T are C structs of
    // integers, for which every bit pattern is valid), partly overwritten.
    Ok((unsafe { v.assume_init() }, len as usize))
}

/// `bind(2)` to a socket address of type `T` (`sockaddr_xdp`, `sockaddr_ll`).
pub(crate) fn bind<T: Copy>(fd: BorrowedFd<'_>, addr: &T) -> io::Result<()> {
    // SAFETY: `addr` is a valid socket address structure of its size.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (addr as *const T).cast(),
            size_of::<T>() as u32,
        )
    })
    .map(drop)
}

/// A zero-length non-blocking `sendto(2)`: how AF_XDP and TPACKET TX rings
/// are kicked. Errors the kernel uses for "busy, try later" are not errors.
pub(crate) fn kick_send(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: no buffer or address is passed.
    let r = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::ENETDOWN | libc::EINTR) => {
                Ok(())
            }
            _ => Err(e),
        };
    }
    Ok(())
}

/// A zero-length non-blocking `recvfrom(2)`: wakes AF_XDP's RX path (the
/// fill ring's need_wakeup) and, with SO_PREFER_BUSY_POLL, busy-polls the
/// device's NAPI context in the kernel.
pub(crate) fn kick_recv(fd: BorrowedFd<'_>) {
    // SAFETY: no buffer or address is passed; the result is only a hint.
    unsafe {
        libc::recvfrom(
            fd.as_raw_fd(),
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
}

/// `read(2)` of one frame from a TAP fd.
pub(crate) fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is writable for its length.
    let r = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// `writev(2)` of one frame to a TAP fd.
pub(crate) fn writev(fd: BorrowedFd<'_>, parts: &[io::IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: IoSlice is ABI-compatible with iovec; each part is readable.
    let r = unsafe { libc::writev(fd.as_raw_fd(), parts.as_ptr().cast(), parts.len() as i32) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// `poll(2)` for readability; true when `fd` became readable in time.
pub(crate) fn poll_in(fd: BorrowedFd<'_>, timeout_ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    r > 0 && p.revents & libc::POLLIN != 0
}

/// An `ifreq` naming `ifname` (at most 15 bytes, checked by the caller).
pub(crate) fn ifreq(ifname: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain C data; all zeroes is a valid value.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in r
        .ifr_name
        .iter_mut()
        .zip(ifname.bytes().take(libc::IFNAMSIZ - 1))
    {
        *d = s as libc::c_char;
    }
    r
}

/// An interface ioctl (`SIOC[GS]IF*`, `TUNSETIFF`) on `fd`.
pub(crate) fn ioctl_ifreq(
    fd: BorrowedFd<'_>,
    req: libc::c_ulong,
    r: &mut libc::ifreq,
) -> io::Result<()> {
    // SAFETY: every request used with it reads and writes one `ifreq`.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), req as _, r as *mut libc::ifreq) }).map(drop)
}

/// Reads the short flags of an answered `ifreq`.
pub(crate) fn ifreq_flags(r: &libc::ifreq) -> i16 {
    // SAFETY: the union's members are all plain data; flags is the member
    // SIOCGIFFLAGS writes.
    unsafe { r.ifr_ifru.ifru_flags }
}

/// Sets the short flags of an `ifreq`.
pub(crate) fn set_ifreq_flags(r: &mut libc::ifreq, f: i16) {
    r.ifr_ifru.ifru_flags = f;
}

/// Reads the int member (MTU) of an answered `ifreq`.
pub(crate) fn ifreq_int(r: &libc::ifreq) -> i32 {
    // SAFETY: as in `ifreq_flags`; SIOCGIFMTU writes the int member.
    unsafe { r.ifr_ifru.ifru_mtu }
}

/// Sets the int member (MTU) of an `ifreq`.
pub(crate) fn set_ifreq_int(r: &mut libc::ifreq, v: i32) {
    r.ifr_ifru.ifru_mtu = v;
}

/// Reads the hardware address of an answered SIOCGIFHWADDR.
pub(crate) fn ifreq_hwaddr(r: &libc::ifreq) -> [u8; 6] {
    // SAFETY: as in `ifreq_flags`; SIOCGIFHWADDR writes the sockaddr.
    let sa = unsafe { r.ifr_ifru.ifru_hwaddr };
    std::array::from_fn(|i| sa.sa_data[i] as u8)
}

/// `if_nametoindex(3)`; 0 when there is no such interface.
pub(crate) fn ifindex(ifname: &str) -> u32 {
    let Ok(c) = CString::new(ifname) else {
        return 0;
    };
    // SAFETY: `c` is NUL-terminated.
    unsafe { libc::if_nametoindex(c.as_ptr()) }
}

/// A shared mapping of memory the kernel also reads and writes (a socket's
/// rings). Access goes through bounds-checked volatile copies and atomics,
/// never through references to the bytes, since the kernel may write them
/// at any time.
pub(crate) struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; every access is an atomic or
// a volatile copy, and the queue handles that use it keep to the ring
// protocol (one producer, one consumer per ring).
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` at `offset`, shared, populated.
    pub(crate) fn new(fd: BorrowedFd<'_>, len: usize, offset: u64) -> io::Result<Mapping> {
        // SAFETY: a fresh mapping at an address the kernel picks; nothing
        // else refers to it yet.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { ptr: p.cast(), len })
    }

    /// Bytes mapped.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    fn at(&self, off: usize, n: usize, align: usize) -> *mut u8 {
        assert!(
            off.checked_add(n).is_some_and(|e| e <= self.len) && off % align == 0,
            "mapping access out of bounds"
        );
        self.ptr.wrapping_add(off)
    }

    /// The 32-bit word at `off` (4-aligned), as an atomic.
    #[inline(always)]
    pub(crate) fn atomic_u32(&self, off: usize) -> &AtomicU32 {
        let p = self.at(off, 4, 4);
        // SAFETY: in bounds and aligned (checked), valid for the mapping's
        // life, which `&self` bounds; atomics may alias the kernel's
        // concurrent accesses.
        unsafe { AtomicU32::from_ptr(p.cast()) }
    }

    /// Reads a plain value at `off` (aligned for `T`) as it is now.
    #[inline(always)]
    pub(crate) fn read<T: Copy>(&self, off: usize) -> T {
        let p = self.at(off, size_of::<T>(), std::mem::align_of::<T>());
        // SAFETY: in bounds and aligned; T is plain integer data.
        unsafe { p.cast::<T>().read_volatile() }
    }

    /// Writes a plain value at `off` (aligned for `T`).
    #[inline(always)]
    pub(crate) fn write<T: Copy>(&self, off: usize, v: T) {
        let p = self.at(off, size_of::<T>(), std::mem::align_of::<T>());
        // SAFETY: in bounds and aligned; the ring protocol gives us this
        // slot.
        unsafe { p.cast::<T>().write_volatile(v) }
    }

    /// Copies `dst.len()` bytes from `off`.
    #[inline(always)]
    pub(crate) fn copy_out(&self, off: usize, dst: &mut [u8]) {
        let p = self.at(off, dst.len(), 1);
        // SAFETY: in bounds; the ring protocol hands us these bytes (the
        // kernel does not write them until we give the slot back).
        unsafe { std::ptr::copy_nonoverlapping(p, dst.as_mut_ptr(), dst.len()) }
    }

    /// Copies `src` to `off`.
    #[inline(always)]
    pub(crate) fn copy_in(&self, off: usize, src: &[u8]) {
        let p = self.at(off, src.len(), 1);
        // SAFETY: in bounds; the slot is ours until we hand it to the kernel.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), p, src.len()) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once; no reference into it
        // outlives `self`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// The raw fd, for the XSKMAP entry.
pub(crate) fn raw(fd: &OwnedFd) -> RawFd {
    fd.as_raw_fd()
}

/// Sets O_NONBLOCK on `fd`.
pub(crate) fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: fcntl on a valid fd with integer arguments.
    let f = check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    // SAFETY: as above.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, f | libc::O_NONBLOCK) }).map(drop)
}

/// Moves the calling thread into the network namespace `ns` (setns(2)).
pub(crate) fn enter_netns(ns: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: setns on the calling thread with a namespace fd; affects only
    // this thread's network namespace.
    check(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}

/// An anonymous shared file of `len` bytes: the unit tests' stand-in for
/// a socket's ring memory, mapped twice (our side and the "kernel's").
#[cfg(test)]
pub(crate) fn memfd(len: usize) -> OwnedFd {
    // SAFETY: memfd_create with a NUL-terminated name; the result is a new
    // fd we own, sized with ftruncate below.
    let fd = check(unsafe { libc::memfd_create(c"rpmd-test-ring".as_ptr(), libc::MFD_CLOEXEC) })
        .expect("memfd");
    // SAFETY: as in `socket`.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate on our own fd.
    check(unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) }).expect("ftruncate");
    fd
}
