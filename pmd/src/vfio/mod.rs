//! VFIO: user-space access to PCI devices behind an IOMMU.
//!
//! The kernel's model, and ours:
//! - A **container** (`/dev/vfio/vfio`) is one IOMMU address space. Its
//!   DMA mappings ([`Container::map_dma`]) decide which IOVAs a device may
//!   reach and which of our pages they land in; anything else the device
//!   tries is blocked by the IOMMU.
//! - A **group** (`/dev/vfio/N`) is the smallest set of devices the IOMMU
//!   can isolate. It is *viable* only when every device in it is bound to
//!   vfio-pci (or to no driver); then it can join a container.
//! - A **device** fd gives region info, register windows ([`Regs`]: BARs
//!   and config space), interrupts (MSI-X vectors signalling eventfds) and
//!   reset.
//!
//! [`Container`] is a value owning its fd (no global state); a [`Device`]
//! keeps its container alive. [`Container::device`] does the whole
//! sequence for one PCI address: check the sysfs binding, open and check
//! the group, attach it, set the type1v2 IOMMU on first use, and open the
//! device. Each failure names what is wrong and how to fix it.
//!
//! `unsafe` lives in `sys` (the system calls); register windows and
//! eventfds are the PCI function's vocabulary ([`crate::function`]).
use crate::pci::{PciAddr, Sysfs};
use crate::{DmaRegion, Error, Iova};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use vfio_bindings::bindings::vfio as b;

mod sys;

use crate::function::{EventFd, PciCap, Regs};

/// What the container's IOMMU offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IommuInfo {
    /// Bit set of supported IOMMU page sizes (bit n = 2^n bytes).
    pub page_sizes: u64,
    /// Usable IOVA ranges, inclusive ends (empty if the kernel did not say).
    pub iova_ranges: Vec<(u64, u64)>,
}

impl IommuInfo {
    /// Checks that `iova..iova+len` lies inside one usable range.
    pub fn check_range(&self, iova: u64, len: u64) -> Result<(), Error> {
        let Some(last) = len.checked_sub(1).and_then(|l| iova.checked_add(l)) else {
            return Err(Error::Vfio {
                what: "map DMA".into(),
                detail: format!("{len} bytes at IOVA {iova:#x} overflow or are empty"),
                hint: None,
            });
        };
        if self.iova_ranges.is_empty()
            || self
                .iova_ranges
                .iter()
                .any(|&(s, e)| s <= iova && last <= e)
        {
            return Ok(());
        }
        let ranges: Vec<String> = self
            .iova_ranges
            .iter()
            .map(|(s, e)| format!("{s:#x}-{e:#x}"))
            .collect();
        Err(Error::Vfio {
            what: "map DMA".into(),
            detail: format!(
                "IOVA {iova:#x}-{last:#x} ({len} bytes) is outside the IOMMU's usable ranges {}",
                ranges.join(", ")
            ),
            hint: Some("use a smaller region, or IOVAs inside those ranges".into()),
        })
    }
}

struct ContainerInner {
    fd: OwnedFd,
    /// Groups attached, by number; their fds keep them attached.
    groups: Mutex<Vec<(u32, OwnedFd)>>,
    iommu_set: Mutex<bool>,
    dev_dir: PathBuf,
}

/// A VFIO container: one IOMMU address space.
#[derive(Clone)]
pub struct Container {
    inner: Arc<ContainerInner>,
}

impl std::fmt::Debug for Container {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let groups: Vec<u32> = lock(&self.inner.groups).iter().map(|g| g.0).collect();
        write!(f, "Container {{ groups: {groups:?} }}")
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn vfio_err(what: impl Into<String>, e: std::io::Error, hint: Option<String>) -> Error {
    Error::VfioSys {
        what: what.into(),
        source: e,
        hint,
    }
}

impl Container {
    /// Opens `/dev/vfio/vfio` and checks the API version and type1v2
    /// support.
    pub fn open() -> Result<Self, Error> {
        Self::open_in("/dev/vfio")
    }

    /// As [`open`](Self::open), with the VFIO device nodes in `dev_dir`.
    pub fn open_in(dev_dir: impl AsRef<Path>) -> Result<Self, Error> {
        let dev_dir = dev_dir.as_ref().to_path_buf();
        let path = dev_dir.join("vfio");
        let fd = sys::open_rw(&path).map_err(|e| {
            let hint = match e.kind() {
                std::io::ErrorKind::NotFound => {
                    "load the driver: modprobe vfio-pci (and enable the IOMMU: intel_iommu=on or amd_iommu=on on the kernel command line)"
                }
                std::io::ErrorKind::PermissionDenied => "run as root, or give your user rw access to /dev/vfio/vfio",
                _ => "check that VFIO is available: ls -l /dev/vfio",
            };
            vfio_err(format!("open {}", path.display()), e, Some(hint.into()))
        })?;
        let v = sys::ioctl_int(fd.as_fd(), sys::GET_API_VERSION, 0)
            .map_err(|e| vfio_err("VFIO_GET_API_VERSION", e, None))?;
        if v != b::VFIO_API_VERSION as i32 {
            return Err(Error::Vfio {
                what: "VFIO_GET_API_VERSION".into(),
                detail: format!(
                    "kernel speaks version {v}, rpmd version {}",
                    b::VFIO_API_VERSION
                ),
                hint: None,
            });
        }
        let ok = sys::ioctl_int(fd.as_fd(), sys::CHECK_EXTENSION, b::VFIO_TYPE1v2_IOMMU as _)
            .map_err(|e| vfio_err("VFIO_CHECK_EXTENSION", e, None))?;
        if ok != 1 {
            return Err(Error::Vfio {
                what: "VFIO_CHECK_EXTENSION(TYPE1v2)".into(),
                detail: "the kernel's VFIO has no type1v2 IOMMU".into(),
                hint: Some("load vfio_iommu_type1 (modprobe vfio_iommu_type1)".into()),
            });
        }
        Ok(Container {
            inner: Arc::new(ContainerInner {
                fd,
                groups: Mutex::new(Vec::new()),
                iommu_set: Mutex::new(false),
                dev_dir,
            }),
        })
    }

    /// Opens the PCI function at `addr`: checks its binding in `sysfs`,
    /// attaches its IOMMU group (once per group) and opens the device.
    pub fn device(&self, sysfs: &Sysfs, addr: PciAddr) -> Result<Device, Error> {
        let dev = sysfs.device(addr)?;
        let bind_hint = format!("rpmd-bind --bind vfio-pci {addr}");
        match dev.driver.as_deref() {
            Some("vfio-pci") => {}
            Some(other) => {
                return Err(Error::Pci {
                    addr: addr.to_string(),
                    detail: format!("bound to the kernel driver {other}, not vfio-pci"),
                    hint: Some(bind_hint),
                })
            }
            None => {
                return Err(Error::Pci {
                    addr: addr.to_string(),
                    detail: "bound to no driver, not vfio-pci".into(),
                    hint: Some(bind_hint),
                })
            }
        }
        let Some(group) = dev.iommu_group else {
            return Err(Error::Pci {
                addr: addr.to_string(),
                detail: "has no IOMMU group: the IOMMU is off".into(),
                hint: Some(
                    "enable VT-d/AMD-Vi in firmware and boot with intel_iommu=on (or amd_iommu=on)"
                        .into(),
                ),
            });
        };
        self.attach_group(sysfs, group)?;
        let groups = lock(&self.inner.groups);
        let gfd = groups
            .iter()
            .find(|g| g.0 == group)
            .map(|g| g.1.as_fd())
            .ok_or_else(|| Error::Vfio {
                what: format!("group {group}"),
                detail: "not attached".into(),
                hint: None,
            })?;
        let name = std::ffi::CString::new(addr.to_string()).unwrap_or_default();
        let fd = sys::group_get_device_fd(gfd, &name)
            .map_err(|e| vfio_err(format!("VFIO_GROUP_GET_DEVICE_FD {addr}"), e, None))?;
        drop(groups);
        Device::new(self.clone(), addr, fd)
    }

    fn attach_group(&self, sysfs: &Sysfs, group: u32) -> Result<(), Error> {
        let mut groups = lock(&self.inner.groups);
        if groups.iter().any(|g| g.0 == group) {
            return Ok(());
        }
        let path = self.inner.dev_dir.join(group.to_string());
        let gfd = sys::open_rw(&path).map_err(|e| {
            let hint = match e.kind() {
                std::io::ErrorKind::PermissionDenied => format!(
                    "run as root, or give your user rw access to {}",
                    path.display()
                ),
                std::io::ErrorKind::NotFound => {
                    "bind the group's devices to vfio-pci (rpmd-bind --bind vfio-pci ADDR)".into()
                }
                _ => "is another process using this group? (EBUSY: one user at a time)".into(),
            };
            vfio_err(format!("open {}", path.display()), e, Some(hint))
        })?;
        let flags = sys::group_status(gfd.as_fd())
            .map_err(|e| vfio_err(format!("VFIO_GROUP_GET_STATUS group {group}"), e, None))?;
        if flags & b::VFIO_GROUP_FLAGS_VIABLE == 0 {
            let members: Vec<String> = sysfs
                .group_members(group)
                .unwrap_or_default()
                .into_iter()
                .map(|a| {
                    let drv = sysfs.device(a).ok().and_then(|d| d.driver);
                    format!("{a} ({})", drv.as_deref().unwrap_or("no driver"))
                })
                .collect();
            return Err(Error::Vfio {
                what: format!("group {group}"),
                detail: format!(
                    "not viable: every device in it must be bound to vfio-pci or to no driver; members: {}",
                    members.join(", ")
                ),
                hint: Some("bind the other members to vfio-pci (rpmd-bind --bind vfio-pci ADDR) or unbind them".into()),
            });
        }
        sys::group_set_container(gfd.as_fd(), self.inner.fd.as_fd())
            .map_err(|e| vfio_err(format!("VFIO_GROUP_SET_CONTAINER group {group}"), e, None))?;
        let mut set = lock(&self.inner.iommu_set);
        if !*set {
            sys::ioctl_int(
                self.inner.fd.as_fd(),
                sys::SET_IOMMU,
                b::VFIO_TYPE1v2_IOMMU as _,
            )
            .map_err(|e| vfio_err("VFIO_SET_IOMMU(TYPE1v2)", e, None))?;
            *set = true;
        }
        groups.push((group, gfd));
        Ok(())
    }

    /// The IOMMU's page sizes and usable IOVA ranges (needs a group
    /// attached first, as the IOMMU is set then).
    pub fn iommu_info(&self) -> Result<IommuInfo, Error> {
        let (page_sizes, iova_ranges) = sys::iommu_info(self.inner.fd.as_fd())
            .map_err(|e| vfio_err("VFIO_IOMMU_GET_INFO", e, Some("open a device first".into())))?;
        Ok(IommuInfo {
            page_sizes,
            iova_ranges,
        })
    }

    /// Maps `region` for DMA at its own IOVAs (it must be an IOVA = VA
    /// region). The mapping lasts until the returned value drops.
    pub fn map_dma(&self, region: &DmaRegion) -> Result<DmaMapping, Error> {
        if region.iova_mode() != crate::IovaMode::Va {
            return Err(Error::Vfio {
                what: "map DMA".into(),
                detail: "the region uses IOVA = PA; only IOVA = VA regions go through the IOMMU"
                    .into(),
                hint: Some("create it with IovaMode::Va".into()),
            });
        }
        self.map_dma_at(region, Iova::new(region.as_ptr() as u64))
    }

    /// Maps `region` at `iova`, for callers that manage IOVAs themselves
    /// (the region's own [`DmaRegion::iova`] then does not apply). The
    /// range is checked against the IOMMU's usable ranges first.
    pub fn map_dma_at(&self, region: &DmaRegion, iova: Iova) -> Result<DmaMapping, Error> {
        let len = region.len() as u64;
        if let Ok(info) = self.iommu_info() {
            info.check_range(iova.raw(), len)?;
        }
        sys::dma_map(self.inner.fd.as_fd(), region.as_ptr() as u64, iova.raw(), len).map_err(
            |e| {
                let hint = match e.raw_os_error() {
                    Some(libc::ENOMEM) | Some(libc::ENOSPC) => Some(
                        "locked-memory limit or the IOMMU's mapping limit reached: raise RLIMIT_MEMLOCK (ulimit -l) or use fewer, larger regions"
                            .into(),
                    ),
                    Some(libc::EEXIST) => Some("that IOVA range is already mapped".into()),
                    _ => None,
                };
                vfio_err(
                    format!("VFIO_IOMMU_MAP_DMA {len} bytes at IOVA {:#x}", iova.raw()),
                    e,
                    hint,
                )
            },
        )?;
        Ok(DmaMapping {
            container: self.clone(),
            iova,
            len,
        })
    }
}

/// A DMA mapping in a container; unmapped on drop. The pages stay pinned
/// by the kernel while mapped, so dropping the region first is harmless.
#[derive(Debug)]
pub struct DmaMapping {
    container: Container,
    iova: Iova,
    len: u64,
}

impl DmaMapping {
    /// First IOVA mapped.
    pub fn iova(&self) -> Iova {
        self.iova
    }

    /// Bytes mapped.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing is mapped (never).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for DmaMapping {
    fn drop(&mut self) {
        let _ = sys::dma_unmap(self.container.inner.fd.as_fd(), self.iova.raw(), self.len);
    }
}

/// Information about one device region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionInfo {
    /// Region index (BAR0..5 = 0..5, ROM = 6, config = 7).
    pub index: u32,
    /// Size in bytes (0 = not implemented).
    pub size: u64,
    /// Offset of the region in the device fd.
    pub offset: u64,
    /// Whether it can be memory-mapped.
    pub mmap: bool,
    /// Readable / writable.
    pub read: bool,
    /// Writable.
    pub write: bool,
}

mod device;
mod function;
pub use device::Device;
pub use function::{VfioBus, VfioFunction};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iova_ranges_are_checked_before_mapping() {
        let info = IommuInfo {
            page_sizes: 0x4020_1000,
            iova_ranges: vec![(0, 0xfedf_ffff), (0xfef0_0000, 0x7f_ffff_ffff)],
        };
        info.check_range(1 << 32, 2 << 20).unwrap();
        info.check_range(0x7f_ffe0_0000, 2 << 20).unwrap();
        let e = info
            .check_range(0x7f_fff0_0000, 2 << 20)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("outside the IOMMU's usable ranges")
                && e.contains("0xfef00000-0x7fffffffff"),
            "{e}"
        );
        // Across the MSI hole.
        assert!(info.check_range(0xfed0_0000, 4 << 20).is_err());
        // A VA from a default mmap (near 2^47) does not fit 39 bits.
        assert!(info.check_range(0x7f12_3456_7000, 4096).is_err());
        assert!(info.check_range(u64::MAX, 2).is_err());
        assert!(info.check_range(0, 0).is_err());
        let any = IommuInfo {
            page_sizes: 0,
            iova_ranges: vec![],
        };
        any.check_range(0x7f12_3456_7000, 4096).unwrap();
    }

    #[test]
    fn missing_vfio_says_how_to_fix_it() {
        let dir = std::env::temp_dir().join(format!("rpmd-novfio-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = Container::open_in(&dir).unwrap_err().to_string();
        assert!(
            e.contains("modprobe vfio-pci") && e.contains("intel_iommu=on"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
