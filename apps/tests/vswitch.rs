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
