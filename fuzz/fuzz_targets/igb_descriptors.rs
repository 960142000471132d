//! The igb port's data path under a device that writes its descriptor
//! rings however it likes: a port on the 82576 model (its transmit side
//! looped back to its receive side) runs rounds of frames in and out
//! while the fuzzer writes any 16 bytes into any receive or transmit
//! descriptor (`IgbModel::write_descriptor`): done bits on descriptors
//! the device was never given, lengths beyond the buffer, frames that
//! never end, any error, VLAN and RSS fields, buffer addresses replaced.
//! The driver never panics or hangs, hands out a frame only within its
//! buffers and no shorter than an Ethernet header, and once the port is
//! gone every mbuf is back in its pool.
#![no_main]
use libfuzzer_sys::fuzz_target;
#[path = "once_pool.rs"]
mod once_pool;
use rpmd_igb::model::{model_mac, IgbModel, ModelOptions};
use rpmd_igb::open_port;
use rpmd_pmd::port::Offloads;
use rpmd_pmd::{DmaDomain, Mempool, Pkts, Port, PortConfig};

const POOL: u32 = 512;

fn pool() -> &'static Mempool {
    once_pool::pool("fz-igb", POOL)
}

/// A frame to the port's own address, `len` bytes (at least 60).
fn frame(len: usize) -> Vec<u8> {
    let mut f = model_mac().0.to_vec();
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 0x88, 0xb5]);
    f.resize(len.max(60), 0xa5);
    f
}

fuzz_target!(|data: &[u8]| {
    let opts = ModelOptions {
        loopback: true,
        ..ModelOptions::default()
    };
    let model = IgbModel::new("0000:00:07.0".parse().unwrap(), opts);
    let Ok(func) = model.open(&DmaDomain::new()) else {
        return;
    };
    let pool = pool();
    let Ok(mut port) = open_port("fz-igb", func, 0) else {
        return;
    };
    let conf = PortConfig {
        rx_desc: 64,
        tx_desc: 64,
        offloads: Offloads::RX_VLAN_STRIP | Offloads::RX_CHECKSUM | Offloads::RX_SCATTER,
        ..PortConfig::with_pool(pool)
    };
    if port.configure(&conf).is_err() {
        return;
    }
    let Ok(mut q) = port.start() else { return };
    let mut input = data;
    // Ops: 0 frames arrive, 1 receive, 2 send, 3 an rx descriptor, 4 a
    // tx descriptor, 5 reclaim.
    while let [op, arg, rest @ ..] = input {
        input = rest;
        match op % 6 {
            0 => {
                let len = 60 + (*arg as usize * 23) % 5000;
                for _ in 0..=(arg % 4) {
                    model.receive(&frame(len));
                }
            }
            1 => {
                let mut got = Pkts::new();
                q.rx_burst(0, &mut got, (*arg as usize % 32) + 1);
                for m in got.iter() {
                    assert!(m.pkt_len() >= 14, "no runt");
                    for seg in m.segments() {
                        assert!(seg.len() <= m.buf_len(), "a piece within its buffer");
                    }
                }
            }
            2 => {
                let mut out = Pkts::new();
                for k in 0..=(arg % 8) {
                    let Ok(mut m) = pool.get() else { break };
                    let f = frame(60 + (k as usize * 301) % 1400);
                    if let Some(d) = m.append(f.len()) {
                        d.copy_from_slice(&f);
                    }
                    let _ = out.push(m);
                }
                q.tx_burst(0, &mut out);
            }
            3 | 4 => {
                let Some((desc, more)) = input.split_first_chunk::<16>() else {
                    break;
                };
                input = more;
                model.write_descriptor(op % 6 == 3, 0, *arg as u32, desc);
            }
            _ => {
                q.tx_in_flight(0);
            }
        }
    }
    let _ = port.stop();
    drop(q);
    drop(port);
    assert_eq!(pool.available(), pool.size(), "every mbuf home");
});
