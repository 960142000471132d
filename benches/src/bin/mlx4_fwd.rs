//! `mlx4_fwd`: l2fwd's io forwarding between the two ports of a
//! ConnectX-3 device model whose ports are cabled together
//! (`compare.sh mlx4`).
//!
//! Frames circulate: what port 1 receives is sent on port 2, whose cable
//! brings it back to port 1, and the same the other way, on one pinned
//! thread. The model does its work inside the send doorbell (the TX
//! engine, then the cable's RX engine); it times that part
//! ([`Mlx4Model::engine_ns`]), so the driver's own cost per frame is the
//! loop's time less the model's. Cycles are that time at the CPU's
//! nominal clock (`/proc/cpuinfo`), to hold against DPDK's published
//! per-packet costs of its PMDs (rx + tx: 58 cycles vectorised, 89
//! scalar).
//!
//! With `--engine-cpu E` the model's engines run on a thread of their own
//! pinned to CPU E (doorbells done `--engine-delay-ns` later), as a NIC
//! beside the CPU: CQEs and frames come from another core. The driver's
//! cost is then the time of the rounds that moved frames, per frame (the
//! loop also waits on the engine, which is not the driver's cost).
//!
//! usage: `mlx4_fwd [--seconds S] [--packets N] [--inflight F] [--size B] [--cpu C] [--engine-cpu E] [--engine-delay-ns D]`
//! (`--packets`: stop after N forwarded, for callgrind, where time means
//! nothing). Prints one line:
//! `mlx4_fwd pkts=<n> mpps=<x> ns_per_pkt=<loop> model_ns_per_pkt=<m> driver_ns_per_pkt=<d> mhz=<f> cycles_per_pkt=<c>`.
use rpmd_mlx4::ethdev::open_port;
use rpmd_mlx4::model::{EngineTiming, Mlx4Model, ModelOptions, RxOutcome};
use rpmd_mlx4::{Hca, Options};
use rpmd_pmd::port::Port;
use rpmd_pmd::{DmaDomain, Mempool, MempoolConfig, Pkts, PortConfig, Queues};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Args {
    seconds: f64,
    packets: Option<u64>,
    inflight: usize,
    size: usize,
    cpu: usize,
    engine_cpu: Option<usize>,
    engine_delay_ns: u64,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        seconds: 2.0,
        packets: None,
        inflight: 512,
        size: 64,
        cpu: 0,
        engine_cpu: None,
        engine_delay_ns: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().ok_or_else(|| format!("{k} needs a value"))?;
        let bad = |_: std::num::ParseFloatError| format!("{k}: not a number: {v}");
        let badi = |_: std::num::ParseIntError| format!("{k}: not a number: {v}");
        match k.as_str() {
            "--seconds" => a.seconds = v.parse().map_err(bad)?,
            "--packets" => a.packets = Some(v.parse().map_err(badi)?),
            "--inflight" => a.inflight = v.parse().map_err(badi)?,
            "--size" => a.size = v.parse().map_err(badi)?,
            "--cpu" => a.cpu = v.parse().map_err(badi)?,
            "--engine-cpu" => a.engine_cpu = Some(v.parse().map_err(badi)?),
            "--engine-delay-ns" => a.engine_delay_ns = v.parse().map_err(badi)?,
            _ => return Err(format!("unknown option {k}")),
        }
    }
    if !(60..=1514).contains(&a.size) || a.inflight == 0 || a.inflight > 900 {
        return Err("--size is 60..=1514, --inflight 1..=900".into());
    }
    Ok(a)
}

fn main() {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("mlx4_fwd: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&args) {
        eprintln!("mlx4_fwd: {e}");
        std::process::exit(1);
    }
}

/// The CPU's nominal clock in MHz, from /proc/cpuinfo (0 if unknown).
fn cpu_mhz() -> f64 {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines()
        .find(|l| l.starts_with("cpu MHz"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

fn run(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(core) =
        core_affinity::get_core_ids().and_then(|c| c.into_iter().find(|c| c.id == a.cpu))
    {
        core_affinity::set_for_current(core);
    }
    let engine = a.engine_cpu.map(|cpu| EngineTiming {
        delay: Duration::from_nanos(a.engine_delay_ns),
        jitter: Duration::ZERO,
        cpu: Some(cpu),
        poison: false,
    });
    let opts = ModelOptions {
        wire: true,
        engine,
        ..ModelOptions::default()
    };
    let model = Mlx4Model::new("0000:7e:00.0".parse()?, opts);
    let hca = Hca::open(model.open(&DmaDomain::new())?, &Options::default())?;
    let card = Arc::new(Mutex::new(hca));
    let pool = Mempool::new(&MempoolConfig::new("mlx4-fwd", 8192))?;
    let conf = PortConfig {
        rx_desc: 1024,
        tx_desc: 1024,
        ..PortConfig::with_pool(&pool)
    };
    let mut ports: Vec<Box<dyn Port>> = Vec::new();
    let mut queues: Vec<Queues> = Vec::new();
    for p in 1..=2u8 {
        let mut port = Box::new(open_port(
            &format!("mlx4-fwd-{p}"),
            card.clone(),
            p,
            p as u16,
        )?);
        port.configure(&conf)?;
        queues.push(port.start()?);
        ports.push(port);
    }
    // Each port's frames are addressed to it: sent out of the other port,
    // the cable brings them back.
    for (i, port) in ports.iter().enumerate() {
        let mut f = vec![0u8; a.size];
        f[..6].copy_from_slice(&port.mac_addr().0);
        f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x88, 0xb5]);
        for _ in 0..a.inflight {
            if model.inject(i as u8 + 1, &f) != RxOutcome::Delivered(1) {
                return Err("the model did not take a seed frame".into());
            }
        }
    }
    let (mut forwarded, mut dropped) = (0u64, 0u64);
    let mut pkts = Pkts::new();
    let limit = a.packets.unwrap_or(u64::MAX);
    let deadline = Duration::from_secs_f64(a.seconds);
    let model0 = model.engine_ns();
    let t0 = Instant::now();
    let mut rounds = 0u64;
    // With the engine apart: the time of the bursts that moved frames
    // (the receive that found them and the send), not the empty polls.
    let (mut busy_ns, mut busy_bursts) = (0u64, 0u64);
    while forwarded < limit {
        for (from, to) in [(0, 1), (1, 0)] {
            let mark = engine.map(|_| Instant::now());
            queues[from].rx_burst(0, &mut pkts, 32);
            let n = pkts.len();
            let sent = if n > 0 {
                queues[to].tx_burst(0, &mut pkts)
            } else {
                0
            };
            if let (Some(mark), true) = (mark, n > 0) {
                busy_ns += mark.elapsed().as_nanos() as u64;
                busy_bursts += 1;
            }
            forwarded += sent as u64;
            dropped += (n - sent) as u64;
            pkts.clear();
        }
        rounds += 1;
        if a.packets.is_none() && rounds % 64 == 0 && t0.elapsed() >= deadline {
            break;
        }
    }
    let total = t0.elapsed().as_nanos() as f64;
    let model_ns = (model.engine_ns() - model0) as f64;
    let n = forwarded.max(1) as f64;
    let mhz = cpu_mhz();
    let driver = if engine.is_some() {
        busy_ns.saturating_sub(model.doorbell_wait_ns()) as f64 / n
    } else {
        (total - model_ns) / n
    };
    println!(
        "mlx4_fwd pkts={forwarded} dropped={dropped} per_burst={:.1} mpps={:.3} ns_per_pkt={:.1} model_ns_per_pkt={:.1} driver_ns_per_pkt={:.1} mhz={mhz:.0} cycles_per_pkt={:.1}",
        n / busy_bursts.max(1) as f64,
        n / total * 1e3,
        total / n,
        model_ns / n,
        driver,
        driver * mhz / 1e3,
    );
    drop(queues);
    drop(ports);
    let v = model.violations();
    if !v.is_empty() {
        return Err(format!("the model saw violations: {v:?}").into());
    }
    Ok(())
}
