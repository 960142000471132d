//! l3fwd's routes: the rule files (DPDK's formats, plus an optional
//! next-hop MAC), the built-in defaults (DPDK l3fwd's), and the tables
//! they fill.
//!
//! A longest-prefix rule is `[R]PREFIX/LEN PORT [MAC]`, IPv4 or IPv6; an
//! exact-match rule is `[R]DST SRC DPORT SPORT PROTO PORT [MAC]`:
//! destination first, as DPDK's `em_route_parse.c` reads it, so a file
//! routes the same frames in both. `#` starts a comment. DPDK's own files
//! (`lpm_default_v4.cfg`, `em_default_v4.cfg`, ...) load as they are. A
//! rule naming a port that is not in use is skipped and counted, as
//! DPDK's l3fwd skips it; a rule given twice replaces the first; a
//! malformed line is an error naming the file and line; a full table is
//! an error, never a rule silently lost.
use rpmd_lookup::{ExactTable, Lpm4, Lpm4Config, Lpm6, Lpm6Config};
use rpmd_pmd::port::MacAddr;
use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

/// How frames are looked up (`--lookup`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Longest-prefix match on the destination address.
    Lpm,
    /// Exact match on the 5-tuple.
    Em,
}

impl std::str::FromStr for Lookup {
    type Err = String;
    fn from_str(s: &str) -> Result<Lookup, String> {
        match s {
            "lpm" => Ok(Lookup::Lpm),
            "em" => Ok(Lookup::Em),
            _ => Err(format!("{s:?}: the lookups are lpm and em")),
        }
    }
}

impl Lookup {
    /// Its name, as `--lookup` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Lookup::Lpm => "lpm",
            Lookup::Em => "em",
        }
    }
}

/// Where a rule sends a frame: a port id (its `--dev` number) and, if
/// the rule names one, the next hop's MAC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    /// Output port id.
    pub port: usize,
    /// Next-hop MAC (`None`: the port's `--eth-dest`, or DPDK's default
    /// `02:00:00:00:00:<port>`).
    pub mac: Option<MacAddr>,
}

/// One rule, as read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// IPv4 prefix.
    Prefix4(u32, u8, Target),
    /// IPv6 prefix.
    Prefix6(u128, u8, Target),
    /// IPv4 5-tuple: source, destination, source port, destination port,
    /// protocol.
    Flow4([u32; 2], [u16; 2], u8, Target),
    /// IPv6 5-tuple.
    Flow6([u128; 2], [u16; 2], u8, Target),
}

impl Rule {
    fn target(&self) -> Target {
        match self {
            Rule::Prefix4(.., t)
            | Rule::Prefix6(.., t)
            | Rule::Flow4(.., t)
            | Rule::Flow6(.., t) => *t,
        }
    }
}

/// The exact-match key of an IPv4 5-tuple: two words ([`key4_wire`] of
/// the addresses' and ports' bytes in network order).
#[inline]
pub fn key4(addrs: [u32; 2], ports: [u16; 2], proto: u8) -> [u64; 2] {
    let mut a = [0u8; 8];
    a[..4].copy_from_slice(&addrs[0].to_be_bytes());
    a[4..].copy_from_slice(&addrs[1].to_be_bytes());
    let mut p = [0u8; 4];
    p[..2].copy_from_slice(&ports[0].to_be_bytes());
    p[2..].copy_from_slice(&ports[1].to_be_bytes());
    key4_wire(a, p, proto)
}

/// The exact-match key of an IPv4 5-tuple from its bytes as the headers
/// hold them: the source and destination addresses (IPv4 header bytes
/// 12-19) and the ports (the L4 header's first four bytes), each group
/// loaded as one word in native order (no byte swaps on the data path),
/// and the protocol.
#[inline]
pub fn key4_wire(addrs: [u8; 8], ports: [u8; 4], proto: u8) -> [u64; 2] {
    [
        u64::from_ne_bytes(addrs),
        u32::from_ne_bytes(ports) as u64 | (proto as u64) << 32,
    ]
}

/// The exact-match key of an IPv6 5-tuple: five words.
#[inline]
pub fn key6(addrs: [u128; 2], ports: [u16; 2], proto: u8) -> [u64; 5] {
    [
        (addrs[0] >> 64) as u64,
        addrs[0] as u64,
        (addrs[1] >> 64) as u64,
        addrs[1] as u64,
        (ports[0] as u64) << 32 | (ports[1] as u64) << 16 | proto as u64,
    ]
}

/// Parses a rules file's text (`file` names it in errors).
pub fn parse(text: &str, file: &str, lookup: Lookup) -> Result<Vec<Rule>, String> {
    let mut rules = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let body = line.split('#').next().unwrap_or("").trim();
        let body = body.strip_prefix('R').unwrap_or(body);
        if body.is_empty() {
            continue;
        }
        let rule = match lookup {
            Lookup::Lpm => prefix_rule(body),
            Lookup::Em => flow_rule(body),
        };
        rules.push(rule.map_err(|why| format!("{file} line {}: {line:?}: {why}", n + 1))?);
    }
    Ok(rules)
}

fn target(port: &str, mac: Option<&str>) -> Result<Target, String> {
    let port = port
        .parse::<u16>()
        .map_err(|_| format!("port {port:?} is not a port number"))?;
    let mac = match mac {
        Some(m) => Some(m.parse::<MacAddr>().map_err(|e| e.to_string())?),
        None => None,
    };
    Ok(Target {
        port: port as usize,
        mac,
    })
}

fn prefix_rule(body: &str) -> Result<Rule, String> {
    let (net, port, mac) = match body.split_whitespace().collect::<Vec<_>>()[..] {
        [net, port] => (net, port, None),
        [net, port, mac] => (net, port, Some(mac)),
        _ => return Err("want PREFIX/LEN PORT [MAC]".into()),
    };
    let (addr, len) = net.split_once('/').ok_or("no /LEN after the prefix")?;
    let len: u8 = len
        .parse()
        .map_err(|_| format!("prefix length {len:?} is not a number"))?;
    let t = target(port, mac)?;
    if let Ok(a) = addr.parse::<Ipv4Addr>() {
        if len > 32 {
            return Err(format!(
                "prefix length {len}: an IPv4 prefix has at most 32"
            ));
        }
        return Ok(Rule::Prefix4(a.into(), len, t));
    }
    let a: Ipv6Addr = addr
        .parse()
        .map_err(|_| format!("{addr:?} is not an IPv4 or IPv6 address"))?;
    if len > 128 {
        return Err(format!(
            "prefix length {len}: an IPv6 prefix has at most 128"
        ));
    }
    Ok(Rule::Prefix6(a.into(), len, t))
}

fn flow_rule(body: &str) -> Result<Rule, String> {
    let f: Vec<&str> = body.split_whitespace().collect();
    // DPDK's order: the destination address and port come first.
    let (dst, src, dp, sp, proto, port, mac) = match f[..] {
        [a, b, c, d, e, p] => (a, b, c, d, e, p, None),
        [a, b, c, d, e, p, m] => (a, b, c, d, e, p, Some(m)),
        _ => return Err("want DST SRC DPORT SPORT PROTO PORT [MAC]".into()),
    };
    let l4 = |s: &str| {
        s.parse::<u16>()
            .map_err(|_| format!("L4 port {s:?} is not a number up to 65535"))
    };
    let ports = [l4(sp)?, l4(dp)?];
    let proto = match proto.strip_prefix("0x") {
        Some(h) => u8::from_str_radix(h, 16),
        None => proto.parse(),
    }
    .map_err(|_| format!("protocol {proto:?} is not a number up to 255 (0x11 is UDP)"))?;
    let t = target(port, mac)?;
    if let (Ok(s), Ok(d)) = (src.parse::<Ipv4Addr>(), dst.parse::<Ipv4Addr>()) {
        return Ok(Rule::Flow4([s.into(), d.into()], ports, proto, t));
    }
    let v6 = |a: &str| {
        a.parse::<Ipv6Addr>()
            .map_err(|_| format!("{a:?} is not an address of the rule's family"))
    };
    Ok(Rule::Flow6(
        [v6(src)?.into(), v6(dst)?.into()],
        ports,
        proto,
        t,
    ))
}

/// DPDK l3fwd's built-in rules (its `*_default_v4.cfg`/`v6.cfg`): port
/// k's /24 is 198.18.k.0 and its /64 2001:200:0:k::, and one UDP flow
/// from 198.18.k.1 to 198.18.k.0 (9 → 9) per port k, for 16 ports.
pub fn defaults(lookup: Lookup) -> Vec<Rule> {
    let t = |k: usize| Target { port: k, mac: None };
    let net4 = |k: usize, host: u32| u32::from(Ipv4Addr::new(198, 18, k as u8, 0)) | host;
    let net6 = |k: usize, host: u128| (0x2001_0200u128 << 96) | (k as u128) << 64 | host;
    (0..16)
        .flat_map(|k| match lookup {
            Lookup::Lpm => [
                Rule::Prefix4(net4(k, 0), 24, t(k)),
                Rule::Prefix6(net6(k, 0), 64, t(k)),
            ],
            Lookup::Em => [
                Rule::Flow4([net4(k, 1), net4(k, 0)], [9, 9], 17, t(k)),
                Rule::Flow6([net6(k, 1), net6(k, 0)], [9, 9], 17, t(k)),
            ],
        })
        .collect()
}

/// Where a table's value sends a frame: an index into the ports in use,
/// and the destination MAC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NextHop {
    /// Output port, as an index into the ports in use.
    pub port: usize,
    /// Destination MAC.
    pub mac: MacAddr,
}

/// Table sizes (`--max-routes`, `--lpm-groups`, `--max-flows`).
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// IPv4 routes and IPv4 second-level groups.
    pub lpm4: Lpm4Config,
    /// IPv6 routes and groups.
    pub lpm6: Lpm6Config,
    /// Exact-match flows per family.
    pub flows: usize,
}

impl Default for Sizes {
    fn default() -> Self {
        Sizes {
            lpm4: Lpm4Config::default(),
            lpm6: Lpm6Config::default(),
            flows: 1 << 16,
        }
    }
}

/// The tables a run looks frames up in; their values index `hops`.
pub struct Tables {
    /// Which lookup.
    pub lookup: Lookup,
    /// IPv4 prefixes.
    pub lpm4: Lpm4,
    /// IPv6 prefixes.
    pub lpm6: Lpm6,
    /// IPv4 5-tuples.
    pub em4: ExactTable<2>,
    /// IPv6 5-tuples.
    pub em6: ExactTable<5>,
    /// The distinct next hops.
    pub hops: Vec<NextHop>,
    /// Rules loaded (a rule given twice counts once).
    pub rules: usize,
    /// Rules skipped: their port is not in use.
    pub skipped: usize,
}

impl Tables {
    /// Fills the tables from `rules`. `ports` are the ids of the ports in
    /// use (in their internal order); `eth_dest(id)` is a port's next-hop
    /// MAC where a rule names none.
    pub fn build(
        lookup: Lookup,
        rules: &[Rule],
        ports: &[usize],
        sizes: &Sizes,
        eth_dest: impl Fn(usize) -> MacAddr,
    ) -> Result<Tables, String> {
        let mut t = Tables {
            lookup,
            lpm4: Lpm4::new(sizes.lpm4),
            lpm6: Lpm6::new(sizes.lpm6),
            em4: ExactTable::new(sizes.flows, 0x13f0),
            em6: ExactTable::new(sizes.flows, 0x13f6),
            hops: Vec::new(),
            rules: 0,
            skipped: 0,
        };
        let mut hop_ids: HashMap<NextHop, u32> = HashMap::new();
        for (k, r) in rules.iter().enumerate() {
            let target = r.target();
            let Some(port) = ports.iter().position(|&p| p == target.port) else {
                t.skipped += 1;
                continue;
            };
            let hop = NextHop {
                port,
                mac: target.mac.unwrap_or_else(|| eth_dest(target.port)),
            };
            let next = t.hops.len() as u32;
            let id = *hop_ids.entry(hop).or_insert(next);
            if id == next {
                t.hops.push(hop);
            }
            let added = match *r {
                Rule::Prefix4(p, len, _) => t.lpm4.add(p, len, id).map_err(|e| e.to_string()),
                Rule::Prefix6(p, len, _) => t.lpm6.add(p, len, id).map_err(|e| e.to_string()),
                Rule::Flow4(a, pt, proto, _) => t
                    .em4
                    .add(&key4(a, pt, proto), id as u64)
                    .map_err(|e| e.to_string()),
                Rule::Flow6(a, pt, proto, _) => t
                    .em6
                    .add(&key6(a, pt, proto), id as u64)
                    .map_err(|e| e.to_string()),
            };
            added.map_err(|e| format!("rule {} ({r:?}): {e}", k + 1))?;
        }
        t.rules = t.lpm4.len() + t.lpm6.len() + t.em4.len() + t.em6.len();
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(rules: &[Rule], ports: &[usize], sizes: &Sizes) -> Result<Tables, String> {
        Tables::build(Lookup::Lpm, rules, ports, sizes, |p| {
            MacAddr::local(p as u16)
        })
    }

    #[test]
    fn dpdk_files_parse_and_bad_lines_are_named() {
        let r = parse(
            "# c\nR198.18.0.0/24 0\n\n2001:200::/64 1 02:00:00:00:01:01\n",
            "f",
            Lookup::Lpm,
        )
        .unwrap();
        assert_eq!(r.len(), 2);
        assert!(matches!(
            r[1],
            Rule::Prefix6(
                _,
                64,
                Target {
                    port: 1,
                    mac: Some(_)
                }
            )
        ));
        // As DPDK reads it: destination, source, their ports, protocol.
        let em = parse("R198.18.0.0 198.18.0.1 9 7 0x11 2\n", "em.cfg", Lookup::Em).unwrap();
        assert_eq!(
            em,
            [Rule::Flow4(
                [0xc612_0001, 0xc612_0000],
                [7, 9],
                17,
                Target { port: 2, mac: None }
            )]
        );
        let e = parse(
            "R198.18.0.0 198.18.0.1 9 9 0x11 0\nR1.2.3.4 5.6.7.8 9 9 0x1g 0\n",
            "em.cfg",
            Lookup::Em,
        )
        .unwrap_err();
        assert!(
            e.starts_with("em.cfg line 2:") && e.contains("protocol"),
            "{e}"
        );
        for (bad, why) in [
            ("10.0.0.0/33 0", "at most 32"),
            ("10.0.0.0 0", "no /LEN"),
            ("10.0.0.0/8 x", "port"),
            ("10.0.0.0/8 0 02:00", "MAC"),
            ("10.0.0.0/8", "want PREFIX"),
            ("zz/8 0", "not an IPv4 or IPv6"),
        ] {
            let e = parse(&format!("1.0.0.0/8 0\n{bad}\n"), "r", Lookup::Lpm).unwrap_err();
            assert!(e.starts_with("r line 2:") && e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn duplicates_replace_unused_ports_are_skipped_and_full_tables_refuse() {
        let t = |port, mac| Target { port, mac };
        let mac = MacAddr([2, 0, 0, 0, 9, 9]);
        let rules = [
            Rule::Prefix4(0x0a00_0000, 8, t(0, None)),
            Rule::Prefix4(0x0a00_0000, 8, t(1, Some(mac))),
            Rule::Prefix4(0x0b00_0000, 8, t(5, None)),
        ];
        let tab = build(&rules, &[0, 1], &Sizes::default()).unwrap();
        assert_eq!((tab.rules, tab.skipped), (1, 1));
        let hop = tab.hops[tab.lpm4.lookup(0x0a01_0203).unwrap() as usize];
        assert_eq!(hop, NextHop { port: 1, mac });
        let mut small = Sizes::default();
        small.lpm4.max_rules = 1;
        let two = [rules[0], Rule::Prefix4(0x0c00_0000, 8, t(0, None))];
        let Err(e) = build(&two, &[0], &small) else {
            panic!("a second route past max_rules 1 was taken")
        };
        assert!(e.contains("rule 2") && e.contains("full"), "{e}");
    }

    #[test]
    fn the_defaults_are_dpdks() {
        let d = defaults(Lookup::Lpm);
        assert!(d.contains(&Rule::Prefix4(
            u32::from(Ipv4Addr::new(198, 18, 3, 0)),
            24,
            Target { port: 3, mac: None }
        )));
        let v6: Ipv6Addr = "2001:200:0:f::".parse().unwrap();
        assert!(d.contains(&Rule::Prefix6(
            v6.into(),
            64,
            Target {
                port: 15,
                mac: None
            }
        )));
        let e = defaults(Lookup::Em);
        assert!(e.contains(&Rule::Flow4(
            [0xc612_0101, 0xc612_0100],
            [9, 9],
            17,
            Target { port: 1, mac: None }
        )));
    }
}
