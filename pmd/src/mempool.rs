//! Mempools: fixed-size objects in DMA memory, like `rte_mempool`. The
//! pool knows nothing of what its objects hold: the packet-buffer pool
//! ([`crate::mbuf`]'s [`Mempool`](crate::Mempool), `rte_pktmbuf_pool_create`)
//! builds on it, laying an mbuf header and a buffer into each object, so
//! the modules depend one way, as DPDK's do: mbuf, then mempool, then ring.
//!
//! Free objects sit in an MP/MC [`rpmd_ring`] ring. In front of it, each
//! lcore (see [`crate::lcore`]) has a cache of up to `cache_size` objects
//! that only it touches, so most gets and puts cost no atomic operation:
//! - get `n`: served from the cache when it holds `n`; otherwise the cache
//!   is refilled from the ring with `n + (cache_size - len)` objects in one
//!   bulk dequeue, or, when the ring cannot provide that, `n` come straight
//!   from the ring.
//! - put `n`: into the cache; when it reaches the flush threshold
//!   (1.5 × `cache_size`), everything above `cache_size` goes back to the
//!   ring in one bulk enqueue. A put larger than the threshold bypasses it.
//!
//! Threads without an lcore id, and pools with `cache_size` 0, use the ring
//! directly. Objects come out LIFO from the cache, so recently used (cache-
//! hot) buffers are reused first.
#![allow(unsafe_code)]

use crate::dma::{DmaRegion, IovaMode, PageSize};
use crate::lcore::{self, MAX_LCORES};
use crate::Error;
use crossbeam_utils::CachePadded;
use rpmd_ring::{Consumer, Multi, Producer};
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Largest per-lcore cache (DPDK's `RTE_MEMPOOL_CACHE_MAX_SIZE`).
pub const CACHE_MAX_SIZE: u32 = 512;
/// A free object's address, as stored in the ring and caches.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub(crate) struct Obj(pub(crate) NonNull<u8>);

// SAFETY: an `Obj` in the ring or a cache is a free object owned by the
// pool; whoever takes it out owns it.
unsafe impl Send for Obj {}

impl Obj {
    const DANGLING: Obj = Obj(NonNull::dangling());
}

/// How a pool lays out its objects: `obj_size` bytes each (a multiple of
/// 64), never straddling a 2 MiB page, so each is physically contiguous
/// too (IOVA = PA).
#[derive(Clone, Debug)]
pub(crate) struct PoolSpec<'a> {
    pub(crate) name: &'a str,
    pub(crate) size: u32,
    pub(crate) cache_size: u32,
    pub(crate) obj_size: usize,
    pub(crate) iova_mode: IovaMode,
}

/// Slots per cache: room for `cache_size` plus a flush threshold's worth
/// of puts plus one bulk, at the largest cache size.
const CACHE_SLOTS: usize = 3 * CACHE_MAX_SIZE as usize;
// A full cache plus a put of the largest bulk the cache takes fits.
const _: () = assert!(2 * (CACHE_MAX_SIZE as usize * 3 / 2) <= CACHE_SLOTS);

/// Copies `src` into `dst` (same length). One object is one move; more
/// is a `memcpy` call, which for 8 or 32 objects beats an inline loop
/// (callgrind: LLVM's unrolled loops carry more set-up than the call).
#[inline(always)]
fn copy_objs(dst: &mut [MaybeUninit<Obj>], src: &[MaybeUninit<Obj>]) {
    if dst.len() == 1 && src.len() == 1 {
        dst[0] = src[0];
    } else {
        dst.copy_from_slice(src);
    }
}

/// One lcore's cache; only the thread holding that lcore id touches
/// `objs`, and `len` is atomic only so that the pool's drop can count.
/// `objs[..len]` are initialised, and between calls `len` is at most the
/// flush threshold (`cache_size` after a flush or a refill), so within
/// `CACHE_SLOTS`. The caches of all lcores are one
/// zero-filled allocation, so a cache costs no memory until its lcore uses
/// it, and finding it is one index (as DPDK's `local_cache[lcore_id]`).
struct Cache {
    len: AtomicU32,
    objs: UnsafeCell<[MaybeUninit<Obj>; CACHE_SLOTS]>,
}

/// A cache as the hot path uses it: the cache plus its pool's flush
/// threshold, copied out so that a thread's view keeps it in a register.
#[derive(Clone, Copy)]
pub(crate) struct CacheRef<'a> {
    c: &'a Cache,
    flush: u32,
}

/// All-zero bytes are a valid `Cache` (length 0, slots uninitialised), so
/// the table can come from `alloc_zeroed`, which the kernel backs lazily.
fn cache_table() -> Box<[CachePadded<Cache>]> {
    let layout = std::alloc::Layout::array::<CachePadded<Cache>>(MAX_LCORES)
        .expect("cache table layout fits");
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<CachePadded<Cache>>();
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    // SAFETY: `p` holds MAX_LCORES zeroed `CachePadded<Cache>`, a valid
    // value (see above), allocated with the global allocator and the
    // layout `Box<[T]>` frees with.
    unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, MAX_LCORES)) }
}

pub(crate) struct PoolInner {
    pub(crate) name: Arc<str>,
    pub(crate) size: u32,
    cache_size: u32,
    flush_threshold: u32,
    tx: Producer<Obj, Multi, Multi>,
    rx: Consumer<Obj, Multi, Multi>,
    caches: Box<[CachePadded<Cache>]>,
    pub(crate) region: DmaRegion,
    /// Bytes per object; objects sit `PAGE_LAYOUT / obj_size` to a 2 MiB
    /// stretch of the region, from its start (see `create`).
    pub(crate) obj_size: usize,
}

/// The stretch of region objects are laid out against.
pub(crate) const PAGE_LAYOUT: usize = 2 << 20;

impl PoolInner {
    /// The index and region offset of the object holding region offset
    /// `off`, if any.
    pub(crate) fn object_at(&self, off: usize) -> Option<(usize, usize)> {
        let per_page = PAGE_LAYOUT / self.obj_size;
        let (page, in_page) = (off / PAGE_LAYOUT, off % PAGE_LAYOUT);
        let slot = in_page / self.obj_size;
        let index = page.checked_mul(per_page)?.checked_add(slot)?;
        (slot < per_page && index < self.size as usize)
            .then(|| (index, page * PAGE_LAYOUT + slot * self.obj_size))
    }
}

// SAFETY: the ring ends are Sync for Multi mode; the caches are only used by
// the thread that holds the matching lcore id (see `cache`), and the region
// is Sync.
unsafe impl Sync for PoolInner {}
// SAFETY: as above.
unsafe impl Send for PoolInner {}

impl PoolInner {
    /// This thread's cache, or `None` (no lcore id, or caching disabled).
    #[inline(always)]
    pub(crate) fn cache(&self) -> Option<CacheRef<'_>> {
        self.cache_of(lcore::current()?)
    }

    /// The cache of lcore `id`, or `None` when caching is off.
    #[inline(always)]
    pub(crate) fn cache_of(&self, id: usize) -> Option<CacheRef<'_>> {
        if self.cache_size == 0 {
            return None;
        }
        self.caches.get(id).map(|c| CacheRef {
            c,
            flush: self.flush_threshold,
        })
    }

    /// Fills all of `dst` with free objects, or nothing. The cache hit is
    /// inlined into the caller; everything else is out of line.
    #[inline(always)]
    pub(crate) fn get_into(
        &self,
        cache: Option<CacheRef<'_>>,
        dst: &mut [MaybeUninit<Obj>],
    ) -> bool {
        let n = dst.len();
        if let Some(CacheRef { c, .. }) = cache {
            let len = c.len.load(Ordering::Relaxed) as usize;
            if n <= len {
                // SAFETY: this thread holds the lcore id owning `c`, so
                // nobody else touches `objs`.
                let objs = unsafe { &*c.objs.get() };
                // LIFO: the top `n`, the most recently freed (cache-hot)
                // objects, in the order they lie (DPDK reverses them, a
                // shuffle per pair that buys nothing measurable). The slots
                // below `len` are initialised; `MaybeUninit<Obj>` is
                // `Copy`, so they are copied as they are.
                // SAFETY: `n <= len <= CACHE_SLOTS` (the `Cache` invariant).
                let top = unsafe { objs.get_unchecked(len - n..len) };
                copy_objs(dst, top);
                c.len.store((len - n) as u32, Ordering::Relaxed);
                return true;
            }
            if n <= self.cache_size as usize {
                return self.refill_and_get(c, dst);
            }
        }
        self.get_ring(dst)
    }

    /// A get the cache does not serve (no cache, or more than it holds):
    /// straight from the ring. Out of line, as the put side's `put_ring`,
    /// so the cache hit stays a short run of code in the caller's loop.
    /// It only picks the path, and tail-calls it: the register saves of
    /// the many-object path's prologue are then not paid by one object.
    #[inline(never)]
    fn get_ring(&self, dst: &mut [MaybeUninit<Obj>]) -> bool {
        if let [one] = dst {
            return self.get_ring_one(one);
        }
        self.get_ring_many(dst)
    }

    #[inline(never)]
    fn get_ring_many(&self, dst: &mut [MaybeUninit<Obj>]) -> bool {
        self.rx.dequeue_bulk_uninit(dst).n == dst.len()
    }

    /// One object from the ring: with `n` known, no copy loop or `memcpy`
    /// call is compiled in, so the function saves three registers on the
    /// stack before the ring's locked instruction instead of six (the put
    /// side saves none); that instruction waits for those stores.
    #[inline(never)]
    fn get_ring_one(&self, dst: &mut MaybeUninit<Obj>) -> bool {
        self.rx.dequeue_bulk_uninit(std::slice::from_mut(dst)).n == 1
    }

    /// Cache miss: refill the cache to `cache_size` plus what this request
    /// takes, in one bulk dequeue, then serve from it; or, when the ring
    /// cannot provide that, take the request straight from the ring.
    #[inline(never)]
    fn refill_and_get(&self, c: &Cache, dst: &mut [MaybeUninit<Obj>]) -> bool {
        let n = dst.len();
        // SAFETY: as in `get_into`.
        let objs = unsafe { &mut *c.objs.get() };
        let mut len = c.len.load(Ordering::Relaxed) as usize;
        let req = n + self.cache_size as usize - len;
        if self.rx.dequeue_bulk_uninit(&mut objs[len..len + req]).n == req {
            len += req;
            for (d, o) in dst.iter_mut().zip(objs[len - n..len].iter().rev()) {
                *d = *o;
            }
            c.len.store((len - n) as u32, Ordering::Relaxed);
            return true;
        }
        self.rx.dequeue_bulk_uninit(dst).n == n
    }

    /// Returns free objects. Putting into the cache is inlined into the
    /// caller; flushing and the cacheless path are out of line.
    #[inline(always)]
    pub(crate) fn put_raw(&self, cache: Option<CacheRef<'_>>, objs_in: &[Obj]) {
        let n = objs_in.len();
        if let Some(CacheRef { c, flush }) = cache {
            if n as u32 <= flush {
                // SAFETY: as in `get_into`.
                let objs = unsafe { &mut *c.objs.get() };
                let len = c.len.load(Ordering::Relaxed) as usize;
                // SAFETY: `MaybeUninit<Obj>` has `Obj`'s layout.
                let src = unsafe { &*(objs_in as *const [Obj] as *const [MaybeUninit<Obj>]) };
                // SAFETY: `len <= flush_threshold` between calls (a put that
                // reaches it flushes down to `cache_size`) and
                // `n <= flush_threshold`, so `len + n <= 2 * flush_threshold
                // <= CACHE_SLOTS` (asserted where `CACHE_SLOTS` is defined).
                let room = unsafe { objs.get_unchecked_mut(len..len + n) };
                copy_objs(room, src);
                if len + n >= flush as usize {
                    self.flush(c, len + n);
                } else {
                    c.len.store((len + n) as u32, Ordering::Relaxed);
                }
                return;
            }
        }
        self.put_ring(objs_in);
    }

    /// Moves everything above `cache_size` from the cache (holding `len`)
    /// to the ring in one bulk enqueue.
    #[inline(never)]
    fn flush(&self, c: &Cache, len: usize) {
        // SAFETY: as in `get_into`.
        let objs = unsafe { &*c.objs.get() };
        let keep = self.cache_size as usize;
        // SAFETY: slots below `len` are initialised.
        let full = unsafe { &*(&objs[keep..len] as *const [MaybeUninit<Obj>] as *const [Obj]) };
        let t = self.tx.enqueue_bulk(full);
        debug_assert_eq!(t.n, len - keep, "pool ring holds every object");
        c.len.store(keep as u32, Ordering::Relaxed);
    }

    /// A put the cache does not take; picks the path as `get_ring` does.
    #[inline(never)]
    fn put_ring(&self, objs_in: &[Obj]) {
        if let [one] = objs_in {
            return self.put_ring_one(one);
        }
        self.put_ring_many(objs_in)
    }

    #[inline(never)]
    fn put_ring_many(&self, objs_in: &[Obj]) {
        let t = self.tx.enqueue_bulk(objs_in);
        debug_assert_eq!(t.n, objs_in.len(), "pool ring holds every object");
    }

    /// One object to the ring; as `get_ring_one`.
    #[inline(never)]
    fn put_ring_one(&self, obj: &Obj) {
        let t = self.tx.enqueue_bulk(std::slice::from_ref(obj));
        debug_assert_eq!(t.n, 1, "pool ring holds every object");
    }

    /// Returns one object (an mbuf segment being dropped, already reset).
    #[inline]
    pub(crate) fn put_one(&self, p: NonNull<u8>) {
        self.put_raw(self.cache(), &[Obj(p)]);
    }

    #[cold]
    pub(crate) fn exhausted(&self, wanted: usize) -> Error {
        Error::Exhausted {
            pool: self.name.clone(),
            size: self.size,
            wanted,
        }
    }

    pub(crate) fn free_count(&self) -> usize {
        self.rx.len()
            + self
                .caches
                .iter()
                .map(|c| c.len.load(Ordering::Relaxed) as usize)
                .sum::<usize>()
    }
}

impl PoolInner {
    /// Makes a pool as `spec` says: its DMA region (hugepages when free),
    /// every object handed to `init` (its address, its offset in the
    /// region, the region and the pool's address, which stays the same
    /// for the pool's life) and then put in the ring.
    pub(crate) fn create(
        spec: &PoolSpec<'_>,
        mut init: impl FnMut(*mut u8, usize, &DmaRegion, *const PoolInner),
    ) -> Result<Arc<PoolInner>, Error> {
        let invalid = |what, detail: String| Error::Invalid { what, detail };
        if spec.size == 0 {
            return Err(invalid("mempool size", format!("{}: 0 objects", spec.name)));
        }
        if spec.cache_size > CACHE_MAX_SIZE || spec.cache_size > spec.size {
            return Err(invalid(
                "mempool cache size",
                format!(
                    "{}: {} (at most {CACHE_MAX_SIZE} and at most the pool size {})",
                    spec.name, spec.cache_size, spec.size
                ),
            ));
        }
        let (obj_size, n) = (spec.obj_size, spec.size as usize);
        debug_assert!(obj_size % 64 == 0 && obj_size > 0);
        // Lay out against 2 MiB pages; objects never straddle a page, so
        // each is contiguous in physical memory too (IOVA-as-PA).
        let page = PAGE_LAYOUT;
        debug_assert_eq!(page, PageSize::Huge2M.bytes());
        let per_page = page / obj_size;
        if per_page == 0 {
            return Err(Error::PaNeedsHugepages {
                obj_size,
                page_size: page,
            });
        }
        let bytes = n.div_ceil(per_page) * page;
        let region = DmaRegion::new(spec.name, bytes, spec.iova_mode)?;
        if spec.iova_mode == IovaMode::Pa
            && (region.page_size().bytes() < obj_size || region.page_size() == PageSize::Base4K)
        {
            // 4 KiB pages: objects would straddle physically scattered pages.
            return Err(Error::PaNeedsHugepages {
                obj_size,
                page_size: region.page_size().bytes(),
            });
        }
        let (tx, rx) =
            rpmd_ring::new::<Obj, Multi, Multi>(n.next_power_of_two()).map_err(|source| {
                Error::Ring {
                    pool: spec.name.to_string(),
                    source,
                }
            })?;
        let inner = Arc::new(PoolInner {
            name: spec.name.into(),
            size: spec.size,
            cache_size: spec.cache_size,
            flush_threshold: spec.cache_size * 3 / 2,
            tx,
            rx,
            caches: cache_table(),
            region,
            obj_size,
        });
        let mut batch = [Obj::DANGLING; 64];
        let mut k = 0;
        for i in 0..n {
            let off = (i / per_page) * page + (i % per_page) * obj_size;
            // SAFETY: `off + obj_size <= bytes <= region.len()`.
            let obj = unsafe { inner.region.as_ptr().add(off) };
            init(obj, off, &inner.region, Arc::as_ptr(&inner));
            // SAFETY: `obj` points into the mapping, never null.
            batch[k] = Obj(unsafe { NonNull::new_unchecked(obj) });
            k += 1;
            if k == batch.len() || i + 1 == n {
                let t = inner.tx.enqueue_bulk(&batch[..k]);
                debug_assert_eq!(t.n, k);
                k = 0;
            }
        }
        Ok(inner)
    }
}
