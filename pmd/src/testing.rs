//! Test support: a loopback port and a fault-injecting wrapper around any
//! port. Not for production paths; they exist so that the layers above
//! (run loop, apps) can be tested against misbehaving ports.
//!
//! - [`LoopbackDriver`] (`loopback[,queues=N][,size=N]`): what a port sends
//!   on tx queue q comes back on its own rx queue q.
//! - [`Faulty`]: wraps a port and, as the shared [`Faults`] switches say,
//!   fails `configure` or `start`, reports the link down, accepts only part
//!   of each tx burst, or drops every k-th received packet (counted in
//!   `ierrors`, the mbuf returned to its pool).
//! - [`missing_peer`] and [`missing_capability`]: how a test that cannot
//!   run here says so, in a form the test command counts.
//! - [`linux_source`]: definitions a driver transcribed, held against
//!   Linux's own, extracted from Debian's `linux-source` at test time.
pub mod linux_source;

use crate::port::ethdev::EthDev;
use crate::port::ring::RingDevice;
use crate::port::{
    Capabilities, DevArgs, Driver, Link, MacAddr, Pkts, Port, PortConfig, PortStats, Queues,
    RxQueue, TxQueue, Xstat,
};
use crate::Error;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// The `loopback` driver (register it in a [`Registry`](crate::Registry)).
pub struct LoopbackDriver;

impl Driver for LoopbackDriver {
    fn kind(&self) -> &'static str {
        "loopback"
    }

    fn usage(&self) -> &'static str {
        "loopback[,queues=N][,size=N]  (tests) tx queue q comes back on rx queue q"
    }

    fn check(&self, args: &DevArgs) -> Result<(), Error> {
        args.no_target()?;
        args.only_options(&["queues", "size"])?;
        args.opt_u64("queues", 1)?;
        args.opt_u64("size", 1024).map(drop)
    }

    fn open(&self, args: &DevArgs, _: &crate::DmaDomain) -> Result<Box<dyn Port>, Error> {
        self.check(args)?;
        let queues = args.opt_u64("queues", 1)?.clamp(1, 16) as usize;
        let size = args.opt_u64("size", 1024)?;
        let dev = RingDevice::looped(args.raw(), queues, size as usize)?;
        Ok(Box::new(EthDev::new(args, dev)))
    }
}

/// Fault switches shared between a test and a [`Faulty`] port; change them
/// at any time.
#[derive(Debug, Default)]
pub struct Faults {
    /// The next `configure` fails.
    pub fail_configure: AtomicBool,
    /// The next `start` fails.
    pub fail_start: AtomicBool,
    /// The link reads as down.
    pub link_down: AtomicBool,
    /// Each tx burst takes at most this many mbufs (0 = no limit).
    pub tx_limit: AtomicU32,
    /// Every k-th received packet is dropped (0 = none).
    pub rx_drop_every: AtomicU32,
    /// Packets dropped by `rx_drop_every`.
    pub rx_dropped: AtomicU64,
}

/// A port with injected faults.
pub struct Faulty {
    inner: Box<dyn Port>,
    faults: Arc<Faults>,
}

impl Faulty {
    /// Wraps `inner`; the faults come from `faults`.
    pub fn wrap(inner: Box<dyn Port>, faults: Arc<Faults>) -> Self {
        Faulty { inner, faults }
    }

    fn injected(&self, what: &str) -> Error {
        Error::Port {
            port: self.inner.name().to_string(),
            detail: format!("injected {what} failure"),
        }
    }
}

struct FaultyRx {
    inner: Box<dyn RxQueue>,
    faults: Arc<Faults>,
    seen: u32,
}

impl RxQueue for FaultyRx {
    fn rx_burst(&mut self, out: &mut Pkts, max: usize) -> usize {
        let before = out.len();
        self.inner.rx_burst(out, max);
        let every = self.faults.rx_drop_every.load(Relaxed);
        if every == 0 {
            return out.len() - before;
        }
        // Re-queue the new packets at the back, leaving out the dropped.
        let got = out.len() - before;
        for _ in 0..before {
            if let Some(m) = out.pop() {
                let _ = out.push(m);
            }
        }
        for _ in 0..got {
            let Some(m) = out.pop() else { break };
            self.seen += 1;
            if self.seen % every == 0 {
                self.faults.rx_dropped.fetch_add(1, Relaxed);
                drop(m);
            } else {
                let _ = out.push(m);
            }
        }
        out.len() - before
    }

    fn interrupt_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.inner.interrupt_fd()
    }

    fn set_interrupt(&mut self, enabled: bool) -> Result<(), Error> {
        self.inner.set_interrupt(enabled)
    }
}

struct FaultyTx {
    inner: Box<dyn TxQueue>,
    faults: Arc<Faults>,
}

impl TxQueue for FaultyTx {
    fn tx_burst(&mut self, pkts: &mut Pkts) -> usize {
        let limit = self.faults.tx_limit.load(Relaxed) as usize;
        if limit == 0 || pkts.len() <= limit {
            return self.inner.tx_burst(pkts);
        }
        // Offer only the first `limit`; the rest stay in order behind them.
        let mut head = Pkts::new();
        for _ in 0..limit {
            if let Some(m) = pkts.pop() {
                let _ = head.push(m);
            }
        }
        let n = self.inner.tx_burst(&mut head);
        // Put back what was not sent, ahead of the rest.
        let rest = pkts.len();
        while let Some(m) = head.pop() {
            let _ = pkts.push(m);
        }
        for _ in 0..rest {
            if let Some(m) = pkts.pop() {
                let _ = pkts.push(m);
            }
        }
        n
    }
}

impl Port for Faulty {
    fn driver(&self) -> &'static str {
        self.inner.driver()
    }
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn configure(&mut self, conf: &PortConfig) -> Result<(), Error> {
        if self.faults.fail_configure.swap(false, Relaxed) {
            return Err(self.injected("configure"));
        }
        self.inner.configure(conf)
    }
    fn start(&mut self) -> Result<Queues, Error> {
        if self.faults.fail_start.swap(false, Relaxed) {
            return Err(self.injected("start"));
        }
        let q = self.inner.start()?;
        let f = &self.faults;
        let rx =
            q.rx.into_iter()
                .map(|inner| {
                    Box::new(FaultyRx {
                        inner,
                        faults: f.clone(),
                        seen: 0,
                    }) as Box<dyn RxQueue>
                })
                .collect();
        let tx =
            q.tx.into_iter()
                .map(|inner| {
                    Box::new(FaultyTx {
                        inner,
                        faults: f.clone(),
                    }) as Box<dyn TxQueue>
                })
                .collect();
        Ok(Queues::new(rx, tx))
    }
    fn stop(&mut self) -> Result<(), Error> {
        self.inner.stop()
    }
    fn link(&self) -> Link {
        let mut l = self.inner.link();
        if self.faults.link_down.load(Relaxed) {
            l.up = false;
        }
        l
    }
    fn mac_addr(&self) -> MacAddr {
        self.inner.mac_addr()
    }
    fn set_promiscuous(&mut self, on: bool) -> Result<(), Error> {
        self.inner.set_promiscuous(on)
    }
    fn promiscuous(&self) -> bool {
        self.inner.promiscuous()
    }
    fn set_allmulticast(&mut self, on: bool) -> Result<(), Error> {
        self.inner.set_allmulticast(on)
    }
    fn allmulticast(&self) -> bool {
        self.inner.allmulticast()
    }
    fn link_events(&mut self) -> Result<crate::port::LinkEvents, Error> {
        self.inner.link_events()
    }
    fn rx_queue_start(&mut self, q: u16) -> Result<(), Error> {
        self.inner.rx_queue_start(q)
    }
    fn rx_queue_stop(&mut self, q: u16) -> Result<(), Error> {
        self.inner.rx_queue_stop(q)
    }
    fn tx_queue_start(&mut self, q: u16) -> Result<(), Error> {
        self.inner.tx_queue_start(q)
    }
    fn tx_queue_stop(&mut self, q: u16) -> Result<(), Error> {
        self.inner.tx_queue_stop(q)
    }
    fn set_vlan_filter(&mut self, id: u16, on: bool) -> Result<(), Error> {
        self.inner.set_vlan_filter(id, on)
    }
    fn rss_caps(&self) -> crate::port::RssCaps {
        self.inner.rss_caps()
    }
    fn set_rss_reta(&mut self, reta: &[u16]) -> Result<(), Error> {
        self.inner.set_rss_reta(reta)
    }
    fn set_mtu(&mut self, mtu: u16) -> Result<(), Error> {
        self.inner.set_mtu(mtu)
    }
    fn mtu(&self) -> u16 {
        self.inner.mtu()
    }
    fn stats(&self) -> PortStats {
        let mut s = self.inner.stats();
        s.ierrors += self.faults.rx_dropped.load(Relaxed);
        s
    }
    fn xstats(&self) -> Vec<Xstat> {
        let mut v = self.inner.xstats();
        v.push(Xstat {
            name: "injected_rx_drops".into(),
            value: self.faults.rx_dropped.load(Relaxed),
        });
        v
    }
    fn reset_stats(&mut self) {
        self.inner.reset_stats();
        self.faults.rx_dropped.store(0, Relaxed);
    }
}

/// Whether a missing peer fails a test instead of skipping it: under CI
/// (`CI=true`) or when asked (`RPMD_REQUIRE_PEERS=1`).
pub fn peers_required() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
        || std::env::var("RPMD_REQUIRE_PEERS").is_ok_and(|v| v == "1")
}

/// Reports that `test` cannot run because its peer is missing (`why`
/// names it and how to get it: root, dpdk-testpmd, QEMU): under
/// [`peers_required`] this panics, failing the test; otherwise the test
/// is recorded as skipped (on stderr, and as a line in the file named by
/// `RPMD_SKIP_LOG`, which the test command counts) and should return.
pub fn missing_peer(test: &str, why: &str) {
    if peers_required() {
        panic!("{test}: its peer is missing: {why} (CI=true or RPMD_REQUIRE_PEERS=1: a missing peer is a failure)");
    }
    record_skip(test, why);
}

/// Reports that `test` cannot run on this machine for a reason no install
/// fixes (`why`: no 1 GiB hugepages, memory too fragmented): recorded as
/// skipped as by [`missing_peer`], even under CI.
pub fn missing_capability(test: &str, why: &str) {
    record_skip(test, why);
}

fn record_skip(test: &str, why: &str) {
    use std::io::Write;
    eprintln!("SKIPPED {test}: {why}");
    if let Some(path) = std::env::var_os("RPMD_SKIP_LOG") {
        // One short line per write, appended: lines of tests running in
        // parallel do not interleave.
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = f.write_all(format!("{test}: {why}\n").as_bytes());
        }
    }
}
