//! [`Local`]: one thread's view of a mempool, holding its lcore cache.
#![allow(unsafe_code)]

use super::{new_mbuf, Cache, Obj, PoolInner, PoolObj};
use crate::lcore;
use crate::mbuf::Mbuf;
use crate::Error;
use rpmd_ring::Burst;
use std::marker::PhantomData;
use std::mem::MaybeUninit;

/// Types a free pool object can be handed out as, untouched.
///
/// # Safety
/// `Self` is `repr(transparent)` over `NonNull<MbufHdr>` (the layout of
/// `Obj`), and a free object of a live pool is a valid, owned `Self`.
unsafe trait FreeObject {}
// SAFETY: `Mbuf` is `repr(transparent)` over `NonNull<MbufHdr>`; free
// objects are kept reset, so each is a ready mbuf.
unsafe impl FreeObject for Mbuf {}
// SAFETY: `PoolObj` is `repr(transparent)` over `NonNull<MbufHdr>` and
// owns one free object.
unsafe impl FreeObject for PoolObj {}

/// A mempool as seen from one thread: the pool plus this thread's lcore
/// cache, looked up once ([`Mempool::local`](super::Mempool::local)).
/// Every get and put then checks only that the thread still holds that
/// lcore id (one thread-local load) before touching the cache; a thread
/// that has lost its id (during exit) falls back to the shared ring.
///
/// Not `Send` or `Sync`: the cache belongs to this thread.
///
/// ```compile_fail
/// fn send<T: Send>(_: T) {}
/// let p = rpmd_pmd::Mempool::new(&rpmd_pmd::MempoolConfig::new("x", 64)).unwrap();
/// send(p.local());
/// ```
pub struct Local<'a> {
    inner: &'a PoolInner,
    cache: Option<(&'a Cache, usize)>,
    _thread: PhantomData<*const ()>,
}

impl std::fmt::Debug for Local<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Local")
            .field("pool", &self.inner.name)
            .field("lcore", &self.cache.map(|c| c.1))
            .finish()
    }
}

impl<'a> Local<'a> {
    #[inline(always)]
    pub(super) fn new(inner: &'a PoolInner) -> Self {
        let cache = lcore::current().and_then(|id| inner.cache_of(id).map(|c| (c, id)));
        Local {
            inner,
            cache,
            _thread: PhantomData,
        }
    }

    /// The cache, while this thread still holds the lcore id it was taken
    /// for (the id is only given up at thread exit).
    #[inline(always)]
    fn cache(&self) -> Option<&'a Cache> {
        let (c, id) = self.cache?;
        lcore::is_current(id).then_some(c)
    }

    /// Takes one mbuf (reset: no data, full headroom).
    #[inline]
    pub fn get(&self) -> Result<Mbuf, Error> {
        let mut o = [MaybeUninit::<Obj>::uninit()];
        if self.inner.get_into(self.cache(), &mut o) {
            // SAFETY: `get_into` filled the slot with a free object.
            return Ok(new_mbuf(unsafe { o[0].assume_init() }));
        }
        Err(self.inner.exhausted(1))
    }

    /// Appends exactly `n` mbufs to `out`, or none (pool short of `n`, or
    /// `out` short of room). The objects are copied straight into `out`'s
    /// free slots; none is touched.
    #[inline]
    pub fn get_bulk<const N: usize>(
        &self,
        out: &mut Burst<Mbuf, N>,
        n: usize,
    ) -> Result<(), Error> {
        self.take_into(out, n)
    }

    /// Fills `n` of `out`'s free slots with free objects, as `T`.
    #[inline(always)]
    fn take_into<T: FreeObject, const N: usize>(
        &self,
        out: &mut Burst<T, N>,
        n: usize,
    ) -> Result<(), Error> {
        let spare = out.spare_capacity_mut();
        if n > spare.len() {
            return Err(Error::Invalid {
                what: "bulk size",
                detail: format!("{n} objects into a burst with room for {}", spare.len()),
            });
        }
        // SAFETY: `T: FreeObject` has `Obj`'s layout, and a free object
        // written there is a valid, owned `T`.
        let dst =
            unsafe { &mut *(&mut spare[..n] as *mut [MaybeUninit<T>] as *mut [MaybeUninit<Obj>]) };
        if !self.inner.get_into(self.cache(), dst) {
            return Err(self.inner.exhausted(n));
        }
        // SAFETY: `get_into` initialised all `n` slots.
        unsafe { out.assume_init_back(n) };
        Ok(())
    }

    /// Returns every mbuf in `b` to its pool (any pool; chained mbufs
    /// segment by segment). Same effect as dropping them; when they are all
    /// single segments of this pool, one cache or ring operation for all.
    #[inline]
    pub fn put_bulk<const N: usize>(&self, b: &mut Burst<Mbuf, N>) {
        let me: *const PoolInner = self.inner;
        let all_ours = b.iter().all(|m| {
            let p = m.as_hdr();
            // SAFETY: we own `m`; only its header is read.
            unsafe { (*p.as_ptr()).pool == me && (*p.as_ptr()).next.is_null() }
        });
        if !all_ours {
            while let Some(m) = b.pop() {
                drop(m);
            }
            return;
        }
        for m in b.iter_mut() {
            // SAFETY: still ours until it is in the pool; reset it for the
            // next user (free objects are kept reset).
            unsafe { (*m.as_hdr().as_ptr()).reset() };
        }
        // SAFETY: same layout as above; the objects go back to the pool and
        // the burst forgets them, so each is returned exactly once.
        let objs = unsafe { &*(&b[..] as *const [Mbuf] as *const [Obj]) };
        self.inner.put_raw(self.cache(), objs);
        let n = b.len();
        // SAFETY: all `n` values were handed to the pool above.
        unsafe { b.forget_front(n) };
    }

    /// Takes `n` raw objects, all or none, like `rte_mempool_get_bulk`:
    /// nothing is touched. See [`PoolObj`].
    #[inline]
    pub fn get_objs<const N: usize>(
        &self,
        out: &mut Burst<PoolObj, N>,
        n: usize,
    ) -> Result<(), Error> {
        self.take_into(out, n)
    }

    /// Returns the first `n` raw objects of `b` (all if fewer), like
    /// `rte_mempool_put_bulk`. Objects of another pool are recognised by
    /// address (without touching them) and go back to their own pool.
    #[inline]
    pub fn put_objs<const N: usize>(&self, b: &mut Burst<PoolObj, N>, n: usize) {
        let n = n.min(b.len());
        let inner = self.inner;
        if inner.owns_all(&b[..n]) {
            // SAFETY: same layout; each object is handed back once and the
            // burst forgets it.
            let objs = unsafe { &*(&b[..n] as *const [PoolObj] as *const [Obj]) };
            inner.put_raw(self.cache(), objs);
            // SAFETY: the first `n` were returned above.
            unsafe { b.forget_front(n) };
        } else {
            for _ in 0..n {
                drop(b.pop());
            }
        }
    }
}
