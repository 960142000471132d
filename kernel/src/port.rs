//! The port shell the three kernel-attached kinds share: the control path
//! answers from the kernel's interface (link, MAC, flags, MTU) and the
//! per-queue counters; each kind supplies its queues ([`Backend`]).
use crate::netdev::Netdev;
use crossbeam_utils::CachePadded;
use rpmd_pmd::port::stats::StatsBlock;
use rpmd_pmd::port::{
    Capabilities, DevArgs, Link, MacAddr, Port, PortConfig, PortStats, Queues, RxStamp, Xstat,
};
use rpmd_pmd::Error;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The flag every queue handle checks per burst: cleared by stop, so old
/// handles go quiet. On a line of its own (read per burst by the lcore).
pub(crate) type Live = Arc<CachePadded<AtomicBool>>;

/// What a port kind adds to the shell.
pub(crate) trait Backend: Send {
    /// The driver name (`af_xdp`, `af_packet`, `tap`).
    fn driver(&self) -> &'static str;
    /// Queue limits and offloads for `dev`.
    fn capabilities(&self, dev: &Netdev) -> Capabilities;
    /// Builds the queues of a start.
    fn start(
        &mut self,
        port: &str,
        dev: &Netdev,
        conf: &PortConfig,
        stats: &StatsBlock,
        live: &Live,
        stamp: RxStamp,
    ) -> Result<Queues, Error>;
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

/// A kernel-attached port.
pub(crate) struct KernelPort<B: Backend> {
    pub(crate) name: String,
    /// Stamped on received mbufs.
    port_id: u16,
    pub(crate) dev: Netdev,
    pub(crate) backend: B,
    conf: Option<PortConfig>,
    stats: StatsBlock,
    live: Option<Live>,
    /// The backend's `missed` at the last `reset_stats`.
    missed_base: u64,
}

impl<B: Backend> KernelPort<B> {
    pub(crate) fn new(args: &DevArgs, dev: Netdev, backend: B) -> Self {
        // Counted from here: a TAP that existed before has its own past.
        let missed_base = backend.missed(&dev);
        KernelPort {
            name: args.raw().into(),
            port_id: args.port_id(),
            dev,
            backend,
            conf: None,
            stats: StatsBlock::new(0, 0),
            live: None,
            missed_base,
        }
    }

    fn err(&self, detail: impl Into<String>) -> Error {
        Error::Port {
            port: self.name.clone(),
            detail: detail.into(),
        }
    }

    fn halt(&mut self) {
        if let Some(l) = self.live.take() {
            l.store(false, Ordering::Relaxed);
            self.backend.stop(&self.dev);
        }
    }
}

impl<B: Backend> Drop for KernelPort<B> {
    fn drop(&mut self) {
        self.halt();
    }
}

/// The largest frame an MTU admits: Ethernet header and one VLAN tag.
pub(crate) fn frame_len(mtu: u16) -> usize {
    mtu as usize + 14 + 4
}

impl<B: Backend> Port for KernelPort<B> {
    fn driver(&self) -> &'static str {
        self.backend.driver()
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        self.backend.capabilities(&self.dev)
    }

    fn configure(&mut self, conf: &PortConfig) -> Result<(), Error> {
        if self.live.is_some() {
            return Err(self.err("configure while started; stop it first"));
        }
        conf.validate(&self.name, &self.capabilities())?;
        if let Some(m) = conf.mtu {
            self.set_mtu(m)?;
        }
        self.stats = StatsBlock::new(conf.rx_queues, conf.tx_queues);
        self.conf = Some(conf.clone());
        Ok(())
    }

    fn start(&mut self) -> Result<Queues, Error> {
        let Some(conf) = self.conf.clone() else {
            return Err(self.err("start before configure"));
        };
        if self.live.is_some() {
            return Err(self.err("already started"));
        }
        let live: Live = Arc::new(CachePadded::new(AtomicBool::new(true)));
        let stamp = RxStamp::new(self.port_id, &conf);
        let q = self
            .backend
            .start(&self.name, &self.dev, &conf, &self.stats, &live, stamp)?;
        self.live = Some(live);
        Ok(q)
    }

    fn stop(&mut self) -> Result<(), Error> {
        self.halt();
        Ok(())
    }

    fn link(&self) -> Link {
        let mut l = self.dev.link();
        l.up &= self.live.is_some();
        l
    }

    fn last_error(&self) -> Option<String> {
        self.dev.gone()
    }

    fn mac_addr(&self) -> MacAddr {
        self.dev.mac()
    }

    fn set_promiscuous(&mut self, on: bool) -> Result<(), Error> {
        self.dev.set_flag(libc::IFF_PROMISC, on)
    }

    fn promiscuous(&self) -> bool {
        self.dev.has_flag(libc::IFF_PROMISC)
    }

    fn set_allmulticast(&mut self, on: bool) -> Result<(), Error> {
        self.dev.set_flag(libc::IFF_ALLMULTI, on)
    }

    fn allmulticast(&self) -> bool {
        self.dev.has_flag(libc::IFF_ALLMULTI)
    }

    fn set_mtu(&mut self, mtu: u16) -> Result<(), Error> {
        self.capabilities().check_mtu(&self.name, mtu)?;
        if self.live.is_some() {
            return Err(
                self.err("MTU change while started; stop it first (queue buffers are sized by it)")
            );
        }
        self.dev.set_mtu(mtu)
    }

    fn mtu(&self) -> u16 {
        self.dev.mtu().unwrap_or(0)
    }

    fn stats(&self) -> PortStats {
        let mut s = self.stats.stats();
        s.imissed += self
            .backend
            .missed(&self.dev)
            .saturating_sub(self.missed_base);
        s
    }

    fn xstats(&self) -> Vec<Xstat> {
        let mut x = self.stats.xstats();
        self.backend.xstats(&mut x);
        x.extend(self.dev.kernel_xstats());
        x
    }

    fn reset_stats(&mut self) {
        self.stats.reset();
        self.missed_base = self.backend.missed(&self.dev);
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
