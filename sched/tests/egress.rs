//! The shared egress on the real clock: what a device behind a shaped
//! port receives over ten seconds, for small and full-size frames at once.
use rpmd_pmd::port::{Pkts, TxQueue};
use rpmd_pmd::{Mempool, MempoolConfig};
use rpmd_sched::{Egress, EgressConfig};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A device queue that takes everything and counts bytes.
struct Wire(Arc<AtomicU64>);

impl TxQueue for Wire {
    fn tx_burst(&mut self, pkts: &mut Pkts) -> usize {
        let bytes: usize = pkts.iter().map(|m| m.pkt_len()).sum();
        self.0.fetch_add(bytes as u64, Relaxed);
        let n = pkts.len();
        pkts.clear();
        n
    }
}

/// Keeps the egress busy with `len`-byte frames for `secs` and returns
/// the rate the wire saw after the first second (past the initial
/// bucket), in bytes per second.
fn delivered(spec: &str, len: usize, secs: u64) -> f64 {
    let mut pc = MempoolConfig::new(&format!("egress-wire-{len}"), 1024);
    pc.cache_size = 0;
    let pool = Mempool::new(&pc).unwrap();
    let wire = Arc::new(AtomicU64::new(0));
    let eg = Egress::new(
        &EgressConfig::parse(spec).unwrap(),
        Box::new(Wire(wire.clone())),
    );
    let mut tx = eg.handle();
    let mut pkts = Pkts::new();
    let start = Instant::now();
    let mut mark = None;
    loop {
        let t = start.elapsed();
        if mark.is_none() && t >= Duration::from_secs(1) {
            mark = Some((Instant::now(), wire.load(Relaxed)));
        }
        if t >= Duration::from_secs(secs) {
            break;
        }
        if tx.in_flight() < 64 {
            for _ in 0..16 {
                let mut m = pool.get().unwrap();
                m.append(len).unwrap().fill(0);
                pkts.push(m).unwrap();
            }
            tx.tx_burst(&mut pkts);
        }
        std::thread::yield_now();
    }
    let (t0, b0) = mark.unwrap();
    let bytes = wire.load(Relaxed) - b0;
    let st = &eg.stats()[0];
    assert_eq!(st.dropped.get(), 0, "kept below the queue limit");
    eg.close();
    bytes as f64 / t0.elapsed().as_secs_f64()
}

#[test]
fn a_shaped_port_delivers_its_rate_within_one_percent_for_small_and_large_frames() {
    // Two ports at once, one per frame size, ten seconds each.
    let runs: Vec<_> = [(64usize, "20mbit,burst=256k"), (1500, "200mbit,burst=1m")]
        .into_iter()
        .map(|(len, spec)| std::thread::spawn(move || (len, spec, delivered(spec, len, 10))))
        .collect();
    for r in runs {
        let (len, spec, got) = r.join().unwrap();
        let want =
            rpmd_sched::egress::spec::parse_rate(spec.split(',').next().unwrap()).unwrap() as f64;
        let err = (got - want).abs() / want;
        assert!(
            err < 0.01,
            "{len}-byte frames at {spec}: {got:.0} B/s against {want:.0} ({:.3} % off)",
            err * 100.0
        );
    }
}
