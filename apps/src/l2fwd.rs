//! l2fwd: forwards frames between port pairs (0↔1, 2↔3, …) like DPDK's
//! l2fwd, on rpmd's run loop.
//!
//! Each forwarding lcore polls some rx queues (`rx_per_lcore` each) and
//! sends what arrives on rx queue q of a port to tx queue q of the paired
//! port (`queues` pairs per port, 1 by default), rewriting the MAC
//! addresses (source = the output port's MAC, destination =
//! `02:00:00:00:00:<output port>`) unless told not to. Output is buffered
//! per port up to a burst and flushed when full or after 100 µs.
//!
//! With no devices given, l2fwd builds its embedded topology: two
//! in-process ports (`ring:l2fwd-a`, `ring:l2fwd-b`) whose far ends are
//! fed by a built-in generator and drained by a built-in sink, running on
//! the last lcore. Frames go generator → port 0 → l2fwd → port 1 → sink,
//! and the other way round.
use crate::capture::{CaptureSummary, Captures, PcapSpec};
use crate::egress::PortEgress;
use crate::telemetry::{Server, Sources};
use rpmd_pmd::port::stats::Counter;
use rpmd_pmd::port::{BusyPoll, MacAddr, Pkts, Port, Queues, RxQueue, TxQueue};
use rpmd_pmd::{clock, Mempool, MempoolConfig, PortConfig, Registry};
use rpmd_sched::{backlog, multi, Egress, EgressConfig, LcoreConfig, Runtime, Task};
use std::os::fd::BorrowedFd;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Core list (`-l`), DPDK syntax.
    pub cores: String,
    /// Device strings; empty = the embedded topology.
    pub devices: Vec<String>,
    /// Ports to use (`-p`, a bit per port).
    pub portmask: u64,
    /// Rx queues per forwarding lcore (`-q`).
    pub rx_per_lcore: usize,
    /// Queue pairs per port (`--queues`): rx queue q of a port forwards to
    /// tx queue q of its pair.
    pub queues: u16,
    /// Rx and tx queues per port when they differ (`--rxq`, `--txq`;
    /// `None`: `queues`). Rx queue q forwards to tx queue q mod txq; a tx
    /// queue fed by more than one rx queue is shared through an
    /// [`Egress`] (its lock), the lock-free path staying for the others.
    pub rxq: Option<u16>,
    /// See `rxq`.
    pub txq: Option<u16>,
    /// Shape every output port (`--tx-rate`): one [`Egress`] per port,
    /// shared by every lcore sending to it, in front of its tx queue 0.
    pub tx_rate: Option<EgressConfig>,
    /// Rewrite MAC addresses.
    pub mac_updating: bool,
    /// Burst size.
    pub burst: usize,
    /// How the lcores poll: spin budget, yield signal, sleep.
    pub lcore: LcoreConfig,
    /// Mbufs in the pool (in each pool, with `per_port_pool`).
    pub mbufs: u32,
    /// One mempool per port (DPDK's `--per-port-pool`): each port
    /// receives into its own pool and transmits the other's mbufs, all
    /// registered in the registry's DMA domain.
    pub per_port_pool: bool,
    /// Serve DPDK telemetry under this file prefix (`None`: off).
    pub telemetry: Option<String>,
    /// Packet capture (`--pcap`): ports are numbered as the devices.
    pub pcap: Vec<PcapSpec>,
}

impl Config {
    /// The ports' device strings: `devices`, or the embedded topology's
    /// two ring ports with queues enough for both directions.
    pub fn device_strings(&self) -> Vec<String> {
        if !self.devices.is_empty() {
            return self.devices.clone();
        }
        let q = self.rx_queues().max(self.tx_queues());
        let opt = if q > 1 {
            format!(",queues={q}")
        } else {
            String::new()
        };
        vec![format!("ring:l2fwd-a{opt}"), format!("ring:l2fwd-b{opt}")]
    }

    /// Rx queues per port.
    pub fn rx_queues(&self) -> usize {
        self.rxq.unwrap_or(self.queues).max(1) as usize
    }

    /// Tx queues per port.
    pub fn tx_queues(&self) -> usize {
        self.txq.unwrap_or(self.queues).max(1) as usize
    }
}

/// Counters of one queue pair of a port, kept by the application. One
/// lcore writes them (the one polling the port's rx queue q also holds
/// its pair's tx queue q), so they are single-writer counters: no locked
/// instruction per burst. [`L2fwd::port_totals`] sums a port's queues.
#[derive(Debug, Default)]
pub struct PortCounters {
    /// Frames received.
    pub rx: Counter,
    /// Frames sent.
    pub tx: Counter,
    /// Frames dropped (output queue full).
    pub dropped: Counter,
    /// Bytes sent.
    pub tx_bytes: Counter,
}

/// Output buffered for one port.
struct TxBuffer {
    /// The output port (for its MAC), and its counters' slot.
    port: usize,
    slot: usize,
    q: Box<dyn TxQueue>,
    pkts: Pkts,
    /// When the oldest buffered frame arrived (clock ticks).
    since: Option<u64>,
}

/// One forwarding lcore's work: its rx ports and the tx queues of their
/// pairs.
struct Fwd {
    /// Rx counters' slot, index of its pair's buffer in `tx`, queue.
    rx: Vec<(usize, usize, Box<dyn RxQueue>)>,
    tx: Vec<TxBuffer>,
    macs: Vec<MacAddr>,
    counters: Arc<Vec<PortCounters>>,
    mac_updating: bool,
    burst: usize,
    pkts: Pkts,
    /// [`DRAIN`] in clock ticks.
    drain: u64,
    /// The shared egresses its tx buffers feed: frames waiting in them
    /// keep the lcore awake.
    egress: Vec<Arc<Egress>>,
}

const DRAIN: Duration = Duration::from_micros(100);

impl Fwd {
    fn flush(b: &mut TxBuffer, c: &PortCounters) {
        if b.pkts.is_empty() {
            return;
        }
        let bytes: usize = b.pkts.iter().map(|m| m.pkt_len()).sum();
        let n = b.q.tx_burst(&mut b.pkts);
        let left: usize = b.pkts.iter().map(|m| m.pkt_len()).sum();
        c.tx.add(n as u64);
        c.tx_bytes.add((bytes - left) as u64);
        c.dropped.add(b.pkts.len() as u64);
        b.pkts.clear();
        b.since = None;
    }
}

impl Task for Fwd {
    /// Each rx queue is drained until it is empty or the quota is met
    /// (the run loop's backlog drain), a burst at a time.
    fn run(&mut self, quota: usize) -> usize {
        let mut done = 0;
        for (slot, txi, rxq) in self.rx.iter_mut() {
            let buf = &mut self.tx[*txi];
            let (dst, dst_slot) = (buf.port, buf.slot);
            // Destination 02:00:00:00:00:<dst>, source the output port's MAC.
            let mut macs = [0u8; 12];
            macs[..6].copy_from_slice(&MacAddr::local(dst as u16).0);
            macs[6..].copy_from_slice(&self.macs[dst].0);
            let (counters, mac_updating, burst) = (&self.counters, self.mac_updating, self.burst);
            let taken = backlog::drain_rx(&mut **rxq, &mut self.pkts, burst, quota, |pkts| {
                while let Some(mut m) = pkts.pop() {
                    if mac_updating {
                        if let Some(d) = m.data_mut().get_mut(..12) {
                            d.copy_from_slice(&macs);
                        }
                    }
                    if buf.pkts.push(m).is_err() {
                        counters[dst_slot].dropped.add(1);
                    }
                    if buf.pkts.len() >= burst {
                        Fwd::flush(buf, &counters[dst_slot]);
                    }
                }
            });
            if taken == 0 {
                continue;
            }
            done += taken;
            self.counters[*slot].rx.add(taken as u64);
            if !buf.pkts.is_empty() {
                buf.since.get_or_insert_with(clock::now);
            }
        }
        if done == 0 {
            // An idle round: send what is buffered, and take back what the
            // tx queues have finished sending now rather than on the next
            // burst's path.
            for b in self.tx.iter_mut() {
                if b.pkts.is_empty() {
                    b.q.in_flight();
                } else {
                    Fwd::flush(b, &self.counters[b.slot]);
                }
            }
            return 0;
        }
        // The 100 µs drain timer for partial bursts (the TSC, not a
        // clock_gettime per round).
        if self.tx.iter().any(|b| b.since.is_some()) {
            let now = clock::now();
            for b in self.tx.iter_mut() {
                if b.since.is_some_and(|t| now.wrapping_sub(t) >= self.drain) {
                    Fwd::flush(b, &self.counters[b.slot]);
                }
            }
        }
        done
    }

    fn finish(&mut self) {
        for b in self.tx.iter_mut() {
            Fwd::flush(b, &self.counters[b.slot]);
        }
    }

    // Every rx queue's interrupt wakes the lcore, and the ports' busy-poll
    // policies (vhost-user's busyloop_us) combine.
    fn wake_fds(&self, each: &mut dyn FnMut(BorrowedFd<'_>)) {
        multi::wake_fds(self.rx.iter().map(|r| &r.2), each)
    }

    fn set_notify(&mut self, armed: bool) {
        multi::set_notify(self.rx.iter_mut().map(|r| &mut r.2), armed)
    }

    fn has_work(&self) -> bool {
        multi::has_work(self.rx.iter().map(|r| &r.2)) || self.egress.iter().any(|e| e.backlog() > 0)
    }

    fn busy_poll(&self) -> Option<BusyPoll> {
        multi::busy_poll(self.rx.iter().map(|r| &r.2))
    }

    fn busy_poll_done(&mut self, hit: bool) {
        multi::busy_poll_done(self.rx.iter_mut().map(|r| &mut r.2), hit)
    }
}

/// The embedded generator and sink on the far ends of the ring ports.
struct GenSink {
    peers: Vec<Queues>,
    pool: Mempool,
    template: [u8; 60],
    out: Pkts,
    inp: Pkts,
    /// Frames generated and frames sunk.
    counts: Arc<(Counter, Counter)>,
}

impl Task for GenSink {
    fn run(&mut self, _quota: usize) -> usize {
        let mut work = 0;
        for q in self.peers.iter_mut() {
            for qi in 0..q.rx.len() as u16 {
                // Sink what l2fwd forwarded to us.
                let n = q.rx_burst(qi, &mut self.inp, 64);
                self.counts.1.add(n as u64);
                self.inp.clear();
                work += n;
            }
            for qi in 0..q.tx.len() as u16 {
                // Generate a burst.
                if self.pool.get_bulk(&mut self.out, 32).is_ok() {
                    for m in self.out.iter_mut() {
                        if let Some(d) = m.append(self.template.len()) {
                            d.copy_from_slice(&self.template);
                        }
                    }
                }
                let k = q.tx_burst(qi, &mut self.out);
                self.counts.0.add(k as u64);
                self.out.clear();
                work += k;
            }
        }
        work
    }
}

/// The pools, one or one per device, each registered in the registry's
/// domain before any port starts: a port that shares memory by snapshot
/// (virtio-user's memory table) then reaches them all.
fn make_pools(cfg: &Config, reg: &Registry, devices: usize) -> Result<Vec<Mempool>, String> {
    let npools = if cfg.per_port_pool { devices } else { 1 };
    let mut pools = Vec::with_capacity(npools);
    for k in 0..npools {
        let mut pcfg = MempoolConfig::new(&format!("l2fwd{k}"), cfg.mbufs);
        pcfg.cache_size = 256.min(cfg.mbufs / 4);
        let pool = Mempool::new(&pcfg).map_err(|e| e.to_string())?;
        reg.domain()
            .register_pool(&pool)
            .map_err(|e| e.to_string())?;
        pools.push(pool);
    }
    Ok(pools)
}

/// The ports the mask selects, started, with their queues.
struct Opened {
    ports: Vec<Box<dyn Port>>,
    queues: Vec<Option<Queues>>,
    macs: Vec<MacAddr>,
    names: Vec<String>,
    port_ids: Vec<usize>,
}

fn open_ports(
    cfg: &Config,
    reg: &Registry,
    devices: &[String],
    pools: &[Mempool],
) -> Result<Opened, String> {
    let mut o = Opened {
        ports: Vec::new(),
        queues: Vec::new(),
        macs: Vec::new(),
        names: Vec::new(),
        port_ids: Vec::new(),
    };
    for (i, d) in devices.iter().enumerate() {
        // Masked-out devices are not opened.
        if cfg.portmask & (1 << i) == 0 {
            continue;
        }
        let mut p = reg.open(d).map_err(|e| e.to_string())?;
        o.names.push(d.clone());
        o.port_ids.push(i);
        let pc = PortConfig {
            rx_pool: Some(pools[i % pools.len()].clone()),
            rx_queues: cfg.rx_queues() as u16,
            tx_queues: cfg.tx_queues() as u16,
            ..PortConfig::default()
        };
        p.configure(&pc).map_err(|e| e.to_string())?;
        let q = p.start().map_err(|e| e.to_string())?;
        crate::cli::promiscuous(p.as_mut(), d);
        o.macs.push(p.mac_addr());
        o.queues.push(Some(q));
        o.ports.push(p);
    }
    Ok(o)
}

/// The forwarding lcores' tasks and the shared egresses they feed.
struct Forwarding {
    tasks: Vec<Fwd>,
    /// Each egress, with the index of its port.
    egress: Vec<(usize, Arc<Egress>)>,
    /// Per counter slot: whether its output goes through an egress.
    via_egress: Vec<bool>,
}

/// Rx queue k of all (port i, queue q, k = i * rxq + q) goes to
/// forwarding lcore (k / rx_per_lcore) mod `fwd_lcores`, together with tx
/// queue q mod txq of port i's pair: its own when no other rx queue
/// sends there and the port is not shaped, else a handle on the shared
/// egress in front of it. Returns the tasks and the egresses.
fn forwarding_tasks(
    cfg: &Config,
    o: &mut Opened,
    counters: &Arc<Vec<PortCounters>>,
    fwd_lcores: usize,
    cap: &mut Captures,
) -> Result<Forwarding, String> {
    let (n, rxq, txq) = (o.ports.len(), cfg.rx_queues(), cfg.tx_queues());
    let mut tasks: Vec<Fwd> = (0..fwd_lcores)
        .map(|_| Fwd {
            rx: Vec::new(),
            tx: Vec::new(),
            macs: o.macs.clone(),
            counters: counters.clone(),
            mac_updating: cfg.mac_updating,
            drain: clock::ticks(DRAIN),
            burst: cfg.burst,
            pkts: Pkts::new(),
            egress: Vec::new(),
        })
        .collect();
    // The tx queue each rx queue feeds, and how many feed each.
    let target = |k: usize| {
        let (i, qi) = (k / rxq, k % rxq);
        let tq = if cfg.tx_rate.is_some() { 0 } else { qi % txq };
        (i ^ 1, tq)
    };
    let mut feeders = vec![0usize; n * txq];
    for k in 0..n * rxq {
        let (dst, tq) = target(k);
        feeders[dst * txq + tq] += 1;
    }
    let mut shared: Vec<Option<Arc<Egress>>> = vec![None; n * txq];
    let mut egresses = Vec::new();
    let mut via_egress = vec![false; n * rxq];
    for k in 0..n * rxq {
        let (i, qi) = (k / rxq, k % rxq);
        let (dst, tq) = target(k);
        let l = (k / cfg.rx_per_lcore.max(1)) % fwd_lcores;
        let rxq_h = queues_of(o, i)?.take_rx(qi).map_err(|e| e.to_string())?;
        let rxq_h = cap.rx(o.port_ids[i], &o.names[i], rxq_h);
        let q: Box<dyn TxQueue> = match (&cfg.tx_rate, feeders[dst * txq + tq]) {
            (None, 1) => {
                let t = queues_of(o, dst)?.take_tx(tq).map_err(|e| e.to_string())?;
                cap.tx(o.port_ids[dst], &o.names[dst], t)
            }
            (shape, _) => {
                let slot = &mut shared[dst * txq + tq];
                if slot.is_none() {
                    let t = queues_of(o, dst)?.take_tx(tq).map_err(|e| e.to_string())?;
                    let t = cap.tx(o.port_ids[dst], &o.names[dst], t);
                    let c = shape.clone().unwrap_or_else(|| {
                        EgressConfig::fifo(rpmd_sched::egress::spec::DEFAULT_LIMIT)
                    });
                    let e = Egress::new(&c, t);
                    egresses.push((dst, e.clone()));
                    *slot = Some(e);
                }
                let e = slot.as_ref().expect("set above");
                via_egress[dst * rxq + qi] = true;
                if !tasks[l].egress.iter().any(|x| Arc::ptr_eq(x, e)) {
                    tasks[l].egress.push(e.clone());
                }
                Box::new(e.handle())
            }
        };
        let txi = tasks[l].tx.len();
        tasks[l].rx.push((k, txi, rxq_h));
        tasks[l].tx.push(TxBuffer {
            port: dst,
            slot: dst * rxq + qi,
            q,
            pkts: Pkts::new(),
            since: None,
        });
    }
    Ok(Forwarding {
        tasks,
        egress: egresses,
        via_egress,
    })
}

fn queues_of(o: &mut Opened, p: usize) -> Result<&mut Queues, String> {
    o.queues[p]
        .as_mut()
        .ok_or_else(|| format!("port {p} has no queues"))
}

/// The far ends of the embedded topology's two ring ports, fed and
/// drained by one task: the ports and the task.
fn embedded_peers(
    reg: &Registry,
    devices: &[String],
    (rxq, txq): (usize, usize),
    pool: &Mempool,
) -> Result<(Vec<Box<dyn Port>>, GenSink), String> {
    let mut ports = Vec::new();
    let mut peers = Vec::new();
    for d in devices {
        let mut p = reg.open(d).map_err(|e| e.to_string())?;
        p.configure(&PortConfig {
            // The far end sends into l2fwd's rx queues and takes what its
            // tx queues send.
            rx_queues: txq as u16,
            tx_queues: rxq as u16,
            ..PortConfig::default()
        })
        .map_err(|e| e.to_string())?;
        peers.push(p.start().map_err(|e| e.to_string())?);
        ports.push(p);
    }
    // A well-formed UDP/IPv4 frame (what a capture shows), between the
    // generator's and the sink's addresses.
    let mut template = [0u8; 60];
    template.copy_from_slice(&crate::gen::template(60));
    template[..6].copy_from_slice(&MacAddr::local(0).0);
    template[6..12].copy_from_slice(&MacAddr::local(0x99).0);
    let counts = Arc::new((Counter::default(), Counter::default()));
    let gs = GenSink {
        peers,
        pool: pool.clone(),
        template,
        out: Pkts::new(),
        inp: Pkts::new(),
        counts,
    };
    Ok((ports, gs))
}

/// The mask selecting all of `n` devices (the default).
pub fn all_ports(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// Checks a port mask against `n` devices: every bit must name one (as
/// DPDK's l2fwd says "invalid portmask"), and at least one must be set.
pub fn check_portmask(mask: u64, n: usize) -> Result<(), String> {
    let all = all_ports(n);
    if mask == 0 || mask & !all != 0 {
        return Err(format!(
            "invalid port mask {mask:#x}: {n} ports given, so bits within {all:#x}"
        ));
    }
    Ok(())
}

/// A running l2fwd.
pub struct L2fwd {
    /// Dropped first: it reads the ports.
    telemetry: Option<Server>,
    runtime: Option<Runtime>,
    usage: crate::usage::Usage,
    /// Shared with the telemetry thread (control calls only).
    ports: Arc<Mutex<Vec<Box<dyn Port>>>>,
    /// Counters per port and queue pair: slot `port * queues + q`.
    pub counters: Arc<Vec<PortCounters>>,
    /// Counter slots per port (its rx queues).
    pub queues: usize,
    /// Shared egresses, by internal port index.
    egress: Vec<(usize, Arc<Egress>)>,
    /// The same, labelled with the ports' ids.
    egress_report: Vec<PortEgress>,
    /// Per counter slot: whether its output goes through an egress.
    via_egress: Vec<bool>,
    /// Embedded generator: frames generated, frames sunk.
    pub gen: Option<Arc<(Counter, Counter)>>,
    /// Device strings of the ports l2fwd uses (those the mask selects).
    pub names: Vec<String>,
    /// Each used port's number among the devices given (its bit in the
    /// mask): port k of the counters is device `port_ids[k]`.
    pub port_ids: Vec<usize>,
    /// The pools (for telemetry; the ports hold their own handles).
    _pools: Vec<Mempool>,
    /// The `--pcap` files, closed by `stop`.
    captures: Option<Captures>,
    /// What went into each capture file, once stopped.
    pub captured: Vec<CaptureSummary>,
}

impl L2fwd {
    /// Opens and starts the ports and the lcores.
    pub fn start(cfg: &Config) -> Result<L2fwd, String> {
        let embedded = cfg.devices.is_empty();
        let (rxq, txq) = (cfg.rx_queues(), cfg.tx_queues());
        let devices = cfg.device_strings();
        let reg = crate::cli::registry();
        check_portmask(cfg.portmask, devices.len())?;
        let pools = make_pools(cfg, &reg, devices.len())?;
        let mut opened = open_ports(cfg, &reg, &devices, &pools)?;
        let n = opened.ports.len();
        if n < 2 || n % 2 != 0 {
            return Err(format!("l2fwd needs an even number of ports (pairs 0-1, 2-3, ...); the port mask selects {n}"));
        }
        // A counter slot per rx queue: its frames in, and what they became
        // on the way out of the pair (one writer: that queue's lcore).
        let nq = rxq;
        let counters: Arc<Vec<PortCounters>> =
            Arc::new((0..n * nq).map(|_| PortCounters::default()).collect());
        let mut rt = Runtime::start(&cfg.cores, cfg.lcore.clone()).map_err(|e| e.to_string())?;
        let lcores = rt.lcores().len();
        // The embedded generator takes the last lcore when there are two.
        let fwd_lcores = if embedded && lcores > 1 {
            lcores - 1
        } else {
            lcores
        };
        let mut cap = Captures::new(&cfg.pcap, &devices)?;
        if let Some(s) = cfg.pcap.iter().find(|s| !opened.port_ids.contains(&s.port)) {
            return Err(format!("--pcap: port {} is not in the port mask", s.port));
        }
        let Forwarding {
            tasks,
            egress,
            via_egress,
        } = forwarding_tasks(cfg, &mut opened, &counters, fwd_lcores, &mut cap)?;
        cap.start()?;
        for (l, t) in tasks.into_iter().enumerate() {
            rt.add(l, t).map_err(|e| e.to_string())?;
        }
        let mut gen = None;
        if embedded {
            let (peer_ports, gs) = embedded_peers(&reg, &devices, (rxq, txq), &pools[0])?;
            gen = Some(gs.counts.clone());
            opened.ports.extend(peer_ports);
            rt.add(lcores - 1, gs).map_err(|e| e.to_string())?;
        }
        let ports = Arc::new(Mutex::new(opened.ports));
        let pool_handles = pools.to_vec();
        let mut src = Sources::new(&ports, opened.port_ids.clone(), &rt, pool_handles);
        src.egress = egress
            .iter()
            .map(|(k, e)| PortEgress {
                port: opened.port_ids[*k],
                egress: e.clone(),
            })
            .collect();
        src.egress.sort_by_key(|e| e.port);
        let egress_report = src.egress.clone();
        let telemetry = crate::telemetry::serve("l2fwd", cfg.telemetry.as_deref(), src);
        Ok(L2fwd {
            telemetry,
            usage: crate::usage::Usage::start(&rt),
            runtime: Some(rt),
            ports,
            counters,
            queues: nq,
            egress,
            egress_report,
            via_egress,
            gen,
            names: opened.names,
            port_ids: opened.port_ids,
            _pools: pools,
            captures: Some(cap),
            captured: Vec::new(),
        })
    }

    /// Per port: frames received, sent, dropped and bytes sent, summed
    /// over its queue pairs.
    ///
    /// A port behind a shared egress counts what the egress handed to the
    /// device as sent and what it dropped as dropped (the lcores' own
    /// counters say what they handed to the egress).
    pub fn port_totals(&self) -> Vec<(u64, u64, u64, u64)> {
        let mut t: Vec<(u64, u64, u64, u64)> = self
            .counters
            .chunks(self.queues)
            .zip(self.via_egress.chunks(self.queues))
            .map(|(qs, via)| {
                qs.iter().zip(via).fold((0, 0, 0, 0), |t, (c, &via)| {
                    // What went to an egress is counted there instead.
                    let (tx, bytes) = if via {
                        (0, 0)
                    } else {
                        (c.tx.get(), c.tx_bytes.get())
                    };
                    (
                        t.0 + c.rx.get(),
                        t.1 + tx,
                        t.2 + c.dropped.get(),
                        t.3 + bytes,
                    )
                })
            })
            .collect();
        for (k, e) in &self.egress {
            let (sent, bytes, dropped) = crate::egress::totals(e);
            t[*k].1 += sent;
            t[*k].2 += dropped;
            t[*k].3 += bytes;
        }
        t
    }

    /// The shared egresses (shaped ports, shared tx queues), labelled by
    /// port id.
    pub fn egress(&self) -> &[PortEgress] {
        &self.egress_report
    }

    /// Each port's link and, when down, the driver's reason.
    pub fn link_states(&self) -> Vec<crate::link::LinkState> {
        crate::link::states(&lock(&self.ports))
    }

    /// The ports' ids and device strings, in port order.
    pub fn port_labels(&self) -> (&[usize], &[String]) {
        (&self.port_ids, &self.names)
    }

    /// Each port's own counters (the driver's: `imissed` for frames the
    /// device or kernel dropped before rpmd saw them, errors, no-mbuf).
    pub fn port_stats(&self) -> Vec<rpmd_pmd::port::PortStats> {
        lock(&self.ports).iter().map(|p| p.stats()).collect()
    }

    /// Each lcore's CPU and busy share since the start (read before
    /// [`L2fwd::stop`]: a stopped lcore's thread has no CPU time left to
    /// read).
    pub fn lcore_report(&self) -> Vec<crate::usage::LcoreUsage> {
        self.usage.read()
    }

    /// Stops the lcores (flushing buffered output) and the ports; an
    /// lcore that died (a task panicked) is the error.
    pub fn stop(&mut self) -> Result<(), String> {
        let down = match self.runtime.take() {
            Some(rt) => rt.shutdown().map(drop).map_err(|e| e.to_string()),
            None => Ok(()),
        };
        // Frames still queued for a shaped port are dropped and counted.
        for (_, e) in &self.egress {
            e.close();
        }
        for p in lock(&self.ports).iter_mut() {
            let _ = p.stop();
        }
        // The lcores are gone, so every captured frame is in a ring.
        let capture = match self.captures.take() {
            Some(c) => c.finish(&mut self.captured),
            None => Ok(()),
        };
        down.and(capture)
    }

    /// Where telemetry is served, if it is.
    pub fn telemetry_path(&self) -> Option<&std::path::Path> {
        self.telemetry.as_ref().map(Server::path)
    }

    /// Runs until `stop` is set or `duration` passes, calling `report`
    /// every `period` with the counters; returns the time it ran.
    pub fn run_for(
        &mut self,
        duration: Option<Duration>,
        period: Duration,
        stop: &AtomicBool,
        mut report: impl FnMut(&L2fwd, Duration),
    ) -> Duration {
        crate::cli::run_periodically(duration, period, stop, |t| report(self, t))
    }
}

impl Drop for L2fwd {
    fn drop(&mut self) {
        self.telemetry = None;
        let _ = self.stop();
        // Frames still in the ports' rings go back to the pool now.
        lock(&self.ports).clear();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
