//! Issue 51: `l3fwd` routes by longest prefix and by exact 5-tuple, with
//! every output byte checked against the input (MACs, TTL or hop limit,
//! checksum, options kept), every drop counted by reason, and DPDK's
//! testpmd at the far ends of its virtio-user ports.
mod common;
use common::far::{far_ends, receive, send, wait_joined};
use rpmd_pmd::port::MacAddr;
use rpmd_pmd::{Mempool, MempoolConfig};
use std::process::{Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_l3fwd");
const SENDER: [u8; 6] = [2, 0, 0, 0, 0, 0xaa];

/// Ethernet + IPv4 (with 4 bytes of options if `options`) + UDP
/// `ports`, to `dst` with `ttl`; the checksum right unless `spoil`.
fn v4(dst: [u8; 4], ttl: u8, ports: [u16; 2], options: bool, spoil: bool) -> Vec<u8> {
    let hlen = if options { 24 } else { 20 };
    let mut f = vec![0u8; 14 + hlen + 8 + 18];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 0x10]);
    f[6..12].copy_from_slice(&SENDER);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..];
    ip[0] = 0x40 | (hlen / 4) as u8;
    ip[2..4].copy_from_slice(&((hlen + 26) as u16).to_be_bytes());
    ip[8] = ttl;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[192, 0, 2, 1]);
    ip[16..20].copy_from_slice(&dst);
    if options {
        ip[20..24].copy_from_slice(&[1, 1, 1, 0]); // NOPs, end of list
    }
    ip[hlen..hlen + 2].copy_from_slice(&ports[0].to_be_bytes());
    ip[hlen + 2..hlen + 4].copy_from_slice(&ports[1].to_be_bytes());
    ip[hlen + 4..hlen + 6].copy_from_slice(&26u16.to_be_bytes());
    let c = rpmd_pmd::net::ipv4_header_checksum(&ip[..hlen]);
    ip[10..12].copy_from_slice(&(c ^ spoil as u16).to_be_bytes());
    f
}

/// Ethernet + IPv6 + UDP, to `dst` with `hops`.
fn v6(dst: &str, hops: u8) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 40 + 8 + 10];
    f[6..12].copy_from_slice(&SENDER);
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    let ip = &mut f[14..];
    ip[0] = 0x60;
    ip[4..6].copy_from_slice(&18u16.to_be_bytes());
    ip[6] = 17;
    ip[7] = hops;
    let src: std::net::Ipv6Addr = "2001:db8::aa".parse().unwrap();
    let dst: std::net::Ipv6Addr = dst.parse().unwrap();
    ip[8..24].copy_from_slice(&src.octets());
    ip[24..40].copy_from_slice(&dst.octets());
    f
}

/// What the router must make of `f`: the MACs set, the TTL or hop limit
/// one less, the IPv4 checksum recomputed in full (the router updates it
/// incrementally: the two must agree).
fn routed(f: &[u8], next_hop: MacAddr, out_mac: MacAddr) -> Vec<u8> {
    let mut g = f.to_vec();
    g[..6].copy_from_slice(&next_hop.0);
    g[6..12].copy_from_slice(&out_mac.0);
    if g[12..14] == [0x08, 0x00] {
        let hlen = (g[14] & 0xf) as usize * 4;
        g[14 + 8] -= 1;
        g[24..26].fill(0);
        let c = rpmd_pmd::net::ipv4_header_checksum(&g[14..14 + hlen]);
        g[24..26].copy_from_slice(&c.to_be_bytes());
    } else {
        g[14 + 7] -= 1;
    }
    g
}

/// The app's own MAC on shm port `dev`, whose far end is `far`.
fn app_mac(dev: &str, far: MacAddr) -> MacAddr {
    let name = dev.trim_start_matches("shm:");
    [0u8, 1]
        .map(|side| MacAddr::from_name(name, side))
        .into_iter()
        .find(|&m| m != far)
        .unwrap()
}

fn write(name: &str, text: &str) -> String {
    let p = std::env::temp_dir().join(format!("rpmd-l3fwd-{}-{name}", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// Runs l3fwd for `secs` over fresh shm ports with `args`; sends
/// `frames` into port 0; returns what each port sent and the summary.
fn run_shm(
    tag: &str,
    args: &[&str],
    frames: &[Vec<u8>],
    want: usize,
) -> (Vec<Vec<Vec<u8>>>, Vec<MacAddr>, serde_json::Value) {
    let id = std::process::id();
    let devs: Vec<String> = (0..3).map(|k| format!("shm:l3{tag}{k}-{id}")).collect();
    let pool = Mempool::new(&MempoolConfig::new(&format!("l3{tag}"), 1024)).unwrap();
    let mut ends = far_ends(&devs, &pool);
    let macs: Vec<MacAddr> = devs
        .iter()
        .zip(&ends)
        .map(|(d, e)| app_mac(d, e.0.mac_addr()))
        .collect();
    let app = Command::new(BIN)
        .args(devs.iter().flat_map(|d| ["--dev", d]))
        .args(["--duration", "3", "--json", "-l", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_joined(&ends);
    send(&mut ends[0].1, &pool, frames);
    let got = receive(&mut ends, want, Duration::from_secs(3));
    let out = app.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .unwrap_or_else(|| panic!("no summary: {text}"));
    drop(ends);
    assert_eq!(pool.available(), pool.size(), "every mbuf back");
    (got, macs, summary)
}

fn drops(summary: &serde_json::Value, port: usize) -> [u64; 5] {
    let d = &summary["ports"][port]["drops"];
    ["not_ip", "bad_header", "ttl_expired", "no_route", "tx_full"]
        .map(|k| d[k].as_u64().unwrap_or_else(|| panic!("{k}: {summary}")))
}

#[test]
fn lpm_routes_v4_and_v6_with_every_byte_checked_and_drops_by_reason() {
    let r4 = write(
        "r4",
        "# DPDK's form, and ours with a next-hop MAC\n\
         R10.1.0.0/16 1 02:00:00:00:01:01\n\
         10.1.2.0/24 2\n\
         0.0.0.0/0 0 02:00:00:00:00:09\n\
         10.9.0.0/16 7\n",
    );
    let r6 = write(
        "r6",
        "2001:db8:1::/48 2 02:00:00:00:06:02\n2001:db8:1:5::/64 1\n",
    );
    let fine = [
        v4([10, 1, 9, 9], 64, [1, 2], false, false), // /16: port 1, its MAC
        v4([10, 1, 2, 3], 64, [1, 2], true, false),  // /24: port 2, --eth-dest; options kept
        v4([198, 51, 100, 7], 9, [1, 2], false, false), // /0: port 0
        v6("2001:db8:1:7::1", 64),                   // /48: port 2
        v6("2001:db8:1:5::1", 2),                    // /64: port 1, default MAC
    ];
    let mut arp = v4([10, 1, 2, 3], 64, [1, 2], false, false);
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    let mut version5 = v4([10, 1, 2, 3], 64, [1, 2], false, false);
    version5[14] = 0x55;
    let mut short = v4([10, 1, 2, 3], 64, [1, 2], false, false);
    short[16..18].copy_from_slice(&900u16.to_be_bytes()); // total length past the frame
    let mut frames = fine.to_vec();
    frames.extend([
        arp,
        version5,
        short,
        v4([10, 1, 2, 5], 64, [1, 2], false, true), // bad checksum
        v4([10, 1, 2, 4], 1, [1, 2], false, false), // TTL expired
        v6("2001:db8:1:7::2", 1),                   // hop limit expired
        v6("2001:db8:2::1", 64),                    // no IPv6 route
        vec![0u8; 10],                              // not even Ethernet
    ]);
    let (got, macs, s) = run_shm(
        "lpm",
        &[
            "--rule-ipv4",
            &r4,
            "--rule_ipv6",
            &r6,
            "--eth-dest",
            "2,02:00:00:00:02:02",
        ],
        &frames,
        fine.len(),
    );
    let mac = |s: &str| s.parse::<MacAddr>().unwrap();
    let want = [
        (1, routed(&fine[0], mac("02:00:00:00:01:01"), macs[1])),
        (2, routed(&fine[1], mac("02:00:00:00:02:02"), macs[2])),
        (0, routed(&fine[2], mac("02:00:00:00:00:09"), macs[0])),
        (2, routed(&fine[3], mac("02:00:00:00:06:02"), macs[2])),
        (1, routed(&fine[4], MacAddr::local(1), macs[1])),
    ];
    for (port, w) in &want {
        assert!(
            got[*port].contains(w),
            "port {port} wants {w:02x?}; got {:02x?}",
            got[*port]
        );
    }
    assert_eq!(
        got.iter().map(Vec::len).sum::<usize>(),
        want.len(),
        "{got:02x?}"
    );
    assert_eq!(drops(&s, 0), [2, 3, 2, 1, 0], "{s}");
    assert_eq!(s["ports"][0]["rx"], frames.len() as u64);
    assert_eq!(
        (
            s["lookup"].as_str(),
            s["rules"].as_u64(),
            s["skipped_rules"].as_u64()
        ),
        (Some("lpm"), Some(5), Some(1))
    );
    for f in [r4, r6] {
        let _ = std::fs::remove_file(f);
    }
}

/// Frames that alternate between two ports wait in their port's buffer
/// for a whole burst or the end of the round: each port still gets all of
/// its frames, in the order received, and none is held back.
#[test]
fn frames_to_alternating_ports_leave_in_order_and_none_waits() {
    let r4 = write("alt4", "10.1.0.0/16 1\n10.2.0.0/16 2\n");
    let frames: Vec<Vec<u8>> = (0..101u16)
        .map(|k| v4([10, 1 + (k % 2) as u8, 0, 1], 64, [k, k], false, false))
        .collect();
    let (got, macs, _) = run_shm("alt", &["--rule-ipv4", &r4], &frames, frames.len());
    for (port, parity) in [(1, 0), (2, 1)] {
        let want: Vec<Vec<u8>> = frames
            .iter()
            .skip(parity)
            .step_by(2)
            .map(|f| routed(f, MacAddr::local(port as u16), macs[port]))
            .collect();
        assert_eq!(got[port], want, "port {port}");
    }
    let _ = std::fs::remove_file(r4);
}

#[test]
fn exact_match_routes_whole_5_tuples_only() {
    let r4 = write(
        "e4",
        "R198.18.0.0 198.18.0.1 9 9 0x11 0\n\
         10.0.0.2 10.0.0.1 2000 1000 17 2 02:00:00:00:0e:02\n\
         10.0.0.2 10.0.0.1 2001 1000 17 1\n",
    );
    let hit = |dport| {
        let mut f = v4([10, 0, 0, 2], 64, [1000, dport], false, false);
        f[14 + 12..14 + 16].copy_from_slice(&[10, 0, 0, 1]);
        let c = rpmd_pmd::net::ipv4_header_checksum(&{
            let mut h = f[14..34].to_vec();
            h[10..12].fill(0);
            h
        });
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f
    };
    let frames = [hit(2000), hit(2001), hit(2002)];
    let (got, macs, s) = run_shm("em", &["--lookup", "em", "--rule-ipv4", &r4], &frames, 2);
    assert_eq!(
        got[2],
        [routed(
            &frames[0],
            "02:00:00:00:0e:02".parse().unwrap(),
            macs[2]
        )]
    );
    assert_eq!(got[1], [routed(&frames[1], MacAddr::local(1), macs[1])]);
    assert_eq!(drops(&s, 0), [0, 0, 0, 1, 0], "{s}");
    assert_eq!(s["lookup"], "em");
    let _ = std::fs::remove_file(r4);
}

/// DPDK's testpmd forwards io between its two vhost-user ports, which are
/// l3fwd's virtio-user ports 0 and 1; it starts with a burst on each
/// (txonly's frames, UDP to 198.18.1.1 with TTL 64: port 1's route).
/// Every frame circles testpmd → l3fwd → testpmd until l3fwd has taken
/// its TTL from 64 to 1: 63 forwards each, then it is dropped as expired.
#[test]
fn frames_from_testpmd_circle_until_their_ttl_expires() {
    let Some(t) = common::testpmd(
        "l3fwd",
        "io",
        2,
        1,
        &["--tx-first", "--tx-ip=198.18.0.1,198.18.1.1", "--burst=32"],
    ) else {
        return;
    };
    let devs: Vec<String> = t.socks.iter().map(|s| format!("virtio-user:{s}")).collect();
    let out = Command::new(BIN)
        .args(devs.iter().flat_map(|d| ["--dev", d]))
        .args(["--duration", "4", "--json", "-l", "0"])
        .output()
        .unwrap();
    let (_, _, log) = common::finish(t);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}\n{log}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: serde_json::Value = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .find(|v: &serde_json::Value| v["type"] == "summary")
        .unwrap();
    let expired: u64 = (0..2).map(|p| drops(&s, p)[2]).sum();
    let others: u64 = (0..2)
        .map(|p| drops(&s, p).iter().sum::<u64>())
        .sum::<u64>()
        - expired;
    assert_eq!((expired, others), (64, 0), "{s}\n{log}");
    assert_eq!(s["forwarded"], 64 * 63, "{s}");
    assert_eq!(s["ports"][1]["tx"], 64 * 63, "all to port 1: {s}");
}

#[test]
fn bad_rules_and_options_are_refused_with_their_reason() {
    let bad = write("bad", "10.0.0.0/8 0\n10.1.0.0/16 zero\n");
    let v6 = write("v6", "2001:db8::/32 0\n");
    let two = write("two", "10.0.0.0/8 0\n11.0.0.0/8 0\n");
    for (args, rc, want) in [
        (vec!["--rule-ipv4", &bad], 2, "line 2"),
        (vec!["--rule-ipv4", &v6], 2, "--rule-ipv4's family"),
        (vec!["--rule-ipv4", "/nonexistent/r"], 2, "/nonexistent/r"),
        (vec!["--lookup", "acl"], 2, "lpm and em"),
        (vec!["--config", "(0,0)"], 2, "(port,queue,lcore)"),
        (vec!["--config", "(0,0,5)"], 1, "lcore 5 is not in -l"),
        (
            vec!["--config", "(0,1,0)"],
            1,
            "queue 0 is polled by no lcore",
        ),
        (vec!["--eth-dest", "0,zz"], 2, "--eth-dest"),
        (
            vec!["--max-routes", "1", "--rule-ipv4", &two],
            1,
            "table full",
        ),
        (vec!["-p", "4"], 2, "invalid port mask"),
    ] {
        let out = Command::new(BIN)
            .args(["--dev", "null", "--duration", "1"])
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(rc), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    for f in [bad, v6, two] {
        let _ = std::fs::remove_file(f);
    }
}
