//! The model's MAC steering (digest §2.9, §4 items 6 and 8): MGID_HASH,
//! READ_MCG and WRITE_MCG over the MCG table in ICM memory (read by DMA
//! each time), the ports' promiscuous lists, and the lookup the RX
//! engine makes: a B0 group match first, then the promiscuous list, then
//! RQP_CALC's catch-alls.
use super::objects::bad;
use super::{Mlx4Model, State};
use crate::prm::layout::Mgm;
use crate::prm::mem::Wire;
use crate::prm::{mcg as p, status};
use crate::steer::mac_gid;

impl Mlx4Model {
    /// The firmware's private hash (any deterministic function into the
    /// hash half of the table will do, digest §2.9): FNV-1a.
    fn mgid_hash_of(gid: &[u8; 16], buckets: u32) -> u32 {
        let h = gid.iter().fold(0x811c_9dc5u32, |h, &b| {
            (h ^ b as u32).wrapping_mul(0x0100_0193)
        });
        h % buckets.max(1)
    }

    fn mgm_at(&self, s: &State, idx: u32) -> Option<Mgm> {
        let hca = s.icm.hca?;
        if idx as u64 >= hca.mcg.entries {
            return None;
        }
        let mut raw = [0u8; size_of::<Mgm>()];
        self.icm_read(s, hca.mcg.base + idx as u64 * hca.mcg.entry, &mut raw)
            .then(|| Mgm::from_bytes(&raw))
            .flatten()
    }

    pub(super) fn mgid_hash(&self, s: &mut State) -> u8 {
        let mut g = [0u8; 16];
        if !self.mailbox_in(s, &mut g) {
            return status::BAD_PARAM;
        }
        let Some(hca) = s.icm.hca else {
            return status::BAD_SYS_STATE;
        };
        let h = Self::mgid_hash_of(&g, 1 << hca.log_mc_hash);
        Self::set_out_param(s, h as u64);
        status::OK
    }

    pub(super) fn read_mcg(&self, s: &mut State) -> u8 {
        let idx = s.hcr[2];
        match self.mgm_at(s, idx) {
            Some(m) => {
                let b = m.bytes().to_vec();
                self.mailbox_out(s, &b)
            }
            None => {
                Self::violation(s, format!("READ_MCG {idx:#x}: outside the table or no ICM"));
                status::BAD_INDEX
            }
        }
    }

    pub(super) fn write_mcg(&self, s: &mut State, op_mod: u8) -> u8 {
        let in_mod = s.hcr[2];
        Self::checked(s, "WRITE_MCG", |s| {
            let hca = s.icm.hca.ok_or((status::BAD_SYS_STATE, "no HCA".into()))?;
            let m: Mgm = self.ctx_in(s)?;
            let count = m.members_count.get();
            let n = (count & p::COUNT_MASK) as usize;
            if n > p::MEMBERS || (n > 0 && count & !p::COUNT_MASK != p::PROT_ETH) {
                return bad(format!("members_count {count:#x}"));
            }
            let members: Vec<u32> = m.qp[..n].iter().map(|q| q.get() & 0xff_ffff).collect();
            if op_mod == p::OP_MOD_PROMISC {
                let port = (in_mod >> 16) as usize;
                let unicast = in_mod >> 1 & 1 == p::STEER_UC as u32;
                let ps = port.checked_sub(1).and_then(|i| s.ports.get_mut(i));
                let ps = ps.ok_or((
                    status::BAD_PARAM,
                    format!("promiscuous list of port {port}"),
                ))?;
                ps.promisc[unicast as usize] = members;
                return Ok(());
            }
            if op_mod != 0 {
                return bad(format!("op_mod {op_mod}"));
            }
            let next = m.next_gid_index.get() >> 6;
            let half = 1u32 << hca.log_mc_hash;
            if in_mod as u64 >= hca.mcg.entries
                || (next != 0 && (next < half || next as u64 >= hca.mcg.entries))
            {
                return Err((
                    status::BAD_INDEX,
                    format!("entry {in_mod:#x}, next {next:#x}"),
                ));
            }
            let at = hca.mcg.base + in_mod as u64 * hca.mcg.entry;
            if !self.icm_write(s, at, m.bytes()) {
                return Err((status::ICM_ERROR, format!("entry {in_mod:#x}: no ICM")));
            }
            Ok(())
        })
    }

    /// The QPs a frame to `dmac` arriving on `port` goes to.
    pub(super) fn steer(&self, s: &State, port: u8, dmac: [u8; 6]) -> Vec<u32> {
        let unicast = dmac[0] & 1 == 0;
        let Some(ps) = s.ports.get(port as usize - 1) else {
            return Vec::new();
        };
        if let Some(hca) = s.icm.hca.filter(|h| h.uc_steering || !unicast) {
            let gid = mac_gid(port, unicast, dmac);
            let mut idx = Self::mgid_hash_of(&gid, 1 << hca.log_mc_hash);
            for _ in 0..hca.mcg.entries {
                let Some(m) = self.mgm_at(s, idx) else { break };
                let n = (m.members_count.get() & p::COUNT_MASK) as usize;
                if n > 0 && m.gid == gid {
                    return m.qp[..n.min(p::MEMBERS)]
                        .iter()
                        .map(|q| q.get() & 0xff_ffff)
                        .collect();
                }
                idx = m.next_gid_index.get() >> 6;
                if idx == 0 {
                    break;
                }
            }
        }
        if !ps.promisc[unicast as usize].is_empty() {
            return ps.promisc[unicast as usize].clone();
        }
        // A0's catch-alls: the unicast-promiscuous QP (be32 at 0x14, bit
        // 31) and the multicast default (be32 at 0x18, mode in 31:30).
        if let Some(r) = ps.rqp_calc {
            let be = |at: usize| u32::from_be_bytes([r[at], r[at + 1], r[at + 2], r[at + 3]]);
            let (uc, mc) = (be(0x14), be(0x18));
            if unicast && uc >> 31 == 1 {
                return vec![uc & 0xff_ffff];
            }
            if !unicast && mc >> 30 != 0 {
                return vec![mc & 0xff_ffff];
            }
        }
        Vec::new()
    }
}
