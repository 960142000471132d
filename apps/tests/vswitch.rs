//! vswitch end to end: its demo; learning, flooding, filtering and ageing
//! seen from the far ends of three shm ports (with a capture read back);
//! and the Linux stacks of two network namespaces pinging each other
//! through it over AF_PACKET.
use rpmd_pmd::{Mempool, MempoolConfig, Pkts, Port, PortConfig, Queues, Registry};
use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn summary(stdout: &str) -> Value {
    let last = stdout.lines().last().unwrap_or("{}");
    let v: Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(v["type"], "summary", "{stdout}");
    v
}

fn finish(c: Child) -> (i32, String, String) {
    let out = c.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn the_demo_learns_and_stops_flooding() {
    let c = Command::new(env!("CARGO_BIN_EXE_vswitch"))
        .args(["--duration", "2", "--json", "--no-telemetry"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (rc, out, err) = finish(c);
    assert_eq!(rc, 0, "{out}{err}");
    let s = summary(&out);
    let d = &s["demo"];
    let (sent, delivered, bcast, mis) = (
        d["sent"].as_u64().unwrap(),
        d["delivered"].as_u64().unwrap(),
        d["broadcasts"].as_u64().unwrap(),
        d["misdelivered"].as_u64().unwrap(),
    );
    assert!(delivered > 100_000, "{s}");
    assert_eq!(s["learned"], 3, "{s}");
    // Only the first frames flood; a broadcast (one frame in 1024 built,
    // some of them refused by a full ring) reaches the two others.
    assert!(mis < 1000, "{s}");
    assert!(bcast > 0 && bcast < sent / 200, "{s}");
    let flooded: u64 = s["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["flooded"].as_u64().unwrap())
        .sum();
    assert!(flooded < sent / 500, "{s}");
}

/// A station: a MAC behind one of the far ends.
fn mac(k: u8) -> [u8; 6] {
    [2, 0, 0, 0, 0x77, k]
}

fn frame(to: [u8; 6], from: [u8; 6], tag: u8) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&to);
    f[6..12].copy_from_slice(&from);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f[14] = tag;
    f
}

struct Ends {
    ends: Vec<(Box<dyn Port>, Queues)>,
    pool: Mempool,
}

impl Ends {
    fn send(&mut self, port: usize, f: &[u8]) {
        let mut out = Pkts::new();
        let mut m = self.pool.get().unwrap();
        m.append(f.len()).unwrap().copy_from_slice(f);
        out.push(m).unwrap();
        assert_eq!(self.ends[port].1.tx_burst(0, &mut out), 1);
    }

    /// The tags of what each far end receives within 300 ms.
    fn received(&mut self) -> Vec<Vec<u8>> {
        let mut got = vec![Vec::new(); self.ends.len()];
        let mut inp = Pkts::new();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(300) {
            for (k, (_, q)) in self.ends.iter_mut().enumerate() {
                q.rx_burst(0, &mut inp, 32);
                while let Some(m) = inp.pop() {
                    got[k].push(m.data()[14]);
                }
            }
        }
        got
    }
}

#[test]
fn learning_flooding_filtering_and_ageing_seen_from_the_ports() {
    let id = std::process::id();
    let devs: Vec<String> = (0..3).map(|k| format!("shm:vsw-{id}-{k}")).collect();
    let pcap = std::env::temp_dir().join(format!("vswitch-{id}.pcapng"));
    let mut c = MempoolConfig::new("vsw-ends", 512);
    c.cache_size = 0;
    let pool = Mempool::new(&c).unwrap();
    let reg = Registry::new();
    let mut e = Ends {
        ends: Vec::new(),
        pool,
    };
    for d in &devs {
        let mut p = reg.open(d).unwrap();
        p.configure(&PortConfig::with_pool(&e.pool)).unwrap();
        let q = p.start().unwrap();
        e.ends.push((p, q));
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vswitch"));
    cmd.args([
        "--duration",
        "8",
        "--ageing",
        "1",
        "--no-telemetry",
        "--json",
    ]);
    cmd.args(["--pcap", &format!("0={}", pcap.display())]);
    for d in &devs {
        cmd.args(["--dev", d]);
    }
    let app = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !e.ends.iter().all(|(p, _)| p.link().up) {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "vswitch did not join"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // A (port 0) to B, unknown yet: flooded to ports 1 and 2.
    e.send(0, &frame(mac(2), mac(1), 1));
    assert_eq!(e.received(), [vec![], vec![1], vec![1]]);
    // B answers from port 1: A is known, so port 0 only.
    e.send(1, &frame(mac(1), mac(2), 2));
    assert_eq!(e.received(), [vec![2], vec![], vec![]]);
    // A to B again: both known now.
    e.send(0, &frame(mac(2), mac(1), 3));
    assert_eq!(e.received(), [vec![], vec![3], vec![]]);
    // A broadcast from C floods; a frame from C for C goes nowhere.
    e.send(2, &frame([0xff; 6], mac(3), 4));
    e.send(2, &frame(mac(3), mac(3), 5));
    assert_eq!(e.received(), [vec![4], vec![4], vec![]]);
    // After the ageing time without traffic from B, A to B floods again.
    std::thread::sleep(Duration::from_millis(2200));
    e.send(0, &frame(mac(2), mac(1), 6));
    assert_eq!(e.received(), [vec![], vec![6], vec![6]]);
    let (rc, out, err) = finish(app);
    assert_eq!(rc, 0, "{out}{err}");
    let s = summary(&out);
    let p: Vec<&Value> = s["ports"].as_array().unwrap().iter().collect();
    assert_eq!(p[0]["flooded"], 2, "{s}");
    assert_eq!(p[2]["filtered"], 1, "{s}");
    // Port 0 saw tags 1, 3, 6 come in and 2, 4 go out.
    assert_eq!(s["captures"][0]["written"], 5, "{s}");
    let mut r = pcap_file::pcapng::PcapNgReader::new(std::fs::File::open(&pcap).unwrap()).unwrap();
    let mut tags = Vec::new();
    while let Some(b) = r.next_block() {
        if let pcap_file::pcapng::Block::EnhancedPacket(p) = b.unwrap() {
            tags.push(p.data[14]);
        }
    }
    tags.sort_unstable();
    assert_eq!(tags, [1, 2, 3, 4, 6]);
    let _ = std::fs::remove_file(&pcap);
    for (mut p, q) in e.ends {
        p.stop().unwrap();
        drop(q);
    }
}

#[test]
fn two_namespaces_ping_each_other_through_vswitch_over_af_packet() {
    use rpmd_kernel::testing::{lab_available, sh_ok, Lab};
    let test = "vswitch two_namespaces_ping_each_other_through_vswitch_over_af_packet";
    if !lab_available(test) {
        return;
    }
    let mut lab = Lab::new();
    let (a, b, c) = (lab.netns("a"), lab.netns("b"), lab.netns("c"));
    let net = (lab.tag.parse::<u64>().unwrap_or(0) % 200 + 20) as u8;
    let va = lab.veth("sa", &a, "eth0", &format!("10.79.{net}.1/24"), 1);
    let vb = lab.veth("sb", &b, "eth0", &format!("10.79.{net}.2/24"), 1);
    let vc = lab.veth("sc", &c, "eth0", &format!("10.79.{net}.3/24"), 1);
    let app = Command::new(env!("CARGO_BIN_EXE_vswitch"))
        .args(["--duration", "8", "--no-telemetry", "--json"])
        .args([
            "--dev",
            &format!("af_packet:{va}"),
            "--dev",
            &format!("af_packet:{vb}"),
        ])
        .args(["--dev", &format!("af_packet:{vc}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ping = |ns: &str, to: u8| {
        sh_ok(&format!(
            "ip netns exec {ns} ping -c 3 -i 0.3 -w 12 10.79.{net}.{to}"
        ))
    };
    let ab = ping(&a, 2);
    let ca = ping(&c, 1);
    let (rc, out, err) = finish(app);
    assert!(ab && ca, "no ping through vswitch\n{out}\n{err}");
    assert_eq!(rc, 0, "{out}\n{err}");
    let s = summary(&out);
    // The three namespaces' addresses, and the ARP broadcasts flooded.
    assert!(s["learned"].as_u64().unwrap() >= 3, "{s}");
    let flooded: u64 = s["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["flooded"].as_u64().unwrap())
        .sum();
    assert!(flooded >= 2, "ARP requests flood: {s}");
}

/// A VLAN-tagged frame of `len` bytes with priority `pcp`.
fn tagged(to: [u8; 6], from: [u8; 6], pcp: u8, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&to);
    f[6..12].copy_from_slice(&from);
    f[12..14].copy_from_slice(&[0x81, 0x00]);
    f[14] = pcp << 5;
    f[16..18].copy_from_slice(&[0x88, 0xb5]);
    f
}

/// Issue 48: a port shaped with strict-priority classes by VLAN PCP, seen
/// from its far end: the high class gets every frame it offers (below the
/// port rate), the low class what is left of the rate and no more, and
/// the summary's class counters account for every frame.
#[test]
fn an_egress_with_priority_classes_seen_from_the_port() {
    let id = std::process::id();
    let devs: Vec<String> = (0..2).map(|k| format!("shm:vsweg-{id}-{k}")).collect();
    let mut c = MempoolConfig::new("vsw-eg-ends", 2048);
    c.cache_size = 0;
    let pool = Mempool::new(&c).unwrap();
    let reg = Registry::new();
    let mut e = Ends {
        ends: Vec::new(),
        pool,
    };
    for d in &devs {
        let mut p = reg.open(d).unwrap();
        p.configure(&PortConfig::with_pool(&e.pool)).unwrap();
        let q = p.start().unwrap();
        e.ends.push((p, q));
    }
    // Port 1 at 8 Mbit/s (1 MB/s): PCP 5-7 first, the rest after.
    let app = Command::new(env!("CARGO_BIN_EXE_vswitch"))
        .args(["--duration", "5", "--no-telemetry", "--json"])
        .args([
            "--egress",
            "1=8mbit,limit=64,by=pcp,classes=hi:5-7/lo:default",
        ])
        .args(["--dev", &devs[0], "--dev", &devs[1]])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !e.ends.iter().all(|(p, _)| p.link().up) {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "vswitch did not join"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // B behind port 1 makes itself known, then A offers 1000-byte frames
    // for 3 s: high 4 Mbit/s (500/s), low 8 Mbit/s (1000/s).
    e.send(1, &frame(mac(1), mac(2), 0));
    std::thread::sleep(Duration::from_millis(50));
    let (hi, lo) = (
        tagged(mac(2), mac(1), 6, 1000),
        tagged(mac(2), mac(1), 1, 1000),
    );
    let (mut sent, mut got) = ([0u64; 2], [0u64; 2]);
    let mut inp = Pkts::new();
    let start = Instant::now();
    let mut tick = 0u64;
    let mut count = |e: &mut Ends, got: &mut [u64; 2]| {
        e.ends[1].1.rx_burst(0, &mut inp, 64);
        while let Some(m) = inp.pop() {
            let d = m.data();
            if d.len() == 1000 && d[12..14] == [0x81, 0x00] {
                got[usize::from(d[14] >> 5 == 1)] += 1;
            }
        }
    };
    while start.elapsed() < Duration::from_secs(3) {
        // Every 10 ms: 5 high and 10 low frames, interleaved.
        if start.elapsed() >= Duration::from_millis(10 * tick) {
            for k in 0..15 {
                let f = if k % 3 == 0 { &hi } else { &lo };
                e.send(0, f);
                sent[usize::from(k % 3 != 0)] += 1;
            }
            tick += 1;
        }
        count(&mut e, &mut got);
        std::thread::sleep(Duration::from_micros(500));
    }
    // What arrived while both classes were offered, then the rest.
    let in_window = got;
    let settle = Instant::now();
    while settle.elapsed() < Duration::from_millis(500) {
        count(&mut e, &mut got);
    }
    let (rc, out, err) = finish(app);
    assert_eq!(rc, 0, "{out}{err}");
    let s = summary(&out);
    assert_eq!(
        got[0], sent[0],
        "every high frame gets through: got {got:?} of {sent:?}; {s}"
    );
    // Low gets the rest of 1 MB/s while both are offered: 500 frames a
    // second (and the bucket's 16 KiB at the start).
    let want = 500.0 * 3.0;
    assert!(
        (in_window[1] as f64 - want).abs() / want < 0.05,
        "low class got {} frames in 3 s, about {want} expected; {s}",
        in_window[1]
    );
    let classes = s["egress"][0]["classes"].as_array().unwrap();
    assert_eq!(s["egress"][0]["port"], 1, "{s}");
    let n = |c: &Value, k: &str| c[k].as_u64().unwrap();
    assert_eq!(
        (classes[0]["name"].as_str(), classes[1]["name"].as_str()),
        (Some("hi"), Some("lo"))
    );
    assert_eq!(n(&classes[0], "dropped"), 0, "{s}");
    assert!(n(&classes[1], "dropped") > 1000, "{s}");
    // Every frame switched to port 1 was sent or dropped (tail drops and
    // any still queued at the end), and what was sent arrived.
    // The shaped port still receives: B's one frame, learned.
    assert_eq!(n(&s["ports"][1], "rx"), 1, "{s}");
    assert_eq!(s["learned"], 2, "{s}");
    let rx0 = n(&s["ports"][0], "rx");
    let out: u64 = classes.iter().map(|c| n(c, "sent") + n(c, "dropped")).sum();
    assert_eq!(out, rx0, "{s}");
    let sent: u64 = classes.iter().map(|c| n(c, "sent")).sum();
    assert_eq!(sent, got[0] + got[1], "{s}");
    for (mut p, q) in e.ends {
        p.stop().unwrap();
        drop(q);
    }
}

#[test]
fn egress_options_are_usage_errors_naming_the_option() {
    for (spec, says) in [
        ("7=1mbit", "port 7 does not exist"),
        ("1=1mbit,by=dscp,classes=a:64", "within 0-63"),
        ("1mbit", "PORT=RATE"),
        ("1=0", "at least"),
        ("1=2tbit", "clock can pace"),
        ("1=10mbit,by=pcp,classes=a:1:20mbit", "above the port rate"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_vswitch"))
            .args(["--duration", "0.2", "--no-telemetry", "--egress", spec])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{spec}: {err}");
        assert!(
            err.contains(says) && err.contains("--egress"),
            "{spec}: {err}"
        );
    }
}
