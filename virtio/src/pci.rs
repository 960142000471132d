//! virtio-net over PCI through VFIO: the modern transport (virtio 1.2
//! §4.1), for `pci:DDDD:BB:DD.F` device strings.
//!
//! The function must be bound to vfio-pci (`rpmd-bind --bind vfio-pci`).
//! Probing opens a VFIO container for it, walks the vendor capabilities
//! for the common, notify and device configuration windows (§4.1.4), and
//! reads the features and MAC. Devices that do not offer ACCESS_PLATFORM
//! are refused: their DMA would bypass the IOMMU and take our IOVAs for
//! physical addresses. `start` resets the device, negotiates
//! (VERSION_1 and ACCESS_PLATFORM required; MAC, STATUS,
//! MRG_RXBUF, EVENT_IDX when offered), maps the mempool's region and the
//! ring region into the IOMMU at IOVA = VA, sets up one RX and one TX split
//! virtqueue, posts receive buffers and sets DRIVER_OK. The data path is
//! the one virtio-user uses; its doorbell is an MMIO write of the queue
//! index to the queue's notify address. `stop` resets the device, which
//! then touches no memory of ours.
//!
//! Device string: `pci:ADDR[,queue_size=N][,mrg_rxbuf=0|1]`. Transitional
//! devices (1af4:1000) are driven through their modern capabilities; the
//! legacy I/O-port interface is not used here.
use crate::consts::{
    NET_HDR_LEN, VIRTIO_F_VERSION_1, VIRTIO_NET_F_MAC, VIRTIO_NET_F_MRG_RXBUF,
    VIRTIO_RING_F_EVENT_IDX,
};
use crate::net::{Kick, Shared, VirtioRx, VirtioTx};
use crate::split::{Layout, SplitQueue};
use rpmd_pmd::pci::{PciDevice, PciId, Sysfs};
use rpmd_pmd::port::stats::StatsBlock;
use rpmd_pmd::port::{
    Capabilities, DevArgs, Link, MacAddr, Offloads, PciDriver, Port, PortConfig, PortStats, Queues,
    RxQueue, TxQueue, Xstat,
};
use rpmd_pmd::vfio::{wait_until, Container, Device, DmaMapping, Regs};
use rpmd_pmd::{DmaRegion, IovaMode};
use rpmd_ring::Burst;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

type PmdError = rpmd_pmd::Error;

// §4.1.4: vendor capability types and the common configuration layout.
const CAP_VENDOR: u8 = 0x09;
const CFG_COMMON: u8 = 1;
const CFG_NOTIFY: u8 = 2;
const CFG_DEVICE: u8 = 4;
const DFSELECT: u64 = 0x00;
const DF: u64 = 0x04;
const GFSELECT: u64 = 0x08;
const GF: u64 = 0x0c;
const MSIX_CONFIG: u64 = 0x10;
const STATUS: u64 = 0x14;
const Q_SELECT: u64 = 0x16;
const Q_SIZE: u64 = 0x18;
const Q_MSIX: u64 = 0x1a;
const Q_ENABLE: u64 = 0x1c;
const Q_NOTIFY_OFF: u64 = 0x1e;
const Q_DESC: u64 = 0x20;
const Q_DRIVER: u64 = 0x28;
const Q_DEVICE: u64 = 0x30;
// §2.1: device status bits.
const S_ACK: u8 = 1;
const S_DRIVER: u8 = 2;
const S_DRIVER_OK: u8 = 4;
const S_FEATURES_OK: u8 = 8;
// §6.1 and §5.1.3: the features this driver knows besides those in consts.
const F_ACCESS_PLATFORM: u64 = 1 << 33;
const F_STATUS: u64 = 1 << 16;
/// §5.1.4: `status` in the device configuration, bit 0 = link up.
const NET_S_LINK_UP: u16 = 1;
/// §4.1.5.1.2: no MSI-X vector.
const NO_VECTOR: u16 = 0xffff;

fn perr(port: &str, e: impl std::fmt::Display) -> PmdError {
    PmdError::Port {
        port: port.to_string(),
        detail: e.to_string(),
    }
}

/// The virtio-net PCI driver (vendor 1af4, modern 1041 and transitional
/// 1000).
pub struct VirtioPciDriver;

const IDS: [PciId; 2] = [
    PciId {
        vendor: 0x1af4,
        device: 0x1041,
    },
    PciId {
        vendor: 0x1af4,
        device: 0x1000,
    },
];

impl PciDriver for VirtioPciDriver {
    fn name(&self) -> &'static str {
        "virtio-net-pci"
    }

    fn ids(&self) -> &'static [PciId] {
        &IDS
    }

    fn probe(&self, dev: &PciDevice, args: &DevArgs) -> Result<Box<dyn Port>, PmdError> {
        args.only_options(&["queue_size", "mrg_rxbuf"])?;
        let name = args.raw().to_string();
        let qs = args.opt_u64("queue_size", 256)?;
        let layout = u16::try_from(qs)
            .map_err(|_| crate::Error::Config(format!("queue_size={qs}: at most 32768")))
            .and_then(Layout::new)
            .map_err(|e| perr(&name, e))?;
        let want_mrg = args.opt_bool("mrg_rxbuf", true)?;
        let c = Container::open()?;
        let d = c.device(&Sysfs::default(), dev.addr)?;
        d.enable_bus_master()?;
        let t = Transport::open(&d, &name)?;
        t.reset(&name)?;
        let offered = t.features()?;
        if offered & VIRTIO_F_VERSION_1 == 0 {
            return Err(perr(
                &name,
                format!("the device offers no VERSION_1 (features {offered:#x}); legacy-only devices are not supported"),
            ));
        }
        if offered & F_ACCESS_PLATFORM == 0 {
            // Such a device bypasses the IOMMU: it would take our IOVAs
            // (virtual addresses) for physical ones and write wherever they
            // point.
            return Err(perr(
                &name,
                format!("the device does not offer ACCESS_PLATFORM (features {offered:#x}), so its DMA would bypass the IOMMU; in QEMU add iommu_platform=on to the virtio-net-pci device"),
            ));
        }
        let mac = if offered & VIRTIO_NET_F_MAC != 0 {
            let mut m = [0u8; 6];
            t.device.0.read_bytes(t.device.1, &mut m)?;
            MacAddr(m)
        } else {
            MacAddr::from_name(&name, 0x70)
        };
        Ok(Box::new(VirtioPciPort {
            name,
            container: c,
            _dev: d,
            t,
            offered,
            want_mrg,
            features: 0,
            layout,
            mac,
            conf: None,
            started: false,
            live: Arc::new(AtomicBool::new(false)),
            stats: StatsBlock::new(0, 0),
            pool_map: None,
            ring_map: None,
            promisc: true,
            allmulti: true,
            mtu: 1500,
        }))
    }
}

/// The three configuration windows, each a BAR and an offset in it.
struct Transport {
    common: (Arc<Regs>, u64),
    /// Notify window: BAR, offset, `notify_off_multiplier`.
    notify: (Arc<Regs>, u64, u32),
    device: (Arc<Regs>, u64),
}

impl Transport {
    /// Walks the capability list (§4.1.4) for the windows.
    fn open(d: &Device, port: &str) -> Result<Transport, PmdError> {
        let cfg = d.config()?;
        let mut found: [Option<(u8, u64, u32)>; 3] = [None; 3];
        for c in d.capabilities()? {
            if c.id != CAP_VENDOR {
                continue;
            }
            let o = c.offset as u64;
            let ty = cfg.read8(o + 3)?;
            let bar = cfg.read8(o + 4)?;
            let off = cfg.read32(o + 8)? as u64;
            let slot = match ty {
                CFG_COMMON => 0,
                CFG_NOTIFY => 1,
                CFG_DEVICE => 2,
                _ => continue,
            };
            // The first capability of each type is the preferred one.
            if found[slot].is_none() {
                let mult = if ty == CFG_NOTIFY {
                    cfg.read32(o + 16)?
                } else {
                    0
                };
                found[slot] = Some((bar, off, mult));
            }
        }
        let [Some(common), Some(notify), Some(device)] = found else {
            return Err(perr(
                port,
                "no virtio 1.x common/notify/device capabilities (a legacy-only device?)",
            ));
        };
        let mut bars: [Option<Arc<Regs>>; 6] = Default::default();
        let mut bar = |b: u8| -> Result<Arc<Regs>, PmdError> {
            let slot = bars
                .get_mut(b as usize)
                .ok_or_else(|| perr(port, format!("capability names BAR{b}")))?;
            if slot.is_none() {
                *slot = Some(Arc::new(d.bar(b as u32)?));
            }
            Ok(slot.clone().unwrap_or_else(|| unreachable!("just set")))
        };
        Ok(Transport {
            common: (bar(common.0)?, common.1),
            notify: (bar(notify.0)?, notify.1, notify.2),
            device: (bar(device.0)?, device.1),
        })
    }

    fn c(&self) -> (&Regs, u64) {
        (&self.common.0, self.common.1)
    }

    fn status(&self) -> Result<u8, PmdError> {
        let (r, o) = self.c();
        r.read8(o + STATUS)
    }

    fn set_status(&self, s: u8) -> Result<(), PmdError> {
        let (r, o) = self.c();
        r.write8(o + STATUS, s)
    }

    /// §4.1.4.3.2: writing 0 resets; the device reads 0 when done.
    fn reset(&self, port: &str) -> Result<(), PmdError> {
        self.set_status(0)?;
        wait_until(
            &format!("{port}: virtio reset"),
            Duration::from_secs(1),
            || Ok(self.status()? == 0),
        )
    }

    fn features(&self) -> Result<u64, PmdError> {
        let (r, o) = self.c();
        let mut f = 0u64;
        for sel in 0..2u32 {
            r.write32(o + DFSELECT, sel)?;
            f |= (r.read32(o + DF)? as u64) << (32 * sel);
        }
        Ok(f)
    }

    fn set_features(&self, f: u64) -> Result<(), PmdError> {
        let (r, o) = self.c();
        for sel in 0..2u32 {
            r.write32(o + GFSELECT, sel)?;
            r.write32(o + GF, (f >> (32 * sel)) as u32)?;
        }
        Ok(())
    }

    /// Sets up queue `index` on `q` (§4.1.5.1.3); returns its doorbell.
    fn setup_queue(&self, index: u16, q: &SplitQueue, port: &str) -> Result<Kick, PmdError> {
        let (r, o) = self.c();
        r.write16(o + Q_SELECT, index)?;
        let max = r.read16(o + Q_SIZE)?;
        if max == 0 {
            return Err(perr(port, format!("the device has no queue {index}")));
        }
        if q.size() > max {
            return Err(perr(
                port,
                format!(
                    "queue {index}: {} entries asked, the device takes at most {max} (queue_size=)",
                    q.size()
                ),
            ));
        }
        r.write16(o + Q_SIZE, q.size())?;
        let (desc, avail, used) = q.addresses();
        r.write64(o + Q_DESC, desc)?;
        r.write64(o + Q_DRIVER, avail)?;
        r.write64(o + Q_DEVICE, used)?;
        r.write16(o + Q_MSIX, NO_VECTOR)?;
        let noff = r.read16(o + Q_NOTIFY_OFF)? as u64;
        r.write16(o + Q_ENABLE, 1)?;
        let off = self.notify.1 + noff * self.notify.2 as u64;
        // Check the doorbell once here, so the data path's writes cannot
        // fail on bounds.
        self.notify.0.read32(off).map(|_| ())?;
        Ok(Kick::Mmio {
            regs: self.notify.0.clone(),
            off,
            index,
        })
    }
}

/// A virtio-net PCI function driven through VFIO.
pub struct VirtioPciPort {
    name: String,
    container: Container,
    // Keeps the device (and its BAR mappings' fd) open.
    _dev: Device,
    t: Transport,
    offered: u64,
    want_mrg: bool,
    features: u64,
    layout: Layout,
    mac: MacAddr,
    conf: Option<PortConfig>,
    started: bool,
    live: Arc<AtomicBool>,
    stats: StatsBlock,
    /// The mempool region mapped for the device, by region address.
    pool_map: Option<(usize, DmaMapping)>,
    ring_map: Option<(Arc<DmaRegion>, DmaMapping)>,
    promisc: bool,
    allmulti: bool,
    mtu: u16,
}

impl VirtioPciPort {
    fn setup(&mut self) -> Result<Queues, PmdError> {
        let name = self.name.clone();
        let conf = self
            .conf
            .clone()
            .ok_or_else(|| perr(&name, "start before configure"))?;
        let pool = conf
            .rx_pool
            .clone()
            .ok_or_else(|| perr(&name, "no rx_pool"))?;
        let t = &self.t;
        t.reset(&name)?;
        t.set_status(S_ACK | S_DRIVER)?;
        let mut want = VIRTIO_F_VERSION_1
            | F_ACCESS_PLATFORM
            | VIRTIO_NET_F_MAC
            | F_STATUS
            | VIRTIO_RING_F_EVENT_IDX;
        if self.want_mrg {
            want |= VIRTIO_NET_F_MRG_RXBUF;
        }
        self.features = self.offered & want;
        t.set_features(self.features)?;
        t.set_status(S_ACK | S_DRIVER | S_FEATURES_OK)?;
        if t.status()? & S_FEATURES_OK == 0 {
            return Err(perr(
                &name,
                format!("the device refused features {:#x}", self.features),
            ));
        }
        let (r, o) = t.c();
        r.write16(o + MSIX_CONFIG, NO_VECTOR)?;
        // The device reaches the pool's buffers and the rings at IOVA = VA.
        let pr = pool.region();
        if self.pool_map.as_ref().map(|m| m.0) != Some(pr.as_ptr() as usize) {
            self.pool_map = None;
            self.pool_map = Some((pr.as_ptr() as usize, self.container.map_dma(pr)?));
        }
        let l = self.layout;
        self.ring_map = None;
        let rings = Arc::new(DmaRegion::new("virtio-pci rings", 2 * l.len, IovaMode::Va)?);
        let ring_map = self.container.map_dma(&rings)?;
        let event_idx = self.features & VIRTIO_RING_F_EVENT_IDX != 0;
        let mut queues = Vec::new();
        let mut kicks = Vec::new();
        for i in 0..2u16 {
            let mut q =
                SplitQueue::new(&rings, i as usize * l.len, l).map_err(|e| perr(&name, e))?;
            q.set_event_idx(event_idx);
            q.set_interrupts(false);
            kicks.push(t.setup_queue(i, &q, &name)?);
            queues.push(q);
        }
        t.set_status(S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK)?;
        self.ring_map = Some((rings.clone(), ring_map));
        self.stats = StatsBlock::new(1, 1);
        self.live = Arc::new(AtomicBool::new(true));
        let shared = Shared {
            start: pr.as_ptr() as u64,
            end: pr.as_ptr() as u64 + pr.len() as u64,
        };
        let tx_kick = kicks.pop().ok_or_else(|| perr(&name, "no TX doorbell"))?;
        let rx_kick = kicks.pop().ok_or_else(|| perr(&name, "no RX doorbell"))?;
        let txq = queues.pop().ok_or_else(|| perr(&name, "no TX queue"))?;
        let mut rxq = queues.pop().ok_or_else(|| perr(&name, "no RX queue"))?;
        let mut b: Burst<rpmd_pmd::Mbuf, 64> = Burst::new();
        while rxq.free() > 0 {
            pool.get_bulk(&mut b, rxq.free().min(64))?;
            while let Some(m) = b.pop() {
                let (addr, room) = (m.data_iova().raw(), m.tailroom() as u32);
                let _ = rxq.push(m, addr, room, true);
            }
        }
        if rxq.publish() {
            rx_kick.kick();
        }
        let rx: Box<dyn RxQueue> = Box::new(VirtioRx {
            q: rxq,
            call: None,
            mrg: self.features & VIRTIO_NET_F_MRG_RXBUF != 0,
            pool: pool.clone(),
            kick: rx_kick,
            live: self.live.clone(),
            stats: self.stats.rx(0),
            _rings: rings.clone(),
            refill: Burst::new(),
        });
        let tx: Box<dyn TxQueue> = Box::new(VirtioTx {
            q: txq,
            pool,
            done: Burst::new(),
            kick: tx_kick,
            live: self.live.clone(),
            stats: self.stats.tx(0),
            shared,
            _rings: rings,
        });
        Ok(Queues {
            rx: vec![rx],
            tx: vec![tx],
        })
    }
}

impl Port for VirtioPciPort {
    fn driver(&self) -> &'static str {
        "virtio-net-pci"
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_rx_queues: 1,
            max_tx_queues: 1,
            min_desc: 1,
            max_desc: u16::MAX,
            desc_pow2: false,
            min_mtu: 68,
            max_mtu: if self.want_mrg && self.offered & VIRTIO_NET_F_MRG_RXBUF != 0 {
                9600
            } else {
                2048 - 14 - NET_HDR_LEN as u16
            },
            offloads: Offloads::RX_SCATTER | Offloads::TX_MULTI_SEGS,
            rx_interrupts: false,
            needs_rx_pool: true,
        }
    }
    fn configure(&mut self, conf: &PortConfig) -> Result<(), PmdError> {
        if self.started {
            return Err(perr(&self.name, "configure while started; stop it first"));
        }
        conf.validate(&self.name, &self.capabilities())?;
        self.conf = Some(conf.clone());
        Ok(())
    }
    fn start(&mut self) -> Result<Queues, PmdError> {
        if self.started {
            return Err(perr(&self.name, "already started"));
        }
        let q = self.setup();
        if q.is_err() {
            // Leave the device quiet after a failed start.
            let _ = self.t.reset(&self.name);
        }
        self.started = q.is_ok();
        q
    }
    fn stop(&mut self) -> Result<(), PmdError> {
        self.live.store(false, Relaxed);
        if self.started {
            // After the reset the device no longer reads or writes our
            // memory, so the queues' mbufs may go back to the pool.
            self.t.reset(&self.name)?;
        }
        self.started = false;
        Ok(())
    }
    fn link(&self) -> Link {
        let up = self.started
            && (self.features & F_STATUS == 0
                || self
                    .t
                    .device
                    .0
                    .read16(self.t.device.1 + 6)
                    .is_ok_and(|s| s & NET_S_LINK_UP != 0));
        Link {
            up,
            speed_mbps: 10_000,
            full_duplex: true,
        }
    }
    fn mac_addr(&self) -> MacAddr {
        self.mac
    }
    fn set_promiscuous(&mut self, on: bool) -> Result<(), PmdError> {
        // Without a control queue the device delivers every frame.
        self.promisc = on;
        Ok(())
    }
    fn promiscuous(&self) -> bool {
        self.promisc
    }
    fn set_allmulticast(&mut self, on: bool) -> Result<(), PmdError> {
        self.allmulti = on;
        Ok(())
    }
    fn allmulticast(&self) -> bool {
        self.allmulti
    }
    fn set_mtu(&mut self, mtu: u16) -> Result<(), PmdError> {
        let c = self.capabilities();
        if mtu < c.min_mtu || mtu > c.max_mtu {
            return Err(PmdError::Config {
                port: self.name.clone(),
                what: "mtu",
                detail: format!("{mtu}; this port takes {}..={}", c.min_mtu, c.max_mtu),
            });
        }
        self.mtu = mtu;
        Ok(())
    }
    fn mtu(&self) -> u16 {
        self.mtu
    }
    fn stats(&self) -> PortStats {
        self.stats.stats()
    }
    fn xstats(&self) -> Vec<Xstat> {
        let mut v = self.stats.xstats();
        v.push(Xstat {
            name: "negotiated_features".into(),
            value: self.features,
        });
        v
    }
    fn reset_stats(&mut self) {
        self.stats.reset();
    }
}

impl Drop for VirtioPciPort {
    fn drop(&mut self) {
        // Reset before the mappings go (fields drop after this).
        let _ = self.stop();
    }
}
