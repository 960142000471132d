//! What each driver offers, declared once, as DPDK's
//! `doc/guides/nics/features/*.ini`: every driver lists its
//! [`Feature`]s ([`Driver::features`](super::Driver::features),
//! [`PciDriver::features`](super::PciDriver::features)), the features the
//! generic port gives every driver ([`COMMON`]) are added, and
//! [`matrix`] writes the table the repository keeps in
//! `docs/features.md`. A conformance test (`apps/tests/features.rs`)
//! opens every port kind it can on the machine and exercises each
//! declared feature on it; a declaration without a check, or a
//! capability a port shows without declaring it, fails.
use std::fmt::Write;

/// A port feature, named as in DPDK's features matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feature {
    /// [`Port::link`](super::Port::link) reports carrier and speed.
    LinkStatus,
    /// [`Port::link_events`](super::Port::link_events).
    LinkStatusEvent,
    /// Rx queues offer an interrupt fd for the run loop's sleep.
    RxInterrupt,
    /// Per-queue start and stop, and deferred start.
    QueueStartStop,
    /// [`Port::set_mtu`](super::Port::set_mtu) changes what is received.
    MtuUpdate,
    /// Frames larger than an mbuf arrive as chains
    /// ([`Offloads::RX_SCATTER`](super::Offloads::RX_SCATTER)).
    ScatteredRx,
    /// Chains are sent ([`Offloads::TX_MULTI_SEGS`](super::Offloads::TX_MULTI_SEGS)).
    MultiSegmentTx,
    /// Promiscuous mode changes what the port receives.
    PromiscuousMode,
    /// All-multicast mode changes what the port receives.
    AllmulticastMode,
    /// Further unicast and multicast addresses
    /// ([`Port::set_mac_filter`](super::Port::set_mac_filter)).
    MacFilter,
    /// Flows hashed and spread over the rx queues, the hash in the mbuf.
    RssHash,
    /// The app's RSS key and hashed headers ([`RssConfig`](super::RssConfig)),
    /// read back ([`Port::rss_conf`](super::Port::rss_conf)) and changed
    /// ([`Port::set_rss_hash`](super::Port::set_rss_hash)).
    RssKeyUpdate,
    /// The app's redirection table
    /// ([`Port::set_rss_reta`](super::Port::set_rss_reta)), read back by
    /// [`Port::rss_conf`](super::Port::rss_conf).
    RssRetaUpdate,
    /// VLAN filter ([`Port::set_vlan_filter`](super::Port::set_vlan_filter)).
    VlanFilter,
    /// VLAN strip and insert.
    VlanOffload,
    /// IPv4, TCP and UDP checksums verified on receive and filled on send.
    ChecksumOffload,
    /// Received frames classified into the mbuf's packet type.
    PacketTypeParsing,
    /// [`Port::stats`](super::Port::stats).
    BasicStats,
    /// [`Port::xstats`](super::Port::xstats), with the driver's own.
    ExtendedStats,
    /// Counters per queue.
    StatsPerQueue,
    /// [`Port::fw_version`](super::Port::fw_version).
    FwVersion,
}

impl Feature {
    /// Every feature, in the matrix's order.
    pub const ALL: [Feature; 21] = [
        Feature::LinkStatus,
        Feature::LinkStatusEvent,
        Feature::RxInterrupt,
        Feature::QueueStartStop,
        Feature::MtuUpdate,
        Feature::ScatteredRx,
        Feature::MultiSegmentTx,
        Feature::PromiscuousMode,
        Feature::AllmulticastMode,
        Feature::MacFilter,
        Feature::RssHash,
        Feature::RssKeyUpdate,
        Feature::RssRetaUpdate,
        Feature::VlanFilter,
        Feature::VlanOffload,
        Feature::ChecksumOffload,
        Feature::PacketTypeParsing,
        Feature::BasicStats,
        Feature::ExtendedStats,
        Feature::StatsPerQueue,
        Feature::FwVersion,
    ];

    /// The name DPDK's matrix gives it.
    pub const fn name(self) -> &'static str {
        match self {
            Feature::LinkStatus => "Link status",
            Feature::LinkStatusEvent => "Link status event",
            Feature::RxInterrupt => "Rx interrupt",
            Feature::QueueStartStop => "Queue start/stop",
            Feature::MtuUpdate => "MTU update",
            Feature::ScatteredRx => "Scattered Rx",
            Feature::MultiSegmentTx => "Multi-segment Tx",
            Feature::PromiscuousMode => "Promiscuous mode",
            Feature::AllmulticastMode => "Allmulticast mode",
            Feature::MacFilter => "Unicast/multicast MAC filter",
            Feature::RssHash => "RSS hash",
            Feature::RssKeyUpdate => "RSS key update",
            Feature::RssRetaUpdate => "RSS reta update",
            Feature::VlanFilter => "VLAN filter",
            Feature::VlanOffload => "VLAN offload",
            Feature::ChecksumOffload => "L3/L4 checksum offload",
            Feature::PacketTypeParsing => "Packet type parsing",
            Feature::BasicStats => "Basic stats",
            Feature::ExtendedStats => "Extended stats",
            Feature::StatsPerQueue => "Stats per queue",
            Feature::FwVersion => "FW version",
        }
    }
}

/// How fully a driver offers a feature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// Always.
    Yes,
    /// Only where the device or peer offers it; the note says when.
    Partial(&'static str),
    /// By the generic port, in software.
    Software,
}

/// One declared feature.
pub type Declared = (Feature, Support);

/// What the generic port ([`EthDev`](super::EthDev)) gives every driver.
pub const COMMON: &[Declared] = &[
    (Feature::LinkStatus, Support::Yes),
    (Feature::QueueStartStop, Support::Software),
    (Feature::MtuUpdate, Support::Yes),
    (Feature::VlanFilter, Support::Software),
    (Feature::VlanOffload, Support::Software),
    (Feature::PacketTypeParsing, Support::Software),
    (Feature::BasicStats, Support::Yes),
    (Feature::ExtendedStats, Support::Yes),
    (Feature::StatsPerQueue, Support::Yes),
];

/// A driver's features: [`COMMON`] with its own `declared` (which win
/// where both name one).
pub fn of(declared: &[Declared]) -> Vec<Declared> {
    let mut all: Vec<Declared> = declared.to_vec();
    for c in COMMON {
        if !all.iter().any(|d| d.0 == c.0) {
            all.push(*c);
        }
    }
    all.sort_by_key(|d| d.0);
    all
}

/// The features matrix in Markdown: a row per feature, a column per
/// driver (`drivers`: name and declared features, as [`of`] completes
/// them), `Y` offered, `S` by the generic port in software, `P` where
/// the device or peer offers it (the notes below the table, one per
/// distinct condition).
pub fn matrix(drivers: &[(&str, Vec<Declared>)]) -> String {
    let mut out = String::new();
    let mut notes: Vec<&str> = Vec::new();
    out.push_str("| Feature |");
    for (name, _) in drivers {
        let _ = write!(out, " {name} |");
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(drivers.len()));
    out.push('\n');
    for f in Feature::ALL {
        let _ = write!(out, "| {} |", f.name());
        for (_, decl) in drivers {
            let cell = match decl.iter().find(|d| d.0 == f).map(|d| d.1) {
                None => String::new(),
                Some(Support::Yes) => "Y".into(),
                Some(Support::Software) => "S".into(),
                Some(Support::Partial(note)) => {
                    let n = match notes.iter().position(|n| *n == note) {
                        Some(i) => i + 1,
                        None => {
                            notes.push(note);
                            notes.len()
                        }
                    };
                    format!("P{n}")
                }
            };
            let _ = write!(out, " {cell} |");
        }
        out.push('\n');
    }
    if !notes.is_empty() {
        out.push('\n');
        for (i, n) in notes.iter().enumerate() {
            let _ = writeln!(out, "P{}. {n}", i + 1);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_driver_declaration_wins_over_the_common_one_and_notes_are_numbered() {
        let d = of(&[
            (Feature::FwVersion, Support::Yes),
            (Feature::BasicStats, Support::Partial("with luck")),
        ]);
        assert!(d.contains(&(Feature::FwVersion, Support::Yes)));
        assert!(d.contains(&(Feature::BasicStats, Support::Partial("with luck"))));
        assert!(!d.contains(&(Feature::BasicStats, Support::Yes)));
        let m = matrix(&[("a", d), ("b", of(&[]))]);
        assert!(m.contains("| FW version | Y |  |"), "{m}");
        assert!(m.contains("| Basic stats | P1 | Y |"), "{m}");
        assert!(m.contains("P1. with luck"), "{m}");
        // The header row and one row per feature.
        assert_eq!(
            m.lines().filter(|l| l.starts_with("| ")).count(),
            Feature::ALL.len() + 1
        );
    }
}
