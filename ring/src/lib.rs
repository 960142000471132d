//! Bounded lock-free FIFO rings in the spirit of DPDK's `rte_ring`, with a
//! safe API. They carry every packet and buffer handle in rpmd: mempool
//! free lists, software ports, queues between lcores.
//!
//! # Model
//!
//! A ring is an array of `capacity` slots (a power of two, fixed at
//! creation; nothing is allocated afterwards) and two sides, producer and
//! consumer. Each side has a **head** and a **tail**, free-running `u32`
//! counters masked with `capacity - 1` to find a slot; they wrap at
//! `u32::MAX` harmlessly because only differences are used. The producer
//! state and the consumer state sit on separate cache lines (128-byte
//! [`CachePadded`](crossbeam_utils::CachePadded)), so the two sides do not
//! false-share; a [`Single`] side's private copy of the other side's tail
//! has a line of its own as well. The slots `cons.tail..prod.tail` hold
//! values; the rest are free. A ring holds exactly `capacity` values.
//!
//! [`new`] returns the two ends, a [`Producer`] and a [`Consumer`]. Each
//! side picks its synchronisation mode as a type parameter:
//!
//! | mode | threads on that side | DPDK |
//! |---|---|---|
//! | [`Single`] | one (handle is neither `Clone` nor `Sync`) | SP / SC |
//! | [`Multi`] | any (the default) | MP / MC |
//! | [`Hts`] | any, operations serialised; for threads sharing cores | MP_HTS / MC_HTS |
//!
//! so `Producer<T, Multi, Single>` is the producer end of an MP/SC ring.
//! The single-thread rule is enforced by the compiler: a [`Single`] end
//! cannot be cloned,
//!
//! ```compile_fail
//! let (p, _c) = rpmd_ring::new::<u32, rpmd_ring::Single, rpmd_ring::Single>(8).unwrap();
//! let p2 = p.clone();
//! ```
//!
//! nor shared between threads:
//!
//! ```compile_fail
//! fn shared<T: Sync>(_: &T) {}
//! let (p, _c) = rpmd_ring::new::<u32, rpmd_ring::Single, rpmd_ring::Multi>(8).unwrap();
//! shared(&p);
//! ```
//! Values are moved in and out exactly once; dropping the last handle drops
//! the values still in the ring.
//!
//! # Operations
//!
//! - [`Producer::enqueue`] / [`Consumer::dequeue`]: one value; a full ring
//!   gives the value back (`Err(value)`), an empty one gives `None`.
//! - `*_bulk` moves all `n` values or none; `*_burst` moves as many as it
//!   can. Both return a [`Transfer`]: the count moved and what was left
//!   (free slots after an enqueue, values after a dequeue). For `T: Copy`
//!   they take slices ([`Producer::enqueue_bulk`],
//!   [`Consumer::dequeue_burst`], …), like DPDK's pointer tables; for any
//!   `T` they move values out of and into a [`Burst`]
//!   ([`Producer::enqueue_burst_from`], [`Consumer::dequeue_bulk_into`], …).
//!   A bulk request larger than the capacity can never succeed and moves
//!   nothing; a burst request moves at most the capacity.
//! - Zero-copy for [`Single`] and [`Hts`] sides
//!   ([`Producer::enqueue_zc_burst`], [`Consumer::dequeue_zc_bulk`], …):
//!   reserve slots, write or read the values in place, commit.
//!
//! # Walk-through: an enqueue of `n` values
//!
//! (the labels `T1`, `T2`, `H1`, `H2`, `M1`, `C1`, `C2` name atomic
//! orderings; each is explained, with its partner, in [`mode`])
//!
//! 1. **Read the head.** The producer loads its head `h` (`Single`: its own
//!    tail, since no other thread moves it; `Multi`: `prod.head` with
//!    Acquire, `H1`, then `prod.tail` for step 6; `Hts`: the packed
//!    head/tail word, and if head ≠ tail another enqueue is in progress,
//!    so it waits, spinning, then yielding).
//! 2. **Count free slots**: `free = capacity + cons.tail - h` (wrapping).
//!    The producer first takes the consumer tail from a cache on its own
//!    side's line (Acquire, `C2`), and loads the real `cons.tail` only
//!    when that shows too little room (or is too old), storing what it
//!    loaded back into the cache (Release, `C1`) when it changed. That
//!    load is Acquire (`T2`), which makes the consumer's reads of those
//!    slots happen before our writes to them. (DPDK loads the other tail
//!    on every operation: across cores that is a miss each time the other
//!    side has moved.)
//! 3. **Decide `k`**: bulk takes `n` or nothing, burst takes `min(n, free)`.
//!    `k = 0` returns at once.
//! 4. **Claim** slots `h..h+k`: `Single` needs nothing; `Multi` and `Hts`
//!    compare-and-swap the head from `h` to `h+k` and restart with the new
//!    head when another producer got there first (`Multi` reading
//!    `prod.tail` again, then step 2). `Multi`'s CAS is Release (`H2`):
//!    a producer that later reads this head (`H1`) also sees the
//!    consumer tail it was claimed against, never an older one.
//! 5. **Copy** the values into slots `(h..h+k) & mask`, as at most two
//!    contiguous runs (before and after the end of the array; one value is
//!    one slot, with no run arithmetic).
//! 6. **Publish**: `Multi` first waits until `prod.tail == h`, i.e. every
//!    producer that claimed earlier slots has published (Acquire, `M1`).
//!    It skips the wait when it read `prod.tail == h` in step 1 (before
//!    the CAS): a successful CAS from `h` means no one claimed slots in
//!    between, and the tail stays at `h` until we move it. Then every mode
//!    stores `prod.tail = h+k` (Release, `T1`; `Hts` stores head = tail =
//!    `h+k` in one word). Consumers that load the new tail see the values.
//!
//! A dequeue is the mirror image: the consumer counts full slots as
//! `prod.tail - h` (step 2, `T2` pairs with the producer's `T1` of step 6),
//! claims by moving `cons.head`, moves the values out, and publishes
//! `cons.tail`, which hands the slots back to producers.
//!
//! Worked example, capacity 8, indices starting at `u32::MAX - 1`: an
//! enqueue of 3 finds `h = 4294967294`, `cons.tail = 4294967294`, so
//! `free = 8 + 4294967294 - 4294967294 = 8`; it writes slots `6, 7, 0`
//! (`h & 7 = 6`, two runs: `6..8` and `0..1`) and sets
//! `prod.tail = h + 3 = 1` (wrapped). A dequeue then sees
//! `1 - 4294967294 = 3` values (wrapping subtraction).
//!
//! # Threads that share a core
//!
//! In [`Multi`] mode a thread preempted between steps 4 and 6 blocks every
//! later thread of its side at step 6, spinning. With more threads than
//! cores that spinning can consume the time slices the preempted thread
//! needs (the lock-waiter preemption problem). [`Hts`] avoids it: a thread
//! waits only *before* claiming (step 1), and it yields the CPU after a short
//! spin, so the preempted owner gets to run. The `oversubscribed` stress
//! test shows the difference.
#![warn(missing_docs)]
#![warn(unsafe_op_in_unsafe_fn)]
// `unsafe` only in the modules that re-allow it: slots, ring, zc, burst,
// txlock.
#![deny(unsafe_code)]

mod burst;
mod error;
pub mod mode;
mod primitive;
mod ring;
mod slots;
pub mod txlock;
#[cfg(not(loom))]
mod zc;

pub use burst::{Burst, Drain};
pub use error::Error;
pub use mode::{Hts, Multi, SharedMode, Single, SyncMode, ZeroCopyMode};
pub use ring::{new, with_start_index, Consumer, Ends, Producer, Transfer, MAX_CAPACITY};
pub use txlock::{TxGuard, TxLock};
#[cfg(not(loom))]
pub use zc::{DequeueZc, EnqueueZc};
