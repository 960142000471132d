//! The scheduler in virtual time (exact, whatever the machine's load),
//! and the shared egress under threads.
use super::*;
use rpmd_pmd::{Mbuf, Mempool, MempoolConfig};

fn pool(name: &str, n: u32) -> Mempool {
    let mut c = MempoolConfig::new(name, n);
    c.cache_size = 0;
    Mempool::new(&c).unwrap()
}

/// A frame of `len` bytes: VLAN-tagged with `pcp` when given, IPv4
/// carrying `dscp`, a flow id and sequence number in its payload.
fn frame(p: &Mempool, len: usize, pcp: Option<u8>, dscp: u8, flow: u8, seq: u32) -> Mbuf {
    let mut f = vec![0u8; len];
    let mut o = 12;
    if let Some(pcp) = pcp {
        f[12..14].copy_from_slice(&[0x81, 0x00]);
        f[14] = pcp << 5;
        o = 16;
    }
    f[o..o + 2].copy_from_slice(&[0x08, 0x00]);
    let ip = o + 2;
    f[ip] = 0x45;
    f[ip + 1] = dscp << 2;
    f[ip + 2..ip + 4].copy_from_slice(&((len - ip) as u16).to_be_bytes());
    f[ip + 20] = flow;
    f[ip + 21..ip + 25].copy_from_slice(&seq.to_be_bytes());
    let mut m = p.get().unwrap();
    m.append(len).unwrap().copy_from_slice(&f);
    m
}

fn flow_seq(m: &Mbuf) -> (u8, u32) {
    let d = m.data();
    let ip = if d[12] == 0x81 { 18 } else { 14 };
    (
        d[ip + 20],
        u32::from_be_bytes(d[ip + 21..ip + 25].try_into().unwrap()),
    )
}

/// Runs `s` for `secs` virtual seconds in 10 µs steps, keeping every
/// class's queue topped up with frames from `make(class)`; returns the
/// bytes and frames sent per class.
fn saturate(
    s: &mut Shaper,
    p: &Mempool,
    secs: u64,
    make: impl Fn(usize) -> Mbuf,
    classes: &[usize],
) -> (Vec<u64>, Vec<u64>) {
    let stats = s.new_stats();
    let n = s.config().classes.len();
    let (mut bytes, mut frames) = (vec![0u64; n], vec![0u64; n]);
    let mut out = Pkts::new();
    let mut pkts = Pkts::new();
    let step = 10_000;
    for t in (0..secs * 1_000_000_000).step_by(step) {
        for &c in classes {
            while stats[c].depth.load(Relaxed) < 16 {
                pkts.push(make(c)).unwrap();
                s.enqueue(&mut pkts, &stats);
            }
        }
        loop {
            let k = s.dequeue(t, &mut out, 32, &stats, |c, len| {
                bytes[c] += len as u64;
                frames[c] += 1;
            });
            out.clear();
            if k == 0 {
                break;
            }
        }
    }
    let _ = p;
    (bytes, frames)
}

#[test]
fn a_shaped_port_delivers_its_rate_within_one_percent_over_ten_seconds() {
    let p = pool("egress-rate", 4096);
    for len in [64usize, 1500] {
        let cfg = EgressConfig::parse("100mbit").unwrap();
        let mut s = Shaper::new(&cfg);
        let (bytes, _) = saturate(&mut s, &p, 10, |_| frame(&p, len, None, 0, 0, 0), &[0]);
        let want = 12_500_000.0 * 10.0;
        let err = (bytes[0] as f64 - want).abs() / want;
        assert!(
            err < 0.01,
            "{len}-byte frames: {} bytes, {:.4} % off",
            bytes[0],
            err * 100.0
        );
    }
    assert_eq!(p.available(), 4096, "every mbuf back in the pool");
}

#[test]
fn strict_priority_is_never_delayed_by_a_lower_class() {
    let p = pool("egress-prio", 1024);
    let cfg = EgressConfig::parse("10mbit,by=pcp,classes=hi:6-7/mid:3-5/lo:default").unwrap();
    let mut s = Shaper::new(&cfg);
    let stats = s.new_stats();
    let mut pkts = Pkts::new();
    // Low first, then high: the high ones must still leave first.
    for (i, pcp) in [0u8, 0, 4, 0, 7, 4, 7, 7].into_iter().enumerate() {
        pkts.push(frame(&p, 200, Some(pcp), 0, pcp, i as u32))
            .unwrap();
    }
    s.enqueue(&mut pkts, &stats);
    let mut order = Vec::new();
    let mut out = Pkts::new();
    for t in 0..10_000u64 {
        // One frame at a time, as tokens allow.
        s.dequeue(t * 10_000, &mut out, 1, &stats, |c, _| order.push(c));
        out.clear();
    }
    assert_eq!(order, [0, 0, 0, 1, 1, 2, 2, 2]);
    // Under saturation, a class above takes what it wants first: with
    // no rates, the top class takes the whole port.
    let (bytes, _) = saturate(
        &mut s,
        &p,
        1,
        |c| frame(&p, 500, Some([7, 4, 0][c]), 0, 0, 0),
        &[0, 1, 2],
    );
    assert!(
        bytes[1] + bytes[2] <= 2 * (16 << 10),
        "lower classes got {bytes:?}"
    );
}

#[test]
fn a_class_over_its_rate_borrows_only_what_the_port_leaves() {
    let p = pool("egress-borrow", 4096);
    // Port 100 Mbit/s; gold guaranteed 30, silver 20 and capped at 40,
    // bronze 10: 40 Mbit/s left over to borrow.
    let cfg = EgressConfig::parse(
        "100mbit,by=dscp,classes=gold:46:30mbit/silver:10-20:20mbit:40mbit/bronze:default:10mbit",
    )
    .unwrap();
    let dscp = [46u8, 12, 0];
    let mk = |c: usize| frame(&p, 1000, None, dscp[c], 0, 0);
    // All three saturated: each gets its guarantee; the spare 40 goes by
    // priority: gold (above the others) borrows all of it.
    let mut s = Shaper::new(&cfg);
    let (b, _) = saturate(&mut s, &p, 10, mk, &[0, 1, 2]);
    drop(s);
    let mbit = |x: u64| x as f64 * 8.0 / 10.0 / 1e6;
    let got: Vec<f64> = b.iter().map(|&x| mbit(x)).collect();
    let near = |a: f64, w: f64| (a - w).abs() / w < 0.01;
    assert!(
        near(got[0], 70.0) && near(got[1], 20.0) && near(got[2], 10.0),
        "{got:?}"
    );
    // Gold idle: silver borrows up to its ceiling (40), bronze the rest.
    let mut s = Shaper::new(&cfg);
    let (b, _) = saturate(&mut s, &p, 10, mk, &[1, 2]);
    drop(s);
    let got: Vec<f64> = b.iter().map(|&x| mbit(x)).collect();
    assert!(near(got[1], 40.0) && near(got[2], 60.0), "{got:?}");
    // Alone, bronze borrows the whole port.
    let mut s = Shaper::new(&cfg);
    let (b, _) = saturate(&mut s, &p, 10, mk, &[2]);
    drop(s);
    assert!(near(mbit(b[2]), 100.0), "{}", mbit(b[2]));
    assert_eq!(p.available(), 4096);
}

#[test]
fn every_frame_is_sent_or_counted_dropped() {
    let p = pool("egress-count", 256);
    let cfg = EgressConfig::parse("1mbit,limit=8,by=pcp,classes=a:1/b:default").unwrap();
    let mut s = Shaper::new(&cfg);
    let stats = s.new_stats();
    let mut pkts = Pkts::new();
    for i in 0..40u32 {
        pkts.push(frame(&p, 100, Some((i % 2) as u8), 0, 0, i))
            .unwrap();
    }
    // One frame longer than the bucket can ever hold.
    pkts.push(frame(&p, 2000, Some(1), 0, 0, 99)).unwrap();
    s.enqueue(&mut pkts, &stats);
    assert!(pkts.is_empty());
    let (q, d): (u64, u64) = (
        stats.iter().map(|c| c.enqueued.get()).sum(),
        stats.iter().map(|c| c.dropped.get()).sum(),
    );
    assert_eq!((q, d), (16, 25), "8 per class queued, the rest dropped");
    assert_eq!(p.available(), 256 - 16);
    let mut out = Pkts::new();
    let sent = s.dequeue(0, &mut out, 5, &stats, |_, _| {});
    assert_eq!(sent, 5);
    out.clear();
    s.clear(&stats);
    let d: u64 = stats.iter().map(|c| c.dropped.get()).sum();
    assert_eq!(d, 25 + 11);
    assert_eq!(p.available(), 256);
}

/// A device queue that takes at most `room` frames a burst and checks
/// each flow's order.
struct Sink {
    room: usize,
    next: Arc<std::sync::Mutex<Vec<u32>>>,
    taken: Arc<AtomicUsize>,
}

impl TxQueue for Sink {
    fn tx_burst(&mut self, pkts: &mut Pkts) -> usize {
        let n = pkts.len().min(self.room);
        let mut next = self.next.lock().unwrap();
        for m in pkts.iter().take(n) {
            let (flow, seq) = flow_seq(m);
            assert!(
                seq >= next[flow as usize],
                "flow {flow}: {seq} after {}",
                next[flow as usize]
            );
            next[flow as usize] = seq + 1;
        }
        pkts.drop_front(n);
        self.taken.fetch_add(n, Relaxed);
        n
    }
}

#[test]
fn lcores_enqueuing_at_once_lose_nothing_and_keep_each_flows_order() {
    let p = pool("egress-mt", 8192);
    let taken = Arc::new(AtomicUsize::new(0));
    let sink = Sink {
        room: 7,
        next: Arc::new(std::sync::Mutex::new(vec![0; 4])),
        taken: taken.clone(),
    };
    let eg = Egress::new(&EgressConfig::fifo(4096), Box::new(sink));
    let per = 20_000u32;
    let threads: Vec<_> = (0..4u8)
        .map(|flow| {
            let (mut tx, p) = (eg.handle(), p.clone());
            std::thread::spawn(move || {
                let mut pkts = Pkts::new();
                for seq in 0..per {
                    pkts.push(frame(&p, 64, None, 0, flow, seq)).unwrap();
                    if pkts.len() == 16 || seq + 1 == per {
                        let n = pkts.len();
                        assert_eq!(tx.tx_burst(&mut pkts), n, "the egress takes every frame");
                        assert!(pkts.is_empty());
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut tx = eg.handle();
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    while tx.in_flight() > 0 {
        assert!(Instant::now() < deadline, "the backlog never drained");
    }
    let st = &eg.stats()[0];
    let (sent, dropped) = (st.sent.get(), st.dropped.get());
    assert_eq!(
        sent + dropped,
        4 * per as u64,
        "sent {sent} + dropped {dropped}"
    );
    assert_eq!(sent as usize, taken.load(Relaxed));
    drop(tx);
    drop(eg);
    assert_eq!(p.available(), 8192, "no mbuf lost");
}
