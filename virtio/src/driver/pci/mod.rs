//! virtio-net over PCI through VFIO, for `pci:DDDD:BB:DD.F` device
//! strings: the modern transport (virtio 1.2 §4.1.4, `modern.rs`) and the
//! legacy one of transitional devices (§4.1.4.8, `legacy.rs`).
//!
//! The function comes from the registry's PCI bus (vfio-pci: `rpmd-bind
//! --bind vfio-pci`; or a device model), already attached to the
//! registry's DMA domain. Probing picks the interface:
//!
//! - modern, when the device offers VERSION_1 and ACCESS_PLATFORM: its DMA
//!   goes through the IOMMU at IOVA = VA: the mempool is registered in the
//!   domain (so mapped, like every other registered pool, whose mbufs it
//!   can then transmit) and the rings are mapped for this function;
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
//! its header the 12 bytes the data path uses), sets up an RX and a TX
//! virtqueue per queue pair (split, or packed on the modern interface;
//! several pairs on the modern interface with MQ, up to 8) and the control
//! queue, routes each RX queue's completions to its own MSI-X vector
//! (modern, when the function has enough: the rx queue's interrupt
//! eventfd), posts receive buffers, sets DRIVER_OK, sets the number of
//! pairs (MQ_VQ_PAIRS_SET) and programs the receive filter through the
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
mod linkwatch;
#[cfg(test)]
mod model;
mod modern;
mod start;
#[cfg(test)]
mod tests;

use crate::consts::{VIRTIO_F_VERSION_1, VIRTIO_NET_F_MAC, VIRTIO_NET_F_MQ, VIRTIO_NET_F_MTU};
use crate::driver::ctrl::Control;
use crate::driver::net::{feature_xstats, max_mtu, offloads, Kick};
use crate::driver::split::Layout;
use legacy::Legacy;
use modern::Modern;
use rpmd_pmd::domain::DmaGuard;
use rpmd_pmd::function::PciFunction;
use rpmd_pmd::function::Regs;
use rpmd_pmd::pci::{PciDevice, PciId};
use rpmd_pmd::port::events::LinkEvents;
use rpmd_pmd::port::features::{Declared, Feature, Support};
use rpmd_pmd::port::stats::StatsBlock;
use rpmd_pmd::port::{
    Capabilities, DevArgs, Device, EthDev, Link, MacAddr, PciDriver, Port, Queues, RxFilter,
    StartContext, Xstat,
};
use rpmd_pmd::DmaRegion;
use std::sync::Arc;

pub(super) type PmdError = rpmd_pmd::Error;

/// Most queue pairs a port uses.
pub const MAX_PAIRS: u16 = 8;

// §6.1 and §5.1.3: the features this driver knows besides those in consts.
const F_ACCESS_PLATFORM: u64 = 1 << 33;
const F_STATUS: u64 = 1 << 16;
/// §5.1.4: `status` in the device configuration, bit 0 = link up.
const NET_S_LINK_UP: u16 = 1;
/// §5.1.4: `status` sits after the 6-byte MAC in the device configuration.
const STATUS_OFFSET: u64 = 6;
/// §4.1.5.1.2: no MSI-X vector.
pub(super) const NO_VECTOR: u16 = 0xffff;
// §2.1: device status bits.
const S_ACK: u8 = 1;
const S_DRIVER: u8 = 2;
const S_DRIVER_OK: u8 = 4;
const S_FEATURES_OK: u8 = 8;

pub(super) use crate::{perr, psrc};

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
    fn features(&self) -> &'static [Declared] {
        &[
            (Feature::LinkStatusEvent, Support::Yes),
            (
                Feature::RxInterrupt,
                Support::Partial("on the modern transport, with MSI-X"),
            ),
            (Feature::ScatteredRx, Support::Yes),
            (Feature::MultiSegmentTx, Support::Yes),
            (
                Feature::PromiscuousMode,
                Support::Partial("with a control queue and VIRTIO_NET_F_CTRL_RX"),
            ),
            (
                Feature::AllmulticastMode,
                Support::Partial("with a control queue and VIRTIO_NET_F_CTRL_RX"),
            ),
            (
                Feature::MacFilter,
                Support::Partial("with a control queue and VIRTIO_NET_F_CTRL_RX"),
            ),
            (
                Feature::ChecksumOffload,
                Support::Partial(
                    "where the device offers VIRTIO_NET_F_CSUM (tx) or GUEST_CSUM (rx)",
                ),
            ),
        ]
    }

    fn name(&self) -> &'static str {
        "virtio-net-pci"
    }

    fn ids(&self) -> &'static [PciId] {
        &IDS
    }

    fn probe(
        &self,
        func: Arc<dyn PciFunction>,
        _: &PciDevice,
        args: &DevArgs,
    ) -> Result<Box<dyn Port>, PmdError> {
        args.only_options(&["queue_size", "mrg_rxbuf", "packed_vq", "drop_features"])?;
        let name = args.raw().to_string();
        let qs = args.opt_u64("queue_size", 256)?;
        let layout = u16::try_from(qs)
            .map_err(|_| crate::Error::Config(format!("queue_size={qs}: at most 32768")))
            .and_then(Layout::new)
            .map_err(|e| psrc(&name, "queue_size", e))?;
        let want_mrg = args.opt_bool("mrg_rxbuf", true)?;
        let want_packed = args.opt_bool("packed_vq", false)?;
        let drop_features = args.opt_u64("drop_features", 0)?;
        let d = &*func;
        d.enable_bus_master()?;
        let (t, offered) = open_transport(d, &name)?;
        let (mac, dev_mtu, dev_pairs) = device_config(&t, offered, &name)?;
        let msix = if t.is_legacy() { 0 } else { d.msix_vectors() };
        let dev = VirtioPciDevice {
            name,
            func,
            t,
            offered,
            want_mrg,
            want_packed,
            drop_features,
            msix,
            dev_pairs,
            dev_mtu,
            ctrl: None,
            filter: RxFilter::default(),
            features: 0,
            layout,
            mac,
            running: false,
            homes: Vec::new(),
            ring_map: None,
            link_events: None,
            config_irq: None,
            watch: None,
        };
        Ok(Box::new(EthDev::new(args, dev)))
    }
}

/// Opens the interface a port drives: the modern one when the device
/// offers it with ACCESS_PLATFORM, else the legacy one of a transitional
/// device, with physical addresses. Returns it, reset, with the features
/// the device offers.
fn open_transport(d: &dyn PciFunction, name: &str) -> Result<(Transport, u64), PmdError> {
    let modern = Modern::open(d, name).and_then(|m| {
        m.reset(name)?;
        let f = m.features()?;
        Ok((m, f))
    });
    let (t, offered) = match modern {
        Ok((m, f)) if f & VIRTIO_F_VERSION_1 != 0 && f & F_ACCESS_PLATFORM != 0 => {
            (Transport::Modern(m), f)
        }
        other => match Legacy::open(d, name) {
            Ok(l) => {
                l.reset(name)?;
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
                return Err(perr(name, why));
            }
        },
    };
    Ok((t, offered))
}

/// The MAC address, MTU and queue pairs the device's configuration
/// offers (§5.1.4), each where its feature says it is there.
fn device_config(
    t: &Transport,
    offered: u64,
    name: &str,
) -> Result<(MacAddr, Option<u16>, u16), PmdError> {
    let (r, o) = t.device_cfg();
    let mac = if offered & VIRTIO_NET_F_MAC != 0 {
        let mut m = [0u8; 6];
        r.read_bytes(o, &mut m)?;
        MacAddr(m)
    } else {
        MacAddr::from_name(name, 0x70)
    };
    // §5.1.4: mtu at offset 10 of the device configuration.
    let dev_mtu = if offered & VIRTIO_NET_F_MTU != 0 {
        Some(r.read16(o + 10)?)
    } else {
        None
    };
    // §5.1.4: max_virtqueue_pairs at offset 8 (with MQ).
    let dev_pairs = if offered & VIRTIO_NET_F_MQ != 0 && !t.is_legacy() {
        r.read16(o + 8)?.max(1)
    } else {
        1
    };
    Ok((mac, dev_mtu, dev_pairs))
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
    /// The status field (§5.1.4), for a thread of its own.
    fn status_field(&self) -> linkwatch::StatusField {
        let (regs, base) = match self {
            Transport::Modern(m) => (m.device.0.clone(), m.device.1),
            Transport::Legacy(l) => l.device_regs(),
        };
        linkwatch::StatusField {
            regs,
            offset: base + STATUS_OFFSET,
        }
    }
}

/// A virtio-net PCI function driven through VFIO.
pub struct VirtioPciDevice {
    /// The device string, for errors.
    name: String,
    /// The function: BARs, MSI-X, its DMA domain.
    func: Arc<dyn PciFunction>,
    t: Transport,
    offered: u64,
    want_mrg: bool,
    want_packed: bool,
    /// Features never negotiated (`drop_features=`, for tests and
    /// devices with a broken feature).
    drop_features: u64,
    /// MSI-X vectors the function has (0: no rx interrupts).
    msix: u32,
    /// Queue pairs the device has (max_virtqueue_pairs with MQ, else 1).
    dev_pairs: u16,
    /// The maximum MTU the device reports (VIRTIO_NET_F_MTU).
    dev_mtu: Option<u16>,
    /// The control queue, while started (VIRTIO_NET_F_CTRL_VQ).
    ctrl: Option<Box<dyn Control>>,
    /// The receive modes and filter addresses (besides our MAC) to
    /// program.
    filter: RxFilter,
    features: u64,
    layout: Layout,
    mac: MacAddr,
    /// Whether the device was set up by a start (and not reset since).
    running: bool,
    /// The homes of the queue handles handed out by the last start: what
    /// dropped handles left there is released after the device reset.
    homes: Vec<Arc<crate::driver::net::QueueHome>>,
    /// The rings' region and its IOMMU mapping (modern transport).
    ring_map: Option<(Arc<DmaRegion>, DmaGuard)>,
    /// The app's link events, once asked for.
    link_events: Option<LinkEvents>,
    /// The configuration-change vector of the running start, until a
    /// link watch takes it.
    config_irq: Option<rpmd_pmd::function::EventFd>,
    /// The link watch, while running with link events asked for.
    watch: Option<linkwatch::LinkWatch>,
}

impl Device for VirtioPciDevice {
    fn driver(&self) -> &'static str {
        "virtio-net-pci"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_rx_queues: self.dev_pairs.min(MAX_PAIRS),
            max_tx_queues: self.dev_pairs.min(MAX_PAIRS),
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
    fn start(&mut self, ctx: StartContext<'_>) -> Result<Queues, PmdError> {
        self.running = true;
        let q = self.setup(&ctx);
        if q.is_err() {
            // Leave the device quiet after a failed start.
            let _ = self.halt();
        }
        self.watch_if_asked();
        q
    }
    /// A link that can change (VIRTIO_NET_F_STATUS) is watched while the
    /// port runs (see `linkwatch`); without it the link follows start
    /// and stop only.
    fn watch_link(&mut self, _name: &str, events: &LinkEvents) -> Result<bool, PmdError> {
        self.link_events = Some(events.clone());
        self.watch_if_asked();
        Ok(true)
    }
    fn stop(&mut self, _name: &str) -> Result<(), PmdError> {
        self.halt()
    }
    fn link(&self, started: bool) -> Link {
        let (r, o) = self.t.device_cfg();
        let up = started
            && (self.features & F_STATUS == 0 || linkwatch::status_link_up(r, o + STATUS_OFFSET));
        Link {
            up,
            speed_mbps: 10_000,
            full_duplex: true,
        }
    }
    fn mac_addr(&self) -> MacAddr {
        self.mac
    }
    fn has_mac_filter(&self) -> bool {
        // Asking one without CTRL_RX is `set_modes`'s error to give.
        true
    }
    fn set_rx_filter(&mut self, _name: &str, filter: &RxFilter) -> Result<(), PmdError> {
        // Both tables must fit one control command (an mbuf).
        if 6 * (filter.unicast.len() + filter.multicast.len()) > 1800 {
            return Err(perr(&self.name, "at most 300 filter addresses"));
        }
        self.set_modes(filter.clone())
    }
    fn xstats(&self, stats: &StatsBlock, out: &mut Vec<Xstat>) {
        feature_xstats(stats, self.offered, self.features, out);
        out.push(Xstat {
            name: "device_max_mtu".into(),
            value: self.dev_mtu.unwrap_or(0) as u64,
        });
        if let Some(w) = &self.watch {
            for (name, k) in [
                ("config_interrupts", 0),
                ("link_changes", 1),
                ("link_watch_wait_errors", 2),
            ] {
                out.push(Xstat {
                    name: name.into(),
                    value: w.counts[k].load(std::sync::atomic::Ordering::Relaxed),
                });
            }
        }
    }
}

impl VirtioPciDevice {
    /// Resets a running device and frees what its queues left behind;
    /// nothing when it is not running.
    fn halt(&mut self) -> Result<(), PmdError> {
        self.watch = None;
        self.config_irq = None;
        if !std::mem::take(&mut self.running) {
            return Ok(());
        }
        // After the reset the device no longer reads or writes our
        // memory, so the queues' mbufs may go back to the pool.
        let reset = self.t.reset(&self.name);
        for h in self.homes.drain(..) {
            drop(h.close());
        }
        self.ctrl = None;
        if self.msix > 0 && !self.t.is_legacy() {
            let _ = self.func.disable_msix();
        }
        reset
    }
}

impl VirtioPciDevice {
    /// Starts the link watch, if the app asked for link events, the port
    /// runs and its link can change.
    fn watch_if_asked(&mut self) {
        let Some(events) = &self.link_events else {
            return;
        };
        if !self.running || self.watch.is_some() || self.features & F_STATUS == 0 {
            return;
        }
        self.watch = Some(linkwatch::LinkWatch::spawn(
            self.t.status_field(),
            self.config_irq.take(),
            events.clone(),
        ));
    }
}

impl Drop for VirtioPciDevice {
    fn drop(&mut self) {
        // Reset before the mappings go (fields drop after this).
        let _ = self.halt();
    }
}
