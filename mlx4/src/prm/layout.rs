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
    _r10: [u8; 0x0b],
    /// log2 bytes of an MGM entry.
    pub log_mgm_entry: u8,
    _r11: [u8; 3],
    /// log2 MGM hash entries.
    pub log_mc_hash: u8,
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
    log_mgm_entry: 0xd3, log_mc_hash: 0xd7, uc_steering: 0xd8,
    log_mc_table: 0xdb, dmpt_base: 0xf0, mw_enable: 0xf8, log_mpts: 0xfb,
    mtt_base: 0x100, cmpt_base: 0x108, log_uar_pages: 0x12a, uar_page_sz: 0x12b,
});

/// §2.8 the RSS context of an indirection QP, at the primary path + 0x24
/// (`inc/qp.h` `struct mlx4_rss_context`, `core/en_rx.c`
/// `mlx4_en_config_rss_steer`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RssCtx {
    /// `log2(QPs) << 24 | first QPN`.
    pub base_qpn: Be32,
    /// Where frames with nothing to hash go.
    pub default_qpn: Be32,
    _r0: [u8; 2],
    /// `qp::RSS_HASH_*`.
    pub hash_fn: u8,
    /// `qp::RSS_*`: the fields hashed.
    pub flags: u8,
    /// The Toeplitz key.
    pub rss_key: [u8; super::qp::RSS_KEY],
    /// UDP's base QPN (when UDP is hashed).
    pub base_qpn_udp: Be32,
}

layout!(RssCtx, 0x38, {
    base_qpn: 0x00, default_qpn: 0x04, hash_fn: 0x0a, flags: 0x0b, rss_key: 0x0c,
    base_qpn_udp: 0x34,
});

/// §2.3 QUERY_FW output mailbox (`core/fw.c` `mlx4_QUERY_FW`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct QueryFw {
    /// Firmware-area size in 4 KiB pages.
    pub fw_pages: Be16,
    /// Version: major, subminor, minor.
    pub ver_major: Be16,
    /// Subminor.
    pub ver_subminor: Be16,
    /// Minor.
    pub ver_minor: Be16,
    _r0: [u8; 2],
    /// Command-interface revision.
    pub cmd_if_rev: Be16,
    _r1: [u8; 3],
    /// log2 of the most outstanding commands.
    pub log_max_cmds: u8,
    _r2: [u8; 0x20],
    /// Catastrophic-error buffer: offset in its BAR, dwords, BAR byte.
    pub catas_base: Be64,
    /// Its size in dwords.
    pub catas_size: Be32,
    /// Bits 7:6 × 2 = its BAR.
    pub catas_bar: u8,
    _r3: [u8; 3],
}

layout!(QueryFw, 0x40, {
    fw_pages: super::query_fw::FW_PAGES, ver_major: super::query_fw::VER_MAJOR,
    ver_subminor: super::query_fw::VER_SUBMINOR, ver_minor: super::query_fw::VER_MINOR,
    cmd_if_rev: super::query_fw::CMD_IF_REV, log_max_cmds: super::query_fw::LOG_MAX_CMDS,
    catas_base: super::query_fw::CATAS_BASE, catas_size: super::query_fw::CATAS_SIZE,
    catas_bar: super::query_fw::CATAS_BAR,
});

/// §2.4 QUERY_DEV_CAP output mailbox (`core/fw.c` `mlx4_QUERY_DEV_CAP`):
/// the fields a raw-Ethernet driver reads; `log_*` hold log2 values,
/// masked as `prm::dev_cap` says.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)] // each field is the capability of its name
pub struct DevCapOut {
    _r0: [u8; 0x10],
    pub log_max_srq_sz: u8,
    pub log_max_qp_sz: u8,
    pub log_rsvd_qps: u8,
    pub log_max_qps: u8,
    pub log_rsvd_srqs: u8,
    pub log_max_srqs: u8,
    _r1: [u8; 3],
    pub log_max_cq_sz: u8,
    pub log_rsvd_cqs: u8,
    pub log_max_cqs: u8,
    _r2: u8,
    pub log_max_mpts: u8,
    pub log_rsvd_eqs: u8,
    pub log_max_eqs: u8,
    pub log_rsvd_mtts: u8,
    _r3: u8,
    pub log_rsvd_mpts: u8,
    _r4: [u8; 3],
    pub num_sys_eqs: Be16,
    _r5: [u8; 0x0f],
    pub num_ports: u8,
    _r6: [u8; 8],
    pub flags: Be64,
    pub rsvd_uars: u8,
    pub log_uar_sz: u8,
    _r7: u8,
    pub log_min_page: u8,
    pub bf: u8,
    _r8: [u8; 4],
    pub max_sq_sg: u8,
    pub max_sq_desc: Be16,
    _r9: u8,
    pub max_rq_sg: u8,
    pub max_rq_desc: Be16,
    _r10: [u8; 0x0b],
    pub log_max_mcgs: u8,
    pub rsvd_pds: u8,
    pub log_max_pds: u8,
    _r11: [u8; 0x0a],
    pub flags2: Be32,
    _r12: [u8; 2],
    pub fs_en: u8,
    _r13: [u8; 9],
    /// RDMARC, QPC, AUXC, ALTC, EQC, CQC, SRQC, cMPT, MTT, dMPT.
    pub entry_sizes: [Be16; 10],
    _r14: [u8; 0x0c],
    pub max_icm: Be64,
    _r15: [u8; 0x58],
}

layout!(DevCapOut, 0x100, {
    log_max_srq_sz: super::dev_cap::LOG_MAX_SRQ_SZ, log_max_qp_sz: super::dev_cap::LOG_MAX_QP_SZ,
    log_rsvd_qps: super::dev_cap::LOG_RSVD_QPS, log_max_qps: super::dev_cap::LOG_MAX_QPS,
    log_rsvd_srqs: super::dev_cap::LOG_RSVD_SRQS, log_max_srqs: super::dev_cap::LOG_MAX_SRQS,
    log_max_cq_sz: super::dev_cap::LOG_MAX_CQ_SZ, log_rsvd_cqs: super::dev_cap::LOG_RSVD_CQS,
    log_max_cqs: super::dev_cap::LOG_MAX_CQS, log_max_mpts: super::dev_cap::LOG_MAX_MPTS,
    log_rsvd_eqs: super::dev_cap::LOG_RSVD_EQS, log_max_eqs: super::dev_cap::LOG_MAX_EQS,
    log_rsvd_mtts: super::dev_cap::LOG_RSVD_MTTS, log_rsvd_mpts: super::dev_cap::LOG_RSVD_MPTS,
    num_sys_eqs: super::dev_cap::NUM_SYS_EQS, num_ports: super::dev_cap::NUM_PORTS,
    flags: super::dev_cap::FLAGS, rsvd_uars: super::dev_cap::RSVD_UARS,
    log_uar_sz: super::dev_cap::LOG_UAR_SZ, log_min_page: super::dev_cap::LOG_MIN_PAGE,
    bf: super::dev_cap::BF, max_sq_sg: super::dev_cap::MAX_SQ_SG,
    max_sq_desc: super::dev_cap::MAX_SQ_DESC, max_rq_sg: super::dev_cap::MAX_RQ_SG,
    max_rq_desc: super::dev_cap::MAX_RQ_DESC, log_max_mcgs: super::dev_cap::LOG_MAX_MCGS,
    rsvd_pds: super::dev_cap::RSVD_PDS, log_max_pds: super::dev_cap::LOG_MAX_PDS,
    flags2: super::dev_cap::FLAGS2, fs_en: super::dev_cap::FS_EN,
    entry_sizes: super::dev_cap::RDMARC_ENTRY, max_icm: super::dev_cap::MAX_ICM,
});

/// §2.4 QUERY_PORT output mailbox (`core/fw.c` `mlx4_QUERY_PORT`,
/// `core/en_port.c`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct QueryPortOut {
    /// Bit 7 link up; bits 1:0 supported types.
    pub link: u8,
    _r0: u8,
    /// Ethernet MTU capability.
    pub eth_mtu: Be16,
    _r1: u8,
    /// Speed code.
    pub speed: u8,
    _r2: [u8; 4],
    /// Bits 7:4 log max VLANs, 3:0 log max MACs.
    pub log_max_vlan_mac: u8,
    _r3: [u8; 5],
    /// Bits 47:0: the MAC.
    pub mac: Be64,
    _r4: [u8; 8],
}

layout!(QueryPortOut, 0x20, {
    link: super::query_port::LINK, eth_mtu: super::query_port::ETH_MTU,
    speed: super::query_port::SPEED, log_max_vlan_mac: super::query_port::LOG_MAX_VLAN_MAC,
    mac: super::query_port::MAC,
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

/// §2.7 dMPT entry (SW2HW_MPT's mailbox; `core/mr.c` `mlx4_mr_enable`,
/// `struct mlx4_mpt_entry`). `mtt_addr` is an unaligned be64, kept as two
/// be32 halves.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Mpt {
    /// `mpt::*` flags.
    pub flags: Be32,
    /// Bound QP (memory windows only).
    pub qpn: Be32,
    /// The key: the MPT index (`mpt::key`).
    pub key: Be32,
    /// PD in bits 16:0, `mpt::PD_EN_INV`.
    pub pd_flags: Be32,
    /// First byte covered.
    pub start: Be64,
    /// Bytes covered.
    pub length: Be64,
    /// The local key.
    pub lkey: Be32,
    /// Bound windows.
    pub win_cnt: Be32,
    _r0: [u8; 3],
    /// MTT replication.
    pub mtt_rep: u8,
    /// MTT address, high and low halves (none for a physical MR).
    pub mtt_addr_h: Be32,
    /// Low half.
    pub mtt_addr_l: Be32,
    /// MTT entries.
    pub mtt_sz: Be32,
    /// Page shift.
    pub entity_size: Be32,
    /// First-byte offset.
    pub first_byte_offset: Be32,
}

layout!(Mpt, 0x40, {
    flags: 0x00, qpn: 0x04, key: 0x08, pd_flags: 0x0c, start: 0x10,
    length: 0x18, lkey: 0x20, win_cnt: 0x24, mtt_rep: 0x2b, mtt_addr_h: 0x2c,
    mtt_sz: 0x34, entity_size: 0x38, first_byte_offset: 0x3c,
});

/// §2.7 EQ context (SW2HW_EQ's mailbox; `core/eq.c`, `struct
/// mlx4_eq_context`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EqCtx {
    /// Status 31:28, bit 24 HW owner, bit 18 EC, bit 17 OI, state 11:8.
    pub flags: Be32,
    _r0: [u8; 6],
    /// Page offset.
    pub page_offset: Be16,
    /// log2 EQEs.
    pub log_eq_size: u8,
    _r1: [u8; 4],
    /// Moderation period.
    pub eq_period: u8,
    _r2: u8,
    /// Moderation count.
    pub eq_max_count: u8,
    _r3: [u8; 3],
    /// MSI-X vector.
    pub intr: u8,
    /// log2 page bytes − 12.
    pub log_page_size: u8,
    _r4: [u8; 2],
    /// MTT byte offset, bits 39:32.
    pub mtt_h: u8,
    /// MTT byte offset, bits 31:0.
    pub mtt_l: Be32,
    _r5: [u8; 8],
    /// Consumer index.
    pub cons_index: Be32,
    /// Producer index.
    pub prod_index: Be32,
    _r6: [u8; 0x10],
}

layout!(EqCtx, 0x40, {
    flags: 0x00, page_offset: 0x0a, log_eq_size: 0x0c, eq_period: 0x11,
    eq_max_count: 0x13, intr: 0x17, log_page_size: 0x18, mtt_h: 0x1b,
    mtt_l: 0x1c, cons_index: 0x28, prod_index: 0x2c,
});

/// §2.7 CQ context (SW2HW_CQ's mailbox; `core/cq.c` `mlx4_cq_alloc`,
/// `struct mlx4_cq_context`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CqCtx {
    /// Bit 18 collapsed, bit 19 timestamps.
    pub flags: Be32,
    _r0: [u8; 6],
    /// Page offset.
    pub page_offset: Be16,
    /// `log2(nent) << 24 | uar_index`.
    pub logsize_usrpage: Be32,
    /// Moderation period.
    pub cq_period: Be16,
    /// Moderation count.
    pub cq_max_count: Be16,
    _r1: [u8; 3],
    /// The EQ completions go to.
    pub comp_eqn: u8,
    /// log2 page bytes − 12.
    pub log_page_size: u8,
    _r2: [u8; 2],
    /// MTT byte offset, bits 39:32.
    pub mtt_h: u8,
    /// MTT byte offset, bits 31:0.
    pub mtt_l: Be32,
    /// Last notified index.
    pub last_notified: Be32,
    /// Solicited producer index.
    pub solicit_producer: Be32,
    /// Consumer index.
    pub cons_index: Be32,
    /// Producer index.
    pub prod_index: Be32,
    _r3: [u8; 8],
    /// The doorbell record's bus address.
    pub db_rec_addr: Be64,
}

layout!(CqCtx, 0x40, {
    flags: 0x00, page_offset: 0x0a, logsize_usrpage: 0x0c, cq_period: 0x10,
    cq_max_count: 0x12, comp_eqn: 0x17, log_page_size: 0x18, mtt_h: 0x1b,
    mtt_l: 0x1c, last_notified: 0x20, solicit_producer: 0x24,
    cons_index: 0x28, prod_index: 0x2c, db_rec_addr: 0x38,
});

/// §2.8 the primary address path of a QP context (`struct
/// mlx4_qp_path`), at context offset 0x18.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct QpPath {
    /// Bit 6 CV, bit 5 SV, bit 2 hide CQE VLAN, bits 1:0 source checks.
    pub fl: u8,
    /// Bit 7: source check by counter.
    pub vlan_control: u8,
    _r0: [u8; 2],
    /// Counter index.
    pub counter_index: u8,
    _r1: [u8; 3],
    /// Bits 2:0 = 1 for Ethernet.
    pub ackto: u8,
    _r2: [u8; 0x17],
    /// `qp::sched_queue(port)`.
    pub sched_queue: u8,
    /// VLAN table index.
    pub vlan_index: u8,
    /// feup.
    pub feup: u8,
    _r3: [u8; 3],
    /// Destination MAC.
    pub dmac: [u8; 6],
}

layout!(QpPath, 0x2c, {
    fl: 0x00, vlan_control: 0x01, counter_index: 0x04, ackto: 0x08,
    sched_queue: 0x20, vlan_index: 0x21, feup: 0x22, dmac: 0x26,
});

/// §2.8 QP context (`struct mlx4_qp_context`), the fields a raw-Ethernet
/// QP uses.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct QpCtx {
    /// Bits 31:28 next state, 23:16 service type, bit 13 RSS.
    pub flags: Be32,
    /// Protection domain.
    pub pd: Be32,
    /// `qp::MTU_MSGMAX`.
    pub mtu_msgmax: u8,
    /// `log2(RQ WQEs) << 3 | (log2 stride − 4)`.
    pub rq_size_stride: u8,
    /// `log2(TXBBs) << 3 | (log2 stride − 4)`.
    pub sq_size_stride: u8,
    _r0: u8,
    /// UAR page index.
    pub usr_page: Be32,
    /// This QP's number.
    pub local_qpn: Be32,
    _r1: [u8; 4],
    /// The primary path.
    pub path: QpPath,
    _r2: [u8; 0x38],
    /// The CQ of send completions.
    pub cqn_send: Be32,
    _r3: [u8; 0x10],
    /// Bit 3: FPP.
    pub params2: Be32,
    _r4: [u8; 8],
    /// The CQ of receive completions.
    pub cqn_recv: Be32,
    /// The RQ doorbell record's bus address.
    pub db_rec_addr: Be64,
    _r5: [u8; 4],
    /// Bit 24: uses an SRQ.
    pub srqn: Be32,
    _r6: [u8; 0x10],
    /// Bit 30 VLAN-strip disable, bit 29 keep FCS.
    pub param3: Be32,
    _r7: [u8; 4],
    /// log2 page bytes − 12.
    pub log_page_size: u8,
    _r8: [u8; 2],
    /// MTT byte offset, bits 39:32.
    pub mtt_h: u8,
    /// MTT byte offset, bits 31:0.
    pub mtt_l: Be32,
    _r9: [u8; 0x28],
}

layout!(QpCtx, 0xf8, {
    flags: 0x00, pd: 0x04, mtu_msgmax: 0x08, rq_size_stride: 0x09,
    sq_size_stride: 0x0a, usr_page: 0x0c, local_qpn: 0x10, path: 0x18,
    cqn_send: 0x7c, params2: 0x90, cqn_recv: 0x9c, db_rec_addr: 0xa0,
    srqn: 0xac, param3: 0xc0, log_page_size: 0xc8, mtt_h: 0xcb, mtt_l: 0xcc,
});

/// §2.8 the QP modify mailbox: the optional-parameter mask, then the
/// context at 8.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct QpModify {
    /// Always 0 here.
    pub opt_param_mask: Be32,
    _r0: [u8; 4],
    /// The context.
    pub ctx: QpCtx,
}

layout!(QpModify, 0x100, { opt_param_mask: 0x00, ctx: 0x08 });

/// §2.9 an MGM entry of 1 KiB (`core/mcg.c`, `struct mlx4_mgm`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Mgm {
    /// The next entry's index << 6 (0: none).
    pub next_gid_index: Be32,
    /// Bits 23:0 members, bits 31:30 protocol.
    pub members_count: Be32,
    _r0: [u8; 8],
    /// The group: port at byte 5, steer << 1 at byte 7, MAC at 10..16.
    pub gid: [u8; 16],
    /// Member QPNs (bit 30 blocks multicast loopback).
    pub qp: [Be32; super::mcg::MEMBERS],
}

layout!(Mgm, 0x400, { next_gid_index: 0x00, members_count: 0x04, gid: 0x10, qp: 0x20 });

/// §3.1 send WQE control segment (`struct mlx4_wqe_ctrl_seg`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CtrlSeg {
    /// Bit 31 owner, bits 4:0 opcode.
    pub owner_opcode: Be32,
    /// VLAN tag to insert.
    pub vlan_tag: Be16,
    /// Bit 6 C-VLAN, bit 7 S-VLAN insertion.
    pub ins_vlan: u8,
    /// Bits 5:0 WQE size in 16-byte units; bit 6 fence.
    pub fence_size: u8,
    /// `wqe::SRCRB_*`.
    pub srcrb_flags: Be32,
    /// Immediate data.
    pub imm: Be32,
}

layout!(CtrlSeg, 0x10, {
    owner_opcode: 0x00, vlan_tag: 0x04, ins_vlan: 0x06, fence_size: 0x07,
    srcrb_flags: 0x08, imm: 0x0c,
});

/// §3.1/§3.2 data (scatter/gather) segment (`struct mlx4_wqe_data_seg`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DataSeg {
    /// Bytes (bit 31 clear; an inline header has it set).
    pub byte_count: Be32,
    /// The MR's key.
    pub lkey: Be32,
    /// Bus address.
    pub addr: Be64,
}

layout!(DataSeg, 0x10, { byte_count: 0x00, lkey: 0x04, addr: 0x08 });

/// §3.3 a 32-byte CQE (`struct mlx4_cqe`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Cqe {
    /// Bits 23:0 QPN; bit 29 C-VLAN stripped.
    pub vlan_my_qpn: Be32,
    /// RSS hash.
    pub immed_rss_invalid: Be32,
    /// g_mlpath_rqpn.
    pub g_mlpath_rqpn: Be32,
    /// Stripped TCI.
    pub sl_vid: Be16,
    /// rlid.
    pub rlid: Be16,
    /// `cq::ST_*`.
    pub status: Be16,
    /// IPv6 extension mask.
    pub ipv6_ext_mask: u8,
    /// Bit 4 bad FCS, bit 2 L4 checksum OK.
    pub badfcs_enc: u8,
    /// Bytes received.
    pub byte_cnt: Be32,
    /// The WQE (RX: its index; TX: the TXBB counter).
    pub wqe_index: Be16,
    /// L4 checksum (`0xffff`: verified); error CQEs: vendor syndrome,
    /// syndrome.
    pub checksum: Be16,
    _r0: [u8; 3],
    /// Bit 7 owner, bit 6 is_send, bits 4:0 opcode.
    pub owner_sr_opcode: u8,
}

layout!(Cqe, 0x20, {
    vlan_my_qpn: 0x00, immed_rss_invalid: 0x04, g_mlpath_rqpn: 0x08,
    sl_vid: 0x0c, rlid: 0x0e, status: 0x10, ipv6_ext_mask: 0x12,
    badfcs_enc: 0x13, byte_cnt: 0x14, wqe_index: 0x18, checksum: 0x1a,
    owner_sr_opcode: 0x1f,
});

/// §3.4 a 32-byte EQE (`struct mlx4_eqe`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Eqe {
    _r0: u8,
    /// `eq::EV_*`.
    pub kind: u8,
    _r1: u8,
    /// Subtype (port change: down 1, active 4).
    pub subtype: u8,
    /// Event data.
    pub data: [u8; 24],
    /// Slave (SR-IOV).
    pub slave_id: u8,
    _r2: [u8; 2],
    /// Bit 7 owner.
    pub owner: u8,
}

layout!(Eqe, 0x20, { kind: 0x01, subtype: 0x03, data: 0x04, slave_id: 0x1c, owner: 0x1f });

// SAFETY: each is `#[repr(C)]` of integers, byte-order integers and byte
// arrays, every field naturally aligned and the size a multiple of the
// alignment (the `layout!` checks above pin both), so there is no padding
// and every bit pattern is a value.
unsafe impl Wire for InitHca {}
// SAFETY: as above.
unsafe impl Wire for SetPortGeneral {}
// SAFETY: as above.
unsafe impl Wire for MacTable {}
// SAFETY: as above.
unsafe impl Wire for Mpt {}
// SAFETY: as above.
unsafe impl Wire for EqCtx {}
// SAFETY: as above.
unsafe impl Wire for CqCtx {}
// SAFETY: as above.
unsafe impl Wire for QpPath {}
// SAFETY: as above.
unsafe impl Wire for QpCtx {}
// SAFETY: as above.
unsafe impl Wire for QpModify {}
// SAFETY: as above.
unsafe impl Wire for Mgm {}
// SAFETY: as above.
unsafe impl Wire for CtrlSeg {}
// SAFETY: as above.
unsafe impl Wire for DataSeg {}
// SAFETY: as above.
unsafe impl Wire for Cqe {}
// SAFETY: as above.
unsafe impl Wire for Eqe {}
// SAFETY: as above.
unsafe impl Wire for QueryFw {}
// SAFETY: as above.
unsafe impl Wire for RssCtx {}
// SAFETY: as above.
unsafe impl Wire for DevCapOut {}
// SAFETY: as above.
unsafe impl Wire for QueryPortOut {}
