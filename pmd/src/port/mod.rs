//! The driver-independent port API.
//!
//! A port is one Ethernet device: a PCI NIC, a virtio-user link, an
//! in-process ring pair, a null sink. Its life follows DPDK's ethdev:
//!
//! 1. **open** it from a device string through a [`Registry`]
//!    (`pci:0000:00:04.0`, `virtio-user:/run/vhost.sock`, `ring:NAME`,
//!    `shm:NAME`, `null`), which picks the driver;
//! 2. **configure** it ([`PortConfig`]: rx/tx queue counts, descriptors per
//!    queue, offloads, MTU, the mempool that receive buffers come from),
//!    checked against its [`Capabilities`];
//! 3. **start** it, which hands out the data path: one [`RxQueue`] and one
//!    [`TxQueue`] handle per queue ([`Queues`]). Each handle is `Send`, so
//!    every lcore owns the queues it polls and no lock sits on the data path;
//!    several lcores feeding one TX queue put their own lock in front of it
//!    (the run loop's TX lock);
//! 4. `rx_burst` / `tx_burst` on the handles, in batches ([`Pkts`]);
//! 5. **stop**: the handles of this start go dead (their bursts return 0),
//!    and the port may be configured and started again.
//!
//! Control operations (link, MAC, promiscuous and all-multicast modes, MTU,
//! statistics) are methods of [`Port`] and may be called while lcores run
//! the data path.
//!
//! Every driver's port is the one generic [`EthDev`] over the driver's
//! [`Device`] (see [`ethdev`]): the layer keeps the state machine, the
//! configuration checks, the counters and the receive filter, and the
//! driver only what differs.
//!
//! Ownership of packets follows the mbuf: `rx_burst` appends received mbufs
//! to the caller's burst; `tx_burst` takes mbufs from the front of the
//! caller's burst, and what it did not take stays there, in order, for the
//! caller to retry or drop. An mbuf dropped anywhere returns to its pool.
use crate::{Error, Mbuf, Mempool};
use rpmd_ring::Burst;
use std::fmt;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

pub mod devargs;
pub mod ethdev;
pub mod events;
pub mod features;
pub mod null;
pub mod registry;
pub mod ring;
pub mod rss;
pub mod shm;
pub mod stats;
pub mod vlan;

pub use devargs::DevArgs;
pub use ethdev::{Device, EthDev, RxFilter, StartContext};
pub use events::{LinkEvents, LinkNotifier};
pub use features::{Feature, Support};
pub use registry::{Driver, PciDriver, Registry};
pub use rss::{RssCaps, RssConfig, RssHash};
pub use stats::{PortStats, QueueStats, Xstat};

/// The most mbufs one burst holds. Bursts of 32 are the norm; the batch
/// sweep in the benchmarks goes up to 256.
pub const MAX_BURST: usize = 256;

/// A batch of mbufs, the unit of `rx_burst` and `tx_burst`. Inline, no
/// allocation; values are taken from the front and appended at the back.
pub type Pkts = Burst<Mbuf, MAX_BURST>;

/// A 48-bit Ethernet address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    /// Whether the group bit is set (multicast or broadcast).
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 == 1
    }

    /// A locally administered unicast address `02:00:00:00:hi:lo` for
    /// software ports that have no address of their own.
    pub const fn local(n: u16) -> Self {
        MacAddr([0x02, 0, 0, 0, (n >> 8) as u8, n as u8])
    }

    /// A locally administered unicast address derived from a name (a ring
    /// name, a socket path) and a last byte, for ports that have no
    /// address of their own but should keep the same one across runs.
    pub fn from_name(name: &str, last: u8) -> Self {
        // FNV-1a: enough to tell names apart.
        let h = name.bytes().fold(0x811c_9dc5u32, |h, b| {
            (h ^ b as u32).wrapping_mul(0x0100_0193)
        });
        let [a, b, c, d] = h.to_be_bytes();
        MacAddr([0x02, a, b, c, d, last])
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// A MAC address that is not six hex bytes between `:` or `-`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a MAC address (six hex bytes: aa:bb:cc:dd:ee:ff)")]
pub struct BadMacAddr(pub String);

impl std::str::FromStr for MacAddr {
    type Err = BadMacAddr;

    /// `aa:bb:cc:dd:ee:ff` or `aa-bb-cc-dd-ee-ff`, either case.
    fn from_str(s: &str) -> Result<MacAddr, BadMacAddr> {
        let bad = || BadMacAddr(s.to_string());
        let sep = if s.contains('-') { '-' } else { ':' };
        let mut m = [0u8; 6];
        let mut parts = s.split(sep);
        for b in &mut m {
            let p = parts.next().ok_or_else(bad)?;
            if p.len() != 2 || !p.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(bad());
            }
            *b = u8::from_str_radix(p, 16).map_err(|_| bad())?;
        }
        match parts.next() {
            Some(_) => Err(bad()),
            None => Ok(MacAddr(m)),
        }
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Link state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Link {
    /// Carrier present.
    pub up: bool,
    /// Speed in Mbit/s (0 = unknown).
    pub speed_mbps: u32,
    /// Full duplex.
    pub full_duplex: bool,
}

/// Offload features, as a bit set (DPDK's `RTE_ETH_RX_OFFLOAD_*` /
/// `RTE_ETH_TX_OFFLOAD_*`, reduced to those rpmd drivers implement).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct Offloads(pub u64);

impl Offloads {
    /// No offloads.
    pub const NONE: Offloads = Offloads(0);
    /// RX: verify IPv4/TCP/UDP checksums and flag the mbuf.
    pub const RX_CHECKSUM: Offloads = Offloads(1 << 0);
    /// RX: receive frames larger than one mbuf as mbuf chains.
    pub const RX_SCATTER: Offloads = Offloads(1 << 1);
    /// RX: strip the VLAN tag into the mbuf's `vlan_tci`.
    pub const RX_VLAN_STRIP: Offloads = Offloads(1 << 2);
    /// RX: hash flows (RSS) and spread them over the rx queues.
    pub const RX_RSS: Offloads = Offloads(1 << 3);
    /// RX: drop tagged frames of VLANs not admitted by
    /// [`Port::set_vlan_filter`].
    pub const RX_VLAN_FILTER: Offloads = Offloads(1 << 4);
    /// TX: compute TCP/UDP checksums from mbuf flags.
    pub const TX_CHECKSUM: Offloads = Offloads(1 << 16);
    /// TX: send mbuf chains.
    pub const TX_MULTI_SEGS: Offloads = Offloads(1 << 17);
    /// TX: TCP segmentation.
    pub const TX_TSO: Offloads = Offloads(1 << 18);
    /// TX: insert the mbuf's `vlan_tci` as an 802.1Q tag when it is
    /// flagged [`TX_VLAN`](crate::mbuf::TX_VLAN).
    pub const TX_VLAN_INSERT: Offloads = Offloads(1 << 19);
    /// What the generic port does in software for any device that lacks
    /// it ([`EthDev`]).
    pub const SOFTWARE: Offloads =
        Offloads(Self::RX_VLAN_STRIP.0 | Self::RX_VLAN_FILTER.0 | Self::TX_VLAN_INSERT.0);

    const NAMES: [(Offloads, &'static str); 9] = [
        (Self::RX_CHECKSUM, "rx-checksum"),
        (Self::RX_SCATTER, "rx-scatter"),
        (Self::RX_VLAN_STRIP, "rx-vlan-strip"),
        (Self::RX_RSS, "rx-rss"),
        (Self::RX_VLAN_FILTER, "rx-vlan-filter"),
        (Self::TX_CHECKSUM, "tx-checksum"),
        (Self::TX_MULTI_SEGS, "tx-multi-segs"),
        (Self::TX_TSO, "tx-tso"),
        (Self::TX_VLAN_INSERT, "tx-vlan-insert"),
    ];

    /// Whether every bit of `other` is set here.
    pub const fn contains(self, other: Offloads) -> bool {
        self.0 & other.0 == other.0
    }

    /// The bits of `self` not in `other`.
    pub const fn minus(self, other: Offloads) -> Offloads {
        Offloads(self.0 & !other.0)
    }
}

impl std::ops::BitOr for Offloads {
    type Output = Offloads;
    fn bitor(self, o: Offloads) -> Offloads {
        Offloads(self.0 | o.0)
    }
}

impl fmt::Display for Offloads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut rest = self.0;
        for (bit, name) in Self::NAMES {
            if self.contains(bit) {
                write!(f, "{}{name}", if first { "" } else { "," })?;
                first = false;
                rest &= !bit.0;
            }
        }
        if rest != 0 {
            write!(f, "{}0x{rest:x}", if first { "" } else { "," })?;
        } else if first {
            f.write_str("none")?;
        }
        Ok(())
    }
}

/// What a port can do (DPDK's `rte_eth_dev_info`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Most rx queues.
    pub max_rx_queues: u16,
    /// Most tx queues.
    pub max_tx_queues: u16,
    /// Fewest descriptors per queue.
    pub min_desc: u16,
    /// Most descriptors per queue.
    pub max_desc: u16,
    /// Whether descriptor counts must be powers of two.
    pub desc_pow2: bool,
    /// Offloads that can be requested.
    pub offloads: Offloads,
    /// Smallest and largest MTU.
    pub min_mtu: u16,
    /// Largest MTU.
    pub max_mtu: u16,
    /// Whether rx queues offer an interrupt eventfd ([`RxQueue::interrupt_fd`]).
    pub rx_interrupts: bool,
    /// Whether [`PortConfig::rx_pool`] is required.
    pub needs_rx_pool: bool,
}

impl Capabilities {
    /// Checks an MTU against `min_mtu..=max_mtu`: the one MTU check every
    /// port uses (configure and `set_mtu`).
    pub fn check_mtu(&self, port: &str, mtu: u16) -> Result<(), Error> {
        if mtu < self.min_mtu || mtu > self.max_mtu {
            return Err(Error::Config {
                port: port.to_string(),
                what: "mtu",
                detail: format!("{mtu}; this port takes {}..={}", self.min_mtu, self.max_mtu),
            });
        }
        Ok(())
    }
}

/// How to configure a port (DPDK's `rte_eth_dev_configure` plus the queue
/// set-ups).
#[derive(Clone)]
pub struct PortConfig {
    /// Receive queues.
    pub rx_queues: u16,
    /// Transmit queues.
    pub tx_queues: u16,
    /// Descriptors per rx queue.
    pub rx_desc: u16,
    /// Descriptors per tx queue.
    pub tx_desc: u16,
    /// Offloads asked for; each must be in [`Capabilities::offloads`].
    pub offloads: Offloads,
    /// MTU to set, or `None` to keep the port's.
    pub mtu: Option<u16>,
    /// Where receive buffers come from (hardware and null ports). A
    /// [`Mempool`] is a handle: the port keeps a clone, so the pool lives
    /// as long as any port or queue that uses it, whatever the order the
    /// app drops them in.
    pub rx_pool: Option<Mempool>,
    /// Rx queues that the port's `start` leaves stopped, for the app to
    /// start later with [`Port::rx_queue_start`] (DPDK's
    /// `rx_deferred_start`).
    pub rx_deferred: Vec<u16>,
    /// Tx queues whose start is deferred, as `rx_deferred`.
    pub tx_deferred: Vec<u16>,
    /// Classify every received frame into [`Mbuf::packet_type`] (DPDK's
    /// `RTE_PTYPE_*`, see [`crate::hdr::PacketType`]); off by default, as
    /// it reads every frame's headers. None of rpmd's ports has hardware
    /// that does it, so it is done in software by all of them alike.
    pub rx_ptypes: bool,
    /// How RSS hashes and spreads, when the port hashes (several receive
    /// queues, or [`Offloads::RX_RSS`]); checked against
    /// [`Port::rss_caps`].
    pub rss: RssConfig,
}

impl PortConfig {
    /// The default configuration (one queue each way, 1024 descriptors)
    /// receiving into `pool`.
    pub fn with_pool(pool: &Mempool) -> Self {
        PortConfig {
            rx_pool: Some(pool.clone()),
            ..PortConfig::default()
        }
    }

    /// Whether the configuration spreads frames by RSS: asked for
    /// ([`Offloads::RX_RSS`]), or implied by several receive queues
    /// (which only RSS feeds). [`rss`](Self::rss) then applies.
    pub fn rss_on(&self) -> bool {
        self.rx_queues > 1 || self.offloads.contains(Offloads::RX_RSS)
    }
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig {
            rx_queues: 1,
            tx_queues: 1,
            rx_desc: 1024,
            tx_desc: 1024,
            offloads: Offloads::NONE,
            mtu: None,
            rx_pool: None,
            rx_deferred: Vec::new(),
            tx_deferred: Vec::new(),
            rx_ptypes: false,
            rss: RssConfig::default(),
        }
    }
}

impl fmt::Debug for PortConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PortConfig")
            .field("rx_queues", &self.rx_queues)
            .field("tx_queues", &self.tx_queues)
            .field("rx_desc", &self.rx_desc)
            .field("tx_desc", &self.tx_desc)
            .field("offloads", &format_args!("{}", self.offloads))
            .field("mtu", &self.mtu)
            .field("rx_pool", &self.rx_pool.as_ref().map(|p| p.name()))
            .field("rx_deferred", &self.rx_deferred)
            .field("tx_deferred", &self.tx_deferred)
            .finish()
    }
}

impl PortConfig {
    /// Checks the configuration against `caps`; every driver calls this
    /// first. Errors name the port and the offending field.
    pub fn validate(&self, port: &str, caps: &Capabilities) -> Result<(), Error> {
        let bad = |what: &'static str, detail: String| Error::Config {
            port: port.to_string(),
            what,
            detail,
        };
        for (what, n, max) in [
            ("rx_queues", self.rx_queues, caps.max_rx_queues),
            ("tx_queues", self.tx_queues, caps.max_tx_queues),
        ] {
            if n == 0 || n > max {
                return Err(bad(what, format!("{n} queues; this port has 1..={max}")));
            }
        }
        for (what, n) in [("rx_desc", self.rx_desc), ("tx_desc", self.tx_desc)] {
            if n < caps.min_desc || n > caps.max_desc {
                return Err(bad(
                    what,
                    format!(
                        "{n} descriptors; this port takes {}..={}",
                        caps.min_desc, caps.max_desc
                    ),
                ));
            }
            if caps.desc_pow2 && !n.is_power_of_two() {
                return Err(bad(
                    what,
                    format!("{n} descriptors; this port needs a power of two"),
                ));
            }
        }
        for (what, deferred, n) in [
            ("rx_deferred", &self.rx_deferred, self.rx_queues),
            ("tx_deferred", &self.tx_deferred, self.tx_queues),
        ] {
            if let Some(q) = deferred.iter().find(|q| **q >= n) {
                return Err(bad(what, format!("queue {q}; the configuration has {n}")));
            }
        }
        let missing = self.offloads.minus(caps.offloads);
        if missing != Offloads::NONE {
            return Err(bad(
                "offloads",
                format!("{missing} not offered (offered: {})", caps.offloads),
            ));
        }
        if let Some(mtu) = self.mtu {
            caps.check_mtu(port, mtu)?;
        }
        if caps.needs_rx_pool && self.rx_pool.is_none() {
            return Err(bad(
                "rx_pool",
                "this port needs a mempool for receive buffers".into(),
            ));
        }
        Ok(())
    }
}

/// One receive queue of a started port, owned by the lcore that polls it.
pub trait RxQueue: Send {
    /// Appends up to `max` received mbufs to `out` (fewer when `out` has
    /// less room) and returns how many. Never blocks.
    fn rx_burst(&mut self, out: &mut Pkts, max: usize) -> usize;

    /// An eventfd that becomes readable when packets arrive while
    /// interrupts are enabled, for the run loop's sleep mode; `None` when
    /// the port has no rx interrupts.
    fn interrupt_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// Arms (`true`) or disarms rx interrupts. Ports without interrupts
    /// accept and ignore it.
    fn set_interrupt(&mut self, _enabled: bool) -> Result<(), Error> {
        Ok(())
    }

    /// Whether received packets are waiting, asked after arming interrupts
    /// and before sleeping (a packet that arrived just before the arming
    /// raises no interrupt). Ports that cannot tell answer `false`; the
    /// run loop then sleeps no longer than its sleep timer.
    fn has_work(&self) -> bool {
        false
    }

    /// How many received frames wait in the queue now, when the port can
    /// tell without taking them (DPDK's `rte_eth_rx_queue_count`): for a
    /// drain that handles a snapshot of its backlog. `None` when it
    /// cannot tell.
    fn rx_pending(&self) -> Option<usize> {
        None
    }

    /// How long the run loop should keep polling this queue once it finds
    /// it empty before arming its interrupt and sleeping (vhost_net's
    /// `busyloop_timeout`), and whether the lcore's other queues are
    /// polled meanwhile; `None` (the default) leaves it to the lcore's
    /// spin policy.
    fn busy_poll(&self) -> Option<BusyPoll> {
        None
    }

    /// Told, for a queue with a [`busy_poll`](Self::busy_poll) budget,
    /// how each busy poll ended: `true` when it found packets on this
    /// queue (a hit), `false` when the budget ran out (a timeout). For the
    /// queue's telemetry.
    fn busy_poll_done(&mut self, _hit: bool) {}
}

/// A queue's busy-poll policy (see [`RxQueue::busy_poll`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusyPoll {
    /// How long to poll an empty queue before sleeping (0: sleep at once).
    pub budget: std::time::Duration,
    /// Whether the lcore's other queues are polled during that time (RX
    /// busy polling: the port that feeds this one's peer is polled too).
    /// When `false` they wait for their own interrupts, as vhost_net's TX
    /// busy loop without RX busy polling leaves the socket to its wake-up.
    pub poll_others: bool,
}

/// One transmit queue of a started port.
pub trait TxQueue: Send {
    /// Takes mbufs from the front of `pkts` and queues them for sending;
    /// returns how many. The rest stay in `pkts`, in order. Never blocks.
    fn tx_burst(&mut self, pkts: &mut Pkts) -> usize;

    /// Reclaims what the device has finished sending and returns how many
    /// queued frames (descriptors, for chains) it has not finished yet (DPDK's
    /// `rte_eth_tx_done_cleanup` plus a count), so that an application can
    /// let its last frames go out before stopping the port. Queues that
    /// hand frames over at once answer 0.
    fn in_flight(&mut self) -> usize {
        0
    }
}

/// What every driver writes into each mbuf it receives besides the frame:
/// the port id (from [`DevArgs::port_id`]) and, when configured, the
/// packet type.
#[derive(Clone, Copy, Debug)]
pub struct RxStamp {
    port: u16,
    ptypes: bool,
}

impl RxStamp {
    /// The stamp for a port opened as `port` with `conf`.
    pub fn new(port: u16, conf: &PortConfig) -> Self {
        RxStamp {
            port,
            ptypes: conf.rx_ptypes,
        }
    }

    /// The port id received mbufs carry.
    #[inline(always)]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// [`apply`](Self::apply) for a driver that set the port id itself
    /// while receiving: only the packet types, when asked for.
    #[inline(always)]
    pub fn apply_types(&self, out: &mut Pkts, n: usize) -> usize {
        if self.ptypes {
            let len = out.len();
            for m in &mut out[len - n..] {
                m.set_packet_type(crate::hdr::PacketType::of(m.data()).0);
            }
        }
        n
    }

    /// Stamps the last `n` mbufs of `out` (the ones an `rx_burst` just
    /// added); returns `n`.
    #[inline(always)]
    pub fn apply(&self, out: &mut Pkts, n: usize) -> usize {
        let len = out.len();
        for m in &mut out[len - n..] {
            m.set_port(self.port);
            if self.ptypes {
                m.set_packet_type(crate::hdr::PacketType::of(m.data()).0);
            }
        }
        n
    }
}

/// The data path of a started port: one handle per queue. Hand each to
/// the task that polls it with [`take_rx`](Queues::take_rx) and
/// [`take_tx`](Queues::take_tx), which keep the other queues' indices.
#[derive(Default)]
pub struct Queues {
    /// Receive queues, by index.
    pub rx: Vec<Box<dyn RxQueue>>,
    /// Transmit queues, by index.
    pub tx: Vec<Box<dyn TxQueue>>,
    /// Queues already taken: (`true` for rx, index).
    taken: Vec<(bool, usize)>,
}

/// What stands in a [`Queues`] slot whose queue was taken.
struct TakenQueue;

impl RxQueue for TakenQueue {
    fn rx_burst(&mut self, _out: &mut Pkts, _max: usize) -> usize {
        0
    }
}

impl TxQueue for TakenQueue {
    fn tx_burst(&mut self, _pkts: &mut Pkts) -> usize {
        0
    }
}

impl Queues {
    /// The queues a port's `start` hands out.
    pub fn new(rx: Vec<Box<dyn RxQueue>>, tx: Vec<Box<dyn TxQueue>>) -> Self {
        Queues {
            rx,
            tx,
            taken: Vec::new(),
        }
    }

    /// Takes rx queue `q` out (its slot then receives nothing).
    pub fn take_rx(&mut self, q: usize) -> Result<Box<dyn RxQueue>, Error> {
        let n = self.rx.len();
        self.check_take(true, q, n)?;
        Ok(std::mem::replace(&mut self.rx[q], Box::new(TakenQueue)))
    }

    /// Takes tx queue `q` out (its slot then sends nothing).
    pub fn take_tx(&mut self, q: usize) -> Result<Box<dyn TxQueue>, Error> {
        let n = self.tx.len();
        self.check_take(false, q, n)?;
        Ok(std::mem::replace(&mut self.tx[q], Box::new(TakenQueue)))
    }

    fn check_take(&mut self, rx: bool, q: usize, n: usize) -> Result<(), Error> {
        let what = if rx { "rx queue" } else { "tx queue" };
        if q >= n {
            return Err(Error::Invalid {
                what,
                detail: format!("queue {q} does not exist: the port started {n}"),
            });
        }
        if self.taken.contains(&(rx, q)) {
            return Err(Error::Invalid {
                what,
                detail: format!("queue {q} was taken already"),
            });
        }
        self.taken.push((rx, q));
        Ok(())
    }

    /// `rx_burst` on queue `queue`; 0 for a queue that does not exist.
    pub fn rx_burst(&mut self, queue: u16, out: &mut Pkts, max: usize) -> usize {
        match self.rx.get_mut(queue as usize) {
            Some(q) => q.rx_burst(out, max),
            None => 0,
        }
    }

    /// `tx_burst` on queue `queue`; 0 for a queue that does not exist.
    pub fn tx_burst(&mut self, queue: u16, pkts: &mut Pkts) -> usize {
        match self.tx.get_mut(queue as usize) {
            Some(q) => q.tx_burst(pkts),
            None => 0,
        }
    }

    /// [`TxQueue::in_flight`] of queue `queue`: reclaims what the device
    /// finished and counts what it has not; 0 for a queue that does not
    /// exist (or was taken).
    pub fn tx_in_flight(&mut self, queue: u16) -> usize {
        self.tx.get_mut(queue as usize).map_or(0, |q| q.in_flight())
    }
}

impl fmt::Debug for Queues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Queues {{ rx: {}, tx: {} }}",
            self.rx.len(),
            self.tx.len()
        )
    }
}

/// A port: control operations. The data path lives in the [`Queues`]
/// returned by [`start`](Port::start). Control calls take `&mut self`:
/// make them from one thread (the app's main thread), never from an
/// lcore while its queues are polled there.
///
/// ```
/// use rpmd_pmd::{Mempool, MempoolConfig, Pkts, PortConfig, Registry};
/// let pool = Mempool::new(&MempoolConfig::new("doc-port", 1024))?;
/// let reg = Registry::new(); // ring:, shm:, null; drivers crates add more
/// let mut port = reg.open("null,size=64")?;
/// port.configure(&PortConfig::with_pool(&pool))?;
/// let mut q = port.start()?;
/// let mut pkts = Pkts::new();
/// let n = q.rx_burst(0, &mut pkts, 32); // null makes 64-byte frames
/// assert_eq!((n, pkts[0].data_len()), (32, 64));
/// let sent = q.tx_burst(0, &mut pkts); // and swallows them
/// assert_eq!((sent, port.stats().ipackets), (32, 32));
/// port.stop()?;
/// # Ok::<(), rpmd_pmd::Error>(())
/// ```
pub trait Port: Send {
    /// The driver's name (`"ring"`, `"null"`, `"virtio"`, ...).
    fn driver(&self) -> &'static str;

    /// The device string the port was opened from.
    fn name(&self) -> &str;

    /// What the port can do.
    fn capabilities(&self) -> Capabilities;

    /// Applies `conf` (the port must be stopped).
    fn configure(&mut self, conf: &PortConfig) -> Result<(), Error>;

    /// Starts the port and hands out its queues.
    fn start(&mut self) -> Result<Queues, Error>;

    /// Stops the port; the queues of the last start return 0 from then on.
    fn stop(&mut self) -> Result<(), Error>;

    /// Current link state.
    fn link(&self) -> Link;

    /// Why the link is down or the port's peer was dropped, when the
    /// driver knows (a vhost-user frontend refused, a ring stopped for a
    /// fault of its driver's, an interface deleted under the port): what
    /// an app shows when it sees the link go down. None when all is well
    /// or the driver cannot tell.
    fn last_error(&self) -> Option<String> {
        None
    }

    /// The device's firmware version, where it has firmware (DPDK's
    /// `rte_eth_dev_fw_version_get`); None otherwise.
    fn fw_version(&self) -> Option<String> {
        None
    }

    /// The port's MAC address.
    fn mac_addr(&self) -> MacAddr;

    /// Receive every unicast frame, whatever its destination.
    fn set_promiscuous(&mut self, on: bool) -> Result<(), Error>;

    /// Whether promiscuous mode is on.
    fn promiscuous(&self) -> bool;

    /// Receive every multicast frame.
    fn set_allmulticast(&mut self, on: bool) -> Result<(), Error>;

    /// Whether all-multicast mode is on.
    fn allmulticast(&self) -> bool;

    /// Sets the unicast and multicast addresses the port receives besides
    /// its own and broadcast when neither promiscuous nor all-multicast
    /// mode is on (DPDK's `rte_eth_dev_mac_addr_add` and
    /// `rte_eth_dev_set_mc_addr_list` in one call; an empty list clears).
    /// Ports without filters say so.
    fn set_mac_filter(&mut self, unicast: &[MacAddr], multicast: &[MacAddr]) -> Result<(), Error> {
        let _ = (unicast, multicast);
        Err(Error::Port {
            port: self.name().to_string(),
            detail: format!(
                "the {} driver has no MAC address filter; use promiscuous mode",
                self.driver()
            ),
        })
    }

    /// The port's link-status-change events (DPDK's
    /// `RTE_ETH_EVENT_INTR_LSC`): an fd that becomes readable when the
    /// link may have changed, after which the app reads [`link`](Port::link).
    /// Every call hands out the same source. Ports that cannot see their
    /// link change say so; their link is polled.
    fn link_events(&mut self) -> Result<LinkEvents, Error> {
        Err(Error::Port {
            port: self.name().to_string(),
            detail: format!(
                "the {} driver raises no link events; poll the link instead",
                self.driver()
            ),
        })
    }

    /// Starts rx queue `q` of a started port: a queue whose start was
    /// deferred, or one stopped by [`rx_queue_stop`](Port::rx_queue_stop)
    /// (DPDK's `rte_eth_dev_rx_queue_start`).
    fn rx_queue_start(&mut self, q: u16) -> Result<(), Error> {
        Err(no_queue_control(self, q))
    }

    /// Stops rx queue `q`: its handle receives nothing until the queue
    /// starts again; what arrives for it meanwhile waits in the device
    /// or is dropped there (`imissed` where the device counts it).
    fn rx_queue_stop(&mut self, q: u16) -> Result<(), Error> {
        Err(no_queue_control(self, q))
    }

    /// Starts tx queue `q`, as [`rx_queue_start`](Port::rx_queue_start).
    fn tx_queue_start(&mut self, q: u16) -> Result<(), Error> {
        Err(no_queue_control(self, q))
    }

    /// Stops tx queue `q`: its handle takes nothing (bursts return 0 and
    /// the frames stay with the caller) until the queue starts again.
    fn tx_queue_stop(&mut self, q: u16) -> Result<(), Error> {
        Err(no_queue_control(self, q))
    }

    /// What the port's RSS offers (none by default).
    fn rss_caps(&self) -> RssCaps {
        RssCaps::default()
    }

    /// Replaces the redirection table (DPDK's
    /// `rte_eth_dev_rss_reta_update`), started or not: exactly
    /// [`RssCaps::reta_size`] entries, each a configured receive queue.
    fn set_rss_reta(&mut self, reta: &[u16]) -> Result<(), Error> {
        let _ = reta;
        Err(Error::Port {
            port: self.name().to_string(),
            detail: format!("the {} driver has no RSS redirection table", self.driver()),
        })
    }

    /// The RSS settings in use (DPDK's `rte_eth_dev_rss_hash_conf_get`
    /// and `rte_eth_dev_rss_reta_query`): the hashed headers, the key,
    /// and the redirection table as programmed ([`RssCaps::reta_size`]
    /// entries; empty where the device has none). An error for a port
    /// not configured or with no RSS of its own.
    fn rss_conf(&self) -> Result<RssConfig, Error> {
        Err(Error::Port {
            port: self.name().to_string(),
            detail: format!("the {} driver has no RSS of its own", self.driver()),
        })
    }

    /// Changes the hashed headers and, if `key` is given, the Toeplitz
    /// key (DPDK's `rte_eth_dev_rss_hash_update`), started or not, on a
    /// configuration that spreads frames by RSS
    /// ([`PortConfig::rss_on`]); each must be among what
    /// [`rss_caps`](Port::rss_caps) offers.
    fn set_rss_hash(&mut self, hash: RssHash, key: Option<[u8; 40]>) -> Result<(), Error> {
        let _ = (hash, key);
        Err(Error::Port {
            port: self.name().to_string(),
            detail: format!("the {} driver has no RSS of its own", self.driver()),
        })
    }

    /// Admits (`on`) or refuses tagged frames of VLAN `id` (0..=4095)
    /// when the port is configured with
    /// [`Offloads::RX_VLAN_FILTER`] (DPDK's `rte_eth_dev_vlan_filter`);
    /// the set may change while the port runs.
    fn set_vlan_filter(&mut self, id: u16, on: bool) -> Result<(), Error> {
        let _ = (id, on);
        Err(Error::Port {
            port: self.name().to_string(),
            detail: format!("the {} driver has no VLAN filter", self.driver()),
        })
    }

    /// Sets the MTU (bytes of L3 payload per frame).
    fn set_mtu(&mut self, mtu: u16) -> Result<(), Error>;

    /// The MTU.
    fn mtu(&self) -> u16;

    /// Basic counters since the last [`reset_stats`](Port::reset_stats).
    fn stats(&self) -> PortStats;

    /// Named counters: the basic ones per queue, plus driver-specific ones.
    fn xstats(&self) -> Vec<Xstat>;

    /// Zeroes the counters.
    fn reset_stats(&mut self);
}

/// The error of a port without per-queue start and stop.
fn no_queue_control<P: Port + ?Sized>(port: &P, q: u16) -> Error {
    Error::Port {
        port: port.name().to_string(),
        detail: format!(
            "queue {q}: the {} driver has no per-queue start and stop",
            port.driver()
        ),
    }
}

/// The flag a software port's queue handles check on every burst. On
/// lines of its own: a small allocation read per burst must not share a
/// line with something another core writes (the heap packs small
/// allocations together).
pub type LiveFlag = Arc<crossbeam_utils::CachePadded<std::sync::atomic::AtomicBool>>;
