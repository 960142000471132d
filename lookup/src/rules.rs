//! The route list both prefix tables keep beside their lookup tables:
//! what `routes` lists, what a delete falls back to, and the checks every
//! add and delete makes (prefix length, next hop, the rule limit).
use crate::Error;
use std::collections::BTreeMap;

/// An address a prefix table routes on: `u32` (IPv4) or `u128` (IPv6).
pub trait Addr: Copy + Ord {
    /// Its bits.
    const BITS: u8;
    /// Every bit set.
    const ONES: Self;
    /// The address with the bits past `depth` cleared.
    fn masked(self, depth: u8) -> Self;
    /// As printed in an error.
    fn shown(self) -> String;
}

impl Addr for u32 {
    const BITS: u8 = 32;
    const ONES: u32 = u32::MAX;
    fn masked(self, depth: u8) -> u32 {
        self & u32::MAX.checked_shl(32 - depth as u32).unwrap_or(0)
    }
    fn shown(self) -> String {
        std::net::Ipv4Addr::from(self).to_string()
    }
}

impl Addr for u128 {
    const BITS: u8 = 128;
    const ONES: u128 = u128::MAX;
    fn masked(self, depth: u8) -> u128 {
        self & u128::MAX.checked_shl(128 - depth as u32).unwrap_or(0)
    }
    fn shown(self) -> String {
        std::net::Ipv6Addr::from(self).to_string()
    }
}

/// Every route, by (prefix length, prefix), with its limits.
pub(crate) struct Rules<A> {
    map: BTreeMap<(u8, A), u32>,
    max_rules: u32,
    max_next_hop: u32,
}

impl<A: Addr> Rules<A> {
    /// No route yet; at most `max_rules`, next hops up to `max_next_hop`.
    pub(crate) fn new(max_rules: u32, max_next_hop: u32) -> Self {
        Rules {
            map: BTreeMap::new(),
            max_rules,
            max_next_hop,
        }
    }

    /// Routes held.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Every route: (prefix, length, next hop), shortest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (A, u8, u32)> + '_ {
        self.map.iter().map(|(&(d, p), &nh)| (p, d, nh))
    }

    /// Checks `depth` and `next_hop`; returns `prefix` masked to `depth`.
    pub(crate) fn check(&self, prefix: A, depth: u8, next_hop: u32) -> Result<A, Error> {
        if depth > A::BITS {
            return Err(Error::Depth {
                depth,
                max: A::BITS,
            });
        }
        if next_hop > self.max_next_hop {
            return Err(Error::NextHop {
                next_hop,
                max: self.max_next_hop,
            });
        }
        Ok(prefix.masked(depth))
    }

    /// Refuses a new route past the limit (an existing one is replaced,
    /// so it always has room).
    pub(crate) fn room_for(&self, prefix: A, depth: u8) -> Result<(), Error> {
        let known = self.map.contains_key(&(depth, prefix));
        if !known && self.map.len() >= self.max_rules as usize {
            return Err(Error::Full { what: "routes" });
        }
        Ok(())
    }

    /// Adds or replaces a route (its room checked first).
    pub(crate) fn insert(&mut self, prefix: A, depth: u8, next_hop: u32) {
        self.map.insert((depth, prefix), next_hop);
    }

    /// Removes a route, or says there is none.
    pub(crate) fn remove(&mut self, prefix: A, depth: u8) -> Result<(), Error> {
        match self.map.remove(&(depth, prefix)) {
            Some(_) => Ok(()),
            None => Err(Error::NoRoute {
                prefix: prefix.shown(),
                depth,
            }),
        }
    }

    /// The longest route shorter than `depth` covering `prefix`, as (next
    /// hop, its length). It covers the whole of `prefix/depth`: a route
    /// covering part of it, being shorter, covers all of it.
    pub(crate) fn covering(&self, prefix: A, depth: u8) -> Option<(u32, u8)> {
        (0..depth)
            .rev()
            .find_map(|d| self.map.get(&(d, prefix.masked(d))).map(|&nh| (nh, d)))
    }
}

/// The reference the prefix tables are checked against, in their tests
/// and fuzz targets.
pub mod testing {
    use super::Addr;
    use std::collections::BTreeMap;

    /// The top `depth` bits set: the mask of a prefix of that length.
    pub fn mask<A: Addr>(depth: u8) -> A {
        A::ONES.masked(depth)
    }

    /// The next hop of the longest of `routes` ((length, prefix) to next
    /// hop) covering `a`, by a linear scan.
    pub fn linear_scan<A: Addr>(routes: &BTreeMap<(u8, A), u32>, a: A) -> Option<u32> {
        routes
            .iter()
            .filter(|(&(d, p), _)| a.masked(d) == p)
            .max_by_key(|(&(d, _), _)| d)
            .map(|(_, &nh)| nh)
    }
}
