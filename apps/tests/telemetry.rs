//! Issue 26: a running l2fwd answers DPDK's own telemetry client,
//! `dpdk-telemetry.py` (Debian's dpdk package), driven by a script on its
//! stdin: one JSON line per command comes back.
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn client_present() -> bool {
    Command::new("dpdk-telemetry.py")
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `dpdk-telemetry.py -f prefix` with `commands`, one per line; its
/// output, one JSON object per command.
fn ask(prefix: &str, commands: &[&str]) -> Vec<serde_json::Value> {
    let mut c = Command::new("dpdk-telemetry.py")
        .args(["-f", prefix])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = commands.join("\n");
    input.push('\n');
    c.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = c.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {l}\n{text}{:?}", out.stderr))
        })
        .collect()
}

/// Waits up to 5 s for an app's telemetry socket under `prefix`; its path.
fn wait_for_socket(prefix: &str) -> std::path::PathBuf {
    let sock = rpmd_apps::telemetry::runtime_dir(prefix).join("dpdk_telemetry.v2");
    let t0 = Instant::now();
    while !sock.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "no {}",
            sock.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    sock
}

#[test]
fn dpdk_telemetry_py_reads_a_running_l2fwd() {
    if !client_present() {
        rpmd_pmd::testing::missing_peer(
            "apps telemetry",
            "needs dpdk-telemetry.py (apt-get install dpdk-dev)",
        );
        return;
    }
    let prefix = format!("rpmd-tel-{}", std::process::id());
    let l2fwd = Command::new(env!("CARGO_BIN_EXE_l2fwd"))
        .args(["--duration", "6", "--json", "--file-prefix", &prefix])
        .args(["--tx-rate", "1gbit,by=pcp,classes=hi:7/lo:default"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let sock = wait_for_socket(&prefix);
    // Let traffic flow for a moment.
    std::thread::sleep(Duration::from_millis(700));
    let cmds = [
        "/",
        "/info",
        "/help,/ethdev/stats",
        "/ethdev/list",
        "/ethdev/info,0",
        "/ethdev/stats,0",
        "/ethdev/xstats,1",
        "/ethdev/link_status,1",
        "/ethdev/stats,7",
        "/no/such/command",
        "/rpmd/lcores",
        "/rpmd/mempools",
        "/eal/lcore/usage",
        "/rpmd/egress",
    ];
    let r = ask(&prefix, &cmds);
    assert_eq!(r.len(), cmds.len(), "{r:?}");
    let list = r[0]["/"].as_array().unwrap();
    assert!(list.iter().any(|c| c == "/ethdev/stats"), "{list:?}");
    assert_eq!(r[1]["/info"]["pid"], l2fwd.id());
    assert!(r[2]["/help"]["/ethdev/stats"]
        .as_str()
        .unwrap()
        .contains("port_id"));
    assert_eq!(r[3]["/ethdev/list"], serde_json::json!([0, 1]));
    assert_eq!(
        r[4]["/ethdev/info,0"],
        serde_json::Value::Null,
        "keyed by path"
    );
    assert_eq!(r[4]["/ethdev/info"]["name"], "ring:l2fwd-a");
    let s = &r[5]["/ethdev/stats"];
    assert!(s["ipackets"].as_u64().unwrap() > 1000, "{s}");
    assert!(s["q_ipackets"].as_array().unwrap()[0].as_u64().unwrap() > 0);
    assert!(r[6]["/ethdev/xstats"]["tx_q0_packets"].as_u64().unwrap() > 0);
    assert_eq!(r[7]["/ethdev/link_status"]["status"], "UP");
    assert_eq!(r[8]["/ethdev/stats"], serde_json::Value::Null);
    assert_eq!(r[9]["/no/such/command"], serde_json::Value::Null);
    let lcores = r[10]["/rpmd/lcores"].as_array().unwrap();
    assert_eq!(lcores.len(), 2, "{lcores:?}");
    assert!(lcores[0]["rounds"].as_u64().unwrap() > 0);
    assert!(lcores[0]["policy"]
        .as_str()
        .unwrap()
        .starts_with("poll adaptive: "));
    assert!(lcores[0]["cpu_time_ns"].as_u64().unwrap() > 0);
    let pools = r[11]["/rpmd/mempools"].as_array().unwrap();
    assert_eq!(pools[0]["size"], 8192);
    // DPDK 23.03's shape: ids, total and busy cycles, busy within total.
    let u = &r[12]["/eal/lcore/usage"];
    assert_eq!(u["lcore_ids"].as_array().unwrap().len(), 2, "{u}");
    let (total, busy) = (&u["total_cycles"], &u["busy_cycles"]);
    for k in 0..2 {
        let (t, b) = (total[k].as_u64().unwrap(), busy[k].as_u64().unwrap());
        assert!(t > 0 && b > 0 && b <= t, "{u}");
    }
    // Each shaped port's classes and their counters.
    let e = r[13]["/rpmd/egress"].as_array().unwrap();
    assert_eq!(e.len(), 2, "{e:?}");
    assert_eq!(e[0]["rate_bytes"], 125_000_000);
    let lo = &e[0]["classes"][1];
    assert_eq!(lo["name"], "lo", "{e:?}");
    assert!(lo["sent"].as_u64().unwrap() > 1000, "{e:?}");
    let out = l2fwd.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!sock.exists(), "the socket is removed at exit");
}

#[test]
fn a_prefix_in_use_is_refused_and_the_second_runs_without() {
    let prefix = format!("rpmd-tel2-{}", std::process::id());
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_l2fwd"))
            .args(["--duration", "1.5", "--file-prefix", &prefix])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let first = run();
    wait_for_socket(&prefix);
    let second = run().wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{err}");
    assert!(
        err.contains("served by another process") && err.contains("--file-prefix"),
        "{err}"
    );
    assert!(first.wait_with_output().unwrap().status.success());
}

/// gen and rr serve it too: their ports, lcores and pool.
#[test]
fn gen_rr_and_vswitch_answer_dpdk_telemetry_py() {
    if !client_present() {
        rpmd_pmd::testing::missing_peer(
            "apps telemetry gen/rr/vswitch",
            "needs dpdk-telemetry.py (apt-get install dpdk-dev)",
        );
        return;
    }
    for (app, args, ports) in [
        (env!("CARGO_BIN_EXE_gen"), vec!["--duration", "3"], 2),
        (
            env!("CARGO_BIN_EXE_rr"),
            vec!["--duration", "3", "--no-bound"],
            2,
        ),
        (env!("CARGO_BIN_EXE_vswitch"), vec!["--duration", "3"], 3),
    ] {
        let name = app.rsplit('/').next().unwrap();
        let prefix = format!("rpmd-tel3-{}-{name}", std::process::id());
        let child = Command::new(app)
            .args(&args)
            .args(["--file-prefix", &prefix])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_socket(&prefix);
        std::thread::sleep(Duration::from_millis(500));
        let r = ask(
            &prefix,
            &["/ethdev/list", "/ethdev/stats,0", "/rpmd/lcores"],
        );
        assert_eq!(
            r[0]["/ethdev/list"].as_array().unwrap().len(),
            ports,
            "{app}: {r:?}"
        );
        assert!(
            r[1]["/ethdev/stats"]["opackets"].as_u64().unwrap() > 0,
            "{app}: {r:?}"
        );
        assert!(
            !r[2]["/rpmd/lcores"].as_array().unwrap().is_empty(),
            "{app}"
        );
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{app}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// l3fwd answers `/rpmd/app` with its drops by reason: a null port's
/// frames (all zeros) are not IP.
#[test]
fn l3fwd_shows_its_drops_by_reason_to_dpdk_telemetry_py() {
    if !client_present() {
        rpmd_pmd::testing::missing_peer(
            "apps telemetry l3fwd",
            "needs dpdk-telemetry.py (apt-get install dpdk-dev)",
        );
        return;
    }
    let prefix = format!("rpmd-tel4-{}", std::process::id());
    let child = Command::new(env!("CARGO_BIN_EXE_l3fwd"))
        .args(["--dev", "null", "--dev", "null", "--duration", "3"])
        .args(["--file-prefix", &prefix])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_socket(&prefix);
    std::thread::sleep(Duration::from_millis(500));
    let r = ask(&prefix, &["/ethdev/list", "/rpmd/app"]);
    assert_eq!(r[0]["/ethdev/list"], serde_json::json!([0, 1]), "{r:?}");
    let app = &r[1]["/rpmd/app"];
    assert_eq!(
        (&app["lookup"], &app["rules"]),
        (&serde_json::json!("lpm"), &serde_json::json!(4)),
        "{app}"
    );
    let p0 = &app["ports"][0];
    assert!(p0["drops"]["not_ip"].as_u64().unwrap() > 0, "{app}");
    // Read live, so within a burst or two of each other; all dropped.
    let (rx, dropped) = (p0["rx"].as_u64().unwrap(), p0["dropped"].as_u64().unwrap());
    assert!(rx.abs_diff(dropped) <= 512 && p0["tx"] == 0, "{app}");
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
