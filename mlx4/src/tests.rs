//! The model's strictness where the driver's own objects are needed to
//! reach it: QP transitions out of order, a CQ destroyed under a live QP,
//! a CQ too small for its queue, a send naming a key no MR has.
use crate::cq::CqPoll;
use crate::eq::Event;
use crate::model::{Mlx4Model, ModelOptions, RxOutcome, PORT_MAC};
use crate::prm::layout::QpModify;
use crate::prm::mem::{RingMem, Wire};
use crate::prm::{cq as c, op, qp as p, status};
use crate::qp::{Qp, QpSpec};
use crate::txrx::TxRing;
use crate::{Error, Hca, Options};
use rpmd_pmd::mbuf::Slots;
use rpmd_pmd::port::TxQueue;
use rpmd_pmd::{DmaDomain, Mempool, MempoolConfig, Pkts};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

fn hca() -> (Arc<Mlx4Model>, Hca) {
    let m = Mlx4Model::new("0000:00:0e.0".parse().unwrap(), ModelOptions::default());
    let func = m.open(&DmaDomain::new()).unwrap();
    (m.clone(), Hca::open(func, &Options::default()).unwrap())
}

fn status_of<T>(r: Result<T, Error>) -> u8 {
    match r {
        Err(Error::Command { status, .. }) => status,
        Err(e) => panic!("not a command error: {e}"),
        Ok(_) => status::OK,
    }
}

fn spec(cqn: u32, rq: Option<(u32, u32)>) -> QpSpec {
    QpSpec {
        port: 1,
        sq_txbbs: if rq.is_some() { 1 } else { 64 },
        rq,
        cqn_send: cqn,
        cqn_recv: cqn,
        qpn: None,
        rss: None,
    }
}

#[test]
fn qp_transitions_go_in_order_and_a_cq_in_use_stays() {
    let (m, mut hca) = hca();
    let (cq, _poll) = hca.create_cq(64, None).unwrap();
    let qp = hca.create_qp(spec(cq.cqn, None)).unwrap();
    assert_eq!(m.qp_state(qp.qpn), Some(p::RTS));
    let mut again = QpModify::zeroed();
    again.ctx = hca.qp_context(&qp, &spec(cq.cqn, None));
    let r = hca.modify_qp(op::RST2INIT_QP, qp.qpn, Some((&again, None)));
    assert_eq!(
        status_of(r),
        status::BAD_QP_STATE,
        "RST2INIT of a QP in RTS"
    );
    let r = hca.destroy_cq(cq.clone());
    assert_eq!(
        status_of(r),
        status::BAD_RES_STATE,
        "HW2SW_CQ under a live QP"
    );
    let v = m.violations();
    assert_eq!(v.len(), 2, "{v:?}");
    m.clear_violations();
    let qpn = qp.qpn;
    hca.destroy_qp(qp);
    assert_eq!(m.qp_state(qpn), None);
    // The CQ stayed the device's; with its QP reset it can go.
    hca.destroy_cq(cq).unwrap();
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

#[test]
fn a_cq_smaller_than_its_queue_overruns_into_a_cq_error_event() {
    let (m, mut hca) = hca();
    hca.init_port(1, 1500).unwrap();
    let pool = Mempool::new(&MempoolConfig::new("mlx4-overrun", 512)).unwrap();
    hca.function().domain().register_pool(&pool).unwrap();
    let (cq, poll) = hca.create_cq(64, None).unwrap();
    let qp = hca.create_qp(spec(cq.cqn, Some((256, 16)))).unwrap();
    hca.attach_mac(1, PORT_MAC, qp.qpn).unwrap();
    let mut ring = rx_ring(&hca, &qp, poll, &pool);
    ring.fill().unwrap();
    let f = {
        let mut f = vec![0u8; 64];
        f[..6].copy_from_slice(&PORT_MAC);
        f
    };
    let outcomes: Vec<RxOutcome> = (0..70).map(|_| m.inject(1, &f)).collect();
    assert!(outcomes[..64].iter().all(|o| *o == RxOutcome::Delivered(1)));
    assert_eq!(m.stats().cq_overruns, 1);
    let ev = hca.poll_events().unwrap();
    assert!(
        ev.contains(&Event::CqError {
            cqn: cq.cqn,
            syndrome: c::ERR_OVERRUN
        }),
        "{ev:?}"
    );
    drop(ring);
    hca.detach_mac(1, PORT_MAC, qp.qpn).unwrap();
    hca.destroy_qp(qp);
    hca.destroy_cq(cq).unwrap();
    hca.close_port(1).unwrap();
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

fn rx_ring(hca: &Hca, qp: &Qp, cq: CqPoll, pool: &Mempool) -> crate::txrx::RxRing {
    crate::txrx::RxRing {
        irq: None,
        live: Arc::new(crossbeam_utils::CachePadded::new(AtomicBool::new(true))),
        gate: Arc::new(crossbeam_utils::CachePadded::new(AtomicBool::new(true))),
        wqes: RingMem::new(qp.buf.clone(), qp.rq_off, 256).unwrap(),
        db: qp.db.clone(),
        n: 256,
        cq,
        slots: Slots::new(256),
        pool: pool.clone(),
        lkey: hca.lkey(),
        cons: 0,
        prod: 0,
        stamp: rpmd_pmd::port::RxStamp::new(0, &Default::default()),
        stats: Default::default(),
        graveyard: Default::default(),
        refill: Pkts::new(),
        rss: false,
    }
}

#[test]
fn a_send_naming_a_key_no_mr_has_fails_and_the_qp_goes_to_err() {
    let (m, mut hca) = hca();
    hca.init_port(1, 1500).unwrap();
    let pool = Mempool::new(&MempoolConfig::new("mlx4-badkey", 512)).unwrap();
    hca.function().domain().register_pool(&pool).unwrap();
    let (cq, poll) = hca.create_cq(64, None).unwrap();
    let qp = hca.create_qp(spec(cq.cqn, None)).unwrap();
    let mut ring = TxRing {
        live: Arc::new(crossbeam_utils::CachePadded::new(AtomicBool::new(true))),
        gate: Arc::new(crossbeam_utils::CachePadded::new(AtomicBool::new(true))),
        qpn: qp.qpn,
        sq: RingMem::new(qp.buf.clone(), qp.sq_off, 64).unwrap(),
        txbbs: 64,
        cq: poll,
        uar: hca.function().bar(2).unwrap(),
        lkey: hca.lkey() ^ 0x100,
        prod: 0,
        cons: 0,
        wqe_prod: 0,
        wqe_cons: 0,
        slots: Slots::new(64),
        sizes: vec![0; 64],
        stats: Default::default(),
        graveyard: Default::default(),
        pool: pool.clone(),
        done: Pkts::new(),
    };
    let mut pkts = Pkts::new();
    let mut mb = pool.get().unwrap();
    mb.append(60).unwrap().fill(7);
    pkts.push(mb).unwrap();
    assert_eq!(ring.tx_burst(&mut pkts), 1);
    assert!(m.take_sent(1).is_empty());
    assert_eq!(m.qp_state(qp.qpn), Some(p::ERR));
    assert_eq!(ring.in_flight(), 0, "the error completion freed it");
    assert_eq!(ring.stats.errors.get(), 1);
    let v = m.violations();
    assert!(v.len() == 1 && v[0].contains("no MR covers it"), "{v:?}");
    drop(ring);
    assert_eq!(pool.available(), pool.size());
    hca.destroy_qp(qp);
    hca.destroy_cq(cq).unwrap();
}

#[test]
fn the_multicast_filter_drops_groups_it_does_not_list_while_on() {
    let (m, mut hca) = hca();
    hca.init_port(1, 1500).unwrap();
    let pool = Mempool::new(&MempoolConfig::new("mlx4-mcfltr", 512)).unwrap();
    hca.function().domain().register_pool(&pool).unwrap();
    let (cq, poll) = hca.create_cq(256, None).unwrap();
    let qp = hca.create_qp(spec(cq.cqn, Some((256, 16)))).unwrap();
    let group = [0x01, 0x00, 0x5e, 0x00, 0x00, 0x01];
    hca.attach_mac(1, group, qp.qpn).unwrap();
    let mut ring = rx_ring(&hca, &qp, poll, &pool);
    ring.fill().unwrap();
    let mut f = vec![0u8; 64];
    f[..6].copy_from_slice(&group);
    let mut fltr = |op_mod: u8, mac: u64| {
        hca.hcr
            .exec(crate::hcr::Cmd {
                opcode: op::SET_MCAST_FLTR,
                op_mod,
                in_mod: 1,
                in_param: mac,
                ..Default::default()
            })
            .unwrap();
    };
    use crate::prm::mcg as g;
    assert_eq!(m.inject(1, &f), RxOutcome::Delivered(1), "no filter");
    fltr(g::FLTR_CONFIG, g::FLTR_CLEAR | 0x0100_5e00_0002);
    fltr(g::FLTR_ENABLE, 0);
    assert_eq!(m.inject(1, &f), RxOutcome::NotSteered, "not listed");
    fltr(g::FLTR_CONFIG, 0x0100_5e00_0001);
    assert_eq!(m.inject(1, &f), RxOutcome::Delivered(1), "listed");
    fltr(g::FLTR_CONFIG, g::FLTR_CLEAR | 0x0100_5e00_0002);
    assert_eq!(m.inject(1, &f), RxOutcome::NotSteered, "cleared");
    fltr(g::FLTR_DISABLE, 0);
    assert_eq!(m.inject(1, &f), RxOutcome::Delivered(1), "filter off");
    drop(ring);
    hca.detach_mac(1, group, qp.qpn).unwrap();
    hca.destroy_qp(qp);
    hca.destroy_cq(cq).unwrap();
    hca.close_port(1).unwrap();
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

/// The model's poison mode catches a driver reading a CQE ahead of its
/// owner bit: with every CQE written as poison first, a poller that reads
/// the body before the owner bit sometimes takes poison for a completion,
/// while the driver's own order (owner bit, acquire, body) never does.
#[test]
fn a_cqe_read_ahead_of_its_owner_bit_reads_poison() {
    use crate::model::EngineTiming;
    use std::time::Duration;
    let cpus = core_affinity::get_core_ids().unwrap_or_default();
    if cpus.len() < 2 {
        rpmd_pmd::testing::missing_capability(
            "a_cqe_read_ahead_of_its_owner_bit_reads_poison",
            "one CPU: the reader and the device cannot overlap",
        );
        return;
    }
    let opts = ModelOptions {
        engine: Some(EngineTiming {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            cpu: None,
            poison: true,
        }),
        ..ModelOptions::default()
    };
    let m = Mlx4Model::new("0000:00:0f.0".parse().unwrap(), opts);
    let func = m.open(&DmaDomain::new()).unwrap();
    let mut hca = Hca::open(func, &Options::default()).unwrap();
    hca.init_port(1, 1500).unwrap();
    let pool = Mempool::new(&MempoolConfig::new("mlx4-careless", 1024)).unwrap();
    hca.function().domain().register_pool(&pool).unwrap();
    let (cq, poll) = hca.create_cq(256, None).unwrap();
    let qp = hca.create_qp(spec(cq.cqn, Some((256, 16)))).unwrap();
    hca.attach_mac(1, PORT_MAC, qp.qpn).unwrap();
    let mut ring = rx_ring(&hca, &qp, poll, &pool);
    ring.fill().unwrap();
    let mut f = vec![0u8; 64];
    f[..6].copy_from_slice(&PORT_MAC);
    let frames = 200u32;
    // The device (this thread) on one CPU, the careless reader on the other.
    core_affinity::set_for_current(cpus[0]);
    let reader_cpu = cpus[1];
    let reader = std::thread::spawn(move || {
        core_affinity::set_for_current(reader_cpu);
        let mut poisoned = 0;
        for _ in 0..frames {
            let t0 = std::time::Instant::now();
            let (lo, _) = loop {
                if let Some(c) = ring.cq.careless_next() {
                    break c;
                }
                assert!(t0.elapsed() < Duration::from_secs(5), "no CQE");
            };
            // byte_cnt is the low half of the be64 at 0x10: the frame's 64
            // bytes, or poison.
            if u64::from_be(lo) as u32 != 64 {
                poisoned += 1;
            }
        }
        (ring, poisoned)
    });
    for _ in 0..frames {
        assert_eq!(m.inject(1, &f), RxOutcome::Delivered(1));
        std::thread::sleep(Duration::from_micros(20));
    }
    let (ring, poisoned) = reader.join().unwrap();
    assert!(poisoned > 0, "reading ahead of the owner bit went unseen");
    eprintln!("{poisoned} of {frames} completions read ahead were poison");
    drop(ring);
    hca.detach_mac(1, PORT_MAC, qp.qpn).unwrap();
    hca.destroy_qp(qp);
    hca.destroy_cq(cq).unwrap();
    hca.close_port(1).unwrap();
}
