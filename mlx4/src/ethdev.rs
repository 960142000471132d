//! A ConnectX-3 port as an rpmd [`Port`]: `pci:BDF[,port=1|2]` through
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
//! Receive queues: one (the card spreads over several only through an
//! RSS QP, not built yet); transmit queues: up to 8.
use crate::cq::Cq;
use crate::qp::{Qp, QpSpec};
use crate::txrx::{Graveyard, Live, RxRing, TxRing};
use crate::{Error, Hca};
use crossbeam_utils::CachePadded;
use rpmd_pmd::port::stats::StatsBlock;
use rpmd_pmd::port::{
    Capabilities, Link, MacAddr, Offloads, Port, PortConfig, PortStats, Queues, RxStamp, Xstat,
};
use rpmd_pmd::Pkts;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Most transmit queues a port hands out.
pub const MAX_TX_QUEUES: u16 = 8;

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
    /// MACs attached to receive queue 0's QP.
    attached: Vec<[u8; 6]>,
}

/// One Ethernet port of a ConnectX-3.
pub struct Mlx4Port {
    name: String,
    card: Card,
    port: u8,
    port_id: u16,
    conf: Option<PortConfig>,
    started: Option<Started>,
    stats: StatsBlock,
    promisc: bool,
    allmulti: bool,
    mtu: u16,
    unicast: Vec<MacAddr>,
    multicast: Vec<MacAddr>,
}

impl Mlx4Port {
    /// Port `port` (1-based) of `card`, named `name` (its device string),
    /// stamping received mbufs with `port_id`.
    pub fn new(name: &str, card: Card, port: u8, port_id: u16) -> Result<Mlx4Port, Error> {
        let ports = lock(&card).ports().len();
        if port == 0 || port as usize > ports {
            return Err(Error::Firmware(format!(
                "{name}: port {port}; the card has ports 1..={ports}"
            )));
        }
        Ok(Mlx4Port {
            name: name.to_string(),
            card,
            port,
            port_id,
            conf: None,
            started: None,
            stats: StatsBlock::new(1, 1),
            promisc: false,
            allmulti: false,
            mtu: 1500,
            unicast: Vec::new(),
            multicast: Vec::new(),
        })
    }

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
        v.extend(self.unicast.iter().chain(&self.multicast).map(|m| m.0));
        v.dedup();
        v
    }

    /// Programs steering for the running start: the MAC groups and the
    /// promiscuous lists.
    fn apply_filters(&mut self) -> Result<(), Error> {
        let want = self.wanted_macs();
        let (promisc, allmulti, port) = (self.promisc, self.allmulti, self.port);
        let Some(st) = self.started.as_mut() else {
            return Ok(());
        };
        let qpn = st.rx[0].0.qpn;
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
        conf: &PortConfig,
        hca: &mut Hca,
        st: &mut Started,
    ) -> Result<Queues, Error> {
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
        let (lkey, port) = (hca.lkey(), self.port);
        let stamp = RxStamp::new(self.port_id, conf);
        let mut rx = Vec::new();
        for q in 0..conf.rx_queues as usize {
            let n = conf.rx_desc as u32;
            let (cq, poll) = hca.create_cq(n)?;
            let spec = QpSpec {
                port,
                sq_txbbs: 1,
                rq: Some((n, 16)),
                cqn_send: cq.cqn,
                cqn_recv: cq.cqn,
            };
            let qp = match hca.create_qp(spec) {
                Ok(qp) => qp,
                Err(e) => {
                    let _ = hca.destroy_cq(cq);
                    return Err(e);
                }
            };
            let mut ring = RxRing {
                live: st.live.clone(),
                buf: qp.buf.clone(),
                rq_off: qp.rq_off,
                db: qp.db.clone(),
                n,
                cq: poll,
                slots: crate::slots::Slots::new(n as usize),
                pool: pool.clone(),
                lkey,
                cons: 0,
                prod: 0,
                stamp,
                stats: self.stats.rx(q),
                graveyard: st.graveyard.clone(),
                refill: Pkts::new(),
            };
            st.rx.push((qp, cq));
            ring.fill().map_err(|e| Error::Memory {
                what: "filling the receive ring".into(),
                source: e,
            })?;
            rx.push(Box::new(ring) as Box<dyn rpmd_pmd::port::RxQueue>);
        }
        let mut tx = Vec::new();
        for q in 0..conf.tx_queues as usize {
            let n = conf.tx_desc as u32;
            let (cq, poll) = hca.create_cq(n)?;
            let spec = QpSpec {
                port,
                sq_txbbs: n,
                rq: None,
                cqn_send: cq.cqn,
                cqn_recv: cq.cqn,
            };
            let qp = match hca.create_qp(spec) {
                Ok(qp) => qp,
                Err(e) => {
                    let _ = hca.destroy_cq(cq);
                    return Err(e);
                }
            };
            // Each send queue maps the UAR pages for itself.
            let uar = hca.function().bar(2).map_err(|e| Error::Register {
                what: "BAR2 for a send queue's doorbell".into(),
                source: e,
            })?;
            let ring = TxRing {
                live: st.live.clone(),
                qpn: qp.qpn,
                buf: qp.buf.clone(),
                sq_off: qp.sq_off,
                txbbs: n,
                cq: poll,
                uar,
                lkey,
                prod: 0,
                cons: 0,
                slots: crate::slots::Slots::new(n as usize),
                sizes: vec![0; n as usize],
                stats: self.stats.tx(q),
                graveyard: st.graveyard.clone(),
                pool: pool.clone(),
                done: Pkts::new(),
            };
            st.tx.push((qp, cq));
            tx.push(Box::new(ring) as Box<dyn rpmd_pmd::port::TxQueue>);
        }
        Ok(Queues::new(rx, tx))
    }

    /// Resets every QP, then destroys the CQs; frees what dropped
    /// handles left behind.
    fn teardown(&mut self, st: Started) {
        st.live.store(false, Ordering::Relaxed);
        let mut hca = lock(&self.card);
        if let Some((qp, _)) = st.rx.first() {
            for mac in &st.attached {
                if let Err(e) = hca.detach_mac(self.port, *mac, qp.qpn) {
                    eprintln!("rpmd: warning: {}: {e}", self.name);
                }
            }
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
        st.graveyard
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        if let Err(e) = hca.close_port(self.port) {
            eprintln!("rpmd: warning: {}: {e}", self.name);
        }
    }
}

impl Port for Mlx4Port {
    fn driver(&self) -> &'static str {
        "mlx4"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        let hca = lock(&self.card);
        let cap = hca.dev_cap();
        let max_mtu = hca.ports()[self.port as usize - 1].mtu;
        // Queue entries (QUERY_DEV_CAP's max_{sq,rq}_desc are WQE sizes
        // in bytes, not counts).
        let max_desc = (1u32 << cap.log_max_qp_sz.min(15)).min(32768);
        Capabilities {
            max_rx_queues: 1,
            max_tx_queues: MAX_TX_QUEUES,
            min_desc: 64,
            max_desc: max_desc as u16,
            desc_pow2: true,
            offloads: Offloads::RX_CHECKSUM | Offloads::TX_MULTI_SEGS,
            min_mtu: 68,
            max_mtu,
            rx_interrupts: false,
            needs_rx_pool: true,
        }
    }

    fn configure(&mut self, conf: &PortConfig) -> Result<(), rpmd_pmd::Error> {
        if self.started.is_some() {
            return Err(self.port_err("configure while started; stop it first"));
        }
        conf.validate(&self.name, &self.capabilities())?;
        if let Some(m) = conf.mtu {
            self.mtu = m;
        }
        self.stats = StatsBlock::new(conf.rx_queues, conf.tx_queues);
        self.conf = Some(conf.clone());
        Ok(())
    }

    fn start(&mut self) -> Result<Queues, rpmd_pmd::Error> {
        let Some(conf) = self.conf.clone() else {
            return Err(self.port_err("start before configure"));
        };
        if self.started.is_some() {
            return Err(self.port_err("already started"));
        }
        let mut st = Started {
            live: Arc::new(CachePadded::new(AtomicBool::new(true))),
            rx: Vec::new(),
            tx: Vec::new(),
            graveyard: Graveyard::default(),
            attached: Vec::new(),
        };
        let card = self.card.clone();
        let made = {
            let mut hca = lock(&card);
            hca.init_port(self.port, self.mtu)
                .and_then(|()| self.start_queues(&conf, &mut hca, &mut st))
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

    fn stop(&mut self) -> Result<(), rpmd_pmd::Error> {
        if let Some(st) = self.started.take() {
            self.teardown(st);
        }
        Ok(())
    }

    fn link(&self) -> Link {
        let mut hca = lock(&self.card);
        if let Err(e) = hca.poll_events() {
            eprintln!("rpmd: warning: {}: {e}", self.name);
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

    fn set_promiscuous(&mut self, on: bool) -> Result<(), rpmd_pmd::Error> {
        self.promisc = on;
        self.apply_filters()
            .map_err(|e| self.err("promiscuous mode", e))
    }

    fn promiscuous(&self) -> bool {
        self.promisc
    }

    fn set_allmulticast(&mut self, on: bool) -> Result<(), rpmd_pmd::Error> {
        self.allmulti = on;
        self.apply_filters()
            .map_err(|e| self.err("all-multicast mode", e))
    }

    fn allmulticast(&self) -> bool {
        self.allmulti
    }

    fn set_mac_filter(
        &mut self,
        unicast: &[MacAddr],
        multicast: &[MacAddr],
    ) -> Result<(), rpmd_pmd::Error> {
        self.unicast = unicast.to_vec();
        self.multicast = multicast.to_vec();
        self.apply_filters().map_err(|e| self.err("MAC filter", e))
    }

    fn set_mtu(&mut self, mtu: u16) -> Result<(), rpmd_pmd::Error> {
        self.capabilities().check_mtu(&self.name, mtu)?;
        if self.started.is_some() {
            return Err(self.port_err("set_mtu while started; stop it first"));
        }
        self.mtu = mtu;
        Ok(())
    }

    fn mtu(&self) -> u16 {
        self.mtu
    }

    fn stats(&self) -> PortStats {
        self.stats.stats()
    }

    fn xstats(&self) -> Vec<Xstat> {
        let mut x = self.stats.xstats();
        let hca = lock(&self.card);
        x.push(Xstat {
            name: "fw_commands".into(),
            value: hca.commands_posted(),
        });
        x
    }

    fn reset_stats(&mut self) {
        self.stats.reset();
    }
}

impl Drop for Mlx4Port {
    fn drop(&mut self) {
        if let Some(st) = self.started.take() {
            self.teardown(st);
        }
    }
}
