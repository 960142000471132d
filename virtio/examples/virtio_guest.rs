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
//! exchange, and every mbuf back in the pool at the end.
//!
//! On modern functions also: the same over packed rings (`packed_vq=1`);
//! QEMU's receive filter programmed through the control queue
//! (promiscuous, all-multicast, MAC tables: frames the peer sends to
//! foreign unicast and multicast addresses arrive or not as set); the
//! device's MTU (VIRTIO_NET_F_MTU) as the port's maximum; an rx interrupt
//! through MSI-X and VFIO to the queue's eventfd; and a device that
//! refuses the features (QEMU drops FEATURES_OK when ACCESS_PLATFORM is
//! not accepted, forced with `drop_features=`) giving a clear error.
//!
//! `--mq BDF`: a modern function with two queue pairs whose backend is DPDK
//! testpmd on the host (vhost-user, io forwarding: every frame comes back
//! on the pair it went out on). Both pairs are used (MQ_VQ_PAIRS_SET
//! through the control queue); 300 frames per pair, each checked byte for
//! byte and on its pair; an rx interrupt on pair 1.
//!
//! `--no-ctrl BDF`: a modern function without a control queue (QEMU's
//! `ctrl_vq=off`, which still offers CTRL_RX): CTRL_RX is not negotiated,
//! turning promiscuous or all-multicast off and setting a MAC filter are
//! errors (the device delivers every frame), and pings still go and come
//! back.
//!
//! `--same-group A B`: two functions of one IOMMU group (behind a PCI
//! bridge) as two ports of one registry, so of one VFIO container and
//! DMA domain, each with its own mempool: both start (a container per port
//! used to fail here, the second open of the group returning EBUSY), and
//! each sends pings built in the *other* port's pool (any registered pool
//! can be transmitted), 300 per port, every pong back byte for byte.
//!
//! Prints `case ...: ok|FAIL` lines and `virtio_guest: N passed, M failed`.
#![allow(unsafe_code)]
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

/// Sends every frame of `frames`, retrying what the queue does not take.
fn send(q: &mut Queues, pool: &Mempool, frames: &[Vec<u8>]) -> R<()> {
    let mut out = Pkts::new();
    for f in frames {
        let mut m = pool.get().map_err(|e| e.to_string())?;
        m.append(f.len()).ok_or("no room")?.copy_from_slice(f);
        let _ = out.push(m);
    }
    let t0 = Instant::now();
    while !out.is_empty() {
        if t0.elapsed() > Duration::from_secs(5) {
            return Err("the TX queue took nothing for 5 s".into());
        }
        q.tx_burst(0, &mut out);
    }
    Ok(())
}

/// Asks the peer to send a frame to `dst`, then pings as a marker; returns
/// whether the frame to `dst` arrived before the marker's pong (the peer
/// answers in order and QEMU delivers in order, so one that did not had
/// been filtered).
fn delivered(q: &mut Queues, pool: &Mempool, mac: [u8; 6], dst: [u8; 6], tag: u32) -> R<bool> {
    let mut echo = vec![0xff; 6];
    echo.extend_from_slice(&mac);
    echo.extend_from_slice(&[0x88, 0xb5]);
    echo.extend_from_slice(b"RPMD-VM ECHO");
    echo.extend_from_slice(&dst);
    echo.extend_from_slice(&tag.to_le_bytes());
    echo.resize(60, 0);
    let marker = tag | 0x8000_0000;
    send(q, pool, &[echo, ping(mac, marker)])?;
    let mut inb = Pkts::new();
    let mut seen = false;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        q.rx_burst(0, &mut inb, 32);
        while let Some(m) = inb.pop() {
            let d = m.data();
            if d.len() < 36 || &d[14..26] != b"RPMD-VM PONG" {
                continue;
            }
            if d[..6] == dst && d[26..32] == dst && d[32..36] == tag.to_le_bytes() {
                seen = true;
            } else if d[..6] == mac && d[26..30] == marker.to_le_bytes() {
                return Ok(seen);
            }
        }
    }
    Err(format!("the marker pong {marker:#x} did not come"))
}

/// The receive filter, programmed through the control queue, against
/// QEMU's: what arrives with each setting.
fn filters(p: &mut dyn rpmd_pmd::Port, q: &mut Queues, pool: &Mempool) -> R<()> {
    use rpmd_pmd::port::MacAddr;
    let mac = p.mac_addr().0;
    let other = [0x02, 0x11, 0x22, 0x33, 0x44, 0x55];
    let mc = [0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb];
    let mc2 = [0x01, 0x00, 0x5e, 0x00, 0x00, 0xfc];
    let bcast = [0xff; 6];
    let e = |e: rpmd_pmd::Error| e.to_string();
    let mut tag = 0x100;
    let mut expect = |q: &mut Queues, what: &str, dst: [u8; 6], want: bool| -> R<()> {
        tag += 1;
        let got = delivered(q, pool, mac, dst, tag)?;
        if got != want {
            return Err(format!(
                "{what}: a frame to {} {}",
                MacAddr(dst),
                if got { "arrived" } else { "did not arrive" }
            ));
        }
        Ok(())
    };
    expect(q, "promiscuous (the default)", other, true)?;
    p.set_promiscuous(false).map_err(e)?;
    p.set_allmulticast(false).map_err(e)?;
    expect(q, "filtering", mac, true)?;
    expect(q, "filtering", bcast, true)?;
    expect(q, "filtering", other, false)?;
    expect(q, "filtering", mc, false)?;
    p.set_mac_filter(&[MacAddr(other)], &[MacAddr(mc)])
        .map_err(e)?;
    expect(q, "MAC table", other, true)?;
    expect(q, "MAC table", mc, true)?;
    expect(q, "MAC table", mc2, false)?;
    p.set_mac_filter(&[], &[]).map_err(e)?;
    expect(q, "empty MAC table", other, false)?;
    p.set_allmulticast(true).map_err(e)?;
    expect(q, "all-multicast", mc2, true)?;
    expect(q, "all-multicast", other, false)?;
    p.set_promiscuous(true).map_err(e)?;
    expect(q, "promiscuous", other, true)?;
    if p.set_mac_filter(&[MacAddr(mc)], &[]).is_ok() {
        return Err("a multicast address in the unicast table was taken".into());
    }
    Ok(())
}

/// Arms rx queue `pair`'s interrupt, sends `frame` on TX queue `pair` (it
/// comes back on `pair`), and waits up to 2 s for the queue's eventfd (an
/// MSI-X vector routed by VFIO); disarms again.
fn interrupted(q: &mut Queues, pool: &Mempool, pair: usize, frame: Vec<u8>) -> R<()> {
    use std::os::fd::AsRawFd;
    let mut inb = Pkts::new();
    while q.rx_burst(pair as u16, &mut inb, 32) > 0 {
        inb.clear();
    }
    q.rx[pair].set_interrupt(true).map_err(|e| e.to_string())?;
    let fd = q.rx[pair]
        .interrupt_fd()
        .ok_or("no interrupt fd although MSI-X is offered")?
        .as_raw_fd();
    let mut out = Pkts::new();
    let mut m = pool.get().map_err(|e| e.to_string())?;
    m.append(frame.len())
        .ok_or("no room")?
        .copy_from_slice(&frame);
    let _ = out.push(m);
    q.tx_burst(pair as u16, &mut out);
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    let ready = unsafe { libc::poll(&mut pfd, 1, 2000) } == 1;
    q.rx[pair].set_interrupt(false).map_err(|e| e.to_string())?;
    if !ready {
        return Err(format!(
            "armed, a frame on its way back on queue {pair}, and no interrupt within 2 s"
        ));
    }
    Ok(())
}

/// An rx interrupt on queue 0, then the pong it announced received.
fn rx_interrupt(q: &mut Queues, pool: &Mempool, mac: [u8; 6]) -> R<()> {
    interrupted(q, pool, 0, ping(mac, 0x7000))?;
    let mut inb = Pkts::new();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(2) {
        q.rx_burst(0, &mut inb, 32);
        while let Some(m) = inb.pop() {
            if m.data().len() >= 30 && m.data()[26..30] == 0x7000u32.to_le_bytes() {
                return Ok(());
            }
        }
    }
    Err("interrupted, but the pong did not arrive".into())
}

/// Opens `dev`, configures `pairs` queue pairs on `pool`, starts it and
/// waits up to 5 s for the link.
fn open_started(dev: &str, pool: &Mempool, pairs: u16) -> R<(Box<dyn rpmd_pmd::Port>, Queues)> {
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let mut p = reg.open(dev).map_err(|e| e.to_string())?;
    if p.driver() != "virtio-net-pci" {
        return Err(format!("driver {}", p.driver()));
    }
    p.configure(&PortConfig {
        rx_queues: pairs,
        tx_queues: pairs,
        rx_pool: Some(pool.clone()),
        ..PortConfig::default()
    })
    .map_err(|e| e.to_string())?;
    let q = p.start().map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    while !p.link().up {
        if t0.elapsed() > Duration::from_secs(5) {
            return Err("link down".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok((p, q))
}

/// Stops the port and checks every mbuf is back in `pool`.
fn stop_all(mut p: Box<dyn rpmd_pmd::Port>, q: Queues, pool: &Mempool) -> R<()> {
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
    Ok(())
}

/// A device that refuses the features: QEMU's modern device with
/// iommu_platform=on clears FEATURES_OK unless ACCESS_PLATFORM (bit 33) is
/// accepted; `drop_features` keeps it out.
fn refused(bdf: &str, pool: &Mempool) -> R<String> {
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let mut p = reg
        .open(&format!("pci:{bdf},drop_features=0x200000000"))
        .map_err(|e| e.to_string())?;
    p.configure(&PortConfig {
        rx_pool: Some(pool.clone()),
        ..PortConfig::default()
    })
    .map_err(|e| e.to_string())?;
    match p.start() {
        Ok(_) => Err("started although the device refused the features".into()),
        Err(e) if e.to_string().contains("refused features") && !p.link().up => Ok(e.to_string()),
        Err(e) => Err(format!("unexpected error: {e}")),
    }
}

/// Frame `i` of pair `q`: from `mac`, tagged, 60 to 1514 bytes.
fn mq_frame(mac: [u8; 6], q: u32, i: u32) -> Vec<u8> {
    let len = SIZES[i as usize % SIZES.len()];
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[0x88, 0xb5]);
    f.extend_from_slice(b"RPMD-VM MQ  ");
    f.extend_from_slice(&q.to_le_bytes());
    f.extend_from_slice(&i.to_le_bytes());
    while f.len() < len {
        f.push((f.len() as u32 * 11 + i + 97 * q) as u8);
    }
    f
}

/// Two queue pairs against testpmd io: each pair's frames come back on it.
fn mq(bdf: &str, pool: &Mempool) -> R<String> {
    const N: u32 = 300;
    let (p, mut q) = open_started(&format!("pci:{bdf}"), pool, 2)?;
    let caps = p.capabilities();
    let mac = p.mac_addr().0;
    let (mut next, mut got) = ([0u32; 2], [0u32; 2]);
    let mut seen = [vec![false; N as usize], vec![false; N as usize]];
    let mut out = Pkts::new();
    let mut inb = Pkts::new();
    let t0 = Instant::now();
    // DPDK's vhost drops what it cannot translate yet (an IOTLB miss on
    // first touch of a page, answered by QEMU's IOMMU a moment later), and
    // testpmd io drops what its TX does not take: after 300 ms without
    // progress a pair goes back to its first missing frame and sends again.
    let mut progress = [Instant::now(); 2];
    let mut go_backs = 0u32;
    while got != [N, N] {
        if t0.elapsed() > Duration::from_secs(30) {
            return Err(format!("frames back per pair: {got:?} of {N}"));
        }
        for pair in 0..2u32 {
            let k = pair as usize;
            if got[k] < N && progress[k].elapsed() > Duration::from_millis(300) {
                next[k] = seen[k].iter().position(|s| !s).unwrap_or(0) as u32;
                go_backs += 1;
                progress[k] = Instant::now();
            }
            while next[k] < N && next[k] < got[k] + 64 && out.len() < 32 {
                let f = mq_frame(mac, pair, next[k]);
                let mut m = pool.get().map_err(|e| e.to_string())?;
                m.append(f.len()).ok_or("no room")?.copy_from_slice(&f);
                let _ = out.push(m);
                next[k] += 1;
            }
            q.tx_burst(pair as u16, &mut out);
            next[k] -= out.len() as u32;
            out.clear();
            q.rx_burst(pair as u16, &mut inb, 32);
            while let Some(m) = inb.pop() {
                let d = m.data();
                if d.len() < 34 || &d[14..26] != b"RPMD-VM MQ  " {
                    continue;
                }
                let fq = u32::from_le_bytes([d[26], d[27], d[28], d[29]]);
                let i = u32::from_le_bytes([d[30], d[31], d[32], d[33]]);
                if fq != pair {
                    return Err(format!("frame {i} of pair {fq} came back on pair {pair}"));
                }
                if i >= N || d != &mq_frame(mac, fq, i)[..] {
                    return Err(format!("frame {i} of pair {fq} changed on the way"));
                }
                if !std::mem::replace(&mut seen[k][i as usize], true) {
                    got[k] += 1;
                    progress[k] = Instant::now();
                }
            }
        }
    }
    // An rx interrupt on pair 1 (its own MSI-X vector), where the function
    // has MSI-X (QEMU 7.2 under TCG crashes on vhost-user with MSI-X, so
    // the harness gives this one none).
    if !caps.rx_interrupts {
        return finish_mq(p, q, pool, go_backs, "no MSI-X on this function");
    }
    interrupted(&mut q, pool, 1, mq_frame(mac, 1, 0))?;
    finish_mq(p, q, pool, go_backs, "an rx interrupt on pair 1")
}

/// Stops the two-pair port and reports.
fn finish_mq(
    p: Box<dyn rpmd_pmd::Port>,
    q: Queues,
    pool: &Mempool,
    go_backs: u32,
    irq: &str,
) -> R<String> {
    let s = p.stats();
    stop_all(p, q, pool)?;
    Ok(format!(
        "two queue pairs (MQ_VQ_PAIRS_SET) through DPDK testpmd: 300 frames (60..1514 bytes) per pair back on their pair byte for byte ({} sent for them: {go_backs} go-backs after drops in the backend); {irq}; {} received; every mbuf back",
        s.opackets, s.ipackets
    ))
}

fn run(bdf: &str, opts: &str, pool: &Mempool) -> R<String> {
    let (mut p, mut q) = open_started(&format!("pci:{bdf}{opts}"), pool, 1)?;
    let mac = p.mac_addr().0;
    exchange(&mut q, pool, mac, 0, 1000)?;
    let s = p.stats();
    if s.opackets != 1000 || s.ipackets < 1000 {
        return Err(format!("counters: {s:?}"));
    }
    let mut extra = String::new();
    if pool.region().iova_mode() == IovaMode::Va {
        filters(p.as_mut(), &mut q, pool).map_err(|e| format!("filters: {e}"))?;
        rx_interrupt(&mut q, pool, mac).map_err(|e| format!("rx interrupt: {e}"))?;
        let max = p.capabilities().max_mtu;
        if max != 9000 {
            return Err(format!("max MTU {max}, the device says 9000"));
        }
        extra = "; receive filters (promiscuous, all-multicast, MAC tables) as QEMU applies them; an MSI-X rx interrupt; max MTU 9000 from the device".into();
    }
    let link = link_down_and_up(p.as_mut(), mac).map_err(|e| format!("link events: {e}"));
    if link.is_err() {
        let _ = ask_host(&format!("set_link n{} on", mac[5].wrapping_sub(1)));
        std::thread::sleep(Duration::from_secs(2));
    }
    extra = format!("{extra}; link events: {}", link?);
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
    stop_all(p, q, pool)?;
    Ok(format!(
        "MAC {}, features {feats:#x}, IOVA {:?}: 1000 pings (60..1514 bytes) and their pongs byte for byte, stop, start, 64 more; every mbuf back{extra}",
        rpmd_pmd::port::MacAddr(mac),
        pool.region().iova_mode()
    ))
}

/// A request to the host's QEMU monitor, through the serial console
/// (tests/vm/monitor.py carries it out).
fn ask_host(cmd: &str) -> R<()> {
    use std::io::Write;
    let mut c = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/console")
        .map_err(|e| format!("/dev/console: {e}"))?;
    writeln!(c, "@@RPMD monitor {cmd}").map_err(|e| e.to_string())
}

/// QEMU's `set_link` off and on for this NIC (netdev `n<k>` for MAC
/// ending in k + 1, as run.sh names them): each change arrives as a link
/// event and the link reads as the device says.
fn link_down_and_up(p: &mut dyn rpmd_pmd::Port, mac: [u8; 6]) -> R<String> {
    let events = p.link_events().map_err(|e| e.to_string())?;
    let _ = events.take();
    let netdev = format!("n{}", mac[5].wrapping_sub(1));
    let mut steps = Vec::new();
    for (state, up) in [("off", false), ("on", true)] {
        ask_host(&format!("set_link {netdev} {state}"))?;
        let t = Instant::now();
        let mut seen = false;
        while t.elapsed() < Duration::from_secs(10) && !(seen && p.link().up == up) {
            seen |= events
                .wait(Duration::from_millis(100))
                .map_err(|e| e.to_string())?;
        }
        let x: Vec<String> = p
            .xstats()
            .into_iter()
            .filter(|x| {
                [
                    "config_interrupts",
                    "link_changes",
                    "link_watch_wait_errors",
                ]
                .contains(&x.name.as_str())
            })
            .map(|x| format!("{} {}", x.name, x.value))
            .collect();
        if !seen || p.link().up != up {
            return Err(format!(
                "set_link {state}: event {seen}, link up {} ({})",
                p.link().up,
                x.join(", ")
            ));
        }
        steps.push(format!(
            "{state} in {:.0} ms ({})",
            t.elapsed().as_secs_f64() * 1e3,
            x.join(", ")
        ));
    }
    Ok(steps.join("; "))
}

/// A function without a control queue: no CTRL_RX negotiated, receive
/// filters refused with an error, frames still exchanged.
fn no_ctrl(bdf: &str, pool: &Mempool) -> R<String> {
    let (mut p, mut q) = open_started(&format!("pci:{bdf}"), pool, 1)?;
    let feats = p
        .xstats()
        .iter()
        .find(|x| x.name == "negotiated_features")
        .map(|x| x.value)
        .unwrap_or(u64::MAX);
    let (ctrl_vq, ctrl_rx) = (1u64 << 17, 1u64 << 18);
    if feats & (ctrl_vq | ctrl_rx) != 0 {
        return Err(format!("negotiated {feats:#x}: CTRL_VQ or CTRL_RX"));
    }
    for (what, r) in [
        ("promiscuous off", p.set_promiscuous(false)),
        ("all-multicast off", p.set_allmulticast(false)),
        ("a MAC filter", p.set_mac_filter(&[p.mac_addr()], &[])),
    ] {
        if r.is_ok() {
            return Err(format!("{what} accepted without a control queue"));
        }
    }
    if p.set_promiscuous(true).is_err() || !p.promiscuous() {
        return Err("promiscuous on refused".into());
    }
    let mac = p.mac_addr().0;
    exchange(&mut q, pool, mac, 20_000, 200)?;
    stop_all(p, q, pool)?;
    Ok(format!(
        "features {feats:#x} (no CTRL_VQ, no CTRL_RX); promiscuous and all-multicast off and a MAC filter refused; 200 pings and pongs"
    ))
}

/// Two functions of one IOMMU group as two ports of one registry, each
/// transmitting the other's pool's mbufs.
fn same_group(a: &str, b: &str) -> R<String> {
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let mut ports = Vec::new();
    let mut pools = Vec::new();
    for (k, bdf) in [a, b].iter().enumerate() {
        let pool = Mempool::new(&MempoolConfig::new(&format!("group-{k}"), 1024))
            .map_err(|e| e.to_string())?;
        reg.domain()
            .register_pool(&pool)
            .map_err(|e| e.to_string())?;
        let mut p = reg
            .open(&format!("pci:{bdf}"))
            .map_err(|e| format!("open {bdf}: {e}"))?;
        p.configure(&PortConfig {
            rx_pool: Some(pool.clone()),
            ..PortConfig::default()
        })
        .map_err(|e| e.to_string())?;
        let q = p.start().map_err(|e| format!("start {bdf}: {e}"))?;
        ports.push((p, q));
        pools.push(pool);
    }
    for (k, (p, _)) in ports.iter().enumerate() {
        let t0 = Instant::now();
        while !p.link().up {
            if t0.elapsed() > Duration::from_secs(5) {
                return Err(format!("port {k}: link down"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    for (k, (p, q)) in ports.iter_mut().enumerate() {
        let mac = p.mac_addr().0;
        let other = &pools[1 - k];
        exchange(q, other, mac, 30_000 + 1000 * k as u32, 300)
            .map_err(|e| format!("port {k} sending pool {}'s mbufs: {e}", 1 - k))?;
        if p.stats().oerrors != 0 {
            return Err(format!("port {k}: {} TX errors", p.stats().oerrors));
        }
    }
    for (mut p, q) in ports {
        p.stop().map_err(|e| e.to_string())?;
        drop(q);
    }
    for pool in &pools {
        if pool.available() != pool.size() {
            return Err(format!(
                "{}: {} of {} mbufs back",
                pool.name(),
                pool.available(),
                pool.size()
            ));
        }
    }
    Ok(format!(
        "{a} and {b} (one IOMMU group) open and started as two ports; each sent 300 pings from the other's mempool and got every pong back"
    ))
}

/// Prints one case's outcome and counts it.
fn report(name: &str, r: R<String>, pass: &mut u32, fail: &mut u32) {
    match r {
        Ok(m) => {
            *pass += 1;
            println!("case {name}: ok: {m}");
        }
        Err(e) => {
            *fail += 1;
            println!("case {name}: FAIL: {e}");
        }
    }
}

fn main() {
    let (mut pass, mut fail) = (0u32, 0u32);
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
        if a == "--no-ctrl" {
            let bdf = args.next().unwrap_or_default();
            report(
                &format!("{bdf} no control queue"),
                no_ctrl(&bdf, &pool),
                &mut pass,
                &mut fail,
            );
            continue;
        }
        if a == "--same-group" {
            let x = args.next().unwrap_or_default();
            let y = args.next().unwrap_or_default();
            report(
                &format!("{x} and {y} in one IOMMU group"),
                same_group(&x, &y),
                &mut pass,
                &mut fail,
            );
            continue;
        }
        if a == "--mq" {
            let bdf = args.next().unwrap_or_default();
            report(
                &format!("{bdf} two queue pairs"),
                mq(&bdf, &pool),
                &mut pass,
                &mut fail,
            );
            continue;
        }
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
        let legacy = pool.region().iova_mode() == IovaMode::Pa;
        let mut cases: Vec<(String, R<String>)> =
            vec![(format!("{bdf} virtio-net-pci port"), run(&bdf, "", &pool))];
        if !legacy {
            cases.push((
                format!("{bdf} packed rings"),
                run(&bdf, ",packed_vq=1", &pool),
            ));
            cases.push((format!("{bdf} features refused"), refused(&bdf, &pool)));
        }
        for (name, r) in cases {
            report(&name, r, &mut pass, &mut fail);
        }
    }
    println!("virtio_guest: {pass} passed, {fail} failed");
    std::process::exit(if fail == 0 && pass > 0 { 0 } else { 1 });
}
