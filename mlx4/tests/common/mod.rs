//! What the ConnectX-3 port tests share: a pool, a port configuration,
//! UDP frames with correct checksums, and a card whose two ports are
//! cabled together.
#![allow(dead_code)]
use rpmd_mlx4::model::{Mlx4Model, ModelOptions, PORT_MAC};
use rpmd_pmd::port::Port;
use rpmd_pmd::{Mbuf, Mempool, MempoolConfig, Pkts, PortConfig, Queues};

pub fn pool(name: &str) -> Mempool {
    Mempool::new(&MempoolConfig::new(name, 2048)).unwrap()
}

pub fn conf(pool: &Mempool) -> PortConfig {
    PortConfig {
        rx_desc: 256,
        tx_desc: 256,
        ..PortConfig::with_pool(pool)
    }
}

/// A UDP/IPv4 frame to `dst` with correct checksums, `len` bytes.
pub fn udp_frame(dst: [u8; 6], len: usize, seq: u8) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x99]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (len - 14) as u16;
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
    let c = !rpmd_pmd::net::fold(rpmd_pmd::net::ones_sum(&f[14..34], 0));
    f[24..26].copy_from_slice(&c.to_be_bytes());
    let udp_len = ip_len - 20;
    f[34..36].copy_from_slice(&1234u16.to_be_bytes());
    f[36..38].copy_from_slice(&5678u16.to_be_bytes());
    f[38..40].copy_from_slice(&udp_len.to_be_bytes());
    for (i, b) in f[42..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(7) ^ seq;
    }
    let pseudo = rpmd_pmd::net::ones_sum(&f[26..34], 17 + udp_len as u32);
    let sum = rpmd_pmd::net::ones_sum(&f[34..], pseudo);
    let c = rpmd_pmd::net::complete_checksum(sum, true);
    f[40..42].copy_from_slice(&c.to_be_bytes());
    f
}

pub fn mbuf_of(pool: &Mempool, frame: &[u8]) -> Mbuf {
    let mut m = pool.get().unwrap();
    m.append(frame.len()).unwrap().copy_from_slice(frame);
    m
}

/// Sends `frames` on `q` and receives them on `r`, returning what came.
pub fn send_recv(
    q: &mut Queues,
    r: &mut Queues,
    pool: &Mempool,
    frames: &[Vec<u8>],
) -> Vec<(Vec<u8>, u64)> {
    let mut pkts = Pkts::new();
    for f in frames {
        pkts.push(mbuf_of(pool, f)).unwrap();
    }
    assert_eq!(q.tx_burst(0, &mut pkts), frames.len());
    let mut got = Pkts::new();
    let n = r.rx_burst(0, &mut got, 32);
    (0..n)
        .map(|_| {
            let m = got.pop().unwrap();
            (m.data().to_vec(), m.ol_flags())
        })
        .collect()
}

pub fn mac2() -> [u8; 6] {
    let mut m = PORT_MAC;
    m[5] += 1;
    m
}

/// A model whose two ports are cabled together, and a port on each.
pub fn cabled(name: &str) -> (std::sync::Arc<Mlx4Model>, Box<dyn Port>, Box<dyn Port>) {
    let opts = ModelOptions {
        wire: true,
        ..ModelOptions::default()
    };
    let model = Mlx4Model::new("0000:00:0c.0".parse().unwrap(), opts);
    let func = model.open(&rpmd_pmd::DmaDomain::new()).unwrap();
    let hca = rpmd_mlx4::Hca::open(func, &rpmd_mlx4::Options::default()).unwrap();
    let card = std::sync::Arc::new(std::sync::Mutex::new(hca));
    let a = rpmd_mlx4::ethdev::open_port(&format!("{name}-1"), card.clone(), 1, 0).unwrap();
    let b = rpmd_mlx4::ethdev::open_port(&format!("{name}-2"), card, 2, 1).unwrap();
    (model, Box::new(a), Box::new(b))
}
