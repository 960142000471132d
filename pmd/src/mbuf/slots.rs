//! Mbufs a device owns, one slot per ring entry (a descriptor, a work
//! request): given up
//! with [`Mbuf::into_raw`] while the device may read or write them, taken
//! back with [`Mbuf::from_raw`] once a completion says it is done; runs of
//! slots move to and from a burst in one pass. Whatever is
//! still held when the slots drop (the queue was destroyed, so the device
//! has let go) goes back to its pool.
#![allow(unsafe_code)]

use crate::{Mbuf, Pkts};
use std::ptr::NonNull;

/// Slots of device-owned mbufs.
pub struct Slots(Vec<Option<NonNull<u8>>>);

// SAFETY: the pointers are owned mbufs (`into_raw`), which are Send; only
// the slots' owner turns them back.
unsafe impl Send for Slots {}

impl Slots {
    /// `n` empty slots (a power of two, for the runs' wrapping).
    pub fn new(n: usize) -> Slots {
        Slots(vec![None; n])
    }

    /// Hands `m` to the device in slot `i`; a mbuf already there comes
    /// back (a driver bug, but nothing is lost).
    #[inline]
    pub fn give(&mut self, i: usize, m: Mbuf) -> Option<Mbuf> {
        let old = self.take(i);
        self.0[i] = Some(m.into_raw());
        old
    }

    /// Moves the mbufs of `count` slots from `from` on (the index wraps at
    /// the slots' length, a power of two) to the back of `out`, while it
    /// has room; returns how many slots it went through (empty ones
    /// count). For a range the device is done with.
    #[inline]
    pub fn take_run(&mut self, from: usize, count: usize, out: &mut Pkts) -> usize {
        let mask = self.0.len().wrapping_sub(1);
        let spare = out.spare_capacity_mut();
        let (mut i, mut n) = (0, 0);
        while i < count && n < spare.len() {
            if let Some(p) = self.0.get_mut((from + i) & mask).and_then(Option::take) {
                // SAFETY: as in `take`: `p` came from `give`, leaves its
                // slot once, and the device is done with it.
                spare[n].write(unsafe { Mbuf::from_raw(p) });
                n += 1;
            }
            i += 1;
        }
        // SAFETY: the first `n` spare slots were written above.
        unsafe { out.assume_init_back(n) };
        i
    }

    /// Hands the first `count` mbufs of `from` (all if fewer) to the
    /// device in the slots from `at` on (wrapping like
    /// [`take_run`](Self::take_run)); a mbuf already in one of them goes
    /// home (a driver bug, but nothing is lost). Returns how many went.
    #[inline]
    pub fn give_run(&mut self, at: usize, count: usize, from: &mut Pkts) -> usize {
        self.give_each(from, count, |k| at + k)
    }

    /// Hands the first `count` mbufs of `from` (all if fewer) to the
    /// device, the `k`th in slot `slot_of(k)` (masked like
    /// [`take_run`](Self::take_run)): for rings whose frames take a
    /// varying number of entries, each mbuf in the slot of its last. A
    /// mbuf already in a slot goes home. Returns how many went.
    #[inline]
    pub fn give_each(
        &mut self,
        from: &mut Pkts,
        count: usize,
        slot_of: impl Fn(usize) -> usize,
    ) -> usize {
        let mask = self.0.len().wrapping_sub(1);
        let n = count.min(from.len());
        let mut k = 0;
        while k < n {
            let Some(slot) = self.0.get_mut(slot_of(k) & mask) else {
                break;
            };
            // SAFETY: as in `give_run`: moved out here, forgotten below.
            let m = unsafe { std::ptr::read(&from[k]) };
            if let Some(old) = slot.replace(m.into_raw()) {
                // SAFETY: `old` came from a give and left its slot once.
                drop(unsafe { Mbuf::from_raw(old) });
            }
            k += 1;
        }
        // SAFETY: the first `k` were moved into slots above.
        unsafe { from.forget_front(k) };
        k
    }

    /// The mbuf of slot `i`, once the device is done with it.
    #[inline]
    pub fn take(&mut self, i: usize) -> Option<Mbuf> {
        let p = self.0.get_mut(i)?.take()?;
        // SAFETY: `p` came from `into_raw` in `give` and is taken out of
        // its slot once; callers take a slot only after its completion
        // (or after the queue was destroyed).
        Some(unsafe { Mbuf::from_raw(p) })
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        for i in 0..self.0.len() {
            drop(self.take(i));
        }
    }
}
