//! A complete rpmd app: forward frames between two ports, both ways, and
//! count the UDP frames per destination port.
//!
//! ```text
//! udp_count DEV_A DEV_B [SECONDS]     e.g. udp_count shm:a shm:b 10
//! ```
//!
//! The steps every app takes: a mempool; a registry with the drivers it
//! links (`rpmd_virtio::register` adds `virtio-user:` and virtio `pci:`,
//! `rpmd_kernel::register` adds `af_xdp:`, `af_packet:` and `tap:`);
//! configure and start each port; one task per direction on the run
//! loop's lcores (an `RxTask`, which lets the lcore sleep on the rx
//! queue's interrupt where the port has one); Ctrl-C; then stop, take the
//! tasks back with their counts, and print the port counters.
use rpmd_pmd::hdr::{EtherType, Ethernet, IpProto, Ipv4, Udp};
use rpmd_pmd::port::{RxQueue, TxQueue};
use rpmd_pmd::{Mempool, MempoolConfig, Pkts, PortConfig, Registry};
use rpmd_sched::{LcoreConfig, Runtime, RxTask, RxWork};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The UDP destination port of an Ethernet/IPv4/UDP frame.
fn udp_dst_port(frame: &[u8]) -> Option<u16> {
    let eth = Ethernet::new_checked(frame).ok()?;
    let ip = Ipv4::new_checked(eth.payload()).ok()?;
    let is_udp = eth.ethertype() == EtherType::IPV4 && ip.protocol() == IpProto::UDP;
    is_udp.then(|| Udp::new_checked(ip.payload()).ok().map(|u| u.dst_port()))?
}

/// One direction's work: receive, count, send on. The counts come back
/// with the task at shutdown.
struct CountUdp {
    tx: Box<dyn TxQueue>,
    pkts: Pkts,
    per_port: Vec<u64>,
}

impl RxWork for CountUdp {
    fn work(&mut self, rx: &mut dyn RxQueue, quota: usize) -> usize {
        let n = rx.rx_burst(&mut self.pkts, quota.min(32));
        for port in self.pkts.iter().filter_map(|m| udp_dst_port(m.data())) {
            self.per_port[port as usize] += 1;
        }
        self.tx.tx_burst(&mut self.pkts);
        self.pkts.clear(); // what the tx queue did not take is dropped
        n
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [a, b, rest @ ..] = args.as_slice() else {
        return Err("usage: udp_count DEV_A DEV_B [SECONDS]".into());
    };
    let secs: Option<f64> = rest.first().map(|s| s.parse()).transpose()?;
    let pool = Mempool::new(&MempoolConfig::new("udp_count", 4096))?;
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    rpmd_kernel::register(&mut reg);
    let (mut ports, mut queues) = (Vec::new(), Vec::new());
    for dev in [a, b] {
        let mut p = reg.open(dev)?;
        p.configure(&PortConfig::with_pool(&pool))?;
        queues.push(p.start()?);
        ports.push(p);
    }
    let mut rt = Runtime::start("0-1", LcoreConfig::default())?;
    let lcores = rt.lcores().len();
    let mut tasks = Vec::new();
    for (from, to) in [(0, 1), (1, 0)] {
        let work = CountUdp {
            tx: queues[to].take_tx(0)?,
            pkts: Pkts::new(),
            per_port: vec![0; 1 << 16],
        };
        let rx = queues[from].take_rx(0)?;
        tasks.push(rt.add(from % lcores, RxTask::new(rx, work))?);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    ctrlc::set_handler(move || s.store(true, Relaxed))?;
    println!("udp_count: forwarding {a} <-> {b}; Ctrl-C to stop");
    let t0 = Instant::now();
    while !stop.load(Relaxed) && secs.is_none_or(|d| t0.elapsed().as_secs_f64() < d) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut done = rt.shutdown()?; // the tasks stop first, then the ports
    for (p, dev) in ports.iter_mut().zip([a, b]) {
        let st = p.stats();
        let (rx, tx, err) = (st.ipackets, st.opackets, st.oerrors);
        println!("{dev}: received {rx} sent {tx} tx errors {err}");
        p.stop()?;
    }
    let mut total = vec![0u64; 1 << 16];
    for id in tasks {
        let task: RxTask<CountUdp> = done.take(id).ok_or("a task did not come back")?;
        total
            .iter_mut()
            .zip(&task.work.per_port)
            .for_each(|(t, n)| *t += n);
    }
    for (port, n) in total.iter().enumerate().filter(|(_, n)| **n > 0) {
        println!("udp dst port {port}: {n} frames");
    }
    Ok(())
}
