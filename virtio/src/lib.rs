//! rpmd's virtio-net poll-mode driver.
//!
//! Built so far:
//! - [`split`]: the driver side of a split virtqueue (virtio 1.2 §2.7) in
//!   DMA memory, carrying mbufs, with the ordering between descriptor
//!   writes, index publication and notification decisions documented.
//! - [`packed`]: the driver side of a packed virtqueue (§2.8): one ring
//!   both sides write, AVAIL/USED bits against wrap counters, a batch made
//!   available by one Release store of its first descriptor's flags. The
//!   data path runs on either ring (`net::Ring`); virtio-user offers it
//!   with `packed_vq=1`.
//! - [`user`]: virtio-user: this process drives a vhost-user backend (such
//!   as DPDK's `net_vhost`) over a Unix socket, sharing its mempool and
//!   ring memory by fd. Up to 8 queue pairs (MQ, rings enabled with
//!   SET_VRING_ENABLE), split rings with event-index notification
//!   suppression, rx interrupts (the backend's call eventfd, for the run
//!   loop's sleep), mergeable RX buffers (frames larger than an mbuf
//!   arrive as chains; MTU up to 9600) and descriptor chains for
//!   multi-segment TX. The control protocol goes through rust-vmm's
//!   `vhost` crate; the data path is ours. Tested against DPDK testpmd's
//!   `net_vhost` (io, rxonly, txonly; 60 to 9000 bytes; mergeable buffers
//!   on and off; two queue pairs; rx interrupts; testpmd killed and
//!   restarted under a running port, which reconnects by itself, as a
//!   client or as a server that testpmd's `client=1` connects to; split
//!   rings resume, packed rings start over).
//!
//! - [`pci`]: virtio-net over PCI through VFIO, for `pci:` device
//!   strings: the modern transport (§4.1.4; ACCESS_PLATFORM required, DMA
//!   through the IOMMU at IOVA = VA) and the legacy one of transitional
//!   devices (§4.1.4.8; physical addresses), the same data path as
//!   virtio-user; split or packed rings (modern), several queue pairs (MQ,
//!   set through the control queue), the control queue for the receive
//!   filter, the device's MTU, rx interrupts through MSI-X.
//!   Tested in a QEMU guest with a virtual IOMMU against a host peer, 1000
//!   frames each way checked byte for byte on both transports and both
//!   ring types, QEMU's filter obeying what we program, an MSI-X
//!   interrupt, a device refusing features, and two queue pairs with DPDK
//!   testpmd as the device's vhost-user backend (`tests/vm/run.sh`).
//!
//! Both transports offer the checksum offloads (VIRTIO_NET_F_CSUM on TX:
//! mbufs flagged `TX_TCP_CKSUM`/`TX_UDP_CKSUM` go out with NEEDS_CSUM;
//! GUEST_CSUM on RX: partial and validated checksums become
//! `RX_L4_CKSUM_NONE`/`RX_L4_CKSUM_GOOD`), tested against testpmd.
//!
//! The split ring also does in-order use (VIRTIO_F_IN_ORDER): descriptors
//! in table order, completions checked against the buffer due.
//!
//! Nothing the device writes is trusted for driver-private state: chain
//! links and lengths and the buffers in flight are kept in the driver's
//! own memory and only compared with the device's entries; a used index
//! that moves past the buffers in flight, or (packed and in-order rings)
//! an entry naming no buffer in flight, stops the queue until it starts
//! over, holding the buffers the device may still own. Tested against a
//! hostile vhost-user backend of the project's own
//! (`tests/hostile_backend.rs`).
//!
//! Not done: MSI-X on the legacy interface (its rx queue has no interrupt
//! eventfd), several queue pairs on the legacy interface.
//!
//! - [`backend`]: the other half, a vhost-user backend: this process is
//!   the virtio-net device that a VM's driver (through QEMU), DPDK's
//!   `net_virtio_user` or our own virtio-user port attaches to, as the
//!   `vhost-user:` port. Every address and length the frontend hands over
//!   is checked against its memory table before use.
//!
//! [`register`] adds the driver to a port [`Registry`](rpmd_pmd::Registry).
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod backend;
pub mod consts;
mod ctrl;
mod fd;
mod net;
mod offload;
pub mod packed;
pub mod pci;
pub mod split;
#[cfg(test)]
mod testdev;
pub mod user;
pub mod vring;

/// Errors of the virtio driver's own layers (ports report them as
/// `rpmd_pmd::Error::Port`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration value is out of range.
    #[error("virtio: {0}")]
    Config(String),
    /// The other side did something the protocol forbids.
    #[error("virtio peer misbehaved: {0}")]
    Peer(String),
}

/// A port error without an underlying error: `detail` says what is wrong.
pub(crate) fn perr(port: &str, detail: impl std::fmt::Display) -> rpmd_pmd::Error {
    rpmd_pmd::Error::Port {
        port: port.to_string(),
        detail: detail.to_string(),
    }
}

/// A port error caused by `source` while doing `what`, which keeps it as
/// its source.
pub(crate) fn psrc(
    port: &str,
    what: impl Into<String>,
    source: impl std::error::Error + Send + Sync + 'static,
) -> rpmd_pmd::Error {
    rpmd_pmd::Error::Driver {
        port: port.to_string(),
        what: what.into(),
        source: Box::new(source),
    }
}

/// A fault-injection option `key` (`fault_used_every`,
/// `fault_desc_every`): every Nth entry written wrong on purpose, 0 for
/// none; refused unless this build has rpmd-virtio's `fault-injection`
/// feature (benches/soak.sh builds with it).
pub(crate) fn fault_every(
    args: &rpmd_pmd::port::DevArgs,
    key: &str,
) -> Result<u32, rpmd_pmd::Error> {
    let n = args.opt_u64(key, 0)?;
    if n != 0 && !cfg!(feature = "fault-injection") {
        return Err(perr(
            args.raw(),
            format!("{key}: this build has no fault injection (rpmd-virtio's `fault-injection` feature, for benches/soak.sh)"),
        ));
    }
    u32::try_from(n).map_err(|_| perr(args.raw(), format!("{key}={n}: at most {}", u32::MAX)))
}

/// Registers `virtio-user:`, the `vhost-user:` backend and the PCI driver
/// (for `pci:` strings naming a virtio-net function) in `reg`.
pub fn register(reg: &mut rpmd_pmd::Registry) {
    reg.register(Box::new(user::VirtioUserDriver));
    reg.register(Box::new(backend::VhostUserDriver));
    reg.register_pci(Box::new(pci::VirtioPciDriver));
}
