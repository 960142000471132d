//! The four AF_XDP rings as one process sees them: single-producer,
//! single-consumer rings of `size` entries (a power of two) in memory we
//! share with the kernel, indexed by free-running 32-bit producer and
//! consumer counters. We produce on the fill and TX rings and consume the
//! RX and completion rings; the kernel does the opposite. The barriers
//! follow the kernel's `net/xdp/xsk_queue.h`, whose comment names them
//! A-D: our consumer's load-acquire of the producer pairs with the
//! kernel's store-release of it, and so on.
use crate::sys::Mapping;
use std::mem::{offset_of, size_of};
use std::sync::atomic::Ordering;

/// An RX or TX ring entry (`struct xdp_desc` of the kernel's
/// `include/uapi/linux/if_xdp.h`): a frame's offset in the UMEM and its
/// length, in host byte order.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct XdpDesc {
    /// The frame's first byte, as an offset into the UMEM.
    pub addr: u64,
    /// The frame's length in bytes.
    pub len: u32,
    /// `XDP_PKT_CONTD` and friends; zero for one-buffer frames.
    pub options: u32,
}

/// A fill or completion ring entry: a UMEM offset.
pub(crate) type UmemAddr = u64;

// The layout the kernel reads and writes, checked against libc's
// transcription of the uapi header.
const _: () = {
    assert!(size_of::<XdpDesc>() == 16 && size_of::<XdpDesc>() == size_of::<libc::xdp_desc>());
    assert!(offset_of!(XdpDesc, addr) == offset_of!(libc::xdp_desc, addr));
    assert!(offset_of!(XdpDesc, len) == offset_of!(libc::xdp_desc, len));
    assert!(offset_of!(XdpDesc, options) == offset_of!(libc::xdp_desc, options));
};

/// Bytes of a fill or completion ring entry.
pub(crate) const ADDR_ENTRY: usize = size_of::<UmemAddr>();
/// Bytes of an RX or TX ring entry.
pub(crate) const DESC_ENTRY: usize = size_of::<XdpDesc>();

/// One ring's mapping and our cached view of its counters.
pub(crate) struct XskRing {
    map: Mapping,
    producer: usize,
    consumer: usize,
    flags: usize,
    desc: usize,
    mask: u32,
    size: u32,
    /// Producer side: next entry to fill. Consumer side: the producer as
    /// last read.
    cached_prod: u32,
    /// Producer side: consumer + size as last read. Consumer side: next
    /// entry to read.
    cached_cons: u32,
}

impl XskRing {
    /// Wraps a ring mapping with the kernel's offsets (checked here, so
    /// later accesses stay inside the mapping).
    pub(crate) fn new(
        map: Mapping,
        off: &libc::xdp_ring_offset,
        size: u32,
        entry: usize,
        producer_side: bool,
    ) -> Option<XskRing> {
        let end = (off.desc as usize).checked_add(size as usize * entry)?;
        let words = [off.producer, off.consumer, off.flags].map(|o| o as usize);
        if end > map.len()
            || words.iter().any(|&w| w % 4 != 0 || w + 4 > map.len())
            || off.desc % 8 != 0
        {
            return None;
        }
        let mut r = XskRing {
            map,
            producer: words[0],
            consumer: words[1],
            flags: words[2],
            desc: off.desc as usize,
            mask: size - 1,
            size,
            cached_prod: 0,
            cached_cons: 0,
        };
        // Relaxed: nothing is exchanged yet; the kernel has just made the
        // ring (both counters zero).
        let (p, c) = (
            r.map.atomic_u32(r.producer).load(Ordering::Relaxed),
            r.map.atomic_u32(r.consumer).load(Ordering::Relaxed),
        );
        // A producer caches the consumer one lap ahead (free = cons - prod).
        r.cached_prod = p;
        r.cached_cons = if producer_side {
            c.wrapping_add(size)
        } else {
            c
        };
        Some(r)
    }

    /// Producer: free entries, at least `want` if possible (the consumer
    /// counter is read again only when the cached view has too few).
    #[inline(always)]
    pub(crate) fn free(&mut self, want: u32) -> u32 {
        let free = self.cached_cons.wrapping_sub(self.cached_prod);
        if free >= want {
            return free;
        }
        // Acquire: pairs with the kernel's store-release of the consumer
        // (xskq_cons_release, "C" in xsk_queue.h), so the entries it freed
        // are no longer read by it when we overwrite them.
        let c = self.map.atomic_u32(self.consumer).load(Ordering::Acquire);
        self.cached_cons = c.wrapping_add(self.size);
        // A consumer counter the kernel could never have written (ahead of
        // what we produced) reads as a full ring.
        self.cached_cons
            .wrapping_sub(self.cached_prod)
            .min(self.size)
    }

    /// The offset of entry `i` past `counter`, for entries of `T`.
    #[inline(always)]
    fn entry_at<T>(&self, counter: u32, i: u32) -> usize {
        self.desc + (counter.wrapping_add(i) & self.mask) as usize * size_of::<T>()
    }

    /// Producer: writes a fill ring entry.
    #[inline(always)]
    pub(crate) fn put_addr(&mut self, i: u32, addr: UmemAddr) {
        self.map
            .write::<UmemAddr>(self.entry_at::<UmemAddr>(self.cached_prod, i), addr);
    }

    /// Producer: writes a TX ring entry.
    #[inline(always)]
    pub(crate) fn put_desc(&mut self, i: u32, desc: XdpDesc) {
        self.map
            .write::<XdpDesc>(self.entry_at::<XdpDesc>(self.cached_prod, i), desc);
    }

    /// Producer: publishes `n` entries written with `put_*`.
    #[inline(always)]
    pub(crate) fn submit(&mut self, n: u32) {
        self.cached_prod = self.cached_prod.wrapping_add(n);
        // Release: the entries are written before the kernel sees the new
        // producer; pairs with its load-acquire of the producer
        // (xskq_cons_peek..., "A" in xsk_queue.h).
        self.map
            .atomic_u32(self.producer)
            .store(self.cached_prod, Ordering::Release);
    }

    /// Consumer: entries ready, at most `max`.
    #[inline(always)]
    pub(crate) fn ready(&mut self, max: u32) -> u32 {
        let mut n = self.cached_prod.wrapping_sub(self.cached_cons);
        if n == 0 {
            // Acquire: pairs with the kernel's store-release of the
            // producer (xskq_prod_submit, "B" in xsk_queue.h), so the
            // entries it announces are written.
            self.cached_prod = self.map.atomic_u32(self.producer).load(Ordering::Acquire);
            n = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        // More than the ring holds would be a kernel bug; never read past
        // one lap.
        n.min(self.size).min(max)
    }

    /// Consumer: the completion ring entry `i` past the consumer.
    #[inline(always)]
    pub(crate) fn addr(&self, i: u32) -> UmemAddr {
        self.map
            .read::<UmemAddr>(self.entry_at::<UmemAddr>(self.cached_cons, i))
    }

    /// Consumer: the RX ring entry `i` past the consumer.
    #[inline(always)]
    pub(crate) fn desc(&self, i: u32) -> XdpDesc {
        self.map
            .read::<XdpDesc>(self.entry_at::<XdpDesc>(self.cached_cons, i))
    }

    /// Consumer: hands `n` entries back.
    #[inline(always)]
    pub(crate) fn release(&mut self, n: u32) {
        self.cached_cons = self.cached_cons.wrapping_add(n);
        // Release: our reads of the entries finish before the kernel may
        // reuse them; pairs with its load-acquire of the consumer ("D").
        self.map
            .atomic_u32(self.consumer)
            .store(self.cached_cons, Ordering::Release);
    }

    /// Whether the kernel asks to be woken (XDP_RING_NEED_WAKEUP).
    #[inline(always)]
    pub(crate) fn needs_wakeup(&self) -> bool {
        // Relaxed: a hint; a missed flag costs one poll round, and the
        // kernel sets it before it stops looking at the ring.
        self.map.atomic_u32(self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// Whether entries wait to be consumed (without caching).
    pub(crate) fn has_entries(&self) -> bool {
        self.map.atomic_u32(self.producer).load(Ordering::Relaxed) != self.cached_cons
    }
}
