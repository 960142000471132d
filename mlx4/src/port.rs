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
use crate::prm::{op, set_port as sp};
use crate::{Error, Hca};
use rpmd_pmd::endian::{Be16, Be64};

impl Hca {
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
