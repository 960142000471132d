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
        v["summary"].clone(),
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
    // One more stats period, so the last one counts every frame.
    std::thread::sleep(Duration::from_millis(1300));
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
