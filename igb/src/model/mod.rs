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
//! [`ModelOptions`] make it misbehave the ways hardware does: stuck in
//! reset, an EEPROM whose checksum is wrong, and hostile receive
//! write-backs ([`Hostile`]).
use crate::regs::*;
use rpmd_pmd::function::model::{DeviceModel, ModelConfig, ModelFunction};
use rpmd_pmd::function::{ModelIommu, PciFunction, RegisterSpace};
use rpmd_pmd::pci::PciAddr;
use rpmd_pmd::port::MacAddr;
use rpmd_pmd::{DmaDomain, Error};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

mod dma;

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
    /// The EEPROM's checksum word is off by one.
    pub bad_eeprom_checksum: bool,
    /// Config space shows this device ID instead of 0x10C9.
    pub device_id: Option<u16>,
    /// What it sends comes back to its own receive side.
    pub loopback: bool,
    /// Receive write-backs broken this way (from the first frame on).
    pub hostile: Option<Hostile>,
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
}

/// An 82576 in software.
pub struct IgbModel {
    addr: PciAddr,
    opts: ModelOptions,
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
    /// An 82576 (8086:10C9) at `addr`.
    pub fn new(addr: PciAddr, opts: ModelOptions) -> Arc<IgbModel> {
        let mut s = State {
            eeprom: eeprom_image(opts.bad_eeprom_checksum),
            ..State::default()
        };
        s.phy[PHY_ID1 as usize] = 0x02A8;
        s.phy[PHY_ID2 as usize] = 0x0391;
        Self::reset(&mut s);
        let device = opts.device_id.unwrap_or(0x10C9);
        Arc::new_cyclic(|me| IgbModel {
            addr,
            opts,
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
    /// MAC address loaded from the EEPROM into receive address 0.
    fn reset(s: &mut State) {
        s.regs.clear();
        s.regs.insert(EECD, EECD_AUTO_RD);
        let m = &s.eeprom;
        let (lo, hi) = (m[0] as u32 | (m[1] as u32) << 16, m[2] as u32 | RAH_AV);
        s.regs.insert(RAL0, lo);
        s.regs.insert(RAH0, hi);
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
        let mut s = lock(&self.state);
        self.receive_locked(&mut s, frame)
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
    /// duplex, 1000 Mb/s.
    fn status(s: &State) -> u32 {
        let up = Self::reg(s, CTRL) & CTRL_SLU != 0;
        STATUS_FD | 2 << STATUS_SPEED_SHIFT | if up { STATUS_LU } else { 0 }
    }

    fn read_reg(&self, s: &mut State, off: u64) -> u32 {
        match off {
            STATUS => Self::status(s),
            ICR => s.regs.remove(&ICR).unwrap_or(0),
            0x4000..=0x40FF => s.regs.remove(&off).unwrap_or(0),
            _ => Self::reg(s, off),
        }
    }

    fn write_reg(&self, s: &mut State, off: u64, v: u32) {
        match off {
            CTRL if v & CTRL_RST != 0 => {
                if self.opts.stuck_in_reset {
                    s.regs.insert(CTRL, v);
                } else {
                    Self::reset(s);
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
            _ => {
                s.regs.insert(off, v);
                if let Some(q) = (0..MAX_QUEUES).find(|&q| tdt(q) == off) {
                    dma::transmit(self, s, q);
                }
            }
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

/// The EEPROM image: the MAC address in words 0-2, the image version in
/// word 5, and the checksum word 0x3F making words 0-0x3F sum to
/// [`NVM_SUM`] (one more when `bad`).
fn eeprom_image(bad: bool) -> Vec<u16> {
    let mut e = vec![0u16; 0x40];
    for k in 0..3 {
        e[k] = u16::from_le_bytes([MODEL_MAC[2 * k], MODEL_MAC[2 * k + 1]]);
    }
    e[NVM_VERSION as usize] = 0x1234;
    let sum = e.iter().fold(0u16, |a, &w| a.wrapping_add(w));
    e[0x3f] = NVM_SUM.wrapping_sub(sum).wrapping_add(bad as u16);
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
        IgbModel::reset(&mut lock(&self.state));
    }
}

/// The model's MAC address.
pub fn model_mac() -> MacAddr {
    MacAddr(MODEL_MAC)
}
