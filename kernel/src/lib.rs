//! rpmd ports attached to the Linux kernel's network stack, for machines
//! with no NIC to hand to vfio-pci (a laptop, a cloud VM, a container):
//!
//! - `af_xdp:IFNAME` ([`xdp`]): AF_XDP sockets whose UMEM is the port's
//!   mempool, so frames move between the kernel and mbufs without a copy
//!   on rpmd's side; libxdp's default XDP program steers the interface's
//!   frames to them; kernel busy polling as an option.
//! - `af_packet:IFNAME` ([`packet`]): packet sockets with TPACKET_V2 (or V3) mmap
//!   rings, for kernels or interfaces without XDP.
//! - `tap:NAME` ([`tap`]): a TAP interface rpmd creates, for the host's
//!   own stack and tools.
//!
//! All three share one control path (the `port` module's shell): link state, MAC,
//! promiscuous and all-multicast (the interface flags), and MTU are the
//! kernel interface's own, and the kernel's counters of the interface and
//! of the sockets are xstats. Data moves in bursts with one system call
//! per burst at most on AF_XDP and AF_PACKET (a TAP fd needs one per
//! frame, as in DPDK's `net_tap`). Everything the kernel writes into
//! shared rings (addresses, lengths, offsets, status words) is checked
//! before use; `unsafe` is confined to `sys` (system calls and the ring
//! mappings) and `xdp::prog` (the libxdp calls).
//!
//! [`register`] adds the three kinds to a registry.
#![deny(unsafe_code)]
#![deny(missing_docs)]

pub(crate) mod linkwatch;
pub mod netdev;
pub mod packet;
pub(crate) mod port;
pub(crate) mod sys;
pub mod tap;
pub mod testing;
pub mod xdp;

/// Adds `af_xdp`, `af_packet` and `tap` to `reg`.
pub fn register(reg: &mut rpmd_pmd::Registry) {
    reg.register(Box::new(xdp::AfXdpDriver));
    reg.register(Box::new(packet::AfPacketDriver));
    reg.register(Box::new(tap::TapDriver));
}
