//! The model's ICM (digest §2.5, §2.6, §4 item 4): SET_ICM_SIZE, the
//! auxiliary area, a sparse map of ICM addresses to host memory, and
//! INIT_HCA checked against the capabilities it reported; CLOSE_HCA.
//!
//! INIT_HCA is strict where a real card would fail or misbehave: a log
//! over the card's limit (status 3, as the digest says), tables that are
//! unaligned, overlapping or outside the ICM size (status 3), and a table
//! whose firmware-reserved entries, or (EQC, MCG) whose whole extent, has
//! no memory mapped behind it (status `0x0c`, ICM error, an inference).
use super::commands::CAPS;
use super::{Mlx4Model, State};
use crate::prm::icm::{self as p, CMPT_SHIFT};
use crate::prm::init_hca as ih;
use crate::prm::layout::InitHca;
use crate::prm::mem::Wire;
use crate::prm::status;
use std::collections::BTreeMap;

/// One context table as INIT_HCA placed it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Tbl {
    pub base: u64,
    pub entries: u64,
    pub entry: u64,
}

impl Tbl {
    fn bytes(&self) -> u64 {
        (self.entries * self.entry).max(p::PAGE)
    }
}

/// What INIT_HCA set up.
#[derive(Clone, Copy, Debug)]
pub(super) struct HcaConfig {
    pub qpc: Tbl,
    pub cqc: Tbl,
    pub eqc: Tbl,
    pub dmpt: Tbl,
    pub mtt_base: u64,
    pub mcg: Tbl,
    pub log_mc_hash: u16,
    /// B0 unicast steering.
    pub uc_steering: bool,
}

/// ICM bookkeeping.
#[derive(Default)]
pub(super) struct IcmState {
    /// SET_ICM_SIZE's byte count.
    size: Option<u64>,
    /// Auxiliary pages the firmware asked for.
    aux_needed: u64,
    /// The auxiliary area's blocks.
    aux: Vec<(u64, u32)>,
    /// ICM address → (bus address, log2 bytes).
    map: BTreeMap<u64, (u64, u32)>,
    pub hca: Option<HcaConfig>,
}

impl IcmState {
    pub fn mapped_bytes(&self) -> u64 {
        self.map.values().map(|&(_, log)| 1u64 << log).sum()
    }

    pub fn aux_bytes(&self) -> u64 {
        self.aux.iter().map(|&(_, log)| 1u64 << log).sum()
    }

    /// The bus address of `[va, va+len)`, if it lies inside one mapped
    /// block.
    pub fn bus(&self, va: u64, len: u64) -> Option<u64> {
        let (&start, &(pa, log)) = self.map.range(..=va).next_back()?;
        (va.checked_add(len)? <= start + (1 << log)).then_some(pa + (va - start))
    }

    /// Whether every byte of `[va, va+len)` has memory behind it.
    pub fn covered(&self, va: u64, len: u64) -> bool {
        let mut at = va;
        let end = va + len;
        while at < end {
            match self.map.range(..=at).next_back() {
                Some((&start, &(_, log))) if start + (1 << log) > at => at = start + (1 << log),
                _ => return false,
            }
        }
        true
    }

    /// Whether `[va, va+len)` overlaps anything mapped.
    fn overlaps(&self, va: u64, len: u64) -> bool {
        let before = self
            .map
            .range(..va)
            .next_back()
            .is_some_and(|(&s, &(_, log))| s + (1 << log) > va);
        before || self.map.range(va..va + len).next().is_some()
    }
}

impl Mlx4Model {
    pub(super) fn set_icm_size(&self, s: &mut State) -> u8 {
        if s.icm.hca.is_some() {
            Self::violation(s, "SET_ICM_SIZE after INIT_HCA".into());
            return status::BAD_SYS_STATE;
        }
        let bytes = Self::in_param(s);
        if bytes == 0 || bytes > CAPS.max_icm || bytes % p::PAGE != 0 {
            Self::violation(s, format!("SET_ICM_SIZE {bytes:#x}"));
            return status::BAD_PARAM;
        }
        s.icm.size = Some(bytes);
        // One auxiliary page per GiB of ICM and one more.
        s.icm.aux_needed = 1 + (bytes >> 30);
        Self::set_out_param(s, s.icm.aux_needed);
        status::OK
    }

    pub(super) fn map_icm_aux(&self, s: &mut State) -> u8 {
        if s.icm.size.is_none() || s.icm.hca.is_some() {
            Self::violation(
                s,
                "MAP_ICM_AUX before SET_ICM_SIZE or after INIT_HCA".into(),
            );
            return status::BAD_SYS_STATE;
        }
        let Some(blocks) = self.page_list(s, "MAP_ICM_AUX") else {
            return status::BAD_PARAM;
        };
        s.icm.aux.extend(blocks);
        status::OK
    }

    pub(super) fn map_icm(&self, s: &mut State) -> u8 {
        let Some(size) = s.icm.size else {
            Self::violation(s, "MAP_ICM before SET_ICM_SIZE".into());
            return status::BAD_SYS_STATE;
        };
        let Some(list) = self.page_list_at(s, "MAP_ICM", true) else {
            return status::BAD_PARAM;
        };
        // All of the list or none of it: each block is checked against
        // the map and the blocks before it in the list.
        for (i, &(va, _, log)) in list.iter().enumerate() {
            let len = 1u64 << log;
            let earlier = list[..i]
                .iter()
                .any(|&(v, _, l)| va < v + (1 << l) && v < va + len);
            if va.checked_add(len).is_none_or(|e| e > size) || s.icm.overlaps(va, len) || earlier {
                Self::violation(
                    s,
                    format!("MAP_ICM {va:#x}+{len:#x}: outside the ICM ({size:#x}) or mapped"),
                );
                return status::BAD_PARAM;
            }
        }
        for (va, pa, log) in list {
            s.icm.map.insert(va, (pa, log));
        }
        status::OK
    }

    pub(super) fn unmap_icm(&self, s: &mut State) -> u8 {
        let va = Self::in_param(s);
        let Some(end) = va.checked_add(s.hcr[2] as u64 * p::PAGE) else {
            Self::violation(
                s,
                format!("UNMAP_ICM {va:#x}: past the end of the address space"),
            );
            return status::BAD_PARAM;
        };
        let inside: Vec<u64> = s.icm.map.range(va..end).map(|(&k, _)| k).collect();
        let straddles = inside
            .last()
            .is_some_and(|k| k + (1 << s.icm.map[k].1) > end)
            || s.icm.overlaps(va, 0);
        if inside.is_empty() || straddles {
            Self::violation(
                s,
                format!("UNMAP_ICM {va:#x}..{end:#x}: not whole mapped blocks"),
            );
            return status::BAD_PARAM;
        }
        let live = Self::live_contexts(s);
        if let Some((_, _, what)) = live.iter().find(|(a, l, _)| *a < end && va < a + l) {
            Self::violation(
                s,
                format!("UNMAP_ICM {va:#x}..{end:#x}: holds the live context of {what}"),
            );
            return status::BAD_RES_STATE;
        }
        for k in inside {
            s.icm.map.remove(&k);
        }
        status::OK
    }

    pub(super) fn unmap_icm_aux(&self, s: &mut State) -> u8 {
        if s.icm.hca.is_some() {
            Self::violation(s, "UNMAP_ICM_AUX while the HCA is initialised".into());
            return status::BAD_SYS_STATE;
        }
        s.icm.aux.clear();
        status::OK
    }

    pub(super) fn unmap_fa(&self, s: &mut State) -> u8 {
        if s.icm.hca.is_some() {
            Self::violation(s, "UNMAP_FA while the HCA is initialised".into());
            return status::BAD_SYS_STATE;
        }
        if !s.icm.map.is_empty() || !s.icm.aux.is_empty() {
            Self::violation(s, "UNMAP_FA with ICM still mapped".into());
        }
        s.icm = IcmState::default();
        s.fa.clear();
        s.running = false;
        status::OK
    }

    /// CLOSE_HCA: refused (and nothing changed) while a port is up or
    /// an object lives; the driver must take them down first.
    pub(super) fn close_hca(&self, s: &mut State) -> u8 {
        if s.icm.hca.is_none() {
            Self::violation(s, "CLOSE_HCA without INIT_HCA".into());
            return status::BAD_SYS_STATE;
        }
        if s.ports.iter().any(|p| p.up) {
            Self::violation(s, "CLOSE_HCA with a port still up".into());
            return status::BAD_RES_STATE;
        }
        let o = &s.obj;
        let live = (o.mrs.len(), o.eqs.len(), o.cqs.len(), s.qps.len());
        if live != (0, 0, 0, 0) {
            Self::violation(
                s,
                format!("CLOSE_HCA with MRs, EQs, CQs, QPs still live: {live:?}"),
            );
            return status::BAD_RES_STATE;
        }
        s.icm.hca = None;
        s.ports = Default::default();
        status::OK
    }

    /// The ICM ranges holding a live object's context: (first byte,
    /// bytes, what).
    fn live_contexts(s: &State) -> Vec<(u64, u64, String)> {
        let Some(h) = s.icm.hca else {
            return Vec::new();
        };
        let at = |t: Tbl, n: u32| (t.base + n as u64 * t.entry, t.entry);
        let mut out = Vec::new();
        for &n in s.obj.mrs.keys() {
            let (a, l) = at(h.dmpt, n);
            out.push((a, l, format!("MPT {n:#x}")));
        }
        for &n in s.obj.eqs.keys() {
            let (a, l) = at(h.eqc, n);
            out.push((a, l, format!("EQ {n}")));
        }
        for &n in s.obj.cqs.keys() {
            let (a, l) = at(h.cqc, n);
            out.push((a, l, format!("CQ {n:#x}")));
        }
        for &n in s.qps.keys() {
            let (a, l) = at(h.qpc, n);
            out.push((a, l, format!("QP {n:#x}")));
        }
        out
    }

    pub(super) fn init_hca(&self, s: &mut State) -> u8 {
        if s.icm.hca.is_some() {
            Self::violation(s, "INIT_HCA twice".into());
            return status::BAD_SYS_STATE;
        }
        let mut raw = [0u8; size_of::<InitHca>()];
        if !self.mailbox_in(s, &mut raw) {
            return status::BAD_PARAM;
        }
        let Some(m) = InitHca::from_bytes(&raw) else {
            return status::BAD_PARAM;
        };
        match self.check_init_hca(s, &m) {
            Ok(cfg) => {
                s.icm.hca = Some(cfg);
                status::OK
            }
            Err((st, why)) => {
                Self::violation(s, format!("INIT_HCA: {why}"));
                st
            }
        }
    }

    fn check_init_hca(&self, s: &State, m: &InitHca) -> Result<HcaConfig, Refusal> {
        let size = Self::check_init_hca_header(s, m)?;
        let t = Self::init_hca_tables(m)?;
        t.check_extents(size)?;
        t.check_mapped(s)?;
        Ok(HcaConfig {
            qpc: t.logged[0].1,
            cqc: t.logged[2].1,
            eqc: t.logged[3].1,
            dmpt: t.dmpt,
            mtt_base: t.mtt.base,
            mcg: t.mcg,
            log_mc_hash: m.log_mc_hash.into(),
            uc_steering: m.uc_steering & ih::UC_STEERING != 0,
        })
    }

    /// INIT_HCA's fixed fields against the model, and the ICM set up for
    /// it; the ICM's size.
    fn check_init_hca_header(s: &State, m: &InitHca) -> Result<u64, Refusal> {
        if m.version != ih::VERSION {
            return bad(format!("version {}", m.version));
        }
        let line = (m.cacheline >> 5) + 4;
        if m.cacheline & 0x1f != 0x10 || !(4..=7).contains(&line) {
            return bad(format!("cache-line byte {:#x}", m.cacheline));
        }
        let flags = m.flags.get();
        if (flags & ih::FLAG_BIG_ENDIAN_HOST != 0) != cfg!(target_endian = "big") {
            return bad(format!("flags {flags:#x}: the host byte order is wrong"));
        }
        if m.eqe_cqe.get() != 0 || m.num_sys_eqs.get() != 0 {
            return bad("64-byte EQEs/CQEs or system EQs, not offered".into());
        }
        let uar_pages = (1u64 << (CAPS.log_uar_mb + 20)) / p::PAGE;
        if m.uar_page_sz != 0 || 1u64 << m.log_uar_pages > uar_pages {
            return bad(format!(
                "UAR: 2^{} pages of 2^{} KiB",
                m.log_uar_pages,
                m.uar_page_sz + 2
            ));
        }
        let Some(size) = s.icm.size else {
            return Err((status::BAD_SYS_STATE, "before SET_ICM_SIZE".into()));
        };
        let aux = s.icm.aux_bytes();
        if aux < s.icm.aux_needed * p::PAGE {
            return Err((status::ICM_ERROR, format!("auxiliary area {aux} bytes")));
        }
        Ok(size)
    }

    /// The tables INIT_HCA places, their sizes checked against the caps.
    fn init_hca_tables(m: &InitHca) -> Result<InitTables, Refusal> {
        // (name, base|log, log max, log reserved, entry bytes)
        let split = |v: u64| (v & !0xff, (v & 0x1f) as u8);
        let logged = [
            ("QPC", m.qpc.get(), CAPS.max_qps, CAPS.rsvd_qps, CAPS.qpc),
            (
                "SRQC",
                m.srqc.get(),
                CAPS.max_srqs,
                CAPS.rsvd_srqs,
                CAPS.small,
            ),
            ("CQC", m.cqc.get(), CAPS.max_cqs, CAPS.rsvd_cqs, CAPS.small),
            ("EQC", m.eqc.get(), CAPS.max_eqs, 2, CAPS.small),
        ];
        let mut tables = Vec::new();
        for (name, v, max, rsvd, entry) in logged {
            let (base, log) = split(v);
            if log > max || log <= rsvd {
                return bad(format!(
                    "{name}: 2^{log} entries (card: 2^{rsvd} reserved of 2^{max})"
                ));
            }
            let t = Tbl {
                base,
                entries: 1 << log,
                entry,
            };
            tables.push((name, t, 1u64 << rsvd));
        }
        let qps = tables[0].1.entries;
        let (rdmarc_base, log_rd) = split(m.rdmarc.get());
        let rd = |entries| Tbl {
            base: rdmarc_base,
            entries,
            entry: CAPS.rdmarc,
        };
        tables.push(("RDMARC", rd(qps << log_rd), 1 << (CAPS.rsvd_qps + log_rd)));
        let per_qp = |base, entry| Tbl {
            base,
            entries: qps,
            entry,
        };
        tables.push(("AUXC", per_qp(m.auxc.get(), CAPS.small), 1 << CAPS.rsvd_qps));
        tables.push(("ALTC", per_qp(m.altc.get(), CAPS.small), 1 << CAPS.rsvd_qps));
        if m.log_mpts > CAPS.max_mpts || m.log_mpts <= CAPS.rsvd_mpts {
            return bad(format!("dMPT: 2^{} entries", m.log_mpts));
        }
        let dmpt = Tbl {
            base: m.dmpt_base.get(),
            entries: 1 << m.log_mpts,
            entry: CAPS.small,
        };
        tables.push(("dMPT", dmpt, 1 << CAPS.rsvd_mpts));
        let mcg = Self::init_hca_mcg(m)?;
        // MCG and EQC are mapped whole; the others need their reserved
        // entries (the firmware's own objects) behind them.
        tables.push(("MCG", mcg, mcg.entries));
        tables[3].2 = tables[3].1.entries;
        Ok(InitTables {
            logged: tables,
            dmpt,
            mcg,
            // MTT: the reserved entries, rounded up to a cache line.
            mtt: Tbl {
                base: m.mtt_base.get(),
                entries: (1u64 << CAPS.rsvd_mtts).next_multiple_of(8),
                entry: CAPS.mtt,
            },
            cmpt: Tbl {
                base: m.cmpt_base.get(),
                entries: 4 << CMPT_SHIFT,
                entry: CAPS.small,
            },
        })
    }

    /// The multicast table INIT_HCA asks for.
    fn init_hca_mcg(m: &InitHca) -> Result<Tbl, Refusal> {
        let log_mcg = m.log_mc_table;
        let mgm = m.log_mgm_entry;
        if log_mcg > CAPS.max_mcgs
            || log_mcg == 0
            || u32::from(mgm) != p::LOG_MGM_ENTRY
            || m.log_mc_hash != log_mcg - 1
        {
            return bad(format!(
                "MCG: 2^{log_mcg} entries of 2^{mgm}, hash 2^{}",
                m.log_mc_hash
            ));
        }
        Ok(Tbl {
            base: m.mc_base.get(),
            entries: 1 << log_mcg,
            entry: 1 << mgm,
        })
    }
}

/// A refused command: its status and what was wrong.
type Refusal = (u8, String);

/// A refusal for a bad parameter.
fn bad<T>(why: String) -> Result<T, Refusal> {
    Err((status::BAD_PARAM, why))
}

/// The tables an INIT_HCA mailbox places in the ICM.
struct InitTables {
    /// (name, table, entries that must be mapped): QPC, SRQC, CQC, EQC,
    /// RDMARC, AUXC, ALTC, dMPT, MCG, in that order.
    logged: Vec<(&'static str, Tbl, u64)>,
    dmpt: Tbl,
    mcg: Tbl,
    /// Only its reserved entries (the rest is the driver's to map).
    mtt: Tbl,
    /// All four types' entries.
    cmpt: Tbl,
}

impl InitTables {
    /// Every table aligned to its size and inside the ICM, none
    /// overlapping another.
    fn check_extents(&self, size: u64) -> Result<(), Refusal> {
        let mut extents: Vec<(&str, u64, u64)> = self
            .logged
            .iter()
            .map(|(n, t, _)| (*n, t.base, t.bytes()))
            .collect();
        extents.push(("cMPT", self.cmpt.base, self.cmpt.bytes()));
        extents.sort_by_key(|e| e.1);
        for (i, &(name, base, len)) in extents.iter().enumerate() {
            if base % len.next_power_of_two() != 0 || base.checked_add(len).is_none_or(|e| e > size)
            {
                return bad(format!(
                    "{name} at {base:#x}+{len:#x}: unaligned or past the ICM size {size:#x}"
                ));
            }
            if let Some(next) = extents.get(i + 1) {
                if base + len > next.1 {
                    return bad(format!("{name} overlaps {}", next.0));
                }
            }
        }
        Ok(())
    }

    /// The entries the firmware uses from INIT_HCA on have ICM behind
    /// them.
    fn check_mapped(&self, s: &State) -> Result<(), Refusal> {
        let mut need: Vec<(String, u64, u64)> = self
            .logged
            .iter()
            .map(|(n, t, r)| (n.to_string(), t.base, r * t.entry))
            .collect();
        need.push((
            "MTT".into(),
            self.mtt.base,
            self.mtt.entries * self.mtt.entry,
        ));
        let cmpt = self.cmpt;
        let rsvd = [CAPS.rsvd_qps, CAPS.rsvd_srqs, CAPS.rsvd_cqs, 2];
        for (ty, log) in rsvd.into_iter().enumerate() {
            let base = cmpt.base + ty as u64 * (cmpt.entry << CMPT_SHIFT);
            need.push((format!("cMPT type {ty}"), base, (1u64 << log) * cmpt.entry));
        }
        for (name, base, len) in need {
            if !s.icm.covered(base, len) {
                return Err((
                    status::ICM_ERROR,
                    format!("{name}: {base:#x}+{len:#x} has no ICM mapped"),
                ));
            }
        }
        Ok(())
    }
}
