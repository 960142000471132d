//! Packet buffers.
//!
//! An mbuf is a 128-byte header followed by its buffer (headroom, then data
//! room), all inside a mempool's DMA region. [`Mbuf`] is the owning handle:
//! while it exists, software owns the header and the buffer, so the data
//! can be borrowed as `&[u8]`/`&mut [u8]`. Dropping it returns the buffer
//! (and any chained segments) to its pool. A driver that hands a buffer to
//! a device turns the handle into a raw pointer ([`Mbuf::into_raw`]) and
//! back when the device is done ([`Mbuf::from_raw`]); the device never
//! writes a buffer that a live `Mbuf` refers to.
#![allow(unsafe_code)]

use crate::dma::Iova;
use crate::mempool::PoolInner;
use std::ptr::NonNull;

pub mod pool;
mod slots;
pub use slots::Slots;

// Offload flags, with DPDK's `RTE_MBUF_F_*` values so that code ported
// from DPDK reads the same.

/// RX: the L4 checksum is known good (`RTE_MBUF_F_RX_L4_CKSUM_GOOD`).
pub const RX_L4_CKSUM_GOOD: u64 = 1 << 8;
/// RX: the L4 checksum is known bad (`RTE_MBUF_F_RX_L4_CKSUM_BAD`).
pub const RX_L4_CKSUM_BAD: u64 = 1 << 3;
/// RX: the data is known intact but the L4 checksum field holds only the
/// pseudo-header sum (a partial checksum, virtio's NEEDS_CSUM);
/// `RTE_MBUF_F_RX_L4_CKSUM_NONE`, both bits of the mask set.
pub const RX_L4_CKSUM_NONE: u64 = RX_L4_CKSUM_GOOD | RX_L4_CKSUM_BAD;
/// RX: the mask of the three L4 checksum states above.
pub const RX_L4_CKSUM_MASK: u64 = RX_L4_CKSUM_NONE;
/// RX: the IPv4 header checksum is known good
/// (`RTE_MBUF_F_RX_IP_CKSUM_GOOD`).
pub const RX_IP_CKSUM_GOOD: u64 = 1 << 7;
/// RX: the IPv4 header checksum is known bad
/// (`RTE_MBUF_F_RX_IP_CKSUM_BAD`).
pub const RX_IP_CKSUM_BAD: u64 = 1 << 4;
/// RX: the RSS hash field is valid.
pub const RX_RSS_HASH: u64 = 1 << 1;
/// RX: the frame was tagged and `vlan_tci` holds its outer tag's TCI
/// (`RTE_MBUF_F_RX_VLAN`).
pub const RX_VLAN: u64 = 1 << 0;
/// RX: that tag was removed from the frame (`RTE_MBUF_F_RX_VLAN_STRIPPED`).
pub const RX_VLAN_STRIPPED: u64 = 1 << 6;
/// TX: insert `vlan_tci` as an 802.1Q tag (`RTE_MBUF_F_TX_VLAN`).
pub const TX_VLAN: u64 = 1 << 57;
/// TX: the device computes the TCP checksum (`RTE_MBUF_F_TX_TCP_CKSUM`).
/// As in DPDK, the sender sets `l2_len` and `l3_len` and writes the
/// pseudo-header checksum into the TCP checksum field
/// (`rpmd_pmd::net::pseudo_header_sum`).
pub const TX_TCP_CKSUM: u64 = 1 << 52;
/// TX: the device computes the UDP checksum (`RTE_MBUF_F_TX_UDP_CKSUM`),
/// with the same duties as [`TX_TCP_CKSUM`].
pub const TX_UDP_CKSUM: u64 = 3 << 52;
/// TX: the mask of the L4 checksum request (`RTE_MBUF_F_TX_L4_MASK`).
pub const TX_L4_MASK: u64 = 3 << 52;
/// TX: the IPv4 header checksum is to be filled (`RTE_MBUF_F_TX_IP_CKSUM`).
pub const TX_IP_CKSUM: u64 = 1 << 54;
/// TX: TCP segmentation (`RTE_MBUF_F_TX_TCP_SEG`): the device cuts the
/// payload into segments of `tso_segsz` bytes, each with the headers
/// (`l2_len`, `l3_len`, `l4_len`) and their lengths, sequence numbers and
/// checksums fixed. As in DPDK, the sender sets those lengths, zeroes the
/// IPv4 checksum and writes the pseudo-header sum *without* the length
/// into the TCP checksum field (`rpmd_pmd::net::pseudo_header_sum_tso`);
/// implies `TX_TCP_CKSUM`.
pub const TX_TCP_SEG: u64 = 1 << 50;

/// The mbuf header, at the start of each pool object (two cache lines, like
/// `rte_mbuf`). Only software reads or writes it.
#[repr(C, align(64))]
pub(crate) struct MbufHdr {
    /// Start of the buffer (headroom first).
    pub(crate) buf_addr: *mut u8,
    /// IOVA of `buf_addr`.
    pub(crate) buf_iova: u64,
    pub(crate) data_off: u16,
    pub(crate) nb_segs: u16,
    pub(crate) port: u16,
    pub(crate) buf_len: u16,
    pub(crate) ol_flags: u64,
    pub(crate) packet_type: u32,
    /// Total length of all segments (meaningful on the first).
    pub(crate) pkt_len: u32,
    pub(crate) data_len: u16,
    pub(crate) vlan_tci: u16,
    pub(crate) rss_hash: u32,
    /// Next segment, or null.
    pub(crate) next: *mut MbufHdr,
    /// The pool this object belongs to; outlives every mbuf of it.
    pub(crate) pool: *const PoolInner,
    pub(crate) headroom: u16,
    /// TX offloads: length of the L2 header (Ethernet and VLAN tags).
    pub(crate) l2_len: u16,
    /// TX offloads: length of the L3 header (IPv4 with options, IPv6).
    pub(crate) l3_len: u16,
    /// TSO: length of the L4 header (TCP with options).
    pub(crate) l4_len: u16,
    /// TSO: payload bytes per segment (the MSS).
    pub(crate) tso_segsz: u16,
    _reserved: [u8; 54],
}

const _: () = assert!(std::mem::size_of::<MbufHdr>() == 128);
const _: () = assert!(std::mem::offset_of!(MbufHdr, next) == 48);

impl MbufHdr {
    /// A fresh header for a buffer at `buf_addr`/`buf_iova`.
    pub(crate) fn new(
        buf_addr: *mut u8,
        buf_iova: Iova,
        buf_len: u16,
        headroom: u16,
        pool: *const PoolInner,
    ) -> Self {
        MbufHdr {
            buf_addr,
            buf_iova: buf_iova.raw(),
            data_off: headroom,
            nb_segs: 1,
            port: u16::MAX,
            buf_len,
            ol_flags: 0,
            packet_type: 0,
            pkt_len: 0,
            data_len: 0,
            vlan_tci: 0,
            rss_hash: 0,
            next: std::ptr::null_mut(),
            pool,
            headroom,
            l2_len: 0,
            l3_len: 0,
            l4_len: 0,
            tso_segsz: 0,
            _reserved: [0; 54],
        }
    }

    /// Back to the state of a freshly allocated mbuf (`rte_pktmbuf_reset`);
    /// done when an object returns to its pool.
    #[inline(always)]
    pub(crate) fn reset(&mut self) {
        self.reset_to(self.headroom);
    }

    /// [`reset`](Self::reset) with the pool's headroom given (read once
    /// for a burst, instead of from each header's second cache line).
    #[inline(always)]
    pub(crate) fn reset_to(&mut self, headroom: u16) {
        self.data_off = headroom;
        self.nb_segs = 1;
        self.port = u16::MAX;
        self.ol_flags = 0;
        self.packet_type = 0;
        self.pkt_len = 0;
        self.data_len = 0;
        self.vlan_tci = 0;
        self.rss_hash = 0;
        self.next = std::ptr::null_mut();
    }
}

/// An owned packet buffer (one segment, possibly the head of a chain).
#[repr(transparent)]
pub struct Mbuf(NonNull<MbufHdr>);

// SAFETY: an `Mbuf` owns its object exclusively; moving it to another
// thread moves that ownership. Its drop returns the object through the
// pool, which is thread-safe.
unsafe impl Send for Mbuf {}
// SAFETY: `&Mbuf` only allows reading the header and data.
unsafe impl Sync for Mbuf {}

impl Mbuf {
    /// Wraps an object taken from a pool.
    ///
    /// # Safety
    /// `p` is an object of a live pool that nobody else owns.
    #[inline(always)]
    pub(crate) unsafe fn from_obj(p: NonNull<MbufHdr>) -> Self {
        Mbuf(p)
    }

    /// The header pointer, for the pool's bulk return.
    #[inline(always)]
    pub(crate) fn as_hdr(&self) -> NonNull<MbufHdr> {
        self.0
    }

    #[inline(always)]
    fn hdr(&self) -> &MbufHdr {
        // SAFETY: we own the object; the header is plain memory that only
        // the owner touches.
        unsafe { self.0.as_ref() }
    }

    #[inline(always)]
    fn hdr_mut(&mut self) -> &mut MbufHdr {
        // SAFETY: as in `hdr`, and `&mut self` makes the access unique.
        unsafe { self.0.as_mut() }
    }

    /// Gives up ownership for a device: the raw header pointer. Turn it back
    /// with [`Mbuf::from_raw`], or the buffer is lost to its pool.
    pub fn into_raw(self) -> NonNull<u8> {
        let p = self.0.cast();
        std::mem::forget(self);
        p
    }

    /// Takes ownership back from a pointer made by [`Mbuf::into_raw`].
    ///
    /// # Safety
    /// `p` came from `into_raw`, has not been turned back before, and the
    /// device no longer accesses the buffer.
    pub unsafe fn from_raw(p: NonNull<u8>) -> Self {
        Mbuf(p.cast())
    }

    /// Each segment's data as (IOVA, length), for a driver building a
    /// descriptor chain.
    pub fn segment_iovas(&self) -> impl Iterator<Item = (Iova, usize)> + '_ {
        let mut cur: *const MbufHdr = self.0.as_ptr();
        std::iter::from_fn(move || {
            // SAFETY: `cur` is null or a segment of our chain (see `chain`).
            let h = unsafe { cur.as_ref()? };
            cur = h.next;
            Some((
                Iova::new(h.buf_iova + h.data_off as u64),
                h.data_len as usize,
            ))
        })
    }

    /// The packet bytes of this segment.
    pub fn data(&self) -> &[u8] {
        let h = self.hdr();
        // SAFETY: `data_off + data_len <= buf_len` is kept by every setter,
        // the buffer is initialised memory (zero-filled at mapping, written
        // only as bytes since), and we own it.
        unsafe {
            std::slice::from_raw_parts(h.buf_addr.add(h.data_off as usize), h.data_len as usize)
        }
    }

    /// The packet bytes of this segment, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let h = self.hdr_mut();
        // SAFETY: as in `data`, and `&mut self` makes the access unique.
        unsafe {
            std::slice::from_raw_parts_mut(h.buf_addr.add(h.data_off as usize), h.data_len as usize)
        }
    }

    /// Bytes of data in this segment.
    pub fn data_len(&self) -> usize {
        self.hdr().data_len as usize
    }

    /// Bytes of data in the whole chain.
    pub fn pkt_len(&self) -> usize {
        self.hdr().pkt_len as usize
    }

    /// Segments in the chain.
    pub fn nb_segs(&self) -> usize {
        self.hdr().nb_segs as usize
    }

    /// Free bytes before the data.
    pub fn headroom(&self) -> usize {
        self.hdr().data_off as usize
    }

    /// Free bytes after the data.
    pub fn tailroom(&self) -> usize {
        let h = self.hdr();
        (h.buf_len - h.data_off - h.data_len) as usize
    }

    /// Buffer size (headroom + data room).
    pub fn buf_len(&self) -> usize {
        self.hdr().buf_len as usize
    }

    /// Starts loading the cache line that holds data byte `at` (negative:
    /// in the headroom) into this core's caches without waiting for it,
    /// like DPDK's `rte_prefetch0`. Only a hint: any `at` is harmless, and
    /// it does nothing on other architectures than x86_64.
    #[inline(always)]
    pub fn prefetch(&self, at: isize) {
        let h = self.hdr();
        let p = h
            .buf_addr
            .wrapping_add(h.data_off as usize)
            .wrapping_offset(at);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch never faults and changes no memory, whatever
        // the address; SSE, which it needs, is part of x86_64's baseline.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(p.cast());
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = p;
    }

    /// The buffer's first byte (the headroom's start), for drivers that
    /// locate buffers by address ([`Mempool::slot_of`](crate::Mempool::slot_of)).
    pub fn buf_addr(&self) -> *const u8 {
        self.hdr().buf_addr
    }

    /// For a one-segment mbuf a device has just filled at an offset of its
    /// own choosing: the frame is the `len` bytes from buffer offset
    /// `data_off`. False, leaving the mbuf as it was, when that does not
    /// fit the buffer or the mbuf is chained.
    #[inline(always)]
    pub fn set_received_at(&mut self, data_off: usize, len: usize) -> bool {
        let h = self.hdr_mut();
        if data_off.saturating_add(len) > h.buf_len as usize || !h.next.is_null() {
            return false;
        }
        h.data_off = data_off as u16;
        h.data_len = len as u16;
        h.pkt_len = len as u32;
        true
    }

    /// IOVA of the first data byte, for a descriptor.
    pub fn data_iova(&self) -> Iova {
        let h = self.hdr();
        Iova::new(h.buf_iova + h.data_off as u64)
    }

    /// IOVA of the buffer start (headroom included), for RX descriptors.
    pub fn buf_iova(&self) -> Iova {
        Iova::new(self.hdr().buf_iova)
    }

    /// Grows the data by `len` bytes at the end (`rte_pktmbuf_append`) and
    /// returns them, or `None` when the tailroom is too small.
    pub fn append(&mut self, len: usize) -> Option<&mut [u8]> {
        if len > self.tailroom() {
            return None;
        }
        let h = self.hdr_mut();
        let old = h.data_len as usize;
        h.data_len += len as u16;
        h.pkt_len += len as u32;
        Some(&mut self.data_mut()[old..])
    }

    /// The last `len` bytes of the headroom (those just before the data),
    /// writable, without moving the data start; `None` when the headroom
    /// is shorter. For a header a device reads in front of the frame
    /// while the mbuf keeps describing the frame alone (what DPDK's
    /// drivers reach with `rte_pktmbuf_mtod_offset(m, -len)`).
    #[inline]
    pub fn before_data_mut(&mut self, len: usize) -> Option<&mut [u8]> {
        let h = self.hdr_mut();
        let off = (h.data_off as usize).checked_sub(len)?;
        // SAFETY: `off + len == data_off <= buf_len`: inside the buffer,
        // which is initialised memory we own (as in `data`); `&mut self`
        // makes the access unique.
        Some(unsafe { std::slice::from_raw_parts_mut(h.buf_addr.add(off), len) })
    }

    /// Grows the data by `len` bytes at the front (`rte_pktmbuf_prepend`),
    /// or `None` when the headroom is too small.
    pub fn prepend(&mut self, len: usize) -> Option<&mut [u8]> {
        if len > self.headroom() {
            return None;
        }
        let h = self.hdr_mut();
        h.data_off -= len as u16;
        h.data_len += len as u16;
        h.pkt_len += len as u32;
        Some(&mut self.data_mut()[..len])
    }

    /// Removes `len` bytes from the front (`rte_pktmbuf_adj`); false when
    /// the segment holds fewer.
    pub fn adj(&mut self, len: usize) -> bool {
        if len > self.data_len() {
            return false;
        }
        let h = self.hdr_mut();
        h.data_off += len as u16;
        h.data_len -= len as u16;
        h.pkt_len -= len as u32;
        true
    }

    /// Removes `len` bytes from the end (`rte_pktmbuf_trim`); false when the
    /// segment holds fewer.
    pub fn trim(&mut self, len: usize) -> bool {
        if len > self.data_len() {
            return false;
        }
        let h = self.hdr_mut();
        h.data_len -= len as u16;
        h.pkt_len -= len as u32;
        true
    }

    /// Sets this segment's data length, as a driver does after RX (data
    /// offset unchanged); false when it does not fit the buffer. The packet
    /// length of a single-segment mbuf follows.
    pub fn set_data_len(&mut self, len: usize) -> bool {
        let h = self.hdr_mut();
        if len > (h.buf_len - h.data_off) as usize {
            return false;
        }
        h.pkt_len = h.pkt_len - h.data_len as u32 + len as u32;
        h.data_len = len as u16;
        true
    }

    /// For a one-segment mbuf a device has just filled: it wrote `len`
    /// bytes at the data start, the first `skip` of them a header to drop
    /// (a driver's RX fast path: `set_data_len(len)` then `adj(skip)` in one
    /// step). False, leaving the mbuf as it was, when `len` is shorter
    /// than `skip` or longer than the room.
    #[inline(always)]
    pub fn set_received(&mut self, len: usize, skip: usize) -> bool {
        let h = self.hdr_mut();
        if len < skip || len > (h.buf_len - h.data_off) as usize || !h.next.is_null() {
            return false;
        }
        let d = (len - skip) as u16;
        h.data_off += skip as u16;
        h.data_len = d;
        h.pkt_len = d as u32;
        true
    }

    /// [`set_received`](Self::set_received) without its checks, for a
    /// driver's receive path that checked the length against the buffer
    /// it posted: the data and packet length become `len`.
    ///
    /// # Safety
    /// The mbuf is one segment and `len` bytes fit after its data start
    /// (`headroom() + len <= buf_len()`). An mbuf fresh from its pool
    /// ([`Mempool::get_bulk`](crate::Mempool::get_bulk)) and untouched
    /// since holds up to the pool's
    /// [`data_room`](crate::Mempool::data_room).
    #[inline(always)]
    pub unsafe fn set_received_unchecked(&mut self, len: usize) {
        let h = self.hdr_mut();
        debug_assert!(h.next.is_null() && h.data_off as usize + len <= h.buf_len as usize);
        h.data_len = len as u16;
        h.pkt_len = len as u32;
    }

    /// Appends `tail` (a segment or chain) after this chain's last segment
    /// (`rte_pktmbuf_chain`); gives it back if the chain would exceed
    /// `u16::MAX` segments.
    pub fn chain(&mut self, tail: Mbuf) -> Result<(), Mbuf> {
        let (segs, len) = (tail.hdr().nb_segs, tail.hdr().pkt_len);
        if self.hdr().nb_segs.checked_add(segs).is_none() {
            return Err(tail);
        }
        let mut last = self.0;
        // SAFETY: we own every segment of our chain; `next` links are
        // either null or segments of it.
        unsafe {
            while !last.as_ref().next.is_null() {
                last = NonNull::new_unchecked(last.as_ref().next);
            }
            last.as_mut().next = tail.into_raw().cast().as_ptr();
        }
        let h = self.hdr_mut();
        h.nb_segs += segs;
        h.pkt_len += len;
        Ok(())
    }

    /// The data of each segment of the chain, in order.
    pub fn segments(&self) -> impl Iterator<Item = &[u8]> {
        let mut cur: *const MbufHdr = self.0.as_ptr();
        std::iter::from_fn(move || {
            // SAFETY: `cur` is null or a segment of our chain (see `chain`),
            // whose data is borrowed for as long as `self` is.
            let h = unsafe { cur.as_ref()? };
            cur = h.next;
            // SAFETY: as in `data`.
            Some(unsafe {
                std::slice::from_raw_parts(h.buf_addr.add(h.data_off as usize), h.data_len as usize)
            })
        })
    }

    /// A deep copy from `pool` (DPDK's `rte_pktmbuf_copy`): the data of
    /// every segment, chained over as many of `pool`'s mbufs as it takes,
    /// and the metadata (port, packet type, offload flags, VLAN tag, RSS
    /// hash, TX header lengths). Fails, taking nothing, when `pool` runs
    /// out.
    pub fn copy(&self, pool: &crate::Mempool) -> Result<Mbuf, crate::Error> {
        let mut head = pool.get()?;
        let mut tail: Option<Mbuf> = None;
        for mut seg in self.segments() {
            while !seg.is_empty() {
                let cur = tail.as_mut().unwrap_or(&mut head);
                let room = cur.tailroom().min(seg.len());
                if room == 0 {
                    if let Some(full) = tail.replace(pool.get()?) {
                        head.chain(full).map_err(|_| chain_full())?;
                    }
                    continue;
                }
                let (now, rest) = seg.split_at(room);
                cur.append(room)
                    .expect("within the tailroom")
                    .copy_from_slice(now);
                seg = rest;
            }
        }
        if let Some(t) = tail {
            head.chain(t).map_err(|_| chain_full())?;
        }
        let (src, h) = (self.hdr(), head.hdr_mut());
        h.port = src.port;
        h.packet_type = src.packet_type;
        h.ol_flags = src.ol_flags;
        h.vlan_tci = src.vlan_tci;
        h.rss_hash = src.rss_hash;
        h.l2_len = src.l2_len;
        h.l3_len = src.l3_len;
        Ok(head)
    }

    /// Input port (`u16::MAX` when unset).
    pub fn port(&self) -> u16 {
        self.hdr().port
    }

    /// Sets the input port.
    pub fn set_port(&mut self, port: u16) {
        self.hdr_mut().port = port;
    }

    /// RSS hash (valid when `ol_flags` has [`RX_RSS_HASH`]).
    pub fn rss_hash(&self) -> u32 {
        self.hdr().rss_hash
    }

    /// Sets the RSS hash.
    pub fn set_rss_hash(&mut self, h: u32) {
        self.hdr_mut().rss_hash = h;
    }

    /// Offload flags (`RX_*`, `TX_*` constants in this module).
    pub fn ol_flags(&self) -> u64 {
        self.hdr().ol_flags
    }

    /// Sets the offload flags.
    pub fn set_ol_flags(&mut self, f: u64) {
        self.hdr_mut().ol_flags = f;
    }

    /// Header lengths for TX offloads: L2 (Ethernet, VLAN tags) and L3
    /// (the IP header with options), like DPDK's `l2_len`/`l3_len`. They
    /// mean something only with a `TX_*` offload flag set.
    pub fn tx_header_lens(&self) -> (usize, usize) {
        let h = self.hdr();
        (h.l2_len as usize, h.l3_len as usize)
    }

    /// Sets the header lengths read by TX offloads.
    pub fn set_tx_header_lens(&mut self, l2: u16, l3: u16) {
        let h = self.hdr_mut();
        h.l2_len = l2;
        h.l3_len = l3;
    }

    /// TCP segmentation's L4 header length and segment size (DPDK's
    /// `l4_len` and `tso_segsz`), read with [`TX_TCP_SEG`].
    pub fn tso(&self) -> (usize, usize) {
        let h = self.hdr();
        (h.l4_len as usize, h.tso_segsz as usize)
    }

    /// Sets what [`tso`](Self::tso) reads.
    pub fn set_tso(&mut self, l4_len: u16, segsz: u16) {
        let h = self.hdr_mut();
        h.l4_len = l4_len;
        h.tso_segsz = segsz;
    }

    /// Packet type (DPDK `RTE_PTYPE_*` encoding).
    pub fn packet_type(&self) -> u32 {
        self.hdr().packet_type
    }

    /// Sets the packet type.
    pub fn set_packet_type(&mut self, t: u32) {
        self.hdr_mut().packet_type = t;
    }

    /// VLAN tag control information.
    pub fn vlan_tci(&self) -> u16 {
        self.hdr().vlan_tci
    }

    /// Sets the VLAN tag control information.
    pub fn set_vlan_tci(&mut self, v: u16) {
        self.hdr_mut().vlan_tci = v;
    }
}

fn chain_full() -> crate::Error {
    crate::Error::Invalid {
        what: "mbuf copy",
        detail: "the copy needs more segments than a chain holds".into(),
    }
}

impl Drop for Mbuf {
    /// Returns every segment to its pool. Inlined: a single segment, the
    /// common case, is a reset and a push onto this lcore's cache.
    #[inline(always)]
    fn drop(&mut self) {
        let p = self.0.as_ptr();
        // SAFETY: we own the chain; each segment's pool outlives it (pools
        // with objects out are never freed, see `Mempool`).
        unsafe {
            if (*p).next.is_null() {
                let pool = &*(*p).pool;
                // Free objects are kept reset (see `Mempool::get`).
                (*p).reset();
                pool.put_one(self.0.cast());
            } else {
                free_chain(p);
            }
        }
    }
}

/// Returns the segments of the chain starting at `cur` to their pools.
///
/// # Safety
/// The caller owns the chain and gives it up.
#[cold]
#[inline(never)]
unsafe fn free_chain(mut cur: *mut MbufHdr) {
    while !cur.is_null() {
        // SAFETY: as in `Mbuf::drop`.
        unsafe {
            let next = (*cur).next;
            let pool = &*(*cur).pool;
            (*cur).reset();
            pool.put_one(NonNull::new_unchecked(cur).cast());
            cur = next;
        }
    }
}

impl std::fmt::Debug for Mbuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mbuf")
            .field("data_len", &self.data_len())
            .field("pkt_len", &self.pkt_len())
            .field("nb_segs", &self.nb_segs())
            .field("port", &self.port())
            .finish()
    }
}
