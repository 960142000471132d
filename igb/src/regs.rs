//! The 82576's registers and bits this driver uses, transcribed from the
//! Intel 82576EB GbE Controller Datasheet, chapter 8 ("Programming
//! Interface", register by register) and chapter 6 (the EEPROM map), and
//! checked against the names and values in Linux's
//! `drivers/net/ethernet/intel/igb/e1000_regs.h` and `e1000_defines.h`,
//! which QEMU's `hw/net/igb_regs.h` copies. Offsets are from BAR 0.

/// PCI vendor ID of Intel.
pub const VENDOR_INTEL: u16 = 0x8086;
/// The 82576 family's device IDs (the datasheet; Linux
/// `e1000_hw.h`): copper, fiber, SerDes, quad copper, quad copper ET2,
/// NS, NS SerDes, SerDes quad. QEMU's `-device igb` is 0x10C9.
pub const DEVICE_IDS: [u16; 8] = [
    0x10C9, 0x10E6, 0x10E7, 0x10E8, 0x1526, 0x150A, 0x1518, 0x150D,
];

/// Device Control.
pub const CTRL: u64 = 0x0000;
/// CTRL: full duplex.
pub const CTRL_FD: u32 = 1 << 0;
/// CTRL: set link up.
pub const CTRL_SLU: u32 = 1 << 6;
/// CTRL: device reset (self-clearing).
pub const CTRL_RST: u32 = 1 << 26;

/// Device Status.
pub const STATUS: u64 = 0x0008;
/// STATUS: full duplex.
pub const STATUS_FD: u32 = 1 << 0;
/// STATUS: link up.
pub const STATUS_LU: u32 = 1 << 1;
/// STATUS: speed, bits 7:6 (00 10, 01 100, 1x 1000 Mb/s).
pub const STATUS_SPEED_SHIFT: u32 = 6;

/// EEPROM/Flash Control.
pub const EECD: u64 = 0x0010;
/// EECD: the EEPROM's auto-read after reset is done.
pub const EECD_AUTO_RD: u32 = 1 << 9;

/// EEPROM Read.
pub const EERD: u64 = 0x0014;
/// EERD: start a read.
pub const EERD_START: u32 = 1 << 0;
/// EERD: the read is done.
pub const EERD_DONE: u32 = 1 << 1;
/// EERD: word address, from bit 2.
pub const EERD_ADDR_SHIFT: u32 = 2;
/// EERD: data, from bit 16.
pub const EERD_DATA_SHIFT: u32 = 16;

/// MDI Control: PHY register access.
pub const MDIC: u64 = 0x0020;
/// MDIC: register number, from bit 16.
pub const MDIC_REG_SHIFT: u32 = 16;
/// MDIC: PHY address, from bit 21.
pub const MDIC_PHY_SHIFT: u32 = 21;
/// MDIC: read opcode (bits 27:26 = 10).
pub const MDIC_OP_READ: u32 = 2 << 26;
/// MDIC: write opcode (bits 27:26 = 01).
pub const MDIC_OP_WRITE: u32 = 1 << 26;
/// MDIC: ready (the access is done).
pub const MDIC_READY: u32 = 1 << 28;
/// MDIC: error (no PHY answered).
pub const MDIC_ERROR: u32 = 1 << 30;
/// The internal PHY's MDIO address.
pub const PHY_ADDR: u32 = 1;
/// PHY Control register (IEEE 802.3 clause 22, register 0).
pub const PHY_CONTROL: u32 = 0;
/// PHY Control: auto-negotiation enable.
pub const PHY_CONTROL_AN_ENABLE: u16 = 1 << 12;
/// PHY Control: restart auto-negotiation (self-clearing).
pub const PHY_CONTROL_AN_RESTART: u16 = 1 << 9;
/// PHY Status register (IEEE 802.3 clause 22, register 1).
pub const PHY_STATUS: u32 = 1;
/// PHY Status: link up.
pub const PHY_STATUS_LINK: u16 = 1 << 2;
/// PHY identifier registers 2 and 3.
pub const PHY_ID1: u32 = 2;
/// See [`PHY_ID1`].
pub const PHY_ID2: u32 = 3;

/// Interrupt Cause Read: clears on read.
pub const ICR: u64 = 0x00C0;
/// Interrupt Mask Clear.
pub const IMC: u64 = 0x00D8;
/// Extended Interrupt Mask Clear.
pub const EIMC: u64 = 0x1528;

/// Receive Control.
pub const RCTL: u64 = 0x0100;
/// Transmit Control.
pub const TCTL: u64 = 0x0400;
/// TCTL: pad short packets.
pub const TCTL_PSP: u32 = 1 << 3;

/// Receive Address Low, entry 0.
pub const RAL0: u64 = 0x5400;
/// Receive Address High, entry 0.
pub const RAH0: u64 = 0x5404;
/// RAH: address valid.
pub const RAH_AV: u32 = 1 << 31;

/// EEPROM words: the MAC address in words 0-2, low byte first.
pub const NVM_MAC: [u16; 3] = [0x00, 0x01, 0x02];
/// EEPROM word of the NVM image version ("EEPROM Image
/// Version").
pub const NVM_VERSION: u16 = 0x05;

/// Missed Packets Count: frames dropped for lack of room in
/// the receive FIFO; clears on read.
pub const MPC: u64 = 0x4010;
/// CRC Error Count.
pub const CRCERRS: u64 = 0x4000;
/// Receive No Buffers Count.
pub const RNBC: u64 = 0x40A0;
