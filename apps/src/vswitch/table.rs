//! The switch's MAC table: which port each source address was last seen
//! on, shared by every forwarding lcore without a lock.
//!
//! Open addressing over a power-of-two array, probing a window of
//! [`PROBE`] slots from the address's hash. Each slot is one atomic word
//! (`mac << 16 | port + 1`, 0 for empty) and the second in which it was
//! last refreshed. Entries are advice: two lcores learning the same
//! address at once leave one of the two ports, and a lookup racing a
//! store sees the old or the new entry, never a mix (the word is written
//! whole). Time is whole seconds: an entry not refreshed for more than
//! the ageing time (between it and a second more) is gone; a full window
//! gives its oldest slot to a new address.
//!
//! A learn that would not change a slot does not write it (the entry of a
//! busy station is refreshed at most once a second), so the lines stay
//! shared between the lcores instead of bouncing.
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

/// Slots probed per address.
pub const PROBE: usize = 4;

struct Slot {
    key: AtomicU64,
    seen: AtomicU32,
}

/// Learned addresses.
pub struct MacTable {
    slots: Box<[Slot]>,
    mask: usize,
    ageing: u32,
}

/// The 48-bit value of a MAC address (the first six bytes of `b`).
#[inline]
pub fn mac_of(b: &[u8; 6]) -> u64 {
    u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]])
}

#[inline]
fn hash(mac: u64) -> usize {
    // Fibonacci hashing: the high bits of the product mix every byte.
    (mac.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize
}

impl MacTable {
    /// A table of at least `entries` slots (a power of two) whose entries
    /// age out after `ageing_s` seconds without traffic.
    pub fn new(entries: usize, ageing_s: u32) -> MacTable {
        let n = entries.next_power_of_two().max(PROBE);
        let slots = (0..n)
            .map(|_| Slot {
                key: AtomicU64::new(0),
                seen: AtomicU32::new(0),
            })
            .collect();
        MacTable {
            slots,
            mask: n - 1,
            ageing: ageing_s.max(1),
        }
    }

    fn window(&self, mac: u64) -> impl Iterator<Item = &Slot> {
        let h = hash(mac);
        (0..PROBE).map(move |i| &self.slots[(h + i) & self.mask])
    }

    fn live(&self, s: &Slot, now: u32) -> bool {
        now.wrapping_sub(s.seen.load(Relaxed)) <= self.ageing
    }

    /// The port `mac` was last seen on, if its entry has not aged out;
    /// `now` is in seconds (any epoch, the same for every call).
    #[inline]
    pub fn lookup(&self, mac: u64, now: u32) -> Option<u16> {
        for s in self.window(mac) {
            let k = s.key.load(Relaxed);
            if k != 0 && k >> 16 == mac && self.live(s, now) {
                return Some((k & 0xffff) as u16 - 1);
            }
        }
        None
    }

    /// Records that `mac` (a unicast source) was seen on `port` at `now`;
    /// whether a new entry was made (not a refresh).
    #[inline]
    pub fn learn(&self, mac: u64, port: u16, now: u32) -> bool {
        let key = mac << 16 | (port as u64 + 1);
        // The slot to take if `mac` has none: an empty one, else the one
        // refreshed longest ago (aged-out slots are the oldest).
        let mut victim: Option<(&Slot, u32)> = None;
        for s in self.window(mac) {
            let k = s.key.load(Relaxed);
            if k != 0 && k >> 16 == mac {
                if k != key {
                    s.key.store(key, Relaxed); // the station moved
                }
                if s.seen.load(Relaxed) != now {
                    s.seen.store(now, Relaxed);
                }
                return false;
            }
            let age = if k == 0 {
                u32::MAX
            } else {
                now.wrapping_sub(s.seen.load(Relaxed))
            };
            if victim.is_none_or(|(_, a)| age > a) {
                victim = Some((s, age));
            }
        }
        if let Some((s, _)) = victim {
            s.seen.store(now, Relaxed);
            s.key.store(key, Relaxed);
        }
        true
    }

    /// Entries that have not aged out.
    pub fn len(&self, now: u32) -> usize {
        self.slots
            .iter()
            .filter(|s| s.key.load(Relaxed) != 0 && self.live(s, now))
            .count()
    }

    /// Whether no entry is live.
    pub fn is_empty(&self, now: u32) -> bool {
        self.len(now) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_moves_and_ages() {
        let t = MacTable::new(64, 300);
        let a = mac_of(&[2, 0, 0, 0, 0, 1]);
        assert_eq!(t.lookup(a, 10), None);
        assert!(t.learn(a, 3, 10));
        assert!(!t.learn(a, 3, 11), "a refresh");
        assert_eq!(t.lookup(a, 12), Some(3));
        t.learn(a, 5, 13); // the station moved
        assert_eq!(t.lookup(a, 13), Some(5));
        assert_eq!(t.lookup(a, 13 + 300), Some(5));
        assert_eq!(t.lookup(a, 13 + 301), None, "aged out");
        assert_eq!(t.len(13), 1);
        assert!(t.is_empty(13 + 301));
    }

    #[test]
    fn a_full_window_gives_its_oldest_slot_to_a_new_address() {
        // A table of 4 slots: every address shares the one window.
        let t = MacTable::new(4, 300);
        let macs: Vec<u64> = (1..=5).map(|i| mac_of(&[2, 0, 0, 0, 1, i])).collect();
        for (i, m) in macs[..4].iter().enumerate() {
            t.learn(*m, i as u16, 100 + i as u32);
        }
        assert!((0..4).all(|i| t.lookup(macs[i], 104) == Some(i as u16)));
        t.learn(macs[4], 9, 105);
        assert_eq!(t.lookup(macs[4], 105), Some(9));
        assert_eq!(t.lookup(macs[0], 105), None, "the oldest went");
        assert!((1..4).all(|i| t.lookup(macs[i], 105) == Some(i as u16)));
    }

    #[test]
    fn many_stations_from_two_threads_all_found() {
        let t = std::sync::Arc::new(MacTable::new(8192, 300));
        let hs: Vec<_> = (0..2u16)
            .map(|k| {
                let t = t.clone();
                std::thread::spawn(move || {
                    for i in 0..1000u16 {
                        let [hi, lo] = i.to_be_bytes();
                        t.learn(mac_of(&[2, 0, 0, k as u8, hi, lo]), k, 1);
                    }
                })
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
        let found = (0..2u16)
            .flat_map(|k| (0..1000u16).map(move |i| (k, i)))
            .filter(|&(k, i)| {
                let [hi, lo] = i.to_be_bytes();
                t.lookup(mac_of(&[2, 0, 0, k as u8, hi, lo]), 1) == Some(k)
            })
            .count();
        // 2000 addresses in 8192 slots: a full window is rare.
        assert!(found > 1990, "{found} of 2000");
    }
}
