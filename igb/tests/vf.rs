//! The igb VF driver on rpmd's model of an 82576 virtual function, its
//! PF played as Linux's igb plays it (`rpmd_igb::model`, `PfBehaviour`):
//! the reset handshake and the MAC address the PF gives (or a random one
//! when it gives none), frames through the VF's queues byte for byte,
//! every filter, VLAN and MTU request as the mailbox message the PF
//! gets, and PFs that stay silent, stay in reset, refuse, answer the
//! wrong message or interleave a control message. Every case ends with
//! every mbuf home and no DMA outside mapped memory.
mod common;
use common::{bytes, finish, receive};
use rpmd_igb::model::{IgbModel, ModelOptions, PfBehaviour, ScriptedReply, VF_MAC};
use rpmd_igb::regs::*;
use rpmd_igb::{open_vf_port, Error, IgbVfPort};
use rpmd_pmd::mbuf::{RX_VLAN_STRIPPED, TX_VLAN};
use rpmd_pmd::pci::PciAddr;
use rpmd_pmd::port::{MacAddr, Offloads};
use rpmd_pmd::{DmaDomain, Mempool, MempoolConfig, Pkts, Port, PortConfig, Queues};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn addr() -> PciAddr {
    "0000:00:10.0".parse().unwrap()
}

fn model(pf: PfBehaviour) -> Arc<IgbModel> {
    IgbModel::new(
        addr(),
        ModelOptions {
            pf: Some(pf),
            loopback: true,
            ..ModelOptions::default()
        },
    )
}

fn open(m: &Arc<IgbModel>) -> Result<IgbVfPort, Error> {
    let func = m.open(&DmaDomain::new()).unwrap();
    open_vf_port("pci:0000:00:10.0", func, 0)
}

fn pool(name: &str) -> Mempool {
    Mempool::new(&MempoolConfig::new(name, 2048)).unwrap()
}

fn started(pf: PfBehaviour, offloads: Offloads) -> (Arc<IgbModel>, Mempool, IgbVfPort, Queues) {
    let m = model(pf);
    let pool = pool("igbvf-model");
    let mut port = open(&m).unwrap();
    port.configure(&PortConfig {
        offloads,
        ..PortConfig::with_pool(&pool)
    })
    .unwrap();
    let q = port.start().unwrap();
    (m, pool, port, q)
}

fn frame(dst: MacAddr, len: usize, seq: u32) -> Vec<u8> {
    let mut f = dst.0.to_vec();
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 9, 0x88, 0xb5]);
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend((f.len()..len).map(|i| (i as u32).wrapping_mul(seq | 1) as u8));
    f
}

fn send(pool: &Mempool, q: &mut Queues, frames: &[Vec<u8>], flags: u64, vlan: u16) {
    let mut out = Pkts::new();
    for f in frames {
        let mut m = pool.get().unwrap();
        m.append(f.len()).unwrap().copy_from_slice(f);
        m.set_ol_flags(flags);
        m.set_vlan_tci(vlan);
        let _ = out.push(m);
    }
    assert_eq!(q.tx_burst(0, &mut out), frames.len());
}

/// The message types the PF read, in order.
fn kinds(m: &IgbModel) -> Vec<u32> {
    m.pf_messages().iter().map(|w| w[0]).collect()
}

#[test]
fn a_vf_takes_its_pfs_address_and_frames_go_through_byte_for_byte() {
    let (m, pool, port, mut q) = started(PfBehaviour::default(), Offloads::NONE);
    assert_eq!(port.mac_addr(), MacAddr(VF_MAC));
    assert!(port.link().up);
    assert_eq!(
        kinds(&m),
        [VF_RESET, VF_RESET, VF_SET_LPE],
        "reset at open and at start, then the longest frame (the filter as the reset left it: nothing to ask)"
    );
    assert_eq!(m.vf_max_frame(), 1518);
    for round in 0..4u32 {
        let frames: Vec<Vec<u8>> = (0..32)
            .map(|k: u32| {
                frame(
                    MacAddr(VF_MAC),
                    60 + (k as usize * 47) % 1455,
                    round * 32 + k,
                )
            })
            .collect();
        send(&pool, &mut q, &frames, 0, 0);
        let got: Vec<Vec<u8>> = receive(&mut q, 32).iter().map(bytes).collect();
        assert_eq!(got, frames, "round {round}");
    }
    let x = port.xstats();
    let v = |n: &str| x.iter().find(|x| x.name == n).map(|x| x.value);
    assert_eq!(v("rx_good_packets"), Some(128));
    assert_eq!(v("tx_good_packets"), Some(128));
    // Not the VF's address: the PF's filter keeps it out.
    send(
        &pool,
        &mut q,
        &[frame(MacAddr([2, 0, 0, 0, 0, 0x77]), 64, 1)],
        0,
        0,
    );
    assert!(receive(&mut q, 1).is_empty());
    finish(&m, &pool, port, q);
}

#[test]
fn a_pf_that_gives_no_address_gets_a_random_local_one() {
    let pf = PfBehaviour {
        no_mac: true,
        ..PfBehaviour::default()
    };
    let (m, pool, port, mut q) = started(pf, Offloads::NONE);
    let mac = port.mac_addr();
    assert_eq!(mac.0[0] & 3, 2, "{mac}: unicast, locally administered");
    let asked = &m.pf_messages()[1];
    assert_eq!(asked[0], VF_SET_MAC_ADDR);
    assert_eq!(
        asked[1].to_le_bytes()[..],
        mac.0[..4],
        "the PF was asked for {mac}"
    );
    let f = frame(mac, 100, 5);
    send(&pool, &mut q, std::slice::from_ref(&f), 0, 0);
    assert_eq!(
        receive(&mut q, 1).iter().map(bytes).collect::<Vec<_>>(),
        [f]
    );
    finish(&m, &pool, port, q);
}

#[test]
fn filters_vlans_and_the_mtu_are_asked_of_the_pf() {
    let (m, pool, mut port, mut q) = started(PfBehaviour::default(), Offloads::RX_VLAN_FILTER);
    let groups = [
        MacAddr([0x01, 0, 0x5e, 0, 0, 0x12]),
        MacAddr([0x33, 0x33, 0, 0, 0xab, 0xcd]),
    ];
    port.set_mac_filter(&[MacAddr([2, 0, 0, 0, 0, 0x42])], &groups)
        .unwrap();
    let msgs = m.pf_messages();
    let mc = msgs
        .iter()
        .rev()
        .find(|w| w[0] & 0xffff == VF_SET_MULTICAST)
        .unwrap();
    assert_eq!(mc[0] >> VT_MSGINFO_SHIFT, 2, "two hashes");
    let hash = |g: &MacAddr| ((g.0[4] as u32) >> 4 | (g.0[5] as u32) << 4) & 0xfff;
    assert_eq!(mc[1], hash(&groups[0]) | hash(&groups[1]) << 16);
    assert!(
        msgs.iter()
            .any(|w| w[0] == VF_SET_MAC_ADDR | VF_MAC_FILTER_ADD
                && w[1].to_le_bytes() == [2, 0, 0, 0])
    );
    // A listed group and the extra unicast address come in.
    let wanted = [
        frame(groups[0], 80, 1),
        frame(MacAddr([2, 0, 0, 0, 0, 0x42]), 80, 2),
    ];
    send(&pool, &mut q, &wanted, 0, 0);
    assert_eq!(receive(&mut q, 2).len(), 2);
    // All-multicast, and more groups than one message holds, are
    // multicast promiscuous.
    let multicast_promisc = VF_SET_PROMISC | VF_SET_PROMISC_MULTICAST;
    port.set_allmulticast(true).unwrap();
    assert!(kinds(&m).contains(&multicast_promisc));
    port.set_allmulticast(false).unwrap();
    assert_ne!(kinds(&m).iter().rev().nth(1), Some(&multicast_promisc));
    let many: Vec<MacAddr> = (0..31).map(|k| MacAddr([1, 0, 0x5e, 0, 1, k])).collect();
    port.set_mac_filter(&[], &many).unwrap();
    let k = kinds(&m);
    assert_eq!(
        k[k.len() - 3..],
        [
            VF_SET_MULTICAST,
            multicast_promisc,
            VF_SET_MAC_ADDR | VF_MAC_FILTER_CLR
        ],
        "31 groups: every multicast frame"
    );
    // Unicast promiscuous is refused, naming the message.
    let e = port.set_promiscuous(true).unwrap_err().to_string();
    assert!(e.contains("VF_SET_PROMISC") && e.contains("unicast"), "{e}");
    port.set_vlan_filter(100, true).unwrap();
    port.set_vlan_filter(7, true).unwrap();
    port.set_vlan_filter(7, false).unwrap();
    assert_eq!(m.vf_vlans(), [100]);
    port.set_mtu(1400).unwrap();
    assert_eq!(m.vf_max_frame(), 1400 + 18);
    finish(&m, &pool, port, q);
}

#[test]
fn stripped_tags_arrive_in_the_mbuf_and_inserted_ones_go_out() {
    let (m, pool, port, mut q) = started(PfBehaviour::default(), Offloads::TX_VLAN_INSERT);
    let f = frame(MacAddr(VF_MAC), 90, 3);
    send(&pool, &mut q, std::slice::from_ref(&f), TX_VLAN, 100);
    let got = receive(&mut q, 1);
    assert_eq!(got.len(), 1);
    assert!(got[0].ol_flags() & RX_VLAN_STRIPPED != 0, "the PF strips");
    assert_eq!(got[0].vlan_tci(), 100);
    assert_eq!(bytes(&got[0]), f);
    drop(got);
    finish(&m, &pool, port, q);
}

/// Opening on `pf` fails; the error's text.
fn open_fails(pf: PfBehaviour) -> String {
    let m = model(pf);
    let t = Instant::now();
    let e = open(&m).err().expect("the open fails").to_string();
    assert!(t.elapsed() < Duration::from_secs(5), "bounded: {e}");
    e
}

#[test]
fn a_silent_pf_times_out_naming_the_message() {
    let e = open_fails(PfBehaviour {
        silent: true,
        ..PfBehaviour::default()
    });
    assert!(e.contains("VF_RESET") && e.contains("PFACK"), "{e}");
}

#[test]
fn a_pf_in_reset_is_named_with_what_to_do() {
    let e = open_fails(PfBehaviour {
        in_reset: true,
        ..PfBehaviour::default()
    });
    assert!(
        e.contains("PF is in reset") && e.contains("ip link set"),
        "{e}"
    );
}

#[test]
fn a_reply_of_the_wrong_type_is_an_error() {
    let e = open_fails(PfBehaviour {
        no_mac: true,
        wrong_reply: Some(VF_SET_VLAN),
        ..PfBehaviour::default()
    });
    assert!(
        e.contains("VF_SET_MAC_ADDR") && e.contains("not this message's type"),
        "{e}"
    );
}

#[test]
fn a_refused_start_fails_naming_the_message_and_keeps_every_mbuf() {
    let m = model(PfBehaviour {
        refuse: Some(VF_SET_LPE),
        ..PfBehaviour::default()
    });
    let pool = pool("igbvf-refused");
    let mut port = open(&m).unwrap();
    port.configure(&PortConfig::with_pool(&pool)).unwrap();
    let Err(e) = port.start() else {
        panic!("the start went through a PF that refuses VF_SET_LPE")
    };
    let e = e.to_string();
    assert!(e.contains("refused VF_SET_LPE"), "{e}");
    drop(port);
    assert_eq!(pool.available(), pool.size());
    assert_eq!(m.violations(), Vec::<String>::new());
}

/// A PF whose reset reply ACKs with a multicast address (what a PF
/// says is anything: `script_pf`) is not believed: the VF picks a local
/// address and asks the PF for it, as when the PF gives none.
#[test]
fn a_multicast_address_from_the_pf_is_replaced_by_a_local_one() {
    let m = model(PfBehaviour::default());
    let ack = VF_RESET | VT_MSGTYPE_ACK | VT_MSGTYPE_CTS;
    m.script_pf([ScriptedReply {
        words: vec![ack, u32::from_le_bytes([0x01, 0, 0x5e, 0]), 1],
        events: 0,
    }]);
    let port = open(&m).unwrap();
    let mac = port.mac_addr().0;
    assert_eq!(mac[0] & 3, 2, "local unicast: {mac:x?}");
    assert!(kinds(&m).contains(&VF_SET_MAC_ADDR));
    drop(port);
    assert_eq!(m.violations(), Vec::<String>::new());
}

/// Replies no PF makes to a start's first message (no type bits; ACK
/// without a message type; a stray event): each start fails with an
/// error, every mbuf home, and the next start, answered properly, works.
#[test]
fn a_start_answered_with_nonsense_fails_cleanly_and_the_next_works() {
    let m = model(PfBehaviour::default());
    let pool = pool("igbvf-nonsense");
    let mut port = open(&m).unwrap();
    port.configure(&PortConfig::with_pool(&pool)).unwrap();
    for words in [vec![0x1234], vec![VT_MSGTYPE_ACK], vec![]] {
        m.script_pf([ScriptedReply {
            words: words.clone(),
            events: V2PMAILBOX_RSTD,
        }]);
        let t = Instant::now();
        let Err(e) = port.start() else {
            panic!("a start went through the reply {words:x?}")
        };
        assert!(t.elapsed() < Duration::from_secs(5), "bounded: {e}");
        assert!(!e.to_string().is_empty());
        assert_eq!(pool.available(), pool.size(), "after {words:x?}: {e}");
    }
    let q = port.start().unwrap();
    finish(&m, &pool, port, q);
}

#[test]
fn control_messages_between_request_and_reply_are_passed_over() {
    let pf = PfBehaviour {
        control_first: true,
        ..PfBehaviour::default()
    };
    let (m, pool, mut port, q) = started(pf, Offloads::NONE);
    assert_eq!(port.mac_addr(), MacAddr(VF_MAC));
    port.set_allmulticast(true).unwrap();
    assert!(kinds(&m).contains(&(VF_SET_PROMISC | VF_SET_PROMISC_MULTICAST)));
    finish(&m, &pool, port, q);
}

#[test]
fn a_vf_has_two_queue_pairs() {
    let m = model(PfBehaviour::default());
    let pool = pool("igbvf-queues");
    let mut port = open(&m).unwrap();
    assert_eq!(port.capabilities().max_rx_queues, 2);
    let e = port
        .configure(&PortConfig {
            rx_queues: 3,
            ..PortConfig::with_pool(&pool)
        })
        .unwrap_err();
    assert!(e.to_string().contains('3'), "{e}");
}

#[test]
fn both_queue_pairs_carry_frames() {
    let m = model(PfBehaviour::default());
    let pool = Mempool::new(&MempoolConfig::new("igbvf-two", 4096)).unwrap();
    let mut port = open(&m).unwrap();
    port.configure(&PortConfig {
        rx_queues: 2,
        tx_queues: 2,
        ..PortConfig::with_pool(&pool)
    })
    .unwrap();
    let mut q = port.start().unwrap();
    // Queue 1's transmit ring (the model loops it back to queue 0).
    let out = frame(MacAddr(VF_MAC), 300, 11);
    let mut pkts = Pkts::new();
    let mut mb = pool.get().unwrap();
    mb.append(out.len()).unwrap().copy_from_slice(&out);
    let _ = pkts.push(mb);
    assert_eq!(q.tx_burst(1, &mut pkts), 1);
    assert_eq!(
        receive(&mut q, 1).iter().map(bytes).collect::<Vec<_>>(),
        [out]
    );
    // Queue 1's receive ring, as the PF's RSS would place a frame.
    let f = frame(MacAddr(VF_MAC), 200, 12);
    assert!(m.receive_on(1, &f));
    let (mut inb, t) = (Pkts::new(), Instant::now());
    while inb.is_empty() && t.elapsed() < Duration::from_secs(2) {
        q.rx_burst(1, &mut inb, 32);
    }
    assert_eq!(inb.pop().map(|m| bytes(&m)), Some(f));
    finish(&m, &pool, port, q);
}

#[test]
fn each_receive_queue_wakes_its_own_vf_vector() {
    let m = IgbModel::new(
        addr(),
        ModelOptions {
            pf: Some(PfBehaviour::default()),
            msix_vectors: 3,
            ..ModelOptions::default()
        },
    );
    let pool = Mempool::new(&MempoolConfig::new("igbvf-irq", 4096)).unwrap();
    let mut port = open(&m).unwrap();
    assert!(port.capabilities().rx_interrupts);
    port.configure(&PortConfig {
        rx_queues: 2,
        tx_queues: 2,
        ..PortConfig::with_pool(&pool)
    })
    .unwrap();
    let mut q = port.start().unwrap();
    let mut rx: Vec<_> = (0..2).map(|k| q.take_rx(k).unwrap()).collect();
    let fds: Vec<rpmd_pmd::function::EventFd> = rx
        .iter()
        .map(|r| {
            let fd = r.interrupt_fd().expect("a vector per queue");
            rpmd_pmd::function::EventFd::from_fd(fd.try_clone_to_owned().unwrap())
        })
        .collect();
    for k in 0..2u16 {
        // Disarmed: a frame interrupts nobody.
        assert!(m.receive_on(k, &frame(MacAddr(VF_MAC), 80, k as u32)));
        assert!(fds.iter().all(|f| f.take().unwrap() == 0), "q{k} disarmed");
        for r in rx.iter_mut() {
            r.set_interrupt(true).unwrap();
        }
        assert!(m.receive_on(k, &frame(MacAddr(VF_MAC), 80, 10 + k as u32)));
        let woke: Vec<usize> = (0..2).filter(|&j| fds[j].take().unwrap() > 0).collect();
        assert_eq!(woke, [k as usize], "a frame on queue {k}");
        for r in rx.iter_mut() {
            r.set_interrupt(false).unwrap();
        }
        let mut got = Pkts::new();
        rx[k as usize].rx_burst(&mut got, 32);
        assert_eq!(got.len(), 2, "q{k}");
    }
    drop(rx);
    finish(&m, &pool, port, q);
}

#[test]
fn a_restart_resets_the_vf_keeping_its_address_filters_and_vlans() {
    let pf = PfBehaviour {
        no_mac: true,
        ..PfBehaviour::default()
    };
    let (m, pool, mut port, q) = started(pf, Offloads::RX_VLAN_FILTER);
    let mac = port.mac_addr();
    let group = MacAddr([0x01, 0, 0x5e, 0, 0, 0x21]);
    port.set_mac_filter(&[], &[group]).unwrap();
    port.set_vlan_filter(100, true).unwrap();
    port.stop().unwrap();
    drop(q);
    let before = m.pf_messages().len();
    let mut q = port.start().unwrap();
    let k: Vec<u32> = m.pf_messages()[before..].iter().map(|w| w[0]).collect();
    assert_eq!(
        k,
        [
            VF_RESET,
            VF_SET_VLAN | 1 << VT_MSGINFO_SHIFT,
            VF_SET_LPE,
            VF_SET_MULTICAST | 1 << VT_MSGINFO_SHIFT
        ],
        "reset, then what the reset cleared asked again"
    );
    assert_eq!(port.mac_addr(), mac, "the address the PF kept");
    assert_eq!(m.vf_vlans(), [100]);
    let f = frame(group, 90, 4);
    send(&pool, &mut q, std::slice::from_ref(&f), 0, 0);
    assert_eq!(
        receive(&mut q, 1).iter().map(bytes).collect::<Vec<_>>(),
        [f]
    );
    finish(&m, &pool, port, q);
}
