//! The modern virtio PCI transport (virtio 1.2 §4.1.4): common, notify
//! and device configuration windows found through vendor capabilities.
use super::{perr, PmdError};
use crate::driver::net::Kick;
use rpmd_pmd::function::PciFunction;
use rpmd_pmd::function::{wait_until, Regs};
use std::sync::Arc;
use std::time::Duration;

// §4.1.4: vendor capability types and the common configuration layout.
const CAP_VENDOR: u8 = 0x09;
const CFG_COMMON: u8 = 1;
const CFG_NOTIFY: u8 = 2;
const CFG_DEVICE: u8 = 4;
const DFSELECT: u64 = 0x00;
const DF: u64 = 0x04;
const GFSELECT: u64 = 0x08;
const GF: u64 = 0x0c;
const MSIX_CONFIG: u64 = 0x10;
const STATUS: u64 = 0x14;
const Q_SELECT: u64 = 0x16;
const Q_SIZE: u64 = 0x18;
const Q_MSIX: u64 = 0x1a;
const Q_ENABLE: u64 = 0x1c;
const Q_NOTIFY_OFF: u64 = 0x1e;
const Q_DESC: u64 = 0x20;
const Q_DRIVER: u64 = 0x28;
const Q_DEVICE: u64 = 0x30;
/// The three configuration windows, each a BAR and an offset in it.
pub(super) struct Modern {
    pub(super) common: (Arc<Regs>, u64),
    /// Notify window: BAR, offset, `notify_off_multiplier`.
    pub(super) notify: (Arc<Regs>, u64, u32),
    pub(super) device: (Arc<Regs>, u64),
}

impl Modern {
    /// Walks the capability list (§4.1.4) for the windows.
    pub(super) fn open(d: &dyn PciFunction, port: &str) -> Result<Modern, PmdError> {
        let cfg = d.config()?;
        let mut found: [Option<(u8, u64, u32)>; 3] = [None; 3];
        for c in d.capabilities()? {
            if c.id != CAP_VENDOR {
                continue;
            }
            let o = c.offset as u64;
            let ty = cfg.read8(o + 3)?;
            let bar = cfg.read8(o + 4)?;
            let off = cfg.read32(o + 8)? as u64;
            let slot = match ty {
                CFG_COMMON => 0,
                CFG_NOTIFY => 1,
                CFG_DEVICE => 2,
                _ => continue,
            };
            // The first capability of each type is the preferred one.
            if found[slot].is_none() {
                let mult = if ty == CFG_NOTIFY {
                    cfg.read32(o + 16)?
                } else {
                    0
                };
                found[slot] = Some((bar, off, mult));
            }
        }
        let [Some(common), Some(notify), Some(device)] = found else {
            return Err(perr(
                port,
                "no virtio 1.x common/notify/device capabilities (a legacy-only device?)",
            ));
        };
        let mut bars: [Option<Arc<Regs>>; 6] = Default::default();
        let mut bar = |b: u8| -> Result<Arc<Regs>, PmdError> {
            let slot = bars
                .get_mut(b as usize)
                .ok_or_else(|| perr(port, format!("capability names BAR{b}")))?;
            if slot.is_none() {
                *slot = Some(Arc::new(d.bar(b as u32)?));
            }
            Ok(slot.clone().unwrap_or_else(|| unreachable!("just set")))
        };
        Ok(Modern {
            common: (bar(common.0)?, common.1),
            notify: (bar(notify.0)?, notify.1, notify.2),
            device: (bar(device.0)?, device.1),
        })
    }

    pub(super) fn c(&self) -> (&Regs, u64) {
        (&self.common.0, self.common.1)
    }

    pub(super) fn status(&self) -> Result<u8, PmdError> {
        let (r, o) = self.c();
        r.read8(o + STATUS)
    }

    pub(super) fn set_status(&self, s: u8) -> Result<(), PmdError> {
        let (r, o) = self.c();
        r.write8(o + STATUS, s)
    }

    /// §4.1.4.3.2: writing 0 resets; the device reads 0 when done.
    pub(super) fn reset(&self, port: &str) -> Result<(), PmdError> {
        self.set_status(0)?;
        wait_until(
            &format!("{port}: virtio reset"),
            Duration::from_secs(1),
            || Ok(self.status()? == 0),
        )
    }

    /// The MSI-X vector for configuration changes (`NO_VECTOR`: none).
    pub(super) fn set_config_vector(&self, v: u16) -> Result<(), PmdError> {
        let (r, o) = self.c();
        r.write16(o + MSIX_CONFIG, v)
    }

    /// The configuration-change vector the device took.
    pub(super) fn config_vector(&self) -> Result<u16, PmdError> {
        let (r, o) = self.c();
        r.read16(o + MSIX_CONFIG)
    }

    /// The most entries queue `index` takes (0: no such queue).
    pub(super) fn max_queue_size(&self, index: u16) -> Result<u16, PmdError> {
        let (r, o) = self.c();
        r.write16(o + Q_SELECT, index)?;
        r.read16(o + Q_SIZE)
    }

    pub(super) fn features(&self) -> Result<u64, PmdError> {
        let (r, o) = self.c();
        let mut f = 0u64;
        for sel in 0..2u32 {
            r.write32(o + DFSELECT, sel)?;
            f |= (r.read32(o + DF)? as u64) << (32 * sel);
        }
        Ok(f)
    }

    pub(super) fn set_features(&self, f: u64) -> Result<(), PmdError> {
        let (r, o) = self.c();
        for sel in 0..2u32 {
            r.write32(o + GFSELECT, sel)?;
            r.write32(o + GF, (f >> (32 * sel)) as u32)?;
        }
        Ok(())
    }

    /// Sets up queue `index` (§4.1.5.1.3) at `addrs` (descriptors, driver
    /// area, device area) with `size` entries, its completions signalled
    /// on MSI-X `vector` (or `NO_VECTOR`); returns its doorbell.
    pub(super) fn setup_queue(
        &self,
        index: u16,
        addrs: (u64, u64, u64),
        size: u16,
        vector: u16,
        port: &str,
    ) -> Result<Kick, PmdError> {
        let (r, o) = self.c();
        let max = self.max_queue_size(index)?;
        if max == 0 {
            return Err(perr(port, format!("the device has no queue {index}")));
        }
        if size > max {
            return Err(perr(
                port,
                format!(
                    "queue {index}: {size} entries asked, the device takes at most {max} (queue_size=)"
                ),
            ));
        }
        r.write16(o + Q_SIZE, size)?;
        let (desc, avail, used) = addrs;
        r.write64(o + Q_DESC, desc)?;
        r.write64(o + Q_DRIVER, avail)?;
        r.write64(o + Q_DEVICE, used)?;
        // §4.1.5.1.2.1: the device answers NO_VECTOR when it could not
        // take the vector.
        r.write16(o + Q_MSIX, vector)?;
        if r.read16(o + Q_MSIX)? != vector {
            return Err(perr(
                port,
                format!("queue {index}: the device refused MSI-X vector {vector}"),
            ));
        }
        let noff = r.read16(o + Q_NOTIFY_OFF)? as u64;
        r.write16(o + Q_ENABLE, 1)?;
        let off = self.notify.1 + noff * self.notify.2 as u64;
        // Check the doorbell once here, so the data path's writes cannot
        // fail on bounds.
        self.notify.0.read32(off).map(|_| ())?;
        Ok(Kick::Mmio {
            regs: self.notify.0.clone(),
            off,
            index,
        })
    }
}
