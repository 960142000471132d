//! The model's QP state machine (digest §2.8, §4 item 5): RST2INIT,
//! INIT2RTR, RTR2RTS, 2RST, 2ERR and QUERY_QP, each from the one state it
//! takes (status 0x10 otherwise), the context checked where a raw-Ethernet
//! QP depends on it.
use super::objects::{bad, QBuf, Refusal};
use super::{Mlx4Model, State};
use crate::prm::layout::{QpCtx, QpModify};
use crate::prm::mem::Wire;
use crate::prm::{op, qp as p, status};
use std::collections::BTreeMap;

/// A QP as the firmware keeps it.
#[derive(Clone, Copy, Debug)]
pub(super) struct QpState {
    pub state: u8,
    pub ctx: QpCtx,
    pub buf: QBuf,
    /// 1-based port.
    pub port: u8,
    pub sq_off: u64,
    pub sq_txbbs: u32,
    pub rq_off: u64,
    pub rq_n: u32,
    pub rq_stride: u32,
    /// The next TXBB counter the TX engine looks at.
    pub sq_cons: u32,
    /// The next receive WQE.
    pub rq_cons: u32,
    /// An indirection QP's RSS context.
    pub rss: Option<super::rss::RssState>,
}

impl QpState {
    fn of(ctx: &QpCtx) -> Result<QpState, Refusal> {
        let f = ctx.flags.get();
        if f >> 16 & 0xff != p::ST_MLX >> 16 {
            return bad(format!(
                "service type {:#x}, not raw Ethernet (MLX)",
                f >> 16 & 0xff
            ));
        }
        let sq = ctx.sq_size_stride;
        let rq = ctx.rq_size_stride;
        let (sq_txbbs, sq_stride) = (1u32 << (sq >> 3), 16u32 << (sq & 7));
        let (rq_n, rq_stride) = (1u32 << (rq >> 3), 16u32 << (rq & 7));
        if sq_stride != p::TXBB as u32 || sq >> 3 > 15 || rq >> 3 > 15 {
            return bad(format!("sq_size_stride {sq:#x}, rq_size_stride {rq:#x}"));
        }
        let sched = ctx.path.sched_queue;
        if sched & 0x83 != 0x83 || ctx.path.ackto & 7 != p::ACKTO_ETH {
            return bad(format!(
                "sched_queue {sched:#x}, ackto {:#x}",
                ctx.path.ackto
            ));
        }
        let sq_bytes = sq_txbbs as u64 * p::TXBB as u64;
        let rq_bytes = rq_n as u64 * rq_stride as u64;
        let (sq_off, rq_off) = if rq_stride > sq_stride {
            (rq_bytes, 0)
        } else {
            (0, sq_bytes)
        };
        Ok(QpState {
            state: p::RST,
            ctx: *ctx,
            buf: QBuf {
                mtt_off: (ctx.mtt_h as u64) << 32 | ctx.mtt_l.get() as u64,
                page_shift: super::objects::page_shift(ctx.log_page_size)?,
            },
            port: (sched >> 6 & 1) + 1,
            sq_off,
            sq_txbbs,
            rq_off,
            rq_n,
            rq_stride,
            sq_cons: 0,
            rq_cons: 0,
            rss: None,
        })
    }
}

impl State {
    /// Whether a QP not in RST sends or receives through CQ `cqn`.
    pub(super) fn qps_using_cq(&self, cqn: u32) -> bool {
        self.qps.values().any(|q| {
            q.state != p::RST && (q.ctx.cqn_send.get() == cqn || q.ctx.cqn_recv.get() == cqn)
        })
    }
}

/// QPs by number.
pub(super) type Qps = BTreeMap<u32, QpState>;

impl Mlx4Model {
    /// The three forward transitions: (from, to) by opcode.
    fn transition(opcode: u16) -> (u8, u8) {
        match opcode {
            op::RST2INIT_QP => (p::RST, p::INIT),
            op::INIT2RTR_QP => (p::INIT, p::RTR),
            _ => (p::RTR, p::RTS),
        }
    }

    pub(super) fn modify_qp(&self, s: &mut State, opcode: u16, op_mod: u8) -> u8 {
        let qpn = s.hcr[2] & 0xff_ffff;
        let name = op::name(opcode);
        Self::checked(s, name, |s| {
            let hca = s.icm.hca.ok_or((status::BAD_SYS_STATE, "no HCA".into()))?;
            Self::check_number(s, "QP", qpn, super::commands::CAPS.rsvd_qps, hca.qpc)?;
            let now = s.qps.get(&qpn).map_or(p::RST, |q| q.state);
            match opcode {
                op::TO_RST_QP => {
                    if op_mod != p::TO_RST_OP_MOD {
                        return bad(format!("op_mod {op_mod}"));
                    }
                    s.qps.remove(&qpn);
                    return Ok(());
                }
                op::TO_ERR_QP => {
                    let q = s.qps.get_mut(&qpn).filter(|q| q.state != p::RST);
                    let q = q.ok_or((status::BAD_QP_STATE, format!("QP {qpn:#x} in RST")))?;
                    q.state = p::ERR;
                    return Ok(());
                }
                _ => {}
            }
            let (from, to) = Self::transition(opcode);
            if now != from {
                return Err((
                    status::BAD_QP_STATE,
                    format!("QP {qpn:#x} is in state {now}, not {from}"),
                ));
            }
            let m: QpModify = self.ctx_in(s)?;
            if m.opt_param_mask.get() != 0 {
                return bad(format!(
                    "optional-parameter mask {:#x}",
                    m.opt_param_mask.get()
                ));
            }
            self.check_qp_context(s, qpn, &m.ctx, to)?;
            let mut q = QpState::of(&m.ctx)?;
            if m.ctx.flags.get() & p::FLAG_RSS != 0 {
                let at = std::mem::offset_of!(QpModify, ctx)
                    + std::mem::offset_of!(QpCtx, path)
                    + p::RSS_OFFSET_IN_PATH;
                let r = crate::prm::layout::RssCtx::from_bytes(&m.bytes()[at..]);
                let r = r.ok_or((status::BAD_PARAM, "RSS context cut short".to_string()))?;
                q.rss = Some(super::rss::RssState::of(&r)?);
            }
            if let Some(old) = s.qps.get(&qpn) {
                (q.sq_cons, q.rq_cons) = (old.sq_cons, old.rq_cons);
            }
            q.state = to;
            s.qps.insert(qpn, q);
            Ok(())
        })
    }

    /// What a transition to `to` needs of the context.
    fn check_qp_context(&self, s: &State, qpn: u32, c: &QpCtx, to: u8) -> Result<(), Refusal> {
        let next = (c.flags.get() >> 28) as u8;
        if next != to || c.local_qpn.get() & 0xff_ffff != qpn {
            return bad(format!(
                "next state {next} (want {to}), local QPN {:#x}",
                c.local_qpn.get()
            ));
        }
        for (what, cqn) in [("send", c.cqn_send.get()), ("receive", c.cqn_recv.get())] {
            if !s.obj.cqs.contains_key(&cqn) {
                return bad(format!("{what} CQ {cqn:#x} does not exist"));
            }
        }
        let uar_pages = (1u64 << (super::commands::CAPS.log_uar_mb + 20)) / 4096;
        if c.usr_page.get() as u64 >= uar_pages || c.usr_page.get() < 128 {
            return bad(format!(
                "UAR page {} (the first 128 are the EQs')",
                c.usr_page.get()
            ));
        }
        let db = c.db_rec_addr.get();
        if db % 4 != 0 || self.iommu.translate(db, 4).is_none() {
            return bad(format!("RQ doorbell record {db:#x} unaligned or unmapped"));
        }
        if c.pd.get() & 0xff_ffff == 0 || c.srqn.get() & 1 << 24 != 0 {
            return bad(format!("PD {:#x}, SRQ {:#x}", c.pd.get(), c.srqn.get()));
        }
        Ok(())
    }

    /// QUERY_QP: the context with the state the QP is in.
    pub(super) fn query_qp(&self, s: &mut State) -> u8 {
        let qpn = s.hcr[2] & 0xff_ffff;
        // A number the other QP commands refuse is refused here too.
        let checked = Self::checked(s, "QUERY_QP", |s| {
            let hca = s.icm.hca.ok_or((status::BAD_SYS_STATE, "no HCA".into()))?;
            Self::check_number(s, "QP", qpn, super::commands::CAPS.rsvd_qps, hca.qpc)
        });
        if checked != status::OK {
            return checked;
        }
        let mut m = QpModify::zeroed();
        match s.qps.get(&qpn) {
            Some(q) => {
                m.ctx = q.ctx;
                let f = m.ctx.flags.get() & !(0xf << 28) | (q.state as u32) << 28;
                m.ctx.flags = rpmd_pmd::endian::Be32::new(f);
            }
            None => m.ctx.flags = rpmd_pmd::endian::Be32::new(0),
        }
        let bytes = m.bytes().to_vec();
        self.mailbox_out(s, &bytes)
    }
}
