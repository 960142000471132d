//! Whose XDP program rpmd removes: at exit only the one it attached (a
//! program that replaced it while it ran stays), and an interface's name
//! and index are only unique within its network namespace (two
//! namespaces' `x0` with the same index are two interfaces, each given
//! its own program).
mod common;
use common::*;
use rpmd_pmd::Mempool;

const OTHER_PROG: &str = "/usr/lib/x86_64-linux-gnu/bpf/xsk_def_xdp_prog_5.3.o";

fn prog_line(ns: Option<&str>, dev: &str) -> Option<String> {
    let pre = ns.map_or(String::new(), |n| format!("ip netns exec {n} "));
    sh(&format!("{pre}ip -d link show dev {dev}"))
        .lines()
        .find(|l| l.contains("prog/xdp"))
        .map(|l| l.trim().to_string())
}

#[test]
fn a_program_that_replaced_ours_is_left_at_exit() {
    if !lab_available("a_program_that_replaced_ours_is_left_at_exit") {
        return;
    }
    if !std::path::Path::new(OTHER_PROG).exists() {
        rpmd_pmd::testing::missing_peer(
            "a_program_that_replaced_ours_is_left_at_exit",
            &format!("{OTHER_PROG} (Debian's libxdp1) is missing"),
        );
        return;
    }
    let mut lab = Lab::new();
    let ns = lab.netns("a");
    let root = lab.veth("xo", &ns, "eth0", "10.79.1.1/24", 1);
    let pool = pool("xo", 1024);
    let (port, q) = start(&format!("af_xdp:{root},mode=skb"), &pool, 1);
    let ours = prog_line(None, &root).expect("rpmd's program attached");
    // Another program takes the interface over while the port runs.
    sh(&format!("ip link set dev {root} xdpgeneric off"));
    sh(&format!(
        "ip link set dev {root} xdpgeneric obj {OTHER_PROG} sec xdp"
    ));
    let theirs = prog_line(None, &root).expect("the other program attached");
    assert_ne!(ours, theirs);
    drop(q);
    drop(port);
    assert_eq!(
        prog_line(None, &root).as_deref(),
        Some(theirs.as_str()),
        "rpmd removed a program that was not its own"
    );
    sh(&format!("ip link set dev {root} xdpgeneric off"));
}

#[test]
fn the_same_name_and_index_in_two_namespaces_are_two_interfaces() {
    if !lab_available("the_same_name_and_index_in_two_namespaces") {
        return;
    }
    let mut lab = Lab::new();
    let (a, b) = (lab.netns("a"), lab.netns("b"));
    for ns in [&a, &b] {
        sh(&format!(
            "ip netns exec {ns} ip link add x0 type veth peer name x1 && \
             ip netns exec {ns} ip link set x0 up && ip netns exec {ns} ip link set x1 up"
        ));
    }
    let index = |ns: &str| sh(&format!("ip netns exec {ns} cat /sys/class/net/x0/ifindex"));
    assert_eq!(index(&a), index(&b), "the test needs equal indices");
    let pool = pool("xns", 2048);
    // Both ports open and run at once, each from inside its namespace.
    let (pa, pb) = (pool.clone(), pool.clone());
    let (tx_a, rx_a) = std::sync::mpsc::channel::<()>();
    let (tx_b, rx_b) = std::sync::mpsc::channel::<()>();
    let (ready_tx, ready) = std::sync::mpsc::channel::<String>();
    let run = move |ns: String, pool: Mempool, quit: std::sync::mpsc::Receiver<()>| {
        let ready_tx = ready_tx.clone();
        std::thread::spawn(move || {
            in_netns(&ns.clone(), move || {
                let (port, q) = start("af_xdp:x0,mode=skb", &pool, 1);
                let _ = ready_tx.send(prog_line(None, "x0").unwrap_or_default());
                let _ = quit.recv();
                drop(q);
                drop(port);
            })
        })
    };
    let ta = run(a.clone(), pa, rx_a);
    let la = ready.recv().unwrap();
    let tb = run(b.clone(), pb, rx_b);
    let lb = ready.recv().unwrap();
    assert!(la.contains("prog/xdp"), "namespace a: {la:?}");
    assert!(
        lb.contains("prog/xdp"),
        "namespace b has its own program: {lb:?}"
    );
    tx_a.send(()).unwrap();
    tx_b.send(()).unwrap();
    ta.join().unwrap();
    tb.join().unwrap();
    assert_eq!(prog_line(Some(&a), "x0"), None, "left on a");
    assert_eq!(prog_line(Some(&b), "x0"), None, "left on b");
    assert_eq!(pool.available(), pool.size());
}
