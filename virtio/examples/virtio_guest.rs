//! Runs inside the QEMU guest of `tests/vm/run.sh`: rpmd's virtio-net PCI
//! driver, through the port API and a `pci:` device string, on functions
//! bound to vfio-pci behind the guest's IOMMU. The host peer
//! (`tests/vm/peer.py`) answers every "RPMD-VM PING" frame with a PONG.
//!
//! ```text
//! virtio_guest [BDF | --refused BDF]...
//! ```
//!
//! `--refused BDF`: a device without ACCESS_PLATFORM (its DMA would bypass
//! the IOMMU) must be refused with an error that says so.
//!
//! Per function: open, configure, start, 64 tagged pings out and every
//! pong back with its tag, counters that agree, stop and start again with
//! another exchange, and every mbuf back in the pool at the end. Prints
//! `case ...: ok|FAIL` lines and `virtio_guest: N passed, M failed`.
use rpmd_pmd::port::Pkts;
use rpmd_pmd::{Mempool, MempoolConfig, PortConfig, Queues, Registry};
use std::sync::Arc;
use std::time::{Duration, Instant};

type R<T> = Result<T, String>;

fn ping(mac: [u8; 6], tag: u32) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[0x88, 0xb5]);
    f.extend_from_slice(b"RPMD-VM PING");
    f.extend_from_slice(&tag.to_le_bytes());
    f.resize(60, 0);
    f
}

/// Sends `n` pings tagged from `first` and waits for every pong.
fn exchange(q: &mut Queues, pool: &Mempool, mac: [u8; 6], first: u32, n: u32) -> R<()> {
    let mut want: std::collections::BTreeSet<u32> = (first..first + n).collect();
    let mut out = Pkts::new();
    for tag in first..first + n {
        let mut m = pool.get().map_err(|e| e.to_string())?;
        m.append(60)
            .ok_or("no room")?
            .copy_from_slice(&ping(mac, tag));
        let _ = out.push(m);
        if out.len() == 16 || tag + 1 == first + n {
            let t0 = Instant::now();
            while !out.is_empty() {
                q.tx_burst(0, &mut out);
                if t0.elapsed() > Duration::from_secs(5) {
                    return Err(format!("TX stuck with {} frames left", out.len()));
                }
            }
        }
    }
    let t0 = Instant::now();
    let mut inb = Pkts::new();
    while !want.is_empty() {
        if t0.elapsed() > Duration::from_secs(10) {
            return Err(format!(
                "{} pongs missing, e.g. tag {:?}",
                want.len(),
                want.first()
            ));
        }
        q.rx_burst(0, &mut inb, 32);
        while let Some(m) = inb.pop() {
            let d = m.data();
            if d.len() >= 30 && d[..6] == mac && &d[14..26] == b"RPMD-VM PONG" {
                let tag = u32::from_le_bytes([d[26], d[27], d[28], d[29]]);
                want.remove(&tag);
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
    exchange(&mut q, pool, mac, 0, 64)?;
    let s = p.stats();
    if s.opackets != 64 || s.ipackets < 64 {
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
    exchange(&mut q, pool, mac, 1000, 64)?;
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
        "MAC {}, features {feats:#x}: 64 pings and pongs, stop, start, 64 more; every mbuf back",
        rpmd_pmd::port::MacAddr(mac)
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
        if a == "--refused" {
            let bdf = args.next().unwrap_or_default();
            let mut reg = Registry::new();
            rpmd_virtio::register(&mut reg);
            match reg.open(&format!("pci:{bdf}")) {
                Err(e) if e.to_string().contains("iommu_platform=on") => {
                    pass += 1;
                    println!("case {bdf} without ACCESS_PLATFORM refused: ok: {e}");
                }
                Err(e) => {
                    fail += 1;
                    println!("case {bdf} without ACCESS_PLATFORM refused: FAIL: wrong error: {e}");
                }
                Ok(_) => {
                    fail += 1;
                    println!("case {bdf} without ACCESS_PLATFORM refused: FAIL: opened");
                }
            }
            continue;
        }
        let bdf = a;
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
