//! The model's firmware commands (digest §4 items 3–4, as far as the
//! driver goes today).
use super::{Mlx4Model, State};
use crate::prm::{self, dev_cap as d, op, page_list, query_fw, query_port as qp, status};

/// Ports (digest §4 asks for one; a dual-port card, as rpmd drives
/// both).
pub(super) const NUM_PORTS: u8 = 2;
/// Port 1's MAC (Mellanox's OUI); port n adds n − 1.
pub const PORT_MAC: [u8; 6] = [0x00, 0x02, 0xc9, 0x12, 0x34, 0x50];

/// The log2 limits and reservations QUERY_DEV_CAP reports, which
/// INIT_HCA is checked against. The reservations and queue sizes are a
/// real ConnectX-3's (MT27500, device 0x1003, firmware 2.33.5100): its
/// `ibv_devinfo -v`, published in github.com/claudebarthels/infinity
/// issue 5, read back through Linux's `mlx4_ib_query_device` and
/// `mlx4_init_quotas` (max_cq 65408 = 2^16 - 128 reserved CQs, max_srq
/// 65472 = 2^16 - 64, max_mr 524032 = 2^19 - 256 reserved MPTs, max_pd
/// 32764 = 2^15 - 4, max_qp_wr 16351 = 2^14 - 33 spare, max_srq_wr 16383
/// = 2^14 - 1, max_cqe 2^22 - 1, 32 scatter entries, pages from 512
/// bytes). The limits are what Linux's default profile asks of a card
/// (2^18 QPs, 2^16 CQs and SRQs, 2^19 MPTs), which a real one grants.
#[derive(Clone, Copy)]
pub(super) struct Caps {
    pub rsvd_qps: u8,
    pub max_qps: u8,
    pub rsvd_srqs: u8,
    pub max_srqs: u8,
    pub rsvd_cqs: u8,
    pub max_cqs: u8,
    pub rsvd_eqs: u8,
    pub max_eqs: u8,
    pub rsvd_mpts: u8,
    pub max_mpts: u8,
    pub rsvd_mtts: u8,
    pub max_mcgs: u8,
    /// The UAR area: 2^(v + 20) bytes.
    pub log_uar_mb: u8,
    /// Entry sizes (bytes): QPC, AUXC, ALTC, RDMARC, SRQC, CQC, EQC,
    /// dMPT, MTT, cMPT.
    pub qpc: u64,
    pub small: u64,
    pub rdmarc: u64,
    pub mtt: u64,
    /// The largest ICM.
    pub max_icm: u64,
}

pub(super) const CAPS: Caps = Caps {
    rsvd_qps: 6,
    max_qps: 18,
    rsvd_srqs: 6,
    max_srqs: 16,
    rsvd_cqs: 7,
    max_cqs: 16,
    rsvd_eqs: 2,
    max_eqs: 9,
    rsvd_mpts: 8,
    max_mpts: 19,
    rsvd_mtts: 4,
    max_mcgs: 13,
    log_uar_mb: 2,
    qpc: 256,
    small: 64,
    rdmarc: 32,
    mtt: 8,
    max_icm: 1 << 36,
};

/// The model's firmware area, in 4 KiB pages, unless
/// `ModelOptions::fw_area_pages` says otherwise (digest §4: "a small
/// fw_pages such as 16").
const FW_PAGES: u16 = 16;
/// The version it reports: 2.42.5000.
pub(super) const FW_VERSION: (u16, u16, u16) = (2, 42, 5000);
/// Where the firmware marks each block of its area at RUN_FW, and what
/// with: memory the device owns must stay the device's.
const FA_MARK: &[u8; 8] = b"mlx4-fw!";

impl Mlx4Model {
    pub(super) fn in_param(s: &State) -> u64 {
        (s.hcr[0] as u64) << 32 | s.hcr[1] as u64
    }

    fn out_param(s: &State) -> u64 {
        (s.hcr[3] as u64) << 32 | s.hcr[4] as u64
    }

    /// Sets the immediate output (dwords 3–4).
    pub(super) fn set_out_param(s: &mut State, v: u64) {
        s.hcr[3] = (v >> 32) as u32;
        s.hcr[4] = v as u32;
    }

    /// Runs `opcode`; the status byte.
    pub(super) fn execute(&self, s: &mut State, opcode: u16, op_mod: u8) -> u8 {
        let early = matches!(
            opcode,
            op::QUERY_FW | op::MAP_FA | op::RUN_FW | op::UNMAP_FA
        );
        if !s.running && !early {
            return status::BAD_SYS_STATE;
        }
        match opcode {
            op::QUERY_FW => self.query_fw(s),
            op::MAP_FA => self.map_fa(s),
            op::RUN_FW => self.run_fw(s),
            op::UNMAP_FA => self.unmap_fa(s),
            op::MOD_STAT_CFG => self.mod_stat_cfg(s),
            op::QUERY_DEV_CAP => self.query_dev_cap(s),
            op::QUERY_PORT => self.query_port(s),
            op::SET_ICM_SIZE => self.set_icm_size(s),
            op::MAP_ICM_AUX => self.map_icm_aux(s),
            op::MAP_ICM => self.map_icm(s),
            op::UNMAP_ICM => self.unmap_icm(s),
            op::UNMAP_ICM_AUX => self.unmap_icm_aux(s),
            op::INIT_HCA => self.init_hca(s),
            op::CLOSE_HCA => self.close_hca(s),
            _ if s.icm.hca.is_none() => {
                Self::violation(s, format!("{} before INIT_HCA", op::name(opcode)));
                status::BAD_SYS_STATE
            }
            _ => self.execute_object(s, opcode, op_mod),
        }
    }

    /// The commands that need an initialised HCA.
    fn execute_object(&self, s: &mut State, opcode: u16, op_mod: u8) -> u8 {
        match opcode {
            op::QUERY_ADAPTER => self.mailbox_out(s, &[0; 0x100]),
            op::SET_PORT => self.set_port(s, op_mod),
            op::INIT_PORT => self.init_port(s),
            op::CLOSE_PORT => self.close_port(s),
            op::HW2SW_MPT | op::HW2SW_EQ | op::HW2SW_CQ if op_mod != 1 => {
                self.hw2sw_with_output(s, opcode, op_mod)
            }
            op::SW2HW_MPT => self.sw2hw_mpt(s),
            op::HW2SW_MPT => self.hw2sw_mpt(s),
            op::WRITE_MTT => self.write_mtt(s),
            op::SW2HW_EQ => self.sw2hw_eq(s),
            op::HW2SW_EQ => self.hw2sw_eq(s),
            op::MAP_EQ => self.map_eq(s),
            op::SW2HW_CQ => self.sw2hw_cq(s, op_mod),
            op::HW2SW_CQ => self.hw2sw_cq(s),
            op::MODIFY_CQ if s.obj.cqs.contains_key(&s.hcr[2]) => status::OK,
            op::RST2INIT_QP | op::INIT2RTR_QP | op::RTR2RTS_QP | op::TO_RST_QP | op::TO_ERR_QP => {
                self.modify_qp(s, opcode, op_mod)
            }
            op::QUERY_QP => self.query_qp(s),
            op::MGID_HASH => self.mgid_hash(s),
            op::READ_MCG => self.read_mcg(s),
            op::WRITE_MCG => self.write_mcg(s, op_mod),
            op::SET_MCAST_FLTR => self.set_mcast_fltr(s, op_mod),
            op::DUMP_ETH_STATS => self.dump_eth_stats(s),
            op::SENSE_PORT => self.sense_port(s),
            op::CONF_SPECIAL_QP | op::NOP => status::OK,
            _ => status::BAD_OP,
        }
    }

    /// HW2SW_{MPT,EQ,CQ} with an op_mod other than 1 (no output, as
    /// Linux's mlx4 and rpmd send them): 0 asks for the context in an
    /// output mailbox, which must then be one (the model writes it
    /// zeroed; it keeps no context bytes); any other op_mod is refused.
    fn hw2sw_with_output(&self, s: &mut State, opcode: u16, op_mod: u8) -> u8 {
        if op_mod != 0 {
            Self::violation(s, format!("{}: op_mod {op_mod}", op::name(opcode)));
            return status::BAD_PARAM;
        }
        let st = self.mailbox_out(s, &[0; 64]);
        if st != status::OK {
            return st;
        }
        match opcode {
            op::HW2SW_MPT => self.hw2sw_mpt(s),
            op::HW2SW_EQ => self.hw2sw_eq(s),
            _ => self.hw2sw_cq(s),
        }
    }

    fn fw_area_pages(&self) -> u16 {
        self.opts.fw_area_pages.unwrap_or(FW_PAGES)
    }

    fn query_fw(&self, s: &mut State) -> u8 {
        let mut b = [0u8; 0x100];
        let put16 =
            |b: &mut [u8], at: usize, v: u16| b[at..at + 2].copy_from_slice(&v.to_be_bytes());
        put16(&mut b, query_fw::FW_PAGES, self.fw_area_pages());
        put16(&mut b, query_fw::VER_MAJOR, FW_VERSION.0);
        put16(&mut b, query_fw::VER_MINOR, FW_VERSION.1);
        put16(&mut b, query_fw::VER_SUBMINOR, FW_VERSION.2);
        put16(&mut b, query_fw::CMD_IF_REV, 3);
        b[query_fw::LOG_MAX_CMDS] = 4;
        // The catastrophic-error buffer: 16 zero dwords at BAR0 + 0x1000.
        b[query_fw::CATAS_BASE..query_fw::CATAS_BASE + 8]
            .copy_from_slice(&super::CATAS_BUFFER.to_be_bytes());
        b[query_fw::CATAS_SIZE..query_fw::CATAS_SIZE + 4].copy_from_slice(&16u32.to_be_bytes());
        self.mailbox_out(s, &b)
    }

    /// Writes an output mailbox (4 KiB, 4 KiB-aligned, mapped), patched
    /// as the options say.
    pub(super) fn mailbox_out(&self, s: &mut State, data: &[u8]) -> u8 {
        let mut data = data.to_vec();
        let last = s.commands.last().copied();
        if let Some((_, b)) = s.overrides.iter().rev().find(|o| Some(o.0) == last) {
            let n = b.len().min(data.len());
            data.fill(0);
            data[..n].copy_from_slice(&b[..n]);
        }
        if let Some((opcode, at, v)) = self.opts.patch {
            if s.commands.last() == Some(&opcode) && at < data.len() {
                data[at] = v;
            }
        }
        let data = &data[..];
        let at = Self::out_param(s);
        if at % prm::hcr::MAILBOX as u64 != 0 || !self.iommu.write(at, data) {
            Self::violation(s, format!("output mailbox {at:#x}: unaligned or unmapped"));
            return status::BAD_PARAM;
        }
        status::OK
    }

    /// Reads an input mailbox.
    pub(super) fn mailbox_in(&self, s: &mut State, out: &mut [u8]) -> bool {
        let at = Self::in_param(s);
        if at % prm::hcr::MAILBOX as u64 != 0 || !self.iommu.read(at, out) {
            Self::violation(s, format!("input mailbox {at:#x}: unaligned or unmapped"));
            return false;
        }
        true
    }

    /// A page list of `in_mod` entries: naturally aligned blocks of at
    /// least 4 KiB, each reachable by the device.
    pub(super) fn page_list(&self, s: &mut State, what: &str) -> Option<Vec<(u64, u32)>> {
        let list = self.page_list_at(s, what, false)?;
        Some(list.into_iter().map(|(_, pa, log)| (pa, log)).collect())
    }

    /// A page list whose entries carry an ICM address (`with_va`, for
    /// MAP_ICM; it must be aligned like the block) or must not (zero):
    /// (ICM address, bus address, log2 bytes).
    pub(super) fn page_list_at(
        &self,
        s: &mut State,
        what: &str,
        with_va: bool,
    ) -> Option<Vec<(u64, u64, u32)>> {
        let n = s.hcr[2] as usize;
        if n == 0 || n > page_list::MAX_ENTRIES {
            Self::violation(s, format!("{what}: {n} page-list entries"));
            return None;
        }
        let mut raw = vec![0u8; n * page_list::ENTRY];
        if !self.mailbox_in(s, &mut raw) {
            return None;
        }
        let mut out = Vec::with_capacity(n);
        for e in raw.chunks(page_list::ENTRY) {
            let va = u64::from_be_bytes(e[..8].try_into().unwrap_or_default());
            let pa = u64::from_be_bytes(e[8..].try_into().unwrap_or_default());
            let log = (pa & 0x3f) as u32 + 12;
            let addr = pa & !0xfff;
            let va_bad = if with_va {
                va & 0xfff != 0 || log <= 40 && va & ((1 << log) - 1) != 0
            } else {
                va != 0
            };
            let bad = va_bad
                || log > 40
                || addr & ((1 << log) - 1) != 0
                || self.iommu.translate(addr, 1 << log).is_none();
            if bad {
                Self::violation(
                    s,
                    format!(
                        "{what}: entry va {va:#x} pa {pa:#x} (block 2^{log}) unaligned or unmapped"
                    ),
                );
                return None;
            }
            out.push((va, addr, log));
        }
        Some(out)
    }

    fn map_fa(&self, s: &mut State) -> u8 {
        if s.running {
            return status::BAD_SYS_STATE;
        }
        let Some(blocks) = self.page_list(s, "MAP_FA") else {
            return status::BAD_PARAM;
        };
        s.fa.extend(blocks);
        status::OK
    }

    fn run_fw(&self, s: &mut State) -> u8 {
        if s.running {
            Self::violation(s, "RUN_FW with the firmware running".into());
            return status::BAD_SYS_STATE;
        }
        let bytes: u64 = s.fa.iter().map(|&(_, log)| 1u64 << log).sum();
        if bytes < self.fw_area_pages() as u64 * 4096 {
            Self::violation(s, format!("RUN_FW with a firmware area of {bytes} bytes"));
            return status::BAD_SYS_STATE;
        }
        for &(addr, _) in &s.fa.clone() {
            if !self.iommu.write(addr, FA_MARK) {
                Self::violation(
                    s,
                    format!("firmware area block {addr:#x} unmapped at RUN_FW"),
                );
                return status::BAD_SYS_STATE;
            }
        }
        s.running = true;
        status::OK
    }

    /// The digest's [model] capabilities (§2.4, §4): B0 steering, no
    /// BlueFlame, 32-byte CQEs and EQEs, no SYS_EQS, 8-byte MTT entries.
    fn query_dev_cap(&self, s: &mut State) -> u8 {
        let mut b = [0u8; 0x100];
        let bytes: [(usize, u8); 33] = [
            (d::LOG_MAX_SRQ_SZ, 14),
            (d::LOG_MAX_QP_SZ, 14),
            (d::LOG_RSVD_QPS, CAPS.rsvd_qps),
            (d::LOG_MAX_QPS, CAPS.max_qps),
            (d::LOG_RSVD_SRQS, CAPS.rsvd_srqs << 4),
            (d::LOG_MAX_SRQS, CAPS.max_srqs),
            (d::LOG_MAX_CQ_SZ, 22),
            (d::LOG_RSVD_CQS, CAPS.rsvd_cqs),
            (d::LOG_MAX_CQS, CAPS.max_cqs),
            (d::LOG_MAX_MPTS, CAPS.max_mpts),
            (d::LOG_RSVD_EQS, CAPS.rsvd_eqs),
            (d::LOG_MAX_EQS, CAPS.max_eqs),
            (d::LOG_RSVD_MTTS, CAPS.rsvd_mtts << 4),
            (d::LOG_RSVD_MPTS, CAPS.rsvd_mpts),
            (d::NUM_PORTS, NUM_PORTS),
            (d::RSVD_UARS, 1 << 4),
            (d::LOG_UAR_SZ, CAPS.log_uar_mb),
            (d::LOG_MIN_PAGE, 9),
            (d::MAX_SQ_SG, 32),
            (d::MAX_RQ_SG, 32),
            (d::LOG_MAX_MCGS, CAPS.max_mcgs),
            (d::RSVD_PDS, 4 << 4),
            (d::LOG_MAX_PDS, 15),
            (d::RDMARC_ENTRY + 1, 32),
            (d::QPC_ENTRY, 1), // 256
            (d::AUXC_ENTRY + 1, 64),
            (d::ALTC_ENTRY + 1, 64),
            (d::EQC_ENTRY + 1, 64),
            (d::CQC_ENTRY + 1, 64),
            (d::SRQC_ENTRY + 1, 64),
            (d::CMPT_ENTRY + 1, 64),
            (d::MTT_ENTRY + 1, 8),
            (d::DMPT_ENTRY + 1, 64),
        ];
        for (at, v) in bytes {
            b[at] = v;
        }
        let flags = d::FLAG_VEP_UC_STEER | d::FLAG_VEP_MC_STEER;
        b[d::FLAGS..d::FLAGS + 8].copy_from_slice(&flags.to_be_bytes());
        b[d::MAX_SQ_DESC..d::MAX_SQ_DESC + 2].copy_from_slice(&1008u16.to_be_bytes());
        b[d::MAX_RQ_DESC..d::MAX_RQ_DESC + 2].copy_from_slice(&512u16.to_be_bytes());
        b[d::MAX_ICM..d::MAX_ICM + 8].copy_from_slice(&CAPS.max_icm.to_be_bytes());
        self.mailbox_out(s, &b)
    }

    /// One Ethernet port, 40 Gb/s, MTU up to 9600, link down until
    /// INIT_PORT.
    fn query_port(&self, s: &mut State) -> u8 {
        let port = s.hcr[2];
        if port == 0 || port > NUM_PORTS as u32 {
            return status::BAD_PARAM;
        }
        let mut b = [0u8; 0x20];
        b[qp::LINK] = qp::SUPPORTS_ETH;
        if self.opts.vpi.is_some() {
            b[qp::LINK] |= qp::SUPPORTS_IB;
        }
        if s.ports[port as usize - 1].up {
            b[qp::LINK] |= qp::LINK_UP;
        }
        b[qp::ETH_MTU..qp::ETH_MTU + 2].copy_from_slice(&super::port::MAX_MTU.to_be_bytes());
        b[qp::SPEED] = 0x40;
        b[qp::LOG_MAX_VLAN_MAC] = 7 << 4 | 7;
        let mut mac = [0u8; 8];
        mac[2..].copy_from_slice(&PORT_MAC);
        mac[7] += port as u8 - 1;
        b[qp::MAC..qp::MAC + 8].copy_from_slice(&mac);
        self.mailbox_out(s, &b)
    }

    /// SENSE_PORT: what the VPI card's option says each port senses;
    /// an Ethernet-only port senses Ethernet.
    fn sense_port(&self, s: &mut State) -> u8 {
        let port = s.hcr[2];
        if port == 0 || port > NUM_PORTS as u32 {
            return status::BAD_PARAM;
        }
        let sensed = self.opts.vpi.map_or(qp::TYPE_ETH, |t| t[port as usize - 1]);
        Self::set_out_param(s, sensed);
        status::OK
    }

    fn mod_stat_cfg(&self, s: &mut State) -> u8 {
        let mut b = [0u8; 4];
        if !self.mailbox_in(s, &mut b) {
            return status::BAD_PARAM;
        }
        if b[prm::mod_stat_cfg::MODIFY] != 1 || b[prm::mod_stat_cfg::PG_SZ] != 0 {
            Self::violation(s, format!("MOD_STAT_CFG {b:?}: not 4 KiB pages"));
            return status::BAD_PARAM;
        }
        status::OK
    }
}
