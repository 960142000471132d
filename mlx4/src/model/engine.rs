//! The model's BAR2 (UAR pages) and data path (digest §3, §4 items 7–8):
//! the TX engine, run on each send doorbell, walks the send queue by owner
//! bit and gathers each frame (data segments through the MR, inline
//! chunks); the RX engine steers a frame to its QPs and scatters it into
//! the next receive WQE the doorbell record allows. Frames sent go over
//! the wire to the other port, or to a host-side sink; a host-side source
//! injects frames.
use super::qp::QpState;
use super::{lock, Mlx4Model, State};
use crate::prm::layout::{Cqe, CtrlSeg, DataSeg};
use crate::prm::mem::Wire;
use crate::prm::{cq as c, mpt, qp as p, uar, unwire32, wqe};
use rpmd_pmd::endian::{Be16, Be32};
use rpmd_pmd::function::RegisterSpace;
use std::sync::Arc;

/// Frames the host-side sink keeps per port before dropping the oldest.
const SINK_FRAMES: usize = 1 << 16;

/// What became of a frame that arrived on a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxOutcome {
    /// Written into this many QPs' receive queues.
    Delivered(usize),
    /// The port's link is down.
    LinkDown,
    /// No group, promiscuous list or catch-all claims it.
    NotSteered,
    /// Its QPs had no receive WQE posted (or were not ready).
    NoBuffer,
    /// Shorter than a header or over the port's MTU.
    BadLength,
}

/// The model's data-path counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModelStats {
    /// Frames sent by the TX engine.
    pub tx_frames: u64,
    /// Frames written into receive queues.
    pub rx_frames: u64,
    /// Frames no QP claimed.
    pub rx_not_steered: u64,
    /// Frames dropped for want of a receive WQE.
    pub rx_no_wqe: u64,
    /// Frames dropped on a port whose link is down, or of a bad length.
    pub rx_dropped: u64,
    /// Error CQEs written.
    pub error_cqes: u64,
    /// CQ overruns.
    pub cq_overruns: u64,
}

/// BAR2 as the driver maps it.
pub(super) struct Bar2(pub Arc<Mlx4Model>);

impl RegisterSpace for Bar2 {
    fn read(&self, _off: u64, _width: u8) -> u64 {
        0
    }

    fn write(&self, off: u64, width: u8, v: u64) {
        match self.0.doorbells.get() {
            Some(d) => d.ring(off, width, v),
            None => self.perform(off, width, v),
        }
    }
}

impl Bar2 {
    /// What a BAR2 write starts, done now (timed: the model's work, so a
    /// benchmark can take it out of the driver's).
    pub(super) fn perform(&self, off: u64, width: u8, v: u64) {
        let t0 = std::time::Instant::now();
        self.write_locked(off, width, v);
        let ns = t0.elapsed().as_nanos() as u64;
        self.0
            .engine_ns
            .fetch_add(ns, std::sync::atomic::Ordering::Relaxed);
    }

    fn write_locked(&self, off: u64, width: u8, v: u64) {
        let mut s = lock(&self.0.state);
        // A failed card's engines move nothing.
        if s.catas != 0 {
            return;
        }
        let (page, at) = (off / uar::PAGE, off % uar::PAGE);
        match (at, width) {
            (uar::SEND, 4) => self.0.send_doorbell(&mut s, page, unwire32(v as u32)),
            // CQ arming (a polling driver never arms; §4 MAY): only of a
            // CQ that exists, on an initialised HCA.
            (uar::CQ_ARM, 4 | 8) => {
                let d0 = unwire32(v as u32);
                let cqn = d0 & 0xff_ffff;
                let ready = s.icm.hca.is_some();
                match s.obj.cqs.get_mut(&cqn) {
                    Some(cq) if ready => {
                        let cmd = d0 & c::DB_CMD_MASK;
                        cq.armed |= cmd == c::DB_REQ_NOT || cmd == c::DB_REQ_NOT_SOL;
                    }
                    _ => Mlx4Model::violation(
                        &mut s,
                        format!("CQ arm doorbell of CQ {cqn:#x}, which does not exist"),
                    ),
                }
                // The second dword is the driver's consumer index: CQEs
                // already written past it raise the event at once (the
                // device may have completed work before the arming came).
                if width == 8 {
                    self.0
                        .arm_with_pending(&mut s, cqn, unwire32((v >> 32) as u32));
                }
            }
            (0x24, 4) if s.icm.hca.is_none() => {
                Mlx4Model::violation(&mut s, "CQ arm doorbell before INIT_HCA".into())
            }
            (0x24, 4) => {}
            (0x800..0x820, 4) if at % 8 == 0 => {
                let eqn = (page * 4 + (at - uar::EQ) / 8) as u32;
                let d = unwire32(v as u32);
                match s.obj.eqs.get_mut(&eqn) {
                    Some(eq) => {
                        eq.cons = d & 0xff_ffff;
                        // Armed again: an event already waiting raises
                        // the vector at once.
                        if d & uar::EQ_ARM != 0 {
                            eq.armed = true;
                            if eq.prod.wrapping_sub(eq.cons) & 0xff_ffff != 0 {
                                Mlx4Model::raise(&mut s, eqn);
                            }
                        }
                    }
                    None => Mlx4Model::violation(
                        &mut s,
                        format!("EQ doorbell of EQ {eqn}, which does not exist"),
                    ),
                }
            }
            _ => Mlx4Model::violation(&mut s, format!("BAR2 write {off:#x}/{width} = {v:#x}")),
        }
    }
}

/// An error CQE for `qpn`'s WQE `index` with `syndrome`.
fn error_cqe(qpn: u32, index: u32, syndrome: u8, send: bool) -> Cqe {
    let mut e = Cqe::zeroed();
    e.vlan_my_qpn = Be32::new(qpn);
    e.wqe_index = Be16::new(index as u16);
    e.checksum = Be16::new(syndrome as u16);
    e.owner_sr_opcode = c::OP_ERROR | if send { c::IS_SEND } else { 0 };
    e
}

impl Mlx4Model {
    /// A send doorbell (`qpn << 8`) in UAR page `page`.
    fn send_doorbell(&self, s: &mut State, page: u64, v: u32) {
        let qpn = v >> 8;
        let Some(q) = s.qps.get(&qpn).copied() else {
            return Self::violation(
                s,
                format!("send doorbell {v:#x} for QP {qpn:#x}, which is in RST"),
            );
        };
        if q.ctx.usr_page.get() as u64 != page {
            Self::violation(
                s,
                format!(
                    "send doorbell of QP {qpn:#x} in UAR page {page}, not its {}",
                    q.ctx.usr_page.get()
                ),
            );
        }
        if q.state != p::RTS && q.state != p::ERR {
            return Self::violation(
                s,
                format!("send doorbell for QP {qpn:#x} in state {}", q.state),
            );
        }
        // At most a ring's worth per doorbell.
        for _ in 0..q.sq_txbbs {
            if !self.tx_one(s, qpn) {
                break;
            }
        }
    }

    /// Reads `out.len()` bytes at byte `pos` of the WQE at TXBB counter
    /// `at` (wrapping at the ring's end).
    fn sq_read(&self, s: &State, q: &QpState, at: u32, pos: u64, out: &mut [u8]) -> bool {
        let ring = q.sq_txbbs as u64 * p::TXBB as u64;
        let mut done = 0;
        while done < out.len() {
            let abs = ((at % q.sq_txbbs) as u64 * p::TXBB as u64 + pos + done as u64) % ring;
            let n = (p::TXBB as u64 - abs % p::TXBB as u64).min((out.len() - done) as u64) as usize;
            let Some(a) = self.qbuf_addr(s, q.buf, q.sq_off + abs, n as u64) else {
                return false;
            };
            if !self.iommu.read(a, &mut out[done..done + n]) {
                return false;
            }
            done += n;
        }
        true
    }

    /// Executes the WQE at the QP's send counter, if the driver posted it;
    /// whether to go on.
    fn tx_one(&self, s: &mut State, qpn: u32) -> bool {
        let Some(q) = s.qps.get(&qpn).copied() else {
            return false;
        };
        let at = q.sq_cons;
        let mut raw = [0u8; 16];
        if !self.sq_read(s, &q, at, 0, &mut raw) {
            Self::violation(s, format!("QP {qpn:#x}: send queue TXBB {at} unreachable"));
            return false;
        }
        let Some(ctrl) = CtrlSeg::from_bytes(&raw) else {
            return false;
        };
        let oo = ctrl.owner_opcode.get();
        if (oo & wqe::OWNER != 0) != (at & q.sq_txbbs != 0) {
            return false;
        }
        let ds = ctrl.fence_size & 0x3f;
        let txbbs = (ds as u32 * wqe::SEG as u32)
            .div_ceil(p::TXBB as u32)
            .max(1);
        let opcode = oo & 0x1f;
        let srcrb = ctrl.srcrb_flags.get();
        self.set_sq_cons(s, qpn, at.wrapping_add(txbbs));
        if q.state == p::ERR {
            return self.complete_error(s, &q, qpn, at, c::SYN_FLUSHED);
        }
        if ds == 0 || ds > wqe::MAX_DS || (opcode != wqe::OP_SEND && opcode != wqe::OP_NOP) {
            Self::violation(
                s,
                format!("QP {qpn:#x}: WQE {at}: opcode {opcode:#x}, {ds} segments"),
            );
            return self.complete_error(s, &q, qpn, at, c::SYN_LOCAL_QP_OP);
        }
        let frame = match self.gather(s, &q, at, ds) {
            Ok(f) => f,
            Err(why) => {
                Self::violation(s, format!("QP {qpn:#x}: WQE {at}: {why}"));
                return self.complete_error(s, &q, qpn, at, c::SYN_LOCAL_PROT);
            }
        };
        if srcrb & wqe::SRCRB_CQ_UPDATE == wqe::SRCRB_CQ_UPDATE {
            let mut e = Cqe::zeroed();
            e.vlan_my_qpn = Be32::new(qpn);
            e.wqe_index = Be16::new(at as u16);
            e.byte_cnt = Be32::new(frame.len() as u32);
            e.owner_sr_opcode = wqe::OP_SEND as u8 | c::IS_SEND;
            self.write_cqe(s, q.ctx.cqn_send.get(), &mut e);
        }
        if opcode == wqe::OP_SEND {
            let mut frame = frame;
            super::csum::fill(&mut frame, srcrb);
            s.stats.tx_frames += 1;
            self.transmit(s, q.port, frame);
        }
        true
    }

    fn set_sq_cons(&self, s: &mut State, qpn: u32, v: u32) {
        if let Some(q) = s.qps.get_mut(&qpn) {
            q.sq_cons = v;
        }
    }

    /// An error completion; the QP goes to ERR (flushes stay there).
    fn complete_error(&self, s: &mut State, q: &QpState, qpn: u32, at: u32, syndrome: u8) -> bool {
        let mut e = error_cqe(qpn, at, syndrome, true);
        s.stats.error_cqes += 1;
        self.write_cqe(s, q.ctx.cqn_send.get(), &mut e);
        if let Some(q) = s.qps.get_mut(&qpn) {
            q.state = p::ERR;
        }
        syndrome == c::SYN_FLUSHED
    }

    /// The frame a send WQE of `ds` segments describes.
    fn gather(&self, s: &State, q: &QpState, at: u32, ds: u8) -> Result<Vec<u8>, String> {
        let mut frame = Vec::with_capacity(2048);
        let end = ds as u64 * wqe::SEG as u64;
        let mut pos = wqe::SEG as u64;
        while pos < end {
            let mut raw = [0u8; 16];
            if !self.sq_read(s, q, at, pos, &mut raw) {
                return Err(format!("segment at {pos} unreachable"));
            }
            let Some(d) = DataSeg::from_bytes(&raw) else {
                break;
            };
            let bc = d.byte_count.get();
            if bc & wqe::INLINE != 0 {
                let len = (bc & !wqe::INLINE) as usize;
                if pos + 4 + len as u64 > end {
                    return Err(format!("inline chunk of {len} bytes past the WQE's {end}"));
                }
                let from = frame.len();
                frame.resize(from + len, 0);
                if !self.sq_read(s, q, at, pos + 4, &mut frame[from..]) {
                    return Err("inline bytes unreachable".into());
                }
                pos = (pos + 4 + len as u64).next_multiple_of(wqe::SEG as u64);
                continue;
            }
            pos += wqe::SEG as u64;
            let (lkey, addr, len) = (d.lkey.get(), d.addr.get(), bc as usize);
            if len == 0 || lkey == mpt::INVALID_LKEY {
                continue;
            }
            if !Self::mr_covers(s, lkey, addr, len as u64, false) {
                return Err(format!(
                    "data segment {addr:#x}+{len} with lkey {lkey:#x}: no MR covers it"
                ));
            }
            let from = frame.len();
            frame.resize(from + len, 0);
            if !self.iommu.read(addr, &mut frame[from..]) {
                return Err(format!(
                    "data segment {addr:#x}+{len}: not mapped for the device"
                ));
            }
        }
        Ok(frame)
    }

    /// A frame leaves `port`: over the wire to the other port, or into
    /// the host-side sink.
    fn transmit(&self, s: &mut State, port: u8, frame: Vec<u8>) {
        if let Some(ps) = s.ports.get_mut(port.wrapping_sub(1) as usize) {
            ps.counters.sent(&frame);
        }
        if self.opts.wire {
            let other = if port == 1 { 2 } else { 1 };
            self.receive(s, other, &frame);
            return;
        }
        let sink = &mut s.sent[port as usize - 1];
        if sink.len() >= SINK_FRAMES {
            sink.pop_front();
        }
        sink.push_back(frame);
    }

    /// A frame arrives on `port` (1-based).
    pub(super) fn receive(&self, s: &mut State, port: u8, frame: &[u8]) -> RxOutcome {
        if s.catas != 0 {
            return RxOutcome::LinkDown;
        }
        let Some(ps) = s.ports.get_mut(port.wrapping_sub(1) as usize) else {
            return RxOutcome::LinkDown;
        };
        if !ps.up {
            s.stats.rx_dropped += 1;
            return RxOutcome::LinkDown;
        }
        ps.counters.received(frame);
        // The frame MTU counts the FCS, which a frame from the host lacks.
        if frame.len() < 14 || frame.len() + 4 > ps.frame_mtu as usize {
            ps.counters.rx_bad_length += 1;
            s.stats.rx_dropped += 1;
            return RxOutcome::BadLength;
        }
        let ps = &s.ports[port as usize - 1];
        let dmac: [u8; 6] = frame[..6].try_into().unwrap_or_default();
        let mac = dmac.iter().fold(0u64, |v, &b| v << 8 | b as u64);
        if dmac[0] & 1 == 1 && ps.mcast_filter.as_ref().is_some_and(|f| !f.contains(&mac)) {
            s.stats.rx_not_steered += 1;
            return RxOutcome::NotSteered;
        }
        let qpns = self.steer(s, port, dmac);
        if qpns.is_empty() {
            s.stats.rx_not_steered += 1;
            return RxOutcome::NotSteered;
        }
        let n = qpns
            .iter()
            .filter(|&&q| {
                // An indirection QP hands the frame to the QP its hash
                // picks.
                let rss = s.qps.get(&q).and_then(|qp| qp.rss);
                let (q, hash) = rss.map_or((q, 0), |r| r.pick(frame));
                self.deliver(s, q, frame, hash)
            })
            .count();
        if n == 0 {
            s.stats.rx_no_wqe += 1;
            s.ports[port as usize - 1].counters.rx_overflow += 1;
            return RxOutcome::NoBuffer;
        }
        s.stats.rx_frames += 1;
        RxOutcome::Delivered(n)
    }

    /// Scatters `frame` into QP `qpn`'s next receive WQE, if the doorbell
    /// record (read now) says the driver posted one.
    fn deliver(&self, s: &mut State, qpn: u32, frame: &[u8], hash: u32) -> bool {
        let Some(q) = s.qps.get(&qpn).copied() else {
            return false;
        };
        if q.state != p::RTR && q.state != p::RTS {
            return false;
        }
        let mut rec = [0u8; 4];
        if !self.iommu.read(q.ctx.db_rec_addr.get(), &mut rec) {
            Self::violation(s, format!("QP {qpn:#x}: RQ doorbell record unreachable"));
            return false;
        }
        let prod = u32::from_be_bytes(rec) & 0xffff;
        if q.rq_cons & 0xffff == prod {
            return false;
        }
        let at = q.rq_cons;
        if let Some(qs) = s.qps.get_mut(&qpn) {
            qs.rq_cons = at.wrapping_add(1);
        }
        let mut e = match self.scatter(s, &q, at, frame) {
            Ok(()) => {
                let mut e = super::csum::classify(frame);
                e.vlan_my_qpn = Be32::new(qpn);
                e.immed_rss_invalid = Be32::new(hash);
                let claimed = s.claimed_len.take();
                e.byte_cnt = Be32::new(claimed.unwrap_or(frame.len() as u32));
                e.wqe_index = Be16::new(at as u16);
                e.owner_sr_opcode = c::OP_RECV;
                e
            }
            Err((syndrome, why)) => {
                if syndrome != c::SYN_LOCAL_LENGTH {
                    Self::violation(s, format!("QP {qpn:#x}: receive WQE {at}: {why}"));
                }
                s.stats.error_cqes += 1;
                error_cqe(qpn, at, syndrome, false)
            }
        };
        self.write_cqe(s, q.ctx.cqn_recv.get(), &mut e)
    }

    /// Writes `frame` through the scatter list of receive WQE `at`.
    fn scatter(&self, s: &State, q: &QpState, at: u32, frame: &[u8]) -> Result<(), (u8, String)> {
        let wqe_off = q.rq_off + (at & (q.rq_n - 1)) as u64 * q.rq_stride as u64;
        let mut left = frame;
        for k in 0..q.rq_stride as u64 / wqe::SEG as u64 {
            if left.is_empty() {
                break;
            }
            let seg_at = wqe_off + k * wqe::SEG as u64;
            let d = self
                .qbuf_addr(s, q.buf, seg_at, wqe::SEG as u64)
                .and_then(|a| {
                    let mut raw = [0u8; 16];
                    self.iommu
                        .read(a, &mut raw)
                        .then(|| DataSeg::from_bytes(&raw))
                        .flatten()
                })
                .ok_or((c::SYN_LOCAL_PROT, format!("scatter entry {k} unreachable")))?;
            let (lkey, addr) = (d.lkey.get(), d.addr.get());
            if lkey == mpt::INVALID_LKEY {
                break;
            }
            let n = (d.byte_count.get() as usize & 0x7fff_ffff).min(left.len());
            if !Self::mr_covers(s, lkey, addr, n as u64, true) || !self.dma_write(addr, &left[..n])
            {
                return Err((
                    c::SYN_LOCAL_PROT,
                    format!("buffer {addr:#x}+{n} (lkey {lkey:#x}) not writable"),
                ));
            }
            left = &left[n..];
        }
        if !left.is_empty() {
            return Err((
                c::SYN_LOCAL_LENGTH,
                format!("{} bytes past the buffers", left.len()),
            ));
        }
        Ok(())
    }

    /// Injects a frame from the host side into `port` (1-based).
    pub fn inject(&self, port: u8, frame: &[u8]) -> RxOutcome {
        let mut s = lock(&self.state);
        self.receive(&mut s, port, frame)
    }

    /// Frames `port` sent to the host-side sink since the last call.
    pub fn take_sent(&self, port: u8) -> Vec<Vec<u8>> {
        let mut s = lock(&self.state);
        s.sent
            .get_mut(port.wrapping_sub(1) as usize)
            .map(|q| q.drain(..).collect())
            .unwrap_or_default()
    }

    /// The data-path counters.
    pub fn stats(&self) -> ModelStats {
        lock(&self.state).stats
    }

    /// QP `qpn`'s state (None: RST).
    pub fn qp_state(&self, qpn: u32) -> Option<u8> {
        lock(&self.state).qps.get(&qpn).map(|q| q.state)
    }

    /// The QPs now out of RST.
    pub fn qps(&self) -> Vec<u32> {
        lock(&self.state).qps.keys().copied().collect()
    }

    /// Forces QP `qpn` to ERR, as a fatal error would (fault injection):
    /// its WQEs complete flushed from now on.
    pub fn force_qp_error(&self, qpn: u32) -> bool {
        let mut s = lock(&self.state);
        s.qps.get_mut(&qpn).map(|q| q.state = p::ERR).is_some()
    }
}
