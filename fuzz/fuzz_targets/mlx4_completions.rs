//! The ConnectX-3 port's data path under a device that writes its CQs
//! and its event queue however it likes: a port on the device model runs
//! rounds of frames in and out while the fuzzer overwrites CQEs and EQEs
//! (any owner bit, index, length, opcode, syndrome). The driver never
//! panics or hangs, hands a frame out only from a buffer it posted, and
//! once the port is gone every mbuf is back in its pool.
#![no_main]
use libfuzzer_sys::fuzz_target;
#[path = "once_pool.rs"]
mod once_pool;
use rpmd_mlx4::ethdev::open_port;
use rpmd_mlx4::model::{Mlx4Model, ModelOptions, PORT_MAC};
use rpmd_mlx4::{Hca, Options};
use rpmd_pmd::{DmaDomain, Mempool, Pkts, Port, PortConfig};
use std::sync::{Arc, Mutex};

const POOL: u32 = 512;

fn pool() -> &'static Mempool {
    once_pool::pool("fz-mlx4", POOL)
}

fuzz_target!(|data: &[u8]| {
    let model = Mlx4Model::new("0000:00:0f.0".parse().unwrap(), ModelOptions::default());
    let func = model.open(&DmaDomain::new()).expect("model function");
    let Ok(hca) = Hca::open(func, &Options::default()) else {
        return;
    };
    let card = Arc::new(Mutex::new(hca));
    let mut port = open_port("fz-mlx4", card, 1, 0).expect("port 1");
    let pool = pool();
    let conf = PortConfig {
        rx_desc: 64,
        tx_desc: 64,
        ..PortConfig::with_pool(pool)
    };
    port.configure(&conf).expect("configure");
    let Ok(mut q) = port.start() else { return };
    let (cqs, eqs) = model.queues();
    let mut frame = vec![0u8; 60];
    frame[..6].copy_from_slice(&PORT_MAC);
    let mut input = data;
    // Ops: 0 inject frames, 1 receive, 2 send, 3 a CQE, 4 an EQE, 5 link.
    while let [op, arg, rest @ ..] = input {
        input = rest;
        match op % 6 {
            0 => {
                for _ in 0..=(arg % 8) {
                    model.inject(1, &frame);
                }
            }
            1 => {
                let mut got = Pkts::new();
                q.rx_burst(0, &mut got, (*arg as usize % 32) + 1);
                for m in got.iter() {
                    assert!(m.data_len() <= m.buf_len(), "a frame within its buffer");
                    assert!(m.pkt_len() >= 14, "no runt");
                }
            }
            2 => {
                let mut pkts = Pkts::new();
                for _ in 0..=(arg % 16) {
                    let Ok(mut m) = pool.get() else { break };
                    m.append(60).expect("room").copy_from_slice(&frame);
                    let _ = pkts.push(m);
                }
                q.tx_burst(0, &mut pkts);
            }
            3 | 4 => {
                let [slot, bytes @ ..] = input else { break };
                let Some(e) = bytes.get(..32) else { break };
                let e: [u8; 32] = e.try_into().expect("32 bytes");
                input = &bytes[32..];
                if op % 6 == 3 && !cqs.is_empty() {
                    model.write_cq_entry(cqs[*arg as usize % cqs.len()], *slot as u32, &e);
                } else if let Some(&eqn) = eqs.first() {
                    model.write_eq_entry(eqn, *slot as u32, &e);
                }
            }
            _ => {
                let _ = port.link();
            }
        }
    }
    drop(q);
    port.stop().expect("stop");
    drop(port);
    assert_eq!(pool.available(), POOL as usize, "every mbuf home");
});
