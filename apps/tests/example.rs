//! Issue 26: the example app (`apps/examples/udp_count.rs`) builds and
//! runs: this test opens the far ends of its two shm ports, sends UDP
//! frames both ways, and checks what arrives and what the app counted.
mod common;
use common::far::{far_ends, receive, send, wait_joined};
use rpmd_pmd::{Mempool, MempoolConfig, Pkts};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// An Ethernet/IPv4/UDP frame to `dport`.
fn udp(dport: u16) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&28u16.to_be_bytes()); // IPv4 total length
    f[23] = 17;
    f[14 + 20 + 2..14 + 20 + 4].copy_from_slice(&dport.to_be_bytes());
    f[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&8u16.to_be_bytes()); // UDP length
    f
}

/// The example binary `name`, which `cargo test` builds.
fn example(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        bin.exists(),
        "{}: cargo test builds it unless a single --test is asked for (cargo build -p rpmd-apps --example {name})",
        bin.display()
    );
    bin
}

#[test]
fn the_example_app_forwards_and_counts_udp_ports() {
    let bin = example("udp_count");
    let (a, b) = (
        format!("shm:udpc-a-{}", std::process::id()),
        format!("shm:udpc-b-{}", std::process::id()),
    );
    let pool = Mempool::new(&MempoolConfig::new("udpc-test", 1024)).unwrap();
    let mut ends = far_ends(&[a.clone(), b.clone()], &pool);
    let app = Command::new(&bin)
        .args([&a, &b, "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_joined(&ends);
    let mut to_b: Vec<Vec<u8>> = (0..100).map(|_| udp(53)).collect();
    to_b.extend((0..50).map(|_| udp(5353)));
    let mut other = udp(9);
    other[12] = 0x86; // not IPv4: forwarded, not counted
    to_b.push(other);
    send(&mut ends[0].1, &pool, &to_b);
    send(&mut ends[1].1, &pool, &vec![udp(53); 30]);
    let mut got = [0usize; 2];
    let mut inp = Pkts::new();
    let t1 = Instant::now();
    while got != [30, 151] && t1.elapsed() < Duration::from_secs(2) {
        for (k, (_, q)) in ends.iter_mut().enumerate() {
            got[k] += q.rx_burst(0, &mut inp, 32);
            inp.clear();
        }
    }
    assert_eq!(got, [30, 151], "frames forwarded both ways");
    let out = app.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("udp dst port 53: 130 frames"), "{text}");
    assert!(text.contains("udp dst port 5353: 50 frames"), "{text}");
    assert!(!text.contains("udp dst port 9:"), "{text}");
    for (mut p, q) in ends {
        p.stop().unwrap();
        drop(q);
    }
    assert_eq!(pool.available(), pool.size());
}

/// A frame from the far end of the router's port 0: IPv4 to `dst` with
/// `ttl`, its header checksum right unless `spoil`.
fn ip_frame(dst: [u8; 4], ttl: u8, spoil: bool) -> Vec<u8> {
    let mut f = udp(9);
    f[14 + 8] = ttl;
    f[14 + 12..14 + 16].copy_from_slice(&[192, 0, 2, 1]);
    f[14 + 16..14 + 20].copy_from_slice(&dst);
    let c = rpmd_pmd::net::ipv4_header_checksum(&f[14..34]);
    f[24..26].copy_from_slice(&(c ^ spoil as u16).to_be_bytes());
    f
}

/// The router example (`apps/examples/router.rs`): frames leave by the
/// longest route's port with the TTL one less, a good checksum and the
/// next hop's MAC; the rest are dropped and counted by reason.
#[test]
fn the_router_example_routes_by_longest_prefix_and_counts_drops() {
    let bin = example("router");
    let id = std::process::id();
    let devs: Vec<String> = (0..3).map(|k| format!("shm:rt{k}-{id}")).collect();
    let routes = std::env::temp_dir().join(format!("rpmd-routes-{id}.txt"));
    std::fs::write(
        &routes,
        "# prefix/len port next-hop MAC\n\
         10.1.0.0/16 1 02:00:00:00:01:01\n\
         10.1.2.0/24 2 02:00:00:00:02:02\n\
         0.0.0.0/0 0 02:00:00:00:00:09\n",
    )
    .unwrap();
    let pool = Mempool::new(&MempoolConfig::new("router-test", 1024)).unwrap();
    let mut ends = far_ends(&devs, &pool);
    let app = Command::new(&bin)
        .arg(&routes)
        .arg("3")
        .args(&devs)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_joined(&ends);
    let mut not_ip = udp(9);
    not_ip[12..14].copy_from_slice(&[0x86, 0xdd]);
    let frames = [
        ip_frame([10, 1, 9, 9], 64, false),    // /16: port 1
        ip_frame([10, 1, 2, 3], 64, false),    // /24: port 2
        ip_frame([198, 51, 100, 7], 9, false), // default: port 0
        ip_frame([10, 1, 2, 4], 1, false),     // TTL expired
        ip_frame([10, 1, 2, 5], 64, true),     // bad checksum
        not_ip,
    ];
    send(&mut ends[0].1, &pool, &frames);
    let want = [
        (1, [10, 1, 9, 9], [2, 0, 0, 0, 1, 1], 63),
        (2, [10, 1, 2, 3], [2, 0, 0, 0, 2, 2], 63),
        (0, [198, 51, 100, 7], [2, 0, 0, 0, 0, 9], 8),
    ];
    let got = receive(&mut ends, 3, Duration::from_secs(3));
    for (port, dst, mac, ttl) in want {
        let f = got[port]
            .iter()
            .find(|f| f[30..34] == dst)
            .unwrap_or_else(|| panic!("nothing to {dst:?} on port {port}: {got:?}"));
        let ip = rpmd_pmd::hdr::Ipv4::new_checked(&f[14..]).unwrap();
        assert_eq!((&f[..6], ip.ttl(), ip.checksum_ok()), (&mac[..], ttl, true));
        // The source is the router's own port: no longer the sender's.
        assert_ne!(&f[6..12], &[2, 0, 0, 0, 0, 1], "source MAC rewritten");
    }
    let out = app.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("not_ipv4: 1, bad_header: 1, ttl_expired: 1, no_route: 0, tx_full: 0"),
        "{text}"
    );
    let _ = std::fs::remove_file(&routes);
}
