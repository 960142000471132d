//! The vhost-user backend (`vhost-user:`) against frontends: rpmd's own
//! virtio-user port here (both ends ours, in every mode both offer), DPDK
//! testpmd's `net_virtio_user` in `backend_testpmd.rs`.
mod common;

use common::frame;
use rpmd_pmd::port::Pkts;
use rpmd_pmd::{Mempool, MempoolConfig, Port, PortConfig, Queues, Registry};
use std::time::{Duration, Instant};

struct Pair {
    back: Box<dyn Port>,
    bq: Queues,
    front: Box<dyn Port>,
    fq: Queues,
    pool: Mempool,
    sock: String,
}

/// A backend listening on a fresh socket, and a virtio-user port with
/// `fopts` attached to it; both started with `queues` pairs.
fn pair(tag: &str, bopts: &str, fopts: &str, queues: u16) -> Pair {
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let sock = format!("/tmp/rpmd-be-{tag}-{}.sock", std::process::id());
    let pool = Mempool::new(&MempoolConfig::new(&format!("be{tag}"), 8192)).unwrap();
    let conf = PortConfig {
        rx_queues: queues,
        tx_queues: queues,
        ..PortConfig::with_pool(&pool)
    };
    let mut back = reg.open(&format!("vhost-user:{sock}{bopts}")).unwrap();
    back.configure(&conf).unwrap();
    let bq = back.start().unwrap();
    let mut front = reg.open(&format!("virtio-user:{sock}{fopts}")).unwrap();
    front.configure(&conf).unwrap();
    let fq = front.start().unwrap();
    let t = Instant::now();
    while !back.link().up {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "backend link stays down"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    Pair {
        back,
        bq,
        front,
        fq,
        pool,
        sock,
    }
}

/// Sends `n` frames of `sizes` from `tx` (queue `q` of one side) and
/// checks each arrives byte for byte at `rx`; the frames come back
/// through `rx`'s tx and are checked at `tx`'s rx too.
fn round_trip(p: &mut Pair, q: u16, n: u32, sizes: &[usize]) {
    let mut sent = 0u32;
    let (mut at_back, mut at_front) = (0u32, 0u32);
    let mut out = Pkts::new();
    let mut inb = Pkts::new();
    let mut echo = Pkts::new();
    let t = Instant::now();
    while at_front < n {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "sent {sent}, backend got {at_back}, frontend got back {at_front}; backend xstats {:?}; frontend xstats {:?}",
            nonzero(p.back.as_ref()),
            nonzero(p.front.as_ref())
        );
        // At most 128 in flight, inside every ring.
        while sent < n && out.len() < 32 && sent < at_front + 128 {
            let len = sizes[sent as usize % sizes.len()];
            let mut m = p.pool.get().unwrap();
            let f = frame(sent, len);
            if len <= m.tailroom() {
                m.append(len).unwrap().copy_from_slice(&f);
            } else {
                // Larger than one mbuf: a chain of segments.
                let k = m.tailroom();
                m.append(k).unwrap().copy_from_slice(&f[..k]);
                for c in f[k..].chunks(2048) {
                    let mut s = p.pool.get().unwrap();
                    s.append(c.len()).unwrap().copy_from_slice(c);
                    m.chain(s).map_err(drop).unwrap();
                }
            }
            out.push(m).unwrap();
            sent += 1;
        }
        p.fq.tx_burst(q, &mut out);
        sent -= out.len() as u32;
        out.clear();
        let before = echo.len();
        p.bq.rx_burst(q, &mut echo, 32);
        for m in echo[before..].iter() {
            check(m, sizes);
            at_back += 1;
        }
        // Echo: what the guest's RX has no room for waits here.
        p.bq.tx_burst(q, &mut echo);
        p.fq.rx_burst(q, &mut inb, 32);
        for m in inb.iter() {
            check(m, sizes);
            at_front += 1;
        }
        inb.clear();
    }
}

fn check(m: &rpmd_pmd::Mbuf, sizes: &[usize]) {
    let d: Vec<u8> = m.segments().flatten().copied().collect();
    let tag = u32::from_le_bytes(d[14..18].try_into().unwrap());
    assert_eq!(
        d.len(),
        sizes[tag as usize % sizes.len()],
        "frame {tag} length"
    );
    assert!(d == frame(tag, d.len()), "frame {tag} changed on the way");
}

fn nonzero(p: &dyn Port) -> Vec<String> {
    p.xstats()
        .iter()
        .filter(|x| x.value != 0)
        .map(|x| format!("{}={}", x.name, x.value))
        .collect()
}

fn xstat(p: &dyn Port, name: &str) -> u64 {
    p.xstats()
        .into_iter()
        .find(|x| x.name == name)
        .unwrap_or_else(|| panic!("no xstat {name}"))
        .value
}

fn finish(p: Pair) {
    let Pair {
        mut back,
        bq,
        mut front,
        fq,
        pool,
        sock,
    } = p;
    front.stop().unwrap();
    drop(fq);
    drop(front);
    back.stop().unwrap();
    drop(bq);
    drop(back);
    assert_eq!(pool.available(), 8192, "every mbuf back in the pool");
    assert!(!std::path::Path::new(&sock).exists(), "socket removed");
}

const SIZES: [usize; 5] = [64, 1518, 60, 512, 1000];

#[test]
fn the_backlog_is_counted_without_taking_it() {
    for (tag, fopts, counted) in [("pend", "", true), ("pendpk", ",packed_vq=1", false)] {
        let mut p = pair(tag, ",busyloop_us=0", fopts, 1);
        let rx = p.bq.take_rx(0).unwrap();
        assert_eq!(
            rx.rx_pending(),
            counted.then_some(0),
            "{tag}: nothing sent yet"
        );
        let mut out = Pkts::new();
        for i in 0..5 {
            let mut m = p.pool.get().unwrap();
            m.append(64).unwrap().copy_from_slice(&frame(i, 64));
            out.push(m).unwrap();
        }
        assert_eq!(p.fq.tx_burst(0, &mut out), 5);
        let t = Instant::now();
        while counted && rx.rx_pending() != Some(5) {
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "{tag}: pending {:?}",
                rx.rx_pending()
            );
            std::thread::yield_now();
        }
        let mut rx = rx;
        let mut got = Pkts::new();
        while got.len() < 5 {
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "{tag}: got {}",
                got.len()
            );
            rx.rx_burst(&mut got, 32);
        }
        assert_eq!(rx.rx_pending(), counted.then_some(0), "{tag}: all taken");
        drop(got);
        drop(rx);
        finish(p);
    }
}

#[test]
fn frames_cross_both_ways_byte_for_byte() {
    let mut p = pair("basic", "", "", 1);
    round_trip(&mut p, 0, 2000, &SIZES);
    let f = xstat(p.back.as_ref(), "negotiated_features");
    assert!(f & (1 << 15) != 0, "MRG_RXBUF negotiated: {f:#x}");
    assert!(f & (1 << 29) != 0, "EVENT_IDX negotiated: {f:#x}");
    let (b, fr) = (p.back.stats(), p.front.stats());
    assert_eq!((b.ipackets, b.opackets), (2000, 2000));
    assert_eq!((fr.ipackets, fr.opackets), (2000, 2000));
    assert_eq!(b.ibytes, fr.obytes);
    assert_eq!(b.ierrors + b.oerrors, 0);
    finish(p);
}

#[test]
fn without_mergeable_buffers_or_event_indices() {
    for (tag, b, f) in [
        ("nomrg", ",mrg_rxbuf=0", ""),
        ("noevi", ",event_idx=0", ""),
        ("fnone", "", ",mrg_rxbuf=0,event_idx=0,in_order=0"),
    ] {
        let mut p = pair(tag, b, f, 1);
        round_trip(&mut p, 0, 1000, &SIZES);
        finish(p);
    }
}

#[test]
fn packed_rings_both_ways_in_every_mode() {
    for (tag, b, f) in [
        ("pk", "", ",packed_vq=1"),
        ("pkno", "", ",packed_vq=1,in_order=0,mrg_rxbuf=0"),
        ("pknoevi", ",event_idx=0", ",packed_vq=1"),
    ] {
        let mut p = pair(tag, b, f, 1);
        round_trip(&mut p, 0, 2000, &SIZES);
        let feats = xstat(p.back.as_ref(), "negotiated_features");
        assert!(
            feats & (1 << 34) != 0,
            "{tag}: RING_PACKED negotiated: {feats:#x}"
        );
        finish(p);
    }
}

#[test]
fn packed_jumbo_frames_and_two_pairs() {
    let mut p = pair("pkj", ",mtu=9000,queues=2", ",packed_vq=1,queues=2", 2);
    round_trip(&mut p, 0, 300, &[9000, 64, 4000, 2100]);
    round_trip(&mut p, 1, 300, &SIZES);
    finish(p);
}

#[test]
fn jumbo_frames_span_mergeable_buffers_and_segments() {
    let mut p = pair("jumbo", ",mtu=9000", "", 1);
    round_trip(&mut p, 0, 300, &[9000, 64, 4000, 2100]);
    finish(p);
}

#[test]
fn two_queue_pairs_carry_traffic_each() {
    let mut p = pair("mq", ",queues=2", ",queues=2", 2);
    round_trip(&mut p, 0, 500, &SIZES);
    round_trip(&mut p, 1, 500, &SIZES);
    assert_eq!(p.back.stats().ipackets, 1000);
    finish(p);
}

#[test]
fn the_frontend_reconnects_and_traffic_resumes() {
    let mut p = pair("recon", "", "", 1);
    round_trip(&mut p, 0, 200, &SIZES);
    // A new frontend on the same backend, which keeps its queues.
    let Pair {
        back,
        bq,
        mut front,
        fq,
        pool,
        sock,
    } = p;
    front.stop().unwrap();
    drop(fq);
    drop(front);
    let t = Instant::now();
    while back.link().up {
        assert!(t.elapsed() < Duration::from_secs(5), "link stays up");
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let mut front = reg.open(&format!("virtio-user:{sock}")).unwrap();
    front.configure(&PortConfig::with_pool(&pool)).unwrap();
    let fq = front.start().unwrap();
    let t = Instant::now();
    while !back.link().up {
        assert!(t.elapsed() < Duration::from_secs(5), "link stays down");
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut p = Pair {
        back,
        bq,
        front,
        fq,
        pool,
        sock,
    };
    round_trip(&mut p, 0, 200, &SIZES);
    assert_eq!(xstat(p.back.as_ref(), "connections"), 2);
    finish(p);
}

/// Bad values of the busy-poll and coalescing options are refused with
/// the option named.
#[test]
fn busy_poll_and_coalescing_options_are_checked() {
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let sock = format!("/tmp/rpmd-be-opts-{}.sock", std::process::id());
    for (opts, want) in [
        (",busyloop_us=abc", "busyloop_us"),
        (",busyloop_us=2000000", "busyloop_us"),
        (",rx_poll=2", "rx_poll"),
        (",call_coalesce=5000", "call_coalesce"),
    ] {
        let e = reg
            .open(&format!("vhost-user:{sock}{opts}"))
            .err()
            .unwrap_or_else(|| panic!("{opts} accepted"))
            .to_string();
        assert!(e.contains(want), "{opts}: {e}");
    }
}

/// The rx queues declare `busyloop_us` and `rx_poll` to the run loop,
/// which busy-polls them after they go idle: frames that come within the
/// budget are hits, idle periods longer than it are timeouts, and the
/// lcore then sleeps on the guest's kicks.
#[test]
fn the_run_loop_busy_polls_the_guest_tx_ring() {
    use rpmd_pmd::port::{BusyPoll, RxQueue};
    use rpmd_sched::{LcoreConfig, Runtime, RxTask, SpinPolicy};
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use std::sync::Arc;
    // Without busyloop_us a queue has no policy of its own: the lcore's
    // --poll decides.
    let mut plain = pair("busy-plain", "", "", 1);
    assert_eq!(plain.bq.take_rx(0).unwrap().busy_poll(), None);
    drop(plain);
    let mut p = pair("busy", ",busyloop_us=300,rx_poll=0", "", 1);
    let rx = p.bq.take_rx(0).unwrap();
    assert_eq!(
        rx.busy_poll(),
        Some(BusyPoll {
            budget: Duration::from_micros(300),
            poll_others: false
        })
    );
    let got = Arc::new(AtomicU64::new(0));
    let seen = got.clone();
    let mut pkts = Pkts::new();
    let count = move |rx: &mut dyn RxQueue, quota: usize| {
        let n = rx.rx_burst(&mut pkts, quota.min(32));
        pkts.clear();
        seen.fetch_add(n as u64, Relaxed);
        n
    };
    // The lcore's own policy would sleep at once: the spin is the queue's.
    let cfg = LcoreConfig {
        spin: SpinPolicy::Fixed(Duration::ZERO),
        ..Default::default()
    };
    let mut rt = Runtime::start("0", cfg).unwrap();
    rt.add(0, RxTask::new(rx, count)).unwrap();
    let mut out = Pkts::new();
    // Frames 50 us apart (inside the budget), then pauses of 5 ms.
    let mut sent = 0u64;
    for round in 0..40u32 {
        for k in 0..4u32 {
            let mut m = p.pool.get().unwrap();
            m.append(64)
                .unwrap()
                .copy_from_slice(&frame(round * 4 + k, 64));
            out.push(m).unwrap();
            while p.fq.tx_burst(0, &mut out) == 0 {}
            sent += 1;
            std::thread::sleep(Duration::from_micros(50));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let t = Instant::now();
    while got.load(Relaxed) < sent {
        assert!(t.elapsed() < Duration::from_secs(5), "frames lost");
        std::thread::sleep(Duration::from_millis(1));
    }
    rt.shutdown().unwrap();
    let (hits, timeouts) = (
        xstat(p.back.as_ref(), "rx_q0_busy_poll_hits"),
        xstat(p.back.as_ref(), "rx_q0_busy_poll_timeouts"),
    );
    let kicks = xstat(p.back.as_ref(), "rx_q0_kicks");
    // Each pause outlasts the budget; most frames after the first of a
    // round come within it (a descheduled thread may miss some).
    assert!(
        timeouts >= 20,
        "timeouts {timeouts}, hits {hits}, kicks {kicks}"
    );
    assert!(
        hits >= 20,
        "hits {hits}, timeouts {timeouts}, kicks {kicks}"
    );
    assert!(kicks >= 20, "woken by kicks after the pauses: {kicks}");
    finish(p);
}

/// `call_coalesce=16`: with interrupts asked for on every completion
/// (no event indices), the backend calls once per 16 frames delivered,
/// and a held call goes out when the tx queue is found idle.
#[test]
fn calls_coalesce_and_a_held_call_goes_when_idle() {
    for (coalesce, want) in [(0u64, 64u64), (16, 4)] {
        let opts = format!(",event_idx=0,call_coalesce={coalesce}");
        let mut p = pair(&format!("coal{coalesce}"), &opts, "", 1);
        let mut frx = p.fq.take_rx(0).unwrap();
        frx.set_interrupt(true).unwrap();
        let calls = || xstat(p.back.as_ref(), "tx_q0_calls");
        let before = calls();
        let mut out = Pkts::new();
        for i in 0..64 {
            let mut m = p.pool.get().unwrap();
            m.append(64).unwrap().copy_from_slice(&frame(i, 64));
            out.push(m).unwrap();
            assert_eq!(p.bq.tx_burst(0, &mut out), 1);
        }
        assert_eq!(calls() - before, want, "call_coalesce={coalesce}");
        // Five more: held (coalescing) until the queue is idle.
        for i in 0..5 {
            let mut m = p.pool.get().unwrap();
            m.append(64).unwrap().copy_from_slice(&frame(100 + i, 64));
            out.push(m).unwrap();
            assert_eq!(p.bq.tx_burst(0, &mut out), 1);
        }
        let held = calls() - before;
        let mut btx = p.bq.take_tx(0).unwrap();
        assert_eq!(btx.in_flight(), 0);
        let after = calls() - before;
        if coalesce == 0 {
            assert_eq!((held, after), (69, 69));
        } else {
            assert_eq!((held, after), (4, 5), "the idle round sent the held call");
        }
        let mut pkts = Pkts::new();
        let t = Instant::now();
        while pkts.len() < 69 {
            assert!(t.elapsed() < Duration::from_secs(5));
            frx.rx_burst(&mut pkts, 32);
        }
        pkts.clear();
        drop((frx, btx));
        finish(p);
    }
}

/// Waits up to 5 s for `ev` to be raised with `port`'s link then `up`.
fn wait_link_event(port: &dyn Port, ev: &rpmd_pmd::port::LinkEvents, up: bool, what: &str) {
    let t = Instant::now();
    let mut raised = false;
    while t.elapsed() < Duration::from_secs(5) {
        raised |= ev.wait(Duration::from_millis(50)).unwrap();
        if raised && port.link().up == up {
            return;
        }
    }
    panic!("{what}: raised {raised}, link up {}", port.link().up);
}

/// Link events on both sides of a vhost-user link: the backend's when
/// its frontend comes (and sets its rings up) and goes, virtio-user's
/// when its backend goes away and when a new one is programmed.
#[test]
fn link_events_follow_the_peer_on_both_sides() {
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let sock = format!("/tmp/rpmd-be-lsc-{}.sock", std::process::id());
    let pool = Mempool::new(&MempoolConfig::new("belsc", 4096)).unwrap();
    let conf = PortConfig::with_pool(&pool);
    let open_back = |reg: &Registry| {
        let mut b = reg.open(&format!("vhost-user:{sock}")).unwrap();
        b.configure(&conf).unwrap();
        let q = b.start().unwrap();
        (b, q)
    };
    let (mut back, bq) = open_back(&reg);
    let ev_back = back.link_events().unwrap();
    assert!(!back.link().up);
    while ev_back.wait(Duration::from_millis(50)).unwrap() {}
    let mut front = reg.open(&format!("virtio-user:{sock}")).unwrap();
    front.configure(&conf).unwrap();
    let fq = front.start().unwrap();
    wait_link_event(back.as_ref(), &ev_back, true, "a frontend came");
    let ev_front = front.link_events().unwrap();
    assert!(front.link().up);
    // The backend goes: virtio-user's watch sees it.
    drop(bq);
    drop(back);
    wait_link_event(front.as_ref(), &ev_front, false, "the backend went");
    // A new backend on the same path: reconnected and programmed.
    let (mut back, bq) = open_back(&reg);
    wait_link_event(front.as_ref(), &ev_front, true, "a backend came back");
    let ev_back = back.link_events().unwrap();
    front.stop().unwrap();
    drop(fq);
    drop(front);
    wait_link_event(back.as_ref(), &ev_back, false, "the frontend went");
    drop(bq);
    back.stop().unwrap();
}
