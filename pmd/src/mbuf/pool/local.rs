//! [`Local`]: one thread's view of a mempool, holding its lcore cache.
#![allow(unsafe_code)]

use super::{new_mbuf, LocalObjs, PoolObj, PoolObjs};
use crate::lcore;
use crate::mbuf::Mbuf;
use crate::mempool::{CacheRef, Obj, PoolInner};
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
/// cache, looked up once ([`Mempool::local`](super::Mempool::local)). The
/// view pins the thread's lcore id ([`lcore::Pin`]), so the id stays this
/// thread's, and the cache with it, for as long as the view lives, even
/// through thread exit: gets and puts use the cache with no check.
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
    /// This thread's cache: its lcore id is held by `_pin`, or, in a
    /// view made for one `Mempool` call, cannot be given back before the
    /// call returns.
    cache: Option<CacheRef<'a>>,
    _pin: Option<lcore::Pin>,
    _thread: PhantomData<*const ()>,
}

impl std::fmt::Debug for Local<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Local")
            .field("pool", &self.inner.name)
            .field("lcore", &self._pin.as_ref().map(|p| p.id()))
            .finish()
    }
}

impl<'a> Local<'a> {
    #[inline]
    pub(super) fn new(inner: &'a PoolInner) -> Self {
        let pin = lcore::Pin::new();
        let cache = pin.as_ref().and_then(|p| inner.cache_of(p.id()));
        Local {
            inner,
            cache,
            // Without a cache (caching off) there is nothing to pin for.
            _pin: pin.filter(|_| cache.is_some()),
            _thread: PhantomData,
        }
    }

    /// A view for the length of one [`Mempool`](super::Mempool) method
    /// call: the cache of the thread's lcore id, without a pin. The id
    /// cannot be given back during the call (only the thread's exit gives
    /// it back, and from then on the thread has none, so no cache).
    #[inline(always)]
    pub(super) fn for_call(inner: &'a PoolInner) -> Self {
        Local {
            inner,
            cache: inner.cache(),
            _pin: None,
            _thread: PhantomData,
        }
    }

    /// Takes one mbuf (reset: no data, full headroom).
    #[inline]
    pub fn get(&self) -> Result<Mbuf, Error> {
        let mut o = [MaybeUninit::<Obj>::uninit()];
        if self.inner.get_into(self.cache, &mut o) {
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
            return Err(no_room(n, spare.len()));
        }
        // SAFETY: `T: FreeObject` has `Obj`'s layout, and a free object
        // written there is a valid, owned `T`.
        let dst =
            unsafe { &mut *(&mut spare[..n] as *mut [MaybeUninit<T>] as *mut [MaybeUninit<Obj>]) };
        if !self.inner.get_into(self.cache, dst) {
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
        // Every mbuf of a pool has the pool's headroom: read from the
        // first (only its header's second line holds it).
        let headroom = match b.first() {
            // SAFETY: we own the mbuf; only its header is read.
            Some(m) => unsafe { (*m.as_hdr().as_ptr()).headroom },
            None => return,
        };
        // One pass: each is checked (this pool's, one segment) and reset
        // for the next user (free objects are kept reset).
        let mut ours = 0;
        for m in b.iter_mut() {
            let p = m.as_hdr().as_ptr();
            // SAFETY: we own `m` and it is still ours until it is in the
            // pool; only its header is read and written.
            unsafe {
                if (*p).pool != me || !(*p).next.is_null() {
                    break;
                }
                (*p).reset_to(headroom);
            }
            ours += 1;
        }
        if ours < b.len() {
            // Another pool's, or a chain: one by one (a reset one is
            // returned as it is).
            while let Some(m) = b.pop() {
                drop(m);
            }
            return;
        }
        // SAFETY: same layout as above; the objects go back to the pool and
        // the burst forgets them, so each is returned exactly once.
        let objs = unsafe { &*(&b[..] as *const [Mbuf] as *const [Obj]) };
        self.inner.put_raw(self.cache, objs);
        let n = b.len();
        // SAFETY: all `n` values were handed to the pool above.
        unsafe { b.forget_front(n) };
    }

    /// Takes `n` raw objects into `out`, all or none, like
    /// `rte_mempool_get_bulk`: nothing is touched. `out` holds one pool's
    /// objects at a time: asking another pool to fill it while it holds
    /// objects is an error.
    #[inline]
    pub fn get_objs<const N: usize>(&self, out: &mut PoolObjs<N>, n: usize) -> Result<(), Error> {
        let me = self.inner as *const PoolInner as usize;
        if out.pool != me {
            if !out.objs.is_empty() {
                return Err(Error::Invalid {
                    what: "object burst",
                    detail: format!(
                        "objects of pool {} asked into a burst holding another pool's",
                        self.inner.name
                    ),
                });
            }
            out.pool = me;
        }
        self.take_into(&mut out.objs, n)
    }

    /// Returns the first `n` raw objects of `b` (all if fewer), like
    /// `rte_mempool_put_bulk`. The burst knows their pool, so when it is
    /// this one nothing is checked per object; another pool's go back to
    /// it one by one.
    #[inline]
    pub fn put_objs<const N: usize>(&self, b: &mut PoolObjs<N>, n: usize) {
        let n = n.min(b.objs.len());
        if b.pool == self.inner as *const PoolInner as usize {
            // SAFETY: same layout; every object in `b` is this pool's (the
            // burst is only filled by its pool's `get_objs`), each is
            // handed back once, and the burst forgets it.
            let objs = unsafe { &*(&b.objs[..n] as *const [PoolObj] as *const [Obj]) };
            self.inner.put_raw(self.cache, objs);
            // SAFETY: the first `n` were returned above.
            unsafe { b.objs.forget_front(n) };
        } else {
            for _ in 0..n {
                drop(b.objs.pop());
            }
        }
    }

    /// An empty [`LocalObjs`] of up to `N` objects bound to this view.
    pub fn objs<const N: usize>(&self) -> LocalObjs<'_, 'a, N> {
        LocalObjs::new(self.inner, self.cache)
    }
}

/// A bulk of `n` asked into a burst with room for `room`.
#[cold]
pub(super) fn no_room(n: usize, room: usize) -> Error {
    Error::Invalid {
        what: "bulk size",
        detail: format!("{n} objects into a burst with room for {room}"),
    }
}
