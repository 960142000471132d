//! A register-level model of the 82576, behind the same [`PciFunction`]
//! trait VFIO implements, so that the driver runs on it unchanged on a
//! host with no such NIC (QEMU's own model, in the guest of
//! `tests/vm/run.sh`, is the peer others wrote; this one is rpmd's, for
//! the host tests and for what QEMU's cannot be made to do).
//!
//! It models what the driver uses: reset, EEPROM reads (with the image's
//! checksum word), the PHY through MDIC, link and status, the receive
//! filter's registers, the queues' registers, the statistics registers
//! (clear on read), and the data path through DMA on its own IOMMU (the
//! regions the domain and the driver mapped): a write of TDT sends every
//! descriptor up to it (to a sink, or back to the receive side with
//! `loopback`), and [`IgbModel::receive`] writes a frame into the receive
//! ring as the device would. A DMA outside the mapped memory is refused
//! and recorded as a violation, which tests assert to be none.
//!
//! Given an 82580's or I350's device ID it plays that member where the
//! driver must treat it differently ([`Family`]): 8 queues (a write to
//! another queue's registers is a violation), the row-major IVAR table,
//! an NVM section per LAN function (the MAC address and checksum of each;
//! [`ModelOptions::function`] says which one it is). With
//! [`ModelOptions::msix_vectors`] it has MSI-X: a frame written into a
//! receive queue signals the vector the queue's IVAR entry names (the
//! table read as each datasheet draws it, not through the driver's
//! [`Family`]), if EIMS lets it (EIAC and EIAM as the datasheet says).
//!
//! [`ModelOptions`] make it misbehave the ways hardware does: stuck in
//! reset, an EEPROM whose checksum is wrong, a link mode other than
//! copper, and hostile receive write-backs ([`Hostile`]).
use crate::family::Family;
use crate::regs::*;
use rpmd_pmd::function::model::{DeviceModel, ModelConfig, ModelFunction};
use rpmd_pmd::function::{EventFd, ModelIommu, PciFunction, RegisterSpace};
use rpmd_pmd::pci::PciAddr;
use rpmd_pmd::port::MacAddr;
use rpmd_pmd::{DmaDomain, Error};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

mod dma;
mod i210;
mod vf;

pub use vf::{PfBehaviour, ScriptedReply, VF_MAC};

/// A receive write-back no real device would make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hostile {
    /// A length beyond the buffer the descriptor gave.
    LengthBeyondBuffer,
    /// Every descriptor done but none the end of its frame.
    NeverEndOfPacket,
    /// The frame flagged with a receive (CRC) error.
    FrameError,
}

/// How the model should (mis)behave.
#[derive(Clone, Copy, Debug, Default)]
pub struct ModelOptions {
    /// CTRL.RST never clears.
    pub stuck_in_reset: bool,
    /// The checksum word of the last NVM section the member checks is
    /// off by one (the 82576's only one; the I350's fourth).
    pub bad_eeprom_checksum: bool,
    /// Config space shows this device ID instead of 0x10C9; an 82580's
    /// or I350's makes the model that member.
    pub device_id: Option<u16>,
    /// The LAN function it is (STATUS bits 3:2; 0-3).
    pub function: u8,
    /// CTRL_EXT's link mode after reset (bits 23:22; 0 is copper).
    pub link_mode: u32,
    /// MSI-X vectors it has (0: no MSI-X).
    pub msix_vectors: u32,
    /// What it sends comes back to its own receive side.
    pub loopback: bool,
    /// Receive write-backs broken this way (from the first frame on).
    pub hostile: Option<Hostile>,
    /// It is a virtual function (8086:10CA unless `device_id` says
    /// otherwise), its PF answering the mailbox this way.
    pub pf: Option<PfBehaviour>,
    /// An I210 without its flash fitted: its NVM is the iNVM.
    pub flashless: bool,
    /// An I210's or I211's iNVM holds no MAC address.
    pub empty_invm: bool,
    /// SW_FW_SYNC resources (I210/I211) firmware holds and never lets go.
    pub firmware_holds: u32,
}

/// The MAC address in the model's EEPROM.
pub const MODEL_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x82, 0x57, 0x60];

/// Register file and the rest of the device's state.
#[derive(Default)]
struct State {
    regs: HashMap<u64, u32>,
    eeprom: Vec<u16>,
    phy: [u16; 32],
    /// Frames sent (without `loopback`).
    sent: VecDeque<Vec<u8>>,
    /// The transmit context (index 0 only: the driver uses one): its
    /// vlan_macip_lens, type_tucmd_mlhl and mss_l4len_idx words.
    tx_ctx: (u32, u32, u32),
    /// A frame being gathered from data descriptors.
    tx_frame: Vec<u8>,
    violations: Vec<String>,
    /// MSI-X vectors' eventfds, while MSI-X is on.
    msix: Vec<EventFd>,
    /// The mailbox, when it is a virtual function.
    vf: vf::VfState,
    /// The I210's or I211's iNVM records.
    invm: Vec<u32>,
}

/// An 82576 (or 82580, I350, I210, I211, or a VF) in software.
pub struct IgbModel {
    addr: PciAddr,
    opts: ModelOptions,
    family: Family,
    device: u16,
    state: Mutex<State>,
    iommu: ModelIommu,
    config: Arc<ModelConfig>,
    /// Itself, for the BAR windows it hands out.
    me: Weak<IgbModel>,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

struct Bar0(Arc<IgbModel>);

/// BAR 0's size (128 KiB).
const BAR0_LEN: u64 = 0x20000;

impl IgbModel {
    /// An 82576 (8086:10C9) at `addr`, or the member
    /// [`ModelOptions::device_id`] names.
    pub fn new(addr: PciAddr, opts: ModelOptions) -> Arc<IgbModel> {
        let vf_id = if opts.pf.is_some() { 0x10CA } else { 0x10C9 };
        let device = opts.device_id.unwrap_or(vf_id);
        let family = Family::of(device).unwrap_or(Family::I82576);
        let mut s = State {
            eeprom: eeprom_image(family, opts.bad_eeprom_checksum),
            invm: i210::invm_image(opts.empty_invm),
            ..State::default()
        };
        s.phy[PHY_ID1 as usize] = 0x02A8;
        s.phy[PHY_ID2 as usize] = 0x0391;
        let invm = i210::invm_part(family, device, &opts);
        Self::reset(&mut s, family, &opts, invm);
        Arc::new_cyclic(|me| IgbModel {
            addr,
            opts,
            family,
            device,
            state: Mutex::new(s),
            iommu: ModelIommu::new("igb model IOMMU"),
            config: Arc::new(ModelConfig::new(VENDOR_INTEL, device)),
            me: me.clone(),
        })
    }

    /// Opens it for a driver: its IOMMU joins `domain`.
    pub fn open(self: &Arc<Self>, domain: &DmaDomain) -> Result<Arc<dyn PciFunction>, Error> {
        ModelFunction::open(self.clone(), &self.iommu, domain)
    }

    /// The device after a reset: registers at their reset values, the
    /// MAC address loaded from the function's NVM section (or the iNVM,
    /// when `invm`) into receive address 0.
    fn reset(s: &mut State, family: Family, opts: &ModelOptions, invm: bool) {
        s.regs.clear();
        let flash = family == Family::I210 && !invm;
        let detected = if flash { EECD_FLASH_DETECTED_I210 } else { 0 };
        s.regs.insert(EECD, EECD_AUTO_RD | detected);
        s.regs.insert(CTRL_EXT, (opts.link_mode & 3) << 22);
        let base = family.nvm_section(opts.function & 3) as usize;
        let m = &s.eeprom[base..];
        let (lo, hi) = (m[0] as u32 | (m[1] as u32) << 16, m[2] as u32 | RAH_AV);
        if opts.pf.is_none() && !(invm && opts.empty_invm) {
            // A VF's address is its PF's to give; an iNVM's is the
            // model's first, unless it holds none.
            s.regs.insert(RAL0, lo);
            s.regs.insert(RAH0, hi);
        }
        s.phy[PHY_CONTROL as usize] = PHY_CONTROL_AN_ENABLE;
        s.tx_frame.clear();
    }

    /// Frames sent since the last call (without `loopback`).
    pub fn take_sent(&self) -> Vec<Vec<u8>> {
        lock(&self.state).sent.drain(..).collect()
    }

    /// Violations seen so far (DMA outside mapped memory, malformed
    /// descriptors).
    pub fn violations(&self) -> Vec<String> {
        lock(&self.state).violations.clone()
    }

    /// A frame arriving on the wire: written into receive queue 0 if the
    /// receiver and queue are on, the filter admits it and the ring has
    /// room; counted missed (MPC) otherwise. Whether it was written.
    pub fn receive(&self, frame: &[u8]) -> bool {
        self.receive_on(0, frame)
    }

    /// [`receive`](IgbModel::receive) into queue `q` (as RSS or a
    /// filter would place it), then its interrupt.
    pub fn receive_on(&self, q: u16, frame: &[u8]) -> bool {
        let mut s = lock(&self.state);
        let written = self.receive_locked(&mut s, q, frame);
        if written {
            self.interrupt_rx(&mut s, q);
        }
        written
    }

    /// Writes `desc` into slot `slot` (taken modulo the ring's length)
    /// of receive (`rx`) or transmit queue `q`'s ring, as the device's
    /// DMA would: a write-back no real device makes, anywhere in the
    /// ring, for fuzzing the driver. False when the ring has no length
    /// yet or the slot is not mapped.
    pub fn write_descriptor(&self, rx: bool, q: u16, slot: u32, desc: &[u8; 16]) -> bool {
        let s = lock(&self.state);
        let (bal, bah, len) = match rx {
            true => (rdbal(q), rdbah(q), rdlen(q)),
            false => (tdbal(q), tdbah(q), tdlen(q)),
        };
        let base = IgbModel::reg(&s, bal) as u64 | (IgbModel::reg(&s, bah) as u64) << 32;
        let n = IgbModel::reg(&s, len) / 16;
        n > 0 && self.iommu.write(base + 16 * (slot % n) as u64, desc)
    }

    /// The member it plays.
    pub fn family(&self) -> Family {
        self.family
    }

    fn violation(s: &mut State, what: String) {
        s.violations.push(what);
    }

    fn reg(s: &State, off: u64) -> u32 {
        s.regs.get(&off).copied().unwrap_or(0)
    }

    fn count(s: &mut State, off: u64, by: u32) {
        let v = Self::reg(s, off).wrapping_add(by);
        s.regs.insert(off, v);
    }

    /// STATUS as the driver reads it: link up once CTRL.SLU is set, full
    /// duplex, 1000 Mb/s, the LAN function.
    fn status(&self, s: &State) -> u32 {
        // A VF reads its PF's link, which is up.
        let up = Self::reg(s, CTRL) & CTRL_SLU != 0 || self.opts.pf.is_some();
        let func = (self.opts.function as u32 & 3) << STATUS_FUNC_SHIFT;
        STATUS_FD | 2 << STATUS_SPEED_SHIFT | func | if up { STATUS_LU } else { 0 }
    }

    fn read_reg(&self, s: &mut State, off: u64) -> u32 {
        if let Some(v) = self.vf_read(s, off).or_else(|| self.i210_read(s, off)) {
            return v;
        }
        match off {
            STATUS => self.status(s),
            ICR => s.regs.remove(&ICR).unwrap_or(0),
            0x4000..=0x40FF => s.regs.remove(&off).unwrap_or(0),
            _ => Self::reg(s, off),
        }
    }

    fn write_reg(&self, s: &mut State, off: u64, v: u32) {
        if self.vf_write(s, off, v) || self.i210_refuses(s, off, v) {
            return;
        }
        match off {
            CTRL if v & CTRL_RST != 0 => {
                if self.opts.stuck_in_reset {
                    s.regs.insert(CTRL, v);
                } else {
                    Self::reset(s, self.family, &self.opts, self.invm());
                    s.regs.insert(CTRL, v & !CTRL_RST);
                }
            }
            EERD if v & EERD_START != 0 => {
                let word = (v >> EERD_ADDR_SHIFT) as usize & 0x3fff;
                let data = s.eeprom.get(word).copied().unwrap_or(0xffff) as u32;
                s.regs.insert(EERD, data << EERD_DATA_SHIFT | EERD_DONE);
            }
            MDIC => {
                let v = self.mdic(s, v);
                s.regs.insert(MDIC, v);
            }
            EIMS => Self::set_bits(s, EIMS, v, true),
            EIMC => Self::set_bits(s, EIMS, v, false),
            EICR => Self::set_bits(s, EICR, v, false),
            0xC000..=0xC3FF | 0xE000..=0xE3FF if (off & 0x3ff) / 0x40 >= self.queues() => {
                let q = (off & 0x3ff) / 0x40;
                let what = format!(
                    "write of {v:#x} to {off:#x}, a register of queue {q}: the {} has {} queues",
                    self.family.name(),
                    self.family.queues()
                );
                Self::violation(s, what);
            }
            _ => {
                s.regs.insert(off, v);
                if let Some(q) = (0..MAX_QUEUES).find(|&q| tdt(q) == off) {
                    dma::transmit(self, s, q);
                }
            }
        }
    }

    /// Queues it has (each way).
    fn queues(&self) -> u64 {
        self.family.queues() as u64
    }

    /// Sets (`on`) or clears `bits` of register `off`.
    fn set_bits(s: &mut State, off: u64, bits: u32, on: bool) {
        let v = Self::reg(s, off);
        s.regs.insert(off, if on { v | bits } else { v & !bits });
    }

    /// Receive queue `q`'s cause raised: the MSI-X message of the vector
    /// its IVAR entry names, if MSI-X mode is on, the entry valid and
    /// EIMS lets the vector; EIAC then clears its EICR bit, and EIAM (with
    /// GPIE.EIAME) its EIMS bit.
    fn interrupt_rx(&self, s: &mut State, q: u16) {
        let vf = self.opts.pf.is_some();
        // A VF's MSI-X mode is its PF's (on); its IVAR0 holds receive
        // queue q's entry in byte 2q.
        if !vf && Self::reg(s, GPIE) & GPIE_MSIX_MODE == 0 {
            return;
        }
        let found = match vf {
            true => Some((0, 2 * q as u32)),
            false => (0..8u32)
                .flat_map(|r| [(r, 0), (r, 2)])
                .find(|&(r, b)| ivar_rx_queue(self.family, r, b) == q as u32),
        };
        let Some((r, b)) = found else {
            return;
        };
        let entry = Self::reg(s, IVAR0 + 4 * r as u64) >> (8 * b) & 0xff;
        if entry & IVAR_VALID == 0 {
            return;
        }
        let bit = 1u32 << (entry & 0x1f);
        Self::set_bits(s, EICR, bit, true);
        if Self::reg(s, EIMS) & bit == 0 {
            return;
        }
        if let Some(fd) = s.msix.get((entry & 0x1f) as usize) {
            let _ = fd.signal();
        }
        if Self::reg(s, EIAC) & bit != 0 {
            Self::set_bits(s, EICR, bit, false);
        }
        let auto_mask = vf || Self::reg(s, GPIE) & GPIE_EIAME != 0;
        if auto_mask && Self::reg(s, EIAM) & bit != 0 {
            Self::set_bits(s, EIMS, bit, false);
        }
    }

    /// One MDI access: MDIC as the device leaves it.
    fn mdic(&self, s: &mut State, v: u32) -> u32 {
        let reg = (v >> MDIC_REG_SHIFT & 0x1f) as usize;
        if (v >> MDIC_PHY_SHIFT & 0x1f) != PHY_ADDR {
            return v | MDIC_ERROR | MDIC_READY;
        }
        if v & MDIC_OP_WRITE != 0 {
            let data = v as u16 & !PHY_CONTROL_AN_RESTART;
            s.phy[reg] = data;
            return v | MDIC_READY;
        }
        let data = match reg as u32 {
            PHY_STATUS if Self::reg(s, CTRL) & CTRL_SLU != 0 => PHY_STATUS_LINK,
            _ => s.phy[reg],
        };
        (v & !0xffff) | data as u32 | MDIC_READY
    }
}

/// The receive queue whose cause byte `b` of IVAR register `r` routes,
/// read the way each datasheet draws the table (82576 §8.8.15: register
/// `r` holds RX `r`, TX `r`, RX `r + 8`, TX `r + 8`; 82580 and I350: RX
/// `2r`, TX `2r`, RX `2r + 1`, TX `2r + 1`); a transmit byte routes none
/// (`u32::MAX`).
fn ivar_rx_queue(family: Family, r: u32, b: u32) -> u32 {
    match (family, b) {
        (Family::I82576, 0) => r,
        (Family::I82576, 2) => r + 8,
        (_, 0) => 2 * r,
        (_, 2) => 2 * r + 1,
        _ => u32::MAX,
    }
}

/// The EEPROM image. The 82576's: the MAC address in words 0-2, the
/// image version in word 5, and the checksum word 0x3F making words
/// 0-0x3F sum to [`NVM_SUM`]. The 82580's and I350's: such a section for
/// each LAN function, its MAC address [`model_mac_of`] it, the 82580's
/// compatibility word saying all four are checksummed, and the I350's
/// eTrack ID. With `bad`, the last section checked sums to one more.
fn eeprom_image(family: Family, bad: bool) -> Vec<u16> {
    let sections: u8 = match family {
        Family::I82580 | Family::I350 => 4,
        _ => 1,
    };
    let mut e = vec![0u16; 0x140];
    if family == Family::I82580 {
        e[NVM_COMPATIBILITY_REG_3 as usize] = NVM_COMPATIBILITY_BIT_MASK;
    }
    if family == Family::I350 {
        e[NVM_ETRACK_WORD as usize] = 0x4567;
        e[NVM_ETRACK_WORD as usize + 1] = NVM_ETRACK_VALID | 0x0123;
    }
    for f in 0..sections {
        let base = family.nvm_section(f) as usize;
        let mac = model_mac_of(f).0;
        for k in 0..3 {
            e[base + k] = u16::from_le_bytes([mac[2 * k], mac[2 * k + 1]]);
        }
        e[base + NVM_VERSION as usize] = 0x1234;
        let sum = e[base..base + 0x3f]
            .iter()
            .fold(0u16, |a, &w| a.wrapping_add(w));
        let last = f + 1 == sections;
        e[base + 0x3f] = NVM_SUM.wrapping_sub(sum).wrapping_add((bad && last) as u16);
    }
    e
}

impl RegisterSpace for Bar0 {
    fn read(&self, off: u64, width: u8) -> u64 {
        let mut s = lock(&self.0.state);
        if width != 4 {
            IgbModel::violation(&mut s, format!("BAR0 read of {width} bytes at {off:#x}"));
            return 0;
        }
        self.0.read_reg(&mut s, off) as u64
    }
    fn write(&self, off: u64, width: u8, v: u64) {
        let mut s = lock(&self.0.state);
        if width != 4 {
            IgbModel::violation(&mut s, format!("BAR0 write of {width} bytes at {off:#x}"));
            return;
        }
        self.0.write_reg(&mut s, off, v as u32);
    }
}

impl DeviceModel for IgbModel {
    fn addr(&self) -> PciAddr {
        self.addr
    }
    fn name(&self) -> &'static str {
        "igb model"
    }
    fn config_space(&self) -> Arc<dyn RegisterSpace> {
        self.config.clone()
    }
    fn bar_space(&self, bar: u32) -> Option<(Arc<dyn RegisterSpace>, u64)> {
        let me = self.me.upgrade()?;
        (bar == 0).then(|| (Arc::new(Bar0(me)) as Arc<dyn RegisterSpace>, BAR0_LEN))
    }
    fn reset(&self) {
        let invm = self.invm();
        IgbModel::reset(&mut lock(&self.state), self.family, &self.opts, invm);
    }
    fn msix_vectors(&self) -> u32 {
        self.opts.msix_vectors
    }
    fn enable_msix(&self, n: u32) -> Result<Vec<EventFd>, Error> {
        if n > self.opts.msix_vectors {
            return Err(Error::Pci {
                addr: self.addr.to_string(),
                detail: format!(
                    "{n} MSI-X vectors asked, the model has {}",
                    self.opts.msix_vectors
                ),
                hint: None,
            });
        }
        let fds = (0..n)
            .map(|_| EventFd::new())
            .collect::<Result<Vec<_>, _>>()?;
        let mine = fds
            .iter()
            .map(EventFd::try_clone)
            .collect::<Result<Vec<_>, _>>()?;
        lock(&self.state).msix = mine;
        Ok(fds)
    }
    fn disable_msix(&self) {
        lock(&self.state).msix.clear();
    }
}

/// The model's MAC address (LAN function 0's).
pub fn model_mac() -> MacAddr {
    MacAddr(MODEL_MAC)
}

/// LAN function `f`'s MAC address in an 82580's or I350's model: the
/// last byte of [`MODEL_MAC`] plus `f`.
pub fn model_mac_of(f: u8) -> MacAddr {
    let mut m = MODEL_MAC;
    m[5] = m[5].wrapping_add(f);
    MacAddr(m)
}
