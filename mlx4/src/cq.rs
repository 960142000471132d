//! Completion queues (digest §2.7, §3.3; `core/cq.c`, `inc/cq.h`): made
//! with SW2HW_CQ over a zeroed buffer (op_mod 0: the firmware marks every
//! CQE its own) and a doorbell record, polled by owner bit.
//!
//! [`CqPoll`] is the data path's view: the CQE at `ci & (n − 1)` is the
//! driver's when its owner bit equals `(ci & n) != 0`; after consuming,
//! the driver writes `ci` into the doorbell record's first dword (set_ci),
//! which the device reads to know how far it may write.
use crate::hcr::Cmd;
use crate::prm::layout::CqCtx;
use crate::prm::mem::{DevBuf, RingMem, Wire};
use crate::prm::{cq as p, op, uar};
use crate::res::MttRange;
use crate::{Error, Hca};
use rpmd_pmd::endian::{Be32, Be64};
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

/// What a CQE says (digest §3.3: bytes 0x10–0x1f), decoded.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Completion {
    /// `cq::ST_*`.
    pub status: u16,
    /// Bytes received.
    pub byte_cnt: u32,
    /// The WQE (RX: its index; TX: the first TXBB's counter).
    pub wqe_index: u16,
    /// L4 checksum (`0xffff`: verified); error CQEs: the syndromes.
    pub checksum: u16,
    /// Bits 4:0 of the last byte.
    pub opcode: u8,
}

impl Completion {
    /// The fields from a CQE's last 16 bytes, as two big-endian words
    /// read from the ring.
    #[inline(always)]
    fn decode(lo: u64, hi: u64) -> Self {
        let (lo, hi) = (u64::from_be(lo), u64::from_be(hi));
        Completion {
            status: (lo >> 48) as u16,
            byte_cnt: lo as u32,
            wqe_index: (hi >> 48) as u16,
            checksum: (hi >> 32) as u16,
            opcode: hi as u8 & p::OPCODE_MASK,
        }
    }
}

/// A CQ the device holds. Its memory (the CQEs the device writes, the
/// doorbell record it reads) lives as long as this does, whatever became
/// of the queue handle that polled it: the device may complete work until
/// HW2SW_CQ, and then never reuse it if that fails (a clone keeps a
/// failed destroy's CQ to try again).
#[derive(Clone)]
pub(crate) struct Cq {
    pub(crate) cqn: u32,
    mtt: MttRange,
    mem: [Arc<DevBuf>; 2],
}

/// Reading completions.
pub(crate) struct CqPoll {
    ring: RingMem<{ p::CQE }>,
    db: Arc<DevBuf>,
    nent: u32,
    /// Consumer index (free-running).
    ci: u32,
}

impl std::fmt::Debug for Cq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cq")
            .field("cqn", &self.cqn)
            .field("mtt", &self.mtt)
            .finish()
    }
}

impl CqPoll {
    /// Whether the device has written the next completion (its owner
    /// bit), without consuming it.
    #[inline(always)]
    pub(crate) fn ready(&self) -> bool {
        let owner = self.ring.get::<u8, 0x1f>(self.ci) & p::OWNER != 0;
        owner == (self.ci & self.nent != 0)
    }

    /// The next completion's two body words read the wrong way, for the
    /// tests that show the model catches it: the body read ahead of the
    /// owner bit (as a driver prefetching the next CQE at a burst's end
    /// would), the owner bit looked at a couple of microseconds later.
    #[cfg(any(test, feature = "defects"))]
    pub(crate) fn careless_next(&mut self) -> Option<(u64, u64)> {
        let lo = self.ring.get::<u64, 0x10>(self.ci);
        let hi = self.ring.get::<u64, 0x18>(self.ci);
        let t0 = std::time::Instant::now();
        while t0.elapsed() < std::time::Duration::from_micros(2) {
            std::hint::spin_loop();
        }
        if !self.ready() {
            return None;
        }
        self.ci = self.ci.wrapping_add(1);
        Some((lo, hi))
    }

    /// The next completion, if the device has written it.
    #[inline(always)]
    pub(crate) fn next(&mut self) -> Option<Completion> {
        #[cfg(feature = "defects")]
        if crate::defects::active(crate::defects::Defect::ReadAheadOfOwner) {
            let (lo, hi) = self.careless_next()?;
            return Some(Completion::decode(lo, hi));
        }
        if !self.ready() {
            return None;
        }
        // The CQE's body after its owner byte (the device writes the body
        // first; its release pairs with this acquire). The fields a
        // driver uses sit in its last 16 bytes: two loads.
        fence(Ordering::Acquire);
        let lo = self.ring.get::<u64, 0x10>(self.ci);
        let hi = self.ring.get::<u64, 0x18>(self.ci);
        self.ci = self.ci.wrapping_add(1);
        Some(Completion::decode(lo, hi))
    }

    /// The RSS hash (immed_rss_invalid) of the completion `next` returned
    /// last.
    #[inline]
    pub(crate) fn last_rss_hash(&self) -> u32 {
        u32::from_be(self.ring.get::<u32, 4>(self.ci.wrapping_sub(1)))
    }

    /// The consumer index (free-running).
    pub(crate) fn ci(&self) -> u32 {
        self.ci
    }

    /// The doorbell record (set_ci in its first dword, the arm request in
    /// its second).
    pub(crate) fn record(&self) -> Arc<DevBuf> {
        self.db.clone()
    }

    /// Tells the device how far the driver has read (set_ci).
    #[inline]
    pub(crate) fn commit(&self) {
        // Every CQE read is done before the device may overwrite it: the
        // device reads set_ci before it writes a CQE into a freed slot
        // (the model: `write_cqe` reads the record first).
        fence(Ordering::Release);
        self.db.store_be32(0, self.ci & 0xff_ffff);
    }
}

impl Hca {
    /// SW2HW_CQ of a CQ of `nent` entries (a power of two) whose
    /// completion events go to EQ `comp_eqn` (a receive queue's, armed
    /// while its lcore sleeps), else to the async EQ (never armed).
    pub(crate) fn create_cq(
        &mut self,
        nent: u32,
        comp_eqn: Option<u32>,
    ) -> Result<(Cq, CqPoll), Error> {
        let func = self.function().clone();
        let buf = Arc::new(DevBuf::new(&*func, "mlx4 CQ", nent as usize * p::CQE)?);
        let ring = RingMem::new(buf.clone(), 0, nent)
            .ok_or_else(|| Error::Firmware(format!("a CQ of {nent} entries")))?;
        let db = Arc::new(DevBuf::new(&*func, "mlx4 CQ doorbell record", 64)?);
        let cqn = self.cqns.take("CQ")?;
        let mtt = match self.map_mtt(ring.buf()) {
            Ok(m) => m,
            Err(e) => {
                self.cqns.give(cqn);
                return Err(e);
            }
        };
        let mut c = CqCtx::zeroed();
        c.logsize_usrpage = Be32::new(nent.trailing_zeros() << 24 | uar::RESERVED as u32);
        let async_eqn = self.eq.as_ref().map_or(0, |e| e.eqn);
        c.comp_eqn = comp_eqn.unwrap_or(async_eqn) as u8;
        (c.mtt_h, c.mtt_l) = mtt.offset();
        c.db_rec_addr = Be64::new(db.iova());
        self.mailbox.clear();
        self.mailbox.put(0, &c);
        if let Err(e) = self.hcr.exec(Cmd {
            opcode: op::SW2HW_CQ,
            in_mod: cqn,
            in_param: self.mailbox.iova(),
            ..Cmd::default()
        }) {
            self.unmap_mtt(mtt);
            self.cqns.give(cqn);
            return Err(e);
        }
        let poll = CqPoll {
            ring,
            db,
            nent,
            ci: 0,
        };
        let mem = [buf, poll.db.clone()];
        Ok((Cq { cqn, mtt, mem }, poll))
    }

    /// HW2SW_CQ (op_mod 1, no output); the number, MTT entries and
    /// memory are let go only if the device did (else kept for good).
    pub(crate) fn destroy_cq(&mut self, cq: Cq) -> Result<(), Error> {
        if let Err(e) = self.hcr.exec(Cmd {
            opcode: op::HW2SW_CQ,
            op_mod: 1,
            in_mod: cq.cqn,
            ..Cmd::default()
        }) {
            std::mem::forget(cq.mem);
            return Err(e);
        }
        self.unmap_mtt(cq.mtt);
        self.cqns.give(cq.cqn);
        Ok(())
    }
}
