//! ConnectX-3 programming constants. Their public source is Linux's mlx4
//! driver: `core/` below stands for `drivers/net/ethernet/mellanox/mlx4/`
//! and `inc/` for `include/linux/mlx4/`, and each group names the file
//! (and function) it comes from. A reader with only a checkout follows
//! them in Debian's `linux-source` package, which the test command
//! installs: `mlx4/tests/linux_defs.rs` extracts those files at test time
//! and holds every layout, offset, opcode, status code and flag bit here
//! against them. The `§n` marks name sections of the team's programming
//! digest the driver was first written from (not in the repository; the
//! Linux file beside each is the authority).
//!
//! Everything the device sees is big-endian. Register values go through
//! [`wire32`] / [`unwire32`], which give the integer whose little-endian
//! store (what [`Regs`](rpmd_pmd::function::Regs) does) puts the big-endian
//! bytes on the bus. [`mem`] holds the one volatile accessor for memory the
//! device reads and writes (mailboxes, the firmware area).
#![allow(missing_docs)]
#![cfg_attr(rustfmt, rustfmt::skip)]

pub mod layout;
pub mod mem;

/// The integer to hand to `Regs::write32` so that the device sees `v`
/// big-endian.
pub const fn wire32(v: u32) -> u32 {
    u32::from_le_bytes(v.to_be_bytes())
}

/// The value a device wrote big-endian, from what `Regs::read32` returned.
pub const fn unwire32(raw: u32) -> u32 {
    u32::from_be_bytes(raw.to_le_bytes())
}

/// §1, `core/main.c` `mlx4_pci_table`.
pub mod id {
    pub const VENDOR: u16 = 0x15b3;
    pub const CONNECTX3: u16 = 0x1003;
    pub const CONNECTX3_PRO: u16 = 0x1007;
}

/// §1 BAR0 fixed registers (32-bit accesses only); `core/mlx4.h`,
/// `core/main.c`, `core/reset.c`.
pub mod bar0 {
    /// `MLX4_HCR_BASE`: seven dwords.
    pub const HCR: u64 = 0x80680;
    /// `MLX4_HCR_SIZE`.
    pub const HCR_SIZE: u64 = 0x1c;
    /// Ownership semaphore: a read of 0 takes ownership; write 0 to give
    /// it back.
    pub const OWNERSHIP: u64 = 0x8069c;
    /// Reset register: write big-endian 1.
    pub const RESET: u64 = 0xf0000 + 0x10;
    /// HW semaphore: read until 0 (acquired).
    pub const SEMAPHORE: u64 = 0xf0000 + 0x3fc;
    /// BAR0 of a real card (lspci).
    pub const LEN: u64 = 1 << 20;
}

/// §1 HCR dword 6 bits (`core/cmd.c` `mlx4_cmd_post`, `cmd_pending`).
pub mod hcr {
    pub const GO: u32 = 1 << 23;
    pub const EVENT: u32 = 1 << 22;
    pub const TOGGLE: u32 = 1 << 21;
    pub const OP_MOD_SHIFT: u32 = 12;
    pub const STATUS_SHIFT: u32 = 24;
    /// Dword 5: the token in bits 31:16, `0xffff` when polling.
    pub const POLL_TOKEN: u32 = 0xffff << 16;
    /// Mailboxes: 4096 bytes, 4096-aligned (`MLX4_MAILBOX_SIZE`).
    pub const MAILBOX: usize = 4096;
}

/// §2.1 command opcodes (`inc/cmd.h`).
pub mod op {
    pub const QUERY_DEV_CAP: u16 = 0x003;
    pub const QUERY_FW: u16 = 0x004;
    pub const QUERY_ADAPTER: u16 = 0x006;
    pub const INIT_HCA: u16 = 0x007;
    pub const CLOSE_HCA: u16 = 0x008;
    pub const INIT_PORT: u16 = 0x009;
    pub const CLOSE_PORT: u16 = 0x00a;
    pub const SET_PORT: u16 = 0x00c;
    pub const QUERY_PORT: u16 = 0x043;
    pub const NOP: u16 = 0x031;
    pub const MOD_STAT_CFG: u16 = 0x034;
    pub const RUN_FW: u16 = 0xff6;
    pub const UNMAP_ICM: u16 = 0xff9;
    pub const MAP_ICM: u16 = 0xffa;
    pub const UNMAP_ICM_AUX: u16 = 0xffb;
    pub const MAP_ICM_AUX: u16 = 0xffc;
    pub const SET_ICM_SIZE: u16 = 0xffd;
    pub const UNMAP_FA: u16 = 0xffe;
    pub const MAP_FA: u16 = 0xfff;
    pub const SW2HW_MPT: u16 = 0x00d;
    pub const HW2SW_MPT: u16 = 0x00f;
    pub const WRITE_MTT: u16 = 0x011;
    pub const MAP_EQ: u16 = 0x012;
    pub const SW2HW_EQ: u16 = 0x013;
    pub const HW2SW_EQ: u16 = 0x014;
    pub const SW2HW_CQ: u16 = 0x016;
    pub const HW2SW_CQ: u16 = 0x017;
    pub const RST2INIT_QP: u16 = 0x019;
    pub const INIT2RTR_QP: u16 = 0x01a;
    pub const RTR2RTS_QP: u16 = 0x01b;
    pub const TO_ERR_QP: u16 = 0x01e;
    pub const TO_RST_QP: u16 = 0x021;
    pub const QUERY_QP: u16 = 0x022;
    pub const CONF_SPECIAL_QP: u16 = 0x023;
    pub const READ_MCG: u16 = 0x025;
    pub const WRITE_MCG: u16 = 0x026;
    pub const MGID_HASH: u16 = 0x027;
    pub const MODIFY_CQ: u16 = 0x02c;
    pub const SET_MCAST_FLTR: u16 = 0x048;
    pub const DUMP_ETH_STATS: u16 = 0x049;
    /// Immediate output: the link type a VPI port senses on its cable
    /// (`core/sense.c`): 0 none, 1 InfiniBand, 2 Ethernet.
    pub const SENSE_PORT: u16 = 0x04d;

    /// The command's name, for errors and logs.
    pub fn name(op: u16) -> &'static str {
        match op {
            QUERY_DEV_CAP => "QUERY_DEV_CAP",
            QUERY_FW => "QUERY_FW",
            QUERY_ADAPTER => "QUERY_ADAPTER",
            INIT_HCA => "INIT_HCA",
            CLOSE_HCA => "CLOSE_HCA",
            INIT_PORT => "INIT_PORT",
            CLOSE_PORT => "CLOSE_PORT",
            SET_PORT => "SET_PORT",
            QUERY_PORT => "QUERY_PORT",
            NOP => "NOP",
            MOD_STAT_CFG => "MOD_STAT_CFG",
            RUN_FW => "RUN_FW",
            UNMAP_ICM => "UNMAP_ICM",
            MAP_ICM => "MAP_ICM",
            UNMAP_ICM_AUX => "UNMAP_ICM_AUX",
            MAP_ICM_AUX => "MAP_ICM_AUX",
            SET_ICM_SIZE => "SET_ICM_SIZE",
            UNMAP_FA => "UNMAP_FA",
            MAP_FA => "MAP_FA",
            SW2HW_MPT => "SW2HW_MPT",
            HW2SW_MPT => "HW2SW_MPT",
            WRITE_MTT => "WRITE_MTT",
            MAP_EQ => "MAP_EQ",
            SW2HW_EQ => "SW2HW_EQ",
            HW2SW_EQ => "HW2SW_EQ",
            SW2HW_CQ => "SW2HW_CQ",
            HW2SW_CQ => "HW2SW_CQ",
            RST2INIT_QP => "RST2INIT_QP",
            INIT2RTR_QP => "INIT2RTR_QP",
            RTR2RTS_QP => "RTR2RTS_QP",
            TO_ERR_QP => "2ERR_QP",
            TO_RST_QP => "2RST_QP",
            QUERY_QP => "QUERY_QP",
            CONF_SPECIAL_QP => "CONF_SPECIAL_QP",
            READ_MCG => "READ_MCG",
            WRITE_MCG => "WRITE_MCG",
            MGID_HASH => "MGID_HASH",
            MODIFY_CQ => "MODIFY_CQ",
            SET_MCAST_FLTR => "SET_MCAST_FLTR",
            DUMP_ETH_STATS => "DUMP_ETH_STATS",
            SENSE_PORT => "SENSE_PORT",
            _ => "unknown command",
        }
    }
}

/// §1 command status codes (`core/cmd.c`).
pub mod status {
    pub const OK: u8 = 0x00;
    pub const BAD_SYS_STATE: u8 = 0x04;
    pub const BAD_PARAM: u8 = 0x03;
    pub const BAD_OP: u8 = 0x02;
    pub const BAD_RES_STATE: u8 = 0x09;
    pub const BAD_INDEX: u8 = 0x0a;
    pub const ICM_ERROR: u8 = 0x0c;
    pub const BAD_RESOURCE: u8 = 0x05;
    pub const EXCEEDS_LIMITS: u8 = 0x08;
    pub const BAD_QP_STATE: u8 = 0x10;

    /// The status's name, as Linux's `cmd_to_errno` table spells it.
    pub fn name(s: u8) -> &'static str {
        match s {
            0x00 => "OK",
            0x01 => "internal error",
            0x02 => "bad operation",
            0x03 => "bad parameter",
            0x04 => "bad system state",
            0x05 => "bad resource",
            0x06 => "resource busy",
            0x08 => "exceeds limits",
            0x09 => "bad resource state",
            0x0a => "bad index",
            0x0b => "bad NVMEM",
            0x0c => "ICM error",
            0x10 => "bad QP state",
            0x20 => "bad segment",
            0x21 => "MR has bound MWs",
            0x22 => "LAM not present",
            0x30 => "bad packet",
            0x40 => "CQ too small for resize",
            0x50 => "multi-function required",
            _ => "unknown status",
        }
    }
}

/// §2.3 QUERY_FW output mailbox (`core/fw.c` `mlx4_QUERY_FW`).
pub mod query_fw {
    /// be16: firmware-area size in 4 KiB pages.
    pub const FW_PAGES: usize = 0x00;
    /// be16 each: major, subminor, minor.
    pub const VER_MAJOR: usize = 0x02;
    pub const VER_SUBMINOR: usize = 0x04;
    pub const VER_MINOR: usize = 0x06;
    /// be16: command-interface revision (Linux accepts 2..=3).
    pub const CMD_IF_REV: usize = 0x0a;
    /// Log2 of the maximum outstanding commands.
    pub const LOG_MAX_CMDS: usize = 0x0f;
    /// be64 base, be32 size in dwords, BAR byte (bits 7:6 × 2).
    pub const CATAS_BASE: usize = 0x30;
    pub const CATAS_SIZE: usize = 0x38;
    pub const CATAS_BAR: usize = 0x3c;
    pub const MIN_CMD_IF_REV: u16 = 2;
    pub const MAX_CMD_IF_REV: u16 = 3;
}

/// §2.3 page-list mailbox entries (MAP_FA, MAP_ICM_AUX, MAP_ICM;
/// `core/fw.c` `mlx4_map_cmd`).
pub mod page_list {
    /// Bytes per entry: be64 ICM virtual address, be64 (physical address
    /// | log2(block bytes) − 12).
    pub const ENTRY: usize = 16;
    /// Entries per command.
    pub const MAX_ENTRIES: usize = 256;
    /// Smallest block.
    pub const MIN_BLOCK: u64 = 4096;
}

/// §2.3 MOD_STAT_CFG mailbox.
pub mod mod_stat_cfg {
    /// Byte: 1 = modify.
    pub const MODIFY: usize = 0x02;
    /// Byte: log2(page size) − 12 (0 = 4 KiB).
    pub const PG_SZ: usize = 0x03;
}

/// §2.4 QUERY_DEV_CAP output mailbox (`core/fw.c` `mlx4_QUERY_DEV_CAP`).
/// Fields named `LOG_*` hold log2 of the value; masks follow each offset.
pub mod dev_cap {
    pub const LOG_MAX_SRQ_SZ: usize = 0x10;
    pub const LOG_MAX_QP_SZ: usize = 0x11;
    /// Bits 3:0.
    pub const LOG_RSVD_QPS: usize = 0x12;
    /// Bits 4:0.
    pub const LOG_MAX_QPS: usize = 0x13;
    /// Bits 7:4.
    pub const LOG_RSVD_SRQS: usize = 0x14;
    /// Bits 4:0.
    pub const LOG_MAX_SRQS: usize = 0x15;
    pub const LOG_MAX_CQ_SZ: usize = 0x19;
    /// Bits 3:0.
    pub const LOG_RSVD_CQS: usize = 0x1a;
    /// Bits 4:0.
    pub const LOG_MAX_CQS: usize = 0x1b;
    /// Bits 5:0.
    pub const LOG_MAX_MPTS: usize = 0x1d;
    /// Bits 3:0.
    pub const LOG_RSVD_EQS: usize = 0x1e;
    /// Bits 3:0.
    pub const LOG_MAX_EQS: usize = 0x1f;
    /// Bits 7:4.
    pub const LOG_RSVD_MTTS: usize = 0x20;
    /// Bits 3:0.
    pub const LOG_RSVD_MPTS: usize = 0x22;
    /// be16, bits 11:0: non-zero means SYS_EQS mode.
    pub const NUM_SYS_EQS: usize = 0x26;
    /// Bits 3:0.
    pub const NUM_PORTS: usize = 0x37;
    /// be64 flags (bits below).
    pub const FLAGS: usize = 0x40;
    /// Bits 7:4: a count, not a log.
    pub const RSVD_UARS: usize = 0x48;
    /// Bits 5:0: the UAR area is 2^(v+20) bytes.
    pub const LOG_UAR_SZ: usize = 0x49;
    pub const LOG_MIN_PAGE: usize = 0x4b;
    /// Bit 7: BlueFlame.
    pub const BF: usize = 0x4c;
    pub const MAX_SQ_SG: usize = 0x51;
    /// be16.
    pub const MAX_SQ_DESC: usize = 0x52;
    pub const MAX_RQ_SG: usize = 0x55;
    /// be16.
    pub const MAX_RQ_DESC: usize = 0x56;
    pub const LOG_MAX_MCGS: usize = 0x63;
    /// Bits 7:4: a count.
    pub const RSVD_PDS: usize = 0x64;
    /// Bits 5:0.
    pub const LOG_MAX_PDS: usize = 0x65;
    /// be32 ext-2 flags.
    pub const FLAGS2: usize = 0x70;
    /// Bit 7: device-managed flow steering.
    pub const FS_EN: usize = 0x76;
    /// be16 entry sizes.
    pub const RDMARC_ENTRY: usize = 0x80;
    pub const QPC_ENTRY: usize = 0x82;
    pub const AUXC_ENTRY: usize = 0x84;
    pub const ALTC_ENTRY: usize = 0x86;
    pub const EQC_ENTRY: usize = 0x88;
    pub const CQC_ENTRY: usize = 0x8a;
    pub const SRQC_ENTRY: usize = 0x8c;
    pub const CMPT_ENTRY: usize = 0x8e;
    pub const MTT_ENTRY: usize = 0x90;
    pub const DMPT_ENTRY: usize = 0x92;
    /// be64.
    pub const MAX_ICM: usize = 0xa0;

    /// Flag bits of the be64 at `FLAGS` (`inc/device.h`).
    pub const FLAG_VEP_UC_STEER: u64 = 1 << 41;
    pub const FLAG_VEP_MC_STEER: u64 = 1 << 42;
    pub const FLAG_64B_EQE: u64 = 1 << 61;
    pub const FLAG_64B_CQE: u64 = 1 << 62;
}

/// §2.4 QUERY_PORT output mailbox (`core/fw.c` `mlx4_QUERY_PORT`,
/// `core/en_port.c`); in_mod = port (1-based).
pub mod query_port {
    /// Bit 7 link up; bits 1:0 supported types (bit 1 Ethernet).
    pub const LINK: usize = 0x00;
    pub const LINK_UP: u8 = 1 << 7;
    pub const SUPPORTS_IB: u8 = 1 << 0;
    pub const SUPPORTS_ETH: u8 = 1 << 1;
    /// Port types (`inc/device.h` `enum mlx4_port_type`), as SENSE_PORT
    /// reports them.
    pub const TYPE_IB: u64 = 1;
    pub const TYPE_ETH: u64 = 2;
    /// be16 Ethernet MTU capability.
    pub const ETH_MTU: usize = 0x02;
    /// Speed code, mask `SPEED_MASK`.
    pub const SPEED: usize = 0x05;
    pub const SPEED_MASK: u8 = 0x6f;
    /// Bits 7:4 log max VLANs, bits 3:0 log max MACs.
    pub const LOG_MAX_VLAN_MAC: usize = 0x0a;
    /// be64, bits 47:0.
    pub const MAC: usize = 0x10;

    /// The speed code in Mb/s (0 if unknown).
    pub fn speed_mbps(code: u8) -> u32 {
        match code & SPEED_MASK {
            0x00 | 0x01 => 10_000,
            0x02 => 1_000,
            0x04 => 100,
            0x08 => 20_000,
            0x40 => 40_000,
            0x20 => 56_000,
            _ => 0,
        }
    }
}

/// §2.5 ICM tables and their mapping (`core/profile.c`, `core/main.c`
/// `mlx4_init_icm`, `core/icm.c`).
pub mod icm {
    /// The smallest table and mapping unit.
    pub const PAGE: u64 = 4096;
    /// cMPT holds 2^24 entries for each of its four object types.
    pub const CMPT_SHIFT: u32 = 24;
    /// cMPT object types, in table order.
    pub const CMPT_QP: u64 = 0;
    pub const CMPT_SRQ: u64 = 1;
    pub const CMPT_CQ: u64 = 2;
    pub const CMPT_EQ: u64 = 3;
    /// Linux maps EQC for this many EQs whatever the card's maximum.
    pub const EQC_ENTRIES: u64 = 1024;
    /// MCG entries: 2^10 bytes each (`MLX4_MGM_ENTRY_SIZE`).
    pub const LOG_MGM_ENTRY: u32 = 10;
}

/// §2.6 INIT_HCA constants (`core/fw.c` `mlx4_INIT_HCA`); the mailbox
/// is [`layout::InitHca`].
pub mod init_hca {
    pub const VERSION: u8 = 2;
    /// ((log2 cache line − 4) << 5) | 0x10, for 64-byte lines.
    pub const CACHELINE_64: u8 = (6 - 4) << 5 | 0x10;
    /// Flags (be32 at 0x14): bit 0 check the UD AV port (always); bit 1
    /// big-endian host.
    pub const FLAG_CHECK_AV_PORT: u32 = 1 << 0;
    pub const FLAG_BIG_ENDIAN_HOST: u32 = 1 << 1;
    /// Byte 0xd8 bit 3: unicast steering (B0).
    pub const UC_STEERING: u8 = 1 << 3;
}

/// §2.9 SET_PORT (`core/port.c`, `core/mlx4.h`): op_mod 1 (Ethernet),
/// in_mod = sub << 8 | port.
pub mod set_port {
    pub const OP_MOD_ETH: u8 = 1;
    pub const GENERAL: u32 = 0;
    pub const RQP_CALC: u32 = 1;
    pub const MAC_TABLE: u32 = 2;
    /// GENERAL byte 0x03: MTU, RX pause and TX pause valid (Linux sends 7).
    pub const FLAGS_MTU_PAUSE: u8 = 0x07;
    /// GENERAL byte 0x02: bit 5 the user MTU (0x1a) is valid.
    pub const FLAGS2_USER_MTU: u8 = 1 << 5;
    /// pptx / pprx: bit 7 global pause.
    pub const GLOBAL_PAUSE: u8 = 0x80;
    /// The frame MTU = MTU + Ethernet header, VLAN tag and FCS.
    pub const FRAME_OVERHEAD: u16 = 14 + 4 + 4 + 4;
    /// MAC_TABLE: 128 entries of `VALID | mac`.
    pub const MAC_ENTRIES: usize = 128;
    pub const MAC_VALID: u64 = 1 << 63;
}

/// DUMP_ETH_STATS (`core/en_port.c` `mlx4_en_DUMP_ETH_STATS`): in_mod =
/// port | reset << 8; the output mailbox is `struct
/// mlx4_en_stat_out_mbox` (`core/en_port.h`), of which these are the
/// offsets rpmd reads. Per-priority counters come in nine slots (priority
/// 0 to 7, then untagged frames) `PRIO_STRIDE` bytes apart, each a be64;
/// the drop counters are be32s. The counters run from the card's start;
/// `reset` zeroes them after the dump.
pub mod eth_stats {
    /// Bytes of the mailbox.
    pub const SIZE: usize = 0xbb0;
    /// in_mod bit 8: zero the counters after reading.
    pub const RESET: u32 = 1 << 8;
    /// Slots per counter: priorities 0 to 7 and untagged.
    pub const PRIO_SLOTS: usize = 9;
    pub const PRIO_STRIDE: usize = 0x18;
    /// Frames received, bad ones included (`RTOT_prio_0`).
    pub const RX_FRAMES: usize = 0x480;
    /// Octets received (`ROCT_prio_0`).
    pub const RX_OCTETS: usize = 0x3b8;
    /// Frames sent (`TTOT_prio_0`).
    pub const TX_FRAMES: usize = 0xa98;
    /// Octets sent (`TOCT_prio_0`).
    pub const TX_OCTETS: usize = 0x9b8;
    /// Frames received with a bad CRC (`RCRC`).
    pub const RX_CRC_ERRORS: usize = 0xb8c;
    /// Frames received and dropped, for any reason (`RDROP`).
    pub const RX_DROPPED: usize = 0xb98;
    /// Of those, dropped for want of room: no receive WQE (`RdropOvflw`).
    pub const RX_OVERFLOW: usize = 0xb9c;
    /// Of those, dropped for their length (`RdropLength`).
    pub const RX_BAD_LENGTH: usize = 0xba0;
    /// Frames the port could not send (`TDROP`).
    pub const TX_DROPPED: usize = 0xba8;
}

/// §2.3 QUERY_ADAPTER output mailbox.
pub mod query_adapter {
    /// The vendor-specific data starts here; the board id is 16 bytes at
    /// VSD + 0xd0, each dword byte-swapped.
    pub const VSD: usize = 0x20;
    pub const BOARD_ID: usize = VSD + 0xd0;
    pub const BOARD_ID_LEN: usize = 16;
}

/// §1 BAR2: UAR pages and the doorbells in them (`inc/doorbell.h`,
/// `core/en_tx.c`, `inc/cq.h`, `core/eq.c`).
pub mod uar {
    /// Bytes per UAR page.
    pub const PAGE: u64 = 4096;
    /// Pages kept for EQ doorbells (`mlx4_get_num_reserved_uar`); the
    /// driver's own page is the first after them.
    pub const RESERVED: u64 = 128;
    /// Send doorbell: BE `qpn << 8`.
    pub const SEND: u64 = 0x14;
    /// CQ arm doorbell (64 bits).
    pub const CQ_ARM: u64 = 0x20;
    /// EQ doorbell of EQ `n`: page `n / 4`, offset `EQ + 8 * (n % 4)`;
    /// BE `(ci & 0xffffff) | arm << 31`.
    pub const EQ: u64 = 0x800;
    pub const EQ_ARM: u32 = 1 << 31;
    /// BAR2 of a real card (lspci).
    pub const BAR2_LEN: u64 = 8 << 20;
}

/// §2.7 memory registration (`core/mr.c`, `core/mlx4.h`, `core/en_main.c`).
pub mod mpt {
    /// Flags: software owns, physical, local read and write, and the bits
    /// mlx4_en sets (`0xF0020F00` with the access bits it uses).
    pub const SW_OWNS: u32 = 0xf << 28;
    pub const MIO: u32 = 1 << 17;
    pub const PHYSICAL: u32 = 1 << 9;
    pub const REGION: u32 = 1 << 8;
    pub const LOCAL_READ: u32 = 1 << 10;
    pub const LOCAL_WRITE: u32 = 1 << 11;
    /// The flags word of mlx4_en's one physical MR.
    pub const EN_FLAGS: u32 = 0xF002_0F00;
    /// PD bits 25:24 = 3 (EN_INV).
    pub const PD_EN_INV: u32 = 3 << 24;
    /// The key of MPT index `i` (`hw_index_to_key`).
    pub const fn key(i: u32) -> u32 {
        i.rotate_left(8)
    }
    /// The index of key `k` (`key_to_hw_index`).
    pub const fn index(k: u32) -> u32 {
        k.rotate_right(8)
    }
    /// The lkey of an unused scatter entry.
    pub const INVALID_LKEY: u32 = 0x100;
    /// An MTT entry: `addr | PRESENT`.
    pub const MTT_PRESENT: u64 = 1;
    /// Bytes per MTT entry.
    pub const MTT_ENTRY: u64 = 8;
}

/// §2.7 EQ context and events (`core/eq.c`, `inc/device.h`).
pub mod eq {
    /// State 11:8 = 9 (armed): what Linux writes.
    pub const STATE_ARMED: u32 = 0x9 << 8;
    /// Status 31:28: 0 OK, 0xA write failure.
    pub const STATUS_WRITE_FAILURE: u32 = 0xa << 28;
    /// Event types.
    pub const EV_COMPLETION: u8 = 0x00;
    pub const EV_CQ_ERROR: u8 = 0x04;
    pub const EV_PORT_CHANGE: u8 = 0x09;
    pub const EV_CMD: u8 = 0x0a;
    pub const EV_OVERFLOW: u8 = 0x0f;
    /// Port-change subtypes.
    pub const PORT_DOWN: u8 = 1;
    pub const PORT_ACTIVE: u8 = 4;
    /// The async EQ's event mask (types 1-7, 9, 0xa, 0xe, 0x10-0x14,
    /// 0x18, 0x1a, 0x1b, 0x1c).
    pub const ASYNC_MASK: u64 = 0xfe | 1 << 9 | 1 << 0xa | 1 << 0xe | 0x1f << 0x10
        | 1 << 0x18 | 1 << 0x1a | 1 << 0x1b | 1 << 0x1c;
    /// MAP_EQ in_mod bit 31: unmap.
    pub const UNMAP: u32 = 1 << 31;
    /// EQE bytes (32-byte mode).
    pub const EQE: usize = 32;
}

/// §2.7 CQ context, §3.3 CQEs (`core/cq.c`, `inc/cq.h`).
pub mod cq {
    /// CQE bytes (32-byte mode).
    pub const CQE: usize = 32;
    /// CQE byte 0x1f: bit 7 owner, bit 6 is_send, bits 4:0 opcode.
    pub const OWNER: u8 = 1 << 7;
    pub const IS_SEND: u8 = 1 << 6;
    pub const OPCODE_MASK: u8 = 0x1f;
    pub const OP_RECV: u8 = 0x01;
    pub const OP_ERROR: u8 = 0x1e;
    /// Error syndromes.
    pub const SYN_LOCAL_LENGTH: u8 = 0x01;
    pub const SYN_LOCAL_QP_OP: u8 = 0x02;
    pub const SYN_LOCAL_PROT: u8 = 0x04;
    pub const SYN_FLUSHED: u8 = 0x05;
    /// CQE status bits (be16 at 0x10).
    pub const ST_IPV4: u16 = 1 << 6;
    pub const ST_IPV4F: u16 = 1 << 7;
    pub const ST_IPV6: u16 = 1 << 8;
    pub const ST_TCP: u16 = 1 << 10;
    pub const ST_UDP: u16 = 1 << 11;
    pub const ST_IPOK: u16 = 1 << 12;
    /// CQ-error syndrome: overrun.
    pub const ERR_OVERRUN: u8 = 1;
    /// Arming (`inc/cq.h` `mlx4_cq_arm`): the UAR's CQ doorbell takes two
    /// be32s, `sn << 28 | cmd | cqn` and the consumer index, after the
    /// doorbell record's second dword got `sn << 28 | cmd | ci`. `REQ_NOT`
    /// asks for one completion event on the next CQE.
    pub const DB_REQ_NOT_SOL: u32 = 1 << 24;
    pub const DB_REQ_NOT: u32 = 2 << 24;
    pub const DB_CMD_MASK: u32 = 3 << 24;
    pub const ARM_SN_SHIFT: u32 = 28;
}

/// §2.8 QP contexts and transitions (`inc/qp.h`, `core/qp.c`,
/// `core/en_resources.c`).
pub mod qp {
    /// States (context flags bits 31:28).
    pub const RST: u8 = 0;
    pub const INIT: u8 = 1;
    pub const RTR: u8 = 2;
    pub const RTS: u8 = 3;
    pub const ERR: u8 = 6;
    /// Service type MLX (raw Ethernet), bits 23:16.
    pub const ST_MLX: u32 = 7 << 16;
    /// 2RST's op_mod.
    pub const TO_RST_OP_MOD: u8 = 2;
    /// mtu_msgmax of mlx4_en.
    pub const MTU_MSGMAX: u8 = 0xff;
    /// sq_size_stride low bits: 64-byte stride (log2 − 4).
    pub const SQ_STRIDE_64: u8 = 2;
    /// Bytes per TXBB.
    pub const TXBB: usize = 64;
    /// ackto for Ethernet.
    pub const ACKTO_ETH: u8 = 1;
    /// sched_queue of port p: `0x83 | (p − 1) << 6`.
    pub const fn sched_queue(port: u8) -> u8 {
        0x83 | (port - 1) << 6
    }
    /// params2 bit 3: FPP.
    pub const PARAMS2_FPP: u32 = 1 << 3;
    /// param3 bit 30: VLAN stripping off.
    pub const PARAM3_NO_VLAN_STRIP: u32 = 1 << 30;
    /// Context flags bit 13: an RSS (indirection) QP, whose RSS context
    /// ([`super::layout::RssCtx`]) sits at the primary path + 0x24.
    pub const FLAG_RSS: u32 = 1 << 13;
    pub const RSS_OFFSET_IN_PATH: usize = 0x24;
    /// RSS hash functions.
    pub const RSS_HASH_XOR: u8 = 0;
    pub const RSS_HASH_TOP: u8 = 1;
    /// RSS flags: the fields hashed.
    pub const RSS_UDP_IPV6: u8 = 1 << 0;
    pub const RSS_UDP_IPV4: u8 = 1 << 1;
    pub const RSS_TCP_IPV6: u8 = 1 << 2;
    pub const RSS_IPV6: u8 = 1 << 3;
    pub const RSS_TCP_IPV4: u8 = 1 << 4;
    pub const RSS_IPV4: u8 = 1 << 5;
    /// The Toeplitz key's bytes.
    pub const RSS_KEY: usize = 40;
}

/// §3.1 send WQEs (`inc/qp.h`, `core/en_tx.c`).
pub mod wqe {
    /// ctrl owner_opcode bit 31.
    pub const OWNER: u32 = 1 << 31;
    pub const OP_NOP: u32 = 0x00;
    pub const OP_SEND: u32 = 0x0a;
    /// srcrb: generate a CQE (bits 3:2 = 3), solicited (no ICRC).
    pub const SRCRB_CQ_UPDATE: u32 = 3 << 2;
    pub const SRCRB_SOLICITED: u32 = 1 << 1;
    pub const SRCRB_IP_CSUM: u32 = 1 << 4;
    pub const SRCRB_L4_CSUM: u32 = 1 << 5;
    /// Data segment bytes; a WQE is at most 512 bytes (32 segments).
    pub const SEG: usize = 16;
    pub const MAX_DS: u8 = 32;
    /// Inline segment header bit.
    pub const INLINE: u32 = 1 << 31;
    /// The first dword of an untouched TXBB.
    pub const TXBB_INIT: u32 = 0xffff_ffff;
    /// A stamp: `STAMP | owner << 31`.
    pub const STAMP: u32 = 0x7fff_ffff;
    /// Headroom the SQ keeps free: HW prefetch (2 KiB = 32 TXBBs) + 1,
    /// plus the largest WQE (8 TXBBs).
    pub const SQ_SPARE: u32 = 33 + 8;
}

/// §2.9 MCG entries and MAC steering (`core/mcg.c`).
pub mod mcg {
    /// Protocol Ethernet (members_count bits 31:30).
    pub const PROT_ETH: u32 = 1 << 30;
    pub const COUNT_MASK: u32 = 0x00ff_ffff;
    /// A member QPN's bit 30: block multicast loopback.
    pub const BLOCK_LOOPBACK: u32 = 1 << 30;
    /// GID byte 7: steer << 1.
    pub const STEER_UC: u8 = 1;
    pub const STEER_MC: u8 = 0;
    /// Member QPs in a 1 KiB entry.
    pub const MEMBERS: usize = 248;
    /// WRITE_MCG op_mod 1: the promiscuous list.
    pub const OP_MOD_PROMISC: u8 = 1;
    /// MGID_HASH op_mod 1 when VEP_MC (flag 42) is offered.
    pub const HASH_OP_MOD: u8 = 1;
    /// SET_MCAST_FLTR op_mods (§2.9): add a MAC (in_param `mac | clear <<
    /// 63`, the clear bit emptying the filter first), turn the filter off,
    /// on.
    pub const FLTR_CONFIG: u8 = 0;
    pub const FLTR_DISABLE: u8 = 1;
    pub const FLTR_ENABLE: u8 = 2;
    pub const FLTR_CLEAR: u64 = 1 << 63;
}
