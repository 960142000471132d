//! Test support: a virtio-net PCI function in software, behind the same
//! [`PciFunction`] trait VFIO implements, so the PCI driver runs against
//! it unchanged in a unit test (no QEMU).
//!
//! The model is a modern (virtio 1.2 §4.1.4) device: config space with
//! the vendor capabilities, BAR4 holding the common, ISR, device and
//! notify windows as QEMU lays them out, one queue pair of split rings,
//! and a loopback data path: a frame the driver sends on the TX queue is
//! received on the RX queue. Its DMA goes through an IOMMU of its own
//! (the regions the domain and the driver mapped), and it is strict: an
//! access outside the mappings, a doorbell before DRIVER_OK, DMA without
//! bus mastering, or a queue set up in the wrong state is recorded as a
//! violation (the device then sets DEVICE_NEEDS_RESET and stops), which
//! the tests assert to be none.
#![allow(unsafe_code)]

use crate::consts::{
    VIRTIO_F_VERSION_1, VIRTIO_NET_F_MAC, VIRTIO_NET_F_MRG_RXBUF, VRING_DESC_F_NEXT,
    VRING_DESC_F_WRITE,
};
use crate::vring::{split_sizes, SplitView};
use rpmd_pmd::domain::{DmaGuard, DmaTarget};
use rpmd_pmd::function::{cfg, ModelIommu, PciFunction};
use rpmd_pmd::function::{RegisterSpace, Regs};
use rpmd_pmd::pci::{PciAddr, PciDevice, PciId};
use rpmd_pmd::{DmaDomain, DmaRegion, Error};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

/// Offered features: VERSION_1, ACCESS_PLATFORM, MAC, STATUS, MRG_RXBUF.
pub(crate) const OFFERED: u64 =
    VIRTIO_F_VERSION_1 | (1 << 33) | VIRTIO_NET_F_MAC | (1 << 16) | VIRTIO_NET_F_MRG_RXBUF;
/// The model's MAC address.
pub(crate) const MAC: [u8; 6] = [0x52, 0x54, 0, 0x12, 0x34, 0x56];
const MAX_QUEUE: u16 = 256;
const NUM_QUEUES: u16 = 2;
const HDR: usize = 12;
// BAR4 windows (QEMU's layout) and the notify multiplier.
const COMMON: u64 = 0x0000;
const ISR: u64 = 0x1000;
const DEVICE: u64 = 0x2000;
const NOTIFY: u64 = 0x3000;
const NOTIFY_MULT: u32 = 4;
const BAR_LEN: u64 = 0x4000;
// §2.1 status bits.
const S_FEATURES_OK: u8 = 8;
const S_DRIVER_OK: u8 = 4;
const S_NEEDS_RESET: u8 = 0x40;

#[derive(Clone, Copy, Default)]
struct Queue {
    size: u16,
    msix: u16,
    enabled: bool,
    desc: u64,
    driver: u64,
    device: u64,
    /// Device side: next avail entry to take, next used entry to write.
    next_avail: u16,
    used: u16,
}

#[derive(Default)]
struct State {
    command: u16,
    status: u8,
    dfsel: u32,
    gfsel: u32,
    driver_features: u64,
    qsel: u16,
    queues: [Queue; NUM_QUEUES as usize],
    /// Frames sent and not yet received, headers stripped.
    pending: VecDeque<Vec<u8>>,
    violations: Vec<String>,
    sent: u64,
    received: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The device: registers, state, IOMMU.
pub(crate) struct NetModel {
    addr: PciAddr,
    state: Mutex<State>,
    iommu: ModelIommu,
    /// Refuse every feature set (FEATURES_OK never sticks).
    refuse_features: bool,
    /// The cable: `status`'s LINK_UP bit.
    cable: std::sync::atomic::AtomicBool,
}

/// What a port opened on the model sees: the device and the domain.
struct Function {
    model: Arc<NetModel>,
    domain: DmaDomain,
    iommu: Arc<ModelIommu>,
}

struct Config(Arc<NetModel>);
struct Bar(Arc<NetModel>);

impl NetModel {
    pub(crate) fn new(addr: PciAddr, refuse_features: bool) -> Arc<NetModel> {
        Arc::new(NetModel {
            addr,
            state: Mutex::default(),
            iommu: ModelIommu::new("virtio-net model IOMMU"),
            refuse_features,
            cable: std::sync::atomic::AtomicBool::new(true),
        })
    }

    /// Plugs (`true`) or pulls the cable: the status field's link bit
    /// (the model has no MSI-X: no configuration interrupt follows).
    pub(crate) fn set_link(&self, up: bool) {
        self.cable.store(up, std::sync::atomic::Ordering::Relaxed);
    }

    /// How it appears on the bus.
    pub(crate) fn describe(&self) -> PciDevice {
        PciDevice {
            addr: self.addr,
            id: PciId {
                vendor: 0x1af4,
                device: 0x1041,
            },
            class: 0x02_0000,
            driver: Some("vfio-pci".into()),
            iommu_group: Some(0),
            interfaces: Vec::new(),
        }
    }

    /// Opens it for a port: its IOMMU joins `domain`.
    pub(crate) fn open(
        self: &Arc<Self>,
        domain: &DmaDomain,
    ) -> Result<Arc<dyn PciFunction>, Error> {
        let iommu = Arc::new(self.iommu.clone());
        domain.attach(iommu.clone())?;
        Ok(Arc::new(Function {
            model: self.clone(),
            domain: domain.clone(),
            iommu,
        }))
    }

    /// Protocol violations seen so far.
    pub(crate) fn violations(&self) -> Vec<String> {
        lock(&self.state).violations.clone()
    }

    /// Frames sent by the driver and received back by it.
    pub(crate) fn counts(&self) -> (u64, u64) {
        let s = lock(&self.state);
        (s.sent, s.received)
    }

    /// Bytes of IOVA space mapped now.
    pub(crate) fn mapped_regions(&self) -> usize {
        self.iommu.mapped()
    }

    fn violation(s: &mut State, what: String) {
        s.violations.push(what);
        s.status |= S_NEEDS_RESET;
    }

    /// The config-space byte at `off` (read-only but for COMMAND).
    fn config_byte(s: &State, off: u64) -> u8 {
        let mut c = [0u8; 256];
        c[0..2].copy_from_slice(&0x1af4u16.to_le_bytes());
        c[2..4].copy_from_slice(&0x1041u16.to_le_bytes());
        c[4..6].copy_from_slice(&s.command.to_le_bytes());
        c[6..8].copy_from_slice(&cfg::STATUS_CAP_LIST.to_le_bytes());
        c[0x0b] = 0x02; // class: network
        c[0x34] = 0x40;
        // §4.1.4: vendor capabilities (id 9): type, BAR 4, offset, length.
        let caps: [(u8, u8, u64, u32); 4] = [
            (0x40, 1, COMMON, 0x38),
            (0x50, 2, NOTIFY, 0x1000),
            (0x64, 3, ISR, 4),
            (0x74, 4, DEVICE, 0x10),
        ];
        for (i, &(at, ty, offset, len)) in caps.iter().enumerate() {
            let at = at as usize;
            let next = caps.get(i + 1).map_or(0, |c| c.0);
            let cap_len = if ty == 2 { 20 } else { 16 };
            c[at..at + 8].copy_from_slice(&[9, next, cap_len, ty, 4, 0, 0, 0]);
            c[at + 8..at + 12].copy_from_slice(&(offset as u32).to_le_bytes());
            c[at + 12..at + 16].copy_from_slice(&len.to_le_bytes());
            if ty == 2 {
                c[at + 16..at + 20].copy_from_slice(&NOTIFY_MULT.to_le_bytes());
            }
        }
        c.get(off as usize).copied().unwrap_or(0)
    }

    fn common_read(s: &State, off: u64) -> u64 {
        let q = s.queues.get(s.qsel as usize);
        match off {
            0x00 => s.dfsel as u64,
            0x04 => match s.dfsel {
                0 => OFFERED & 0xffff_ffff,
                1 => OFFERED >> 32,
                _ => 0,
            },
            0x08 => s.gfsel as u64,
            0x0c => (s.driver_features >> (32 * s.gfsel.min(1))) & 0xffff_ffff,
            0x12 => NUM_QUEUES as u64,
            0x14 => s.status as u64,
            0x16 => s.qsel as u64,
            0x18 => q.map_or(0, |q| if q.size == 0 { MAX_QUEUE } else { q.size }) as u64,
            0x1a => q.map_or(0xffff, |q| q.msix) as u64,
            0x1c => q.is_some_and(|q| q.enabled) as u64,
            0x1e => s.qsel as u64,
            0x20 => q.map_or(0, |q| q.desc),
            0x28 => q.map_or(0, |q| q.driver),
            0x30 => q.map_or(0, |q| q.device),
            _ => 0,
        }
    }

    fn common_write(&self, s: &mut State, off: u64, width: u8, v: u64) {
        let qsel = s.qsel as usize;
        let live = s.status & S_DRIVER_OK != 0;
        let set64 = |old: u64| -> u64 {
            match (off % 8, width) {
                (_, 8) => v,
                (0, 4) => (old & !0xffff_ffff) | v,
                (4, 4) => (old & 0xffff_ffff) | (v << 32),
                _ => old,
            }
        };
        match off {
            0x00 => s.dfsel = v as u32,
            0x08 => s.gfsel = v as u32,
            0x0c => {
                let shift = 32 * s.gfsel.min(1);
                s.driver_features =
                    (s.driver_features & !(0xffff_ffff << shift)) | ((v & 0xffff_ffff) << shift);
            }
            0x10 => {}
            0x14 => self.set_status(s, v as u8),
            0x16 => s.qsel = v as u16,
            0x18..=0x37 if live || qsel >= NUM_QUEUES as usize => Self::violation(
                s,
                format!("queue {qsel} register {off:#x} written (DRIVER_OK set or no such queue)"),
            ),
            0x18 => {
                let n = v as u16;
                if !n.is_power_of_two() || n > MAX_QUEUE {
                    Self::violation(s, format!("queue {qsel}: size {n}"));
                }
                s.queues[qsel].size = n;
            }
            0x1a => s.queues[qsel].msix = 0xffff, // no MSI-X: NO_VECTOR
            0x1c => {
                if s.status & S_FEATURES_OK == 0 {
                    Self::violation(s, format!("queue {qsel} enabled before FEATURES_OK"));
                }
                s.queues[qsel].enabled = v == 1;
            }
            0x20..=0x27 => s.queues[qsel].desc = set64(s.queues[qsel].desc),
            0x28..=0x2f => s.queues[qsel].driver = set64(s.queues[qsel].driver),
            0x30..=0x37 => s.queues[qsel].device = set64(s.queues[qsel].device),
            _ => Self::violation(s, format!("write to common config {off:#x}")),
        }
    }

    fn set_status(&self, s: &mut State, v: u8) {
        if v == 0 {
            // §4.1.4.3.1: reset. Everything but config space goes.
            let command = s.command;
            let violations = std::mem::take(&mut s.violations);
            let (sent, received) = (s.sent, s.received);
            *s = State {
                command,
                violations,
                sent,
                received,
                ..State::default()
            };
            return;
        }
        let mut v = v;
        if v & S_FEATURES_OK != 0 && s.status & S_FEATURES_OK == 0 {
            let f = s.driver_features;
            let ok = f & !OFFERED == 0 && f & VIRTIO_F_VERSION_1 != 0 && f & (1 << 33) != 0;
            if !ok || self.refuse_features {
                v &= !S_FEATURES_OK;
            }
        }
        if v & S_DRIVER_OK != 0 && s.status & S_DRIVER_OK == 0 {
            for (i, q) in s.queues.iter().enumerate().filter(|q| q.1.enabled) {
                if self.ring(q).is_none() {
                    let what = format!("queue {i}: rings outside the IOMMU's mappings");
                    s.violations.push(what);
                    v |= S_NEEDS_RESET;
                }
            }
        }
        s.status = v | (s.status & S_NEEDS_RESET);
    }

    /// The split ring of queue `q`, if its three parts are mapped.
    fn ring(&self, q: &Queue) -> Option<SplitView> {
        let (d, a, u) = split_sizes(q.size);
        let desc = self.iommu.translate(q.desc, d)?;
        let avail = self.iommu.translate(q.driver, a)?;
        let used = self.iommu.translate(q.device, u)?;
        if q.desc % 16 != 0 || q.driver % 2 != 0 || q.device % 4 != 0 {
            return None;
        }
        // SAFETY: the three parts lie in regions mapped for the device
        // (the IOMMU holds their guards' ids; the regions outlive the
        // mappings), aligned as checked; the model only makes volatile
        // and atomic accesses through the view.
        Some(unsafe { SplitView::new(desc, avail, used, q.size) })
    }

    fn notify(&self, s: &mut State, qi: usize) {
        if s.status & S_DRIVER_OK == 0 || s.status & S_NEEDS_RESET != 0 {
            if s.status & S_NEEDS_RESET == 0 {
                Self::violation(s, format!("doorbell of queue {qi} before DRIVER_OK"));
            }
            return;
        }
        if s.command & cfg::CMD_BUS_MASTER == 0 {
            return Self::violation(s, "DMA asked without bus mastering".into());
        }
        if qi == 1 {
            self.transmit(s);
        }
        self.deliver(s);
    }

    /// Takes every frame the driver made available on TX.
    fn transmit(&self, s: &mut State) {
        let q = s.queues[1];
        let Some(v) = self.ring(&q).filter(|_| q.enabled) else {
            return Self::violation(s, "TX doorbell on a queue not set up".into());
        };
        let (mut next, mut used) = (q.next_avail, q.used);
        // Acquire: pairs with the driver's Release store of avail.idx.
        while next != v.avail_idx(Ordering::Acquire) {
            let head = v.avail_entry(next);
            next = next.wrapping_add(1);
            match self.gather(&v, head) {
                Ok(frame) => s.pending.push_back(frame),
                Err(e) => return Self::violation(s, e),
            }
            v.set_used_elem(used, head as u32, 0);
            used = used.wrapping_add(1);
            s.sent += 1;
        }
        // Release: pairs with the driver's Acquire load of used.idx.
        v.set_used_idx(used, Ordering::Release);
        s.queues[1].next_avail = next;
        s.queues[1].used = used;
    }

    /// A TX chain's bytes, the virtio-net header stripped.
    fn gather(&self, v: &SplitView, head: u16) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        let mut id = head;
        for _ in 0..v.size() {
            let d = v.desc(id);
            if id >= v.size() || d.flags & VRING_DESC_F_WRITE != 0 {
                return Err(format!(
                    "TX descriptor {id}: out of range or device-writable"
                ));
            }
            let p = self
                .iommu
                .translate(d.addr, d.len as usize)
                .ok_or(format!("TX buffer {:#x}+{} not mapped", d.addr, d.len))?;
            let at = out.len();
            out.resize(at + d.len as usize, 0);
            // SAFETY: `p..p+len` is mapped for the device (checked just
            // now), the driver does not write it while it is posted, and
            // `out` has room.
            unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr().add(at), d.len as usize) };
            if d.flags & VRING_DESC_F_NEXT == 0 {
                if out.len() < HDR {
                    return Err(format!("TX chain {head}: {} bytes, no header", out.len()));
                }
                return Ok(out.split_off(HDR));
            }
            id = d.id_or_next;
        }
        Err(format!("TX chain {head} loops"))
    }

    /// Puts pending frames into the driver's RX buffers.
    fn deliver(&self, s: &mut State) {
        let q = s.queues[0];
        if s.pending.is_empty() || !q.enabled {
            return;
        }
        let Some(v) = self.ring(&q) else {
            return Self::violation(s, "RX rings not mapped".into());
        };
        let (mut next, mut used) = (q.next_avail, q.used);
        while next != v.avail_idx(Ordering::Acquire) {
            let Some(frame) = s.pending.pop_front() else {
                break;
            };
            let head = v.avail_entry(next);
            next = next.wrapping_add(1);
            let d = v.desc(head);
            let n = HDR + frame.len();
            let p = self.iommu.translate(d.addr, n);
            if d.flags & VRING_DESC_F_WRITE == 0 || (d.len as usize) < n || p.is_none() {
                return Self::violation(
                    s,
                    format!("RX buffer {head}: {d:?} cannot take {n} bytes"),
                );
            }
            let mut hdr = [0u8; HDR];
            hdr[10] = 1; // num_buffers
            if let Some(p) = p {
                // SAFETY: `p..p+n` is mapped for the device and posted to
                // it for writing (WRITE, `len` at least `n`).
                unsafe {
                    std::ptr::copy_nonoverlapping(hdr.as_ptr(), p, HDR);
                    std::ptr::copy_nonoverlapping(frame.as_ptr(), p.add(HDR), frame.len());
                }
            }
            v.set_used_elem(used, head as u32, n as u32);
            used = used.wrapping_add(1);
            s.received += 1;
        }
        v.set_used_idx(used, Ordering::Release);
        s.queues[0].next_avail = next;
        s.queues[0].used = used;
    }
}

impl RegisterSpace for Config {
    fn read(&self, off: u64, width: u8) -> u64 {
        let s = lock(&self.0.state);
        (0..width as u64).fold(0, |v, i| {
            v | (NetModel::config_byte(&s, off + i) as u64) << (8 * i)
        })
    }
    fn write(&self, off: u64, width: u8, v: u64) {
        let mut s = lock(&self.0.state);
        match (off, width) {
            (cfg::COMMAND, 2) => s.command = v as u16,
            _ => NetModel::violation(&mut s, format!("config write {off:#x}/{width}")),
        }
    }
}

impl RegisterSpace for Bar {
    fn read(&self, off: u64, _width: u8) -> u64 {
        let s = lock(&self.0.state);
        match off {
            o if o < COMMON + 0x38 => NetModel::common_read(&s, o - COMMON),
            o if (DEVICE..DEVICE + 6).contains(&o) => MAC[(o - DEVICE) as usize] as u64,
            // status: VIRTIO_NET_S_LINK_UP as the cable says.
            o if o == DEVICE + 6 => self.0.cable.load(std::sync::atomic::Ordering::Relaxed) as u64,
            _ => 0,
        }
    }
    fn write(&self, off: u64, width: u8, v: u64) {
        let m = &self.0;
        let mut s = lock(&m.state);
        match off {
            o if o < COMMON + 0x38 => m.common_write(&mut s, o - COMMON, width, v),
            o if (NOTIFY..NOTIFY + 0x1000).contains(&o) => {
                let q = ((o - NOTIFY) / NOTIFY_MULT as u64) as usize;
                if q >= NUM_QUEUES as usize || v as usize != q {
                    return NetModel::violation(&mut s, format!("doorbell {o:#x} = {v}"));
                }
                m.notify(&mut s, q);
            }
            _ => NetModel::violation(&mut s, format!("BAR4 write {off:#x}")),
        }
    }
}

impl PciFunction for Function {
    fn addr(&self) -> PciAddr {
        self.model.addr
    }
    fn config(&self) -> Result<Regs, Error> {
        let name = format!("{} config (model)", self.model.addr);
        Ok(Regs::emulated(
            Arc::new(Config(self.model.clone())),
            256,
            name,
        ))
    }
    fn bar(&self, bar: u32) -> Result<Regs, Error> {
        if bar != 4 {
            return Err(Error::Vfio {
                what: format!("BAR{bar} of {}", self.model.addr),
                detail: "not implemented by the device".into(),
                hint: None,
            });
        }
        let name = format!("{} BAR4 (model)", self.model.addr);
        Ok(Regs::emulated(
            Arc::new(Bar(self.model.clone())),
            BAR_LEN,
            name,
        ))
    }
    fn can_reset(&self) -> bool {
        false
    }
    fn reset(&self) -> Result<(), Error> {
        self.enable_msix(0).map(drop)
    }
    fn domain(&self) -> &DmaDomain {
        &self.domain
    }
    fn map_dma(&self, region: &DmaRegion) -> Result<DmaGuard, Error> {
        self.iommu.map(region)
    }
}
