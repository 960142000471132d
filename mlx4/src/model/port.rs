//! The model's Ethernet ports (digest §2.9, §4 item 6): SET_PORT
//! GENERAL, MAC_TABLE and RQP_CALC, INIT_PORT and CLOSE_PORT.
use super::commands::NUM_PORTS;
use super::{Mlx4Model, State};
use crate::prm::layout::{MacTable, SetPortGeneral};
use crate::prm::mem::Wire;
use crate::prm::{eq as e, mcg, set_port as sp, status};

/// The largest MTU the model's ports take (QUERY_PORT says so).
pub(super) const MAX_MTU: u16 = 9600;

/// One port as the firmware keeps it.
#[derive(Clone, Debug, Default)]
pub(super) struct PortState {
    pub up: bool,
    /// The largest frame, FCS included (0 until SET_PORT GENERAL).
    pub frame_mtu: u16,
    pub user_mtu: u16,
    /// Valid MAC-table entries (48-bit MACs).
    pub macs: Vec<u64>,
    /// RQP_CALC's mailbox, as sent (A0 steering).
    pub rqp_calc: Option<[u8; 0x20]>,
    /// The promiscuous QP lists: multicast [0], unicast [1].
    pub promisc: [Vec<u32>; 2],
    /// SET_MCAST_FLTR: while on, a multicast frame to a MAC not listed
    /// is dropped before steering.
    pub mcast_filter: Option<Vec<u64>>,
    /// The MACs SET_MCAST_FLTR CONFIG listed.
    pub mcast_macs: Vec<u64>,
}

impl Mlx4Model {
    /// The port of in_mod's low byte, or None (a violation recorded).
    fn port_of(s: &mut State, what: &str) -> Option<usize> {
        let port = s.hcr[2] & 0xff;
        if port == 0 || port > NUM_PORTS as u32 {
            Self::violation(s, format!("{what}: port {port}"));
            return None;
        }
        Some(port as usize - 1)
    }

    pub(super) fn set_port(&self, s: &mut State, op_mod: u8) -> u8 {
        let Some(i) = Self::port_of(s, "SET_PORT") else {
            return status::BAD_PARAM;
        };
        if op_mod != sp::OP_MOD_ETH {
            Self::violation(s, format!("SET_PORT op_mod {op_mod} on an Ethernet port"));
            return status::BAD_PARAM;
        }
        match s.hcr[2] >> 8 & 0xff {
            sp::GENERAL => self.set_port_general(s, i),
            sp::MAC_TABLE => {
                let mut raw = [0u8; size_of::<MacTable>()];
                if !self.mailbox_in(s, &mut raw) {
                    return status::BAD_PARAM;
                }
                let Some(t) = MacTable::from_bytes(&raw) else {
                    return status::BAD_PARAM;
                };
                let mut macs = Vec::new();
                for (k, e) in t.entries.iter().enumerate() {
                    let v = e.get();
                    if v & !(sp::MAC_VALID | 0xffff_ffff_ffff) != 0 {
                        Self::violation(s, format!("MAC table entry {k}: {v:#x}"));
                        return status::BAD_PARAM;
                    }
                    if v & sp::MAC_VALID != 0 {
                        macs.push(v & 0xffff_ffff_ffff);
                    }
                }
                s.ports[i].macs = macs;
                status::OK
            }
            sp::RQP_CALC => {
                let mut raw = [0u8; 0x20];
                if !self.mailbox_in(s, &mut raw) {
                    return status::BAD_PARAM;
                }
                s.ports[i].rqp_calc = Some(raw);
                status::OK
            }
            sub => {
                Self::violation(s, format!("SET_PORT sub-command {sub}"));
                status::BAD_PARAM
            }
        }
    }

    fn set_port_general(&self, s: &mut State, i: usize) -> u8 {
        let mut raw = [0u8; size_of::<SetPortGeneral>()];
        if !self.mailbox_in(s, &mut raw) {
            return status::BAD_PARAM;
        }
        let Some(g) = SetPortGeneral::from_bytes(&raw) else {
            return status::BAD_PARAM;
        };
        let frames = 68 + sp::FRAME_OVERHEAD..=MAX_MTU + sp::FRAME_OVERHEAD;
        if g.flags & 1 != 0 {
            if !frames.contains(&g.mtu.get()) {
                Self::violation(s, format!("SET_PORT GENERAL: frame MTU {}", g.mtu.get()));
                return status::BAD_PARAM;
            }
            s.ports[i].frame_mtu = g.mtu.get();
        }
        if g.flags2 & sp::FLAGS2_USER_MTU != 0 {
            let user = g.user_mtu.get();
            let frame = s.ports[i].frame_mtu;
            if frame == 0 || user as u32 + sp::FRAME_OVERHEAD as u32 > frame as u32 {
                Self::violation(
                    s,
                    format!("SET_PORT GENERAL: user MTU {user} over the frame MTU {frame}"),
                );
                return status::BAD_PARAM;
            }
            s.ports[i].user_mtu = user;
        }
        status::OK
    }

    /// SET_MCAST_FLTR (digest §2.9): CONFIG adds a MAC (the clear bit
    /// empties the list first), DISABLE and ENABLE turn the filter off and
    /// on.
    pub(super) fn set_mcast_fltr(&self, s: &mut State, op_mod: u8) -> u8 {
        let Some(i) = Self::port_of(s, "SET_MCAST_FLTR") else {
            return status::BAD_PARAM;
        };
        let v = Self::in_param(s);
        let ps = &mut s.ports[i];
        match op_mod {
            mcg::FLTR_CONFIG => {
                if v & mcg::FLTR_CLEAR != 0 {
                    ps.mcast_macs.clear();
                }
                ps.mcast_macs.push(v & 0xffff_ffff_ffff);
                if ps.mcast_filter.is_some() {
                    ps.mcast_filter = Some(ps.mcast_macs.clone());
                }
            }
            mcg::FLTR_DISABLE => ps.mcast_filter = None,
            mcg::FLTR_ENABLE => ps.mcast_filter = Some(ps.mcast_macs.clone()),
            _ => {
                Self::violation(s, format!("SET_MCAST_FLTR op_mod {op_mod}"));
                return status::BAD_PARAM;
            }
        }
        status::OK
    }

    pub(super) fn init_port(&self, s: &mut State) -> u8 {
        let Some(i) = Self::port_of(s, "INIT_PORT") else {
            return status::BAD_PARAM;
        };
        if s.ports[i].frame_mtu == 0 {
            Self::violation(s, "INIT_PORT before SET_PORT GENERAL gave an MTU".into());
            return status::BAD_SYS_STATE;
        }
        s.ports[i].up = true;
        self.port_event(s, i as u8 + 1, true);
        status::OK
    }

    /// A port-change EQE (port in bits 31:28 of the be32 at EQE 0x0c).
    fn port_event(&self, s: &mut State, port: u8, up: bool) {
        let mut data = [0u8; 24];
        data[8..12].copy_from_slice(&((port as u32) << 28).to_be_bytes());
        let sub = if up { e::PORT_ACTIVE } else { e::PORT_DOWN };
        self.post_eqe(s, e::EV_PORT_CHANGE, sub, data);
    }

    /// The cable of `port` (1-based) plugged in or pulled: the link
    /// follows (while the port is initialised) and the driver is told by a
    /// port-change event.
    pub fn set_link(&self, port: u8, up: bool) {
        let mut s = super::lock(&self.state);
        let Some(ps) = s.ports.get_mut(port.wrapping_sub(1) as usize) else {
            return;
        };
        if ps.frame_mtu == 0 || ps.up == up {
            return;
        }
        ps.up = up;
        self.port_event(&mut s, port, up);
    }

    pub(super) fn close_port(&self, s: &mut State) -> u8 {
        let Some(i) = Self::port_of(s, "CLOSE_PORT") else {
            return status::BAD_PARAM;
        };
        if !s.ports[i].up {
            Self::violation(s, "CLOSE_PORT of a port not up".into());
            return status::BAD_SYS_STATE;
        }
        s.ports[i].up = false;
        self.port_event(s, i as u8 + 1, false);
        status::OK
    }
}
