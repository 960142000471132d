//! The shared ring and its producer and consumer handles.
#![allow(unsafe_code)]
use crate::burst::Burst;
use crate::mode::{Behavior, Multi, Reservation, SharedMode, SyncMode};
use crate::slots::Slots;
use crate::Error;
use crossbeam_utils::CachePadded;
use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::sync::Arc;

/// Largest capacity a ring can have (2^31, as DPDK's `RTE_RING_SZ_MASK`):
/// with free-running 32-bit indices the distance between head and tail must
/// stay below 2^31 to be unambiguous.
pub const MAX_CAPACITY: usize = 1 << 31;

/// The result of a bulk or burst call: how many values moved, and what was
/// left afterwards (free slots after an enqueue, full slots after a
/// dequeue), like DPDK's `free_space`/`available` out-parameters.
///
/// `left` is a lower bound: to avoid a cache miss per call, each side works
/// from its last view of the other side's tail while that view shows enough
/// room or values, so the other side may have made more available since.
/// When a call moves fewer than asked, it has just loaded the other side's
/// real tail, and `left` is then exact at that moment (`0`): a burst that
/// comes back short means the ring was seen empty (or full).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[must_use]
pub struct Transfer {
    /// Values moved: `0` or `n` for bulk calls, `0..=n` for burst calls.
    pub n: usize,
    /// Free slots (enqueue) or full slots (dequeue) seen after the call.
    pub left: usize,
}

/// The state two handles share: producer state, consumer state (each on its
/// own pair of cache lines) and the slots.
pub(crate) struct Shared<T, P: SyncMode, C: SyncMode> {
    prod: CachePadded<P::State>,
    cons: CachePadded<C::State>,
    pub(crate) slots: Slots<T>,
    cap: std::num::NonZeroU32,
}

/// A request's size as the modes take it (`n <= cap`, which their
/// cached-tail check relies on): a burst larger than the ring asks for the
/// whole ring; a bulk larger than the ring can never succeed (`None`).
#[inline(always)]
fn fit(n: u32, cap: u32, b: Behavior) -> Option<u32> {
    if n <= cap {
        Some(n)
    } else if b == Behavior::Variable {
        Some(cap)
    } else {
        None
    }
}

/// The reservation of a bulk larger than the ring: nothing, with `avail`
/// free (producer) or full (consumer) slots reported.
#[cold]
fn refused(avail: u32) -> Reservation {
    Reservation {
        start: 0,
        n: 0,
        left: avail,
        ready: false,
    }
}

impl<T, P: SyncMode, C: SyncMode> Shared<T, P, C> {
    #[inline(always)]
    fn cap(&self) -> u32 {
        self.cap.get()
    }

    #[inline(always)]
    pub(crate) fn reserve_enqueue(&self, n: u32, b: Behavior) -> Reservation {
        let cap = self.cap();
        let n = match fit(n, cap, b) {
            Some(n) => n,
            None => return refused(cap - self.len() as u32),
        };
        let cons = &self.cons;
        P::reserve(&self.prod, || C::tail(cons), cap, cap, n, b)
    }

    #[inline(always)]
    pub(crate) fn publish_enqueue(&self, start: u32, n: u32, ready: bool) {
        P::publish(&self.prod, start, n, ready)
    }

    #[inline(always)]
    pub(crate) fn reserve_dequeue(&self, n: u32, b: Behavior) -> Reservation {
        let cap = self.cap();
        let n = match fit(n, cap, b) {
            Some(n) => n,
            None => return refused(self.len() as u32),
        };
        let prod = &self.prod;
        C::reserve(&self.cons, || P::tail(prod), 0, cap, n, b)
    }

    #[inline(always)]
    pub(crate) fn publish_dequeue(&self, start: u32, n: u32, ready: bool) {
        C::publish(&self.cons, start, n, ready)
    }

    /// The slot count; for the zero-copy views (not built under loom).
    #[cfg(not(loom))]
    pub(crate) fn slots_len(&self) -> usize {
        self.cap() as usize
    }

    fn len(&self) -> usize {
        // Load the consumer tail first: the producer tail read after it is
        // at least as new, so the difference cannot go negative.
        let c = C::tail(&self.cons);
        let p = P::tail(&self.prod);
        (p.wrapping_sub(c) as usize).min(self.cap() as usize)
    }

    /// Moves up to `n` values from `src` into the ring.
    ///
    /// # Safety
    /// `src` points to `n` initialised values. The first `Transfer::n` of
    /// them are moved into the ring; the caller must not use or drop them.
    #[inline(always)]
    unsafe fn enqueue_raw(&self, src: *const T, n: usize, b: Behavior) -> Transfer {
        let n = n.min(u32::MAX as usize) as u32;
        let r = self.reserve_enqueue(n, b);
        if r.n != 0 {
            // SAFETY: the reservation gave us slots `start..start + n`, which
            // are empty; `src` has at least `r.n <= n` values.
            unsafe { self.slots.write(r.start, src, r.n as usize) };
            self.publish_enqueue(r.start, r.n, r.ready);
        }
        Transfer {
            n: r.n as usize,
            left: r.left as usize,
        }
    }

    /// Moves up to `n` values out of the ring into `dst`.
    ///
    /// # Safety
    /// `dst` has room for `n` values and holds none that need dropping.
    #[inline(always)]
    unsafe fn dequeue_raw(&self, dst: *mut T, n: usize, b: Behavior) -> Transfer {
        let n = n.min(u32::MAX as usize) as u32;
        let r = self.reserve_dequeue(n, b);
        if r.n != 0 {
            // SAFETY: the reservation gave us full slots `start..start + n`;
            // `dst` has room for `r.n <= n` values.
            unsafe { self.slots.read(r.start, dst, r.n as usize) };
            self.publish_dequeue(r.start, r.n, r.ready);
        }
        Transfer {
            n: r.n as usize,
            left: r.left as usize,
        }
    }
}

impl<T, P: SyncMode, C: SyncMode> Drop for Shared<T, P, C> {
    fn drop(&mut self) {
        // No handle is left, so no operation is in progress: everything
        // between the consumer tail and the producer tail is a live value.
        let c = C::tail(&self.cons);
        let p = P::tail(&self.prod);
        // SAFETY: those slots are full and nobody else can reach them.
        unsafe { self.slots.drop_range(c, p.wrapping_sub(c)) };
    }
}

/// The two ends of a new ring.
pub type Ends<T, P, C> = (Producer<T, P, C>, Consumer<T, P, C>);

/// Creates a ring of `capacity` slots (a power of two, at most
/// [`MAX_CAPACITY`]) and returns its two ends. The ring holds exactly
/// `capacity` values.
///
/// `P` and `C` choose the synchronisation mode of each side: [`Single`],
/// [`Multi`] or [`Hts`] (see [`crate::mode`]).
///
/// [`Single`]: crate::Single
/// [`Hts`]: crate::Hts
///
/// ```
/// use rpmd_ring::{Single, Multi};
/// let (tx, rx) = rpmd_ring::new::<u64, Multi, Single>(1024).unwrap();
/// let tx2 = tx.clone(); // multi-producer handles can be cloned
/// tx.enqueue(1).unwrap();
/// tx2.enqueue(2).unwrap();
/// assert_eq!(rx.dequeue(), Some(1));
/// assert_eq!(rx.dequeue(), Some(2));
/// ```
pub fn new<T, P: SyncMode, C: SyncMode>(capacity: usize) -> Result<Ends<T, P, C>, Error> {
    with_start_index(capacity, 0)
}

/// Like [`new`], with head and tail starting at `start` instead of 0. The
/// indices are free-running 32-bit counters, so this only matters for
/// testing their wrap-around at `u32::MAX`.
pub fn with_start_index<T, P: SyncMode, C: SyncMode>(
    capacity: usize,
    start: u32,
) -> Result<Ends<T, P, C>, Error> {
    if capacity == 0 {
        return Err(Error::ZeroCapacity);
    }
    if !capacity.is_power_of_two() {
        return Err(Error::NotPowerOfTwo { capacity });
    }
    if capacity > MAX_CAPACITY {
        return Err(Error::TooLarge {
            capacity,
            max: MAX_CAPACITY,
        });
    }
    let cap = capacity as u32;
    let slots = Slots::new(cap).ok_or(Error::Alloc { capacity })?;
    let shared = Arc::new(Shared {
        prod: CachePadded::new(P::new_state(start)),
        cons: CachePadded::new(C::new_state(start)),
        slots,
        cap: std::num::NonZeroU32::new(cap).ok_or(Error::ZeroCapacity)?,
    });
    Ok((
        Producer {
            ring: shared.clone(),
            _mode: PhantomData,
        },
        Consumer {
            ring: shared,
            _mode: PhantomData,
        },
    ))
}

/// The enqueue end of a ring.
///
/// A [`Multi`] or [`Hts`](crate::Hts) producer is `Clone` and `Sync`: give a
/// clone to each producing thread, or share one. A
/// [`Single`](crate::Single) producer is neither, so at most one thread
/// enqueues at a time.
pub struct Producer<T, P: SyncMode = Multi, C: SyncMode = Multi> {
    pub(crate) ring: Arc<Shared<T, P, C>>,
    _mode: PhantomData<P::Marker>,
}

/// The dequeue end of a ring; see [`Producer`] for the sharing rules.
pub struct Consumer<T, P: SyncMode = Multi, C: SyncMode = Multi> {
    pub(crate) ring: Arc<Shared<T, P, C>>,
    _mode: PhantomData<C::Marker>,
}

impl<T, P: SharedMode, C: SyncMode> Clone for Producer<T, P, C> {
    fn clone(&self) -> Self {
        Producer {
            ring: self.ring.clone(),
            _mode: PhantomData,
        }
    }
}

impl<T, P: SyncMode, C: SharedMode> Clone for Consumer<T, P, C> {
    fn clone(&self) -> Self {
        Consumer {
            ring: self.ring.clone(),
            _mode: PhantomData,
        }
    }
}

// SAFETY: the handles move `T`s between threads, so they are only `Send`
// for `T: Send`; `Sync` is further limited by `P::Marker` / `C::Marker`,
// which is `!Sync` for `Single`. The mode state itself is atomics.
unsafe impl<T: Send, P: SyncMode, C: SyncMode> Send for Producer<T, P, C> {}
// SAFETY: see above; `Sync` only when the producer mode allows sharing.
unsafe impl<T: Send, P: SyncMode, C: SyncMode> Sync for Producer<T, P, C> where P::Marker: Sync {}
// SAFETY: see above.
unsafe impl<T: Send, P: SyncMode, C: SyncMode> Send for Consumer<T, P, C> {}
// SAFETY: see above; `Sync` only when the consumer mode allows sharing.
unsafe impl<T: Send, P: SyncMode, C: SyncMode> Sync for Consumer<T, P, C> where C::Marker: Sync {}

macro_rules! common_methods {
    () => {
        /// Number of slots (a power of two).
        pub fn capacity(&self) -> usize {
            self.ring.cap() as usize
        }

        /// Values in the ring now (a snapshot when other threads are active).
        pub fn len(&self) -> usize {
            self.ring.len()
        }

        /// Whether the ring holds no values now.
        pub fn is_empty(&self) -> bool {
            self.len() == 0
        }

        /// Free slots now.
        pub fn free(&self) -> usize {
            self.capacity() - self.len()
        }
    };
}

impl<T, P: SyncMode, C: SyncMode> Producer<T, P, C> {
    common_methods!();

    /// Enqueues one value; a full ring gives it back.
    #[inline]
    pub fn enqueue(&self, value: T) -> Result<(), T> {
        let value = ManuallyDrop::new(value);
        // SAFETY: one initialised value; if it was moved we forget our copy
        // (ManuallyDrop), otherwise we take it back below.
        let t = unsafe { self.ring.enqueue_raw(&*value, 1, Behavior::Fixed) };
        if t.n == 1 {
            Ok(())
        } else {
            Err(ManuallyDrop::into_inner(value))
        }
    }

    /// Moves all values from the front of `src` into the ring, or none.
    /// Returns the count moved (`0` or `src.len()`) and the free slots left.
    /// A burst larger than the capacity can never fit and moves nothing.
    #[inline]
    pub fn enqueue_bulk_from<const N: usize>(&self, src: &mut Burst<T, N>) -> Transfer {
        self.enqueue_from(src, Behavior::Fixed)
    }

    /// Moves as many values from the front of `src` as fit; the rest stay
    /// in `src`, in order.
    #[inline]
    pub fn enqueue_burst_from<const N: usize>(&self, src: &mut Burst<T, N>) -> Transfer {
        self.enqueue_from(src, Behavior::Variable)
    }

    #[inline(always)]
    fn enqueue_from<const N: usize>(&self, src: &mut Burst<T, N>, b: Behavior) -> Transfer {
        let (ptr, len) = src.front_raw();
        // SAFETY: `front_raw` gives the burst's `len` live values; we tell
        // the burst that the first `t.n` of them moved out.
        let t = unsafe { self.ring.enqueue_raw(ptr, len, b) };
        src.advance_front(t.n);
        t
    }
}

impl<T: Copy, P: SyncMode, C: SyncMode> Producer<T, P, C> {
    /// Copies all of `src` into the ring, or nothing (DPDK's
    /// `enqueue_bulk`). Returns `0` or `src.len()` and the free slots left.
    #[inline]
    pub fn enqueue_bulk(&self, src: &[T]) -> Transfer {
        // SAFETY: `T: Copy`, so the caller keeps valid copies.
        unsafe {
            self.ring
                .enqueue_raw(src.as_ptr(), src.len(), Behavior::Fixed)
        }
    }

    /// Copies as many values from the front of `src` as fit (DPDK's
    /// `enqueue_burst`).
    #[inline]
    pub fn enqueue_burst(&self, src: &[T]) -> Transfer {
        // SAFETY: as above.
        unsafe {
            self.ring
                .enqueue_raw(src.as_ptr(), src.len(), Behavior::Variable)
        }
    }
}

impl<T, P: SyncMode, C: SyncMode> Consumer<T, P, C> {
    common_methods!();

    /// Dequeues one value, or `None` when the ring is empty.
    #[inline]
    pub fn dequeue(&self) -> Option<T> {
        let mut slot = std::mem::MaybeUninit::<T>::uninit();
        // SAFETY: room for one value, holding none.
        let t = unsafe { self.ring.dequeue_raw(slot.as_mut_ptr(), 1, Behavior::Fixed) };
        // SAFETY: the ring wrote one value when it reports one moved.
        (t.n == 1).then(|| unsafe { slot.assume_init() })
    }

    /// Appends exactly `n` values to `dst`, or none when the ring holds
    /// fewer or `dst` has room for fewer. Returns the count moved and the
    /// values left in the ring.
    #[inline]
    pub fn dequeue_bulk_into<const N: usize>(&self, dst: &mut Burst<T, N>, n: usize) -> Transfer {
        self.dequeue_into(dst, n, Behavior::Fixed)
    }

    /// Appends up to `n` values to `dst` (fewer when the ring holds fewer or
    /// `dst` has less room).
    #[inline]
    pub fn dequeue_burst_into<const N: usize>(&self, dst: &mut Burst<T, N>, n: usize) -> Transfer {
        self.dequeue_into(dst, n, Behavior::Variable)
    }

    #[inline(always)]
    fn dequeue_into<const N: usize>(
        &self,
        dst: &mut Burst<T, N>,
        n: usize,
        b: Behavior,
    ) -> Transfer {
        let (ptr, room) = dst.spare_raw();
        if b == Behavior::Fixed && n > room {
            let left = self.len();
            return Transfer { n: 0, left };
        }
        // SAFETY: `spare_raw` gives `room` uninitialised slots at the end
        // of the burst; we report how many we filled.
        let t = unsafe { self.ring.dequeue_raw(ptr, n.min(room), b) };
        dst.advance_back(t.n);
        t
    }
}

impl<T, P: SyncMode, C: SyncMode> Consumer<T, P, C> {
    /// Moves exactly `dst.len()` values into `dst`, or none, and returns
    /// the count and the values left. The first `t.n` slots are then
    /// initialised and owned by the caller (use them with
    /// `MaybeUninit::assume_init`, or they leak). For filling memory that
    /// is not yet initialised, such as [`Burst::spare_capacity_mut`].
    #[inline]
    pub fn dequeue_bulk_uninit(&self, dst: &mut [std::mem::MaybeUninit<T>]) -> Transfer {
        // SAFETY: `dst` has room for `dst.len()` values; MaybeUninit slots
        // may be overwritten without dropping anything.
        unsafe {
            self.ring
                .dequeue_raw(dst.as_mut_ptr().cast(), dst.len(), Behavior::Fixed)
        }
    }

    /// As [`dequeue_bulk_uninit`](Self::dequeue_bulk_uninit), moving as
    /// many values as the ring holds, up to `dst.len()`.
    #[inline]
    pub fn dequeue_burst_uninit(&self, dst: &mut [std::mem::MaybeUninit<T>]) -> Transfer {
        // SAFETY: as above.
        unsafe {
            self.ring
                .dequeue_raw(dst.as_mut_ptr().cast(), dst.len(), Behavior::Variable)
        }
    }
}

impl<T: Copy, P: SyncMode, C: SyncMode> Consumer<T, P, C> {
    /// Fills all of `dst` from the ring, or nothing (DPDK's
    /// `dequeue_bulk`). Returns `0` or `dst.len()` and the values left.
    #[inline]
    pub fn dequeue_bulk(&self, dst: &mut [T]) -> Transfer {
        // SAFETY: `T: Copy` has no drop to skip when overwritten.
        unsafe {
            self.ring
                .dequeue_raw(dst.as_mut_ptr(), dst.len(), Behavior::Fixed)
        }
    }

    /// Fills as much of the front of `dst` as the ring allows (DPDK's
    /// `dequeue_burst`).
    #[inline]
    pub fn dequeue_burst(&self, dst: &mut [T]) -> Transfer {
        // SAFETY: as above.
        unsafe {
            self.ring
                .dequeue_raw(dst.as_mut_ptr(), dst.len(), Behavior::Variable)
        }
    }
}

impl<T, P: SyncMode, C: SyncMode> fmt::Debug for Producer<T, P, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("mode", &P::NAME)
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish()
    }
}

impl<T, P: SyncMode, C: SyncMode> fmt::Debug for Consumer<T, P, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("mode", &C::NAME)
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish()
    }
}
