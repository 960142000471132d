//! rpmd core runtime (work not started yet).
//!
//! This crate will hold everything a driver stands on: hugepage-backed DMA
//! memory that knows its IOVA, the mempool and `Mbuf` packet buffers (backed
//! by `rpmd-ring`), the driver-independent port API (`rx_burst`/`tx_burst`,
//! configuration, statistics, device strings such as `pci:0000:00:04.0` or
//! `ring:NAME`), software `ring` and `null` ports, and the VFIO/PCI plumbing
//! (container, group, device, BAR access, DMA mapping, MSI-X eventfds).
#![deny(missing_docs)]
#![deny(unsafe_code)]
