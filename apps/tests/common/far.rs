//! The far ends of an app's shm ports, opened in the test's process: the
//! test sends frames into the app and reads what it sends out.
use rpmd_pmd::{Mempool, Pkts, PortConfig, Queues, Registry};
use std::time::{Duration, Instant};

/// The far ends of the app's ports `devs`, started on `pool`.
pub fn far_ends(devs: &[String], pool: &Mempool) -> Vec<(Box<dyn rpmd_pmd::Port>, Queues)> {
    let reg = Registry::new();
    devs.iter()
        .map(|d| {
            let mut p = reg.open(d).unwrap();
            p.configure(&PortConfig::with_pool(pool)).unwrap();
            let q = p.start().unwrap();
            (p, q)
        })
        .collect()
}

/// Waits (5 s at most) for the app to join every far end.
pub fn wait_joined(ends: &[(Box<dyn rpmd_pmd::Port>, Queues)]) {
    let t0 = Instant::now();
    while !ends.iter().all(|(p, _)| p.link().up) {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the app did not join"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn send(q: &mut Queues, pool: &Mempool, frames: &[Vec<u8>]) {
    let mut out = Pkts::new();
    for f in frames {
        let mut m = pool.get().unwrap();
        m.append(f.len()).unwrap().copy_from_slice(f);
        out.push(m).unwrap();
        if out.len() == 32 {
            while !out.is_empty() {
                q.tx_burst(0, &mut out);
            }
        }
    }
    while !out.is_empty() {
        q.tx_burst(0, &mut out);
    }
}

/// What the far ends receive until `want` frames in all arrived or
/// `within` passed: each end's frames' bytes, in arrival order.
pub fn receive(
    ends: &mut [(Box<dyn rpmd_pmd::Port>, Queues)],
    want: usize,
    within: Duration,
) -> Vec<Vec<Vec<u8>>> {
    let mut got = vec![Vec::new(); ends.len()];
    let t0 = Instant::now();
    let mut inp = Pkts::new();
    while got.iter().map(Vec::len).sum::<usize>() < want && t0.elapsed() < within {
        for (k, (_, q)) in ends.iter_mut().enumerate() {
            q.rx_burst(0, &mut inp, 32);
            got[k].extend(inp.iter().map(|m| m.data().to_vec()));
            inp.clear();
        }
    }
    got
}
