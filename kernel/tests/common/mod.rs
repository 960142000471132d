//! The kernel-port tests' lab: network namespaces and veth pairs made for
//! one test and removed when it ends (also on panic), a thread that runs
//! in a namespace (so a test's kernel sockets live there), and a small
//! responder that answers ARP, ICMP echo and UDP echo from rpmd's side.
#![allow(dead_code)]
use rpmd_pmd::port::{Pkts, PortConfig, Queues};
use rpmd_pmd::{Mempool, MempoolConfig, Port, Registry};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs a command; panics with its output when it fails.
pub fn sh(cmd: &str) -> String {
    let out = Command::new("sh").arg("-c").arg(cmd).output().expect("sh");
    assert!(out.status.success(), "{cmd}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a command, ignoring failure.
pub fn sh_ok(cmd: &str) -> bool {
    Command::new("sh").arg("-c").arg(cmd).output().map(|o| o.status.success()).unwrap_or(false)
}

/// Whether this test can make namespaces; if not, records the skip (a
/// failure under CI=true) and returns false.
pub fn lab_available(test: &str) -> bool {
    let root = euid() == 0;
    if !root || !sh_ok("command -v ip") {
        rpmd_pmd::testing::missing_peer(test, "needs root and iproute2 (ip netns, veth)");
        return false;
    }
    true
}

fn euid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(u32::MAX)
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// Namespaces and root-side interfaces that are removed on drop.
pub struct Lab {
    pub tag: String,
    netns: Vec<String>,
    links: Vec<String>,
}

impl Lab {
    /// A lab with a short unique tag (interface names have 15 bytes).
    pub fn new() -> Lab {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let tag = format!("{}{}", std::process::id() % 100000, n);
        Lab { tag, netns: Vec::new(), links: Vec::new() }
    }

    /// A namespace `rk<tag><suffix>`.
    pub fn netns(&mut self, suffix: &str) -> String {
        let ns = format!("rk{}{suffix}", self.tag);
        sh(&format!("ip netns add {ns} && ip -n {ns} link set lo up"));
        sh(&format!("ip netns exec {ns} sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1"));
        self.netns.push(ns.clone());
        ns
    }

    /// A veth pair: `root` stays here (for rpmd), its peer goes into `ns`
    /// as `peer` with `addr` (CIDR) and up. `queues` sets numrx/numtx.
    pub fn veth(&mut self, root: &str, ns: &str, peer: &str, addr: &str, queues: u32) -> String {
        let root = format!("{root}{}", self.tag);
        let q = format!("numrxqueues {queues} numtxqueues {queues}");
        sh(&format!("ip link add {root} {q} type veth peer name {peer} {q} netns {ns}"));
        self.links.push(root.clone());
        sh(&format!("sysctl -qw net.ipv6.conf.{root}.disable_ipv6=1"));
        sh(&format!("ip link set {root} up"));
        sh(&format!("ip -n {ns} addr add {addr} dev {peer} && ip -n {ns} link set {peer} up"));
        root
    }

    /// Forgets a link removed by other means (a TAP that went with its port).
    pub fn forget_link(&mut self, name: &str) {
        self.links.retain(|l| l != name);
    }

    pub fn track_link(&mut self, name: &str) {
        self.links.push(name.into());
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for l in &self.links {
            sh_ok(&format!("ip link del {l}"));
        }
        for ns in &self.netns {
            sh_ok(&format!("ip netns del {ns}"));
        }
    }
}

/// Runs `f` on a thread inside namespace `ns` and returns its result:
/// sockets it opens stay in `ns`.
pub fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("netns file");
        use std::os::fd::AsRawFd;
        // SAFETY: setns(2) on a thread of our own with a namespace fd we
        // opened; the thread ends when `f` returns.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns {path}: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .expect("netns thread")
}


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
    let pool = Arc::new(pool.clone());
    reg.domain().register_pool(&pool).unwrap();
    let mut p = reg.open(dev).unwrap_or_else(|e| panic!("{dev}: {e}"));
    let conf = PortConfig { rx_queues: queues, tx_queues: queues, rx_desc: 512, tx_desc: 512, rx_pool: Some(pool), ..Default::default() };
    p.configure(&conf).unwrap_or_else(|e| panic!("{dev}: configure: {e}"));
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
        Responder { mac: [0x02, 0x72, 0x70, 0x6d, 0x64, 0x01], ip, answered: 0, udp_seen: Vec::new() }
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
pub fn serve(q: &mut Queues, pool: &Mempool, resp: &mut Responder, timeout: Duration, mut done: impl FnMut(&Responder) -> bool) -> usize {
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
            while !out.is_empty() {
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
    let read = |c: &str| sh(&format!("ip netns exec {ns} cat /sys/class/net/{dev}/statistics/{c}")).trim().parse::<u64>().unwrap();
    (read("rx_packets"), read("tx_packets"))
}
