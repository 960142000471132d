//! Receive interrupts (digest §2.7; `core/eq.c`, `inc/cq.h`
//! `mlx4_cq_arm`), so that an idle lcore sleeps on its mlx4 queues as on
//! every other port.
//!
//! MSI-X vector 0 belongs to the async EQ (which rpmd polls); each receive
//! queue gets a vector and a small completion EQ of its own
//! ([`CompEq`]), named in its CQ's context. While the queue's lcore
//! sleeps the queue is armed ([`RxIrq::arm`]): the EQ's doorbell with the
//! arm bit, then the CQ's (`REQ_NOT`: one completion event on the next
//! CQE). The device then writes a completion EQE into the EQ, raises the
//! vector once and disarms both. On waking ([`RxIrq::disarm`]) the driver
//! consumes the EQEs and hands the EQ's consumer index back unarmed; the
//! CQ's arm sequence number counts the events, as Linux's `arm_sn`.
use crate::hcr::Cmd;
use crate::prm::layout::EqCtx;
use crate::prm::mem::{DevBuf, Wire};
use crate::prm::{cq as c, eq as p, op, uar, wire32};
use crate::res::MttRange;
use crate::{Error, Hca};
use rpmd_pmd::endian::Be32;
use rpmd_pmd::function::{EventFd, Regs};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

/// EQEs in a completion EQ: at most one event per arming, consumed at
/// each waking, so a few suffice.
const COMP_EQ_ENTRIES: u32 = 64;

/// The byte offset in BAR2 of EQ `eqn`'s doorbell: page `eqn / 4`,
/// `uar::EQ + 8 * (eqn % 4)` in it (`core/eq.c` `mlx4_get_eq_uar`).
pub(crate) fn eq_doorbell(eqn: u32) -> u64 {
    (eqn as u64 / 4) * uar::PAGE + uar::EQ + 8 * (eqn as u64 % 4)
}

/// A receive queue's completion EQ as the port keeps it, to destroy at
/// stop (its buffer shared with the queue's [`RxIrq`]).
pub(crate) struct CompEq {
    pub eqn: u32,
    buf: Arc<DevBuf>,
    mtt: MttRange,
}

impl Hca {
    /// The vectors for receive interrupts, when MSI-X could be turned on
    /// at bring-up: vector 0 is the async EQ's.
    pub(crate) fn rx_vectors(&self) -> usize {
        self.msix.len().saturating_sub(1)
    }

    /// SW2HW_EQ of completion EQ `eqn`, raising MSI-X vector `vector`.
    pub(crate) fn create_comp_eq(&mut self, eqn: u32, vector: u8) -> Result<CompEq, Error> {
        let bytes = COMP_EQ_ENTRIES as usize * p::EQE;
        let buf = Arc::new(DevBuf::new(
            &**self.function(),
            "mlx4 completion EQ",
            bytes,
        )?);
        let mtt = self.map_mtt(&buf)?;
        let mut ctx = EqCtx::zeroed();
        ctx.flags = Be32::new(p::STATE_ARMED);
        ctx.log_eq_size = COMP_EQ_ENTRIES.trailing_zeros() as u8;
        ctx.intr = vector;
        (ctx.mtt_h, ctx.mtt_l) = mtt.offset();
        self.mailbox.clear();
        self.mailbox.put(0, &ctx);
        if let Err(e) = self.hcr.exec(Cmd {
            opcode: op::SW2HW_EQ,
            in_mod: eqn,
            in_param: self.mailbox.iova(),
            ..Cmd::default()
        }) {
            self.unmap_mtt(mtt);
            return Err(e);
        }
        Ok(CompEq { eqn, buf, mtt })
    }

    /// HW2SW_EQ; the buffer's MTT entries are reused only if the device
    /// let go of it (else its memory is kept for good).
    pub(crate) fn destroy_comp_eq(&mut self, eq: CompEq) -> Result<(), Error> {
        match self.hcr.exec(Cmd {
            opcode: op::HW2SW_EQ,
            op_mod: 1,
            in_mod: eq.eqn,
            ..Cmd::default()
        }) {
            Ok(_) => {
                self.unmap_mtt(eq.mtt);
                Ok(())
            }
            Err(e) => {
                std::mem::forget(eq.buf);
                Err(e)
            }
        }
    }

    /// Receive queue `q`'s interrupt: a handle on its vector's eventfd,
    /// BAR2 for the doorbells, its CQ `cqn` with doorbell record `cq_db`.
    pub(crate) fn rx_irq(
        &self,
        eq: &CompEq,
        vector: usize,
        cqn: u32,
        cq_db: Arc<DevBuf>,
    ) -> Result<RxIrq, Error> {
        let fd = self
            .msix
            .get(vector)
            .ok_or_else(|| Error::Firmware(format!("no MSI-X vector {vector}")))?
            .try_clone()
            .map_err(|e| Error::Memory {
                what: "a handle on a receive queue's interrupt".into(),
                source: e,
            })?;
        let uar = self.function().bar(2).map_err(|e| Error::Register {
            what: "BAR2 for a receive queue's doorbells".into(),
            source: e,
        })?;
        Ok(RxIrq {
            fd,
            eqn: eq.eqn,
            eq_buf: eq.buf.clone(),
            eq_ci: 0,
            uar,
            cqn,
            cq_db,
            arm_sn: 0,
        })
    }
}

/// A receive queue's interrupt, as its handle drives it.
pub(crate) struct RxIrq {
    fd: EventFd,
    eqn: u32,
    eq_buf: Arc<DevBuf>,
    /// The EQ's consumer index (free-running).
    eq_ci: u32,
    uar: Regs,
    cqn: u32,
    cq_db: Arc<DevBuf>,
    /// Completion events seen, mod 4: the arm sequence number.
    arm_sn: u32,
}

impl RxIrq {
    /// The eventfd the queue's vector signals.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn doorbell_err(what: &str, e: rpmd_pmd::Error) -> rpmd_pmd::Error {
        rpmd_pmd::Error::Driver {
            port: "mlx4".into(),
            what: what.into(),
            source: Box::new(e),
        }
    }

    /// Arms the EQ, then the CQ for one event on its next CQE after
    /// consumer index `cq_ci`.
    pub(crate) fn arm(&mut self, cq_ci: u32) -> Result<(), rpmd_pmd::Error> {
        self.eq_doorbell(true)?;
        let sn = (self.arm_sn & 3) << c::ARM_SN_SHIFT;
        let ci = cq_ci & 0xff_ffff;
        self.cq_db.store_be32(4, sn | c::DB_REQ_NOT | ci);
        // The record's arm dword is in memory before the device hears of
        // the arming (Linux: `wmb()`); its partner is the device's read of
        // the record when the doorbell arrives.
        fence(Ordering::Release);
        let d0 = wire32(sn | c::DB_REQ_NOT | self.cqn) as u64;
        let d1 = wire32(ci) as u64;
        let at = uar::RESERVED * uar::PAGE + uar::CQ_ARM;
        self.uar
            .write64(at, d1 << 32 | d0)
            .map_err(|e| Self::doorbell_err("CQ arm doorbell", e))
    }

    /// Consumes the completion events the device posted and hands the
    /// EQ's consumer index back, unarmed; drains the eventfd.
    pub(crate) fn disarm(&mut self) -> Result<(), rpmd_pmd::Error> {
        let mut seen = 0;
        loop {
            let at = (self.eq_ci % COMP_EQ_ENTRIES) as usize * p::EQE;
            let owner = self.eq_buf.load8(at + 0x1f) & 0x80 != 0;
            if owner != (self.eq_ci & COMP_EQ_ENTRIES != 0) {
                break;
            }
            self.eq_ci = self.eq_ci.wrapping_add(1);
            seen += 1;
        }
        let _ = self.fd.take();
        if seen == 0 {
            return Ok(());
        }
        self.arm_sn = self.arm_sn.wrapping_add(seen);
        self.eq_doorbell(false)
    }

    fn eq_doorbell(&self, arm: bool) -> Result<(), rpmd_pmd::Error> {
        let arm = if arm { uar::EQ_ARM } else { 0 };
        self.uar
            .write32(eq_doorbell(self.eqn), wire32(self.eq_ci & 0xff_ffff | arm))
            .map_err(|e| Self::doorbell_err("EQ doorbell", e))
    }
}
