//! The four AF_XDP rings as one process sees them: single-producer,
//! single-consumer rings of `size` entries (a power of two) in memory we
//! share with the kernel, indexed by free-running 32-bit producer and
//! consumer counters. We produce on the fill and TX rings and consume the
//! RX and completion rings; the kernel does the opposite. The barriers
//! follow the kernel's `net/xdp/xsk_queue.h`, whose comment names them
//! A-D: our consumer's load-acquire of the producer pairs with the
//! kernel's store-release of it, and so on.
use crate::sys::Mapping;
use std::sync::atomic::Ordering;

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

    /// Producer: writes a fill/completion-style address entry.
    #[inline(always)]
    pub(crate) fn put_addr(&mut self, i: u32, addr: u64) {
        let at = self.desc + (self.cached_prod.wrapping_add(i) & self.mask) as usize * 8;
        self.map.write::<u64>(at, addr);
    }

    /// Producer: writes a TX descriptor entry.
    #[inline(always)]
    pub(crate) fn put_desc(&mut self, i: u32, addr: u64, len: u32) {
        let at = self.desc + (self.cached_prod.wrapping_add(i) & self.mask) as usize * 16;
        self.map.write::<u64>(at, addr);
        self.map.write::<u32>(at + 8, len);
        self.map.write::<u32>(at + 12, 0);
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

    /// Consumer: the address entry `i` past the consumer.
    #[inline(always)]
    pub(crate) fn addr(&self, i: u32) -> u64 {
        self.map
            .read::<u64>(self.desc + (self.cached_cons.wrapping_add(i) & self.mask) as usize * 8)
    }

    /// Consumer: the RX descriptor `i` past the consumer (address, length).
    #[inline(always)]
    pub(crate) fn desc(&self, i: u32) -> (u64, u32) {
        let at = self.desc + (self.cached_cons.wrapping_add(i) & self.mask) as usize * 16;
        (self.map.read::<u64>(at), self.map.read::<u32>(at + 8))
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
