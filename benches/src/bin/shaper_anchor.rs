//! `shaper_anchor`: rpmd's egress shaper against Linux's HTB, the same
//! rates and classes, the same generator, the same veth pair.
//!
//! A veth pair A↔B. One generator offers three DSCP classes 80, 60 and
//! 60 Mbit/s (1000-byte UDP frames, paced) through a raw packet socket on
//! A; an rpmd `af_packet` port on B counts what arrives, per class, over
//! a window after a warm-up. In the kernel runs, A has an HTB root qdisc
//! (port 100 Mbit/s; gold DSCP 46 rate 30, prio 0; silver DSCP 10 rate 20
//! ceil 40, prio 1; bronze the rest, rate 10, prio 2; a 100-frame pfifo
//! under each) and the generator
//! sends straight into the socket; in the rpmd runs A has no qdisc and
//! the generator sends through an `rpmd_sched::Egress` of the same
//! configuration (`100mbit,limit=100,by=dscp,classes=gold:46:30mbit/
//! silver:10:20mbit:40mbit/bronze:default:10mbit`). Both should deliver
//! gold 70 (its 30 and the 40 left over, which the highest priority
//! borrows), silver 20, bronze 10 Mbit/s.
//!
//! Runs interleave (kernel, rpmd, kernel, …, `--runs` each, `--seconds`
//! each after a second's warm-up); per class, the median rate and its
//! error against the configuration. Ends with `RESULT shaper_accuracy
//! ratio=<rpmd's worst class error ÷ HTB's> rpmd_worst=<%> htb_worst=<%>`.
//! `--check PCT` exits 1 when rpmd's worst error is above PCT (the test
//! command's 1 %). Needs root (veth, tc).
#![allow(unsafe_code)] // the raw socket the generator sends on
use rpmd_pmd::port::{Pkts, RxQueue, TxQueue};
use rpmd_pmd::{Mempool, MempoolConfig, PortConfig, Registry};
use rpmd_sched::{Egress, EgressConfig};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SPEC: &str =
    "100mbit,limit=100,by=dscp,classes=gold:46:30mbit/silver:10:20mbit:40mbit/bronze:default:10mbit";
/// What each class should get, Mbit/s.
const WANT: [f64; 3] = [70.0, 20.0, 10.0];
/// The DSCP the generator marks each class with.
const DSCP: [u8; 3] = [46, 10, 0];
/// What the generator offers each class, Mbit/s: gold more than its
/// rate and the spare together, the others more than their rates.
const OFFERED_MBIT: [f64; 3] = [80.0, 60.0, 60.0];
const FRAME: usize = 1000;
const UDP_PORT: u16 = 9999;

fn sh(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", cmd])
        .status()
        .is_ok_and(|s| s.success())
}

/// The veth pair, removed when dropped.
struct Veth(String, String);

impl Veth {
    fn new() -> Veth {
        let id = std::process::id() % 100_000;
        let (a, b) = (format!("rpshA{id}"), format!("rpshB{id}"));
        let _ = sh(&format!("ip link del {a} 2>/dev/null"));
        let ok = sh(&format!("ip link add {a} type veth peer name {b}"))
            && [&a, &b].iter().all(|i| {
                // No IPv6 chatter (router solicitations) on the wire.
                let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{i}/disable_ipv6"), "1");
                sh(&format!("ip link set {i} up"))
            });
        if !ok {
            eprintln!("shaper_anchor: cannot make a veth pair (needs root and iproute2)");
            std::process::exit(2);
        }
        Veth(a, b)
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = sh(&format!("ip link del {}", self.0));
    }
}

/// HTB on `dev`, the configuration of [`SPEC`].
fn htb(dev: &str) -> bool {
    let c = |s: &str| sh(&format!("tc {s}"));
    c(&format!("qdisc replace dev {dev} root handle 1: htb default 30 r2q 1000"))
        && c(&format!("class add dev {dev} parent 1: classid 1:1 htb rate 100mbit ceil 100mbit"))
        && c(&format!("class add dev {dev} parent 1:1 classid 1:10 htb rate 30mbit ceil 100mbit prio 0"))
        && c(&format!("class add dev {dev} parent 1:1 classid 1:20 htb rate 20mbit ceil 40mbit prio 1"))
        && c(&format!("class add dev {dev} parent 1:1 classid 1:30 htb rate 10mbit ceil 100mbit prio 2"))
        && c(&format!("filter add dev {dev} parent 1: protocol ip prio 1 u32 match ip dsfield 0xb8 0xfc flowid 1:10"))
        && c(&format!("filter add dev {dev} parent 1: protocol ip prio 1 u32 match ip dsfield 0x28 0xfc flowid 1:20"))
        // The same 100 frames per class as rpmd's limit=100.
        && [10, 20, 30].iter().all(|k| {
            c(&format!("qdisc add dev {dev} parent 1:{k} handle {k}: pfifo limit 100"))
        })
}

/// A UDP/IPv4 frame of class `c`.
fn frame(c: usize) -> Vec<u8> {
    let mut f = vec![0u8; FRAME];
    f[..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0x5e, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[15] = DSCP[c] << 2;
    f[16..18].copy_from_slice(&((FRAME - 14) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[198, 18, 0, 1]);
    f[30..34].copy_from_slice(&[198, 18, 0, 2]);
    let sum = rpmd_pmd::net::ipv4_header_checksum(&f[14..34]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f[34..36].copy_from_slice(&1024u16.to_be_bytes());
    f[36..38].copy_from_slice(&UDP_PORT.to_be_bytes());
    f[38..40].copy_from_slice(&((FRAME - 34) as u16).to_be_bytes());
    f
}

/// The generator's device: a raw packet socket sending one frame per
/// call, so that a frame the qdisc drops costs only itself (an
/// `af_packet` TX ring stops at the first drop until the next kick, and a
/// ring backed up behind HTB refuses every class alike), with a send
/// buffer big enough for every frame the qdisc may hold.
struct RawTx(OwnedFd);

impl RawTx {
    fn new(dev: &str) -> RawTx {
        let index = std::fs::read_to_string(format!("/sys/class/net/{dev}/ifindex"))
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
            .expect("the veth's ifindex");
        // SAFETY: plain socket(2); the result is checked before use.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
        assert!(
            fd >= 0,
            "socket(AF_PACKET): {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_ll is plain integers, for which zero is valid.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = index;
        // SAFETY: `sll` is a valid sockaddr_ll of the size passed.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
        let size: i32 = 64 << 20;
        // SAFETY: an int option of the size passed.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDBUFFORCE,
                (&size as *const i32).cast(),
                4,
            )
        };
        RawTx(fd)
    }
}

impl TxQueue for RawTx {
    fn tx_burst(&mut self, pkts: &mut Pkts) -> usize {
        for m in pkts.iter() {
            let d = m.data();
            // SAFETY: `d` is valid for `d.len()` bytes during the call.
            // A failed send (the qdisc dropped the frame) drops only it.
            unsafe {
                libc::send(
                    self.0.as_raw_fd(),
                    d.as_ptr().cast(),
                    d.len(),
                    libc::MSG_DONTWAIT,
                )
            };
        }
        let n = pkts.len();
        pkts.clear();
        n
    }
}

/// Counts arriving frames' bytes per class until `stop`.
fn receive(
    mut rx: Box<dyn RxQueue>,
    cfg: EgressConfig,
    bytes: Arc<[AtomicU64; 3]>,
    stop: Arc<AtomicBool>,
) {
    let mut pkts = Pkts::new();
    while !stop.load(Relaxed) {
        if rx.rx_burst(&mut pkts, 64) == 0 {
            std::thread::sleep(Duration::from_micros(100));
            continue;
        }
        while let Some(m) = pkts.pop() {
            let d = m.data();
            if d.len() < 38 || d[12..14] != [0x08, 0x00] || d[36..38] != UDP_PORT.to_be_bytes() {
                continue;
            }
            let c = cfg.class_of_key(Some(d[15] >> 2));
            bytes[c].fetch_add(m.pkt_len() as u64, Relaxed);
        }
    }
}

/// Offers every class its load through `tx` until `stop`.
fn generate(tx: &mut dyn TxQueue, pool: &Mempool, stop: &AtomicBool) {
    let frames: Vec<Vec<u8>> = (0..3).map(frame).collect();
    let fps = OFFERED_MBIT.map(|m| m * 1e6 / 8.0 / FRAME as f64);
    let t0 = Instant::now();
    let mut sent = [0u64; 3];
    let mut pkts = Pkts::new();
    let mut refused = 0u64;
    while !stop.load(Relaxed) {
        let t = t0.elapsed().as_secs_f64();
        for c in 0..3 {
            let due = (t * fps[c]) as u64;
            while sent[c] < due && !pkts.is_full() {
                let Ok(mut m) = pool.get() else { break };
                if let Some(d) = m.append(FRAME) {
                    d.copy_from_slice(&frames[c]);
                }
                let _ = pkts.push(m);
                sent[c] += 1;
            }
        }
        let before = pkts.len();
        let took = tx.tx_burst(&mut pkts);
        refused += (before - took) as u64;
        pkts.clear(); // what the socket did not take is dropped
        tx.in_flight();
        std::thread::sleep(Duration::from_micros(50));
    }
    if std::env::var_os("SHAPER_DEBUG").is_some() {
        eprintln!("generator: offered {sent:?}, refused by the socket {refused}");
    }
}

/// One run: the classes' delivered rates in Mbit/s.
fn run(reg: &Registry, veth: &Veth, pool: &Mempool, rpmd: bool, secs: f64) -> [f64; 3] {
    let _ = sh(&format!("tc qdisc del dev {} root 2>/dev/null", veth.0));
    if !rpmd && !htb(&veth.0) {
        eprintln!("shaper_anchor: tc could not set up HTB on {}", veth.0);
        std::process::exit(2);
    }
    let cfg = EgressConfig::parse(SPEC).expect("the anchor's spec parses");
    let open = |dev: &str| {
        let mut p = reg
            .open(&format!("af_packet:{dev},frames=4096"))
            .expect("af_packet port");
        p.configure(&PortConfig::with_pool(pool))
            .expect("configure");
        let q = p.start().expect("start");
        (p, q)
    };
    let (mut pb, mut qb) = open(&veth.1);
    let bytes: Arc<[AtomicU64; 3]> = Arc::new(Default::default());
    let stop = Arc::new(AtomicBool::new(false));
    let rx = qb.take_rx(0).expect("rx queue");
    let recv = {
        let (cfg, bytes, stop) = (cfg.clone(), bytes.clone(), stop.clone());
        std::thread::spawn(move || {
            rpmd_benches::tsc::pin(1);
            receive(rx, cfg, bytes, stop)
        })
    };
    let txq: Box<dyn TxQueue> = Box::new(RawTx::new(&veth.0));
    let gen = {
        let (stop, pool) = (stop.clone(), pool.clone());
        std::thread::spawn(move || {
            rpmd_benches::tsc::pin(0);
            let mut tx: Box<dyn TxQueue> = if rpmd {
                Box::new(Egress::new(&cfg, txq).handle())
            } else {
                txq
            };
            generate(&mut *tx, &pool, &stop);
        })
    };
    std::thread::sleep(Duration::from_secs(1));
    let b0: Vec<u64> = bytes.iter().map(|b| b.load(Relaxed)).collect();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let b1: Vec<u64> = bytes.iter().map(|b| b.load(Relaxed)).collect();
    let dt = t0.elapsed().as_secs_f64();
    stop.store(true, Relaxed);
    if std::env::var_os("SHAPER_DEBUG").is_some() && !rpmd {
        let _ = sh(&format!(
            "tc -s class show dev {0}; tc -s filter show dev {0}",
            veth.0
        ));
    }
    gen.join().expect("generator");
    recv.join().expect("receiver");
    let _ = pb.stop();
    std::array::from_fn(|c| (b1[c] - b0[c]) as f64 * 8.0 / dt / 1e6)
}

fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let secs: f64 = arg("--seconds", 5.0);
    let runs: usize = arg("--runs", 3usize).max(1);
    let check: Option<f64> = std::env::args()
        .any(|a| a == "--check")
        .then(|| arg("--check", 1.0));
    let veth = Veth::new();
    let mut reg = Registry::new();
    rpmd_kernel::register(&mut reg);
    let mut pc = MempoolConfig::new("shaper-anchor", 8192);
    pc.cache_size = 0;
    let pool = Mempool::new(&pc).expect("mempool");
    println!(
        "veth {}->{}; {SPEC}; classes offered {OFFERED_MBIT:?} Mbit/s of {FRAME}-byte frames; {secs} s per run after 1 s; {runs} interleaved runs each",
        veth.0, veth.1
    );
    let mut res: [Vec<[f64; 3]>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..runs {
        for (k, rpmd) in [false, true].into_iter().enumerate() {
            let r = run(&reg, &veth, &pool, rpmd, secs);
            println!(
                "  {:<6} gold {:.3}  silver {:.3}  bronze {:.3} Mbit/s",
                if rpmd { "rpmd" } else { "HTB" },
                r[0],
                r[1],
                r[2]
            );
            res[k].push(r);
        }
    }
    let _ = sh(&format!("tc qdisc del dev {} root 2>/dev/null", veth.0));
    println!(
        "{:<6} {:>22} {:>22} {:>22}   worst",
        "", "gold (want 70)", "silver (want 20)", "bronze (want 10)"
    );
    let mut worst = [0.0f64; 2];
    for (k, name) in ["HTB", "rpmd"].iter().enumerate() {
        let mut cells = Vec::new();
        for c in 0..3 {
            let m = rpmd_benches::median(res[k].iter().map(|r| r[c]).collect());
            let err = 100.0 * (m - WANT[c]).abs() / WANT[c];
            worst[k] = worst[k].max(err);
            cells.push(format!("{m:>10.3} ({err:>6.3} %)"));
        }
        println!("{name:<6} {}   {:.3} %", cells.join(" "), worst[k]);
    }
    println!(
        "RESULT shaper_accuracy ratio={:.3} rpmd_worst={:.3} htb_worst={:.3} (worst class error, %; target ratio <= 1.0, rpmd within 1 %)",
        worst[1] / worst[0].max(1e-6),
        worst[1],
        worst[0]
    );
    if let Some(limit) = check {
        if worst[1] > limit {
            eprintln!(
                "shaper_anchor: rpmd's worst class is {:.3} % off, above {limit} %",
                worst[1]
            );
            std::process::exit(1);
        }
    }
}
