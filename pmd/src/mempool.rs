//! Mempools: fixed-size packet buffers in DMA memory, like `rte_mempool`
//! with `rte_pktmbuf_pool_create`.
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
//!
//! Two levels of API: [`Mbuf`]s (reset on return, so a taken mbuf is
//! ready to use), and raw [`PoolObj`]s, which are never touched on the way
//! out or back, like `rte_mempool`'s `void *`. Raw objects move in bulk in
//! a [`PoolObjs`] burst, which records the pool that filled it, so another
//! pool's objects are kept out with one check per bulk rather than one per
//! object. [`Mempool::local`] gives a thread's view with its lcore cache
//! looked up once and its lcore id pinned, as DPDK code passes the cache
//! pointer to `rte_mempool_generic_get/put`.
//!
//! A pool's memory is freed only when its last handle is dropped *and*
//! every mbuf is back; if mbufs are still out then, the memory is leaked
//! instead (with a warning), so an `Mbuf` can never point into freed memory.
#![allow(unsafe_code)]

use crate::dma::{DmaRegion, IovaMode, PageSize};
use crate::lcore::{self, MAX_LCORES};
use crate::mbuf::{Mbuf, MbufHdr};
use crate::Error;
use crossbeam_utils::CachePadded;
use rpmd_ring::{Burst, Consumer, Multi, Producer};
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

mod local;
mod objs;
pub use local::Local;
pub use objs::LocalObjs;

/// Largest per-lcore cache (DPDK's `RTE_MEMPOOL_CACHE_MAX_SIZE`).
pub const CACHE_MAX_SIZE: u32 = 512;
/// Default data room per mbuf (`RTE_MBUF_DEFAULT_DATAROOM`).
pub const DEFAULT_DATA_ROOM: u16 = 2048;
/// Default headroom per mbuf (`RTE_PKTMBUF_HEADROOM`).
pub const DEFAULT_HEADROOM: u16 = 128;

const HDR: usize = std::mem::size_of::<MbufHdr>();

/// How to build a pool.
#[derive(Clone, Debug)]
pub struct MempoolConfig {
    /// Name, for messages and the memfd.
    pub name: String,
    /// Number of mbufs.
    pub size: u32,
    /// Per-lcore cache size (0 disables caches; at most
    /// [`CACHE_MAX_SIZE`]).
    pub cache_size: u32,
    /// Bytes of data room per mbuf.
    pub data_room: u16,
    /// Bytes of headroom per mbuf, before the data room.
    pub headroom: u16,
    /// How devices address the pool's memory.
    pub iova_mode: IovaMode,
}

impl MempoolConfig {
    /// `size` mbufs with DPDK's defaults: cache 256, 2048-byte data room,
    /// 128-byte headroom, IOVA = VA.
    pub fn new(name: &str, size: u32) -> Self {
        MempoolConfig {
            name: name.into(),
            size,
            cache_size: 256,
            data_room: DEFAULT_DATA_ROOM,
            headroom: DEFAULT_HEADROOM,
            iova_mode: IovaMode::Va,
        }
    }
}

/// A free object's address, as stored in the ring and caches.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub(crate) struct Obj(NonNull<MbufHdr>);

// SAFETY: an `Obj` in the ring or a cache is a free object owned by the
// pool; whoever takes it out owns it.
unsafe impl Send for Obj {}

impl Obj {
    const DANGLING: Obj = Obj(NonNull::dangling());
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
struct CacheRef<'a> {
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
    name: String,
    size: u32,
    cache_size: u32,
    flush_threshold: u32,
    tx: Producer<Obj, Multi, Multi>,
    rx: Consumer<Obj, Multi, Multi>,
    caches: Box<[CachePadded<Cache>]>,
    region: DmaRegion,
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
    fn cache(&self) -> Option<CacheRef<'_>> {
        self.cache_of(lcore::current()?)
    }

    /// The cache of lcore `id`, or `None` when caching is off.
    #[inline(always)]
    fn cache_of(&self, id: usize) -> Option<CacheRef<'_>> {
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
    fn get_into(&self, cache: Option<CacheRef<'_>>, dst: &mut [MaybeUninit<Obj>]) -> bool {
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
    fn put_raw(&self, cache: Option<CacheRef<'_>>, objs_in: &[Obj]) {
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
    pub(crate) fn put_one(&self, p: NonNull<MbufHdr>) {
        self.put_raw(self.cache(), &[Obj(p)]);
    }

    #[cold]
    fn exhausted(&self, wanted: usize) -> Error {
        Error::Exhausted {
            pool: self.name.clone(),
            size: self.size,
            wanted,
        }
    }

    fn free_count(&self) -> usize {
        self.rx.len()
            + self
                .caches
                .iter()
                .map(|c| c.len.load(Ordering::Relaxed) as usize)
                .sum::<usize>()
    }
}

/// A pool of mbufs; cloning gives another handle to the same pool.
#[derive(Clone)]
pub struct Mempool {
    inner: Option<Arc<PoolInner>>,
}

impl Mempool {
    /// Creates the pool: its DMA region (hugepages when free), the mbuf
    /// headers, and the ring holding all of them.
    pub fn new(cfg: &MempoolConfig) -> Result<Self, Error> {
        let invalid = |what, detail: String| Error::Invalid { what, detail };
        if cfg.size == 0 {
            return Err(invalid("mempool size", format!("{}: 0 mbufs", cfg.name)));
        }
        if cfg.cache_size > CACHE_MAX_SIZE || cfg.cache_size > cfg.size {
            return Err(invalid(
                "mempool cache size",
                format!(
                    "{}: {} (at most {CACHE_MAX_SIZE} and at most the pool size {})",
                    cfg.name, cfg.cache_size, cfg.size
                ),
            ));
        }
        let buf_len = cfg.headroom as usize + cfg.data_room as usize;
        if buf_len > u16::MAX as usize {
            return Err(invalid(
                "mbuf buffer size",
                format!("headroom + data room = {buf_len} > 65535"),
            ));
        }
        // Objects are whole cache lines.
        let obj_size = (HDR + buf_len).next_multiple_of(64);
        let n = cfg.size as usize;
        // Lay out against 2 MiB pages; objects never straddle a page, so
        // each is contiguous in physical memory too (IOVA-as-PA).
        let page = PageSize::Huge2M.bytes();
        let per_page = page / obj_size;
        if per_page == 0 {
            return Err(Error::PaNeedsHugepages {
                obj_size,
                page_size: page,
            });
        }
        let bytes = n.div_ceil(per_page) * page;
        let region = DmaRegion::new(&cfg.name, bytes, cfg.iova_mode)?;
        if cfg.iova_mode == IovaMode::Pa && region.page_size().bytes() < obj_size {
            return Err(Error::PaNeedsHugepages {
                obj_size,
                page_size: region.page_size().bytes(),
            });
        }
        if cfg.iova_mode == IovaMode::Pa && region.page_size() == PageSize::Base4K {
            // 4 KiB pages: objects would straddle physically scattered pages.
            return Err(Error::PaNeedsHugepages {
                obj_size,
                page_size: region.page_size().bytes(),
            });
        }
        let ring_cap = n.next_power_of_two();
        let (tx, rx) =
            rpmd_ring::new::<Obj, Multi, Multi>(ring_cap).map_err(|source| Error::Ring {
                pool: cfg.name.clone(),
                source,
            })?;
        let inner = Arc::new(PoolInner {
            name: cfg.name.clone(),
            size: cfg.size,
            cache_size: cfg.cache_size,
            flush_threshold: cfg.cache_size * 3 / 2,
            tx,
            rx,
            caches: cache_table(),
            region,
        });
        let pool_ptr = Arc::as_ptr(&inner);
        let mut batch = [Obj::DANGLING; 64];
        let mut k = 0;
        for i in 0..n {
            let off = (i / per_page) * page + (i % per_page) * obj_size;
            let buf_off = off + HDR;
            // SAFETY: `off + obj_size <= bytes <= region.len()`; the region
            // is new and only this function touches it.
            let hdr = unsafe { inner.region.as_ptr().add(off) }.cast::<MbufHdr>();
            // SAFETY: `hdr` is in bounds, 64-byte aligned (pages are, and
            // `obj_size` is a multiple of 64), and not yet in use.
            unsafe {
                hdr.write(MbufHdr::new(
                    inner.region.as_ptr().add(buf_off),
                    inner.region.iova_in_bounds(buf_off),
                    buf_len as u16,
                    cfg.headroom,
                    pool_ptr,
                ))
            };
            // SAFETY: `hdr` points into the mapping, never null.
            batch[k] = Obj(unsafe { NonNull::new_unchecked(hdr) });
            k += 1;
            if k == batch.len() || i + 1 == n {
                let t = inner.tx.enqueue_bulk(&batch[..k]);
                debug_assert_eq!(t.n, k);
                k = 0;
            }
        }
        Ok(Mempool { inner: Some(inner) })
    }

    #[inline(always)]
    fn inner(&self) -> &PoolInner {
        // Only `drop` takes it out.
        self.inner
            .as_deref()
            .expect("mempool handle used after drop")
    }

    /// This thread's view of the pool, as DPDK's test takes
    /// `rte_mempool_default_cache(mp, lcore)` once and passes it to every
    /// get and put: the per-lcore cache is looked up once, not per call.
    /// Not `Send`: it belongs to the thread that made it.
    #[inline]
    pub fn local(&self) -> Local<'_> {
        Local::new(self.inner())
    }

    /// Takes one mbuf (reset: no data, full headroom).
    #[inline]
    pub fn get(&self) -> Result<Mbuf, Error> {
        Local::for_call(self.inner()).get()
    }

    /// Appends exactly `n` mbufs to `out`, or none (pool short of `n`, or
    /// `out` short of room). The objects are copied straight into `out`'s
    /// free slots; none is touched.
    #[inline(always)]
    pub fn get_bulk<const N: usize>(
        &self,
        out: &mut Burst<Mbuf, N>,
        n: usize,
    ) -> Result<(), Error> {
        Local::for_call(self.inner()).get_bulk(out, n)
    }

    /// Returns every mbuf in `b` to its pool (any pool; chained mbufs
    /// segment by segment). Same effect as dropping them; when they are all
    /// single segments of this pool, one cache or ring operation for all.
    #[inline]
    pub fn put_bulk<const N: usize>(&self, b: &mut Burst<Mbuf, N>) {
        Local::for_call(self.inner()).put_bulk(b)
    }

    /// Takes `n` raw objects, all or none, like `rte_mempool_get_bulk`:
    /// nothing is touched. See [`Local::get_objs`].
    #[inline]
    pub fn get_objs<const N: usize>(&self, out: &mut PoolObjs<N>, n: usize) -> Result<(), Error> {
        Local::for_call(self.inner()).get_objs(out, n)
    }

    /// Returns the first `n` raw objects of `b` (all if fewer), like
    /// `rte_mempool_put_bulk`. See [`Local::put_objs`].
    #[inline]
    pub fn put_objs<const N: usize>(&self, b: &mut PoolObjs<N>, n: usize) {
        Local::for_call(self.inner()).put_objs(b, n)
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.inner().name
    }

    /// Number of mbufs.
    pub fn size(&self) -> usize {
        self.inner().size as usize
    }

    /// Free mbufs now (ring plus all caches; a snapshot).
    pub fn available(&self) -> usize {
        self.inner().free_count()
    }

    /// The DMA region holding the mbufs (to share or map it).
    pub fn region(&self) -> &DmaRegion {
        &self.inner().region
    }
}

/// A free object taken from a pool as it is, like the `void *` that
/// `rte_mempool_get` gives: its memory is not touched on the way out or
/// back, which makes it the cheapest way to move buffers that are not read
/// yet (refilling an RX ring, say). Objects are taken and returned in bulk
/// through a [`PoolObjs`]; one taken out of it becomes an [`Mbuf`] at no
/// cost ([`PoolObj::into_mbuf`]), or returns to its pool when dropped.
#[repr(transparent)]
pub struct PoolObj(NonNull<MbufHdr>);

// SAFETY: a `PoolObj` owns its free object exclusively, as an `Mbuf` does.
unsafe impl Send for PoolObj {}

impl PoolObj {
    /// The object as an mbuf (free objects are kept reset).
    #[inline(always)]
    pub fn into_mbuf(self) -> Mbuf {
        let p = self.0;
        std::mem::forget(self);
        // SAFETY: a free object we own, reset.
        unsafe { Mbuf::from_obj(p) }
    }
}

impl Drop for PoolObj {
    fn drop(&mut self) {
        // SAFETY: we own the free object; its pool outlives it (pools with
        // objects out are never freed). It is still reset.
        unsafe {
            let pool = &*(*self.0.as_ptr()).pool;
            pool.put_one(self.0);
        }
    }
}

impl std::fmt::Debug for PoolObj {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PoolObj({:p})", self.0)
    }
}

/// Raw objects of one pool held together, as the `void *` array that
/// DPDK's `rte_mempool_get_bulk` fills and `rte_mempool_put_bulk` empties.
/// It remembers the pool that filled it (only [`Local::get_objs`] adds
/// objects), so returning them there takes no check per object: keeping
/// another pool's objects out of a pool is one comparison per bulk, of
/// the burst's pool with the one it is returned to. Objects leave one by one with
/// [`PoolObjs::pop`]; dropping the burst returns what it holds.
pub struct PoolObjs<const N: usize> {
    /// Address of the `PoolInner` whose objects these are (0: none yet).
    /// That pool stays alive while any of its objects is out.
    pool: usize,
    objs: Burst<PoolObj, N>,
}

impl<const N: usize> PoolObjs<N> {
    /// An empty burst.
    pub const fn new() -> Self {
        PoolObjs {
            pool: 0,
            objs: Burst::new(),
        }
    }

    /// Objects held.
    pub fn len(&self) -> usize {
        self.objs.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.objs.is_empty()
    }

    /// Takes out the first object.
    pub fn pop(&mut self) -> Option<PoolObj> {
        self.objs.pop()
    }
}

impl<const N: usize> Default for PoolObjs<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> std::fmt::Debug for PoolObjs<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolObjs")
            .field("len", &self.len())
            .finish()
    }
}

/// Turns a free object just taken from the pool into an mbuf. Free objects
/// are already reset (at creation and on every return), so taking one does
/// not touch its memory.
#[inline(always)]
fn new_mbuf(o: Obj) -> Mbuf {
    // SAFETY: `o` is a free object of a live pool, taken by the caller.
    unsafe { Mbuf::from_obj(o.0) }
}

impl Drop for Mempool {
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        // Last handle? Nobody else can clone it then, so the count is exact.
        if Arc::strong_count(&inner) == 1 {
            let free = inner.free_count();
            if free != inner.size as usize {
                eprintln!(
                    "rpmd: warning: mempool {} dropped with {} of {} mbufs still in use; \
                     leaking its memory so they stay valid",
                    inner.name,
                    inner.size as usize - free,
                    inner.size
                );
                std::mem::forget(inner);
            }
        }
    }
}

impl std::fmt::Debug for Mempool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mempool")
            .field("name", &self.name())
            .field("size", &self.size())
            .field("available", &self.available())
            .finish()
    }
}
