//! Test support, for the fuzz targets and tests that drive the backend's
//! own code without a port around it:
//!
//! - [`DeviceRing`]: one vring of the device side, on memory the caller
//!   owns and writes as a driver would, without the vhost-user socket and
//!   its control thread (fuzz target `backend_ring`: descriptor chains,
//!   loops, indices a hostile driver leaves);
//! - [`serve_frontend`]: the control side, serving one frontend's
//!   messages on a socket the caller holds the other end of (fuzz target
//!   `backend_requests`).
use super::control::{serve_connection, Offer, Shared, BASE_FEATURES};
use super::vq::{Negotiated, Vring, VringCounters};
use rpmd_pmd::peer::{PeerMemory, PeerRegionInfo};
use rpmd_pmd::port::stats::QueueStats;
use rpmd_pmd::port::Pkts;
use rpmd_pmd::Mempool;
use std::os::fd::BorrowedFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;

/// What SET_FEATURES would have negotiated for the ring.
#[derive(Clone, Copy, Debug, Default)]
pub struct RingOptions {
    /// VIRTIO_F_RING_PACKED.
    pub packed: bool,
    /// VIRTIO_NET_F_MRG_RXBUF.
    pub mrg: bool,
    /// VIRTIO_RING_F_EVENT_IDX.
    pub event_idx: bool,
    /// VIRTIO_NET_F_CSUM (the driver's frames may ask for checksums).
    pub csum: bool,
    /// VIRTIO_NET_F_GUEST_CSUM (frames to the driver may be partial).
    pub guest_csum: bool,
    /// The RX checksum offload: partial checksums from the driver stay
    /// partial, flagged, instead of being completed.
    pub keep_partial: bool,
    /// VIRTIO_F_IN_ORDER.
    pub in_order: bool,
}

/// A running device-side vring (see the module docs).
pub struct DeviceRing {
    vring: Vring,
    counters: VringCounters,
    stats: QueueStats,
    keep_partial: bool,
}

impl DeviceRing {
    /// A ring of `num` entries whose parts (descriptors; avail ring or
    /// driver event area; used ring or device event area) are at `addrs`,
    /// in the driver's region `info` of `fd` (VERSION_1's 12-byte net
    /// header). The checks are those of a frontend's SET_VRING_ADDR.
    pub fn new(
        fd: BorrowedFd<'_>,
        info: PeerRegionInfo,
        num: u16,
        addrs: (u64, u64, u64),
        opts: RingOptions,
    ) -> Result<DeviceRing, String> {
        let mut mem = PeerMemory::new();
        mem.add(fd, info).map_err(|e| e.to_string())?;
        let mut vring = Vring::default();
        vring.neg = Negotiated {
            hdr_len: 12,
            mrg: opts.mrg,
            event_idx: opts.event_idx,
            packed: opts.packed,
            csum: opts.csum,
            guest_csum: opts.guest_csum,
            in_order: opts.in_order,
            call_coalesce: 0,
            #[cfg(feature = "fault-injection")]
            fault_every: 0,
        };
        vring.cfg.num = num;
        // A new packed ring starts with both wrap counters at 1 (§2.8.1),
        // which a frontend's SET_VRING_BASE says in bit 15.
        vring.cfg.base = if opts.packed { 0x8000 } else { 0 };
        vring.cfg.addrs = Some(addrs);
        vring.cfg.kicked = true;
        vring.cfg.enabled = true;
        if !vring.start(Some(&Arc::new(mem)))? {
            return Err(format!("a ring of {num} entries does not start"));
        }
        Ok(DeviceRing {
            vring,
            counters: VringCounters::default(),
            stats: QueueStats::default(),
            keep_partial: opts.keep_partial,
        })
    }

    /// The driver's TX: up to `max` frames it made available, appended to
    /// `out` (mbufs from `pool`); how many.
    pub fn dequeue(&mut self, pool: &Mempool, out: &mut Pkts, max: usize) -> usize {
        self.vring.dequeue(
            pool,
            out,
            max,
            &self.stats,
            &self.counters,
            (self.keep_partial, u16::MAX),
        )
    }

    /// The driver's RX: copies frames from the front of `pkts` into its
    /// buffers; how many were taken (the caller frees those, as the port's
    /// tx queue does).
    pub fn enqueue(&mut self, pkts: &mut Pkts) -> usize {
        self.vring.enqueue(pkts, &self.stats, &self.counters)
    }

    /// Why the ring stopped on its own, if it did.
    pub fn broken(&self) -> Option<&str> {
        self.vring.broken.as_deref()
    }

    /// Chains completed with length 0 for a fault of the driver's.
    pub fn device_errors(&self) -> u64 {
        self.stats.device_errors.get()
    }

    /// Frames dropped (a driver's fault, a frame too large for its
    /// buffers).
    pub fn errors(&self) -> u64 {
        self.stats.errors.get()
    }
}

/// Serves the frontend at the other end of `sock` as a `vhost-user:`
/// port with `pairs` queue pairs (every feature offered) would, until it
/// hangs up or is refused; then stops whatever rings it started. Returns
/// why it was refused, if it was.
pub fn serve_frontend(sock: UnixStream, pairs: u16) -> Option<String> {
    let pairs = pairs.clamp(1, super::MAX_PAIRS);
    let shared = Arc::new(Shared::new("vhost-user:testing", pairs));
    let offer = Offer {
        features: BASE_FEATURES,
        pairs,
        mac: [2, 0, 0, 0, 0, 1],
        mtu: 1500,
        call_coalesce: 0,
        #[cfg(feature = "fault-injection")]
        fault_every: 0,
    };
    serve_connection(sock, &shared, offer);
    let why = shared.last_error.lock().unwrap_or_else(|e| e.into_inner());
    why.clone()
}
