//! Bringing a ConnectX-3 up in Linux's order (digest §2.2), as far as
//! this driver goes today: ownership, reset, the firmware started in its
//! area, the ICM mapped and the HCA initialised; and the teardown that
//! leaves the device reusable.
use crate::caps::{query_adapter, DevCap, PortCap};
use crate::eq::Eq;
use crate::fw::{FwInfo, RunningFw};
use crate::hcr::Cmd;
use crate::hcr::{wait_until, Hcr, Timeouts};
use crate::icm::{Icm, Layout, Profile, Table};
use crate::prm::mem::DevBuf;
use crate::prm::op;
use crate::prm::{self, hcr::MAILBOX, wire32};
use crate::res::{Ids, MttAlloc};
use crate::Error;
use rpmd_pmd::function::Regs;
use rpmd_pmd::function::{cfg, PciFunction};
use std::sync::Arc;
use std::time::Duration;

/// Bring-up options.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Wait limits.
    pub timeouts: Timeouts,
    /// How many of each object the ICM holds.
    pub profile: Profile,
}

/// A ConnectX-3 whose HCA is initialised, owned by this process until
/// drop.
pub struct Hca {
    // Teardown order (in `shut`): ports, CLOSE_HCA, the ICM, the firmware,
    // ownership; the function goes last.
    pub(crate) ports_up: [bool; 2],
    /// Link state as the last port-change events left it.
    pub(crate) link: [bool; 2],
    /// The async EQ, the MR (MPT index, lkey), the PD.
    pub(crate) eq: Option<Eq>,
    mr: Option<(u32, u32)>,
    pub(crate) pd: u32,
    /// Allocation of MTT entries, CQ, QP and AMGM numbers.
    pub(crate) mtts: Option<MttAlloc>,
    pub(crate) cqns: Ids,
    pub(crate) qpns: Ids,
    pub(crate) amgm: Ids,
    pub(crate) mcg_entries: u32,
    /// BAR2: the UAR pages.
    uar: Option<Regs>,
    pub(crate) icm: Option<Icm>,
    fw: RunningFw,
    pub(crate) mailbox: DevBuf,
    pub(crate) hcr: Hcr,
    func: Arc<dyn PciFunction>,
    cap: DevCap,
    pub(crate) ports: Vec<PortCap>,
    board_id: String,
    closed: bool,
    /// MSI-X vectors' eventfds (vector 0 the async EQ's, then one per
    /// receive queue; `irq`); empty when the function has none.
    pub(crate) msix: Vec<rpmd_pmd::function::EventFd>,
    /// The ports' link events, once their apps asked (`linkwatch`):
    /// raised by whoever reads a port change from the async EQ.
    pub(crate) link_events: [Option<rpmd_pmd::port::events::LinkEvents>; 2],
    /// A watcher sleeps on vector 0: the async EQ is re-armed after each
    /// read.
    pub(crate) link_watch: bool,
}

/// What the bring-up made, before it became an [`Hca`].
struct Started {
    mailbox: DevBuf,
    fw: RunningFw,
    cap: DevCap,
    ports: Vec<PortCap>,
    icm: Icm,
    board_id: String,
}

impl Hca {
    /// Takes the device at `func`, resets it, starts its firmware, maps
    /// the ICM and initialises the HCA (digest §2.2 steps 1–5).
    pub fn open(func: Arc<dyn PciFunction>, opts: &Options) -> Result<Hca, Error> {
        let addr = func.addr().to_string();
        let regs_err = |what: &str| {
            let what = format!("{addr}: {what}");
            move |e| Error::Register { what, source: e }
        };
        let config = func.config().map_err(regs_err("config space"))?;
        let vendor = config.read16(cfg::VENDOR).map_err(regs_err("vendor ID"))?;
        let device = config.read16(cfg::DEVICE).map_err(regs_err("device ID"))?;
        let known = [prm::id::CONNECTX3, prm::id::CONNECTX3_PRO];
        if vendor != prm::id::VENDOR || !known.contains(&device) {
            return Err(Error::NotConnectX3 {
                addr,
                vendor,
                device,
            });
        }
        let bar0 = func.bar(0).map_err(regs_err("BAR0"))?;
        // `core/main.c` `mlx4_get_ownership`: one read; 0 = now ours.
        let owner = bar0
            .read32(prm::bar0::OWNERSHIP)
            .map_err(regs_err("ownership semaphore"))?;
        if owner != 0 {
            return Err(Error::Owned {
                addr,
                value: prm::unwire32(owner),
            });
        }
        let mut hcr = Hcr::new(bar0, opts.timeouts);
        let started = reset(&*func, &mut hcr).and_then(|()| {
            func.enable_bus_master()
                .map_err(regs_err("bus mastering"))?;
            bring_up(&*func, &mut hcr, opts)
        });
        match started {
            Ok(s) => Hca {
                ports_up: [false; 2],
                link: [false; 2],
                eq: None,
                mr: None,
                pd: 0,
                mtts: None,
                cqns: Ids::new(0, 0),
                qpns: Ids::new(0, 0),
                amgm: Ids::new(0, 0),
                mcg_entries: 0,
                uar: None,
                icm: Some(s.icm),
                fw: s.fw,
                mailbox: s.mailbox,
                hcr,
                func,
                cap: s.cap,
                ports: s.ports,
                board_id: s.board_id,
                closed: false,
                msix: Vec::new(),
                link_events: [None, None],
                link_watch: false,
            }
            .setup(),
            Err(e) => {
                release_ownership(&hcr);
                Err(e)
            }
        }
    }

    /// Digest §2.2 steps 6–7: the UAR, the allocators, the PD, the one
    /// physical MR and the async EQ; on a failure the HCA is closed again.
    fn setup(mut self) -> Result<Hca, Error> {
        let bar2 = self.func.bar(2).map_err(|e| Error::Register {
            what: format!("{}: BAR2 (UAR pages)", self.func.addr()),
            source: e,
        })?;
        self.uar = Some(bar2);
        let (layout, cap) = match &self.icm {
            Some(icm) => (icm.layout.clone(), self.cap.clone()),
            None => return Err(Error::Firmware("the HCA is closed".into())),
        };
        self.mtts = Some(MttAlloc::new(&layout, &cap));
        let count = |t: Table| layout.get(t).count as u32;
        self.cqns = Ids::new(1 << cap.log_rsvd_cqs, count(Table::Cqc));
        self.qpns = Ids::new(1 << cap.log_rsvd_qps, count(Table::Qpc));
        self.mcg_entries = count(Table::Mcg);
        self.amgm = Ids::new(self.mcg_entries / 2, self.mcg_entries);
        self.pd = cap.rsvd_pds as u32;
        let index = 1u32 << cap.log_rsvd_mpts;
        let lkey = self.register_mr(index, self.pd)?;
        self.mr = Some((index, lkey));
        for port in &mut self.ports {
            port.sense(&mut self.hcr)?;
        }
        // The catastrophic-error buffer, where QUERY_FW put it.
        let (bar, off, _) = self.fw.info.catas;
        match self.func.bar(bar as u32) {
            Ok(regs) => self.hcr.watch_catas(regs, off),
            Err(e) => eprintln!("rpmd: warning: mlx4: the catastrophic-error buffer in BAR{bar} cannot be read, so a failure of the card shows only as commands timing out: {e}"),
        }
        let eqn = (1u32 << cap.log_rsvd_eqs).max(4 * cap.rsvd_uars as u32);
        self.create_async_eq(eqn)?;
        self.enable_msix();
        Ok(self)
    }

    /// MSI-X: a vector for the async EQ and one per receive queue of
    /// both ports, as many as the function has. Without them (or if
    /// turning them on fails, which is said) the ports offer no receive
    /// interrupts and their lcores sleep on a timer.
    fn enable_msix(&mut self) {
        let want = 1 + 2 * crate::ethdev::MAX_RX_QUEUES as u32;
        let n = want.min(self.func.msix_vectors());
        if n < 2 {
            return;
        }
        match self.func.enable_msix(n) {
            Ok(fds) => self.msix = fds,
            Err(e) => eprintln!("rpmd: warning: mlx4: no receive interrupts: {e}"),
        }
    }

    /// Turns MSI-X off again, if it was on.
    fn release_msix(&mut self) {
        if !std::mem::take(&mut self.msix).is_empty() {
            if let Err(e) = self.func.disable_msix() {
                eprintln!("rpmd: warning: mlx4: {e}");
            }
        }
    }

    /// The EQ number of port `port`'s receive queue `q`'s completion EQ,
    /// and its MSI-X vector, if it has one: the numbers after the async
    /// EQ's, vectors after vector 0.
    pub(crate) fn rx_eq(&self, port: u8, q: u32) -> Option<(u32, usize)> {
        let k =
            (port as usize).checked_sub(1)? * crate::ethdev::MAX_RX_QUEUES as usize + q as usize;
        let vector = 1 + k;
        let async_eqn = self.eq.as_ref()?.eqn;
        (vector < self.msix.len()).then_some((async_eqn + 1 + k as u32, vector))
    }

    /// The lkey of the physical MR that WQEs name.
    pub fn lkey(&self) -> u32 {
        self.mr.map_or(crate::prm::mpt::INVALID_LKEY, |m| m.1)
    }

    /// BAR2, the UAR pages.
    pub(crate) fn uar(&self) -> Result<&Regs, Error> {
        self.uar
            .as_ref()
            .ok_or_else(|| Error::Firmware("the HCA is closed".into()))
    }

    /// Whether the card was closed (its watcher then ends).
    pub(crate) fn is_closed(&self) -> bool {
        self.closed
    }

    /// The card's failure, if it failed (its catastrophic-error buffer,
    /// read now): on first sight the function is reset, as Linux's
    /// `mlx4_enter_error_state` does, so that it reaches no memory, and
    /// said once; every command fails from then on, the links read down,
    /// and the ports come back when closed and opened again.
    pub fn failure(&mut self) -> Option<u32> {
        let before = self.hcr.failed();
        let now = self.hcr.catastrophe();
        if let (None, Some(code)) = (before, now) {
            let addr = self.func.addr();
            eprintln!("rpmd: error: mlx4 {addr}: the card failed (catastrophic-error buffer {code:#010x}); resetting it: its ports are down until closed and opened again");
            if let Err(e) = reset(&*self.func, &mut self.hcr) {
                eprintln!("rpmd: error: mlx4 {addr}: resetting the failed card: {e}");
            }
            self.link = [false; 2];
            for e in self.link_events.iter().flatten() {
                e.raise();
            }
        }
        now
    }

    /// Whether `port`'s link is up, as the last port-change event said
    /// ([`Hca::poll_events`] reads them); a failed card's links are down.
    pub fn link_up(&self, port: u8) -> bool {
        if self.hcr.failed().is_some() {
            return false;
        }
        (port as usize)
            .checked_sub(1)
            .and_then(|i| self.link.get(i))
            .copied()
            .unwrap_or(false)
    }

    /// What QUERY_FW reported.
    pub fn fw(&self) -> FwInfo {
        self.fw.info
    }

    /// What QUERY_DEV_CAP reported.
    pub fn dev_cap(&self) -> &DevCap {
        &self.cap
    }

    /// Each port's QUERY_PORT at the open, port 1 first.
    pub fn ports(&self) -> &[PortCap] {
        &self.ports
    }

    /// Where the ICM tables are.
    pub fn icm(&self) -> Option<&Layout> {
        self.icm.as_ref().map(|i| &i.layout)
    }

    /// The board id QUERY_ADAPTER reported (may be empty).
    pub fn board_id(&self) -> &str {
        &self.board_id
    }

    /// Commands posted since the open.
    pub fn commands_posted(&self) -> u64 {
        self.hcr.posted()
    }

    /// The function driven.
    pub fn function(&self) -> &Arc<dyn PciFunction> {
        &self.func
    }

    /// Closes the ports, the HCA (CLOSE_HCA), unmaps the ICM, stops the
    /// firmware (UNMAP_FA) and gives ownership back; what drop does too.
    pub fn close(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        if std::mem::replace(&mut self.closed, true) {
            return;
        }
        if self.hcr.failed().is_some() {
            // Reset when it failed: the card reaches no memory and takes
            // no command, so everything is let go at once.
            self.eq = None;
            self.mr = None;
            self.mtts = None;
            self.icm = None;
            self.fw.abandon();
            self.release_msix();
            release_ownership(&self.hcr);
            return;
        }
        for port in 1..=2u8 {
            if self.ports_up[port as usize - 1] {
                if let Err(e) = self.close_port(port) {
                    eprintln!("rpmd: warning: mlx4: {e}");
                }
            }
        }
        self.destroy_async_eq();
        self.release_msix();
        if let Some((index, _)) = self.mr.take() {
            if let Err(e) = self.deregister_mr(index) {
                eprintln!("rpmd: warning: mlx4: {e}");
            }
        }
        self.mtts = None;
        if let Some(icm) = self.icm.take() {
            close_hca(&mut self.hcr, icm);
        }
        self.fw.stop(&mut self.hcr);
        release_ownership(&self.hcr);
    }
}

impl Drop for Hca {
    fn drop(&mut self) {
        self.shut();
    }
}

/// Digest §2.2 steps 2–5 on a reset device: the firmware started, the
/// capabilities read, the ICM mapped, INIT_HCA, QUERY_ADAPTER. A failure
/// undoes what was done.
fn bring_up(func: &dyn PciFunction, hcr: &mut Hcr, opts: &Options) -> Result<Started, Error> {
    let mailbox = DevBuf::new(func, "mlx4 mailbox", MAILBOX)?;
    let mut fw = RunningFw::start(func, hcr, &mailbox)?;
    let rest = query_caps(hcr, &mailbox).and_then(|(cap, ports)| {
        let layout = Layout::new(&cap, &opts.profile)?;
        let init = layout.init_hca(&cap);
        let mut icm = Icm::map(func, hcr, &mailbox, layout)?;
        mailbox.clear();
        mailbox.put(0, &init);
        if let Err(e) = hcr.exec(Cmd {
            opcode: op::INIT_HCA,
            in_param: mailbox.iova(),
            ..Cmd::default()
        }) {
            icm.unmap(hcr);
            return Err(e);
        }
        match query_adapter(hcr, &mailbox) {
            Ok(board_id) => Ok((cap, ports, icm, board_id)),
            Err(e) => {
                close_hca(hcr, icm);
                Err(e)
            }
        }
    });
    match rest {
        Ok((cap, ports, icm, board_id)) => Ok(Started {
            mailbox,
            fw,
            cap,
            ports,
            icm,
            board_id,
        }),
        Err(e) => {
            fw.stop(hcr);
            Err(e)
        }
    }
}

/// CLOSE_HCA, then the ICM unmapped; if the HCA would not close, the
/// ICM's memory stays the device's (leaked, never reused).
fn close_hca(hcr: &mut Hcr, mut icm: Icm) {
    match hcr.exec(Cmd {
        opcode: op::CLOSE_HCA,
        ..Cmd::default()
    }) {
        Ok(_) => icm.unmap(hcr),
        Err(e) => {
            eprintln!("rpmd: error: mlx4: CLOSE_HCA failed; keeping the ICM: {e}");
            std::mem::forget(icm);
        }
    }
}

/// QUERY_DEV_CAP, then QUERY_PORT for each port (digest §2.2 step 3).
fn query_caps(hcr: &mut Hcr, mb: &DevBuf) -> Result<(DevCap, Vec<PortCap>), Error> {
    let cap = DevCap::query(hcr, mb)?;
    let ports = (1..=cap.num_ports)
        .map(|port| PortCap::query(hcr, mb, port))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((cap, ports))
}

/// `core/main.c` `mlx4_free_ownership`: write 0. (Linux then sleeps a
/// second before anyone may take the device again; a second start here
/// resets it first, which serves the same purpose.)
fn release_ownership(hcr: &Hcr) {
    if let Err(e) = hcr.bar0().write32(prm::bar0::OWNERSHIP, 0) {
        eprintln!("rpmd: warning: mlx4: releasing ownership: {e}");
    }
}

/// Resets the device: a function-level reset where offered (vfio-pci
/// virtualises the BARs, so restoring config space by hand may not
/// reprogram them), else the register reset of `core/reset.c`.
fn reset(func: &dyn PciFunction, hcr: &mut Hcr) -> Result<(), Error> {
    let addr = func.addr();
    if func.can_reset() {
        func.reset().map_err(|e| Error::Register {
            what: format!("{addr}: function-level reset"),
            source: e,
        })?;
    } else {
        register_reset(func, hcr)?;
    }
    hcr.reset();
    Ok(())
}

/// The PCIe capability's offset in config space, if the function lists
/// one (capability ID 0x10).
fn pcie_cap(config: &rpmd_pmd::function::Regs) -> Option<u64> {
    let status = config.read16(cfg::STATUS).ok()?;
    if status & cfg::STATUS_CAP_LIST == 0 {
        return None;
    }
    let mut at = config.read8(cfg::CAP_PTR).ok()? as u64 & !3;
    // At most 48 capabilities fit in the 192 bytes after the header.
    for _ in 0..48 {
        if at < 0x40 {
            return None;
        }
        if config.read8(at).ok()? == PCIE_CAP_ID {
            return Some(at);
        }
        at = config.read8(at + 1).ok()? as u64 & !3;
    }
    None
}

/// PCI Express capability ID, and its Device Control and Link Control
/// registers' offsets in it (PCIe base spec §7.5.3).
const PCIE_CAP_ID: u8 = 0x10;
const PCIE_DEVCTL: u64 = 0x08;
const PCIE_LNKCTL: u64 = 0x10;

/// `core/reset.c` `mlx4_reset`: save config dwords 0..63 (but 22, 23) and
/// the PCIe DevCtl and LnkCtl, take the HW semaphore, write BE 1 to the
/// reset register, wait, poll the vendor ID back, restore DevCtl and
/// LnkCtl, then dwords 0..15 with the command register last.
fn register_reset(func: &dyn PciFunction, hcr: &Hcr) -> Result<(), Error> {
    let addr = func.addr();
    let err = |what: &'static str| {
        move |e| Error::Register {
            what: format!("{addr}: reset: {what}"),
            source: e,
        }
    };
    let t = hcr.timeouts();
    let config = func.config().map_err(err("config space"))?;
    let mut saved = [0u32; 64];
    for (i, d) in saved.iter_mut().enumerate() {
        if i != 22 && i != 23 {
            *d = config
                .read32(4 * i as u64)
                .map_err(err("saving config space"))?;
        }
    }
    let pcie = pcie_cap(&config);
    let mut ctl = [0u16; 2];
    if let Some(cap) = pcie {
        ctl[0] = config
            .read16(cap + PCIE_DEVCTL)
            .map_err(err("saving DevCtl"))?;
        ctl[1] = config
            .read16(cap + PCIE_LNKCTL)
            .map_err(err("saving LnkCtl"))?;
    }
    let bar0 = hcr.bar0();
    let ms = Duration::from_millis(1);
    let named = |what: &'static str| move || what.to_string();
    wait_until(
        t.semaphore,
        ms,
        named("the HW semaphore before a reset"),
        || {
            Ok(bar0
                .read32(prm::bar0::SEMAPHORE)
                .map_err(err("HW semaphore"))?
                == 0)
        },
    )?;
    bar0.write32(prm::bar0::RESET, wire32(1))
        .map_err(err("reset register"))?;
    std::thread::sleep(t.reset_settle);
    wait_until(
        t.reset_return,
        ms,
        named("the device to answer after a reset"),
        || Ok(config.read16(cfg::VENDOR).map_err(err("vendor ID"))? != 0xffff),
    )?;
    if let Some(cap) = pcie {
        config
            .write16(cap + PCIE_DEVCTL, ctl[0])
            .map_err(err("restoring DevCtl"))?;
        config
            .write16(cap + PCIE_LNKCTL, ctl[1])
            .map_err(err("restoring LnkCtl"))?;
    }
    for (i, &d) in saved.iter().enumerate().take(16) {
        if i != 1 {
            config
                .write32(4 * i as u64, d)
                .map_err(err("restoring config space"))?;
        }
    }
    config
        .write32(cfg::COMMAND, saved[1])
        .map_err(err("restoring the command register"))
}
