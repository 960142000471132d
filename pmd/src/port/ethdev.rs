//! The generic port: what every driver shares, written once.
//!
//! DPDK's ethdev keeps a port's state machine, configuration checks,
//! statistics and receive modes in one layer over each driver's
//! `eth_dev_ops`. [`EthDev`] is that layer here: it implements [`Port`]
//! for any driver that implements the small [`Device`] trait, which holds
//! only what differs between drivers (its capabilities, how it starts its
//! queues, its link and address, how it filters, what counters it keeps
//! beyond the queues').
//!
//! What the layer owns:
//! - the state machine (opened, configured, started; configure and MTU
//!   changes refused while started, start refused before configure or
//!   twice), with the errors naming the port;
//! - the configuration, checked against the device's capabilities before
//!   the device sees it;
//! - the per-queue counters ([`StatsBlock`], one per configure), their
//!   sums with the device's own `imissed`, and resets by baseline;
//! - the start generation ([`LiveFlag`]): a stop silences the queue
//!   handles of the start before it, whoever holds them;
//! - the receive modes and MAC filter as the app set them, handed to the
//!   device whole so that it programs its filter in one step;
//! - the link, taken down while a queue has stopped trusting its device.
//!
//! The data path is untouched: the queues a device hands out at start are
//! the ones the app polls, with no layer in between.
use super::events::LinkEvents;
use super::stats::{PortStats, StatsBlock, Xstat};
use super::vlan::{VlanCounters, VlanSet};
use super::{
    Capabilities, DevArgs, Link, LiveFlag, MacAddr, Offloads, Port, PortConfig, Queues, RxStamp,
};
use crate::Error;
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

/// What a port receives besides frames to its own address and broadcast.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RxFilter {
    /// Every unicast frame, whatever its destination.
    pub promiscuous: bool,
    /// Every multicast frame.
    pub allmulticast: bool,
    /// Further unicast addresses received.
    pub unicast: Vec<MacAddr>,
    /// Further multicast groups received.
    pub multicast: Vec<MacAddr>,
}

impl RxFilter {
    /// The port's own address and broadcast only: what a hardware port
    /// with an address filter starts with ([`EthDev::with_filter`]).
    pub const OWN_ADDRESS: RxFilter = RxFilter {
        promiscuous: false,
        allmulticast: false,
        unicast: Vec::new(),
        multicast: Vec::new(),
    };
}

impl Default for RxFilter {
    /// Everything: software ports deliver every frame, and hardware ones
    /// start that way until the app narrows them.
    fn default() -> Self {
        RxFilter {
            promiscuous: true,
            allmulticast: true,
            unicast: Vec::new(),
            multicast: Vec::new(),
        }
    }
}

/// What a device's `start` is given to build its queues from.
pub struct StartContext<'a> {
    /// The device string the port was opened from, for errors.
    pub name: &'a str,
    /// The configuration in force, already checked against the device's
    /// capabilities.
    pub conf: &'a PortConfig,
    /// The counters of this configuration: `rx(q)` and `tx(q)` for each
    /// queue handle.
    pub stats: &'a StatsBlock,
    /// Each rx queue's live flag, by index: its handle checks it per
    /// burst and goes quiet while it is clear. The layer clears them all
    /// at a port stop, and one at that queue's stop; a queue whose start
    /// is deferred starts clear. A driver whose handles must know whether
    /// the *port* still runs (to park buffers its device may still write)
    /// keeps a flag of its own for that.
    pub rx_live: &'a [LiveFlag],
    /// Each tx queue's live flag, as `rx_live`.
    pub tx_live: &'a [LiveFlag],
    /// What to write into each received mbuf besides the frame.
    pub stamp: RxStamp,
}

/// The live flags of a start's queues, each on its own cache line (read
/// per burst by the lcore that owns the queue).
struct Gates {
    rx: Vec<LiveFlag>,
    tx: Vec<LiveFlag>,
}

impl Gates {
    /// Every queue live but those whose start `conf` defers.
    fn new(conf: &PortConfig) -> Self {
        let flags = |n: u16, deferred: &[u16]| {
            (0..n)
                .map(|q| Arc::new(CachePadded::new(AtomicBool::new(!deferred.contains(&q)))))
                .collect()
        };
        Gates {
            rx: flags(conf.rx_queues, &conf.rx_deferred),
            tx: flags(conf.tx_queues, &conf.tx_deferred),
        }
    }

    /// Silences every handle of the start.
    fn close(&self) {
        for f in self.rx.iter().chain(&self.tx) {
            f.store(false, Relaxed);
        }
    }
}

/// What a driver supplies to [`EthDev`]: only what differs between
/// devices. The defaults suit a software port that delivers every frame.
pub trait Device: Send {
    /// The driver's name (`"ring"`, `"virtio-net-pci"`, ...).
    fn driver(&self) -> &'static str;

    /// What the device can do.
    fn capabilities(&self) -> Capabilities;

    /// Takes the device-specific part of a configuration, which the layer
    /// has checked against [`capabilities`](Device::capabilities) (a
    /// device may refuse what they cannot express, naming the field).
    fn configure(&mut self, _name: &str, _conf: &PortConfig) -> Result<(), Error> {
        Ok(())
    }

    /// Brings the device up and hands out its queues.
    fn start(&mut self, ctx: StartContext<'_>) -> Result<Queues, Error>;

    /// Stops the device; the layer has cleared the live flag already.
    /// Called only on a started port, and when a started port is dropped.
    fn stop(&mut self, _name: &str) -> Result<(), Error> {
        Ok(())
    }

    /// The device's link; `started` says whether the port is.
    fn link(&self, started: bool) -> Link;

    /// The device's MAC address.
    fn mac_addr(&self) -> MacAddr;

    /// Whether the device filters by MAC address lists
    /// ([`Port::set_mac_filter`]); without one, setting lists (even
    /// empty ones) is an error.
    fn has_mac_filter(&self) -> bool {
        false
    }

    /// Programs the receive filter (modes and, on a device with a MAC
    /// filter, the address lists). The default accepts the modes: a
    /// software port delivers every frame and only records them.
    fn set_rx_filter(&mut self, _name: &str, _filter: &RxFilter) -> Result<(), Error> {
        Ok(())
    }

    /// The receive modes as the device itself reports them, for devices
    /// whose modes others can change (a kernel interface); `None` (the
    /// default) when the layer's record is the truth.
    fn rx_modes(&self) -> Option<(bool, bool)> {
        None
    }

    /// Admits (`on`) or stops admitting VLAN `id` in the device's own
    /// filter, for a device that offers `RX_VLAN_FILTER`; the layer keeps
    /// the set either way (its software filter serves the devices that
    /// do not). The default has nothing to program.
    fn set_vlan_filter(&mut self, _name: &str, _id: u16, _on: bool) -> Result<(), Error> {
        Ok(())
    }

    /// What the device's RSS offers (none by default); the layer checks
    /// a configuration's [`RssConfig`](super::RssConfig) against it.
    fn rss_caps(&self) -> super::RssCaps {
        super::RssCaps::default()
    }

    /// Programs a redirection table the layer checked (the device's size,
    /// configured queues), started or not.
    fn set_rss_reta(&mut self, name: &str, _reta: &[u16]) -> Result<(), Error> {
        Err(Error::Port {
            port: name.to_string(),
            detail: "this device has no RSS redirection table".into(),
        })
    }

    /// Programs RSS settings the layer checked (new hashed headers or
    /// key; the table as it was) on a running port that spreads frames
    /// by RSS over `rx_queues` queues. A stopped port takes them at its
    /// next start without the device being asked.
    fn set_rss_hash(
        &mut self,
        name: &str,
        _rss: &super::RssConfig,
        _rx_queues: u16,
    ) -> Result<(), Error> {
        Err(Error::Port {
            port: name.to_string(),
            detail: "this device takes RSS settings only while stopped".into(),
        })
    }

    /// Applies an MTU the layer checked against the capabilities;
    /// `started` says whether the port is running (devices whose buffers
    /// are sized by the MTU refuse then).
    fn set_mtu(&mut self, _name: &str, _mtu: u16, _started: bool) -> Result<(), Error> {
        Ok(())
    }

    /// The MTU as the device reports it, for devices whose MTU others can
    /// change; `None` (the default) when the layer's record is the truth.
    fn mtu(&self) -> Option<u16> {
        None
    }

    /// Frames the device dropped before any queue saw them, counted from
    /// whenever it likes (the layer subtracts its value at open and at
    /// each reset): the port's `imissed` beyond its queues'.
    fn missed(&self) -> u64 {
        0
    }

    /// Appends the device's own named counters after the queues'
    /// (`stats`, the queues' counters, for those derived from them).
    fn xstats(&self, _stats: &StatsBlock, _out: &mut Vec<Xstat>) {}

    /// Keeps `events` and raises it whenever the link may have changed
    /// for a reason other than the port's start and stop (which the layer
    /// raises itself): a frontend connecting, a cable pulled. Returns
    /// whether the device can; a device whose link follows only start and
    /// stop answers `true` and keeps nothing. The default says it cannot.
    /// An error is a device that can but failed to set it up.
    fn watch_link(&mut self, _name: &str, _events: &LinkEvents) -> Result<bool, Error> {
        Ok(false)
    }

    /// Why the link is down or the peer was dropped, when the device
    /// knows.
    fn last_error(&self) -> Option<String> {
        None
    }

    /// The firmware version, where the device has firmware.
    fn fw_version(&self) -> Option<String> {
        None
    }
}

/// A port: the generic layer over a driver's [`Device`].
pub struct EthDev<D: Device> {
    name: String,
    /// Stamped on received mbufs.
    port_id: u16,
    dev: D,
    conf: Option<PortConfig>,
    stats: StatsBlock,
    /// The queues' live flags of the running start; `None` while stopped.
    gates: Option<Gates>,
    filter: RxFilter,
    mtu: u16,
    /// The device's `missed` at open or the last reset.
    missed_base: u64,
    /// Offloads of the configuration done here, not by the device.
    soft: Offloads,
    /// The VLANs the software filter admits.
    vlans: Arc<VlanSet>,
    /// The software offloads' counters of the configuration.
    vlan_counters: VlanCounters,
    /// The link events, once an app asked for them.
    link_events: Option<LinkEvents>,
}

impl<D: Device> EthDev<D> {
    /// The port opened from `args` over `dev`, with MTU 1500 unless the
    /// device reports its own, receiving everything.
    pub fn new(args: &DevArgs, dev: D) -> Self {
        Self::named(args.raw(), args.port_id(), dev)
    }

    /// [`new`](Self::new) for a port opened without device arguments
    /// (tests, benches, a driver's own constructors).
    pub fn named(name: &str, port_id: u16, dev: D) -> Self {
        let missed_base = dev.missed();
        let mtu = dev.mtu().unwrap_or(1500);
        EthDev {
            name: name.to_string(),
            port_id,
            dev,
            conf: None,
            stats: StatsBlock::new(0, 0),
            gates: None,
            filter: RxFilter::default(),
            mtu,
            missed_base,
            soft: Offloads::NONE,
            vlans: Arc::default(),
            vlan_counters: VlanCounters::default(),
            link_events: None,
        }
    }

    /// Starts with `filter` recorded instead of the default (a device
    /// that starts out filtering).
    pub fn with_filter(mut self, filter: RxFilter) -> Self {
        self.filter = filter;
        self
    }

    /// The driver's device, for what only its own driver offers.
    pub fn device(&self) -> &D {
        &self.dev
    }

    /// The driver's device, mutably.
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.dev
    }

    /// Whether the port is started.
    pub fn is_started(&self) -> bool {
        self.gates.is_some()
    }

    fn err(&self, detail: &str) -> Error {
        Error::Port {
            port: self.name.clone(),
            detail: detail.to_string(),
        }
    }

    /// The configuration, if it spreads frames by the device's own RSS;
    /// else an error saying why there are no RSS settings to use.
    fn rss_in_use(&self, caps: &super::RssCaps) -> Result<&PortConfig, Error> {
        let bad = |detail: &str| Error::Config {
            port: self.name.clone(),
            what: "rss",
            detail: detail.into(),
        };
        if caps.hash.is_empty() {
            return Err(bad(
                "none of its own: this port spreads frames over its queues by its own rule",
            ));
        }
        match &self.conf {
            None => Err(bad("the port is not configured")),
            Some(c) if !c.rss_on() => Err(bad(
                "not in use: configure RX_RSS or several receive queues",
            )),
            Some(c) => Ok(c),
        }
    }

    /// The filter in force: the record, with the modes the device reports
    /// where it keeps its own.
    fn current_filter(&self) -> RxFilter {
        let mut f = self.filter.clone();
        if let Some((promiscuous, allmulticast)) = self.dev.rx_modes() {
            f.promiscuous = promiscuous;
            f.allmulticast = allmulticast;
        }
        f
    }

    /// Programs `filter`; the record changes only when the device took it.
    fn apply_filter(&mut self, filter: RxFilter) -> Result<(), Error> {
        self.dev.set_rx_filter(&self.name, &filter)?;
        self.filter = filter;
        Ok(())
    }

    /// Wraps the queues of a start in the software offloads the
    /// configuration asked for.
    fn wrap_soft(&self, q: Queues) -> Queues {
        if self.soft == Offloads::NONE {
            return q;
        }
        let strip = self.soft.contains(Offloads::RX_VLAN_STRIP);
        let filter = self
            .soft
            .contains(Offloads::RX_VLAN_FILTER)
            .then(|| self.vlans.clone());
        let c = &self.vlan_counters;
        let rx =
            q.rx.into_iter()
                .enumerate()
                .map(|(i, r)| c.wrap_rx(i, r, strip, filter.clone()))
                .collect();
        let tx = match self.soft.contains(Offloads::TX_VLAN_INSERT) {
            true => {
                q.tx.into_iter()
                    .enumerate()
                    .map(|(i, t)| c.wrap_tx(i, t))
                    .collect()
            }
            false => q.tx,
        };
        Queues::new(rx, tx)
    }

    /// Clears the live flags and stops the device, if started.
    fn halt(&mut self) -> Result<(), Error> {
        match self.gates.take() {
            Some(gates) => {
                gates.close();
                let stopped = self.dev.stop(&self.name);
                self.raise_link_event();
                stopped
            }
            None => Ok(()),
        }
    }

    fn raise_link_event(&self) {
        if let Some(e) = &self.link_events {
            e.raise();
        }
    }

    /// Starts (`on`) or stops queue `q` of a started port (`rx` or tx).
    fn set_queue(&mut self, rx: bool, q: u16, on: bool) -> Result<(), Error> {
        let what = if rx { "rx" } else { "tx" };
        let Some(gates) = &self.gates else {
            return Err(self.err(&format!(
                "{what} queue {q} start/stop on a stopped port; start the port first"
            )));
        };
        let flags = if rx { &gates.rx } else { &gates.tx };
        let Some(flag) = flags.get(q as usize) else {
            return Err(Error::Invalid {
                what: "queue",
                detail: format!(
                    "{}: {what} queue {q} does not exist: the port has {}",
                    self.name,
                    flags.len()
                ),
            });
        };
        flag.store(on, Relaxed);
        Ok(())
    }
}

impl<D: Device> Drop for EthDev<D> {
    fn drop(&mut self) {
        if let Err(e) = self.halt() {
            eprintln!("rpmd: warning: {}: stopping at close: {e}", self.name);
        }
    }
}

impl<D: Device> Port for EthDev<D> {
    fn driver(&self) -> &'static str {
        self.dev.driver()
    }

    fn name(&self) -> &str {
        &self.name
    }

    /// The device's capabilities and the offloads done in software.
    fn capabilities(&self) -> Capabilities {
        let mut caps = self.dev.capabilities();
        caps.offloads = caps.offloads | Offloads::SOFTWARE;
        caps
    }

    fn configure(&mut self, conf: &PortConfig) -> Result<(), Error> {
        if self.is_started() {
            return Err(self.err("configure while started; stop it first"));
        }
        conf.validate(&self.name, &self.capabilities())?;
        if conf.rx_queues > 1 || conf.offloads.contains(Offloads::RX_RSS) {
            conf.rss
                .validate(&self.name, &self.dev.rss_caps(), conf.rx_queues)?;
        }
        // The device sees only the offloads it offers itself.
        let soft = conf.offloads.minus(self.dev.capabilities().offloads);
        let conf = PortConfig {
            offloads: conf.offloads.minus(soft),
            ..conf.clone()
        };
        self.dev.configure(&self.name, &conf)?;
        if let Some(mtu) = conf.mtu {
            self.dev.set_mtu(&self.name, mtu, false)?;
            self.mtu = mtu;
        }
        self.stats = StatsBlock::new(conf.rx_queues, conf.tx_queues);
        self.vlan_counters = VlanCounters::new(conf.rx_queues, conf.tx_queues);
        self.soft = soft;
        self.conf = Some(conf);
        Ok(())
    }

    fn start(&mut self) -> Result<Queues, Error> {
        let Some(conf) = self.conf.as_ref() else {
            return Err(self.err("start before configure"));
        };
        if self.is_started() {
            return Err(self.err("already started"));
        }
        self.stats.clear_stopped();
        let gates = Gates::new(conf);
        let ctx = StartContext {
            name: &self.name,
            conf,
            stats: &self.stats,
            rx_live: &gates.rx,
            tx_live: &gates.tx,
            stamp: RxStamp::new(self.port_id, conf),
        };
        match self.dev.start(ctx) {
            Ok(q) => {
                self.gates = Some(gates);
                self.raise_link_event();
                Ok(self.wrap_soft(q))
            }
            Err(e) => {
                gates.close();
                Err(e)
            }
        }
    }

    fn link_events(&mut self) -> Result<LinkEvents, Error> {
        if let Some(e) = &self.link_events {
            return Ok(e.clone());
        }
        let events = LinkEvents::new()?;
        if !self.dev.watch_link(&self.name, &events)? {
            return Err(self.err(&format!(
                "the {} driver cannot see its link change; poll the link instead",
                self.dev.driver()
            )));
        }
        self.link_events = Some(events.clone());
        Ok(events)
    }

    fn rx_queue_start(&mut self, q: u16) -> Result<(), Error> {
        self.set_queue(true, q, true)
    }

    fn rx_queue_stop(&mut self, q: u16) -> Result<(), Error> {
        self.set_queue(true, q, false)
    }

    fn tx_queue_start(&mut self, q: u16) -> Result<(), Error> {
        self.set_queue(false, q, true)
    }

    fn tx_queue_stop(&mut self, q: u16) -> Result<(), Error> {
        self.set_queue(false, q, false)
    }

    fn stop(&mut self) -> Result<(), Error> {
        self.halt()
    }

    fn link(&self) -> Link {
        let mut link = self.dev.link(self.is_started());
        // A queue that stopped trusting its device takes the link down
        // until the port starts again.
        if self.stats.any_stopped() {
            link.up = false;
        }
        link
    }

    fn last_error(&self) -> Option<String> {
        self.dev.last_error()
    }

    fn fw_version(&self) -> Option<String> {
        self.dev.fw_version()
    }

    fn mac_addr(&self) -> MacAddr {
        self.dev.mac_addr()
    }

    fn set_promiscuous(&mut self, on: bool) -> Result<(), Error> {
        let filter = RxFilter {
            promiscuous: on,
            ..self.current_filter()
        };
        self.apply_filter(filter)
    }

    fn promiscuous(&self) -> bool {
        self.current_filter().promiscuous
    }

    fn set_allmulticast(&mut self, on: bool) -> Result<(), Error> {
        let filter = RxFilter {
            allmulticast: on,
            ..self.current_filter()
        };
        self.apply_filter(filter)
    }

    fn allmulticast(&self) -> bool {
        self.current_filter().allmulticast
    }

    fn set_mac_filter(&mut self, unicast: &[MacAddr], multicast: &[MacAddr]) -> Result<(), Error> {
        if !self.dev.has_mac_filter() {
            return Err(self.err(&format!(
                "the {} driver has no MAC address filter; use promiscuous mode",
                self.dev.driver()
            )));
        }
        if let Some(m) = multicast.iter().find(|m| !m.is_multicast()) {
            return Err(self.err(&format!("{m} in the multicast list is unicast")));
        }
        if let Some(m) = unicast.iter().find(|m| m.is_multicast()) {
            return Err(self.err(&format!("{m} in the unicast list is multicast")));
        }
        let filter = RxFilter {
            unicast: unicast.to_vec(),
            multicast: multicast.to_vec(),
            ..self.current_filter()
        };
        self.apply_filter(filter)
    }

    fn rss_caps(&self) -> super::RssCaps {
        self.dev.rss_caps()
    }

    fn set_rss_reta(&mut self, reta: &[u16]) -> Result<(), Error> {
        let caps = self.dev.rss_caps();
        let queues = self.conf.as_ref().map_or(0, |c| c.rx_queues);
        let bad = |detail: String| Error::Config {
            port: self.name.clone(),
            what: "rss",
            detail,
        };
        if reta.is_empty() {
            return Err(bad("an empty redirection table".into()));
        }
        super::RssConfig::check_reta(reta, &caps, queues).map_err(bad)?;
        self.dev.set_rss_reta(&self.name, reta)?;
        if let Some(c) = self.conf.as_mut() {
            c.rss.reta = reta.to_vec();
        }
        Ok(())
    }

    fn rss_conf(&self) -> Result<super::RssConfig, Error> {
        let caps = self.dev.rss_caps();
        let conf = self.rss_in_use(&caps)?;
        let mut rss = conf.rss.clone();
        rss.reta = match caps.reta_size {
            0 => Vec::new(),
            size => rss.table(size, conf.rx_queues),
        };
        Ok(rss)
    }

    fn set_rss_hash(&mut self, hash: super::RssHash, key: Option<[u8; 40]>) -> Result<(), Error> {
        let caps = self.dev.rss_caps();
        let conf = self.rss_in_use(&caps)?;
        let rss = super::RssConfig {
            hash,
            key: key.unwrap_or(conf.rss.key),
            reta: conf.rss.reta.clone(),
        };
        let queues = conf.rx_queues;
        rss.validate(&self.name, &caps, queues)?;
        if self.is_started() {
            self.dev.set_rss_hash(&self.name, &rss, queues)?;
        }
        if let Some(c) = self.conf.as_mut() {
            c.rss = rss;
        }
        Ok(())
    }

    fn set_vlan_filter(&mut self, id: u16, on: bool) -> Result<(), Error> {
        if id > 4095 {
            return Err(Error::Config {
                port: self.name.clone(),
                what: "VLAN id",
                detail: format!("{id}; VLAN ids are 0..=4095"),
            });
        }
        self.dev.set_vlan_filter(&self.name, id, on)?;
        self.vlans.set(id, on);
        Ok(())
    }

    fn set_mtu(&mut self, mtu: u16) -> Result<(), Error> {
        self.dev.capabilities().check_mtu(&self.name, mtu)?;
        self.dev.set_mtu(&self.name, mtu, self.is_started())?;
        self.mtu = mtu;
        Ok(())
    }

    fn mtu(&self) -> u16 {
        self.dev.mtu().unwrap_or(self.mtu)
    }

    fn stats(&self) -> PortStats {
        let mut s = self.stats.stats();
        s.imissed += self.dev.missed().saturating_sub(self.missed_base);
        s.oerrors += self.vlan_counters.tx_errors();
        s
    }

    fn xstats(&self) -> Vec<Xstat> {
        let mut x = self.stats.xstats();
        if self.soft != Offloads::NONE {
            self.vlan_counters.xstats(&mut x);
        }
        self.dev.xstats(&self.stats, &mut x);
        x
    }

    fn reset_stats(&mut self) {
        self.stats.reset();
        self.vlan_counters.reset();
        self.missed_base = self.dev.missed();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::{Offloads, Pkts, RssHash, RxQueue, TxQueue};
    use std::sync::atomic::AtomicU64;
    use std::sync::Mutex;

    /// What a test device was asked to do, seen from the test.
    #[derive(Default)]
    struct Seen {
        starts: AtomicU64,
        stops: AtomicU64,
        missed: AtomicU64,
        filters: Mutex<Vec<RxFilter>>,
        rss_sets: Mutex<Vec<crate::port::RssConfig>>,
    }

    /// A device with one queue each way whose rx queue counts a frame
    /// per burst while live; it can refuse filters and MTU changes.
    struct TestDevice {
        seen: Arc<Seen>,
        mac_filter: bool,
        refuse_filters: bool,
        modes: Option<(bool, bool)>,
        /// Toeplitz over IPv4 and IPv4/TCP, a key, an 8-entry table.
        rss: bool,
    }

    struct CountingRx {
        live: LiveFlag,
        stats: Arc<CachePadded<crate::port::QueueStats>>,
    }

    impl RxQueue for CountingRx {
        fn rx_burst(&mut self, _out: &mut Pkts, _max: usize) -> usize {
            if !self.live.load(Relaxed) {
                return 0;
            }
            self.stats.packets.add(1);
            1
        }
    }

    struct NoTx;

    impl TxQueue for NoTx {
        fn tx_burst(&mut self, _pkts: &mut Pkts) -> usize {
            0
        }
    }

    impl Device for TestDevice {
        fn driver(&self) -> &'static str {
            "test"
        }
        fn capabilities(&self) -> Capabilities {
            Capabilities {
                max_rx_queues: 2,
                max_tx_queues: 2,
                min_desc: 1,
                max_desc: 4096,
                desc_pow2: false,
                offloads: Offloads::NONE,
                min_mtu: 68,
                max_mtu: 9000,
                rx_interrupts: false,
                needs_rx_pool: false,
            }
        }
        fn start(&mut self, ctx: StartContext<'_>) -> Result<Queues, Error> {
            self.seen.starts.fetch_add(1, Relaxed);
            let rx = (0..ctx.conf.rx_queues as usize)
                .map(|q| {
                    Box::new(CountingRx {
                        live: ctx.rx_live[q].clone(),
                        stats: ctx.stats.rx(q),
                    }) as Box<dyn RxQueue>
                })
                .collect();
            let tx = (0..ctx.conf.tx_queues)
                .map(|_| Box::new(NoTx) as Box<dyn TxQueue>)
                .collect();
            Ok(Queues::new(rx, tx))
        }
        fn stop(&mut self, _name: &str) -> Result<(), Error> {
            self.seen.stops.fetch_add(1, Relaxed);
            Ok(())
        }
        fn link(&self, started: bool) -> Link {
            Link {
                up: started,
                speed_mbps: 1000,
                full_duplex: true,
            }
        }
        fn mac_addr(&self) -> MacAddr {
            MacAddr::local(7)
        }
        fn has_mac_filter(&self) -> bool {
            self.mac_filter
        }
        fn set_rx_filter(&mut self, name: &str, filter: &RxFilter) -> Result<(), Error> {
            if self.refuse_filters {
                return Err(Error::Port {
                    port: name.into(),
                    detail: "refused".into(),
                });
            }
            self.seen.filters.lock().unwrap().push(filter.clone());
            Ok(())
        }
        fn rx_modes(&self) -> Option<(bool, bool)> {
            self.modes
        }
        fn set_mtu(&mut self, name: &str, _mtu: u16, started: bool) -> Result<(), Error> {
            match started {
                true => Err(Error::Port {
                    port: name.into(),
                    detail: "not while started".into(),
                }),
                false => Ok(()),
            }
        }
        fn missed(&self) -> u64 {
            self.seen.missed.load(Relaxed)
        }
        fn rss_caps(&self) -> crate::port::RssCaps {
            match self.rss {
                true => crate::port::RssCaps {
                    hash: RssHash::IPV4 | RssHash::IPV4_TCP,
                    reta_size: 8,
                    key: true,
                },
                false => crate::port::RssCaps::default(),
            }
        }
        fn set_rss_hash(
            &mut self,
            _name: &str,
            rss: &crate::port::RssConfig,
            _rx_queues: u16,
        ) -> Result<(), Error> {
            self.seen.rss_sets.lock().unwrap().push(rss.clone());
            Ok(())
        }
    }

    fn port() -> (EthDev<TestDevice>, Arc<Seen>) {
        port_after(0)
    }

    /// A port over a device that had dropped `missed` frames before.
    fn port_after(missed: u64) -> (EthDev<TestDevice>, Arc<Seen>) {
        let seen = Arc::new(Seen::default());
        seen.missed.store(missed, Relaxed);
        let dev = TestDevice {
            seen: seen.clone(),
            mac_filter: false,
            refuse_filters: false,
            modes: None,
            rss: false,
        };
        (EthDev::named("test0", 3, dev), seen)
    }

    fn detail(e: Error) -> String {
        e.to_string()
    }

    /// Configure, start and stop in DPDK's order; out of order is an error
    /// naming the port, and a stop silences the handles it handed out.
    #[test]
    fn the_state_machine_refuses_what_is_out_of_order() {
        let (mut p, seen) = port();
        assert!(detail(p.start().unwrap_err()).contains("start before configure"));
        let bad = PortConfig {
            rx_queues: 3,
            ..PortConfig::default()
        };
        assert!(detail(p.configure(&bad).unwrap_err()).contains("rx_queues"));
        p.configure(&PortConfig::default()).unwrap();
        let mut q = p.start().unwrap();
        assert!(p.link().up);
        assert!(detail(p.start().unwrap_err()).contains("already started"));
        assert!(detail(p.configure(&PortConfig::default()).unwrap_err()).contains("stop it first"));
        let mut burst = Pkts::new();
        assert_eq!(q.rx_burst(0, &mut burst, 32), 1);
        p.stop().unwrap();
        assert_eq!(q.rx_burst(0, &mut burst, 32), 0, "a stopped start's handle");
        assert!(!p.link().up);
        p.stop().unwrap();
        assert_eq!(
            seen.stops.load(Relaxed),
            1,
            "a second stop reaches no device"
        );
        let mut q2 = p.start().unwrap();
        assert_eq!(q2.rx_burst(0, &mut burst, 32), 1);
        assert_eq!(q.rx_burst(0, &mut burst, 32), 0, "the old start's handle");
        drop(p);
        assert_eq!(
            seen.stops.load(Relaxed),
            2,
            "dropping a started port stops it"
        );
        assert_eq!(q2.rx_burst(0, &mut burst, 32), 0);
    }

    /// Counters live per configuration and survive a restart; `imissed`
    /// adds what the device dropped since open or the last reset.
    #[test]
    fn stats_sum_the_queues_and_the_device_and_reset_by_baseline() {
        let (mut p, seen) = port_after(100);
        p.configure(&PortConfig::default()).unwrap();
        let mut q = p.start().unwrap();
        let mut burst = Pkts::new();
        q.rx_burst(0, &mut burst, 32);
        seen.missed.store(105, Relaxed);
        assert_eq!((p.stats().ipackets, p.stats().imissed), (1, 5));
        p.stop().unwrap();
        let mut q = p.start().unwrap();
        q.rx_burst(0, &mut burst, 32);
        assert_eq!(p.stats().ipackets, 2, "a restart keeps the counters");
        assert!(p
            .xstats()
            .iter()
            .any(|x| x.name == "rx_q0_packets" && x.value == 2));
        p.reset_stats();
        assert_eq!(p.stats(), PortStats::default());
        seen.missed.store(107, Relaxed);
        assert_eq!(p.stats().imissed, 2);
        p.stop().unwrap();
        p.configure(&PortConfig::default()).unwrap();
        assert_eq!(p.stats().ipackets, 0, "a new configuration counts afresh");
    }

    /// The link goes down while a queue has stopped trusting its device,
    /// and comes back with the next start.
    #[test]
    fn a_stopped_queue_takes_the_link_down_until_the_next_start() {
        let (mut p, _) = port();
        p.configure(&PortConfig::default()).unwrap();
        let _q = p.start().unwrap();
        p.stats.rx(0).stopped.store(true, Relaxed);
        assert!(!p.link().up);
        p.stop().unwrap();
        let _q = p.start().unwrap();
        assert!(p.link().up);
    }

    /// Modes and lists reach the device whole; what it refuses leaves the
    /// record as it was; lists need a device with a MAC filter and
    /// addresses of the right kind.
    #[test]
    fn the_receive_filter_reaches_the_device_whole_or_not_at_all() {
        let (mut p, seen) = port();
        assert!(p.promiscuous() && p.allmulticast());
        p.set_promiscuous(false).unwrap();
        assert!(!p.promiscuous() && p.allmulticast());
        let e = detail(p.set_mac_filter(&[], &[]).unwrap_err());
        assert!(e.contains("no MAC address filter"), "{e}");
        p.dev.mac_filter = true;
        let group = MacAddr([0x01, 0, 0x5e, 0, 0, 1]);
        let other = MacAddr::local(9);
        p.set_mac_filter(&[other], &[group]).unwrap();
        let last = seen.filters.lock().unwrap().last().cloned().unwrap();
        assert_eq!(
            last,
            RxFilter {
                promiscuous: false,
                allmulticast: true,
                unicast: vec![other],
                multicast: vec![group],
            }
        );
        assert!(detail(p.set_mac_filter(&[group], &[]).unwrap_err()).contains("is multicast"));
        assert!(detail(p.set_mac_filter(&[], &[other]).unwrap_err()).contains("is unicast"));
        p.dev.refuse_filters = true;
        assert!(p.set_allmulticast(false).is_err());
        assert!(p.allmulticast(), "a refused change is not recorded");
        // A device that keeps its own modes is the truth, and a change
        // starts from them.
        p.dev.refuse_filters = false;
        p.dev.modes = Some((true, false));
        assert!(p.promiscuous() && !p.allmulticast());
        p.set_promiscuous(false).unwrap();
        let last = seen.filters.lock().unwrap().last().cloned().unwrap();
        assert!(!last.promiscuous && !last.allmulticast);
    }

    /// The MTU is checked against the capabilities before the device sees
    /// it, and a device may refuse it while started.
    #[test]
    fn the_mtu_is_checked_then_applied() {
        let (mut p, _) = port();
        assert_eq!(p.mtu(), 1500);
        assert!(detail(p.set_mtu(9001).unwrap_err()).contains("mtu"));
        p.set_mtu(9000).unwrap();
        assert_eq!(p.mtu(), 9000);
        let conf = PortConfig {
            mtu: Some(2000),
            ..PortConfig::default()
        };
        p.configure(&conf).unwrap();
        assert_eq!(p.mtu(), 2000);
        let _q = p.start().unwrap();
        assert!(detail(p.set_mtu(1500).unwrap_err()).contains("not while started"));
        assert_eq!(p.mtu(), 2000);
    }

    /// RSS settings are queried as programmed and changed started or
    /// not (DPDK's rss_hash_conf_get, reta_query and rss_hash_update):
    /// the device is asked only while running, the record keeps the
    /// change across a restart, and a hash, key or port that cannot take
    /// it is refused by name.
    #[test]
    fn rss_settings_are_queried_and_updated_started_or_not() {
        let (mut p, seen) = port();
        p.dev.rss = true;
        assert!(detail(p.rss_conf().unwrap_err()).contains("not configured"));
        p.configure(&PortConfig::default()).unwrap();
        let e = p.set_rss_hash(RssHash::IPV4, None).unwrap_err();
        assert!(detail(e).contains("not in use"));
        let conf = PortConfig {
            rx_queues: 2,
            rss: crate::port::RssConfig {
                hash: RssHash::IPV4,
                ..Default::default()
            },
            ..PortConfig::default()
        };
        p.configure(&conf).unwrap();
        let rss = p.rss_conf().unwrap();
        assert_eq!(rss.hash, RssHash::IPV4);
        assert_eq!(rss.key, crate::net::rss::RSS_KEY);
        assert_eq!(
            rss.reta,
            [0, 1, 0, 1, 0, 1, 0, 1],
            "the table as programmed"
        );
        // Stopped: recorded, the device not asked.
        p.set_rss_hash(RssHash::IPV4_TCP, Some([7; 40])).unwrap();
        assert!(seen.rss_sets.lock().unwrap().is_empty());
        let q = p.start().unwrap();
        // Started: the device asked, the key kept when none is given.
        p.set_rss_hash(RssHash::IPV4 | RssHash::IPV4_TCP, None)
            .unwrap();
        let sets = seen.rss_sets.lock().unwrap().clone();
        assert_eq!(sets.len(), 1);
        assert_eq!(
            (sets[0].hash, sets[0].key),
            (RssHash::IPV4 | RssHash::IPV4_TCP, [7; 40])
        );
        let e = p.set_rss_hash(RssHash::IPV6, None).unwrap_err();
        assert!(detail(e).contains("ipv6"), "a hash the device lacks");
        assert_eq!(
            p.rss_conf().unwrap().hash,
            RssHash::IPV4 | RssHash::IPV4_TCP
        );
        drop(q);
        p.stop().unwrap();
        let _q = p.start().unwrap();
        assert_eq!(p.rss_conf().unwrap().key, [7; 40], "kept across a restart");
        // A port with no RSS of its own has no settings to show or change.
        let (mut plain, _) = port();
        plain.configure(&conf_two_queues()).unwrap();
        assert!(detail(plain.rss_conf().unwrap_err()).contains("its own rule"));
        assert!(plain.set_rss_hash(RssHash::IPV4, None).is_err());
    }

    fn conf_two_queues() -> PortConfig {
        PortConfig {
            rx_queues: 2,
            ..PortConfig::default()
        }
    }
}
