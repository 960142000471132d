//! virtio-net for rpmd: both sides of the device, around one set of ring
//! layouts.
//!
//! **The model.** A virtio-net device and its driver share virtqueues in
//! the driver's memory: descriptor tables the driver fills with buffers,
//! and (split rings, virtio 1.2 §2.7) an available and a used ring, or
//! (packed rings, §2.8) one ring both write, whose AVAIL/USED flags are
//! read against wrap counters. [`vring`] holds those layouts as typed
//! volatile views, shared by the two sides. The split driver names its
//! ordering points (V1-V4 in [`driver::split`]), where its writes must become
//! visible before the device's reads; every fence on either side names
//! its partner on the other.
//!
//! **The driver side** ([`driver`]) runs the queues from DMA memory carrying mbufs:
//! [`split`](driver::split) and [`packed`](driver::packed) rings (event-index suppression, in-order use,
//! batches published by one Release store), the net data path (mergeable
//! RX buffers, multi-segment TX, checksum offloads), reached through two
//! transports:
//! - [`user`](driver::user) (`virtio-user:PATH`): this process drives a vhost-user
//!   backend (DPDK's `net_vhost`, QEMU's, or ours) over a Unix socket,
//!   sharing its memory by fd; several queue pairs, rx interrupts (the
//!   call eventfd), client or server, reconnection that resumes split rings
//!   and restarts packed ones.
//! - [`pci`](driver::pci) (`pci:BDF`): a virtio-net PCI function through VFIO, the
//!   modern transport (IOVA = VA, ACCESS_PLATFORM) and the legacy one
//!   (physical addresses), the control queue for receive filters, MTU and
//!   queue pairs, rx interrupts through MSI-X (modern only).
//!
//! Nothing the device writes is trusted for driver-private state: chain
//! links, lengths and the buffers in flight live in the driver's memory and
//! are only compared with the device's entries; an entry naming no buffer
//! in flight stops the queue until it starts over.
//!
//! **The device side**, [`device`] (`vhost-user:PATH`): this process is
//! the virtio-net device that a VM's Linux driver (through QEMU), DPDK's
//! `net_virtio_user` or our own virtio-user port attaches to. Every address
//! and length the frontend hands over is checked against its memory table
//! before use, its memory is watched against shrinking, its eventfds must
//! be eventfds and never block the data path, and a frontend that breaks
//! the protocol loses its connection, naming why.
//!
//! Both sides are tested against peers written by others (DPDK testpmd,
//! QEMU guests' Linux virtio-net) and against hostile peers of the
//! project's own. [`register`] adds `virtio-user:`, `vhost-user:` and
//! virtio-net `pci:` to a port [`Registry`](rpmd_pmd::Registry).
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod consts;
pub mod device;
pub mod driver;
mod fd;
mod offload;
pub mod vring;

/// Errors of the virtio crate. Ports report them inside
/// `rpmd_pmd::Error::Driver`, as its source: a caller matches them with
/// `downcast_ref::<rpmd_virtio::Error>()`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration value is out of range.
    #[error("virtio: {0}")]
    Config(String),
    /// The other side did something the protocol forbids.
    #[error("virtio peer misbehaved: {0}")]
    Peer(String),
    /// What the configuration asks for needs a feature the other side
    /// (the device, or the vhost-user backend) does not offer.
    #[error(
        "{need} needs {feature}, which the {side} does not offer (features {offered:#x}){hint}"
    )]
    MissingFeature {
        /// What needed it (`queues=2`, `receive filters`).
        need: String,
        /// The feature, by its specification name.
        feature: &'static str,
        /// Who lacks it: `device` or `backend`.
        side: &'static str,
        /// The features it offers.
        offered: u64,
        /// What to do about it (empty, or `; ...`).
        hint: &'static str,
    },
    /// The device did not keep FEATURES_OK after the driver's choice
    /// (virtio 1.2 §3.1.1).
    #[error("the device refused features {asked:#x} (FEATURES_OK not kept; offered {offered:#x})")]
    FeaturesRefused {
        /// The features written.
        asked: u64,
        /// The features the device offered.
        offered: u64,
    },
    /// A command on the control queue failed.
    #[error("control command class {class} command {command}: {failure}")]
    Control {
        /// The command's class (§5.1.6.5).
        class: u8,
        /// The command within its class.
        command: u8,
        /// How it failed.
        failure: ControlFailure,
    },
    /// A vhost-user request got no reply in time; the connection was
    /// closed.
    #[error("vhost-user {request}: no reply within {after:?}; the connection was closed")]
    NoReply {
        /// The request.
        request: String,
        /// How long was waited.
        after: std::time::Duration,
    },
    /// A DMA region cannot join the vhost-user memory table.
    #[error("{0}")]
    MemoryTable(MemoryTableFull),
    /// A receive mode or filter asked of a link that has none.
    #[error("{0}")]
    NoReceiveFilter(&'static str),
    /// The rx pool's memory is not addressed the way the transport needs.
    #[error("{}", if *legacy {
        "a legacy virtio device takes physical addresses: give the port a mempool made with IovaMode::Pa (hugepages, root)"
    } else {
        "the modern virtio interface addresses memory through the IOMMU: give the port a mempool made with IovaMode::Va"
    })]
    IovaMode {
        /// The legacy transport (physical addresses) was in use.
        legacy: bool,
    },
}

/// How a control-queue command failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ControlFailure {
    /// An earlier command was never acknowledged; the queue is not used
    /// until the port restarts.
    #[error("an earlier command was never acknowledged; restart the port")]
    Stuck,
    /// The command's data does not fit one mbuf.
    #[error("{0} data bytes do not fit an mbuf")]
    TooLong(usize),
    /// The queue had no room.
    #[error("the control queue is full")]
    Full,
    /// The device answered with this ack (not VIRTIO_NET_OK).
    #[error("the device refused it (ack {0})")]
    Refused(u8),
}

/// Why a region cannot join a vhost-user memory table.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MemoryTableFull {
    /// More regions are registered than a table takes (with the rings).
    #[error("{registered} DMA regions are registered and the rings need one more; a vhost-user memory table takes {limit}: use fewer, larger pools")]
    AtStart {
        /// Regions registered in the domain.
        registered: usize,
        /// The table's size.
        limit: usize,
    },
    /// A region registered while the port runs would pass the table.
    #[error("the backend's memory table has {regions} regions and the rings; a new one would pass {limit} (a memory table sent again after a reconnection holds at most that many): use fewer, larger pools")]
    WhileRunning {
        /// Regions in the table now.
        regions: usize,
        /// The table's size.
        limit: usize,
    },
    /// A region registered while the port runs, and the backend takes no
    /// regions but at the start.
    #[error("a DMA region ({len} bytes at {start:#x}) was registered while the port runs, and its vhost-user backend offers no CONFIGURE_MEM_SLOTS (ADD_MEM_REG): it got the memory table at the start; register every mempool in the registry's domain before starting virtio-user ports, or stop them first")]
    NoMemSlots {
        /// The region's length.
        len: usize,
        /// Its address.
        start: u64,
    },
}

/// `e` as the error of port `port` while doing `what`, kept as the
/// source.
pub(crate) fn verr(port: &str, what: &str, e: Error) -> rpmd_pmd::Error {
    rpmd_pmd::Error::Driver {
        port: port.to_string(),
        what: what.to_string(),
        source: Box::new(e),
    }
}

/// A port error without an underlying error: `detail` says what is wrong.
pub(crate) fn perr(port: &str, detail: impl std::fmt::Display) -> rpmd_pmd::Error {
    rpmd_pmd::Error::Port {
        port: port.to_string(),
        detail: detail.to_string(),
    }
}

/// The receive filter of a port over vhost-user, on either side: the
/// protocol has none (DPDK's vhost does not filter either), so every frame
/// is delivered. Both modes stay on, and asking for less is an error
/// rather than a silent Ok.
pub(crate) fn no_filter(
    port: &str,
    filter: &rpmd_pmd::port::RxFilter,
) -> Result<(), rpmd_pmd::Error> {
    let off = [
        (filter.promiscuous, "promiscuous"),
        (filter.allmulticast, "all-multicast"),
    ]
    .into_iter()
    .find_map(|(on, mode)| (!on).then_some(mode));
    let why = match off {
        Some("promiscuous") => "a vhost-user link delivers every frame (no receive filter): promiscuous mode cannot be turned off",
        Some(_) => "a vhost-user link delivers every frame (no receive filter): all-multicast mode cannot be turned off",
        None if !filter.unicast.is_empty() || !filter.multicast.is_empty() => {
            "a vhost-user link has no MAC address filter; every frame is delivered"
        }
        None => return Ok(()),
    };
    Err(verr(port, "receive filter", Error::NoReceiveFilter(why)))
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
    reg.register(Box::new(driver::user::VirtioUserDriver));
    reg.register(Box::new(device::VhostUserDriver));
    reg.register_pci(Box::new(driver::pci::VirtioPciDriver));
}
