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
//! loop's lcores (the ready-made `Forward`, which also sleeps on the rx
//! queue's interrupt where the port has one, with a closure that sees
//! every burst); Ctrl-C; then stop, and the counters.
use rpmd_pmd::port::stats::Counter;
use rpmd_pmd::{Mempool, MempoolConfig, Pkts, Port, PortConfig, Registry};
use rpmd_sched::{Forward, LcoreConfig, Runtime};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The UDP destination port of an Ethernet/IPv4/UDP frame.
fn udp_dst_port(f: &[u8]) -> Option<u16> {
    let ip = f.get(14..)?;
    if f.get(12..14)? != [0x08, 0x00] || ip.first()? >> 4 != 4 || *ip.get(9)? != 17 {
        return None;
    }
    let udp = ip.get(((ip[0] & 0x0f) as usize * 4)..)?;
    Some(u16::from_be_bytes([*udp.get(2)?, *udp.get(3)?]))
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [a, b, rest @ ..] = args.as_slice() else {
        return Err("usage: udp_count DEV_A DEV_B [SECONDS]".into());
    };
    let secs: Option<f64> = rest
        .first()
        .map(|s| s.parse().map_err(|_| "SECONDS: a number"))
        .transpose()?;
    let pool =
        Arc::new(Mempool::new(&MempoolConfig::new("udp_count", 4096)).map_err(|e| e.to_string())?);
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    rpmd_kernel::register(&mut reg);
    let mut ports: Vec<Box<dyn Port>> = Vec::new();
    let mut queues = Vec::new();
    for dev in [a, b] {
        let mut p = reg.open(dev).map_err(|e| e.to_string())?;
        let conf = PortConfig {
            rx_pool: Some(pool.clone()),
            ..PortConfig::default()
        };
        p.configure(&conf).map_err(|e| e.to_string())?;
        queues.push(p.start().map_err(|e| e.to_string())?);
        ports.push(p);
    }
    let mut rt = Runtime::start("0-1", LcoreConfig::default()).map_err(|e| e.to_string())?;
    let lcores = rt.lcores().len();
    let mut tables = Vec::new();
    for (from, to) in [(0, 1), (1, 0)] {
        // One counter table per task: each counter has one writer.
        let udp: Arc<Vec<Counter>> = Arc::new((0..=u16::MAX).map(|_| Counter::default()).collect());
        tables.push(udp.clone());
        let count = move |pkts: &mut Pkts| {
            for port in pkts.iter().filter_map(|m| udp_dst_port(m.data())) {
                udp[port as usize].add(1);
            }
        };
        let (rx, tx) = (queues[from].rx.remove(0), queues[to].tx.remove(0));
        let task = Forward::new(rx, tx, 32).with(Box::new(count));
        rt.add(from % lcores, task).map_err(|e| e.to_string())?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    ctrlc::set_handler(move || s.store(true, Relaxed)).map_err(|e| e.to_string())?;
    println!("udp_count: forwarding {a} <-> {b}; Ctrl-C to stop");
    let t0 = Instant::now();
    while !stop.load(Relaxed) && secs.is_none_or(|d| t0.elapsed().as_secs_f64() < d) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let down = rt.shutdown(); // the tasks stop first, then the ports
    for (p, dev) in ports.iter_mut().zip([a, b]) {
        let st = p.stats();
        println!(
            "{dev}: received {} sent {} tx errors {}",
            st.ipackets, st.opackets, st.oerrors
        );
        p.stop().map_err(|e| e.to_string())?;
    }
    for port in 0..=u16::MAX as usize {
        let n: u64 = tables.iter().map(|t| t[port].get()).sum();
        if n > 0 {
            println!("udp dst port {port}: {n} frames");
        }
    }
    down.map_err(|e| e.to_string())
}
