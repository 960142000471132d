//! Where rr's round trip goes: rr's client and server tasks over a `shm`
//! pair, driven three ways, each reporting the median round trip.
//!
//! - `single`: one thread calls the client and then the server, over and
//!   over: the CPU work of one transaction, no core crossing (ns each).
//! - `bare`: the client on CPU 1 and the server on CPU 0, each task called
//!   in a tight loop: ports and application, no run loop.
//! - `runloop`: the same tasks on rpmd's run loop (`rpmd_sched::Runtime`),
//!   as `rr` runs them.
//!
//! Followed by the one-line and two-line cache-line bounds of
//! `rpmd_apps::bound`. Usage: `rr_parts [--seconds S] [--only MODE]`
//! (default 2 s per mode; MODE is single, bare, runloop or bound, to
//! profile one); needs hugepages or falls back to normal pages.
use rpmd_apps::rr::{Client, ClientShared, Server};
use rpmd_pmd::{clock, Mempool, MempoolConfig, PortConfig, Queues, Registry};
use rpmd_sched::{LcoreConfig, Runtime, Task};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

fn pin(c: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id: c })
}

type Ports = Vec<Box<dyn rpmd_pmd::Port>>;

/// A client (and what it reports through) and a server joined by a fresh
/// `shm` link, with the two ports, which must outlive the tasks' runs.
fn tasks(reg: &Registry, pool: &Mempool, k: u32) -> (Client, Arc<ClientShared>, Server, Ports) {
    let name = format!("shm:rr-parts-{}-{k}", std::process::id());
    let open = || -> (Box<dyn rpmd_pmd::Port>, Queues) {
        let mut p = reg.open(&name).expect("shm port");
        p.configure(&PortConfig {
            rx_pool: Some(pool.clone()),
            ..PortConfig::default()
        })
        .expect("configure");
        let q = p.start().expect("start");
        (p, q)
    };
    let (ps, mut qs) = open();
    let (pc, mut qc) = open();
    let server = Server::new(qs.rx.remove(0), qs.tx.remove(0), 1);
    let (client, shared) = Client::new(
        qc.rx.remove(0),
        qc.tx.remove(0),
        pool.clone(),
        1,
        1,
        Duration::ZERO,
        Duration::from_millis(100),
    );
    (client, shared, server, vec![ps, pc])
}

/// The median round trip (ns) and the transactions of a finished client.
fn p50(shared: &ClientShared) -> (u64, u64) {
    let r = shared
        .results
        .lock()
        .expect("results")
        .take()
        .expect("the client finished");
    (r[0].latency.value_at_percentile(50.0), r[0].transactions)
}

fn main() {
    let (mut secs, mut only) = (2.0f64, None::<String>);
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        match pair {
            [f, v] if f == "--seconds" => secs = v.parse().expect("--seconds takes a number"),
            [f, v] if f == "--only" && ["single", "bare", "runloop", "bound"].contains(&&**v) => {
                only = Some(v.clone())
            }
            _ => {
                eprintln!("usage: rr_parts [--seconds S] [--only single|bare|runloop|bound]");
                std::process::exit(2);
            }
        }
    }
    let run = |mode: &str| only.as_deref().is_none_or(|o| o == mode);
    clock::init();
    let reg = Registry::new();
    let mut c = MempoolConfig::new("rr-parts", 4096);
    c.cache_size = 256;
    let pool = Mempool::new(&c).expect("mempool");
    let ticks = clock::ticks(Duration::from_secs_f64(secs));

    if run("single") {
        // One thread, both tasks, pinned (a thread of its own: pinning this
        // one would narrow the CPUs the runtime below can see).
        let (mut client, _, mut server, _ports) = tasks(&reg, &pool, 0);
        let single = std::thread::spawn(move || {
            pin(1);
            let (t, mut n) = (clock::now(), 0u64);
            while clock::now() - t < ticks {
                for _ in 0..1024 {
                    client.run(64);
                    server.run(64);
                }
                n += 1024;
            }
            let dt = clock::now() - t;
            client.finish();
            (dt, n)
        });
        let (dt, n) = single.join().expect("single thread");
        println!(
            "single:  {:.1} ns per transaction (one thread, {n} rounds)",
            clock::to_ns(dt) as f64 / n as f64
        );
    }

    if run("bare") {
        // Two pinned threads, tight loops.
        let (mut client, shared, mut server, _ports) = tasks(&reg, &pool, 1);
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let srv = std::thread::spawn(move || {
            pin(0);
            while !s2.load(Relaxed) {
                server.run(64);
            }
        });
        let cli = std::thread::spawn(move || {
            pin(1);
            let t = clock::now();
            while clock::now() - t < ticks {
                for _ in 0..64 {
                    client.run(64);
                }
            }
            client.finish();
        });
        cli.join().expect("client thread");
        let (p, n) = p50(&shared);
        stop.store(true, Relaxed);
        srv.join().expect("server thread");
        println!("bare:    p50 {p} ns ({n} transactions)");
    }

    if run("runloop") {
        // The run loop.
        let (client, shared, server, _ports) = tasks(&reg, &pool, 2);
        let mut rt = Runtime::start("0-1", LcoreConfig::default()).expect("lcores on CPUs 0 and 1");
        rt.add(0, server).expect("lcore 0");
        rt.add(1, client).expect("lcore 1");
        std::thread::sleep(Duration::from_secs_f64(secs));
        rt.shutdown().expect("no task panicked");
        let (p, n) = p50(&shared);
        println!("runloop: p50 {p} ns ({n} transactions)");
    }

    if run("bound") {
        for two in [false, true] {
            if let Some(b) = rpmd_apps::bound::measure(1, 0, Duration::from_millis(500), two) {
                println!(
                    "bound:   {} p50 {:.0} ns",
                    if two { "two lines" } else { "one line " },
                    b.p50_ns
                );
            }
        }
    }
}
