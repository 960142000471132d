//! What the device can do: QUERY_DEV_CAP and QUERY_PORT (digest §2.2
//! step 3, §2.4; `core/fw.c`), decoded and checked for what this driver
//! needs.
use crate::hcr::{Cmd, Hcr};
use crate::prm::layout::{DevCapOut, QueryPortOut};
use crate::prm::mem::DevBuf;
use crate::prm::mem::Wire;
use crate::prm::{dev_cap as d, op, query_adapter as qa, query_port as p};
use crate::Error;

/// The steering mode the card offers (`core/main.c`
/// `choose_steering_mode`, without DMFS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Steering {
    /// B0: MAC steering through MCG entries (VEP_UC and VEP_MC offered).
    B0,
    /// A0: steering by QPN ranges (RQP_CALC).
    A0,
}

/// QUERY_DEV_CAP, the fields a raw-Ethernet driver uses.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // each field is the named capability
pub struct DevCap {
    pub log_max_qp_sz: u8,
    pub log_rsvd_qps: u8,
    pub log_max_qps: u8,
    pub log_rsvd_srqs: u8,
    pub log_max_srqs: u8,
    pub log_max_cq_sz: u8,
    pub log_rsvd_cqs: u8,
    pub log_max_cqs: u8,
    pub log_max_mpts: u8,
    pub log_rsvd_eqs: u8,
    pub log_max_eqs: u8,
    pub log_rsvd_mtts: u8,
    pub log_rsvd_mpts: u8,
    pub num_ports: u8,
    pub flags: u64,
    pub flags2: u32,
    pub rsvd_uars: u8,
    /// Bytes of the UAR area in BAR2.
    pub uar_size: u64,
    pub log_min_page: u8,
    pub blueflame: bool,
    pub max_sq_sg: u8,
    pub max_sq_desc: u16,
    pub max_rq_sg: u8,
    pub max_rq_desc: u16,
    pub log_max_mcgs: u8,
    pub rsvd_pds: u8,
    pub log_max_pds: u8,
    /// Entry sizes: RDMARC, QPC, AUXC, ALTC, EQC, CQC, SRQC, cMPT, MTT,
    /// dMPT.
    pub entry_sizes: [u16; 10],
    pub max_icm: u64,
    pub steering: Steering,
}

/// QUERY_PORT of one Ethernet port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortCap {
    /// 1-based.
    pub port: u8,
    /// Link up now.
    pub link_up: bool,
    /// Largest MTU the port takes.
    pub mtu: u16,
    /// Speed in Mb/s (0 if the code is unknown).
    pub speed_mbps: u32,
    /// Log2 of the MAC table size.
    pub log_max_macs: u8,
    /// Log2 of the VLAN table size.
    pub log_max_vlans: u8,
    /// The port's burned-in MAC address.
    pub mac: [u8; 6],
    /// A VPI port: InfiniBand or Ethernet, as its cable says.
    pub vpi: bool,
    /// A VPI port whose cable SENSE_PORT found on an InfiniBand link
    /// (read once the HCA is up): rpmd cannot run it.
    pub senses_ib: bool,
}

impl PortCap {
    /// SENSE_PORT of a VPI port, as Linux's mlx4_core senses it: an
    /// InfiniBand link marks it; a failed or empty sense leaves it
    /// Ethernet; a value that is no port type is an error.
    pub(crate) fn sense(&mut self, hcr: &mut Hcr) -> Result<(), Error> {
        if !self.vpi {
            return Ok(());
        }
        let sensed = hcr
            .exec(Cmd {
                opcode: op::SENSE_PORT,
                in_mod: self.port as u32,
                ..Cmd::default()
            })
            .unwrap_or(0);
        if sensed > p::TYPE_ETH {
            return Err(Error::Firmware(format!(
                "SENSE_PORT {}: {sensed:#x} is no port type (0 none, 1 InfiniBand, 2 Ethernet)",
                self.port
            )));
        }
        self.senses_ib = sensed == p::TYPE_IB;
        Ok(())
    }
}

impl DevCap {
    /// Runs QUERY_DEV_CAP; refuses what this driver cannot drive, naming
    /// the capability (SYS_EQS, pages over 4 KiB, no port).
    pub fn query(hcr: &mut Hcr, mb: &DevBuf) -> Result<DevCap, Error> {
        let b: [u8; 0x100] = hcr.query(
            mb,
            Cmd {
                opcode: op::QUERY_DEV_CAP,
                ..Cmd::default()
            },
        )?;
        let cap = Self::decode(&b);
        let sys_eqs = DevCapOut::from_bytes(&b).map_or(0, |m| m.num_sys_eqs.get()) & 0xfff;
        let refuse = |what: String| Err(Error::Firmware(format!("QUERY_DEV_CAP: {what}")));
        if sys_eqs != 0 {
            return refuse(format!(
                "{sys_eqs} system EQs (SYS_EQS mode, SR-IOV firmware) are not supported"
            ));
        }
        if cap.log_min_page > 12 {
            return refuse(format!(
                "minimum page 2^{} bytes; this driver uses 4 KiB pages",
                cap.log_min_page
            ));
        }
        if cap.num_ports == 0 || cap.num_ports > 2 {
            return refuse(format!("{} ports", cap.num_ports));
        }
        // The UAR area lies in BAR2 (8 MiB on a real card; Linux refuses
        // an area larger than the BAR).
        if cap.uar_size == 0 || cap.uar_size > 1 << 30 {
            return refuse(format!("a UAR area of {:#x} bytes", cap.uar_size));
        }
        // Context entries of a ConnectX-3 are at most 256 bytes (QPC);
        // anything far past that is firmware this driver cannot trust.
        if let Some(e) = cap.entry_sizes.iter().find(|&&e| e == 0 || e > 4096) {
            return refuse(format!("a context entry of {e} bytes (1..=4096 expected)"));
        }
        if cap.entry_sizes[8] != 8 {
            return refuse(format!(
                "MTT entries of {} bytes (8 expected)",
                cap.entry_sizes[8]
            ));
        }
        Ok(cap)
    }

    fn decode(b: &[u8]) -> DevCap {
        let m = DevCapOut::from_bytes(b).unwrap_or_else(DevCapOut::zeroed);
        let flags = m.flags.get();
        let both = d::FLAG_VEP_UC_STEER | d::FLAG_VEP_MC_STEER;
        DevCap {
            log_max_qp_sz: m.log_max_qp_sz,
            log_rsvd_qps: m.log_rsvd_qps & 0xf,
            log_max_qps: m.log_max_qps & 0x1f,
            log_rsvd_srqs: m.log_rsvd_srqs >> 4,
            log_max_srqs: m.log_max_srqs & 0x1f,
            log_max_cq_sz: m.log_max_cq_sz,
            log_rsvd_cqs: m.log_rsvd_cqs & 0xf,
            log_max_cqs: m.log_max_cqs & 0x1f,
            log_max_mpts: m.log_max_mpts & 0x3f,
            log_rsvd_eqs: m.log_rsvd_eqs & 0xf,
            log_max_eqs: m.log_max_eqs & 0xf,
            log_rsvd_mtts: m.log_rsvd_mtts >> 4,
            log_rsvd_mpts: m.log_rsvd_mpts & 0xf,
            num_ports: m.num_ports & 0xf,
            flags,
            flags2: m.flags2.get(),
            rsvd_uars: m.rsvd_uars >> 4,
            uar_size: 1u64
                .checked_shl((m.log_uar_sz & 0x3f) as u32 + 20)
                .unwrap_or(0),
            log_min_page: m.log_min_page,
            blueflame: m.bf & 0x80 != 0,
            max_sq_sg: m.max_sq_sg,
            max_sq_desc: m.max_sq_desc.get(),
            max_rq_sg: m.max_rq_sg,
            max_rq_desc: m.max_rq_desc.get(),
            log_max_mcgs: m.log_max_mcgs,
            rsvd_pds: m.rsvd_pds >> 4,
            log_max_pds: m.log_max_pds & 0x3f,
            entry_sizes: m.entry_sizes.map(|e| e.get()),
            max_icm: m.max_icm.get(),
            steering: if flags & both == both {
                Steering::B0
            } else {
                Steering::A0
            },
        }
    }
}

impl PortCap {
    /// Runs QUERY_PORT for `port` (1-based); refuses a port that cannot
    /// be Ethernet.
    pub fn query(hcr: &mut Hcr, mb: &DevBuf, port: u8) -> Result<PortCap, Error> {
        let b: [u8; 0x20] = hcr.query(
            mb,
            Cmd {
                opcode: op::QUERY_PORT,
                in_mod: port as u32,
                ..Cmd::default()
            },
        )?;
        let m = QueryPortOut::from_bytes(&b).unwrap_or_else(QueryPortOut::zeroed);
        if m.link & p::SUPPORTS_ETH == 0 {
            return Err(Error::Firmware(format!(
                "QUERY_PORT {port}: the port cannot run Ethernet (types {:#x}); set it to Ethernet with the card's tools",
                m.link & 3
            )));
        }
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&m.mac.get().to_be_bytes()[2..]);
        let both = p::SUPPORTS_IB | p::SUPPORTS_ETH;
        Ok(PortCap {
            vpi: m.link & both == both,
            senses_ib: false,
            port,
            link_up: m.link & p::LINK_UP != 0,
            mtu: m.eth_mtu.get(),
            speed_mbps: p::speed_mbps(m.speed),
            log_max_macs: m.log_max_vlan_mac & 0xf,
            log_max_vlans: m.log_max_vlan_mac >> 4,
            mac,
        })
    }
}

/// QUERY_ADAPTER (digest §2.3): the board id (a string such as
/// `MT_1090120019`; empty if the firmware leaves it zero).
pub fn query_adapter(hcr: &mut Hcr, mb: &DevBuf) -> Result<String, Error> {
    let b: [u8; 0x100] = hcr.query(
        mb,
        Cmd {
            opcode: op::QUERY_ADAPTER,
            ..Cmd::default()
        },
    )?;
    // Each dword of the id is byte-swapped (`core/fw.c`
    // `get_board_id`).
    let id: Vec<u8> = b[qa::BOARD_ID..qa::BOARD_ID + qa::BOARD_ID_LEN]
        .chunks(4)
        .flat_map(|d| d.iter().rev().copied())
        .take_while(|&c| c != 0)
        .collect();
    Ok(String::from_utf8_lossy(&id).into_owned())
}
