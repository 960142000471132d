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
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

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

/// One lcore's cache; only the thread holding that lcore id touches
/// `objs`, and `len` is atomic only so that the pool's drop can count.
struct Cache {
    len: AtomicU32,
    objs: UnsafeCell<Box<[Obj]>>,
}

pub(crate) struct PoolInner {
    name: String,
    size: u32,
    cache_size: u32,
    flush_threshold: u32,
    tx: Producer<Obj, Multi, Multi>,
    rx: Consumer<Obj, Multi, Multi>,
    caches: Box<[OnceLock<Box<CachePadded<Cache>>>]>,
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
    fn cache(&self) -> Option<&Cache> {
        if self.cache_size == 0 {
            return None;
        }
        let id = lcore::current()?;
        let cap = (self.cache_size * 3) as usize;
        Some(self.caches[id].get_or_init(|| {
            Box::new(CachePadded::new(Cache {
                len: AtomicU32::new(0),
                objs: UnsafeCell::new(vec![Obj::DANGLING; cap].into_boxed_slice()),
            }))
        }))
    }

    /// Appends `n` free objects to `out` (which has room), all or none.
    #[inline]
    fn get_raw<const N: usize>(&self, out: &mut Burst<Obj, N>, n: usize) -> bool {
        if let Some(c) = self.cache() {
            // SAFETY: this thread holds the lcore id owning `c`, so nobody
            // else touches `objs`.
            let objs = unsafe { &mut *c.objs.get() };
            let mut len = c.len.load(Ordering::Relaxed) as usize;
            if n > len && n <= self.cache_size as usize {
                // Refill to `cache_size` plus what this request takes.
                let req = n + self.cache_size as usize - len;
                if self.rx.dequeue_bulk(&mut objs[len..len + req]).n == req {
                    len += req;
                }
            }
            if n <= len {
                // LIFO: the most recently freed (cache-hot) objects first.
                for o in objs[len - n..len].iter().rev() {
                    let _ = out.push(*o);
                }
                c.len.store((len - n) as u32, Ordering::Relaxed);
                return true;
            }
        }
        self.rx.dequeue_bulk_into(out, n).n == n
    }

    /// Returns free objects.
    #[inline]
    fn put_raw(&self, objs_in: &[Obj]) {
        let n = objs_in.len();
        if let Some(c) = self.cache() {
            if n as u32 <= self.flush_threshold {
                // SAFETY: as in `get_raw`.
                let objs = unsafe { &mut *c.objs.get() };
                let mut len = c.len.load(Ordering::Relaxed) as usize;
                objs[len..len + n].copy_from_slice(objs_in);
                len += n;
                if len >= self.flush_threshold as usize {
                    let keep = self.cache_size as usize;
                    let t = self.tx.enqueue_bulk(&objs[keep..len]);
                    debug_assert_eq!(t.n, len - keep, "pool ring holds every object");
                    len = keep;
                }
                c.len.store(len as u32, Ordering::Relaxed);
                return;
            }
        }
        let t = self.tx.enqueue_bulk(objs_in);
        debug_assert_eq!(t.n, n, "pool ring holds every object");
    }

    /// Returns one object (an mbuf segment being dropped, already reset).
    #[inline]
    pub(crate) fn put_one(&self, p: NonNull<MbufHdr>) {
        self.put_raw(&[Obj(p)]);
    }

    fn free_count(&self) -> usize {
        self.rx.len()
            + self
                .caches
                .iter()
                .filter_map(|c| c.get())
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
        if cfg.iova_mode == IovaMode::Pa && region.page_size() != PageSize::Huge2M {
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
            caches: (0..MAX_LCORES).map(|_| OnceLock::new()).collect(),
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

    /// Takes one mbuf (reset: no data, full headroom).
    #[inline]
    pub fn get(&self) -> Result<Mbuf, Error> {
        let mut o: Burst<Obj, 1> = Burst::new();
        if self.inner().get_raw(&mut o, 1) {
            if let Some(o) = o.pop() {
                return Ok(new_mbuf(o));
            }
        }
        Err(self.exhausted(1))
    }

    /// Appends exactly `n` mbufs to `out`, or none (pool short of `n`, or
    /// `out` short of room).
    #[inline]
    pub fn get_bulk<const N: usize>(
        &self,
        out: &mut Burst<Mbuf, N>,
        n: usize,
    ) -> Result<(), Error> {
        if n > N - out.len() {
            return Err(Error::Invalid {
                what: "bulk size",
                detail: format!("{n} mbufs into a burst with room for {}", N - out.len()),
            });
        }
        let mut objs: Burst<Obj, N> = Burst::new();
        if !self.inner().get_raw(&mut objs, n) {
            return Err(self.exhausted(n));
        }
        while let Some(o) = objs.pop() {
            // Room was checked above, so the push cannot fail (and a
            // returned mbuf would go back to the pool on drop).
            let _ = out.push(new_mbuf(o));
        }
        Ok(())
    }

    /// Returns every mbuf in `b` to its pool in one pass (any pool; chained
    /// mbufs segment by segment). Same effect as dropping them, fewer ring
    /// operations when they share this pool.
    pub fn put_bulk<const N: usize>(&self, b: &mut Burst<Mbuf, N>) {
        let me: *const PoolInner = self.inner();
        let mut objs: Burst<Obj, N> = Burst::new();
        while let Some(m) = b.pop() {
            let p = m.into_raw().cast::<MbufHdr>();
            // SAFETY: `p` is an mbuf we owned; only its header is read.
            let (pool, next) = unsafe { ((*p.as_ptr()).pool, (*p.as_ptr()).next) };
            if pool == me && next.is_null() {
                // SAFETY: still ours until it is in the pool; reset it for
                // the next user.
                unsafe { (*p.as_ptr()).reset() };
                let _ = objs.push(Obj(p));
            } else {
                // Another pool, or a chain: the per-segment path.
                // SAFETY: `p` came from `into_raw` just above.
                drop(unsafe { Mbuf::from_raw(p.cast()) });
            }
        }
        self.inner().put_raw(&objs);
    }

    fn exhausted(&self, wanted: usize) -> Error {
        let i = self.inner();
        Error::Exhausted {
            pool: i.name.clone(),
            size: i.size,
            wanted,
        }
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
