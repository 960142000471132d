//! The igb driver on rpmd's register-level model of the 82576
//! (`rpmd_igb::model`), on any host: bring-up, frames through the model's
//! loopback byte for byte (chained, scattered, offloaded), a full
//! transmit ring, and the inputs a broken or hostile device gives: stuck
//! in reset, a corrupt EEPROM, a foreign device ID, receive write-backs
//! with impossible lengths, no end of frame, or errors. Every case ends
//! with every mbuf home and no DMA outside mapped memory.
mod common;
use common::{bytes, finish, receive};
use rpmd_igb::model::{model_mac, Hostile, IgbModel, ModelOptions};
use rpmd_igb::regs::{RXD_STAT_DD, RXD_STAT_EOP};
use rpmd_igb::{open_port, Error, IgbPort};
use rpmd_pmd::mbuf::{
    RX_IP_CKSUM_GOOD, RX_L4_CKSUM_GOOD, RX_L4_CKSUM_MASK, RX_VLAN_STRIPPED, TX_IP_CKSUM,
    TX_TCP_SEG, TX_UDP_CKSUM, TX_VLAN,
};
use rpmd_pmd::net::{fold, ipv4_header_checksum, ones_sum, pseudo_header_sum};
use rpmd_pmd::pci::PciAddr;
use rpmd_pmd::port::Offloads;
use rpmd_pmd::{DmaDomain, Mbuf, Mempool, MempoolConfig, Pkts, Port, PortConfig, Queues};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn addr() -> PciAddr {
    "0000:00:07.0".parse().unwrap()
}

/// A model, a pool and a started port on it.
fn started(
    opts: ModelOptions,
    conf: impl FnOnce(&Mempool) -> PortConfig,
) -> (Arc<IgbModel>, Mempool, IgbPort, Queues) {
    let model = IgbModel::new(addr(), opts);
    let domain = DmaDomain::new();
    let func = model.open(&domain).unwrap();
    let pool = Mempool::new(&MempoolConfig::new("igb-model", 2048)).unwrap();
    let mut port = open_port("pci:0000:00:07.0", func, 0).unwrap();
    port.configure(&conf(&pool)).unwrap();
    let q = port.start().unwrap();
    (model, pool, port, q)
}

fn loopback() -> ModelOptions {
    ModelOptions {
        loopback: true,
        ..ModelOptions::default()
    }
}

fn frame(len: usize, seq: u32) -> Vec<u8> {
    let mut f = model_mac().0.to_vec();
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 0x88, 0xb5]);
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend((f.len()..len).map(|i| (i as u32).wrapping_mul(seq | 1) as u8));
    f
}

fn mbuf(pool: &Mempool, bytes: &[u8], seg: usize) -> Mbuf {
    let mut head: Option<Mbuf> = None;
    for c in bytes.chunks(seg) {
        let mut m = pool.get().unwrap();
        m.append(c.len()).unwrap().copy_from_slice(c);
        match head.as_mut() {
            None => head = Some(m),
            Some(h) => h.chain(m).map_err(drop).unwrap(),
        }
    }
    head.unwrap()
}

#[test]
fn frames_loop_back_byte_for_byte() {
    let (model, pool, port, mut q) = started(loopback(), PortConfig::with_pool);
    assert_eq!(port.mac_addr(), model_mac());
    assert_eq!(port.fw_version().as_deref(), Some("1.35-4"));
    assert!(port.link().up);
    for round in 0..8u32 {
        let frames: Vec<Vec<u8>> = (0..32)
            .map(|k| frame(60 + (k * 47) % 1455, round * 32 + k as u32))
            .collect();
        let mut out = Pkts::new();
        for f in &frames {
            let _ = out.push(mbuf(&pool, f, 2048));
        }
        assert_eq!(q.tx_burst(0, &mut out), 32);
        let got = receive(&mut q, 32);
        let got: Vec<Vec<u8>> = got.iter().map(bytes).collect();
        assert_eq!(got, frames, "round {round}");
    }
    let st = port.stats();
    assert_eq!((st.ipackets, st.opackets), (256, 256));
    let x = port.xstats();
    let v = |n: &str| x.iter().find(|x| x.name == n).map(|x| x.value);
    assert_eq!(v("tx_good_packets"), Some(256));
    assert_eq!(v("rx_good_packets"), Some(256));
    finish(&model, &pool, port, q);
}

#[test]
fn chains_go_out_whole_and_jumbo_frames_come_in_as_chains() {
    let (model, pool, port, mut q) = started(loopback(), |p| PortConfig {
        mtu: Some(9000),
        offloads: Offloads(Offloads::RX_SCATTER.0 | Offloads::TX_MULTI_SEGS.0),
        ..PortConfig::with_pool(p)
    });
    let f = frame(9014, 7);
    let mut out = Pkts::new();
    let _ = out.push(mbuf(&pool, &f, 1000));
    assert_eq!(q.tx_burst(0, &mut out), 1);
    let got = receive(&mut q, 1);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].nb_segs(), 5, "2 KiB receive buffers");
    assert_eq!(bytes(&got[0]), f);
    drop(got);
    finish(&model, &pool, port, q);
}

#[test]
fn jumbo_mtu_without_scatter_or_big_mbufs_is_refused() {
    let model = IgbModel::new(addr(), ModelOptions::default());
    let func = model.open(&DmaDomain::new()).unwrap();
    let pool = Mempool::new(&MempoolConfig::new("igb-model-mtu", 256)).unwrap();
    let mut port = open_port("pci:0000:00:07.0", func, 0).unwrap();
    let e = port
        .configure(&PortConfig {
            mtu: Some(9000),
            ..PortConfig::with_pool(&pool)
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("rx-scatter"), "{e}");
}

#[test]
fn checksums_and_vlan_tags_are_offloaded_both_ways() {
    let (model, pool, port, mut q) = started(loopback(), |p| PortConfig {
        offloads: Offloads(
            Offloads::RX_CHECKSUM.0
                | Offloads::TX_CHECKSUM.0
                | Offloads::RX_VLAN_STRIP.0
                | Offloads::TX_VLAN_INSERT.0,
        ),
        ..PortConfig::with_pool(p)
    });
    let mut f = model_mac().0.to_vec();
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 0x08, 0x00]);
    f.extend_from_slice(&[
        0x45, 0, 0, 48, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    f.extend_from_slice(&[0x0f, 0xa0, 0x13, 0x88, 0, 28, 0, 0]);
    f.extend((0..20).map(|k| k as u8));
    let ph = pseudo_header_sum(&f[14..34]).unwrap();
    f[40..42].copy_from_slice(&ph.to_be_bytes());
    let mut m = mbuf(&pool, &f, 2048);
    m.set_tx_header_lens(14, 20);
    m.set_vlan_tci(0x0123);
    m.set_ol_flags(TX_IP_CKSUM | TX_UDP_CKSUM | TX_VLAN);
    let mut out = Pkts::new();
    let _ = out.push(m);
    assert_eq!(q.tx_burst(0, &mut out), 1);
    let got = receive(&mut q, 1);
    let r = bytes(&got[0]);
    assert_eq!(
        ipv4_header_checksum(&r[14..34]),
        u16::from_be_bytes([r[24], r[25]])
    );
    let ph = pseudo_header_sum(&r[14..34]).unwrap() as u32;
    assert_eq!(fold(ones_sum(&r[34..62], ph)), 0xffff, "UDP checksum");
    let fl = got[0].ol_flags();
    assert_ne!(fl & RX_IP_CKSUM_GOOD, 0, "{fl:#x}");
    assert_eq!(fl & RX_L4_CKSUM_MASK, RX_L4_CKSUM_GOOD, "{fl:#x}");
    assert_ne!(fl & RX_VLAN_STRIPPED, 0, "{fl:#x}");
    assert_eq!(got[0].vlan_tci(), 0x0123);
    drop(got);
    finish(&model, &pool, port, q);
}

#[test]
fn tcp_segmentation_sends_mss_sized_segments() {
    let (model, pool, port, mut q) = started(ModelOptions::default(), |p| PortConfig {
        offloads: Offloads(Offloads::TX_TSO.0 | Offloads::TX_MULTI_SEGS.0),
        ..PortConfig::with_pool(p)
    });
    let mut f = model_mac().0.to_vec();
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 0x08, 0x00]);
    f.extend_from_slice(&[
        0x45, 0, 0x0f, 0xa0, 0, 7, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    f.extend_from_slice(&[
        0x04, 0xd2, 0, 80, 0, 0, 1, 0, 0, 0, 0, 0, 0x50, 0x19, 0xff, 0xff, 0, 0, 0, 0,
    ]);
    let ph = rpmd_pmd::net::pseudo_header_sum_tso(&f[14..34]).unwrap();
    f[50..52].copy_from_slice(&ph.to_be_bytes());
    let data: Vec<u8> = (0..3960usize).map(|k| (k % 253) as u8).collect();
    f.extend_from_slice(&data);
    let mut m = mbuf(&pool, &f, 1500);
    m.set_tx_header_lens(14, 20);
    m.set_tso(20, 1000);
    m.set_ol_flags(TX_TCP_SEG | TX_IP_CKSUM);
    let mut out = Pkts::new();
    let _ = out.push(m);
    assert_eq!(q.tx_burst(0, &mut out), 1);
    let segs = model.take_sent();
    assert_eq!(segs.len(), 4);
    let mut joined = Vec::new();
    for (k, g) in segs.iter().enumerate() {
        let len = (3960 - 1000 * k).min(1000);
        assert_eq!(g.len(), 54 + len, "segment {k}");
        assert_eq!(u16::from_be_bytes([g[16], g[17]]) as usize, 40 + len);
        assert_eq!(
            u32::from_be_bytes([g[38], g[39], g[40], g[41]]),
            0x100 + 1000 * k as u32
        );
        assert_eq!(g[47] & 0x01 != 0, k == 3, "FIN on the last only");
        assert_eq!(
            ipv4_header_checksum(&g[14..34]),
            u16::from_be_bytes([g[24], g[25]])
        );
        let ph = pseudo_header_sum(&g[14..34]).unwrap() as u32;
        assert_eq!(
            fold(ones_sum(&g[34..], ph)),
            0xffff,
            "TCP checksum of segment {k}"
        );
        joined.extend_from_slice(&g[54..]);
    }
    assert_eq!(joined, data);
    finish(&model, &pool, port, q);
}

#[test]
fn a_full_transmit_ring_takes_what_fits_and_leaves_the_rest() {
    // Nothing is sent back and nothing reclaims until the model's sink
    // is drained: the ring holds 31 frames (one descriptor stays empty).
    let (model, pool, port, mut q) = started(ModelOptions::default(), |p| PortConfig {
        tx_desc: 32,
        ..PortConfig::with_pool(p)
    });
    let mut out = Pkts::new();
    for k in 0..64 {
        let _ = out.push(mbuf(&pool, &frame(64, k), 2048));
    }
    let first = q.tx_burst(0, &mut out);
    assert_eq!(first, 31, "a 32-descriptor ring takes 31");
    assert_eq!(out.len(), 33, "the rest stay with the caller");
    // The model sent them and wrote DD: the next burst reclaims and goes on.
    let second = q.tx_burst(0, &mut out);
    assert_eq!(second, 31);
    assert_eq!(model.take_sent().len(), 62);
    while q.tx_burst(0, &mut out) > 0 {}
    assert!(out.is_empty());
    assert_eq!(q.tx_in_flight(0), 0);
    finish(&model, &pool, port, q);
}

#[test]
fn a_device_stuck_in_reset_fails_the_open_in_bounded_time() {
    let model = IgbModel::new(
        addr(),
        ModelOptions {
            stuck_in_reset: true,
            ..ModelOptions::default()
        },
    );
    let func = model.open(&DmaDomain::new()).unwrap();
    let t = Instant::now();
    let e = open_port("pci:0000:00:07.0", func, 0).err().unwrap();
    assert!(t.elapsed() < Duration::from_secs(2));
    let msg = e.to_string();
    assert!(
        msg.contains("CTRL.RST") && msg.contains("0000:00:07.0"),
        "{msg}"
    );
}

#[test]
fn a_corrupt_eeprom_or_a_foreign_device_is_refused() {
    let bad = IgbModel::new(
        addr(),
        ModelOptions {
            bad_eeprom_checksum: true,
            ..ModelOptions::default()
        },
    );
    let e = open_port("x", bad.open(&DmaDomain::new()).unwrap(), 0)
        .err()
        .unwrap();
    assert!(matches!(e, Error::EepromChecksum { .. }), "{e}");
    assert!(e.to_string().contains("checksum"), "{e}");
    let foreign = IgbModel::new(
        addr(),
        ModelOptions {
            device_id: Some(0x10D3),
            ..ModelOptions::default()
        },
    );
    let e = open_port("x", foreign.open(&DmaDomain::new()).unwrap(), 0)
        .err()
        .unwrap();
    assert!(matches!(e, Error::NotIgb { device: 0x10D3, .. }), "{e}");
}

/// A hostile model's write-backs: nothing delivered, each frame counted
/// an error, every mbuf home, and a clean frame still gets through
/// afterwards where the hostility is per frame.
fn hostile(h: Hostile, frames: usize) -> (u64, usize) {
    let (model, pool, port, mut q) = started(
        ModelOptions {
            hostile: Some(h),
            ..ModelOptions::default()
        },
        PortConfig::with_pool,
    );
    for k in 0..frames {
        model.receive(&frame(3000, k as u32));
    }
    let got = receive(&mut q, 1);
    let delivered = got.len();
    drop(got);
    let errors = port.stats().ierrors;
    finish(&model, &pool, port, q);
    (errors, delivered)
}

#[test]
fn impossible_lengths_are_dropped_and_counted() {
    let (errors, delivered) = hostile(Hostile::LengthBeyondBuffer, 20);
    assert_eq!(delivered, 0);
    assert_eq!(errors, 20, "one error per frame");
}

#[test]
fn frames_with_errors_are_dropped_and_counted() {
    let (errors, delivered) = hostile(Hostile::FrameError, 20);
    assert_eq!(delivered, 0);
    assert_eq!(errors, 20);
}

#[test]
fn a_device_that_never_ends_a_frame_cannot_hoard_mbufs() {
    // A ring's worth of 2 KiB pieces with no end: the gathered frame is
    // dropped once it passes the longest frame possible, and every piece
    // after it goes back to the pool at once (the frame never ends).
    let (errors, delivered) = hostile(Hostile::NeverEndOfPacket, 1000);
    assert_eq!(delivered, 0);
    assert_eq!(errors, 1, "one frame, dropped");
}

/// Frames shorter than an Ethernet header (none, 1 and 13 bytes: the
/// write-backs of three received frames rewritten in the ring) are the
/// device's errors: dropped, counted, their buffers posted again; the
/// frame after them arrives whole.
#[test]
fn runts_are_the_devices_errors() {
    let (model, pool, port, mut q) = started(ModelOptions::default(), PortConfig::with_pool);
    for k in 0..3 {
        assert!(model.receive(&frame(100, k)));
    }
    for (slot, len) in [0u16, 1, 13].into_iter().enumerate() {
        let mut wb = [0u8; 16];
        wb[8..12].copy_from_slice(&(RXD_STAT_DD | RXD_STAT_EOP).to_le_bytes());
        wb[12..14].copy_from_slice(&len.to_le_bytes());
        assert!(model.write_descriptor(true, 0, slot as u32, &wb));
    }
    let mut inb = Pkts::new();
    assert_eq!(q.rx_burst(0, &mut inb, 32), 0, "no runt handed out");
    let whole = frame(100, 9);
    assert!(model.receive(&whole));
    let got = receive(&mut q, 1);
    assert_eq!(got.len(), 1);
    assert_eq!(bytes(&got[0]), whole);
    drop(got);
    assert_eq!(port.stats().ierrors, 3);
    let xs = port.xstats();
    let dev = xs.iter().find(|x| x.name == "rx_q0_device_errors");
    assert_eq!(dev.map(|x| x.value), Some(3), "{xs:?}");
    finish(&model, &pool, port, q);
}

#[test]
fn a_stopped_port_takes_no_frames() {
    let (model, pool, mut port, q) = started(ModelOptions::default(), PortConfig::with_pool);
    port.stop().unwrap();
    assert!(
        !model.receive(&frame(100, 1)),
        "queue disabled, receiver off"
    );
    drop(q);
    drop(port);
    assert_eq!(pool.available(), pool.size());
}
