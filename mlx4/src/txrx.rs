//! The data path (digest §3): receive and send rings over a QP and its
//! CQ, as rpmd queue handles.
//!
//! Receive: every WQE is one scatter entry (a whole mbuf's data room,
//! with the physical MR's lkey); the whole ring is posted at start and the
//! doorbell record (BE `prod & 0xffff`) rewritten after each burst's
//! refill. CQEs come back in WQE order (an RQ without SRQ is in order);
//! each gives the frame's length and its checksum flags.
//!
//! Send: a WQE is the control segment and one data segment per mbuf
//! segment (so one or more 64-byte TXBBs); its owner bit is written last,
//! after the segments (a release fence between), and the doorbell, BE
//! `qpn << 8` in the UAR page, once per burst. Only the burst's last WQE
//! asks for a CQE; its TXBB counter frees every WQE up to it. A freed
//! WQE's TXBBs are stamped with the owner bit they had, so a stale one can
//! never look posted to the device's prefetcher.
use crate::cq::{Completion, CqPoll};
use crate::irq::RxIrq;
use crate::prm::layout::DataSeg;
use crate::prm::mem::{DevBuf, RingMem, Wire};
use crate::prm::{cq as c, qp as q, uar, wire32, wqe};
use crossbeam_utils::CachePadded;
use rpmd_pmd::endian::{Be32, Be64};
use rpmd_pmd::function::Regs;
use rpmd_pmd::hdr::ETHER_HDR_LEN;
use rpmd_pmd::mbuf::Slots;
use rpmd_pmd::mbuf::{RX_L4_CKSUM_GOOD, TX_IP_CKSUM, TX_L4_MASK};
use rpmd_pmd::port::stats::QueueStats;
use rpmd_pmd::port::{RxQueue, RxStamp, TxQueue};
use rpmd_pmd::{Mbuf, Mempool, Pkts};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Set while the port's last start stands.
pub(crate) type Live = Arc<CachePadded<AtomicBool>>;

/// Slots of queue handles dropped while the device still held their
/// mbufs: freed by the port once their QPs are reset.
pub(crate) type Graveyard = Arc<Mutex<Vec<Slots>>>;

/// A receive ring.
pub(crate) struct RxRing {
    /// Its interrupt, when the card has MSI-X vectors for it.
    pub irq: Option<RxIrq>,
    /// The port's start still runs (its QPs not reset): what a dropped
    /// handle held must wait for the reset.
    pub live: Live,
    /// This queue is started (the layer's per-queue flag).
    pub gate: Live,
    /// The receive WQEs (one scatter entry each) in the QP's buffer.
    pub wqes: RingMem<{ wqe::SEG }>,
    pub db: Arc<DevBuf>,
    pub n: u32,
    pub cq: CqPoll,
    pub slots: Slots,
    pub pool: Mempool,
    pub lkey: u32,
    /// WQEs completed and posted (free-running).
    pub cons: u32,
    pub prod: u32,
    pub stamp: RxStamp,
    pub stats: Arc<CachePadded<QueueStats>>,
    pub graveyard: Graveyard,
    /// Buffers to post: fresh from the pool, or taken back from a frame
    /// that was dropped.
    pub refill: Pkts,
    /// Whether an RSS QP feeds this ring (its CQEs carry the hash).
    pub rss: bool,
}

impl RxRing {
    /// Posts `m` in slot `i`: one scatter entry over its data room.
    fn post(&mut self, i: u32, m: Mbuf) {
        let d = self.seg(&m);
        self.wqes.put::<DataSeg, 0>(i, d);
        if let Some(old) = self.slots.give(i as usize, m) {
            drop(old);
        }
    }

    /// Fills every slot and rings the doorbell record: at start.
    pub(crate) fn fill(&mut self) -> Result<(), rpmd_pmd::Error> {
        for i in 0..self.n {
            let m = self.pool.get()?;
            self.post(i, m);
        }
        self.prod = self.cons.wrapping_add(self.n);
        self.ring();
        Ok(())
    }

    /// Posts buffers in the slots the last completions freed (fresh ones
    /// in bulk from the pool), then rings the doorbell record.
    #[inline]
    fn replenish(&mut self) {
        let free = self.n - self.prod.wrapping_sub(self.cons);
        // As many as the free slots and the refill burst's room allow;
        // a pool short of them gives fewer, never none while it has any
        // (the free slots of a ring starved for a while exceed a burst).
        let room = self.refill.capacity() - self.refill.len();
        let want = (free as usize).saturating_sub(self.refill.len()).min(room);
        let mut n = want;
        while n > 0 && self.pool.get_bulk(&mut self.refill, n).is_err() {
            n /= 2;
        }
        if n < want {
            self.stats.nombuf.add(1);
        }
        let k = (free as usize).min(self.refill.len());
        if k == 0 {
            return;
        }
        for (j, m) in self.refill[..k].iter().enumerate() {
            let d = self.seg(m);
            self.wqes
                .put::<DataSeg, 0>(self.prod.wrapping_add(j as u32), d);
        }
        let at = (self.prod & (self.n - 1)) as usize;
        let posted = self.slots.give_run(at, k, &mut self.refill);
        self.prod = self.prod.wrapping_add(posted as u32);
        self.ring();
    }

    /// The scatter entry of `m`: its whole data room.
    #[inline(always)]
    fn seg(&self, m: &Mbuf) -> DataSeg {
        let mut d = DataSeg::zeroed();
        d.byte_count = Be32::new(m.tailroom() as u32);
        d.lkey = Be32::new(self.lkey);
        d.addr = Be64::new(m.data_iova().raw());
        d
    }

    /// The doorbell record, after the WQEs it covers.
    #[inline]
    fn ring(&self) {
        // The scatter entries above reach memory before the device can
        // see the new producer count (Linux: `wmb()`); its partner is the
        // device's read of the record before it reads a WQE (the model:
        // `deliver`).
        fence(Ordering::Release);
        self.db.store_be32(0, self.prod & 0xffff);
    }

    /// The checksum flags a CQE's status gives.
    #[inline]
    fn ol_flags(cqe: &Completion) -> u64 {
        let st = cqe.status;
        let l4 = st & (c::ST_TCP | c::ST_UDP) != 0 && cqe.checksum == 0xffff;
        if l4 && st & c::ST_IPOK != 0 {
            RX_L4_CKSUM_GOOD | rpmd_pmd::mbuf::RX_IP_CKSUM_GOOD
        } else if st & c::ST_IPOK != 0 {
            rpmd_pmd::mbuf::RX_IP_CKSUM_GOOD
        } else {
            0
        }
    }
}

impl RxQueue for RxRing {
    fn rx_burst(&mut self, out: &mut Pkts, max: usize) -> usize {
        if !self.gate.load(Ordering::Relaxed) {
            return 0;
        }
        let want = max.min(out.capacity() - out.len());
        let (mut got, mut seen, mut bytes) = (0, 0u32, 0u64);
        while got < want {
            let Some(cqe) = self.cq.next() else { break };
            seen += 1;
            let slot = self.cons & (self.n - 1);
            self.cons = self.cons.wrapping_add(1);
            if cqe.wqe_index as u32 & (self.n - 1) != slot {
                self.stats.device_errors.add(1);
            }
            let Some(mut m) = self.slots.take(slot as usize) else {
                self.stats.device_errors.add(1);
                self.stats.errors.add(1);
                continue;
            };
            let ok = cqe.opcode != c::OP_ERROR;
            let len = cqe.byte_cnt as usize;
            // A runt or a length past the buffer is the device's error.
            let fits = len >= ETHER_HDR_LEN && m.set_received(len, 0);
            if ok && fits {
                if self.rss {
                    m.set_rss_hash(self.cq.last_rss_hash());
                    m.set_ol_flags(Self::ol_flags(&cqe) | rpmd_pmd::mbuf::RX_RSS_HASH);
                } else {
                    m.set_ol_flags(Self::ol_flags(&cqe));
                }
                bytes += len as u64;
                let _ = out.push(m);
                got += 1;
            } else {
                // Dropped: the same buffer goes back to the device.
                self.stats.errors.add(1);
                if ok {
                    self.stats.device_errors.add(1);
                }
                m.set_data_len(0);
                if let Err(m) = self.refill.push(m) {
                    drop(m);
                }
            }
        }
        if seen > 0 {
            self.cq.commit();
        }
        if self.prod.wrapping_sub(self.cons) < self.n {
            self.replenish();
        }
        self.stats.packets.add(got as u64);
        self.stats.bytes.add(bytes);
        self.stamp.apply(out, got)
    }

    /// A completion waits (the owner bit of the next CQE); a stopped
    /// queue has none. (A ring an empty pool left without buffers gets no
    /// CQE and no interrupt: the run loop's longest sleep bounds the
    /// wait for its refill.)
    fn has_work(&self) -> bool {
        self.gate.load(Ordering::Relaxed) && self.cq.ready()
    }

    fn interrupt_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.irq.as_ref().map(RxIrq::fd)
    }

    /// Arms the queue's completion event and EQ (`true`), or consumes
    /// the events that came and leaves the EQ unarmed.
    fn set_interrupt(&mut self, enabled: bool) -> Result<(), rpmd_pmd::Error> {
        let ci = self.cq.ci();
        match self.irq.as_mut() {
            Some(irq) if enabled => irq.arm(ci),
            Some(irq) => irq.disarm(),
            None => Ok(()),
        }
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        bury(&self.live, &self.graveyard, &mut self.slots);
    }
}

/// TXBBs the WQE of `m` takes (more than any ring when it has more
/// segments than a WQE holds).
#[inline(always)]
fn txbbs_of(m: &Mbuf) -> u32 {
    let segs = m.nb_segs();
    if segs + 1 > wqe::MAX_DS as usize {
        return u32::MAX;
    }
    ((1 + segs as u32) * wqe::SEG as u32).div_ceil(q::TXBB as u32)
}

/// A send ring.
pub(crate) struct TxRing {
    /// As [`RxRing::live`].
    pub live: Live,
    /// As [`RxRing::gate`].
    pub gate: Live,
    pub qpn: u32,
    /// The send queue's TXBBs in the QP's buffer.
    pub sq: RingMem<{ q::TXBB }>,
    /// TXBBs (a power of two).
    pub txbbs: u32,
    pub cq: CqPoll,
    pub uar: Regs,
    pub lkey: u32,
    /// TXBB counters: next to post, oldest not completed.
    pub prod: u32,
    pub cons: u32,
    /// WQE counters, the same two (a WQE takes one TXBB or more).
    pub wqe_prod: u32,
    pub wqe_cons: u32,
    /// The mbuf of each WQE and its size in TXBBs, by WQE counter
    /// (`txbbs` slots: never fewer than WQEs).
    pub slots: Slots,
    pub sizes: Vec<u8>,
    pub stats: Arc<CachePadded<QueueStats>>,
    pub graveyard: Graveyard,
    /// Where sent mbufs go back in bulk (any pool's mbufs are welcome).
    pub pool: Mempool,
    /// Sent mbufs on their way back.
    pub done: Pkts,
}

impl TxRing {
    /// Frees every WQE up to and including the one the last CQE names
    /// (completions come in WQE order, so the last covers the others).
    fn reap(&mut self) {
        let mut last = None;
        while let Some(cqe) = self.cq.next() {
            // An error completion (a flush, a bad segment) names one WQE
            // that did not go out.
            if cqe.opcode == c::OP_ERROR {
                self.stats.errors.add(1);
            }
            last = Some(cqe.wqe_index);
        }
        let Some(last) = last else { return };
        self.cq.commit();
        self.free_through(last);
        if !self.done.is_empty() {
            self.pool.put_bulk(&mut self.done);
        }
    }

    /// Frees WQEs from the oldest to the one whose first TXBB counter
    /// ends in `last` (or every posted one, if none does): their mbufs
    /// back, their TXBBs stamped with the owner bit they had.
    #[inline]
    fn free_through(&mut self, last: u16) {
        let (mask, from) = (self.txbbs - 1, self.cons);
        let (mut cons, mut wqe) = (from, self.wqe_cons);
        while cons != self.prod {
            let first = cons;
            let size = self
                .sizes
                .get((wqe & mask) as usize)
                .map_or(1, |&s| s.max(1));
            cons = first.wrapping_add(size as u32);
            wqe = wqe.wrapping_add(1);
            if first as u16 == last {
                break;
            }
        }
        self.cons = cons;
        let txbbs = self.txbbs;
        self.sq
            .put_each::<u32, 0>(from, cons.wrapping_sub(from), |t| {
                let owner = if t & txbbs != 0 { wqe::OWNER } else { 0 };
                (wqe::STAMP | owner).to_be()
            });
        let freed = wqe.wrapping_sub(self.wqe_cons) as usize;
        let mut done = 0;
        while done < freed {
            let at = (self.wqe_cons as usize).wrapping_add(done);
            done += self.slots.take_run(at, freed - done, &mut self.done);
            if self.done.is_full() {
                self.pool.put_bulk(&mut self.done);
            }
        }
        self.wqe_cons = wqe;
    }

    /// Writes the WQE for `m` at the producer counter; its TXBBs.
    #[inline]
    fn post(&mut self, m: &Mbuf, cqe: bool) -> u32 {
        let base = self.prod;
        let ds = if m.nb_segs() == 1 {
            let d = self.seg(m.data_iova().raw(), m.data_len());
            self.sq.put::<DataSeg, { wqe::SEG }>(base, d);
            2
        } else {
            // Segment k sits 16 (k + 1) bytes into the WQE, which may run
            // past the ring's end onto its start: one TXBB at a time.
            for (k, (iova, len)) in m.segment_iovas().enumerate() {
                let pos = (k + 1) * wqe::SEG;
                let txbb = base.wrapping_add((pos / q::TXBB) as u32);
                let d = self.seg(iova.raw(), len);
                match pos % q::TXBB {
                    0 => self.sq.put::<DataSeg, 0>(txbb, d),
                    16 => self.sq.put::<DataSeg, 16>(txbb, d),
                    32 => self.sq.put::<DataSeg, 32>(txbb, d),
                    _ => self.sq.put::<DataSeg, 48>(txbb, d),
                }
            }
            1 + m.nb_segs() as u32
        };
        let size = (ds * wqe::SEG as u32).div_ceil(q::TXBB as u32);
        // Control dwords 1-3 (no VLAN, the size; the CQE request; no
        // immediate), then the owner dword once every segment is in
        // memory (Linux: `dma_wmb()`; the device reads the WQE after
        // seeing the owner bit).
        let mut flags = wqe::SRCRB_SOLICITED | if cqe { wqe::SRCRB_CQ_UPDATE } else { 0 };
        // Checksums the device fills (it computes them whole, whatever
        // the field holds).
        let ol = m.ol_flags();
        if ol & (TX_IP_CKSUM | TX_L4_MASK) != 0 {
            if ol & TX_IP_CKSUM != 0 {
                flags |= wqe::SRCRB_IP_CSUM;
            }
            if ol & TX_L4_MASK != 0 {
                flags |= wqe::SRCRB_L4_CSUM;
            }
        }
        self.sq.put::<u32, 4>(base, ds.to_be());
        self.sq.put::<u32, 8>(base, flags.to_be());
        self.sq.put::<u32, 12>(base, 0);
        let owner = if base & self.txbbs != 0 {
            wqe::OWNER
        } else {
            0
        };
        // Partner: the device reads the owner dword, then the rest of the
        // WQE (the model: `tx_one`, then `gather`).
        fence(Ordering::Release);
        self.sq.put::<u32, 0>(base, (wqe::OP_SEND | owner).to_be());
        if let Some(s) = self
            .sizes
            .get_mut((self.wqe_prod & (self.txbbs - 1)) as usize)
        {
            *s = size as u8;
        }
        self.prod = base.wrapping_add(size);
        self.wqe_prod = self.wqe_prod.wrapping_add(1);
        size
    }

    /// One data segment.
    #[inline(always)]
    fn seg(&self, iova: u64, len: usize) -> DataSeg {
        let mut d = DataSeg::zeroed();
        d.byte_count = Be32::new(len as u32);
        d.lkey = Be32::new(self.lkey);
        d.addr = Be64::new(iova);
        d
    }
}

impl TxQueue for TxRing {
    fn tx_burst(&mut self, pkts: &mut Pkts) -> usize {
        if !self.gate.load(Ordering::Relaxed) {
            return 0;
        }
        self.reap();
        // Post while the next fits; the last posted (the burst's end, or
        // the one before a WQE that does not fit) asks for the CQE.
        let limit = self.txbbs - wqe::SQ_SPARE.min(self.txbbs / 2);
        let mut room = limit.saturating_sub(self.prod.wrapping_sub(self.cons));
        let mut fit = 0;
        for m in pkts.iter() {
            let t = txbbs_of(m);
            if t > room {
                break;
            }
            room -= t;
            fit += 1;
        }
        if fit == 0 {
            if !pkts.is_empty() {
                self.stats.full.add(1);
            }
            return 0;
        }
        let first_wqe = self.wqe_prod;
        let mut bytes = 0u64;
        for (k, m) in pkts[..fit].iter().enumerate() {
            bytes += m.pkt_len() as u64;
            self.post(m, k + 1 == fit);
        }
        let at = (first_wqe & (self.txbbs - 1)) as usize;
        let sent = self.slots.give_run(at, fit, pkts);
        // A live ring has a slot for every TXBB, so each posted WQE's mbuf
        // went to the device (none stays with the caller).
        debug_assert_eq!(sent, fit);
        // Every WQE is in memory before the doorbell (Linux: `wmb()`);
        // the device walks the send queue only once it sees the doorbell
        // (the model: `send_doorbell`).
        fence(Ordering::SeqCst);
        let bell = uar::RESERVED * uar::PAGE + uar::SEND;
        if self.uar.write32(bell, wire32(self.qpn << 8)).is_err() {
            self.stats.device_errors.add(1);
        }
        self.stats.packets.add(sent as u64);
        self.stats.bytes.add(bytes);
        sent
    }

    fn in_flight(&mut self) -> usize {
        self.reap();
        self.prod.wrapping_sub(self.cons) as usize
    }
}

impl Drop for TxRing {
    fn drop(&mut self) {
        bury(&self.live, &self.graveyard, &mut self.slots);
    }
}

/// A dropped handle's mbufs: if its port still runs, the device may still
/// use them, so they wait in the port's graveyard until its QPs are
/// reset; otherwise they go home now.
fn bury(live: &Live, graveyard: &Graveyard, slots: &mut Slots) {
    if live.load(Ordering::Relaxed) {
        let held = std::mem::replace(slots, Slots::new(0));
        graveyard
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(held);
    }
}
