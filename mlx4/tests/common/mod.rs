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

/// Frames both ways across a cabled card whose engines run on a thread of
/// their own (on the other CPU where there is one), 2 to 22 us late, with
/// every frame and entry written as poison first: 64 rounds of a burst
/// of 32 out of each port, read back as they come, then an armed queue's
/// interrupt. `Err` says what went wrong: frames missing, out of order or
/// not byte for byte, mbufs not home, or what the model refused.
pub fn exchange_with_a_late_engine(name: &str) -> Result<(), String> {
    use rpmd_mlx4::model::EngineTiming;
    use rpmd_pmd::function::EventFd;
    use std::time::{Duration, Instant};
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let opts = ModelOptions {
        wire: true,
        engine: Some(EngineTiming {
            delay: Duration::from_micros(2),
            jitter: Duration::from_micros(20),
            cpu: (cpus > 1).then_some(1),
            poison: true,
        }),
        ..ModelOptions::default()
    };
    let model = Mlx4Model::new("0000:00:10.0".parse().unwrap(), opts);
    let func = model.open(&rpmd_pmd::DmaDomain::new()).unwrap();
    let hca = rpmd_mlx4::Hca::open(func, &rpmd_mlx4::Options::default()).unwrap();
    let card = std::sync::Arc::new(std::sync::Mutex::new(hca));
    let mut a: Box<dyn Port> =
        Box::new(rpmd_mlx4::ethdev::open_port(&format!("{name}-1"), card.clone(), 1, 0).unwrap());
    let mut b: Box<dyn Port> =
        Box::new(rpmd_mlx4::ethdev::open_port(&format!("{name}-2"), card, 2, 1).unwrap());
    let p = pool(&format!("mlx4-{name}"));
    a.configure(&conf(&p)).unwrap();
    b.configure(&conf(&p)).unwrap();
    let mut qs = [a.start().unwrap(), b.start().unwrap()];
    let mut want = [Vec::new(), Vec::new()];
    let mut got: [Vec<Vec<u8>>; 2] = [Vec::new(), Vec::new()];
    let receive = |qs: &mut [Queues; 2], got: &mut [Vec<Vec<u8>>; 2]| {
        for (q, seen) in qs.iter_mut().zip(got.iter_mut()) {
            let mut pkts = Pkts::new();
            q.rx_burst(0, &mut pkts, 32);
            while let Some(m) = pkts.pop() {
                seen.push(m.data().to_vec());
            }
        }
    };
    let mut verdict = Ok(());
    'rounds: for round in 0..64u32 {
        for (from, q) in qs.iter_mut().enumerate() {
            let to = 1 - from;
            let dst = if to == 1 { mac2() } else { PORT_MAC };
            let mut pkts = Pkts::new();
            for i in 0..32u32 {
                let seq = (round * 64 + i + from as u32) as u8;
                let f = udp_frame(dst, 64 + (i as usize % 200), seq);
                want[to].push(f.clone());
                pkts.push(mbuf_of(&p, &f)).unwrap();
            }
            let (mut sent, t0) = (0, Instant::now());
            while sent < 32 {
                sent += q.tx_burst(0, &mut pkts);
                if t0.elapsed() > Duration::from_secs(5) {
                    verdict = Err(format!("tx stalled in round {round}"));
                    break 'rounds;
                }
            }
        }
        receive(&mut qs, &mut got);
    }
    let t0 = Instant::now();
    while verdict.is_ok() && (got[0].len() < want[0].len() || got[1].len() < want[1].len()) {
        receive(&mut qs, &mut got);
        if t0.elapsed() > Duration::from_secs(5) {
            verdict = Err(format!(
                "frames missing: port 1 got {} of {}, port 2 {} of {}",
                got[0].len(),
                want[0].len(),
                got[1].len(),
                want[1].len()
            ));
        }
    }
    if verdict.is_ok() {
        if let Some((port, at)) = (0..2).find_map(|k| {
            let at = got[k].iter().zip(&want[k]).position(|(g, w)| g != w)?;
            Some((k + 1, at))
        }) {
            verdict = Err(format!("port {port}: frame {at} not as sent"));
        }
    }
    if verdict.is_ok() {
        // An interrupt raised from the engine's thread.
        let fd = qs[1].rx[0].interrupt_fd().expect("an interrupt fd");
        let fd = EventFd::from_fd(fd.try_clone_to_owned().unwrap());
        qs[1].rx[0].set_interrupt(true).unwrap();
        let mut pkts = Pkts::new();
        pkts.push(mbuf_of(&p, &udp_frame(mac2(), 60, 7))).unwrap();
        assert_eq!(qs[0].tx_burst(0, &mut pkts), 1);
        if fd.wait(Duration::from_secs(1)).unwrap() == 0 {
            verdict = Err("no interrupt from the engine's thread".into());
        }
    }
    let errors: u64 = [&a, &b].iter().map(|port| port.stats().ierrors).sum();
    drop(qs);
    a.stop().unwrap();
    b.stop().unwrap();
    drop((a, b));
    let verdict = verdict.map_err(|wrong| format!("{wrong} ({errors} receive errors counted)"));
    if !model.violations().is_empty() {
        let also = verdict
            .err()
            .map_or(String::new(), |wrong| format!("; {wrong}"));
        return Err(format!("the model refused: {:?}{also}", model.violations()));
    }
    verdict?;
    if p.available() != p.size() {
        return Err(format!("{} mbufs not home", p.size() - p.available()));
    }
    Ok(())
}
