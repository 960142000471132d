//! VFIO as a [`PciBus`]: one container per bus, so every function a
//! registry opens shares one IOMMU address space (and several functions
//! of one IOMMU group can be open at once), attached to the registry's
//! DMA domain.
use super::{Container, Device, EventFd, Regs};
use crate::domain::{DmaDomain, DmaGuard, DmaTarget};
use crate::function::{PciBus, PciFunction};
use crate::pci::{PciAddr, PciDevice, Sysfs};
use crate::{DmaRegion, Error, Iova};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

impl DmaTarget for Container {
    fn name(&self) -> String {
        format!("{self:?}")
    }

    fn map(&self, region: &DmaRegion) -> Result<DmaGuard, Error> {
        // Physically addressed regions (for devices that bypass the
        // IOMMU) are mapped at their VAs too: harmless, and uniform.
        self.map_dma_at(region, Iova::new(region.as_ptr() as u64))
            .map(DmaGuard::new)
    }
}

/// PCI functions bound to vfio-pci, found through sysfs.
pub struct VfioBus {
    sysfs: Sysfs,
    dev_dir: PathBuf,
    /// The container, once a function was opened, with the domain it was
    /// attached to.
    container: Mutex<Option<(Arc<Container>, DmaDomain)>>,
}

impl Default for VfioBus {
    fn default() -> Self {
        Self::new(Sysfs::default(), "/dev/vfio")
    }
}

impl VfioBus {
    /// A bus reading `sysfs` and opening VFIO nodes under `dev_dir`.
    pub fn new(sysfs: Sysfs, dev_dir: impl Into<PathBuf>) -> Self {
        VfioBus {
            sysfs,
            dev_dir: dev_dir.into(),
            container: Mutex::new(None),
        }
    }

    /// Opens the one function at `bdf` (`DDDD:BB:DD.F` or `BB:DD.F`) on a
    /// bus and DMA domain of its own, as a driver's bring-up test does;
    /// the bus is returned because it holds the VFIO container.
    pub fn open_alone(bdf: &str) -> Result<(VfioBus, Arc<dyn PciFunction>), Error> {
        let addr: PciAddr = bdf.parse()?;
        let bus = VfioBus::default();
        let func = bus.open(addr, &DmaDomain::new())?;
        Ok((bus, func))
    }
}

impl PciBus for VfioBus {
    fn describe(&self, addr: PciAddr) -> Result<PciDevice, Error> {
        self.sysfs.device(addr)
    }

    fn open(&self, addr: PciAddr, domain: &DmaDomain) -> Result<Arc<dyn PciFunction>, Error> {
        let mut slot = self.container.lock().unwrap_or_else(|e| e.into_inner());
        let c = match &*slot {
            Some((c, d)) if DmaDomain::same(d, domain) => c.clone(),
            _ => Arc::new(Container::open_in(&self.dev_dir)?),
        };
        // The group is attached (and the IOMMU set) by the first device;
        // only then can regions be mapped.
        let dev = c.device(&self.sysfs, addr)?;
        domain.attach(c.clone())?;
        *slot = Some((c.clone(), domain.clone()));
        Ok(Arc::new(VfioFunction {
            dev,
            container: c,
            domain: domain.clone(),
        }))
    }
}

/// A function opened through VFIO.
pub struct VfioFunction {
    dev: Device,
    container: Arc<Container>,
    domain: DmaDomain,
}

impl PciFunction for VfioFunction {
    fn addr(&self) -> PciAddr {
        self.dev.addr()
    }
    fn config(&self) -> Result<Regs, Error> {
        self.dev.config()
    }
    fn bar(&self, bar: u32) -> Result<Regs, Error> {
        self.dev.bar(bar)
    }
    fn msix_vectors(&self) -> u32 {
        self.dev.msix_vectors().unwrap_or(0)
    }
    fn enable_msix(&self, n: u32) -> Result<Vec<EventFd>, Error> {
        self.dev.enable_msix(n)
    }
    fn disable_msix(&self) -> Result<(), Error> {
        self.dev.disable_msix()
    }
    fn can_reset(&self) -> bool {
        self.dev.can_reset()
    }
    fn reset(&self) -> Result<(), Error> {
        self.dev.reset()
    }
    fn domain(&self) -> &DmaDomain {
        &self.domain
    }
    fn map_dma(&self, region: &DmaRegion) -> Result<DmaGuard, Error> {
        self.container.map(region)
    }
}
