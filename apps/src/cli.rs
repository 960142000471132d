//! What the bundled apps' command lines share: exit codes, and value
//! checks that turn bad usage into exit status 2 before anything starts
//! (clap reports a failed value parser with the option's name and exits
//! 2).
//!
//! Exit status of every app: 0 a clean stop, 1 a failure while running
//! (a port that would not start, an lcore that died), 2 bad usage.
use rpmd_pmd::port::DevArgs;
use rpmd_pmd::Registry;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Runs until `stop` is set or `duration` passes, calling `report` with
/// the time since the start every `period`; returns the time it ran.
pub fn run_periodically(
    duration: Option<Duration>,
    period: Duration,
    stop: &AtomicBool,
    mut report: impl FnMut(Duration),
) -> Duration {
    let t0 = Instant::now();
    let mut next = t0 + period;
    while !stop.load(Relaxed) && duration.is_none_or(|d| t0.elapsed() < d) {
        let left = duration.map_or(Duration::from_millis(10), |d| {
            d.saturating_sub(t0.elapsed())
                .min(Duration::from_millis(10))
        });
        std::thread::sleep(left);
        if Instant::now() >= next {
            report(t0.elapsed());
            next += period;
        }
    }
    t0.elapsed()
}

/// A hex port mask (`-p 3`, `-p 0x3`).
pub fn port_mask(s: &str) -> Result<u64, String> {
    u64::from_str_radix(s.trim_start_matches("0x"), 16)
        .map_err(|_| format!("{s:?} is not a hex port mask (e.g. 3 for ports 0 and 1)"))
}

/// Exit status of a failure at run time.
pub const FAILURE: u8 = 1;
/// Exit status of bad usage.
pub const USAGE: u8 = 2;

/// How an app ends when it does not end well.
#[derive(Debug)]
pub enum Exit {
    /// Bad usage: status 2.
    Usage(String),
    /// A failure while running: status 1.
    Failure(String),
}

impl Exit {
    /// Prints the message as `APP: message` and gives the status.
    pub fn report(self, app: &str) -> ExitCode {
        let (msg, code) = match self {
            Exit::Usage(m) => (m, USAGE),
            Exit::Failure(m) => (m, FAILURE),
        };
        eprintln!("{app}: {msg}");
        ExitCode::from(code)
    }
}

impl From<String> for Exit {
    /// A plain message is a run-time failure.
    fn from(m: String) -> Exit {
        Exit::Failure(m)
    }
}

/// A number of seconds: positive and finite. For clap, with
/// `allow_hyphen_values`, so `--duration -1` reaches this check.
pub fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        Ok(_) => Err(format!("{s} is not a positive number of seconds")),
        Err(_) => Err(format!("{s:?} is not a number of seconds")),
    }
}

/// Seconds that may be zero.
pub fn seconds_or_zero(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("{s:?} is not zero or a positive number of seconds")),
    }
}

/// A DPDK-style core list (`0-1`, `0,2`), checked.
pub fn core_list(s: &str) -> Result<String, String> {
    let cores = rpmd_sched::parse_cores(s).map_err(|e| e.to_string())?;
    // The CPUs this process may run on (its affinity, as taskset and
    // cgroups leave it); an lcore pinned elsewhere could not start.
    let allowed = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|st| {
            st.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|l| l.trim().to_string())
        });
    if let Some(list) = allowed {
        if let Ok(ok) = rpmd_sched::parse_cores(&list) {
            if let Some(c) = cores.iter().find(|c| !ok.contains(c)) {
                return Err(format!(
                    "core {c} is not one this process may run on (allowed: {list})"
                ));
            }
        }
    }
    Ok(s.to_string())
}

/// A device string whose syntax is right (the kind is checked by
/// [`check_devices`], which knows the drivers).
pub fn device(s: &str) -> Result<String, String> {
    DevArgs::parse(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

/// The registry of every app: the built-in ports, virtio, the kernel's,
/// mlx4 (the PCI driver and its device model) and igb.
pub fn registry() -> Registry {
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    rpmd_kernel::register(&mut reg);
    rpmd_mlx4::register(&mut reg);
    rpmd_igb::register(&mut reg);
    reg
}

/// Turns promiscuous mode on, as DPDK's l2fwd and testpmd do at start: a
/// forwarder, switch or generator takes frames for any address, not only
/// the port's own (a NIC's MAC filter would drop the rest). A port that
/// cannot is used as it is, with a warning (testpmd's behaviour). A
/// kernel interface gets its mode back when the port closes.
pub fn promiscuous(port: &mut dyn rpmd_pmd::Port, name: &str) {
    if let Err(e) = port.set_promiscuous(true) {
        tracing::warn!("{name}: promiscuous mode not enabled, so frames for other addresses may not arrive: {e}");
    }
}

/// Bad usage unless every device's kind has a driver.
pub fn check_devices(devices: &[String]) -> Result<(), Exit> {
    let reg = registry();
    for d in devices {
        reg.check(d).map_err(|e| Exit::Usage(e.to_string()))?;
    }
    Ok(())
}

/// Prints one line of `--json` output: JSON Lines, each an object whose
/// `"type"` says what it is (`"progress"` once a period, `"summary"` at
/// the end); `fields` must be an object.
pub fn json_line(kind: &str, mut fields: serde_json::Value) {
    if let Some(o) = fields.as_object_mut() {
        o.insert("type".into(), kind.into());
    }
    println!("{fields}");
}

/// The driver's drop and error counters of a port, for a summary line:
/// empty when all are zero.
pub fn device_drops(s: &rpmd_pmd::port::PortStats) -> String {
    let parts: Vec<String> = [
        ("missed", s.imissed),
        ("rx errors", s.ierrors),
        ("tx errors", s.oerrors),
        ("no mbuf", s.rx_nombuf),
    ]
    .iter()
    .filter(|(_, n)| *n != 0)
    .map(|(k, n)| format!("{k} {n}"))
    .collect();
    match parts.is_empty() {
        true => String::new(),
        false => format!(" (device: {})", parts.join(", ")),
    }
}

/// The same counters as JSON.
pub fn device_drops_json(s: &rpmd_pmd::port::PortStats) -> serde_json::Value {
    serde_json::json!({"imissed": s.imissed, "ierrors": s.ierrors, "oerrors": s.oerrors, "rx_nombuf": s.rx_nombuf})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_with_their_reason() {
        assert_eq!(seconds("1.5"), Ok(1.5));
        assert!(seconds("-1").unwrap_err().contains("positive"));
        assert!(seconds("0").is_err() && seconds("inf").is_err() && seconds("x").is_err());
        assert_eq!(seconds_or_zero("0"), Ok(0.0));
        assert!(core_list("3-1").unwrap_err().contains("backwards"));
        assert!(device("ring:a,").unwrap_err().contains("trailing"));
        assert!(check_devices(&["nope:x".into()]).is_err());
        assert!(check_devices(&["ring:a".into(), "af_xdp:veth0".into()]).is_ok());
    }
}
