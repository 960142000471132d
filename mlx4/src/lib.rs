//! rpmd's ConnectX-3 (mlx4) driver, and the behavioural device model it
//! is tested on.
//!
//! The driver talks to the card through its BARs under vfio-pci, with no
//! vendor libraries and no kernel mlx4 modules, in the order Linux's
//! `mlx4_core` uses (digest `../shared/mlx4/PRM-DIGEST.md` §2.2). It
//! reaches the device only through [`PciFunction`], so a VFIO function
//! and [`model::Mlx4Model`] look the same to it.
//!
//! Built so far (the first steps of the bring-up):
//! - [`prm`]: the transcribed constants, each group citing the digest and
//!   Linux's file; [`prm::mem`], the one accessor of device-visible
//!   memory (bounds-checked volatile copies).
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
//!   started, the capabilities and ports queried; close (and drop) stops
//!   the firmware, frees its area only once the device let go, and gives
//!   ownership back, so a second open works.
//! - [`icm`]: the ICM profile (tables sized for a PMD, packed largest
//!   first), SET_ICM_SIZE, MAP_ICM_AUX, MAP_ICM, and the unmapping that
//!   keeps memory the device did not give back; then INIT_HCA
//!   ([`prm::layout::InitHca`]), QUERY_ADAPTER and CLOSE_HCA in [`Hca`].
//! - Ports: [`Hca::init_port`] (SET_PORT MAC_TABLE, GENERAL twice,
//!   INIT_PORT) and [`Hca::close_port`].
//! - [`model`]: the device model for all of the above, INIT_HCA checked
//!   against its capabilities and its mapped ICM.
//!
//! To come (issue 23): memory registration, EQ/CQ/QP, MAC steering and
//! the data path.
//!
//! [`PciFunction`]: rpmd_pmd::function::PciFunction
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod caps;
mod error;
pub mod fw;
mod hca;
pub mod hcr;
pub mod icm;
pub mod model;
mod port;
pub mod prm;

pub use error::Error;
pub use hca::{Hca, Options};
