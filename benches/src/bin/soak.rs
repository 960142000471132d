//! Soak with faults (`benches/soak.sh`): sequence-numbered frames go from
//! this process through `l2fwd` (the real app, another process) and back,
//! until N have arrived, while the devices misbehave.
//!
//! Topology: this process holds two vhost-user backend ports, A and B
//! (rpmd's device side); l2fwd's two virtio-user ports attach to them and
//! forward A to B and B to A. This process sends on A and receives on B
//! (and the other way), 8 flows each way, at most `WINDOW` frames of a
//! flow unanswered. Faults:
//! - every `--restart-secs` backend A is dropped (its socket gone) and
//!   opened again 100 ms later, as a vswitch restart; l2fwd's port
//!   reconnects and resumes its rings;
//! - backend B writes every `--fault-every`th used entry of l2fwd's RX
//!   ring with an id naming no descriptor (`fault_used_every`); l2fwd's
//!   port must notice, count it, reconnect and start its rings over;
//! - l2fwd's port on B, the other way, sends every `--bad-desc-every`th
//!   frame with a descriptor address outside the memory it gave B
//!   (`fault_desc_every`): B must drop it, count it and carry on.
//!
//! With `--via testpmd`, l2fwd's second port goes through DPDK's testpmd
//! instead: l2fwd's port attaches to testpmd's `net_vhost` and testpmd's
//! `net_virtio_user` to backend B, testpmd forwarding between the two
//! (io). Every `--restart-secs` testpmd is killed with SIGKILL, mid-burst,
//! and started again: l2fwd's virtio-user port and backend B each lose
//! their peer without a word and must take the new one. testpmd's
//! counters are read over telemetry before each kill (what it received
//! and did not send); what was in flight inside the killed process is
//! gone uncounted, so the losses beyond every named counter
//! (`lost_at_kills`) must stay within what the flows' windows let be in
//! flight at the kills.
//!
//! Each arriving frame is checked: its length and every payload byte
//! against what its (direction, flow, sequence) says, and its sequence
//! against its flow's last (higher: gaps are losses; equal or lower:
//! duplicated or reordered). At the end every mbuf must be back in this
//! process's pool, no frame corrupt, duplicated or reordered, and the
//! resident memory of both processes flat after the warm-up. Prints the
//! drops by counter and `RESULT soak frames=<n> lost_mbufs=<m>
//! corrupt=<c> ...`; exits 1 if an invariant failed.
use rpmd_pmd::port::Pkts;
use rpmd_pmd::{Mempool, MempoolConfig, Port, PortConfig, Queues, Registry};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const FLOWS: usize = 8;
/// Frames of a flow in flight at most (8 flows of 24 stay within a
/// 256-entry ring).
const WINDOW: u64 = 24;
/// Frame lengths, by sequence number.
const SIZES: [usize; 5] = [60, 64, 128, 200, 512];
/// A flow with frames in flight and nothing back for this long has lost
/// them (a restart or a fault dropped what the rings held).
const STALL: Duration = Duration::from_millis(300);

struct Opts {
    frames: u64,
    restart_secs: f64,
    fault_every: u64,
    bad_desc_every: u64,
    l2fwd: String,
    max_secs: f64,
    /// Route l2fwd's second port through a testpmd killed every
    /// `restart_secs` (instead of restarting backend A).
    via_testpmd: bool,
}

fn opts() -> Opts {
    let mut o = Opts {
        frames: 100_000_000,
        restart_secs: 3.0,
        fault_every: 1_000_000,
        bad_desc_every: 1_000_000,
        l2fwd: "target/release/l2fwd".into(),
        max_secs: 900.0,
        via_testpmd: false,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let v = it
            .next()
            .unwrap_or_else(|| usage(&format!("{a} needs a value")));
        let num = |v: &str| {
            v.parse::<f64>()
                .unwrap_or_else(|_| usage(&format!("{a} {v}")))
        };
        match a.as_str() {
            "--frames" => o.frames = num(v) as u64,
            "--restart-secs" => o.restart_secs = num(v),
            "--fault-every" => o.fault_every = num(v) as u64,
            "--bad-desc-every" => o.bad_desc_every = num(v) as u64,
            "--l2fwd" => o.l2fwd = v.clone(),
            "--max-secs" => o.max_secs = num(v),
            "--via" if v == "testpmd" => o.via_testpmd = true,
            _ => usage(&format!("unknown option {a}")),
        }
    }
    o
}

fn usage(why: &str) -> ! {
    eprintln!("soak: {why}\nusage: soak [--frames N] [--restart-secs S] [--fault-every N (0: off)] [--bad-desc-every N (0: off)] [--l2fwd PATH] [--max-secs S] [--via testpmd]");
    std::process::exit(2)
}

/// The frame of `(dir, flow, seq)`: Ethernet (type 0x88b5, local
/// experimental), then dir, flow, seq and length, then a pattern.
fn fill(buf: &mut [u8], dir: u8, flow: u8, seq: u64) {
    buf[..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
    buf[12..14].copy_from_slice(&[0x88, 0xb5]);
    buf[14] = dir;
    buf[15] = flow;
    buf[16..24].copy_from_slice(&seq.to_le_bytes());
    let len = buf.len() as u16;
    buf[24..26].copy_from_slice(&len.to_le_bytes());
    for (i, b) in buf[26..].iter_mut().enumerate() {
        *b = (seq as u8).wrapping_add(i as u8);
    }
}

/// What an arriving frame claims, if it is whole and uncorrupted.
fn check(d: &[u8]) -> Option<(u8, u8, u64)> {
    if d.len() < 26 || d[12..14] != [0x88, 0xb5] || d[14] > 1 || d[15] as usize >= FLOWS {
        return None;
    }
    let seq = u64::from_le_bytes(d[16..24].try_into().ok()?);
    let len = u16::from_le_bytes([d[24], d[25]]) as usize;
    let pattern = d[26..]
        .iter()
        .enumerate()
        .all(|(i, b)| *b == (seq as u8).wrapping_add(i as u8));
    (len == d.len() && len == SIZES[seq as usize % SIZES.len()] && pattern)
        .then_some((d[14], d[15], seq))
}

/// One direction's flows: what was sent, what came back.
#[derive(Default)]
struct Flows {
    /// The next sequence number to send.
    next: [u64; FLOWS],
    /// The highest sequence received, plus one.
    done: [u64; FLOWS],
    /// Where the window starts: `done`, or past it once the frames in
    /// flight were given up on.
    floor: [u64; FLOWS],
    last_progress: Option<Instant>,
}

#[derive(Default)]
struct Tally {
    sent: u64,
    received: u64,
    /// Sequence numbers skipped in a flow (frames that never came).
    lost: u64,
    /// Peer processes killed so far.
    kills: u64,
    /// Windows given up on after a stall.
    stalls: u64,
    corrupt: u64,
    reordered: u64,
}

struct Backend {
    port: Box<dyn Port>,
    q: Queues,
}

fn open(reg: &Registry, dev: &str, pool: &Mempool) -> Backend {
    let mut port = reg.open(dev).unwrap_or_else(|e| panic!("{dev}: {e}"));
    port.configure(&PortConfig::with_pool(pool)).unwrap();
    let q = port.start().unwrap();
    Backend { port, q }
}

/// Resident anonymous bytes of process `pid` ("self" for this one):
/// what a leak grows. (The pages of a peer's memory a backend maps count
/// as shared, and each reconnection maps them afresh.)
fn rss(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("RssAnon:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .unwrap_or(0)
        * 1024
}

/// The reply to a DPDK telemetry command (`dpdk-telemetry.py`) of the
/// process with file prefix `prefix`, from its body's first key on.
fn telemetry(prefix: &str, cmd: &str) -> Option<String> {
    use std::io::Write;
    let mut c = Command::new("dpdk-telemetry.py")
        .args(["-f", prefix])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let _ = writeln!(c.stdin.take()?, "{cmd}");
    let out = String::from_utf8_lossy(&c.wait_with_output().ok()?.stdout).into_owned();
    let key = format!("\"{}\":", cmd.split(',').next()?);
    Some(out.split(&key).nth(1)?.to_string())
}

/// The number after `"key":` in a telemetry reply.
fn field(body: &str, key: &str) -> Option<u64> {
    let v = body.split(&format!("\"{key}\":")).nth(1)?;
    v.split([',', '}']).next()?.trim().parse().ok()
}

/// l2fwd's non-zero counters of port `port` that say what went wrong or
/// was dropped, read over DPDK telemetry.
fn l2fwd_xstats(prefix: &str, port: u16) -> Option<Vec<(String, u64)>> {
    let body = telemetry(prefix, &format!("/ethdev/xstats,{port}"))?;
    let kept = body
        .split([',', '{', '}'])
        .filter_map(|kv| {
            let (k, v) = kv.split_once(':')?;
            let (k, v) = (k.trim().trim_matches('"'), v.trim().parse::<u64>().ok()?);
            let wanted = ["error", "drop", "reconnect", "stopped", "nombuf", "full"];
            (v != 0 && wanted.iter().any(|w| k.contains(w))).then(|| (k.to_string(), v))
        })
        .collect();
    Some(kept)
}

/// Sends up to a burst of `dir`'s frames on `b`, within the window.
fn send(b: &mut Backend, pool: &Mempool, f: &mut Flows, dir: u8, t: &mut Tally, out: &mut Pkts) {
    for flow in 0..FLOWS {
        while out.len() < 32 && f.next[flow] - f.floor[flow] < WINDOW {
            let seq = f.next[flow];
            let Ok(mut m) = pool.get() else { return };
            let len = SIZES[seq as usize % SIZES.len()];
            let Some(buf) = m.append(len) else { return };
            fill(buf, dir, flow as u8, seq);
            let _ = out.push(m);
            f.next[flow] += 1;
        }
    }
    let n = b.q.tx_burst(0, out);
    t.sent += n as u64;
    // Not taken (the ring full, or the link down): given back, so the
    // flows resend those sequence numbers.
    while let Some(m) = out.pop() {
        let d = m.data();
        let (flow, seq) = (
            d[15] as usize,
            u64::from_le_bytes(d[16..24].try_into().unwrap()),
        );
        f.next[flow] = f.next[flow].min(seq);
    }
}

/// Receives a burst on `b` and checks it against the flows of each
/// direction.
fn receive(b: &mut Backend, flows: &mut [Flows; 2], t: &mut Tally, inb: &mut Pkts) {
    b.q.rx_burst(0, inb, 32);
    while let Some(m) = inb.pop() {
        t.received += 1;
        let Some((dir, flow, seq)) = check(m.data()) else {
            t.corrupt += 1;
            continue;
        };
        let f = &mut flows[dir as usize];
        let flow = flow as usize;
        if seq < f.done[flow] {
            t.reordered += 1;
            continue;
        }
        t.lost += seq - f.done[flow];
        f.done[flow] = seq + 1;
        f.floor[flow] = f.floor[flow].max(seq + 1);
        f.last_progress = Some(Instant::now());
    }
}

/// Moves a direction's windows past the frames in flight when nothing
/// came back for `STALL` (a restart or a fault dropped them; one that
/// arrives later is still taken in order).
fn give_up_if_stalled(f: &mut Flows, t: &mut Tally) {
    let stalled = f.last_progress.is_some_and(|p| p.elapsed() > STALL);
    if stalled {
        t.stalls += u64::from(f.floor != f.next);
        f.floor = f.next;
        f.last_progress = Some(Instant::now());
    }
}

fn xstats(b: &Backend) -> Vec<(String, u64)> {
    b.port
        .xstats()
        .into_iter()
        .filter(|x| x.value != 0 && !x.name.ends_with("_bytes") && !x.name.ends_with("features"))
        .map(|x| (x.name, x.value))
        .collect()
}

/// DPDK's testpmd between l2fwd's second port (on `sock`, testpmd's
/// `net_vhost` as the server) and backend B (`to_b`, testpmd's
/// `net_virtio_user`), forwarding between the two (`--via testpmd`).
struct Testpmd {
    child: Option<std::process::Child>,
    id: u32,
    starts: u32,
    sock: String,
    to_b: String,
    /// Frames the killed ones received and did not send (their ethdev
    /// counters, read just before each kill), and kills whose counters
    /// could not be read.
    dropped: u64,
    unread: u64,
}

impl Testpmd {
    fn prefix(&self) -> String {
        format!("soaktp{}x{}", self.id, self.starts)
    }

    /// Starts one (its socket made afresh), and waits until it listens.
    fn start(&mut self) {
        let _ = std::fs::remove_file(&self.sock);
        self.starts += 1;
        let child = Command::new("taskset")
            .args([
                "-c",
                "0",
                "dpdk-testpmd",
                "--no-pci",
                "--no-huge",
                "-m",
                "512",
            ])
            .args(["--lcores", "0@0,1@0", "--log-level=lib.eal:error"])
            .arg(format!("--file-prefix={}", self.prefix()))
            .arg("--vdev")
            .arg(format!("net_vhost0,iface={},queues=1", self.sock))
            .arg("--vdev")
            .arg(format!("net_virtio_user1,path={},queues=1", self.to_b))
            .args(["--", "--forward-mode=io", "-a", "--total-num-mbufs=8192"])
            // Its stdin stays open: at EOF it would quit.
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("dpdk-testpmd: {e} (Debian: apt-get install dpdk)"));
        let t0 = Instant::now();
        let mut child = child;
        while !std::path::Path::new(&self.sock).exists() {
            if let Ok(Some(st)) = child.try_wait() {
                panic!(
                    "dpdk-testpmd exited ({st}) before listening on {}",
                    self.sock
                );
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "testpmd never made {}",
                self.sock
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        self.child = Some(child);
    }

    /// Frames received on one port and not sent on the other, so far.
    fn dropped_now(&self) -> Option<u64> {
        let stats = |p: u16| {
            let body = telemetry(&self.prefix(), &format!("/ethdev/stats,{p}"))?;
            Some((field(&body, "ipackets")?, field(&body, "opackets")?))
        };
        let ((i0, o0), (i1, o1)) = (stats(0)?, stats(1)?);
        Some(i0.saturating_sub(o1) + i1.saturating_sub(o0))
    }

    /// SIGKILL, as a crash: its peers are not told. Its counters are
    /// read first.
    fn kill(&mut self) {
        if self.child.is_some() {
            match self.dropped_now() {
                Some(d) => self.dropped += d,
                None => self.unread += 1,
            }
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{}", self.prefix()));
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_file(&self.sock);
    }
}

/// l2fwd on CPU 1 between virtio-user ports on `first` and `second`
/// (device strings' targets and options), its JSON lines in a log file.
fn spawn_l2fwd(o: &Opts, id: u32, first: &str, second: &str) -> std::process::Child {
    // Sharing CPU 1 with this process (`--via testpmd`): its spin leaves
    // early whenever this process is runnable.
    let share = if o.via_testpmd { "runqueue" } else { "off" };
    Command::new(&o.l2fwd)
        .args(["-l", "1", "--json", "--duration", "100000"])
        .args(["--yield", share])
        .arg(format!("--file-prefix=soak{id}"))
        .args([
            "--dev",
            &format!("virtio-user:{first}"),
            "--dev",
            &format!("virtio-user:{second}"),
        ])
        .stdout(Stdio::from(
            std::fs::File::create(format!("/tmp/rpmd-soak-{id}-l2fwd.log")).expect("l2fwd's log"),
        ))
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (build it: cargo build --release -p rpmd-apps)",
                o.l2fwd
            )
        })
}

/// l2fwd's own count of what it could not send (its summary line), once
/// it exited; its log removed.
fn l2fwd_dropped(id: u32) -> Option<u64> {
    let log = format!("/tmp/rpmd-soak-{id}-l2fwd.log");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    text.lines()
        .rfind(|l| l.contains("\"type\":\"summary\""))
        .and_then(|l| {
            l.split("\"dropped\":")
                .nth(1)?
                .split(',')
                .next()?
                .parse()
                .ok()
        })
}

/// What a run gathered, for its report.
struct Gathered {
    t: Tally,
    secs: f64,
    restarts: u64,
    /// Our backends' non-zero counters (A, B).
    ours: [Vec<(String, u64)>; 2],
    /// l2fwd's drop and error counters per port (None: not readable).
    l2x: [Option<Vec<(String, u64)>>; 2],
    l2_dropped: Option<u64>,
    tp_dropped: u64,
    tp_unread: u64,
    lost_mbufs: usize,
    /// Anonymous memory growth after the warm-up, KiB: ours, l2fwd's.
    growth: (i64, i64),
}

/// The sum of the counters in `x` whose names end in `_errors`, bar the
/// `_device_errors` that count the same events again.
fn errors(x: &[(String, u64)]) -> u64 {
    x.iter()
        .filter(|(k, _)| k.ends_with("_errors") && !k.ends_with("device_errors"))
        .map(|x| x.1)
        .sum()
}

fn print_counters(what: &str, x: &[(String, u64)]) {
    let line: Vec<String> = x.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("  {what}: {}", line.join(" "));
}

fn main() {
    let o = opts();
    let mut reg = Registry::new();
    rpmd_virtio::register(&mut reg);
    let pool = Mempool::new(&MempoolConfig::new("soak", 8192)).expect("soak pool");
    let id = std::process::id();
    let (sa, sb) = (
        format!("/tmp/rpmd-soak-{id}-a.sock"),
        format!("/tmp/rpmd-soak-{id}-b.sock"),
    );
    let dev_a = format!("vhost-user:{sa},busyloop_us=0");
    // Wrong used entries only into l2fwd's rings, not testpmd's.
    let fault_every = if o.via_testpmd { 0 } else { o.fault_every };
    let dev_b = format!("vhost-user:{sb},busyloop_us=0,fault_used_every={fault_every}");
    let mut a = Some(open(&reg, &dev_a, &pool));
    let mut b = open(&reg, &dev_b, &pool);
    let mut peer = o.via_testpmd.then(|| Testpmd {
        child: None,
        id,
        starts: 0,
        sock: format!("/tmp/rpmd-soak-{id}-c.sock"),
        to_b: sb.clone(),
        dropped: 0,
        unread: 0,
    });
    let second = match peer.as_mut() {
        Some(tp) => {
            tp.start();
            tp.sock.clone()
        }
        None => format!("{sb},fault_desc_every={}", o.bad_desc_every),
    };
    let l2fwd = spawn_l2fwd(&o, id, &sa, &second);
    let l2pid = l2fwd.id().to_string();
    let mut l2fwd = rpmd_benches::Proc(l2fwd);
    // This thread on CPU 0 (after the spawn: l2fwd would inherit it), or
    // with testpmd, which never leaves its CPU, on l2fwd's: l2fwd sleeps
    // when idle and this thread yields when idle, so the two take turns
    // there without waiting out a time slice, as they would beside
    // testpmd.
    let cpu = if o.via_testpmd { 1 } else { 0 };
    let _ = core_affinity::set_for_current(core_affinity::CoreId { id: cpu });
    let t0 = Instant::now();
    while !(a.as_ref().is_some_and(|a| a.port.link().up) && b.port.link().up) {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "l2fwd never attached"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (mut flows, mut t) = ([Flows::default(), Flows::default()], Tally::default());
    let (mut out, mut inb) = (Pkts::new(), Pkts::new());
    let (mut restarts, mut down_since, mut next_restart) = (0u64, None::<Instant>, Instant::now());
    next_restart += Duration::from_secs_f64(o.restart_secs);
    let mut warm: Option<(u64, u64)> = None;
    let start = Instant::now();
    while t.received < o.frames && start.elapsed().as_secs_f64() < o.max_secs {
        if warm.is_none() && t.received >= o.frames / 5 {
            warm = Some((rss("self"), rss(&l2pid)));
        }
        if t.sent % 4096 == 0 {
            if let Ok(Some(st)) = l2fwd.0.try_wait() {
                eprintln!(
                    "soak: FAILED: l2fwd exited ({st}) after {} frames",
                    t.received
                );
                std::process::exit(1);
            }
        }
        if o.restart_secs > 0.0 && Instant::now() >= next_restart && down_since.is_none() {
            if let Some(tp) = peer.as_mut() {
                tp.kill();
                t.kills += 1;
            } else if let Some(mut gone) = a.take() {
                // The backend goes: its socket and its rings with it.
                receive(&mut gone, &mut flows, &mut t, &mut inb);
                gone.port.stop().unwrap();
            }
            restarts += 1;
            down_since = Some(Instant::now());
        }
        if down_since.is_some_and(|d| d.elapsed() > Duration::from_millis(100)) {
            match peer.as_mut() {
                Some(tp) => tp.start(),
                None => a = Some(open(&reg, &dev_a, &pool)),
            }
            down_since = None;
            next_restart = Instant::now() + Duration::from_secs_f64(o.restart_secs);
        }
        let moved = (t.sent, t.received);
        if let Some(a) = a.as_mut() {
            send(a, &pool, &mut flows[0], 0, &mut t, &mut out);
            receive(a, &mut flows, &mut t, &mut inb);
        }
        send(&mut b, &pool, &mut flows[1], 1, &mut t, &mut out);
        receive(&mut b, &mut flows, &mut t, &mut inb);
        if (t.sent, t.received) == moved {
            // Nothing to do: whoever shares this CPU goes first.
            std::thread::yield_now();
        }
        for f in &mut flows {
            if f.last_progress.is_none() && t.sent > 0 {
                f.last_progress = Some(Instant::now());
            }
            give_up_if_stalled(f, &mut t);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    // What is still on its way.
    let drain = Instant::now();
    while drain.elapsed() < Duration::from_millis(500) {
        if let Some(a) = a.as_mut() {
            receive(a, &mut flows, &mut t, &mut inb);
        }
        receive(&mut b, &mut flows, &mut t, &mut inb);
    }
    for f in &flows {
        t.lost += (0..FLOWS).map(|k| f.next[k] - f.done[k]).sum::<u64>();
    }
    let end = (rss("self"), rss(&l2pid));
    let ours = [a.as_ref().map(xstats).unwrap_or_default(), xstats(&b)];
    let l2x = [0, 1].map(|p| l2fwd_xstats(&format!("soak{id}"), p));
    drop(l2fwd);
    // The last testpmd's counters too (read as it is killed).
    let (tp_dropped, tp_unread) = peer.as_mut().map_or((0, 0), |tp| {
        tp.kill();
        (tp.dropped, tp.unread)
    });
    drop(peer);
    let l2_dropped = l2fwd_dropped(id);
    for bk in [a.take(), Some(b)].into_iter().flatten() {
        let mut bk = bk;
        bk.port.stop().unwrap();
        drop(bk);
    }
    let warm = warm.unwrap_or(end);
    let growth = |e: u64, w: u64| (e as i64 - w as i64) / 1024;
    let g = Gathered {
        t,
        secs,
        restarts,
        ours,
        l2x,
        l2_dropped,
        tp_dropped,
        tp_unread,
        lost_mbufs: pool.size() - pool.available(),
        growth: (growth(end.0, warm.0), growth(end.1, warm.1)),
    };
    if !report(&o, &g) {
        std::process::exit(1);
    }
}

/// Prints the run's figures and `RESULT soak ...`; whether every
/// invariant held.
fn report(o: &Opts, g: &Gathered) -> bool {
    let (t, ours) = (&g.t, &g.ours);
    let faults = ours[1]
        .iter()
        .find(|x| x.0 == "tx_q0_faults_injected")
        .map_or(0, |x| x.1);
    let what = if o.via_testpmd {
        "testpmd kills (SIGKILL)"
    } else {
        "backend restarts"
    };
    println!(
        "soak: {} frames back of {} sent in {:.1} s ({:.2} Mpps), {} {what}, {faults} wrong used entries",
        t.received,
        t.sent,
        g.secs,
        t.received as f64 / g.secs / 1e6,
        g.restarts
    );
    println!(
        "  lost {} (sequence numbers that never came; {} stalls); corrupt {}, duplicated or reordered {}",
        t.lost, t.stalls, t.corrupt, t.reordered
    );
    match g.l2_dropped {
        Some(d) => println!("  l2fwd: dropped {d} (its tx queue full or its link down)"),
        None => println!("  l2fwd: no summary (it did not exit cleanly)"),
    }
    // Every frame lost must be under a named counter: l2fwd's drops and
    // each port's rx and tx errors (frames its rings dropped when it
    // started them over after a wrong used entry; `_device_errors` counts
    // those entries, already in `_errors`), backend B's errors (the
    // malformed descriptors it dropped) and frames left in a frontend's
    // ring when it went, and what testpmd received and did not send. A
    // restarted ring's tx errors may include frames the device had sent
    // but not yet returned, so the counters may exceed the loss. A SIGKILL
    // also takes what is in flight in the killed process and its rings
    // with it, which nobody counts: at most every frame in flight then,
    // the flows' windows.
    let left_at_stop: u64 = ours[1]
        .iter()
        .filter(|x| x.0.ends_with("_left_at_stop"))
        .map(|x| x.1)
        .sum();
    let b_errors = errors(&ours[1]);
    let l2_errors: u64 = g.l2x.iter().flatten().map(|x| errors(x)).sum();
    let counted = g.l2_dropped.unwrap_or(0) + l2_errors + left_at_stop + b_errors + g.tp_dropped;
    let at_kills = t.lost.saturating_sub(counted);
    let kill_bound = t.kills * 2 * FLOWS as u64 * WINDOW;
    println!(
        "  lost {} frames, {counted} under l2fwd's drop and error counters, backend B's errors ({b_errors}: malformed descriptors) and left_at_stop ({left_at_stop}), testpmd's rx - tx ({}; {} kills unread); {at_kills} with the killed testpmds (at most {kill_bound}: what was in flight)",
        t.lost, g.tp_dropped, g.tp_unread
    );
    for (p, x) in g.l2x.iter().enumerate() {
        match x {
            Some(x) => print_counters(&format!("l2fwd port {p}"), x),
            None => println!("  l2fwd port {p}: no xstats (dpdk-telemetry.py missing?)"),
        }
    }
    print_counters("backend A", &ours[0]);
    print_counters("backend B", &ours[1]);
    let (g_ours, g_l2) = g.growth;
    println!("  anonymous resident memory after warm-up: soak {g_ours:+} KiB, l2fwd {g_l2:+} KiB");
    println!(
        "RESULT soak frames={} lost_mbufs={} corrupt={} reordered={} lost={} counted={counted} bad_descriptors={b_errors} lost_at_kills={at_kills} restarts={} faults={faults} rss_growth_kib={g_ours},{g_l2}",
        t.received, g.lost_mbufs, t.corrupt, t.reordered, t.lost, g.restarts
    );
    // Flat: within 8 MiB of the warm-up (a restart maps the peer's
    // memory again; a leak per frame would show as far more).
    let flat = g_ours < 8192 && g_l2 < 8192;
    let unreadable = g.l2x.iter().any(Option::is_none) || g.tp_unread > 0;
    let ok = g.lost_mbufs == 0
        && t.corrupt == 0
        && t.reordered == 0
        && flat
        && t.received >= o.frames
        && g.l2_dropped.is_some()
        && (at_kills <= kill_bound || unreadable);
    if !ok {
        eprintln!(
            "soak: FAILED (mbufs {}, corrupt {}, reordered {}, rss flat {flat}, frames {} of {}, l2fwd exited cleanly {}, lost {} with {counted} counted)",
            g.lost_mbufs,
            t.corrupt,
            t.reordered,
            t.received,
            o.frames,
            g.l2_dropped.is_some(),
            t.lost
        );
    }
    ok
}
