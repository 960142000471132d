//! VLAN offloads in software, for every port whose device has none: strip
//! (the outer 802.1Q tag moves into the mbuf's `vlan_tci`), filter (tagged
//! frames of VLANs not in the port's set are dropped and counted) and
//! insert (an mbuf flagged [`TX_VLAN`] leaves with
//! its `vlan_tci` as an 802.1Q tag), as DPDK's
//! `RTE_ETH_RX_OFFLOAD_VLAN_STRIP`, `..._VLAN_FILTER` and
//! `RTE_ETH_TX_OFFLOAD_VLAN_INSERT` do on hardware.
//!
//! The generic port ([`EthDev`](super::EthDev)) wraps a queue only when
//! the configuration asks for one of these and the device does not offer
//! it: one indirect call more per burst, and per frame a two-byte read
//! (plus a twelve-byte move for a tag stripped or inserted). Untagged
//! frames pass the filter, as on hardware.
use super::stats::Counter;
use super::{BusyPoll, Pkts, RxQueue, TxQueue};
use crate::mbuf::{RX_VLAN, RX_VLAN_STRIPPED, TX_VLAN};
use crate::{Error, Mbuf};
use crossbeam_utils::CachePadded;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// The 802.1Q tag protocol identifier.
const TPID_8021Q: u16 = 0x8100;
/// Bytes of the two MAC addresses, which a tag follows.
const MACS: usize = 12;
/// Bytes of one tag.
const TAG: usize = 4;

/// The VLAN IDs a port's filter admits: one bit per ID, changed by the
/// control path while lcores read it (relaxed: a change is seen within a
/// burst or two, as a hardware table write is).
#[derive(Debug)]
pub struct VlanSet([AtomicU64; 64]);

impl Default for VlanSet {
    fn default() -> Self {
        VlanSet(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl VlanSet {
    /// Admits (`on`) or refuses VLAN `id` (0..=4095).
    pub fn set(&self, id: u16, on: bool) {
        let (word, bit) = ((id as usize >> 6) & 63, 1u64 << (id & 63));
        if on {
            self.0[word].fetch_or(bit, Relaxed);
        } else {
            self.0[word].fetch_and(!bit, Relaxed);
        }
    }

    /// Whether VLAN `id` is admitted.
    #[inline]
    pub fn contains(&self, id: u16) -> bool {
        let (word, bit) = ((id as usize >> 6) & 63, 1u64 << (id & 63));
        self.0[word].load(Relaxed) & bit != 0
    }
}

/// The outer 802.1Q tag's TCI of a frame, if it has one in its first
/// segment.
#[inline]
fn outer_tci(frame: &[u8]) -> Option<u16> {
    let tpid = frame.get(MACS..MACS + 2)?;
    if u16::from_be_bytes([tpid[0], tpid[1]]) != TPID_8021Q {
        return None;
    }
    let tci = frame.get(MACS + 2..MACS + TAG)?;
    Some(u16::from_be_bytes([tci[0], tci[1]]))
}

/// Moves the outer tag into the mbuf's `vlan_tci`.
#[inline]
fn strip(m: &mut Mbuf, tci: u16) {
    m.data_mut().copy_within(0..MACS, TAG);
    // The tag was in the first segment, so it has these bytes.
    let _ = m.adj(TAG);
    m.set_vlan_tci(tci);
    m.set_ol_flags(m.ol_flags() | RX_VLAN | RX_VLAN_STRIPPED);
}

/// Writes `m.vlan_tci()` as an 802.1Q tag after the MACs; false when the
/// frame has no room before it or is shorter than its MACs.
#[inline]
fn insert(m: &mut Mbuf) -> bool {
    if m.data_len() < MACS || m.prepend(TAG).is_none() {
        return false;
    }
    let tci = m.vlan_tci();
    let d = m.data_mut();
    d.copy_within(TAG..TAG + MACS, 0);
    d[MACS..MACS + 2].copy_from_slice(&TPID_8021Q.to_be_bytes());
    d[MACS + 2..MACS + TAG].copy_from_slice(&tci.to_be_bytes());
    m.set_ol_flags(m.ol_flags() & !TX_VLAN);
    true
}

/// What an rx queue does in software.
#[derive(Clone, Debug)]
pub(crate) struct RxVlan {
    /// Strip the outer tag.
    pub(crate) strip: bool,
    /// Drop tagged frames of VLANs not in the set.
    pub(crate) filter: Option<Arc<VlanSet>>,
    /// Frames the filter dropped, this queue's.
    pub(crate) filtered: Arc<CachePadded<Counter>>,
}

/// An rx queue with VLAN strip or filter in software.
pub(crate) struct VlanRx {
    pub(crate) inner: Box<dyn RxQueue>,
    pub(crate) vlan: RxVlan,
}

impl VlanRx {
    /// Strips and filters `out[before..]`; returns how many stay.
    fn process(&mut self, out: &mut Pkts, before: usize) -> usize {
        let mut dropped = [0u64; super::MAX_BURST / 64];
        let mut any_dropped = false;
        for (i, m) in out[before..].iter_mut().enumerate() {
            let Some(tci) = outer_tci(m.data()) else {
                continue;
            };
            if let Some(set) = &self.vlan.filter {
                if !set.contains(tci & 0x0fff) {
                    dropped[i / 64] |= 1 << (i % 64);
                    any_dropped = true;
                    continue;
                }
            }
            if self.vlan.strip {
                strip(m, tci);
            }
        }
        if any_dropped {
            let (mut i, mut gone) = (0usize, 0u64);
            out.retain(|_| {
                let keep = i < before || dropped[(i - before) / 64] & 1 << ((i - before) % 64) == 0;
                i += 1;
                gone += u64::from(!keep);
                keep
            });
            self.vlan.filtered.add(gone);
        }
        out.len() - before
    }
}

impl RxQueue for VlanRx {
    #[inline]
    fn rx_burst(&mut self, out: &mut Pkts, max: usize) -> usize {
        let before = out.len();
        if self.inner.rx_burst(out, max) == 0 {
            return 0;
        }
        self.process(out, before)
    }
    fn interrupt_fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner.interrupt_fd()
    }
    fn set_interrupt(&mut self, enabled: bool) -> Result<(), Error> {
        self.inner.set_interrupt(enabled)
    }
    fn has_work(&self) -> bool {
        self.inner.has_work()
    }
    fn rx_pending(&self) -> Option<usize> {
        self.inner.rx_pending()
    }
    fn busy_poll(&self) -> Option<BusyPoll> {
        self.inner.busy_poll()
    }
    fn busy_poll_done(&mut self, hit: bool) {
        self.inner.busy_poll_done(hit)
    }
}

/// A tx queue with VLAN insert in software.
pub(crate) struct VlanTx {
    pub(crate) inner: Box<dyn TxQueue>,
    /// Frames dropped for want of headroom for their tag.
    pub(crate) dropped: Arc<CachePadded<Counter>>,
}

impl TxQueue for VlanTx {
    #[inline]
    fn tx_burst(&mut self, pkts: &mut Pkts) -> usize {
        // The flag is cleared as the tag goes in, so frames the device
        // leaves with the caller are not tagged twice on a retry.
        let mut failed = false;
        for m in pkts.iter_mut() {
            if m.ol_flags() & TX_VLAN != 0 && !insert(m) {
                failed = true;
            }
        }
        let mut gone = 0;
        if failed {
            let before = pkts.len();
            pkts.retain(|m| m.ol_flags() & TX_VLAN == 0);
            gone = before - pkts.len();
            self.dropped.add(gone as u64);
        }
        // Dropped frames count as taken: the caller must not send them.
        gone + self.inner.tx_burst(pkts)
    }
    fn in_flight(&mut self) -> usize {
        self.inner.in_flight()
    }
}

/// The software offloads' counters of one configuration: per rx queue the
/// frames the filter dropped, per tx queue those without room for their
/// tag; reset by baseline like the queues' own.
#[derive(Debug, Default)]
pub(crate) struct VlanCounters {
    rx_filtered: Vec<Arc<CachePadded<Counter>>>,
    tx_no_room: Vec<Arc<CachePadded<Counter>>>,
    base: Vec<u64>,
}

impl VlanCounters {
    pub(crate) fn new(rx: u16, tx: u16) -> Self {
        VlanCounters {
            rx_filtered: (0..rx).map(|_| Arc::default()).collect(),
            tx_no_room: (0..tx).map(|_| Arc::default()).collect(),
            base: vec![0; rx as usize + tx as usize],
        }
    }

    fn raw(&self) -> impl Iterator<Item = u64> + '_ {
        self.rx_filtered
            .iter()
            .chain(&self.tx_no_room)
            .map(|c| c.get())
    }

    /// Wraps rx queue `q` as `soft` asks (strip, filter), or leaves it.
    pub(crate) fn wrap_rx(
        &self,
        q: usize,
        inner: Box<dyn RxQueue>,
        strip: bool,
        filter: Option<Arc<VlanSet>>,
    ) -> Box<dyn RxQueue> {
        if !strip && filter.is_none() {
            return inner;
        }
        let vlan = RxVlan {
            strip,
            filter,
            filtered: self.rx_filtered[q].clone(),
        };
        Box::new(VlanRx { inner, vlan })
    }

    /// Wraps tx queue `q` to insert tags.
    pub(crate) fn wrap_tx(&self, q: usize, inner: Box<dyn TxQueue>) -> Box<dyn TxQueue> {
        Box::new(VlanTx {
            inner,
            dropped: self.tx_no_room[q].clone(),
        })
    }

    /// Tagged frames dropped for want of room since the last reset: the
    /// port's `oerrors` beyond the device's.
    pub(crate) fn tx_errors(&self) -> u64 {
        let rx = self.rx_filtered.len();
        let now: Vec<u64> = self.raw().collect();
        now[rx..]
            .iter()
            .zip(&self.base[rx..])
            .map(|(n, b)| n.wrapping_sub(*b))
            .sum()
    }

    /// `rx_qN_vlan_filtered` and `tx_qN_vlan_no_room` since the last reset.
    pub(crate) fn xstats(&self, out: &mut Vec<super::Xstat>) {
        let rx = self.rx_filtered.len();
        for (i, (now, base)) in self.raw().zip(&self.base).enumerate() {
            let name = match i < rx {
                true => format!("rx_q{i}_vlan_filtered"),
                false => format!("tx_q{}_vlan_no_room", i - rx),
            };
            out.push(super::Xstat {
                name,
                value: now.wrapping_sub(*base),
            });
        }
    }

    /// Makes the current values the new zero.
    pub(crate) fn reset(&mut self) {
        self.base = self.raw().collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_set_holds_every_id_apart() {
        let s = VlanSet::default();
        for id in [0, 1, 63, 64, 4095] {
            assert!(!s.contains(id));
            s.set(id, true);
            assert!(s.contains(id));
        }
        s.set(64, false);
        assert!(!s.contains(64) && s.contains(63) && s.contains(4095));
    }

    #[test]
    fn a_tag_is_read_only_from_a_frame_long_enough_to_hold_it() {
        let mut f = vec![0u8; 18];
        f[12..16].copy_from_slice(&[0x81, 0x00, 0x20, 0x05]);
        assert_eq!(outer_tci(&f), Some(0x2005));
        assert_eq!(outer_tci(&f[..15]), None);
        f[12] = 0x88;
        assert_eq!(outer_tci(&f), None);
    }
}
