//! A poll-mode driver for the Intel igb family (82576, 82580, I350, I210,
//! I211) over
//! the PCI function trait: VFIO on a real or emulated NIC, or a device
//! model.
//!
//! - [`family`]: the members it runs and where they differ for it (queue
//!   counts, the IVAR table's layout, each LAN function's NVM section);
//!   the I210/I211 and the members' SerDes/SGMII links are not run.
//! - [`hw::Hw`]: the device's bring-up: identity check against the
//!   members' IDs, reset as the datasheet orders it (interrupts
//!   masked, queues stopped, CTRL.RST, the EEPROM's auto-read awaited),
//!   EEPROM reads through EERD (MAC address, image version), PHY
//!   registers through MDIC, link up (CTRL.SLU) and the link's state.
//!   Every wait on the device is bounded ([`hw::WAIT`]) and fails with
//!   an error naming the function and what it waited for.
//! - [`ethdev`]: the port (`pci:BDF` through the registry, [`register`]):
//!   the generic `EthDev` over the device, with its receive filter
//!   (own address, 15 more unicast entries, the multicast hash table,
//!   promiscuous and all-multicast), RSS over up to 16 receive queues
//!   (8 on the 82580 and I350, 4 on the I210, 2 on the I211; Toeplitz,
//!   the hash in each mbuf), as many
//!   transmit queues,
//!   checksum, VLAN (strip, insert, the filter table) and TCP
//!   segmentation (TSO) offloads in the device, jumbo frames, the
//!   statistics registers as xstats and `imissed`, and MSI-X (`irq`): a
//!   vector per receive queue for the run loop's sleep, and link changes
//!   as link events.
//! - The data path ([`desc`] layouts, [`ring`] memory, `rxtx`): advanced
//!   descriptors, bursts of up to 32 and more, no allocation or system
//!   call per frame; a frame over several receive buffers arrives as an
//!   mbuf chain, and a chain goes out as one descriptor per segment.
//!
//! - [`vf`]: a virtual function of an 82576 or I350 (SR-IOV) as a port
//!   of its own (`pci:BDF`, driver `igbvf`): the same data path on the
//!   VF's two queue pairs, and everything else asked of the PF's driver
//!   over the mailbox (`mbx`, igbvf's protocol: reset and MAC address,
//!   longest frame, multicast hashes, all-multicast, extra unicast
//!   addresses, VLAN IDs), each request bounded and a refusal an error
//!   naming the message.
//! - [`model`]: rpmd's own register-level model of the 82576, which also
//!   plays an 82580, I350, I210 or I211, none of which QEMU emulates
//!   (their queue counts, IVAR layout and NVM sections; the I210's and
//!   I211's flash or iNVM and the semaphores they share with firmware,
//!   every broken rule of which it records), for the host tests
//!   (`tests/model.rs`, `tests/family.rs`) and the broken devices QEMU's
//!   model cannot be made into: stuck in reset, a corrupt EEPROM (the
//!   open checks the image's checksums, as Linux does), a SerDes link,
//!   hostile receive write-backs; and a VF whose PF answers its mailbox
//!   as Linux's igb does, or never, or wrongly (`tests/vf.rs`).
//!
//! Tested in the QEMU guest of `tests/vm/run.sh` against QEMU's own 82576
//! model (`-device igb`): two of them cabled to each other, then the
//! second driven in turn by DPDK's igb PMD (testpmd) and by Linux's igb
//! driver and network stack. The registers, bits and layouts are checked
//! against Linux's igb headers at test time (`tests/linux_defs.rs`). A VF
//! of the second 82576, enabled by Linux's igb, is driven in the same
//! guest against Linux's stack on its PF, an idle lcore sleeping on the
//! VF's MSI-X vector until Linux's traffic wakes it. Not yet: SerDes/SGMII
//! links, link events on a VF (its link is polled), an iNVM's image
//! version.
#![deny(missing_docs)]
#![deny(unsafe_code)]

mod counters;
pub mod desc;
mod driver;
mod error;
pub mod ethdev;
pub mod family;
pub mod hw;
mod i210;
mod irq;
mod mbx;
pub mod model;
mod queues;
pub mod regs;
pub mod ring;
mod rxtx;
pub mod vf;

pub use driver::{register, Driver, IgbDriver, IgbVfDriver};
pub use error::Error;
pub use ethdev::{open_port, IgbDevice, IgbPort};
pub use vf::{open_vf_port, IgbVfDevice, IgbVfPort};
