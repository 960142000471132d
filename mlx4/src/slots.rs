//! Mbufs the device owns, one slot per descriptor: given up with
//! [`Mbuf::into_raw`] while the device may read or write them, taken back
//! with [`Mbuf::from_raw`] once a completion says it is done. Whatever is
//! still held when the slots drop (the queue was destroyed, so the device
//! has let go) goes back to its pool.
#![allow(unsafe_code)]

use rpmd_pmd::Mbuf;
use std::ptr::NonNull;

/// Slots of device-owned mbufs.
pub(crate) struct Slots(Vec<Option<NonNull<u8>>>);

// SAFETY: the pointers are owned mbufs (`into_raw`), which are Send; only
// the slots' owner turns them back.
unsafe impl Send for Slots {}

impl Slots {
    pub(crate) fn new(n: usize) -> Slots {
        Slots(vec![None; n])
    }

    /// Hands `m` to the device in slot `i`; a mbuf already there comes
    /// back (a driver bug, but nothing is lost).
    #[inline]
    pub(crate) fn give(&mut self, i: usize, m: Mbuf) -> Option<Mbuf> {
        let old = self.take(i);
        self.0[i] = Some(m.into_raw());
        old
    }

    /// The mbuf of slot `i`, once the device is done with it.
    #[inline]
    pub(crate) fn take(&mut self, i: usize) -> Option<Mbuf> {
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
