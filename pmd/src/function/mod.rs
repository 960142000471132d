//! The PCI function a driver drives, whoever stands behind it.
//!
//! A [`PciDriver`](crate::port::PciDriver)'s probe receives a
//! [`PciFunction`] from the registry: config space, BAR windows, MSI-X
//! eventfds, reset and DMA mapping through the registry's [`DmaDomain`].
//! VFIO is one implementation ([`VfioBus`](crate::vfio::VfioBus)); a
//! device model is another ([`ModelBus`] holds them), with [`Regs`]
//! windows answered by a [`RegisterSpace`]
//! so that it sees every register access, doorbells included. Drivers
//! never open VFIO themselves, and cannot tell the two apart.
//!
//! A [`PciBus`] turns addresses into functions: it says what sits at an
//! address (IDs, for choosing the driver) and opens it, attaching its
//! IOMMU to the domain so that every registered region is mapped.
use crate::domain::{DmaDomain, DmaGuard};
use crate::pci::{PciAddr, PciDevice};
use crate::{DmaRegion, Error};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

mod eventfd;
mod iommu;
pub mod model;
pub mod regs;
mod sys;

pub use eventfd::EventFd;
pub use regs::{Mmio32, RegisterSpace, Regs};

/// PCI config-space offsets (PCI Local Bus spec 3.0, §6.2).
pub mod cfg {
    /// Vendor ID (16 bits).
    pub const VENDOR: u64 = 0x00;
    /// Device ID (16 bits).
    pub const DEVICE: u64 = 0x02;
    /// Command register.
    pub const COMMAND: u64 = 0x04;
    /// Status register.
    pub const STATUS: u64 = 0x06;
    /// First capability's offset.
    pub const CAP_PTR: u64 = 0x34;
    /// Command: respond to memory-space accesses.
    pub const CMD_MEMORY: u16 = 1 << 1;
    /// Command: may master the bus (DMA).
    pub const CMD_BUS_MASTER: u16 = 1 << 2;
    /// Status: the capability list exists.
    pub const STATUS_CAP_LIST: u16 = 1 << 4;
}

/// A PCI capability found in config space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PciCap {
    /// Capability ID (0x09 vendor-specific, 0x11 MSI-X, ...).
    pub id: u8,
    /// Offset in config space.
    pub offset: u8,
}

/// Polls `done` until it returns `true` or `timeout` passes; every wait on
/// a device uses this, so none can hang.
pub fn wait_until(
    what: &str,
    timeout: Duration,
    mut done: impl FnMut() -> Result<bool, Error>,
) -> Result<(), Error> {
    let start = std::time::Instant::now();
    loop {
        if done()? {
            return Ok(());
        }
        if start.elapsed() >= timeout {
            return Err(Error::Timeout {
                what: what.to_string(),
                ms: timeout.as_millis() as u64,
            });
        }
        std::thread::sleep(Duration::from_micros(50));
    }
}

/// One PCI function, as a driver sees it.
pub trait PciFunction: Send + Sync {
    /// Its address.
    fn addr(&self) -> PciAddr;

    /// Config space (256 bytes or more).
    fn config(&self) -> Result<Regs, Error>;

    /// BAR `bar` (0..=5): memory or I/O space, bounds-checked.
    fn bar(&self, bar: u32) -> Result<Regs, Error>;

    /// MSI-X vectors the function has (0 if none; the default, for
    /// functions without MSI-X).
    fn msix_vectors(&self) -> u32 {
        0
    }

    /// Routes MSI-X vectors `0..n` to new eventfds, in vector order (by
    /// default an error: the function has no MSI-X).
    fn enable_msix(&self, n: u32) -> Result<Vec<EventFd>, Error> {
        Err(Error::Pci {
            addr: self.addr().to_string(),
            detail: format!("MSI-X ({n} vectors) asked of a function that has none"),
            hint: None,
        })
    }

    /// Turns MSI-X off (by default nothing to do).
    fn disable_msix(&self) -> Result<(), Error> {
        Ok(())
    }

    /// Whether a function-level reset is offered.
    fn can_reset(&self) -> bool;

    /// Resets the function.
    fn reset(&self) -> Result<(), Error>;

    /// The DMA domain the function's IOMMU belongs to: every region
    /// registered there is mapped for it.
    fn domain(&self) -> &DmaDomain;

    /// Maps `region` for this function only (a port's rings), at IOVA =
    /// VA; unmapped when the guard drops.
    fn map_dma(&self, region: &DmaRegion) -> Result<DmaGuard, Error>;

    /// Walks the config-space capability list. Malformed lists (pointers
    /// into the header, loops) end the walk instead of looping.
    fn capabilities(&self) -> Result<Vec<PciCap>, Error> {
        walk_capabilities(&self.config()?)
    }

    /// Turns on memory-space decoding and bus mastering (DMA).
    fn enable_bus_master(&self) -> Result<(), Error> {
        enable_bus_master(&self.config()?)
    }
}

/// The capability list of config space `c`. Malformed lists (pointers
/// into the header, loops) end the walk instead of looping.
pub(crate) fn walk_capabilities(c: &Regs) -> Result<Vec<PciCap>, Error> {
    let mut caps = Vec::new();
    if c.read16(cfg::STATUS)? & cfg::STATUS_CAP_LIST == 0 {
        return Ok(caps);
    }
    let mut off = c.read8(cfg::CAP_PTR)? & 0xfc;
    // At most 48 capabilities fit in the 192 bytes after the header.
    while off >= 0x40 && caps.len() < 48 {
        let id = c.read8(off as u64)?;
        caps.push(PciCap { id, offset: off });
        off = c.read8(off as u64 + 1)? & 0xfc;
    }
    Ok(caps)
}

/// Sets memory decoding and bus mastering in config space `c`.
pub(crate) fn enable_bus_master(c: &Regs) -> Result<(), Error> {
    let cmd = c.read16(cfg::COMMAND)?;
    c.write16(cfg::COMMAND, cmd | cfg::CMD_MEMORY | cfg::CMD_BUS_MASTER)
}

/// Where PCI functions come from: the host through VFIO, or models.
pub trait PciBus: Send + Sync {
    /// What sits at `addr` (IDs and class choose the driver).
    fn describe(&self, addr: PciAddr) -> Result<PciDevice, Error>;

    /// Opens the function at `addr`, its IOMMU attached to `domain`.
    fn open(&self, addr: PciAddr, domain: &DmaDomain) -> Result<Arc<dyn PciFunction>, Error>;
}

/// Opens a model function for a domain.
pub type ModelOpener = Box<dyn Fn(&DmaDomain) -> Result<Arc<dyn PciFunction>, Error> + Send + Sync>;

/// A bus of device models, by address (tests, and a model's users).
#[derive(Default)]
pub struct ModelBus {
    slots: BTreeMap<PciAddr, (PciDevice, ModelOpener)>,
}

impl ModelBus {
    /// An empty bus.
    pub fn new() -> Self {
        Self::default()
    }

    /// Puts a model at `dev.addr`; `open` makes the function each time a
    /// port opens it.
    pub fn insert(&mut self, dev: PciDevice, open: ModelOpener) {
        self.slots.insert(dev.addr, (dev, open));
    }
}

impl PciBus for ModelBus {
    fn describe(&self, addr: PciAddr) -> Result<PciDevice, Error> {
        self.slots
            .get(&addr)
            .map(|s| s.0.clone())
            .ok_or_else(|| Error::Pci {
                addr: addr.to_string(),
                detail: "no device model at this address".into(),
                hint: None,
            })
    }

    fn open(&self, addr: PciAddr, domain: &DmaDomain) -> Result<Arc<dyn PciFunction>, Error> {
        let (_, open) = self.slots.get(&addr).ok_or_else(|| Error::Pci {
            addr: addr.to_string(),
            detail: "no device model at this address".into(),
            hint: None,
        })?;
        open(domain)
    }
}

/// A device model's IOMMU: what its domain and its driver mapped, at
/// IOVA = VA. Cheap to clone (a shared handle); attach a clone to the
/// domain (it is a [`DmaTarget`](crate::domain::DmaTarget)) and
/// [`translate`](ModelIommu::translate) each DMA the model makes, so an
/// access outside the mappings is found rather than made.
#[derive(Clone)]
pub struct ModelIommu {
    name: &'static str,
    maps: Arc<std::sync::Mutex<ModelMaps>>,
}

#[derive(Default)]
struct ModelMaps {
    /// (start, end, id) of each mapping.
    spans: Vec<(u64, u64, u64)>,
    next: u64,
}

struct ModelUnmap(Arc<std::sync::Mutex<ModelMaps>>, u64);

impl Drop for ModelUnmap {
    fn drop(&mut self) {
        lock_maps(&self.0).spans.retain(|m| m.2 != self.1);
    }
}

fn lock_maps(m: &std::sync::Mutex<ModelMaps>) -> std::sync::MutexGuard<'_, ModelMaps> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ModelIommu {
    /// An IOMMU with nothing mapped, named for errors (`"virtio-net model
    /// IOMMU"`).
    pub fn new(name: &'static str) -> ModelIommu {
        ModelIommu {
            name,
            maps: Arc::default(),
        }
    }

    /// The host address of `len` bytes at IOVA `a`, if all of them lie in
    /// one mapping.
    pub fn translate(&self, a: u64, len: usize) -> Option<*mut u8> {
        let end = a.checked_add(len as u64)?;
        lock_maps(&self.maps)
            .spans
            .iter()
            .any(|&(s, e, _)| s <= a && end <= e)
            .then_some(a as *mut u8)
    }

    /// Mappings in place now.
    pub fn mapped(&self) -> usize {
        lock_maps(&self.maps).spans.len()
    }
}

impl crate::domain::DmaTarget for ModelIommu {
    fn name(&self) -> String {
        self.name.into()
    }

    fn map(&self, r: &DmaRegion) -> Result<DmaGuard, Error> {
        let start = r.as_ptr() as u64;
        let mut m = lock_maps(&self.maps);
        m.next += 1;
        let id = m.next;
        m.spans.push((start, start + r.len() as u64, id));
        Ok(DmaGuard::new(ModelUnmap(self.maps.clone(), id)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eventfd_waits_with_a_timeout_and_wait_until_gives_up() {
        let ev = EventFd::new().unwrap();
        assert_eq!(ev.wait(Duration::from_millis(5)).unwrap(), 0);
        ev.signal().unwrap();
        ev.signal().unwrap();
        assert_eq!(ev.wait(Duration::from_secs(1)).unwrap(), 2);
        assert_eq!(ev.take().unwrap(), 0);
        let e = wait_until("device ready", Duration::from_millis(3), || Ok(false)).unwrap_err();
        assert!(matches!(e, Error::Timeout { ms: 3, .. }), "{e}");
        let mut n = 0;
        wait_until("third poll", Duration::from_secs(1), || {
            n += 1;
            Ok(n == 3)
        })
        .unwrap();
    }
}
