//! The features matrix held to the ports. `docs/features.md` is what the
//! drivers declare (after a change, regenerate it with
//! `RPMD_BLESS=1 cargo test -p rpmd-apps --test features`), and every
//! feature a driver declares is exercised on each port kind this machine
//! can open, through the API an app uses; a capability a port shows
//! without declaring it fails too. The PCI drivers' ports need a device:
//! virtio-net PCI is exercised in the VFIO guest (`tests/vm`), mlx4's PCI
//! port is the model's (`mlx4-model`, which declares the same).
use rpmd_kernel::testing::{lab_available, Lab};
use rpmd_pmd::mbuf::TX_VLAN;
use rpmd_pmd::port::features::{Declared, Feature, Support};
use rpmd_pmd::port::{MacAddr, Offloads, Pkts, Port, PortConfig, Queues, RssConfig};
use rpmd_pmd::{Mempool, MempoolConfig};
use std::time::{Duration, Instant};

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/features.md");

/// The document as the registered drivers declare it.
fn document() -> String {
    let reg = rpmd_apps::cli::registry();
    format!(
        "# Port features\n\n\
         What each rpmd driver offers, as DPDK's `doc/guides/nics/features`. \
         Generated from the drivers' declarations (`Driver::features`, \
         `PciDriver::features`, and the generic port's `features::COMMON`) \
         by `RPMD_BLESS=1 cargo test -p rpmd-apps --test features`; the same \
         test exercises each declared feature on every port kind it can open.\n\n\
         `Y` offered, `S` by the generic port in software, `P` where the \
         device or peer offers it (see the note).\n\n\
         Not opened by that test on a host without the device: \
         `virtio-net-pci`, whose receive modes, MAC filter and rx interrupts \
         the VFIO guest run exercises (`tests/vm`, `virtio/examples/virtio_guest.rs`), \
         `mlx4`, the same driver as `mlx4-model` on rpmd's model of the card, \
         and `igb` and `igbvf`, whose features the VFIO guest run exercises on \
         QEMU's 82576 and on a virtual function of it that Linux's igb serves \
         (`igb/examples/igb_guest`).\n\n{}",
        rpmd_pmd::port::features::matrix(&reg.features())
    )
}

#[test]
fn the_features_document_is_what_the_drivers_declare() {
    let want = document();
    if std::env::var_os("RPMD_BLESS").is_some() {
        std::fs::write(DOC, &want).unwrap();
    }
    let have = std::fs::read_to_string(DOC).unwrap_or_default();
    assert!(
        have == want,
        "docs/features.md is stale; regenerate it: RPMD_BLESS=1 cargo test -p rpmd-apps --test features"
    );
}

/// A port kind as its checks need it: the port, what keeps its peer
/// alive (started, so that the link comes up), and the pool.
struct Subject {
    kind: &'static str,
    port: Box<dyn Port>,
    _peer: Option<(Box<dyn Port>, Queues)>,
    _lab: Option<Lab>,
    pool: Mempool,
}

fn pool(kind: &str) -> Mempool {
    Mempool::new(&MempoolConfig::new(&format!("feat-{kind}"), 4096)).unwrap()
}

/// Opens `dev` as kind `kind`, with `peer` (opened after it) started.
fn subject(kind: &'static str, dev: &str, peer: Option<&str>, lab: Option<Lab>) -> Subject {
    let reg = rpmd_apps::cli::registry();
    let pool = pool(kind);
    let port = reg.open(dev).unwrap_or_else(|e| panic!("{dev}: {e}"));
    let peer = peer.map(|p| {
        let mut p = reg.open(p).unwrap_or_else(|e| panic!("{p}: {e}"));
        p.configure(&PortConfig::with_pool(&pool)).unwrap();
        let q = p.start().unwrap();
        (p, q)
    });
    Subject {
        kind,
        port,
        _peer: peer,
        _lab: lab,
        pool,
    }
}

fn declared(kind: &str) -> Vec<Declared> {
    let reg = rpmd_apps::cli::registry();
    reg.features()
        .into_iter()
        .find(|(k, _)| *k == kind)
        .unwrap_or_else(|| panic!("no driver {kind}"))
        .1
}

/// A 60-byte broadcast frame.
fn frame(pool: &Mempool) -> rpmd_pmd::Mbuf {
    let mut m = pool.get().unwrap();
    let d = m.append(60).unwrap();
    d.fill(0x5a);
    d[..6].fill(0xff);
    d[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0xfe, 0x01]);
    d[12..14].copy_from_slice(&[0x08, 0x00]);
    m
}

impl Subject {
    fn conf(&self) -> PortConfig {
        PortConfig::with_pool(&self.pool)
    }

    /// Configures with `conf` and starts; waits up to 5 s for the link.
    fn start(&mut self, conf: &PortConfig) -> Result<Queues, String> {
        self.port
            .configure(conf)
            .map_err(|e| format!("configure: {e}"))?;
        let q = self.port.start().map_err(|e| format!("start: {e}"))?;
        let t = Instant::now();
        while !self.port.link().up {
            if t.elapsed() > Duration::from_secs(5) {
                return Err("the link stays down after start".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(q)
    }

    fn stop(&mut self, q: Queues) -> Result<(), String> {
        drop(q);
        self.port.stop().map_err(|e| format!("stop: {e}"))
    }

    /// Sends `m` on tx queue 0, retrying for up to a second.
    fn send(&self, q: &mut Queues, m: rpmd_pmd::Mbuf) -> bool {
        let mut out = Pkts::new();
        out.push(m).unwrap();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(1) {
            if q.tx_burst(0, &mut out) == 1 {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }
}

/// Exercises `f` on `s`; an error names what failed.
fn check(s: &mut Subject, f: Feature) -> Result<(), String> {
    let caps = s.port.capabilities();
    match f {
        Feature::LinkStatus => {
            let q = s.start(&s.conf())?;
            s.stop(q)
        }
        Feature::LinkStatusEvent => {
            let ev = s.port.link_events().map_err(|e| e.to_string())?;
            while ev.wait(Duration::from_millis(50)).unwrap() {}
            let q = s.start(&s.conf())?;
            if !ev.wait(Duration::from_secs(2)).unwrap() {
                return Err("no event at start".into());
            }
            s.stop(q)?;
            match ev.wait(Duration::from_secs(2)).unwrap() {
                true => Ok(()),
                false => Err("no event at stop".into()),
            }
        }
        Feature::RxInterrupt => {
            if !caps.rx_interrupts {
                return Err("capabilities say no rx interrupts".into());
            }
            let mut q = s.start(&s.conf())?;
            let mut rx = q.take_rx(0).map_err(|e| e.to_string())?;
            // Armed, as the run loop does before it sleeps on the fd.
            rx.set_interrupt(true).map_err(|e| e.to_string())?;
            if rx.interrupt_fd().is_none() {
                return Err("rx queue 0 armed has no interrupt fd".into());
            }
            rx.set_interrupt(false).map_err(|e| e.to_string())?;
            drop(rx);
            s.stop(q)
        }
        Feature::QueueStartStop => {
            let conf = PortConfig {
                tx_deferred: vec![0],
                ..s.conf()
            };
            let mut q = s.start(&conf)?;
            let mut out = Pkts::new();
            out.push(frame(&s.pool)).unwrap();
            if q.tx_burst(0, &mut out) != 0 {
                return Err("a deferred tx queue sent".into());
            }
            s.port.tx_queue_start(0).map_err(|e| e.to_string())?;
            if !s.send(&mut q, out.pop().unwrap()) {
                return Err("a started tx queue sends nothing".into());
            }
            s.port.rx_queue_stop(0).map_err(|e| e.to_string())?;
            s.port.rx_queue_start(0).map_err(|e| e.to_string())?;
            s.stop(q)
        }
        Feature::MtuUpdate => {
            let old = s.port.mtu();
            s.port.set_mtu(1280).map_err(|e| e.to_string())?;
            let now = s.port.mtu();
            s.port.set_mtu(old).map_err(|e| e.to_string())?;
            match now {
                1280 => Ok(()),
                m => Err(format!("set 1280, read {m}")),
            }
        }
        Feature::ScatteredRx => offload(s, Offloads::RX_SCATTER),
        Feature::MultiSegmentTx => {
            offload(s, Offloads::TX_MULTI_SEGS)?;
            let conf = PortConfig {
                offloads: Offloads::TX_MULTI_SEGS,
                ..s.conf()
            };
            let mut q = s.start(&conf)?;
            let mut head = frame(&s.pool);
            let mut tail = s.pool.get().unwrap();
            tail.append(40).unwrap().fill(7);
            head.chain(tail).map_err(|_| "chaining".to_string())?;
            let sent = s.send(&mut q, head);
            s.stop(q)?;
            match sent {
                true => Ok(()),
                false => Err("a two-segment chain was not taken".into()),
            }
        }
        Feature::PromiscuousMode => toggle(s, "promiscuous", |p, on| {
            p.set_promiscuous(on).map(|()| p.promiscuous())
        }),
        Feature::AllmulticastMode => toggle(s, "all-multicast", |p, on| {
            p.set_allmulticast(on).map(|()| p.allmulticast())
        }),
        Feature::MacFilter => {
            let group = MacAddr([0x01, 0, 0x5e, 0, 0, 1]);
            s.port
                .set_mac_filter(&[MacAddr::local(0x1234)], &[group])
                .and_then(|()| s.port.set_mac_filter(&[], &[]))
                .map_err(|e| e.to_string())
        }
        Feature::RssHash => {
            offload(s, Offloads::RX_RSS)?;
            let conf = PortConfig {
                rx_queues: 2.min(caps.max_rx_queues),
                offloads: Offloads::RX_RSS,
                ..s.conf()
            };
            let q = s.start(&conf)?;
            s.stop(q)
        }
        Feature::RssKeyUpdate => {
            let hash = s.port.rss_caps().hash;
            let rss = RssConfig {
                key: std::array::from_fn(|i| i as u8 ^ 0x3c),
                hash,
                reta: Vec::new(),
            };
            let conf = PortConfig {
                rx_queues: 2.min(caps.max_rx_queues),
                offloads: Offloads::RX_RSS,
                rss: rss.clone(),
                ..s.conf()
            };
            let q = s.start(&conf)?;
            let shown = s.port.rss_conf().map_err(|e| e.to_string())?;
            s.stop(q)?;
            if (shown.hash, shown.key) != (rss.hash, rss.key) {
                return Err(format!("configured {rss:?}, read back {shown:?}"));
            }
            // An update (a new key, the hashed headers kept), read back
            // and kept across a start.
            let key = std::array::from_fn(|i| i as u8 ^ 0xa5);
            s.port
                .set_rss_hash(hash, Some(key))
                .map_err(|e| e.to_string())?;
            let q = s.port.start().map_err(|e| format!("start: {e}"))?;
            let shown = s.port.rss_conf().map_err(|e| e.to_string());
            // And one while running (DPDK's rss_hash_update on a started
            // port).
            let running_key = std::array::from_fn(|i| i as u8 ^ 0x5a);
            let running = s
                .port
                .set_rss_hash(hash, Some(running_key))
                .and_then(|()| s.port.rss_conf())
                .map_err(|e| format!("an update while running: {e}"));
            s.stop(q)?;
            let (shown, running) = (shown?, running?);
            if shown.key != key {
                return Err(format!("updated the key, read back {shown:?}"));
            }
            match running.key == running_key {
                true => Ok(()),
                false => Err(format!(
                    "updated the key while running, read back {running:?}"
                )),
            }
        }
        Feature::RssRetaUpdate => {
            let size = s.port.rss_caps().reta_size as usize;
            let conf = PortConfig {
                rx_queues: 2.min(caps.max_rx_queues),
                offloads: Offloads::RX_RSS,
                ..s.conf()
            };
            let q = s.start(&conf)?;
            let set = s
                .port
                .set_rss_reta(&vec![1; size])
                .and_then(|()| s.port.rss_conf())
                .map_err(|e| e.to_string());
            s.stop(q)?;
            match set?.reta == vec![1; size] {
                true => Ok(()),
                false => Err("the table set does not read back".into()),
            }
        }
        Feature::VlanFilter => {
            let conf = PortConfig {
                offloads: Offloads::RX_VLAN_FILTER,
                ..s.conf()
            };
            let q = s.start(&conf)?;
            s.port.set_vlan_filter(5, true).map_err(|e| e.to_string())?;
            if s.port.set_vlan_filter(4096, true).is_ok() {
                return Err("VLAN 4096 accepted".into());
            }
            s.stop(q)
        }
        Feature::VlanOffload => {
            let conf = PortConfig {
                offloads: Offloads::RX_VLAN_STRIP | Offloads::TX_VLAN_INSERT,
                ..s.conf()
            };
            let mut q = s.start(&conf)?;
            let mut m = frame(&s.pool);
            m.set_vlan_tci(5);
            m.set_ol_flags(TX_VLAN);
            let sent = s.send(&mut q, m);
            s.stop(q)?;
            match sent {
                true => Ok(()),
                false => Err("a frame to tag was not taken".into()),
            }
        }
        Feature::ChecksumOffload => {
            let csum = caps.offloads.0 & (Offloads::RX_CHECKSUM.0 | Offloads::TX_CHECKSUM.0);
            let conf = PortConfig {
                offloads: Offloads(csum),
                ..s.conf()
            };
            let q = s.start(&conf)?;
            s.stop(q)
        }
        Feature::PacketTypeParsing => {
            let conf = PortConfig {
                rx_ptypes: true,
                ..s.conf()
            };
            let q = s.start(&conf)?;
            s.stop(q)
        }
        Feature::BasicStats => {
            let mut q = s.start(&s.conf())?;
            s.port.reset_stats();
            let sent = (0..4).filter(|_| s.send(&mut q, frame(&s.pool))).count() as u64;
            let seen = s.port.stats().opackets;
            s.stop(q)?;
            match (sent, seen) {
                (4, 4) => Ok(()),
                _ => Err(format!("sent {sent}, opackets {seen}")),
            }
        }
        Feature::ExtendedStats | Feature::StatsPerQueue => {
            let q = s.start(&s.conf())?;
            let names: Vec<String> = s.port.xstats().into_iter().map(|x| x.name).collect();
            s.stop(q)?;
            match ["rx_q0_packets", "tx_q0_packets"]
                .iter()
                .all(|n| names.iter().any(|x| x == n))
            {
                true => Ok(()),
                false => Err(format!("no per-queue packet counters in {names:?}")),
            }
        }
        Feature::FwVersion => match s.port.fw_version() {
            Some(_) => Ok(()),
            None => Err("no firmware version".into()),
        },
    }
}

/// The offload is offered and a configuration asking for it is taken.
fn offload(s: &mut Subject, o: Offloads) -> Result<(), String> {
    if !s.port.capabilities().offloads.contains(o) {
        return Err(format!("capabilities lack {o}"));
    }
    let conf = PortConfig {
        offloads: o,
        ..s.conf()
    };
    s.port.configure(&conf).map_err(|e| e.to_string())
}

/// A receive mode that can be turned off and on again, and reads back.
fn toggle(
    s: &mut Subject,
    what: &str,
    set: impl Fn(&mut dyn Port, bool) -> Result<bool, rpmd_pmd::Error>,
) -> Result<(), String> {
    for on in [false, true] {
        match set(s.port.as_mut(), on) {
            Ok(now) if now == on => {}
            Ok(now) => return Err(format!("{what} set {on}, reads {now}")),
            Err(e) => return Err(format!("{what} {on}: {e}")),
        }
    }
    Ok(())
}

/// What the port shows that a declaration must back: a capability or an
/// answer it gives without being declared fails, as a declaration the
/// check refuses does.
fn undeclared(s: &mut Subject, decl: &[Declared]) -> Vec<Feature> {
    let caps = s.port.capabilities();
    let has = |f: Feature| decl.iter().any(|d| d.0 == f);
    let shown = [
        (Feature::RxInterrupt, caps.rx_interrupts),
        (
            Feature::ScatteredRx,
            caps.offloads.contains(Offloads::RX_SCATTER),
        ),
        (
            Feature::MultiSegmentTx,
            caps.offloads.contains(Offloads::TX_MULTI_SEGS),
        ),
        (Feature::RssHash, caps.offloads.contains(Offloads::RX_RSS)),
        (Feature::RssKeyUpdate, s.port.rss_caps().key),
        (Feature::RssRetaUpdate, s.port.rss_caps().reta_size > 0),
        (
            Feature::ChecksumOffload,
            caps.offloads.0 & (Offloads::RX_CHECKSUM.0 | Offloads::TX_CHECKSUM.0) != 0,
        ),
        (Feature::FwVersion, s.port.fw_version().is_some()),
        (Feature::LinkStatusEvent, s.port.link_events().is_ok()),
    ];
    shown
        .into_iter()
        .filter(|(f, on)| *on && !has(*f))
        .map(|(f, _)| f)
        .collect()
}

/// Every declared feature of `s`'s kind exercised, nothing shown
/// undeclared; the failures listed together.
fn conformance(mut s: Subject) {
    let decl = declared(s.kind);
    let mut failed = Vec::new();
    for f in undeclared(&mut s, &decl) {
        failed.push(format!("{}: shown but not declared", f.name()));
    }
    for (f, support) in &decl {
        let res = check(&mut s, *f);
        // Whatever the check left running stops (a stopped port's stop
        // is a no-op).
        let _ = s.port.stop();
        if let Err(e) = res {
            // A partial feature may be absent with this peer; a refusal
            // must then say so (caps lack it), not fail otherwise.
            let partial_absent = matches!(support, Support::Partial(_))
                && (e.starts_with("capabilities") || e.contains("no rx interrupts"));
            if !partial_absent {
                failed.push(format!("{}: {e}", f.name()));
            }
        }
    }
    drop(s.port);
    assert!(failed.is_empty(), "{}: {failed:#?}", s.kind);
}

fn sock(tag: &str) -> String {
    format!("/tmp/rpmd-feat-{tag}-{}.sock", std::process::id())
}

#[test]
fn null_offers_what_it_declares() {
    conformance(subject("null", "null", None, None));
}

#[test]
fn ring_offers_what_it_declares() {
    let name = format!("ring:feat-{}", std::process::id());
    conformance(subject("ring", &name, Some(&name), None));
}

#[test]
fn shm_offers_what_it_declares() {
    let name = format!("shm:feat-{}", std::process::id());
    conformance(subject("shm", &name, Some(&name), None));
}

#[test]
fn vhost_user_offers_what_it_declares() {
    let s = sock("vhost");
    let peer = format!("virtio-user:{s}");
    conformance(subject(
        "vhost-user",
        &format!("vhost-user:{s}"),
        Some(&peer),
        None,
    ));
}

#[test]
fn virtio_user_offers_what_it_declares() {
    let s = sock("vuser");
    let reg = rpmd_apps::cli::registry();
    let pool = pool("vuser-back");
    let mut back = reg.open(&format!("vhost-user:{s}")).unwrap();
    back.configure(&PortConfig::with_pool(&pool)).unwrap();
    let bq = back.start().unwrap();
    let mut sub = subject("virtio-user", &format!("virtio-user:{s}"), None, None);
    sub._peer = Some((back, bq));
    conformance(sub);
}

#[test]
fn mlx4_model_offers_what_it_declares() {
    conformance(subject(
        "mlx4-model",
        "mlx4-model:feat,port=1,wire=1",
        Some("mlx4-model:feat,port=2"),
        None,
    ));
}

/// A kernel port kind on a veth whose far end is in a namespace.
fn kernel_subject(test: &str, kind: &'static str) -> Option<Subject> {
    if !lab_available(test) {
        return None;
    }
    let mut lab = Lab::new();
    let ns = lab.netns("f");
    let root = lab.veth("rf", &ns, "eth0", "10.74.0.1/24", 2);
    Some(subject(kind, &format!("{kind}:{root}"), None, Some(lab)))
}

#[test]
fn af_packet_offers_what_it_declares() {
    if let Some(s) = kernel_subject("af_packet_offers_what_it_declares", "af_packet") {
        conformance(s);
    }
}

#[test]
fn af_xdp_offers_what_it_declares() {
    if let Some(s) = kernel_subject("af_xdp_offers_what_it_declares", "af_xdp") {
        conformance(s);
    }
}

#[test]
fn tap_offers_what_it_declares() {
    if !lab_available("tap_offers_what_it_declares") {
        return;
    }
    let name = format!("rpfeat{}", std::process::id() % 100000);
    conformance(subject("tap", &format!("tap:{name}"), None, None));
}
