//! The model as a virtual function, with its PF played the way Linux's
//! igb plays it (`igb_rcv_msg_from_vf`, `igb_vf_reset_msg`): the VF's
//! window (CTRL, STATUS, the mailbox, its queues at queues 0 and 1's
//! offsets) over the model's registers, and a PF that answers each
//! mailbox message at once by programming what a PF would (the address
//! filter entries, the multicast table, all-multicast, receive and
//! transmit on, tag stripping) and replying with the message's type and
//! ACK or NACK.
//!
//! [`PfBehaviour`] makes that PF misbehave: never answer, stay in reset,
//! give no MAC address, refuse one message, answer with the wrong type,
//! or send a control message of its own before each reply.
use super::{IgbModel, State};
use crate::regs::*;

/// How the model's PF answers its VF.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PfBehaviour {
    /// The PF never reads the VF's messages (no PFACK, no reply).
    pub silent: bool,
    /// The PF stays in reset (RSTI never clears).
    pub in_reset: bool,
    /// The PF gave the VF no MAC address: `VF_RESET` is NACKed and the
    /// VF must choose one.
    pub no_mac: bool,
    /// The PF NACKs this message type.
    pub refuse: Option<u32>,
    /// The PF answers every message but the reset with this type instead
    /// of the message's.
    pub wrong_reply: Option<u32>,
    /// Before each reply the PF sends a `PF_CONTROL_MSG` (a link change).
    pub control_first: bool,
}

/// The MAC address the model's PF gives its VF.
pub const VF_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x10, 0xca, 0x01];

/// The mailbox and what the PF was asked.
#[derive(Default)]
pub(super) struct VfState {
    /// V2PMAILBOX as the VF reads it.
    pub v2p: u32,
    /// The shared memory.
    pub mem: [u32; VMBMEM_WORDS],
    /// A reply held back behind a control message, until the VF acks.
    pub held: Option<Vec<u32>>,
    /// Every message the PF read, in order.
    pub messages: Vec<Vec<u32>>,
    /// The VLAN IDs the VF asked for.
    pub vlans: Vec<u16>,
    /// The longest frame the VF asked for.
    pub lpe: u32,
    /// The address the VF set for itself, which a reset then gives back
    /// (as Linux's igb keeps it).
    pub mac: Option<(u32, u32)>,
    /// Replies that replace the PF's own, one a request, in order
    /// ([`IgbModel::script_pf`]).
    pub script: std::collections::VecDeque<ScriptedReply>,
}

/// A reply the PF gives instead of its own: these mailbox words, and
/// these of V2PMAILBOX's read-to-clear event bits raised with PFSTS.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScriptedReply {
    /// The mailbox memory's words (at most 16).
    pub words: Vec<u32>,
    /// PFACK and RSTD, as the PF raises them (others are ignored).
    pub events: u32,
}

impl IgbModel {
    /// Every mailbox message the PF read, in order (a VF model).
    pub fn pf_messages(&self) -> Vec<Vec<u32>> {
        super::lock(&self.state).vf.messages.clone()
    }

    /// The VLAN IDs the VF asked its PF for.
    pub fn vf_vlans(&self) -> Vec<u16> {
        super::lock(&self.state).vf.vlans.clone()
    }

    /// The longest frame the VF asked its PF for.
    pub fn vf_max_frame(&self) -> u32 {
        super::lock(&self.state).vf.lpe
    }

    /// Queues replies that replace the PF's own, one for each request
    /// the VF makes from now on (the PF still acts on the request): any
    /// words, any type and ACK or NACK, and the event bits the reply
    /// raises. Once they run out the PF answers as itself again. For
    /// fuzzing the VF against a PF that says anything.
    pub fn script_pf(&self, replies: impl IntoIterator<Item = ScriptedReply>) {
        super::lock(&self.state).vf.script.extend(replies);
    }

    /// A VF register read, if it is one of the VF's own.
    pub(super) fn vf_read(&self, s: &mut State, off: u64) -> Option<u32> {
        let pf = self.opts.pf?;
        match off {
            V2PMAILBOX => {
                let v = s.vf.v2p | if pf.in_reset { V2PMAILBOX_RSTI } else { 0 };
                s.vf.v2p &= !(V2PMAILBOX_PFSTS | V2PMAILBOX_PFACK | V2PMAILBOX_RSTD);
                Some(v)
            }
            VMBMEM..=0x083C => Some(s.vf.mem[((off - VMBMEM) / 4) as usize]),
            _ => None,
        }
    }

    /// A VF register write; whether it was one of the VF's own.
    pub(super) fn vf_write(&self, s: &mut State, off: u64, v: u32) -> bool {
        let Some(pf) = self.opts.pf else {
            return false;
        };
        match off {
            CTRL if v & CTRL_RST != 0 => {
                // The VF's queues stop; the PF disables it until VF_RESET.
                for q in 0..VF_QUEUES {
                    s.regs.insert(rxdctl(q), 0);
                    s.regs.insert(txdctl(q), 0);
                }
                s.regs.insert(RCTL, 0);
                s.regs.insert(TCTL, 0);
            }
            CTRL => {}
            V2PMAILBOX => self.vf_mailbox_write(s, pf, v),
            VMBMEM..=0x083C if s.vf.v2p & V2PMAILBOX_VFU != 0 => {
                s.vf.mem[((off - VMBMEM) / 4) as usize] = v;
            }
            VMBMEM..=0x083C => {
                let what = format!("mailbox memory write at {off:#x} without holding it (VFU)");
                Self::violation(s, what);
            }
            0x2800..=0x3FFF if (off & 0x7ff) / 0x100 >= VF_QUEUES as u64 => {
                let what = format!("write of {v:#x} to {off:#x}: a VF has queues 0 and 1 only");
                Self::violation(s, what);
            }
            _ => return false,
        }
        true
    }

    fn vf_mailbox_write(&self, s: &mut State, pf: PfBehaviour, v: u32) {
        if v & V2PMAILBOX_VFU != 0 {
            s.vf.v2p |= V2PMAILBOX_VFU;
        } else {
            s.vf.v2p &= !V2PMAILBOX_VFU;
        }
        if v & V2PMAILBOX_ACK != 0 {
            if let Some(reply) = s.vf.held.take() {
                Self::post(s, &reply);
            }
        }
        if v & V2PMAILBOX_REQ == 0 || pf.silent {
            return;
        }
        let msg = s.vf.mem.to_vec();
        s.vf.messages.push(msg.clone());
        s.vf.v2p |= V2PMAILBOX_PFACK;
        let reply = self.pf_answer(s, pf, &msg);
        if let Some(r) = s.vf.script.pop_front() {
            let n = r.words.len().min(VMBMEM_WORDS);
            Self::post(s, &r.words[..n]);
            s.vf.v2p |= r.events & (V2PMAILBOX_PFACK | V2PMAILBOX_RSTD);
            return;
        }
        if pf.control_first {
            s.vf.held = Some(reply);
            Self::post(s, &[PF_CONTROL_MSG | VT_MSGTYPE_CTS]);
        } else {
            Self::post(s, &reply);
        }
    }

    /// The PF writes `words` into the memory and raises PFSTS.
    fn post(s: &mut State, words: &[u32]) {
        s.vf.mem = [0; VMBMEM_WORDS];
        s.vf.mem[..words.len()].copy_from_slice(words);
        s.vf.v2p |= V2PMAILBOX_PFSTS;
    }

    /// What the PF does with `msg`, and its reply.
    fn pf_answer(&self, s: &mut State, pf: PfBehaviour, msg: &[u32]) -> Vec<u32> {
        let kind = msg[0] & 0xffff;
        if kind == VF_RESET {
            s.regs.insert(RCTL, RCTL_EN | RCTL_BAM | RCTL_SECRC);
            s.regs.insert(TCTL, TCTL_EN);
            s.regs.insert(CTRL, CTRL_VME | CTRL_SLU);
            // The VF's filters go with its reset (Linux's igb_vf_reset).
            s.vf.vlans.clear();
            for k in 0..MTA_LEN {
                s.regs.insert(MTA + 4 * k, 0);
            }
            for k in 1..RAR_ENTRIES {
                s.regs.insert(RAH0 + 8 * k, 0);
            }
            let (lo, hi) = match s.vf.mac {
                Some(set) => set,
                None if pf.no_mac => return vec![VF_RESET | VT_MSGTYPE_NACK, 0, 0],
                None => rar(&VF_MAC),
            };
            s.regs.insert(RAL0, lo);
            s.regs.insert(RAH0, hi);
            return vec![VF_RESET | VT_MSGTYPE_ACK, lo, hi & 0xffff];
        }
        let ok = pf.refuse != Some(kind) && self.pf_apply(s, kind, msg);
        let word = pf.wrong_reply.unwrap_or(msg[0]) | VT_MSGTYPE_CTS;
        vec![word | if ok { VT_MSGTYPE_ACK } else { VT_MSGTYPE_NACK }]
    }

    /// Applies a configuration message; whether the PF accepts it.
    fn pf_apply(&self, s: &mut State, kind: u32, msg: &[u32]) -> bool {
        let info = (msg[0] >> VT_MSGINFO_SHIFT) & 0xff;
        match kind {
            VF_SET_MAC_ADDR => {
                let (lo, hi) = (msg[1], msg[2] & 0xffff | RAH_AV);
                // Linux's igb wants a valid unicast address in every
                // form of this message, the filter clear included.
                let bytes = [lo.to_le_bytes(), hi.to_le_bytes()].concat();
                if bytes[0] & 1 != 0 || bytes[..6] == [0; 6] {
                    return false;
                }
                match msg[0] & 0x00ff_0000 {
                    0 => {
                        s.regs.insert(RAL0, lo);
                        s.regs.insert(RAH0, hi);
                        s.vf.mac = Some((lo, hi));
                    }
                    VF_MAC_FILTER_CLR => {
                        for k in 1..RAR_ENTRIES {
                            s.regs.insert(RAH0 + 8 * k, 0);
                        }
                    }
                    _ => {
                        let free = (1..RAR_ENTRIES).find(|&k| Self::reg(s, RAH0 + 8 * k) == 0);
                        let Some(k) = free else { return false };
                        s.regs.insert(RAL0 + 8 * k, lo);
                        s.regs.insert(RAH0 + 8 * k, hi);
                    }
                }
                true
            }
            VF_SET_MULTICAST => {
                for k in 0..MTA_LEN {
                    s.regs.insert(MTA + 4 * k, 0);
                }
                for k in 0..(info as usize).min(30) {
                    let h = msg[1 + k / 2] >> (16 * (k % 2)) & 0xfff;
                    Self::set_bits(s, MTA + 4 * (h >> 5) as u64, 1 << (h & 31), true);
                }
                true
            }
            VF_SET_PROMISC => {
                let multicast = msg[0] & VF_SET_PROMISC_MULTICAST != 0;
                Self::set_bits(s, RCTL, RCTL_MPE, multicast);
                msg[0] & !VF_SET_PROMISC_MULTICAST & 0x00ff_0000 == 0
            }
            VF_SET_LPE => {
                s.vf.lpe = msg[1];
                (64..=9728 + 4).contains(&msg[1])
            }
            VF_SET_VLAN => {
                let id = msg[1] as u16 & 0xfff;
                s.vf.vlans.retain(|&v| v != id);
                if info != 0 {
                    s.vf.vlans.push(id);
                }
                true
            }
            _ => false,
        }
    }
}

/// Receive-address words of `m`, valid.
fn rar(m: &[u8; 6]) -> (u32, u32) {
    (
        u32::from_le_bytes([m[0], m[1], m[2], m[3]]),
        u16::from_le_bytes([m[4], m[5]]) as u32 | RAH_AV,
    )
}
