//! Runs inside the QEMU guest of `tests/vm/run.sh`: rpmd's virtio-net PCI
//! driver, through the port API and a `pci:` device string, on functions
//! bound to vfio-pci behind the guest's IOMMU. The host peer
//! (`tests/vm/peer.py`) answers every "RPMD-VM PING" frame with a PONG.
//!
//! ```text
//! virtio_guest [BDF | --legacy BDF]...
//! ```
//!
//! `--legacy BDF`: a transitional device without ACCESS_PLATFORM, which
//! the driver must take through its legacy interface with physical
//! addresses (a mempool made with `IovaMode::Pa`).
//!
//! Per function: open, configure, start, 1000 tagged pings of 60 to 1514
//! bytes out (at most 128 in flight) and every pong back, checked byte for
//! byte, counters that agree, stop and start again with another
//! exchange, and every mbuf back in the pool at the end. Prints
//! `case ...: ok|FAIL` lines and `virtio_guest: N passed, M failed`.
use rpmd_pmd::port::Pkts;
use rpmd_pmd::{IovaMode, Mempool, MempoolConfig, PortConfig, Queues, Registry};
use std::sync::Arc;
use std::time::{Duration, Instant};

type R<T> = Result<T, String>;

/// Frame sizes the pings cycle through.
const SIZES: [usize; 4] = [60, 128, 512, 1514];

/// Ping `tag`: broadcast from `mac`, "RPMD-VM PING", the tag, then bytes
/// that depend on the tag and their position.
fn ping(mac: [u8; 6], tag: u32) -> Vec<u8> {
    let len = SIZES[tag as usize % SIZES.len()];
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[0x88, 0xb5]);
    f.extend_from_slice(b"RPMD-VM PING");
    f.extend_from_slice(&tag.to_le_bytes());
    while f.len() < len {
        f.push((f.len() as u32 * 7 + tag) as u8);
    }
    f
}

/// Sends `n` pings tagged from `first`, at most 128 in flight, and checks
/// every pong byte for byte: the peer swaps the addresses, PING becomes
/// PONG, and everything after it comes back unchanged.
fn exchange(q: &mut Queues, pool: &Mempool, mac: [u8; 6], first: u32, n: u32) -> R<()> {
    let mut pending: std::collections::BTreeSet<u32> = (first..first + n).collect();
    let (mut next, mut done) = (first, 0u32);
    let mut out = Pkts::new();
    let mut inb = Pkts::new();
    let t0 = Instant::now();
    while done < n {
        if t0.elapsed() > Duration::from_secs(20) {
            return Err(format!(
                "{} of {n} pongs missing, e.g. tag {:?}",
                pending.len(),
                pending.first()
            ));
        }
        while next < first + n && next - first < done + 128 && out.len() < 32 {
            let f = ping(mac, next);
            let mut m = pool.get().map_err(|e| e.to_string())?;
            m.append(f.len()).ok_or("no room")?.copy_from_slice(&f);
            let _ = out.push(m);
            next += 1;
        }
        q.tx_burst(0, &mut out);
        // What the queue did not take is sent again next round.
        next -= out.len() as u32;
        out.clear();
        q.rx_burst(0, &mut inb, 32);
        while let Some(m) = inb.pop() {
            let d = m.data();
            if d.len() < 30 || d[..6] != mac || &d[14..26] != b"RPMD-VM PONG" {
                continue;
            }
            let tag = u32::from_le_bytes([d[26], d[27], d[28], d[29]]);
            let want = ping(mac, tag);
            if d.len() != want.len() || d[26..] != want[26..] || d[6..12] != [2, 0, 0, 0, 0, 0x99] {
                return Err(format!(
                    "pong {tag} differs from its ping ({} bytes)",
                    d.len()
                ));
            }
            if pending.remove(&tag) {
                done += 1;
            }
        }
    }
    Ok(())
}

fn run(bdf: &str, pool: &Arc<Mempool>) -> R<String> {
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let mut p = reg.open(&format!("pci:{bdf}")).map_err(|e| e.to_string())?;
    if p.driver() != "virtio-net-pci" {
        return Err(format!("driver {}", p.driver()));
    }
    let mac = p.mac_addr().0;
    p.configure(&PortConfig {
        rx_pool: Some(pool.clone()),
        ..PortConfig::default()
    })
    .map_err(|e| e.to_string())?;
    let mut q = p.start().map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    while !p.link().up {
        if t0.elapsed() > Duration::from_secs(5) {
            return Err("link down".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    exchange(&mut q, pool, mac, 0, 1000)?;
    let s = p.stats();
    if s.opackets != 1000 || s.ipackets < 1000 {
        return Err(format!("counters: {s:?}"));
    }
    let feats = p
        .xstats()
        .iter()
        .find(|x| x.name == "negotiated_features")
        .map(|x| x.value)
        .unwrap_or(0);
    p.stop().map_err(|e| e.to_string())?;
    drop(q);
    // Stop and start again: the device is reset and set up anew.
    let mut q = p.start().map_err(|e| e.to_string())?;
    exchange(&mut q, pool, mac, 10_000, 64)?;
    p.stop().map_err(|e| e.to_string())?;
    drop(q);
    drop(p);
    if pool.available() != pool.size() {
        return Err(format!(
            "{} of {} mbufs back in the pool",
            pool.available(),
            pool.size()
        ));
    }
    Ok(format!(
        "MAC {}, features {feats:#x}, IOVA {:?}: 1000 pings (60..1514 bytes) and their pongs byte for byte, stop, start, 64 more; every mbuf back",
        rpmd_pmd::port::MacAddr(mac),
        pool.region().iova_mode()
    ))
}

fn main() {
    let (mut pass, mut fail) = (0, 0);
    let pool = match Mempool::new(&MempoolConfig::new("virtio-guest", 2048)) {
        Ok(p) => Arc::new(p),
        Err(e) => {
            println!("case mempool: FAIL: {e}");
            println!("virtio_guest: 0 passed, 1 failed");
            std::process::exit(1);
        }
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let (bdf, pool) = if a == "--legacy" {
            let mut c = MempoolConfig::new("virtio-guest-pa", 2048);
            c.iova_mode = IovaMode::Pa;
            match Mempool::new(&c) {
                Ok(p) => (args.next().unwrap_or_default(), Arc::new(p)),
                Err(e) => {
                    fail += 1;
                    println!("case IOVA=PA mempool: FAIL: {e}");
                    continue;
                }
            }
        } else {
            (a, pool.clone())
        };
        match run(&bdf, &pool) {
            Ok(m) => {
                pass += 1;
                println!("case {bdf} virtio-net-pci port: ok: {m}");
            }
            Err(e) => {
                fail += 1;
                println!("case {bdf} virtio-net-pci port: FAIL: {e}");
            }
        }
    }
    println!("virtio_guest: {pass} passed, {fail} failed");
    std::process::exit(if fail == 0 && pass > 0 { 0 } else { 1 });
}
