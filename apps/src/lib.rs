//! rpmd applications and tools.
//!
//! Built so far:
//! - `l2fwd` ([`l2fwd`]): DPDK-style layer-2 forwarding between port pairs
//!   on the run loop, with an embedded default topology (two in-process
//!   ports, a built-in generator and sink) that needs no NIC.
//! - `rpmd-bind` (like dpdk-devbind): lists network devices with their
//!   driver and IOMMU group, binds and unbinds them to vfio-pci through
//!   `driver_override`, reserves hugepages, and runs the `preflight` checks
//!   that say what a machine lacks before rpmd can drive a NIC.
//!
//! To come (issue 6): `rr` (netperf TCP_RR-style request/response with
//! latency percentiles) and `gen` (testpmd-style txonly/rxonly).
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod bound;
pub mod gen;
pub mod l2fwd;
pub mod opts;
pub mod rr;
