//! The run loop on igb as every app runs it: an lcore with the default
//! policy (adaptive spin, then sleep on the queues' interrupts) forwarding
//! one of port 1's receive queues to its send queue; and the same on a
//! VF, woken by Linux's own traffic on the PF.
use crate::frames::{frame, Pair};
use crate::linux_peer::Peer;
use rpmd_pmd::{Pkts, Queues};
use rpmd_sched::signal::thread_cpu_ns;
use rpmd_sched::{Forward, Lcore, LcoreConfig, TaskId};
use std::time::{Duration, Instant};

type R<T> = Result<T, String>;

/// Idle for two seconds, the lcore sleeps on the queue's MSI-X vector: a
/// small share of its CPU, where a spinning one takes all of it (under
/// TCG, every wake-up is slow and counted); frames from port 0 wake it
/// and go back out of port 1. The port starts again afterwards whatever
/// happened (the lcore takes its queues).
pub fn idle_lcore(p: &mut Pair) -> R<String> {
    let r = sleep_and_wake(p);
    p.restart(1, 1500)?;
    r
}

/// An lcore with the default policy forwarding queue 0 of `queues` back
/// out, left idle for two seconds: the lcore, its CPU % over them and the
/// times it slept.
fn idle_forwarder(queues: &mut Queues) -> R<(Lcore, f64, u64)> {
    let rx = queues.take_rx(0).map_err(|e| e.to_string())?;
    let tx = queues.take_tx(0).map_err(|e| e.to_string())?;
    if rx.interrupt_fd().is_none() {
        return Err("the receive queue offers no interrupt".into());
    }
    let lcore = Lcore::spawn(1, LcoreConfig::default()).map_err(|e| e.to_string())?;
    let tid = lcore.tid();
    lcore
        .add(TaskId(1), Forward::new(rx, tx, 32))
        .map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_millis(300));
    let cpu0 = thread_cpu_ns(tid).ok_or("no schedstat for the lcore")?;
    let sleeps0 = lcore.stats().sleeps.get();
    std::thread::sleep(Duration::from_secs(2));
    let idle_cpu = (thread_cpu_ns(tid).unwrap_or(cpu0) - cpu0) as f64 / 2e9 * 100.0;
    let slept = lcore.stats().sleeps.get() - sleeps0;
    if slept == 0 || idle_cpu > 20.0 {
        drop(lcore.stop().map_err(|e| e.to_string())?);
        return Err(format!(
            "idle for 2 s: {idle_cpu:.1} % of a CPU, {slept} sleeps (a sleeping lcore takes little)"
        ));
    }
    Ok((lcore, idle_cpu, slept))
}

fn sleep_and_wake(p: &mut Pair) -> R<String> {
    let (a, b) = (p.mac(0), p.mac(1));
    let (lcore, idle_cpu, slept) = idle_forwarder(&mut p.port(1).1)?;
    let sent0 = p.port(1).0.stats().opackets;
    let work0 = lcore.stats().work.get();
    let t = Instant::now();
    let mut out = Pkts::new();
    for seq in 0..8 {
        let _ = out.push(p.mbuf(&frame(b, a, 100, seq), 2048)?);
    }
    p.send(0, &mut out)?;
    while p.port(1).0.stats().opackets < sent0 + 8 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let woke_ms = t.elapsed().as_secs_f64() * 1e3;
    let forwarded = p.port(1).0.stats().opackets - sent0;
    let worked = lcore.stats().work.get() - work0;
    drop(lcore.stop().map_err(|e| e.to_string())?);
    if forwarded < 8 {
        return Err(format!(
            "8 frames sent to the sleeping lcore: {forwarded} forwarded, {worked} worked on"
        ));
    }
    Ok(format!(
        "idle: {idle_cpu:.1} % of a CPU over 2 s, {slept} sleeps; 8 frames woke it and were forwarded in {woke_ms:.0} ms"
    ))
}

/// An lcore forwarding the VF's queue 0 back out sleeps on the VF's MSI-X
/// vector while idle, and the broadcast ARP request Linux sends on the PF
/// (a datagram to a neighbour it does not know, 10.9.0.77) reaches the VF
/// through the device's switch and wakes it. Takes the VF's queues: the
/// last case before the port stops.
pub fn idle_vf_lcore(p: &mut Peer) -> R<String> {
    let (lcore, idle_cpu, slept) = idle_forwarder(p.queues())?;
    let got0 = p.port().stats().ipackets;
    let sock = std::net::UdpSocket::bind("10.9.0.2:0").map_err(|e| e.to_string())?;
    let t = Instant::now();
    sock.send_to(b"wake", "10.9.0.77:9")
        .map_err(|e| e.to_string())?;
    while p.port().stats().opackets == 0 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let woke_ms = t.elapsed().as_secs_f64() * 1e3;
    let (got, sent) = (p.port().stats().ipackets - got0, p.port().stats().opackets);
    drop(lcore.stop().map_err(|e| e.to_string())?);
    if sent == 0 {
        return Err(format!(
            "Linux's ARP request: {got} frames received, none forwarded within 5 s"
        ));
    }
    Ok(format!(
        "idle: {idle_cpu:.1} % of a CPU over 2 s, {slept} sleeps; Linux's ARP request woke it and went back out in {woke_ms:.0} ms"
    ))
}
