//! The model as an I210 or I211: the semaphores firmware shares the NVM
//! and the PHY through (SWSM's SMBI taken by the read that finds it
//! clear, SW_FW_SYNC), a flash whose shadow RAM EERD reads, or the iNVM's
//! records; and the rules a driver must keep, each broken one recorded
//! as a violation: EERD and MDIC only while software holds the NVM or
//! the PHY in SW_FW_SYNC, SW_FW_SYNC written only under SWSM.SWESMBI, no
//! EERD on a part whose NVM is the iNVM.
use super::{model_mac_of, IgbModel, ModelOptions, State};
use crate::family::Family;
use crate::regs::*;

/// The iNVM image: a CSR-autoload record (and its dword), an RSA key
/// record (and its eight), then the MAC address as three word-autoload
/// records, unless `empty`; the rest uninitialized.
pub(super) fn invm_image(empty: bool) -> Vec<u32> {
    let mut v = vec![INVM_CSR_AUTOLOAD | 0x0018 << 9, 0x1234_5678];
    v.push(INVM_RSA_KEY_SHA256);
    // Key dwords whose low bits look like word records for word 0: a
    // reader that does not skip them reads a wrong address.
    v.extend((0..INVM_RSA_KEY_SHA256_DWORDS).map(|_| 0xdead_0000 | INVM_WORD_AUTOLOAD));
    if !empty {
        let mac = model_mac_of(0).0;
        for k in 0..3u32 {
            let w = u16::from_le_bytes([mac[2 * k as usize], mac[2 * k as usize + 1]]) as u32;
            v.push(w << 16 | k << 9 | INVM_WORD_AUTOLOAD);
        }
    }
    v.resize(INVM_SIZE as usize, INVM_UNINITIALIZED);
    v
}

/// Whether a `family` part with ID `device` keeps its NVM in the iNVM
/// alone.
pub(super) fn invm_part(family: Family, device: u16, opts: &ModelOptions) -> bool {
    family.shares_with_firmware() && (family.invm_only(device) || opts.flashless)
}

impl IgbModel {
    /// Whether its NVM is the iNVM alone.
    pub(super) fn invm(&self) -> bool {
        invm_part(self.family, self.device, &self.opts)
    }

    /// An I210/I211 register read, if it is one of theirs.
    pub(super) fn i210_read(&self, s: &mut State, off: u64) -> Option<u32> {
        if !self.family.shares_with_firmware() {
            return None;
        }
        match off {
            SWSM => {
                let v = Self::reg(s, SWSM);
                s.regs.insert(SWSM, v | SWSM_SMBI);
                Some(v)
            }
            SW_FW_SYNC => Some(Self::reg(s, SW_FW_SYNC) | self.opts.firmware_holds << 16),
            0x12120..=0x1221C => Some(s.invm[((off - 0x12120) / 4) as usize]),
            _ => None,
        }
    }

    /// An I210/I211 register write checked against the rules; whether it
    /// was refused (a violation, not carried out).
    pub(super) fn i210_refuses(&self, s: &mut State, off: u64, v: u32) -> bool {
        if !self.family.shares_with_firmware() {
            return false;
        }
        let sync = Self::reg(s, SW_FW_SYNC);
        let broken = match off {
            EERD if self.invm() => Some("EERD on a part whose NVM is the iNVM".to_string()),
            EERD if sync & SWFW_EEP_SM == 0 => {
                Some("EERD without the NVM held in SW_FW_SYNC".to_string())
            }
            MDIC if sync & SWFW_PHY0_SM == 0 => {
                Some("MDIC without the PHY held in SW_FW_SYNC".to_string())
            }
            SW_FW_SYNC if Self::reg(s, SWSM) & SWSM_SWESMBI == 0 => {
                Some(format!("SW_FW_SYNC write of {v:#x} without SWSM.SWESMBI"))
            }
            SW_FW_SYNC if v & self.opts.firmware_holds != 0 => Some(format!(
                "SW_FW_SYNC write of {v:#x}: firmware holds {:#x}",
                self.opts.firmware_holds
            )),
            0x2800..=0x2BFF | 0x3800..=0x3BFF if (off & 0x7ff) / 0x100 >= self.queues() => {
                Some(format!(
                    "write of {v:#x} to {off:#x}: the {} has {} queues",
                    self.family.name(),
                    self.queues()
                ))
            }
            _ => None,
        };
        match broken {
            Some(what) => {
                Self::violation(s, what);
                true
            }
            None => false,
        }
    }
}
