//! rpmd's ConnectX-3 (mlx4) driver, and the behavioural device model it
//! is tested on.
//!
//! The driver talks to the card through its BARs under vfio-pci, with no
//! vendor libraries and no kernel mlx4 modules, in the order Linux's
//! `mlx4_core` uses (`drivers/net/ethernet/mellanox/mlx4/main.c`
//! `mlx4_load_one`; [`prm`] says how the sources are cited). It
//! reaches the device only through [`PciFunction`], so a VFIO function
//! and [`model::Mlx4Model`] look the same to it.
//!
//! The pieces, in bring-up order:
//! - [`prm`]: the transcribed constants, each group citing the digest and
//!   Linux's file; [`prm::layout`], every mailbox, context and data-path
//!   format as a checked `#[repr(C)]` big-endian struct; [`prm::mem`], the
//!   one accessor of device-visible memory (bounds-checked volatile
//!   copies).
//! - [`hcr`]: firmware commands in polling mode: GO/toggle protocol,
//!   timeouts on every wait, a failed status as [`Error::Command`] naming
//!   the command and the status.
//! - [`fw`]: QUERY_FW (checked), the firmware area mapped as naturally
//!   aligned blocks (MAP_FA), RUN_FW, MOD_STAT_CFG, UNMAP_FA.
//! - [`caps`]: QUERY_DEV_CAP and QUERY_PORT decoded, and what this driver
//!   cannot drive refused by name (SYS_EQS, pages over 4 KiB, a port that
//!   cannot be Ethernet).
//! - [`Hca`]: vendor check, ownership, reset (FLR where offered, else the
//!   register reset with the config-space save and restore), the firmware
//!   started, the capabilities and ports queried, the ICM ([`icm`]) and
//!   INIT_HCA; then ([`res`], [`eq`]) the PD, one physical MR (SW2HW_MPT)
//!   whose lkey every WQE names, MTT entries written straight into the
//!   MTT table for each queue buffer, and the async EQ (SW2HW_EQ, MAP_EQ)
//!   read for port changes (on a link poll, or on its interrupt:
//!   `linkwatch`). Close (and drop) undoes each step in
//!   reverse and gives ownership back, so a second open works.
//! - CQs (SW2HW_CQ), raw-Ethernet QPs (RST → INIT → RTR → RTS, 2RST),
//!   B0 MAC steering ([`steer`]: MGID_HASH, READ_MCG, WRITE_MCG chains,
//!   the promiscuous lists), RSS over up to 8 receive queues (an
//!   indirection QP, Toeplitz), and the data path (receive and send rings:
//!   owner bits, stamping, the UAR send doorbell, the RQ doorbell record,
//!   checksum flags from CQEs).
//! - Receive interrupts (`irq`): MSI-X, a completion EQ and vector per
//!   receive queue, armed (EQ, then CQ `REQ_NOT`) only while its lcore
//!   sleeps; the device's counters through DUMP_ETH_STATS (`imissed`,
//!   xstats); a VPI port's link type by SENSE_PORT (one on InfiniBand is
//!   refused by name); the catastrophic-error buffer watched (on every
//!   link poll and during every command wait): a failed card is reset,
//!   its links read down, commands fail at once, and its ports come back
//!   when opened again.
//! - [`ethdev`]: a card's ports as rpmd [`Port`]s; [`driver`]: the
//!   registry's `pci:BDF[,port=N]` driver and `mlx4-model:NAME` strings.
//! - [`model`]: the device model of all of the above: commands checked
//!   against the digest, contexts and the QP state machine, a TX engine
//!   walking send queues by owner bit, an RX engine steering frames into
//!   receive WQEs, a cable between its two ports; on request a VPI card,
//!   firmware that takes a real card's time, a card that fails.
//!
//! - Link events by interrupt (`linkwatch`): the async EQ raises MSI-X
//!   vector 0, one watcher thread per card reads it.
//!
//! Not yet: VLAN insertion and stripping, LSO, BlueFlame.
//!
//! [`Port`]: rpmd_pmd::Port
//! [`PciFunction`]: rpmd_pmd::function::PciFunction
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod caps;
mod cq;
#[cfg(feature = "defects")]
pub mod defects;
pub mod driver;
pub mod eq;
mod error;
pub mod ethdev;
pub mod fw;
mod hca;
pub mod hcr;
pub mod icm;
mod irq;
mod linkwatch;
pub mod model;
mod port;
pub mod prm;
mod qp;
pub mod res;
pub mod steer;
#[cfg(test)]
mod tests;
mod txrx;

pub use error::Error;
pub use hca::{Hca, Options};
pub use port::EthCounters;

/// Adds the ConnectX-3 PCI driver (`pci:BDF[,port=N]`) and the device
/// model (`mlx4-model:NAME[,port=N][,wire=0|1]`) to `reg`.
pub fn register(reg: &mut rpmd_pmd::Registry) {
    reg.register_pci(Box::new(driver::Mlx4Driver));
    reg.register(Box::new(driver::Mlx4ModelDriver::default()));
}
