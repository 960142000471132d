//! A behavioural model of a ConnectX-3, behind the same
//! [`PciFunction`] trait VFIO implements, so the driver runs against it
//! unchanged (no such card, and no emulator of one, exists here).
//!
//! Written from the digest's §4 subset, strict so that driver bugs show
//! up as test failures: 32-bit-only BAR0 accesses, the ownership and HW
//! semaphores, both kinds of reset (FLR and the reset register, which
//! must be written big-endian 1 with the semaphore held), the HCR's GO/T
//! protocol with status codes, DMA through an IOMMU of its own (the
//! regions the domain and the driver mapped), and the firmware commands
//! in their order: before RUN_FW only QUERY_FW, MAP_FA and UNMAP_FA run
//! (status 4 otherwise). What it does not implement yet answers "bad
//! operation" (status 2). Anything a real card could not take is
//! recorded as a violation, which tests assert to be none.
//!
//! Options make it misbehave the ways hardware does: a busy HCR that
//! never completes, a device owned by someone else, no FLR, a chosen
//! command failing.

mod commands;
mod csum;
mod engine;
mod engine_thread;
mod hostile;
mod icm;
mod objects;
mod port;
mod qp;
mod rss;
mod steer;
pub use commands::PORT_MAC;
pub use engine::{ModelStats, RxOutcome};
pub use engine_thread::EngineTiming;

use crate::prm::{self, bar0, hcr, op, unwire32, wire32};
use rpmd_pmd::domain::{DmaGuard, DmaTarget};
use rpmd_pmd::function::{cfg, EventFd, ModelIommu, PciFunction};
use rpmd_pmd::function::{RegisterSpace, Regs};
use rpmd_pmd::pci::{PciAddr, PciDevice, PciId};
use rpmd_pmd::{DmaDomain, DmaRegion, Error};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Where the model's PCIe capability sits in config space, and its
/// Device and Link Control registers' reset values.
const PCIE_CAP: usize = 0x40;
const DEVCTL_RESET: u16 = 0x2810;
const LNKCTL_RESET: u16 = 0x0000;

/// How the model should (mis)behave.
#[derive(Clone, Copy, Debug, Default)]
pub struct ModelOptions {
    /// Offer no function-level reset (the driver must use the register
    /// reset).
    pub no_flr: bool,
    /// Another driver holds the ownership semaphore.
    pub owned_elsewhere: bool,
    /// GO never clears: every command hangs.
    pub hcr_stuck: bool,
    /// This opcode completes with this status.
    pub fail: Option<(u16, u8)>,
    /// Config space shows this device ID instead of 0x1003.
    pub device_id: Option<u16>,
    /// The output mailbox of this opcode has this byte at this offset
    /// (firmware reporting what the driver must refuse).
    pub patch: Option<(u16, usize, u8)>,
    /// A cable between the two ports: what one sends, the other
    /// receives. Without it, sent frames go to the host-side sink
    /// ([`Mlx4Model::take_sent`]).
    pub wire: bool,
    /// The engines on a thread of their own: what a doorbell starts
    /// happens later, on another CPU. Without it, inside the doorbell.
    pub engine: Option<EngineTiming>,
    /// Commands take the firmware's time: GO stays set until then.
    /// Without it every command completes as it is posted.
    pub fw_timing: Option<FwTiming>,
    /// A VPI card: both ports take InfiniBand or Ethernet, and SENSE_PORT
    /// answers each port's entry (0 nothing sensed, 1 InfiniBand, 2
    /// Ethernet). Without it the ports are Ethernet only.
    pub vpi: Option<[u64; 2]>,
    /// The firmware area QUERY_FW asks for, in 4 KiB pages (RUN_FW
    /// refuses less). Without it, 16. A real card's size is not published;
    /// the driver must take whatever it is told.
    pub fw_area_pages: Option<u16>,
}

/// How long the model's firmware takes over a command, by kind.
#[derive(Clone, Copy, Debug)]
pub struct FwTiming {
    /// RUN_FW: the firmware starting.
    pub run_fw: Duration,
    /// INIT_HCA and CLOSE_HCA.
    pub init_hca: Duration,
    /// Each MAP_FA, MAP_ICM_AUX, MAP_ICM and their unmaps (a mailbox of
    /// pages each).
    pub map: Duration,
    /// Everything else (queries, contexts, QP transitions, steering).
    pub other: Duration,
}

impl FwTiming {
    /// Times of the order a ConnectX-3's firmware takes (Linux allows
    /// every command 60 s): starting the firmware and initialising the
    /// HCA in hundreds of milliseconds, page mappings in milliseconds,
    /// the rest in a hundred microseconds or so.
    pub const REALISTIC: FwTiming = FwTiming {
        run_fw: Duration::from_millis(300),
        init_hca: Duration::from_millis(200),
        map: Duration::from_millis(2),
        other: Duration::from_micros(100),
    };

    fn of(&self, opcode: u16) -> Duration {
        match opcode {
            op::RUN_FW => self.run_fw,
            op::INIT_HCA | op::CLOSE_HCA => self.init_hca,
            op::MAP_FA
            | op::UNMAP_FA
            | op::MAP_ICM_AUX
            | op::UNMAP_ICM_AUX
            | op::MAP_ICM
            | op::UNMAP_ICM => self.map,
            _ => self.other,
        }
    }
}

/// The model's firmware state.
#[derive(Default)]
struct State {
    config: Vec<u32>,
    owned: bool,
    /// The driver took the ownership semaphore (its read found it free)
    /// and has not released it: firmware takes commands only then.
    ours: bool,
    semaphore: bool,
    hcr: [u32; 6],
    /// Dword 6 as the driver reads it: status, GO, T.
    hcr6: u32,
    fa: Vec<(u64, u32)>,
    running: bool,
    icm: icm::IcmState,
    ports: [port::PortState; 2],
    obj: objects::Objects,
    qps: qp::Qps,
    stats: ModelStats,
    sent: [std::collections::VecDeque<Vec<u8>>; 2],
    /// Output mailboxes replaced by test support (opcode, bytes).
    overrides: Vec<(u16, Vec<u8>)>,
    /// The byte count the next receive completion claims, set by test
    /// support ([`Mlx4Model::inject_claiming`]).
    claimed_len: Option<u32>,
    commands: Vec<u16>,
    resets: u32,
    violations: Vec<String>,
    /// The MSI-X vectors' eventfds, while enabled: an EQ whose context
    /// names vector `intr` signals `msix[intr]` when an event lands in it
    /// while it is armed.
    msix: Vec<EventFd>,
    /// The catastrophic-error buffer's first dword: non-zero once the
    /// card failed; it then takes no commands and moves no frames until
    /// a reset.
    catas: u32,
    /// A command the firmware is still working on (with `fw_timing`):
    /// opcode, op_mod, the toggle it came with, when it completes.
    pending: Option<(u16, u8, u32, Instant)>,
}

/// Where QUERY_FW puts the catastrophic-error buffer: BAR0 + 0x1000,
/// 16 dwords.
pub(super) const CATAS_BUFFER: u64 = 0x1000;

/// MSI-X vectors the model's function offers (a ConnectX-3's table has
/// more; rpmd takes one for the async EQ and one per receive queue).
pub const MSIX_VECTORS: u32 = 32;

/// A ConnectX-3 in software.
pub struct Mlx4Model {
    addr: PciAddr,
    opts: ModelOptions,
    state: Mutex<State>,
    iommu: ModelIommu,
    /// Nanoseconds spent in BAR2 writes (the TX and RX engines run
    /// there), so a benchmark can take the model's cost out of the
    /// driver's.
    engine_ns: std::sync::atomic::AtomicU64,
    /// With [`ModelOptions::engine`]: the queue to the engine thread.
    doorbells: std::sync::OnceLock<engine_thread::Doorbells>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a driver opened on the model sees.
struct Function {
    model: Arc<Mlx4Model>,
    domain: DmaDomain,
    iommu: Arc<ModelIommu>,
}

struct Config(Arc<Mlx4Model>);
struct Bar0(Arc<Mlx4Model>);

impl Mlx4Model {
    /// A ConnectX-3 (15b3:1003) at `addr`.
    pub fn new(addr: PciAddr, opts: ModelOptions) -> Arc<Mlx4Model> {
        let mut s = State {
            owned: opts.owned_elsewhere,
            config: vec![0; 64],
            ..State::default()
        };
        let device = opts.device_id.unwrap_or(prm::id::CONNECTX3);
        s.config[0] = (device as u32) << 16 | prm::id::VENDOR as u32;
        s.config[2] = 0x0200_0000; // class: Ethernet controller
        Self::pcie_defaults(&mut s);
        let model = Arc::new(Mlx4Model {
            addr,
            opts,
            state: Mutex::new(s),
            iommu: ModelIommu::new("mlx4 model IOMMU"),
            engine_ns: Default::default(),
            doorbells: std::sync::OnceLock::new(),
        });
        if let Some(timing) = opts.engine {
            let _ = model
                .doorbells
                .set(engine_thread::Doorbells::start(&model, timing));
        }
        model
    }

    /// How it appears on the bus.
    pub fn describe(&self) -> PciDevice {
        PciDevice {
            addr: self.addr,
            id: PciId {
                vendor: prm::id::VENDOR,
                device: prm::id::CONNECTX3,
            },
            class: 0x02_0000,
            driver: Some("vfio-pci".into()),
            iommu_group: Some(0),
            interfaces: Vec::new(),
        }
    }

    /// Opens it for a driver: its IOMMU joins `domain`.
    pub fn open(self: &Arc<Self>, domain: &DmaDomain) -> Result<Arc<dyn PciFunction>, Error> {
        let iommu = Arc::new(self.iommu.clone());
        domain.attach(iommu.clone())?;
        Ok(Arc::new(Function {
            model: self.clone(),
            domain: domain.clone(),
            iommu,
        }))
    }

    /// Nanoseconds spent so far handling BAR2 writes: doorbells, and the
    /// TX engine and the cable's RX engine they run.
    pub fn engine_ns(&self) -> u64 {
        self.engine_ns.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The card fails as a ConnectX-3 does on an internal error: `code`
    /// appears in the catastrophic-error buffer (which QUERY_FW locates),
    /// the firmware stops answering commands, the engines stop. Only a
    /// reset brings it back.
    pub fn fail(&self, code: u32) {
        let mut s = lock(&self.state);
        s.catas = code.max(1);
        for p in &mut s.ports {
            p.up = false;
        }
    }

    /// With the engines on their own thread: nanoseconds drivers spent
    /// waiting for room to ring a doorbell (the engine behind; a real
    /// card's doorbell is a posted write), so a benchmark can take it out
    /// of the driver's time.
    pub fn doorbell_wait_ns(&self) -> u64 {
        self.doorbells.get().map_or(0, |d| d.waited_ns())
    }

    /// Violations seen so far.
    pub fn violations(&self) -> Vec<String> {
        lock(&self.state).violations.clone()
    }

    /// Forgets the violations seen so far (a test that provoked some on
    /// purpose goes on with a clean record).
    pub fn clear_violations(&self) {
        lock(&self.state).violations.clear();
    }

    /// Opcodes executed, in order (since the model was made).
    pub fn commands(&self) -> Vec<u16> {
        lock(&self.state).commands.clone()
    }

    /// Resets seen (FLR or register).
    pub fn resets(&self) -> u32 {
        lock(&self.state).resets
    }

    /// Whether the firmware runs now.
    pub fn running(&self) -> bool {
        lock(&self.state).running
    }

    /// Whether some driver holds the ownership semaphore.
    pub fn owned(&self) -> bool {
        lock(&self.state).owned
    }

    /// Whether INIT_HCA has run (and CLOSE_HCA not since).
    pub fn hca_initialised(&self) -> bool {
        lock(&self.state).icm.hca.is_some()
    }

    /// Bytes of ICM mapped now (MAP_ICM less UNMAP_ICM), and of the
    /// auxiliary area.
    pub fn icm_mapped(&self) -> (u64, u64) {
        let s = lock(&self.state);
        (s.icm.mapped_bytes(), s.icm.aux_bytes())
    }

    /// Port `port` (1-based) as the firmware has it: link up, frame MTU,
    /// user MTU, the valid MAC-table entries.
    pub fn port(&self, port: u8) -> (bool, u16, u16, Vec<u64>) {
        let s = lock(&self.state);
        let p = &s.ports[(port.clamp(1, 2) - 1) as usize];
        (p.up, p.frame_mtu, p.user_mtu, p.macs.clone())
    }

    /// Regions the device can reach now.
    pub fn mapped_regions(&self) -> usize {
        self.iommu.mapped()
    }

    fn violation(s: &mut State, what: String) {
        s.violations.push(what);
    }

    /// The PCIe capability at 0x40 (listed from the header), with its
    /// Device and Link Control registers at their reset values.
    fn pcie_defaults(s: &mut State) {
        s.config[1] |= (cfg::STATUS_CAP_LIST as u32) << 16;
        s.config[0x34 / 4] = PCIE_CAP as u32;
        // ID 0x10, no next capability, capability version 2.
        s.config[PCIE_CAP / 4] = 0x0002_0010;
        s.config[(PCIE_CAP + 8) / 4] = DEVCTL_RESET as u32;
        s.config[(PCIE_CAP + 0x10) / 4] = LNKCTL_RESET as u32;
    }

    /// The PCIe Device and Link Control registers now.
    pub fn pcie_control(&self) -> (u16, u16) {
        let s = lock(&self.state);
        (
            s.config[(PCIE_CAP + 8) / 4] as u16,
            s.config[(PCIE_CAP + 0x10) / 4] as u16,
        )
    }

    /// A register reset, as the card's: the firmware's state and, as any
    /// function reset, the command register and the PCIe control
    /// registers back to their reset values (the driver restores them).
    fn register_reset(s: &mut State) {
        Self::reset(s);
        s.config[1] &= 0xffff_0000;
        Self::pcie_defaults(s);
    }

    /// Reset: firmware stopped, no host memory held, T = 0, GO = 0.
    fn reset(s: &mut State) {
        s.hcr = [0; 6];
        s.hcr6 = 0;
        s.fa.clear();
        s.running = false;
        s.icm = icm::IcmState::default();
        s.ports = Default::default();
        s.obj = Default::default();
        s.qps = Default::default();
        s.semaphore = false;
        s.catas = 0;
        s.pending = None;
        s.resets += 1;
    }

    fn bar0_read(&self, s: &mut State, off: u64) -> u32 {
        let v = match off {
            o if (bar0::HCR..bar0::HCR + 24).contains(&o) => s.hcr[((o - bar0::HCR) / 4) as usize],
            o if o == bar0::HCR + 24 => {
                // A timed command completes once its time has passed.
                if let Some((opcode, op_mod, t, at)) = s.pending {
                    if s.catas == 0 && Instant::now() >= at {
                        s.pending = None;
                        self.complete(s, opcode, op_mod, t);
                    }
                }
                s.hcr6
            }
            bar0::OWNERSHIP => {
                let was = s.owned as u32;
                s.ours |= !s.owned;
                s.owned = true;
                was
            }
            bar0::SEMAPHORE => {
                let was = s.semaphore as u32;
                s.semaphore = true;
                was
            }
            CATAS_BUFFER => s.catas,
            _ => 0,
        };
        wire32(v)
    }

    fn bar0_write(&self, s: &mut State, off: u64, v: u32) {
        match off {
            o if (bar0::HCR..bar0::HCR + 24).contains(&o) => {
                if s.hcr6 & hcr::GO != 0 {
                    return Self::violation(
                        s,
                        format!("HCR dword {} written while GO", (o - bar0::HCR) / 4),
                    );
                }
                s.hcr[((o - bar0::HCR) / 4) as usize] = v;
            }
            o if o == bar0::HCR + 24 => self.post(s, v),
            bar0::OWNERSHIP => {
                if v != 0 {
                    Self::violation(s, format!("ownership semaphore written {v:#x}"));
                }
                s.owned = false;
                s.ours = false;
            }
            bar0::RESET => {
                if v != 1 {
                    return Self::violation(s, format!("reset register written {v:#x}, not BE 1"));
                }
                if !s.semaphore {
                    Self::violation(s, "register reset without the HW semaphore".into());
                }
                Self::register_reset(s);
            }
            _ => Self::violation(s, format!("BAR0 write {off:#x} = {v:#x}")),
        }
    }

    /// A write of HCR dword 6.
    fn post(&self, s: &mut State, v: u32) {
        if v & hcr::GO == 0 {
            return Self::violation(s, format!("HCR dword 6 written without GO: {v:#x}"));
        }
        if s.hcr6 & hcr::GO != 0 {
            return Self::violation(s, "command posted while the HCR is busy".into());
        }
        if v & hcr::EVENT != 0 {
            Self::violation(s, "event-mode command (no EQ set up)".into());
        }
        let t = v & hcr::TOGGLE;
        if t == s.hcr6 & hcr::TOGGLE {
            Self::violation(s, "command posted with T unchanged".into());
        }
        // Refused before the firmware looks at it: a card the driver never
        // took (firmware answers its owner only), or one that cannot
        // reach memory (every mailbox and the data path are DMA).
        let refused = if !s.ours {
            Some("command on a card whose ownership the driver never took")
        } else if s.config[1] & cfg::CMD_BUS_MASTER as u32 == 0 {
            Some("command with bus mastering off")
        } else {
            None
        };
        if let Some(why) = refused {
            Self::violation(s, why.into());
            s.hcr6 = (crate::prm::status::BAD_SYS_STATE as u32) << hcr::STATUS_SHIFT | t;
            return;
        }
        // A failed card's firmware answers nothing: GO stays set.
        if self.opts.hcr_stuck || s.catas != 0 {
            s.hcr6 = hcr::GO | t;
            return;
        }
        let opcode = (v & 0xfff) as u16;
        let op_mod = (v >> hcr::OP_MOD_SHIFT) as u8;
        if let Some(timing) = self.opts.fw_timing {
            s.pending = Some((opcode, op_mod, t, Instant::now() + timing.of(opcode)));
            s.hcr6 = hcr::GO | t;
            return;
        }
        self.complete(s, opcode, op_mod, t);
    }

    /// Runs a posted command and clears GO with its status.
    fn complete(&self, s: &mut State, opcode: u16, op_mod: u8, t: u32) {
        s.commands.push(opcode);
        let status = match self.opts.fail {
            Some((o, st)) if o == opcode => st,
            _ => self.execute(s, opcode, op_mod),
        };
        s.hcr6 = (status as u32) << hcr::STATUS_SHIFT | t;
    }
}

impl RegisterSpace for Config {
    fn read(&self, off: u64, width: u8) -> u64 {
        let s = lock(&self.0.state);
        (0..width as u64).fold(0, |v, i| {
            let at = (off + i) as usize;
            let byte = s
                .config
                .get(at / 4)
                .map_or(0, |d| d >> (8 * (at % 4)) & 0xff);
            v | (byte as u64) << (8 * i)
        })
    }
    fn write(&self, off: u64, width: u8, v: u64) {
        let mut s = lock(&self.0.state);
        let d = (off / 4) as usize;
        match (off % 4, width) {
            _ if d == 0 || d >= 64 => {}
            (0, 4) => s.config[d] = v as u32,
            (0, 2) | (2, 2) => {
                let sh = 8 * (off % 4);
                s.config[d] = (s.config[d] & !(0xffff << sh)) | ((v as u32 & 0xffff) << sh);
            }
            _ => Mlx4Model::violation(&mut s, format!("config write {off:#x}/{width}")),
        }
    }
}

impl Mlx4Model {
    /// With the engines on their own thread: waits until they did every
    /// doorbell rung so far (a BAR0 or config access does not pass them).
    fn flush_doorbells(&self) {
        if let Some(d) = self.doorbells.get() {
            d.flush();
        }
    }

    /// Writes `data` to host memory at bus address `at`: with
    /// [`EngineTiming::poison`], a poison pattern first and the contents
    /// a microsecond later. False if the IOMMU refuses.
    pub(super) fn dma_write(&self, at: u64, data: &[u8]) -> bool {
        let poison = self.opts.engine.is_some_and(|e| e.poison);
        if poison && data.len() <= engine_thread::POISON.len() {
            if !self.iommu.write(at, &engine_thread::POISON[..data.len()]) {
                return false;
            }
            engine_thread::poison_pause();
        }
        self.iommu.write(at, data)
    }
}

impl RegisterSpace for Bar0 {
    fn read(&self, off: u64, width: u8) -> u64 {
        self.0.flush_doorbells();
        let mut s = lock(&self.0.state);
        if width != 4 || off % 4 != 0 {
            Mlx4Model::violation(&mut s, format!("BAR0 read {off:#x}/{width}: not a dword"));
            return 0;
        }
        self.0.bar0_read(&mut s, off) as u64
    }
    fn write(&self, off: u64, width: u8, v: u64) {
        self.0.flush_doorbells();
        let mut s = lock(&self.0.state);
        if width != 4 || off % 4 != 0 {
            return Mlx4Model::violation(
                &mut s,
                format!("BAR0 write {off:#x}/{width}: not a dword"),
            );
        }
        self.0.bar0_write(&mut s, off, unwire32(v as u32));
    }
}

impl PciFunction for Function {
    fn addr(&self) -> PciAddr {
        self.model.addr
    }
    fn config(&self) -> Result<Regs, Error> {
        let name = format!("{} config (mlx4 model)", self.model.addr);
        Ok(Regs::emulated(
            Arc::new(Config(self.model.clone())),
            256,
            name,
        ))
    }
    fn bar(&self, bar: u32) -> Result<Regs, Error> {
        if bar == 2 {
            let name = format!("{} BAR2 (mlx4 model)", self.model.addr);
            return Ok(Regs::emulated(
                Arc::new(engine::Bar2(self.model.clone())),
                prm::uar::BAR2_LEN,
                name,
            ));
        }
        if bar != 0 {
            return Err(Error::Vfio {
                what: format!("BAR{bar} of {}", self.model.addr),
                detail: "not modelled yet".into(),
                hint: None,
            });
        }
        let name = format!("{} BAR0 (mlx4 model)", self.model.addr);
        Ok(Regs::emulated(
            Arc::new(Bar0(self.model.clone())),
            bar0::LEN,
            name,
        ))
    }
    fn msix_vectors(&self) -> u32 {
        MSIX_VECTORS
    }
    fn enable_msix(&self, n: u32) -> Result<Vec<EventFd>, Error> {
        if n == 0 || n > MSIX_VECTORS {
            return Err(Error::Pci {
                addr: self.model.addr.to_string(),
                detail: format!("MSI-X with {n} vectors; the model has 1..={MSIX_VECTORS}"),
                hint: None,
            });
        }
        let fds = (0..n)
            .map(|_| EventFd::new())
            .collect::<Result<Vec<_>, _>>()?;
        let kept = fds
            .iter()
            .map(EventFd::try_clone)
            .collect::<Result<Vec<_>, _>>()?;
        lock(&self.model.state).msix = kept;
        Ok(fds)
    }
    fn disable_msix(&self) -> Result<(), Error> {
        lock(&self.model.state).msix.clear();
        Ok(())
    }
    fn can_reset(&self) -> bool {
        !self.model.opts.no_flr
    }
    fn reset(&self) -> Result<(), Error> {
        let mut s = lock(&self.model.state);
        if self.model.opts.no_flr {
            Mlx4Model::violation(&mut s, "FLR asked of a function without it".into());
        }
        Mlx4Model::reset(&mut s);
        s.config[1] = 0;
        Ok(())
    }
    fn domain(&self) -> &DmaDomain {
        &self.domain
    }
    fn map_dma(&self, region: &DmaRegion) -> Result<DmaGuard, Error> {
        self.iommu.map(region)
    }
}
