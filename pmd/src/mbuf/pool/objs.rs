//! [`LocalObjs`]: raw objects bound to one thread's view of a pool.
#![allow(unsafe_code)]

use super::{Local, PoolObj};
use crate::mempool::{CacheRef, Obj, PoolInner};
use crate::Error;
use std::marker::PhantomData;
use std::mem::MaybeUninit;

/// Raw objects bound to one thread's view of a pool: the `void *` array,
/// pool and cache that DPDK code passes to `rte_mempool_generic_get/put`,
/// as one value ([`Local::objs`]). Only the view fills it, so its objects
/// go back with no check of which pool they come from, not even the one
/// per bulk a [`PoolObjs`](super::PoolObjs) makes. Objects leave one by
/// one with [`LocalObjs::pop`]; dropping it returns what it holds.
///
/// Gets append, puts take from the front (FIFO, like a
/// [`Burst`](rpmd_ring::Burst)).
pub struct LocalObjs<'v, 'a, const N: usize> {
    // The view's pool and cache, copied rather than reached through the
    // view, so a loop keeps them in registers; the borrow of the view
    // keeps its lcore pin, and with it the cache, alive.
    inner: &'a PoolInner,
    cache: Option<CacheRef<'a>>,
    /// The objects held are `buf[start..end]`; `start <= end <= N`.
    start: usize,
    end: usize,
    /// On the heap (allocated once, here): the pool's out-of-line paths are
    /// handed a pointer into it, and were it in this struct, the compiler
    /// would have to keep `start` and `end` in memory around every call,
    /// a store and a reload per get and put (callgrind, bulks of 1).
    buf: Box<[MaybeUninit<Obj>; N]>,
    _view: PhantomData<&'v Local<'a>>,
}

impl<'a, const N: usize> LocalObjs<'_, 'a, N> {
    pub(super) fn new(inner: &'a PoolInner, cache: Option<CacheRef<'a>>) -> Self {
        LocalObjs {
            inner,
            cache,
            start: 0,
            end: 0,
            buf: Box::new([const { MaybeUninit::uninit() }; N]),
            _view: PhantomData,
        }
    }

    /// Takes `n` more objects from the pool, all or none (pool short of
    /// `n`, or room for fewer): nothing is touched.
    #[inline]
    pub fn get(&mut self, n: usize) -> Result<(), Error> {
        if n > N - self.end {
            self.compact();
            if n > N - self.end {
                return Err(super::local::no_room(n, N - self.end));
            }
        }
        // SAFETY: `end + n <= N`, checked above.
        let dst = unsafe { self.buf.get_unchecked_mut(self.end..self.end + n) };
        if !self.inner.get_into(self.cache, dst) {
            return Err(self.inner.exhausted(n));
        }
        self.end += n;
        Ok(())
    }

    /// Returns the first `n` objects (all if fewer) to the pool.
    #[inline]
    pub fn put(&mut self, n: usize) {
        let n = n.min(self.end - self.start);
        // SAFETY: `start + n <= end <= N`; `buf[start..end]` hold objects
        // of this view's pool (only `get` adds them), initialised, and
        // `MaybeUninit<Obj>` has `Obj`'s layout. Each goes back once: the
        // front advances past them below.
        let objs = unsafe {
            let live = self.buf.get_unchecked(self.start..self.start + n);
            &*(live as *const [MaybeUninit<Obj>] as *const [Obj])
        };
        self.inner.put_raw(self.cache, objs);
        self.advance(n);
    }

    /// Objects held.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Takes out the first object (it returns to its pool when dropped).
    pub fn pop(&mut self) -> Option<PoolObj> {
        if self.is_empty() {
            return None;
        }
        // SAFETY: `buf[start]` is a held object; advancing the front hands
        // it over.
        let o = unsafe { self.buf[self.start].assume_init() };
        self.advance(1);
        Some(PoolObj(o.0.cast()))
    }

    #[inline(always)]
    fn advance(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Moves the objects held to the front of the array.
    #[cold]
    fn compact(&mut self) {
        if self.start != 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
    }
}

impl<const N: usize> Drop for LocalObjs<'_, '_, N> {
    fn drop(&mut self) {
        self.put(usize::MAX);
    }
}

impl<const N: usize> std::fmt::Debug for LocalObjs<'_, '_, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalObjs")
            .field("pool", &self.inner.name)
            .field("len", &self.len())
            .finish()
    }
}
