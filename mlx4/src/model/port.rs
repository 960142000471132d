//! The model's Ethernet ports (digest §2.9, §4 item 6): SET_PORT
//! GENERAL, MAC_TABLE and RQP_CALC, INIT_PORT and CLOSE_PORT.
use super::commands::NUM_PORTS;
use super::{Mlx4Model, State};
use crate::prm::layout::{MacTable, SetPortGeneral};
use crate::prm::mem::Wire;
use crate::prm::{eq as e, eth_stats as es, mcg, set_port as sp, status};

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
    /// What DUMP_ETH_STATS reports.
    pub counters: PortCounters,
}

/// A port's counters as its MAC and receive engine keep them, for
/// DUMP_ETH_STATS (`prm::eth_stats`): frames and bytes per priority slot
/// (0 to 7 by a VLAN tag's PCP, 8 untagged), and the receive drops. Bytes
/// are the frames' as the host sees them (the model has no FCS).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct PortCounters {
    pub rx_frames: [u64; es::PRIO_SLOTS],
    pub rx_octets: [u64; es::PRIO_SLOTS],
    pub tx_frames: [u64; es::PRIO_SLOTS],
    pub tx_octets: [u64; es::PRIO_SLOTS],
    /// Dropped for want of a receive WQE.
    pub rx_overflow: u32,
    /// Dropped for their length.
    pub rx_bad_length: u32,
}

impl PortCounters {
    /// The priority slot of `frame`: its PCP when VLAN-tagged, else the
    /// untagged slot.
    fn slot(frame: &[u8]) -> usize {
        match frame.get(12..15) {
            Some([0x81, 0x00, tci]) => (tci >> 5) as usize,
            _ => es::PRIO_SLOTS - 1,
        }
    }

    /// A frame arrived on a port whose link is up.
    pub fn received(&mut self, frame: &[u8]) {
        let k = Self::slot(frame);
        self.rx_frames[k] += 1;
        self.rx_octets[k] += frame.len() as u64;
    }

    /// A frame left.
    pub fn sent(&mut self, frame: &[u8]) {
        let k = Self::slot(frame);
        self.tx_frames[k] += 1;
        self.tx_octets[k] += frame.len() as u64;
    }

    /// The DUMP_ETH_STATS output mailbox.
    fn mailbox(&self) -> Vec<u8> {
        let mut b = vec![0u8; es::SIZE];
        let mut put64 = |at: usize, v: u64| b[at..at + 8].copy_from_slice(&v.to_be_bytes());
        for k in 0..es::PRIO_SLOTS {
            let at = k * es::PRIO_STRIDE;
            put64(es::RX_FRAMES + at, self.rx_frames[k]);
            put64(es::RX_OCTETS + at, self.rx_octets[k]);
            put64(es::TX_FRAMES + at, self.tx_frames[k]);
            put64(es::TX_OCTETS + at, self.tx_octets[k]);
        }
        let mut put32 = |at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_be_bytes());
        put32(es::RX_OVERFLOW, self.rx_overflow);
        put32(es::RX_BAD_LENGTH, self.rx_bad_length);
        put32(
            es::RX_DROPPED,
            self.rx_overflow.wrapping_add(self.rx_bad_length),
        );
        b
    }
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

    /// DUMP_ETH_STATS of the port in in_mod's low byte; bit 8 zeroes the
    /// counters after the dump. Other bits (the flow-control dump) are
    /// not modelled and refused.
    pub(super) fn dump_eth_stats(&self, s: &mut State) -> u8 {
        let Some(i) = Self::port_of(s, "DUMP_ETH_STATS") else {
            return status::BAD_PARAM;
        };
        let in_mod = s.hcr[2];
        if in_mod & !(0xff | es::RESET) != 0 {
            Self::violation(s, format!("DUMP_ETH_STATS in_mod {in_mod:#x}"));
            return status::BAD_PARAM;
        }
        let out = s.ports[i].counters.mailbox();
        if in_mod & es::RESET != 0 {
            s.ports[i].counters = PortCounters::default();
        }
        self.mailbox_out(s, &out)
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
