//! The igb driver on rpmd's model playing each family member it runs
//! (QEMU emulates only the 82576): the 82580's and I350's LAN functions
//! open with their own NVM section's MAC address and version, every
//! section the member checksums is checked, their 8 queues bound what a
//! port takes (a write to another queue's registers is a violation in
//! the model), and each receive queue's MSI-X vector is found where the
//! member's IVAR table puts it (the model reads the table as each
//! datasheet draws it). A link that is not the internal copper PHY's is
//! refused with its mode named.
mod common;
use common::finish;
use rpmd_igb::family::Family;
use rpmd_igb::model::{model_mac, model_mac_of, IgbModel, ModelOptions};
use rpmd_igb::{open_port, Error, IgbPort};
use rpmd_pmd::function::EventFd;
use rpmd_pmd::pci::PciAddr;
use rpmd_pmd::{DmaDomain, Mempool, MempoolConfig, Pkts, Port, PortConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};

const I350: u16 = 0x1521;
const I82580: u16 = 0x150E;
const I82576: u16 = 0x10C9;
const I210: u16 = 0x1533;
const I210_FLASHLESS: u16 = 0x157B;
const I211: u16 = 0x1539;

fn addr() -> PciAddr {
    "0000:00:08.0".parse().unwrap()
}

fn model(device: u16, opts: ModelOptions) -> Arc<IgbModel> {
    IgbModel::new(
        addr(),
        ModelOptions {
            device_id: Some(device),
            ..opts
        },
    )
}

fn open(m: &Arc<IgbModel>) -> Result<IgbPort, Error> {
    let func = m.open(&DmaDomain::new()).unwrap();
    open_port("pci:0000:00:08.0", func, 0)
}

fn pool(name: &str) -> Mempool {
    Mempool::new(&MempoolConfig::new(name, 2048)).unwrap()
}

fn conf(pool: &Mempool, queues: u16) -> PortConfig {
    PortConfig {
        rx_queues: queues,
        tx_queues: queues,
        rx_desc: 64,
        tx_desc: 64,
        ..PortConfig::with_pool(pool)
    }
}

/// A frame to `dst` carrying `seq`.
fn frame(dst: [u8; 6], seq: u32) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 9, 0x88, 0xb5]);
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(64, 0xa5);
    f
}

#[test]
fn each_lan_function_of_an_i350_and_82580_opens_with_its_own_section() {
    for (device, family) in [(I350, Family::I350), (I82580, Family::I82580)] {
        for function in 0..4u8 {
            let m = model(
                device,
                ModelOptions {
                    function,
                    ..ModelOptions::default()
                },
            );
            assert_eq!(m.family(), family);
            let port = open(&m).unwrap();
            assert_eq!(
                port.mac_addr(),
                model_mac_of(function),
                "{family:?} {function}"
            );
            let hw = port.device().hw();
            assert_eq!(hw.eeprom_mac().unwrap(), model_mac_of(function));
            let want = if family == Family::I350 {
                // Word 5 0x1234 with bits 11:8 set: minor from 11:4; and
                // the eTrack ID.
                "1.35, 0x81234567"
            } else {
                "1.35-4"
            };
            assert_eq!(port.fw_version().as_deref(), Some(want));
            assert_eq!(port.capabilities().max_rx_queues, 8);
            assert_eq!(port.capabilities().max_tx_queues, 8);
        }
    }
    let port = open(&model(I82576, ModelOptions::default())).unwrap();
    assert_eq!(port.mac_addr(), model_mac());
    assert_eq!(port.capabilities().max_rx_queues, 16);
}

#[test]
fn every_section_a_member_checksums_is_checked() {
    let bad = ModelOptions {
        bad_eeprom_checksum: true,
        ..ModelOptions::default()
    };
    for (device, first) in [(I82576, 0x00), (I82580, 0x100), (I350, 0x100)] {
        let e = open(&model(device, bad))
            .err()
            .expect("a bad checksum opens");
        match &e {
            Error::EepromChecksum { first: f, last, .. } => {
                assert_eq!((*f, *last), (first, first + 0x3f), "{device:04x}: {e}");
            }
            _ => panic!("{device:04x}: not the checksum refusal: {e}"),
        }
    }
}

#[test]
fn a_link_other_than_the_copper_phy_is_refused_by_name() {
    for (bits, name) in [(1, "1000BASE-KX"), (2, "SGMII"), (3, "SerDes")] {
        for device in [I82576, I350] {
            let opts = ModelOptions {
                link_mode: bits,
                ..ModelOptions::default()
            };
            let e = open(&model(device, opts)).err().expect("opened");
            assert!(matches!(e, Error::LinkMode { .. }), "{e}");
            assert!(e.to_string().contains(name), "{e}");
        }
    }
}

#[test]
fn a_port_takes_no_more_queues_than_the_member_has() {
    let m = model(I350, ModelOptions::default());
    let pool = pool("igb-family-q");
    let mut port = open(&m).unwrap();
    let e = port.configure(&conf(&pool, 9)).unwrap_err().to_string();
    assert!(e.contains('9') && e.contains('8'), "{e}");
    port.configure(&conf(&pool, 8)).unwrap();
    let q = port.start().unwrap();
    finish(&m, &pool, port, q);
}

/// Whether `fd` was signalled (consuming it).
fn fired(fd: &EventFd) -> bool {
    fd.take().unwrap() > 0
}

#[test]
fn each_receive_queue_interrupts_on_its_own_vector_by_the_members_ivar_layout() {
    for device in [I82576, I82580, I350, I210, I211] {
        let opts = ModelOptions {
            msix_vectors: 10,
            function: 1,
            ..ModelOptions::default()
        };
        let m = model(device, opts);
        let n = m.family().queues().min(8);
        let pool = pool("igb-family-irq");
        let mut port = open(&m).unwrap();
        port.configure(&conf(&pool, n)).unwrap();
        let mut queues = port.start().unwrap();
        let mut rx: Vec<_> = (0..n)
            .map(|k| queues.take_rx(k as usize).unwrap())
            .collect();
        let fds: Vec<EventFd> = rx
            .iter()
            .map(|r| {
                let fd = r.interrupt_fd().expect("a vector per queue");
                EventFd::from_fd(fd.try_clone_to_owned().unwrap())
            })
            .collect();
        let dst = port.mac_addr().0;
        for q in 0..n {
            for r in rx.iter_mut() {
                r.set_interrupt(true).unwrap();
            }
            assert!(m.receive_on(q, &frame(dst, q as u32)), "{device:04x} q{q}");
            let woke: Vec<usize> = (0..n as usize).filter(|&k| fired(&fds[k])).collect();
            assert_eq!(woke, [q as usize], "{device:04x}: a frame on queue {q}");
            let mut got = Pkts::new();
            let t = Instant::now();
            while got.is_empty() && t.elapsed() < Duration::from_secs(2) {
                rx[q as usize].rx_burst(&mut got, 32);
            }
            assert_eq!(got.len(), 1, "{device:04x} q{q}");
            assert_eq!(got.pop().unwrap().data()[14..18], (q as u32).to_be_bytes());
            for r in rx.iter_mut() {
                r.set_interrupt(false).unwrap();
            }
        }
        drop(rx);
        finish(&m, &pool, port, queues);
    }
}

/// An I210 (flash, or flashless by ID or by an unfitted flash) and an
/// I211 open with the model's address from their NVM, their version (the
/// flash's in the I350's format; "iNVM" for the OTP), their queue counts;
/// the PHY answers; frames loop back on every queue. The model records a
/// violation for any EERD or MDIC made without the resource held in
/// SW_FW_SYNC, any SW_FW_SYNC write without the semaphore, and any EERD
/// on an iNVM part: `finish` asserts there were none.
#[test]
fn i210s_and_i211s_open_from_flash_or_invm_under_the_semaphores() {
    let cases = [
        (I210, false, "1.35", 4),
        (I210_FLASHLESS, false, "iNVM", 4),
        (I210, true, "iNVM", 4),
        (I211, false, "iNVM", 2),
    ];
    for (device, flashless, fw, queues) in cases {
        let what = format!("{device:04x} flashless={flashless}");
        let m = model(
            device,
            ModelOptions {
                flashless,
                loopback: true,
                ..ModelOptions::default()
            },
        );
        let pool = pool("igb-i210");
        let mut port = open(&m).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(port.mac_addr(), model_mac(), "{what}");
        let hw = port.device().hw();
        assert_eq!(hw.eeprom_mac().unwrap(), model_mac(), "{what}");
        assert_ne!(hw.phy_id().unwrap(), 0, "{what}");
        assert_eq!(port.fw_version().as_deref(), Some(fw), "{what}");
        assert_eq!(port.capabilities().max_rx_queues, queues, "{what}");
        let e = port.configure(&conf(&pool, queues + 1)).unwrap_err();
        assert!(e.to_string().contains(&format!("{}", queues + 1)), "{e}");
        port.configure(&conf(&pool, queues)).unwrap();
        let mut q = port.start().unwrap();
        for k in 0..queues {
            let mut out = Pkts::new();
            let mut mb = pool.get().unwrap();
            let f = frame(model_mac().0, k as u32);
            mb.append(f.len()).unwrap().copy_from_slice(&f);
            let _ = out.push(mb);
            assert_eq!(q.tx_burst(k, &mut out), 1, "{what} q{k}");
        }
        let (mut got, mut inb, t) = (0, Pkts::new(), Instant::now());
        while got < queues && t.elapsed() < Duration::from_secs(2) {
            got += q.rx_burst(0, &mut inb, 32) as u16;
            inb.clear();
        }
        assert_eq!(got, queues, "{what}: every queue's frame back");
        finish(&m, &pool, port, q);
    }
}

#[test]
fn a_corrupt_i210_flash_is_refused() {
    let bad = ModelOptions {
        bad_eeprom_checksum: true,
        ..ModelOptions::default()
    };
    let e = open(&model(I210, bad)).err().expect("a bad checksum opens");
    assert!(matches!(e, Error::EepromChecksum { first: 0, .. }), "{e}");
}

#[test]
fn resources_firmware_keeps_fail_by_name_in_bounded_time() {
    let m = model(
        I210,
        ModelOptions {
            firmware_holds: rpmd_igb::regs::SWFW_EEP_SM,
            ..ModelOptions::default()
        },
    );
    let t = Instant::now();
    let e = open(&m).err().expect("the NVM is firmware's").to_string();
    assert!(e.contains("NVM held by firmware (SW_FW_SYNC)"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(5), "{e}");
    let m = model(
        I211,
        ModelOptions {
            firmware_holds: rpmd_igb::regs::SWFW_PHY0_SM,
            ..ModelOptions::default()
        },
    );
    let e = match open(&m) {
        Ok(port) => port.device().hw().phy_id().unwrap_err().to_string(),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("PHY held by firmware (SW_FW_SYNC)"), "{e}");
    assert_eq!(m.violations(), Vec::<String>::new());
}

#[test]
fn an_invm_without_an_address_is_named() {
    let m = model(
        I211,
        ModelOptions {
            empty_invm: true,
            ..ModelOptions::default()
        },
    );
    let e = open(&m).err().expect("no address").to_string();
    assert!(e.contains("NVM word 0x00 is not in the iNVM"), "{e}");
}
