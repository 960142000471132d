//! What every device model shares behind [`PciFunction`]: a config
//! space with its IDs and a writable command register ([`ModelConfig`]),
//! and the function a driver opens ([`ModelFunction`]) over a model's
//! register spaces ([`DeviceModel`]), its DMA through a [`ModelIommu`]
//! attached to the driver's domain.
use super::{ModelIommu, PciFunction, RegisterSpace, Regs};
use crate::domain::{DmaGuard, DmaTarget};
use crate::pci::PciAddr;
use crate::{DmaDomain, DmaRegion, Error};
use std::sync::{Arc, Mutex};

/// A device model as its [`ModelFunction`] needs it.
pub trait DeviceModel: Send + Sync + 'static {
    /// Its PCI address.
    fn addr(&self) -> PciAddr;
    /// A name for its windows' errors (`"igb model"`).
    fn name(&self) -> &'static str;
    /// Its config space.
    fn config_space(&self) -> Arc<dyn RegisterSpace>;
    /// BAR `bar`'s registers and length, if it has that BAR.
    fn bar_space(&self, bar: u32) -> Option<(Arc<dyn RegisterSpace>, u64)>;
    /// A function-level reset.
    fn reset(&self);
    /// MSI-X vectors it has (none by default).
    fn msix_vectors(&self) -> u32 {
        0
    }
    /// Routes vectors `0..n` to new eventfds the model signals, as
    /// [`PciFunction::enable_msix`] (by default refused: no MSI-X).
    fn enable_msix(&self, n: u32) -> Result<Vec<super::EventFd>, Error> {
        Err(Error::Pci {
            addr: self.addr().to_string(),
            detail: format!("MSI-X ({n} vectors) asked of a model that has none"),
            hint: None,
        })
    }
    /// Turns MSI-X off.
    fn disable_msix(&self) {}
}

/// Config space of a model: 64 dwords, the IDs in the first; only the
/// command register (memory decoding, bus mastering) is writable.
pub struct ModelConfig(Mutex<Vec<u32>>);

impl ModelConfig {
    /// Vendor `vendor`, device `device`, everything else zero.
    pub fn new(vendor: u16, device: u16) -> Self {
        let mut c = vec![0u32; 64];
        c[0] = (device as u32) << 16 | vendor as u32;
        ModelConfig(Mutex::new(c))
    }

    fn dwords(&self) -> std::sync::MutexGuard<'_, Vec<u32>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl RegisterSpace for ModelConfig {
    fn read(&self, off: u64, width: u8) -> u64 {
        let c = self.dwords();
        (0..width as u64).fold(0, |v, i| {
            let at = (off + i) as usize;
            let byte = c.get(at / 4).map_or(0, |d| d >> (8 * (at % 4)) & 0xff);
            v | (byte as u64) << (8 * i)
        })
    }

    fn write(&self, off: u64, width: u8, v: u64) {
        if off == super::cfg::COMMAND && width == 2 {
            let mut c = self.dwords();
            c[1] = (c[1] & !0xffff) | (v as u32 & 0xffff);
        }
    }
}

/// The PCI function a driver opens on a model.
pub struct ModelFunction<M: DeviceModel> {
    model: Arc<M>,
    domain: DmaDomain,
    iommu: Arc<ModelIommu>,
}

impl<M: DeviceModel> ModelFunction<M> {
    /// `model` opened for a driver: `iommu` (the model's) joins `domain`.
    pub fn open(
        model: Arc<M>,
        iommu: &ModelIommu,
        domain: &DmaDomain,
    ) -> Result<Arc<dyn PciFunction>, Error> {
        let iommu = Arc::new(iommu.clone());
        domain.attach(iommu.clone())?;
        Ok(Arc::new(ModelFunction {
            model,
            domain: domain.clone(),
            iommu,
        }))
    }
}

impl<M: DeviceModel> PciFunction for ModelFunction<M> {
    fn addr(&self) -> PciAddr {
        self.model.addr()
    }

    fn config(&self) -> Result<Regs, Error> {
        let name = format!("{} config ({})", self.model.addr(), self.model.name());
        Ok(Regs::emulated(self.model.config_space(), 256, name))
    }

    fn bar(&self, bar: u32) -> Result<Regs, Error> {
        let Some((space, len)) = self.model.bar_space(bar) else {
            return Err(Error::Pci {
                addr: self.model.addr().to_string(),
                detail: format!("BAR{bar} is not modelled ({})", self.model.name()),
                hint: None,
            });
        };
        let name = format!("{} BAR{bar} ({})", self.model.addr(), self.model.name());
        Ok(Regs::emulated(space, len, name))
    }

    fn can_reset(&self) -> bool {
        true
    }

    fn reset(&self) -> Result<(), Error> {
        self.model.reset();
        Ok(())
    }

    fn domain(&self) -> &DmaDomain {
        &self.domain
    }

    fn map_dma(&self, region: &DmaRegion) -> Result<DmaGuard, Error> {
        self.iommu.map(region)
    }

    fn msix_vectors(&self) -> u32 {
        self.model.msix_vectors()
    }

    fn enable_msix(&self, n: u32) -> Result<Vec<super::EventFd>, Error> {
        self.model.enable_msix(n)
    }

    fn disable_msix(&self) -> Result<(), Error> {
        self.model.disable_msix();
        Ok(())
    }
}
