//! An Ethernet port brought up and down (digest §2.2 step 8, §2.9;
//! `core/port.c`, `core/en_netdev.c` `mlx4_en_start_port`): the MAC
//! table, the port's general settings, INIT_PORT; CLOSE_PORT.
//!
//! (Linux creates the port's CQs and QPs between the MAC table and the
//! general settings; they come with the data path.)
use crate::caps::PortCap;
use crate::hcr::Cmd;
use crate::prm::layout::{MacTable, SetPortGeneral};
use crate::prm::mem::Wire;
use crate::prm::{eth_stats as es, op, set_port as sp};
use crate::{Error, Hca};
use rpmd_pmd::endian::{Be16, Be64};

/// A port's counters as DUMP_ETH_STATS reports them, each summed over
/// its priority slots as Linux's `mlx4_en_DUMP_ETH_STATS` does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EthCounters {
    /// Frames the port received, bad ones included.
    pub rx_frames: u64,
    /// Bytes of those frames.
    pub rx_bytes: u64,
    /// Frames the port sent.
    pub tx_frames: u64,
    /// Bytes of those frames.
    pub tx_bytes: u64,
    /// Frames received and dropped in the device, for any reason.
    pub rx_dropped: u64,
    /// Of those, for want of a receive buffer (a queue not polled fast
    /// enough): the port's `imissed`.
    pub rx_overflow: u64,
    /// Of those, for their length.
    pub rx_bad_length: u64,
    /// Frames received with a bad CRC.
    pub rx_crc_errors: u64,
    /// Frames the port could not send.
    pub tx_dropped: u64,
}

impl EthCounters {
    fn decode(b: &[u8]) -> EthCounters {
        let be64 = |at: usize| {
            b.get(at..at + 8)
                .map_or(0, |s| u64::from_be_bytes(s.try_into().unwrap_or_default()))
        };
        let be32 = |at: usize| {
            b.get(at..at + 4)
                .map_or(0, |s| u32::from_be_bytes(s.try_into().unwrap_or_default()))
                as u64
        };
        let slots = |first: usize| {
            (0..es::PRIO_SLOTS)
                .map(|k| be64(first + k * es::PRIO_STRIDE))
                .fold(0u64, u64::wrapping_add)
        };
        EthCounters {
            rx_frames: slots(es::RX_FRAMES),
            rx_bytes: slots(es::RX_OCTETS),
            tx_frames: slots(es::TX_FRAMES),
            tx_bytes: slots(es::TX_OCTETS),
            rx_dropped: be32(es::RX_DROPPED),
            rx_overflow: be32(es::RX_OVERFLOW),
            rx_bad_length: be32(es::RX_BAD_LENGTH),
            rx_crc_errors: be32(es::RX_CRC_ERRORS),
            tx_dropped: be32(es::TX_DROPPED),
        }
    }
}

impl Hca {
    /// DUMP_ETH_STATS of `port` (1-based): its counters, zeroed after
    /// the read when `reset`.
    pub fn dump_eth_stats(&mut self, port: u8, reset: bool) -> Result<EthCounters, Error> {
        self.port_index(port)?;
        let reset = if reset { es::RESET } else { 0 };
        let b: [u8; es::SIZE] = self.hcr.query(
            &self.mailbox,
            Cmd {
                opcode: op::DUMP_ETH_STATS,
                in_mod: reset | port as u32,
                ..Cmd::default()
            },
        )?;
        Ok(EthCounters::decode(&b))
    }

    fn port_index(&self, port: u8) -> Result<usize, Error> {
        if port == 0 || port as usize > self.ports.len() {
            return Err(Error::Firmware(format!(
                "port {port}: the card has ports 1..={}",
                self.ports.len()
            )));
        }
        Ok(port as usize - 1)
    }

    /// SET_PORT: one `sub` command of `port` with `mailbox` as input.
    fn set_port<T: Wire>(&mut self, port: u8, sub: u32, mailbox: &T) -> Result<(), Error> {
        self.mailbox.clear();
        self.mailbox.put(0, mailbox);
        self.hcr
            .exec(Cmd {
                opcode: op::SET_PORT,
                op_mod: sp::OP_MOD_ETH,
                in_mod: sub << 8 | port as u32,
                in_param: self.mailbox.iova(),
                ..Cmd::default()
            })
            .map(drop)
    }

    /// Brings `port` (1-based) up with `mtu` (payload bytes; the port's
    /// maximum at most): its burned-in MAC in MAC-table slot 0, the frame
    /// MTU with global pause, the user MTU, then INIT_PORT.
    pub fn init_port(&mut self, port: u8, mtu: u16) -> Result<(), Error> {
        let i = self.port_index(port)?;
        let cap = self.ports[i];
        if mtu < 68 || mtu > cap.mtu {
            return Err(Error::Firmware(format!(
                "port {port}: MTU {mtu} outside 68..={}",
                cap.mtu
            )));
        }
        if self.ports_up[i] {
            return Ok(());
        }
        let mut macs = MacTable::zeroed();
        let mac = cap.mac.iter().fold(0u64, |v, &b| v << 8 | b as u64);
        macs.entries[0] = Be64::new(sp::MAC_VALID | mac);
        self.set_port(port, sp::MAC_TABLE, &macs)?;
        let mut general = SetPortGeneral::zeroed();
        general.flags = sp::FLAGS_MTU_PAUSE;
        general.mtu = Be16::new(mtu + sp::FRAME_OVERHEAD);
        general.pptx = sp::GLOBAL_PAUSE;
        general.pprx = sp::GLOBAL_PAUSE;
        self.set_port(port, sp::GENERAL, &general)?;
        let mut user = SetPortGeneral::zeroed();
        user.flags2 = sp::FLAGS2_USER_MTU;
        user.user_mtu = Be16::new(mtu);
        self.set_port(port, sp::GENERAL, &user)?;
        self.hcr.exec(Cmd {
            opcode: op::INIT_PORT,
            in_mod: port as u32,
            ..Cmd::default()
        })?;
        self.ports_up[i] = true;
        Ok(())
    }

    /// CLOSE_PORT: the link goes down.
    pub fn close_port(&mut self, port: u8) -> Result<(), Error> {
        let i = self.port_index(port)?;
        if !self.ports_up[i] {
            return Ok(());
        }
        self.hcr.exec(Cmd {
            opcode: op::CLOSE_PORT,
            in_mod: port as u32,
            ..Cmd::default()
        })?;
        self.ports_up[i] = false;
        Ok(())
    }

    /// QUERY_PORT now (the link state changes after INIT_PORT).
    pub fn query_port(&mut self, port: u8) -> Result<PortCap, Error> {
        self.port_index(port)?;
        PortCap::query(&mut self.hcr, &self.mailbox, port)
    }
}
