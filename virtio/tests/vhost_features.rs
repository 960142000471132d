//! virtio-user features against DPDK testpmd's vhost-user backend: two
//! queue pairs, rx interrupts with event indices, testpmd killed and
//! restarted under a running port (client and server mode), macswap
//! forwarding. Skipped, with a message, where dpdk-testpmd is missing or
//! we are not root.
mod common;

use common::*;
use rpmd_pmd::port::Pkts;
use rpmd_pmd::{Mempool, MempoolConfig, PortConfig, Registry};
use std::time::{Duration, Instant};

/// Two queue pairs: testpmd's io forwarding returns what arrives on its
/// queue q on its queue q, so every frame we send on tx queue q comes back,
/// unchanged, on rx queue q.
#[test]
fn two_queue_pairs_each_carry_their_own_frames() {
    let Some(t) = testpmd_queues("mq", "io", 2) else {
        return;
    };
    let conf = PortConfig {
        rx_queues: 2,
        tx_queues: 2,
        ..PortConfig::default()
    };
    let (mut p, mut q, pool) = port_config(&t, ",queues=2", conf);
    assert_eq!(p.capabilities().max_rx_queues, 2);
    let feats = xstat(p.as_ref(), "negotiated_features");
    assert_ne!(
        feats & (1 << 22),
        0,
        "VIRTIO_NET_F_MQ negotiated: {feats:#x}"
    );
    const N: u32 = 400;
    let mut got = [0u32; 2];
    let mut sent = [0u32; 2];
    let mut inb = Pkts::new();
    let start = Instant::now();
    while got != [N, N] {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "got {got:?} of {N} per queue (sent {sent:?}); testpmd log: {}",
            t.log
        );
        for qi in 0..2u16 {
            let mut out = Pkts::new();
            let i = qi as usize;
            while sent[i] < N && out.len() < 32 && sent[i] < got[i] + 64 {
                // The tag says which queue sent it.
                let tag = qi as u32 * 100_000 + sent[i];
                let mut m = pool.get().unwrap();
                m.append(128).unwrap().copy_from_slice(&frame(tag, 128));
                out.push(m).unwrap();
                sent[i] += 1;
            }
            q.tx_burst(qi, &mut out);
            sent[i] -= out.len() as u32;
            q.rx_burst(qi, &mut inb, 32);
            while let Some(m) = inb.pop() {
                let d = m.data();
                let tag = u32::from_le_bytes(d[14..18].try_into().unwrap());
                assert_eq!(
                    tag / 100_000,
                    qi as u32,
                    "frame {tag} came back on rx queue {qi}"
                );
                assert_eq!(d, &frame(tag, d.len())[..], "frame {tag} changed");
                got[i] += 1;
            }
        }
    }
    let x = p.xstats();
    let val = |n: &str| x.iter().find(|s| s.name == n).map(|s| s.value);
    for qi in 0..2 {
        assert_eq!(val(&format!("rx_q{qi}_packets")), Some(N as u64), "{x:?}");
        assert_eq!(val(&format!("tx_q{qi}_packets")), Some(N as u64), "{x:?}");
    }
    p.stop().unwrap();
    drop(q);
    drop(p);
    assert_eq!(pool.available(), 4096, "every mbuf back in the pool");
}

/// Event indices are negotiated with testpmd's vhost, and an armed rx
/// queue's interrupt eventfd fires when a frame comes back, while a
/// disarmed one stays quiet.
#[test]
fn rx_interrupts_with_event_indices() {
    let Some(t) = testpmd("irq") else { return };
    let (p, mut q, pool) = port(&t);
    assert!(p.capabilities().rx_interrupts);
    let feats = xstat(p.as_ref(), "negotiated_features");
    assert_ne!(feats & (1 << 29), 0, "EVENT_IDX negotiated: {feats:#x}");
    let send = |q: &mut rpmd_pmd::Queues, tag: u32| {
        let mut out = Pkts::new();
        let mut m = pool.get().unwrap();
        m.append(64).unwrap().copy_from_slice(&frame(tag, 64));
        out.push(m).unwrap();
        assert_eq!(q.tx_burst(0, &mut out), 1);
    };
    let mut inb = Pkts::new();
    // Armed: quiet while nothing comes, readable once a frame is back.
    q.rx[0].set_interrupt(true).unwrap();
    assert!(!q.rx[0].has_work());
    assert!(!readable(q.rx[0].interrupt_fd().unwrap(), 100));
    send(&mut q, 1);
    assert!(
        readable(q.rx[0].interrupt_fd().unwrap(), 5000),
        "no interrupt for a returned frame; testpmd log: {}",
        t.log
    );
    assert!(q.rx[0].has_work());
    q.rx[0].set_interrupt(false).unwrap();
    assert_eq!(q.rx_burst(0, &mut inb, 32), 1);
    // Disarmed: the frame comes back without an interrupt.
    send(&mut q, 2);
    let t0 = Instant::now();
    while q.rx_burst(0, &mut inb, 32) == 0 {
        assert!(t0.elapsed() < Duration::from_secs(5), "frame 2 lost");
    }
    assert!(!readable(q.rx[0].interrupt_fd().unwrap(), 100));
    assert_eq!(inb.len(), 2);
}

/// testpmd killed mid-stream: the link goes down, the port keeps its
/// queues, and when a new testpmd listens on the same socket the port
/// reconnects by itself, the link comes back, and frames flow again.
#[test]
fn testpmd_killed_and_restarted_mid_stream() {
    killed_and_restarted("rc", "", 1, 1);
}

/// The same over packed rings, which start over with the new backend
/// (each queue restarts its ring at its next burst).
#[test]
fn testpmd_killed_and_restarted_mid_stream_packed() {
    killed_and_restarted("rcp", ",packed_vq=1", 1, 1);
}

/// Packed rings with more TX than RX queues (one RX queue, two TX): the
/// unused RX ring has no handle, and the reconnection must not wait for it
/// to restart.
#[test]
fn packed_reconnection_with_an_unused_rx_ring() {
    killed_and_restarted("rcpu", ",queues=2,packed_vq=1", 1, 2);
}

/// Issue 21: testpmd serves one queue pair but answers GET_QUEUE_NUM with
/// its maximum, so a port with two opens; what it sends on the pair
/// testpmd never serves shows as unfinished in that queue's xstats, while
/// pair 0 completes.
#[test]
fn a_pair_the_backend_never_serves_shows_as_unfinished() {
    let Some(t) = testpmd_queues("stk", "rxonly", 1) else {
        return;
    };
    let conf = PortConfig {
        rx_queues: 2,
        tx_queues: 2,
        ..PortConfig::default()
    };
    let (p, mut q, pool) = port_config(&t, ",queues=2", conf);
    let t0 = Instant::now();
    let (mut sent, mut stuck) = ([0usize; 2], 0u64);
    while t0.elapsed() < Duration::from_secs(2) && (sent[0] < 500 || stuck < 100) {
        for (k, tx) in q.tx.iter_mut().enumerate() {
            let mut out = Pkts::new();
            for i in 0..8 {
                let mut m = pool.get().unwrap();
                m.append(64).unwrap().copy_from_slice(&frame(i, 64));
                out.push(m).unwrap();
            }
            sent[k] += tx.tx_burst(&mut out);
        }
        stuck = xstat(p.as_ref(), "tx_q1_unfinished");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(sent[0] >= 500, "pair 0 sends: {sent:?}");
    assert!(
        xstat(p.as_ref(), "tx_q0_unfinished") < 256,
        "pair 0 completes"
    );
    assert_eq!(stuck, sent[1] as u64, "every frame on pair 1 unfinished");
    assert!(stuck >= 100, "{sent:?}");
    stop_and_count(p, q, &pool);
}

/// Issue 21: an application that drops a queue handle it does not use
/// (gen's txonly drops its RX queue) still gets the link back after the
/// backend restarts, on packed rings (which never came back: the watch
/// waited for the dropped queue to restart its ring) and split rings; the
/// buffers the dropped RX ring had posted are not freed while a backend
/// may still write them, and all are back in the pool at the end.
#[test]
fn reconnection_after_the_app_dropped_its_rx_handle_packed() {
    dropped_rx_handle("drp", ",packed_vq=1");
}

/// The same on split rings.
#[test]
fn reconnection_after_the_app_dropped_its_rx_handle_split() {
    dropped_rx_handle("drs", "");
}

fn dropped_rx_handle(tag: &str, opts: &str) {
    let Some(mut t) = testpmd_mode(tag, "rxonly") else {
        return;
    };
    let (p, mut q, pool) = port_config(&t, opts, PortConfig::default());
    drop(q.rx.pop());
    assert!(
        pool.available() <= 4096 - 256,
        "the posted RX buffers stay out of the pool: {}",
        pool.available()
    );
    let send = |q: &mut rpmd_pmd::Queues| -> usize {
        let mut out = Pkts::new();
        for k in 0..8 {
            let mut m = pool.get().unwrap();
            m.append(64).unwrap().copy_from_slice(&frame(k, 64));
            out.push(m).unwrap();
        }
        q.tx_burst(0, &mut out)
    };
    let sends = |q: &mut rpmd_pmd::Queues, what: &str| {
        let t0 = Instant::now();
        let mut sent = 0;
        while sent < 1000 {
            assert!(
                t0.elapsed() < Duration::from_secs(15),
                "{what}: {sent} sent"
            );
            sent += send(q);
        }
    };
    sends(&mut q, "before the kill");
    kill_and_restart(&mut t, p.as_ref(), tag, "rxonly", 1, || {
        let _ = send(&mut q);
    });
    sends(&mut q, "after the restart");
    assert_eq!(xstat(p.as_ref(), "reconnects"), 1);
    stop_and_count(p, q, &pool);
}

/// Frames flow on queue 0; testpmd (with as many queue pairs as the port
/// has TX queues) is SIGKILLed and started again while the application
/// keeps polling every queue; the link goes down, comes back, frames flow.
fn killed_and_restarted(tag: &str, opts: &str, rx_queues: u16, tx_queues: u16) {
    let Some(mut t) = testpmd_queues(tag, "io", tx_queues) else {
        return;
    };
    let conf = PortConfig {
        rx_queues,
        tx_queues,
        ..PortConfig::default()
    };
    let (p, mut q, pool) = port_config(&t, opts, conf);
    assert_eq!(
        (q.rx.len(), q.tx.len()),
        (rx_queues as usize, tx_queues as usize)
    );
    let echo = |q: &mut rpmd_pmd::Queues, tag: u32| -> usize {
        let mut out = Pkts::new();
        for k in 0..8 {
            let mut m = pool.get().unwrap();
            m.append(64).unwrap().copy_from_slice(&frame(tag + k, 64));
            out.push(m).unwrap();
        }
        q.tx_burst(0, &mut out);
        // The other TX queues are polled too, as a run loop would.
        for tx in q.tx.iter_mut().skip(1) {
            tx.tx_burst(&mut Pkts::new());
        }
        let mut inb = Pkts::new();
        q.rx_burst(0, &mut inb, 32)
    };
    let flows = |q: &mut rpmd_pmd::Queues, what: &str| {
        let t0 = Instant::now();
        let mut got = 0;
        while got < 100 {
            assert!(
                t0.elapsed() < Duration::from_secs(15),
                "{what}: {got} frames back"
            );
            got += echo(q, 0);
        }
    };
    flows(&mut q, "before the kill");
    kill_and_restart(&mut t, p.as_ref(), tag, "io", tx_queues, || {
        let _ = echo(&mut q, 1000);
    });
    flows(&mut q, "after the restart");
    let rc = xstat(p.as_ref(), "reconnects");
    assert_eq!(rc, 1);
    stop_and_count(p, q, &pool);
}
/// SIGKILLs testpmd `t` (no goodbye on the socket), waits for the port's
/// link to go down, starts a new testpmd (`mode`, `queues` pairs) on the
/// same socket and waits for the link to come back; `poll` runs
/// throughout, as the application's run loop would.
fn kill_and_restart(
    t: &mut Testpmd,
    p: &dyn rpmd_pmd::Port,
    tag: &str,
    mode: &str,
    queues: u16,
    mut poll: impl FnMut(),
) {
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(t.child.id() as i32, libc::SIGKILL) };
    let _ = t.child.wait();
    let t0 = Instant::now();
    while p.link().up {
        assert!(t0.elapsed() < Duration::from_secs(5), "link still up");
        poll();
        std::thread::sleep(Duration::from_millis(20));
    }
    // The data path keeps running while the backend is away.
    for _ in 0..20 {
        poll();
    }
    t.child = spawn_testpmd(
        &t.sock,
        &t.log,
        &format!("{tag}2{}", std::process::id()),
        mode,
        queues,
    )
    .expect("testpmd restarts");
    let t0 = Instant::now();
    while !p.link().up {
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "no reconnection; log: {}",
            t.log
        );
        poll();
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stops the port and checks that every mbuf is back in its pool.
fn stop_and_count(mut p: Box<dyn rpmd_pmd::Port>, q: rpmd_pmd::Queues, pool: &Mempool) {
    p.stop().unwrap();
    drop(q);
    drop(p);
    assert_eq!(pool.available(), 4096, "every mbuf back in the pool");
}

/// Server mode: we listen, testpmd's vhost port connects as a client
/// (`client=1`), frames round-trip; testpmd killed and started again
/// connects to us again and frames flow once more.
#[test]
fn server_mode_with_a_client_testpmd_that_comes_back() {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run_testpmd() {
        return;
    }
    let id = std::process::id();
    let sock = format!("/tmp/rpmd-vt-srv-{id}.sock");
    let log = format!("/tmp/rpmd-vt-srv-{id}.log");
    let mut child =
        spawn_testpmd_as(&sock, &log, &format!("srv{id}"), "io", 1, true, false).unwrap();
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let pool = Mempool::new(&MempoolConfig::new("vtsrv", 4096)).unwrap();
    let mut p = reg
        .open(&format!("virtio-user:{sock},server=1,timeout_ms=20000"))
        .unwrap_or_else(|e| panic!("{e}; testpmd log: {log}"));
    p.configure(&PortConfig {
        rx_pool: Some(pool.clone()),
        ..PortConfig::default()
    })
    .unwrap();
    let mut q = p.start().unwrap();
    let flows = |q: &mut rpmd_pmd::Queues, what: &str| {
        let t0 = Instant::now();
        let mut got = 0;
        let mut inb = Pkts::new();
        while got < 100 {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "{what}: {got} frames back; {log}"
            );
            let mut out = Pkts::new();
            for k in 0..8 {
                let mut m = pool.get().unwrap();
                m.append(64).unwrap().copy_from_slice(&frame(k, 64));
                out.push(m).unwrap();
            }
            q.tx_burst(0, &mut out);
            got += q.rx_burst(0, &mut inb, 32);
            inb.clear();
        }
    };
    flows(&mut q, "first client");
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    let t0 = Instant::now();
    while p.link().up {
        assert!(t0.elapsed() < Duration::from_secs(5), "link still up");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut child =
        spawn_testpmd_as(&sock, &log, &format!("srv2{id}"), "io", 1, true, false).unwrap();
    let t0 = Instant::now();
    while !p.link().up {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the client did not come back; {log}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    flows(&mut q, "second client");
    p.stop().unwrap();
    drop(q);
    drop(p);
    assert!(
        !std::path::Path::new(&sock).exists(),
        "our socket file is removed"
    );
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let _ = child.wait();
    drop(serial);
    assert_eq!(pool.available(), 4096, "every mbuf back in the pool");
}

/// testpmd's macswap forwarding: every frame comes back with its MAC
/// addresses swapped and every other byte as sent.
#[test]
fn macswap_returns_frames_with_addresses_swapped() {
    let Some(t) = testpmd_mode("msw", "macswap") else {
        return;
    };
    let (mut p, mut q, pool) = port(&t);
    const N: u32 = 500;
    let (mut sent, mut got) = (0u32, 0u32);
    let mut inb = Pkts::new();
    let start = Instant::now();
    while got < N {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{got} of {N} back; log {}",
            t.log
        );
        let mut out = Pkts::new();
        while sent < N && out.len() < 32 && sent < got + 128 {
            let mut m = pool.get().unwrap();
            m.append(128).unwrap().copy_from_slice(&frame(sent, 128));
            out.push(m).unwrap();
            sent += 1;
        }
        q.tx_burst(0, &mut out);
        sent -= out.len() as u32;
        q.rx_burst(0, &mut inb, 32);
        while let Some(m) = inb.pop() {
            let d = m.data();
            let tag = u32::from_le_bytes(d[14..18].try_into().unwrap());
            let want = frame(tag, d.len());
            assert_eq!(
                &d[..6],
                &want[6..12],
                "frame {tag}: destination is the old source"
            );
            assert_eq!(
                &d[6..12],
                &want[..6],
                "frame {tag}: source is the old destination"
            );
            assert_eq!(&d[12..], &want[12..], "frame {tag}: payload unchanged");
            got += 1;
        }
    }
    p.stop().unwrap();
}
