//! The RSS settings an app chooses (DPDK's `rte_eth_rss_conf` and its
//! redirection table): which headers feed the hash ([`RssHash`], DPDK's
//! `rss_hf`), the Toeplitz key, and the table that maps a hash to a
//! receive queue. A device says what it offers ([`RssCaps`]); the
//! generic port checks a configuration against it
//! ([`RssConfig::validate`]) before the device sees it.
use crate::net::rss::RSS_KEY;
use crate::Error;
use std::fmt;

/// Headers the RSS hash takes, by protocol (DPDK's `RTE_ETH_RSS_*`).
#[derive(Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct RssHash(u32);

impl RssHash {
    /// Nothing hashed.
    pub const NONE: RssHash = RssHash(0);
    /// IPv4 source and destination addresses.
    pub const IPV4: RssHash = RssHash(1 << 0);
    /// ... and TCP ports over IPv4.
    pub const IPV4_TCP: RssHash = RssHash(1 << 1);
    /// ... and UDP ports over IPv4.
    pub const IPV4_UDP: RssHash = RssHash(1 << 2);
    /// IPv6 source and destination addresses.
    pub const IPV6: RssHash = RssHash(1 << 3);
    /// ... and TCP ports over IPv6.
    pub const IPV6_TCP: RssHash = RssHash(1 << 4);
    /// ... and UDP ports over IPv6.
    pub const IPV6_UDP: RssHash = RssHash(1 << 5);
    /// Every kind above.
    pub const ALL: RssHash = RssHash(0x3f);

    const NAMES: [(RssHash, &'static str); 6] = [
        (Self::IPV4, "ipv4"),
        (Self::IPV4_TCP, "ipv4-tcp"),
        (Self::IPV4_UDP, "ipv4-udp"),
        (Self::IPV6, "ipv6"),
        (Self::IPV6_TCP, "ipv6-tcp"),
        (Self::IPV6_UDP, "ipv6-udp"),
    ];

    /// Both sets.
    pub const fn union(self, other: RssHash) -> RssHash {
        RssHash(self.0 | other.0)
    }

    /// Whether every kind of `other` is in this set.
    pub const fn contains(self, other: RssHash) -> bool {
        self.0 & other.0 == other.0
    }

    /// The kinds of this set not in `other`.
    pub const fn minus(self, other: RssHash) -> RssHash {
        RssHash(self.0 & !other.0)
    }

    /// Whether nothing is hashed.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// A device's encoding of this set: the bits `table` gives each kind
    /// in it, or'ed together.
    pub fn to_bits<T>(self, table: &[(RssHash, T)]) -> T
    where
        T: Copy + Default + std::ops::BitOr<Output = T>,
    {
        table
            .iter()
            .filter(|(kind, _)| self.contains(*kind))
            .fold(T::default(), |bits, &(_, b)| bits | b)
    }
}

impl std::ops::BitOr for RssHash {
    type Output = RssHash;
    fn bitor(self, other: RssHash) -> RssHash {
        self.union(other)
    }
}

impl fmt::Debug for RssHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = Self::NAMES
            .iter()
            .filter(|(k, _)| self.contains(*k))
            .map(|(_, n)| *n)
            .collect();
        if names.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&names.join(","))
        }
    }
}

/// A port's RSS configuration, used when it hashes ([`Offloads::RX_RSS`]
/// asked, or several receive queues, which only RSS feeds).
///
/// [`Offloads::RX_RSS`]: super::Offloads::RX_RSS
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RssConfig {
    /// The headers hashed; each must be in [`RssCaps::hash`].
    pub hash: RssHash,
    /// The Toeplitz key (DPDK's default, Microsoft's, unless set).
    pub key: [u8; 40],
    /// The redirection table: hash `h` goes to receive queue
    /// `reta[h mod len]`. Empty: the queues in turn (DPDK's default);
    /// else exactly [`RssCaps::reta_size`] entries, each below the
    /// configuration's `rx_queues`.
    pub reta: Vec<u16>,
}

impl Default for RssConfig {
    fn default() -> Self {
        RssConfig {
            hash: RssHash::ALL,
            key: RSS_KEY,
            reta: Vec::new(),
        }
    }
}

/// What a device's RSS offers (the default: none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RssCaps {
    /// The headers it can hash.
    pub hash: RssHash,
    /// Entries of its redirection table (0: it has none, and spreads
    /// hashes over the queues by its own rule).
    pub reta_size: u16,
    /// Whether the key can be set.
    pub key: bool,
}

impl RssConfig {
    /// Checks the configuration against the device's `caps` for
    /// `rx_queues` receive queues; the error names what is wrong.
    pub fn validate(&self, port: &str, caps: &RssCaps, rx_queues: u16) -> Result<(), Error> {
        let bad = |detail: String| Error::Config {
            port: port.to_string(),
            what: "rss",
            detail,
        };
        // A port without RSS of its own (a virtio-net device's steering,
        // a ring's queues) spreads frames by its own rule: the defaults
        // stand for that, settings of the app's cannot be honoured.
        if caps.hash.is_empty() {
            if *self == RssConfig::default() {
                return Ok(());
            }
            return Err(bad(
                "settings of its own: this port spreads frames over its queues by its own rule"
                    .into(),
            ));
        }
        let missing = self.hash.minus(caps.hash);
        if !missing.is_empty() {
            return Err(bad(format!(
                "hash {missing:?}: this port hashes {:?}",
                caps.hash
            )));
        }
        if self.key != RSS_KEY && !caps.key {
            return Err(bad("a key of its own: this port's key is fixed".into()));
        }
        Self::check_reta(&self.reta, caps, rx_queues).map_err(bad)
    }

    /// A redirection table for `caps` and `rx_queues`: empty, or
    /// `reta_size` entries below `rx_queues`.
    pub fn check_reta(reta: &[u16], caps: &RssCaps, rx_queues: u16) -> Result<(), String> {
        if reta.is_empty() {
            return Ok(());
        }
        if caps.reta_size == 0 {
            return Err("a redirection table: this port has none".into());
        }
        if reta.len() != caps.reta_size as usize {
            return Err(format!(
                "a redirection table of {} entries; this port's has {}",
                reta.len(),
                caps.reta_size
            ));
        }
        match reta.iter().position(|&q| q >= rx_queues) {
            Some(i) => Err(format!(
                "redirection entry {i} is queue {}; the configuration has {rx_queues}",
                reta[i]
            )),
            None => Ok(()),
        }
    }

    /// The table to program into `size` entries over `rx_queues`: the
    /// configured one, or the queues in turn.
    pub fn table(&self, size: u16, rx_queues: u16) -> Vec<u16> {
        if self.reta.len() == size as usize {
            return self.reta.clone();
        }
        (0..size).map(|i| i % rx_queues.max(1)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_are_checked_against_what_the_device_offers() {
        let caps = RssCaps {
            hash: RssHash::IPV4 | RssHash::IPV4_TCP,
            reta_size: 8,
            key: false,
        };
        let ok = RssConfig {
            hash: RssHash::IPV4,
            ..RssConfig::default()
        };
        assert!(ok.validate("p", &caps, 2).is_ok());
        let e = RssConfig::default().validate("p", &caps, 2).unwrap_err();
        assert!(e.to_string().contains("ipv4-udp"), "{e}");
        let key = RssConfig {
            key: [1; 40],
            ..ok.clone()
        };
        assert!(key
            .validate("p", &caps, 2)
            .unwrap_err()
            .to_string()
            .contains("key"));
        let short = RssConfig {
            reta: vec![0; 4],
            ..ok.clone()
        };
        assert!(short
            .validate("p", &caps, 2)
            .unwrap_err()
            .to_string()
            .contains("8"));
        let past = RssConfig {
            reta: vec![0, 1, 2, 0, 1, 0, 1, 0],
            ..ok.clone()
        };
        let e = past.validate("p", &caps, 2).unwrap_err().to_string();
        assert!(e.contains("entry 2 is queue 2"), "{e}");
        assert_eq!(ok.table(4, 3), vec![0, 1, 2, 0]);
        let bits = [
            (RssHash::IPV4, 1u8),
            (RssHash::IPV4_TCP, 4),
            (RssHash::IPV6, 8),
        ];
        assert_eq!((RssHash::IPV4 | RssHash::IPV6).to_bits(&bits), 9);
        // A port with no RSS of its own takes the defaults, nothing else.
        let none = RssCaps::default();
        assert!(RssConfig::default().validate("p", &none, 4).is_ok());
        assert!(ok
            .validate("p", &none, 4)
            .unwrap_err()
            .to_string()
            .contains("own rule"));
        assert_eq!(
            format!("{:?}", RssHash::ALL),
            "ipv4,ipv4-tcp,ipv4-udp,ipv6,ipv6-tcp,ipv6-udp"
        );
    }
}
