//! What the model tests share.
use rpmd_igb::model::IgbModel;
use rpmd_pmd::{Mbuf, Mempool, Pkts, Port, Queues};
use std::time::{Duration, Instant};

/// Stops the port and checks every mbuf is home and no DMA strayed.
pub fn finish<P: Port>(model: &IgbModel, pool: &Mempool, mut port: P, q: Queues) {
    port.stop().unwrap();
    drop(q);
    drop(port);
    assert_eq!(pool.available(), pool.size(), "every mbuf home");
    assert_eq!(model.violations(), Vec::<String>::new());
}

/// Up to `n` frames from queue 0, waiting at most 2 s.
#[allow(dead_code)] // not every test file receives
pub fn receive(q: &mut Queues, n: usize) -> Vec<Mbuf> {
    let (mut got, mut inb) = (Vec::new(), Pkts::new());
    let t = Instant::now();
    while got.len() < n && t.elapsed() < Duration::from_secs(2) {
        q.rx_burst(0, &mut inb, 32);
        while let Some(m) = inb.pop() {
            got.push(m);
        }
    }
    got
}

/// A frame's bytes, its segments joined.
#[allow(dead_code)] // not every test file receives
pub fn bytes(m: &Mbuf) -> Vec<u8> {
    m.segments().flat_map(|s| s.iter().copied()).collect()
}
