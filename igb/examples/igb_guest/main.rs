//! Runs inside the QEMU guest of `tests/vm/run.sh`: the igb driver's
//! bring-up against QEMU's own 82576 model (`-device igb`), through VFIO
//! behind the guest's IOMMU.
//!
//! For each `BDF=MAC` (the MAC QEMU was given for that NIC):
//! - the function opens as an 82576, and resets within the driver's
//!   bounded wait (interrupts masked, queues stopped, CTRL.RST, the
//!   EEPROM's auto-read awaited);
//! - the MAC address in receive-address entry 0 (loaded from the EEPROM
//!   at reset) is valid and is QEMU's, and the EEPROM's words 0-2 say the
//!   same; the EEPROM image version reads;
//! - the PHY answers through MDIC with an identifier;
//! - after CTRL.SLU the link comes up, at 1000 Mb/s full duplex, and the
//!   PHY's status register agrees; the drop counters read.
//!
//! With `--not-igb BDF` (the e1000e): the open refuses the function,
//! naming its IDs.
//!
//! With `--pair A,B` (the two 82576s, cabled to each other): both opened
//! as `pci:` ports through the registry, and frames between them
//! ([`frames`]): 200 each way byte for byte, a chained send, checksum
//! and VLAN offloads, the receive filter, a jumbo frame, the counters,
//! every mbuf home after the stop. Before them, A's DMA to an address
//! mapped nowhere, blocked by the IOMMU ([`iommu`]).
//!
//! With `--dpdk-peer BDF,MAC`: the port at BDF against DPDK's igb PMD in
//! testpmd on the other 82576 (MAC) ([`dpdk_peer`]).
//!
//! With `--linux-peer BDF,MAC`: the port at BDF against Linux's igb
//! driver and stack on the other 82576 (MAC) ([`linux_peer`]).
//!
//! With `--vf-linux-peer BDF,MAC`: the same cases on a virtual function
//! of that 82576 (SR-IOV, enabled by Linux's igb, which serves the PF
//! with address MAC): rpmd's `igbvf` driver asks Linux's igb for its
//! setup over the mailbox, and its frames reach Linux's stack on the PF
//! through the device's switch.
//!
//! ```text
//! igb_guest [--not-igb BDF] [--pair A,B] [--dpdk-peer BDF,MAC] [--linux-peer BDF,MAC]
//!           [--vf-linux-peer BDF,MAC] BDF=MAC...
//! ```
//!
//! Prints `case ...: ok|FAIL` lines and `igb_guest: N passed, M failed`.
mod dpdk_peer;
mod frames;
mod iommu;
mod lcore;
mod linux_peer;

use rpmd_igb::hw::Hw;
use rpmd_igb::regs::{PHY_STATUS, PHY_STATUS_LINK};
use rpmd_igb::Error;
use rpmd_pmd::function::PciFunction;
use rpmd_pmd::port::MacAddr;
use rpmd_pmd::vfio::VfioBus;
use std::sync::Arc;
use std::time::{Duration, Instant};

type R<T> = Result<T, String>;

fn open(bdf: &str) -> R<(VfioBus, Arc<dyn PciFunction>)> {
    VfioBus::open_alone(bdf).map_err(|e| format!("open {bdf}: {e}"))
}

fn bring_up(bdf: &str, want: MacAddr) -> R<String> {
    let (_bus, func) = open(bdf)?;
    let hw = Hw::open(func).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let auto_read = hw.reset().map_err(|e| e.to_string())?;
    let reset_ms = t.elapsed().as_secs_f64() * 1e3;
    let mac = hw.mac().map_err(|e| e.to_string())?;
    let eeprom = hw.eeprom_mac().map_err(|e| e.to_string())?;
    if mac != Some(want) || eeprom != want {
        return Err(format!(
            "MAC: receive address {mac:?}, EEPROM {eeprom}, QEMU gave {want}"
        ));
    }
    let fw = hw.fw_version().map_err(|e| e.to_string())?;
    let phy = hw.phy_id().map_err(|e| e.to_string())?;
    if phy == 0 || phy == u32::MAX {
        return Err(format!("PHY identifier {phy:#010x}: no PHY answered"));
    }
    hw.set_link_up().map_err(|e| e.to_string())?;
    let t = Instant::now();
    let link = loop {
        let l = hw.link().map_err(|e| e.to_string())?;
        if l.up || t.elapsed() > Duration::from_secs(5) {
            break l;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    if !link.up || link.speed_mbps != 1000 || !link.full_duplex {
        return Err(format!("link after CTRL.SLU: {link:?}"));
    }
    let phy_link = hw.phy_read(PHY_STATUS).map_err(|e| e.to_string())? & PHY_STATUS_LINK != 0;
    if !phy_link {
        return Err("STATUS says link up, the PHY's status register says down".into());
    }
    let missed = hw.missed().map_err(|e| e.to_string())?;
    Ok(format!(
        "reset {reset_ms:.1} ms (EEPROM auto-read done: {auto_read}), MAC {want}, EEPROM image {fw}, PHY {phy:#010x}, link {} Mb/s full duplex, missed {missed}",
        link.speed_mbps
    ))
}

fn refuses(bdf: &str) -> R<String> {
    let (_bus, func) = open(bdf)?;
    match Hw::open(func) {
        Ok(_) => Err("a function that is no 82576 opened".into()),
        Err(e @ Error::NotIgb { .. }) => Ok(e.to_string()),
        Err(e) => Err(format!("not the refusal expected: {e}")),
    }
}

/// The frame cases on the two cabled ports; a failed open ends them.
fn pair_cases(a: &str, b: &str, case: &mut impl FnMut(String, R<String>)) {
    case(
        format!("igb IOMMU blocks a write by {a}"),
        iommu::blocked(a, b),
    );
    let mut p = match frames::Pair::open(a, b) {
        Ok(p) => p,
        Err(e) => return case(format!("igb ports pci:{a} and pci:{b} start"), Err(e)),
    };
    case("igb ports start".into(), Ok(format!("pci:{a}, pci:{b}")));
    type Case = fn(&mut frames::Pair) -> R<String>;
    let cases: [(&str, Case); 13] = [
        ("frames both ways", frames::both_ways),
        ("second tx queue", frames::second_queue),
        ("chained send", frames::chained),
        ("checksum offload", frames::checksums),
        ("TCP segmentation (TSO)", frames::tso),
        ("VLAN insert and strip", frames::vlan),
        ("RSS over four queues", frames::rss),
        ("rx interrupt (MSI-X)", frames::rx_interrupt),
        ("an idle lcore sleeps on MSI-X", lcore::idle_lcore),
        ("link events from the QEMU monitor", frames::link_events),
        ("receive filter", frames::filter),
        ("jumbo frame", frames::jumbo),
        ("hardware counters", frames::counters),
    ];
    for (name, f) in cases {
        case(format!("igb {name}"), f(&mut p));
    }
    case("igb stop: every mbuf home".into(), p.close());
}

/// The cases against DPDK's igb PMD (testpmd) on the other 82576.
fn dpdk_cases(bdf: &str, peer: MacAddr, case: &mut impl FnMut(String, R<String>)) {
    let mut p = match linux_peer::Peer::open(bdf, peer) {
        Ok(p) => p,
        Err(e) => return case(format!("igb pci:{bdf} facing DPDK starts"), Err(e)),
    };
    case(
        "igb frames through DPDK's igb (testpmd macswap)".into(),
        dpdk_peer::macswap(&mut p),
    );
    case("igb facing DPDK stops".into(), p.close());
}

/// The cases against Linux's igb on the other 82576.
fn linux_cases(bdf: &str, peer: MacAddr, case: &mut impl FnMut(String, R<String>)) {
    let mut p = match linux_peer::Peer::open(bdf, peer) {
        Ok(p) => p,
        Err(e) => return case(format!("igb pci:{bdf} facing Linux starts"), Err(e)),
    };
    type Case = fn(&mut linux_peer::Peer) -> R<String>;
    let cases: [(&str, Case); 4] = [
        ("ARP answered by Linux", linux_peer::arp),
        ("ping answered by Linux", linux_peer::ping),
        (
            "offloaded UDP checksums, judged by Linux",
            linux_peer::udp_checksums,
        ),
        ("ping over VLAN 100 with Linux", linux_peer::vlan_ping),
    ];
    for (name, f) in cases {
        case(format!("igb {name}"), f(&mut p));
    }
    case("igb facing Linux stops".into(), p.close());
}

/// The cases on a VF whose PF Linux's igb serves.
fn vf_cases(bdf: &str, peer: MacAddr, case: &mut impl FnMut(String, R<String>)) {
    let mut p = match linux_peer::Peer::open(bdf, peer) {
        Ok(p) => p,
        Err(e) => return case(format!("igb VF pci:{bdf} facing Linux starts"), Err(e)),
    };
    let opened = match (p.port().driver(), p.mac) {
        ("igbvf", m) if !m.is_multicast() && m.0 != [0; 6] => Ok(format!(
            "driver igbvf, MAC {m} {}, link up",
            if m.0[0] & 2 != 0 {
                "(chosen by the VF, accepted by the PF)"
            } else {
                "(given by the PF)"
            }
        )),
        (d, m) => Err(format!("driver {d}, MAC {m}")),
    };
    case("igb VF opens through the PF's mailbox".into(), opened);
    type Case = fn(&mut linux_peer::Peer) -> R<String>;
    let cases: [(&str, Case); 6] = [
        ("ARP answered by Linux", linux_peer::arp),
        ("ping answered by Linux", linux_peer::ping),
        (
            "offloaded UDP checksums, judged by Linux",
            linux_peer::udp_checksums,
        ),
        ("VLAN 100 granted by the PF", |p| {
            p.port()
                .set_vlan_filter(100, true)
                .map(|()| "VF_SET_VLAN acknowledged".to_string())
                .map_err(|e| e.to_string())
        }),
        ("ping over VLAN 100 with Linux", linux_peer::vlan_ping),
        (
            "an idle lcore sleeps on the VF's MSI-X",
            lcore::idle_vf_lcore,
        ),
    ];
    for (name, f) in cases {
        case(format!("igb VF {name}"), f(&mut p));
    }
    case("igb VF facing Linux stops".into(), p.close());
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut pass, mut fail) = (0, 0);
    let mut case = |name: String, r: R<String>| match r {
        Ok(detail) => {
            pass += 1;
            println!("case {name}: ok ({detail})");
        }
        Err(e) => {
            fail += 1;
            println!("case {name}: FAIL: {e}");
        }
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--not-igb" {
            let Some(bdf) = it.next() else {
                case("--not-igb".into(), Err("needs a BDF".into()));
                continue;
            };
            case(format!("igb refuses {bdf}"), refuses(bdf));
            continue;
        }
        if a == "--dpdk-peer" || a == "--linux-peer" || a == "--vf-linux-peer" {
            let peer = it.next().and_then(|p| p.split_once(','));
            let parsed = match peer {
                Some((bdf, mac)) => mac
                    .parse::<MacAddr>()
                    .map(|m| (bdf, m))
                    .map_err(|e| format!("{mac}: {e}")),
                None => Err("needs BDF,MAC".into()),
            };
            match parsed {
                Ok((bdf, m)) if a == "--dpdk-peer" => dpdk_cases(bdf, m, &mut case),
                Ok((bdf, m)) if a == "--vf-linux-peer" => vf_cases(bdf, m, &mut case),
                Ok((bdf, m)) => linux_cases(bdf, m, &mut case),
                Err(e) => case(a.clone(), Err(e)),
            }
            continue;
        }
        if a == "--pair" {
            let pair = it.next().and_then(|p| p.split_once(','));
            let Some((x, y)) = pair else {
                case("--pair".into(), Err("needs A,B".into()));
                continue;
            };
            pair_cases(x, y, &mut case);
            continue;
        }
        let r = match a.split_once('=') {
            Some((bdf, mac)) => match mac.parse::<MacAddr>() {
                Ok(m) => bring_up(bdf, m),
                Err(e) => Err(format!("{mac}: {e}")),
            },
            None => Err(format!("{a}: want BDF=MAC")),
        };
        case(format!("igb bring-up {a}"), r);
    }
    println!("igb_guest: {pass} passed, {fail} failed");
    std::process::exit(if fail == 0 { 0 } else { 1 });
}
