//! Issue 26: the example app (`apps/examples/udp_count.rs`) builds and
//! runs: this test opens the far ends of its two shm ports, sends UDP
//! frames both ways, and checks what arrives and what the app counted.
use rpmd_pmd::{Mempool, MempoolConfig, Pkts, PortConfig, Queues, Registry};
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

fn send(q: &mut Queues, pool: &Mempool, frames: &[Vec<u8>]) {
    let mut out = Pkts::new();
    for f in frames {
        let mut m = pool.get().unwrap();
        m.append(f.len()).unwrap().copy_from_slice(f);
        out.push(m).unwrap();
        if out.len() == 32 {
            while !out.is_empty() {
                q.tx_burst(0, &mut out);
            }
        }
    }
    while !out.is_empty() {
        q.tx_burst(0, &mut out);
    }
}

#[test]
fn the_example_app_forwards_and_counts_udp_ports() {
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/udp_count");
    assert!(
        bin.exists(),
        "{}: cargo test builds it unless a single --test is asked for (cargo build -p rpmd-apps --example udp_count)",
        bin.display()
    );
    let (a, b) = (
        format!("shm:udpc-a-{}", std::process::id()),
        format!("shm:udpc-b-{}", std::process::id()),
    );
    let reg = Registry::new();
    let pool = Mempool::new(&MempoolConfig::new("udpc-test", 1024)).unwrap();
    let mut ends = Vec::new();
    for d in [&a, &b] {
        let mut p = reg.open(d).unwrap();
        p.configure(&PortConfig {
            rx_pool: Some(pool.clone()),
            ..PortConfig::default()
        })
        .unwrap();
        let q = p.start().unwrap();
        ends.push((p, q));
    }
    let app = Command::new(&bin)
        .args([&a, &b, "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !ends.iter().all(|(p, _)| p.link().up) {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the app did not join"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
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
