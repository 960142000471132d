//! l3fwd's forwarding task: one per lcore, over the rx queues the lcore
//! polls and a tx queue of its own on every port.
//!
//! Each rx burst goes through three passes, so that the table lookups of
//! a burst are one bulk call whose cache misses overlap (as DPDK's l3fwd
//! looks up in fours and eights):
//! 1. classify each frame (IPv4, IPv6, or a drop with its reason), check
//!    its header, take its TTL (hop limit) down by one with the checksum
//!    updated (RFC 1624), and gather its key;
//! 2. look every key up at once;
//! 3. give each routed frame the next hop's and the output port's MACs and
//!    buffer it for its port.
//!
//! A port's buffer is sent when it holds a whole burst and at the end of
//! every round (after each rx queue is drained), as DPDK's l3fwd buffers
//! its output: when consecutive frames leave by different ports, a port
//! then still gets bursts of 32, not the half of each rx burst that went
//! its way, and the other side's per-burst work is halved (`compare.sh
//! l3fwd`, em rows; benches/RESULTS.md, findings). No frame waits longer
//! than the round it was received in.
use super::routes::{key4_wire, key6, Lookup, Tables};
use rpmd_lookup::ExactReader;
use rpmd_pmd::hdr::{IpProto, Ipv4, Ipv6};
use rpmd_pmd::port::stats::Counter;
use rpmd_pmd::port::{BusyPoll, MacAddr, Pkts, RxQueue, TxQueue, MAX_BURST};
use rpmd_sched::{backlog, multi, Task};
use std::os::fd::BorrowedFd;
use std::sync::Arc;

/// Why a frame was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Reason {
    /// Neither IPv4 nor IPv6 (ARP, VLAN-tagged, too short for Ethernet).
    NotIp,
    /// An IP header that fails its checks (version, lengths, checksum).
    BadHeader,
    /// TTL or hop limit 0 or 1: no hop left.
    TtlExpired,
    /// No route (LPM) or no flow (EM) matches.
    NoRoute,
    /// The output port's tx queue did not take it.
    TxFull,
}

impl Reason {
    /// Every reason, in counter order.
    pub const ALL: [Reason; 5] = [
        Reason::NotIp,
        Reason::BadHeader,
        Reason::TtlExpired,
        Reason::NoRoute,
        Reason::TxFull,
    ];

    /// Its name in the summary, JSON and telemetry.
    pub fn name(self) -> &'static str {
        match self {
            Reason::NotIp => "not_ip",
            Reason::BadHeader => "bad_header",
            Reason::TtlExpired => "ttl_expired",
            Reason::NoRoute => "no_route",
            Reason::TxFull => "tx_full",
        }
    }
}

/// One lcore's counters (it is their only writer), per port index.
#[derive(Debug)]
pub struct LcoreCounters {
    /// Frames received, per input port.
    pub rx: Vec<Counter>,
    /// Frames sent, per output port.
    pub tx: Vec<Counter>,
    /// Bytes sent, per output port.
    pub tx_bytes: Vec<Counter>,
    /// Frames dropped, per input port (tx full: per output port), by
    /// [`Reason`].
    pub drops: Vec<[Counter; 5]>,
}

impl LcoreCounters {
    /// Zeroed counters for `ports` ports.
    pub fn new(ports: usize) -> LcoreCounters {
        let z = || (0..ports).map(|_| Counter::default()).collect::<Vec<_>>();
        LcoreCounters {
            rx: z(),
            tx: z(),
            tx_bytes: z(),
            drops: (0..ports).map(|_| Default::default()).collect(),
        }
    }
}

/// The IPv4 and IPv6 EtherTypes as the frame's two bytes read in native
/// order (one load and compare, no byte swap).
const ETH_IPV4: u16 = u16::from_ne_bytes([0x08, 0x00]);
/// See [`ETH_IPV4`].
const ETH_IPV6: u16 = u16::from_ne_bytes([0x86, 0xdd]);

/// What pass 1 decided for a frame.
const TO_V4: u8 = 0x10;
const TO_V6: u8 = 0x11;

/// The tables as one lcore reads them.
pub struct Readers {
    /// Which lookup.
    pub lookup: Lookup,
    /// The shared tables (the prefix tables are read through `&`).
    pub tables: Arc<Tables>,
    em4: ExactReader<2>,
    em6: ExactReader<5>,
}

impl Readers {
    /// Readers of `tables`.
    pub fn new(tables: Arc<Tables>) -> Readers {
        Readers {
            lookup: tables.lookup,
            em4: tables.em4.reader(),
            em6: tables.em6.reader(),
            tables,
        }
    }
}

/// One burst's keys and verdicts, kept between bursts (no allocation on
/// the data path).
struct Scratch {
    fate: [u8; MAX_BURST],
    /// Per frame: index into the family's key list.
    slot: [u8; MAX_BURST],
    a4: [u32; MAX_BURST],
    a6: [u128; MAX_BURST],
    k4: [[u64; 2]; MAX_BURST],
    k6: [[u64; 5]; MAX_BURST],
    h4: [Option<u32>; MAX_BURST],
    h6: [Option<u32>; MAX_BURST],
    e4: [Option<u64>; MAX_BURST],
    e6: [Option<u64>; MAX_BURST],
}

impl Scratch {
    fn new() -> Box<Scratch> {
        Box::new(Scratch {
            fate: [0; MAX_BURST],
            slot: [0; MAX_BURST],
            a4: [0; MAX_BURST],
            a6: [0; MAX_BURST],
            k4: [[0; 2]; MAX_BURST],
            k6: [[0; 5]; MAX_BURST],
            h4: [None; MAX_BURST],
            h6: [None; MAX_BURST],
            e4: [None; MAX_BURST],
            e6: [None; MAX_BURST],
        })
    }
}

/// An rx queue an lcore polls: its port's index and the queue.
pub struct RxPort {
    /// The port's index among those in use.
    pub port: usize,
    /// The queue.
    pub q: Box<dyn RxQueue>,
}

/// One lcore's forwarding.
pub struct Forward {
    rx: Vec<RxPort>,
    burst: usize,
    pkts: Pkts,
    routed: Router,
}

/// What waits to leave by one port.
struct Outbound {
    /// The frames routed to it in this round, at most a burst.
    pkts: Pkts,
    /// Their bytes.
    bytes: u64,
    /// The port's own MAC (the source of what leaves by it).
    mac: MacAddr,
}

/// What a burst goes through once received.
struct Router {
    /// This lcore's tx queue on every port, by port index.
    tx: Vec<Box<dyn TxQueue>>,
    /// What each port is to send, by port index.
    out: Vec<Outbound>,
    readers: Readers,
    counters: Arc<LcoreCounters>,
    scratch: Box<Scratch>,
}

impl Forward {
    /// A task polling `rx`, sending through `tx` (one queue per port).
    pub fn new(
        rx: Vec<RxPort>,
        tx: Vec<Box<dyn TxQueue>>,
        macs: Vec<MacAddr>,
        readers: Readers,
        counters: Arc<LcoreCounters>,
        burst: usize,
    ) -> Forward {
        assert_eq!(tx.len(), macs.len(), "a tx queue and a MAC for every port");
        Forward {
            rx,
            burst: burst.clamp(1, MAX_BURST),
            pkts: Pkts::new(),
            routed: Router {
                out: macs
                    .into_iter()
                    .map(|mac| Outbound {
                        pkts: Pkts::new(),
                        bytes: 0,
                        mac,
                    })
                    .collect(),
                tx,
                readers,
                counters,
                scratch: Scratch::new(),
            },
        }
    }
}

/// Pass 1 for one frame: its fate (a drop [`Reason`] as u8, or
/// `TO_V4`/`TO_V6`), its key stored at `n4`/`n6`, the TTL taken down.
#[inline]
fn classify(frame: &mut [u8], lookup: Lookup, s: &mut Scratch, i: usize, n: &mut [usize; 2]) -> u8 {
    if frame.len() < 14 {
        return Reason::NotIp as u8;
    }
    let (eth, ip) = frame.split_at_mut(14);
    match u16::from_ne_bytes([eth[12], eth[13]]) {
        ETH_IPV4 => {
            let Ok(mut v4) = Ipv4::new_checked(ip) else {
                return Reason::BadHeader as u8;
            };
            if !v4.checksum_ok() {
                return Reason::BadHeader as u8;
            }
            if v4.decrement_ttl().is_none() {
                return Reason::TtlExpired as u8;
            }
            s.slot[i] = n[0] as u8;
            match lookup {
                Lookup::Lpm => s.a4[n[0]] = u32::from_be_bytes(v4.dst()),
                Lookup::Em => {
                    let h = v4.header();
                    // Only the first fragment (offset 0) carries the ports.
                    let first = u16::from_be_bytes([h[6], h[7]]) & 0x1fff == 0;
                    let mut addrs = [0u8; 8];
                    addrs.copy_from_slice(&h[12..20]);
                    let ports = l4_ports(v4.protocol(), first, v4.payload());
                    s.k4[n[0]] = key4_wire(addrs, ports, v4.protocol().0);
                }
            }
            n[0] += 1;
            TO_V4
        }
        ETH_IPV6 => {
            let Ok(mut v6) = Ipv6::new_checked(ip) else {
                return Reason::BadHeader as u8;
            };
            let hops = v6.hop_limit();
            if hops <= 1 {
                return Reason::TtlExpired as u8;
            }
            v6.set_hop_limit(hops - 1);
            let (src, dst) = (u128::from_be_bytes(v6.src()), u128::from_be_bytes(v6.dst()));
            s.slot[i] = n[1] as u8;
            match lookup {
                Lookup::Lpm => s.a6[n[1]] = dst,
                Lookup::Em => {
                    let p = l4_ports(v6.next_header(), true, v6.payload());
                    let ports = [
                        u16::from_be_bytes([p[0], p[1]]),
                        u16::from_be_bytes([p[2], p[3]]),
                    ];
                    s.k6[n[1]] = key6([src, dst], ports, v6.next_header().0);
                }
            }
            n[1] += 1;
            TO_V6
        }
        _ => Reason::NotIp as u8,
    }
}

/// A TCP or UDP segment's ports, the four bytes as the header holds
/// them; zeros for other protocols and for fragments past the first,
/// which carry no L4 header.
#[inline]
fn l4_ports(proto: IpProto, first: bool, l4: &[u8]) -> [u8; 4] {
    match l4.get(..4) {
        Some(&[a, b, c, d]) if first && (proto == IpProto::UDP || proto == IpProto::TCP) => {
            [a, b, c, d]
        }
        _ => [0; 4],
    }
}

impl Router {
    /// The three passes over one burst from `port`.
    #[inline]
    fn forward(&mut self, port: usize, pkts: &mut Pkts) {
        self.look_up(pkts);
        self.dispatch(port, pkts);
    }

    /// Passes 1 and 2 over `pkts`: `scratch.fate` and the hops.
    fn look_up(&mut self, pkts: &mut Pkts) {
        let s = &mut *self.scratch;
        let lookup = self.readers.lookup;
        let mut n = [0usize; 2];
        for (i, m) in pkts.iter_mut().enumerate() {
            s.fate[i] = classify(m.data_mut(), lookup, s, i, &mut n);
        }
        let t = &self.readers.tables;
        match lookup {
            Lookup::Lpm => {
                t.lpm4.lookup_bulk(&s.a4[..n[0]], &mut s.h4[..n[0]]);
                t.lpm6.lookup_bulk(&s.a6[..n[1]], &mut s.h6[..n[1]]);
            }
            Lookup::Em => {
                self.readers
                    .em4
                    .lookup_bulk(&s.k4[..n[0]], &mut s.e4[..n[0]]);
                self.readers
                    .em6
                    .lookup_bulk(&s.k6[..n[1]], &mut s.e6[..n[1]]);
            }
        }
    }

    /// Pass 3: each frame to its port's buffer with its MACs, or dropped
    /// and counted against `port`, its input.
    fn dispatch(&mut self, port: usize, pkts: &mut Pkts) {
        let s = &*self.scratch;
        let c = &*self.counters;
        let hops = &self.readers.tables.hops;
        let em = self.readers.lookup == Lookup::Em;
        for (i, mut m) in pkts.drain().enumerate() {
            // A burst holds at most MAX_BURST frames: the mask keeps the
            // index in the scratch arrays without a bounds check.
            let i = i % MAX_BURST;
            let fate = s.fate[i];
            let slot = s.slot[i] as usize;
            // Exact match's hops are its 64-bit values, read as they are.
            let hop = match (fate, em) {
                (TO_V4, false) => s.h4[slot],
                (TO_V4, true) => s.e4[slot].map(|v| v as u32),
                (TO_V6, false) => s.h6[slot],
                (TO_V6, true) => s.e6[slot].map(|v| v as u32),
                reason => {
                    c.drops[port][reason.0 as usize].add(1);
                    continue;
                }
            };
            let Some(hop) = hop.and_then(|h| hops.get(h as usize)) else {
                c.drops[port][Reason::NoRoute as usize].add(1);
                continue;
            };
            let o = &mut self.out[hop.port];
            if o.pkts.is_full() {
                // `tx` and `out` both hold every port (`Forward::new`).
                send_port(&mut self.tx[hop.port], o, c, hop.port);
            }
            let d = m.data_mut();
            // Pass 1 took every frame shorter than a header out.
            if let Some(macs) = d.get_mut(..12) {
                macs[..6].copy_from_slice(&hop.mac.0);
                macs[6..].copy_from_slice(&o.mac.0);
            }
            o.bytes += d.len() as u64;
            // A full buffer was sent above, so this push fits.
            let _ = o.pkts.push(m);
        }
    }

    /// Sends every port's buffer.
    fn send(&mut self) {
        let c = &*self.counters;
        for (p, (q, o)) in self.tx.iter_mut().zip(&mut self.out).enumerate() {
            if !o.pkts.is_empty() {
                send_port(q, o, c, p);
            }
        }
    }
}

/// Sends port `p`'s buffer `o` through its queue `q`; what the queue does
/// not take is dropped and counted.
#[inline(never)]
fn send_port(q: &mut Box<dyn TxQueue>, o: &mut Outbound, c: &LcoreCounters, p: usize) {
    let out = &mut o.pkts;
    let len = out.len();
    let sent = q.tx_burst(out);
    let mut sent_bytes = std::mem::take(&mut o.bytes);
    if sent < len {
        // What the queue left is dropped: its bytes were not sent.
        let unsent: usize = out.iter().map(|m| m.data().len()).sum();
        sent_bytes -= unsent as u64;
        c.drops[p][Reason::TxFull as usize].add((len - sent) as u64);
        out.clear();
    }
    c.tx[p].add(sent as u64);
    c.tx_bytes[p].add(sent_bytes);
}

impl Task for Forward {
    /// Each rx queue is drained until it is empty or the quota is met.
    fn run(&mut self, quota: usize) -> usize {
        let mut done = 0;
        let routed = &mut self.routed;
        for r in self.rx.iter_mut() {
            let port = r.port;
            let taken = backlog::drain_rx(&mut *r.q, &mut self.pkts, self.burst, quota, |b| {
                routed.forward(port, b)
            });
            routed.counters.rx[port].add(taken as u64);
            done += taken;
        }
        // What the round routed leaves now: nothing waits for a later one.
        routed.send();
        if done == 0 {
            // An idle round: take back what the tx queues have sent.
            for q in routed.tx.iter_mut() {
                q.in_flight();
            }
        }
        done
    }

    fn wake_fds(&self, each: &mut dyn FnMut(BorrowedFd<'_>)) {
        multi::wake_fds(self.rx.iter().map(|r| &r.q), each)
    }

    fn set_notify(&mut self, armed: bool) {
        multi::set_notify(self.rx.iter_mut().map(|r| &mut r.q), armed)
    }

    fn has_work(&self) -> bool {
        multi::has_work(self.rx.iter().map(|r| &r.q))
    }

    fn busy_poll(&self) -> Option<BusyPoll> {
        multi::busy_poll(self.rx.iter().map(|r| &r.q))
    }

    fn busy_poll_done(&mut self, hit: bool) {
        multi::busy_poll_done(self.rx.iter_mut().map(|r| &mut r.q), hit)
    }
}

#[cfg(test)]
mod tests {
    use super::super::routes::key4;
    use super::*;

    /// An Ethernet + IPv4 + UDP frame (1000 -> 1001) with fragment field
    /// `frag` (flags and offset).
    fn frame(frag: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut f[14..];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&28u16.to_be_bytes());
        ip[6..8].copy_from_slice(&frag.to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[20..22].copy_from_slice(&1000u16.to_be_bytes());
        ip[22..24].copy_from_slice(&1001u16.to_be_bytes());
        let c = rpmd_pmd::net::ipv4_header_checksum(&ip[..20]);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f
    }

    #[test]
    fn exact_match_keys_take_ports_from_whole_datagrams_and_first_fragments_only() {
        let mut s = Scratch::new();
        for (frag, ports) in [
            (0, [1000, 1001]),
            (0x2000, [1000, 1001]),
            (0x2010, [0, 0]),
            (0x0010, [0, 0]),
        ] {
            let mut f = frame(frag);
            let mut n = [0, 0];
            assert_eq!(classify(&mut f, Lookup::Em, &mut s, 0, &mut n), TO_V4);
            assert_eq!(
                s.k4[0],
                key4([0, 0], ports, 17),
                "fragment field {frag:#06x}"
            );
            assert_eq!(f[14 + 8], 63, "TTL one less");
        }
    }
}
