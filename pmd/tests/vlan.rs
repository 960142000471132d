//! The VLAN offloads every port gets from the generic port (in software
//! where its device has none): insert, strip and filter, over ring pairs
//! and shm links, every byte checked and every drop counted.
use rpmd_pmd::mbuf::{RX_VLAN, RX_VLAN_STRIPPED, TX_VLAN};
use rpmd_pmd::port::{Offloads, Pkts, Port, PortConfig};
use rpmd_pmd::{Mbuf, Mempool, MempoolConfig, Registry};

fn pool(name: &str, n: u32) -> Mempool {
    let mut c = MempoolConfig::new(name, n);
    c.cache_size = 0;
    Mempool::new(&c).unwrap()
}

/// An untagged frame: MACs, EtherType 0x0800, then `tag` in every byte.
fn plain(p: &Mempool, tag: u8, len: usize) -> Mbuf {
    let mut m = p.get().unwrap();
    let d = m.append(len).unwrap();
    d.fill(tag);
    d[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    d[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    d[12..14].copy_from_slice(&[0x08, 0x00]);
    m
}

/// The same frame with an 802.1Q tag of `tci` after its MACs.
fn tagged_bytes(tag: u8, len: usize, tci: u16) -> Vec<u8> {
    let mut v = vec![tag; len + 4];
    v[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    v[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    v[12..14].copy_from_slice(&[0x81, 0x00]);
    v[14..16].copy_from_slice(&tci.to_be_bytes());
    v[16..18].copy_from_slice(&[0x08, 0x00]);
    v
}

fn tagged(p: &Mempool, tag: u8, len: usize, tci: u16) -> Mbuf {
    let mut m = p.get().unwrap();
    m.append(len + 4)
        .unwrap()
        .copy_from_slice(&tagged_bytes(tag, len, tci));
    m
}

fn with_offloads(offloads: Offloads) -> PortConfig {
    PortConfig {
        offloads,
        ..PortConfig::default()
    }
}

/// Two ports joined back to back (`kind` `ring` or `shm`), configured
/// with `a` and `b`'s offloads, receiving into `pool`.
fn pair(kind: &str, name: &str, a: Offloads, b: Offloads, pool: &Mempool) -> Pair {
    let r = Registry::new();
    let mut pa = r.open(&format!("{kind}:{name}")).unwrap();
    let mut pb = r.open(&format!("{kind}:{name}")).unwrap();
    for (p, o) in [(&mut pa, a), (&mut pb, b)] {
        assert!(p.capabilities().offloads.contains(Offloads::SOFTWARE));
        let conf = PortConfig {
            rx_pool: Some(pool.clone()),
            ..with_offloads(o)
        };
        p.configure(&conf).unwrap();
    }
    let qa = pa.start().unwrap();
    let qb = pb.start().unwrap();
    Pair {
        a: pa,
        b: pb,
        qa,
        qb,
    }
}

struct Pair {
    a: Box<dyn Port>,
    b: Box<dyn Port>,
    qa: rpmd_pmd::Queues,
    qb: rpmd_pmd::Queues,
}

impl Pair {
    /// Sends `out` from A and returns what B received.
    fn cross(&mut self, mut out: Pkts) -> Pkts {
        let n = out.len();
        assert_eq!(self.qa.tx_burst(0, &mut out), n);
        let mut got = Pkts::new();
        for _ in 0..1000 {
            self.qb.rx_burst(0, &mut got, 32);
            if got.len() >= n {
                break;
            }
        }
        got
    }
}

fn xstat(p: &dyn Port, name: &str) -> u64 {
    p.xstats()
        .iter()
        .find(|x| x.name == name)
        .unwrap_or_else(|| panic!("no xstat {name}"))
        .value
}

/// TX insert: a flagged frame leaves with its TCI as a tag, an unflagged
/// one as it was; strip on the far side gives back the frame and the TCI.
#[test]
fn insert_then_strip_round_trips_every_byte() {
    for kind in ["ring", "shm"] {
        let mp = pool(&format!("vlan-rt-{kind}"), 512);
        let name = format!("vlan-rt-{}", std::process::id());
        let mut p = pair(kind, &name, Offloads::TX_VLAN_INSERT, Offloads::NONE, &mp);
        let mut out = Pkts::new();
        let mut m = plain(&mp, 7, 60);
        m.set_vlan_tci(0x2005);
        m.set_ol_flags(TX_VLAN);
        out.push(m).unwrap();
        out.push(plain(&mp, 8, 60)).unwrap();
        let got = p.cross(out);
        assert_eq!(got.len(), 2, "{kind}");
        assert_eq!(got[0].data(), &tagged_bytes(7, 60, 0x2005)[..], "{kind}");
        assert_eq!(got[1].data(), plain(&mp, 8, 60).data(), "{kind}");
        drop(got);
        drop(p);
        // And stripped on arrival.
        let mut p = pair(kind, &name, Offloads::NONE, Offloads::RX_VLAN_STRIP, &mp);
        let mut out = Pkts::new();
        out.push(tagged(&mp, 9, 60, 0xe00a)).unwrap();
        out.push(plain(&mp, 10, 60)).unwrap();
        let got = p.cross(out);
        assert_eq!(got[0].data(), plain(&mp, 9, 60).data(), "{kind}");
        assert_eq!(got[0].vlan_tci(), 0xe00a);
        assert_eq!(
            got[0].ol_flags() & (RX_VLAN | RX_VLAN_STRIPPED),
            RX_VLAN | RX_VLAN_STRIPPED
        );
        assert_eq!(got[1].data(), plain(&mp, 10, 60).data());
        assert_eq!(
            got[1].ol_flags() & RX_VLAN,
            0,
            "an untagged frame is not flagged"
        );
        drop(got);
        drop(p);
        assert_eq!(mp.available(), 512, "{kind}: every mbuf back in its pool");
    }
}

/// The filter drops tagged frames of VLANs not admitted (counted per
/// queue), passes untagged ones, and follows changes while the port runs.
#[test]
fn the_filter_admits_only_its_vlans_and_counts_the_rest() {
    let mp = pool("vlan-filter", 512);
    let name = format!("vlan-filter-{}", std::process::id());
    let mut p = pair("ring", &name, Offloads::NONE, Offloads::RX_VLAN_FILTER, &mp);
    p.b.set_vlan_filter(5, true).unwrap();
    assert!(p.b.set_vlan_filter(4096, true).is_err());
    let mut out = Pkts::new();
    for (i, tci) in [5u16, 6, 0x2005, 6].into_iter().enumerate() {
        out.push(tagged(&mp, i as u8, 60, tci)).unwrap();
    }
    out.push(plain(&mp, 9, 60)).unwrap();
    let got = p.cross(out);
    // The TCI of each tagged frame, None for the untagged one.
    let tcis: Vec<Option<u16>> = got
        .iter()
        .map(|m| {
            let d = m.data();
            (d[12..14] == [0x81, 0x00]).then(|| u16::from_be_bytes([d[14], d[15]]))
        })
        .collect();
    assert_eq!(
        tcis,
        vec![Some(5), Some(0x2005), None],
        "VLAN 5 twice (priority aside) and the untagged frame"
    );
    assert_eq!(xstat(&*p.b, "rx_q0_vlan_filtered"), 2);
    // Admitted while running.
    p.b.set_vlan_filter(6, true).unwrap();
    p.b.set_vlan_filter(5, false).unwrap();
    let mut out = Pkts::new();
    out.push(tagged(&mp, 1, 60, 6)).unwrap();
    out.push(tagged(&mp, 2, 60, 5)).unwrap();
    let got2 = p.cross(out);
    assert_eq!(got2.len(), 1);
    assert_eq!(got2[0].data(), &tagged_bytes(1, 60, 6)[..]);
    assert_eq!(xstat(&*p.b, "rx_q0_vlan_filtered"), 3);
    p.b.reset_stats();
    assert_eq!(xstat(&*p.b, "rx_q0_vlan_filtered"), 0);
    drop((got, got2));
    drop(p);
    assert_eq!(
        mp.available(),
        512,
        "the filtered mbufs went back to the pool"
    );
}

/// A flagged frame with no headroom for its tag is dropped and counted in
/// `oerrors`; the frames around it still go, in order.
#[test]
fn a_frame_without_room_for_its_tag_is_dropped_and_counted() {
    let mp = pool("vlan-room", 64);
    let name = format!("vlan-room-{}", std::process::id());
    let mut p = pair("ring", &name, Offloads::TX_VLAN_INSERT, Offloads::NONE, &mp);
    let mut out = Pkts::new();
    out.push(plain(&mp, 1, 60)).unwrap();
    let mut full = mp.get().unwrap();
    let room = full.headroom();
    full.prepend(room).unwrap();
    full.append(60).unwrap();
    full.set_ol_flags(TX_VLAN);
    out.push(full).unwrap();
    out.push(plain(&mp, 3, 60)).unwrap();
    let got = p.cross(out);
    assert_eq!(got.len(), 2);
    assert_eq!((got[0].data()[20], got[1].data()[20]), (1, 3));
    assert_eq!(p.a.stats().oerrors, 1);
    assert_eq!(xstat(&*p.a, "tx_q0_vlan_no_room"), 1);
    drop(got);
    drop(p);
    assert_eq!(mp.available(), 64);
}

/// A port configured without VLAN offloads hands its queues out as the
/// device made them, and says nothing of VLAN counters.
#[test]
fn ports_without_vlan_offloads_are_left_alone() {
    let mp = pool("vlan-none", 64);
    let name = format!("vlan-none-{}", std::process::id());
    let mut p = pair("ring", &name, Offloads::NONE, Offloads::NONE, &mp);
    let mut out = Pkts::new();
    out.push(tagged(&mp, 1, 60, 3)).unwrap();
    let got = p.cross(out);
    assert_eq!(got[0].data(), &tagged_bytes(1, 60, 3)[..]);
    assert!(!p.b.xstats().iter().any(|x| x.name.contains("vlan")));
}
