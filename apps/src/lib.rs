//! rpmd applications and tools.
//!
//! Built so far:
//! - `rpmd-bind` (like dpdk-devbind): lists network devices with their
//!   driver and IOMMU group, binds and unbinds them to vfio-pci through
//!   `driver_override`, reserves hugepages, and runs the `preflight` checks
//!   that say what a machine lacks before rpmd can drive a NIC.
//!
//! To come (issue 6): `l2fwd` (DPDK-style layer-2 forwarding between port
//! pairs, with an embedded default topology that needs no NIC), `rr`
//! (netperf TCP_RR-style request/response with latency percentiles) and
//! `gen` (testpmd-style txonly/rxonly).
#![deny(missing_docs)]
#![deny(unsafe_code)]
