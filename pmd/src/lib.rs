//! rpmd core runtime: what every driver stands on.
//!
//! Built so far:
//! - [`dma`]: hugepage-backed, fd-shareable memory regions that know their
//!   IOVAs (IOVA = VA for VFIO and vhost-user, IOVA = PA from pagemap for
//!   devices without an IOMMU), with O(1) translation.
//! - [`hugepages`]: inspecting and reserving hugepages through sysfs.
//! - [`mempool`] and [`mbuf`]: fixed-size packet buffers in DMA memory,
//!   with a per-lcore cache in front of an MP/MC ring, and an owning
//!   [`Mbuf`] handle that returns to its pool on drop, so buffers cannot be
//!   leaked, used after free, or freed twice from safe code.
//! - [`clock`]: the TSC as a calibrated clock for poll loops (a read is
//!   one instruction; `Instant::now()` is a vDSO call).
//! - [`lcore`]: per-thread lcore ids that key per-core state.
//! - [`hdr`]: checked views of Ethernet, VLAN, ARP, IPv4, IPv6, UDP and
//!   TCP headers over an mbuf's bytes, and DPDK-style packet types.
//! - [`port`]: the driver-independent port API ([`Port`], queue handles
//!   with `rx_burst`/`tx_burst`, stats, capabilities), device strings and
//!   the driver [`Registry`], and the software ports `ring:NAME`
//!   (in-process), `shm:NAME` (across processes) and `null`. [`testing`] adds a loopback port and a fault-injecting wrapper.
//! - [`domain`]: one DMA domain per registry: every region and mempool
//!   registered once and mapped into every IOMMU attached, so any port
//!   can transmit any registered pool's mbufs.
//! - [`function`]: the PCI function a driver probes ([`function::PciFunction`]),
//!   behind VFIO or a device model, the buses that supply them, and the
//!   vocabulary drivers and models share without VFIO: bounds-checked
//!   register windows ([`function::Regs`], answered by MMIO, a device fd
//!   or a model's [`function::RegisterSpace`]), interrupt eventfds,
//!   capabilities, bounded waits.
//! - [`pci`]: PCI addresses, sysfs discovery, binding via `driver_override`.
//! - [`peer`]: memory another process hands over (a vhost-user memory
//!   table): mapped, checked, and translated from the peer's addresses.
//! - [`vfio`]: containers, groups and devices; DMA mapping; register
//!   windows and MSI-X eventfds of a bound device; reset. Tested in a QEMU guest
//!   with a virtual IOMMU (`tests/vm/run.sh`).
//! - [`preflight`]: what a machine lacks before a NIC can be driven, with
//!   the fix for each.
//!
//! `unsafe` is confined to `clock` (`rdtsc`), `dma` (mapping, pagemap), `mbuf` and `mempool`
//! (objects addressed by raw pointers inside DMA memory), `port::shm`'s
//! region (rings in a file shared with another process), `peer` (mapping
//! and copying memory a peer shares, and its SIGBUS guard), `vfio::sys`
//! (the VFIO ioctls), `function::sys` (region reads and writes, BAR
//! mappings, eventfds) and `function::regs` (MMIO); every block says why
//! it is sound.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod clock;
pub mod dma;
pub mod domain;
pub mod endian;
mod error;
pub mod function;
pub mod hdr;
pub mod hugepages;
pub mod lcore;
pub mod mbuf;
pub mod mempool;
pub mod net;
pub mod pci;
pub mod peer;
pub mod port;
pub mod preflight;
pub mod testing;
pub mod vfio;

pub use dma::{DmaRegion, Iova, IovaMode, PageSize};
pub use domain::DmaDomain;
pub use error::Error;
pub use mbuf::pool::{BufferSlot, Local, LocalObjs, Mempool, MempoolConfig, PoolObj, PoolObjs};
pub use mbuf::Mbuf;
pub use port::{Pkts, Port, PortConfig, Queues, Registry};
