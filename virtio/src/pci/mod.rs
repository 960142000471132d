//! virtio-net over PCI through VFIO, for `pci:DDDD:BB:DD.F` device
//! strings: the modern transport (virtio 1.2 §4.1.4, `modern.rs`) and the
//! legacy one of transitional devices (§4.1.4.8, `legacy.rs`).
//!
//! The function must be bound to vfio-pci (`rpmd-bind --bind vfio-pci`).
//! Probing opens a VFIO container for it and picks the interface:
//!
//! - modern, when the device offers VERSION_1 and ACCESS_PLATFORM: its DMA
//!   goes through the IOMMU, so the mempool's region and the rings are
//!   mapped into the container at IOVA = VA;
//! - legacy, on a transitional device without ACCESS_PLATFORM: it takes
//!   physical addresses, so the port needs a mempool made with
//!   `IovaMode::Pa` (hugepages, root) and puts its rings in a hugepage;
//! - a modern-only device without ACCESS_PLATFORM is refused: its DMA
//!   would bypass the IOMMU and take our IOVAs for physical addresses.
//!
//! `start` resets the device and negotiates (modern: VERSION_1 and
//! ACCESS_PLATFORM; MAC, STATUS, MRG_RXBUF, EVENT_IDX, CTRL_VQ, CTRL_RX and
//! MTU when offered, CSUM/GUEST_CSUM when the checksum offloads are
//! configured, RING_PACKED on request; legacy needs MRG_RXBUF, which makes
//! its header the 12 bytes the data path uses), sets up one RX and one TX
//! virtqueue (split, or packed on the modern interface) and the control
//! queue, routes RX completions to an MSI-X vector (modern, when the
//! function has MSI-X: the rx queue's interrupt eventfd), posts receive
//! buffers, sets DRIVER_OK and programs the receive filter through the
//! control queue (promiscuous, all-multicast, the MAC tables of
//! `set_mac_filter`; changed again whenever the application changes them).
//! A device that does not keep FEATURES_OK refuses the features: `start`
//! fails naming them, and the device is left reset. The data path is the
//! one virtio-user uses; the doorbell is an MMIO write (modern) or a 16-bit
//! I/O-port write (legacy) of the queue index. `stop` resets the device,
//! which then touches no memory of ours.
//!
//! Device string: `pci:ADDR[,queue_size=N][,mrg_rxbuf=0|1][,packed_vq=0|1][,drop_features=MASK]`
//! (legacy queues have the size the device fixes; `drop_features`: feature
//! bits never to accept, for a device with a broken feature or to test a
//! device's refusal).
mod legacy;
mod modern;

use crate::consts::{
    VIRTIO_F_RING_PACKED, VIRTIO_F_VERSION_1, VIRTIO_NET_F_CSUM, VIRTIO_NET_F_CTRL_RX,
    VIRTIO_NET_F_CTRL_VQ, VIRTIO_NET_F_GUEST_CSUM, VIRTIO_NET_F_MAC, VIRTIO_NET_F_MRG_RXBUF,
    VIRTIO_NET_F_MTU, VIRTIO_RING_F_EVENT_IDX,
};
use crate::ctrl::{mac_table, rx_mode, Control, CtrlQueue};
use crate::fd::CallFd;
use crate::net::{
    feature_xstats, max_mtu, net_port_common, offload_features, offloads, Kick, Ring, Shared,
    VirtioRx, VirtioTx,
};
use crate::packed::{PackedLayout, PackedQueue};
use crate::split::{Layout, SplitQueue};
use legacy::Legacy;
use modern::Modern;
use rpmd_pmd::pci::{PciDevice, PciId, Sysfs};
use rpmd_pmd::port::stats::StatsBlock;
use rpmd_pmd::port::{
    Capabilities, DevArgs, Link, MacAddr, PciDriver, Port, PortConfig, PortStats, Queues, RxQueue,
    TxQueue, Xstat,
};
use rpmd_pmd::vfio::{Container, Device, DmaMapping, Regs};
use rpmd_pmd::{DmaRegion, IovaMode};
use rpmd_ring::Burst;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

pub(super) type PmdError = rpmd_pmd::Error;

// §6.1 and §5.1.3: the features this driver knows besides those in consts.
const F_ACCESS_PLATFORM: u64 = 1 << 33;
const F_STATUS: u64 = 1 << 16;
/// §5.1.4: `status` in the device configuration, bit 0 = link up.
const NET_S_LINK_UP: u16 = 1;
/// §4.1.5.1.2: no MSI-X vector.
pub(super) const NO_VECTOR: u16 = 0xffff;
// §2.1: device status bits.
const S_ACK: u8 = 1;
const S_DRIVER: u8 = 2;
const S_DRIVER_OK: u8 = 4;
const S_FEATURES_OK: u8 = 8;

pub(super) fn perr(port: &str, e: impl std::fmt::Display) -> PmdError {
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
        args.only_options(&["queue_size", "mrg_rxbuf", "packed_vq", "drop_features"])?;
        let name = args.raw().to_string();
        let qs = args.opt_u64("queue_size", 256)?;
        let layout = u16::try_from(qs)
            .map_err(|_| crate::Error::Config(format!("queue_size={qs}: at most 32768")))
            .and_then(Layout::new)
            .map_err(|e| perr(&name, e))?;
        let want_mrg = args.opt_bool("mrg_rxbuf", true)?;
        let want_packed = args.opt_bool("packed_vq", false)?;
        let drop_features = args.opt_u64("drop_features", 0)?;
        let c = Container::open()?;
        let d = c.device(&Sysfs::default(), dev.addr)?;
        d.enable_bus_master()?;
        // The modern interface when the device offers it with
        // ACCESS_PLATFORM; else the legacy one of a transitional device,
        // with physical addresses.
        let modern = Modern::open(&d, &name).and_then(|m| {
            m.reset(&name)?;
            let f = m.features()?;
            Ok((m, f))
        });
        let (t, offered) = match modern {
            Ok((m, f)) if f & VIRTIO_F_VERSION_1 != 0 && f & F_ACCESS_PLATFORM != 0 => {
                (Transport::Modern(m), f)
            }
            other => match Legacy::open(&d, &name) {
                Ok(l) => {
                    l.reset(&name)?;
                    let f = l.features()?;
                    (Transport::Legacy(l), f)
                }
                Err(_) => {
                    let why = match other {
                        Ok((_, f)) if f & VIRTIO_F_VERSION_1 == 0 => format!(
                            "the device offers no VERSION_1 (features {f:#x}) and has no legacy interface"
                        ),
                        // Such a device bypasses the IOMMU: it would take
                        // our IOVAs (virtual addresses) for physical ones.
                        Ok((_, f)) => format!(
                            "the device does not offer ACCESS_PLATFORM (features {f:#x}), so its DMA would bypass the IOMMU, and it has no legacy interface to give physical addresses to; in QEMU add iommu_platform=on to the virtio-net-pci device"
                        ),
                        Err(e) => e.to_string(),
                    };
                    return Err(perr(&name, why));
                }
            },
        };
        let (r, o) = t.device_cfg();
        let mac = if offered & VIRTIO_NET_F_MAC != 0 {
            let mut m = [0u8; 6];
            r.read_bytes(o, &mut m)?;
            MacAddr(m)
        } else {
            MacAddr::from_name(&name, 0x70)
        };
        // §5.1.4: mtu at offset 10 of the device configuration.
        let dev_mtu = if offered & VIRTIO_NET_F_MTU != 0 {
            Some(r.read16(o + 10)?)
        } else {
            None
        };
        let msix = if t.is_legacy() {
            0
        } else {
            d.msix_vectors().unwrap_or(0)
        };
        Ok(Box::new(VirtioPciPort {
            name,
            container: c,
            dev: d,
            t,
            offered,
            want_mrg,
            want_packed,
            drop_features,
            msix,
            dev_mtu,
            ctrl: None,
            filter: (Vec::new(), Vec::new()),
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

/// The interface a port drives.
enum Transport {
    Modern(Modern),
    Legacy(Legacy),
}

impl Transport {
    fn is_legacy(&self) -> bool {
        matches!(self, Transport::Legacy(_))
    }
    fn reset(&self, port: &str) -> Result<(), PmdError> {
        match self {
            Transport::Modern(m) => m.reset(port),
            Transport::Legacy(l) => l.reset(port),
        }
    }
    fn status(&self) -> Result<u8, PmdError> {
        match self {
            Transport::Modern(m) => m.status(),
            Transport::Legacy(l) => l.status(),
        }
    }
    fn set_status(&self, s: u8) -> Result<(), PmdError> {
        match self {
            Transport::Modern(m) => m.set_status(s),
            Transport::Legacy(l) => l.set_status(s),
        }
    }
    fn set_features(&self, f: u64) -> Result<(), PmdError> {
        match self {
            Transport::Modern(m) => m.set_features(f),
            Transport::Legacy(l) => l.set_features(f),
        }
    }
    /// Gives the device queue `index` at `addrs` (descriptors, driver
    /// area, device area) with `size` entries and MSI-X `vector`.
    fn setup_queue(
        &self,
        index: u16,
        addrs: (u64, u64, u64),
        size: u16,
        vector: u16,
        port: &str,
    ) -> Result<Kick, PmdError> {
        match self {
            Transport::Modern(m) => m.setup_queue(index, addrs, size, vector, port),
            Transport::Legacy(l) => l.setup_queue(index, addrs.0, size, port),
        }
    }
    fn device_cfg(&self) -> (&Regs, u64) {
        match self {
            Transport::Modern(m) => (&m.device.0, m.device.1),
            Transport::Legacy(l) => l.device_cfg(),
        }
    }
}

/// A virtio-net PCI function driven through VFIO.
pub struct VirtioPciPort {
    name: String,
    container: Container,
    // Keeps the device (and its BAR mappings' fd) open; MSI-X.
    dev: Device,
    t: Transport,
    offered: u64,
    want_mrg: bool,
    want_packed: bool,
    /// Features never negotiated (`drop_features=`, for tests and
    /// devices with a broken feature).
    drop_features: u64,
    /// MSI-X vectors the function has (0: no rx interrupts).
    msix: u32,
    /// The maximum MTU the device reports (VIRTIO_NET_F_MTU).
    dev_mtu: Option<u16>,
    /// The control queue, while started (VIRTIO_NET_F_CTRL_VQ).
    ctrl: Option<Box<dyn Control>>,
    /// Unicast and multicast filter addresses (besides our MAC).
    filter: (Vec<MacAddr>, Vec<MacAddr>),
    features: u64,
    layout: Layout,
    mac: MacAddr,
    conf: Option<PortConfig>,
    started: bool,
    live: Arc<AtomicBool>,
    stats: StatsBlock,
    /// The mempool region mapped for the device, by region address.
    pool_map: Option<(usize, DmaMapping)>,
    /// The rings' region and its IOMMU mapping (modern transport).
    ring_map: Option<(Arc<DmaRegion>, DmaMapping)>,
    promisc: bool,
    allmulti: bool,
    mtu: u16,
}

impl VirtioPciPort {
    /// Resets the device and negotiates features (§3.1.1); returns the
    /// status bits to keep.
    fn negotiate(&mut self, conf: &PortConfig) -> Result<u8, PmdError> {
        let name = self.name.clone();
        let t = &self.t;
        t.reset(&name)?;
        t.set_status(S_ACK | S_DRIVER)?;
        let legacy = t.is_legacy();
        let mut want = VIRTIO_NET_F_MAC
            | F_STATUS
            | VIRTIO_RING_F_EVENT_IDX
            | VIRTIO_NET_F_CTRL_VQ
            | VIRTIO_NET_F_CTRL_RX
            | VIRTIO_NET_F_MTU
            | offload_features(conf.offloads);
        if legacy {
            // The legacy header is 12 bytes only with mergeable buffers;
            // the data path writes and reads 12.
            if self.offered & VIRTIO_NET_F_MRG_RXBUF == 0 {
                return Err(perr(
                    &name,
                    "a legacy device without MRG_RXBUF (10-byte headers) is not supported",
                ));
            }
            if self.want_packed {
                return Err(perr(
                    &name,
                    "packed_vq=1: the legacy interface has split rings only",
                ));
            }
            want |= VIRTIO_NET_F_MRG_RXBUF;
        } else {
            want |= VIRTIO_F_VERSION_1 | F_ACCESS_PLATFORM;
            if self.want_mrg {
                want |= VIRTIO_NET_F_MRG_RXBUF;
            }
            if self.want_packed {
                if self.offered & VIRTIO_F_RING_PACKED == 0 {
                    return Err(perr(
                        &name,
                        format!("packed_vq=1, but the device offers no VIRTIO_F_RING_PACKED (features {:#x}); in QEMU add packed=on", self.offered),
                    ));
                }
                want |= VIRTIO_F_RING_PACKED;
            }
        }
        self.features = self.offered & want & !self.drop_features;
        t.set_features(self.features)?;
        // §3.1.1: FEATURES_OK exists for modern devices only; a device
        // that does not keep it set refuses the features.
        if legacy {
            return Ok(S_ACK | S_DRIVER);
        }
        t.set_status(S_ACK | S_DRIVER | S_FEATURES_OK)?;
        if t.status()? & S_FEATURES_OK == 0 {
            return Err(perr(
                &name,
                format!(
                    "the device refused features {:#x} (FEATURES_OK not kept; offered {:#x})",
                    self.features, self.offered
                ),
            ));
        }
        Ok(S_ACK | S_DRIVER | S_FEATURES_OK)
    }

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
        self.ctrl = None;
        let base = self.negotiate(&conf)?;
        let nq = if self.features & VIRTIO_NET_F_CTRL_VQ != 0 {
            3
        } else {
            2
        };
        // Queue sizes: the device fixes them on the legacy interface; on
        // the modern one, queue_size= for the data queues and at most 64
        // entries for the control queue.
        let mut sizes = [self.layout.size; 3];
        match &self.t {
            Transport::Legacy(lg) => {
                for (i, s) in sizes.iter_mut().enumerate().take(nq) {
                    *s = lg.queue_size(i as u16)?;
                }
            }
            Transport::Modern(m) => sizes[2] = m.max_queue_size(2)?.clamp(1, 64),
        }
        let packed = self.features & VIRTIO_F_RING_PACKED != 0;
        let lens: Vec<usize> = sizes[..nq]
            .iter()
            .map(|&s| {
                if packed {
                    PackedLayout::new(s).map(|l| l.len)
                } else {
                    Layout::new(s).map(|l| l.len)
                }
            })
            .collect::<Result<_, _>>()
            .map_err(|e| perr(&name, e))?;
        let offsets: Vec<usize> = lens
            .iter()
            .scan(0, |o, l| {
                let at = *o;
                *o += l;
                Some(at)
            })
            .collect();
        let total: usize = lens.iter().sum();
        let pr = pool.region();
        let rings = if self.t.is_legacy() {
            // Physical addresses: the pool must know them, and the rings
            // sit in physically contiguous (hugepage) memory.
            if pr.iova_mode() != IovaMode::Pa {
                return Err(perr(&name, "a legacy virtio device takes physical addresses: give the port a mempool made with IovaMode::Pa (hugepages, root)"));
            }
            self.ring_map = None;
            Arc::new(DmaRegion::with_page_size(
                "virtio-pci rings",
                total,
                IovaMode::Pa,
                rpmd_pmd::PageSize::Huge2M,
            )?)
        } else {
            // The device reaches the pool's buffers and the rings at
            // IOVA = VA.
            if self.pool_map.as_ref().map(|m| m.0) != Some(pr.as_ptr() as usize) {
                self.pool_map = None;
                self.pool_map = Some((pr.as_ptr() as usize, self.container.map_dma(pr)?));
            }
            self.ring_map = None;
            let rings = Arc::new(DmaRegion::new("virtio-pci rings", total, IovaMode::Va)?);
            let m = self.container.map_dma(&rings)?;
            self.ring_map = Some((rings.clone(), m));
            rings
        };
        if packed {
            let mut qs = Vec::new();
            for i in 0..nq {
                let l = PackedLayout::new(sizes[i]).map_err(|e| perr(&name, e))?;
                qs.push(PackedQueue::new(&rings, offsets[i], l).map_err(|e| perr(&name, e))?);
            }
            self.finish(qs, rings, pool, base)
        } else {
            let event_idx = self.features & VIRTIO_RING_F_EVENT_IDX != 0;
            let mut qs = Vec::new();
            for i in 0..nq {
                let l = Layout::new(sizes[i]).map_err(|e| perr(&name, e))?;
                let mut q = SplitQueue::new(&rings, offsets[i], l).map_err(|e| perr(&name, e))?;
                q.set_event_idx(event_idx);
                qs.push(q);
            }
            self.finish(qs, rings, pool, base)
        }
    }

    /// Gives the device `queues` (RX, TX, then the control queue if
    /// negotiated), routes RX completions to an MSI-X eventfd where the
    /// device has vectors, sets DRIVER_OK, fills the RX ring and programs
    /// the receive modes.
    fn finish<Q: Ring>(
        &mut self,
        queues: Vec<Q>,
        rings: Arc<DmaRegion>,
        pool: Arc<rpmd_pmd::Mempool>,
        base: u8,
    ) -> Result<Queues, PmdError> {
        let name = self.name.clone();
        // MSI-X (modern): vector 0 for RX queue 0; none for configuration
        // changes (the link is polled), TX or the control queue.
        let mut call = None;
        if let Transport::Modern(m) = &self.t {
            m.set_config_vector(NO_VECTOR)?;
            if self.msix > 0 {
                let fd = self.dev.enable_msix(1)?.pop();
                call = fd.map(CallFd::Msix);
            }
        }
        let mut kicks = Vec::new();
        for (i, q) in queues.iter().enumerate() {
            let vector = if i == 0 && call.is_some() {
                0
            } else {
                NO_VECTOR
            };
            kicks.push(
                self.t
                    .setup_queue(i as u16, q.addresses(), q.size(), vector, &name)?,
            );
        }
        self.t.set_status(base | S_DRIVER_OK)?;
        self.stats = StatsBlock::new(1, 1);
        self.live = Arc::new(AtomicBool::new(true));
        let pr = pool.region();
        let shared = Shared {
            start: pr.as_ptr() as u64,
            end: pr.as_ptr() as u64 + pr.len() as u64,
        };
        let mut queues = queues.into_iter();
        let mut kicks = kicks.into_iter();
        let mut next = || queues.next().zip(kicks.next());
        let (Some((mut rxq, rx_kick)), Some((txq, tx_kick))) = (next(), next()) else {
            return Err(perr(&name, "fewer than two queues"));
        };
        if let Some((mut q, kick)) = next() {
            q.set_interrupts(false);
            self.ctrl = Some(Box::new(CtrlQueue {
                q,
                kick,
                pool: pool.clone(),
                stuck: false,
            }));
        }
        rxq.set_interrupts(false);
        let mut txq = txq;
        txq.set_interrupts(false);
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
        self.apply_filters()?;
        let rx: Box<dyn RxQueue> = Box::new(VirtioRx {
            q: rxq,
            call,
            mrg: self.features & VIRTIO_NET_F_MRG_RXBUF != 0,
            csum: self.features & VIRTIO_NET_F_GUEST_CSUM != 0,
            pool: pool.clone(),
            kick: rx_kick,
            live: self.live.clone(),
            stats: self.stats.rx(0),
            _rings: rings.clone(),
            refill: Burst::new(),
            restart: None,
        });
        let tx: Box<dyn TxQueue> = Box::new(VirtioTx {
            q: txq,
            csum: self.features & VIRTIO_NET_F_CSUM != 0,
            pool,
            done: Burst::new(),
            kick: tx_kick,
            live: self.live.clone(),
            stats: self.stats.tx(0),
            shared,
            _rings: rings,
            restart: None,
        });
        Ok(Queues {
            rx: vec![rx],
            tx: vec![tx],
        })
    }

    /// Programs the receive modes and MAC filter through the control
    /// queue (when the device has one with CTRL_RX).
    fn apply_filters(&mut self) -> Result<(), PmdError> {
        if self.features & VIRTIO_NET_F_CTRL_RX == 0 {
            return Ok(());
        }
        let Some(c) = self.ctrl.as_deref_mut() else {
            return Ok(());
        };
        rx_mode(c, &self.name, self.promisc, self.allmulti)?;
        mac_table(c, &self.name, &self.filter.0, &self.filter.1)
    }

    /// Records a receive-mode change and, while started, programs it.
    fn set_modes(
        &mut self,
        promisc: bool,
        allmulti: bool,
        filter: Option<(Vec<MacAddr>, Vec<MacAddr>)>,
    ) -> Result<(), PmdError> {
        let old = (self.promisc, self.allmulti);
        let old_filter = filter.as_ref().map(|_| self.filter.clone());
        self.promisc = promisc;
        self.allmulti = allmulti;
        if let Some(f) = filter {
            self.filter = f;
        }
        if !self.started {
            return Ok(());
        }
        let r = self.apply_filters();
        if r.is_err() {
            (self.promisc, self.allmulti) = old;
            if let Some(f) = old_filter {
                self.filter = f;
            }
        }
        r
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
            max_mtu: max_mtu(self.want_mrg, self.offered).min(self.dev_mtu.unwrap_or(u16::MAX)),
            offloads: offloads(self.offered),
            rx_interrupts: self.msix > 0 && !self.t.is_legacy(),
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
            self.ctrl = None;
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
            self.ctrl = None;
            if self.msix > 0 && !self.t.is_legacy() {
                let _ = self.dev.disable_msix();
            }
        }
        self.started = false;
        Ok(())
    }
    fn link(&self) -> Link {
        let (r, o) = self.t.device_cfg();
        let up = self.started
            && (self.features & F_STATUS == 0
                || r.read16(o + 6).is_ok_and(|s| s & NET_S_LINK_UP != 0));
        Link {
            up,
            speed_mbps: 10_000,
            full_duplex: true,
        }
    }
    net_port_common!();
    fn set_promiscuous(&mut self, on: bool) -> Result<(), PmdError> {
        self.set_modes(on, self.allmulti, None)
    }
    fn promiscuous(&self) -> bool {
        self.promisc
    }
    fn set_allmulticast(&mut self, on: bool) -> Result<(), PmdError> {
        self.set_modes(self.promisc, on, None)
    }
    fn allmulticast(&self) -> bool {
        self.allmulti
    }
    fn set_mac_filter(
        &mut self,
        unicast: &[MacAddr],
        multicast: &[MacAddr],
    ) -> Result<(), PmdError> {
        if self.offered & VIRTIO_NET_F_CTRL_RX == 0 {
            return Err(perr(
                &self.name,
                "the device has no control queue with CTRL_RX, so no MAC filter; use promiscuous mode",
            ));
        }
        if let Some(m) = multicast.iter().find(|m| m.0[0] & 1 == 0) {
            return Err(perr(
                &self.name,
                format!("{m} in the multicast list is unicast"),
            ));
        }
        if let Some(m) = unicast.iter().find(|m| m.0[0] & 1 != 0) {
            return Err(perr(
                &self.name,
                format!("{m} in the unicast list is multicast"),
            ));
        }
        // Both tables must fit one control command (an mbuf).
        if 6 * (unicast.len() + multicast.len()) > 1800 {
            return Err(perr(&self.name, "at most 300 filter addresses"));
        }
        self.set_modes(
            self.promisc,
            self.allmulti,
            Some((unicast.to_vec(), multicast.to_vec())),
        )
    }
    fn xstats(&self) -> Vec<Xstat> {
        let mut v = feature_xstats(&self.stats, self.offered, self.features);
        v.push(Xstat {
            name: "device_max_mtu".into(),
            value: self.dev_mtu.unwrap_or(0) as u64,
        });
        v
    }
}

impl Drop for VirtioPciPort {
    fn drop(&mut self) {
        // Reset before the mappings go (fields drop after this).
        let _ = self.stop();
    }
}
