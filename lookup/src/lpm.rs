//! IPv4 longest-prefix match, DIR-24-8 (see the crate doc).
//!
//! An entry is a `u32`: bit 31 valid; bit 30 (first table only) "points to
//! a second-table group"; bits 24-29 the prefix length the entry came
//! from; bits 0-23 the next hop, or the group's index.
use crate::rules::Rules;
use crate::Error;

const VALID: u32 = 1 << 31;
const GROUP: u32 = 1 << 30;
const DEPTH_SHIFT: u32 = 24;
const LOW24: u32 = 0x00ff_ffff;
/// Entries in a second-table group (the last 8 bits of an address).
const GROUP_LEN: usize = 256;
/// The longest prefix the first table answers alone.
const FIRST_BITS: u8 = 24;

/// The largest next hop an entry holds (24 bits, as `rte_lpm`'s).
pub const MAX_NEXT_HOP: u32 = LOW24;

/// How big a table is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lpm4Config {
    /// Most routes it holds.
    pub max_rules: u32,
    /// Second-table groups: each first-table entry with a route longer
    /// than 24 bits below it takes one (`rte_lpm`'s `number_tbl8s`).
    pub groups: u32,
}

impl Default for Lpm4Config {
    /// 65536 routes, 256 groups (l3fwd's sizes).
    fn default() -> Self {
        Lpm4Config {
            max_rules: 1 << 16,
            groups: 256,
        }
    }
}

/// An IPv4 longest-prefix-match table (DIR-24-8).
pub struct Lpm4 {
    /// 2^24 entries, by an address's top 24 bits.
    first: Box<[u32; 1 << FIRST_BITS]>,
    /// `groups` groups of 256 entries.
    second: Box<[u32]>,
    free_groups: Vec<u32>,
    /// Every route, by (prefix length, prefix): what a delete falls back
    /// to, and what `routes` lists.
    rules: Rules<u32>,
}

impl std::fmt::Debug for Lpm4 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lpm4")
            .field("routes", &self.rules.len())
            .field("free_groups", &self.free_groups.len())
            .finish()
    }
}

fn entry(next_hop: u32, depth: u8) -> u32 {
    VALID | (depth as u32) << DEPTH_SHIFT | next_hop
}

fn depth_of(e: u32) -> u8 {
    ((e >> DEPTH_SHIFT) & 0x3f) as u8
}

impl Lpm4 {
    /// An empty table of `cfg`'s size (the first table's 64 MiB is
    /// reserved, and touched as routes fill it).
    pub fn new(cfg: Lpm4Config) -> Self {
        Lpm4 {
            first: crate::pages::huge_zeroed(1 << FIRST_BITS)
                .into_boxed_slice()
                .try_into()
                .expect("2^24 entries"),
            second: crate::pages::huge_zeroed(cfg.groups as usize * GROUP_LEN).into_boxed_slice(),
            free_groups: (0..cfg.groups).rev().collect(),
            rules: Rules::new(cfg.max_rules, MAX_NEXT_HOP),
        }
    }

    /// Routes held.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether it holds no route.
    pub fn is_empty(&self) -> bool {
        self.rules.len() == 0
    }

    /// Second-table groups not in use.
    pub fn free_groups(&self) -> usize {
        self.free_groups.len()
    }

    /// Every route: (prefix, length, next hop), shortest first.
    pub fn routes(&self) -> impl Iterator<Item = (u32, u8, u32)> + '_ {
        self.rules.iter()
    }

    /// Adds the route `prefix/depth` to `next_hop` (the bits past `depth`
    /// are ignored), or replaces its next hop if the table has it. Refused,
    /// with nothing changed, when the table is full.
    pub fn add(&mut self, prefix: u32, depth: u8, next_hop: u32) -> Result<(), Error> {
        let prefix = self.rules.check(prefix, depth, next_hop)?;
        self.rules.room_for(prefix, depth)?;
        if depth > FIRST_BITS {
            self.group_of(prefix >> 8)?;
        }
        self.rules.insert(prefix, depth, next_hop);
        let new = entry(next_hop, depth);
        self.rewrite(
            prefix,
            depth,
            |e| e & VALID == 0 || depth_of(e) <= depth,
            new,
        );
        Ok(())
    }

    /// Deletes the route `prefix/depth`; the addresses it covered fall back
    /// to the next-longest route covering them, or to none.
    pub fn delete(&mut self, prefix: u32, depth: u8) -> Result<(), Error> {
        let prefix = self.rules.check(prefix, depth, 0)?;
        self.rules.remove(prefix, depth)?;
        let fallback = self
            .rules
            .covering(prefix, depth)
            .map_or(0, |(nh, d)| entry(nh, d));
        self.rewrite(
            prefix,
            depth,
            |e| e & VALID != 0 && depth_of(e) == depth,
            fallback,
        );
        let first = (prefix >> 8) as usize;
        let span = if depth > FIRST_BITS {
            1
        } else {
            1usize << (FIRST_BITS - depth)
        };
        for i in first..first + span {
            self.fold_group(i);
        }
        Ok(())
    }

    /// Writes `new` over every entry of `prefix/depth`'s addresses for
    /// which `take` holds, in both tables.
    fn rewrite(&mut self, prefix: u32, depth: u8, take: impl Fn(u32) -> bool, new: u32) {
        let first = (prefix >> 8) as usize;
        if depth > FIRST_BITS {
            let g = (self.first[first] & LOW24) as usize;
            let at = g * GROUP_LEN + (prefix & 0xff) as usize;
            for e in &mut self.second[at..at + (1 << (32 - depth))] {
                if take(*e) {
                    *e = new;
                }
            }
            return;
        }
        for i in first..first + (1usize << (FIRST_BITS - depth)) {
            let e = self.first[i];
            if e & GROUP != 0 {
                let g = (e & LOW24) as usize;
                for s in &mut self.second[g * GROUP_LEN..(g + 1) * GROUP_LEN] {
                    if take(*s) {
                        *s = new;
                    }
                }
            } else if take(e) {
                self.first[i] = new;
            }
        }
    }

    /// The group under first-table entry `i`, made (and filled with what
    /// the entry answered) if it has none.
    fn group_of(&mut self, i: u32) -> Result<usize, Error> {
        let e = self.first[i as usize];
        if e & GROUP != 0 {
            return Ok((e & LOW24) as usize);
        }
        let g = self.free_groups.pop().ok_or(Error::Full {
            what: "second-table groups (routes longer than /24 under distinct /24s)",
        })? as usize;
        self.second[g * GROUP_LEN..(g + 1) * GROUP_LEN].fill(e);
        self.first[i as usize] = VALID | GROUP | g as u32;
        Ok(g)
    }

    /// Gives first-table entry `i`'s group back when its 256 entries say
    /// one thing a first-table entry can say (a route of 24 bits or
    /// fewer, or none), as `rte_lpm` recycles its groups.
    fn fold_group(&mut self, i: usize) {
        let e = self.first[i];
        if e & GROUP == 0 {
            return;
        }
        let g = (e & LOW24) as usize;
        let group = &self.second[g * GROUP_LEN..(g + 1) * GROUP_LEN];
        let one = group[0];
        if group.iter().all(|&s| s == one) && (one & VALID == 0 || depth_of(one) <= FIRST_BITS) {
            self.first[i] = one;
            self.free_groups.push(g as u32);
        }
    }

    /// The next hop of the longest route covering `addr`.
    #[inline]
    pub fn lookup(&self, addr: u32) -> Option<u32> {
        // In bounds: a 24-bit index into 2^24 entries (the checks go).
        self.resolve(self.first[(addr >> 8) as usize], addr)
    }

    /// The answer of first-table entry `e` for `addr`.
    #[inline(always)]
    fn resolve(&self, e: u32, addr: u32) -> Option<u32> {
        let e = match e & GROUP {
            0 => e,
            _ => self.second[((e & LOW24) as usize) << 8 | (addr & 0xff) as usize],
        };
        (e & VALID != 0).then_some(e & LOW24)
    }

    /// Four lookups at once (as `rte_lpm_lookupx4`): the four first-table
    /// loads are independent, so their cache misses overlap.
    #[inline]
    pub fn lookup4(&self, addrs: [u32; 4]) -> [Option<u32>; 4] {
        let e = addrs.map(|a| self.first[(a >> 8) as usize]);
        [
            self.resolve(e[0], addrs[0]),
            self.resolve(e[1], addrs[1]),
            self.resolve(e[2], addrs[2]),
            self.resolve(e[3], addrs[3]),
        ]
    }

    /// [`lookup`](Self::lookup) for a burst: `out[k]` for `addrs[k]`
    /// (as many as the shorter of the two), four at a time.
    #[inline]
    pub fn lookup_bulk(&self, addrs: &[u32], out: &mut [Option<u32>]) {
        crate::in_fours(addrs, out, |a| self.lookup4(a), |a| self.lookup(a));
    }
}
