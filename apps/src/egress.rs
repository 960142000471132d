//! Egress shaping in the apps: `vswitch --egress PORT=SPEC` and
//! `l2fwd --tx-rate SPEC` (the spec's grammar: [`rpmd_sched::egress::spec`]),
//! and how the apps show each shaped port's classes: a summary line per
//! class, `--json` and telemetry's `/rpmd/egress`.
use rpmd_sched::egress::spec::Classify;
use rpmd_sched::{Egress, EgressConfig};
use serde_json::{json, Value};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// A port's shared egress, labelled with the app's port number.
#[derive(Clone)]
pub struct PortEgress {
    /// The port, as the app numbers it.
    pub port: usize,
    /// The egress.
    pub egress: Arc<Egress>,
}

/// Parses `--tx-rate SPEC`.
pub fn tx_rate(s: &str) -> Result<EgressConfig, String> {
    EgressConfig::parse(s).map_err(|e| e.to_string())
}

/// Parses `--egress PORT=SPEC`.
pub fn port_egress(s: &str) -> Result<(usize, EgressConfig), String> {
    let (port, spec) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: write PORT=RATE[,...], e.g. 1=100mbit"))?;
    let port = port
        .parse()
        .map_err(|_| format!("{port:?} is not a port number"))?;
    Ok((port, tx_rate(spec)?))
}

/// Checks `--egress` ports against the `n` ports given: each must exist
/// and appear once.
pub fn check_ports(specs: &[(usize, EgressConfig)], n: usize) -> Result<(), String> {
    for (i, (p, _)) in specs.iter().enumerate() {
        if *p >= n {
            return Err(format!(
                "--egress: port {p} does not exist ({n} ports given)"
            ));
        }
        if specs[..i].iter().any(|(q, _)| q == p) {
            return Err(format!("--egress: port {p} given twice"));
        }
    }
    Ok(())
}

/// How the app prints a shaped port at start.
pub fn describe(cfg: &EgressConfig) -> String {
    let mbit = |b: u64| format!("{:.3} Mbit/s", b as f64 * 8.0 / 1e6);
    let rate = cfg.rate.map_or("unshaped".to_string(), mbit);
    let by = match cfg.classify {
        Classify::None => String::new(),
        Classify::Pcp => ", classes by VLAN PCP:".into(),
        Classify::Dscp => ", classes by DSCP:".into(),
    };
    let classes: Vec<String> = if cfg.classify == Classify::None {
        Vec::new()
    } else {
        cfg.classes
            .iter()
            .map(|c| {
                format!(
                    " {} (rate {}, ceil {})",
                    c.name,
                    c.rate.map_or("port".into(), mbit),
                    c.ceil.map_or("port".into(), mbit)
                )
            })
            .collect()
    };
    format!(
        "{rate}, burst {} bytes, {} frames per class{by}{}",
        cfg.burst,
        cfg.limit,
        classes.join(",")
    )
}

/// Every class's counters of every shaped port, as `--json` and
/// telemetry show them.
pub fn json(ports: &[PortEgress]) -> Value {
    json!(ports
        .iter()
        .map(|p| json!({
            "port": p.port,
            "rate_bytes": p.egress.rate(),
            "classes": p.egress.stats().iter().map(|c| json!({
                "name": c.name,
                "enqueued": c.enqueued.get(),
                "sent": c.sent.get(),
                "sent_bytes": c.sent_bytes.get(),
                "dropped": c.dropped.get(),
                "depth": c.depth.load(Relaxed),
            })).collect::<Vec<_>>(),
        }))
        .collect::<Vec<_>>())
}

/// The summary's lines: one per class of each shaped port, with the rate
/// it delivered over `seconds`.
pub fn summary_lines(ports: &[PortEgress], seconds: f64) -> Vec<String> {
    let mut out = Vec::new();
    for p in ports {
        for c in p.egress.stats() {
            out.push(format!(
                "egress port {} class {}: enqueued {} sent {} ({:.3} Mbit/s) dropped {} queued {}",
                p.port,
                c.name,
                c.enqueued.get(),
                c.sent.get(),
                c.sent_bytes.get() as f64 * 8.0 / seconds.max(1e-9) / 1e6,
                c.dropped.get(),
                c.depth.load(Relaxed)
            ));
        }
    }
    out
}

/// A port's frames sent and dropped by its egress, over every class.
pub fn totals(e: &Egress) -> (u64, u64, u64) {
    e.stats().iter().fold((0, 0, 0), |(s, b, d), c| {
        (
            s + c.sent.get(),
            b + c.sent_bytes.get(),
            d + c.dropped.get(),
        )
    })
}
