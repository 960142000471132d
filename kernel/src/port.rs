//! The device the three kernel-attached kinds share under the generic
//! port ([`EthDev`]): the control path answers from the kernel's
//! interface (link, MAC, flags, MTU, the kernel's drop counters); each
//! kind supplies its queues ([`Backend`]).
use crate::linkwatch::LinkWatch;
use crate::netdev::Netdev;
use rpmd_pmd::port::features::{Declared, Feature, Support};
use rpmd_pmd::port::stats::StatsBlock;
use rpmd_pmd::port::{
    Capabilities, DevArgs, Device, EthDev, Link, LinkEvents, LiveFlag, MacAddr, PortConfig, Queues,
    RxFilter, StartContext, Xstat,
};
use rpmd_pmd::Error;

/// The flag every queue handle checks per burst: cleared by stop, so old
/// handles go quiet. On a line of its own (read per burst by the lcore).
pub(crate) type Live = LiveFlag;

/// What a port kind adds to the shell.
pub(crate) trait Backend: Send {
    /// The driver name (`af_xdp`, `af_packet`, `tap`).
    fn driver(&self) -> &'static str;
    /// Queue limits and offloads for `dev`.
    fn capabilities(&self, dev: &Netdev) -> Capabilities;
    /// Builds the queues of a start.
    fn start(&mut self, dev: &Netdev, ctx: &StartContext<'_>) -> Result<Queues, Error>;
    /// Undoes what start set up in the kernel beyond the queues (which
    /// their handles own).
    fn stop(&mut self, _dev: &Netdev) {}
    /// The kernel's own counters for this port's sockets.
    fn xstats(&self, _out: &mut Vec<Xstat>) {}
    /// Frames the kernel dropped on their way to this port's sockets
    /// since they opened (their rings full, no buffers posted): the
    /// port's `imissed`, as DPDK's net_af_packet and net_af_xdp report.
    fn missed(&self, _dev: &Netdev) -> u64 {
        0
    }
}

/// A kernel-attached device: the interface and the kind's sockets.
pub(crate) struct KernelDevice<B: Backend> {
    pub(crate) dev: Netdev,
    pub(crate) backend: B,
    /// The kernel's link notices for this interface, once asked for.
    link_watch: Option<LinkWatch>,
}

/// The port over a kernel interface `dev` and a kind's `backend`.
pub(crate) fn kernel_port<B: Backend>(
    args: &DevArgs,
    dev: Netdev,
    backend: B,
) -> EthDev<KernelDevice<B>> {
    // The layer counts `imissed` from here: a TAP that existed before has
    // its own past.
    EthDev::new(
        args,
        KernelDevice {
            dev,
            backend,
            link_watch: None,
        },
    )
}

/// What the three kernel-attached kinds declare beyond the generic port.
pub(crate) const KERNEL_FEATURES: &[Declared] = &[
    (Feature::LinkStatusEvent, Support::Yes),
    (Feature::RxInterrupt, Support::Yes),
    (Feature::MultiSegmentTx, Support::Yes),
    (
        Feature::PromiscuousMode,
        Support::Partial(
            "sets the interface's flag; what it filters is up to the interface's driver",
        ),
    ),
    (
        Feature::AllmulticastMode,
        Support::Partial(
            "sets the interface's flag; what it filters is up to the interface's driver",
        ),
    ),
];

/// The largest frame an MTU admits: Ethernet header and one VLAN tag.
pub(crate) fn frame_len(mtu: u16) -> usize {
    mtu as usize + 14 + 4
}

impl<B: Backend> Device for KernelDevice<B> {
    fn driver(&self) -> &'static str {
        self.backend.driver()
    }

    fn capabilities(&self) -> Capabilities {
        self.backend.capabilities(&self.dev)
    }

    fn start(&mut self, ctx: StartContext<'_>) -> Result<Queues, Error> {
        self.backend.start(&self.dev, &ctx)
    }

    fn stop(&mut self, _name: &str) -> Result<(), Error> {
        self.backend.stop(&self.dev);
        Ok(())
    }

    fn link(&self, started: bool) -> Link {
        let mut l = self.dev.link();
        l.up &= started;
        l
    }

    fn last_error(&self) -> Option<String> {
        self.dev.gone()
    }

    /// Raised from rtnetlink's link notices about the interface (carrier,
    /// flags, deletion).
    fn watch_link(&mut self, name: &str, events: &LinkEvents) -> Result<bool, Error> {
        self.link_watch = Some(LinkWatch::start(name, self.dev.ifindex, events.clone())?);
        Ok(true)
    }

    fn mac_addr(&self) -> MacAddr {
        self.dev.mac()
    }

    fn set_rx_filter(&mut self, _name: &str, filter: &RxFilter) -> Result<(), Error> {
        self.dev.set_flag(libc::IFF_PROMISC, filter.promiscuous)?;
        self.dev.set_flag(libc::IFF_ALLMULTI, filter.allmulticast)
    }

    fn rx_modes(&self) -> Option<(bool, bool)> {
        Some((
            self.dev.has_flag(libc::IFF_PROMISC),
            self.dev.has_flag(libc::IFF_ALLMULTI),
        ))
    }

    fn set_mtu(&mut self, name: &str, mtu: u16, started: bool) -> Result<(), Error> {
        if started {
            return Err(Error::Port {
                port: name.to_string(),
                detail: "MTU change while started; stop it first (queue buffers are sized by it)"
                    .into(),
            });
        }
        self.dev.set_mtu(mtu)
    }

    fn mtu(&self) -> Option<u16> {
        Some(self.dev.mtu().unwrap_or(0))
    }

    fn missed(&self) -> u64 {
        self.backend.missed(&self.dev)
    }

    fn xstats(&self, _stats: &StatsBlock, out: &mut Vec<Xstat>) {
        self.backend.xstats(out);
        out.extend(self.dev.kernel_xstats());
    }
}

/// The rx pool a start needs, or the error saying so.
pub(crate) fn rx_pool(port: &str, conf: &PortConfig) -> Result<rpmd_pmd::Mempool, Error> {
    conf.rx_pool.clone().ok_or_else(|| Error::Config {
        port: port.into(),
        what: "rx_pool",
        detail: "this port needs a mempool for receive buffers".into(),
    })
}

/// The capabilities of a port that copies frames between kernel memory
/// and mbufs (af_packet, tap): any ring depth, chains on TX, rx
/// interrupts through the socket or TAP fd.
pub(crate) fn copying_port_caps(queues: u16) -> Capabilities {
    Capabilities {
        max_rx_queues: queues,
        max_tx_queues: queues,
        min_desc: 1,
        max_desc: u16::MAX,
        desc_pow2: false,
        offloads: rpmd_pmd::port::Offloads::TX_MULTI_SEGS,
        min_mtu: 68,
        max_mtu: 9000,
        rx_interrupts: true,
        needs_rx_pool: true,
    }
}

/// A copying port's rx pool, whose data room must hold a frame of the
/// interface's MTU.
pub(crate) fn copy_rx_pool(
    port: &str,
    dev: &Netdev,
    conf: &PortConfig,
) -> Result<rpmd_pmd::Mempool, Error> {
    let pool = rx_pool(port, conf)?;
    check_room(port, dev, pool.data_room(), "an rx mbuf's data room")?;
    Ok(pool)
}

/// Checks that a frame of the interface's MTU fits `room` bytes of an
/// mbuf, with the error a user can act on.
fn check_room(port: &str, dev: &Netdev, room: usize, what: &str) -> Result<(), Error> {
    let mtu = dev.mtu()?;
    if frame_len(mtu) > room {
        return Err(Error::Config {
            port: port.into(),
            what: "MTU",
            detail: format!(
                "{} has MTU {mtu}: frames of up to {} bytes do not fit the {room} bytes of {what}; lower it (ip link set dev {} mtu {}) or use a pool with a larger data room",
                dev.name,
                frame_len(mtu),
                dev.name,
                room.saturating_sub(18)
            ),
        });
    }
    Ok(())
}
