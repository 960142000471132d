//! Faults on the data path of the ConnectX-3 port, injected through the
//! model: a command failing at each step of a start, a QP forced to ERR,
//! frames too big for their buffers, mbuf chains, several send queues.
//! Every case ends with typed errors or counted drops, no panic, no
//! mbuf lost, and a port that works again after a restart.
use rpmd_mlx4::ethdev::open_port;
use rpmd_mlx4::model::{Mlx4Model, ModelOptions, RxOutcome, PORT_MAC};
use rpmd_mlx4::prm::{op, status};
use rpmd_mlx4::{Hca, Options};
use rpmd_pmd::port::Port;
use rpmd_pmd::{DmaDomain, Mbuf, Mempool, MempoolConfig, Pkts, PortConfig, Queues};
use std::sync::{Arc, Mutex};

struct Rig {
    model: Arc<Mlx4Model>,
    port: Box<dyn Port>,
    pool: Mempool,
}

fn rig(name: &str, opts: ModelOptions) -> Rig {
    rig_desc(name, opts, 128)
}

/// A rig whose receive ring holds `rx_desc` buffers.
fn rig_desc(name: &str, opts: ModelOptions, rx_desc: u16) -> Rig {
    let model = Mlx4Model::new("0000:00:0d.0".parse().unwrap(), opts);
    let func = model.open(&DmaDomain::new()).unwrap();
    let hca = Hca::open(func, &Options::default()).unwrap();
    let card = Arc::new(Mutex::new(hca));
    let mut port: Box<dyn Port> = Box::new(open_port(name, card, 1, 0).unwrap());
    let pool = Mempool::new(&MempoolConfig::new(name, 1024)).unwrap();
    let conf = PortConfig {
        rx_desc,
        tx_desc: 128,
        tx_queues: 4,
        ..PortConfig::with_pool(&pool)
    };
    port.configure(&conf).unwrap();
    Rig { model, port, pool }
}

fn frame(len: usize, seq: u8) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|i| (i as u8) ^ seq).collect();
    f[..6].copy_from_slice(&PORT_MAC);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f
}

fn mbuf(pool: &Mempool, data: &[u8]) -> Mbuf {
    let mut m = pool.get().unwrap();
    m.append(data.len()).unwrap().copy_from_slice(data);
    m
}

/// The end of a case: the port dropped, every mbuf home, nothing mapped,
/// and (after a start) no violation.
fn end(r: Rig, q: Option<Queues>) {
    if q.is_some() {
        assert!(
            r.model.violations().is_empty(),
            "{:?}",
            r.model.violations()
        );
    }
    drop(q);
    let Rig { model, port, pool } = r;
    drop(port);
    assert_eq!(pool.available(), pool.size(), "every mbuf back in its pool");
    assert_eq!(model.mapped_regions(), 0, "nothing left mapped");
}

#[test]
fn a_command_failing_at_each_start_step_leaves_nothing_and_names_itself() {
    for opcode in [
        op::SW2HW_CQ,
        op::RST2INIT_QP,
        op::INIT2RTR_QP,
        op::RTR2RTS_QP,
        op::MGID_HASH,
        op::WRITE_MCG,
        op::INIT_PORT,
    ] {
        let opts = ModelOptions {
            fail: Some((opcode, status::BAD_RESOURCE)),
            ..ModelOptions::default()
        };
        let mut r = rig("mlx4-fault-start", opts);
        let Err(e) = r.port.start() else {
            panic!("start with {} failing succeeded", op::name(opcode))
        };
        let e = e.to_string();
        assert!(
            e.contains(op::name(opcode)) && e.contains("bad resource"),
            "{e}"
        );
        assert!(
            r.model.qps().is_empty(),
            "{}: QPs left: {:?}",
            op::name(opcode),
            r.model.qps()
        );
        assert!(!r.port.link().up);
        assert_eq!(r.pool.available(), r.pool.size(), "{}", op::name(opcode));
        end(r, None);
    }
}

#[test]
fn every_error_status_is_a_typed_error_naming_it_and_leaves_nothing() {
    let all = [
        0x01u8, 0x02, 0x03, 0x04, 0x05, 0x06, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x10, 0x20, 0x21, 0x22,
        0x30, 0x40, 0x50, 0x7f,
    ];
    for st in all {
        let opts = ModelOptions {
            fail: Some((op::SW2HW_CQ, st)),
            ..ModelOptions::default()
        };
        let mut r = rig("mlx4-fault-status", opts);
        let Err(e) = r.port.start() else {
            panic!("status {st:#x}: start succeeded")
        };
        let e = e.to_string();
        let name = status::name(st);
        assert!(e.contains(&format!("status {st:#04x} ({name})")), "{e}");
        assert!(
            r.model.qps().is_empty() && r.model.queues().0.is_empty(),
            "{name}: objects left"
        );
        end(r, None);
    }
}

#[test]
fn a_qp_forced_to_err_flushes_its_sends_and_a_restart_recovers() {
    let mut r = rig("mlx4-fault-err", ModelOptions::default());
    let mut q = r.port.start().unwrap();
    let qps = r.model.qps();
    // Every QP but the receive one (the first made) sends.
    let tx_qpn = qps[1];
    assert!(r.model.force_qp_error(tx_qpn));
    let mut pkts = Pkts::new();
    for k in 0..8 {
        pkts.push(mbuf(&r.pool, &frame(64, k))).unwrap();
    }
    assert_eq!(
        q.tx_burst(0, &mut pkts),
        8,
        "posted; the device flushes them"
    );
    assert!(r.model.take_sent(1).is_empty(), "nothing left the port");
    // The flushed WQEs come back on the next burst: every mbuf returns.
    let mut none = Pkts::new();
    q.tx_burst(0, &mut none);
    assert_eq!(
        r.pool.available(),
        r.pool.size() - 128,
        "only the receive ring's mbufs are out"
    );
    assert_eq!(r.port.stats().oerrors, 8, "each flushed send counted");
    // A receive QP in ERR takes nothing.
    assert!(r.model.force_qp_error(qps[0]));
    assert_eq!(r.model.inject(1, &frame(64, 1)), RxOutcome::NoBuffer);
    drop(q);
    r.port.stop().unwrap();
    let mut q = r.port.start().unwrap();
    assert_eq!(r.model.inject(1, &frame(64, 2)), RxOutcome::Delivered(1));
    let mut got = Pkts::new();
    assert_eq!(q.rx_burst(0, &mut got, 32), 1);
    assert_eq!(got[0].data(), &frame(64, 2)[..]);
    drop(got);
    end(r, Some(q));
}

#[test]
fn a_frame_over_its_buffer_is_an_error_completion_and_the_buffer_is_reused() {
    let mut r = rig("mlx4-fault-big", ModelOptions::default());
    r.port.set_mtu(9000).unwrap();
    let mut q = r.port.start().unwrap();
    // The port takes 9000-byte frames, but its mbufs hold about 2 KiB.
    let big = frame(4000, 5);
    assert_eq!(r.model.inject(1, &big), RxOutcome::Delivered(1));
    let mut got = Pkts::new();
    assert_eq!(q.rx_burst(0, &mut got, 32), 0, "dropped");
    assert_eq!(r.port.stats().ierrors, 1);
    assert_eq!(r.model.stats().error_cqes, 1);
    for k in 0..300 {
        assert_eq!(
            r.model.inject(1, &frame(100, k as u8)),
            RxOutcome::Delivered(1),
            "{k}"
        );
        assert_eq!(q.rx_burst(0, &mut got, 32), 1);
        got.clear();
    }
    end(r, Some(q));
}

#[test]
fn chains_and_several_send_queues_go_out_whole_and_in_order() {
    let mut r = rig("mlx4-fault-chain", ModelOptions::default());
    let mut q = r.port.start().unwrap();
    let mut want = Vec::new();
    for txq in 0..4u16 {
        let mut pkts = Pkts::new();
        for k in 0..6u8 {
            let f = frame(60 + 100 * k as usize, txq as u8 * 16 + k);
            // k segments of roughly equal size (1 to 6).
            let parts = (k as usize % 6) + 1;
            let step = f.len().div_ceil(parts);
            let mut chunks = f.chunks(step);
            let mut head = mbuf(&r.pool, chunks.next().unwrap());
            for c in chunks {
                head.chain(mbuf(&r.pool, c)).unwrap();
            }
            pkts.push(head).unwrap();
            want.push(f);
        }
        assert_eq!(q.tx_burst(txq, &mut pkts), 6);
    }
    assert_eq!(r.model.take_sent(1), want);
    // Thousands more through one queue: the ring wraps many times and
    // its completions free every mbuf.
    for round in 0..200u32 {
        let mut pkts = Pkts::new();
        for k in 0..32 {
            pkts.push(mbuf(&r.pool, &frame(64, (round + k) as u8)))
                .unwrap();
        }
        let mut sent = 0;
        while !pkts.is_empty() {
            sent += q.tx_burst(1, &mut pkts);
        }
        assert_eq!(sent, 32);
        assert_eq!(r.model.take_sent(1).len(), 32);
    }
    assert!(q.tx_burst(1, &mut Pkts::new()) == 0);
    end(r, Some(q));
}

#[test]
fn a_ring_starved_of_buffers_refills_once_the_pool_has_them_again() {
    // More descriptors than a burst holds: a refill of all the free
    // slots at once could never be had.
    let mut r = rig_desc("mlx4-fault-starve", ModelOptions::default(), 512);
    let mut q = r.port.start().unwrap();
    // Frames received and held by the application: the ring cannot
    // refill their slots while the pool is empty.
    let mut held = Vec::new();
    while let Ok(m) = r.pool.get() {
        held.push(m);
    }
    let mut kept = Pkts::new();
    let mut got = 0;
    for k in 0..512u32 {
        assert_eq!(
            r.model.inject(1, &frame(64, k as u8)),
            RxOutcome::Delivered(1),
            "{k}"
        );
        let mut b = Pkts::new();
        got += q.rx_burst(0, &mut b, 32);
        while let Some(m) = b.pop() {
            held.push(m);
        }
    }
    assert_eq!(got, 512, "every posted WQE delivered");
    assert_eq!(
        r.model.inject(1, &frame(64, 0)),
        RxOutcome::NoBuffer,
        "the ring is empty"
    );
    assert!(r.port.stats().rx_nombuf > 0);
    // The application lets go: the next bursts refill the whole ring.
    drop(held);
    for _ in 0..8 {
        q.rx_burst(0, &mut kept, 32);
    }
    for k in 0..512u32 {
        assert_eq!(
            r.model.inject(1, &frame(64, k as u8)),
            RxOutcome::Delivered(1),
            "after: {k}"
        );
    }
    let mut n = 0;
    while n < 512 {
        let mut b = Pkts::new();
        let m = q.rx_burst(0, &mut b, 32);
        assert!(m > 0, "after {n}");
        n += m;
    }
    drop(kept);
    end(r, Some(q));
}
