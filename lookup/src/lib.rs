//! Lookup tables for forwarding apps, as DPDK's `rte_lpm` and `rte_hash`
//! serve its l3fwd.
//!
//! [`Lpm4`] is IPv4 longest-prefix match in DIR-24-8 form: a first table
//! indexed by an address's top 24 bits answers every prefix of up to 24
//! bits in one load; a prefix longer than 24 bits turns its first-table
//! entry into a pointer to a group of 256 second-table entries, indexed by
//! the last 8 bits. A lookup is one load, or two. Every entry carries the
//! prefix length it came from, so adding a route overwrites only entries
//! of shorter prefixes, and deleting one restores the next-longest route
//! that covers it (found in the rule list the table keeps beside the
//! lookup tables). Unlike `rte_lpm`, a default route (`/0`) is allowed.
//!
//! Writers take `&mut self`; readers share `&self`. The tables are plain
//! memory; the one `unsafe` call asks the kernel to back the big ones
//! with huge pages (`pages`).
//!
//! [`Lpm6`] is IPv6 longest-prefix match as `rte_lpm6` lays it out: a
//! first table by the top 16 bits, then a group of 256 entries per further
//! byte a route needs.
//!
//! Both prefix tables keep their routes in one shared list (`rules`:
//! limits, the fallback a delete restores); [`testing::linear_scan`] is
//! the reference their tests and fuzz targets check them against.
//!
//! [`ExactTable`] is exact match for flows (5-tuples and other keys of
//! whole 64-bit words) as `rte_hash` in its lock-free read/write mode:
//! cuckoo buckets of signatures beside a key store, lookups from any number
//! of threads ([`ExactReader`]) while one writer adds and deletes, a change
//! counter and per-entry sequence numbers in place of locks.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod exact;
pub mod lpm;
pub mod lpm6;
mod pages;
mod rules;

pub use rules::{testing, Addr};

pub use exact::{ExactReader, ExactTable};
pub use lpm::{Lpm4, Lpm4Config};
pub use lpm6::{Lpm6, Lpm6Config};

/// `out[k]` for `addrs[k]` (as many as the shorter of the two), four at a
/// time through `four` and the rest through `one`: the bulk lookup of
/// both prefix tables.
#[inline(always)]
fn in_fours<A: Copy>(
    addrs: &[A],
    out: &mut [Option<u32>],
    four: impl Fn([A; 4]) -> [Option<u32>; 4],
    one: impl Fn(A) -> Option<u32>,
) {
    let n = addrs.len().min(out.len());
    let (addrs, out) = (&addrs[..n], &mut out[..n]);
    let mut fours = out.chunks_exact_mut(4);
    for (o, a) in (&mut fours).zip(addrs.chunks_exact(4)) {
        o.copy_from_slice(&four([a[0], a[1], a[2], a[3]]));
    }
    let rest = n - n % 4;
    for (o, &a) in fours.into_remainder().iter_mut().zip(&addrs[rest..]) {
        *o = one(a);
    }
}

/// What a table refuses.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// A prefix length past the address's bits.
    #[error("prefix length {depth}: at most {max}")]
    Depth {
        /// The length asked for.
        depth: u8,
        /// The longest prefix the table takes.
        max: u8,
    },
    /// A next hop the entries cannot hold.
    #[error("next hop {next_hop}: at most {max}")]
    NextHop {
        /// The next hop asked for.
        next_hop: u32,
        /// The largest the table stores.
        max: u32,
    },
    /// The table has no room for the route: the rule limit, or no free
    /// group of second-table entries for a prefix longer than 24 bits.
    #[error("table full: {what} (a route is never dropped silently; size the table for it)")]
    Full {
        /// Which limit was reached.
        what: &'static str,
    },
    /// A route the table does not have.
    #[error("no route {prefix}/{depth}")]
    NoRoute {
        /// The prefix, dotted.
        prefix: String,
        /// Its length.
        depth: u8,
    },
}
