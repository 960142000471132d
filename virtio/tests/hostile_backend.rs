//! The virtio-user port against the project's own hostile vhost-user
//! backend (`tests/hostile`), on split, in-order and packed rings (issue
//! 21): a backend that rewrites descriptor links, moves the used index
//! past what is in flight, or completes out-of-range and duplicate ids.
//! The port either keeps running with the bad entries counted, or stops
//! trusting the backend (link down), drops it and recovers with a new
//! connection; no frame the device did not write is delivered, none
//! twice, and every mbuf is back in its pool at the end.
//!
//! What no driver can detect is not tested: a duplicate naming an id that
//! is in flight again (out of order, the driver may have re-posted it; a
//! packed in-order ring whose last-posted buffer is named reads as one
//! batch completing the whole ring), so the duplicates here are written
//! together with the original (split) and the packed duplicate case is a
//! unit test of the ring (`packed::tests`).
mod hostile;

use hostile::{Hostile, Misbehave, Setup};
use rpmd_pmd::port::{Pkts, Port, Queues};
use rpmd_pmd::{Mempool, MempoolConfig, PortConfig, Registry};
use std::collections::HashSet;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

const POOL: u32 = 2048;

fn open(path: &str, opts: &str) -> (Box<dyn Port>, Queues, Mempool) {
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let mut pc = MempoolConfig::new("hostile", POOL);
    pc.cache_size = 0;
    let pool = Mempool::new(&pc).unwrap();
    let mut p = reg
        .open(&format!("virtio-user:{path},event_idx=0{opts}"))
        .unwrap();
    p.configure(&PortConfig {
        rx_pool: Some(pool.clone()),
        ..PortConfig::default()
    })
    .unwrap();
    let q = p.start().unwrap();
    (p, q, pool)
}

/// Stops the port, then the backend, and checks that every mbuf is back
/// in its pool.
fn close(mut p: Box<dyn Port>, q: Queues, b: Hostile, pool: &Mempool) {
    p.stop().unwrap();
    drop((q, p, b));
    assert_eq!(
        pool.available(),
        POOL as usize,
        "every mbuf back in its pool"
    );
}

fn xstat(p: &dyn Port, name: &str) -> u64 {
    p.xstats()
        .iter()
        .find(|x| x.name == name)
        .map(|x| x.value)
        .unwrap_or_else(|| panic!("no xstat {name}"))
}

/// What the application saw.
#[derive(Default)]
struct Seen {
    seqs: HashSet<u64>,
    link_went_down: bool,
}

/// Polls RX (and keeps TX empty) until `done` says so or 20 s pass;
/// every frame must carry a sequence number the device wrote, once.
fn poll(p: &dyn Port, q: &mut Queues, b: &Hostile, seen: &mut Seen, done: impl Fn(&Seen) -> bool) {
    let t0 = Instant::now();
    let mut pkts = Pkts::new();
    while !done(seen) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "timed out: {} frames seen, {} written, misbehaved {}, link {} (went down: {}), connections {}, xstats {:?}",
            seen.seqs.len(),
            b.counts.rx_written.load(Relaxed),
            b.counts.misbehaved.load(Relaxed),
            p.link().up,
            seen.link_went_down,
            b.counts.connections.load(Relaxed),
            p.xstats().iter().filter(|x| x.value != 0).map(|x| format!("{}={}", x.name, x.value)).collect::<Vec<_>>()
        );
        seen.link_went_down |= !p.link().up;
        // Every queue is polled, as a run loop does: a held queue starts
        // its ring over only in its own burst.
        q.tx_burst(0, &mut Pkts::new());
        // A whole ring's worth at once: a duplicate completion is written
        // in the same publish as the original, and is detectable only
        // while that id is not posted again, so no refill may come
        // between the two entries.
        q.rx_burst(0, &mut pkts, 256);
        while let Some(m) = pkts.pop() {
            let d = m.data();
            assert_eq!(d.len(), 60, "only frames the device wrote");
            let seq = u64::from_le_bytes(d[..8].try_into().unwrap());
            assert!(
                seq < b.counts.rx_written.load(Relaxed),
                "frame {seq} was never written"
            );
            assert!(seen.seqs.insert(seq), "frame {seq} delivered twice");
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// Runs `act` after 300 good frames; `recovers`: the port must drop the
/// backend and come back on a new connection, else keep running.
fn rx_case(tag: &str, setup: Setup, opts: &str, recovers: bool) {
    let path = format!("/tmp/rpmd-hostile-{tag}-{}.sock", std::process::id());
    let b = Hostile::start(&path, setup);
    let (p, mut q, pool) = open(&path, opts);
    let mut seen = Seen::default();
    let written = |b: &Hostile| b.counts.rx_written.load(Relaxed);
    poll(p.as_ref(), &mut q, &b, &mut seen, |_| {
        b.counts.misbehaved.load(Relaxed) > 0
    });
    if recovers {
        poll(p.as_ref(), &mut q, &b, &mut seen, |s| {
            s.link_went_down && b.counts.connections.load(Relaxed) == 2 && p.link().up
        });
        // Frames flow again on the new connection.
        let w = written(&b);
        poll(p.as_ref(), &mut q, &b, &mut seen, |s| {
            s.seqs.iter().filter(|&&k| k >= w).count() >= 300
        });
        assert_eq!(xstat(p.as_ref(), "reconnects"), 1);
    } else {
        poll(p.as_ref(), &mut q, &b, &mut seen, |s| {
            s.seqs.len() as u64 >= 1000 && s.seqs.len() as u64 == written(&b)
        });
        assert!(!seen.link_went_down, "kept running");
        assert_eq!(b.counts.connections.load(Relaxed), 1);
    }
    assert!(
        xstat(p.as_ref(), "rx_q0_device_errors") >= 1,
        "the bad entry is counted"
    );
    close(p, q, b, &pool);
}

fn setup(packed: bool, in_order: bool, act: Misbehave) -> Setup {
    Setup {
        packed,
        in_order,
        act,
        after: 300,
        max_pairs: None,
        mem_slots: false,
        reply_ack: false,
        mrg: false,
    }
}

/// Issue 21: where the backend offers CONFIG, its max_virtqueue_pairs is
/// its real queue count (GET_QUEUE_NUM says 128, as DPDK's does): more
/// pairs than it has is a clear error at open.
#[test]
fn more_queue_pairs_than_the_backend_config_allows_is_an_error() {
    let path = format!("/tmp/rpmd-hostile-mq-{}.sock", std::process::id());
    let b = Hostile::start(
        &path,
        Setup {
            max_pairs: Some(1),
            ..setup(false, false, Misbehave::Nothing)
        },
    );
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let e = reg
        .open(&format!("virtio-user:{path},queues=2"))
        .err()
        .expect("queues=2 refused")
        .to_string();
    assert!(
        e.contains("allows 1 queue pairs (max_virtqueue_pairs)"),
        "{e}"
    );
    drop(b);
}

#[test]
fn split_out_of_range_id_is_counted_and_skipped() {
    rx_case(
        "sor",
        setup(false, false, Misbehave::OutOfRangeId),
        ",in_order=0",
        false,
    );
}

#[test]
fn split_duplicate_id_is_counted_and_skipped() {
    rx_case(
        "sdu",
        setup(false, false, Misbehave::DuplicateId),
        ",in_order=0",
        false,
    );
}

#[test]
fn split_used_index_jump_drops_the_backend_and_recovers() {
    rx_case(
        "sju",
        setup(false, false, Misbehave::JumpUsedIndex),
        ",in_order=0",
        true,
    );
}

#[test]
fn in_order_out_of_range_id_drops_the_backend_and_recovers() {
    rx_case("ior", setup(false, true, Misbehave::OutOfRangeId), "", true);
}

#[test]
fn in_order_duplicate_id_drops_the_backend_and_recovers() {
    rx_case("idu", setup(false, true, Misbehave::DuplicateId), "", true);
}

#[test]
fn in_order_used_index_jump_drops_the_backend_and_recovers() {
    rx_case(
        "iju",
        setup(false, true, Misbehave::JumpUsedIndex),
        "",
        true,
    );
}

#[test]
fn packed_out_of_range_id_drops_the_backend_and_recovers() {
    rx_case(
        "por",
        setup(true, false, Misbehave::OutOfRangeId),
        ",packed_vq=1,in_order=0",
        true,
    );
}

#[test]
fn packed_in_order_out_of_range_id_drops_the_backend_and_recovers() {
    rx_case(
        "pio",
        setup(true, true, Misbehave::OutOfRangeId),
        ",packed_vq=1",
        true,
    );
}

/// Used lengths past the buffers' ends (eight in a row: whole lines of
/// the packed ring's batched receive, and one by one), on every ring
/// layout and order: each frame is dropped and counted as the device's
/// error, the port keeps running on the same connection, and every frame
/// the device wrote whole arrives.
#[test]
fn overlong_used_lengths_are_dropped_and_counted() {
    on_every_layout("ol", Misbehave::OverlongLength);
}

/// `rx_case` for `act` on split and packed rings, in order and not,
/// with and without mergeable buffers (tags `?` + `tag`); the port
/// keeps running.
fn on_every_layout(tag: &str, act: Misbehave) {
    for (t, packed, in_order, mrg, opts) in [
        ("s", false, false, false, ",in_order=0"),
        ("i", false, true, false, ""),
        ("p", true, false, false, ",packed_vq=1,in_order=0"),
        ("q", true, true, false, ",packed_vq=1"),
        ("m", true, true, true, ",packed_vq=1"),
        ("n", false, true, true, ""),
    ] {
        let s = Setup {
            mrg,
            ..setup(packed, in_order, act)
        };
        rx_case(&format!("{t}{tag}"), s, opts, false);
    }
}

/// Used lengths too short for a net header and an Ethernet header (as
/// Linux's virtio_net, which counts them as length errors): each frame
/// is dropped and counted as the device's error on every ring layout and
/// order, the port keeps running, and every whole frame arrives.
#[test]
fn short_used_lengths_are_dropped_and_counted() {
    on_every_layout("sh", Misbehave::ShortLength);
}

/// A used descriptor naming a buffer already handed back, on the packed
/// ring's batched (in-order) path and its one-by-one path: the queue
/// stops, the entry is counted, and the port reconnects.
#[test]
fn packed_duplicate_id_drops_the_backend_and_recovers() {
    for (tag, in_order, opts) in [
        ("pdu", false, ",packed_vq=1,in_order=0"),
        ("pidu", true, ",packed_vq=1"),
    ] {
        rx_case(
            tag,
            setup(true, in_order, Misbehave::DuplicateId),
            opts,
            true,
        );
    }
}

/// TX chains whose NEXT links the backend rewrites into loops: the port
/// keeps sending, every chain counted once, and the pool is whole at the
/// end (the free stack used to grow past the ring and the debug build
/// panicked in `in_flight`).
#[test]
fn rewritten_tx_chain_links_do_not_corrupt_the_port() {
    let path = format!("/tmp/rpmd-hostile-lnk-{}.sock", std::process::id());
    let b = Hostile::start(&path, setup(false, false, Misbehave::RewriteLinks));
    let (p, mut q, pool) = open(&path, ",in_order=0");
    let t0 = Instant::now();
    let mut sent = 0;
    let mut rx = Pkts::new();
    while sent < 3000 {
        assert!(t0.elapsed() < Duration::from_secs(20), "{sent} sent");
        let mut out = Pkts::new();
        for _ in 0..8 {
            let mut m = pool.get().unwrap();
            m.append(60).unwrap();
            for _ in 0..2 {
                let mut s = pool.get().unwrap();
                s.append(100).unwrap();
                m.chain(s).unwrap();
            }
            out.push(m).unwrap();
        }
        sent += q.tx_burst(0, &mut out);
        drop(out);
        assert!(q.tx[0].in_flight() <= 256);
        q.rx_burst(0, &mut rx, 32);
        rx.clear();
    }
    assert!(b.counts.misbehaved.load(Relaxed) > 0);
    assert!(p.link().up);
    close(p, q, b, &pool);
}

/// Issue 21: a request the port cannot carry out is an error, never a
/// silent Ok: a vhost-user backend delivers every frame, so promiscuous
/// and all-multicast cannot be turned off and there is no MAC filter.
#[test]
fn receive_modes_the_backend_cannot_apply_are_errors() {
    let path = format!("/tmp/rpmd-hostile-modes-{}.sock", std::process::id());
    let b = Hostile::start(&path, setup(false, false, Misbehave::Nothing));
    let (mut p, q, pool) = open(&path, "");
    for (what, r) in [
        ("promiscuous off", p.set_promiscuous(false)),
        ("all-multicast off", p.set_allmulticast(false)),
    ] {
        let e = r.expect_err(what);
        let cause =
            std::error::Error::source(&e).and_then(|s| s.downcast_ref::<rpmd_virtio::Error>());
        assert!(
            matches!(cause, Some(rpmd_virtio::Error::NoReceiveFilter(_))),
            "{what}: a variant to match: {e:?}"
        );
        assert!(e.to_string().contains("filter"), "{what}: {e}");
    }
    let e = p
        .set_mac_filter(&[], &[])
        .expect_err("MAC filter")
        .to_string();
    assert!(e.contains("filter"), "MAC filter: {e}");
    assert!(p.set_promiscuous(true).is_ok() && p.set_allmulticast(true).is_ok());
    assert!(p.promiscuous() && p.allmulticast());
    close(p, q, b, &pool);
}

/// An uncached pool of `n` mbufs.
fn pool(name: &str, n: u32) -> Mempool {
    let mut pc = MempoolConfig::new(name, n);
    pc.cache_size = 0;
    Mempool::new(&pc).unwrap()
}

/// Sends `n` frames built in `pool`, retrying what TX does not take, and
/// waits until the backend completed them (5 s at most).
fn send_from(q: &mut Queues, pool: &Mempool, b: &Hostile, n: u64) {
    let want = b.counts.tx_done.load(Relaxed) + n;
    let mut out = Pkts::new();
    let mut left = n;
    let t0 = Instant::now();
    while b.counts.tx_done.load(Relaxed) < want {
        assert!(t0.elapsed() < Duration::from_secs(5), "TX stalled");
        while left > 0 && out.len() < 32 {
            let mut m = pool.get().unwrap();
            m.append(60).unwrap().fill(0xab);
            out.push(m).unwrap();
            left -= 1;
        }
        q.tx_burst(0, &mut out);
        left += out.len() as u64;
        out.clear();
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// Issue 20: the backend's memory table holds every pool registered in
/// the registry's domain when the port starts, so frames of a pool other
/// than the port's own go out; a pool registered while the port runs is
/// refused with an error saying what to do (this driver sends no
/// ADD_MEM_REG), and is covered after a restart.
#[test]
fn the_memory_table_covers_the_domain_and_late_pools_are_refused() {
    let path = format!("/tmp/rpmd-hostile-late-{}.sock", std::process::id());
    let b = Hostile::start(&path, setup(false, false, Misbehave::Nothing));
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let (rx, early, late) = (
        pool("late-rx", 256),
        pool("late-early", 256),
        pool("late-late", 256),
    );
    reg.domain().register_pool(&early).unwrap();
    let mut p = reg
        .open(&format!("virtio-user:{path},mrg_rxbuf=0,event_idx=0"))
        .unwrap();
    p.configure(&PortConfig {
        rx_pool: Some(rx.clone()),
        ..PortConfig::default()
    })
    .unwrap();
    let mut q = p.start().unwrap();
    send_from(&mut q, &early, &b, 100);
    let e = reg.domain().register_pool(&late).unwrap_err().to_string();
    assert!(
        e.contains("registered while the port runs") && e.contains("before starting"),
        "{e}"
    );
    // Its frames cannot reach the backend: dropped and counted.
    let mut out = Pkts::new();
    out.push(late.get().unwrap()).unwrap();
    assert_eq!(q.tx_burst(0, &mut out), 0);
    assert_eq!(p.stats().oerrors, 1);
    p.stop().unwrap();
    drop(q);
    reg.domain().register_pool(&late).unwrap();
    let mut q = p.start().unwrap();
    send_from(&mut q, &late, &b, 100);
    assert_eq!(
        b.counts.tx_unmapped.load(Relaxed),
        0,
        "every TX buffer lay in the memory table"
    );
    p.stop().unwrap();
    drop((q, p, b));
    for pool in [&rx, &early, &late] {
        assert_eq!(pool.available(), 256, "{}", pool.name());
    }
}

/// Issue 20: where the backend offers CONFIGURE_MEM_SLOTS, a pool
/// registered while the port runs goes to it by ADD_MEM_REG (acknowledged
/// with REPLY_ACK, or followed by a request whose reply says it was read),
/// and TX hands over its mbufs from then on; started again, the port's
/// memory table holds it from the start.
#[test]
fn pools_registered_while_running_go_to_the_backend_by_add_mem_reg() {
    for reply_ack in [false, true] {
        let path = format!(
            "/tmp/rpmd-hostile-addmem{}-{}.sock",
            reply_ack as u8,
            std::process::id()
        );
        let b = Hostile::start(
            &path,
            Setup {
                mem_slots: true,
                reply_ack,
                ..setup(false, false, Misbehave::Nothing)
            },
        );
        let mut reg = Registry::new();
        rpmd_virtio::register(&mut reg);
        let (rx, late) = (pool("addmem-rx", 256), pool("addmem-late", 256));
        let mut p = reg
            .open(&format!("virtio-user:{path},mrg_rxbuf=0,event_idx=0"))
            .unwrap();
        p.configure(&PortConfig {
            rx_pool: Some(rx.clone()),
            ..PortConfig::default()
        })
        .unwrap();
        let mut q = p.start().unwrap();
        reg.domain().register_pool(&late).unwrap();
        assert_eq!(b.counts.regions_added.load(Relaxed), 1);
        send_from(&mut q, &late, &b, 100);
        assert_eq!(p.stats().oerrors, 0, "reply_ack {reply_ack}");
        assert_eq!(b.counts.tx_unmapped.load(Relaxed), 0);
        p.stop().unwrap();
        drop(q);
        // Started again on the same connection: the memory table now
        // holds the pool from the start.
        let mut q = p.start().unwrap();
        send_from(&mut q, &late, &b, 100);
        assert_eq!(b.counts.tx_unmapped.load(Relaxed), 0);
        p.stop().unwrap();
        drop((q, p, b));
        for pool in [&rx, &late] {
            assert_eq!(pool.available(), 256, "{}", pool.name());
        }
    }
}

/// Issue 20: a pool one port's backend took by ADD_MEM_REG but another
/// port refused (its backend has no CONFIGURE_MEM_SLOTS) is withdrawn
/// from the first (REM_MEM_REG), whose TX stops handing its mbufs over:
/// the pool may be freed once the registration failed.
#[test]
fn a_region_another_port_refuses_is_withdrawn() {
    let (pa, pb) = (
        format!("/tmp/rpmd-hostile-wda-{}.sock", std::process::id()),
        format!("/tmp/rpmd-hostile-wdb-{}.sock", std::process::id()),
    );
    let ba = Hostile::start(
        &pa,
        Setup {
            mem_slots: true,
            ..setup(false, false, Misbehave::Nothing)
        },
    );
    let bb = Hostile::start(&pb, setup(false, false, Misbehave::Nothing));
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let (rx, late) = (pool("wd-rx", 2048), pool("wd-late", 256));
    let mut ports = Vec::new();
    for path in [&pa, &pb] {
        let mut p = reg
            .open(&format!("virtio-user:{path},mrg_rxbuf=0,event_idx=0"))
            .unwrap();
        p.configure(&PortConfig {
            rx_pool: Some(rx.clone()),
            ..PortConfig::default()
        })
        .unwrap();
        let q = p.start().unwrap();
        ports.push((p, q));
    }
    assert!(reg.domain().register_pool(&late).is_err());
    assert_eq!(ba.counts.regions_added.load(Relaxed), 1);
    // The withdrawal is a message the backend's thread counts when it
    // reads it (no REPLY_ACK here): wait for it, within a bound.
    let t0 = std::time::Instant::now();
    while ba.counts.regions_removed.load(Relaxed) == 0 && t0.elapsed().as_secs() < 5 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(ba.counts.regions_removed.load(Relaxed), 1, "withdrawn");
    let (p, q) = &mut ports[0];
    let mut out = Pkts::new();
    out.push(late.get().unwrap()).unwrap();
    assert_eq!(q.tx_burst(0, &mut out), 0, "not reached any more");
    assert_eq!(p.stats().oerrors, 1);
    for (mut p, q) in ports {
        p.stop().unwrap();
        drop(q);
    }
    drop((ba, bb));
    assert_eq!(late.available(), 256);
    assert_eq!(rx.available(), 2048);
}
