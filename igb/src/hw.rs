//! An igb function as the driver brings it up: identity (which
//! [`Family`] member), reset, the EEPROM, the MAC address, the PHY and the
//! link (82576 datasheet §4.3 "Device Initialization": mask interrupts,
//! stop the queues, reset, wait for the EEPROM's auto-read, mask again;
//! the 82580's and I350's are the same steps).
use crate::family::Family;
use crate::regs::*;
use crate::Error;
use rpmd_pmd::function::{cfg, wait_until, PciFunction, Regs};
use rpmd_pmd::port::MacAddr;
use std::sync::Arc;
use std::time::Duration;

/// How long each wait on the device may take: reset, EEPROM read, PHY
/// access (the datasheet's longest, the EEPROM auto-read, is ~10 ms).
pub const WAIT: Duration = Duration::from_millis(500);

/// How long a reset waits for the EEPROM's auto-read to report done
/// (Linux's igb: ten tries a millisecond apart).
pub const AUTO_READ: Duration = Duration::from_millis(20);

/// Link state as STATUS reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkStatus {
    /// Link up.
    pub up: bool,
    /// Speed in Mb/s (10, 100, 1000).
    pub speed_mbps: u32,
    /// Full duplex.
    pub full_duplex: bool,
}

/// An igb function with its register BAR mapped.
pub struct Hw {
    func: Arc<dyn PciFunction>,
    bar: Arc<Regs>,
    addr: String,
    family: Family,
    device: u16,
}

/// Where a function's NVM words are read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NvmSource {
    /// An EEPROM (or flash) through EERD: the 82576, 82580, I350.
    Eeprom,
    /// The I210's flash, its shadow RAM read through EERD while software
    /// holds the NVM in SW_FW_SYNC.
    Flash,
    /// The I210's or I211's iNVM: one-time-programmable records, of which
    /// only word autoloads hold NVM words (the MAC address among them).
    Invm,
}

impl Hw {
    /// Checks the function's IDs and maps BAR 0. Nothing is written.
    pub fn open(func: Arc<dyn PciFunction>) -> Result<Hw, Error> {
        Self::open_as(func, &DEVICE_IDS, Family::of)
    }

    /// [`open`](Hw::open) for a virtual function (an 82576's or I350's):
    /// its family is its PF's.
    pub fn open_vf(func: Arc<dyn PciFunction>) -> Result<Hw, Error> {
        Self::open_as(func, &DEVICE_IDS_VF, |device| match device {
            0x10CA => Some(Family::I82576),
            0x1520 => Some(Family::I350),
            _ => None,
        })
    }

    fn open_as(
        func: Arc<dyn PciFunction>,
        ids: &[u16],
        family_of: fn(u16) -> Option<Family>,
    ) -> Result<Hw, Error> {
        let addr = func.addr().to_string();
        let fail = |what| {
            let addr = addr.clone();
            move |source| Error::Function { addr, what, source }
        };
        let c = func.config().map_err(fail("config space"))?;
        let vendor = c.read16(cfg::VENDOR).map_err(fail("vendor ID"))?;
        let device = c.read16(cfg::DEVICE).map_err(fail("device ID"))?;
        let family = family_of(device).filter(|_| vendor == VENDOR_INTEL);
        let Some(family) = family else {
            let known: Vec<String> = ids.iter().map(|d| format!("{d:04x}")).collect();
            return Err(Error::NotIgb {
                addr,
                vendor,
                device,
                known: known.join("/"),
            });
        };
        let bar = Arc::new(func.bar(0).map_err(fail("BAR 0 (registers)"))?);
        Ok(Hw {
            func,
            bar,
            addr,
            family,
            device,
        })
    }

    /// Which member of the family it is.
    pub fn family(&self) -> Family {
        self.family
    }

    /// Which LAN function of its device it is (STATUS.FUNC_ID: 0-3).
    pub fn lan_function(&self) -> Result<u8, Error> {
        Ok(((self.read(STATUS)? & STATUS_FUNC_MASK) >> STATUS_FUNC_SHIFT) as u8)
    }

    /// Refuses a function whose link mode (CTRL_EXT, loaded from the
    /// NVM at reset) is not the internal copper PHY's: SerDes, SGMII and
    /// 1000BASE-KX links need their PCS set up, which this driver does
    /// not do.
    pub fn check_link_mode(&self) -> Result<(), Error> {
        let mask = CTRL_EXT_LINK_MODE_MASK;
        let bits = (self.read(CTRL_EXT)? & mask) >> mask.trailing_zeros();
        let mode = match bits {
            0 => return Ok(()),
            1 => "1000BASE-KX",
            2 => "SGMII",
            _ => "SerDes",
        };
        Err(Error::LinkMode {
            addr: self.addr.clone(),
            family: self.family.name(),
            mode,
            bits,
        })
    }

    /// The function's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The register BAR, for the queues' tail registers.
    pub fn regs(&self) -> &Arc<Regs> {
        &self.bar
    }

    /// The PCI function (for DMA mapping).
    pub fn function(&self) -> &Arc<dyn PciFunction> {
        &self.func
    }

    pub(crate) fn fail(&self, what: &'static str) -> impl Fn(rpmd_pmd::Error) -> Error + '_ {
        move |source| Error::Function {
            addr: self.addr.clone(),
            what,
            source,
        }
    }

    /// Reads register `off`.
    pub fn read(&self, off: u64) -> Result<u32, Error> {
        self.bar.read32(off).map_err(self.fail("register read"))
    }

    /// Writes register `off`.
    pub fn write(&self, off: u64, v: u32) -> Result<(), Error> {
        self.bar
            .write32(off, v)
            .map_err(self.fail("register write"))
    }

    /// Masks every interrupt cause and clears what is pending.
    fn mask_interrupts(&self) -> Result<(), Error> {
        self.write(IMC, u32::MAX)?;
        self.write(EIMC, u32::MAX)?;
        self.read(ICR).map(drop)
    }

    /// Resets the device (§4.3): interrupts masked, receive and transmit
    /// stopped, CTRL.RST, then waits until the reset bit clears, and for
    /// the EEPROM's auto-read; bus mastering on for DMA. Returns whether
    /// the auto-read reported done within [`AUTO_READ`]: as Linux's igb,
    /// a device that never sets EECD.AUTO_RD (no EEPROM; QEMU's model) is
    /// not a failure, and its EEPROM is still read through EERD.
    pub fn reset(&self) -> Result<bool, Error> {
        self.func
            .enable_bus_master()
            .map_err(self.fail("bus mastering"))?;
        self.mask_interrupts()?;
        self.write(RCTL, 0)?;
        self.write(TCTL, TCTL_PSP)?;
        // Let queued DMA drain before the reset (Linux waits 10 ms).
        self.read(STATUS)?;
        std::thread::sleep(Duration::from_millis(10));
        let ctrl = self.read(CTRL)?;
        self.write(CTRL, ctrl | CTRL_RST)?;
        // The reset takes ~1 us; registers read back wrong until then.
        std::thread::sleep(Duration::from_millis(1));
        wait_until("igb reset (CTRL.RST to clear)", WAIT, || {
            Ok(self.bar.read32(CTRL)? & CTRL_RST == 0)
        })
        .map_err(self.fail("reset"))?;
        let auto_read = wait_until("igb EEPROM auto-read", AUTO_READ, || {
            Ok(self.bar.read32(EECD)? & EECD_AUTO_RD != 0)
        });
        let auto_read = match auto_read {
            Ok(()) => true,
            Err(rpmd_pmd::Error::Timeout { .. }) => false,
            Err(e) => return Err(self.fail("reset")(e)),
        };
        self.mask_interrupts()?;
        Ok(auto_read)
    }

    /// Writes VLAN filter table register `k` (as many times as the member
    /// needs: [`Family::vfta_writes`]).
    pub fn write_vfta(&self, k: usize, v: u32) -> Result<(), Error> {
        (0..self.family.vfta_writes()).try_for_each(|_| self.write(VFTA + 4 * k as u64, v))
    }

    /// Where its NVM words come from: the I211 and flashless I210s have
    /// only the iNVM; another I210 says in EECD whether a flash is there.
    pub fn nvm_source(&self) -> Result<NvmSource, Error> {
        if self.family != Family::I210 && self.family != Family::I211 {
            return Ok(NvmSource::Eeprom);
        }
        if self.family.invm_only(self.device) {
            return Ok(NvmSource::Invm);
        }
        Ok(match self.read(EECD)? & EECD_FLASH_DETECTED_I210 {
            0 => NvmSource::Invm,
            _ => NvmSource::Flash,
        })
    }

    /// Reads NVM word `word`: through EERD (holding the NVM in SW_FW_SYNC
    /// on an I210's flash), or from the iNVM's records.
    pub fn eeprom_word(&self, word: u16) -> Result<u16, Error> {
        match self.nvm_source()? {
            NvmSource::Eeprom => self.eerd(word),
            NvmSource::Flash => self.holding(SWFW_EEP_SM, || self.eerd(word)),
            NvmSource::Invm => self.invm_word(word),
        }
    }

    /// Reads NVM word `word` through EERD.
    fn eerd(&self, word: u16) -> Result<u16, Error> {
        self.write(EERD, (word as u32) << EERD_ADDR_SHIFT | EERD_START)?;
        let mut v = 0;
        wait_until("igb EEPROM read (EERD.DONE)", WAIT, || {
            v = self.bar.read32(EERD)?;
            Ok(v & EERD_DONE != 0)
        })
        .map_err(self.fail("EEPROM read"))?;
        Ok((v >> EERD_DATA_SHIFT) as u16)
    }

    /// Checks the EEPROM image's checksums: in every section the family
    /// keeps one for ([`Family::nvm_checked_sections`]), words 0x00-0x3F
    /// of the section sum to [`NVM_SUM`] (datasheet §6.1; Linux refuses
    /// the device otherwise, "The NVM Checksum Is Not Valid").
    pub fn check_eeprom(&self) -> Result<(), Error> {
        if self.nvm_source()? == NvmSource::Invm {
            // OTP records carry no checksum word (Linux validates none).
            return Ok(());
        }
        let compat = self.eeprom_word(NVM_COMPATIBILITY_REG_3)?;
        for f in 0..self.family.nvm_checked_sections(compat) {
            let first = self.family.nvm_section(f);
            let last = first + NVM_CHECKSUM_WORD;
            let mut sum = 0u16;
            for w in first..=last {
                sum = sum.wrapping_add(self.eeprom_word(w)?);
            }
            if sum != NVM_SUM {
                return Err(Error::EepromChecksum {
                    addr: self.addr.clone(),
                    first,
                    last,
                    sum,
                });
            }
        }
        Ok(())
    }

    /// The MAC address the EEPROM holds for this LAN function (words 0-2
    /// of its section).
    pub fn eeprom_mac(&self) -> Result<MacAddr, Error> {
        let base = self.family.nvm_section(self.lan_function()?);
        let mut m = [0u8; 6];
        for (k, &w) in NVM_MAC.iter().enumerate() {
            let v = self.eeprom_word(base + w)?;
            m[2 * k..2 * k + 2].copy_from_slice(&v.to_le_bytes());
        }
        Ok(MacAddr(m))
    }

    /// The MAC address in receive-address entry 0 (loaded from the
    /// EEPROM at reset), if it is marked valid.
    pub fn mac(&self) -> Result<Option<MacAddr>, Error> {
        let (lo, hi) = (self.read(RAL0)?, self.read(RAH0)?);
        if hi & RAH_AV == 0 {
            return Ok(None);
        }
        let mut m = [0u8; 6];
        m[..4].copy_from_slice(&lo.to_le_bytes());
        m[4..].copy_from_slice(&(hi as u16).to_le_bytes());
        Ok(Some(MacAddr(m)))
    }

    /// The EEPROM image version as Linux's igb reads it
    /// (`igb_get_fw_version`): word 5 holds the major in bits 15:12. The
    /// 82576's and 82580's images without an eTrack ID give "major.minor-
    /// id" (minor in bits 11:4, image ID in 3:0); the others "major.minor,
    /// 0xETRACK" (minor in bits 11:4 when bits 11:8 are set, else in 7:0).
    pub fn fw_version(&self) -> Result<String, Error> {
        if self.nvm_source()? == NvmSource::Invm {
            return Ok("iNVM".into());
        }
        let v = self.eeprom_word(NVM_VERSION)?;
        let etrack_hi = self.eeprom_word(NVM_ETRACK_WORD + 1)?;
        let etrack = etrack_hi & 0xf000 == NVM_ETRACK_VALID;
        if !etrack && !self.family.new_version_format() {
            return Ok(format!("{}.{}-{}", v >> 12, (v >> 4) & 0xff, v & 0xf));
        }
        let minor = if v & 0x0f00 == 0 {
            v & 0xff
        } else {
            (v >> 4) & 0xff
        };
        let mut s = format!("{}.{}", v >> 12, minor);
        if etrack {
            let lo = self.eeprom_word(NVM_ETRACK_WORD)?;
            s += &format!(", {:#010x}", (etrack_hi as u32) << 16 | lo as u32);
        }
        Ok(s)
    }

    /// Reads PHY register `reg` through MDIC.
    pub fn phy_read(&self, reg: u32) -> Result<u16, Error> {
        self.mdic(reg, MDIC_OP_READ).map(|v| v as u16)
    }

    /// Writes PHY register `reg` through MDIC.
    pub fn phy_write(&self, reg: u32, v: u16) -> Result<(), Error> {
        self.mdic(reg, MDIC_OP_WRITE | v as u32).map(drop)
    }

    /// One MDI access: `op` (opcode, and data for a write) on `reg`;
    /// returns MDIC as the access left it.
    fn mdic(&self, reg: u32, op: u32) -> Result<u32, Error> {
        if self.family.shares_with_firmware() {
            return self.holding(SWFW_PHY0_SM, || self.mdic_access(reg, op));
        }
        self.mdic_access(reg, op)
    }

    fn mdic_access(&self, reg: u32, op: u32) -> Result<u32, Error> {
        self.write(
            MDIC,
            reg << MDIC_REG_SHIFT | PHY_ADDR << MDIC_PHY_SHIFT | op,
        )?;
        let mut v = 0;
        wait_until("igb PHY access (MDIC.READY)", WAIT, || {
            v = self.bar.read32(MDIC)?;
            Ok(v & (MDIC_READY | MDIC_ERROR) != 0)
        })
        .map_err(self.fail("PHY access"))?;
        if v & MDIC_ERROR != 0 {
            return Err(Error::Phy {
                addr: self.addr.clone(),
                reg,
            });
        }
        Ok(v)
    }

    /// The PHY's identifier (registers 2 and 3).
    pub fn phy_id(&self) -> Result<u32, Error> {
        Ok((self.phy_read(PHY_ID1)? as u32) << 16 | self.phy_read(PHY_ID2)? as u32)
    }

    /// Brings the link up as the driver does at start: CTRL.SLU, then the
    /// PHY's auto-negotiation enabled and restarted (as Linux's igb does
    /// for a copper link); the link comes up when it completes.
    pub fn set_link_up(&self) -> Result<(), Error> {
        let c = self.read(CTRL)?;
        self.write(CTRL, c | CTRL_SLU)?;
        let bmcr = self.phy_read(PHY_CONTROL)?;
        self.phy_write(
            PHY_CONTROL,
            bmcr | PHY_CONTROL_AN_ENABLE | PHY_CONTROL_AN_RESTART,
        )
    }

    /// The link as STATUS reports it.
    pub fn link(&self) -> Result<LinkStatus, Error> {
        let s = self.read(STATUS)?;
        Ok(LinkStatus {
            up: s & STATUS_LU != 0,
            speed_mbps: match (s >> STATUS_SPEED_SHIFT) & 3 {
                0 => 10,
                1 => 100,
                _ => 1000,
            },
            full_duplex: s & STATUS_FD != 0,
        })
    }

    /// Frames the device dropped for lack of room in its receive
    /// buffer since the last read (MPC, which clears on read; RNBC counts
    /// frames that found no descriptor, which may still arrive later, and
    /// is an xstat).
    pub fn missed(&self) -> Result<u64, Error> {
        Ok(self.read(MPC)? as u64)
    }

    /// Polls register `off` until `done` holds for its value, within
    /// [`WAIT`].
    pub fn wait_reg(
        &self,
        what: &'static str,
        off: u64,
        done: impl Fn(u32) -> bool,
    ) -> Result<(), Error> {
        wait_until(what, WAIT, || Ok(done(self.bar.read32(off)?))).map_err(self.fail(what))
    }
}
