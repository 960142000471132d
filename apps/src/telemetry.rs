//! Telemetry that DPDK's own client reads: the v2 protocol of
//! `dpdk-telemetry.py` (Debian's dpdk package), served on a Unix
//! SOCK_SEQPACKET socket at `<runtime dir>/dpdk/<prefix>/dpdk_telemetry.v2`
//! (the runtime dir as DPDK's EAL picks it: `$RUNTIME_DIRECTORY`, else
//! `/var/run` for root, else `$XDG_RUNTIME_DIR` or `/tmp`), so
//! `dpdk-telemetry.py -f <prefix>` connects to an rpmd app as to a DPDK one.
//!
//! The protocol: on connecting, the client receives one JSON object
//! (`version`, `pid`, `max_output_len`); then each message it sends is a
//! command (`/ethdev/stats,0`: the path, then an optional parameter after
//! a comma), and each reply is one JSON object keyed by the path (`{
//! "/ethdev/stats": {...} }`), `null` for an unknown command or a bad
//! parameter. Commands: `/`, `/info`, `/help`, `/ethdev/list`,
//! `/ethdev/info`, `/ethdev/stats`, `/ethdev/xstats`,
//! `/ethdev/link_status`, `/eal/lcore/usage` (DPDK 23.03's busy and total
//! cycles per lcore), and rpmd's `/rpmd/lcores` (each lcore's poll policy,
//! CPU time and loop counters) and `/rpmd/mempools`.
//!
//! A server thread per client reads what the app already counts (ports'
//! counters, lcores' telemetry, pools' free counts) and touches nothing on
//! the data path: the ports are behind a mutex that only control calls
//! take.
use nix::sys::socket::{
    accept, bind, listen, recv, send, socket, AddressFamily, Backlog, MsgFlags, SockFlag, SockType,
    UnixAddr,
};
use rpmd_pmd::{Mempool, Port};
use rpmd_sched::{LcoreStats, Runtime};
use serde_json::{json, Map, Value};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Longest reply, as DPDK advertises it.
pub const MAX_OUTPUT_LEN: usize = 16384;

/// The version string a client sees.
pub fn version() -> String {
    format!("rpmd {} (DPDK telemetry v2)", env!("CARGO_PKG_VERSION"))
}

/// What the server reports on.
#[derive(Clone, Default)]
pub struct Sources {
    /// The app's ports.
    pub ports: Arc<Mutex<Vec<Box<dyn Port>>>>,
    /// The ethdev id of `ports[k]`, for the first `ids.len()` ports (the
    /// app's own; ports after them, such as l2fwd's embedded peers, are
    /// not shown). Ids are the app's port numbers (l2fwd: the port mask's
    /// bits).
    pub ids: Vec<usize>,
    /// The run loop's lcores, with the CPU each runs on.
    pub lcores: Vec<(usize, LcoreStats)>,
    /// The app's mempools.
    pub pools: Vec<Mempool>,
    /// Its shaped or shared egresses.
    pub egress: Vec<crate::egress::PortEgress>,
    /// The app's own counters, answered at `/rpmd/app` (l3fwd: drops by
    /// reason and the tables' sizes).
    pub app: Option<AppCounters>,
}

/// An app's own counters, read when telemetry asks.
pub type AppCounters = Arc<dyn Fn() -> Value + Send + Sync>;

impl Sources {
    /// The first `ids.len()` of `ports` (as ethdev `ids`), the lcores of
    /// `rt`, and `pools`.
    pub fn new(
        ports: &Arc<Mutex<Vec<Box<dyn Port>>>>,
        ids: Vec<usize>,
        rt: &Runtime,
        pools: Vec<Mempool>,
    ) -> Sources {
        Sources {
            ports: ports.clone(),
            ids,
            lcores: rt
                .lcores()
                .iter()
                .map(|l| (l.cpu(), l.stats_handle()))
                .collect(),
            pools,
            egress: Vec::new(),
            app: None,
        }
    }
}

/// Serves `sources` under `prefix` (`None`: telemetry off). A failure
/// (the prefix in use) is a warning naming `app`, and the app runs on
/// without telemetry.
pub fn serve(app: &str, prefix: Option<&str>, sources: Sources) -> Option<Server> {
    Server::start(prefix?, sources)
        .inspect_err(|e| eprintln!("{app}: warning: {e}; running without telemetry"))
        .ok()
}

/// The runtime directory DPDK's EAL would use for `prefix`.
pub fn runtime_dir(prefix: &str) -> PathBuf {
    let base = std::env::var_os("RUNTIME_DIRECTORY")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            if nix::unistd::geteuid().is_root() {
                PathBuf::from("/var/run")
            } else {
                std::env::var_os("XDG_RUNTIME_DIR")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from("/tmp"))
            }
        });
    base.join("dpdk").join(prefix)
}

/// A running telemetry server; stops, and removes its socket, on drop.
pub struct Server {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Listens at `dpdk_telemetry.v2` in [`runtime_dir`]`(prefix)`. A
    /// socket left there by a process that died is replaced; one another
    /// process still serves is not (an error naming `--file-prefix`).
    pub fn start(prefix: &str, sources: Sources) -> Result<Server, String> {
        let dir = runtime_dir(prefix);
        std::fs::create_dir_all(&dir).map_err(|e| format!("telemetry: {}: {e}", dir.display()))?;
        let path = dir.join("dpdk_telemetry.v2");
        if path.exists() {
            if connect(&path).is_ok() {
                return Err(format!(
                    "telemetry: {} is served by another process; give this one another --file-prefix",
                    path.display()
                ));
            }
            let _ = std::fs::remove_file(&path);
        }
        let err = |what: &str, e: nix::Error| format!("telemetry: {what} {}: {e}", path.display());
        let fd = socket(
            AddressFamily::Unix,
            SockType::SeqPacket,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
            None,
        )
        .map_err(|e| err("socket for", e))?;
        let addr = UnixAddr::new(&path).map_err(|e| err("address", e))?;
        bind(fd.as_raw_fd(), &addr).map_err(|e| err("bind", e))?;
        listen(&fd, Backlog::new(16).map_err(|e| err("listen on", e))?)
            .map_err(|e| err("listen on", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("telemetry".into())
            .spawn(move || accept_loop(fd, sources, s))
            .map_err(|e| format!("telemetry thread: {e}"))?;
        Ok(Server {
            path,
            stop,
            thread: Some(thread),
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn connect(path: &Path) -> nix::Result<OwnedFd> {
    let fd = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    nix::sys::socket::connect(fd.as_raw_fd(), &UnixAddr::new(path)?)?;
    Ok(fd)
}

/// Accepts clients (polling, so that a stop is seen within 50 ms) and
/// serves each on a thread of its own.
fn accept_loop(listener: OwnedFd, sources: Sources, stop: Arc<AtomicBool>) {
    let sources = Arc::new(sources);
    let mut clients: Vec<JoinHandle<()>> = Vec::new();
    while !stop.load(Relaxed) {
        match accept(&listener) {
            Ok(fd) => {
                let (s, st) = (sources.clone(), stop.clone());
                if let Ok(t) = std::thread::Builder::new()
                    .name("telemetry client".into())
                    .spawn(move || client(fd, &s, &st))
                {
                    clients.push(t);
                }
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
        clients.retain(|t| !t.is_finished());
    }
    for t in clients {
        let _ = t.join();
    }
}

/// One client: the greeting, then a reply per command until it hangs up
/// or the server stops.
fn client(fd: OwnedFd, src: &Sources, stop: &AtomicBool) {
    let raw = fd.as_raw_fd();
    let hello = info().to_string();
    if send(raw, hello.as_bytes(), MsgFlags::MSG_NOSIGNAL).is_err() {
        return;
    }
    // A receive timeout lets the thread see a stop.
    let tv = nix::sys::time::TimeVal::new(0, 100_000);
    let _ = nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::ReceiveTimeout, &tv);
    let mut buf = [0u8; 1024];
    while !stop.load(Relaxed) {
        let n = match recv(raw, &mut buf, MsgFlags::empty()) {
            Ok(0) => return,
            Ok(n) => n,
            Err(nix::Error::EAGAIN) | Err(nix::Error::EINTR) => continue,
            Err(_) => return,
        };
        let text = String::from_utf8_lossy(&buf[..n]);
        let reply = reply(src, text.trim());
        if send(raw, reply.as_bytes(), MsgFlags::MSG_NOSIGNAL).is_err() {
            return;
        }
    }
}

/// The reply to one command, as sent: `{ path: data }`, `null` data for
/// an unknown command, a bad parameter, or data longer than
/// [`MAX_OUTPUT_LEN`].
pub fn reply(src: &Sources, text: &str) -> String {
    let (cmd, param) = match text.split_once(',') {
        Some((c, p)) => (c, Some(p)),
        None => (text, None),
    };
    let data = if cmd.starts_with('/') {
        answer(src, cmd, param).unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    let mut out = Map::new();
    out.insert(cmd.to_string(), data);
    let s = Value::Object(out).to_string();
    if s.len() > MAX_OUTPUT_LEN {
        return json!({ cmd: null }).to_string();
    }
    s
}

/// The greeting, and `/info`.
fn info() -> Value {
    json!({
        "version": version(),
        "pid": std::process::id(),
        "max_output_len": MAX_OUTPUT_LEN,
    })
}

/// Commands and their help texts.
const COMMANDS: [(&str, &str); 13] = [
    (
        "/",
        "Returns list of available commands, Takes no parameters",
    ),
    (
        "/info",
        "Returns DPDK Telemetry information. Takes no parameters",
    ),
    (
        "/help",
        "Returns help text for a command. Parameters: string command",
    ),
    (
        "/ethdev/list",
        "Returns list of available ethdev ports. Takes no parameters",
    ),
    (
        "/ethdev/info",
        "Returns the device info for a port. Parameters: int port_id",
    ),
    (
        "/ethdev/stats",
        "Returns the common stats for a port. Parameters: int port_id",
    ),
    (
        "/ethdev/xstats",
        "Returns the extended stats for a port. Parameters: int port_id",
    ),
    (
        "/ethdev/link_status",
        "Returns the link status for a port. Parameters: int port_id",
    ),
    (
        "/eal/lcore/usage",
        "Returns lcore cycles usage. Takes no parameters",
    ),
    (
        "/rpmd/lcores",
        "Returns the run loop's counters per lcore. Takes no parameters",
    ),
    (
        "/rpmd/mempools",
        "Returns each mempool's size, use and cache. Takes no parameters",
    ),
    (
        "/rpmd/egress",
        "Returns each shared egress's rate and per-class counters. Takes no parameters",
    ),
    (
        "/rpmd/app",
        "Returns the app's own counters (l3fwd: drops by reason, tables). Takes no parameters",
    ),
];

fn answer(src: &Sources, cmd: &str, param: Option<&str>) -> Option<Value> {
    match cmd {
        "/" => Some(json!(COMMANDS.iter().map(|c| c.0).collect::<Vec<_>>())),
        "/info" => Some(info()),
        "/help" => {
            let want = param?;
            let (c, h) = COMMANDS.iter().find(|c| c.0 == want)?;
            Some(json!({ *c: h }))
        }
        "/ethdev/list" => Some(json!(src.ids)),
        "/ethdev/info" | "/ethdev/stats" | "/ethdev/xstats" | "/ethdev/link_status" => {
            let id: usize = param?.trim().parse().ok()?;
            let k = src.ids.iter().position(|&i| i == id)?;
            let ports = src.ports.lock().ok()?;
            let p = ports.get(k)?;
            Some(match cmd {
                "/ethdev/info" => port_info(p.as_ref(), id),
                "/ethdev/stats" => port_stats(p.as_ref()),
                "/ethdev/xstats" => {
                    let m: Map<String, Value> = p
                        .xstats()
                        .into_iter()
                        .map(|x| (x.name, json!(x.value)))
                        .collect();
                    Value::Object(m)
                }
                _ => {
                    let l = p.link();
                    json!({
                        "status": if l.up { "UP" } else { "DOWN" },
                        "speed": l.speed_mbps,
                        "duplex": if l.full_duplex { "full-duplex" } else { "half-duplex" },
                    })
                }
            })
        }
        "/eal/lcore/usage" => Some(lcore_usage(src)),
        "/rpmd/lcores" => Some(lcores(src)),
        "/rpmd/egress" => Some(crate::egress::json(&src.egress)),
        "/rpmd/app" => src.app.as_ref().map(|f| f()),
        "/rpmd/mempools" => Some(json!(src
            .pools
            .iter()
            .map(|p| json!({
                "name": p.name(),
                "size": p.size(),
                "free": p.available(),
                "in_use": p.size() - p.available().min(p.size()),
                "region_bytes": p.region().len(),
            }))
            .collect::<Vec<_>>())),
        _ => None,
    }
}

fn port_info(p: &dyn Port, id: usize) -> Value {
    let c = p.capabilities();
    json!({
        "name": p.name(),
        "driver_name": p.driver(),
        "port_id": id,
        "mac_addr": p.mac_addr().to_string(),
        "mtu": p.mtu(),
        "promiscuous": p.promiscuous() as u8,
        "all_multicast": p.allmulticast() as u8,
        "max_rx_queues": c.max_rx_queues,
        "max_tx_queues": c.max_tx_queues,
        "min_mtu": c.min_mtu,
        "max_mtu": c.max_mtu,
        "link_up": p.link().up as u8,
        "fw_version": p.fw_version(),
    })
}

/// `rte_eth_stats` as DPDK's telemetry shows it, the per-queue arrays
/// from the queues' counters.
fn port_stats(p: &dyn Port) -> Value {
    let s = p.stats();
    let x = p.xstats();
    let per_queue = |dir: &str, what: &str| -> Vec<u64> {
        (0..)
            .map_while(|q| {
                let name = format!("{dir}_q{q}_{what}");
                x.iter().find(|x| x.name == name).map(|x| x.value)
            })
            .collect()
    };
    json!({
        "ipackets": s.ipackets,
        "opackets": s.opackets,
        "ibytes": s.ibytes,
        "obytes": s.obytes,
        "imissed": s.imissed,
        "ierrors": s.ierrors,
        "oerrors": s.oerrors,
        "rx_nombuf": s.rx_nombuf,
        "q_ipackets": per_queue("rx", "packets"),
        "q_opackets": per_queue("tx", "packets"),
        "q_ibytes": per_queue("rx", "bytes"),
        "q_obytes": per_queue("tx", "bytes"),
        "q_errors": per_queue("rx", "errors"),
    })
}

/// DPDK 23.03's `/eal/lcore/usage`: per lcore, the cycles its loop has
/// run (busy, spinning and asleep) and those of rounds that found work,
/// at the TSC's rate (lcore ids are the CPUs, as DPDK's are).
fn lcore_usage(src: &Sources) -> Value {
    let cycles = |ns: u64| (ns as u128 * rpmd_pmd::clock::hz() as u128 / 1_000_000_000) as u64;
    let (mut ids, mut total, mut busy) = (Vec::new(), Vec::new(), Vec::new());
    for (cpu, l) in &src.lcores {
        let t = l.telemetry();
        let b = t.busy_ns.get();
        ids.push(*cpu);
        busy.push(cycles(b));
        total.push(cycles(b + t.idle_ns.get() + t.sleep_ns.get()));
    }
    json!({"lcore_ids": ids, "total_cycles": total, "busy_cycles": busy})
}

fn lcores(src: &Sources) -> Value {
    json!(src
        .lcores
        .iter()
        .map(|(cpu, l)| {
            let t = l.telemetry();
            let (busy, idle) = (t.busy_ns.get(), t.idle_ns.get());
            let busy_pct = if busy + idle > 0 {
                100.0 * busy as f64 / (busy + idle) as f64
            } else {
                0.0
            };
            let wakeups = t.wakeups.get();
            json!({
                "cpu": cpu,
                "policy": l.config().describe(),
                "cpu_time_ns": l.cpu_time_ns(),
                "rounds": t.rounds.get(),
                "busy_polls": t.busy_polls.get(),
                "empty_polls": t.empty_polls.get(),
                "work": t.work.get(),
                "busy_percent": busy_pct,
                "spins": t.spins.get(),
                "yields": t.yields.get(),
                "sleeps": t.sleeps.get(),
                "armed_with_work": t.armed_with_work.get(),
                "wakeups": wakeups,
                "wake_mean_ns": t.wake_ns.get().checked_div(wakeups).unwrap_or(0),
                "wake_p50_ns": t.wake_quantile(0.5),
                "wake_p99_ns": t.wake_quantile(0.99),
            })
        })
        .collect::<Vec<_>>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_keyed_by_path_and_null_when_unknown_or_bad() {
        let reg = rpmd_pmd::Registry::new();
        let p = reg.open("null").unwrap();
        let src = Sources {
            ports: Arc::new(Mutex::new(vec![p])),
            ids: vec![3],
            ..Sources::default()
        };
        let ask = |c: &str| -> Value { serde_json::from_str(&reply(&src, c)).unwrap() };
        assert_eq!(ask("/ethdev/list"), json!({"/ethdev/list": [3]}));
        assert_eq!(ask("/ethdev/stats,3")["/ethdev/stats"]["ipackets"], 0);
        // Not started: link down.
        assert_eq!(
            ask("/ethdev/link_status,3")["/ethdev/link_status"]["status"],
            "DOWN"
        );
        for bad in [
            "/ethdev/stats,0",
            "/ethdev/stats,x",
            "/ethdev/stats",
            "/help",
        ] {
            let path = bad.split(',').next().unwrap();
            assert_eq!(ask(bad), json!({ path: null }), "{bad}");
        }
        assert_eq!(ask("no-slash"), json!({"no-slash": null}));
        assert!(ask("/help,/info")["/help"]["/info"].is_string());
        assert_eq!(ask("/info")["/info"]["max_output_len"], MAX_OUTPUT_LEN);
        assert_eq!(ask("/rpmd/lcores"), json!({"/rpmd/lcores": []}));
    }
}
