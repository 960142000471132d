//! The bring-up against the behavioural model: the command order Linux
//! uses, teardown that leaves the device reusable, and each way the
//! device can refuse (owned, a failing command, a hung HCR) as a typed
//! error with nothing left held.
use rpmd_mlx4::caps::Steering;
use rpmd_mlx4::hcr::Timeouts;
use rpmd_mlx4::model::{Mlx4Model, ModelOptions, PORT_MAC};
use rpmd_mlx4::prm::{dev_cap, query_fw, query_port};
use rpmd_mlx4::prm::{op, status};
use rpmd_mlx4::{Error, Hca, Options};
use rpmd_pmd::DmaDomain;
use std::sync::Arc;
use std::time::Duration;

fn model(opts: ModelOptions) -> Arc<Mlx4Model> {
    Mlx4Model::new("0000:00:09.0".parse().unwrap(), opts)
}

fn quick() -> Options {
    Options {
        timeouts: Timeouts {
            hcr_free: Duration::from_millis(50),
            command: Duration::from_millis(50),
            reset_settle: Duration::from_millis(5),
            reset_return: Duration::from_millis(50),
            semaphore: Duration::from_millis(50),
        },
        ..Options::default()
    }
}

fn open(m: &Arc<Mlx4Model>) -> Result<Hca, Error> {
    Hca::open(m.open(&DmaDomain::new()).unwrap(), &quick())
}

/// The bring-up, with runs of one opcode (MAP_ICM, once per range)
/// counted once: the firmware, the ICM, the HCA, then the MR and the
/// async EQ.
const START: [u16; 14] = [
    op::QUERY_FW,
    op::MAP_FA,
    op::RUN_FW,
    op::MOD_STAT_CFG,
    op::QUERY_DEV_CAP,
    op::QUERY_PORT,
    op::SET_ICM_SIZE,
    op::MAP_ICM_AUX,
    op::MAP_ICM,
    op::INIT_HCA,
    op::QUERY_ADAPTER,
    op::SW2HW_MPT,
    op::SW2HW_EQ,
    op::MAP_EQ,
];

/// And the teardown (its MAP_EQ, the unmap, collapses into the start's
/// last).
const STOP: [u16; 6] = [
    op::HW2SW_EQ,
    op::HW2SW_MPT,
    op::CLOSE_HCA,
    op::UNMAP_ICM,
    op::UNMAP_ICM_AUX,
    op::UNMAP_FA,
];

/// The model's command log with repeats of one opcode collapsed.
fn runs(m: &Mlx4Model) -> Vec<u16> {
    let mut c = m.commands();
    c.dedup();
    c
}

#[test]
fn firmware_starts_in_linux_order_and_stops_cleanly_twice() {
    let m = model(ModelOptions::default());
    let hca = open(&m).unwrap();
    assert_eq!(hca.fw().version, (2, 42, 5000));
    assert_eq!(hca.fw().pages, 16);
    assert_eq!(hca.fw().catas, (0, 0x1000, 16));
    assert!(m.running() && m.owned());
    assert_eq!(runs(&m), START);
    assert!(m.hca_initialised());
    hca.close();
    assert!(!m.running() && !m.owned() && !m.hca_initialised());
    assert_eq!(
        m.icm_mapped(),
        (0, 0),
        "ICM and its auxiliary area unmapped"
    );
    assert_eq!(
        m.mapped_regions(),
        0,
        "mailbox, ICM and firmware area unmapped"
    );
    // A second start on the same device: reset again, same sequence.
    let hca = open(&m).unwrap();
    drop(hca);
    let want: Vec<u16> = [&START[..], &STOP, &START, &STOP].concat();
    assert_eq!(runs(&m), want);
    assert_eq!(m.resets(), 2);
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

#[test]
fn without_flr_the_register_reset_is_used_with_the_semaphore() {
    let m = model(ModelOptions {
        no_flr: true,
        ..ModelOptions::default()
    });
    // Settings the reset would lose: the driver restores them.
    let func = m.open(&rpmd_pmd::DmaDomain::new()).unwrap();
    let config = func.config().unwrap();
    config.write16(0x48, 0x5937).unwrap();
    config.write16(0x50, 0x0043).unwrap();
    drop((config, func));
    assert_eq!(m.pcie_control(), (0x5937, 0x0043));
    let hca = open(&m).unwrap();
    assert_eq!(m.resets(), 1);
    assert_eq!(
        m.pcie_control(),
        (0x5937, 0x0043),
        "DevCtl and LnkCtl restored"
    );
    drop(hca);
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

#[test]
fn a_device_owned_elsewhere_is_refused_and_left_alone() {
    let m = model(ModelOptions {
        owned_elsewhere: true,
        ..ModelOptions::default()
    });
    let e = open(&m).err().unwrap();
    assert!(matches!(e, Error::Owned { .. }), "{e}");
    assert!(e.to_string().contains("owned by another driver"), "{e}");
    assert!(m.owned(), "the other owner keeps it");
    assert_eq!(m.resets(), 0);
    assert!(m.commands().is_empty());
}

#[test]
fn a_failing_command_is_a_typed_error_and_nothing_stays_held() {
    for (opcode, name) in [
        (op::QUERY_FW, "QUERY_FW"),
        (op::MAP_FA, "MAP_FA"),
        (op::RUN_FW, "RUN_FW"),
    ] {
        let m = model(ModelOptions {
            fail: Some((opcode, 0x01)),
            ..ModelOptions::default()
        });
        let e = open(&m).err().unwrap();
        let Error::Command {
            name: n, status: s, ..
        } = &e
        else {
            panic!("{name}: {e}");
        };
        assert_eq!((*n, *s), (name, 1));
        assert!(e.to_string().contains("internal error"), "{e}");
        assert!(!m.owned(), "{name}: ownership given back");
        assert!(!m.running());
        assert_eq!(m.mapped_regions(), 0, "{name}: nothing left mapped");
        assert!(m.violations().is_empty(), "{name}: {:?}", m.violations());
    }
}

#[test]
fn a_failing_mod_stat_cfg_only_warns() {
    let m = model(ModelOptions {
        fail: Some((op::MOD_STAT_CFG, status::BAD_OP)),
        ..ModelOptions::default()
    });
    let hca = open(&m).unwrap();
    assert!(m.running());
    drop(hca);
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

#[test]
fn a_hung_hcr_times_out_naming_the_command() {
    let m = model(ModelOptions {
        hcr_stuck: true,
        ..ModelOptions::default()
    });
    let e = open(&m).err().unwrap();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    assert!(e.to_string().contains("QUERY_FW to complete"), "{e}");
    assert!(!m.owned());
}

#[test]
fn a_function_that_is_not_a_connectx3_is_refused_untouched() {
    let m = model(ModelOptions {
        device_id: Some(0x1004), // the VF: not in scope
        ..ModelOptions::default()
    });
    let e = open(&m).err().unwrap();
    assert!(e.to_string().contains("15b3:1004, not a ConnectX-3"), "{e}");
    assert!(!m.owned() && m.commands().is_empty() && m.resets() == 0);
    // The Pro is taken.
    let m = model(ModelOptions {
        device_id: Some(0x1007),
        ..ModelOptions::default()
    });
    drop(open(&m).unwrap());
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

#[test]
fn the_firmware_area_is_split_into_naturally_aligned_blocks() {
    use rpmd_mlx4::fw::blocks;
    assert_eq!(blocks(0x20_0000, 0x1_0000), [(0x20_0000, 16)]);
    assert_eq!(
        blocks(0x3000, 0x6000),
        [(0x3000, 12), (0x4000, 14), (0x8000, 12)]
    );
    for &(a, log) in &blocks(0x7000, 0x2_3000) {
        assert_eq!(a % (1 << log), 0);
        assert!(log >= 12);
    }
    let total: u64 = blocks(0x7000, 0x2_3000).iter().map(|b| 1u64 << b.1).sum();
    assert_eq!(total, 0x2_3000);
}

/// A real card's firmware area is not published: whatever QUERY_FW asks
/// for (a power of two or not, small or 16 MiB), the driver maps all of
/// it before RUN_FW, which the model refuses on less.
#[test]
fn the_firmware_area_is_as_large_as_the_firmware_asks() {
    for pages in [1u16, 1000, 4096] {
        let m = model(ModelOptions {
            fw_area_pages: Some(pages),
            ..ModelOptions::default()
        });
        let hca = open(&m).unwrap_or_else(|e| panic!("{pages} pages: {e}"));
        drop(hca);
        assert!(
            m.violations().is_empty(),
            "{pages} pages: {:?}",
            m.violations()
        );
    }
}

#[test]
fn capabilities_and_the_port_are_decoded() {
    let m = model(ModelOptions::default());
    let hca = open(&m).unwrap();
    let c = hca.dev_cap();
    assert_eq!(c.num_ports, 2);
    assert_eq!(c.steering, Steering::B0);
    assert_eq!((c.log_rsvd_qps, c.log_max_qps), (6, 18));
    // A real ConnectX-3's reservations, as its `ibv_devinfo -v` shows
    // them through Linux's formulas (model::commands::CAPS cites it).
    let (cqs, mpts, pds) = (1u32 << 16, 1u32 << 19, 1u32 << 15);
    assert_eq!(cqs - (1 << c.log_rsvd_cqs), 65408, "max_cq");
    assert_eq!(cqs - (1 << c.log_rsvd_srqs), 65472, "max_srq");
    assert_eq!(mpts - (1 << c.log_rsvd_mpts), 524032, "max_mr");
    assert_eq!(pds - c.rsvd_pds as u32, 32764, "max_pd");
    assert_eq!((1u32 << c.log_max_qp_sz) - 33, 16351, "max_qp_wr");
    assert_eq!(
        !((1u32 << c.log_min_page) - 1),
        0xffff_fe00,
        "page_size_cap"
    );
    assert_eq!(
        (c.log_rsvd_cqs, c.log_max_cqs, c.log_max_cq_sz),
        (7, 16, 22)
    );
    assert_eq!((c.rsvd_uars, c.uar_size), (1, 4 << 20));
    assert_eq!((c.max_sq_desc, c.max_rq_desc), (1008, 512));
    assert_eq!(c.entry_sizes, [32, 256, 64, 64, 64, 64, 64, 64, 8, 64]);
    assert_eq!(c.max_icm, 1 << 36);
    assert!(!c.blueflame);
    let p = hca.ports()[0];
    assert_eq!(
        (p.port, p.link_up, p.mtu, p.speed_mbps),
        (1, false, 9600, 40_000)
    );
    assert_eq!((p.log_max_macs, p.log_max_vlans), (7, 7));
    assert_eq!(p.mac, PORT_MAC);
    drop(hca);
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

#[test]
fn firmware_reporting_what_the_driver_cannot_drive_is_refused_cleanly() {
    let cases: [((u16, usize, u8), &str); 9] = [
        (
            (op::QUERY_FW, query_fw::CMD_IF_REV + 1, 1),
            "command interface revision 1",
        ),
        (
            (op::QUERY_FW, query_fw::FW_PAGES + 1, 0),
            "firmware area of 0 pages",
        ),
        (
            (op::QUERY_DEV_CAP, dev_cap::NUM_SYS_EQS + 1, 4),
            "4 system EQs",
        ),
        (
            (op::QUERY_DEV_CAP, dev_cap::LOG_MIN_PAGE, 13),
            "minimum page 2^13",
        ),
        ((op::QUERY_DEV_CAP, dev_cap::NUM_PORTS, 0), "0 ports"),
        // 2^(63 + 20) bytes once overflowed the shift computing it.
        (
            (op::QUERY_DEV_CAP, dev_cap::LOG_UAR_SZ, 0x3f),
            "a UAR area of 0x0 bytes",
        ),
        (
            (op::QUERY_DEV_CAP, dev_cap::LOG_UAR_SZ, 11),
            "a UAR area of 0x80000000 bytes",
        ),
        (
            (op::QUERY_DEV_CAP, dev_cap::QPC_ENTRY, 0x20),
            "a context entry of 8192 bytes",
        ),
        ((op::QUERY_PORT, query_port::LINK, 1), "cannot run Ethernet"),
    ];
    for (patch, want) in cases {
        let m = model(ModelOptions {
            patch: Some(patch),
            ..ModelOptions::default()
        });
        let e = open(&m).err().unwrap();
        assert!(matches!(e, Error::Firmware(_)), "{want}: {e}");
        assert!(e.to_string().contains(want), "{want}: {e}");
        assert!(
            !m.running() && !m.owned(),
            "{want}: firmware stopped, device released"
        );
        assert_eq!(m.mapped_regions(), 0, "{want}: nothing left mapped");
        assert!(m.violations().is_empty(), "{want}: {:?}", m.violations());
    }
}
