//! `vhost_fwd`: the switch of `compare.sh seeds-vhost` (benches/seeds_vhost.sh).
//!
//! Two vhost-user ports cross-connected on one lcore by two
//! [`Forward`] tasks, A's rx to B's tx and B's rx to A's tx, so that each
//! guest TX ring is a task of its own and its busy-poll policy
//! (`busyloop_us`, `rx_poll`) applies to it alone: A is the guest whose
//! TX ring is busy-polled (rr's client attaches there), B the side that
//! feeds it (rr's server). The lcore's own spin is zero: every spin is a
//! queue's, and after it the lcore sleeps on the guests' kicks.
//!
//! usage: `vhost_fwd A_DEV B_DEV CPU SECONDS [YIELD]` (device strings,
//! e.g. `vhost-user:/tmp/a.sock,busyloop_us=50`; YIELD `preempted` makes
//! the spin give the CPU up when another thread waits for it, the
//! kernel's `single_task_running()` test in vhost_net's busy loop, as
//! the run loop's signal; default `off`). Waits for both links, runs
//! SECONDS, then prints one line:
//! `fwd frames=<forwarded> cpu_ms=<this process's user+system time>`
//! followed by A's and B's busy-poll, kick and call counters.
use rpmd_pmd::{Mempool, MempoolConfig, Port, PortConfig, Registry};
use rpmd_sched::{Forward, LcoreConfig, Runtime, SignalKind, SpinPolicy};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !(5..=6).contains(&args.len()) {
        eprintln!("usage: vhost_fwd A_DEV B_DEV CPU SECONDS [off|preempted]");
        std::process::exit(2);
    }
    let (cpu, seconds) = match (args[3].parse::<usize>(), args[4].parse::<f64>()) {
        (Ok(c), Ok(s)) => (c, s),
        _ => {
            eprintln!("vhost_fwd: CPU and SECONDS must be numbers");
            std::process::exit(2);
        }
    };
    let signal = match args.get(5).map(String::as_str) {
        None | Some("off") => SignalKind::Off,
        Some("preempted") => SignalKind::Preempted,
        Some(other) => {
            eprintln!("vhost_fwd: YIELD is off or preempted, not {other}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&args[1], &args[2], cpu, seconds, signal) {
        eprintln!("vhost_fwd: {e}");
        std::process::exit(1);
    }
}

fn run(
    a: &str,
    b: &str,
    cpu: usize,
    seconds: f64,
    signal: SignalKind,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let pool = Mempool::new(&MempoolConfig::new("vhost-fwd", 8192))?;
    let mut ports: Vec<Box<dyn Port>> = vec![reg.open(a)?, reg.open(b)?];
    let mut queues = Vec::new();
    for p in ports.iter_mut() {
        p.configure(&PortConfig::with_pool(&pool))?;
        queues.push(p.start()?);
    }
    let t = Instant::now();
    while !ports.iter().all(|p| p.link().up) {
        if t.elapsed() > Duration::from_secs(30) {
            return Err("no frontend attached to both ports within 30 s".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let cfg = LcoreConfig {
        spin: SpinPolicy::Fixed(Duration::ZERO),
        sleep: Duration::from_millis(1),
        signal,
        ..Default::default()
    };
    let mut rt = Runtime::start(&cpu.to_string(), cfg)?;
    let (a_rx, a_tx) = (queues[0].take_rx(0)?, queues[0].take_tx(0)?);
    let (b_rx, b_tx) = (queues[1].take_rx(0)?, queues[1].take_tx(0)?);
    rt.add(0, Forward::new(a_rx, b_tx, 32))?;
    rt.add(0, Forward::new(b_rx, a_tx, 32))?;
    std::thread::sleep(Duration::from_secs_f64(seconds));
    rt.shutdown()?;
    let frames: u64 = ports.iter().map(|p| p.stats().opackets).sum();
    let mut line = format!("fwd frames={frames} cpu_ms={}", cpu_ms());
    for (tag, p) in ["a", "b"].iter().zip(&ports) {
        for x in p.xstats() {
            let keep = [
                "rx_q0_busy_poll_hits",
                "rx_q0_busy_poll_timeouts",
                "rx_q0_kicks",
            ];
            if keep.contains(&x.name.as_str()) || x.name == "tx_q0_calls" {
                let name = x
                    .name
                    .trim_start_matches("rx_q0_")
                    .trim_start_matches("tx_q0_");
                line += &format!(" {tag}_{name}={}", x.value);
            }
        }
    }
    println!("{line}");
    Ok(())
}

/// This process's CPU time (user and system) so far, in ms.
fn cpu_ms() -> u64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` is a valid, writable rusage for the call.
    let ok = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) } == 0;
    if !ok {
        return 0;
    }
    // SAFETY: getrusage filled it (and it started zeroed).
    let ru = unsafe { ru.assume_init() };
    let ms = |t: libc::timeval| t.tv_sec as u64 * 1000 + t.tv_usec as u64 / 1000;
    ms(ru.ru_utime) + ms(ru.ru_stime)
}
