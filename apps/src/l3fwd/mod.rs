//! l3fwd: routes IPv4 and IPv6 frames between ports like DPDK's l3fwd,
//! by longest-prefix match on the destination ([`Lookup::Lpm`]) or exact
//! match on the 5-tuple ([`Lookup::Em`]), on rpmd's run loop.
//!
//! Each rx queue named in the queue map (DPDK's `--config
//! (port,queue,lcore)`, or `queues` per port spread over the lcores) is
//! polled by one lcore; each forwarding lcore has a tx queue of its own on
//! every port (DPDK's rule), so no lock is taken on the data path. A
//! routed frame leaves with its TTL (hop limit) one less, the IPv4 header
//! checksum updated, the next hop's MAC as its destination and the output
//! port's as its source. Every other frame is dropped and counted by
//! [`Reason`] against its input port (tx full: its output port).
pub mod routes;
pub mod task;

use crate::telemetry::{Server, Sources};
use routes::{Lookup, Rule, Sizes, Tables};
use rpmd_pmd::port::{MacAddr, Port, Queues, TxQueue};
use rpmd_pmd::{Mempool, MempoolConfig, PortConfig, Registry};
use rpmd_sched::{LcoreConfig, Runtime};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
pub use task::Reason;
use task::{Forward, LcoreCounters, Readers, RxPort};

/// How to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Core list (`-l`), DPDK syntax.
    pub cores: String,
    /// Device strings: port id k is the k-th.
    pub devices: Vec<String>,
    /// Ports to use (`-p`, a bit per port id).
    pub portmask: u64,
    /// The lookup.
    pub lookup: Lookup,
    /// The rules (from files, or [`routes::defaults`]).
    pub rules: Vec<Rule>,
    /// Table sizes.
    pub sizes: Sizes,
    /// `(port id, rx queue, lcore CPU)` triples (`--config`); empty:
    /// `queues` rx queues per port, spread over the lcores in turn.
    pub queue_map: Vec<(usize, u16, usize)>,
    /// Rx queues per port without `--config`.
    pub queues: u16,
    /// Next-hop MAC per port id where a rule names none (`--eth-dest`);
    /// else DPDK's `02:00:00:00:00:<port>`.
    pub eth_dest: BTreeMap<usize, MacAddr>,
    /// Promiscuous mode on every port (`-P`).
    pub promiscuous: bool,
    /// Burst size.
    pub burst: usize,
    /// How the lcores poll.
    pub lcore: LcoreConfig,
    /// Mbufs in the pool.
    pub mbufs: u32,
    /// Serve DPDK telemetry under this file prefix (`None`: off).
    pub telemetry: Option<String>,
}

/// One port's totals over every lcore.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortTotals {
    /// Frames received.
    pub rx: u64,
    /// Frames sent.
    pub tx: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Frames dropped, by [`Reason`] (in [`Reason::ALL`]'s order).
    pub drops: [u64; 5],
}

impl PortTotals {
    /// Every drop.
    pub fn dropped(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// As JSON, drops by name.
    pub fn json(&self) -> Value {
        let drops: serde_json::Map<String, Value> = Reason::ALL
            .iter()
            .zip(self.drops)
            .map(|(r, n)| (r.name().to_string(), json!(n)))
            .collect();
        json!({"rx": self.rx, "tx": self.tx, "tx_bytes": self.tx_bytes, "dropped": self.dropped(), "drops": drops})
    }
}

/// Which lcore polls which rx queue.
struct QueuePlan {
    /// (lcore index, port index, queue).
    polls: Vec<(usize, usize, u16)>,
    /// Rx queues of each port index.
    rx_queues: Vec<u16>,
}

/// The queue plan of `cfg`. Checks that every port's queues are 0..n,
/// each polled once, on lcores of the list.
fn plan_queues(cfg: &Config, port_ids: &[usize], cpus: &[usize]) -> Result<QueuePlan, String> {
    let mut plan = Vec::new();
    if cfg.queue_map.is_empty() {
        let mut k = 0;
        for p in 0..port_ids.len() {
            for q in 0..cfg.queues {
                plan.push((k % cpus.len(), p, q));
                k += 1;
            }
        }
        return Ok(QueuePlan {
            polls: plan,
            rx_queues: vec![cfg.queues; port_ids.len()],
        });
    }
    let mut counts = vec![0u16; port_ids.len()];
    for &(port, q, cpu) in &cfg.queue_map {
        let p = port_ids.iter().position(|&i| i == port).ok_or_else(|| {
            format!("--config ({port},{q},{cpu}): port {port} is not in the port mask")
        })?;
        let l = cpus
            .iter()
            .position(|&c| c == cpu)
            .ok_or_else(|| format!("--config ({port},{q},{cpu}): lcore {cpu} is not in -l"))?;
        if plan.iter().any(|&(_, pp, qq)| pp == p && qq == q) {
            return Err(format!("--config: port {port} queue {q} is given twice"));
        }
        plan.push((l, p, q));
        counts[p] = counts[p].max(q + 1);
    }
    for (p, &n) in counts.iter().enumerate() {
        let id = port_ids[p];
        if n == 0 {
            return Err(format!(
                "port {id} is in the port mask but no --config entry polls it"
            ));
        }
        if let Some(q) = (0..n).find(|&q| !plan.iter().any(|&(_, pp, qq)| pp == p && qq == q)) {
            return Err(format!(
                "--config: port {id} queue {q} is polled by no lcore (its queues must be 0..{n})"
            ));
        }
    }
    Ok(QueuePlan {
        polls: plan,
        rx_queues: counts,
    })
}

/// Started ports and their queue handles.
struct Opened {
    ports: Vec<Box<dyn Port>>,
    queues: Vec<Queues>,
}

/// The ports the mask selects, configured with their queue counts.
fn open_ports(
    cfg: &Config,
    reg: &Registry,
    port_ids: &[usize],
    (rxq, txq): (&[u16], u16),
    pool: &Mempool,
) -> Result<Opened, String> {
    let (mut ports, mut queues) = (Vec::new(), Vec::new());
    for (p, &id) in port_ids.iter().enumerate() {
        let dev = &cfg.devices[id];
        let named = |e: rpmd_pmd::Error| format!("port {id} ({dev}): {e}");
        let mut port = reg.open(dev).map_err(named)?;
        port.configure(&PortConfig {
            rx_pool: Some(pool.clone()),
            rx_queues: rxq[p],
            tx_queues: txq,
            ..PortConfig::default()
        })
        .map_err(named)?;
        if cfg.promiscuous {
            port.set_promiscuous(true).map_err(named)?;
        }
        queues.push(port.start().map_err(named)?);
        ports.push(port);
    }
    Ok(Opened { ports, queues })
}

/// A running l3fwd.
pub struct L3fwd {
    /// Dropped first: it reads the ports.
    telemetry: Option<Server>,
    runtime: Option<Runtime>,
    usage: crate::usage::Usage,
    ports: Arc<Mutex<Vec<Box<dyn Port>>>>,
    counters: Arc<Vec<Arc<LcoreCounters>>>,
    /// The tables (read by the lcores).
    pub tables: Arc<Tables>,
    /// Device strings of the ports in use.
    pub names: Vec<String>,
    /// Each port's id (its `--dev` number, its bit in the mask).
    pub port_ids: Vec<usize>,
    _pool: Mempool,
}

impl L3fwd {
    /// Builds the tables, opens and starts the ports and the lcores.
    pub fn start(cfg: &Config) -> Result<L3fwd, String> {
        let port_ids: Vec<usize> = (0..cfg.devices.len().min(64))
            .filter(|i| cfg.portmask & (1 << i) != 0)
            .collect();
        if port_ids.is_empty() {
            return Err("no port: give --dev for each, and a port mask that selects them".into());
        }
        let eth_dest = |id: usize| {
            cfg.eth_dest
                .get(&id)
                .copied()
                .unwrap_or(MacAddr::local(id as u16))
        };
        let tables = Arc::new(Tables::build(
            cfg.lookup, &cfg.rules, &port_ids, &cfg.sizes, eth_dest,
        )?);
        let mut rt = Runtime::start(&cfg.cores, cfg.lcore.clone()).map_err(|e| e.to_string())?;
        let cpus: Vec<usize> = rt.lcores().iter().map(|l| l.cpu()).collect();
        let QueuePlan {
            polls: plan,
            rx_queues: rxq,
        } = plan_queues(cfg, &port_ids, &cpus)?;
        // The lcores that poll something, in order: rank r has tx queue r.
        let mut fwd: Vec<usize> = plan.iter().map(|e| e.0).collect();
        fwd.sort_unstable();
        fwd.dedup();
        let reg = crate::cli::registry();
        let mut pcfg = MempoolConfig::new("l3fwd", cfg.mbufs);
        pcfg.cache_size = 256.min(cfg.mbufs / 4);
        let pool = Mempool::new(&pcfg).map_err(|e| e.to_string())?;
        reg.domain()
            .register_pool(&pool)
            .map_err(|e| e.to_string())?;
        let Opened { ports, mut queues } =
            open_ports(cfg, &reg, &port_ids, (&rxq, fwd.len() as u16), &pool)?;
        let macs: Vec<MacAddr> = ports.iter().map(|p| p.mac_addr()).collect();
        let counters: Arc<Vec<Arc<LcoreCounters>>> = Arc::new(
            fwd.iter()
                .map(|_| Arc::new(LcoreCounters::new(port_ids.len())))
                .collect(),
        );
        for (rank, &l) in fwd.iter().enumerate() {
            let mut rx = Vec::new();
            for &(_, p, q) in plan.iter().filter(|e| e.0 == l) {
                let q = queues[p].take_rx(q as usize).map_err(|e| e.to_string())?;
                rx.push(RxPort { port: p, q });
            }
            let tx: Vec<Box<dyn TxQueue>> = queues
                .iter_mut()
                .map(|qs| qs.take_tx(rank))
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string())?;
            let readers = Readers::new(tables.clone());
            let t = Forward::new(
                rx,
                tx,
                macs.clone(),
                readers,
                counters[rank].clone(),
                cfg.burst,
            );
            rt.add(l, t).map_err(|e| e.to_string())?;
        }
        let ports = Arc::new(Mutex::new(ports));
        let mut src = Sources::new(&ports, port_ids.clone(), &rt, vec![pool.clone()]);
        let (c, t, ids) = (counters.clone(), tables.clone(), port_ids.clone());
        src.app = Some(Arc::new(move || app_json(&totals(&c, ids.len()), &ids, &t)));
        Ok(L3fwd {
            telemetry: crate::telemetry::serve("l3fwd", cfg.telemetry.as_deref(), src),
            usage: crate::usage::Usage::start(&rt),
            runtime: Some(rt),
            ports,
            counters,
            tables,
            names: port_ids.iter().map(|&i| cfg.devices[i].clone()).collect(),
            port_ids,
            _pool: pool,
        })
    }

    /// Each port's totals over every lcore.
    pub fn totals(&self) -> Vec<PortTotals> {
        totals(&self.counters, self.port_ids.len())
    }

    /// Each port's own counters (the driver's).
    pub fn port_stats(&self) -> Vec<rpmd_pmd::port::PortStats> {
        lock(&self.ports).iter().map(|p| p.stats()).collect()
    }

    /// Each port's link and, when down, the driver's reason.
    pub fn link_states(&self) -> Vec<crate::link::LinkState> {
        crate::link::states(&lock(&self.ports))
    }

    /// Each lcore's CPU and busy share since the start (read before
    /// [`L3fwd::stop`]).
    pub fn lcore_report(&self) -> Vec<crate::usage::LcoreUsage> {
        self.usage.read()
    }

    /// The counters as telemetry's `/rpmd/app` shows them.
    pub fn json(&self) -> Value {
        app_json(&self.totals(), &self.port_ids, &self.tables)
    }

    /// Where telemetry is served, if it is.
    pub fn telemetry_path(&self) -> Option<&std::path::Path> {
        self.telemetry.as_ref().map(Server::path)
    }

    /// Stops the lcores and the ports; an lcore that died is the error.
    pub fn stop(&mut self) -> Result<(), String> {
        let down = match self.runtime.take() {
            Some(rt) => rt.shutdown().map(drop).map_err(|e| e.to_string()),
            None => Ok(()),
        };
        for p in lock(&self.ports).iter_mut() {
            let _ = p.stop();
        }
        down
    }
}

impl Drop for L3fwd {
    fn drop(&mut self) {
        self.telemetry = None;
        let _ = self.stop();
        lock(&self.ports).clear();
    }
}

fn totals(counters: &[Arc<LcoreCounters>], ports: usize) -> Vec<PortTotals> {
    let mut t = vec![PortTotals::default(); ports];
    for c in counters {
        for (p, pt) in t.iter_mut().enumerate() {
            pt.rx += c.rx[p].get();
            pt.tx += c.tx[p].get();
            pt.tx_bytes += c.tx_bytes[p].get();
            for (d, n) in pt.drops.iter_mut().zip(&c.drops[p]) {
                *d += n.get();
            }
        }
    }
    t
}

fn app_json(totals: &[PortTotals], ids: &[usize], t: &Tables) -> Value {
    let ports: Vec<Value> = totals
        .iter()
        .zip(ids)
        .map(|(pt, id)| {
            let mut v = pt.json();
            v["port"] = json!(id);
            v
        })
        .collect();
    json!({"lookup": t.lookup.name(), "rules": t.rules, "skipped_rules": t.skipped, "next_hops": t.hops.len(), "ports": ports})
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
