//! MAC steering in B0 mode (digest §2.9; `core/mcg.c` `find_entry`,
//! `mlx4_qp_attach_common`, `mlx4_qp_detach_common`): each (port,
//! unicast or multicast, MAC) group is an MGM entry found by MGID_HASH
//! and a chain through the AMGM half of the table, listing the QPs that
//! receive its frames; promiscuous and all-multicast are the port's
//! promiscuous QP lists (WRITE_MCG op_mod 1).
use crate::hcr::Cmd;
use crate::prm::layout::Mgm;
use crate::prm::mem::Wire;
use crate::prm::{dev_cap, mcg as p, op};
use crate::{Error, Hca};
use rpmd_pmd::endian::Be32;

/// The GID of a MAC group: port at byte 5, steer << 1 at byte 7, the MAC
/// in bytes 10–15.
pub fn mac_gid(port: u8, unicast: bool, mac: [u8; 6]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[5] = port;
    g[7] = if unicast { p::STEER_UC } else { p::STEER_MC } << 1;
    g[10..].copy_from_slice(&mac);
    g
}

/// Where a group is, or where it would go.
enum Found {
    /// At this index.
    At {
        idx: u32,
        prev: Option<u32>,
        mgm: Box<Mgm>,
    },
    /// Not there; the hash slot is free.
    FreeHead(u32),
    /// Not there; the chain ends at this index.
    ChainEnd(u32),
}

fn members(m: &Mgm) -> usize {
    (m.members_count.get() & p::COUNT_MASK) as usize
}

impl Hca {
    fn mcg_cmd(&mut self, opcode: u16, op_mod: u8, in_mod: u32, m: &[u8]) -> Result<u64, Error> {
        self.mailbox.clear();
        self.mailbox.write(0, m);
        self.hcr.exec(Cmd {
            opcode,
            op_mod,
            in_mod,
            in_param: self.mailbox.iova(),
            ..Cmd::default()
        })
    }

    fn read_mcg(&mut self, idx: u32) -> Result<Mgm, Error> {
        let c = Cmd {
            opcode: op::READ_MCG,
            in_mod: idx,
            ..Cmd::default()
        };
        let raw: [u8; size_of::<Mgm>()] = self.hcr.query(&self.mailbox, c)?;
        Mgm::from_bytes(&raw).ok_or_else(|| Error::Firmware("READ_MCG: short entry".into()))
    }

    fn write_mcg(&mut self, idx: u32, m: &Mgm) -> Result<(), Error> {
        self.mcg_cmd(op::WRITE_MCG, 0, idx, m.bytes()).map(drop)
    }

    fn find_group(&mut self, gid: &[u8; 16]) -> Result<Found, Error> {
        let vep_mc = self.dev_cap().flags & dev_cap::FLAG_VEP_MC_STEER != 0;
        let op_mod = if vep_mc { p::HASH_OP_MOD } else { 0 };
        // MGID_HASH takes the bare GID at mailbox offset 0.
        let hash = self.mcg_cmd(op::MGID_HASH, op_mod, 0, gid)? as u32 & 0xffff;
        let (mut idx, mut prev) = (hash, None);
        for _ in 0..=self.mcg_entries {
            let mgm = self.read_mcg(idx)?;
            if members(&mgm) == 0 && idx == hash {
                return Ok(Found::FreeHead(hash));
            }
            if mgm.gid == *gid {
                return Ok(Found::At {
                    idx,
                    prev,
                    mgm: Box::new(mgm),
                });
            }
            let next = mgm.next_gid_index.get() >> 6;
            if next == 0 {
                return Ok(Found::ChainEnd(idx));
            }
            (prev, idx) = (Some(idx), next);
        }
        Err(Error::Firmware(format!(
            "the MCG chain from {hash:#x} loops"
        )))
    }

    /// Steers frames to `mac` on `port` (unicast or multicast) to `qpn`.
    pub(crate) fn attach_mac(&mut self, port: u8, mac: [u8; 6], qpn: u32) -> Result<(), Error> {
        let gid = mac_gid(port, mac[0] & 1 == 0, mac);
        let fresh = || {
            let mut m = Mgm::zeroed();
            m.gid = gid;
            m.qp[0] = Be32::new(qpn);
            m.members_count = Be32::new(1 | p::PROT_ETH);
            m
        };
        match self.find_group(&gid)? {
            Found::At { idx, mut mgm, .. } => {
                let n = members(&mgm);
                if mgm.qp[..n].iter().any(|q| q.get() & 0xff_ffff == qpn) {
                    return Ok(());
                }
                if n >= p::MEMBERS {
                    return Err(Error::Firmware(format!("MCG {idx:#x} is full")));
                }
                mgm.qp[n] = Be32::new(qpn);
                mgm.members_count = Be32::new((n + 1) as u32 | p::PROT_ETH);
                self.write_mcg(idx, &mgm)
            }
            Found::FreeHead(idx) => self.write_mcg(idx, &fresh()),
            Found::ChainEnd(last) => {
                let idx = self.amgm.take("AMGM")?;
                if let Err(e) = self.write_mcg(idx, &fresh()) {
                    self.amgm.give(idx);
                    return Err(e);
                }
                let mut tail = self.read_mcg(last)?;
                tail.next_gid_index = Be32::new(idx << 6);
                self.write_mcg(last, &tail)
            }
        }
    }

    /// Undoes [`Hca::attach_mac`]; an entry left empty leaves its chain.
    /// Moves MAC `mac`'s steering on `port` from QP `from` to QP `to`
    /// with one WRITE_MCG that swaps the member in place, so that the
    /// device steers each frame to one of them, never to neither or both.
    pub(crate) fn move_mac(
        &mut self,
        port: u8,
        mac: [u8; 6],
        from: u32,
        to: u32,
    ) -> Result<(), Error> {
        let gid = mac_gid(port, mac[0] & 1 == 0, mac);
        let missing = || Error::Firmware(format!("{mac:02x?} is not steered to QP {from:#x}"));
        let Found::At { idx, mut mgm, .. } = self.find_group(&gid)? else {
            return Err(missing());
        };
        let n = members(&mgm);
        let Some(slot) = mgm.qp[..n].iter_mut().find(|q| q.get() & 0xff_ffff == from) else {
            return Err(missing());
        };
        *slot = Be32::new(slot.get() & !0xff_ffff | to);
        self.write_mcg(idx, &mgm)
    }

    pub(crate) fn detach_mac(&mut self, port: u8, mac: [u8; 6], qpn: u32) -> Result<(), Error> {
        let gid = mac_gid(port, mac[0] & 1 == 0, mac);
        let Found::At { idx, prev, mut mgm } = self.find_group(&gid)? else {
            return Ok(());
        };
        let n = members(&mgm);
        let kept: Vec<Be32> = mgm.qp[..n]
            .iter()
            .copied()
            .filter(|q| q.get() & 0xff_ffff != qpn)
            .collect();
        if !kept.is_empty() {
            mgm.qp = [Be32::new(0); p::MEMBERS];
            mgm.qp[..kept.len()].copy_from_slice(&kept);
            mgm.members_count = Be32::new(kept.len() as u32 | p::PROT_ETH);
            return self.write_mcg(idx, &mgm);
        }
        let next = mgm.next_gid_index.get() >> 6;
        match prev {
            // An AMGM entry: its predecessor skips it.
            Some(prev) => {
                let mut before = self.read_mcg(prev)?;
                before.next_gid_index = Be32::new(next << 6);
                self.write_mcg(prev, &before)?;
                self.free_amgm(idx)
            }
            // The hash slot: the next entry moves into it.
            None if next != 0 => {
                let moved = self.read_mcg(next)?;
                self.write_mcg(idx, &moved)?;
                self.free_amgm(next)
            }
            None => self.write_mcg(idx, &Mgm::zeroed()),
        }
    }

    fn free_amgm(&mut self, idx: u32) -> Result<(), Error> {
        self.write_mcg(idx, &Mgm::zeroed())?;
        self.amgm.give(idx);
        Ok(())
    }

    /// The port's promiscuous list for unicast (`unicast`) or multicast
    /// frames: these QPs receive every such frame no group claims.
    pub(crate) fn set_promisc_qps(
        &mut self,
        port: u8,
        unicast: bool,
        qpns: &[u32],
    ) -> Result<(), Error> {
        let mut m = Mgm::zeroed();
        for (slot, &q) in m.qp.iter_mut().zip(qpns) {
            *slot = Be32::new(q);
        }
        m.members_count = Be32::new(qpns.len().min(p::MEMBERS) as u32 | p::PROT_ETH);
        let steer = if unicast { p::STEER_UC } else { p::STEER_MC } as u32;
        let in_mod = (port as u32) << 16 | steer << 1;
        self.mcg_cmd(op::WRITE_MCG, p::OP_MOD_PROMISC, in_mod, m.bytes())
            .map(drop)
    }
}
