//! The legacy virtio PCI interface (virtio 1.2 §4.1.4.8): registers in I/O
//! BAR0, 32 feature bits, queue sizes fixed by the device, queues placed
//! by page frame number. Legacy devices know no IOMMU, so the addresses
//! they are given are physical: rings and buffers come from IOVA = PA
//! memory (hugepages, root).
use super::{perr, PmdError};
use crate::driver::net::Kick;
use rpmd_pmd::function::PciFunction;
use rpmd_pmd::function::{wait_until, Regs};
use std::sync::Arc;
use std::time::Duration;

// §4.1.4.8: register offsets in BAR0 (MSI-X off, so the device
// configuration starts at 20).
const HOST_FEATURES: u64 = 0x00;
const GUEST_FEATURES: u64 = 0x04;
const QUEUE_PFN: u64 = 0x08;
const QUEUE_SIZE: u64 = 0x0c;
const QUEUE_SELECT: u64 = 0x0e;
const QUEUE_NOTIFY: u64 = 0x10;
const STATUS: u64 = 0x12;
const DEVICE_CFG: u64 = 0x14;
/// §4.1.4.8: queue addresses are given in 4096-byte frames.
const PFN_SHIFT: u32 = 12;

/// The legacy register window.
pub(super) struct Legacy {
    bar: Arc<Regs>,
}

impl Legacy {
    /// BAR0 as the legacy interface; an MMIO BAR0 is not one.
    pub(super) fn open(d: &dyn PciFunction, port: &str) -> Result<Legacy, PmdError> {
        let bar = d.bar(0)?;
        if bar.is_mmio() || bar.len() < DEVICE_CFG + 8 {
            return Err(perr(
                port,
                format!("BAR0 is not a legacy virtio I/O BAR ({bar:?})"),
            ));
        }
        Ok(Legacy { bar: Arc::new(bar) })
    }

    pub(super) fn status(&self) -> Result<u8, PmdError> {
        self.bar.read8(STATUS)
    }

    pub(super) fn set_status(&self, s: u8) -> Result<(), PmdError> {
        self.bar.write8(STATUS, s)
    }

    /// Writing 0 to the status resets the device.
    pub(super) fn reset(&self, port: &str) -> Result<(), PmdError> {
        self.set_status(0)?;
        wait_until(
            &format!("{port}: legacy virtio reset"),
            Duration::from_secs(1),
            || Ok(self.status()? == 0),
        )
    }

    pub(super) fn features(&self) -> Result<u64, PmdError> {
        Ok(self.bar.read32(HOST_FEATURES)? as u64)
    }

    pub(super) fn set_features(&self, f: u64) -> Result<(), PmdError> {
        self.bar.write32(GUEST_FEATURES, f as u32)
    }

    /// The size of queue `index`, which the driver cannot change.
    pub(super) fn queue_size(&self, index: u16) -> Result<u16, PmdError> {
        self.bar.write16(QUEUE_SELECT, index)?;
        self.bar.read16(QUEUE_SIZE)
    }

    /// Gives the device queue `index` at physical address `desc` (its
    /// descriptor table; avail and used follow in the legacy layout, which
    /// `split::Layout` matches). Returns the doorbell.
    pub(super) fn setup_queue(
        &self,
        index: u16,
        desc: u64,
        ring_size: u16,
        port: &str,
    ) -> Result<Kick, PmdError> {
        let size = self.queue_size(index)?;
        if size != ring_size {
            return Err(perr(
                port,
                format!("queue {index} has {size} entries, the ring {ring_size}"),
            ));
        }
        let pfn = u32::try_from(desc >> PFN_SHIFT)
            .ok()
            .filter(|_| desc % (1 << PFN_SHIFT) == 0)
            .ok_or_else(|| {
                perr(
                    port,
                    format!("queue {index} at {desc:#x}: not a 32-bit page frame"),
                )
            })?;
        self.bar.write16(QUEUE_SELECT, index)?;
        self.bar.write32(QUEUE_PFN, pfn)?;
        Ok(Kick::Io16 {
            regs: self.bar.clone(),
            off: QUEUE_NOTIFY,
            index,
        })
    }

    /// The device configuration window (MAC at 0, status at 6).
    pub(super) fn device_cfg(&self) -> (&Regs, u64) {
        (&self.bar, DEVICE_CFG)
    }

    /// The same, owned.
    pub(super) fn device_regs(&self) -> (Arc<Regs>, u64) {
        (self.bar.clone(), DEVICE_CFG)
    }
}
