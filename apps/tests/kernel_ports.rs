//! l2fwd between two kernel-attached ports: the kernel in one namespace
//! pings the kernel in another through rpmd, over AF_XDP, AF_PACKET and
//! TAP; and the errors a user meets with them, from the binary (an
//! interface that is not there, a queue past the interface's, no
//! permission, an MTU too large, someone else's XDP program), each with
//! nothing left attached.
use rpmd_kernel::testing::{lab_available, sh, sh_ok, Lab};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn spawn_l2fwd(devs: &[String], secs: &str) -> Child {
    let mut c = Command::new(env!("CARGO_BIN_EXE_l2fwd"));
    c.args(["--no-mac-updating", "--duration", secs, "--no-telemetry"]);
    for d in devs {
        c.args(["--dev", d]);
    }
    c.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish(c: Child) -> (i32, String, String) {
    let out = c.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// Pings `to` from `ns` until three replies came (l2fwd may still be
/// starting), within 12 s.
fn ping(ns: &str, to: &str) -> bool {
    sh_ok(&format!("ip netns exec {ns} ping -c 3 -i 0.3 -w 12 {to}"))
}

fn forward_veth(test: &str, kind: &str, opts: &str) {
    if !lab_available(test) {
        return;
    }
    let mut lab = Lab::new();
    let (a, b) = (lab.netns("a"), lab.netns("b"));
    let net = (lab.tag.parse::<u64>().unwrap_or(0) % 200 + 20) as u8;
    let va = lab.veth("fa", &a, "eth0", &format!("10.78.{net}.1/24"), 1);
    let vb = lab.veth("fb", &b, "eth0", &format!("10.78.{net}.2/24"), 1);
    let l2 = spawn_l2fwd(
        &[format!("{kind}:{va}{opts}"), format!("{kind}:{vb}{opts}")],
        "6",
    );
    let ok = ping(&a, &format!("10.78.{net}.2"));
    let (code, out, err) = finish(l2);
    assert!(ok, "{kind}: no ping through l2fwd\n{out}\n{err}");
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        !sh(&format!("ip link show {va}; ip link show {vb}")).contains("prog/xdp"),
        "{kind}: XDP left attached"
    );
}

#[test]
fn l2fwd_over_af_xdp_carries_a_ping_between_namespaces() {
    forward_veth(
        "l2fwd_over_af_xdp_carries_a_ping_between_namespaces",
        "af_xdp",
        "",
    );
}

#[test]
fn l2fwd_over_af_packet_carries_a_ping_between_namespaces() {
    forward_veth(
        "l2fwd_over_af_packet_carries_a_ping_between_namespaces",
        "af_packet",
        "",
    );
}

#[test]
fn l2fwd_over_tap_carries_a_ping_between_namespaces() {
    let test = "l2fwd_over_tap_carries_a_ping_between_namespaces";
    if !lab_available(test) {
        return;
    }
    let mut lab = Lab::new();
    let (a, b) = (lab.netns("a"), lab.netns("b"));
    let net = (lab.tag.parse::<u64>().unwrap_or(0) % 200 + 20) as u8;
    let (ta, tb) = (format!("ta{}", lab.tag), format!("tb{}", lab.tag));
    let l2 = spawn_l2fwd(&[format!("tap:{ta}"), format!("tap:{tb}")], "8");
    // l2fwd creates the TAPs; hand each to a namespace's stack.
    let end = Instant::now() + Duration::from_secs(5);
    while !(sh_ok(&format!("ip link show {ta}")) && sh_ok(&format!("ip link show {tb}")))
        && Instant::now() < end
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    for (t, ns, host) in [(&ta, &a, 1), (&tb, &b, 2)] {
        sh(&format!("ip link set {t} netns {ns} && ip -n {ns} addr add 10.79.{net}.{host}/24 dev {t} && ip -n {ns} link set {t} up"));
    }
    let ok = ping(&a, &format!("10.79.{net}.2"));
    let (code, out, err) = finish(l2);
    assert!(ok, "tap: no ping through l2fwd\n{out}\n{err}");
    assert_eq!(code, 0, "{out}\n{err}");
}

fn l2fwd_error(devs: &[String]) -> (i32, String) {
    let (code, out, err) = finish(spawn_l2fwd(devs, "1"));
    (code, format!("{out}{err}"))
}

#[test]
fn kernel_port_errors_name_their_cause_and_leave_nothing_attached() {
    let test = "kernel_port_errors_name_their_cause_and_leave_nothing_attached";
    if !lab_available(test) {
        return;
    }
    let mut lab = Lab::new();
    let a = lab.netns("a");
    let net = (lab.tag.parse::<u64>().unwrap_or(0) % 200 + 20) as u8;
    let v = lab.veth("ea", &a, "eth0", &format!("10.80.{net}.1/24"), 1);
    let w = lab.veth("eb", &a, "eth1", &format!("10.81.{net}.1/24"), 1);
    let attached = || sh(&format!("ip link show {v}; ip link show {w}")).contains("prog/xdp");
    // No such interface.
    for kind in ["af_xdp", "af_packet"] {
        let (code, msg) = l2fwd_error(&[format!("{kind}:nosuch0"), format!("{kind}:{w}")]);
        assert_ne!(code, 0);
        assert!(msg.contains("no network interface \"nosuch0\""), "{msg}");
    }
    // A queue the interface does not have.
    let (code, msg) = l2fwd_error(&[format!("af_xdp:{v},queue=3"), format!("af_xdp:{w}")]);
    assert_ne!(code, 0);
    assert!(msg.contains("has 1 queue(s)"), "{msg}");
    assert!(!attached());
    // An MTU whose frames do not fit the mbufs.
    sh(&format!("ip link set {v} mtu 3000"));
    for kind in ["af_xdp", "af_packet"] {
        let (code, msg) = l2fwd_error(&[format!("{kind}:{v}"), format!("{kind}:{w}")]);
        assert_ne!(code, 0, "{kind}");
        assert!(msg.contains("has MTU 3000"), "{kind}: {msg}");
        assert!(!attached(), "{kind}: left attached after the MTU error");
    }
    sh(&format!("ip link set {v} mtu 1500"));
    // Someone else's XDP program: refused, named, and left in place.
    sh(&format!("ip link set dev {v} xdpgeneric obj /usr/lib/x86_64-linux-gnu/bpf/xsk_def_xdp_prog.o sec xdp"));
    let (code, msg) = l2fwd_error(&[format!("af_xdp:{v}"), format!("af_xdp:{w}")]);
    assert_ne!(code, 0);
    assert!(
        msg.contains("already attached to") && msg.contains("xdp off"),
        "{msg}"
    );
    assert!(
        sh(&format!("ip link show {v}")).contains("prog/xdp"),
        "someone else's program stays"
    );
    assert!(
        !sh(&format!("ip link show {w}")).contains("prog/xdp"),
        "ours on the other port was removed"
    );
    // A program a crashed rpmd left (its pid is dead): replaced, not stacked.
    let ifindex = sh(&format!("cat /sys/class/net/{v}/ifindex"))
        .trim()
        .to_string();
    // Its owner file names the interface by name, index and network
    // namespace (the namespace's inode).
    let netns = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self/ns/net").unwrap().ino()
    };
    std::fs::create_dir_all("/run/rpmd/xdp").unwrap();
    std::fs::write(
        format!("/run/rpmd/xdp/{v}.{ifindex}.{netns}"),
        "999999999\n",
    )
    .unwrap();
    let (code, msg) = l2fwd_error(&[format!("af_xdp:{v}"), format!("af_xdp:{w}")]);
    assert_eq!(code, 0, "{msg}");
    assert!(!attached(), "replaced, then detached at exit");
    // No permission: as nobody.
    if sh_ok("command -v setpriv") {
        let bin = env!("CARGO_BIN_EXE_l2fwd");
        for kind in ["af_xdp", "af_packet"] {
            let out = Command::new("setpriv")
                .args([
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                    bin,
                    "--no-telemetry",
                    "--duration",
                    "1",
                ])
                .args([
                    "--dev",
                    &format!("{kind}:{v}"),
                    "--dev",
                    &format!("{kind}:{w}"),
                ])
                .output()
                .unwrap();
            let msg = String::from_utf8_lossy(&out.stderr).into_owned()
                + &String::from_utf8_lossy(&out.stdout);
            assert_ne!(out.status.code(), Some(0), "{kind} as nobody: {msg}");
            assert!(msg.contains("run as root"), "{kind} as nobody: {msg}");
        }
        assert!(!attached());
    }
}

#[test]
fn ctrl_c_detaches_the_xdp_program() {
    let test = "ctrl_c_detaches_the_xdp_program";
    if !lab_available(test) {
        return;
    }
    let mut lab = Lab::new();
    let a = lab.netns("a");
    let net = (lab.tag.parse::<u64>().unwrap_or(0) % 200 + 20) as u8;
    let v = lab.veth("ca", &a, "eth0", &format!("10.82.{net}.1/24"), 1);
    let w = lab.veth("cb", &a, "eth1", &format!("10.83.{net}.1/24"), 1);
    let l2 = spawn_l2fwd(&[format!("af_xdp:{v}"), format!("af_xdp:{w}")], "60");
    let attached = || {
        sh(&format!("ip link show {v}; ip link show {w}"))
            .matches("prog/xdp")
            .count()
    };
    let end = Instant::now() + Duration::from_secs(10);
    while attached() < 2 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(attached(), 2, "l2fwd attached its program to both ports");
    // SAFETY: signalling our own child, which is still running.
    assert_eq!(unsafe { libc::kill(l2.id() as i32, libc::SIGINT) }, 0);
    let (code, out, err) = finish(l2);
    assert_eq!(code, 0, "a Ctrl-C is a clean stop\n{out}\n{err}");
    assert_eq!(attached(), 0, "detached on Ctrl-C");
}
