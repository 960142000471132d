//! gen end to end: the embedded pair, rate limiting, and both directions
//! against DPDK testpmd (gen txonly -> testpmd rxonly, with testpmd's
//! count matching ours exactly; testpmd txonly -> gen rxonly).
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

fn gen(args: &[&str]) -> (i32, Value, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_gen"))
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let last = stdout.lines().last().unwrap_or("{}").to_string();
    let v: Value = serde_json::from_str(&last).unwrap_or(Value::Null);
    (
        o.status.code().unwrap_or(-1),
        v.clone(),
        format!("{stdout}{err}"),
    )
}

#[test]
fn embedded_pair_receives_what_it_sends_at_the_set_rate() {
    let (rc, s, log) = gen(&["--duration", "1"]);
    assert_eq!(rc, 0, "{log}");
    let tx = s["tx_packets"].as_u64().unwrap();
    assert!(tx > 100_000, "{log}");
    assert_eq!(
        s["rx_packets"].as_u64(),
        Some(tx),
        "every frame sent arrives: {log}"
    );
    let (rc, s, log) = gen(&["--duration", "2", "--rate", "50000", "--flows", "4"]);
    assert_eq!(rc, 0, "{log}");
    let pps = s["tx_packets"].as_f64().unwrap() / s["seconds"].as_f64().unwrap();
    assert!(
        (40_000.0..60_000.0).contains(&pps),
        "{pps} pps for 50000: {log}"
    );
}

#[test]
fn bad_options_name_themselves() {
    for (args, want) in [
        (vec!["--size", "10"], "--size"),
        (vec!["--mode", "fwd"], "--mode"),
        (vec!["--dev", "nope:x", "--duration", "1"], "no driver"),
    ] {
        let (rc, _, log) = gen(&args);
        assert!(rc == 1 || rc == 2, "{args:?}: {rc}");
        assert!(log.contains(want), "{args:?}: {log}");
    }
}

mod common;
use common::{finish, Testpmd};

fn testpmd(mode: &str) -> Option<Testpmd> {
    common::testpmd("gen", mode, 1, 1, &["--txpkts=64"])
}

/// Issue 21: frames above an mbuf's data room go out as chains holding
/// every byte (they used to leave as empty 12-byte descriptors, counted
/// as sent): testpmd counts the same frames and bytes as gen.
#[test]
fn gen_jumbo_txonly_into_testpmd_rxonly_counts_match() {
    let Some(t) = common::testpmd("gen", "rxonly", 1, 1, &["--stats-period=1"]) else {
        return;
    };
    let dev = format!("virtio-user:{}", t.socks[0]);
    let (rc, s, log) = gen(&[
        "--mode",
        "txonly",
        "--dev",
        &dev,
        "-l",
        "0",
        "--duration",
        "1.5",
        "--rate",
        "20000",
        "--size",
        "9000",
    ]);
    // Two more stats periods, so the last one counts every frame
    // (testpmd's period drifts past a second when the machine is busy).
    std::thread::sleep(Duration::from_millis(2300));
    let (tp_rx, tp_bytes, tp_log) = finish(t);
    assert_eq!(rc, 0, "{log}");
    let sent = s["tx_packets"].as_u64().unwrap();
    assert!(sent > 10_000, "{log}");
    assert_eq!(s["tx_bytes"].as_u64(), Some(sent * 9000), "{log}");
    assert_eq!(
        (tp_rx, tp_bytes),
        (sent, sent * 9000),
        "testpmd rxonly saw {tp_rx} frames, {tp_bytes} bytes; gen sent {sent}\n{tp_log}"
    );
}

/// gen txonly at 200 000 frames/s over 8 flows (plus `extra` options)
/// into testpmd `t` (rxonly), which must count exactly the frames gen
/// sent; gen's summary.
fn txonly_counted_by(t: Testpmd, dev_opts: &str, extra: &[&str]) -> Value {
    let dev = format!("virtio-user:{}{dev_opts}", t.socks[0]);
    let mut args = vec![
        "--mode",
        "txonly",
        "--dev",
        &dev,
        "-l",
        "0",
        "--duration",
        "1.5",
        "--rate",
        "200000",
        "--flows",
        "8",
    ];
    args.extend_from_slice(extra);
    let (rc, s, log) = gen(&args);
    let (tp_rx, _, tp_log) = finish(t);
    assert_eq!(rc, 0, "{log}");
    let sent = s["tx_packets"].as_u64().unwrap();
    assert!(sent > 100_000, "{log}");
    assert_eq!(
        tp_rx, sent,
        "testpmd rxonly saw {tp_rx}, gen sent {sent}\n{tp_log}"
    );
    s
}

#[test]
fn gen_txonly_into_testpmd_rxonly_counts_match() {
    let Some(t) = testpmd("rxonly") else { return };
    txonly_counted_by(t, "", &[]);
}

/// gen rxonly for 1.5 s (plus `extra` options) on testpmd `t`'s port
/// (txonly); gen's summary and output.
fn rxonly_from(t: Testpmd, dev_opts: &str, extra: &[&str]) -> (Value, String) {
    let dev = format!("virtio-user:{}{dev_opts}", t.socks[0]);
    let mut args = vec![
        "--mode",
        "rxonly",
        "--dev",
        &dev,
        "-l",
        "0",
        "--duration",
        "1.5",
    ];
    args.extend_from_slice(extra);
    let (rc, s, log) = gen(&args);
    let _ = finish(t);
    assert_eq!(rc, 0, "{log}");
    (s, log)
}

#[test]
fn testpmd_txonly_into_gen_rxonly() {
    let Some(t) = testpmd("txonly") else { return };
    let (s, log) = rxonly_from(t, "", &[]);
    let got = s["rx_packets"].as_u64().unwrap();
    assert!(got > 10_000, "{log}");
    assert_eq!(
        s["rx_bytes"].as_u64(),
        Some(got * 64),
        "64-byte frames: {log}"
    );
}

/// Issue 21: several queue pairs carry traffic on every pair: gen
/// txonly on two tx queues into testpmd rxonly with two queues (testpmd's
/// count matching ours), and testpmd txonly on two queues into gen rxonly
/// on two rx queues.
#[test]
fn gen_on_two_queue_pairs_both_ways() {
    let Some(t) = common::testpmd("gen", "rxonly", 1, 2, &["--txpkts=64"]) else {
        return;
    };
    let s = txonly_counted_by(t, ",queues=2", &["--txq", "2"]);
    let per: Vec<u64> = s["tx_queue_packets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert!(
        per.len() == 2 && per.iter().all(|&n| n > 50_000),
        "{per:?}: {s}"
    );

    let Some(t) = common::testpmd("gen", "txonly", 1, 2, &["--txpkts=64"]) else {
        return;
    };
    let (s, log) = rxonly_from(t, ",queues=2", &["--rxq", "2"]);
    let per: Vec<u64> = s["rx_queue_packets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert!(
        per.len() == 2 && per.iter().all(|&n| n > 10_000),
        "{per:?}: {log}"
    );
}

#[test]
fn io_mode_sends_back_what_it_receives() {
    // null receives endless frames and frees what it sends: every frame
    // io received went out again or was counted as dropped.
    let (rc, s, log) = gen(&[
        "--mode",
        "io",
        "--dev",
        "null",
        "--duration",
        "1",
        "--no-telemetry",
    ]);
    assert_eq!(rc, 0, "{log}");
    let rx = s["rx_packets"].as_u64().unwrap();
    let port = &s["ports"][0];
    assert!(rx > 10_000, "{log}");
    assert_eq!(
        port["opackets"].as_u64().unwrap() + s["tx_dropped"].as_u64().unwrap_or(0),
        rx,
        "{log}"
    );
}

/// gen's forwarding modes against a shm far end this test drives: frames
/// go in, and what comes back is rewritten as testpmd's modes have it.
mod modes {
    use rpmd_pmd::hdr::{Ethernet, Ipv4, Udp};
    use rpmd_pmd::{Mempool, MempoolConfig, Pkts, Port, PortConfig, Queues, Registry};
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    struct FarEnd {
        port: Box<dyn Port>,
        q: Queues,
        pool: Mempool,
        app: Child,
    }

    /// The far end of `shm:NAME` and gen running `args` on the near end.
    fn start(tag: &str, args: &[&str]) -> (FarEnd, String) {
        let dev = format!("shm:gen-{tag}-{}", std::process::id());
        let mut c = MempoolConfig::new(tag, 2048);
        c.cache_size = 0;
        let pool = Mempool::new(&c).unwrap();
        let mut port = Registry::new().open(&dev).unwrap();
        port.configure(&PortConfig::with_pool(&pool)).unwrap();
        let q = port.start().unwrap();
        let app = Command::new(env!("CARGO_BIN_EXE_gen"))
            .args(["--dev", &dev, "--no-telemetry", "--duration", "3"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        while !port.link().up {
            assert!(t0.elapsed() < Duration::from_secs(5), "gen did not join");
            std::thread::sleep(Duration::from_millis(5));
        }
        (FarEnd { port, q, pool, app }, dev)
    }

    impl FarEnd {
        /// Sends `frames` and collects as many frames coming back.
        fn exchange(&mut self, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
            let mut out = Pkts::new();
            for f in frames {
                let mut m = self.pool.get().unwrap();
                m.append(f.len()).unwrap().copy_from_slice(f);
                out.push(m).unwrap();
                while !out.is_empty() {
                    self.q.tx_burst(0, &mut out);
                }
            }
            self.collect(frames.len())
        }

        fn collect(&mut self, n: usize) -> Vec<Vec<u8>> {
            let (mut got, mut inp) = (Vec::new(), Pkts::new());
            let t0 = Instant::now();
            while got.len() < n && t0.elapsed() < Duration::from_secs(3) {
                self.q.rx_burst(0, &mut inp, 32);
                while let Some(m) = inp.pop() {
                    got.push(m.data().to_vec());
                }
            }
            got
        }

        /// Waits for gen to end; its stdout.
        fn finish(mut self) -> String {
            let out = std::mem::replace(&mut self.app, Command::new("true").spawn().unwrap())
                .wait_with_output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(
                out.status.success(),
                "{text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            self.port.stop().unwrap();
            text
        }
    }

    fn frames(n: u16) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| {
                let mut f = rpmd_apps::gen::template(64 + i as usize);
                rpmd_apps::gen::set_flow(&mut f, i);
                f
            })
            .collect()
    }

    #[test]
    fn mac_sets_both_addresses_and_macswap_swaps_them() {
        let sent = frames(50);
        let (mut e, _) = start("mac", &["--mode", "mac", "--eth-peer", "02:00:00:00:00:77"]);
        let mac = e.port.mac_addr().0; // the far end's; gen's port is its peer
        let back = e.exchange(&sent);
        let text = e.finish();
        assert_eq!(back.len(), 50, "{text}");
        for (b, s) in back.iter().zip(&sent) {
            assert_eq!(&b[..6], &[2, 0, 0, 0, 0, 0x77], "destination = --eth-peer");
            assert_ne!(&b[6..12], &s[6..12], "source = gen's port MAC");
            assert_ne!(&b[6..12], &mac, "not the far end's");
            assert_eq!(&b[12..], &s[12..]);
        }
        let (mut e, _) = start("macswap", &["--mode", "macswap"]);
        let back = e.exchange(&sent);
        e.finish();
        for (b, s) in back.iter().zip(&sent) {
            assert_eq!((&b[..6], &b[6..12]), (&s[6..12], &s[..6]));
            assert_eq!(&b[12..], &s[12..]);
        }
    }

    #[test]
    fn csum_counts_bad_checksums_and_sends_them_back_right() {
        let mut sent = frames(40);
        for f in sent.iter_mut().take(10) {
            f[24] ^= 0x5a; // IPv4 header checksum
        }
        for f in sent.iter_mut().skip(10).take(5) {
            f[40..42].copy_from_slice(&[0xde, 0xad]); // a UDP checksum, wrong
        }
        let (mut e, _) = start("csum", &["--mode", "csum"]);
        let back = e.exchange(&sent);
        let text = e.finish();
        assert_eq!(back.len(), 40, "{text}");
        assert!(
            text.contains("bad IPv4 checksums 10, bad L4 checksums 5"),
            "{text}"
        );
        for b in &back {
            let eth = Ethernet::new_checked(&b[..]).unwrap();
            let ip = Ipv4::new_checked(eth.payload()).unwrap();
            assert!(ip.checksum_ok());
            let udp = Udp::new_checked(ip.payload()).unwrap();
            let ok = udp.checksum() == 0 || udp.compute_checksum(ip.pseudo_sum()) == udp.checksum();
            assert!(ok, "L4 checksum right");
            // etherparse agrees.
            let p = etherparse::SlicedPacket::from_ethernet(b).unwrap();
            let Some(etherparse::NetSlice::Ipv4(v4)) = p.net else {
                panic!()
            };
            let h = v4.header().to_header();
            assert_eq!(h.header_checksum, h.calc_header_checksum());
        }
    }

    #[test]
    fn flowgen_sends_many_flows_and_drops_what_it_receives() {
        let pcap = std::env::temp_dir().join(format!("gen-flowgen-{}.pcapng", std::process::id()));
        let spec = format!("0:tx={}", pcap.display());
        let (mut e, _) = start(
            "flowgen",
            &[
                "--mode", "flowgen", "--rate", "20000", "--rxd", "512", "--mbufs", "4096",
                "--pcap", &spec,
            ],
        );
        let got = e.collect(2000);
        // Frames sent to it are received and dropped, not sent back.
        let mut out = Pkts::new();
        for f in frames(10) {
            let mut m = e.pool.get().unwrap();
            m.append(f.len()).unwrap().copy_from_slice(&f);
            out.push(m).unwrap();
        }
        e.q.tx_burst(0, &mut out);
        let text = e.finish();
        assert!(got.len() >= 2000, "{}: {text}", got.len());
        let sources: std::collections::HashSet<_> =
            got.iter().map(|f| (f[29], f[34], f[35])).collect();
        assert_eq!(sources.len(), 1024, "1024 flows by default");
        assert!(text.contains("rx 10 frames"), "{text}");
        assert!(text.contains("frames written, 0 not captured"), "{text}");
        let size = std::fs::metadata(&pcap).unwrap().len();
        assert!(
            size > 2000 * 64,
            "the capture holds what was sent: {size} bytes"
        );
        let _ = std::fs::remove_file(&pcap);
    }
}
