//! rpmd applications (work not started yet).
//!
//! This crate will hold the programs users run first: `l2fwd` (DPDK-style
//! layer-2 forwarding between port pairs, with an embedded default topology
//! that needs no NIC), `rr` (netperf TCP_RR-style request/response with
//! latency percentiles), `gen` (testpmd-style txonly/rxonly) and tools such
//! as `rpmd-bind`.
#![deny(missing_docs)]
#![deny(unsafe_code)]
