//! The data path: a receive and a transmit queue over advanced
//! descriptor rings, as rpmd queue handles.
//!
//! Receive: every descriptor always holds a buffer (its slot's mbuf). A
//! burst first takes fresh buffers from the pool in bulk, then takes as
//! many completed descriptors (status DD) as it has replacements for,
//! posts the replacements in their places, and moves the tail to one
//! behind the next descriptor to look at, in one register write. A frame
//! over several descriptors (EOP on the last) arrives as an mbuf chain.
//!
//! Transmit: a frame is an optional context descriptor (when its
//! offloads differ from the last context written) and one data
//! descriptor per segment, RS on the last; its mbuf waits in the slot of
//! that last descriptor until the device writes DD there. Completed
//! frames are reclaimed at the start of each burst, and the tail is
//! written once per burst.
use crate::desc::{RxRead, RxWb, TxContext, TxData, TxWb};
use crate::irq::RxIrq;
use crate::regs::*;
use crate::ring::DescRing;
use crossbeam_utils::CachePadded;
use rpmd_pmd::endian::{Le32, Le64};
use rpmd_pmd::function::Regs;
use rpmd_pmd::hdr::ETHER_HDR_LEN;
use rpmd_pmd::mbuf::{self, Slots};
use rpmd_pmd::port::stats::QueueStats;
use rpmd_pmd::port::{LiveFlag, RxQueue, RxStamp, TxQueue};
use rpmd_pmd::{Mbuf, Mempool, Pkts};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The longest frame a receive queue gathers (RLPML's 14 bits).
const MAX_FRAME: usize = 16383;

/// Set while the port's start stands (its queues enabled in the device).
pub(crate) type Running = Arc<CachePadded<AtomicBool>>;

/// What dropped queue handles held while the device could still use it:
/// freed by the port once its queues are disabled.
pub(crate) type Graveyard = Arc<Mutex<Vec<(Arc<DescRing>, Slots)>>>;

/// What the receive side hands the device and reads back, fixed at
/// start.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RxMode {
    /// Flag checksums the device verified.
    pub checksum: bool,
    /// The device strips VLAN tags into the descriptor.
    pub vlan_strip: bool,
    /// The descriptor carries the RSS hash.
    pub rss: bool,
}

/// A receive queue.
pub(crate) struct RxRing {
    pub running: Running,
    pub gate: LiveFlag,
    pub graveyard: Graveyard,
    /// The descriptor ring; shared only with the graveyard, which keeps
    /// it mapped after a drop while the device may still use it.
    pub ring: Arc<DescRing>,
    pub slots: Slots,
    pub regs: Arc<Regs>,
    /// This queue's tail register.
    pub rdt: u64,
    /// The next descriptor to look at (free-running).
    pub next: u32,
    pub mask: u32,
    pub pool: Mempool,
    /// Fresh buffers for the next burst's descriptors.
    pub refill: Pkts,
    /// The frame being gathered across descriptors (no EOP yet), and
    /// whether it is being dropped.
    pub partial: Option<Mbuf>,
    pub discarding: bool,
    pub mode: RxMode,
    pub stamp: RxStamp,
    pub stats: Arc<CachePadded<QueueStats>>,
    /// The queue's MSI-X vector, when the function has enough.
    pub irq: Option<RxIrq>,
}

impl RxRing {
    /// Posts a fresh buffer in every descriptor and gives the device all
    /// but one (the tail one behind the head): at start.
    pub(crate) fn fill(&mut self) -> Result<(), rpmd_pmd::Error> {
        let n = self.mask + 1;
        for i in 0..n {
            let m = self.pool.get()?;
            self.post(i, m);
        }
        self.next = 0;
        self.ring_tail();
        Ok(())
    }

    /// Buffer `m` into descriptor `i`.
    #[inline(always)]
    fn post(&mut self, i: u32, m: Mbuf) {
        let d = RxRead {
            pkt_addr: Le64::new(m.data_iova().raw()),
            hdr_addr: Le64::new(0),
        };
        self.ring.put(i, d);
        if let Some(old) = self.slots.give((i & self.mask) as usize, m) {
            drop(old);
        }
    }

    /// The tail one behind the next descriptor to look at: the device
    /// owns every other one.
    #[inline(always)]
    fn ring_tail(&self) {
        // The descriptors posted above reach memory before the device can
        // see the tail move (Linux: `wmb()` before `writel`); the partner
        // is the device's read of the descriptors it was given only after
        // reading the tail.
        fence(Ordering::Release);
        let _ = self
            .regs
            .write32(self.rdt, self.next.wrapping_sub(1) & self.mask);
    }

    /// How many descriptors from the next one on the device has completed
    /// (status DD), up to `limit`.
    #[inline(always)]
    fn completed(&self, limit: u32) -> u32 {
        let done = |k: u32| {
            let st = self
                .ring
                .dword(self.next.wrapping_add(k), RxWb::STATUS_DWORD);
            st & RXD_STAT_DD != 0
        };
        (0..limit).take_while(|&k| done(k)).count() as u32
    }

    /// Tops the refill burst up to `want` buffers (fewer if the pool is
    /// short: counted).
    #[inline]
    fn top_up(&mut self, want: usize) {
        let need = want.saturating_sub(self.refill.len());
        if need == 0 {
            return;
        }
        let mut n = need;
        while n > 0 && self.pool.get_bulk(&mut self.refill, n).is_err() {
            n /= 2;
        }
        if n < need {
            self.stats.nombuf.add(1);
        }
    }

    /// The offload flags of a completed frame's last descriptor.
    #[inline(always)]
    fn ol_flags(&self, wb: &RxWb, m: &mut Mbuf) -> u64 {
        let st = wb.status_error.get();
        let mut f = 0;
        if self.mode.checksum {
            if st & RXD_STAT_IPCS != 0 {
                f |= match st & RXDEXT_STATERR_IPE {
                    0 => mbuf::RX_IP_CKSUM_GOOD,
                    _ => mbuf::RX_IP_CKSUM_BAD,
                };
            }
            if st & RXD_STAT_L4CS != 0 {
                f |= match st & RXDEXT_STATERR_TCPE {
                    0 => mbuf::RX_L4_CKSUM_GOOD,
                    _ => mbuf::RX_L4_CKSUM_BAD,
                };
            }
        }
        if self.mode.vlan_strip && st & RXD_STAT_VP != 0 {
            m.set_vlan_tci(wb.vlan.get());
            f |= mbuf::RX_VLAN | mbuf::RX_VLAN_STRIPPED;
        }
        if self.mode.rss {
            m.set_rss_hash(wb.rss.get());
            f |= mbuf::RX_RSS_HASH;
        }
        f
    }

    /// One completed descriptor's buffer `m`: a whole frame (pushed to
    /// `out`), a piece of one (kept), or dropped. Returns the bytes of a
    /// frame delivered.
    #[inline(always)]
    fn complete(&mut self, wb: &RxWb, mut m: Mbuf, out: &mut Pkts) -> Option<usize> {
        let st = wb.status_error.get();
        let len = wb.length.get() as usize;
        let bad = st & RXDEXT_ERR_FRAME != 0 || !m.set_received(len, 0);
        let eop = st & RXD_STAT_EOP != 0;
        if bad || self.discarding {
            drop(m);
            drop(self.partial.take());
            self.discarding = !eop;
            if eop {
                self.stats.errors.add(1);
            }
            return None;
        }
        if let Some(mut head) = self.partial.take() {
            // A frame longer than any the device may receive (RLPML is 14
            // bits) is a device that never ends its frames: dropped.
            if head.pkt_len() + len > MAX_FRAME {
                drop(head);
                drop(m);
                self.discarding = !eop;
                self.stats.errors.add(1);
                return None;
            }
            if let Err(m) = head.chain(m) {
                drop(m);
                self.discarding = !eop;
                self.stats.errors.add(1);
                return None;
            }
            m = head;
        }
        if !eop {
            self.partial = Some(m);
            return None;
        }
        if m.pkt_len() < ETHER_HDR_LEN {
            // A runt the device has no business storing (RCTL.SBP is off).
            drop(m);
            self.stats.errors.add(1);
            self.stats.device_errors.add(1);
            return None;
        }
        let f = self.ol_flags(wb, &mut m);
        m.set_ol_flags(f);
        let bytes = m.pkt_len();
        // `out` has room: the burst takes no more than it has.
        let _ = out.push(m);
        Some(bytes)
    }
}

impl RxQueue for RxRing {
    fn rx_burst(&mut self, out: &mut Pkts, max: usize) -> usize {
        if !self.gate.load(Ordering::Relaxed) {
            return 0;
        }
        let room = max.min(out.capacity() - out.len());
        if room == 0 {
            return 0;
        }
        // Every descriptor taken gets a fresh buffer in its place.
        self.top_up(room);
        let ready = self.completed(room.min(self.refill.len()) as u32);
        if ready == 0 {
            return 0;
        }
        // The rest of each descriptor and its buffer were written before
        // its DD (the device writes the status last: QEMU's
        // `igb_pci_dma_write_rx_desc`); partner of that order.
        fence(Ordering::Acquire);
        let before = out.len();
        let mut bytes = 0;
        for k in 0..ready {
            let i = self.next.wrapping_add(k);
            let wb: RxWb = self.ring.get(i);
            let fresh = self.refill.pop().expect("topped up above");
            let done = self.slots.take((i & self.mask) as usize);
            self.post(i, fresh);
            let Some(m) = done else {
                self.stats.device_errors.add(1);
                continue;
            };
            if let Some(b) = self.complete(&wb, m, out) {
                bytes += b as u64;
            }
        }
        self.next = self.next.wrapping_add(ready);
        self.ring_tail();
        let got = out.len() - before;
        self.stats.packets.add(got as u64);
        self.stats.bytes.add(bytes);
        self.stamp.apply(out, got)
    }

    fn interrupt_fd(&self) -> Option<BorrowedFd<'_>> {
        self.irq.as_ref().map(|i| i.fd.as_fd())
    }

    fn set_interrupt(&mut self, enabled: bool) -> Result<(), rpmd_pmd::Error> {
        match &self.irq {
            Some(i) => i.arm(enabled),
            None => Ok(()),
        }
    }

    fn has_work(&self) -> bool {
        self.completed(1) > 0
    }

    fn rx_pending(&self) -> Option<usize> {
        Some(self.completed(self.mask + 1) as usize)
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        drop(self.partial.take());
        bury(&self.running, &self.graveyard, &self.ring, &mut self.slots);
    }
}

/// A transmit context's words: vlan_macip_lens, type_tucmd_mlhl,
/// mss_l4len_idx.
pub(crate) type Context = (u32, u32, u32);

/// The context the offloads of `m` need, or `None` without offloads.
#[inline(always)]
fn context_of(m: &Mbuf) -> Option<Context> {
    let ol = m.ol_flags();
    let vlan = ol & mbuf::TX_VLAN != 0;
    let tso = ol & mbuf::TX_TCP_SEG != 0;
    let csum = ol & (mbuf::TX_IP_CKSUM | mbuf::TX_L4_MASK) != 0 || tso;
    if !vlan && !csum {
        return None;
    }
    let (mut lens, mut mss_l4) = (0, 0);
    let mut tucmd = ADVTXD_DTYP_CTXT | ADVTXD_DCMD_DEXT;
    if vlan {
        lens |= (m.vlan_tci() as u32) << ADVTXD_VLAN_SHIFT;
    }
    if csum {
        let (l2, l3) = m.tx_header_lens();
        lens |= (l2 as u32) << ADVTXD_MACLEN_SHIFT | (l3 as u32 & 0x1ff);
        if ol & mbuf::TX_IP_CKSUM != 0 {
            tucmd |= ADVTXD_TUCMD_IPV4;
        }
        if tso || ol & mbuf::TX_L4_MASK == mbuf::TX_TCP_CKSUM {
            tucmd |= ADVTXD_TUCMD_L4T_TCP;
        }
    }
    if tso {
        let (l4, mss) = m.tso();
        mss_l4 = (mss as u32) << ADVTXD_MSS_SHIFT | (l4 as u32) << ADVTXD_L4LEN_SHIFT;
    }
    Some((lens, tucmd, mss_l4))
}

/// The data descriptors' command and olinfo words for `m`: the VLAN,
/// segmentation and checksum requests, and the payload length (without
/// the headers when segmenting).
#[inline(always)]
fn data_words(m: &Mbuf) -> (u32, u32) {
    let ol = m.ol_flags();
    let tso = ol & mbuf::TX_TCP_SEG != 0;
    let mut cmd = ADVTXD_DTYP_DATA | ADVTXD_DCMD_DEXT | ADVTXD_DCMD_IFCS;
    if ol & mbuf::TX_VLAN != 0 {
        cmd |= ADVTXD_DCMD_VLE;
    }
    let mut popts = 0;
    if ol & mbuf::TX_IP_CKSUM != 0 {
        popts |= ADVTXD_POPTS_IXSM;
    }
    if ol & mbuf::TX_L4_MASK != 0 || tso {
        popts |= ADVTXD_POPTS_TXSM;
    }
    let mut paylen = m.pkt_len();
    if tso {
        cmd |= ADVTXD_DCMD_TSE;
        let ((l2, l3), (l4, _)) = (m.tx_header_lens(), m.tso());
        paylen = paylen.saturating_sub(l2 + l3 + l4);
    }
    (cmd, (paylen as u32) << ADVTXD_PAYLEN_SHIFT | popts)
}

/// A transmit queue.
pub(crate) struct TxRing {
    pub running: Running,
    pub gate: LiveFlag,
    pub graveyard: Graveyard,
    /// The descriptor ring; shared only with the graveyard, which keeps
    /// it mapped after a drop while the device may still use it.
    pub ring: Arc<DescRing>,
    /// The mbuf of each frame, in the slot of its last descriptor.
    pub slots: Slots,
    /// For each frame's first descriptor, its last (free-running).
    pub last: Vec<u32>,
    /// The last descriptor of each frame of the burst being posted
    /// ([`MAX_BURST`](rpmd_pmd::port::MAX_BURST) entries, made once).
    pub lasts: Vec<u32>,
    pub regs: Arc<Regs>,
    /// This queue's tail register.
    pub tdt: u64,
    /// Next descriptor to write, oldest not reclaimed (free-running).
    pub prod: u32,
    pub clean: u32,
    pub mask: u32,
    /// The context last written, if any.
    pub context: Option<Context>,
    pub pool: Mempool,
    /// Sent mbufs on their way back.
    pub done: Pkts,
    pub stats: Arc<CachePadded<QueueStats>>,
}

impl TxRing {
    /// Reclaims every frame whose last descriptor the device marked done.
    #[inline]
    fn reclaim(&mut self) {
        let mut freed = 0;
        while self.clean != self.prod {
            let last = self.last[(self.clean & self.mask) as usize];
            if self.ring.dword(last, TxWb::STATUS_DWORD) & TXD_STAT_DD == 0 {
                break;
            }
            if let Some(m) = self.slots.take((last & self.mask) as usize) {
                if let Err(m) = self.done.push(m) {
                    self.pool.put_bulk(&mut self.done);
                    let _ = self.done.push(m);
                }
            }
            self.clean = last.wrapping_add(1);
            freed += 1;
        }
        if freed > 0 {
            self.stats.retired.add(freed);
            self.pool.put_bulk(&mut self.done);
        }
    }

    /// Descriptors `m` takes: its segments, and a context if its offloads
    /// differ from `ctx`'s.
    #[inline(always)]
    fn descs_of(m: &Mbuf, ctx: Option<Context>) -> (u32, Option<Context>) {
        let want = context_of(m);
        let new_ctx = want.filter(|w| Some(*w) != ctx);
        (m.nb_segs() as u32 + new_ctx.is_some() as u32, new_ctx)
    }

    /// Writes `m`'s descriptors from `prod`; returns its last.
    #[inline(always)]
    fn post(&mut self, m: &Mbuf, new_ctx: Option<Context>) -> u32 {
        let first = self.prod;
        let mut at = first;
        if let Some((lens, tucmd, mss_l4)) = new_ctx {
            self.ring.put(
                at,
                TxContext {
                    vlan_macip_lens: Le32::new(lens),
                    seqnum_seed: Le32::new(0),
                    type_tucmd_mlhl: Le32::new(tucmd),
                    mss_l4len_idx: Le32::new(mss_l4),
                },
            );
            self.context = new_ctx;
            at = at.wrapping_add(1);
        }
        let (cmd, olinfo) = data_words(m);
        let segs = m.nb_segs();
        for (k, (iova, len)) in m.segment_iovas().enumerate() {
            let end = if k + 1 == segs {
                ADVTXD_DCMD_EOP | ADVTXD_DCMD_RS
            } else {
                0
            };
            self.ring.put(
                at,
                TxData {
                    addr: Le64::new(iova.raw()),
                    cmd_type_len: Le32::new(cmd | end | len as u32),
                    olinfo_status: Le32::new(olinfo),
                },
            );
            at = at.wrapping_add(1);
        }
        let last = at.wrapping_sub(1);
        self.last[(first & self.mask) as usize] = last;
        self.prod = at;
        last
    }
}

impl TxQueue for TxRing {
    fn tx_burst(&mut self, pkts: &mut Pkts) -> usize {
        if !self.gate.load(Ordering::Relaxed) {
            return 0;
        }
        self.reclaim();
        // One descriptor stays empty: head == tail means an empty ring.
        let mut room = self.mask - self.prod.wrapping_sub(self.clean);
        let (mut sent, mut bytes) = (0, 0u64);
        while sent < pkts.len() {
            let m = &pkts[sent];
            let (need, new_ctx) = Self::descs_of(m, self.context);
            if need > room {
                break;
            }
            room -= need;
            bytes += m.pkt_len() as u64;
            let last = self.post(m, new_ctx);
            self.lasts[sent] = last;
            sent += 1;
        }
        if sent == 0 {
            if !pkts.is_empty() {
                self.stats.full.add(1);
            }
            return 0;
        }
        let (mask, lasts) = (self.mask, &self.lasts);
        self.slots
            .give_each(pkts, sent, |k| (lasts[k] & mask) as usize);
        // Every descriptor is in memory before the tail moves (Linux:
        // `wmb()` before `writel`); partner: the device reads descriptors
        // only up to the tail it read.
        fence(Ordering::Release);
        let _ = self.regs.write32(self.tdt, self.prod & self.mask);
        self.stats.packets.add(sent as u64);
        self.stats.bytes.add(bytes);
        sent
    }

    fn in_flight(&mut self) -> usize {
        self.reclaim();
        self.prod.wrapping_sub(self.clean) as usize
    }
}

impl Drop for TxRing {
    fn drop(&mut self) {
        bury(&self.running, &self.graveyard, &self.ring, &mut self.slots);
    }
}

/// A dropped handle's ring and mbufs: while its port runs, the device may
/// still use them, so they wait in the port's graveyard until its queues
/// are disabled; otherwise they go now (the mbufs home).
fn bury(running: &Running, graveyard: &Graveyard, ring: &Arc<DescRing>, slots: &mut Slots) {
    if running.load(Ordering::Relaxed) {
        let held = std::mem::replace(slots, Slots::new(0));
        graveyard
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((ring.clone(), held));
    }
}
