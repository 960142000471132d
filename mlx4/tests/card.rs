//! A ConnectX-3's life beyond the data path, on the device model: a VPI
//! card's port types, a card that fails and comes back, and firmware that
//! takes a real card's time.
mod common;
use common::*;
use rpmd_mlx4::model::{FwTiming, Mlx4Model, ModelOptions};
use rpmd_pmd::port::Port;
use rpmd_pmd::Pkts;

/// A VPI card (ports that run InfiniBand or Ethernet, by their cable):
/// a port that senses Ethernet, or nothing, runs; one on an InfiniBand
/// link is refused by name with what to do, its sibling unharmed; a
/// sense that is no port type refuses the card.
#[test]
fn a_vpi_port_on_an_infiniband_link_is_refused_by_name() {
    use rpmd_mlx4::{ethdev, Hca, Options};
    use std::sync::{Arc, Mutex};
    let card = |vpi: [u64; 2]| {
        let opts = ModelOptions {
            vpi: Some(vpi),
            ..ModelOptions::default()
        };
        let model = Mlx4Model::new("0000:00:0d.0".parse().unwrap(), opts);
        let func = model.open(&rpmd_pmd::DmaDomain::new()).unwrap();
        Hca::open(func, &Options::default()).map(|h| (model, Arc::new(Mutex::new(h))))
    };
    let p = pool("mlx4-vpi");
    let (_model, c) = card([2, 1]).unwrap();
    let mut eth = ethdev::open_port("vpi-1", c.clone(), 1, 0).unwrap();
    let e = ethdev::open_port("vpi-2", c.clone(), 2, 1)
        .err()
        .expect("port 2 senses InfiniBand")
        .to_string();
    assert!(
        e.contains("InfiniBand") && e.contains("LINK_TYPE_P2=2"),
        "{e}"
    );
    eth.configure(&conf(&p)).unwrap();
    let q = eth.start().unwrap();
    drop(q);
    eth.stop().unwrap();
    drop((eth, c));
    let (_model, c) = card([0, 2]).unwrap();
    assert!(ethdev::open_port("vpi-none", c.clone(), 1, 0).is_ok());
    drop(c);
    let e = card([3, 2]).err().expect("an illegal sense").to_string();
    assert!(e.contains("no port type"), "{e}");
}

/// A card that fails (its catastrophic-error buffer non-zero, firmware
/// silent) is found within a link poll: both links read down, the xstat
/// says so, commands fail at once naming the failure instead of waiting
/// out their timeouts, stop and close let go of everything, and opening
/// the ports again (the card reset and brought up anew) forwards again.
#[test]
fn a_failed_card_is_seen_and_recovers_when_its_ports_open_again() {
    use std::time::{Duration, Instant};
    let p = pool("mlx4-eth-catas");
    let opts = ModelOptions {
        wire: true,
        ..ModelOptions::default()
    };
    let model = Mlx4Model::new("0000:00:0e.0".parse().unwrap(), opts);
    let open = || {
        let func = model.open(&rpmd_pmd::DmaDomain::new()).unwrap();
        let hca = rpmd_mlx4::Hca::open(func, &rpmd_mlx4::Options::default()).unwrap();
        let card = std::sync::Arc::new(std::sync::Mutex::new(hca));
        let a = rpmd_mlx4::ethdev::open_port("catas-1", card.clone(), 1, 0).unwrap();
        let b = rpmd_mlx4::ethdev::open_port("catas-2", card, 2, 1).unwrap();
        (Box::new(a) as Box<dyn Port>, Box::new(b) as Box<dyn Port>)
    };
    let (mut a, mut b) = open();
    a.configure(&conf(&p)).unwrap();
    b.configure(&conf(&p)).unwrap();
    let mut qa = a.start().unwrap();
    let mut qb = b.start().unwrap();
    let frame = udp_frame(mac2(), 100, 1);
    assert_eq!(
        send_recv(&mut qa, &mut qb, &p, std::slice::from_ref(&frame)).len(),
        1
    );
    model.fail(0xdead);
    let t0 = Instant::now();
    assert!(!a.link().up && !b.link().up, "links down once failed");
    let x = a.xstats();
    assert!(
        x.iter()
            .any(|x| x.name == "catastrophic_errors" && x.value == 1),
        "{x:?}"
    );
    let e = a
        .set_allmulticast(true)
        .expect_err("no command after the failure");
    assert!(e.to_string().contains("failed"), "{e}");
    // Frames go nowhere; the queues still answer.
    let mut pkts = Pkts::new();
    pkts.push(mbuf_of(&p, &frame)).unwrap();
    let _ = qa.tx_burst(0, &mut pkts);
    drop(pkts);
    let mut got = Pkts::new();
    assert_eq!(qb.rx_burst(0, &mut got, 32), 0);
    drop((qa, qb, got));
    a.stop().unwrap_or_else(|e| eprintln!("stop: {e}"));
    b.stop().unwrap_or_else(|e| eprintln!("stop: {e}"));
    drop((a, b));
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "no command waited out its timeout"
    );
    assert_eq!(p.available(), p.size(), "every mbuf home");
    // Opened again: reset, brought up, forwarding.
    let (mut a, mut b) = open();
    a.configure(&conf(&p)).unwrap();
    b.configure(&conf(&p)).unwrap();
    let mut qa = a.start().unwrap();
    let mut qb = b.start().unwrap();
    assert!(a.link().up && b.link().up);
    assert_eq!(send_recv(&mut qa, &mut qb, &p, &[frame]).len(), 1);
    drop((qa, qb));
    a.stop().unwrap();
    b.stop().unwrap();
}

/// Firmware that takes a real card's time (RUN_FW and INIT_HCA in
/// hundreds of milliseconds, page mappings in milliseconds, the rest in a
/// hundred microseconds): bring-up, both ports' start, traffic, stop and
/// close all run under the driver's own timeouts, nothing shrunk, and
/// the model sees nothing it would refuse.
#[test]
fn a_card_runs_at_its_firmware_s_pace_under_the_real_timeouts() {
    use std::time::Instant;
    let t = FwTiming::REALISTIC;
    let opts = ModelOptions {
        wire: true,
        fw_timing: Some(t),
        ..ModelOptions::default()
    };
    let model = Mlx4Model::new("0000:00:0f.0".parse().unwrap(), opts);
    let t0 = Instant::now();
    let func = model.open(&rpmd_pmd::DmaDomain::new()).unwrap();
    let hca = rpmd_mlx4::Hca::open(func, &rpmd_mlx4::Options::default()).unwrap();
    let up = t0.elapsed();
    assert!(up >= t.run_fw + t.init_hca, "bring-up took {up:?}");
    let card = std::sync::Arc::new(std::sync::Mutex::new(hca));
    let mut a: Box<dyn Port> =
        Box::new(rpmd_mlx4::ethdev::open_port("slow-1", card.clone(), 1, 0).unwrap());
    let mut b: Box<dyn Port> =
        Box::new(rpmd_mlx4::ethdev::open_port("slow-2", card, 2, 1).unwrap());
    let p = pool("mlx4-slow");
    a.configure(&conf(&p)).unwrap();
    b.configure(&conf(&p)).unwrap();
    let mut qa = a.start().unwrap();
    let mut qb = b.start().unwrap();
    assert!(a.link().up && b.link().up);
    let frames: Vec<Vec<u8>> = (0..8).map(|k| udp_frame(mac2(), 128, k)).collect();
    assert_eq!(send_recv(&mut qa, &mut qb, &p, &frames).len(), 8);
    drop((qa, qb));
    a.stop().unwrap();
    b.stop().unwrap();
    drop((a, b));
    assert!(model.violations().is_empty(), "{:?}", model.violations());
    assert!(!model.hca_initialised(), "CLOSE_HCA ran");
    eprintln!("bring-up {up:?}, all {:?}", t0.elapsed());
}

/// The card's engines on a thread of their own, pinned to the other CPU,
/// doing a doorbell's work 2 to 22 us after it rang, every frame and
/// entry written as poison first: frames cross the cable both ways in
/// order and byte for byte however late their CQEs come (a driver that
/// read a buffer or an entry ahead of its owner bit would read poison:
/// tests/defects.rs builds that driver and sees it fail), every mbuf
/// comes home, an armed queue's interrupt fires from the engine's thread,
/// and the model sees nothing it would refuse.
#[test]
fn the_driver_keeps_up_with_an_engine_on_another_cpu() {
    if let Err(wrong) = exchange_with_a_late_engine("async") {
        panic!("{wrong}");
    }
}

/// The app's RSS settings reach the card: a key of its own, and only
/// IPv4 addresses hashed (no ports), so every flow between two hosts lands
/// on one queue with the hash Toeplitz gives for that key; a redirection
/// table, which a ConnectX-3 has not, is refused by name.
#[test]
fn the_app_s_rss_key_and_hash_kinds_reach_the_card() {
    use rpmd_pmd::net::rss::{ipv4_input, toeplitz};
    use rpmd_pmd::port::{RssConfig, RssHash};
    use rpmd_pmd::PortConfig;
    let model = Mlx4Model::new("0000:00:12.0".parse().unwrap(), ModelOptions::default());
    let func = model.open(&rpmd_pmd::DmaDomain::new()).unwrap();
    let hca = rpmd_mlx4::Hca::open(func, &rpmd_mlx4::Options::default()).unwrap();
    let card = std::sync::Arc::new(std::sync::Mutex::new(hca));
    let mut port = rpmd_mlx4::ethdev::open_port("mlx4-rss-conf", card, 1, 0).unwrap();
    let p = pool("mlx4-rss-conf");
    let caps = port.rss_caps();
    assert!(caps.hash.contains(RssHash::ALL) && caps.key && caps.reta_size == 0);
    let key: [u8; 40] = std::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ 0x5c);
    let rss = RssConfig {
        hash: RssHash::IPV4,
        key,
        reta: Vec::new(),
    };
    let with_table = PortConfig {
        rx_queues: 4,
        rss: RssConfig {
            reta: vec![0; 4],
            ..rss.clone()
        },
        ..conf(&p)
    };
    let e = port.configure(&with_table).unwrap_err().to_string();
    assert!(e.contains("redirection table"), "{e}");
    port.configure(&PortConfig {
        rx_queues: 4,
        rss,
        ..conf(&p)
    })
    .unwrap();
    let mut q = port.start().unwrap();
    let want = toeplitz(&key, &ipv4_input([10, 0, 0, 1], [10, 0, 0, 2], None));
    for k in 0..32u16 {
        let mut f = udp_frame(rpmd_mlx4::model::PORT_MAC, 80, k as u8);
        f[34..36].copy_from_slice(&(1000 + k).to_be_bytes());
        assert_eq!(
            model.inject(1, &f),
            rpmd_mlx4::model::RxOutcome::Delivered(1)
        );
        let on: Vec<(u16, u32)> = (0..4u16)
            .flat_map(|rxq| {
                let mut pkts = Pkts::new();
                q.rx_burst(rxq, &mut pkts, 32);
                pkts.iter().map(|m| (rxq, m.rss_hash())).collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(on, vec![((want & 3) as u16, want)], "flow {k}");
    }
    let e = port.set_rss_reta(&[1, 1, 1, 1]).unwrap_err().to_string();
    assert!(e.contains("redirection table"), "{e}");
    drop(q);
    port.stop().unwrap();
}

/// New RSS settings on a running port: a new RSS QP takes the steering
/// over while frames keep arriving. Every frame sent from another thread
/// during the update reaches one receive queue exactly once (the swap of
/// each steering entry is one WRITE_MCG, so none finds no QP or two);
/// afterwards flows hash with the new key over addresses and ports; the
/// settings read back; the model saw nothing it would refuse.
#[test]
fn an_rss_update_while_running_loses_no_frame() {
    use rpmd_mlx4::model::{RxOutcome, PORT_MAC};
    use rpmd_pmd::net::rss::{ipv4_input, toeplitz};
    use rpmd_pmd::port::{RssConfig, RssHash};
    use rpmd_pmd::PortConfig;
    use std::sync::atomic::{AtomicBool, Ordering};
    // Commands take a real card's time, so frames arrive while each runs.
    let opts = ModelOptions {
        fw_timing: Some(rpmd_mlx4::model::FwTiming::REALISTIC),
        ..ModelOptions::default()
    };
    let model = Mlx4Model::new("0000:00:13.0".parse().unwrap(), opts);
    let func = model.open(&rpmd_pmd::DmaDomain::new()).unwrap();
    let hca = rpmd_mlx4::Hca::open(func, &rpmd_mlx4::Options::default()).unwrap();
    let card = std::sync::Arc::new(std::sync::Mutex::new(hca));
    let mut port = rpmd_mlx4::ethdev::open_port("mlx4-rss-live", card, 1, 0).unwrap();
    let p = pool("mlx4-rss-live");
    let rss = RssConfig {
        hash: RssHash::IPV4,
        key: rpmd_mlx4::ethdev::RSS_KEY,
        reta: Vec::new(),
    };
    port.configure(&PortConfig {
        rx_queues: 4,
        rss,
        ..conf(&p)
    })
    .unwrap();
    let mut q = port.start().unwrap();
    let flow = |k: u16| {
        let mut f = udp_frame(PORT_MAC, 80, k as u8);
        f[34..36].copy_from_slice(&(1000 + k).to_be_bytes());
        f
    };
    let drain = |q: &mut rpmd_pmd::port::Queues| -> Vec<(u16, u16, u32)> {
        (0..4u16)
            .flat_map(|rxq| {
                let mut pkts = Pkts::new();
                while q.rx_burst(rxq, &mut pkts, 32) == 32 {}
                let got: Vec<_> = pkts
                    .iter()
                    .map(|m| {
                        let d = m.data();
                        (rxq, u16::from_be_bytes([d[34], d[35]]) - 1000, m.rss_hash())
                    })
                    .collect();
                got
            })
            .collect()
    };
    let key: [u8; 40] = std::array::from_fn(|i| (i as u8).wrapping_mul(11) ^ 0xc3);
    let done = AtomicBool::new(false);
    let outcomes = std::thread::scope(|sc| {
        let sender = sc.spawn(|| {
            let (mut out, mut after) = (Vec::new(), 0);
            while after < 16 && out.len() < 200 {
                after += usize::from(done.load(Ordering::Acquire));
                out.push(model.inject(1, &flow(out.len() as u16)));
                std::thread::sleep(std::time::Duration::from_micros(20));
            }
            out
        });
        std::thread::sleep(std::time::Duration::from_millis(1));
        port.set_rss_hash(RssHash::IPV4 | RssHash::IPV4_UDP, Some(key))
            .unwrap();
        done.store(true, Ordering::Release);
        sender.join().unwrap()
    });
    let n = outcomes.len();
    assert!(
        outcomes.iter().all(|o| *o == RxOutcome::Delivered(1)),
        "{outcomes:?}"
    );
    let mut seen: Vec<u16> = drain(&mut q).iter().map(|r| r.1).collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..n as u16).collect::<Vec<_>>(), "each frame once");
    for k in 0..32u16 {
        assert_eq!(model.inject(1, &flow(k)), RxOutcome::Delivered(1));
        let want = toeplitz(
            &key,
            &ipv4_input([10, 0, 0, 1], [10, 0, 0, 2], Some((1000 + k, 5678))),
        );
        assert_eq!(
            drain(&mut q),
            vec![((want & 3) as u16, k, want)],
            "flow {k}"
        );
    }
    let shown = port.rss_conf().unwrap();
    assert_eq!(
        (shown.hash, shown.key),
        (RssHash::IPV4 | RssHash::IPV4_UDP, key)
    );
    drop(q);
    port.stop().unwrap();
    assert!(model.violations().is_empty(), "{:?}", model.violations());
    eprintln!("{n} frames sent across the update");
}
