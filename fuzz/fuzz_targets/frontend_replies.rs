//! vhost-user replies as the virtio-user port receives them from a
//! hostile backend. A thread of the target is the backend: it reads each
//! request the port sends and answers the ones that want an answer with a
//! good reply that the input then spoils, or not (a byte changed, the
//! wrong request code, a size that lies, no reply at all, the connection
//! closed), and picks the features it offers. The port opens, starts and
//! runs a few bursts against it (every wait bounded by `timeout_ms`).
//!
//! Whatever the replies: no panic, no hang, and every mbuf back in the
//! pool once the port is gone.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rpmd_pmd::port::Pkts;
use rpmd_pmd::{Mempool, MempoolConfig, PortConfig, Registry};
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const POOL: u32 = 1024;

fn setup() -> &'static (Registry, Mempool) {
    static S: OnceLock<(Registry, Mempool)> = OnceLock::new();
    S.get_or_init(|| {
        let mut reg = Registry::new();
        rpmd_virtio::register(&mut reg);
        let mut pc = MempoolConfig::new("fz-fe", POOL);
        pc.cache_size = 0;
        (reg, Mempool::new(&pc).expect("pool"))
    })
}

/// Request codes that always get a reply (vhost-user spec), else only
/// with NEED_REPLY (an ack).
const GET_FEATURES: u32 = 1;
const GET_VRING_BASE: u32 = 11;
const GET_PROTOCOL_FEATURES: u32 = 15;
const GET_QUEUE_NUM: u32 = 17;
const GET_CONFIG: u32 = 24;
const GET_MAX_MEM_SLOTS: u32 = 36;

/// The good reply body to `code` with request body `body`, if it has one.
fn good_reply(code: u32, flags: u32, body: &[u8], features: u64) -> Option<Vec<u8>> {
    let u64b = |v: u64| v.to_le_bytes().to_vec();
    Some(match code {
        GET_FEATURES => u64b(features),
        // MQ, REPLY_ACK, CONFIG.
        GET_PROTOCOL_FEATURES => u64b(1 | 1 << 3 | 1 << 9),
        GET_QUEUE_NUM => u64b(2),
        GET_MAX_MEM_SLOTS => u64b(8),
        GET_VRING_BASE => {
            let mut b = body.get(..8)?.to_vec();
            b[4..8].copy_from_slice(&0u32.to_le_bytes());
            b
        }
        GET_CONFIG => {
            // offset, size, flags, then the virtio-net config: mac,
            // status (link up), max pairs, mtu.
            let mut b = body.get(..12)?.to_vec();
            let mut cfg = [0u8; 12];
            cfg[..6].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
            cfg[6..8].copy_from_slice(&1u16.to_le_bytes());
            cfg[8..10].copy_from_slice(&1u16.to_le_bytes());
            cfg[10..12].copy_from_slice(&1500u16.to_le_bytes());
            let (off, size) = (
                u32::from_le_bytes(b[0..4].try_into().ok()?) as usize,
                u32::from_le_bytes(b[4..8].try_into().ok()?) as usize,
            );
            b.extend((off..off + size).map(|i| cfg.get(i).copied().unwrap_or(0)));
            b
        }
        _ if flags & 8 != 0 => u64b(0),
        _ => return None,
    })
}

/// Serves one connection: each request read whole (its fds dropped), each
/// reply spoiled as the next 3 input bytes say. Returns when the port
/// hangs up or the input says to close.
fn backend(mut s: UnixStream, input: Vec<u8>, features: u64) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut ops = input.chunks(3);
    loop {
        let mut h = [0u8; 12];
        if s.read_exact(&mut h).is_err() {
            return;
        }
        let word = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap());
        let (code, flags, size) = (word(0), word(4), word(8));
        let mut body = vec![0u8; (size as usize).min(4096)];
        if s.read_exact(&mut body).is_err() {
            return;
        }
        let Some(reply) = good_reply(code, flags, &body, features) else {
            continue;
        };
        let op = ops.next().unwrap_or(&[0, 0, 0]);
        let (kind, a, b) = (
            op[0] % 10,
            *op.get(1).unwrap_or(&0),
            *op.get(2).unwrap_or(&0),
        );
        let mut msg = Vec::with_capacity(12 + reply.len());
        let mut code_out = code;
        let mut size_out = reply.len() as u32;
        match kind {
            4 => code_out = code.wrapping_add(1 + a as u32 % 40),
            5 => size_out = a as u32 * 4,
            6 => continue, // no reply: the port's wait runs out
            7 => return,   // hang up
            _ => {}
        }
        msg.extend_from_slice(&code_out.to_le_bytes());
        msg.extend_from_slice(&(1u32 | 4).to_le_bytes()); // version 1, REPLY
        msg.extend_from_slice(&size_out.to_le_bytes());
        msg.extend_from_slice(&reply);
        if kind == 3 {
            let i = a as usize % msg.len();
            msg[i] ^= b | 1;
        }
        if kind == 8 {
            msg.truncate(a as usize % msg.len());
        }
        if s.write_all(&msg).is_err() {
            return;
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((f, input)) = data.split_first_chunk::<8>() else {
        return;
    };
    let (reg, pool) = setup();
    // The features offered: the input's, within what the port knows.
    let known = 1u64 << 32 | 1 << 30 | 1 << 29 | 1 << 28 | 1 << 15 | 1 << 22 | 1 << 34 | 1 << 35;
    let features = u64::from_le_bytes(*f) & known;
    let path = format!("/tmp/rpmd-fz-fe-{}.sock", std::process::id());
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).expect("a socket in /tmp");
    let input = input.to_vec();
    let th = std::thread::spawn(move || {
        let _ = listener.set_nonblocking(true);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(2) {
            if let Ok((s, _)) = listener.accept() {
                let _ = s.set_nonblocking(false);
                backend(s, input, features);
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let dev = format!("virtio-user:{path},timeout_ms=50");
    if let Ok(mut p) = reg.open(&dev) {
        if p.configure(&PortConfig::with_pool(pool)).is_ok() {
            if let Ok(mut q) = p.start() {
                let mut pkts = Pkts::new();
                for _ in 0..4 {
                    q.rx_burst(0, &mut pkts, 32);
                    pkts.clear();
                    if let Ok(mut m) = pool.get() {
                        if let Some(b) = m.append(64) {
                            b.fill(1);
                        }
                        let _ = pkts.push(m);
                    }
                    q.tx_burst(0, &mut pkts);
                    pkts.clear();
                }
                drop(q);
            }
            let _ = p.stop();
        }
    }
    let _ = th.join();
    let _ = std::fs::remove_file(&path);
    assert_eq!(
        pool.available(),
        POOL as usize,
        "every mbuf back in the pool"
    );
});
