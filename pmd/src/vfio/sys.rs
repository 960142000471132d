//! The VFIO system calls: ioctls on the container, group and device fds,
//! region reads and writes at fd offsets, BAR mappings, eventfds. Every
//! `unsafe` block of the VFIO code is here, each with its reason; the
//! functions themselves are safe to call.
//!
//! Structures and constants come from `vfio-bindings` (the kernel's
//! `linux/vfio.h`). Every VFIO ioctl is `_IO(VFIO_TYPE, VFIO_BASE + n)`,
//! with no size encoded; the structs carry their own `argsz`.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use vfio_bindings::bindings::vfio::*;

// Ioctl numbers relative to VFIO_BASE (linux/vfio.h).
pub(crate) const GET_API_VERSION: u32 = 0;
pub(crate) const CHECK_EXTENSION: u32 = 1;
pub(crate) const SET_IOMMU: u32 = 2;
pub(crate) const GROUP_GET_STATUS: u32 = 3;
pub(crate) const GROUP_SET_CONTAINER: u32 = 4;
pub(crate) const GROUP_GET_DEVICE_FD: u32 = 6;
pub(crate) const DEVICE_GET_INFO: u32 = 7;
pub(crate) const DEVICE_GET_REGION_INFO: u32 = 8;
pub(crate) const DEVICE_GET_IRQ_INFO: u32 = 9;
pub(crate) const DEVICE_SET_IRQS: u32 = 10;
pub(crate) const DEVICE_RESET: u32 = 11;
pub(crate) const IOMMU_GET_INFO: u32 = 12;
pub(crate) const IOMMU_MAP_DMA: u32 = 13;
pub(crate) const IOMMU_UNMAP_DMA: u32 = 14;

/// `_IO(VFIO_TYPE, VFIO_BASE + nr)`.
const fn request(nr: u32) -> libc::c_ulong {
    (((VFIO_TYPE as u32) << 8) | (VFIO_BASE + nr)) as libc::c_ulong
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// An ioctl whose argument is an integer (no memory is passed).
pub(crate) fn ioctl_int(fd: BorrowedFd<'_>, nr: u32, arg: libc::c_ulong) -> io::Result<i32> {
    // SAFETY: the VFIO ioctls used with this form (API version, extension
    // check, set IOMMU, reset) take an integer or nothing, never a pointer.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), request(nr), arg) })
}

/// An ioctl whose argument is a `#[repr(C)]` struct the kernel reads and
/// may write, `argsz` bytes long.
fn ioctl_ptr<T>(fd: BorrowedFd<'_>, nr: u32, arg: *mut T) -> io::Result<i32> {
    // SAFETY: callers pass a pointer to a live struct (or buffer) of the
    // kind ioctl `nr` expects, at least as large as the `argsz` in it.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), request(nr), arg) })
}

/// Opens `path` read-write, close-on-exec.
pub(crate) fn open_rw(path: &std::path::Path) -> io::Result<OwnedFd> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    Ok(OwnedFd::from(f))
}

/// `VFIO_GROUP_GET_STATUS`: the flags.
pub(crate) fn group_status(group: BorrowedFd<'_>) -> io::Result<u32> {
    let mut st = vfio_group_status {
        argsz: size_of::<vfio_group_status>() as u32,
        flags: 0,
    };
    ioctl_ptr(group, GROUP_GET_STATUS, &mut st)?;
    Ok(st.flags)
}

/// `VFIO_GROUP_SET_CONTAINER`.
pub(crate) fn group_set_container(
    group: BorrowedFd<'_>,
    container: BorrowedFd<'_>,
) -> io::Result<()> {
    let mut fd: libc::c_int = container.as_raw_fd();
    ioctl_ptr(group, GROUP_SET_CONTAINER, &mut fd).map(drop)
}

/// `VFIO_GROUP_GET_DEVICE_FD` for the device named `name` (its PCI address).
pub(crate) fn group_get_device_fd(
    group: BorrowedFd<'_>,
    name: &std::ffi::CStr,
) -> io::Result<OwnedFd> {
    let fd = ioctl_ptr(group, GROUP_GET_DEVICE_FD, name.as_ptr().cast_mut())?;
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `VFIO_DEVICE_GET_INFO`.
pub(crate) fn device_info(dev: BorrowedFd<'_>) -> io::Result<vfio_device_info> {
    let mut i = vfio_device_info {
        argsz: size_of::<vfio_device_info>() as u32,
        ..Default::default()
    };
    ioctl_ptr(dev, DEVICE_GET_INFO, &mut i)?;
    Ok(i)
}

/// `VFIO_DEVICE_GET_REGION_INFO` for region `index`.
pub(crate) fn region_info(dev: BorrowedFd<'_>, index: u32) -> io::Result<vfio_region_info> {
    let mut i = vfio_region_info {
        argsz: size_of::<vfio_region_info>() as u32,
        index,
        ..Default::default()
    };
    ioctl_ptr(dev, DEVICE_GET_REGION_INFO, &mut i)?;
    Ok(i)
}

/// `VFIO_DEVICE_GET_IRQ_INFO` for IRQ index `index`.
pub(crate) fn irq_info(dev: BorrowedFd<'_>, index: u32) -> io::Result<vfio_irq_info> {
    let mut i = vfio_irq_info {
        argsz: size_of::<vfio_irq_info>() as u32,
        index,
        ..Default::default()
    };
    ioctl_ptr(dev, DEVICE_GET_IRQ_INFO, &mut i)?;
    Ok(i)
}

/// `VFIO_DEVICE_SET_IRQS`: vectors `0..fds.len()` of `index` signal the
/// eventfds; an empty `fds` disables the index.
pub(crate) fn set_irq_eventfds(dev: BorrowedFd<'_>, index: u32, fds: &[RawFd]) -> io::Result<()> {
    #[repr(C)]
    struct Set {
        hdr: vfio_irq_set,
        fds: [i32; 64],
    }
    if fds.len() > 64 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "more than 64 vectors",
        ));
    }
    let mut s = Set {
        hdr: vfio_irq_set {
            argsz: (size_of::<vfio_irq_set>() + 4 * fds.len()) as u32,
            flags: if fds.is_empty() {
                VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER
            } else {
                VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER
            },
            index,
            start: 0,
            count: fds.len() as u32,
            ..Default::default()
        },
        fds: [0; 64],
    };
    s.fds[..fds.len()].copy_from_slice(fds);
    ioctl_ptr(dev, DEVICE_SET_IRQS, &mut s).map(drop)
}

/// `VFIO_IOMMU_GET_INFO` with its capability chain: the supported IOMMU
/// page sizes and the usable IOVA ranges (inclusive ends).
pub(crate) fn iommu_info(container: BorrowedFd<'_>) -> io::Result<(u64, Vec<(u64, u64)>)> {
    // One call with room for the capabilities: 4 KiB covers any chain the
    // kernel builds for type1 (a header plus a few ranges).
    #[repr(C, align(8))]
    struct Buf([u8; 4096]);
    let mut buf = Buf([0; 4096]);
    let info = vfio_iommu_type1_info {
        argsz: buf.0.len() as u32,
        ..Default::default()
    };
    // SAFETY: `buf` is 8-aligned and larger than the struct.
    unsafe {
        buf.0
            .as_mut_ptr()
            .cast::<vfio_iommu_type1_info>()
            .write(info)
    };
    ioctl_ptr(container, IOMMU_GET_INFO, buf.0.as_mut_ptr())?;
    let u32_at = |o: usize| u32::from_ne_bytes(buf.0[o..o + 4].try_into().unwrap_or([0; 4]));
    let u64_at = |o: usize| u64::from_ne_bytes(buf.0[o..o + 8].try_into().unwrap_or([0; 8]));
    let flags = u32_at(4);
    let pgsizes = u64_at(8);
    let mut ranges = Vec::new();
    let mut off = if flags & VFIO_IOMMU_INFO_CAPS != 0 {
        u32_at(16) as usize
    } else {
        0
    };
    // Walk the chain: header {id u16, version u16, next u32}; stop on a
    // loop, an offset outside the buffer, or the end (0).
    let mut hops = 0;
    while off != 0 && off + 16 <= buf.0.len() && hops < 32 {
        let id = u16::from_ne_bytes([buf.0[off], buf.0[off + 1]]);
        let next = u32_at(off + 4) as usize;
        if id as u32 == VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE {
            let n = u32_at(off + 8) as usize;
            for i in 0..n {
                let r = off + 16 + 16 * i;
                if r + 16 > buf.0.len() {
                    break;
                }
                ranges.push((u64_at(r), u64_at(r + 8)));
            }
        }
        off = next;
        hops += 1;
    }
    Ok((pgsizes, ranges))
}

/// `VFIO_IOMMU_MAP_DMA`: device reads and writes of `iova..iova+size` reach
/// `vaddr..vaddr+size` of this process.
pub(crate) fn dma_map(
    container: BorrowedFd<'_>,
    vaddr: u64,
    iova: u64,
    size: u64,
) -> io::Result<()> {
    let mut m = vfio_iommu_type1_dma_map {
        argsz: size_of::<vfio_iommu_type1_dma_map>() as u32,
        flags: VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE,
        vaddr,
        iova,
        size,
    };
    ioctl_ptr(container, IOMMU_MAP_DMA, &mut m).map(drop)
}

/// `VFIO_IOMMU_UNMAP_DMA`.
pub(crate) fn dma_unmap(container: BorrowedFd<'_>, iova: u64, size: u64) -> io::Result<()> {
    let mut m = vfio_iommu_type1_dma_unmap {
        argsz: size_of::<vfio_iommu_type1_dma_unmap>() as u32,
        flags: 0,
        iova,
        size,
        ..Default::default()
    };
    ioctl_ptr(container, IOMMU_UNMAP_DMA, &mut m).map(drop)
}
