//! Producer/consumer synchronisation modes, chosen per side as type
//! parameters of the ring: [`Single`], [`Multi`] and [`Hts`].
//!
//! Each mode owns the state of one side (its head and tail) and implements
//! three steps, the same for the producer and the consumer side:
//!
//! 1. `reserve`: move this side's head by up to `n` slots, after checking
//!    against the *other* side's tail that the slots are free (producer) or
//!    full (consumer). The slots between the old and the new head now belong
//!    to the calling thread.
//! 2. (the caller copies values into or out of those slots)
//! 3. `publish`: move this side's tail over the slots, handing them to the
//!    other side.
//!
//! Ordering labels used below (each names its partner):
//! - `T1` (Release store of a tail) pairs with `T2` (Acquire load of that
//!   tail by the other side): values written into slots before `T1` are
//!   visible to the consumer that loads the tail at `T2`; for the consumer
//!   tail, the consumer's reads of slots happen before the producer's later
//!   writes into the same slots.
//! - `C1` (Release store of the cached other-tail) pairs with `C2` (Acquire
//!   load of the cache by another thread of the same side), extending the
//!   `T1`/`T2` edge to threads that use the cached value instead of loading
//!   the tail themselves.
//! - `H1` (Acquire load of this side's head before the other tail is read)
//!   keeps the other tail's load from being satisfied before the head's,
//!   and pairs with `H2` (Release of the head's CAS in [`Multi`]): a thread
//!   that sees another's head also sees the tail that head was claimed
//!   against, so the free/used count is never computed from a loaded tail
//!   older than the head. A *cached* tail can be that old; the range check
//!   in `claim` catches it and loads the real one.
//! - `M1` (Acquire load of this side's tail while waiting for earlier
//!   threads, [`Multi`]) pairs with their `T1`, so that our `T1` carries
//!   their slot accesses too (a plain store does not extend a release
//!   sequence).
use crate::primitive::{spin_hint, yield_cpu, AtomicU32, AtomicU64, Ordering};
use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::marker::PhantomData;

pub(crate) use private::{Behavior, Reservation};

pub(crate) mod private {

    /// Whether a request is all-or-nothing (bulk) or as-many-as-possible (burst).
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    pub enum Behavior {
        /// Exactly `n` or nothing (`*_bulk`).
        Fixed,
        /// Up to `n` (`*_burst`).
        Variable,
    }

    /// The outcome of a reservation.
    #[derive(Clone, Copy, Debug)]
    pub struct Reservation {
        /// The head before the reservation: the first reserved index.
        pub start: u32,
        /// How many slots were reserved.
        pub n: u32,
        /// Free (producer) or full (consumer) slots left after this one.
        pub left: u32,
        /// Every earlier reservation on this side was already published
        /// when this one was made, so `publish` need not wait ([`Multi`];
        /// the other modes never wait and ignore it).
        ///
        /// [`Multi`]: super::Multi
        pub ready: bool,
    }

    /// What a synchronisation mode implements; sealed.
    pub trait Mode: 'static {
        /// This side's head/tail state (kept on its own cache line).
        type State: Send + Sync;
        /// `()` for modes whose handles may be shared across threads; a
        /// `!Sync` marker for [`Single`].
        type Marker: Send + Default;
        /// Name for messages and benchmarks.
        const NAME: &'static str;
        /// Creates the state with head and tail at `start`.
        fn new_state(start: u32) -> Self::State;
        /// The published tail, as the *other* side sees it (load `T2`).
        fn tail(s: &Self::State) -> u32;
        /// Step 1: reserve up to `n` slots; see the module docs. `n` is at
        /// most `cap`.
        fn reserve<F: Fn() -> u32>(
            s: &Self::State,
            other_tail: F,
            offset: u32,
            cap: u32,
            n: u32,
            behavior: Behavior,
        ) -> Reservation;
        /// Step 3: publish `n` slots starting at `start` (store `T1`);
        /// `ready` is the reservation's. A mode that supports zero-copy
        /// also accepts `n` smaller than the reservation, which gives the
        /// rest back.
        fn publish(s: &Self::State, start: u32, n: u32, ready: bool);
    }
}

/// A synchronisation mode for one side of a ring. Sealed: the modes are
/// [`Single`], [`Multi`] and [`Hts`].
pub trait SyncMode: private::Mode {
    /// The mode's name: `"single"`, `"multi"` or `"hts"`.
    fn name() -> &'static str {
        <Self as private::Mode>::NAME
    }
}

/// Modes whose handles may be cloned and shared between threads.
pub trait SharedMode: SyncMode {}

/// Modes that offer the zero-copy (reserve, access in place, commit) API.
pub trait ZeroCopyMode: SyncMode {}

/// Per-side state of the [`Single`] and [`Hts`] modes: the cached tail of
/// the other side.
///
/// Reading the other side's tail costs a cache miss whenever the other side
/// has written it since; the cache lets a side run for as long as the last
/// value it saw allows (a producer that saw 100 free slots can enqueue 100
/// items without looking again).
#[derive(Debug)]
pub(crate) struct OtherTail {
    cached: AtomicU32,
}

impl OtherTail {
    fn new(v: u32) -> Self {
        OtherTail {
            cached: AtomicU32::new(v),
        }
    }

    /// Slots available to a side whose head is `head` (free slots for the
    /// producer, `offset` = capacity; full ones for the consumer, `offset`
    /// = 0) and how many of the `n` wanted to take: `(avail, got)`. Uses
    /// the cached other tail when it shows at least `n`, else loads the
    /// real one. `n <= cap` (the ring turns larger requests away first).
    #[inline(always)]
    fn claim<F: Fn() -> u32>(
        &self,
        head: u32,
        offset: u32,
        cap: u32,
        n: u32,
        behavior: Behavior,
        load: F,
    ) -> (u32, u32) {
        // C2: pairs with C1 below, in whichever thread of this side stored it.
        let c = self.cached.load(Ordering::Acquire);
        let avail = offset.wrapping_add(c).wrapping_sub(head);
        // `n <= avail <= cap` in one unsigned compare (below `n` wraps to
        // above `cap - n`). A cached value older than `head` by more than
        // the capacity (threads of a shared side can store an older value
        // over a newer one) gives `avail > cap`: load the real tail then.
        if avail.wrapping_sub(n) <= cap - n {
            return (avail, n);
        }
        let t = load(); // T2 (inside `load`)
        if t != c {
            // C1: pairs with C2 above. Skipped when nothing changed, so
            // that polling an empty (or full) ring does not write.
            self.cached.store(t, Ordering::Release);
        }
        let avail = offset.wrapping_add(t).wrapping_sub(head);
        (avail, clamp(avail, n, behavior))
    }
}

/// Spins this many times before yielding the CPU while waiting for another
/// thread of the same side. An operation takes well under 100 ns, so a wait
/// longer than this (a few microseconds) means that thread was probably
/// preempted; spinning on would only delay it further when it shares our CPU.
const SPINS_BEFORE_YIELD: u32 = 64;

/// One step of waiting for another thread of the same side.
///
/// These waits have no timeout, on purpose: they wait for an operation that
/// another thread of this process has already started and finishes without
/// blocking (a few copies and one store), not for hardware or a peer. The
/// only way they last is that thread being descheduled, which the yield
/// addresses; giving up instead would leave claimed slots unpublished and
/// the ring stuck for everyone.
#[inline(always)]
fn wait(spins: &mut u32) {
    *spins += 1;
    if *spins < SPINS_BEFORE_YIELD {
        spin_hint();
    } else {
        yield_cpu();
    }
}

/// [`Multi`]'s publish when earlier reservations are still unpublished:
/// waits until `tail` reaches `start`, then moves it over our `n` slots.
/// Out of line, cold, and last: with the yield's call inside the hot path
/// the compiler kept values across it in registers it had to save on the
/// stack on every operation, and the next locked instruction waited for
/// those stores; a call with nothing to do after it needs none.
#[cold]
#[inline(never)]
fn wait_then_publish(tail: &AtomicU32, start: u32, n: u32) {
    let mut spins = 0u32;
    // M1: pairs with the T1 of the thread publishing before us.
    while tail.load(Ordering::Acquire) != start {
        wait(&mut spins);
    }
    // T1: as in `publish`.
    tail.store(start.wrapping_add(n), Ordering::Release);
}

#[inline(always)]
fn clamp(avail: u32, n: u32, behavior: Behavior) -> u32 {
    // `avail` can exceed `cap` transiently in the multi-thread modes when
    // the head we hold is stale; the head CAS then fails and we retry.
    if n <= avail {
        n
    } else if behavior == Behavior::Fixed {
        0
    } else {
        avail
    }
}

/// One thread at a time on this side (DPDK's SP or SC). Its handle is not
/// `Sync` and not `Clone`, which is what makes this mode safe to offer.
#[derive(Debug)]
pub enum Single {}

/// State of a [`Single`] side: head and tail are the same value between
/// operations, so only the tail is stored.
///
/// The cached other tail is private to the one thread of this side, so it
/// gets a line of its own, away from the tail that the other side polls.
/// Sharing the tail's line, it stalled the producer across cores: perf
/// put two thirds of the producer's samples on its load of the cache, the
/// line having just been read by the consumer polling the tail (the
/// measurements: benches/RESULTS.md, findings, "the cached tail").
/// [`Multi`] and [`Hts`] keep it on their head's line: their head CAS
/// waits for that line anyway, and threads of the same side share it.
#[derive(Debug)]
pub struct SingleState {
    tail: AtomicU32,
    other: CachePadded<OtherTail>,
}

// The cache and the tail are never on one line, whichever order the
// compiler lays the fields out in.
#[cfg(not(loom))]
const _: () = assert!(
    std::mem::offset_of!(SingleState, other).abs_diff(std::mem::offset_of!(SingleState, tail))
        >= 64
);

impl private::Mode for Single {
    type State = SingleState;
    type Marker = PhantomData<Cell<()>>;
    const NAME: &'static str = "single";

    fn new_state(start: u32) -> SingleState {
        SingleState {
            tail: AtomicU32::new(start),
            other: CachePadded::new(OtherTail::new(start)),
        }
    }

    #[inline(always)]
    fn tail(s: &SingleState) -> u32 {
        // T2: pairs with T1 in `publish`.
        s.tail.load(Ordering::Acquire)
    }

    #[inline(always)]
    fn reserve<F: Fn() -> u32>(
        s: &SingleState,
        other_tail: F,
        offset: u32,
        cap: u32,
        n: u32,
        behavior: Behavior,
    ) -> Reservation {
        // Only this thread stores this side's tail: Relaxed reads our own
        // last store.
        let head = s.tail.load(Ordering::Relaxed);
        let (avail, n) = s.other.claim(head, offset, cap, n, behavior, other_tail);
        Reservation {
            start: head,
            n,
            left: avail - n,
            ready: true,
        }
    }

    #[inline(always)]
    fn publish(s: &SingleState, start: u32, n: u32, _ready: bool) {
        // T1: pairs with T2 in the other side's `claim`.
        s.tail.store(start.wrapping_add(n), Ordering::Release);
    }
}
impl SyncMode for Single {}
impl ZeroCopyMode for Single {}

/// Any number of threads on this side (DPDK's MP or MC, the default): the
/// head is moved with a CAS, and each thread publishes its slots in the
/// order it reserved them, spinning until the threads before it have.
///
/// That wait is the weakness of this mode when threads share a core: a
/// thread preempted between its reservation and its publication holds up
/// every later thread of the same side until it runs again (DPDK's threads
/// spin all that time; ours yield the CPU after a few microseconds, which
/// lets the preempted thread run sooner, but the convoy remains). Use
/// [`Hts`] there.
#[derive(Debug)]
pub enum Multi {}

/// State of a [`Multi`] side. Like the other modes it keeps a cache of the
/// other side's tail, on the same line as the head it CASes anyway, so
/// reading it costs no extra miss. Any thread of the side may refresh it,
/// and racing refreshes may store an older value over a newer one; each
/// value stored is a tail that was real once, so the space computed from
/// it is a lower bound and never promises slots that are not there.
#[derive(Debug)]
pub struct MultiState {
    head: AtomicU32,
    tail: AtomicU32,
    other: OtherTail,
}

impl private::Mode for Multi {
    type State = MultiState;
    type Marker = ();
    const NAME: &'static str = "multi";

    fn new_state(start: u32) -> MultiState {
        MultiState {
            head: AtomicU32::new(start),
            tail: AtomicU32::new(start),
            other: OtherTail::new(start),
        }
    }

    #[inline(always)]
    fn tail(s: &MultiState) -> u32 {
        // T2: pairs with T1 in `publish`.
        s.tail.load(Ordering::Acquire)
    }

    #[inline(always)]
    fn reserve<F: Fn() -> u32>(
        s: &MultiState,
        other_tail: F,
        offset: u32,
        cap: u32,
        n: u32,
        behavior: Behavior,
    ) -> Reservation {
        // H1: this side's tail and the other tail are read after this.
        let mut head = s.head.load(Ordering::Acquire);
        loop {
            // M1: pairs with the T1 that stored this value. Equal to the
            // head, it says no reservation on this side is unpublished; if
            // the CAS below then succeeds, the head did not move meanwhile,
            // so the tail is still `head` and stays so until we publish
            // (only the owner of the slots at the tail moves it): the wait
            // in `publish` can be skipped. The tail shares the head's line,
            // so this costs no extra miss, and it is read before the CAS
            // rather than after it.
            let tail = s.tail.load(Ordering::Acquire);
            // From the cache (C2) or T2 (inside `other_tail`), after H1.
            let (avail, got) = s.other.claim(head, offset, cap, n, behavior, &other_tail);
            if got == 0 {
                return Reservation {
                    start: head,
                    n: 0,
                    left: avail.min(cap),
                    ready: false,
                };
            }
            // H2 (Release on success) pairs with the H1 of the next thread
            // of this side that reads our new head: it must then also see
            // the other tail (or cached tail) our claim was based on, or it
            // could pair our head with an older tail and count slots that
            // are not there (found by loom's
            // `*_consumers_share_a_cached_tail`). x86's locked instruction
            // orders this anyway. Failure reloads the head and is H1 for
            // the next round.
            match s.head.compare_exchange_weak(
                head,
                head.wrapping_add(got),
                Ordering::Release,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    return Reservation {
                        start: head,
                        n: got,
                        left: avail - got,
                        ready: tail == head,
                    }
                }
                Err(h) => head = h,
            }
        }
    }

    #[inline(always)]
    fn publish(s: &MultiState, start: u32, n: u32, ready: bool) {
        // Threads that reserved before us publish first: wait for them.
        // M1: pairs with their T1.
        if !ready && s.tail.load(Ordering::Acquire) != start {
            return wait_then_publish(&s.tail, start, n);
        }
        // T1: pairs with T2 on the other side (and M1 of our successors).
        s.tail.store(start.wrapping_add(n), Ordering::Release);
    }
}
impl SyncMode for Multi {}
impl SharedMode for Multi {}

/// Any number of threads, one operation at a time (DPDK's HTS, head/tail
/// sync): head and tail live in one 64-bit word, and a thread may move the
/// head only when it equals the tail, i.e. when no other operation on this
/// side is in progress.
///
/// This is the mode for threads that share cores. No thread ever waits
/// *after* it has claimed slots, so finished operations never queue up
/// behind a preempted one; a thread that finds an operation in progress
/// spins briefly and then yields the CPU, which lets a preempted owner run
/// and finish instead of being starved by spinners. Because operations are
/// serialised, it also supports the zero-copy API with partial commits.
#[derive(Debug)]
pub enum Hts {}

/// State of an [`Hts`] side: head in the low half, tail in the high half.
#[derive(Debug)]
pub struct HtsState {
    ht: AtomicU64,
    other: OtherTail,
}

#[inline(always)]
fn pack(head: u32, tail: u32) -> u64 {
    u64::from(head) | (u64::from(tail) << 32)
}

impl private::Mode for Hts {
    type State = HtsState;
    type Marker = ();
    const NAME: &'static str = "hts";

    fn new_state(start: u32) -> HtsState {
        HtsState {
            ht: AtomicU64::new(pack(start, start)),
            other: OtherTail::new(start),
        }
    }

    #[inline(always)]
    fn tail(s: &HtsState) -> u32 {
        // T2: pairs with T1 in `publish`.
        (s.ht.load(Ordering::Acquire) >> 32) as u32
    }

    #[inline(always)]
    fn reserve<F: Fn() -> u32>(
        s: &HtsState,
        other_tail: F,
        offset: u32,
        cap: u32,
        n: u32,
        behavior: Behavior,
    ) -> Reservation {
        let mut spins = 0u32;
        // H1 (and, with head == tail, pairs with the previous owner's T1 so
        // a partially committed zero-copy reservation is seen whole).
        let mut cur = s.ht.load(Ordering::Acquire);
        loop {
            let head = cur as u32;
            if head != (cur >> 32) as u32 {
                // Another operation is in progress on this side.
                wait(&mut spins);
                cur = s.ht.load(Ordering::Acquire);
                continue;
            }
            let (avail, got) = s.other.claim(head, offset, cap, n, behavior, &other_tail);
            if got == 0 {
                return Reservation {
                    start: head,
                    n: 0,
                    left: avail.min(cap),
                    ready: true,
                };
            }
            match s.ht.compare_exchange_weak(
                cur,
                pack(head.wrapping_add(got), head),
                Ordering::Relaxed,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    return Reservation {
                        start: head,
                        n: got,
                        left: avail - got,
                        ready: true,
                    }
                }
                Err(v) => cur = v,
            }
        }
    }

    #[inline(always)]
    fn publish(s: &HtsState, start: u32, n: u32, _ready: bool) {
        let end = start.wrapping_add(n);
        // T1: pairs with T2 on the other side and H1 of the next owner.
        // Setting head = tail = end also gives back any reserved slots past
        // `end` (zero-copy partial commit): no one else moved the head.
        s.ht.store(pack(end, end), Ordering::Release);
    }
}
impl SyncMode for Hts {}
impl SharedMode for Hts {}
impl ZeroCopyMode for Hts {}
