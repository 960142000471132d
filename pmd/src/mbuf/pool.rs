//! The packet-buffer pool (`rte_pktmbuf_pool_create`): a [`crate::mempool`]
//! whose objects are an mbuf header and its buffer.
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

use super::{Mbuf, MbufHdr};
use crate::dma::{DmaRegion, IovaMode};
use crate::mempool::{Obj, PoolInner, PoolSpec};
use crate::Error;
use rpmd_ring::Burst;
use std::ptr::NonNull;
use std::sync::Arc;

mod local;
mod objs;
pub use local::Local;
pub use objs::LocalObjs;

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
    /// [`CACHE_MAX_SIZE`](crate::mempool::CACHE_MAX_SIZE)).
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

/// A pool of mbufs; cloning gives another handle to the same pool.
///
/// ```
/// use rpmd_pmd::{Mempool, MempoolConfig};
/// let pool = Mempool::new(&MempoolConfig::new("doc", 512))?;
/// let mut m = pool.get()?; // an mbuf, reset and empty
/// m.append(4).unwrap().copy_from_slice(b"ping");
/// assert_eq!((m.data(), pool.available()), (&b"ping"[..], 511));
/// drop(m); // back to the pool
/// assert_eq!(pool.available(), 512);
/// # Ok::<(), rpmd_pmd::Error>(())
/// ```
#[derive(Clone)]
pub struct Mempool {
    inner: Option<Arc<PoolInner>>,
    /// Every mbuf's buffer length (headroom + data room).
    buf_len: u16,
    /// Every mbuf's headroom when fresh.
    headroom: u16,
}

impl Mempool {
    /// Whether `self` and `other` are handles of one pool.
    pub fn same(&self, other: &Mempool) -> bool {
        match (&self.inner, &other.inner) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Creates the pool: its DMA region (hugepages when free), the mbuf
    /// headers, and the ring holding all of them.
    pub fn new(cfg: &MempoolConfig) -> Result<Self, Error> {
        let buf_len = cfg.headroom as usize + cfg.data_room as usize;
        if buf_len > u16::MAX as usize {
            return Err(Error::Invalid {
                what: "mbuf buffer size",
                detail: format!("headroom + data room = {buf_len} > 65535"),
            });
        }
        // Objects are whole cache lines: the header, then the buffer.
        let spec = PoolSpec {
            name: &cfg.name,
            size: cfg.size,
            cache_size: cfg.cache_size,
            obj_size: (HDR + buf_len).next_multiple_of(64),
            iova_mode: cfg.iova_mode,
        };
        let inner = PoolInner::create(&spec, |obj, off, region, pool| {
            let buf_off = off + HDR;
            // SAFETY: `obj` is the start of an object of `obj_size` bytes
            // inside the new region, 64-byte aligned (pages are, and
            // `obj_size` is a multiple of 64), not yet in use; the buffer
            // follows the header inside it.
            unsafe {
                obj.cast::<MbufHdr>().write(MbufHdr::new(
                    region.as_ptr().add(buf_off),
                    region.iova_in_bounds(buf_off),
                    buf_len as u16,
                    cfg.headroom,
                    pool,
                ))
            };
        })?;
        Ok(Mempool {
            inner: Some(inner),
            buf_len: buf_len as u16,
            headroom: cfg.headroom,
        })
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

    /// Every mbuf's buffer length: headroom plus data room.
    pub fn buf_len(&self) -> usize {
        self.buf_len as usize
    }

    /// Every mbuf's headroom when fresh.
    pub fn headroom(&self) -> usize {
        self.headroom as usize
    }

    /// Every mbuf's data room: what a fresh mbuf can hold after its
    /// headroom.
    pub fn data_room(&self) -> usize {
        (self.buf_len - self.headroom) as usize
    }

    /// The DMA region holding the mbufs (to share or map it).
    pub fn region(&self) -> &DmaRegion {
        &self.inner().region
    }

    /// The mbuf whose buffer holds byte `offset` of [`region`](Self::region),
    /// for drivers whose device names buffers by their place in a shared
    /// area (AF_XDP's UMEM offsets): `None` when the byte is outside every
    /// buffer (in a header, in padding, past the end). Arithmetic only; a
    /// driver keeps its own table of the mbufs it posted by index.
    pub fn buffer_at(&self, offset: usize) -> Option<BufferSlot> {
        let inner = self.inner();
        let (index, obj) = inner.object_at(offset)?;
        let (buf_offset, buf_len) = (obj + HDR, self.buf_len as usize);
        (offset >= buf_offset && offset < buf_offset + buf_len).then_some(BufferSlot {
            index,
            buf_offset,
            buf_len,
        })
    }

    /// Where `m`'s buffer sits, when `m` is one of this pool's mbufs (one
    /// lookup gives both its index and its region offset).
    pub fn slot_of(&self, m: &Mbuf) -> Option<BufferSlot> {
        let base = self.inner().region.as_ptr() as usize;
        let off = (m.buf_addr() as usize).checked_sub(base)?;
        self.buffer_at(off).filter(|s| s.buf_offset == off)
    }
}

/// Where a byte of a pool's region falls ([`Mempool::buffer_at`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferSlot {
    /// The mbuf's index in the pool, `0..size()`.
    pub index: usize,
    /// Region offset of its buffer's first byte (the headroom's start).
    pub buf_offset: usize,
    /// Its buffer's length (headroom + data room).
    pub buf_len: usize,
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
            pool.put_one(self.0.cast());
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
    unsafe { Mbuf::from_obj(o.0.cast()) }
}

/// Pools whose last handle was dropped with mbufs still in use, and whose
/// memory was leaked so that those stay valid (see [`Mempool`]'s drop).
static LEAKED_POOLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many pools this process has leaked so far: each was dropped (its
/// last handle) with mbufs still out, and warned about on stderr.
pub fn leaked_pools() -> u64 {
    LEAKED_POOLS.load(std::sync::atomic::Ordering::Relaxed)
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
                LEAKED_POOLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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
