//! The kernel-port tests' lab: network namespaces and veth pairs made for
//! one test and removed when it ends (also on panic), a thread that runs
//! in a namespace (so a test's kernel sockets live there), and a small
//! responder that answers ARP, ICMP echo and UDP echo from rpmd's side.
#![allow(dead_code)]
pub use rpmd_kernel::testing::*;
use rpmd_pmd::port::{Pkts, PortConfig, Queues};
use rpmd_pmd::{Mempool, MempoolConfig, Port, Registry};
use std::time::{Duration, Instant};

/// A pool for a test port.
pub fn pool(name: &str, n: u32) -> Mempool {
    let mut c = MempoolConfig::new(name, n);
    c.cache_size = 0;
    Mempool::new(&c).unwrap()
}

/// Opens, configures and starts `dev` with `queues` queue pairs.
pub fn start(dev: &str, pool: &Mempool, queues: u16) -> (Box<dyn Port>, Queues) {
    let mut reg = Registry::new();
    rpmd_kernel::register(&mut reg);
    let pool = pool.clone();
    reg.domain().register_pool(&pool).unwrap();
    let mut p = reg.open(dev).unwrap_or_else(|e| panic!("{dev}: {e}"));
    let conf = PortConfig {
        rx_queues: queues,
        tx_queues: queues,
        rx_desc: 512,
        tx_desc: 512,
        rx_pool: Some(pool),
        ..Default::default()
    };
    p.configure(&conf)
        .unwrap_or_else(|e| panic!("{dev}: configure: {e}"));
    let q = p.start().unwrap_or_else(|e| panic!("{dev}: start: {e}"));
    (p, q)
}

/// rpmd's side of an exchange: answers ARP for `ip`, ICMP echo to it and
/// UDP to it on any port (echoed back), from MAC `mac`.
pub struct Responder {
    pub mac: [u8; 6],
    pub ip: [u8; 4],
    pub answered: usize,
    pub udp_seen: Vec<Vec<u8>>,
}

impl Responder {
    pub fn new(ip: [u8; 4]) -> Responder {
        Responder {
            mac: [0x02, 0x72, 0x70, 0x6d, 0x64, 0x01],
            ip,
            answered: 0,
            udp_seen: Vec::new(),
        }
    }

    /// The reply to `f`, if it asks for one.
    pub fn reply(&mut self, f: &[u8]) -> Option<Vec<u8>> {
        if f.len() < 42 {
            return None;
        }
        let ethertype = u16::from_be_bytes([f[12], f[13]]);
        if ethertype == 0x0806 && f[20..22] == [0, 1] && f[38..42] == self.ip {
            let mut r = vec![0u8; 42];
            r[0..6].copy_from_slice(&f[6..12]);
            r[6..12].copy_from_slice(&self.mac);
            r[12..14].copy_from_slice(&[8, 6]);
            r[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 2]);
            r[22..28].copy_from_slice(&self.mac);
            r[28..32].copy_from_slice(&self.ip);
            r[32..42].copy_from_slice(&f[22..32]);
            self.answered += 1;
            return Some(r);
        }
        if ethertype != 0x0800 || f[30..34] != self.ip {
            return None;
        }
        let ihl = (f[14] & 15) as usize * 4;
        let l4 = 14 + ihl;
        let mut r = f.to_vec();
        r[0..6].copy_from_slice(&f[6..12]);
        r[6..12].copy_from_slice(&self.mac);
        r[26..30].copy_from_slice(&f[30..34]);
        r[30..34].copy_from_slice(&f[26..30]);
        match f[23] {
            1 if f.get(l4) == Some(&8) => {
                // Echo reply: type 8 -> 0, checksum adjusted (RFC 1624).
                r[l4] = 0;
                let c = u16::from_be_bytes([r[l4 + 2], r[l4 + 3]]) as u32 + 0x0800;
                let c = ((c & 0xffff) + (c >> 16)) as u16;
                r[l4 + 2..l4 + 4].copy_from_slice(&c.to_be_bytes());
            }
            17 if f.len() >= l4 + 8 => {
                r[l4..l4 + 2].copy_from_slice(&f[l4 + 2..l4 + 4]);
                r[l4 + 2..l4 + 4].copy_from_slice(&f[l4..l4 + 2]);
                // The kernel may have left only the pseudo-header sum here
                // (checksum offload on veth): send no checksum (IPv4 allows it).
                r[l4 + 6..l4 + 8].copy_from_slice(&[0, 0]);
                self.udp_seen.push(f[l4 + 8..].to_vec());
            }
            _ => return None,
        }
        self.answered += 1;
        Some(r)
    }
}

/// Polls every rx queue and answers through tx queue of the same index,
/// until `done()` or `timeout`; returns frames received.
pub fn serve(
    q: &mut Queues,
    pool: &Mempool,
    resp: &mut Responder,
    timeout: Duration,
    mut done: impl FnMut(&Responder) -> bool,
) -> usize {
    let end = Instant::now() + timeout;
    let mut seen = 0;
    while Instant::now() < end && !done(resp) {
        let mut idle = true;
        for i in 0..q.rx.len() {
            let mut b = Pkts::new();
            let n = q.rx[i].rx_burst(&mut b, 32);
            seen += n;
            idle &= n == 0;
            let mut out = Pkts::new();
            while let Some(m) = b.pop() {
                if let Some(r) = resp.reply(m.data()) {
                    let mut o = pool.get().unwrap();
                    o.append(r.len()).unwrap().copy_from_slice(&r);
                    out.push(o).ok();
                }
            }
            let ti = i.min(q.tx.len() - 1);
            // A port that stops taking frames fails the test by its
            // deadline, not by hanging it.
            while !out.is_empty() && Instant::now() < end {
                if q.tx[ti].tx_burst(&mut out) == 0 {
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
        }
        if idle {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    seen
}

/// `ip -s` counters of `dev` in `ns`: (rx packets, tx packets).
pub fn kernel_counts(ns: &str, dev: &str) -> (u64, u64) {
    let read = |c: &str| {
        sh(&format!(
            "ip netns exec {ns} cat /sys/class/net/{dev}/statistics/{c}"
        ))
        .trim()
        .parse::<u64>()
        .unwrap()
    };
    (read("rx_packets"), read("tx_packets"))
}
