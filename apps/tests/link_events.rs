//! What an app says and does when a port's interface is deleted under it
//! (an outside tester's case): the link-down line names the interface
//! once, and the lcore sleeps instead of spinning a CPU on the dead
//! socket's error.
use rpmd_kernel::testing::{lab_available, sh, Lab};
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn a_deleted_interface_is_told_once_and_its_lcore_sleeps() {
    if !lab_available("a_deleted_interface_is_told_once_and_its_lcore_sleeps") {
        return;
    }
    let mut lab = Lab::new();
    let ns = lab.netns("a");
    let a = lab.veth("la", &ns, "eth0", "10.80.1.1/24", 1);
    let b = lab.veth("lb", &ns, "eth1", "10.80.2.1/24", 1);
    let child = Command::new(env!("CARGO_BIN_EXE_l2fwd"))
        .args(["--no-telemetry", "--json", "--duration", "4", "-l", "0"])
        .args(["--dev", &format!("af_packet:{a}")])
        .args(["--dev", &format!("af_packet:{b}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    sh(&format!("ip link del {b}"));
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    let told = format!("link down: interface {b} is gone");
    assert_eq!(stderr.matches(&told).count(), 1, "{stderr}");
    let summary: serde_json::Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "summary" || v.get("summary").is_some())
        .unwrap_or_else(|| panic!("no summary in {stdout}"));
    let s = summary.get("summary").unwrap_or(&summary);
    let cpu = s["lcores"][0]["cpu_percent"].as_f64().unwrap();
    assert!(cpu < 20.0, "the lcore spun on the dead socket: {cpu} % CPU");
}
