//! The model's objects (digest §2.7, §4 item 5): memory regions (dMPT),
//! MTT entries read from the ICM, the EQs with their event mask, and the
//! CQs. Queue buffers are reached only through their MTT entries, read by
//! DMA every time (§4 item 9), never cached.
use super::{Mlx4Model, State};
use crate::prm::layout::{CqCtx, EqCtx, Eqe, Mpt};
use crate::prm::mem::Wire;
use crate::prm::{cq as c, eq as e, mpt, status};
use std::collections::BTreeMap;
use std::sync::atomic::{fence, Ordering};

/// A buffer described by MTT entries.
#[derive(Clone, Copy, Debug)]
pub(super) struct QBuf {
    /// Byte offset of its first entry in the MTT table.
    pub mtt_off: u64,
    /// log2 page bytes.
    pub page_shift: u32,
}

/// A physical MR.
#[derive(Clone, Copy, Debug)]
pub(super) struct MrState {
    pub start: u64,
    pub len: u64,
    pub write: bool,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct EqState {
    pub buf: QBuf,
    pub log_n: u8,
    pub prod: u32,
    /// As the EQ doorbell last said.
    pub cons: u32,
    /// MAP_EQ's event mask.
    pub mask: u64,
    /// Its MSI-X vector (the context's `intr`).
    pub intr: u8,
    /// An event landing now raises the vector (then the EQ disarms until
    /// its doorbell arms it again).
    pub armed: bool,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct CqState {
    pub buf: QBuf,
    pub log_n: u8,
    pub prod: u32,
    pub db: u64,
    pub overrun: bool,
    /// Where its completion events go.
    pub comp_eqn: u32,
    /// The next CQE posts a completion event (then it disarms).
    pub armed: bool,
}

/// Every object the driver made.
#[derive(Default)]
pub(super) struct Objects {
    pub mrs: BTreeMap<u32, MrState>,
    pub eqs: BTreeMap<u32, EqState>,
    pub cqs: BTreeMap<u32, CqState>,
}

/// The page shift of a context's `log_page_size` (log2 bytes − 12), up
/// to 1 GiB pages.
pub(super) fn page_shift(log_page_size: u8) -> Result<u32, Refusal> {
    if log_page_size > 18 {
        return bad(format!("log_page_size {log_page_size}: pages over 1 GiB"));
    }
    Ok(log_page_size as u32 + 12)
}

/// A refused command: its status and what was wrong.
pub(super) type Refusal = (u8, String);

pub(super) fn bad<T>(why: String) -> Result<T, Refusal> {
    Err((status::BAD_PARAM, why))
}

impl Mlx4Model {
    /// Runs `f`; a refusal is recorded as a violation and answered with
    /// its status.
    pub(super) fn checked(
        s: &mut State,
        what: &str,
        f: impl FnOnce(&mut State) -> Result<(), Refusal>,
    ) -> u8 {
        match f(s) {
            Ok(()) => status::OK,
            Err((st, why)) => {
                Self::violation(s, format!("{what}: {why}"));
                st
            }
        }
    }

    /// The bus address of byte `off` of `b` (`len` bytes, not crossing a
    /// page), by its MTT entry read now.
    pub(super) fn qbuf_addr(&self, s: &State, b: QBuf, off: u64, len: u64) -> Option<u64> {
        let page = 1u64 << b.page_shift;
        if off % page + len > page {
            return None;
        }
        let hca = s.icm.hca.as_ref()?;
        let at = hca.mtt_base + b.mtt_off + (off >> b.page_shift) * mpt::MTT_ENTRY;
        let mut raw = [0u8; 8];
        if !self.icm_read(s, at, &mut raw) {
            return None;
        }
        let entry = u64::from_be_bytes(raw);
        if entry & mpt::MTT_PRESENT == 0 || entry & (page - 1) & !1 != 0 {
            return None;
        }
        Some((entry & !(page - 1)) + off % page)
    }

    /// Reads ICM memory by DMA.
    pub(super) fn icm_read(&self, s: &State, va: u64, out: &mut [u8]) -> bool {
        s.icm
            .bus(va, out.len() as u64)
            .is_some_and(|pa| self.iommu.read(pa, out))
    }

    /// Writes ICM memory by DMA.
    pub(super) fn icm_write(&self, s: &State, va: u64, data: &[u8]) -> bool {
        s.icm
            .bus(va, data.len() as u64)
            .is_some_and(|pa| self.iommu.write(pa, data))
    }

    /// A context input mailbox as `T`.
    pub(super) fn ctx_in<T: Wire>(&self, s: &mut State) -> Result<T, Refusal> {
        let mut raw = vec![0u8; size_of::<T>()];
        if !self.mailbox_in(s, &mut raw) {
            return bad("input mailbox unreadable".into());
        }
        T::from_bytes(&raw).ok_or((status::BAD_PARAM, "short mailbox".into()))
    }

    /// An object number against its table: not reserved, inside it, and
    /// its context entry backed by ICM (status 0x0c otherwise).
    pub(super) fn check_number(
        s: &State,
        what: &str,
        n: u32,
        rsvd: u8,
        table: super::icm::Tbl,
    ) -> Result<(), Refusal> {
        if (n as u64) < 1 << rsvd || n as u64 >= table.entries {
            return Err((
                status::BAD_INDEX,
                format!(
                    "{what} {n:#x} outside {:#x}..{:#x}",
                    1u64 << rsvd,
                    table.entries
                ),
            ));
        }
        if !s
            .icm
            .covered(table.base + n as u64 * table.entry, table.entry)
        {
            return Err((
                status::ICM_ERROR,
                format!("{what} {n:#x}: its context has no ICM"),
            ));
        }
        Ok(())
    }

    pub(super) fn sw2hw_mpt(&self, s: &mut State) -> u8 {
        let idx = s.hcr[2];
        Self::checked(s, "SW2HW_MPT", |s| {
            let hca = s.icm.hca.ok_or((status::BAD_SYS_STATE, "no HCA".into()))?;
            Self::check_number(s, "MPT", idx, super::commands::CAPS.rsvd_mpts, hca.dmpt)?;
            let m: Mpt = self.ctx_in(s)?;
            let flags = m.flags.get();
            if flags & mpt::PHYSICAL == 0 {
                return bad(format!("flags {flags:#x}: only physical MRs are modelled"));
            }
            if flags & mpt::SW_OWNS != mpt::SW_OWNS || m.key.get() != mpt::key(idx) {
                return bad(format!(
                    "flags {flags:#x}, key {:#x} for index {idx:#x}",
                    m.key.get()
                ));
            }
            if s.obj.mrs.contains_key(&idx) {
                return Err((
                    status::BAD_RES_STATE,
                    format!("MPT {idx:#x} already in use"),
                ));
            }
            let mr = MrState {
                start: m.start.get(),
                len: m.length.get(),
                write: flags & mpt::LOCAL_WRITE != 0,
            };
            s.obj.mrs.insert(idx, mr);
            Ok(())
        })
    }

    pub(super) fn hw2sw_mpt(&self, s: &mut State) -> u8 {
        let idx = s.hcr[2];
        Self::checked(s, "HW2SW_MPT", |s| {
            s.obj
                .mrs
                .remove(&idx)
                .map(drop)
                .ok_or((status::BAD_RES_STATE, format!("MPT {idx:#x} not in use")))
        })
    }

    /// WRITE_MTT: be64 first index, be64 0, then `in_mod` entries.
    pub(super) fn write_mtt(&self, s: &mut State) -> u8 {
        let n = s.hcr[2] as usize;
        Self::checked(s, "WRITE_MTT", |s| {
            let hca = s.icm.hca.ok_or((status::BAD_SYS_STATE, "no HCA".into()))?;
            if n == 0 || n > (4096 - 16) / 8 {
                return bad(format!("{n} entries"));
            }
            let mut raw = vec![0u8; 16 + 8 * n];
            if !self.mailbox_in(s, &mut raw) {
                return bad("mailbox unreadable".into());
            }
            let first = u64::from_be_bytes(raw[..8].try_into().unwrap_or_default());
            let at = first
                .checked_mul(mpt::MTT_ENTRY)
                .and_then(|o| o.checked_add(hca.mtt_base));
            if !at.is_some_and(|at| self.icm_write(s, at, &raw[16..])) {
                return Err((status::ICM_ERROR, format!("MTT {first:#x}+{n}: no ICM")));
            }
            Ok(())
        })
    }

    /// The lkey's MR, covering `[addr, addr + len)`, writable if `write`.
    pub(super) fn mr_covers(s: &State, lkey: u32, addr: u64, len: u64, write: bool) -> bool {
        s.obj.mrs.get(&mpt::index(lkey)).is_some_and(|m| {
            mpt::key(mpt::index(lkey)) == lkey
                && addr >= m.start
                && addr.checked_add(len).is_some_and(|e| e - m.start <= m.len)
                && (m.write || !write)
        })
    }

    /// Marks the `n` entries of `b`, `size` bytes each, device-owned
    /// (owner bit 1 in the last byte), as the firmware does at SW2HW.
    fn mark_owned(&self, s: &State, b: QBuf, n: u64, size: u64) -> bool {
        (0..n).all(|i| {
            self.qbuf_addr(s, b, i * size + size - 1, 1)
                .is_some_and(|a| self.iommu.write(a, &[0x80]))
        })
    }

    pub(super) fn sw2hw_eq(&self, s: &mut State) -> u8 {
        let eqn = s.hcr[2];
        Self::checked(s, "SW2HW_EQ", |s| {
            let hca = s.icm.hca.ok_or((status::BAD_SYS_STATE, "no HCA".into()))?;
            Self::check_number(s, "EQ", eqn, 2, hca.eqc)?;
            let ctx: EqCtx = self.ctx_in(s)?;
            if s.obj.eqs.contains_key(&eqn) {
                return Err((status::BAD_RES_STATE, format!("EQ {eqn} exists")));
            }
            if ctx.flags.get() != e::STATE_ARMED
                || ctx.page_offset.get() != 0
                || ctx.log_eq_size > 22
            {
                return bad(format!(
                    "flags {:#x}, page offset {}, 2^{} EQEs",
                    ctx.flags.get(),
                    ctx.page_offset.get(),
                    ctx.log_eq_size
                ));
            }
            let buf = QBuf {
                mtt_off: (ctx.mtt_h as u64) << 32 | ctx.mtt_l.get() as u64,
                page_shift: page_shift(ctx.log_page_size)?,
            };
            if !self.mark_owned(s, buf, 1 << ctx.log_eq_size, e::EQE as u64) {
                return Err((
                    status::BAD_PARAM,
                    "EQ buffer: MTT entries missing or unmapped".into(),
                ));
            }
            let eq = EqState {
                buf,
                log_n: ctx.log_eq_size,
                prod: 0,
                cons: 0,
                mask: 0,
                intr: ctx.intr,
                armed: true,
            };
            s.obj.eqs.insert(eqn, eq);
            Ok(())
        })
    }

    pub(super) fn hw2sw_eq(&self, s: &mut State) -> u8 {
        let eqn = s.hcr[2];
        Self::checked(s, "HW2SW_EQ", |s| {
            let eq = s
                .obj
                .eqs
                .get(&eqn)
                .ok_or((status::BAD_RES_STATE, format!("EQ {eqn} not in use")))?;
            // Refused, the EQ stays the device's.
            if eq.mask != 0 {
                return Err((
                    status::BAD_RES_STATE,
                    format!("EQ {eqn} still mapped to events"),
                ));
            }
            s.obj.eqs.remove(&eqn);
            Ok(())
        })
    }

    pub(super) fn map_eq(&self, s: &mut State) -> u8 {
        let (mask, in_mod) = (Self::in_param(s), s.hcr[2]);
        Self::checked(s, "MAP_EQ", |s| {
            let eqn = in_mod & 0x3ff;
            let eq = s
                .obj
                .eqs
                .get_mut(&eqn)
                .ok_or((status::BAD_RES_STATE, format!("EQ {eqn} not in use")))?;
            if in_mod & e::UNMAP != 0 {
                eq.mask &= !mask;
            } else {
                eq.mask |= mask;
            }
            Ok(())
        })
    }

    /// Posts an event to the EQ mapped for its type; false if none is, or
    /// it is full.
    pub(super) fn post_eqe(&self, s: &mut State, kind: u8, subtype: u8, data: [u8; 24]) -> bool {
        let Some((&eqn, _)) = s.obj.eqs.iter().find(|(_, q)| q.mask & 1 << kind != 0) else {
            return false;
        };
        self.post_eqe_to(s, eqn, kind, subtype, data)
    }

    /// Raises EQ `eqn`'s MSI-X vector if the EQ is armed, and disarms it:
    /// one interrupt per arming.
    pub(super) fn raise(s: &mut State, eqn: u32) {
        let Some(eq) = s.obj.eqs.get_mut(&eqn) else {
            return;
        };
        if !eq.armed {
            return;
        }
        eq.armed = false;
        if let Some(fd) = s.msix.get(eq.intr as usize) {
            let _ = fd.signal();
        }
    }

    /// Posts an event to EQ `eqn`, raising its vector if armed; false if
    /// the EQ does not exist or is full.
    fn post_eqe_to(&self, s: &mut State, eqn: u32, kind: u8, subtype: u8, data: [u8; 24]) -> bool {
        let Some(&eq) = s.obj.eqs.get(&eqn) else {
            Self::violation(s, format!("event for EQ {eqn}, which does not exist"));
            return false;
        };
        let n = 1u32 << eq.log_n;
        if eq.prod.wrapping_sub(eq.cons) & 0xff_ffff >= n {
            return false;
        }
        let mut ev = Eqe::zeroed();
        ev.kind = kind;
        ev.subtype = subtype;
        ev.data = data;
        ev.owner = if eq.prod & n != 0 { 0x80 } else { 0 };
        let off = (eq.prod & (n - 1)) as u64 * e::EQE as u64;
        if !self.write_entry(s, eq.buf, off, ev.bytes()) {
            Self::violation(s, format!("EQ {eqn}: EQE {} unreachable", eq.prod));
            return false;
        }
        if let Some(q) = s.obj.eqs.get_mut(&eqn) {
            q.prod = q.prod.wrapping_add(1);
        }
        Self::raise(s, eqn);
        true
    }

    /// Writes a 32-byte entry whose last byte holds the owner bit: the
    /// body first, then (after a release fence, which the driver's
    /// acquire after reading the owner pairs with) the owner byte.
    fn write_entry(&self, s: &State, b: QBuf, off: u64, bytes: &[u8]) -> bool {
        let Some(a) = self.qbuf_addr(s, b, off, bytes.len() as u64) else {
            return false;
        };
        let last = bytes.len() - 1;
        let ok = self.dma_write(a, &bytes[..last]);
        fence(Ordering::Release);
        ok && self.iommu.write(a + last as u64, &bytes[last..])
    }

    pub(super) fn sw2hw_cq(&self, s: &mut State, op_mod: u8) -> u8 {
        let cqn = s.hcr[2];
        Self::checked(s, "SW2HW_CQ", |s| {
            let hca = s.icm.hca.ok_or((status::BAD_SYS_STATE, "no HCA".into()))?;
            Self::check_number(s, "CQ", cqn, super::commands::CAPS.rsvd_cqs, hca.cqc)?;
            if op_mod != 0 {
                return bad(format!("op_mod {op_mod}: SW_CQ_INIT is not offered"));
            }
            let ctx: CqCtx = self.ctx_in(s)?;
            if s.obj.cqs.contains_key(&cqn) {
                return Err((status::BAD_RES_STATE, format!("CQ {cqn:#x} exists")));
            }
            let lu = ctx.logsize_usrpage.get();
            let (log_n, uar) = ((lu >> 24) as u8, lu & 0xff_ffff);
            let uar_pages = (1u64 << (super::commands::CAPS.log_uar_mb + 20)) / 4096;
            if log_n > 22 || uar as u64 >= uar_pages || ctx.page_offset.get() != 0 {
                return bad(format!(
                    "2^{log_n} CQEs, UAR {uar}, page offset {}",
                    ctx.page_offset.get()
                ));
            }
            if !s.obj.eqs.contains_key(&(ctx.comp_eqn as u32)) {
                return bad(format!("completion EQ {} does not exist", ctx.comp_eqn));
            }
            let buf = QBuf {
                mtt_off: (ctx.mtt_h as u64) << 32 | ctx.mtt_l.get() as u64,
                page_shift: page_shift(ctx.log_page_size)?,
            };
            if !self.mark_owned(s, buf, 1 << log_n, c::CQE as u64) {
                return bad("CQ buffer: MTT entries missing or unmapped".into());
            }
            let db = ctx.db_rec_addr.get();
            if db % 8 != 0 || self.iommu.translate(db, 8).is_none() {
                return bad(format!("doorbell record {db:#x} unaligned or unmapped"));
            }
            s.obj.cqs.insert(
                cqn,
                CqState {
                    buf,
                    log_n,
                    prod: 0,
                    db,
                    overrun: false,
                    comp_eqn: ctx.comp_eqn as u32,
                    armed: false,
                },
            );
            Ok(())
        })
    }

    pub(super) fn hw2sw_cq(&self, s: &mut State) -> u8 {
        let cqn = s.hcr[2];
        Self::checked(s, "HW2SW_CQ", |s| {
            if s.qps_using_cq(cqn) {
                return Err((
                    status::BAD_RES_STATE,
                    format!("CQ {cqn:#x} is used by a QP not in RST"),
                ));
            }
            s.obj
                .cqs
                .remove(&cqn)
                .map(drop)
                .ok_or((status::BAD_RES_STATE, format!("CQ {cqn:#x} not in use")))
        })
    }

    /// A CQ armed while CQEs past the driver's consumer index `ci` wait
    /// posts its completion event now, and disarms.
    pub(super) fn arm_with_pending(&self, s: &mut State, cqn: u32, ci: u32) {
        let pending = s
            .obj
            .cqs
            .get(&cqn)
            .is_some_and(|cq| cq.prod.wrapping_sub(ci) & 0xff_ffff != 0);
        if pending {
            self.completion_event(s, cqn);
        }
    }

    /// An armed CQ's completion event (then it disarms): the CQ's number
    /// in the EQE's first be32 (`inc/device.h` `event.comp.cqn`), posted
    /// to its completion EQ.
    fn completion_event(&self, s: &mut State, cqn: u32) {
        let Some(cq) = s.obj.cqs.get_mut(&cqn) else {
            return;
        };
        if !std::mem::take(&mut cq.armed) {
            return;
        }
        let eqn = cq.comp_eqn;
        let mut data = [0u8; 24];
        data[..4].copy_from_slice(&cqn.to_be_bytes());
        self.post_eqe_to(s, eqn, e::EV_COMPLETION, 0, data);
    }

    /// Writes a completion to CQ `cqn`; an overrun (the driver's set_ci,
    /// read now, a whole queue behind) posts a CQ-error event instead.
    pub(super) fn write_cqe(
        &self,
        s: &mut State,
        cqn: u32,
        cqe: &mut crate::prm::layout::Cqe,
    ) -> bool {
        let Some(cq) = s.obj.cqs.get(&cqn).copied() else {
            Self::violation(
                s,
                format!("completion for CQ {cqn:#x}, which does not exist"),
            );
            return false;
        };
        let n = 1u32 << cq.log_n;
        let mut rec = [0u8; 4];
        let set_ci = if self.iommu.read(cq.db, &mut rec) {
            u32::from_be_bytes(rec) & 0xff_ffff
        } else {
            0
        };
        if cq.overrun || cq.prod.wrapping_sub(set_ci) & 0xff_ffff >= n {
            if !cq.overrun {
                let mut data = [0u8; 24];
                data[..4].copy_from_slice(&cqn.to_be_bytes());
                data[0x0b] = c::ERR_OVERRUN;
                self.post_eqe(s, e::EV_CQ_ERROR, 0, data);
                if let Some(q) = s.obj.cqs.get_mut(&cqn) {
                    q.overrun = true;
                }
                s.stats.cq_overruns += 1;
            }
            return false;
        }
        cqe.owner_sr_opcode =
            cqe.owner_sr_opcode & !c::OWNER | if cq.prod & n != 0 { c::OWNER } else { 0 };
        let off = (cq.prod & (n - 1)) as u64 * c::CQE as u64;
        if !self.write_entry(s, cq.buf, off, cqe.bytes()) {
            Self::violation(s, format!("CQ {cqn:#x}: CQE {} unreachable", cq.prod));
            return false;
        }
        if let Some(q) = s.obj.cqs.get_mut(&cqn) {
            q.prod = q.prod.wrapping_add(1);
        }
        self.completion_event(s, cqn);
        true
    }
}
