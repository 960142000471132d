//! The driver's view of a virtqueue, whichever its layout: the split
//! ring ([`SplitQueue`](super::split::SplitQueue), virtio 1.2 §2.7) and
//! the packed ring ([`PackedQueue`](super::packed::PackedQueue), §2.8)
//! each implement [`Ring`] in their own file, and the net data path
//! (`VirtioRx`/`VirtioTx`) is generic over it, so each layout's code is
//! inlined into its own copy of the data path.
use crate::driver::split::Tokens;
use rpmd_pmd::Mbuf;
use rpmd_ring::Burst;

/// A virtqueue as the data path uses it: split (§2.7) or packed (§2.8).
/// Buffers go in as descriptors naming an mbuf's memory, are published
/// to the device, and come back used; nothing the device writes is
/// trusted for the ring's own state (a protocol violation breaks the
/// ring, [`is_broken`](Ring::is_broken)).
pub trait Ring: Send + 'static {
    /// One buffer of `len` bytes at IOVA `addr`, written by the device if
    /// `device_writes`; the mbuf comes back if the ring is full or broken.
    fn push(&mut self, m: Mbuf, addr: u64, len: u32, device_writes: bool) -> Result<(), Mbuf>;
    /// One buffer of several segments; those from index `writable_from`
    /// on are for the device to write (none: `segs.len()`).
    fn push_chain(
        &mut self,
        m: Mbuf,
        segs: &[(u64, u32)],
        writable_from: usize,
    ) -> Result<(), Mbuf>;
    /// Up to `count` one-segment mbufs from the front of `bufs`, one
    /// descriptor each at `desc(m)`, as far as there is room and until
    /// `desc` refuses one (`None`: it stays first in `bufs`); how many.
    fn push_run<const N: usize>(
        &mut self,
        bufs: &mut Burst<Mbuf, N>,
        count: usize,
        device_writes: bool,
        desc: impl FnMut(&mut Mbuf) -> Option<(u64, u32)>,
    ) -> usize;
    /// Makes what was pushed visible to the device; whether it asked to
    /// be notified.
    fn publish(&mut self) -> bool;
    /// The next used buffer and the length the device wrote, or the
    /// protocol error that broke the ring.
    fn pop_used(&mut self) -> Option<Result<(Mbuf, u32), crate::Error>>;
    /// Used one-descriptor buffers with lengths in `lens`, taken in
    /// bulk (a packed ring: whole lines of four; a split ring in order:
    /// the entries up to the used index), into `out` (at most `room`),
    /// each kept only if `accept` says so; (kept, refused). Zero for
    /// `pop_used` to go on with.
    fn pop_used_lines<const N: usize>(
        &mut self,
        _out: &mut Burst<Mbuf, N>,
        _room: usize,
        _lens: std::ops::Range<u32>,
        _accept: impl FnMut(&mut Mbuf, u32) -> bool,
    ) -> (usize, usize) {
        (0, 0)
    }
    /// Buffers the device is done with (sent frames), into `out`; how
    /// many.
    fn reclaim_into<const N: usize>(&mut self, out: &mut Burst<Mbuf, N>) -> usize;
    /// Descriptors free for pushing.
    fn free(&self) -> usize;
    /// Whether used buffers wait.
    fn has_used(&self) -> bool;
    /// Asks the device for interrupts (`on`) or to hold them.
    fn set_interrupts(&mut self, on: bool);
    /// Whether the device broke the ring's protocol (the ring then refuses
    /// everything until `restart`).
    fn is_broken(&self) -> bool;
    /// IOVAs of the three areas (descriptors; avail or driver events;
    /// used or device events).
    fn addresses(&self) -> (u64, u64, u64);
    /// Entries.
    fn size(&self) -> u16;
    /// Starts over at index 0, dropping what is in flight (their count).
    fn restart(&mut self) -> usize;
    /// Buffers the device marked used that were not taken yet.
    fn completed_unread(&self) -> usize;
    /// Takes the mbufs in flight out (the ring is not used afterwards).
    fn take_tokens(&mut self) -> Tokens;
}
