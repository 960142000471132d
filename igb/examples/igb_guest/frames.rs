//! Frames between the guest's two 82576s (cabled to each other by
//! QEMU's dgram netdevs), both driven by rpmd through `pci:BDF` ports:
//! every frame checked byte for byte, and the device's offloads, filter,
//! jumbo frames and counters checked from the far side.
use rpmd_igb::regs::RETA_ENTRIES;
use rpmd_pmd::function::EventFd;
use rpmd_pmd::mbuf::RX_RSS_HASH;
use rpmd_pmd::mbuf::{
    RX_IP_CKSUM_BAD, RX_IP_CKSUM_GOOD, RX_L4_CKSUM_GOOD, RX_L4_CKSUM_MASK, RX_VLAN_STRIPPED,
    TX_IP_CKSUM, TX_TCP_SEG, TX_UDP_CKSUM, TX_VLAN,
};
use rpmd_pmd::net::rss::{ipv4_input, toeplitz, RSS_KEY};
use rpmd_pmd::net::{
    fold, ipv4_header_checksum, ones_sum, pseudo_header_sum, pseudo_header_sum_tso,
};
use rpmd_pmd::port::{MacAddr, Offloads, RssConfig, RssHash};
use rpmd_pmd::{Mbuf, Mempool, MempoolConfig, Pkts, Port, PortConfig, Queues, Registry};
use std::time::{Duration, Instant};

type R<T> = Result<T, String>;

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Two started ports, `a` and `b`, on one pool.
pub struct Pair {
    reg: Registry,
    pool: Mempool,
    ports: [Option<(Box<dyn Port>, Queues)>; 2],
    devs: [String; 2],
}

/// The offloads both ports ask for.
const OFFLOADS: Offloads = Offloads(
    Offloads::RX_CHECKSUM.0
        | Offloads::RX_VLAN_STRIP.0
        | Offloads::TX_CHECKSUM.0
        | Offloads::TX_MULTI_SEGS.0
        | Offloads::TX_VLAN_INSERT.0
        | Offloads::TX_TSO.0
        | Offloads::RX_VLAN_FILTER.0
        | Offloads::RX_SCATTER.0,
);

impl Pair {
    /// Opens `pci:A` and `pci:B` and starts them with `mtu`.
    pub fn open(a: &str, b: &str) -> R<Pair> {
        let mut reg = Registry::new();
        rpmd_igb::register(&mut reg);
        let pool = Mempool::new(&MempoolConfig::new("igb-guest", 8192)).map_err(s)?;
        reg.domain().register_pool(&pool).map_err(s)?;
        let mut pair = Pair {
            reg,
            pool,
            ports: [None, None],
            devs: [format!("pci:{a}"), format!("pci:{b}")],
        };
        for k in 0..2 {
            let p = pair.reg.open(&pair.devs[k]).map_err(s)?;
            if p.driver() != "igb" {
                return Err(format!("{}: driver {}", pair.devs[k], p.driver()));
            }
            pair.ports[k] = Some((p, Queues::new(Vec::new(), Vec::new())));
            pair.restart(k, 1500)?;
        }
        Ok(pair)
    }

    pub fn port(&mut self, k: usize) -> &mut (Box<dyn Port>, Queues) {
        self.ports[k].as_mut().expect("open")
    }

    /// Stops port `k` and starts it again with `mtu`, waiting for link.
    pub fn restart(&mut self, k: usize, mtu: u16) -> R<()> {
        self.restart_with(k, mtu, 1)
    }

    /// [`restart`](Self::restart) with `rx_queues` receive queues.
    pub fn restart_with(&mut self, k: usize, mtu: u16, rx_queues: u16) -> R<()> {
        self.restart_rss(k, mtu, rx_queues, RssConfig::default())
    }

    /// [`restart_with`](Self::restart_with) with the RSS settings `rss`.
    pub fn restart_rss(&mut self, k: usize, mtu: u16, rx_queues: u16, rss: RssConfig) -> R<()> {
        let pool = self.pool.clone();
        let (p, q) = self.port(k);
        p.stop().map_err(s)?;
        *q = Queues::new(Vec::new(), Vec::new());
        p.configure(&PortConfig {
            offloads: OFFLOADS,
            mtu: Some(mtu),
            tx_queues: 2,
            rx_queues,
            rss,
            ..PortConfig::with_pool(&pool)
        })
        .map_err(s)?;
        *q = p.start().map_err(s)?;
        let t = Instant::now();
        while !p.link().up {
            if t.elapsed() > Duration::from_secs(5) {
                return Err(format!("{}: link down after start", p.name()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    pub fn mac(&mut self, k: usize) -> MacAddr {
        self.port(k).0.mac_addr()
    }

    /// Sends every mbuf of `out` on port `k` (within 2 s).
    pub fn send(&mut self, k: usize, out: &mut Pkts) -> R<()> {
        self.send_on(k, 0, out)
    }

    /// Sends every mbuf of `out` on tx queue `q` of port `k`.
    fn send_on(&mut self, k: usize, q: u16, out: &mut Pkts) -> R<()> {
        let t = Instant::now();
        while !out.is_empty() {
            self.port(k).1.tx_burst(q, out);
            if t.elapsed() > Duration::from_secs(2) {
                return Err(format!("{} frames not taken for sending in 2 s", out.len()));
            }
        }
        Ok(())
    }

    /// What port `k` receives until `n` frames came or `wait` passed.
    fn receive(&mut self, k: usize, n: usize, wait: Duration) -> Vec<Mbuf> {
        let mut got = Vec::new();
        let mut inb = Pkts::new();
        let t = Instant::now();
        while got.len() < n && t.elapsed() < wait {
            self.port(k).1.rx_burst(0, &mut inb, 32);
            while let Some(m) = inb.pop() {
                got.push(m);
            }
        }
        got
    }

    /// What port `k`'s first `queues` receive queues take until `n`
    /// frames came or `wait` passed, with the queue of each.
    fn receive_queues(
        &mut self,
        k: usize,
        queues: u16,
        n: usize,
        wait: Duration,
    ) -> Vec<(u16, Mbuf)> {
        let mut got = Vec::new();
        let mut inb = Pkts::new();
        let t = Instant::now();
        while got.len() < n && t.elapsed() < wait {
            for q in 0..queues {
                self.port(k).1.rx_burst(q, &mut inb, 32);
                while let Some(m) = inb.pop() {
                    got.push((q, m));
                }
            }
        }
        got
    }

    /// A mbuf holding `bytes`, in segments of at most `seg` bytes.
    pub fn mbuf(&self, bytes: &[u8], seg: usize) -> R<Mbuf> {
        let mut head: Option<Mbuf> = None;
        for chunk in bytes.chunks(seg) {
            let mut m = self.pool.get().map_err(s)?;
            m.append(chunk.len())
                .ok_or("segment larger than an mbuf")?
                .copy_from_slice(chunk);
            match head.as_mut() {
                None => head = Some(m),
                Some(h) => h.chain(m).map_err(|_| "chain too long")?,
            }
        }
        head.ok_or_else(|| "no bytes".to_string())
    }

    /// Stops both ports and checks every mbuf is home.
    pub fn close(mut self) -> R<String> {
        for k in 0..2 {
            if let Some((mut p, q)) = self.ports[k].take() {
                p.stop().map_err(s)?;
                drop(q);
                drop(p);
            }
        }
        let (avail, size) = (self.pool.available(), self.pool.size());
        if avail != size {
            return Err(format!("{avail} of {size} mbufs back in the pool"));
        }
        Ok(format!("{size} of {size} mbufs home"))
    }
}

/// An Ethernet frame `dst` <- `src` of `len` bytes (ether type 0x88b5,
/// local experimental), its payload a pattern of `seq`.
pub fn frame(dst: MacAddr, src: MacAddr, len: usize, seq: u32) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&0x88b5u16.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    let mut x = seq.wrapping_mul(2654435761);
    while f.len() < len {
        x = x.wrapping_mul(1103515245).wrapping_add(12345);
        f.push((x >> 16) as u8);
    }
    f
}

fn bytes_of(m: &Mbuf) -> Vec<u8> {
    m.segments().flat_map(|s| s.iter().copied()).collect()
}

/// Sends `frames` from port `from` and checks that port `to` receives
/// exactly them, byte for byte (as a set per round). Sixteen at a time, each round received before the next is
/// sent: QEMU carries the "wire" over a host UDP socket, which drops
/// what its buffer cannot hold when the sender's vCPU outruns the
/// receiver's I/O thread, which a cable would not.
fn exchange(p: &mut Pair, from: usize, to: usize, frames: &[Vec<u8>]) -> R<Vec<Mbuf>> {
    let mut all = Vec::new();
    for (round, chunk) in frames.chunks(16).enumerate() {
        let mut out = Pkts::new();
        for f in chunk {
            let _ = out.push(p.mbuf(f, 2048)?);
        }
        p.send(from, &mut out)?;
        let got = p.receive(to, chunk.len(), Duration::from_secs(5));
        let mut want: Vec<&Vec<u8>> = chunk.iter().collect();
        for m in &got {
            let b = bytes_of(m);
            match want.iter().position(|w| **w == b) {
                Some(i) => {
                    want.swap_remove(i);
                }
                None => {
                    return Err(format!(
                        "round {round}: a {}-byte frame that was not sent (or changed)",
                        b.len()
                    ))
                }
            }
        }
        if !want.is_empty() {
            return Err(format!(
                "round {round}: {} of {} frames did not arrive",
                want.len(),
                chunk.len()
            ));
        }
        all.extend(got);
    }
    Ok(all)
}

/// 200 frames each way, 60 to 1514 bytes.
pub fn both_ways(p: &mut Pair) -> R<String> {
    let (a, b) = (p.mac(0), p.mac(1));
    for (from, to, dst, src) in [(0, 1, b, a), (1, 0, a, b)] {
        let frames: Vec<Vec<u8>> = (0..200u32)
            .map(|k| frame(dst, src, 60 + (k as usize * 37) % 1455, k))
            .collect();
        exchange(p, from, to, &frames).map_err(|e| format!("{from} -> {to}: {e}"))?;
    }
    Ok("200 frames of 60-1514 bytes each way, byte for byte".into())
}

/// Frames sent on the second transmit queue, and the first queue's
/// frames still in flight reclaimed.
pub fn second_queue(p: &mut Pair) -> R<String> {
    let (a, b) = (p.mac(0), p.mac(1));
    let mut out = Pkts::new();
    let frames: Vec<Vec<u8>> = (0..16u32)
        .map(|k| frame(b, a, 64 + k as usize, 100 + k))
        .collect();
    for f in &frames {
        let _ = out.push(p.mbuf(f, 2048)?);
    }
    p.send_on(0, 1, &mut out)?;
    let got = p.receive(1, frames.len(), Duration::from_secs(5));
    if got.len() != frames.len() || got.iter().any(|m| !frames.contains(&bytes_of(m))) {
        return Err(format!("{} of 16 frames arrived intact", got.len()));
    }
    let pending: usize = (0..2).map(|q| p.port(0).1.tx_in_flight(q)).sum();
    if pending != 0 {
        return Err(format!(
            "{pending} frames still in flight after their arrival"
        ));
    }
    Ok("16 frames on tx queue 1; none left in flight".into())
}

/// An armed receive queue's MSI-X vector fires when a frame arrives,
/// and stays quiet while disarmed. The port starts again afterwards
/// whatever happened (the test takes its queue).
pub fn rx_interrupt(p: &mut Pair) -> R<String> {
    let r = interrupt_once(p);
    p.restart(1, 1500)?;
    r
}

fn interrupt_once(p: &mut Pair) -> R<String> {
    let (a, b) = (p.mac(0), p.mac(1));
    let mut rxq = p.port(1).1.take_rx(0).map_err(s)?;
    let fd = rxq
        .interrupt_fd()
        .ok_or("no interrupt eventfd on rx queue 0")?;
    let efd = EventFd::from_fd(fd.try_clone_to_owned().map_err(s)?);
    let wait = |ms: u64| -> R<bool> { Ok(efd.wait(Duration::from_millis(ms)).map_err(s)? > 0) };
    let mut inb = Pkts::new();
    rxq.rx_burst(&mut inb, 32);
    drop(inb);
    let _ = wait(0)?;
    let send = |p: &mut Pair, seq| -> R<()> {
        let mut out = Pkts::new();
        let _ = out.push(p.mbuf(&frame(b, a, 80, seq), 2048)?);
        p.send(0, &mut out)
    };
    // Disarmed: a frame arrives without an interrupt.
    rxq.set_interrupt(false).map_err(s)?;
    send(p, 1)?;
    std::thread::sleep(Duration::from_millis(300));
    if wait(0)? {
        return Err("an interrupt while disarmed".into());
    }
    let mut inb = Pkts::new();
    let t = Instant::now();
    while inb.is_empty() && t.elapsed() < Duration::from_secs(2) {
        rxq.rx_burst(&mut inb, 32);
    }
    if inb.is_empty() {
        return Err("the frame sent while disarmed did not arrive".into());
    }
    inb.clear();
    // Armed: the next frame interrupts, within 2 s.
    rxq.set_interrupt(true).map_err(s)?;
    if rxq.has_work() {
        return Err("work reported on an empty queue".into());
    }
    let t = Instant::now();
    send(p, 2)?;
    if !wait(2000)? {
        return Err("armed, a frame sent, and no interrupt within 2 s".into());
    }
    let woke_ms = t.elapsed().as_secs_f64() * 1e3;
    if !rxq.has_work() {
        return Err("woken, but the queue reports no work".into());
    }
    // Disarmed on waking, as the run loop does: quiet again.
    rxq.set_interrupt(false).map_err(s)?;
    let _ = wait(0)?;
    send(p, 3)?;
    std::thread::sleep(Duration::from_millis(300));
    let again = wait(0)?;
    let t = Instant::now();
    while inb.len() < 2 && t.elapsed() < Duration::from_secs(2) {
        rxq.rx_burst(&mut inb, 32);
    }
    drop(inb);
    drop(rxq);
    if again {
        return Err("an interrupt after disarming".into());
    }
    Ok(format!(
        "woken {woke_ms:.1} ms after the send (TCG); quiet while disarmed, before and after"
    ))
}

/// Link down and up from QEMU's monitor (`set_link`, asked for through
/// the serial console, which run.sh watches) arrive as link events. The
/// link is asked up again whatever happened.
pub fn link_events(p: &mut Pair) -> R<String> {
    let r = link_down_and_up(p);
    if r.is_err() {
        let _ = ask_host("set_link n7 on");
        std::thread::sleep(Duration::from_secs(2));
    }
    r
}

fn link_down_and_up(p: &mut Pair) -> R<String> {
    let events = p.port(0).0.link_events().map_err(s)?;
    let _ = events.take();
    let mut steps = Vec::new();
    for (state, up) in [("off", false), ("on", true)] {
        ask_host(&format!("set_link n7 {state}"))?;
        let t = Instant::now();
        let mut seen = false;
        while t.elapsed() < Duration::from_secs(10) {
            if events.wait(Duration::from_millis(100)).map_err(s)? {
                seen = true;
            }
            if seen && p.port(0).0.link().up == up {
                break;
            }
        }
        let now = p.port(0).0.link().up;
        let x: Vec<String> = p
            .port(0)
            .0
            .xstats()
            .into_iter()
            .filter(|x| x.name.ends_with("interrupts") || x.name == "link_watch_wait_errors")
            .map(|x| format!("{} {}", x.name, x.value))
            .collect();
        if !seen || now != up {
            return Err(format!(
                "set_link {state}: event {seen}, link up {now} ({})",
                x.join(", ")
            ));
        }
        steps.push(format!(
            "{state}: event, link up {now}, {:.0} ms ({})",
            t.elapsed().as_secs_f64() * 1e3,
            x.join(", ")
        ));
    }
    Ok(steps.join("; "))
}

/// A request to the host's QEMU monitor, through the serial console.
fn ask_host(cmd: &str) -> R<()> {
    use std::io::Write;
    let mut c = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/console")
        .map_err(|e| format!("/dev/console: {e}"))?;
    writeln!(c, "@@RPMD monitor {cmd}").map_err(s)
}

/// A three-segment chain sent as one frame.
pub fn chained(p: &mut Pair) -> R<String> {
    let (a, b) = (p.mac(0), p.mac(1));
    let f = frame(b, a, 1400, 7);
    let m = p.mbuf(&f, 500)?;
    let segs = m.nb_segs();
    let mut out = Pkts::new();
    let _ = out.push(m);
    p.send(0, &mut out)?;
    let got = p.receive(1, 1, Duration::from_secs(5));
    match got.first() {
        Some(m) if bytes_of(m) == f => Ok(format!("{segs} segments out, one 1400-byte frame in")),
        Some(m) => Err(format!(
            "received {} bytes, not the frame sent",
            m.pkt_len()
        )),
        None => Err("nothing received".into()),
    }
}

/// A UDP/IPv4 frame with both checksums left to the device, and one with
/// a wrong IPv4 checksum that the receiver must flag.
pub fn checksums(p: &mut Pair) -> R<String> {
    let (a, b) = (p.mac(0), p.mac(1));
    let mut f = udp_frame(b, a, 200);
    let ph = pseudo_header_sum(&f[14..34]).ok_or("pseudo-header")?;
    f[40..42].copy_from_slice(&ph.to_be_bytes());
    let mut m = p.mbuf(&f, 2048)?;
    m.set_tx_header_lens(14, 20);
    m.set_ol_flags(TX_IP_CKSUM | TX_UDP_CKSUM);
    let mut out = Pkts::new();
    let _ = out.push(m);
    p.send(0, &mut out)?;
    let got = p.receive(1, 1, Duration::from_secs(5));
    let m = got.first().ok_or("the offloaded frame did not arrive")?;
    let r = bytes_of(m);
    let ip_ok = ipv4_header_checksum(&r[14..34]) == u16::from_be_bytes([r[24], r[25]]);
    let ph = pseudo_header_sum(&r[14..34]).ok_or("pseudo-header")? as u32;
    let udp_ok = fold(ones_sum(&r[34..], ph)) == 0xffff;
    if !ip_ok || !udp_ok {
        return Err(format!(
            "checksums as received: IPv4 ok {ip_ok}, UDP ok {udp_ok}"
        ));
    }
    let fl = m.ol_flags();
    if fl & RX_IP_CKSUM_GOOD == 0 || fl & RX_L4_CKSUM_MASK != RX_L4_CKSUM_GOOD {
        return Err(format!(
            "receive flags {fl:#x}: want IP and L4 checksums good"
        ));
    }
    let mut bad = udp_frame(b, a, 100);
    let c = ipv4_header_checksum(&bad[14..34]) ^ 0x5a5a;
    bad[24..26].copy_from_slice(&c.to_be_bytes());
    let m = p.mbuf(&bad, 2048)?;
    let _ = out.push(m);
    p.send(0, &mut out)?;
    let got = p.receive(1, 1, Duration::from_secs(5));
    let m = got
        .first()
        .ok_or("the frame with a bad checksum did not arrive")?;
    if m.ol_flags() & RX_IP_CKSUM_BAD == 0 {
        return Err(format!("bad IPv4 checksum flagged {:#x}", m.ol_flags()));
    }
    Ok("filled by the sender's device, verified by the receiver's; a bad one flagged".into())
}

/// TCP segmentation: one 6000-byte TCP payload, in a three-mbuf chain,
/// cut by the sender's device into 1000-byte segments, each with its
/// lengths, sequence number and checksums right; the payloads in order
/// make the one sent.
pub fn tso(p: &mut Pair) -> R<String> {
    let (a, b) = (p.mac(0), p.mac(1));
    let (mss, payload) = (1000usize, 6000usize);
    let mut f = Vec::new();
    f.extend_from_slice(&b.0);
    f.extend_from_slice(&a.0);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let total = (40 + payload) as u16;
    f.extend_from_slice(&[0x45, 0, 0, 0, 0x10, 0x00, 0x40, 0, 64, 6, 0, 0]);
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    let seq0 = 0x0102_0304u32;
    f.extend_from_slice(&1234u16.to_be_bytes());
    f.extend_from_slice(&80u16.to_be_bytes());
    f.extend_from_slice(&seq0.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
    let ph = pseudo_header_sum_tso(&f[14..34]).ok_or("pseudo-header")?;
    f[50..52].copy_from_slice(&ph.to_be_bytes());
    let data: Vec<u8> = (0..payload).map(|k| (k * 7 + k / 251) as u8).collect();
    f.extend_from_slice(&data);
    let mut m = p.mbuf(&f, 2048)?;
    m.set_tx_header_lens(14, 20);
    m.set_tso(20, mss as u16);
    m.set_ol_flags(TX_TCP_SEG | TX_IP_CKSUM);
    let mut out = Pkts::new();
    let _ = out.push(m);
    p.send(0, &mut out)?;
    let want = payload.div_ceil(mss);
    let got = p.receive(1, want, Duration::from_secs(5));
    if got.len() != want {
        return Err(format!("{} segments arrived, want {want}", got.len()));
    }
    let mut joined = Vec::new();
    for (k, m) in got.iter().enumerate() {
        let r = bytes_of(m);
        let len = (payload - k * mss).min(mss);
        let ip_len = u16::from_be_bytes([r[16], r[17]]) as usize;
        let seq = u32::from_be_bytes([r[38], r[39], r[40], r[41]]);
        let ip_ok = ipv4_header_checksum(&r[14..34]) == u16::from_be_bytes([r[24], r[25]]);
        let ph = pseudo_header_sum(&r[14..34]).ok_or("pseudo-header")? as u32;
        let tcp_ok = fold(ones_sum(&r[34..14 + ip_len.min(r.len() - 14)], ph)) == 0xffff;
        let seq_ok = seq == seq0.wrapping_add((k * mss) as u32);
        if r.len() != 54 + len || ip_len != 40 + len || !ip_ok || !tcp_ok || !seq_ok {
            return Err(format!(
                "segment {k}: {} bytes, IP length {ip_len}, IP checksum ok {ip_ok}, TCP checksum ok {tcp_ok}, seq {seq:#x}",
                r.len()
            ));
        }
        joined.extend_from_slice(&r[54..]);
    }
    if joined != data {
        return Err("the segments' payloads do not make the payload sent".into());
    }
    Ok(format!(
        "{payload} bytes in {want} segments of {mss}: lengths, sequence numbers, checksums right"
    ))
}

/// A UDP/IPv4 frame of `payload` bytes, checksums zero.
fn udp_frame(dst: MacAddr, src: MacAddr, payload: usize) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let total = (20 + 8 + payload) as u16;
    f.extend_from_slice(&[0x45, 0, 0, 0, 0x12, 0x34, 0, 0, 64, 17, 0, 0]);
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(&4000u16.to_be_bytes());
    f.extend_from_slice(&5000u16.to_be_bytes());
    f.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend((0..payload).map(|k| k as u8));
    f
}

/// `flows` UDP flows (10.0.0.1 to 10.0.0.2, source ports apart) sent
/// from port 0, and what port 1's four queues received, by queue.
fn send_flows(p: &mut Pair, flows: u16) -> R<Vec<(u16, Mbuf)>> {
    let (a, b) = (p.mac(0), p.mac(1));
    let mut out = Pkts::new();
    for k in 0..flows {
        let mut f = udp_frame(b, a, 32);
        f[34..36].copy_from_slice(&(1000 + 7 * k).to_be_bytes());
        let c = ipv4_header_checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        let _ = out.push(p.mbuf(&f, 2048)?);
        if out.len() == 16 || k + 1 == flows {
            p.send(0, &mut out)?;
        }
    }
    Ok(p.receive_queues(1, 4, flows as usize, Duration::from_secs(5)))
}

/// RSS over four receive queues: each UDP flow's frame lands on the
/// queue the redirection table gives its Toeplitz hash, with that hash in
/// the mbuf.
pub fn rss(p: &mut Pair) -> R<String> {
    p.restart_with(1, 1500, 4)?;
    let flows = 64u16;
    let got = send_flows(p, flows)?;
    let mut per_queue = [0usize; 4];
    for (q, m) in &got {
        let d = bytes_of(m);
        let sport = u16::from_be_bytes([d[34], d[35]]);
        let input = ipv4_input([10, 0, 0, 1], [10, 0, 0, 2], Some((sport, 5000)));
        let want = toeplitz(&RSS_KEY, &input);
        if m.ol_flags() & RX_RSS_HASH == 0 || m.rss_hash() != want {
            return Err(format!(
                "port {sport}: hash {:#x} (flags {:#x}), Toeplitz gives {want:#x}",
                m.rss_hash(),
                m.ol_flags()
            ));
        }
        let on = (want % RETA_ENTRIES) as u16 % 4;
        if *q != on {
            return Err(format!("port {sport}: on queue {q}, the table says {on}"));
        }
        per_queue[*q as usize] += 1;
    }
    if got.len() != flows as usize {
        return Err(format!("{} of {flows} frames arrived", got.len()));
    }
    if per_queue.iter().filter(|&&n| n > 0).count() < 3 {
        return Err(format!("frames per queue {per_queue:?}: not spread"));
    }
    let reta = rss_by_the_app(p, flows)?;
    p.restart(1, 1500)?;
    Ok(format!(
        "{flows} UDP flows over 4 queues {per_queue:?}, every hash Toeplitz's; {reta}"
    ))
}

/// RSS as the app sets it: a redirection table replaced while the port
/// runs (every entry queue 2: every flow there), then a key of its own
/// with only IPv4 addresses hashed (no ports: every flow between two
/// hosts on one queue, with the hash Toeplitz gives for that key).
fn rss_by_the_app(p: &mut Pair, flows: u16) -> R<String> {
    p.port(1)
        .0
        .set_rss_reta(&[2; RETA_ENTRIES as usize])
        .map_err(s)?;
    let got = send_flows(p, flows)?;
    if got.len() != flows as usize || got.iter().any(|(q, _)| *q != 2) {
        let on: Vec<u16> = got.iter().map(|(q, _)| *q).collect();
        return Err(format!(
            "table all 2: {} frames, on queues {on:?}",
            got.len()
        ));
    }
    let key: [u8; 40] = std::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ 0x5c);
    let rss = RssConfig {
        hash: RssHash::IPV4,
        key,
        reta: Vec::new(),
    };
    p.restart_rss(1, 1500, 4, rss)?;
    let got = send_flows(p, flows)?;
    let want = toeplitz(&key, &ipv4_input([10, 0, 0, 1], [10, 0, 0, 2], None));
    let on = (want % RETA_ENTRIES) as u16 % 4;
    if got.len() != flows as usize || got.iter().any(|(q, m)| *q != on || m.rss_hash() != want) {
        let seen: Vec<(u16, u32)> = got.iter().map(|(q, m)| (*q, m.rss_hash())).collect();
        return Err(format!(
            "own key, IPv4 only: want {want:#x} on {on}, got {seen:?}"
        ));
    }
    // The settings read back as programmed; then the ports hashed too,
    // changed while running (rss_hash_update), the key kept.
    let now = p.port(1).0.rss_conf().map_err(s)?;
    let table: Vec<u16> = (0..RETA_ENTRIES as u16).map(|k| k % 4).collect();
    if now.hash != RssHash::IPV4 || now.key != key || now.reta != table {
        return Err(format!("read back: {now:?}"));
    }
    p.port(1)
        .0
        .set_rss_hash(RssHash::IPV4 | RssHash::IPV4_UDP, None)
        .map_err(s)?;
    let got = send_flows(p, flows)?;
    let mut queues = [0usize; 4];
    for (q, m) in &got {
        let d = bytes_of(m);
        let sport = u16::from_be_bytes([d[34], d[35]]);
        let want = toeplitz(
            &key,
            &ipv4_input([10, 0, 0, 1], [10, 0, 0, 2], Some((sport, 5000))),
        );
        if m.rss_hash() != want || *q != (want % RETA_ENTRIES) as u16 % 4 {
            return Err(format!(
                "ports hashed after the update: port {sport} hash {:#x} on {q}, want {want:#x}",
                m.rss_hash()
            ));
        }
        queues[*q as usize] += 1;
    }
    if got.len() != flows as usize || queues.iter().filter(|&&n| n > 0).count() < 2 {
        return Err(format!(
            "after the update: {} frames over {queues:?}",
            got.len()
        ));
    }
    Ok(format!(
        "a table set while running and a key of the app's obeyed ({flows} flows on queue {on}); \
         read back as set; UDP ports hashed from an update while running ({queues:?})"
    ))
}

/// A tag inserted by the sender's device and stripped by the receiver's.
pub fn vlan(p: &mut Pair) -> R<String> {
    let (a, b) = (p.mac(0), p.mac(1));
    p.port(1).0.set_vlan_filter(0x064, true).map_err(s)?;
    let f = frame(b, a, 300, 9);
    let mut m = p.mbuf(&f, 2048)?;
    m.set_vlan_tci(0x2064);
    m.set_ol_flags(TX_VLAN);
    let mut out = Pkts::new();
    let _ = out.push(m);
    p.send(0, &mut out)?;
    let got = p.receive(1, 1, Duration::from_secs(5));
    let m = got.first().ok_or("the tagged frame did not arrive")?;
    if m.ol_flags() & RX_VLAN_STRIPPED == 0 || m.vlan_tci() != 0x2064 {
        return Err(format!(
            "flags {:#x}, TCI {:#x}: want the tag stripped, TCI 0x2064",
            m.ol_flags(),
            m.vlan_tci()
        ));
    }
    if bytes_of(m) != f {
        return Err("the frame after stripping is not the frame sent".into());
    }
    drop(got);
    // The receiver's filter table admits VLAN 100 only: VLAN 200 stays out.
    let mut m = p.mbuf(&f, 2048)?;
    m.set_vlan_tci(200);
    m.set_ol_flags(TX_VLAN);
    let _ = out.push(m);
    p.send(0, &mut out)?;
    if !p.receive(1, 1, Duration::from_millis(500)).is_empty() {
        return Err("a frame of VLAN 200 passed a filter that admits VLAN 100 only".into());
    }
    Ok(
        "TCI 0x2064 inserted and stripped, frame unchanged; VLAN 200 filtered out by the device"
            .into(),
    )
}

/// Whether port 1 receives a frame to `dst` (sent from port 0).
fn reaches(p: &mut Pair, dst: MacAddr, seq: u32) -> R<bool> {
    let a = p.mac(0);
    let m = p.mbuf(&frame(dst, a, 100, seq), 2048)?;
    let mut out = Pkts::new();
    let _ = out.push(m);
    p.send(0, &mut out)?;
    Ok(!p.receive(1, 1, Duration::from_millis(500)).is_empty())
}

/// The receive filter: another address only in promiscuous mode or when
/// listed; a multicast group only when listed.
pub fn filter(p: &mut Pair) -> R<String> {
    let other: MacAddr = "02:00:00:00:00:99".parse().map_err(s)?;
    let group: MacAddr = "01:00:5e:00:00:fb".parse().map_err(s)?;
    let stranger: MacAddr = "01:00:5e:00:00:fc".parse().map_err(s)?;
    let mut steps = Vec::new();
    let mut check = |p: &mut Pair, what: &str, dst, want: bool, seq| -> R<()> {
        let got = reaches(p, dst, seq)?;
        steps.push(format!("{what}: {got}"));
        if got != want {
            return Err(format!("{what}: received {got}, want {want}"));
        }
        Ok(())
    };
    check(p, "other unicast", other, false, 1)?;
    p.port(1).0.set_promiscuous(true).map_err(s)?;
    check(p, "other unicast, promiscuous", other, true, 2)?;
    p.port(1).0.set_promiscuous(false).map_err(s)?;
    check(p, "multicast group", group, false, 3)?;
    p.port(1).0.set_mac_filter(&[other], &[group]).map_err(s)?;
    check(p, "listed unicast", other, true, 4)?;
    check(p, "listed group", group, true, 5)?;
    check(p, "unlisted group", stranger, false, 6)?;
    p.port(1).0.set_allmulticast(true).map_err(s)?;
    check(p, "unlisted group, all-multicast", stranger, true, 7)?;
    p.port(1).0.set_allmulticast(false).map_err(s)?;
    p.port(1).0.set_mac_filter(&[], &[]).map_err(s)?;
    Ok(steps.join(", "))
}

/// A 9014-byte frame: a chain out, a chain of 2 KiB buffers in.
pub fn jumbo(p: &mut Pair) -> R<String> {
    p.restart(0, 9000)?;
    p.restart(1, 9000)?;
    let (a, b) = (p.mac(0), p.mac(1));
    let f = frame(b, a, 9014, 11);
    let got = exchange(p, 0, 1, std::slice::from_ref(&f))?;
    let segs = got[0].nb_segs();
    if segs < 5 {
        return Err(format!("{segs} segments: want one per 2 KiB buffer"));
    }
    drop(got);
    p.restart(0, 1500)?;
    p.restart(1, 1500)?;
    Ok(format!(
        "9014 bytes in {segs} receive buffers, byte for byte"
    ))
}

/// The device's counters against what was sent and received.
pub fn counters(p: &mut Pair) -> R<String> {
    let x = |p: &mut Pair, k: usize, name: &str| -> u64 {
        p.port(k)
            .0
            .xstats()
            .iter()
            .find(|x| x.name == name)
            .map_or(0, |x| x.value)
    };
    let sent = x(p, 0, "tx_good_packets");
    let got = x(p, 1, "rx_good_packets");
    let st = p.port(1).0.stats();
    // QEMU counts a segmented send once on the sender (the TSO case's one
    // send became six frames): the receiver may count five more.
    if sent == 0 || got == 0 || got > sent + 5 {
        return Err(format!(
            "tx_good_packets {sent} on A, rx_good_packets {got} on B"
        ));
    }
    Ok(format!(
        "A sent {sent}, B received {got} (the filter's drops between), B ipackets {}, imissed {}",
        st.ipackets, st.imissed
    ))
}
