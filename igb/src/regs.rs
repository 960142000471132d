//! The 82576's registers and bits this driver uses, transcribed from the
//! Intel 82576EB GbE Controller Datasheet, chapter 8 ("Programming
//! Interface", register by register) and chapter 6 (the EEPROM map), and
//! checked against the names and values in Linux's
//! `drivers/net/ethernet/intel/igb/e1000_regs.h` and `e1000_defines.h`,
//! which QEMU's `hw/net/igb_regs.h` copies. Offsets are from BAR 0. The
//! 82580, I350, I210 and I211 have these registers at the same offsets (their
//! datasheets' chapter 8; Linux's igb uses one set of definitions for
//! all); the NVM section layout and device IDs below are theirs, checked
//! against Linux's `e1000_defines.h` and `e1000_hw.h`.

/// PCI vendor ID of Intel.
pub const VENDOR_INTEL: u16 = 0x8086;
/// The 82576's device IDs (the datasheet; Linux `e1000_hw.h`): copper,
/// fiber, SerDes, quad copper, quad copper ET2, NS, NS SerDes, SerDes
/// quad. QEMU's `-device igb` is 0x10C9.
pub const DEVICE_IDS_82576: [u16; 8] = [
    0x10C9, 0x10E6, 0x10E7, 0x10E8, 0x1526, 0x150A, 0x1518, 0x150D,
];
/// The 82580's device IDs (Linux `e1000_hw.h`): copper, fiber, SerDes,
/// SGMII, dual copper, quad fiber.
pub const DEVICE_IDS_82580: [u16; 6] = [0x150E, 0x150F, 0x1510, 0x1511, 0x1516, 0x1527];
/// The I350's device IDs (Linux `e1000_hw.h`): copper, fiber, SerDes,
/// SGMII.
pub const DEVICE_IDS_I350: [u16; 4] = [0x1521, 0x1522, 0x1523, 0x1524];
/// The I210's device IDs (Linux `e1000_hw.h`): copper, fiber, SerDes,
/// SGMII (each with a flash), then copper and SerDes flashless (their
/// NVM is the iNVM, a one-time-programmable array).
pub const DEVICE_IDS_I210: [u16; 6] = [0x1533, 0x1536, 0x1537, 0x1538, 0x157B, 0x157C];
/// The I211's device ID (Linux `e1000_hw.h`): copper; its NVM is always
/// the iNVM.
pub const DEVICE_IDS_I211: [u16; 1] = [0x1539];
/// Every device ID the driver claims, the 82576's first.
pub const DEVICE_IDS: [u16; 25] = {
    let mut all = [0u16; 25];
    let mut k = 0;
    while k < 8 {
        all[k] = DEVICE_IDS_82576[k];
        k += 1;
    }
    while k < 14 {
        all[k] = DEVICE_IDS_82580[k - 8];
        k += 1;
    }
    while k < 18 {
        all[k] = DEVICE_IDS_I350[k - 14];
        k += 1;
    }
    while k < 24 {
        all[k] = DEVICE_IDS_I210[k - 18];
        k += 1;
    }
    all[24] = DEVICE_IDS_I211[0];
    all
};

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
/// STATUS: the LAN function this is, bits 3:2.
pub const STATUS_FUNC_MASK: u32 = 0x0C;
/// See [`STATUS_FUNC_MASK`].
pub const STATUS_FUNC_SHIFT: u32 = 2;

/// Extended Device Control.
pub const CTRL_EXT: u64 = 0x0018;
/// CTRL_EXT: link mode, bits 23:22 (00 the internal copper PHY, 01
/// 1000BASE-KX, 10 SGMII, 11 SerDes).
pub const CTRL_EXT_LINK_MODE_MASK: u32 = 0x00C0_0000;

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
/// The EEPROM's checksum word: words 0x00 to it sum to [`NVM_SUM`].
pub const NVM_CHECKSUM_WORD: u16 = 0x3F;
/// What the EEPROM's first 64 words sum to in a valid image.
pub const NVM_SUM: u16 = 0xBABA;
/// EEPROM word of the NVM image version ("EEPROM Image
/// Version").
pub const NVM_VERSION: u16 = 0x05;
/// NVM compatibility word 3: bit 15 set on an 82580 whose four LAN
/// functions' sections each keep a checksum.
pub const NVM_COMPATIBILITY_REG_3: u16 = 0x03;
/// See [`NVM_COMPATIBILITY_REG_3`].
pub const NVM_COMPATIBILITY_BIT_MASK: u16 = 0x8000;
/// NVM words of the eTrack ID, low then high; the high word's bits
/// 15:12 are 0x8 when it is there.
pub const NVM_ETRACK_WORD: u16 = 0x42;
/// See [`NVM_ETRACK_WORD`].
pub const NVM_ETRACK_VALID: u16 = 0x8000;

/// EECD on the I210: a flash holds the NVM (otherwise the iNVM does).
pub const EECD_FLASH_DETECTED_I210: u32 = 1 << 19;
/// Software Semaphore (I210/I211, 82576 datasheet's SWSM): SMBI is taken
/// by the read that finds it clear; SWESMBI latches for the one writer
/// that sets it while firmware does not hold it.
pub const SWSM: u64 = 0x5B50;
/// SWSM: the software semaphore.
pub const SWSM_SMBI: u32 = 1 << 0;
/// SWSM: the software/firmware semaphore.
pub const SWSM_SWESMBI: u32 = 1 << 1;
/// Software-Firmware Synchronization: which side holds each shared
/// resource (software bits 15:0, firmware bits 31:16), written only
/// under SWSM.
pub const SW_FW_SYNC: u64 = 0x5B5C;
/// SW_FW_SYNC: the NVM.
pub const SWFW_EEP_SM: u32 = 0x1;
/// SW_FW_SYNC: the PHY of LAN function 0.
pub const SWFW_PHY0_SM: u32 = 0x2;
/// iNVM data register `n` (64 of them): the I210's and I211's
/// one-time-programmable NVM as records (Linux `e1000_i210.h`).
pub const fn invm_data_reg(n: u16) -> u64 {
    0x12120 + 4 * n as u64
}
/// iNVM data registers.
pub const INVM_SIZE: u16 = 64;
/// iNVM record types (bits 2:0 of a record's first dword).
pub const INVM_UNINITIALIZED: u32 = 0x0;
/// See [`INVM_UNINITIALIZED`]: an NVM word (address in bits 15:9, data
/// in bits 31:16).
pub const INVM_WORD_AUTOLOAD: u32 = 0x1;
/// See [`INVM_UNINITIALIZED`]: a register value, one dword more.
pub const INVM_CSR_AUTOLOAD: u32 = 0x2;
/// See [`INVM_UNINITIALIZED`]: an RSA key hash, eight dwords more.
pub const INVM_RSA_KEY_SHA256: u32 = 0x4;
/// Dwords after a CSR autoload record's first.
pub const INVM_CSR_AUTOLOAD_DWORDS: u16 = 1;
/// Dwords after an RSA key record's first.
pub const INVM_RSA_KEY_SHA256_DWORDS: u16 = 8;

/// The first NVM word of LAN function `a`'s section on the 82580 and
/// I350 (0, 0x80, 0xC0, 0x100: Linux's `NVM_82580_LAN_FUNC_OFFSET`).
pub const fn nvm_lan_func_offset(a: u8) -> u16 {
    if a == 0 {
        0
    } else {
        0x40 + 0x40 * a as u16
    }
}

/// Missed Packets Count: frames dropped for lack of room in
/// the receive FIFO; clears on read.
pub const MPC: u64 = 0x4010;
/// CRC Error Count.
pub const CRCERRS: u64 = 0x4000;
/// Receive No Buffers Count.
pub const RNBC: u64 = 0x40A0;

/// RCTL: receiver enable.
pub const RCTL_EN: u32 = 1 << 1;
/// RCTL: store bad packets.
pub const RCTL_SBP: u32 = 1 << 2;
/// RCTL: unicast promiscuous.
pub const RCTL_UPE: u32 = 1 << 3;
/// RCTL: multicast promiscuous.
pub const RCTL_MPE: u32 = 1 << 4;
/// RCTL: long packets (frames beyond 1522 bytes, up to RLPML).
pub const RCTL_LPE: u32 = 1 << 5;
/// RCTL: loopback mode, bits 7:6 (00 none, 01 MAC loopback).
pub const RCTL_LBM_MAC: u32 = 1 << 6;
/// RCTL: multicast offset (which destination bits index the MTA), bits
/// 13:12; 00 uses bits 47:36.
pub const RCTL_MO_SHIFT: u32 = 12;
/// RCTL: accept broadcast.
pub const RCTL_BAM: u32 = 1 << 15;
/// RCTL: VLAN filter enable.
pub const RCTL_VFE: u32 = 1 << 18;
/// RCTL: strip the Ethernet CRC.
pub const RCTL_SECRC: u32 = 1 << 26;

/// TCTL: transmitter enable.
pub const TCTL_EN: u32 = 1 << 1;
/// TCTL: collision threshold, bits 11:4 (15, as Linux sets it).
pub const TCTL_CT: u32 = 15 << 4;
/// TCTL: collision distance, bits 21:12 (63 for full duplex, as Linux).
pub const TCTL_COLD: u32 = 63 << 12;
/// Transmit IPG (Linux's igb leaves its reset value; written for clarity).
pub const TIPG: u64 = 0x0410;

/// VLAN Ether Type (bits 15:0: the tag protocol identifier).
pub const VET: u64 = 0x0038;
/// CTRL: VLAN mode enable (strip received tags into the descriptor).
pub const CTRL_VME: u32 = 1 << 30;

/// Receive Long Packet Maximum Length (with RCTL.LPE).
pub const RLPML: u64 = 0x5004;
/// Receive Checksum Control.
pub const RXCSUM: u64 = 0x5000;
/// RXCSUM: IP checksum offload.
pub const RXCSUM_IPOFLD: u32 = 1 << 8;
/// RXCSUM: TCP/UDP checksum offload.
pub const RXCSUM_TUOFLD: u32 = 1 << 9;
/// RXCSUM: packet checksum disable (the RSS hash takes its place in the
/// write-back).
pub const RXCSUM_PCSD: u32 = 1 << 13;

/// Multicast Table Array: 128 registers of 32 bits (a 4096-bit hash).
pub const MTA: u64 = 0x5200;
/// MTA registers.
pub const MTA_LEN: u64 = 128;
/// VLAN Filter Table Array: 128 registers (one bit per VLAN ID).
pub const VFTA: u64 = 0x5600;
/// VFTA registers.
pub const VFTA_LEN: u64 = 128;
/// Receive-address entries 0-15 (RAL/RAH pairs 8 bytes apart from RAL0);
/// entries 16-23 sit at [`RAL16`].
pub const RAR_ENTRIES: u64 = 16;
/// Receive Address Low, entry 16 (the second bank).
pub const RAL16: u64 = 0x54E0;

/// Multiple Receive Queues Command (RSS enable, hash fields).
pub const MRQC: u64 = 0x5818;
/// Redirection table: 32 registers of four 8-bit entries.
pub const RETA: u64 = 0x5C00;
/// RSS random key: 10 registers.
pub const RSSRK: u64 = 0x5C80;

/// Receive queue `n`'s descriptor base, low 32 bits (Linux's
/// `E1000_RDBAL(n)`: queues 0-3 at their 82575-compatible alias).
pub const fn rdbal(n: u16) -> u64 {
    queue_reg(0x2800, 0xC000, n)
}
/// Receive queue `n`'s descriptor base, high 32 bits.
pub const fn rdbah(n: u16) -> u64 {
    queue_reg(0x2804, 0xC004, n)
}
/// Receive queue `n`'s ring length in bytes (a multiple of 128).
pub const fn rdlen(n: u16) -> u64 {
    queue_reg(0x2808, 0xC008, n)
}
/// Receive queue `n`'s split and replication control.
pub const fn srrctl(n: u16) -> u64 {
    queue_reg(0x280C, 0xC00C, n)
}
/// Receive queue `n`'s head.
pub const fn rdh(n: u16) -> u64 {
    queue_reg(0x2810, 0xC010, n)
}
/// Receive queue `n`'s tail.
pub const fn rdt(n: u16) -> u64 {
    queue_reg(0x2818, 0xC018, n)
}
/// Receive queue `n`'s control.
pub const fn rxdctl(n: u16) -> u64 {
    queue_reg(0x2828, 0xC028, n)
}
/// Transmit queue `n`'s descriptor base, low 32 bits.
pub const fn tdbal(n: u16) -> u64 {
    queue_reg(0x3800, 0xE000, n)
}
/// Transmit queue `n`'s descriptor base, high 32 bits.
pub const fn tdbah(n: u16) -> u64 {
    queue_reg(0x3804, 0xE004, n)
}
/// Transmit queue `n`'s ring length in bytes.
pub const fn tdlen(n: u16) -> u64 {
    queue_reg(0x3808, 0xE008, n)
}
/// Transmit queue `n`'s head.
pub const fn tdh(n: u16) -> u64 {
    queue_reg(0x3810, 0xE010, n)
}
/// Transmit queue `n`'s tail.
pub const fn tdt(n: u16) -> u64 {
    queue_reg(0x3818, 0xE018, n)
}
/// Transmit queue `n`'s control.
pub const fn txdctl(n: u16) -> u64 {
    queue_reg(0x3828, 0xE028, n)
}

/// A per-queue register: queues 0-3 at `low + 0x100 n`, the others at
/// `high + 0x40 n`.
const fn queue_reg(low: u64, high: u64, n: u16) -> u64 {
    if n < 4 {
        low + 0x100 * n as u64
    } else {
        high + 0x40 * n as u64
    }
}

/// SRRCTL: packet buffer size in KiB, bits 6:0.
pub const SRRCTL_BSIZEPKT_SHIFT: u32 = 10;
/// SRRCTL: descriptor type "advanced, one buffer" (bits 27:25 = 001).
pub const SRRCTL_DESCTYPE_ADV_ONEBUF: u32 = 1 << 25;
/// SRRCTL: drop frames when the queue has no descriptors (rather than
/// stall the shared packet buffer).
pub const SRRCTL_DROP_EN: u32 = 1 << 31;
/// RXDCTL/TXDCTL: queue enable.
pub const DCTL_ENABLE: u32 = 1 << 25;
/// RXDCTL/TXDCTL: prefetch, host and write-back thresholds (bits 4:0,
/// 12:8 and 20:16), as DPDK's igb sets them (8, 8, 4 for RX; 8, 1, 16
/// for TX).
pub const RXDCTL_THRESH: u32 = 8 | 8 << 8 | 4 << 16;
/// See [`RXDCTL_THRESH`].
pub const TXDCTL_THRESH: u32 = 8 | 1 << 8 | 16 << 16;
/// Queue registers (both directions) on the member with the most (the
/// 82576; see [`Family::queues`](crate::family::Family::queues)).
pub const MAX_QUEUES: u16 = 16;
/// Descriptor ring lengths are multiples of 128 bytes (8 descriptors).
pub const RING_ALIGN_DESCS: u16 = 8;

// Advanced receive descriptor write-back (datasheet §7.1.5.2; Linux
// `e1000_82575.h` `union e1000_adv_rx_desc`, `e1000_defines.h`).
/// RX status: descriptor done.
pub const RXD_STAT_DD: u32 = 1 << 0;
/// RX status: end of packet.
pub const RXD_STAT_EOP: u32 = 1 << 1;
/// RX status: the frame had a VLAN tag, stripped into the descriptor.
pub const RXD_STAT_VP: u32 = 1 << 3;
/// RX status: UDP checksum calculated.
pub const RXD_STAT_UDPCS: u32 = 1 << 4;
/// RX status: TCP/UDP checksum calculated.
pub const RXD_STAT_L4CS: u32 = 1 << 5;
/// RX status: IPv4 checksum calculated.
pub const RXD_STAT_IPCS: u32 = 1 << 6;
/// RX error: TCP/UDP checksum wrong.
pub const RXDEXT_STATERR_TCPE: u32 = 1 << 29;
/// RX error: IPv4 checksum wrong.
pub const RXDEXT_STATERR_IPE: u32 = 1 << 30;
/// RX errors that make a frame bad: CRC (CE), symbol (SE), sequence
/// (SEQ), carrier extension (CXE), RX data (RXE).
pub const RXDEXT_ERR_FRAME: u32 = 1 << 24 | 1 << 25 | 1 << 26 | 1 << 28 | 1 << 31;

// Advanced transmit descriptors (datasheet §7.2.2.3; Linux
// `e1000_82575.h`).
/// TX cmd_type_len: data descriptor type (DTYP = 0011).
pub const ADVTXD_DTYP_DATA: u32 = 3 << 20;
/// TX cmd_type_len: context descriptor type (DTYP = 0010).
pub const ADVTXD_DTYP_CTXT: u32 = 2 << 20;
/// TX command: end of packet.
pub const ADVTXD_DCMD_EOP: u32 = 1 << 24;
/// TX command: insert the FCS.
pub const ADVTXD_DCMD_IFCS: u32 = 1 << 25;
/// TX command: report status (write DD back).
pub const ADVTXD_DCMD_RS: u32 = 1 << 27;
/// TX command: descriptor extension (advanced format).
pub const ADVTXD_DCMD_DEXT: u32 = 1 << 29;
/// TX command: insert the VLAN tag from the context descriptor.
pub const ADVTXD_DCMD_VLE: u32 = 1 << 30;
/// TX command: TCP segmentation.
pub const ADVTXD_DCMD_TSE: u32 = 1 << 31;
/// TX olinfo_status: payload length, from bit 14.
pub const ADVTXD_PAYLEN_SHIFT: u32 = 14;
/// TX olinfo_status: insert the IPv4 checksum.
pub const ADVTXD_POPTS_IXSM: u32 = 1 << 8;
/// TX olinfo_status: insert the TCP/UDP checksum.
pub const ADVTXD_POPTS_TXSM: u32 = 1 << 9;
/// TX write-back status: descriptor done.
pub const TXD_STAT_DD: u32 = 1 << 0;
/// TX context: IP header length, bits 8:0; MAC header length from bit 9;
/// VLAN tag from bit 16.
pub const ADVTXD_MACLEN_SHIFT: u32 = 9;
/// See [`ADVTXD_MACLEN_SHIFT`].
pub const ADVTXD_VLAN_SHIFT: u32 = 16;
/// TX context type_tucmd: IPv4.
pub const ADVTXD_TUCMD_IPV4: u32 = 1 << 10;
/// TX context type_tucmd: L4 is TCP.
pub const ADVTXD_TUCMD_L4T_TCP: u32 = 1 << 11;
/// TX context mss_l4len_idx: L4 header length from bit 8, MSS from 16.
pub const ADVTXD_L4LEN_SHIFT: u32 = 8;
/// See [`ADVTXD_L4LEN_SHIFT`].
pub const ADVTXD_MSS_SHIFT: u32 = 16;

/// Good Packets Received Count (clears on read, as every statistic).
pub const GPRC: u64 = 0x4074;
/// Broadcast Packets Received Count.
pub const BPRC: u64 = 0x4078;
/// Multicast Packets Received Count.
pub const MPRC: u64 = 0x407C;
/// Good Packets Transmitted Count.
pub const GPTC: u64 = 0x4080;
/// Good Octets Received Count, low and high halves.
pub const GORCL: u64 = 0x4088;
/// Good Octets Transmitted Count, low and high halves.
pub const GOTCL: u64 = 0x4090;
/// Receive Length Error Count.
pub const RLEC: u64 = 0x4040;
/// Receive Error Count.
pub const RXERRC: u64 = 0x400C;
/// Receive Undersize Count.
pub const RUC: u64 = 0x40A4;
/// Receive Oversize Count.
pub const ROC: u64 = 0x40AC;
/// Total Packets Received.
pub const TPR: u64 = 0x40D0;
/// Total Packets Transmitted.
pub const TPT: u64 = 0x40D4;
/// Multicast Packets Transmitted Count.
pub const MPTC: u64 = 0x40F0;
/// Broadcast Packets Transmitted Count.
pub const BPTC: u64 = 0x40F4;

/// MRQC: RSS over the receive queues (bits 2:0 = 010).
pub const MRQC_ENABLE_RSS_MQ: u32 = 0x2;
/// MRQC: hash IPv4 TCP flows on addresses and ports.
pub const MRQC_RSS_FIELD_IPV4_TCP: u32 = 1 << 16;
/// MRQC: hash IPv4 on addresses.
pub const MRQC_RSS_FIELD_IPV4: u32 = 1 << 17;
/// MRQC: hash IPv6 on addresses.
pub const MRQC_RSS_FIELD_IPV6: u32 = 1 << 20;
/// MRQC: hash IPv6 TCP flows on addresses and ports.
pub const MRQC_RSS_FIELD_IPV6_TCP: u32 = 1 << 21;
/// MRQC: hash IPv4 UDP flows on addresses and ports.
pub const MRQC_RSS_FIELD_IPV4_UDP: u32 = 1 << 22;
/// MRQC: hash IPv6 UDP flows on addresses and ports.
pub const MRQC_RSS_FIELD_IPV6_UDP: u32 = 1 << 23;
/// Redirection table entries (four to a RETA register).
pub const RETA_ENTRIES: u32 = 128;
/// RSS key registers (40 bytes, byte 0 in the low byte of the first).
pub const RSSRK_REGS: u64 = 10;

/// Interrupt Mask Set (the causes ICR reports that may interrupt).
pub const IMS: u64 = 0x00D0;
/// ICR/IMS: link status change.
pub const ICR_LSC: u32 = 1 << 2;
/// General Purpose Interrupt Enable.
pub const GPIE: u64 = 0x1514;
/// GPIE: non-selective interrupt clear on ICR read.
pub const GPIE_NSICR: u32 = 1 << 0;
/// GPIE: MSI-X mode (each cause to the vector IVAR names).
pub const GPIE_MSIX_MODE: u32 = 1 << 4;
/// GPIE: extended interrupt auto-mask enable (EIAM applies).
pub const GPIE_EIAME: u32 = 1 << 30;
/// GPIE: PBA support (pending bits in the MSI-X table's PBA).
pub const GPIE_PBA: u32 = 1 << 31;
/// Extended Interrupt Cause Read.
pub const EICR: u64 = 0x1580;
/// Extended Interrupt Mask Set: a vector's bit lets it interrupt.
pub const EIMS: u64 = 0x1524;
/// Extended Interrupt Auto Clear: its vectors' EICR bits clear when the
/// message goes out.
pub const EIAC: u64 = 0x152C;
/// Extended Interrupt Auto Mask: its vectors' EIMS bits clear when the
/// message goes out (with GPIE.EIAME), so a vector fires once per arming.
pub const EIAM: u64 = 0x1530;
/// Interrupt Vector Allocation: 8 registers, each four 8-bit entries
/// (datasheet §8.8.15 for the 82576: RX queue n, TX queue n, RX queue
/// n + 8, TX queue n + 8 in register n).
pub const IVAR0: u64 = 0x1700;
/// IVAR for other causes: the vector of link changes and the rest in
/// bits 15:8.
pub const IVAR_MISC: u64 = 0x1740;
/// IVAR entry: valid.
pub const IVAR_VALID: u32 = 0x80;
/// Extended Interrupt Throttle for vector `v` (0: none).
pub const fn eitr(v: u32) -> u64 {
    0x1680 + 4 * v as u64
}

// Virtual functions (SR-IOV). A VF's BAR 0 is a window of 16 KiB onto
// its share of the device (82576 datasheet §7.8 and §8.28, "Virtual
// Function Device Registers"): CTRL and STATUS at the PF's offsets,
// its two queue pairs at queues 0 and 1's 82575-compatible offsets
// (`rdbal(0)`, `rdbal(1)`, ...), and a mailbox to the PF. Checked
// against Linux's igbvf (`drivers/net/ethernet/intel/igbvf/regs.h`,
// `mbx.h`, `vf.h`) and igb's side of the protocol (`igb/e1000_mbx.h`).

/// The virtual functions' device IDs (Linux igbvf `vf.h`): the 82576's
/// and the I350's. QEMU's `igbvf` is 0x10CA.
pub const DEVICE_IDS_VF: [u16; 2] = [0x10CA, 0x1520];
/// Queue pairs a VF has.
pub const VF_QUEUES: u16 = 2;
/// The VF's side of its mailbox: control and status bits.
pub const V2PMAILBOX: u64 = 0x0C40;
/// The mailbox memory: 16 dwords, shared with the PF.
pub const VMBMEM: u64 = 0x0800;
/// Dwords in the mailbox memory.
pub const VMBMEM_WORDS: usize = 16;
/// V2PMAILBOX: a message for the PF is in the memory (write).
pub const V2PMAILBOX_REQ: u32 = 1 << 0;
/// V2PMAILBOX: the PF's message was read (write).
pub const V2PMAILBOX_ACK: u32 = 1 << 1;
/// V2PMAILBOX: the VF holds the memory.
pub const V2PMAILBOX_VFU: u32 = 1 << 2;
/// V2PMAILBOX: the PF holds the memory.
pub const V2PMAILBOX_PFU: u32 = 1 << 3;
/// V2PMAILBOX: the PF wrote a message (clears on read).
pub const V2PMAILBOX_PFSTS: u32 = 1 << 4;
/// V2PMAILBOX: the PF read the VF's message (clears on read).
pub const V2PMAILBOX_PFACK: u32 = 1 << 5;
/// V2PMAILBOX: the PF is being reset.
pub const V2PMAILBOX_RSTI: u32 = 1 << 6;
/// V2PMAILBOX: the PF's reset is done (clears on read).
pub const V2PMAILBOX_RSTD: u32 = 1 << 7;
/// Message word 0: the PF did what was asked.
pub const VT_MSGTYPE_ACK: u32 = 0x8000_0000;
/// Message word 0: the PF refused.
pub const VT_MSGTYPE_NACK: u32 = 0x4000_0000;
/// Message word 0: the VF is clear to send (its reset was seen).
pub const VT_MSGTYPE_CTS: u32 = 0x2000_0000;
/// Message word 0: bits 23:16 carry a message's extra information.
pub const VT_MSGINFO_SHIFT: u32 = 16;
/// Message: reset me (the reply carries the VF's MAC address).
pub const VF_RESET: u32 = 0x01;
/// Message: set my MAC address (words 1-2).
pub const VF_SET_MAC_ADDR: u32 = 0x02;
/// VF_SET_MAC_ADDR information: clear my extra unicast filters.
pub const VF_MAC_FILTER_CLR: u32 = 0x01 << VT_MSGINFO_SHIFT;
/// VF_SET_MAC_ADDR information: add a unicast filter.
pub const VF_MAC_FILTER_ADD: u32 = 0x02 << VT_MSGINFO_SHIFT;
/// Message: my multicast hashes (count in the information bits, 16
/// bits each from word 1).
pub const VF_SET_MULTICAST: u32 = 0x03;
/// Message: add (information 1) or remove a VLAN ID (word 1).
pub const VF_SET_VLAN: u32 = 0x04;
/// Message: my longest frame (word 1).
pub const VF_SET_LPE: u32 = 0x05;
/// Message: promiscuous modes (information bits).
pub const VF_SET_PROMISC: u32 = 0x06;
/// VF_SET_PROMISC information: every multicast frame.
pub const VF_SET_PROMISC_MULTICAST: u32 = 0x02 << VT_MSGINFO_SHIFT;
/// A message the PF sends unasked (its reset, a link change).
pub const PF_CONTROL_MSG: u32 = 0x0100;
/// VF statistics: good packets received, transmitted, octets each way,
/// multicast received (32-bit counters that wrap, not cleared on read).
pub const VFGPRC: u64 = 0x0F10;
/// See [`VFGPRC`].
pub const VFGPTC: u64 = 0x0F14;
/// See [`VFGPRC`].
pub const VFGORC: u64 = 0x0F18;
/// See [`VFGPRC`].
pub const VFGOTC: u64 = 0x0F34;
/// See [`VFGPRC`].
pub const VFMPRC: u64 = 0x0F3C;
/// A VF's MSI-X vectors' bits in its EIMS, EIMC, EIAC and EIAM (three
/// vectors).
pub const VF_VECTORS_MASK: u32 = 0x7;
/// A VF receive queue's drop count (clears on read; QEMU's
/// `E1000_RQDPC_A`, the PF's RQDPC of that queue).
pub const fn vf_rqdpc(n: u16) -> u64 {
    0x2830 + 0x100 * n as u64
}
