//! One VFIO device: regions, config space, capabilities, MSI-X, reset.
use super::{sys, vfio_err, Container, EventFd, PciCap, RegionInfo, Regs};
use crate::pci::PciAddr;
use crate::Error;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use vfio_bindings::bindings::vfio as b;

/// An opened VFIO device.
pub struct Device {
    // Keeps the container, and so the group and IOMMU mappings, alive.
    _container: Container,
    addr: PciAddr,
    fd: Arc<OwnedFd>,
    flags: u32,
    num_regions: u32,
    num_irqs: u32,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("addr", &self.addr)
            .field("regions", &self.num_regions)
            .field("irqs", &self.num_irqs)
            .field("reset", &self.can_reset())
            .finish()
    }
}

impl Device {
    pub(super) fn new(container: Container, addr: PciAddr, fd: OwnedFd) -> Result<Self, Error> {
        let info = sys::device_info(fd.as_fd())
            .map_err(|e| vfio_err(format!("VFIO_DEVICE_GET_INFO {addr}"), e, None))?;
        if info.flags & b::VFIO_DEVICE_FLAGS_PCI == 0 {
            return Err(Error::Vfio {
                what: format!("device {addr}"),
                detail: format!("not a PCI device (flags {:#x})", info.flags),
                hint: None,
            });
        }
        Ok(Device {
            _container: container,
            addr,
            fd: Arc::new(fd),
            flags: info.flags,
            num_regions: info.num_regions,
            num_irqs: info.num_irqs,
        })
    }

    /// The PCI address.
    pub fn addr(&self) -> PciAddr {
        self.addr
    }

    /// Number of regions (BARs, ROM, config, ...).
    pub fn num_regions(&self) -> u32 {
        self.num_regions
    }

    /// Region `index` (`VFIO_PCI_BAR0_REGION_INDEX`.. for BARs,
    /// `VFIO_PCI_CONFIG_REGION_INDEX` = 7 for config space).
    pub fn region_info(&self, index: u32) -> Result<RegionInfo, Error> {
        if index >= self.num_regions {
            return Err(Error::Vfio {
                what: format!("region {index} of {}", self.addr),
                detail: format!("the device has {} regions", self.num_regions),
                hint: None,
            });
        }
        let r = sys::region_info(self.fd.as_fd(), index).map_err(|e| {
            vfio_err(
                format!("VFIO_DEVICE_GET_REGION_INFO {index} of {}", self.addr),
                e,
                None,
            )
        })?;
        Ok(RegionInfo {
            index,
            size: r.size,
            offset: r.offset,
            mmap: r.flags & b::VFIO_REGION_INFO_FLAG_MMAP != 0,
            read: r.flags & b::VFIO_REGION_INFO_FLAG_READ != 0,
            write: r.flags & b::VFIO_REGION_INFO_FLAG_WRITE != 0,
        })
    }

    /// PCI config space, through the fd.
    pub fn config(&self) -> Result<Regs, Error> {
        let r = self.region_info(b::VFIO_PCI_CONFIG_REGION_INDEX)?;
        Ok(Regs::by_fd(
            self.fd.clone(),
            r.offset,
            r.size,
            format!("{} config space", self.addr),
        ))
    }

    /// BAR `bar` (0..=5): memory-mapped when VFIO allows it, else reached
    /// through the fd (I/O-port BARs always are).
    pub fn bar(&self, bar: u32) -> Result<Regs, Error> {
        if bar > 5 {
            return Err(Error::Vfio {
                what: format!("BAR{bar} of {}", self.addr),
                detail: "BARs are numbered 0..=5".into(),
                hint: None,
            });
        }
        let r = self.region_info(b::VFIO_PCI_BAR0_REGION_INDEX + bar)?;
        if r.size == 0 {
            return Err(Error::Vfio {
                what: format!("BAR{bar} of {}", self.addr),
                detail: "not implemented by the device".into(),
                hint: None,
            });
        }
        let name = format!("{} BAR{bar}", self.addr);
        if r.mmap {
            Regs::map(&self.fd, r.offset, r.size, name)
        } else {
            Ok(Regs::by_fd(self.fd.clone(), r.offset, r.size, name))
        }
    }

    /// Walks the config-space capability list (malformed lists end the
    /// walk).
    pub fn capabilities(&self) -> Result<Vec<PciCap>, Error> {
        crate::function::walk_capabilities(&self.config()?)
    }

    /// Turns on memory-space decoding and bus mastering (DMA).
    pub fn enable_bus_master(&self) -> Result<(), Error> {
        crate::function::enable_bus_master(&self.config()?)
    }

    /// Number of MSI-X vectors the device has (0 if none).
    pub fn msix_vectors(&self) -> Result<u32, Error> {
        let i = sys::irq_info(self.fd.as_fd(), b::VFIO_PCI_MSIX_IRQ_INDEX).map_err(|e| {
            vfio_err(
                format!("VFIO_DEVICE_GET_IRQ_INFO MSI-X of {}", self.addr),
                e,
                None,
            )
        })?;
        Ok(i.count)
    }

    /// Routes MSI-X vectors `0..n` to new eventfds, returned in vector
    /// order.
    pub fn enable_msix(&self, n: u32) -> Result<Vec<EventFd>, Error> {
        let max = self.msix_vectors()?;
        if n == 0 || n > max || n > 64 {
            return Err(Error::Vfio {
                what: format!("MSI-X on {}", self.addr),
                detail: format!("{n} vectors asked; the device has {max} (at most 64 used)"),
                hint: None,
            });
        }
        let fds: Vec<EventFd> = (0..n).map(|_| EventFd::new()).collect::<Result<_, _>>()?;
        let raw: Vec<i32> = fds.iter().map(|f| f.as_fd().as_raw_fd()).collect();
        sys::set_irq_eventfds(self.fd.as_fd(), b::VFIO_PCI_MSIX_IRQ_INDEX, &raw).map_err(|e| {
            vfio_err(
                format!("VFIO_DEVICE_SET_IRQS MSI-X x{n} on {}", self.addr),
                e,
                None,
            )
        })?;
        Ok(fds)
    }

    /// Turns MSI-X off.
    pub fn disable_msix(&self) -> Result<(), Error> {
        sys::set_irq_eventfds(self.fd.as_fd(), b::VFIO_PCI_MSIX_IRQ_INDEX, &[])
            .map_err(|e| vfio_err(format!("disable MSI-X on {}", self.addr), e, None))
    }

    /// Whether VFIO offers a function reset for this device.
    pub fn can_reset(&self) -> bool {
        self.flags & b::VFIO_DEVICE_FLAGS_RESET != 0
    }

    /// Resets the function (`VFIO_DEVICE_RESET`). Devices without it
    /// (virtio, for one) are reset through their own registers instead.
    pub fn reset(&self) -> Result<(), Error> {
        if !self.can_reset() {
            return Err(Error::Vfio {
                what: format!("reset {}", self.addr),
                detail: "VFIO offers no reset for this device".into(),
                hint: Some("reset it through its own registers (virtio: device_status = 0)".into()),
            });
        }
        sys::ioctl_int(self.fd.as_fd(), sys::DEVICE_RESET, 0)
            .map(drop)
            .map_err(|e| vfio_err(format!("VFIO_DEVICE_RESET {}", self.addr), e, None))
    }
}
