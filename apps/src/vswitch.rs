//! vswitch: a learning layer-2 switch across any number of rpmd ports.
//!
//! Every frame's source address is learned for the port it came in on
//! ([`table::MacTable`], shared by the lcores, entries ageing out after
//! `ageing` seconds). A frame to a learned unicast address goes out of
//! that port only (or is filtered, when that is the port it came from); a
//! frame to an unknown, multicast or broadcast address is flooded to every
//! other port: copies from the switch's pool ([`rpmd_pmd::Mbuf::copy`]),
//! the original on the last. What a port's tx queue does not take is
//! dropped and counted.
//!
//! Lcores: rx queue q of port p goes to forwarding lcore (p * queues + q)
//! mod lcores; every forwarding lcore has a tx queue of its own on every
//! port, so no tx queue is shared and there are no locks on the path.
//! Two kinds of port are the exception, and every lcore sends to them
//! through one shared [`Egress`] in front of their tx queue 0, behind the
//! TX lock: a port shaped with `--egress PORT=SPEC` (rate, classes), and
//! a port with fewer tx queues than the switch has lcores (a FIFO).
//!
//! With no devices, vswitch builds a demo like l2fwd's: three in-process
//! ports whose far ends are three stations (on the last lcore), each
//! sending to the next; the first frames flood, the rest go straight.
use crate::capture::{CaptureSummary, Captures, PcapSpec};
use crate::egress::PortEgress;
use crate::telemetry::{Server, Sources};
use rpmd_pmd::port::stats::Counter;
use rpmd_pmd::port::{BusyPoll, Offloads, Pkts, Port, Queues, RxQueue, TxQueue};
use rpmd_pmd::{clock, Mbuf, Mempool, MempoolConfig, PortConfig, Registry};
use rpmd_sched::{multi, Egress, EgressConfig, LcoreConfig, Runtime, Task};
use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex};

pub mod demo;
pub mod table;

use table::{mac_of, MacTable};

/// How to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Core list (`-l`).
    pub cores: String,
    /// Device strings; empty = the demo.
    pub devices: Vec<String>,
    /// Rx queues per port.
    pub queues: u16,
    /// Burst size.
    pub burst: usize,
    /// Seconds a learned address lives without traffic.
    pub ageing: u32,
    /// How the lcores poll.
    pub lcore: LcoreConfig,
    /// Mbufs in the pool (receive buffers and flood copies).
    pub mbufs: u32,
    /// DPDK telemetry's file prefix (`None`: off).
    pub telemetry: Option<String>,
    /// Packet capture.
    pub pcap: Vec<PcapSpec>,
    /// Shaped ports (`--egress PORT=SPEC`).
    pub egress: Vec<(usize, EgressConfig)>,
}

/// One port's counters as one lcore keeps them (single writer).
#[derive(Debug, Default)]
pub struct PortCounters {
    /// Frames received.
    pub rx: Counter,
    /// Frames sent.
    pub tx: Counter,
    /// Frames the tx queue did not take, or flood copies the pool could
    /// not make.
    pub dropped: Counter,
    /// Frames received that were flooded.
    pub flooded: Counter,
    /// Frames received for a station on the port they came in on.
    pub filtered: Counter,
}

/// A forwarding lcore's work.
struct Switch {
    /// (port, queue) it polls.
    rx: Vec<(usize, Box<dyn RxQueue>)>,
    /// Its tx queue on every port, and what waits to go out of each.
    tx: Vec<Box<dyn TxQueue>>,
    out: Vec<Pkts>,
    pkts: Pkts,
    table: Arc<MacTable>,
    /// Its own row of counters: `counters[port]`.
    counters: Arc<Vec<PortCounters>>,
    pool: Mempool,
    burst: usize,
    hz: u64,
    /// The shared egresses it sends to: frames waiting in them keep the
    /// lcore awake.
    egress: Vec<Arc<Egress>>,
}

impl Switch {
    /// Sends what waits for port `p`; what the queue leaves is dropped.
    fn flush(&mut self, p: usize) {
        if self.out[p].is_empty() {
            return;
        }
        let n = self.tx[p].tx_burst(&mut self.out[p]);
        let c = &self.counters[p];
        c.tx.add(n as u64);
        c.dropped.add(self.out[p].len() as u64);
        self.out[p].clear();
    }

    /// Queues `m` for port `p`, sending first if the burst is full.
    fn enqueue(&mut self, p: usize, m: Mbuf) {
        if self.out[p].is_full() {
            self.flush(p);
        }
        let _ = self.out[p].push(m);
    }

    /// Sends copies of `m` to every port but `from`, `m` itself to the
    /// last.
    fn flood(&mut self, from: usize, m: Mbuf) {
        let last = (0..self.tx.len()).rev().find(|&p| p != from);
        let Some(last) = last else { return };
        for p in (0..self.tx.len()).filter(|&p| p != from && p != last) {
            match m.copy(&self.pool) {
                Ok(c) => self.enqueue(p, c),
                Err(_) => self.counters[p].dropped.add(1),
            }
        }
        self.enqueue(last, m);
    }

    /// Switches one frame that came in on `from` at second `now`.
    #[inline]
    fn switch(&mut self, from: usize, m: Mbuf, now: u32) {
        let d = m.data();
        if d.len() < 14 {
            self.counters[from].dropped.add(1);
            return;
        }
        let dst: [u8; 6] = d[..6].try_into().expect("6 bytes");
        let src: [u8; 6] = d[6..12].try_into().expect("6 bytes");
        if src[0] & 1 == 0 {
            self.table.learn(mac_of(&src), from as u16, now);
        }
        let to = if dst[0] & 1 == 0 {
            self.table.lookup(mac_of(&dst), now)
        } else {
            None
        };
        match to {
            Some(p) if p as usize == from => self.counters[from].filtered.add(1),
            Some(p) if (p as usize) < self.tx.len() => self.enqueue(p as usize, m),
            _ => {
                self.counters[from].flooded.add(1);
                self.flood(from, m);
            }
        }
    }
}

impl Task for Switch {
    /// Each rx queue is drained until it is empty or the quota is met.
    fn run(&mut self, quota: usize) -> usize {
        // The clock is read once a round, and only in a round with frames.
        let mut now = None;
        let mut done = 0;
        for k in 0..self.rx.len() {
            let p = self.rx[k].0;
            // The drain (rpmd_sched::backlog::drain_rx's loop, written out:
            // switching a frame needs the whole task).
            let mut taken = 0;
            while taken < quota {
                let want = self.burst.min(quota - taken);
                let n = self.rx[k].1.rx_burst(&mut self.pkts, want);
                if n == 0 {
                    break;
                }
                let now = *now.get_or_insert_with(|| (clock::now() / self.hz) as u32);
                while let Some(m) = self.pkts.pop() {
                    self.switch(p, m, now);
                }
                taken += n;
                if n < want {
                    break;
                }
            }
            self.counters[p].rx.add(taken as u64);
            done += taken;
        }
        for p in 0..self.out.len() {
            self.flush(p);
        }
        if done == 0 {
            for t in self.tx.iter_mut() {
                t.in_flight();
            }
        }
        done
    }

    fn finish(&mut self) {
        for p in 0..self.out.len() {
            self.flush(p);
        }
    }

    // Every rx queue's interrupt wakes the lcore (a guest's kick), and
    // the ports' busy-poll policies (vhost-user's busyloop_us) combine.
    fn wake_fds(&self, each: &mut dyn FnMut(BorrowedFd<'_>)) {
        multi::wake_fds(self.rx.iter().map(|r| &r.1), each)
    }

    fn set_notify(&mut self, armed: bool) {
        multi::set_notify(self.rx.iter_mut().map(|r| &mut r.1), armed)
    }

    fn has_work(&self) -> bool {
        self.egress.iter().any(|e| e.backlog() > 0) || multi::has_work(self.rx.iter().map(|r| &r.1))
    }

    fn busy_poll(&self) -> Option<BusyPoll> {
        multi::busy_poll(self.rx.iter().map(|r| &r.1))
    }

    fn busy_poll_done(&mut self, hit: bool) {
        multi::busy_poll_done(self.rx.iter_mut().map(|r| &mut r.1), hit)
    }
}

/// A running vswitch.
pub struct VSwitch {
    /// Dropped first: it reads the ports.
    telemetry: Option<Server>,
    runtime: Option<Runtime>,
    usage: crate::usage::Usage,
    ports: Arc<Mutex<Vec<Box<dyn Port>>>>,
    /// Device strings of the switch's ports.
    pub names: Vec<String>,
    /// Counters of lcore l for port p: `counters[l][p]`.
    pub counters: Vec<Arc<Vec<PortCounters>>>,
    /// The MAC table.
    pub table: Arc<MacTable>,
    /// The demo's stations, when it runs.
    pub demo: Option<Arc<demo::StationCounts>>,
    captures: Option<Captures>,
    /// What went into each capture file, once stopped.
    pub captured: Vec<CaptureSummary>,
    hz: u64,
    /// The shared egresses (shaped ports, shared tx queues).
    pub egress: Vec<PortEgress>,
    _pool: Mempool,
}

/// Per port: rx, tx, dropped, flooded, filtered, summed over the lcores.
pub type Totals = Vec<[u64; 5]>;

/// Started ports and their queues.
type Opened = (Vec<Box<dyn Port>>, Vec<Queues>);

/// Opens, configures and starts every device: `rx` queues each and one tx
/// queue per forwarding lcore, or one for a port in `shared` (shaped) or
/// with fewer (then added to `shared`). When every port has the RX and TX checksum
/// offloads (virtio and vhost-user ports), all of them are asked for, so
/// a partial checksum from a guest crosses the switch partial and the
/// port it leaves by finishes it (or hands it on partial to a guest that
/// takes them), as vhost_net between guests; otherwise each port
/// completes partial checksums as it receives them.
fn open_ports(
    reg: &Registry,
    devices: &[String],
    pool: &Mempool,
    rx: u16,
    tx: usize,
    shared: &mut [bool],
) -> Result<Opened, String> {
    let mut ports = Vec::new();
    for (k, d) in devices.iter().enumerate() {
        let p = reg.open(d).map_err(|e| e.to_string())?;
        let caps = p.capabilities();
        if (caps.max_tx_queues as usize) < tx && !shared[k] {
            tracing::info!(
                "{d}: {} tx queue(s) for {tx} forwarding lcores: they share one behind the TX lock",
                caps.max_tx_queues
            );
            shared[k] = true;
        }
        ports.push(p);
    }
    let csum = Offloads::RX_CHECKSUM | Offloads::TX_CHECKSUM;
    let offloads = if ports
        .iter()
        .all(|p| p.capabilities().offloads.contains(csum))
    {
        csum
    } else {
        Offloads::NONE
    };
    let mut queues = Vec::new();
    for (k, (p, d)) in ports.iter_mut().zip(devices).enumerate() {
        p.configure(&PortConfig {
            rx_queues: rx,
            tx_queues: if shared[k] { 1 } else { tx as u16 },
            offloads,
            ..PortConfig::with_pool(pool)
        })
        .map_err(|e| format!("{d}: {e}"))?;
        queues.push(p.start().map_err(|e| format!("{d}: {e}"))?);
        crate::cli::promiscuous(p.as_mut(), d);
    }
    Ok((ports, queues))
}

/// Gives every forwarding lcore its way out of one port: a tx queue of
/// its own (`spec` `None`), or a handle on one egress of `spec` in front
/// of the port's tx queue 0, which is returned. `wrap` puts the capture
/// tap on a device queue.
fn hand_out_tx(
    tasks: &mut [Switch],
    q: &mut Queues,
    spec: Option<EgressConfig>,
    mut wrap: impl FnMut(Box<dyn TxQueue>) -> Box<dyn TxQueue>,
) -> Result<Option<Arc<Egress>>, String> {
    let Some(spec) = spec else {
        for (l, t) in tasks.iter_mut().enumerate() {
            t.tx.push(wrap(q.take_tx(l).map_err(|e| e.to_string())?));
        }
        return Ok(None);
    };
    let e = Egress::new(&spec, wrap(q.take_tx(0).map_err(|e| e.to_string())?));
    for t in tasks.iter_mut() {
        t.tx.push(Box::new(e.handle()));
        t.egress.push(e.clone());
    }
    Ok(Some(e))
}

/// One switch task per forwarding lcore (`fwd`) over `np` ports, each
/// with counters of its own, returned beside them.
fn switch_tasks(
    cfg: &Config,
    fwd: usize,
    np: usize,
    table: &Arc<MacTable>,
    pool: &Mempool,
    hz: u64,
) -> (Vec<Switch>, Vec<Arc<Vec<PortCounters>>>) {
    let counters: Vec<Arc<Vec<PortCounters>>> = (0..fwd)
        .map(|_| Arc::new((0..np).map(|_| PortCounters::default()).collect()))
        .collect();
    let tasks = (0..fwd)
        .map(|l| Switch {
            rx: Vec::new(),
            tx: Vec::new(),
            out: (0..np).map(|_| Pkts::new()).collect(),
            pkts: Pkts::new(),
            table: table.clone(),
            counters: counters[l].clone(),
            pool: pool.clone(),
            burst: cfg.burst,
            hz,
            egress: Vec::new(),
        })
        .collect();
    (tasks, counters)
}

impl VSwitch {
    /// Opens the ports and starts the lcores.
    pub fn start(cfg: &Config) -> Result<VSwitch, String> {
        let embedded = cfg.devices.is_empty();
        let devices = if embedded {
            demo::devices()
        } else {
            cfg.devices.clone()
        };
        if devices.len() < 2 {
            return Err("a switch needs at least two ports (--dev, repeated)".into());
        }
        let reg = crate::cli::registry();
        let mut pc = MempoolConfig::new("vswitch", cfg.mbufs);
        pc.cache_size = 256.min(cfg.mbufs / 8);
        let pool = Mempool::new(&pc).map_err(|e| e.to_string())?;
        let mut rt = Runtime::start(&cfg.cores, cfg.lcore.clone()).map_err(|e| e.to_string())?;
        let lcores = rt.lcores().len();
        let fwd = if embedded && lcores > 1 {
            lcores - 1
        } else {
            lcores
        };
        let nq = cfg.queues.max(1);
        crate::egress::check_ports(&cfg.egress, devices.len())?;
        let mut shared = vec![false; devices.len()];
        for (p, _) in &cfg.egress {
            shared[*p] = true;
        }
        let (mut ports, mut queues) = open_ports(&reg, &devices, &pool, nq, fwd, &mut shared)?;
        let mut cap = Captures::new(&cfg.pcap, &devices)?;
        let table = Arc::new(MacTable::new(16384, cfg.ageing));
        let np = devices.len();
        let hz = clock::hz().max(1);
        let (mut tasks, counters) = switch_tasks(cfg, fwd, np, &table, &pool, hz);
        let mut egress = Vec::new();
        for (p, q) in queues.iter_mut().enumerate() {
            let spec = shared[p].then(|| {
                let given = cfg.egress.iter().find(|e| e.0 == p).map(|e| e.1.clone());
                given.unwrap_or_else(|| EgressConfig::fifo(rpmd_sched::egress::spec::DEFAULT_LIMIT))
            });
            let name = &devices[p];
            if let Some(e) = hand_out_tx(&mut tasks, q, spec, |t| cap.tx(p, name, t))? {
                egress.push(PortEgress { port: p, egress: e });
            }
            for k in 0..nq as usize {
                let rxq = q.take_rx(k).map_err(|e| e.to_string())?;
                let l = (p * nq as usize + k) % fwd;
                tasks[l].rx.push((p, cap.rx(p, name, rxq)));
            }
        }
        cap.start()?;
        for (l, t) in tasks.into_iter().enumerate() {
            rt.add(l, t).map_err(|e| e.to_string())?;
        }
        let mut stations = None;
        if embedded {
            let (far, task) = demo::stations(&reg, &pool)?;
            stations = Some(task.counts.clone());
            ports.extend(far);
            rt.add(lcores - 1, task).map_err(|e| e.to_string())?;
        }
        let ports = Arc::new(Mutex::new(ports));
        let mut src = Sources::new(&ports, (0..np).collect(), &rt, vec![pool.clone()]);
        src.egress = egress.clone();
        let telemetry = crate::telemetry::serve("vswitch", cfg.telemetry.as_deref(), src);
        Ok(VSwitch {
            telemetry,
            usage: crate::usage::Usage::start(&rt),
            runtime: Some(rt),
            ports,
            names: devices,
            counters,
            table,
            demo: stations,
            captures: Some(cap),
            captured: Vec::new(),
            hz,
            egress,
            _pool: pool,
        })
    }

    /// The counters summed over the lcores, per port. A port behind a
    /// shared egress counts what the egress handed to the device as sent
    /// and what it dropped as dropped.
    pub fn totals(&self) -> Totals {
        let mut t = vec![[0u64; 5]; self.names.len()];
        for row in &self.counters {
            for (p, c) in row.iter().enumerate() {
                let v = [
                    c.rx.get(),
                    c.tx.get(),
                    c.dropped.get(),
                    c.flooded.get(),
                    c.filtered.get(),
                ];
                t[p].iter_mut().zip(v).for_each(|(a, b)| *a += b);
            }
        }
        for e in &self.egress {
            let (sent, _, dropped) = crate::egress::totals(&e.egress);
            t[e.port][1] = sent;
            t[e.port][2] += dropped;
        }
        t
    }

    /// Addresses in the table now.
    pub fn learned(&self) -> usize {
        self.table.len((clock::now() / self.hz) as u32)
    }

    /// Each lcore's CPU and busy share since the start (read before
    /// [`VSwitch::stop`]).
    pub fn lcore_report(&self) -> Vec<crate::usage::LcoreUsage> {
        self.usage.read()
    }

    /// Stops the lcores (flushing what waits to go out), the ports and
    /// the captures; an lcore that died is the error.
    pub fn stop(&mut self) -> Result<(), String> {
        let down = match self.runtime.take() {
            Some(rt) => rt.shutdown().map(drop).map_err(|e| e.to_string()),
            None => Ok(()),
        };
        // Frames still queued for a shaped port are dropped and counted.
        for e in &self.egress {
            e.egress.close();
        }
        for p in self
            .ports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter_mut()
        {
            let _ = p.stop();
        }
        let capture = match self.captures.take() {
            Some(c) => c.finish(&mut self.captured),
            None => Ok(()),
        };
        down.and(capture)
    }

    /// Each port's link and, when down, the driver's reason.
    pub fn link_states(&self) -> Vec<crate::link::LinkState> {
        let ports = self.ports.lock().unwrap_or_else(|e| e.into_inner());
        crate::link::states(&ports)
    }

    /// Each port's own counters (the driver's: `imissed` for frames the
    /// device or kernel dropped before rpmd saw them, errors, no-mbuf).
    pub fn port_stats(&self) -> Vec<rpmd_pmd::port::PortStats> {
        let ports = self.ports.lock().unwrap_or_else(|e| e.into_inner());
        ports.iter().map(|p| p.stats()).collect()
    }

    /// Each port's extended statistics (DPDK's xstats), by port.
    pub fn xstats(&self) -> Vec<Vec<rpmd_pmd::port::Xstat>> {
        let ports = self.ports.lock().unwrap_or_else(|e| e.into_inner());
        ports.iter().map(|p| p.xstats()).collect()
    }

    /// Where telemetry is served, if it is.
    pub fn telemetry_path(&self) -> Option<&std::path::Path> {
        self.telemetry.as_ref().map(Server::path)
    }
}

impl Drop for VSwitch {
    fn drop(&mut self) {
        self.telemetry = None;
        let _ = self.stop();
    }
}
