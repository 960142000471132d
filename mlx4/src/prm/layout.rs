//! Command mailboxes as `#[repr(C)]` big-endian structs, each checked at
//! compile time for its size and the offset of every field the digest
//! names (the section is cited on each).
//!
//! Where the digest puts a log2 count in the low byte of a table's base
//! address (INIT_HCA), the field is the be64 `base | log`, as the device
//! reads it.
#![allow(unsafe_code)]

use super::mem::Wire;
use rpmd_pmd::endian::{Be16, Be32, Be64};
use std::mem::offset_of;

/// Asserts at compile time that `$t` is `$size` bytes and each field sits
/// at its offset.
macro_rules! layout {
    ($t:ty, $size:expr, { $($field:ident: $off:expr),* $(,)? }) => {
        const _: () = {
            assert!(size_of::<$t>() == $size);
            $(assert!(offset_of!($t, $field) == $off);)*
        };
    };
}

/// §2.6 INIT_HCA input mailbox (`core/fw.c` `mlx4_INIT_HCA`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct InitHca {
    /// [`super::init_hca::VERSION`].
    pub version: u8,
    _r0: [u8; 0x0d],
    /// [`super::init_hca::CACHELINE_64`].
    pub cacheline: u8,
    _r1: [u8; 5],
    /// `init_hca::FLAG_*`.
    pub flags: Be32,
    /// Bit 31: recoverable-error events.
    pub recoverable: Be32,
    _r2: [u8; 0x14],
    /// QPC base | log2 QPs.
    pub qpc: Be64,
    _r3: [u8; 0x10],
    /// SRQC base | log2 SRQs.
    pub srqc: Be64,
    /// CQC base | log2 CQs.
    pub cqc: Be64,
    /// Bit 29: 64-byte EQEs; bit 30: 64-byte CQEs; low byte: stride.
    pub eqe_cqe: Be32,
    _r4: [u8; 4],
    /// ALTC base.
    pub altc: Be64,
    _r5: [u8; 8],
    /// AUXC base.
    pub auxc: Be64,
    _r6: [u8; 8],
    /// EQC base | log2 EQs.
    pub eqc: Be64,
    _r7: [u8; 2],
    /// System EQs (SYS_EQS mode only).
    pub num_sys_eqs: Be16,
    _r8: [u8; 4],
    /// RDMARC base | log2 RDMA read contexts per QP.
    pub rdmarc: Be64,
    _r9: [u8; 0x28],
    /// MCG table base.
    pub mc_base: Be64,
    _r10: [u8; 0x0a],
    /// log2 bytes of an MGM entry.
    pub log_mgm_entry: Be16,
    _r11: [u8; 2],
    /// log2 MGM hash entries.
    pub log_mc_hash: Be16,
    /// [`super::init_hca::UC_STEERING`] in B0 mode.
    pub uc_steering: u8,
    _r12: [u8; 2],
    /// log2 MCG entries.
    pub log_mc_table: u8,
    _r13: [u8; 0x14],
    /// dMPT base.
    pub dmpt_base: Be64,
    /// Bit 7: memory windows.
    pub mw_enable: u8,
    _r14: [u8; 2],
    /// log2 MPTs.
    pub log_mpts: u8,
    _r15: [u8; 4],
    /// MTT base.
    pub mtt_base: Be64,
    /// cMPT base.
    pub cmpt_base: Be64,
    _r16: [u8; 0x1a],
    /// log2 UAR pages.
    pub log_uar_pages: u8,
    /// log2 UAR page bytes − 12.
    pub uar_page_sz: u8,
    _r17: [u8; 0xd4],
}

layout!(InitHca, 0x200, {
    version: 0x00, cacheline: 0x0e, flags: 0x14, recoverable: 0x18,
    qpc: 0x30, srqc: 0x48, cqc: 0x50, eqe_cqe: 0x58, altc: 0x60, auxc: 0x70,
    eqc: 0x80, num_sys_eqs: 0x8a, rdmarc: 0x90, mc_base: 0xc0,
    log_mgm_entry: 0xd2, log_mc_hash: 0xd6, uc_steering: 0xd8,
    log_mc_table: 0xdb, dmpt_base: 0xf0, mw_enable: 0xf8, log_mpts: 0xfb,
    mtt_base: 0x100, cmpt_base: 0x108, log_uar_pages: 0x12a, uar_page_sz: 0x12b,
});

/// §2.9 SET_PORT GENERAL (`core/port.c`, `struct
/// mlx4_set_port_general_context`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SetPortGeneral {
    _r0: [u8; 2],
    /// Bit 5 user MTU valid, bit 6 user MAC valid, bit 1 ignore-FCS valid.
    pub flags2: u8,
    /// Bit 0 MTU, bit 1 RX pause, bit 2 TX pause valid.
    pub flags: u8,
    /// ignore_fcs / roce_mode.
    pub ignore_fcs: u8,
    _r1: u8,
    /// The largest frame, FCS included.
    pub mtu: Be16,
    /// TX pause: bit 7 global pause.
    pub pptx: u8,
    /// TX priority flow control.
    pub pfctx: u8,
    _r2: [u8; 2],
    /// RX pause: bit 7 global pause.
    pub pprx: u8,
    /// RX priority flow control.
    pub pfcrx: u8,
    _r3: [u8; 6],
    /// PHV enable.
    pub phv_en: Be32,
    _r4: [u8; 2],
    /// The user MTU (without headers).
    pub user_mtu: Be16,
    _r5: [u8; 2],
    /// The user MAC.
    pub user_mac: [u8; 6],
}

layout!(SetPortGeneral, 0x24, {
    flags2: 0x02, flags: 0x03, ignore_fcs: 0x04, mtu: 0x06, pptx: 0x08,
    pfctx: 0x09, pprx: 0x0c, pfcrx: 0x0d, phv_en: 0x14, user_mtu: 0x1a,
    user_mac: 0x1e,
});

/// §2.9 SET_PORT MAC_TABLE: the whole table, `VALID | mac` per entry.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MacTable {
    /// The entries.
    pub entries: [Be64; super::set_port::MAC_ENTRIES],
}

layout!(MacTable, 0x400, { entries: 0 });

// SAFETY: each is `#[repr(C)]` of integers, byte-order integers and byte
// arrays, every field naturally aligned and the size a multiple of the
// alignment (the `layout!` checks above pin both), so there is no padding
// and every bit pattern is a value.
unsafe impl Wire for InitHca {}
// SAFETY: as above.
unsafe impl Wire for SetPortGeneral {}
// SAFETY: as above.
unsafe impl Wire for MacTable {}
