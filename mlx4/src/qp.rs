//! Raw-Ethernet queue pairs (digest §2.8; `core/qp.c`
//! `mlx4_qp_to_ready`, `core/en_resources.c` `mlx4_en_fill_qp_context`):
//! the buffer (send queue of 64-byte TXBBs, receive queue of
//! scatter lists), the doorbell record, and the walk RST → INIT → RTR →
//! RTS with the same context each time but for the state nibble; 2RST
//! to take it down.
use crate::cq::{Cq, CqPoll};
use crate::hcr::Cmd;
use crate::prm::layout::{QpCtx, QpModify, RssCtx};
use crate::prm::mem::{DevBuf, Wire};
use crate::prm::{op, qp as p, uar, wqe};
use crate::res::MttRange;
use crate::{Error, Hca};
use rpmd_pmd::endian::{Be32, Be64};
use std::sync::Arc;

/// What a QP is for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QpSpec {
    /// 1-based port it sends on.
    pub port: u8,
    /// TXBBs in the send queue (a power of two; 1 for a receive QP).
    pub sq_txbbs: u32,
    /// Receive WQEs and their stride in bytes (powers of two), or none.
    pub rq: Option<(u32, u32)>,
    /// CQs of send and receive completions.
    pub cqn_send: u32,
    pub cqn_recv: u32,
    /// A number taken beforehand (an RSS range's), or None for the next.
    pub qpn: Option<u32>,
    /// An RSS indirection QP's context: frames steered to this QP go to
    /// the receive QP its hash picks.
    pub rss: Option<RssCtx>,
}

/// A QP the device holds, and where its queues are in its buffer.
pub(crate) struct Qp {
    pub(crate) qpn: u32,
    pub(crate) buf: Arc<DevBuf>,
    /// The RQ doorbell record (BE `prod & 0xffff`).
    pub(crate) db: Arc<DevBuf>,
    pub(crate) sq_off: usize,
    pub(crate) rq_off: usize,
    mtt: MttRange,
}

/// `log2(n) << 3 | (log2(stride) − 4)`.
fn size_stride(n: u32, stride: u32) -> u8 {
    (n.trailing_zeros() << 3 | (stride.trailing_zeros() - 4)) as u8
}

impl Hca {
    /// A QP per `spec`, brought to RTS. The queue with the larger stride
    /// comes first in the buffer (mlx4_ib `set_kernel_sq_size`), so a
    /// receive QP has its one dummy TXBB at 0 and its WQEs from 64.
    pub(crate) fn create_qp(&mut self, spec: QpSpec) -> Result<Qp, Error> {
        let sq_bytes = spec.sq_txbbs as usize * p::TXBB;
        let (rq_n, rq_stride) = spec.rq.unwrap_or((1, 16));
        let rq_bytes = if spec.rq.is_some() {
            (rq_n * rq_stride) as usize
        } else {
            0
        };
        let (sq_off, rq_off) = if rq_stride as usize > p::TXBB {
            (rq_bytes, 0)
        } else {
            (0, sq_bytes)
        };
        let func = self.function().clone();
        let buf = Arc::new(DevBuf::new(&*func, "mlx4 QP", sq_bytes + rq_bytes)?);
        let db = Arc::new(DevBuf::new(&*func, "mlx4 QP doorbell record", 64)?);
        // Every TXBB's first dword marks it not yet posted (TX); a receive
        // QP's dummy TXBB is stamped as mlx4_en does.
        let first = if spec.rq.is_some() {
            0x8000_0000
        } else {
            wqe::TXBB_INIT
        };
        for t in 0..spec.sq_txbbs as usize {
            buf.store_be32(sq_off + t * p::TXBB, first);
        }
        let qpn = match spec.qpn {
            Some(n) => n,
            None => self.qpns.take("QP")?,
        };
        let mtt = match self.map_mtt(&buf) {
            Ok(m) => m,
            Err(e) => {
                self.qpns.give(qpn);
                return Err(e);
            }
        };
        let qp = Qp {
            qpn,
            buf,
            db,
            sq_off,
            rq_off,
            mtt,
        };
        let mut m = QpModify::zeroed();
        m.ctx = self.qp_context(&qp, &spec);
        let steps = [
            (op::RST2INIT_QP, p::INIT),
            (op::INIT2RTR_QP, p::RTR),
            (op::RTR2RTS_QP, p::RTS),
        ];
        for (opcode, state) in steps {
            let flags = m.ctx.flags.get() & !(0xf << 28) | (state as u32) << 28;
            m.ctx.flags = Be32::new(flags);
            if opcode == op::INIT2RTR_QP {
                m.ctx.params2 = Be32::new(p::PARAMS2_FPP);
            }
            if let Err(e) = self.modify_qp(opcode, qpn, Some((&m, spec.rss.as_ref()))) {
                self.destroy_qp(qp);
                return Err(e);
            }
        }
        Ok(qp)
    }

    /// A CQ of `nent` entries (its completion events to `comp_eqn`) and
    /// the QP `spec` makes of its number (the CQ destroyed again if the
    /// QP cannot be made).
    pub(crate) fn create_queue(
        &mut self,
        nent: u32,
        comp_eqn: Option<u32>,
        spec: impl FnOnce(u32) -> QpSpec,
    ) -> Result<(Qp, Cq, CqPoll), Error> {
        let (cq, poll) = self.create_cq(nent, comp_eqn)?;
        match self.create_qp(spec(cq.cqn)) {
            Ok(qp) => Ok((qp, cq, poll)),
            Err(e) => {
                if let Err(d) = self.destroy_cq(cq) {
                    eprintln!("rpmd: warning: mlx4: {d}");
                }
                Err(e)
            }
        }
    }

    /// The context mlx4_en fills (`mlx4_en_fill_qp_context`), state RST.
    pub(crate) fn qp_context(&self, qp: &Qp, spec: &QpSpec) -> QpCtx {
        let mut c = QpCtx::zeroed();
        let rss = if spec.rss.is_some() { p::FLAG_RSS } else { 0 };
        c.flags = Be32::new(p::ST_MLX | rss);
        c.pd = Be32::new(self.pd);
        c.mtu_msgmax = p::MTU_MSGMAX;
        c.rq_size_stride = spec.rq.map_or(0, |(n, s)| size_stride(n, s));
        c.sq_size_stride = size_stride(spec.sq_txbbs, p::TXBB as u32);
        c.usr_page = Be32::new(uar::RESERVED as u32);
        c.local_qpn = Be32::new(qp.qpn);
        c.path.ackto = p::ACKTO_ETH;
        c.path.sched_queue = p::sched_queue(spec.port);
        c.cqn_send = Be32::new(spec.cqn_send);
        c.cqn_recv = Be32::new(spec.cqn_recv);
        c.db_rec_addr = Be64::new(qp.db.iova());
        c.param3 = Be32::new(p::PARAM3_NO_VLAN_STRIP);
        c.log_page_size = 0;
        (c.mtt_h, c.mtt_l) = qp.mtt.offset();
        c
    }

    /// A transition of `qpn`: with its modify mailbox (and an RSS context
    /// laid over the context's path), or none (2RST).
    pub(crate) fn modify_qp(
        &mut self,
        opcode: u16,
        qpn: u32,
        m: Option<(&QpModify, Option<&RssCtx>)>,
    ) -> Result<(), Error> {
        let mut c = Cmd {
            opcode,
            in_mod: qpn,
            ..Cmd::default()
        };
        match m {
            Some((m, rss)) => {
                self.mailbox.clear();
                self.mailbox.put(0, m);
                if let Some(r) = rss {
                    let at = std::mem::offset_of!(QpModify, ctx)
                        + std::mem::offset_of!(QpCtx, path)
                        + p::RSS_OFFSET_IN_PATH;
                    self.mailbox.put(at, r);
                }
                c.in_param = self.mailbox.iova();
            }
            None => c.op_mod = p::TO_RST_OP_MOD,
        }
        self.hcr.exec(c).map(drop)
    }

    /// 2RST; the number and MTT entries are reused only if the device let
    /// go of the QP. The buffer lives while a queue handle holds it.
    pub(crate) fn destroy_qp(&mut self, qp: Qp) {
        match self.modify_qp(op::TO_RST_QP, qp.qpn, None) {
            Ok(()) => {
                self.unmap_mtt(qp.mtt);
                self.qpns.give(qp.qpn);
            }
            Err(e) => {
                eprintln!(
                    "rpmd: error: mlx4: QP {:#x} would not reset; keeping its memory: {e}",
                    qp.qpn
                );
                std::mem::forget(qp.buf);
                std::mem::forget(qp.db);
            }
        }
    }
}
