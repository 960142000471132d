//! The members of the igb family this driver runs, and where they differ
//! for it. The 82576, 82580, I350, I210 and I211 share the register set
//! the driver uses (queues, filters, RSS, offloads, statistics, MSI-X);
//! what differs is how many queues a function has, how the IVAR table
//! maps a queue to its interrupt entry, how the NVM lays out each LAN
//! function's words, and, on the I210 and I211, where the NVM is and
//! that firmware shares it and the PHY (Linux's igb: `igb_assign_vector`,
//! `igb_validate_nvm_checksum_82580`/`_i350`, `NVM_82580_LAN_FUNC_OFFSET`,
//! `e1000_i210.c`; the 82580, I350 and I210 datasheets, §8.8 and §6).
//!
//! Not run: the I354; and every member's SerDes, fiber and SGMII links,
//! which need the PCS and an SFP cage set up
//! ([`Hw::open`](crate::hw::Hw::open) refuses a function whose link mode
//! is not the internal copper PHY's, naming it).
use crate::regs::*;

/// A member of the igb family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// The 82576 (QEMU's `-device igb`): 16 queues each way.
    I82576,
    /// The 82580: 8 queues each way, an NVM section per LAN function.
    I82580,
    /// The I350: as the 82580, with every function's NVM section
    /// checksummed.
    I350,
    /// The I210: one LAN function, 4 queues each way, the 82580's IVAR
    /// layout; its NVM a flash (its shadow RAM read through EERD under
    /// the software/firmware semaphore) or, flashless, the iNVM.
    I210,
    /// The I211: as the I210 with 2 queues each way, its NVM always the
    /// iNVM.
    I211,
}

impl Family {
    /// Every member, in the order their IDs are listed.
    pub const ALL: [Family; 5] = [
        Family::I82576,
        Family::I82580,
        Family::I350,
        Family::I210,
        Family::I211,
    ];

    /// The member device ID `device` belongs to.
    pub fn of(device: u16) -> Option<Family> {
        Family::ALL
            .into_iter()
            .find(|f| f.device_ids().contains(&device))
    }

    /// Its device IDs.
    pub fn device_ids(self) -> &'static [u16] {
        match self {
            Family::I82576 => &DEVICE_IDS_82576,
            Family::I82580 => &DEVICE_IDS_82580,
            Family::I350 => &DEVICE_IDS_I350,
            Family::I210 => &DEVICE_IDS_I210,
            Family::I211 => &DEVICE_IDS_I211,
        }
    }

    /// Its name, as Intel writes it.
    pub fn name(self) -> &'static str {
        match self {
            Family::I82576 => "82576",
            Family::I82580 => "82580",
            Family::I350 => "I350",
            Family::I210 => "I210",
            Family::I211 => "I211",
        }
    }

    /// Receive queues, and transmit queues, a function has (each
    /// datasheet's feature summary; DPDK's igb offers as many).
    pub fn queues(self) -> u16 {
        match self {
            Family::I82576 => 16,
            Family::I82580 | Family::I350 => 8,
            Family::I210 => 4,
            Family::I211 => 2,
        }
    }

    /// The 8-bit IVAR entry (register `entry / 4`, byte `entry % 4`) of
    /// receive queue `q`. The 82576's table is column-major: register
    /// `q mod 8`, byte 0 for queues 0-7 and byte 2 for 8-15. The 82580's
    /// and I350's is row-major: register `q / 2`, byte 0 for even queues
    /// and byte 2 for odd ones. Transmit queues take the byte after.
    pub fn ivar_rx_entry(self, q: u16) -> u32 {
        let q = q as u32;
        match self {
            Family::I82576 => 4 * (q & 7) + if q & 8 != 0 { 2 } else { 0 },
            _ => 4 * (q >> 1) + 2 * (q & 1),
        }
    }

    /// The first NVM word of LAN function `function`'s section: the
    /// 82576's functions share words 0x00-0x3F; the 82580's and I350's
    /// each have 0x40 words of their own.
    pub fn nvm_section(self, function: u8) -> u16 {
        match self {
            Family::I82576 | Family::I210 | Family::I211 => 0,
            Family::I82580 | Family::I350 => nvm_lan_func_offset(function),
        }
    }

    /// The NVM sections whose checksums must hold, given compatibility
    /// word 3: the 82576 has one; the 82580 one, or all four when the
    /// word's bit 15 says every port's is kept; the I350 always four.
    pub fn nvm_checked_sections(self, compat: u16) -> u8 {
        match self {
            Family::I82576 | Family::I210 | Family::I211 => 1,
            Family::I82580 if compat & NVM_COMPATIBILITY_BIT_MASK == 0 => 1,
            Family::I82580 | Family::I350 => 4,
        }
    }

    /// How many times a VLAN filter table register is written: once,
    /// or ten times on the I350, whose VFTA writes can be lost while
    /// its management controller reads the table (Linux's
    /// `igb_write_vfta_i350`, from Intel's errata).
    pub fn vfta_writes(self) -> usize {
        match self {
            Family::I350 => 10,
            _ => 1,
        }
    }

    /// Whether its NVM version word is always read in the newer format
    /// (minor in bits 11:4 only when bits 11:8 are set), with an eTrack
    /// ID beside it, rather than only when the eTrack word says so.
    pub fn new_version_format(self) -> bool {
        matches!(self, Family::I350 | Family::I210)
    }

    /// Whether software must hold SW_FW_SYNC for the NVM and the PHY
    /// (the I210's and I211's firmware shares them: Linux's
    /// `igb_acquire_swfw_sync_i210`).
    pub fn shares_with_firmware(self) -> bool {
        matches!(self, Family::I210 | Family::I211)
    }

    /// Whether function `device` of this member keeps its NVM in the
    /// iNVM alone (no flash can be fitted): the I211 and the flashless
    /// I210s. Other I210s say at run time (EECD).
    pub fn invm_only(self, device: u16) -> bool {
        self == Family::I211 || matches!(device, 0x157B | 0x157C)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_id_has_one_member() {
        for f in Family::ALL {
            for &d in f.device_ids() {
                assert_eq!(Family::of(d), Some(f), "{d:04x}");
            }
        }
        assert_eq!(Family::of(0x1533), Some(Family::I210));
        assert_eq!(Family::of(0x1539), Some(Family::I211));
        assert_eq!(Family::of(0x1f40), None, "the I354 is not run");
    }

    /// Linux's `igb_assign_vector`: (register index, bit offset) of a
    /// receive queue's entry.
    #[test]
    fn ivar_entries_are_where_linux_writes_them() {
        for q in 0..16u32 {
            let (index, offset) = ((q & 7), (q & 8) << 1);
            let want = 4 * index + offset / 8;
            assert_eq!(Family::I82576.ivar_rx_entry(q as u16), want, "82576 q{q}");
        }
        for q in 0..8u32 {
            let (index, offset) = (q >> 1, (q & 1) << 4);
            let want = 4 * index + offset / 8;
            assert_eq!(Family::I350.ivar_rx_entry(q as u16), want, "I350 q{q}");
            assert_eq!(Family::I82580.ivar_rx_entry(q as u16), want, "82580 q{q}");
        }
    }

    #[test]
    fn nvm_sections_follow_the_lan_function() {
        assert_eq!(Family::I82576.nvm_section(1), 0);
        let i350: Vec<u16> = (0..4).map(|f| Family::I350.nvm_section(f)).collect();
        assert_eq!(i350, [0x00, 0x80, 0xC0, 0x100]);
        assert_eq!(Family::I82580.nvm_checked_sections(0), 1);
        assert_eq!(Family::I82580.nvm_checked_sections(0x8000), 4);
        assert_eq!(Family::I350.nvm_checked_sections(0), 4);
    }
}
