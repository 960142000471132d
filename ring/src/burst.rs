//! [`Burst`]: a fixed-capacity, inline batch of owned values, the unit that
//! moves between rings, queues and ports (32 mbufs, typically).
#![allow(unsafe_code)]
use std::fmt;
use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut};

/// Up to `N` owned values stored inline (no allocation), kept in order.
///
/// Values are taken from the front (a ring enqueue, a `tx_burst`) and
/// appended at the back (a ring dequeue, an `rx_burst`). Values that a call
/// did not take stay at the front, in order, so a caller can retry or drop
/// them; dropping the burst drops what is left.
///
/// ```
/// let mut b = rpmd_ring::Burst::<String, 4>::new();
/// b.push("a".to_string()).unwrap();
/// b.push("b".to_string()).unwrap();
/// assert_eq!(b.len(), 2);
/// assert_eq!(b.pop().as_deref(), Some("a"));
/// assert_eq!(&b[..], &["b".to_string()]);
/// ```
pub struct Burst<T, const N: usize> {
    buf: [MaybeUninit<T>; N],
    /// Live values are `buf[start..end]`; always `start <= end <= N`
    /// (every safe method keeps it, and the unsafe ones and the ring's
    /// `advance_back` require it of their callers), which the unchecked
    /// slicing in `deref` and `spare_capacity_mut` relies on.
    start: usize,
    end: usize,
}

impl<T, const N: usize> Burst<T, N> {
    /// An empty burst.
    pub const fn new() -> Self {
        Burst {
            buf: [const { MaybeUninit::uninit() }; N],
            start: 0,
            end: 0,
        }
    }

    /// The most values it can hold.
    pub const fn capacity(&self) -> usize {
        N
    }

    /// Values held.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// Whether it holds no values.
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// Whether it holds `N` values.
    pub fn is_full(&self) -> bool {
        self.len() == N
    }

    /// Appends a value; a full burst gives it back.
    pub fn push(&mut self, value: T) -> Result<(), T> {
        if self.is_full() {
            return Err(value);
        }
        self.compact();
        self.buf[self.end].write(value);
        self.end += 1;
        Ok(())
    }

    /// Removes and returns the first value.
    pub fn pop(&mut self) -> Option<T> {
        if self.is_empty() {
            return None;
        }
        // SAFETY: `start < end`, so `buf[start]` is live; advancing `start`
        // makes it ours.
        let v = unsafe { self.buf[self.start].assume_init_read() };
        // Back to the front once empty, so the next refill need not move
        // anything (as every other way of taking values out).
        self.advance_front(1);
        Some(v)
    }

    /// Takes every value out, in order: the burst is empty at once, the
    /// iterator yields the values, and what it has not yielded when
    /// dropped is dropped with it (a leaked iterator leaks them, never
    /// drops one twice). Cheaper than popping one at a time, which keeps
    /// the burst's indices right after each value.
    ///
    /// ```
    /// let mut b = rpmd_ring::Burst::<u32, 4>::new();
    /// b.push(1).unwrap();
    /// b.push(2).unwrap();
    /// assert_eq!(b.drain().collect::<Vec<_>>(), [1, 2]);
    /// assert!(b.is_empty());
    /// ```
    #[inline]
    pub fn drain(&mut self) -> Drain<'_, T, N> {
        let (next, end) = (self.start, self.end);
        // Empty from here on: each value is now the iterator's alone.
        self.start = 0;
        self.end = 0;
        Drain {
            buf: &mut self.buf,
            next,
            end,
        }
    }

    /// Puts a value back at the front (undoes a [`pop`](Self::pop)), e.g.
    /// an mbuf a transmit path could not queue after all, so that it
    /// stays with the caller in order; a full burst gives it back.
    pub fn push_front(&mut self, value: T) -> Result<(), T> {
        if self.is_full() {
            return Err(value);
        }
        if self.start == 0 {
            let len = self.len();
            let p = self.buf.as_mut_ptr();
            // SAFETY: `len < N`, so both ranges are inside `buf`;
            // `ptr::copy` allows the overlap. Slot 0 is then free.
            unsafe { std::ptr::copy(p, p.add(1), len) };
            self.end += 1;
        } else {
            self.start -= 1;
        }
        self.buf[self.start].write(value);
        Ok(())
    }

    /// Keeps only the values for which `keep` returns true, in order, and
    /// drops the others (a filter on a received burst: the dropped mbufs
    /// go back to their pools).
    ///
    /// ```
    /// let mut b = rpmd_ring::Burst::<u32, 8>::new();
    /// for v in 0..6 {
    ///     b.push(v).unwrap();
    /// }
    /// b.retain(|v| v % 2 == 0);
    /// assert_eq!(&b[..], &[0, 2, 4]);
    /// ```
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        let mut kept = Burst::<T, N>::new();
        while let Some(v) = self.pop() {
            if keep(&v) {
                // At most as many as were taken out: always room.
                let _ = kept.push(v);
            }
        }
        *self = kept;
    }

    /// Drops every value.
    pub fn clear(&mut self) {
        let live: *mut [T] = &mut **self;
        self.start = 0;
        self.end = 0;
        // SAFETY: `live` covered the live values; the indices were reset
        // first, so a panicking drop cannot cause a double drop.
        unsafe { live.drop_in_place() };
    }

    /// Drops the first `n` values (all of them when `n` is larger), e.g.
    /// the mbufs a transmit path has copied out.
    pub fn drop_front(&mut self, n: usize) {
        let n = n.min(self.len());
        let start = self.start;
        // Advance first, so a panicking drop cannot cause a double drop.
        // (The pointer is made after: `advance_front` borrows all of
        // `self`, which would end a pointer taken before it; Miri.)
        self.advance_front(n);
        // SAFETY: `buf[start..start + n]` held `n` live values that the
        // burst no longer counts as its own (advancing moves no value);
        // `MaybeUninit<T>` has `T`'s layout; each is dropped once, here.
        unsafe {
            let front = self.buf.as_mut_ptr().add(start).cast::<T>();
            std::ptr::slice_from_raw_parts_mut(front, n).drop_in_place()
        };
    }

    /// Keeps the first `len` values and drops the rest (like
    /// `Vec::truncate`), e.g. buffers taken for slots that held no frame.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.len() {
            return;
        }
        let tail: *mut [T] = &mut self[len..];
        self.end = self.start + len;
        // SAFETY: `tail` covered live values that the burst no longer
        // counts (the end moved first, so a panicking drop cannot cause a
        // double drop); each is dropped exactly once, here.
        unsafe { tail.drop_in_place() };
    }

    /// Moves the live values to the front so the whole tail is free.
    fn compact(&mut self) {
        if self.start != 0 {
            let len = self.len();
            let p = self.buf.as_mut_ptr();
            // SAFETY: both ranges are inside `buf`; `ptr::copy` allows the
            // overlap.
            unsafe { std::ptr::copy(p.add(self.start), p, len) };
            self.start = 0;
            self.end = len;
        }
    }

    /// The free slots after the live values (moving the live values to the
    /// front first), to be filled in place, e.g. by
    /// [`Consumer::dequeue_bulk_uninit`](crate::Consumer::dequeue_bulk_uninit).
    /// Report how many were filled with [`assume_init_back`](Self::assume_init_back).
    #[inline(always)]
    pub fn spare_capacity_mut(&mut self) -> &mut [MaybeUninit<T>] {
        self.compact();
        let end = self.end;
        // SAFETY: `end <= N` (the burst's invariant), so the range is in
        // bounds; unchecked, as this is on every refill's path.
        unsafe { self.buf.get_unchecked_mut(end..) }
    }

    /// Makes the first `n` slots of [`spare_capacity_mut`](Self::spare_capacity_mut)
    /// live values.
    ///
    /// # Safety
    /// Those `n` slots hold initialised values, and `n` is at most the
    /// spare capacity.
    #[inline(always)]
    pub unsafe fn assume_init_back(&mut self, n: usize) {
        debug_assert!(self.end + n <= N);
        self.end += n;
    }

    /// Drops the first `n` live values from the burst without running
    /// their destructors (their ownership was moved elsewhere, e.g. with
    /// `ptr::read`).
    ///
    /// # Safety
    /// `n` is at most [`len`](Self::len), and the first `n` values were
    /// moved out, so the burst must not drop them.
    #[inline(always)]
    pub unsafe fn forget_front(&mut self, n: usize) {
        self.advance_front(n);
    }

    /// The live values as a raw pointer and count, for a ring to move out.
    #[inline(always)]
    pub(crate) fn front_raw(&self) -> (*const T, usize) {
        (self.buf[self.start..].as_ptr().cast(), self.len())
    }

    /// Records that the first `n` live values were moved out.
    #[inline(always)]
    pub(crate) fn advance_front(&mut self, n: usize) {
        debug_assert!(n <= self.len());
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// The free space after the live values, for a ring to move into.
    #[inline(always)]
    pub(crate) fn spare_raw(&mut self) -> (*mut T, usize) {
        self.compact();
        let end = self.end;
        (self.buf[end..].as_mut_ptr().cast(), N - end)
    }

    /// Records that `n` values were written after the live ones.
    #[inline(always)]
    pub(crate) fn advance_back(&mut self, n: usize) {
        debug_assert!(self.end + n <= N);
        self.end += n;
    }
}

/// The values a [`Burst::drain`] takes out, front first.
pub struct Drain<'a, T, const N: usize> {
    buf: &'a mut [MaybeUninit<T>; N],
    /// `buf[next..end]` are the values not yet yielded; `end <= N`.
    next: usize,
    end: usize,
}

impl<T, const N: usize> Iterator for Drain<'_, T, N> {
    type Item = T;

    #[inline]
    fn next(&mut self) -> Option<T> {
        if self.next == self.end {
            return None;
        }
        // SAFETY: `next < end <= N` (the burst's invariant when drained),
        // so the slot is in bounds and holds a live value that no one else
        // owns (the burst gave them up); advancing `next` makes it taken
        // once.
        let v = unsafe { self.buf.get_unchecked(self.next).assume_init_read() };
        self.next += 1;
        Some(v)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.end - self.next;
        (n, Some(n))
    }
}

impl<T, const N: usize> ExactSizeIterator for Drain<'_, T, N> {}

impl<T, const N: usize> Drop for Drain<'_, T, N> {
    fn drop(&mut self) {
        for v in self.by_ref() {
            drop(v);
        }
    }
}

impl<T, const N: usize> Default for Burst<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, const N: usize> Deref for Burst<T, N> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `start <= end <= N` (the burst's invariant), so the range
        // is in bounds; `buf[start..end]` are initialised, and
        // `MaybeUninit<T>` has the layout of `T`.
        unsafe {
            let live = self.buf.get_unchecked(self.start..self.end);
            std::slice::from_raw_parts(live.as_ptr().cast(), live.len())
        }
    }
}

impl<T, const N: usize> DerefMut for Burst<T, N> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`.
        unsafe {
            let live = self.buf.get_unchecked_mut(self.start..self.end);
            std::slice::from_raw_parts_mut(live.as_mut_ptr().cast(), live.len())
        }
    }
}

impl<T, const N: usize> Drop for Burst<T, N> {
    fn drop(&mut self) {
        self.clear();
    }
}

impl<T: fmt::Debug, const N: usize> fmt::Debug for Burst<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}
