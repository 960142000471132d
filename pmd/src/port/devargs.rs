//! Device strings, like DPDK's `-a` / `--vdev` arguments.
//!
//! Grammar: `KIND[:TARGET][,KEY=VALUE]...`
//!
//! - `KIND` names the driver: lowercase letters, digits and `-`
//!   (`pci`, `virtio-user`, `ring`, `null`);
//! - `TARGET` is everything after the first `:` up to the first `,`: a PCI
//!   address, a socket path, a ring name;
//! - options follow, comma-separated `KEY=VALUE` pairs.
//!
//! ```
//! let a = rpmd_pmd::port::DevArgs::parse("pci:0000:00:04.0,queues=2").unwrap();
//! assert_eq!(a.kind(), "pci");
//! assert_eq!(a.target(), Some("0000:00:04.0"));
//! assert_eq!(a.opt_u64("queues", 1).unwrap(), 2);
//! ```
use crate::Error;

/// A parsed device string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DevArgs {
    raw: String,
    kind: String,
    target: Option<String>,
    opts: Vec<(String, String)>,
    port_id: u16,
}

fn malformed(raw: &str, reason: String) -> Error {
    Error::DeviceString {
        input: raw.to_string(),
        reason,
        accepted: String::new(),
    }
}

impl DevArgs {
    /// Parses `s`; errors say what is wrong with it.
    pub fn parse(s: &str) -> Result<Self, Error> {
        let raw = s;
        if raw.trim().is_empty() {
            return Err(malformed(s, "empty device string".into()));
        }
        // A space at either end is a typo (a quoted argument), never part
        // of a name: refused rather than trimmed, so that what the port
        // is called is what the user wrote.
        if raw.trim() != raw {
            return Err(malformed(
                raw,
                "white space at the start or end of the device string".into(),
            ));
        }
        let (head, opts) = match raw.find(',') {
            Some(i) if i + 1 == raw.len() => {
                return Err(malformed(
                    raw,
                    "trailing `,` with no option after it".into(),
                ))
            }
            Some(i) => (&raw[..i], &raw[i + 1..]),
            None => (raw, ""),
        };
        let (kind, target) = match head.find(':') {
            Some(i) => (&head[..i], Some(&head[i + 1..])),
            None => (head, None),
        };
        if kind.is_empty()
            || !kind
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return Err(malformed(
                raw,
                format!(
                    "device kind {kind:?} is not a lowercase name like `pci`, `ring` or `af_xdp`"
                ),
            ));
        }
        if target == Some("") {
            return Err(malformed(raw, format!("nothing after `{kind}:`")));
        }
        let mut parsed = Vec::new();
        for o in opts.split(',').filter(|_| !opts.is_empty()) {
            let Some((k, v)) = o.split_once('=') else {
                return Err(malformed(raw, format!("option {o:?} is not KEY=VALUE")));
            };
            if k.is_empty() {
                return Err(malformed(raw, format!("option {o:?} has no key")));
            }
            if parsed.iter().any(|(pk, _)| pk == k) {
                return Err(malformed(raw, format!("option `{k}` given twice")));
            }
            parsed.push((k.to_string(), v.to_string()));
        }
        Ok(DevArgs {
            raw: raw.to_string(),
            kind: kind.to_string(),
            target: target.map(str::to_string),
            opts: parsed,
            port_id: 0,
        })
    }

    /// The port id the registry gives the port opened from this string
    /// (its opens are numbered from 0, as DPDK numbers ethdev ports);
    /// drivers stamp it on every received mbuf ([`Mbuf::port`](crate::Mbuf::port)).
    pub fn port_id(&self) -> u16 {
        self.port_id
    }

    /// Sets the port id (the registry does, before a driver's open).
    pub fn set_port_id(&mut self, id: u16) {
        self.port_id = id;
    }

    /// The whole string, trimmed.
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// The driver kind.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The target after `KIND:`, if any.
    pub fn target(&self) -> Option<&str> {
        self.target.as_deref()
    }

    /// The options, in order.
    pub fn options(&self) -> &[(String, String)] {
        &self.opts
    }

    /// The value of option `key`.
    pub fn opt(&self, key: &str) -> Option<&str> {
        self.opts
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Option `key` as an integer (decimal, or hex after `0x`), or
    /// `default` when absent.
    pub fn opt_u64(&self, key: &str, default: u64) -> Result<u64, Error> {
        match self.opt(key) {
            None => Ok(default),
            Some(v) => match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => v.parse().ok(),
            }
            .ok_or_else(|| {
                malformed(
                    &self.raw,
                    format!("option `{key}={v}`: expected a non-negative integer (decimal, or hex after 0x)"),
                )
            }),
        }
    }

    /// Option `key` as a boolean (`0/1`, `true/false`, `on/off`), or
    /// `default` when absent.
    pub fn opt_bool(&self, key: &str, default: bool) -> Result<bool, Error> {
        match self.opt(key) {
            None => Ok(default),
            Some("1" | "true" | "on" | "yes") => Ok(true),
            Some("0" | "false" | "off" | "no") => Ok(false),
            Some(v) => Err(malformed(
                &self.raw,
                format!("option `{key}={v}`: expected 0/1, true/false or on/off"),
            )),
        }
    }

    /// Fails on any option not in `known`, naming it and the known ones.
    pub fn only_options(&self, known: &[&str]) -> Result<(), Error> {
        for (k, _) in &self.opts {
            if !known.contains(&k.as_str()) {
                let list = if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                };
                return Err(malformed(
                    &self.raw,
                    format!("unknown option `{k}` for `{}` (known: {list})", self.kind),
                ));
            }
        }
        Ok(())
    }

    /// The target, or an error saying that `KIND:` needs one (`what`
    /// describes it, e.g. "a ring name").
    pub fn require_target(&self, what: &str) -> Result<&str, Error> {
        self.target().ok_or_else(|| {
            malformed(
                &self.raw,
                format!("`{}` needs {what} after `{}:`", self.kind, self.kind),
            )
        })
    }

    /// Fails when a target was given to a kind that takes none.
    pub fn no_target(&self) -> Result<(), Error> {
        match self.target() {
            None => Ok(()),
            Some(t) => Err(malformed(
                &self.raw,
                format!("`{}` takes no `:{t}` part", self.kind),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        let a = DevArgs::parse("virtio-user:/run/v.sock,queues=2,server=1").unwrap();
        assert_eq!(a.kind(), "virtio-user");
        assert_eq!(a.target(), Some("/run/v.sock"));
        assert_eq!(a.opt_u64("queues", 1).unwrap(), 2);
        assert!(a.opt_bool("server", false).unwrap());
        let n = DevArgs::parse("null").unwrap();
        assert_eq!((n.kind(), n.target(), n.options().len()), ("null", None, 0));
        // A space at an end is a typo, not trimmed away.
        for s in [" null", "af_packet:veth0 ", "ring:a,queues=2\t"] {
            let e = DevArgs::parse(s).unwrap_err().to_string();
            assert!(e.contains("white space at the start or end"), "{s:?}: {e}");
        }
        let n = DevArgs::parse("null,size=128").unwrap();
        assert_eq!(n.opt_u64("size", 64).unwrap(), 128);
    }

    #[test]
    fn malformed_strings_say_why() {
        for (s, want) in [
            ("", "empty"),
            ("PCI:00:01.0", "lowercase"),
            (":x", "lowercase"),
            ("ring:", "nothing after"),
            ("null,size", "KEY=VALUE"),
            ("null,=3", "no key"),
            ("null,a=1,a=2", "twice"),
        ] {
            let e = DevArgs::parse(s).unwrap_err().to_string();
            assert!(e.contains(want), "{s:?}: {e}");
        }
        let a = DevArgs::parse("null,size=x,flag=maybe").unwrap();
        assert!(a
            .opt_u64("size", 1)
            .unwrap_err()
            .to_string()
            .contains("size=x"));
        assert!(a
            .opt_bool("flag", false)
            .unwrap_err()
            .to_string()
            .contains("on/off"));
        let e = a.only_options(&["size"]).unwrap_err().to_string();
        assert!(
            e.contains("unknown option `flag`") && e.contains("known: size"),
            "{e}"
        );
    }
}
