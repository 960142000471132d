//! The ICM, INIT_HCA and the Ethernet port against the behavioural
//! model: the layout the driver builds, a failure at each step undone
//! with nothing held, the model refusing a wrong INIT_HCA the way the
//! digest says, and a port brought up and down.
use rpmd_mlx4::caps::DevCap;
use rpmd_mlx4::eq::Event;
use rpmd_mlx4::fw::RunningFw;
use rpmd_mlx4::hcr::{Cmd, Hcr, Timeouts};
use rpmd_mlx4::icm::{Icm, Layout, Profile, Table};
use rpmd_mlx4::model::{Mlx4Model, ModelOptions, PORT_MAC};
use rpmd_mlx4::prm::layout::InitHca;
use rpmd_mlx4::prm::mem::DevBuf;
use rpmd_mlx4::prm::{dev_cap, op, status};
use rpmd_mlx4::{Error, Hca, Options};
use rpmd_pmd::endian::Be64;
use rpmd_pmd::DmaDomain;
use std::sync::Arc;
use std::time::Duration;

fn model(opts: ModelOptions) -> Arc<Mlx4Model> {
    Mlx4Model::new("0000:00:0a.0".parse().unwrap(), opts)
}

fn quick() -> Timeouts {
    Timeouts {
        hcr_free: Duration::from_millis(50),
        command: Duration::from_millis(50),
        reset_settle: Duration::from_millis(5),
        reset_return: Duration::from_millis(50),
        semaphore: Duration::from_millis(50),
    }
}

fn open(m: &Arc<Mlx4Model>) -> Result<Hca, Error> {
    let opts = Options {
        timeouts: quick(),
        ..Options::default()
    };
    Hca::open(m.open(&DmaDomain::new()).unwrap(), &opts)
}

fn clean(m: &Mlx4Model, what: &str) {
    assert!(m.violations().is_empty(), "{what}: {:?}", m.violations());
}

#[test]
fn the_icm_tables_are_aligned_disjoint_and_mapped() {
    let m = model(ModelOptions::default());
    let hca = open(&m).unwrap();
    let l = hca.icm().unwrap().clone();
    let mut end = 0;
    for t in &l.tables {
        assert!(
            t.count.is_power_of_two() && t.entry.is_power_of_two(),
            "{t:?}"
        );
        assert_eq!(t.base % t.bytes(), 0, "{t:?} naturally aligned");
        assert!(t.base >= end, "{t:?} overlaps the one before");
        end = t.base + t.bytes();
    }
    assert_eq!(end, l.total);
    // The profile within the model's limits: 2^10 QPs (2^6 reserved),
    // 2^9 EQs (its maximum), 256 MCG entries.
    assert_eq!(
        (l.log(Table::Qpc), l.log(Table::Eqc), l.log(Table::Mcg)),
        (10, 9, 8)
    );
    assert_eq!(l.get(Table::Cmpt).count, 4 << 24);
    let mapped: u64 = l.ranges().iter().map(|r| r.1).sum();
    let (icm, aux) = m.icm_mapped();
    assert_eq!(icm, mapped, "every range mapped once");
    assert!(aux >= 4096);
    assert!(
        mapped < 4 << 20,
        "a few MiB, not Linux's hundreds: {mapped}"
    );
    assert_eq!(hca.board_id(), "");
    drop(hca);
    assert_eq!(m.icm_mapped(), (0, 0));
    clean(&m, "layout");
}

#[test]
fn a_failure_at_each_icm_step_is_undone() {
    for opcode in [
        op::SET_ICM_SIZE,
        op::MAP_ICM_AUX,
        op::MAP_ICM,
        op::INIT_HCA,
        op::QUERY_ADAPTER,
    ] {
        let m = model(ModelOptions {
            fail: Some((opcode, status::ICM_ERROR)),
            ..ModelOptions::default()
        });
        let e = open(&m).err().unwrap();
        let name = op::name(opcode);
        assert!(
            matches!(&e, Error::Command { name: n, status: 0x0c, .. } if *n == name),
            "{name}: {e}"
        );
        assert!(e.to_string().contains("ICM error"), "{e}");
        assert!(!m.running() && !m.owned() && !m.hca_initialised(), "{name}");
        assert_eq!(m.icm_mapped(), (0, 0), "{name}: ICM unmapped");
        assert_eq!(m.mapped_regions(), 0, "{name}: no memory left mapped");
        clean(&m, name);
    }
}

#[test]
fn an_hca_that_will_not_close_keeps_its_memory() {
    let m = model(ModelOptions {
        fail: Some((op::CLOSE_HCA, status::BAD_SYS_STATE)),
        ..ModelOptions::default()
    });
    drop(open(&m).unwrap());
    // The device still owns the ICM (and so the firmware its area):
    // nothing it may write was handed back to the allocator.
    assert!(m.hca_initialised());
    assert!(m.icm_mapped().0 > 0);
    assert!(m.mapped_regions() >= 2, "ICM and firmware area kept mapped");
    assert!(!m.owned());
}

#[test]
fn a_card_with_too_little_icm_is_refused_by_name() {
    // Max ICM 0 bytes (the byte holding 2^36 cleared).
    let m = model(ModelOptions {
        patch: Some((op::QUERY_DEV_CAP, dev_cap::MAX_ICM + 3, 0)),
        ..ModelOptions::default()
    });
    let e = open(&m).err().unwrap();
    assert!(e.to_string().contains("the card takes at most"), "{e}");
    assert!(!m.running() && !m.owned());
    clean(&m, "max ICM");
}

/// A driver by hand up to INIT_HCA, so that the model can be shown a
/// wrong mailbox.
struct ByHand {
    func: Arc<dyn rpmd_pmd::function::PciFunction>,
    hcr: Hcr,
    mb: DevBuf,
    fw: RunningFw,
    icm: Icm,
    init: InitHca,
}

impl ByHand {
    fn fw_function(&self) -> Arc<dyn rpmd_pmd::function::PciFunction> {
        self.func.clone()
    }
}

fn by_hand(m: &Arc<Mlx4Model>) -> ByHand {
    let f = m.open(&DmaDomain::new()).unwrap();
    // Ownership first, as the driver takes it (one read; 0 = ours).
    let bar0 = f.bar(0).unwrap();
    assert_eq!(bar0.read32(rpmd_mlx4::prm::bar0::OWNERSHIP).unwrap(), 0);
    f.enable_bus_master().unwrap();
    let mut hcr = Hcr::new(bar0, quick());
    let mb = DevBuf::new(&*f, "mailbox", 4096).unwrap();
    let fw = RunningFw::start(&*f, &mut hcr, &mb).unwrap();
    let cap = DevCap::query(&mut hcr, &mb).unwrap();
    let layout = Layout::new(&cap, &Profile::default()).unwrap();
    let init = layout.init_hca(&cap);
    let icm = Icm::map(&*f, &mut hcr, &mb, layout).unwrap();
    ByHand {
        func: f,
        hcr,
        mb,
        fw,
        icm,
        init,
    }
}

/// CLOSE_HCA, the ICM unmapped, the firmware stopped; no violation
/// besides those already seen and cleared.
fn close_by_hand(mut h: ByHand, m: &Mlx4Model, what: &str) {
    m.clear_violations();
    h.hcr
        .exec(Cmd {
            opcode: op::CLOSE_HCA,
            ..Cmd::default()
        })
        .unwrap();
    h.icm.unmap(&mut h.hcr);
    h.fw.stop(&mut h.hcr);
    clean(m, what);
}

fn init_hca(h: &mut ByHand, m: &InitHca) -> Result<u64, Error> {
    h.mb.clear();
    h.mb.put(0, m);
    h.hcr.exec(Cmd {
        opcode: op::INIT_HCA,
        in_param: h.mb.iova(),
        ..Cmd::default()
    })
}

fn status_of(r: Result<u64, Error>) -> u8 {
    match r {
        Ok(_) => 0,
        Err(Error::Command { status, .. }) => status,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn the_model_refuses_a_wrong_init_hca_as_the_digest_says() {
    let m = model(ModelOptions::default());
    let mut h = by_hand(&m);
    let good = h.init;
    let qpc = good.qpc.get() & !0xff;
    let mcg = h.icm.layout.get(Table::Mcg);
    type Spoil = Box<dyn Fn(&mut InitHca)>;
    let cases: [(&str, u8, Spoil); 5] = [
        ("version", status::BAD_PARAM, Box::new(|i| i.version = 1)),
        (
            "2^20 QPs",
            status::BAD_PARAM,
            Box::new(move |i| i.qpc = Be64::new(qpc | 20)),
        ),
        (
            "big-endian host",
            status::BAD_PARAM,
            Box::new(|i| i.flags = (i.flags.get() | 2).into()),
        ),
        (
            "MCG inside cMPT",
            status::BAD_PARAM,
            Box::new(move |i| i.mc_base = Be64::new(i.cmpt_base.get() + (1 << 30))),
        ),
        (
            "MCG hash size",
            status::BAD_PARAM,
            Box::new(move |i| i.log_mc_hash = mcg.count.trailing_zeros() as u8),
        ),
    ];
    for (what, want, spoil) in cases {
        let mut bad = good;
        spoil(&mut bad);
        assert_eq!(status_of(init_hca(&mut h, &bad)), want, "{what}");
        let v = m.violations();
        assert_eq!(v.len(), 1, "{what}: {v:?}");
        assert!(v[0].starts_with("INIT_HCA"), "{what}: {v:?}");
        assert!(!m.hca_initialised());
        // The next case starts with a clean record.
        m.clear_violations();
    }
    assert_eq!(status_of(init_hca(&mut h, &good)), 0);
    assert!(m.hca_initialised());
    // Taking the auxiliary area from an initialised HCA is refused.
    let aux = h.hcr.exec(Cmd {
        opcode: op::UNMAP_ICM_AUX,
        ..Cmd::default()
    });
    assert_eq!(status_of(aux), status::BAD_SYS_STATE);
    assert!(m
        .violations()
        .iter()
        .any(|v| v.contains("UNMAP_ICM_AUX while")));
    close_by_hand(h, &m, "by hand, at the end");
}

/// Values the fuzzer (mlx4_model_hcr) found overflowing the model's
/// arithmetic: each is refused with a status now.
#[test]
fn the_model_refuses_values_that_would_overflow_its_arithmetic() {
    let m = model(ModelOptions::default());
    let mut h = by_hand(&m);
    let mut far = h.init;
    far.qpc = Be64::new(!0xff | 10);
    assert_eq!(
        status_of(init_hca(&mut h, &far)),
        status::BAD_PARAM,
        "QPC at the top"
    );
    m.clear_violations();
    let good = h.init;
    assert_eq!(status_of(init_hca(&mut h, &good)), 0);
    let exec = |h: &mut ByHand, opcode, op_mod, in_mod, in_param, mailbox: &[u8]| {
        h.mb.clear();
        h.mb.write(0, mailbox);
        let in_param = if in_param == 0 { h.mb.iova() } else { in_param };
        status_of(h.hcr.exec(Cmd {
            opcode,
            op_mod,
            in_mod,
            in_param,
            ..Cmd::default()
        }))
    };
    let mut mtt = [0u8; 24];
    mtt[..8].copy_from_slice(&u64::MAX.to_be_bytes());
    assert_eq!(
        exec(&mut h, op::WRITE_MTT, 0, 1, 0, &mtt),
        status::ICM_ERROR,
        "MTT index 2^64 - 1"
    );
    let top: u64 = !0xfff;
    assert_eq!(
        exec(&mut h, op::UNMAP_ICM, 0, 16, top, &[]),
        status::BAD_PARAM,
        "UNMAP_ICM at the top"
    );
    let mut general = [0u8; 0x24];
    general[0x02] = 1 << 5;
    general[0x03] = 1;
    general[0x06..0x08].copy_from_slice(&1526u16.to_be_bytes());
    general[0x1a..0x1c].copy_from_slice(&u16::MAX.to_be_bytes());
    assert_eq!(
        exec(&mut h, op::SET_PORT, 1, 1, 0, &general),
        status::BAD_PARAM,
        "user MTU 65535"
    );
    let mut eq = [0u8; 0x40];
    eq[..4].copy_from_slice(&0x900u32.to_be_bytes());
    eq[0x0c] = 6;
    eq[0x18] = 200;
    assert_eq!(
        exec(&mut h, op::SW2HW_EQ, 0, 8, 0, &eq),
        status::BAD_PARAM,
        "2^212-byte pages"
    );
    assert_eq!(m.violations().len(), 4, "{:?}", m.violations());
    close_by_hand(h, &m, "overflows, at the end");
}

#[test]
fn a_port_comes_up_with_its_mac_and_mtu_and_goes_down() {
    let m = model(ModelOptions::default());
    let mut hca = open(&m).unwrap();
    hca.init_port(1, 1500).unwrap();
    let mac = PORT_MAC.iter().fold(0u64, |v, &b| v << 8 | b as u64);
    assert_eq!(m.port(1), (true, 1526, 1500, vec![mac]));
    let tail: Vec<u16> = m.commands().split_off(m.commands().len() - 4);
    assert_eq!(
        tail,
        [op::SET_PORT, op::SET_PORT, op::SET_PORT, op::INIT_PORT],
        "MAC table, general, user MTU, INIT_PORT"
    );
    assert!(hca.query_port(1).unwrap().link_up);
    // The link change also comes as an event on the async EQ.
    let up = Event::PortChange { port: 1, up: true };
    assert_eq!(hca.poll_events().unwrap(), [up]);
    assert!(hca.link_up(1) && !hca.link_up(2));
    hca.close_port(1).unwrap();
    assert!(!m.port(1).0 && !hca.query_port(1).unwrap().link_up);
    let down = Event::PortChange { port: 1, up: false };
    assert_eq!(hca.poll_events().unwrap(), [down]);
    assert!(!hca.link_up(1));
    // Wrong asks are refused before the device sees them.
    let posted = hca.commands_posted();
    for (port, mtu, want) in [
        (1, 9601, "MTU 9601"),
        (1, 60, "MTU 60"),
        (3, 1500, "ports 1..=2"),
    ] {
        let e = hca.init_port(port, mtu).err().unwrap();
        assert!(e.to_string().contains(want), "{e}");
    }
    assert_eq!(hca.commands_posted(), posted);
    // Jumbo, then dropped with the port up: CLOSE_PORT comes first.
    hca.init_port(1, 9600).unwrap();
    assert_eq!(m.port(1).1, 9626);
    drop(hca);
    let c = m.commands();
    let close = c.iter().rposition(|&o| o == op::CLOSE_PORT).unwrap();
    let rest = [op::MAP_EQ, op::HW2SW_EQ, op::HW2SW_MPT, op::CLOSE_HCA];
    assert_eq!(c[close + 1..close + 5], rest, "objects go before the HCA");
    assert!(!m.port(1).0);
    clean(&m, "port");
}

#[test]
fn init_hca_over_a_table_with_no_memory_is_an_icm_error() {
    let m = model(ModelOptions::default());
    let mut h = by_hand(&m);
    let eqc = h.icm.layout.get(Table::Eqc);
    h.hcr
        .exec(Cmd {
            opcode: op::UNMAP_ICM,
            in_param: eqc.base,
            in_mod: (eqc.bytes() / 4096) as u32,
            ..Cmd::default()
        })
        .unwrap();
    let good = h.init;
    assert_eq!(status_of(init_hca(&mut h, &good)), status::ICM_ERROR);
    let v = m.violations();
    assert!(
        v.len() == 1 && v[0].contains("EQC") && v[0].contains("no ICM mapped"),
        "{v:?}"
    );
    assert!(!m.hca_initialised());
    m.clear_violations();
    h.icm.unmap(&mut h.hcr);
    h.fw.stop(&mut h.hcr);
}

/// A command on a card whose ownership the driver never took, or with
/// bus mastering off, is refused before the firmware acts on it.
#[test]
fn no_command_without_ownership_or_bus_mastering() {
    let m = model(ModelOptions::default());
    let f = m.open(&DmaDomain::new()).unwrap();
    f.enable_bus_master().unwrap();
    let mut hcr = Hcr::new(f.bar(0).unwrap(), quick());
    let nop = Cmd {
        opcode: op::NOP,
        ..Cmd::default()
    };
    assert_eq!(status_of(hcr.exec(nop)), status::BAD_SYS_STATE);
    assert!(
        m.violations()[0].contains("ownership"),
        "{:?}",
        m.violations()
    );
    let m = model(ModelOptions::default());
    let f = m.open(&DmaDomain::new()).unwrap();
    let bar0 = f.bar(0).unwrap();
    assert_eq!(bar0.read32(rpmd_mlx4::prm::bar0::OWNERSHIP).unwrap(), 0);
    let mut hcr = Hcr::new(bar0, quick());
    assert_eq!(status_of(hcr.exec(nop)), status::BAD_SYS_STATE);
    assert!(m.violations()[0].contains("bus mastering off"));
}

/// What the firmware refuses once running: RUN_FW again, QUERY_QP past
/// the QP table (as every other QP command), HW2SW with an op_mod it has
/// no meaning for, a MAP_ICM list one of whose blocks is bad (none of it
/// is mapped), a CQ-arm doorbell before INIT_HCA.
#[test]
fn the_running_firmware_refuses_what_its_state_forbids() {
    let m = model(ModelOptions::default());
    let mut h = by_hand(&m);
    let exec = |h: &mut ByHand, opcode, op_mod, in_mod, in_param| {
        status_of(h.hcr.exec(Cmd {
            opcode,
            op_mod,
            in_mod,
            in_param,
            out_param: h.mb.iova(),
        }))
    };
    let refused = |m: &Mlx4Model, want: &str| {
        let v = m.violations();
        assert!(v.len() == 1 && v[0].contains(want), "{want}: {v:?}");
        m.clear_violations();
    };
    assert_eq!(exec(&mut h, op::RUN_FW, 0, 0, 0), status::BAD_SYS_STATE);
    refused(&m, "RUN_FW with the firmware running");
    // A CQ-arm doorbell before INIT_HCA.
    let bar2 = h.fw_function().bar(2).unwrap();
    bar2.write32(rpmd_mlx4::prm::uar::CQ_ARM, 0x8000_0000)
        .unwrap();
    refused(&m, "CQ arm doorbell");
    // MAP_ICM of two blocks, the second over the first: neither mapped.
    let eqc = h.icm.layout.get(Table::Eqc);
    exec(
        &mut h,
        op::UNMAP_ICM,
        0,
        (eqc.bytes() / 4096) as u32,
        eqc.base,
    );
    let block = DevBuf::new(&*h.fw_function(), "icm block", 4096).unwrap();
    let entry = |va: u64| [va.to_be_bytes(), block.iova().to_be_bytes()].concat();
    h.mb.clear();
    h.mb.write(0, &[entry(eqc.base), entry(eqc.base)].concat());
    let list = h.mb.iova();
    assert_eq!(exec(&mut h, op::MAP_ICM, 0, 2, list), status::BAD_PARAM);
    refused(&m, "MAP_ICM");
    assert_eq!(
        exec(&mut h, op::MAP_ICM, 0, 1, list),
        0,
        "the first was left mapped"
    );
    assert_eq!(exec(&mut h, op::UNMAP_ICM, 0, 1, eqc.base), 0);
    m.clear_violations();
    h.icm.unmap(&mut h.hcr);
    h.fw.stop(&mut h.hcr);
    // Initialised: QUERY_QP and HW2SW.
    let m = model(ModelOptions::default());
    let mut h = by_hand(&m);
    let good = h.init;
    assert_eq!(status_of(init_hca(&mut h, &good)), 0);
    assert_eq!(
        exec(&mut h, op::QUERY_QP, 0, 0xff_ffff, 0),
        status::BAD_INDEX
    );
    refused(&m, "QUERY_QP: QP 0xffffff outside");
    for opcode in [op::HW2SW_MPT, op::HW2SW_EQ, op::HW2SW_CQ] {
        assert_eq!(exec(&mut h, opcode, 2, 5, 0), status::BAD_PARAM);
        refused(&m, "op_mod 2");
    }
    close_by_hand(h, &m, "refusals, at the end");
}

/// With a port up and objects live, CLOSE_HCA is refused and changes
/// nothing; UNMAP_ICM of a table holding a live context is refused;
/// HW2SW_EQ of an EQ still mapped to events is refused and the EQ stays
/// the device's: the driver's own teardown afterwards is clean.
#[test]
fn refused_teardown_commands_leave_the_objects_in_place() {
    let m = model(ModelOptions::default());
    let mut hca = open(&m).unwrap();
    hca.init_port(1, 1500).unwrap();
    // A second HCR handle on the same BAR, in step with the driver's T
    // bit (it posts an even number of commands, so the driver's stays
    // in step too).
    let bar0 = hca.function().bar(0).unwrap();
    let t = bar0.read32(rpmd_mlx4::prm::bar0::HCR + 24).unwrap();
    if rpmd_mlx4::prm::unwire32(t) & rpmd_mlx4::prm::hcr::TOGGLE != 0 {
        hca.query_port(1).unwrap();
    }
    let mut hcr = Hcr::new(bar0, quick());
    let mut exec = |opcode, op_mod, in_mod, in_param| {
        status_of(hcr.exec(Cmd {
            opcode,
            op_mod,
            in_mod,
            in_param,
            out_param: 0,
        }))
    };
    assert_eq!(exec(op::CLOSE_HCA, 0, 0, 0), status::BAD_RES_STATE);
    assert!(m.hca_initialised(), "a refused CLOSE_HCA closes nothing");
    let eqc = hca.icm().unwrap().get(Table::Eqc);
    let pages = (eqc.bytes() / 4096) as u32;
    assert_eq!(
        exec(op::UNMAP_ICM, 0, pages, eqc.base),
        status::BAD_RES_STATE
    );
    let cap = hca.dev_cap();
    let eqn = (1u32 << cap.log_rsvd_eqs).max(4 * cap.rsvd_uars as u32);
    assert_eq!(exec(op::HW2SW_EQ, 1, eqn, 0), status::BAD_RES_STATE);
    assert_eq!(exec(op::NOP, 0, 0, 0), 0);
    let v = m.violations();
    for want in [
        "CLOSE_HCA with a port still up",
        "live context of EQ",
        "still mapped",
    ] {
        assert!(v.iter().any(|x| x.contains(want)), "{want}: {v:?}");
    }
    m.clear_violations();
    drop(hca);
    clean(&m, "the driver's teardown after the refusals");
}
