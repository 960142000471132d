//! IPv6 longest-prefix match, as DPDK's `rte_lpm6`: a first table indexed
//! by an address's top 16 bits, then groups of 256 entries, one level per
//! further byte. A route of up to 16 bits is answered by the first table
//! alone; a longer one turns the entries on its path into pointers to
//! groups, down to the level its last bit falls in, where it fills the
//! entries it covers. A lookup is one load per level it goes down (a /48
//! takes five, a /64 seven).
//!
//! An entry is a `u32`: bit 31 valid; bit 30 "points to a group"; bits
//! 22-29 the prefix length the entry came from; bits 0-21 the next hop, or
//! the group's index. As in [`Lpm4`](crate::Lpm4), adding a route
//! overwrites only entries of shorter prefixes, deleting one restores the
//! longest shorter route that covers it (from the rules kept beside the
//! tables), a group whose 256 entries say one thing goes back to the free
//! list, and a `/0` route is allowed.
use crate::rules::Rules;
use crate::Error;

const VALID: u32 = 1 << 31;
const GROUP: u32 = 1 << 30;
const DEPTH_SHIFT: u32 = 22;
const LOW22: u32 = (1 << 22) - 1;
/// Bits the first table is indexed by.
const FIRST_BITS: u8 = 16;
/// Entries in a group (one byte of the address).
const GROUP_LEN: usize = 256;

/// The largest next hop an entry holds (22 bits; `rte_lpm6`'s is 21).
pub const MAX_NEXT_HOP: u32 = LOW22;

/// How big a table is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lpm6Config {
    /// Most routes it holds.
    pub max_rules: u32,
    /// Groups of 256 entries (`rte_lpm6`'s `number_tbl8s`): a route
    /// takes one per level below the first it reaches that no other
    /// route's path has made yet.
    pub groups: u32,
}

impl Default for Lpm6Config {
    /// l3fwd's sizes: 1024 routes, 65536 groups.
    fn default() -> Self {
        Lpm6Config {
            max_rules: 1024,
            groups: 1 << 16,
        }
    }
}

/// An IPv6 longest-prefix-match table.
pub struct Lpm6 {
    /// 2^16 entries, by an address's top 16 bits.
    first: Box<[u32; 1 << FIRST_BITS]>,
    /// `groups` groups of 256 entries.
    groups: Box<[u32]>,
    free_groups: Vec<u32>,
    /// Every route, by (prefix length, prefix).
    rules: Rules<u128>,
}

impl std::fmt::Debug for Lpm6 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lpm6")
            .field("routes", &self.rules.len())
            .field("free_groups", &self.free_groups.len())
            .finish()
    }
}

fn entry(next_hop: u32, depth: u8) -> u32 {
    VALID | (depth as u32) << DEPTH_SHIFT | next_hop
}

fn depth_of(e: u32) -> u8 {
    ((e >> DEPTH_SHIFT) & 0xff) as u8
}

/// The index bits `[lo, lo + width)` (from the top) of `a`.
fn field(a: u128, lo: u8, width: u8) -> usize {
    ((a >> (128 - lo as u32 - width as u32)) & ((1u128 << width) - 1)) as usize
}

/// Where a table of entries lives: the first table, or group `g`.
#[derive(Clone, Copy)]
enum Table {
    First,
    Group(usize),
}

/// One rewrite of the entries a prefix covers.
struct Rewrite<F: Fn(u32) -> bool> {
    prefix: u128,
    depth: u8,
    take: F,
    new: u32,
}

impl Lpm6 {
    /// An empty table of `cfg`'s size.
    pub fn new(cfg: Lpm6Config) -> Self {
        Lpm6 {
            first: crate::pages::huge_zeroed(1 << FIRST_BITS)
                .into_boxed_slice()
                .try_into()
                .expect("2^16 entries"),
            groups: crate::pages::huge_zeroed(cfg.groups as usize * GROUP_LEN).into_boxed_slice(),
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

    /// Groups not in use.
    pub fn free_groups(&self) -> usize {
        self.free_groups.len()
    }

    /// Every route: (prefix, length, next hop), shortest first.
    pub fn routes(&self) -> impl Iterator<Item = (u128, u8, u32)> + '_ {
        self.rules.iter()
    }

    fn slice(&mut self, t: Table) -> &mut [u32] {
        match t {
            Table::First => &mut self.first[..],
            Table::Group(g) => &mut self.groups[g * GROUP_LEN..(g + 1) * GROUP_LEN],
        }
    }

    /// Groups a route of `prefix/depth` would need that its path lacks.
    fn groups_needed(&self, prefix: u128, depth: u8) -> usize {
        let (mut e, mut lo, mut width) = (self.first[field(prefix, 0, FIRST_BITS)], 0, FIRST_BITS);
        let mut need = 0;
        while depth > lo + width {
            lo += width;
            width = 8;
            if need > 0 || e & GROUP == 0 {
                need += 1;
                continue;
            }
            let g = (e & LOW22) as usize;
            e = self.groups[g * GROUP_LEN + field(prefix, lo, 8)];
        }
        need
    }

    /// Adds the route `prefix/depth` to `next_hop` (the bits past `depth`
    /// are ignored), or replaces its next hop if the table has it. Refused,
    /// with nothing changed, when the routes or the groups it needs run
    /// out.
    pub fn add(&mut self, prefix: u128, depth: u8, next_hop: u32) -> Result<(), Error> {
        let prefix = self.rules.check(prefix, depth, next_hop)?;
        self.rules.room_for(prefix, depth)?;
        if self.groups_needed(prefix, depth) > self.free_groups.len() {
            return Err(Error::Full {
                what: "groups (the levels below the first that the route's path needs)",
            });
        }
        self.rules.insert(prefix, depth, next_hop);
        let r = Rewrite {
            prefix,
            depth,
            take: |e: u32| e & VALID == 0 || depth_of(e) <= depth,
            new: entry(next_hop, depth),
        };
        self.rewrite(Table::First, 0, FIRST_BITS, &r);
        Ok(())
    }

    /// Deletes the route `prefix/depth`; the addresses it covered fall back
    /// to the longest shorter route covering them, or to none.
    pub fn delete(&mut self, prefix: u128, depth: u8) -> Result<(), Error> {
        let prefix = self.rules.check(prefix, depth, 0)?;
        self.rules.remove(prefix, depth)?;
        let fallback = self
            .rules
            .covering(prefix, depth)
            .map_or(0, |(nh, d)| entry(nh, d));
        let r = Rewrite {
            prefix,
            depth,
            take: |e: u32| e & VALID != 0 && depth_of(e) == depth,
            new: fallback,
        };
        self.rewrite(Table::First, 0, FIRST_BITS, &r);
        Ok(())
    }

    /// Applies `r` to table `t`, which covers address bits `[lo, lo +
    /// width)` under its parent: the entries the prefix covers here, or
    /// the one on its path (made a group if it is not). Groups below are
    /// rewritten first and folded back into their entry when all their
    /// entries agree.
    fn rewrite<F: Fn(u32) -> bool>(&mut self, t: Table, lo: u8, width: u8, r: &Rewrite<F>) {
        let hi = lo + width;
        if r.depth > hi {
            let i = field(r.prefix, lo, width);
            // None only when the groups ran out, which `add` checked
            // first; a delete's path is made already.
            if let Some(g) = self.group_at(t, i) {
                self.rewrite(Table::Group(g), hi, 8, r);
                self.fold(t, i, hi);
            }
            return;
        }
        let (first, count) = if r.depth <= lo {
            (0, 1usize << width)
        } else {
            (field(r.prefix, lo, width), 1usize << (hi - r.depth))
        };
        for i in first..first + count {
            let e = self.slice(t)[i];
            if e & GROUP != 0 {
                self.rewrite(Table::Group((e & LOW22) as usize), hi, 8, r);
                self.fold(t, i, hi);
            } else if (r.take)(e) {
                self.slice(t)[i] = r.new;
            }
        }
    }

    /// The group under entry `i` of `t`, made (filled with what the entry
    /// answered) if it has none and one is free.
    fn group_at(&mut self, t: Table, i: usize) -> Option<usize> {
        let e = self.slice(t)[i];
        if e & GROUP != 0 {
            return Some((e & LOW22) as usize);
        }
        let g = self.free_groups.pop()? as usize;
        self.slice(Table::Group(g)).fill(e);
        self.slice(t)[i] = VALID | GROUP | g as u32;
        Some(g)
    }

    /// Gives the group under entry `i` of `t` (its entries at bits from
    /// `lo` on) back when they all say one thing the entry above can say:
    /// no route, or one of at most `lo` bits (so that a longer route's
    /// path always keeps its groups).
    fn fold(&mut self, t: Table, i: usize, lo: u8) {
        let e = self.slice(t)[i];
        if e & GROUP == 0 {
            return;
        }
        let g = (e & LOW22) as usize;
        let group = &self.groups[g * GROUP_LEN..(g + 1) * GROUP_LEN];
        let one = group[0];
        let above = one & VALID == 0 || (one & GROUP == 0 && depth_of(one) <= lo);
        if above && group.iter().all(|&s| s == one) {
            self.slice(t)[i] = one;
            self.free_groups.push(g as u32);
        }
    }

    /// The next hop of the longest route covering `addr`.
    #[inline]
    pub fn lookup(&self, addr: u128) -> Option<u32> {
        // In bounds: a 16-bit index into 2^16 entries (the check goes).
        const _: () = assert!(FIRST_BITS == 16, "the index is the top 16 bits");
        let mut e = self.first[(addr >> 112) as usize];
        let mut lo = FIRST_BITS;
        while e & GROUP != 0 {
            e = self.step(e, addr, lo);
            lo += 8;
        }
        (e & VALID != 0).then_some(e & LOW22)
    }

    /// The entry that group entry `e` points to for `addr`'s byte at `lo`.
    #[inline(always)]
    fn step(&self, e: u32, addr: u128, lo: u8) -> u32 {
        let g = (e & LOW22) as usize;
        self.groups[g * GROUP_LEN + field(addr, lo, 8)]
    }

    /// Four lookups walked level by level together, so that each level's
    /// cache misses overlap.
    #[inline]
    pub fn lookup4(&self, addrs: [u128; 4]) -> [Option<u32>; 4] {
        let mut e = addrs.map(|a| self.first[(a >> 112) as usize]);
        let mut lo = FIRST_BITS;
        while e.iter().any(|&x| x & GROUP != 0) {
            for (x, &a) in e.iter_mut().zip(&addrs) {
                if *x & GROUP != 0 {
                    *x = self.step(*x, a, lo);
                }
            }
            lo += 8;
        }
        e.map(|x| (x & VALID != 0).then_some(x & LOW22))
    }

    /// [`lookup`](Self::lookup) for a burst: `out[k]` for `addrs[k]` (as
    /// many as the shorter of the two), four at a time.
    pub fn lookup_bulk(&self, addrs: &[u128], out: &mut [Option<u32>]) {
        crate::in_fours(addrs, out, |a| self.lookup4(a), |a| self.lookup(a));
    }
}
