//! The egress configuration and its text form, shared by the apps'
//! `--egress PORT=SPEC` and `--tx-rate SPEC`:
//!
//! ```text
//! RATE[,burst=SIZE][,limit=FRAMES][,by=pcp|dscp][,classes=CLASS/CLASS/...]
//! CLASS = NAME:KEYS[:RATE[:CEIL]]      KEYS = default | 5 | 4-7 | 0-2+default
//! ```
//!
//! Rates take tc's units: a bare number or `bit`, `kbit`, `mbit`, `gbit`,
//! `tbit` are bits per second; `bps`, `kbps`, `mbps`, `gbps` bytes per
//! second (decimal multiples, as tc). Sizes are bytes, with `k`/`kb`
//! (1024) or `m`/`mb` (1024²). Classes are listed highest priority first;
//! a class without a rate may use the whole port rate whenever no class
//! above it wants it (strict priority); a class with one is guaranteed it
//! and may borrow up to its ceiling (the port rate by default) what the
//! classes above leave (HTB's model). Frames whose key no class lists go
//! to the class whose keys say `default`, or else to the last class.
use crate::Error;

/// Bytes per second above which a nanosecond clock cannot pace frames:
/// one 64-byte frame per nanosecond (512 Gbit/s).
pub const MAX_RATE: u64 = 64_000_000_000;

/// The largest bucket (burst) accepted, in bytes.
pub const MAX_BURST: u64 = 1 << 30;

/// The smallest burst accepted: one full-size Ethernet frame.
pub const MIN_BURST: u64 = 1518;

/// Frames each class queue holds by default.
pub const DEFAULT_LIMIT: usize = 1024;

/// What a frame is classified by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Classify {
    /// Nothing: one class.
    None,
    /// The outer VLAN tag's priority code point (0-7); untagged frames go
    /// to the default class.
    Pcp,
    /// The IPv4 or IPv6 DSCP (0-63), past up to two VLAN tags; frames
    /// that are not IP go to the default class.
    Dscp,
}

impl Classify {
    /// How many key values there are (8 or 64; 0 for none).
    pub fn keys(self) -> u32 {
        match self {
            Classify::None => 0,
            Classify::Pcp => 8,
            Classify::Dscp => 64,
        }
    }
}

/// One traffic class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassConfig {
    /// Its name (counters and telemetry).
    pub name: String,
    /// Bit `k` set: frames with key `k` (PCP or DSCP) belong here.
    pub keys: u64,
    /// Whether frames no class lists come here.
    pub default: bool,
    /// Guaranteed rate in bytes per second; `None`: the port rate.
    pub rate: Option<u64>,
    /// The most it may reach by borrowing; `None`: the port rate.
    pub ceil: Option<u64>,
}

/// A port's egress: its rate, bucket and classes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EgressConfig {
    /// The port rate in bytes per second; `None`: unshaped (a shared FIFO
    /// in front of the TX queue).
    pub rate: Option<u64>,
    /// Bucket depth in bytes: how far the port may run ahead of its rate
    /// after a quiet spell.
    pub burst: u64,
    /// Frames each class queue holds; more are dropped (tail drop).
    pub limit: usize,
    /// The classifier.
    pub classify: Classify,
    /// The classes, highest priority first (at least one).
    pub classes: Vec<ClassConfig>,
}

impl EgressConfig {
    /// An unshaped, unclassified queue of `limit` frames: what lcores
    /// sharing one TX queue go through.
    pub fn fifo(limit: usize) -> Self {
        EgressConfig {
            rate: None,
            burst: MIN_BURST,
            limit,
            classify: Classify::None,
            classes: vec![ClassConfig {
                name: "all".into(),
                keys: 0,
                default: true,
                rate: None,
                ceil: None,
            }],
        }
    }

    /// A port rate of `rate` bytes per second, one class, the default
    /// bucket.
    pub fn shaped(rate: u64) -> Self {
        EgressConfig {
            rate: Some(rate),
            burst: default_burst(rate),
            ..Self::fifo(DEFAULT_LIMIT)
        }
    }

    /// Parses the text form (see the module docs).
    pub fn parse(spec: &str) -> Result<Self, Error> {
        let bad = |reason: String| Error::Egress {
            spec: spec.to_string(),
            reason,
        };
        let mut parts = spec.split(',');
        let rate = parse_rate(parts.next().unwrap_or("")).map_err(bad)?;
        let mut cfg = Self::shaped(rate);
        let (mut burst, mut classes) = (None, None);
        for kv in parts {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| bad(format!("{kv:?} is not key=value")))?;
            match k {
                "burst" => burst = Some(parse_size(v).map_err(bad)?),
                "limit" => {
                    cfg.limit = v
                        .parse()
                        .ok()
                        .filter(|n| (1..=1 << 20).contains(n))
                        .ok_or_else(|| bad(format!("limit {v:?}: 1 to 1048576 frames")))?
                }
                "by" => {
                    cfg.classify = match v {
                        "pcp" => Classify::Pcp,
                        "dscp" => Classify::Dscp,
                        _ => return Err(bad(format!("by={v:?}: pcp or dscp"))),
                    }
                }
                "classes" => classes = Some(v),
                _ => {
                    return Err(bad(format!(
                        "unknown key {k:?} (known: burst, limit, by, classes)"
                    )))
                }
            }
        }
        if let Some(b) = burst {
            if !(MIN_BURST..=MAX_BURST).contains(&b) {
                return Err(bad(format!(
                    "burst {b} bytes: from {MIN_BURST} (a full-size frame) to {MAX_BURST}"
                )));
            }
            cfg.burst = b;
        }
        match (classes, cfg.classify) {
            (None, Classify::None) => {}
            (Some(_), Classify::None) => {
                return Err(bad("classes= needs by=pcp or by=dscp".into()))
            }
            (None, _) => return Err(bad("by= needs classes=".into())),
            (Some(c), by) => cfg.classes = parse_classes(c, by, rate).map_err(bad)?,
        }
        Ok(cfg)
    }

    /// The class a frame with key `key` goes to (the default class when
    /// no class lists it).
    pub fn class_of_key(&self, key: Option<u8>) -> usize {
        key.and_then(|k| {
            self.classes
                .iter()
                .position(|c| k < 64 && c.keys & (1 << k) != 0)
        })
        .unwrap_or_else(|| self.default_class())
    }

    /// The class for frames no class lists.
    pub fn default_class(&self) -> usize {
        self.classes
            .iter()
            .position(|c| c.default)
            .unwrap_or(self.classes.len() - 1)
    }
}

/// The default bucket: 10 ms at the rate, at least 16 KiB. An lcore
/// preempted for longer than the bucket lasts loses the tokens that
/// overflow it (the port delivers less than its rate): 10 ms covers a
/// scheduler time slice or two on a shared CPU, at the cost of that much
/// burst after a quiet spell. `burst=` sets it.
pub fn default_burst(rate: u64) -> u64 {
    (rate / 100).clamp(16 << 10, MAX_BURST)
}

/// Parses a rate in tc's units into bytes per second.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bits_per_unit: f64 = match unit {
        "" | "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "tbit" => 1e12,
        "bps" => 8.0,
        "kbps" => 8e3,
        "mbps" => 8e6,
        "gbps" => 8e9,
        _ => {
            return Err(format!(
                "rate {s:?}: unknown unit {unit:?} (tc's: bit, kbit, mbit, gbit, tbit; bps, kbps, mbps, gbps for bytes)"
            ))
        }
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("rate {s:?} is not a number with a unit, like 100mbit"))?;
    let bytes = n * bits_per_unit / 8.0;
    if bytes < 1.0 {
        return Err(format!(
            "rate {s:?}: must be at least 8 bit (1 byte) per second"
        ));
    }
    if bytes > MAX_RATE as f64 {
        return Err(format!(
            "rate {s:?} is beyond what the clock can pace (at most 512gbit: one 64-byte frame per nanosecond)"
        ));
    }
    Ok(bytes as u64)
}

/// Parses a size in bytes (`k`/`kb`, `m`/`mb` multiply by 1024, 1024²).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult = match unit {
        "" | "b" => 1,
        "k" | "kb" => 1 << 10,
        "m" | "mb" => 1 << 20,
        _ => return Err(format!("size {s:?}: bytes, or with k/kb, m/mb")),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("size {s:?} is not a number of bytes"))
}

/// Parses `NAME:KEYS[:RATE[:CEIL]]/...` against the port rate.
fn parse_classes(s: &str, by: Classify, port: u64) -> Result<Vec<ClassConfig>, String> {
    let mut out: Vec<ClassConfig> = Vec::new();
    let mut taken = 0u64;
    for c in s.split('/') {
        let mut f = c.split(':');
        let name = f.next().unwrap_or("");
        if name.is_empty()
            || !name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_')
        {
            return Err(format!(
                "class {c:?}: a name of letters, digits, - and _ first"
            ));
        }
        if out.iter().any(|o| o.name == name) {
            return Err(format!("class {name:?} given twice"));
        }
        let (keys, default) =
            parse_keys(f.next().unwrap_or(""), by).map_err(|e| format!("class {name:?}: {e}"))?;
        if keys & taken != 0 {
            let k = (keys & taken).trailing_zeros();
            return Err(format!(
                "class {name:?}: key {k} is already another class's"
            ));
        }
        if default && out.iter().any(|o| o.default) {
            return Err(format!("class {name:?}: only one class can be the default"));
        }
        taken |= keys;
        let rate = f.next().map(parse_rate).transpose()?;
        let ceil = f.next().map(parse_rate).transpose()?;
        if let Some(extra) = f.next() {
            return Err(format!(
                "class {name:?}: {extra:?} after NAME:KEYS:RATE:CEIL"
            ));
        }
        for (what, r) in [("rate", rate), ("ceil", ceil)] {
            if r.is_some_and(|r| r > port) {
                return Err(format!("class {name:?}: its {what} is above the port rate"));
            }
        }
        if let (Some(r), Some(c)) = (rate, ceil) {
            if c < r {
                return Err(format!("class {name:?}: ceil below its rate"));
            }
        }
        out.push(ClassConfig {
            name: name.to_string(),
            keys,
            default,
            rate,
            ceil,
        });
    }
    let guaranteed: u64 = out.iter().filter_map(|c| c.rate).sum();
    if guaranteed > port {
        return Err("the classes' rates add up to more than the port rate".into());
    }
    Ok(out)
}

/// Parses `default`, `5`, `4-7`, joined by `+`, into a key mask.
fn parse_keys(s: &str, by: Classify) -> Result<(u64, bool), String> {
    let (mut mask, mut default) = (0u64, false);
    let max = by.keys() - 1;
    for part in s.split('+') {
        if part == "default" {
            default = true;
            continue;
        }
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (u32, u32) = match (a.parse(), b.parse()) {
            (Ok(a), Ok(b)) if a <= b && b <= max => (a, b),
            _ => {
                return Err(format!(
                    "keys {part:?}: values or ranges within 0-{max}, or default, joined by +"
                ))
            }
        };
        for k in a..=b {
            mask |= 1 << k;
        }
    }
    Ok((mask, default))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_take_tcs_units() {
        assert_eq!(parse_rate("100mbit"), Ok(12_500_000));
        assert_eq!(parse_rate("1Gbit"), Ok(125_000_000));
        assert_eq!(parse_rate("8000"), Ok(1000));
        assert_eq!(parse_rate("10kbps"), Ok(10_000));
        assert_eq!(parse_rate("1.5gbit"), Ok(187_500_000));
        for bad in [
            "0",
            "0mbit",
            "4bit",
            "-1mbit",
            "mbit",
            "10furlongs",
            "600gbit",
            "",
        ] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
        assert!(parse_rate("600gbit")
            .unwrap_err()
            .contains("clock can pace"));
        assert_eq!(parse_size("64k"), Ok(65536));
        assert_eq!(parse_size("2mb"), Ok(2 << 20));
        assert!(parse_size("1x").is_err());
    }

    #[test]
    fn specs_parse_and_refuse_by_name() {
        let c = EgressConfig::parse("100mbit").unwrap();
        assert_eq!(
            (c.rate, c.classes.len(), c.classify),
            (Some(12_500_000), 1, Classify::None)
        );
        assert_eq!(c.burst, 125_000, "10 ms at 100 Mbit/s");
        let c = EgressConfig::parse(
            "1gbit,burst=64k,limit=256,by=dscp,classes=voice:46:100mbit/bulk:0-7+default:200mbit:500mbit/rest:8-45",
        )
        .unwrap();
        assert_eq!((c.burst, c.limit), (65536, 256));
        assert_eq!(c.classes[0].keys, 1 << 46);
        assert_eq!(c.classes[1].ceil, Some(62_500_000));
        assert_eq!(c.class_of_key(Some(46)), 0);
        assert_eq!(c.class_of_key(Some(50)), 1, "unlisted: the default class");
        assert_eq!(c.class_of_key(None), 1);
        assert_eq!(c.class_of_key(Some(9)), 2);
        let c = EgressConfig::parse("1gbit,by=pcp,classes=hi:5-7/lo:0-4").unwrap();
        assert_eq!(c.default_class(), 1, "no default named: the last class");
        for (bad, says) in [
            ("0", "at least"),
            ("1gbit,speed=2", "unknown key \"speed\""),
            ("1gbit,by=tos,classes=a:1", "pcp or dscp"),
            ("1gbit,classes=a:1", "needs by="),
            ("1gbit,by=pcp", "needs classes="),
            ("1gbit,by=pcp,classes=a:9", "within 0-7"),
            ("1gbit,by=pcp,classes=a:1/a:2", "twice"),
            ("1gbit,by=pcp,classes=a:1/b:1", "already another"),
            ("1gbit,by=pcp,classes=a:1:2gbit", "above the port rate"),
            ("1gbit,by=pcp,classes=a:1:600mbit/b:2:600mbit", "add up"),
            ("1gbit,by=pcp,classes=a:1:600mbit:500mbit", "ceil below"),
            ("1gbit,burst=100", "full-size frame"),
            ("1gbit,limit=0", "limit"),
            ("1gbit,by=pcp,classes=:1", "a name"),
        ] {
            let e = EgressConfig::parse(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
