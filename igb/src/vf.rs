//! An igb virtual function (SR-IOV: an 82576's or I350's VF, 8086:10CA
//! or 8086:1520) as an rpmd [`Port`](rpmd_pmd::Port): the generic
//! [`EthDev`] over [`IgbVfDevice`], opened as `pci:BDF` through the
//! registry like the PF.
//!
//! A VF owns two queue pairs and nothing else of the device: what a PF
//! driver would program itself (the address filter, VLAN filter, the
//! longest frame, multicast modes) a VF asks its PF for over the mailbox
//! (`mbx`), and the PF's driver (Linux's igb, DPDK's, rpmd's
//! model in the tests) decides. The protocol is igbvf's:
//!
//! - open, and each start (as DPDK's igbvf: a PF reset meanwhile leaves
//!   the VF disabled until it asks again), resets the VF (CTRL.RST: its
//!   queues and interrupts stop and the PF is told), waits while the PF
//!   is in reset (RSTI), then sends
//!   `VF_RESET`: the PF enables the VF's receive and transmit and answers
//!   with the MAC address it gave the VF, or with a NACK when it gave
//!   none, after which the VF picks a random locally administered
//!   address and asks for it (`VF_SET_MAC_ADDR`), as Linux's igbvf does;
//! - start sends the longest frame (`VF_SET_LPE`) and the receive filter,
//!   then sets up each queue's ring on the VF's own queue registers, the
//!   same data path as the PF's (`rxtx`);
//! - the multicast list goes as up to 30 hashes (`VF_SET_MULTICAST`),
//!   more as all-multicast; all-multicast as `VF_SET_PROMISC`; extra
//!   unicast addresses as MAC filters; VLAN IDs as `VF_SET_VLAN`. A PF
//!   that refuses (NACK) makes the call fail, naming the message.
//!   Unicast promiscuous mode is refused here: Linux's igb never grants
//!   it to a VF.
//!
//! The PF strips VLAN tags for its VFs (Linux's igb sets VMOLR.STRVLAN),
//! so a tagged frame always arrives with its tag in the mbuf. The VF has
//! no RSS settings of its own: its PF may spread the VF's frames over both
//! its queues (Linux's igb on an 82576 does, with more than one CPU: VMDq
//! and RSS, two queues a pool), and a frame for a queue the port did not
//! start is dropped by the device, so such a VF wants both (QEMU's model
//! does not spread; untested there). Each
//! receive queue has an MSI-X vector of the VF's, armed only while its
//! lcore sleeps (`irq::enable_vf`); the mailbox's vector is not used, and
//! a link change or PF reset is seen by polling (`link`), not as an
//! event. Statistics are the VF's own counters (packets, octets,
//! multicast; 32 bits that wrap, kept as 64-bit totals) and each queue's
//! drop count as `imissed`.
use crate::ethdev;
use crate::hw::{Hw, WAIT};
use crate::mbx::Mailbox;
use crate::queues::{self, Started};
use crate::regs::*;
use crate::ring::DescRing;
use crate::rxtx::RxMode;
use crate::Error;
use rpmd_pmd::function::{wait_until, PciFunction};
use rpmd_pmd::port::stats::StatsBlock;
use rpmd_pmd::port::{
    Capabilities, Device, EthDev, Link, MacAddr, Offloads, PortConfig, Queues, RxFilter,
    StartContext, Xstat,
};
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// Multicast hashes one `VF_SET_MULTICAST` carries.
pub const MAX_MULTICAST_HASHES: usize = 30;

/// What a VF's queues do themselves.
const OFFLOADS: Offloads = Offloads(
    Offloads::RX_CHECKSUM.0
        | Offloads::RX_SCATTER.0
        | Offloads::RX_VLAN_STRIP.0
        | Offloads::RX_VLAN_FILTER.0
        | Offloads::TX_CHECKSUM.0
        | Offloads::TX_MULTI_SEGS.0
        | Offloads::TX_TSO.0
        | Offloads::TX_VLAN_INSERT.0,
);

/// The VF's statistics registers, by xstat name.
const COUNTERS: [(&str, u64); 5] = [
    ("rx_good_packets", VFGPRC),
    ("tx_good_packets", VFGPTC),
    ("rx_good_bytes", VFGORC),
    ("tx_good_bytes", VFGOTC),
    ("rx_multicast_packets", VFMPRC),
];

/// The receive filter the PF was asked for (nothing, after the reset).
#[derive(Default)]
struct Asked {
    hashes: Vec<u16>,
    all_multicast: bool,
    unicast: Vec<MacAddr>,
}

/// One igb VF port: the generic port over its device.
pub type IgbVfPort = EthDev<IgbVfDevice>;

/// The device side of one igb VF port.
pub struct IgbVfDevice {
    name: String,
    hw: Hw,
    mbx: Mailbox,
    mac: MacAddr,
    started: Option<Started>,
    filter: RxFilter,
    /// What the PF was asked for since the VF's reset.
    asked: Asked,
    /// The VLAN IDs the port admits (asked again after a reset).
    vlans: Vec<u16>,
    mtu: u16,
    /// The counters' last readings and running totals.
    counts: Mutex<([u32; COUNTERS.len()], [u64; COUNTERS.len()])>,
    /// Frames the queues dropped (RQDPC, which clears on read).
    dropped: Mutex<u64>,
}

/// Opens the VF at `func` as port `name`, stamping received mbufs with
/// `port_id`: reset, the PF's reply, the MAC address (the PF's, or a
/// random one the PF accepted).
pub fn open_vf_port(
    name: &str,
    func: Arc<dyn PciFunction>,
    port_id: u16,
) -> Result<IgbVfPort, Error> {
    let hw = Hw::open_vf(func)?;
    let mbx = Mailbox::default();
    let mac = reset(&hw, &mbx, None)?;
    let dev = IgbVfDevice {
        name: name.to_string(),
        hw,
        mbx,
        mac,
        started: None,
        filter: RxFilter::OWN_ADDRESS,
        asked: Asked::default(),
        vlans: Vec::new(),
        mtu: 1500,
        counts: Mutex::new(([0; COUNTERS.len()], [0; COUNTERS.len()])),
        dropped: Mutex::new(0),
    };
    dev.update_counts(true);
    Ok(EthDev::named(name, port_id, dev).with_filter(RxFilter::OWN_ADDRESS))
}

/// Resets the VF and has the PF set it up: the MAC address it ends with
/// (the PF's, or `kept`, or a new random one, asked for when the PF gives
/// none).
fn reset(hw: &Hw, mbx: &Mailbox, kept: Option<MacAddr>) -> Result<MacAddr, Error> {
    hw.function()
        .enable_bus_master()
        .map_err(|source| Error::Function {
            addr: hw.addr().to_string(),
            what: "bus mastering",
            source,
        })?;
    let ctrl = hw.read(CTRL)?;
    hw.write(CTRL, ctrl | CTRL_RST)?;
    // RSTD clears as it is read; RSTI stays while the PF is in reset.
    let idle = V2PMAILBOX_RSTI | V2PMAILBOX_RSTD;
    wait_until("the PF out of reset", WAIT, || Ok(!mbx.take(hw, idle)?)).map_err(|_| {
        Error::PfNotReady {
            addr: hw.addr().to_string(),
            ms: WAIT.as_millis() as u64,
        }
    })?;
    let mut reply = [0u32; 3];
    let given = match mbx.request(hw, &[VF_RESET], &mut reply) {
        Ok(()) => Some(mac_of(reply[1], reply[2])),
        Err(Error::PfRefused { .. }) => None,
        Err(e) => return Err(e),
    };
    match given {
        Some(m) if !m.is_multicast() && m.0 != [0; 6] => Ok(m),
        _ => {
            let m = kept.unwrap_or_else(random_local_mac);
            let (lo, hi) = mac_words(&m);
            mbx.request(hw, &[VF_SET_MAC_ADDR, lo, hi], &mut [0])?;
            Ok(m)
        }
    }
}

/// The address in message words `lo`, `hi` (bytes in memory order).
fn mac_of(lo: u32, hi: u32) -> MacAddr {
    let (a, b) = (lo.to_le_bytes(), hi.to_le_bytes());
    MacAddr([a[0], a[1], a[2], a[3], b[0], b[1]])
}

/// Message words of `m` (bytes in memory order).
fn mac_words(m: &MacAddr) -> (u32, u32) {
    let b = m.0;
    (
        u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        u32::from_le_bytes([b[4], b[5], 0, 0]),
    )
}

/// A random unicast, locally administered address.
fn random_local_mac() -> MacAddr {
    let r = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
        .to_le_bytes();
    MacAddr([r[0] & 0xfe | 0x02, r[1], r[2], r[3], r[4], r[5]])
}

impl IgbVfDevice {
    /// The VF's registers and function.
    pub fn hw(&self) -> &Hw {
        &self.hw
    }

    fn err(&self, what: &str, e: Error) -> rpmd_pmd::Error {
        rpmd_pmd::Error::Driver {
            port: self.name.clone(),
            what: what.to_string(),
            source: Box::new(e),
        }
    }

    fn ask(&self, msg: &[u32]) -> Result<(), Error> {
        self.mbx.request(&self.hw, msg, &mut [0])
    }

    /// Asks the PF for what of `filter` differs from what it was asked
    /// before: the multicast hashes, all-multicast (also for more groups
    /// than one message holds), the extra unicast addresses. A PF that
    /// knows fewer messages (`VF_SET_PROMISC` is newer) is asked only
    /// for what the port uses. Unicast promiscuous is refused.
    fn program_filter(&mut self, filter: &RxFilter) -> Result<(), Error> {
        if filter.promiscuous {
            return Err(Error::Mailbox {
                addr: self.hw.addr().to_string(),
                message: "VF_SET_PROMISC",
                detail: "a VF cannot receive other functions' unicast frames (Linux's igb PF never grants it); use the PF".into(),
            });
        }
        let all = filter.allmulticast || filter.multicast.len() > MAX_MULTICAST_HASHES;
        let hashes: Vec<u16> = match all {
            true => Vec::new(),
            false => filter
                .multicast
                .iter()
                .map(|m| ethdev::mta_hash(m) as u16)
                .collect(),
        };
        if hashes != self.asked.hashes {
            let mut msg = [0u32; VMBMEM_WORDS];
            msg[0] = VF_SET_MULTICAST | (hashes.len() as u32) << VT_MSGINFO_SHIFT;
            for (k, h) in hashes.iter().enumerate() {
                msg[1 + k / 2] |= (*h as u32) << (16 * (k % 2));
            }
            self.ask(&msg)?;
            self.asked.hashes = hashes;
        }
        if all != self.asked.all_multicast {
            let info = if all { VF_SET_PROMISC_MULTICAST } else { 0 };
            self.ask(&[VF_SET_PROMISC | info])?;
            self.asked.all_multicast = all;
        }
        if filter.unicast != self.asked.unicast {
            self.program_unicast(&filter.unicast)?;
        }
        Ok(())
    }

    /// Replaces the extra unicast addresses the PF holds for the VF.
    fn program_unicast(&mut self, unicast: &[MacAddr]) -> Result<(), Error> {
        if !self.asked.unicast.is_empty() {
            // Linux's igb wants a valid address even to clear the list.
            let (lo, hi) = mac_words(&self.mac);
            self.ask(&[VF_SET_MAC_ADDR | VF_MAC_FILTER_CLR, lo, hi])?;
            self.asked.unicast.clear();
        }
        for m in unicast {
            let (lo, hi) = mac_words(m);
            self.ask(&[VF_SET_MAC_ADDR | VF_MAC_FILTER_ADD, lo, hi])?;
            self.asked.unicast.push(*m);
        }
        Ok(())
    }

    /// Resets the VF again, keeping its address, and asks the PF for its
    /// VLAN IDs again (the receive filter and longest frame follow at
    /// start); the counters are read before and their new readings are the
    /// baseline after.
    fn reset_again(&mut self) -> Result<(), Error> {
        self.update_counts(false);
        self.mac = reset(&self.hw, &self.mbx, Some(self.mac))?;
        self.update_counts(true);
        self.asked = Asked::default();
        for id in self.vlans.clone() {
            self.ask(&[VF_SET_VLAN | 1 << VT_MSGINFO_SHIFT, id as u32])?;
        }
        Ok(())
    }

    /// Reads the counters into the totals (`baseline`: only the readings).
    fn update_counts(&self, baseline: bool) -> [u64; COUNTERS.len()] {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let (last, totals) = &mut *c;
        for (k, &(_, off)) in COUNTERS.iter().enumerate() {
            let Ok(v) = self.hw.read(off) else { continue };
            if !baseline {
                totals[k] += v.wrapping_sub(last[k]) as u64;
            }
            last[k] = v;
        }
        *totals
    }
}

impl Device for IgbVfDevice {
    fn driver(&self) -> &'static str {
        "igbvf"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_rx_queues: VF_QUEUES,
            max_tx_queues: VF_QUEUES,
            min_desc: ethdev::MIN_DESC,
            max_desc: ethdev::MAX_DESC,
            desc_pow2: true,
            offloads: OFFLOADS,
            min_mtu: 68,
            max_mtu: ethdev::MAX_MTU,
            rx_interrupts: self.hw.function().msix_vectors() >= VF_QUEUES as u32,
            needs_rx_pool: true,
        }
    }

    fn configure(&mut self, name: &str, conf: &PortConfig) -> Result<(), rpmd_pmd::Error> {
        let mtu = conf.mtu.unwrap_or(self.mtu);
        if let Some(pool) = &conf.rx_pool {
            queues::check_rx_buffers(name, pool, mtu, conf.offloads)?;
        }
        self.mtu = mtu;
        Ok(())
    }

    /// Resets the VF first, as DPDK's igbvf does at each start: a PF that
    /// was reset meanwhile disabled the VF until it asks again.
    fn start(&mut self, ctx: StartContext<'_>) -> Result<Queues, rpmd_pmd::Error> {
        self.reset_again()
            .map_err(|e| self.err("resetting the VF", e))?;
        queues::start_queues_of(self, ctx)
    }

    fn stop(&mut self, _name: &str) -> Result<(), rpmd_pmd::Error> {
        queues::stop_queues_of(self)
    }

    /// The PF's link (STATUS), down while the PF is in reset.
    fn link(&self, _started: bool) -> Link {
        let in_reset = self
            .mbx
            .status(&self.hw)
            .map_or(true, |v| v & V2PMAILBOX_RSTI != 0);
        match self.hw.link() {
            Ok(l) if l.up && !in_reset => Link {
                up: true,
                speed_mbps: l.speed_mbps,
                full_duplex: l.full_duplex,
            },
            _ => Link::default(),
        }
    }

    fn mac_addr(&self) -> MacAddr {
        self.mac
    }

    fn has_mac_filter(&self) -> bool {
        true
    }

    fn set_rx_filter(&mut self, _name: &str, filter: &RxFilter) -> Result<(), rpmd_pmd::Error> {
        self.program_filter(filter)
            .map_err(|e| self.err("asking the PF for the receive filter", e))?;
        self.filter = filter.clone();
        Ok(())
    }

    fn set_vlan_filter(&mut self, _name: &str, id: u16, on: bool) -> Result<(), rpmd_pmd::Error> {
        let add = if on { 1 << VT_MSGINFO_SHIFT } else { 0 };
        self.ask(&[VF_SET_VLAN | add, id as u32])
            .map_err(|e| self.err("asking the PF for a VLAN filter", e))?;
        self.vlans.retain(|&v| v != id);
        if on {
            self.vlans.push(id);
        }
        Ok(())
    }

    fn set_mtu(&mut self, name: &str, mtu: u16, started: bool) -> Result<(), rpmd_pmd::Error> {
        if started && queues::max_frame(mtu) > queues::max_frame(self.mtu) {
            return Err(rpmd_pmd::Error::Port {
                port: name.to_string(),
                detail: format!(
                    "MTU {mtu} above {} while started: the receive buffers were sized at start; stop the port first",
                    self.mtu
                ),
            });
        }
        self.ask(&[VF_SET_LPE, queues::max_frame(mtu)])
            .map_err(|e| self.err("asking the PF for the longest frame", e))?;
        self.mtu = mtu;
        Ok(())
    }

    fn missed(&self) -> u64 {
        let mut d = self.dropped.lock().unwrap_or_else(|e| e.into_inner());
        for q in 0..VF_QUEUES {
            *d += self.hw.read(vf_rqdpc(q)).unwrap_or(0) as u64;
        }
        *d
    }

    fn xstats(&self, _stats: &StatsBlock, out: &mut Vec<Xstat>) {
        let totals = self.update_counts(false);
        for (k, &(name, _)) in COUNTERS.iter().enumerate() {
            out.push(Xstat {
                name: name.into(),
                value: totals[k],
            });
        }
    }
}

impl queues::QueueOwner for IgbVfDevice {
    /// Everything `start` sets up, queues handed out.
    fn build_queues(&mut self, ctx: &StartContext<'_>, st: &mut Started) -> Result<Queues, Error> {
        let conf = ctx.conf;
        let pool = queues::rx_pool_for(&self.hw, conf)?;
        let func = self.hw.function().clone();
        self.ask(&[VF_SET_LPE, queues::max_frame(self.mtu)])?;
        let filter = self.filter.clone();
        self.program_filter(&filter)?;
        let mut tx = Vec::new();
        for q in 0..conf.tx_queues {
            let ring = DescRing::new(&*func, &format!("igb vf tx ring {q}"), conf.tx_desc as u32)?;
            queues::start_tx_ring(&self.hw, q, &ring)?;
            tx.push(Box::new(queues::tx_ring(&self.hw, ctx, st, q, ring, &pool))
                as Box<dyn rpmd_pmd::port::TxQueue>);
        }
        let mode = RxMode {
            checksum: conf.offloads.contains(Offloads::RX_CHECKSUM),
            // The PF strips every VF's tags (VMOLR.STRVLAN).
            vlan_strip: true,
            rss: false,
        };
        let mut irqs = Vec::new().into_iter();
        if let Some(v) = crate::irq::enable_vf(&self.hw, conf.rx_queues)? {
            st.msix = true;
            irqs = v.into_iter();
        }
        let mut rx = Vec::new();
        for q in 0..conf.rx_queues {
            let ring = DescRing::new(&*func, &format!("igb vf rx ring {q}"), conf.rx_desc as u32)?;
            queues::start_rx_ring(&self.hw, q, &ring, queues::buffer_kib(&pool))?;
            let mut r = queues::rx_ring(&self.hw, ctx, st, q, ring, &pool, mode);
            r.irq = irqs.next();
            r.fill().map_err(|e| Error::Memory {
                what: format!("filling rx ring {q} from the pool"),
                source: e,
            })?;
            rx.push(Box::new(r) as Box<dyn rpmd_pmd::port::RxQueue>);
        }
        Ok(Queues::new(rx, tx))
    }

    fn tear_down(&mut self, st: Started) -> Result<(), Error> {
        st.running.store(false, Ordering::Relaxed);
        let mut quiet = queues::disable_queues(&self.hw, &st, Ok(()));
        if st.msix {
            quiet = quiet.and(crate::irq::disable_vf(&self.hw));
        }
        queues::bury(&st, quiet)
    }
    fn running(&mut self) -> &mut Option<Started> {
        &mut self.started
    }
    fn driver_err(&self, what: &str, e: Error) -> rpmd_pmd::Error {
        self.err(what, e)
    }
}

impl Drop for IgbVfDevice {
    fn drop(&mut self) {
        let _ = queues::stop_queues_of(self);
    }
}
