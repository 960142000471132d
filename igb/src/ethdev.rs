//! An igb port (82576, 82580, I350, I210, I211) as an rpmd [`Port`](rpmd_pmd::Port): the generic
//! [`EthDev`] over [`IgbDevice`], opened as `pci:BDF` through the
//! registry (the driver is picked by vendor and device ID).
//!
//! Open resets the device, reads its MAC address and EEPROM image
//! version, zeroes its statistics and brings the link up. `start`
//! programs the receive filter (the port's own address in entry 0,
//! further unicast addresses in entries 1-15, multicast groups in the
//! 4096-bit hash table), RSS over several receive queues (Toeplitz with
//! the default key, the redirection table spread round-robin, IPv4 and
//! IPv6 with their TCP and UDP ports hashed, the hash in each mbuf), the
//! receive and transmit control, and per queue
//! a descriptor ring (receive rings filled with buffers from the pool);
//! `stop` disables the queues and waits until the device says they are
//! off before any buffer it could still write goes home.
use crate::counters::Counters;
use crate::hw::Hw;
use crate::irq::{self, LinkWatch};
use crate::queues::*;
use crate::regs::*;
use crate::ring::DescRing;
use crate::rxtx::RxMode;
use crate::Error;
use rpmd_pmd::function::PciFunction;
use rpmd_pmd::port::events::LinkEvents;
use rpmd_pmd::port::rss::{RssCaps, RssConfig, RssHash};
use rpmd_pmd::port::stats::StatsBlock;
use rpmd_pmd::port::{
    Capabilities, Device, EthDev, Link, MacAddr, Offloads, PortConfig, Queues, RxFilter,
    StartContext, Xstat,
};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The flows RSS hashes: IPv4 and IPv6 on addresses, and their TCP and
/// UDP flows on addresses and ports.
const RSS_FIELDS: [(RssHash, u32); 6] = [
    (RssHash::IPV4, MRQC_RSS_FIELD_IPV4),
    (RssHash::IPV4_TCP, MRQC_RSS_FIELD_IPV4_TCP),
    (RssHash::IPV4_UDP, MRQC_RSS_FIELD_IPV4_UDP),
    (RssHash::IPV6, MRQC_RSS_FIELD_IPV6),
    (RssHash::IPV6_TCP, MRQC_RSS_FIELD_IPV6_TCP),
    (RssHash::IPV6_UDP, MRQC_RSS_FIELD_IPV6_UDP),
];
/// Descriptors per ring: at least, at most (datasheet: RDLEN up to
/// 64K descriptors; DPDK's igb takes 32..4096).
pub const MIN_DESC: u16 = 32;
/// See [`MIN_DESC`].
pub const MAX_DESC: u16 = 4096;
/// Largest MTU: a 9728-byte frame (the 82576's jumbo limit) less the
/// Ethernet header, a VLAN tag and the CRC.
pub const MAX_MTU: u16 = 9728 - 14 - 4 - 4;
/// Unicast addresses beyond the port's own (receive-address entries
/// 1-15).
pub const MAX_UNICAST: usize = 15;

/// What the device does itself.
const OFFLOADS: Offloads = Offloads(
    Offloads::RX_CHECKSUM.0
        | Offloads::RX_SCATTER.0
        | Offloads::RX_VLAN_STRIP.0
        | Offloads::RX_RSS.0
        | Offloads::RX_VLAN_FILTER.0
        | Offloads::TX_CHECKSUM.0
        | Offloads::TX_MULTI_SEGS.0
        | Offloads::TX_TSO.0
        | Offloads::TX_VLAN_INSERT.0,
);

/// One igb port: the generic port over its device.
pub type IgbPort = EthDev<IgbDevice>;

/// Opens the igb function at `func` as port `name` (its device string),
/// stamping received mbufs with `port_id`: reset, link mode checked (the
/// internal copper PHY), EEPROM checksums, MAC address, EEPROM version,
/// statistics zeroed, link up.
pub fn open_port(name: &str, func: Arc<dyn PciFunction>, port_id: u16) -> Result<IgbPort, Error> {
    let hw = Hw::open(func)?;
    hw.reset()?;
    hw.check_link_mode()?;
    hw.check_eeprom()?;
    let mac = match hw.mac()? {
        Some(m) => m,
        None => hw.eeprom_mac()?,
    };
    let fw = hw.fw_version()?;
    let counters = Counters::default();
    counters.clear(&hw);
    hw.set_link_up()?;
    let dev = IgbDevice {
        name: name.to_string(),
        hw,
        mac,
        fw,
        counters,
        started: None,
        filter: RxFilter::OWN_ADDRESS,
        mtu: 1500,
        offloads: Offloads::NONE,
        link_events: None,
        vfta: vec![0; VFTA_LEN as usize],
    };
    Ok(EthDev::named(name, port_id, dev).with_filter(RxFilter::OWN_ADDRESS))
}

/// The device side of one igb port.
pub struct IgbDevice {
    /// The device string, for errors.
    name: String,
    hw: Hw,
    mac: MacAddr,
    fw: String,
    counters: Counters,
    started: Option<Started>,
    filter: RxFilter,
    mtu: u16,
    offloads: Offloads,
    /// The link events, once the app asked for them.
    link_events: Option<LinkEvents>,
    /// The VLAN filter table as programmed (one bit per VLAN ID).
    vfta: Vec<u32>,
}

impl IgbDevice {
    /// The device's registers and function, for what only igb offers.
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

    fn config_err(&self, what: &'static str, detail: String) -> rpmd_pmd::Error {
        rpmd_pmd::Error::Config {
            port: self.name.clone(),
            what,
            detail,
        }
    }

    /// RCTL for the filter and MTU, receiver on or off.
    fn rctl(&self, enable: bool) -> u32 {
        let mut r = RCTL_BAM | RCTL_SECRC;
        if enable {
            r |= RCTL_EN;
        }
        if self.filter.promiscuous {
            r |= RCTL_UPE | RCTL_MPE;
        }
        if self.filter.allmulticast {
            r |= RCTL_MPE;
        }
        if self.mtu > 1500 {
            r |= RCTL_LPE;
        }
        if self.offloads.contains(Offloads::RX_VLAN_FILTER) {
            r |= RCTL_VFE;
        }
        r
    }

    /// Programs the address filter: entry 0 the port's own address,
    /// entries 1-15 the unicast list, the hash table the multicast list.
    fn program_filter(&self) -> Result<(), Error> {
        let hw = &self.hw;
        let own = std::iter::once(&self.mac).chain(&self.filter.unicast);
        for k in 0..RAR_ENTRIES {
            let (lo, hi) = match own.clone().nth(k as usize) {
                Some(m) => rar_words(m),
                None => (0, 0),
            };
            // High word first (valid bit off) so that no half-written
            // entry is ever valid.
            hw.write(RAH0 + 8 * k, 0)?;
            hw.write(RAL0 + 8 * k, lo)?;
            hw.write(RAH0 + 8 * k, hi)?;
        }
        let mut mta = [0u32; MTA_LEN as usize];
        for m in &self.filter.multicast {
            let h = mta_hash(m);
            mta[(h >> 5) as usize] |= 1 << (h & 31);
        }
        for (k, w) in mta.iter().enumerate() {
            hw.write(MTA + 4 * k as u64, *w)?;
        }
        let rctl = hw.read(RCTL)? & RCTL_EN != 0;
        hw.write(RCTL, self.rctl(rctl))
    }

    /// Starts the link watch of `st`, if the app asked for link events
    /// and MSI-X is on.
    fn watch_if_asked(&self, st: &mut Started) {
        let Some(events) = &self.link_events else {
            return;
        };
        if let Some(other) = st.other.take() {
            st.watch = Some(LinkWatch::spawn(
                self.hw.regs().clone(),
                other,
                events.clone(),
            ));
        }
    }

    /// The port-wide registers of a configuration: filter, checksum and
    /// VLAN offloads, the longest frame.
    fn configure_device(&self, conf: &PortConfig) -> Result<(), Error> {
        let hw = &self.hw;
        hw.write(RCTL, 0)?;
        self.program_filter()?;
        let mut rxcsum = 0;
        if conf.offloads.contains(Offloads::RX_CHECKSUM) {
            rxcsum |= RXCSUM_IPOFLD | RXCSUM_TUOFLD;
        }
        if conf.rss_on() {
            // The hash takes the write-back's checksum field (the
            // checksum status bits stay).
            rxcsum |= RXCSUM_PCSD;
            self.program_rss(&conf.rss, conf.rx_queues)?;
        } else {
            hw.write(MRQC, 0)?;
        }
        hw.write(RXCSUM, rxcsum)?;
        let ctrl = hw.read(CTRL)?;
        let vme = conf.offloads.contains(Offloads::RX_VLAN_STRIP)
            || conf.offloads.contains(Offloads::TX_VLAN_INSERT);
        hw.write(
            CTRL,
            if vme {
                ctrl | CTRL_VME
            } else {
                ctrl & !CTRL_VME
            },
        )?;
        hw.write(VET, 0x8100)?;
        for (k, w) in self.vfta.iter().enumerate() {
            hw.write_vfta(k, *w)?;
        }
        hw.write(RLPML, max_frame(self.mtu))
    }

    /// RSS over `queues` receive queues as `rss` says: the key, the
    /// redirection table (by default entry `k` to queue `k mod queues`,
    /// as DPDK's), the headers hashed.
    fn program_rss(&self, rss: &RssConfig, queues: u16) -> Result<(), Error> {
        let hw = &self.hw;
        for (k, w) in rss
            .key
            .chunks_exact(4)
            .enumerate()
            .take(RSSRK_REGS as usize)
        {
            hw.write(
                RSSRK + 4 * k as u64,
                u32::from_le_bytes([w[0], w[1], w[2], w[3]]),
            )?;
        }
        self.program_reta(&rss.table(RETA_ENTRIES as u16, queues))?;
        hw.write(MRQC, MRQC_ENABLE_RSS_MQ | rss.hash.to_bits(&RSS_FIELDS))
    }

    /// The redirection table: four 8-bit entries a register.
    fn program_reta(&self, table: &[u16]) -> Result<(), Error> {
        for (r, four) in table.chunks(4).enumerate() {
            let word = four
                .iter()
                .enumerate()
                .fold(0u32, |a, (j, &q)| a | (q as u32 & 0xff) << (8 * j));
            self.hw.write(RETA + 4 * r as u64, word)?;
        }
        Ok(())
    }

    /// Receiver, transmitter and the queues of `st` off, each queue
    /// awaited, then MSI-X off; every step is tried, the first failure
    /// returned.
    fn quiesce(&self, st: &Started) -> Result<(), Error> {
        let hw = &self.hw;
        let mut result = hw.write(RCTL, self.rctl(false));
        result = result.and(hw.write(TCTL, TCTL_PSP));
        result = disable_queues(hw, st, result);
        if st.msix {
            result = result.and(irq::disable(hw));
        }
        result
    }
}

/// Receive-address words of `m`: low four bytes, then the last two with
/// the valid bit.
fn rar_words(m: &MacAddr) -> (u32, u32) {
    let b = m.0;
    (
        u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        u16::from_le_bytes([b[4], b[5]]) as u32 | RAH_AV,
    )
}

/// The multicast table bit of `m` with RCTL.MO = 00: destination bits
/// 47:36 (datasheet §8.10.15: the upper 12 bits of the address).
pub(crate) fn mta_hash(m: &MacAddr) -> u32 {
    let b = m.0;
    ((b[4] as u32) >> 4 | (b[5] as u32) << 4) & 0xfff
}

impl Device for IgbDevice {
    fn driver(&self) -> &'static str {
        "igb"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_rx_queues: self.hw.family().queues(),
            max_tx_queues: self.hw.family().queues(),
            min_desc: MIN_DESC,
            max_desc: MAX_DESC,
            desc_pow2: true,
            offloads: OFFLOADS,
            min_mtu: 68,
            max_mtu: MAX_MTU,
            rx_interrupts: self.hw.function().msix_vectors() >= 2,
            needs_rx_pool: true,
        }
    }

    fn configure(&mut self, name: &str, conf: &PortConfig) -> Result<(), rpmd_pmd::Error> {
        let mtu = conf.mtu.unwrap_or(self.mtu);
        if let Some(pool) = &conf.rx_pool {
            check_rx_buffers(name, pool, mtu, conf.offloads)?;
        }
        self.offloads = conf.offloads;
        Ok(())
    }

    fn start(&mut self, ctx: StartContext<'_>) -> Result<Queues, rpmd_pmd::Error> {
        start_queues_of(self, ctx)
    }

    fn stop(&mut self, _name: &str) -> Result<(), rpmd_pmd::Error> {
        stop_queues_of(self)
    }

    fn link(&self, _started: bool) -> Link {
        match self.hw.link() {
            Ok(l) => Link {
                up: l.up,
                speed_mbps: if l.up { l.speed_mbps } else { 0 },
                full_duplex: l.full_duplex,
            },
            Err(_) => Link::default(),
        }
    }

    fn mac_addr(&self) -> MacAddr {
        self.mac
    }

    fn has_mac_filter(&self) -> bool {
        true
    }

    fn set_rx_filter(&mut self, name: &str, filter: &RxFilter) -> Result<(), rpmd_pmd::Error> {
        if filter.unicast.len() > MAX_UNICAST {
            return Err(self.config_err(
                "unicast filter",
                format!(
                    "{name}: {} addresses; igb has room for {MAX_UNICAST} beside its own",
                    filter.unicast.len()
                ),
            ));
        }
        let old = std::mem::replace(&mut self.filter, filter.clone());
        if let Err(e) = self.program_filter() {
            self.filter = old;
            return Err(self.err("programming the receive filter", e));
        }
        Ok(())
    }

    fn set_mtu(&mut self, name: &str, mtu: u16, started: bool) -> Result<(), rpmd_pmd::Error> {
        if started && max_frame(mtu) > max_frame(self.mtu) {
            return Err(rpmd_pmd::Error::Port {
                port: name.to_string(),
                detail: format!(
                    "MTU {mtu} above {} while started: the receive buffers were sized at start; stop the port first",
                    self.mtu
                ),
            });
        }
        self.mtu = mtu;
        let set = || -> Result<(), Error> {
            self.hw.write(RLPML, max_frame(mtu))?;
            let rctl = self.hw.read(RCTL)?;
            self.hw.write(RCTL, self.rctl(rctl & RCTL_EN != 0))
        };
        set().map_err(|e| self.err("setting the MTU", e))
    }

    fn missed(&self) -> u64 {
        self.counters.missed(&self.hw)
    }

    /// Toeplitz over every IPv4/IPv6 header kind, a settable key, a
    /// 128-entry redirection table (datasheet §7.1.2.8).
    fn rss_caps(&self) -> RssCaps {
        RssCaps {
            hash: RssHash::ALL,
            reta_size: RETA_ENTRIES as u16,
            key: true,
        }
    }

    /// The redirection table's registers, which take effect at once.
    fn set_rss_reta(&mut self, name: &str, reta: &[u16]) -> Result<(), rpmd_pmd::Error> {
        self.program_reta(reta)
            .map_err(|e| rpmd_pmd::Error::Driver {
                port: name.to_string(),
                what: "writing the RSS redirection table".into(),
                source: Box::new(e),
            })
    }

    /// New hashed headers or key on a running port: RSSRK and MRQC (and
    /// the table as it was), which take effect at once.
    fn set_rss_hash(
        &mut self,
        name: &str,
        rss: &RssConfig,
        rx_queues: u16,
    ) -> Result<(), rpmd_pmd::Error> {
        self.program_rss(rss, rx_queues)
            .map_err(|e| rpmd_pmd::Error::Driver {
                port: name.to_string(),
                what: "writing the RSS key and hashed headers".into(),
                source: Box::new(e),
            })
    }

    /// The device's VLAN filter table: one bit per VLAN ID, used while
    /// `RX_VLAN_FILTER` is configured (RCTL.VFE); untagged frames pass.
    fn set_vlan_filter(&mut self, _name: &str, id: u16, on: bool) -> Result<(), rpmd_pmd::Error> {
        let (reg, bit) = ((id >> 5) as usize & 0x7f, 1u32 << (id & 31));
        let w = &mut self.vfta[reg];
        *w = if on { *w | bit } else { *w & !bit };
        let v = *w;
        self.hw
            .write_vfta(reg, v)
            .map_err(|e| self.err("programming the VLAN filter table", e))
    }

    fn xstats(&self, _stats: &StatsBlock, out: &mut Vec<Xstat>) {
        self.counters.xstats(&self.hw, out);
        let watch = self.started.as_ref().and_then(|s| s.watch.as_ref());
        if let Some(w) = watch {
            for (name, c) in [
                "other_interrupts",
                "link_change_interrupts",
                "link_watch_wait_errors",
            ]
            .into_iter()
            .zip(w.counts.iter())
            {
                out.push(Xstat {
                    name: name.into(),
                    value: c.load(Ordering::Relaxed),
                });
            }
        }
    }

    fn fw_version(&self) -> Option<String> {
        Some(self.fw.clone())
    }

    /// Link changes interrupt through the other causes' MSI-X vector
    /// while the port runs; without MSI-X the device cannot say.
    fn watch_link(&mut self, _name: &str, events: &LinkEvents) -> Result<bool, rpmd_pmd::Error> {
        if self.hw.function().msix_vectors() < 2 {
            return Ok(false);
        }
        self.link_events = Some(events.clone());
        if let Some(mut st) = self.started.take() {
            self.watch_if_asked(&mut st);
            self.started = Some(st);
        }
        Ok(true)
    }
}

impl QueueOwner for IgbDevice {
    /// Everything `start` sets up, queues handed out.
    fn build_queues(&mut self, ctx: &StartContext<'_>, st: &mut Started) -> Result<Queues, Error> {
        let conf = ctx.conf;
        let pool = rx_pool_for(&self.hw, conf)?;
        let func = self.hw.function().clone();
        self.configure_device(conf)?;
        let mut tx = Vec::new();
        for q in 0..conf.tx_queues {
            let ring = DescRing::new(&*func, &format!("igb tx ring {q}"), conf.tx_desc as u32)?;
            start_tx_ring(&self.hw, q, &ring)?;
            tx.push(Box::new(tx_ring(&self.hw, ctx, st, q, ring, &pool))
                as Box<dyn rpmd_pmd::port::TxQueue>);
        }
        let kib = buffer_kib(&pool);
        let mut irqs = Vec::new().into_iter();
        if let Some(v) = irq::enable(&self.hw, conf.rx_queues)? {
            st.msix = true;
            st.other = Some(v.other);
            irqs = v.rx.into_iter();
        }
        let mut rx = Vec::new();
        for q in 0..conf.rx_queues {
            let ring = DescRing::new(&*func, &format!("igb rx ring {q}"), conf.rx_desc as u32)?;
            start_rx_ring(&self.hw, q, &ring, kib)?;
            let off = ctx.conf.offloads;
            let mode = RxMode {
                checksum: off.contains(Offloads::RX_CHECKSUM),
                vlan_strip: off.contains(Offloads::RX_VLAN_STRIP),
                rss: ctx.conf.rss_on(),
            };
            let mut r = rx_ring(&self.hw, ctx, st, q, ring, &pool, mode);
            r.irq = irqs.next();
            r.fill().map_err(|e| Error::Memory {
                what: format!("filling rx ring {q} from the pool"),
                source: e,
            })?;
            rx.push(Box::new(r) as Box<dyn rpmd_pmd::port::RxQueue>);
        }
        self.hw
            .write(TCTL, TCTL_EN | TCTL_PSP | TCTL_CT | TCTL_COLD)?;
        self.hw.write(RCTL, self.rctl(true))?;
        self.watch_if_asked(st);
        Ok(Queues::new(rx, tx))
    }

    /// Turns the receiver, the transmitter and every queue of `st` off,
    /// waits until the device reports each queue off, then frees what
    /// dropped handles left for it.
    fn tear_down(&mut self, mut st: Started) -> Result<(), Error> {
        st.running.store(false, Ordering::Relaxed);
        drop(st.watch.take());
        let quiet = self.quiesce(&st);
        bury(&st, quiet)
    }
    fn running(&mut self) -> &mut Option<Started> {
        &mut self.started
    }
    fn driver_err(&self, what: &str, e: Error) -> rpmd_pmd::Error {
        self.err(what, e)
    }
}

impl Drop for IgbDevice {
    fn drop(&mut self) {
        let _ = stop_queues_of(self);
    }
}
