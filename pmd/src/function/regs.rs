//! [`Regs`]: the one way rpmd touches device registers.
//!
//! A `Regs` is a window onto a device region: a BAR mapped into memory
//! (MMIO), or a region reached through `pread`/`pwrite` on the VFIO device
//! fd (I/O-port BARs, PCI config space, BARs that cannot be mapped). Every
//! access is checked against the window's length and the access width's
//! alignment and fails with an error naming the region and offset; nothing
//! outside the window can be reached. Values are little-endian on the bus,
//! as PCI defines, and converted to host order.
//!
//! MMIO accesses are volatile reads and writes of exactly the width asked
//! for, never combined or split by the compiler. No Rust reference into
//! device memory is ever made. Ordering between MMIO writes and DMA memory
//! is the driver's business (x86 keeps stores in order; drivers put a
//! fence before a doorbell where the architecture needs one).
//!
//! A third kind of window is answered by software: a device model
//! ([`RegisterSpace`], made with [`Regs::emulated`]) sees every checked
//! access, so it can act on a doorbell write as the hardware would. A
//! driver cannot tell the kinds apart, and has no reason to.
//!
//! For hot paths, [`Regs::mmio32`] checks an offset once and returns a
//! [`Mmio32`] handle whose accesses need no further checks.
#![allow(unsafe_code)]

use super::sys;
use crate::Error;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

enum Window {
    Mmio { ptr: *mut u8, map_len: usize },
    Fd { fd: Arc<OwnedFd>, offset: u64 },
    Model(Arc<dyn RegisterSpace>),
}

/// Registers answered by software: a device model behind a [`Regs`].
///
/// `Regs` checks every access (inside the window, aligned to its width)
/// before the model sees it; `width` is 1, 2, 4 or 8 and `value` holds
/// the host-order value in its low bytes.
pub trait RegisterSpace: Send + Sync {
    /// A read of `width` bytes at `off`.
    fn read(&self, off: u64, width: u8) -> u64;
    /// A write of `width` bytes at `off`.
    fn write(&self, off: u64, width: u8, value: u64);
}

/// A bounds-checked window of device registers.
pub struct Regs {
    window: Window,
    len: u64,
    name: String,
}

// SAFETY: the window is a device mapping or an fd; accesses are volatile
// or system calls, which any thread may make. Register semantics under
// concurrent use are the driver's concern, not memory safety.
unsafe impl Send for Regs {}
// SAFETY: as above; `&Regs` only performs volatile accesses and syscalls.
unsafe impl Sync for Regs {}

impl Drop for Regs {
    fn drop(&mut self) {
        if let Window::Mmio { ptr, map_len } = self.window {
            sys::munmap_region(ptr, map_len);
        }
    }
}

impl std::fmt::Debug for Regs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.window {
            Window::Mmio { .. } => "mmio",
            Window::Fd { .. } => "fd",
            Window::Model(_) => "model",
        };
        write!(f, "Regs({} {kind}, {} bytes)", self.name, self.len)
    }
}

macro_rules! accessors {
    ($($read:ident $write:ident $t:ty;)*) => {$(
        #[doc = concat!("Reads a `", stringify!($t), "` at `off`.")]
        pub fn $read(&self, off: u64) -> Result<$t, Error> {
            let at = self.check(off, size_of::<$t>())?;
            match &self.window {
                Window::Mmio { ptr, .. } => {
                    // SAFETY: `check` proved `off..off+size` lies inside the
                    // mapping and is aligned for the type.
                    let v = unsafe { ptr.add(at).cast::<$t>().read_volatile() };
                    Ok(<$t>::from_le(v))
                }
                Window::Fd { fd, offset } => {
                    let mut b = [0u8; size_of::<$t>()];
                    sys::pread_exact(fd.as_fd(), &mut b, offset + off)
                        .map_err(|e| self.io_err("read", off, e))?;
                    Ok(<$t>::from_le_bytes(b))
                }
                Window::Model(m) => Ok(m.read(off, size_of::<$t>() as u8) as $t),
            }
        }

        #[doc = concat!("Writes a `", stringify!($t), "` at `off`.")]
        pub fn $write(&self, off: u64, v: $t) -> Result<(), Error> {
            let at = self.check(off, size_of::<$t>())?;
            match &self.window {
                Window::Mmio { ptr, .. } => {
                    // SAFETY: as for the read.
                    unsafe { ptr.add(at).cast::<$t>().write_volatile(v.to_le()) };
                    Ok(())
                }
                Window::Fd { fd, offset } => {
                    sys::pwrite_all(fd.as_fd(), &v.to_le_bytes(), offset + off)
                        .map_err(|e| self.io_err("write", off, e))
                }
                Window::Model(m) => {
                    m.write(off, size_of::<$t>() as u8, v as u64);
                    Ok(())
                }
            }
        }
    )*};
}

impl Regs {
    /// Maps `len` bytes at `offset` of the device fd.
    pub(crate) fn map(dev: &OwnedFd, offset: u64, len: u64, name: String) -> Result<Self, Error> {
        let map_len = usize::try_from(len).map_err(|_| Error::Vfio {
            what: format!("mmap {name}"),
            detail: format!("{len} bytes do not fit the address space"),
            hint: None,
        })?;
        let ptr = sys::mmap_region(dev.as_fd(), offset, map_len).map_err(|e| Error::VfioSys {
            what: format!("mmap {name} ({len} bytes)"),
            source: e,
            hint: None,
        })?;
        Ok(Regs {
            window: Window::Mmio { ptr, map_len },
            len,
            name,
        })
    }

    /// A window reached by `pread`/`pwrite` at `offset` of the device fd.
    pub(crate) fn by_fd(dev: Arc<OwnedFd>, offset: u64, len: u64, name: String) -> Self {
        Regs {
            window: Window::Fd { fd: dev, offset },
            len,
            name,
        }
    }

    /// A window of `len` bytes answered by `space` (a device model).
    pub fn emulated(space: Arc<dyn RegisterSpace>, len: u64, name: String) -> Self {
        Regs {
            window: Window::Model(space),
            len,
            name,
        }
    }

    /// The window's length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the window is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether accesses go to a memory mapping (else through the fd).
    pub fn is_mmio(&self) -> bool {
        matches!(self.window, Window::Mmio { .. })
    }

    /// The region's name, e.g. `0000:00:03.0 BAR4`.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn check(&self, off: u64, size: usize) -> Result<usize, Error> {
        let size = size as u64;
        if off.checked_add(size).is_none_or(|end| end > self.len) {
            return Err(Error::Vfio {
                what: format!("access to {}", self.name),
                detail: format!(
                    "{size} bytes at offset {off:#x} outside the region's {:#x} bytes",
                    self.len
                ),
                hint: None,
            });
        }
        if off % size != 0 {
            return Err(Error::Vfio {
                what: format!("access to {}", self.name),
                detail: format!("{size}-byte access at unaligned offset {off:#x}"),
                hint: None,
            });
        }
        Ok(off as usize)
    }

    fn io_err(&self, op: &str, off: u64, e: std::io::Error) -> Error {
        Error::VfioSys {
            what: format!("{op} {} at {off:#x}", self.name),
            source: e,
            hint: None,
        }
    }

    accessors! {
        read8 write8 u8;
        read16 write16 u16;
        read32 write32 u32;
        read64 write64 u64;
    }

    /// Reads `buf.len()` bytes from `off`, a byte at a time for MMIO (device
    /// config structures such as a MAC address).
    pub fn read_bytes(&self, off: u64, buf: &mut [u8]) -> Result<(), Error> {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = self.read8(off + i as u64)?;
        }
        Ok(())
    }

    /// Checks a 32-bit register at `off` once, for unchecked use later.
    /// Only MMIO windows offer this.
    pub fn mmio32(&self, off: u64) -> Result<Mmio32<'_>, Error> {
        let at = self.check(off, 4)?;
        match self.window {
            Window::Mmio { ptr, .. } => Ok(Mmio32 {
                // SAFETY: `check` proved the offset is inside the mapping.
                ptr: unsafe { ptr.add(at) }.cast(),
                _regs: std::marker::PhantomData,
            }),
            Window::Fd { .. } | Window::Model(_) => Err(Error::Vfio {
                what: format!("register handle on {}", self.name),
                detail: "the region is not memory-mapped".into(),
                hint: None,
            }),
        }
    }
}

/// A pre-checked 32-bit MMIO register (a doorbell, a status word).
#[derive(Clone, Copy)]
pub struct Mmio32<'a> {
    ptr: *mut u32,
    _regs: std::marker::PhantomData<&'a Regs>,
}

// SAFETY: a pointer into a device mapping kept alive by the borrowed
// `Regs`; volatile accesses from any thread are sound.
unsafe impl Send for Mmio32<'_> {}
// SAFETY: as above.
unsafe impl Sync for Mmio32<'_> {}

impl Mmio32<'_> {
    /// Reads the register.
    #[inline(always)]
    pub fn read(&self) -> u32 {
        // SAFETY: checked in range and aligned when made; the mapping lives
        // as long as the borrowed `Regs`.
        u32::from_le(unsafe { self.ptr.read_volatile() })
    }

    /// Writes the register.
    #[inline(always)]
    pub fn write(&self, v: u32) {
        // SAFETY: as for `read`.
        unsafe { self.ptr.write_volatile(v.to_le()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fd_window_is_bounds_and_alignment_checked() {
        // A memfd stands in for a device fd: pread/pwrite behave the same.
        let f = crate::DmaRegion::with_page_size(
            "regs",
            4096,
            crate::IovaMode::Va,
            crate::PageSize::Base4K,
        )
        .unwrap();
        let fd = Arc::new(f.fd().try_clone_to_owned().unwrap());
        let r = Regs::by_fd(fd, 0x100, 0x40, "test BAR0".into());
        r.write32(0x10, 0xdead_beef).unwrap();
        assert_eq!(r.read32(0x10).unwrap(), 0xdead_beef);
        assert_eq!(r.read16(0x10).unwrap(), 0xbeef, "little-endian");
        assert_eq!(r.read8(0x13).unwrap(), 0xde);
        // The write went to region offset 0x100 + 0x10 of the fd.
        // SAFETY: in bounds of the region.
        assert_eq!(unsafe { f.as_ptr().add(0x110).read() }, 0xef);
        let e = r.read32(0x3e).unwrap_err().to_string();
        assert!(e.contains("outside") && e.contains("test BAR0"), "{e}");
        assert!(r.read32(0x40).is_err());
        assert!(r.read64(u64::MAX - 3).is_err());
        let e = r.write16(0x11, 1).unwrap_err().to_string();
        assert!(e.contains("unaligned"), "{e}");
        assert!(r.mmio32(0).is_err(), "fd windows have no MMIO handles");
    }

    #[test]
    fn mmio_window_reads_and_writes_memory() {
        let f = crate::DmaRegion::with_page_size(
            "mmio",
            4096,
            crate::IovaMode::Va,
            crate::PageSize::Base4K,
        )
        .unwrap();
        let fd = f.fd().try_clone_to_owned().unwrap();
        let r = Regs::map(&fd, 0, 4096, "fake BAR".into()).unwrap();
        assert!(r.is_mmio());
        r.write64(8, 0x0102_0304_0506_0708).unwrap();
        assert_eq!(r.read32(8).unwrap(), 0x0506_0708);
        let reg = r.mmio32(12).unwrap();
        assert_eq!(reg.read(), 0x0102_0304);
        reg.write(7);
        // SAFETY: in bounds; the two mappings share the memfd's pages.
        assert_eq!(unsafe { f.as_ptr().add(12).read() }, 7);
        assert!(r.mmio32(4094).is_err());
        let mut mac = [0u8; 6];
        r.read_bytes(8, &mut mac).unwrap();
        assert_eq!(mac, [8, 7, 6, 5, 7, 0]);
    }

    #[test]
    fn a_model_window_sees_every_checked_access() {
        use std::sync::Mutex;
        #[derive(Default)]
        struct Log(Mutex<Vec<(char, u64, u8, u64)>>);
        impl RegisterSpace for Log {
            fn read(&self, off: u64, width: u8) -> u64 {
                self.0.lock().unwrap().push(('r', off, width, 0));
                0x1122_3344_5566_7788
            }
            fn write(&self, off: u64, width: u8, v: u64) {
                self.0.lock().unwrap().push(('w', off, width, v));
            }
        }
        let log = Arc::new(Log::default());
        let r = Regs::emulated(log.clone(), 0x100, "model BAR2".into());
        assert!(!r.is_mmio());
        r.write16(0x10, 0xbeef).unwrap();
        assert_eq!(r.read8(0x20).unwrap(), 0x88, "truncated to the width");
        assert_eq!(r.read64(0x8).unwrap(), 0x1122_3344_5566_7788);
        assert!(r.write32(0xfe, 1).is_err() && r.read16(0x3).is_err());
        assert!(r.mmio32(0).is_err());
        assert_eq!(
            *log.0.lock().unwrap(),
            [('w', 0x10, 2, 0xbeef), ('r', 0x20, 1, 0), ('r', 0x8, 8, 0)],
            "refused accesses never reach the model"
        );
    }
}
