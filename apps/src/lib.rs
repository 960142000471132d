//! rpmd applications and tools.
//!
//! Built so far:
//! - `l2fwd` ([`l2fwd`]): DPDK-style layer-2 forwarding between port pairs
//!   on the run loop, with an embedded default topology (two in-process
//!   ports, a built-in generator and sink) that needs no NIC.
//! - `l3fwd` ([`l3fwd`]): DPDK-style IPv4/IPv6 routing by longest-prefix
//!   match or exact 5-tuple match, with drops counted by reason.
//! - `rr` ([`rr`]): request/response transactions like netperf TCP_RR,
//!   with per-session latency percentiles, reported against the
//!   core-to-core cache-line round trip ([`bound`]).
//! - `vswitch` ([`vswitch`]): a learning layer-2 switch across any ports
//!   (MAC learning with ageing, flooding), with a demo of three stations.
//! - `gen` ([`gen`]): testpmd's forwarding modes on one port: txonly,
//!   rxonly, io, mac, macswap, csum ([`fwd`]) and flowgen.
//! - [`opts`]: the run-loop options the apps share (`--poll` presets, spin
//!   budget, yield signal, sleep).
//! - [`usage`]: each lcore's CPU % and busy % beside the rates, in every
//!   app's summary and `--json`.
//! - [`egress`]: shaped egress in the apps (`vswitch --egress`, `l2fwd
//!   --tx-rate`) and its per-class counters.
//! - [`link`]: each port's link change told once, with the driver's
//!   reason for a link that went down.
//! - [`cli`]: exit codes and the value checks every app's options share.
//! - [`capture`]: pcapng capture off the data path (`--pcap`), like
//!   `dpdk-dumpcap`.
//! - [`telemetry`]: DPDK's telemetry v2 protocol on a Unix socket, so
//!   `dpdk-telemetry.py` reads an rpmd app's ports, lcores and pools.
//! - `rpmd-bind` (like dpdk-devbind): lists network devices with their
//!   driver and IOMMU group, binds and unbinds them to vfio-pci through
//!   `driver_override`, reserves hugepages, and runs the `preflight` checks
//!   that say what a machine lacks before rpmd can drive a NIC.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod bound;
pub mod capture;
pub mod cli;
pub mod egress;
pub mod fwd;
pub mod gen;
pub mod l2fwd;
pub mod l3fwd;
pub mod link;
pub mod opts;
pub mod rr;
pub mod telemetry;
pub mod usage;
pub mod vswitch;
