//! A minimal IPv4 router: frames in on any port leave by the port of the
//! longest route to their destination, with the TTL one less, the header
//! checksum updated, and the Ethernet addresses of the next hop; frames
//! that cannot be routed are dropped and counted by reason.
//!
//! ```text
//! router ROUTES SECONDS DEV...     e.g. router routes.txt 10 shm:a shm:b shm:c
//! ```
//!
//! ROUTES has a route a line, `PREFIX/LEN PORT NEXT_HOP_MAC` (`#` starts a
//! comment), PORT an index into the DEVs.
use rpmd_lookup::{Lpm4, Lpm4Config};
use rpmd_pmd::hdr::{EtherType, Ethernet, Ipv4};
use rpmd_pmd::port::{MacAddr, RxQueue, TxQueue};
use rpmd_pmd::{Mempool, MempoolConfig, Pkts, PortConfig, Registry};
use rpmd_sched::{LcoreConfig, Runtime, Task};
use std::time::{Duration, Instant};

/// Where a route sends a frame.
#[derive(Clone, Copy)]
struct NextHop {
    port: usize,
    mac: MacAddr,
}

/// Parses the routes file: the table, and the next hops it indexes.
fn routes(text: &str, ports: usize) -> Result<(Lpm4, Vec<NextHop>), String> {
    let mut lpm = Lpm4::new(Lpm4Config::default());
    let mut hops = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |why: String| format!("routes line {}: {line:?}: {why}", n + 1);
        let [net, port, mac] = line.split_whitespace().collect::<Vec<_>>()[..] else {
            return Err(bad("want PREFIX/LEN PORT MAC".into()));
        };
        let (addr, len) = net.split_once('/').ok_or_else(|| bad("no /LEN".into()))?;
        let addr: std::net::Ipv4Addr = addr.parse().map_err(|e| bad(format!("{e}")))?;
        let len: u8 = len.parse().map_err(|e| bad(format!("length: {e}")))?;
        let port: usize = port.parse().map_err(|e| bad(format!("port: {e}")))?;
        if port >= ports {
            return Err(bad(format!("port {port}: there are {ports}")));
        }
        let mac: MacAddr = mac.parse().map_err(|e| bad(format!("{e}")))?;
        lpm.add(addr.into(), len, hops.len() as u32)
            .map_err(|e| bad(e.to_string()))?;
        hops.push(NextHop { port, mac });
    }
    Ok((lpm, hops))
}

/// Frames dropped, by reason.
#[derive(Default, Debug)]
struct Drops {
    not_ipv4: u64,
    bad_header: u64,
    ttl_expired: u64,
    no_route: u64,
    tx_full: u64,
}

/// The router: every port's rx and tx queue on one lcore.
struct Router {
    rx: Vec<Box<dyn RxQueue>>,
    tx: Vec<Box<dyn TxQueue>>,
    macs: Vec<MacAddr>,
    lpm: Lpm4,
    hops: Vec<NextHop>,
    inp: Pkts,
    out: Vec<Pkts>,
    drops: Drops,
}

impl Router {
    /// The output port of one frame, rewritten for it; None: dropped.
    fn route(&mut self, frame: &mut [u8]) -> Option<usize> {
        let Ok(mut eth) = Ethernet::new_checked(frame) else {
            self.drops.not_ipv4 += 1;
            return None;
        };
        if eth.ethertype() != EtherType::IPV4 {
            self.drops.not_ipv4 += 1;
            return None;
        }
        let hop = {
            let Ok(mut ip) = Ipv4::new_checked(eth.payload_mut()) else {
                self.drops.bad_header += 1;
                return None;
            };
            if !ip.checksum_ok() {
                self.drops.bad_header += 1;
                return None;
            }
            let Some(h) = self.lpm.lookup(u32::from_be_bytes(ip.dst())) else {
                self.drops.no_route += 1;
                return None;
            };
            if ip.decrement_ttl().is_none() {
                self.drops.ttl_expired += 1;
                return None;
            }
            self.hops[h as usize]
        };
        eth.set_dst(hop.mac);
        eth.set_src(self.macs[hop.port]);
        Some(hop.port)
    }
}

impl Task for Router {
    fn run(&mut self, quota: usize) -> usize {
        let mut done = 0;
        for p in 0..self.rx.len() {
            done += self.rx[p].rx_burst(&mut self.inp, quota.min(32));
            while let Some(mut m) = self.inp.pop() {
                if let Some(out) = self.route(m.data_mut()) {
                    let _ = self.out[out].push(m);
                }
            }
            for (tx, out) in self.tx.iter_mut().zip(&mut self.out) {
                tx.tx_burst(out);
                self.drops.tx_full += out.len() as u64;
                out.clear();
            }
        }
        done
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [file, secs, devs @ ..] = args.as_slice() else {
        return Err("usage: router ROUTES SECONDS DEV...".into());
    };
    let (lpm, hops) = routes(&std::fs::read_to_string(file)?, devs.len())?;
    let secs: f64 = secs.parse()?;
    let pool = Mempool::new(&MempoolConfig::new("router", 4096))?;
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    rpmd_kernel::register(&mut reg);
    let mut r = Router {
        rx: Vec::new(),
        tx: Vec::new(),
        macs: Vec::new(),
        lpm,
        hops,
        inp: Pkts::new(),
        out: devs.iter().map(|_| Pkts::new()).collect(),
        drops: Drops::default(),
    };
    let mut ports = Vec::new();
    for dev in devs {
        let mut p = reg.open(dev)?;
        p.configure(&PortConfig::with_pool(&pool))?;
        let mut q = p.start()?;
        r.rx.push(q.take_rx(0)?);
        r.tx.push(q.take_tx(0)?);
        r.macs.push(p.mac_addr());
        ports.push(p);
    }
    println!("router: {} routes over {} ports", r.lpm.len(), devs.len());
    let mut rt = Runtime::start("0", LcoreConfig::default())?;
    let id = rt.add(0, r)?;
    let t0 = Instant::now();
    while t0.elapsed().as_secs_f64() < secs {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut done = rt.shutdown()?;
    let r: Router = done.take(id).ok_or("the task did not come back")?;
    for (p, dev) in ports.iter_mut().zip(devs) {
        let s = p.stats();
        println!("{dev}: received {} sent {}", s.ipackets, s.opackets);
        p.stop()?;
    }
    println!("dropped: {:?}", r.drops);
    Ok(())
}
