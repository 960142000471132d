//! Issue 26: packet capture. The capture library's files read back with
//! pcap-file, and l2fwd's `--pcap` files read back by Wireshark's tshark,
//! frame for frame and byte for byte against what was sent.
use pcap_file::pcapng::{Block, PcapNgReader};
use rpmd_apps::capture::{tap_rx, tap_tx, CaptureFile, Direction};
use rpmd_pmd::{Mempool, MempoolConfig, Pkts, PortConfig, Queues, Registry};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn pool(name: &str, n: u32) -> Mempool {
    let mut c = MempoolConfig::new(name, n);
    c.cache_size = 0;
    Mempool::new(&c).unwrap()
}

/// Frame `i`: `len` bytes that say which frame they are.
fn frame(i: u32, len: usize) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|k| (k as u32 * 7 + i) as u8).collect();
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]); // local experimental EtherType
    f[14..18].copy_from_slice(&i.to_be_bytes());
    f
}

fn send(q: &mut Queues, pool: &Mempool, frames: &[Vec<u8>]) {
    let mut out = Pkts::new();
    for f in frames {
        let mut m = pool.get().unwrap();
        m.append(f.len()).unwrap().copy_from_slice(f);
        out.push(m).unwrap();
        while !out.is_empty() {
            q.tx_burst(0, &mut out);
        }
    }
}

/// A captured frame: interface id, direction flags, bytes.
type Captured = (u32, u32, Vec<u8>);

/// The interface names and the frames of a pcapng file.
fn read_back(path: &std::path::Path) -> (Vec<String>, Vec<Captured>) {
    let f = std::fs::File::open(path).unwrap();
    let mut r = PcapNgReader::new(f).unwrap();
    let (mut names, mut pkts) = (Vec::new(), Vec::new());
    while let Some(b) = r.next_block() {
        match b.unwrap() {
            Block::InterfaceDescription(i) => {
                use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption as O;
                let name = i.options.iter().find_map(|o| match o {
                    O::IfName(n) => Some(n.to_string()),
                    _ => None,
                });
                names.push(name.unwrap_or_default());
            }
            Block::EnhancedPacket(p) => {
                use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketOption as O;
                let flags = p.options.iter().find_map(|o| match o {
                    O::Flags(f) => Some(*f),
                    _ => None,
                });
                pkts.push((p.interface_id, flags.unwrap_or(0), p.data.to_vec()));
            }
            _ => {}
        }
    }
    (names, pkts)
}

#[test]
fn taps_write_every_frame_both_ways_with_interfaces_and_directions() {
    let p = pool("cap-lib", 512);
    let path = std::env::temp_dir().join(format!("rpmd-cap-{}.pcapng", std::process::id()));
    let name = format!("cap-lib-{}", std::process::id());
    let reg = Registry::new();
    let (mut a, mut b) = (
        reg.open(&format!("ring:{name}")).unwrap(),
        reg.open(&format!("ring:{name}")).unwrap(),
    );
    a.configure(&PortConfig::default()).unwrap();
    b.configure(&PortConfig::default()).unwrap();
    let (mut qa, mut qb) = (a.start().unwrap(), b.start().unwrap());
    let mut cap = CaptureFile::new(&path, 256).unwrap();
    let (ia, ib) = (cap.interface("port-a"), cap.interface("port-b"));
    let mut tx = tap_tx(qa.take_tx(0).unwrap(), cap.tap(ia, Direction::Tx));
    let mut rx = tap_rx(qb.take_rx(0).unwrap(), cap.tap(ib, Direction::Rx));
    cap.start().unwrap();
    // Frames of every length class, one made of two segments.
    let frames: Vec<Vec<u8>> = (0..100)
        .map(|i| frame(i, 60 + (i as usize * 37) % 1400))
        .collect();
    let mut got = Pkts::new();
    for f in &frames {
        let mut m = p.get().unwrap();
        m.append(f.len()).unwrap().copy_from_slice(f);
        let mut out = Pkts::new();
        out.push(m).unwrap();
        assert_eq!(tx.tx_burst(&mut out), 1);
        assert_eq!(rx.rx_burst(&mut got, 32), 1);
        assert_eq!(got.pop().unwrap().data(), &f[..]);
    }
    drop((tx, rx));
    let sum = cap.finish().unwrap();
    assert_eq!((sum.written, sum.dropped), (200, 0));
    let (names, pkts) = read_back(&path);
    assert_eq!(names, ["port-a", "port-b"]);
    let sent: Vec<_> = pkts.iter().filter(|p| p.0 == ia).collect();
    let recv: Vec<_> = pkts.iter().filter(|p| p.0 == ib).collect();
    assert_eq!((sent.len(), recv.len()), (100, 100));
    for (k, f) in frames.iter().enumerate() {
        assert_eq!(
            (sent[k].1, &sent[k].2),
            (2, f),
            "sent frame {k}: outbound, same bytes"
        );
        assert_eq!(
            (recv[k].1, &recv[k].2),
            (1, f),
            "received frame {k}: inbound, same bytes"
        );
    }
    assert_eq!(p.available(), 512, "every mbuf back");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_full_capture_drops_and_counts_without_holding_up_the_queue() {
    let p = pool("cap-full", 256);
    let path = std::env::temp_dir().join(format!("rpmd-capfull-{}.pcapng", std::process::id()));
    let mut port = Registry::new().open("null").unwrap();
    port.configure(&PortConfig::with_pool(&p)).unwrap();
    let mut q = port.start().unwrap();
    // A pool of 8 copies and a writer not yet started: most of 64 frames
    // cannot be captured, and the queue hands all 64 over regardless.
    let mut cap = CaptureFile::new(&path, 8).unwrap();
    let i = cap.interface("null");
    let mut rx = tap_rx(q.take_rx(0).unwrap(), cap.tap(i, Direction::Rx));
    let mut got = Pkts::new();
    assert_eq!(rx.rx_burst(&mut got, 32), 32);
    got.clear();
    assert_eq!(rx.rx_burst(&mut got, 32), 32);
    got.clear();
    cap.start().unwrap();
    drop(rx);
    let sum = cap.finish().unwrap();
    assert_eq!(sum.written + sum.dropped, 64);
    assert!(sum.written <= 8 && sum.dropped >= 56, "{sum:?}");
    let _ = std::fs::remove_file(&path);
}

/// tshark's view of a file: interface, direction and bytes per frame.
fn tshark(path: &std::path::Path) -> Option<Vec<(String, String, Vec<u8>)>> {
    let out = Command::new("tshark")
        .args(["-r", path.to_str().unwrap(), "-x", "-T", "json"])
        .stderr(Stdio::inherit())
        .output()
        .ok()?;
    assert!(out.status.success(), "tshark failed on {}", path.display());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v.as_array().unwrap().iter().map(|p| {
        let layers = &p["_source"]["layers"];
        let frame = &layers["frame"];
        let iface = frame["frame.interface_id_tree"]["frame.interface_name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let dir = frame["frame.packet_flags_tree"]["frame.packet_flags_direction"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let hex = layers["frame_raw"][0].as_str().unwrap();
        let bytes = (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        (iface, dir, bytes)
    });
    Some(rows.collect())
}

#[test]
fn l2fwd_pcap_files_read_back_by_tshark_frame_for_frame() {
    if Command::new("tshark").arg("--version").output().is_err() {
        rpmd_pmd::testing::missing_peer(
            "apps capture l2fwd_pcap_files_read_back_by_tshark",
            "tshark (Debian package tshark) reads the capture back",
        );
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().unwrap().parent().unwrap().join("l2fwd");
    let id = std::process::id();
    let (a, b) = (format!("shm:cap-a-{id}"), format!("shm:cap-b-{id}"));
    let file = std::env::temp_dir().join(format!("rpmd-l2fwd-{id}.pcapng"));
    let p = pool("cap-l2fwd", 1024);
    let reg = Registry::new();
    let mut ends = Vec::new();
    for d in [&a, &b] {
        let mut port = reg.open(d).unwrap();
        port.configure(&PortConfig::with_pool(&p)).unwrap();
        let q = port.start().unwrap();
        ends.push((port, q));
    }
    let pcap0 = format!("0:rx={}", file.display());
    let pcap1 = format!("1:tx={}", file.display());
    let app = Command::new(&bin)
        .args([
            "--dev",
            &a,
            "--dev",
            &b,
            "--no-mac-updating",
            "--duration",
            "4",
        ])
        .args(["--no-telemetry", "--pcap", &pcap0, "--pcap", &pcap1])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !ends.iter().all(|(p, _)| p.link().up) {
        assert!(t0.elapsed() < Duration::from_secs(5), "l2fwd did not join");
        std::thread::sleep(Duration::from_millis(10));
    }
    let frames: Vec<Vec<u8>> = (0..200)
        .map(|i| frame(i, 60 + (i as usize * 53) % 1450))
        .collect();
    send(&mut ends[0].1, &p, &frames);
    let mut got = Vec::new();
    let mut inp = Pkts::new();
    let t1 = Instant::now();
    while got.len() < frames.len() && t1.elapsed() < Duration::from_secs(3) {
        ends[1].1.rx_burst(0, &mut inp, 32);
        while let Some(m) = inp.pop() {
            got.push(m.data().to_vec());
        }
    }
    assert_eq!(got, frames, "l2fwd forwarded every frame unchanged");
    let out = app.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("400 frames written, 0 not captured"),
        "{text}"
    );
    let rows = tshark(&file).expect("tshark runs");
    let rx: Vec<_> = rows.iter().filter(|r| r.0 == a).collect();
    let tx: Vec<_> = rows.iter().filter(|r| r.0 == b).collect();
    assert_eq!(
        (rx.len(), tx.len()),
        (200, 200),
        "interfaces named by device"
    );
    for (k, f) in frames.iter().enumerate() {
        assert_eq!(
            (&rx[k].1[..], &rx[k].2),
            ("0x00000001", f),
            "port 0 rx frame {k}: inbound"
        );
        assert_eq!(
            (&tx[k].1[..], &tx[k].2),
            ("0x00000002", f),
            "port 1 tx frame {k}: outbound"
        );
    }
    for (mut port, q) in ends {
        port.stop().unwrap();
        drop(q);
    }
    let _ = std::fs::remove_file(&file);
}

/// The embedded topology's generator sends well-formed UDP/IPv4 frames
/// (an outside tester's tshark said "Bogus IPv4 version (0, must be 4)").
#[test]
fn the_embedded_generators_frames_are_udp_over_ipv4() {
    if Command::new("tshark").arg("--version").output().is_err() {
        rpmd_pmd::testing::missing_peer(
            "apps capture the_embedded_generators_frames_are_udp_over_ipv4",
            "tshark (Debian package tshark) decodes the capture",
        );
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().unwrap().parent().unwrap().join("l2fwd");
    let file = std::env::temp_dir().join(format!("rpmd-embedded-{}.pcapng", std::process::id()));
    let pcap = format!("0:rx={}", file.display());
    let out = Command::new(&bin)
        .args(["--duration", "0.5", "--no-telemetry", "--pcap", &pcap])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fields = Command::new("tshark")
        .args(["-r", file.to_str().unwrap(), "-c", "20", "-T", "fields"])
        .args([
            "-e",
            "ip.version",
            "-e",
            "ip.checksum.status",
            "-e",
            "udp.dstport",
        ])
        .args(["-o", "ip.check_checksum:TRUE"])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    let text = String::from_utf8_lossy(&fields.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 20, "{text}");
    for l in lines {
        // Version 4, a good header checksum (status 1), a UDP port.
        assert_eq!(l.split('\t').collect::<Vec<_>>(), ["4", "1", "9"], "{text}");
    }
}
