//! The igb VF against a PF that answers its mailbox with anything: a VF
//! on the model opens, starts, asks for filters, VLANs, an MTU and
//! all-multicast, restarts and passes frames, while the fuzzer queues
//! replies that replace the PF's own (`IgbModel::script_pf`): any words,
//! any message type, ACK, NACK or neither, CTS or not, with or without
//! PFACK and a PF reset done event. Every call returns (an error or
//! not) without a panic or a hang, and once the port is gone every mbuf
//! is back in its pool.
#![no_main]
use libfuzzer_sys::fuzz_target;
#[path = "once_pool.rs"]
mod once_pool;
use rpmd_igb::model::{IgbModel, ModelOptions, PfBehaviour, ScriptedReply, VF_MAC};
use rpmd_igb::open_vf_port;
use rpmd_pmd::port::{MacAddr, Offloads};
use rpmd_pmd::{DmaDomain, Mempool, Pkts, Port, PortConfig, Queues};

const POOL: u32 = 512;

fn pool() -> &'static Mempool {
    once_pool::pool("fz-igbvf", POOL)
}

/// A reply raising `events` (V2PMAILBOX's bits: PFACK and RSTD count),
/// whose word count (0-4) and words come from the front of `input`;
/// `None` when the input runs out.
fn reply(events: u8, input: &mut &[u8]) -> Option<ScriptedReply> {
    let (&count, rest) = input.split_first()?;
    let n = (count % 5) as usize;
    let bytes = rest.get(..4 * n)?;
    *input = &rest[4 * n..];
    let words = bytes
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    Some(ScriptedReply {
        words,
        events: events as u32,
    })
}

/// Frames to the VF's address out and back (the model loops them).
fn round(q: &mut Queues, pool: &Mempool, n: u8) {
    let mut out = Pkts::new();
    for _ in 0..=(n % 8) {
        let Ok(mut m) = pool.get() else { break };
        if let Some(d) = m.append(64) {
            d[..6].copy_from_slice(&VF_MAC);
            d[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
        }
        let _ = out.push(m);
    }
    q.tx_burst(0, &mut out);
    let mut got = Pkts::new();
    q.rx_burst(0, &mut got, 32);
}

fuzz_target!(|data: &[u8]| {
    let opts = ModelOptions {
        pf: Some(PfBehaviour::default()),
        loopback: true,
        ..ModelOptions::default()
    };
    let model = IgbModel::new("0000:00:10.0".parse().unwrap(), opts);
    let mut input = data;
    // The replies the open and the first start meet.
    let first = input.first().map_or(0, |b| b % 4);
    input = input.get(1..).unwrap_or_default();
    for _ in 0..first {
        let Some((&events, rest)) = input.split_first() else {
            break;
        };
        input = rest;
        match reply(events, &mut input) {
            Some(r) => model.script_pf([r]),
            None => break,
        }
    }
    let Ok(func) = model.open(&DmaDomain::new()) else {
        return;
    };
    let Ok(mut port) = open_vf_port("fz-igbvf", func, 0) else {
        return;
    };
    let pool = pool();
    let conf = PortConfig {
        rx_desc: 64,
        tx_desc: 64,
        offloads: Offloads::RX_VLAN_FILTER | Offloads::RX_VLAN_STRIP,
        ..PortConfig::with_pool(pool)
    };
    if port.configure(&conf).is_err() {
        return;
    }
    let mut q = port.start().ok();
    // Ops: 0 a scripted reply, 1 filters, 2 all-multicast, 3 a VLAN, 4
    // the MTU, 5 a restart, 6 frames, 7 promiscuous.
    while let [op, arg, rest @ ..] = input {
        input = rest;
        let _ = match op % 8 {
            0 => {
                match reply(*arg, &mut input) {
                    Some(r) => model.script_pf([r]),
                    None => break,
                }
                Ok(())
            }
            1 => {
                let groups: Vec<MacAddr> = (0..arg % 40)
                    .map(|k| MacAddr([1, 0, 0x5e, 0, 1, k]))
                    .collect();
                let extra = [MacAddr([2, 0, 0, 0, 0, *arg])];
                port.set_mac_filter(&extra[..(*arg as usize & 1)], &groups)
            }
            2 => port.set_allmulticast(arg & 1 == 1),
            3 => port.set_vlan_filter(*arg as u16 * 17 % 4096, arg & 1 == 1),
            4 => port.set_mtu(60 + *arg as u16 * 40),
            5 => {
                drop(q.take());
                let _ = port.stop();
                port.start().map(|started| q = Some(started))
            }
            6 => {
                if let Some(q) = q.as_mut() {
                    round(q, pool, *arg);
                }
                Ok(())
            }
            _ => port.set_promiscuous(arg & 1 == 1),
        };
    }
    drop(q);
    let _ = port.stop();
    drop(port);
    assert_eq!(pool.available(), pool.size(), "every mbuf home");
});
