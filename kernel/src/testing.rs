//! Test support for kernel-attached ports (used by this crate's tests and
//! the apps' tests): network namespaces and veth pairs made for one test
//! and removed when it ends, also on panic; a thread that runs in a
//! namespace, so the kernel sockets a test opens there live there.
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Runs a command; panics with its output when it fails.
pub fn sh(cmd: &str) -> String {
    let out = Command::new("sh").arg("-c").arg(cmd).output().expect("sh");
    assert!(
        out.status.success(),
        "{cmd}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a command, ignoring failure.
pub fn sh_ok(cmd: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Whether this test can make namespaces; if not, records the skip (a
/// failure under CI=true) and returns false.
pub fn lab_available(test: &str) -> bool {
    let root = euid() == 0;
    if !root || !sh_ok("command -v ip") {
        rpmd_pmd::testing::missing_peer(test, "needs root and iproute2 (ip netns, veth)");
        return false;
    }
    true
}

fn euid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(u32::MAX)
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// Namespaces and root-side interfaces that are removed on drop.
pub struct Lab {
    /// A short tag unique to this lab, in every name it makes.
    pub tag: String,
    netns: Vec<String>,
    links: Vec<String>,
}

impl Lab {
    /// A lab with a short unique tag (interface names have 15 bytes).
    pub fn new() -> Lab {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let tag = format!("{}{}", std::process::id() % 100000, n);
        Lab {
            tag,
            netns: Vec::new(),
            links: Vec::new(),
        }
    }

    /// A namespace `rk<tag><suffix>`.
    pub fn netns(&mut self, suffix: &str) -> String {
        let ns = format!("rk{}{suffix}", self.tag);
        sh(&format!("ip netns add {ns} && ip -n {ns} link set lo up"));
        sh(&format!("ip netns exec {ns} sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1"));
        self.netns.push(ns.clone());
        ns
    }

    /// A veth pair: `root` stays here (for rpmd), its peer goes into `ns`
    /// as `peer` with `addr` (CIDR) and up. `queues` sets numrx/numtx.
    pub fn veth(&mut self, root: &str, ns: &str, peer: &str, addr: &str, queues: u32) -> String {
        let root = format!("{root}{}", self.tag);
        let q = format!("numrxqueues {queues} numtxqueues {queues}");
        sh(&format!(
            "ip link add {root} {q} type veth peer name {peer} {q} netns {ns}"
        ));
        self.links.push(root.clone());
        // No IPv6 on either end: a stack bringing a link up sends router
        // solicitations and MLD reports of its own accord, which land in
        // the counters a test compares (a frame sent between a port's
        // start and the test's first read of the kernel's counters was
        // one too many on rpmd's side).
        sh(&format!("sysctl -qw net.ipv6.conf.{root}.disable_ipv6=1"));
        sh(&format!(
            "ip netns exec {ns} sysctl -qw net.ipv6.conf.{peer}.disable_ipv6=1"
        ));
        sh(&format!("ip link set {root} up"));
        sh(&format!(
            "ip -n {ns} addr add {addr} dev {peer} && ip -n {ns} link set {peer} up"
        ));
        root
    }
}

impl Default for Lab {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for l in &self.links {
            sh_ok(&format!("ip link del {l}"));
        }
        for ns in &self.netns {
            sh_ok(&format!("ip netns del {ns}"));
        }
    }
}

/// Runs `f` on a thread inside namespace `ns` and returns its result:
/// sockets it opens stay in `ns`.
pub fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("netns file");
        use std::os::fd::AsFd;
        crate::sys::enter_netns(file.as_fd()).unwrap_or_else(|e| panic!("setns {path}: {e}"));
        f()
    })
    .join()
    .expect("netns thread")
}
