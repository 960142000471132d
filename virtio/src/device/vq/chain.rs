//! Copying frames between mbufs and guest buffer chains, for both ring
//! layouts: [`FrameReader`] gathers a guest TX chain into an mbuf (and
//! keeps the net header's fields), [`Plan`] lays a frame and its net
//! header out over guest RX buffers.
use super::{
    Negotiated, QueueStats, VringCounters, MAX_FRAME, MAX_HEADS, MAX_SEGS, VRING_DESC_F_INDIRECT,
};
use crate::consts::{VRING_DESC_F_NEXT, VRING_DESC_F_WRITE};
use crate::offload::HdrFields;
use crate::vring::{DescFields, SplitView};
use rpmd_pmd::hdr::ETHER_HDR_LEN;
use rpmd_pmd::peer::PeerMemory;
use rpmd_pmd::{Mbuf, Mempool, Pkts};

/// Copies a TX chain's buffers into an mbuf, descriptor by descriptor
/// (both ring layouts).
pub(super) struct FrameReader {
    /// Header bytes still to pass, of `hdr_len`.
    skip: u64,
    hdr_len: u64,
    /// The header's offload fields, as read.
    fields: HdrFields,
    total: usize,
    tail: Option<Mbuf>,
}

impl FrameReader {
    /// A frame after a net header of `hdr` bytes.
    pub(super) fn new(hdr: usize) -> Self {
        FrameReader {
            skip: hdr as u64,
            hdr_len: hdr as u64,
            fields: [0; crate::offload::HDR_FIELDS],
            total: 0,
            tail: None,
        }
    }

    /// Copies descriptor `d`'s buffer (the part after the header).
    pub(super) fn add(
        &mut self,
        mem: &PeerMemory,
        d: &DescFields,
        m: &mut Mbuf,
        pool: &Mempool,
    ) -> Result<(), &'static str> {
        if d.flags & (VRING_DESC_F_WRITE | VRING_DESC_F_INDIRECT) != 0 {
            return Err("a device-writable or indirect descriptor in a TX chain");
        }
        let s = self.skip.min(d.len as u64);
        // The header's first bytes may sit in this descriptor.
        let seen = (self.hdr_len - self.skip) as usize;
        let want = (self.fields.len().saturating_sub(seen) as u64).min(s) as usize;
        if want > 0 {
            mem.read(d.addr, &mut self.fields[seen..seen + want])
                .map_err(|_| "a buffer outside the memory table")?;
        }
        self.skip -= s;
        let mut left = d.len as u64 - s;
        let mut a = d
            .addr
            .checked_add(s)
            .ok_or("a buffer address that overflows")?;
        self.total += left as usize;
        if self.total > MAX_FRAME {
            return Err("a frame longer than MAX_FRAME");
        }
        while left > 0 {
            let seg = self.tail.as_mut().unwrap_or(&mut *m);
            let room = seg.tailroom() as u64;
            if room == 0 {
                let t = pool.get().map_err(|_| "no mbuf for a segment")?;
                if let Some(full) = self.tail.replace(t) {
                    m.chain(full).map_err(|_| "too many segments")?;
                }
                continue;
            }
            let k = room.min(left);
            let dst = seg.append(k as usize).ok_or("no tailroom")?;
            mem.read(a, dst)
                .map_err(|_| "a buffer outside the memory table")?;
            a += k;
            left -= k;
        }
        Ok(())
    }

    /// The chain ended: links the last segment; returns the header's
    /// offload fields.
    pub(super) fn finish(mut self, m: &mut Mbuf) -> Result<HdrFields, &'static str> {
        if let Some(t) = self.tail.take() {
            m.chain(t).map_err(|_| "too many segments")?;
        }
        if self.skip > 0 {
            return Err("a chain shorter than the net header");
        }
        Ok(self.fields)
    }
}

/// The guest buffers one frame goes into.
pub(super) struct Plan {
    /// (address, length, index into `heads`).
    segs: [(u64, u32, u8); MAX_SEGS],
    nsegs: usize,
    /// (head, bytes written).
    pub(super) heads: [(u16, u32); MAX_HEADS],
    pub(super) nheads: usize,
    pub(super) cap: usize,
}

impl Default for Plan {
    fn default() -> Self {
        Plan {
            segs: [(0, 0, 0); MAX_SEGS],
            nsegs: 0,
            heads: [(0, 0); MAX_HEADS],
            nheads: 0,
            cap: 0,
        }
    }
}

/// What an enqueue burst delivered, added to the queue's counters once
/// at its end (both ring layouts).
#[derive(Default)]
pub(super) struct Delivered {
    sent: u64,
    bytes: u64,
}

impl Delivered {
    /// Frame `m` went into the guest's buffers (`ok`), or was dropped
    /// and its buffers completed empty (counted as an error).
    #[inline(always)]
    pub(super) fn frame(&mut self, ok: bool, m: &Mbuf, st: &QueueStats) {
        if ok {
            self.sent += 1;
            self.bytes += m.pkt_len() as u64;
        } else {
            st.errors.add(1);
        }
    }

    /// Adds the burst to the queue's counters.
    pub(super) fn count(self, st: &QueueStats) {
        st.packets.add(self.sent);
        st.bytes.add(self.bytes);
    }
}

/// What a dequeue burst took into `out[start..]`: one bit a frame that
/// failed (dropped from `out` at the end), and the bytes of the rest.
pub(super) struct Received {
    start: usize,
    bad: u64,
    bytes: u64,
    /// The id each frame read gets (the port's).
    port: u16,
}

impl Received {
    /// A burst appended to a burst of `start` frames, for port `port`.
    pub(super) fn new(start: usize, port: u16) -> Self {
        Received {
            start,
            bad: 0,
            bytes: 0,
            port,
        }
    }

    /// The burst's `i`th frame `m` was read (`res` Ok: it gets the port's
    /// id) or not (counted as a device error; the frame goes). A frame
    /// shorter than an Ethernet header goes the same way (as Linux's tun
    /// refuses one from vhost-net).
    #[inline(always)]
    pub(super) fn frame<T>(
        &mut self,
        i: usize,
        res: Result<T, &str>,
        m: &mut Mbuf,
        st: &QueueStats,
    ) {
        match res {
            Ok(_) if m.pkt_len() >= ETHER_HDR_LEN => {
                self.bytes += m.pkt_len() as u64;
                m.set_port(self.port);
            }
            _ => {
                self.bad |= 1 << i;
                st.device_errors.add(1);
                st.errors.add(1);
            }
        }
    }

    /// Frames `i..n` of the burst were not read at all.
    pub(super) fn lose_from(&mut self, i: usize, n: usize) {
        self.bad |= ((1u128 << n) - (1u128 << i)) as u64;
    }

    /// Drops the failed frames of the burst of `n` from `out` and counts
    /// the rest; returns how many stay.
    pub(super) fn finish(self, out: &mut Pkts, n: usize, st: &QueueStats) -> usize {
        if self.bad != 0 {
            let mut k = 0usize;
            out.retain(|_| {
                k += 1;
                k <= self.start || self.bad & (1 << (k - 1 - self.start)) == 0
            });
        }
        let got = n - self.bad.count_ones() as usize;
        st.packets.add(got as u64);
        st.bytes.add(self.bytes);
        got
    }
}

impl Plan {
    /// Copies the frame `m` (with its header, `need` bytes) into the
    /// buffers gathered, unless gathering went `bad`; a dropped frame's
    /// buffers are completed empty. False when the ring ran dry before
    /// `need` bytes: the frame and the rest of the burst stay.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn fill(
        &mut self,
        bad: bool,
        need: usize,
        mem: &PeerMemory,
        m: &Mbuf,
        neg: Negotiated,
        c: &VringCounters,
        st: &QueueStats,
        done: &mut Delivered,
    ) -> bool {
        if !bad && self.cap < need {
            st.full.add(1);
            return false;
        }
        let ok = !bad && self.write(mem, m, neg, c).is_ok();
        if !ok {
            self.written_zero();
        }
        done.frame(ok, m, st);
        true
    }

    pub(super) fn clear(&mut self) {
        self.nsegs = 0;
        self.nheads = 0;
        self.cap = 0;
    }

    pub(super) fn written_zero(&mut self) {
        for h in &mut self.heads[..self.nheads] {
            h.1 = 0;
        }
    }

    /// Adds the chain at `head` (device-writable descriptors, each inside
    /// the memory table). The head is added even when the chain is bad,
    /// so that it is completed (with length 0).
    pub(super) fn gather(
        &mut self,
        mem: &PeerMemory,
        v: &SplitView,
        head: u16,
    ) -> Result<(), &'static str> {
        self.begin(head);
        let size = v.size();
        let mut id = head;
        for _ in 0..size {
            let d = v.desc(id);
            self.add_desc(mem, &d)?;
            if d.flags & VRING_DESC_F_NEXT == 0 {
                return Ok(());
            }
            id = d.id_or_next;
            if id >= size {
                return Err("a next link outside the descriptor table");
            }
        }
        Err("a chain longer than the ring (a loop)")
    }

    /// Starts a buffer (a split head, a packed buffer id).
    pub(super) fn begin(&mut self, head: u16) {
        self.heads[self.nheads] = (head, 0);
        self.nheads += 1;
    }

    /// Adds descriptor `d` to the current buffer.
    pub(super) fn add_desc(
        &mut self,
        mem: &PeerMemory,
        d: &DescFields,
    ) -> Result<(), &'static str> {
        if d.flags & VRING_DESC_F_WRITE == 0 || d.flags & VRING_DESC_F_INDIRECT != 0 {
            return Err("a read-only or indirect descriptor in an RX chain");
        }
        if mem.translate(d.addr, d.len as u64).is_none() {
            return Err("a buffer outside the memory table");
        }
        if self.nsegs == MAX_SEGS {
            return Err("a chain of more than MAX_SEGS descriptors");
        }
        self.segs[self.nsegs] = (d.addr, d.len, (self.nheads - 1) as u8);
        self.nsegs += 1;
        self.cap += d.len as usize;
        Ok(())
    }

    /// Writes the net header and `m`'s data into the buffers.
    pub(super) fn write(
        &mut self,
        mem: &PeerMemory,
        m: &Mbuf,
        neg: Negotiated,
        c: &VringCounters,
    ) -> Result<(), ()> {
        let mut hdr = [0u8; crate::vring::NetHdr::LEN];
        let nbuf = if neg.mrg { self.nheads as u16 } else { 1 };
        let at = crate::vring::NetHdr::NUM_BUFFERS_AT;
        hdr[at..at + 2].copy_from_slice(&nbuf.to_le_bytes());
        let patches = neg.tx_offloads(m, &mut hdr, c);
        let mut cur = (0usize, 0u32);
        self.put(mem, &mut cur, &hdr[..neg.hdr_len])?;
        for s in m.segments() {
            self.put(mem, &mut cur, s)?;
        }
        for (at, v) in patches.iter() {
            self.overwrite(mem, neg.hdr_len + at, v)?;
        }
        Ok(())
    }

    /// Writes `v` over the bytes at `at` of what was put (a field the
    /// offloads computed); the lengths written stay.
    fn overwrite(&self, mem: &PeerMemory, mut at: usize, mut v: &[u8]) -> Result<(), ()> {
        for &(a, len, _) in &self.segs[..self.nsegs] {
            let len = len as usize;
            if at >= len {
                at -= len;
                continue;
            }
            let k = (len - at).min(v.len());
            mem.write(a + at as u64, &v[..k]).map_err(|_| ())?;
            v = &v[k..];
            at = 0;
            if v.is_empty() {
                return Ok(());
            }
        }
        Err(())
    }

    fn put(&mut self, mem: &PeerMemory, cur: &mut (usize, u32), mut src: &[u8]) -> Result<(), ()> {
        while !src.is_empty() {
            let &(a, len, h) = self.segs.get(cur.0).ok_or(())?;
            let k = ((len - cur.1) as usize).min(src.len());
            mem.write(a + cur.1 as u64, &src[..k]).map_err(|_| ())?;
            self.heads[h as usize].1 += k as u32;
            cur.1 += k as u32;
            src = &src[k..];
            if cur.1 == len {
                *cur = (cur.0 + 1, 0);
            }
        }
        Ok(())
    }
}
