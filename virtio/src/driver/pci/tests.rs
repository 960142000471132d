//! The virtio-net PCI driver against the software device of `model.rs`,
//! through the registry, a [`ModelBus`] and the [`PciFunction`] trait:
//! the same driver code as over VFIO, no QEMU.
//!
//! [`PciFunction`]: rpmd_pmd::function::PciFunction
use super::model::{NetModel, MAC};
use rpmd_pmd::function::ModelBus;
use rpmd_pmd::{Mempool, MempoolConfig, Pkts, PortConfig, Registry};
use std::sync::Arc;

fn registry(model: &Arc<NetModel>) -> Registry {
    let mut bus = ModelBus::new();
    let m = model.clone();
    bus.insert(model.describe(), Box::new(move |d| m.open(d)));
    let mut reg = Registry::empty().with_bus(Box::new(bus));
    crate::register(&mut reg);
    reg
}

fn pool(name: &str, n: u32) -> Mempool {
    let mut c = MempoolConfig::new(name, n);
    c.cache_size = 0;
    Mempool::new(&c).unwrap()
}

fn frame(pool: &Mempool, tag: u16, len: usize) -> rpmd_pmd::Mbuf {
    let mut m = pool.get().unwrap();
    let d = m.append(len).unwrap();
    for (i, b) in d.iter_mut().enumerate() {
        *b = (i as u16).wrapping_mul(7).wrapping_add(tag) as u8;
    }
    d[..2].copy_from_slice(&tag.to_be_bytes());
    m
}

#[test]
fn the_pci_driver_runs_on_a_model_through_the_function_trait() {
    let model = NetModel::new("0000:00:05.0".parse().unwrap(), false);
    let reg = registry(&model);
    let rx_pool = pool("model-rx", 512);
    let mut p = reg.open("pci:0000:00:05.0").unwrap();
    assert_eq!(p.driver(), "virtio-net-pci");
    assert_eq!(p.mac_addr().0, MAC);
    p.configure(&PortConfig {
        rx_pool: Some(rx_pool.clone()),
        ..PortConfig::default()
    })
    .unwrap();
    let mut q = p.start().unwrap();
    assert!(p.link().up);
    let (rx, tx) = (&mut q.rx[0], &mut q.tx[0]);
    let mut out = Pkts::new();
    let mut got = Vec::new();
    let mut inp = Pkts::new();
    // Frames of another pool, registered in the registry's domain after
    // the port started, go out as well (one DMA domain for all ports).
    let other = pool("model-other", 64);
    reg.domain().register_pool(&other).unwrap();
    for burst in 0..8u16 {
        for k in 0..32 {
            let tag = burst * 32 + k;
            let from = if k % 4 == 0 { &other } else { &rx_pool };
            out.push(frame(from, tag, 60 + tag as usize)).unwrap();
        }
        assert_eq!(tx.tx_burst(&mut out), 32);
        while rx.rx_burst(&mut inp, 32) > 0 {
            while let Some(m) = inp.pop() {
                got.push(m.data().to_vec());
            }
        }
    }
    assert_eq!(got.len(), 256, "every frame came back");
    got.sort_by_key(|f| u16::from_be_bytes([f[0], f[1]]));
    for (tag, f) in got.iter().enumerate() {
        let want = frame(&rx_pool, tag as u16, 60 + tag);
        assert_eq!(f[..], want.data()[..], "frame {tag}");
    }
    // A pool nobody registered: the device cannot reach it, so the
    // frame is dropped and counted, and the model sees no DMA to it.
    let stray = pool("model-stray", 8);
    out.push(frame(&stray, 999, 64)).unwrap();
    assert_eq!(tx.tx_burst(&mut out), 0);
    assert!(out.is_empty());
    assert_eq!(p.stats().oerrors, 1);
    assert_eq!(stray.available(), 8);
    assert_eq!(model.counts(), (256, 256));
    p.stop().unwrap();
    drop(q);
    assert_eq!(rx_pool.available(), 512, "every buffer back");
    assert_eq!(other.available(), 64);
    assert!(model.mapped_regions() >= 3, "pools and rings mapped");
    drop(p);
    assert!(model.violations().is_empty(), "{:?}", model.violations());
}

#[test]
fn a_model_that_refuses_the_features_fails_the_start_cleanly() {
    let model = NetModel::new("0000:00:06.0".parse().unwrap(), true);
    let reg = registry(&model);
    let rx_pool = pool("model-refuse", 256);
    let mut p = reg.open("pci:0000:00:06.0").unwrap();
    p.configure(&PortConfig {
        rx_pool: Some(rx_pool.clone()),
        ..PortConfig::default()
    })
    .unwrap();
    let Err(e) = p.start().map(drop) else {
        panic!("the start succeeded");
    };
    // The cause is a variant a caller can match, kept as the source.
    let cause = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<crate::Error>());
    assert!(
        matches!(cause, Some(crate::Error::FeaturesRefused { .. })),
        "{e:?}"
    );
    let e = e.to_string();
    assert!(e.contains("refused features"), "{e}");
    assert!(!p.link().up);
    assert!(model.violations().is_empty(), "{:?}", model.violations());
    assert_eq!(rx_pool.available(), 256);
}

#[test]
fn a_missing_model_address_is_an_error_naming_it() {
    let model = NetModel::new("0000:00:07.0".parse().unwrap(), false);
    let reg = registry(&model);
    let e = reg.open("pci:0000:00:08.0").err().unwrap().to_string();
    assert!(
        e.contains("0000:00:08.0") && e.contains("no device model"),
        "{e}"
    );
}

/// A pulled cable and a plugged one (the status field's link bit) reach
/// the app as link events while the port runs, found by the watch's own
/// reads on a function with no MSI-X; none after the port stops.
#[test]
fn link_changes_raise_link_events() {
    use std::time::{Duration, Instant};
    let model = NetModel::new("0000:00:07.0".parse().unwrap(), false);
    let reg = registry(&model);
    let rx_pool = pool("model-link", 256);
    let mut p = reg.open("pci:0000:00:07.0").unwrap();
    let events = p.link_events().unwrap();
    p.configure(&PortConfig {
        rx_pool: Some(rx_pool.clone()),
        ..PortConfig::default()
    })
    .unwrap();
    let q = p.start().unwrap();
    let _ = events.take();
    for up in [false, true] {
        model.set_link(up);
        let t = Instant::now();
        assert!(
            events.wait(Duration::from_secs(2)).unwrap(),
            "no event for link {up}: {:?}",
            p.xstats()
        );
        assert_eq!(p.link().up, up);
        eprintln!("link {up}: event after {:?}", t.elapsed());
        let changes = p.xstats().into_iter().find(|x| x.name == "link_changes");
        assert!(changes.is_some_and(|x| x.value >= 1));
    }
    drop(q);
    p.stop().unwrap();
    let _ = events.take();
    model.set_link(false);
    assert!(
        !events.wait(Duration::from_millis(300)).unwrap(),
        "a stopped port watches nothing"
    );
    assert!(model.violations().is_empty(), "{:?}", model.violations());
}
