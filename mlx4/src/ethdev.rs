//! A ConnectX-3 port as an rpmd [`Port`](rpmd_pmd::Port) (the generic [`EthDev`] over [`Mlx4Device`]): `pci:BDF[,port=1|2]` through
//! the registry (the driver is picked by vendor and device ID), or
//! `mlx4-model:NAME[,port=1|2][,wire=0|1]` on a device model.
//!
//! Both ports of a dual-port card share one [`Hca`] (one firmware, one
//! ICM): the first open of a function brings the card up, each port opens
//! only its own queues, and the card is closed when its last port goes.
//!
//! `start` brings the Ethernet port up (MAC table, MTU, INIT_PORT), then
//! per queue a CQ and a QP in RTS (receive QPs with their whole ring
//! posted), attaches the port's MAC and broadcast (and the filter lists)
//! to receive queue 0's QP, and sets the promiscuous lists. `stop` undoes
//! it in reverse; handles of the last start then return 0, and mbufs the
//! device still held come back once its QPs are reset.
//!
//! Receive queues: 1, 2, 4 or 8; with several, their QPs take a range of
//! numbers and an RSS indirection QP, to which steering sends the frames,
//! spreads flows over them by a Toeplitz hash of the IP addresses and
//! TCP/UDP ports (the hash lands in the mbuf, `RX_RSS_HASH`). New RSS
//! settings on a running port go to a new RSS QP, which takes the
//! steering over entry by entry while frames keep arriving. Transmit
//! queues: up to 8.
use crate::cq::Cq;
use crate::irq::CompEq;
use crate::prm::layout::RssCtx;
use crate::prm::mem::{RingMem, Wire};
use crate::prm::qp;
use crate::qp::{Qp, QpSpec};
use crate::txrx::{Graveyard, Live, RxRing, TxRing};
use crate::{Error, Hca};
use crossbeam_utils::CachePadded;
use rpmd_pmd::endian::Be32;
use rpmd_pmd::port::events::LinkEvents;
use rpmd_pmd::port::rss::{RssCaps, RssConfig, RssHash};
use rpmd_pmd::port::stats::StatsBlock;
use rpmd_pmd::port::{
    Capabilities, Device, EthDev, Link, MacAddr, Offloads, PortConfig, Queues, RxFilter,
    StartContext, Xstat,
};
use rpmd_pmd::Pkts;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Most transmit queues a port hands out.
pub const MAX_TX_QUEUES: u16 = 8;
/// Most receive queues (a power of two: RSS indexes them by hash bits).
pub const MAX_RX_QUEUES: u16 = 8;

/// One card, shared by its ports.
pub type Card = Arc<Mutex<Hca>>;

fn lock(card: &Card) -> MutexGuard<'_, Hca> {
    card.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a start made.
struct Started {
    live: Live,
    rx: Vec<(Qp, Cq)>,
    tx: Vec<(Qp, Cq)>,
    graveyard: Graveyard,
    /// The RSS indirection QP, with several receive queues.
    rss: Option<Qp>,
    /// MACs attached to the steering QP.
    attached: Vec<[u8; 6]>,
    /// The receive queues' completion EQs (destroyed after their CQs).
    comp_eqs: Vec<CompEq>,
}

impl Started {
    /// The QP frames are steered to: the RSS QP, or the one receive QP.
    fn steer_qpn(&self) -> Option<u32> {
        self.rss
            .as_ref()
            .or(self.rx.first().map(|r| &r.0))
            .map(|q| q.qpn)
    }
}

/// The Toeplitz key RSS hashes with (DPDK's default for most PMDs).
pub use rpmd_pmd::net::rss::RSS_KEY;

/// The RSS context's flag for each kind of header hashed.
const RSS_FLAGS: [(RssHash, u8); 6] = [
    (RssHash::IPV4, qp::RSS_IPV4),
    (RssHash::IPV4_TCP, qp::RSS_TCP_IPV4),
    (RssHash::IPV4_UDP, qp::RSS_UDP_IPV4),
    (RssHash::IPV6, qp::RSS_IPV6),
    (RssHash::IPV6_TCP, qp::RSS_TCP_IPV6),
    (RssHash::IPV6_UDP, qp::RSS_UDP_IPV6),
];

/// The RSS indirection QP's spec: Toeplitz with `rss`'s key over the
/// headers it names, spreading over the `n` receive QPs from `base`
/// (frames with nothing to hash go to the first); it completes nothing
/// itself, so CQ `cqn` (receive queue 0's) stands in its context.
fn rss_qp_spec(port: u8, cqn: u32, (base, n): (u32, u32), rss: &RssConfig) -> QpSpec {
    let mut r = RssCtx::zeroed();
    r.base_qpn = Be32::new(n.trailing_zeros() << 24 | base);
    r.default_qpn = Be32::new(base);
    r.base_qpn_udp = Be32::new(base);
    r.hash_fn = qp::RSS_HASH_TOP;
    r.flags = rss.hash.to_bits(&RSS_FLAGS);
    r.rss_key = rss.key;
    QpSpec {
        port,
        sq_txbbs: 1,
        rq: None,
        cqn_send: cqn,
        cqn_recv: cqn,
        qpn: None,
        rss: Some(r),
    }
}

/// One Ethernet port of a ConnectX-3: the generic port over its device.
pub type Mlx4Port = EthDev<Mlx4Device>;

/// Port `port` (1-based) of `card`, named `name` (its device string),
/// stamping received mbufs with `port_id`.
pub fn open_port(name: &str, card: Card, port: u8, port_id: u16) -> Result<Mlx4Port, Error> {
    let ports = lock(&card).ports().len();
    if port == 0 || port as usize > ports {
        return Err(Error::Firmware(format!(
            "{name}: port {port}; the card has ports 1..={ports}"
        )));
    }
    {
        let mut hca = lock(&card);
        if hca.ports()[port as usize - 1].senses_ib {
            return Err(Error::Firmware(format!(
                "{name}: port {port} is a VPI port on an InfiniBand link (SENSE_PORT); rpmd drives Ethernet only: cable it to Ethernet, or set its type with `mlxconfig set LINK_TYPE_P{port}=2` (ETH)"
            )));
        }
        // The port's counters start at its open, as the other ports' do.
        hca.dump_eth_stats(port, true)?;
    }
    let dev = Mlx4Device {
        name: name.to_string(),
        card,
        port,
        started: None,
        filter: RxFilter::OWN_ADDRESS,
        mtu: 1500,
    };
    Ok(EthDev::named(name, port_id, dev).with_filter(RxFilter::OWN_ADDRESS))
}

/// The device side of one ConnectX-3 port.
pub struct Mlx4Device {
    /// The device string, for errors.
    name: String,
    card: Card,
    port: u8,
    started: Option<Started>,
    /// The receive filter to program (the port's own MAC and broadcast
    /// besides).
    filter: RxFilter,
    mtu: u16,
}

impl Mlx4Device {
    fn err(&self, what: &str, e: Error) -> rpmd_pmd::Error {
        rpmd_pmd::Error::Driver {
            port: self.name.clone(),
            what: what.to_string(),
            source: Box::new(e),
        }
    }

    fn port_err(&self, detail: &str) -> rpmd_pmd::Error {
        rpmd_pmd::Error::Port {
            port: self.name.clone(),
            detail: detail.to_string(),
        }
    }

    /// The MACs receive queue 0 takes: its own, broadcast, the filters.
    fn wanted_macs(&self) -> Vec<[u8; 6]> {
        let own = lock(&self.card).ports()[self.port as usize - 1].mac;
        let mut v = vec![own, [0xff; 6]];
        let f = &self.filter;
        v.extend(f.unicast.iter().chain(&f.multicast).map(|m| m.0));
        v.dedup();
        v
    }

    /// Programs steering for the running start: the MAC groups and the
    /// promiscuous lists.
    fn apply_filters(&mut self) -> Result<(), Error> {
        let want = self.wanted_macs();
        let (promisc, allmulti) = (self.filter.promiscuous, self.filter.allmulticast);
        let port = self.port;
        let Some(st) = self.started.as_mut() else {
            return Ok(());
        };
        let Some(qpn) = st.steer_qpn() else {
            return Ok(());
        };
        let mut hca = lock(&self.card);
        for mac in st.attached.clone() {
            if !want.contains(&mac) {
                hca.detach_mac(port, mac, qpn)?;
                st.attached.retain(|m| *m != mac);
            }
        }
        for mac in want {
            if !st.attached.contains(&mac) {
                hca.attach_mac(port, mac, qpn)?;
                st.attached.push(mac);
            }
        }
        let list = |on: bool| if on { vec![qpn] } else { Vec::new() };
        hca.set_promisc_qps(port, true, &list(promisc))?;
        hca.set_promisc_qps(port, false, &list(allmulti || promisc))
    }

    fn start_queues(
        &mut self,
        ctx: &StartContext<'_>,
        hca: &mut Hca,
        st: &mut Started,
    ) -> Result<Queues, Error> {
        let conf = ctx.conf;
        let pool = conf
            .rx_pool
            .clone()
            .ok_or_else(|| Error::Firmware("no rx_pool".into()))?;
        hca.function()
            .domain()
            .register_pool(&pool)
            .map_err(|e| Error::Memory {
                what: "registering the receive pool for the device".into(),
                source: e,
            })?;
        let n = conf.rx_queues as u32;
        // Several receive queues take a range of QP numbers that the RSS
        // QP's hash indexes (`core/en_rx.c` `mlx4_en_config_rss_steer`).
        let base = if n > 1 {
            Some(hca.qpns.take_aligned("QP", n)?)
        } else {
            None
        };
        let mut rx = Vec::new();
        for q in 0..n {
            let ring = self.start_rx(ctx, hca, st, &pool, q, base.map(|b| b + q))?;
            rx.push(Box::new(ring) as Box<dyn rpmd_pmd::port::RxQueue>);
        }
        if let Some(base) = base {
            self.start_rss(hca, st, base, n, &conf.rss)?;
        }
        let mut tx = Vec::new();
        for q in 0..conf.tx_queues as usize {
            let ring = self.start_tx(ctx, hca, st, &pool, q)?;
            tx.push(Box::new(ring) as Box<dyn rpmd_pmd::port::TxQueue>);
        }
        Ok(Queues::new(rx, tx))
    }

    /// Receive queue `q`: its CQ, its QP (numbered `qpn` in an RSS
    /// range), the ring posted.
    fn start_rx(
        &self,
        ctx: &StartContext<'_>,
        hca: &mut Hca,
        st: &mut Started,
        pool: &rpmd_pmd::Mempool,
        q: u32,
        qpn: Option<u32>,
    ) -> Result<RxRing, Error> {
        let conf = ctx.conf;
        let n = conf.rx_desc as u32;
        // Its interrupt: a completion EQ raising its own vector.
        let irq_eq = hca.rx_eq(self.port, q);
        if let Some((eqn, vector)) = irq_eq {
            st.comp_eqs.push(hca.create_comp_eq(eqn, vector as u8)?);
        }
        let (qp, cq, poll) = hca.create_queue(n, irq_eq.map(|(eqn, _)| eqn), |cqn| QpSpec {
            port: self.port,
            sq_txbbs: 1,
            rq: Some((n, 16)),
            cqn_send: cqn,
            cqn_recv: cqn,
            qpn,
            rss: None,
        })?;
        let wqes = RingMem::new(qp.buf.clone(), qp.rq_off, n)
            .ok_or_else(|| Error::Firmware(format!("a receive ring of {n} WQEs")));
        let wqes = match wqes {
            Ok(w) => w,
            Err(e) => {
                st.rx.push((qp, cq));
                return Err(e);
            }
        };
        let irq = match (irq_eq, st.comp_eqs.last()) {
            (Some((_, vector)), Some(eq)) => match hca.rx_irq(eq, vector, cq.cqn, poll.record()) {
                Ok(irq) => Some(irq),
                Err(e) => {
                    st.rx.push((qp, cq));
                    return Err(e);
                }
            },
            _ => None,
        };
        let mut ring = RxRing {
            irq,
            live: st.live.clone(),
            gate: ctx.rx_live[q as usize].clone(),
            wqes,
            db: qp.db.clone(),
            n,
            cq: poll,
            slots: rpmd_pmd::mbuf::Slots::new(n as usize),
            pool: pool.clone(),
            lkey: hca.lkey(),
            cons: 0,
            prod: 0,
            stamp: ctx.stamp,
            stats: ctx.stats.rx(q as usize),
            graveyard: st.graveyard.clone(),
            refill: Pkts::new(),
            rss: conf.rx_queues > 1,
        };
        st.rx.push((qp, cq));
        ring.fill().map_err(|e| Error::Memory {
            what: "filling the receive ring".into(),
            source: e,
        })?;
        Ok(ring)
    }

    /// The RSS indirection QP over receive QPs `base..base + n`: Toeplitz
    /// over IPv4/IPv6 addresses and TCP/UDP ports, frames with nothing to
    /// hash to the first; it completes nothing itself (receive queue 0's
    /// CQ stands in its context).
    fn start_rss(
        &self,
        hca: &mut Hca,
        st: &mut Started,
        base: u32,
        n: u32,
        rss: &RssConfig,
    ) -> Result<(), Error> {
        let spec = rss_qp_spec(self.port, st.rx[0].1.cqn, (base, n), rss);
        st.rss = Some(hca.create_qp(spec)?);
        Ok(())
    }

    /// New hashed headers or key on a running port. A ConnectX-3 takes
    /// an RSS context only as a QP is made, so a new RSS QP is made with
    /// them, each steering entry is moved onto it (one WRITE_MCG each,
    /// which swaps the member in place: every frame finds the old QP or
    /// the new one, both spreading over the same receive QPs), and the
    /// old one is destroyed. Receiving goes on throughout; Linux's
    /// `mlx4_en_set_rxfh` restarts the port instead. On a failure the
    /// entries moved go back and the old QP stays.
    fn swap_rss_qp(&mut self, rss: &RssConfig) -> Result<(), Error> {
        let (port, promisc) = (self.port, self.filter.promiscuous);
        let allmulti = promisc || self.filter.allmulticast;
        let Some(st) = self.started.as_mut() else {
            return Ok(());
        };
        let Some(old) = st.rss.as_ref().map(|q| q.qpn) else {
            return Ok(());
        };
        let (base, n) = (st.rx[0].0.qpn, st.rx.len() as u32);
        let mut hca = lock(&self.card);
        let new = hca.create_qp(rss_qp_spec(port, st.rx[0].1.cqn, (base, n), rss))?;
        let mut moved = Vec::new();
        let mut res = Ok(());
        for &mac in &st.attached {
            res = hca.move_mac(port, mac, old, new.qpn);
            if res.is_err() {
                break;
            }
            moved.push(mac);
        }
        let list = |on: bool| if on { vec![new.qpn] } else { Vec::new() };
        res = res
            .and_then(|()| hca.set_promisc_qps(port, true, &list(promisc)))
            .and_then(|()| hca.set_promisc_qps(port, false, &list(allmulti)));
        if let Err(e) = res {
            for mac in moved {
                let _ = hca.move_mac(port, mac, new.qpn, old);
            }
            let old_list = |on: bool| if on { vec![old] } else { Vec::new() };
            let _ = hca.set_promisc_qps(port, true, &old_list(promisc));
            let _ = hca.set_promisc_qps(port, false, &old_list(allmulti));
            hca.destroy_qp(new);
            return Err(e);
        }
        if let Some(q) = st.rss.replace(new) {
            hca.destroy_qp(q);
        }
        Ok(())
    }

    /// Send queue `q`: its CQ and QP, and a mapping of the UAR pages.
    fn start_tx(
        &self,
        ctx: &StartContext<'_>,
        hca: &mut Hca,
        st: &mut Started,
        pool: &rpmd_pmd::Mempool,
        q: usize,
    ) -> Result<TxRing, Error> {
        let n = ctx.conf.tx_desc as u32;
        let (qp, cq, poll) = hca.create_queue(n, None, |cqn| QpSpec {
            port: self.port,
            sq_txbbs: n,
            rq: None,
            cqn_send: cqn,
            cqn_recv: cqn,
            qpn: None,
            rss: None,
        })?;
        // Each send queue maps the UAR pages for itself.
        let uar = hca.function().bar(2).map_err(|e| Error::Register {
            what: "BAR2 for a send queue's doorbell".into(),
            source: e,
        });
        let sq = RingMem::new(qp.buf.clone(), qp.sq_off, n)
            .ok_or_else(|| Error::Firmware(format!("a send ring of {n} TXBBs")));
        let ring = uar
            .and_then(|uar| sq.map(|sq| (uar, sq)))
            .map(|(uar, sq)| TxRing {
                live: st.live.clone(),
                gate: ctx.tx_live[q].clone(),
                qpn: qp.qpn,
                sq,
                txbbs: n,
                cq: poll,
                uar,
                lkey: hca.lkey(),
                prod: 0,
                cons: 0,
                wqe_prod: 0,
                wqe_cons: 0,
                slots: rpmd_pmd::mbuf::Slots::new(n as usize),
                sizes: vec![0; n as usize],
                stats: ctx.stats.tx(q),
                graveyard: st.graveyard.clone(),
                pool: pool.clone(),
                done: Pkts::new(),
            });
        st.tx.push((qp, cq));
        ring
    }

    /// Resets every QP, then destroys the CQs; frees what dropped
    /// handles left behind.
    fn teardown(&mut self, st: Started) {
        st.live.store(false, Ordering::Relaxed);
        let mut hca = lock(&self.card);
        if hca.failure().is_some() {
            // The failed card was reset: it reaches none of the queues'
            // memory and takes no command, so all of it goes now.
            st.graveyard
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clear();
            return;
        }
        if let Some(qpn) = st.steer_qpn() {
            for mac in &st.attached {
                if let Err(e) = hca.detach_mac(self.port, *mac, qpn) {
                    eprintln!("rpmd: warning: {}: {e}", self.name);
                }
            }
        }
        // The RSS QP first: it points at the receive QPs.
        if let Some(rss) = st.rss {
            hca.destroy_qp(rss);
        }
        for unicast in [true, false] {
            let _ = hca.set_promisc_qps(self.port, unicast, &[]);
        }
        let cqs: Vec<Cq> = st
            .rx
            .into_iter()
            .chain(st.tx)
            .map(|(qp, cq)| {
                hca.destroy_qp(qp);
                cq
            })
            .collect();
        for cq in cqs {
            if let Err(e) = hca.destroy_cq(cq) {
                eprintln!("rpmd: warning: {}: {e}", self.name);
            }
        }
        for eq in st.comp_eqs {
            if let Err(e) = hca.destroy_comp_eq(eq) {
                eprintln!("rpmd: warning: {}: {e}", self.name);
            }
        }
        st.graveyard
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        if let Err(e) = hca.close_port(self.port) {
            eprintln!("rpmd: warning: {}: {e}", self.name);
        }
    }
}

impl Device for Mlx4Device {
    /// What QUERY_FW reported at bring-up: major.minor.subminor.
    fn fw_version(&self) -> Option<String> {
        let (a, b, c) = lock(&self.card).fw().version;
        Some(format!("{a}.{b}.{c}"))
    }

    fn driver(&self) -> &'static str {
        "mlx4"
    }

    fn capabilities(&self) -> Capabilities {
        let hca = lock(&self.card);
        let cap = hca.dev_cap();
        let max_mtu = hca.ports()[self.port as usize - 1].mtu;
        // Queue entries (QUERY_DEV_CAP's max_{sq,rq}_desc are WQE sizes
        // in bytes, not counts).
        let max_desc = (1u32 << cap.log_max_qp_sz.min(15)).min(32768);
        Capabilities {
            max_rx_queues: MAX_RX_QUEUES,
            max_tx_queues: MAX_TX_QUEUES,
            min_desc: 64,
            max_desc: max_desc as u16,
            desc_pow2: true,
            offloads: Offloads::RX_CHECKSUM
                | Offloads::TX_CHECKSUM
                | Offloads::TX_MULTI_SEGS
                | Offloads::RX_RSS,
            min_mtu: 68,
            max_mtu,
            rx_interrupts: hca.rx_vectors() > 0,
            needs_rx_pool: true,
        }
    }

    fn configure(&mut self, name: &str, conf: &PortConfig) -> Result<(), rpmd_pmd::Error> {
        if !conf.rx_queues.is_power_of_two() {
            return Err(rpmd_pmd::Error::Config {
                port: name.to_string(),
                what: "rx_queues",
                detail: format!(
                    "{} queues; RSS spreads over a power of two of them (1, 2, 4, 8)",
                    conf.rx_queues
                ),
            });
        }
        Ok(())
    }

    fn start(&mut self, ctx: StartContext<'_>) -> Result<Queues, rpmd_pmd::Error> {
        let mut st = Started {
            // The port's own flag (cleared by `teardown`), apart from the
            // queues' start flags, which a queue stop also clears.
            live: Arc::new(CachePadded::new(AtomicBool::new(true))),
            rx: Vec::new(),
            tx: Vec::new(),
            graveyard: Graveyard::default(),
            rss: None,
            attached: Vec::new(),
            comp_eqs: Vec::new(),
        };
        let card = self.card.clone();
        let made = {
            let mut hca = lock(&card);
            hca.init_port(self.port, self.mtu)
                .and_then(|()| self.start_queues(&ctx, &mut hca, &mut st))
        };
        match made {
            Ok(q) => {
                self.started = Some(st);
                if let Err(e) = self.apply_filters() {
                    let st = self.started.take();
                    st.into_iter().for_each(|st| self.teardown(st));
                    return Err(self.err("steering", e));
                }
                Ok(q)
            }
            Err(e) => {
                self.teardown(st);
                Err(self.err("start", e))
            }
        }
    }

    fn stop(&mut self, _name: &str) -> Result<(), rpmd_pmd::Error> {
        if let Some(st) = self.started.take() {
            self.teardown(st);
        }
        Ok(())
    }

    fn link(&self, _started: bool) -> Link {
        let mut hca = lock(&self.card);
        // A failed card was said once when found; its links read down.
        if hca.failure().is_none() {
            if let Err(e) = hca.poll_events() {
                eprintln!("rpmd: warning: {}: {e}", self.name);
            }
        }
        let speed = hca.ports()[self.port as usize - 1].speed_mbps;
        let up = self.started.is_some() && hca.link_up(self.port);
        Link {
            up,
            speed_mbps: if up { speed } else { 0 },
            full_duplex: up,
        }
    }

    fn mac_addr(&self) -> MacAddr {
        MacAddr(lock(&self.card).ports()[self.port as usize - 1].mac)
    }

    fn has_mac_filter(&self) -> bool {
        true
    }

    /// Records the filter and, while started, programs steering; the
    /// record stays as it was when the device refuses.
    fn set_rx_filter(&mut self, _name: &str, filter: &RxFilter) -> Result<(), rpmd_pmd::Error> {
        let old = std::mem::replace(&mut self.filter, filter.clone());
        self.apply_filters().map_err(|e| {
            self.filter = old;
            self.err("receive filter", e)
        })
    }

    fn set_mtu(&mut self, _name: &str, mtu: u16, started: bool) -> Result<(), rpmd_pmd::Error> {
        if started {
            return Err(self.port_err("set_mtu while started; stop it first"));
        }
        self.mtu = mtu;
        Ok(())
    }

    /// Frames the device dropped for want of a receive buffer (its
    /// `RdropOvflw` counter, read with DUMP_ETH_STATS); 0 when the
    /// command fails.
    fn missed(&self) -> u64 {
        let port = self.port;
        lock(&self.card)
            .dump_eth_stats(port, false)
            .map_or(0, |c| c.rx_overflow)
    }

    /// Toeplitz over every IPv4/IPv6 header kind, a settable key; no
    /// redirection table (the hash's low bits pick one of a power of two
    /// of QPs).
    fn rss_caps(&self) -> RssCaps {
        RssCaps {
            hash: RssHash::ALL,
            reta_size: 0,
            key: true,
        }
    }

    /// A new RSS QP takes over from the running one (`swap_rss_qp`).
    fn set_rss_hash(
        &mut self,
        _name: &str,
        rss: &RssConfig,
        _rx_queues: u16,
    ) -> Result<(), rpmd_pmd::Error> {
        self.swap_rss_qp(rss)
            .map_err(|e| self.err("changing the RSS settings", e))
    }

    /// Port changes the async EQ's interrupt wakes the card's watcher
    /// for (`linkwatch`); without MSI-X the link is polled.
    fn watch_link(&mut self, _name: &str, events: &LinkEvents) -> Result<bool, rpmd_pmd::Error> {
        crate::linkwatch::watch(&self.card, self.port, events)
            .map_err(|e| self.err("starting the link watcher", e))
    }

    /// The port's hardware counters since its open (DUMP_ETH_STATS; none
    /// when the command fails), the firmware commands posted, and
    /// whether the card failed.
    fn xstats(&self, _stats: &StatsBlock, x: &mut Vec<Xstat>) {
        let mut hca = lock(&self.card);
        if let Ok(c) = hca.dump_eth_stats(self.port, false) {
            for (name, value) in [
                ("rx_packets_phy", c.rx_frames),
                ("rx_bytes_phy", c.rx_bytes),
                ("tx_packets_phy", c.tx_frames),
                ("tx_bytes_phy", c.tx_bytes),
                ("rx_dropped_phy", c.rx_dropped),
                ("rx_missed_errors", c.rx_overflow),
                ("rx_length_errors", c.rx_bad_length),
                ("rx_crc_errors", c.rx_crc_errors),
                ("tx_dropped_phy", c.tx_dropped),
            ] {
                x.push(Xstat {
                    name: name.into(),
                    value,
                });
            }
        }
        x.push(Xstat {
            name: "fw_commands".into(),
            value: hca.commands_posted(),
        });
        x.push(Xstat {
            name: "catastrophic_errors".into(),
            value: hca.failure().is_some() as u64,
        });
    }
}

impl Drop for Mlx4Device {
    fn drop(&mut self) {
        if let Some(st) = self.started.take() {
            self.teardown(st);
        }
    }
}
