//! A poll-mode driver for the Intel 82576 (igb) over the PCI function
//! trait: VFIO on a real or emulated NIC, or a device model.
//!
//! Built so far: the device's bring-up ([`hw::Hw`]): identity check
//! against the 82576 family's IDs, reset as the datasheet orders it
//! (interrupts masked, queues stopped, CTRL.RST, the EEPROM's auto-read
//! awaited), EEPROM reads through EERD (MAC address, image version), PHY
//! registers through MDIC, link up (CTRL.SLU) and the link's state,
//! speed and duplex from STATUS, and the device's drop counters (MPC,
//! RNBC). Every wait on the device is bounded ([`hw::WAIT`]) and fails
//! with an error naming the function and what it waited for. It is
//! tested in the QEMU guest of `tests/vm/run.sh` against QEMU's own 82576
//! model (`-device igb`). The receive and transmit queues (advanced
//! descriptors) and the `EthDev` device on top are the next step.
#![deny(missing_docs)]
#![deny(unsafe_code)]

mod error;
pub mod hw;
pub mod regs;

pub use error::Error;
