//! ConnectX-3 programming constants, transcribed from
//! `../shared/mlx4/PRM-DIGEST.md` (itself written from Linux's
//! `drivers/net/ethernet/mellanox/mlx4/` and `include/linux/mlx4/`); each
//! group names the digest section and the Linux file it comes from.
//!
//! Everything the device sees is big-endian. Register values go through
//! [`wire32`] / [`unwire32`], which give the integer whose little-endian
//! store (what [`Regs`](rpmd_pmd::vfio::Regs) does) puts the big-endian
//! bytes on the bus. [`mem`] holds the one volatile accessor for memory the
//! device reads and writes (mailboxes, the firmware area).
#![allow(missing_docs)]
#![cfg_attr(rustfmt, rustfmt::skip)]

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
    pub const QUERY_PORT: u16 = 0x043;
    pub const NOP: u16 = 0x031;
    pub const MOD_STAT_CFG: u16 = 0x034;
    pub const RUN_FW: u16 = 0xff6;
    pub const UNMAP_FA: u16 = 0xffe;
    pub const MAP_FA: u16 = 0xfff;

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
            QUERY_PORT => "QUERY_PORT",
            NOP => "NOP",
            MOD_STAT_CFG => "MOD_STAT_CFG",
            RUN_FW => "RUN_FW",
            UNMAP_FA => "UNMAP_FA",
            MAP_FA => "MAP_FA",
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
