//! vswitch's demo: three stations behind three in-process ports.
//!
//! Station k (MAC `02:00:00:00:5a:0k`) sits on the far end of
//! `ring:vswitch-k` and sends bursts to station k + 1 (mod 3), with a
//! broadcast now and then. Each station counts what reaches it: frames
//! for it, broadcasts, and frames for another station (misdelivered: none
//! once the switch has learned, since only floods reach the others).
use rpmd_pmd::port::stats::Counter;
use rpmd_pmd::port::{Pkts, Port, Queues};
use rpmd_pmd::{Mempool, PortConfig, Registry};
use rpmd_sched::Task;
use std::sync::Arc;

/// Stations in the demo.
pub const STATIONS: usize = 3;

/// The switch's side of the demo's ports.
pub fn devices() -> Vec<String> {
    (0..STATIONS).map(|k| format!("ring:vswitch-{k}")).collect()
}

/// Station `k`'s address.
pub fn station_mac(k: usize) -> [u8; 6] {
    [2, 0, 0, 0, 0x5a, k as u8]
}

/// What the stations sent and received (one writer: their task).
#[derive(Debug, Default)]
pub struct StationCounts {
    /// Frames sent (unicast and broadcast).
    pub sent: Counter,
    /// Unicast frames that reached the station they were for.
    pub delivered: Counter,
    /// Broadcasts received.
    pub broadcasts: Counter,
    /// Unicast frames that reached a station they were not for (floods
    /// before the switch learned).
    pub misdelivered: Counter,
}

/// The stations' task: the far ends' queues and the counts.
pub struct Stations {
    ends: Vec<Queues>,
    pool: Mempool,
    pkts: Pkts,
    sent: u64,
    /// Shared with the app.
    pub counts: Arc<StationCounts>,
}

/// Opens the far ends of [`devices`] and makes the stations' task.
pub fn stations(reg: &Registry, pool: &Mempool) -> Result<(Vec<Box<dyn Port>>, Stations), String> {
    let (mut ports, mut ends) = (Vec::new(), Vec::new());
    for d in devices() {
        let mut p = reg.open(&d).map_err(|e| e.to_string())?;
        p.configure(&PortConfig::with_pool(pool))
            .map_err(|e| e.to_string())?;
        ends.push(p.start().map_err(|e| e.to_string())?);
        ports.push(p);
    }
    let task = Stations {
        ends,
        pool: pool.clone(),
        pkts: Pkts::new(),
        sent: 0,
        counts: Arc::new(StationCounts::default()),
    };
    Ok((ports, task))
}

/// Every this many frames a station sends a broadcast instead.
const BROADCAST_EVERY: u64 = 1024;

impl Stations {
    fn send(&mut self, k: usize) {
        let n = 32;
        if self.pool.get_bulk(&mut self.pkts, n).is_err() {
            return;
        }
        for m in self.pkts.iter_mut() {
            let Some(f) = m.append(60) else { continue };
            let to = if self.sent % BROADCAST_EVERY == 0 {
                [0xff; 6]
            } else {
                station_mac((k + 1) % STATIONS)
            };
            f[..6].copy_from_slice(&to);
            f[6..12].copy_from_slice(&station_mac(k));
            f[12..14].copy_from_slice(&[0x88, 0xb5]);
            f[14..].fill(0);
            self.sent += 1;
        }
        let n = self.ends[k].tx_burst(0, &mut self.pkts);
        self.counts.sent.add(n as u64);
        self.pkts.clear();
    }

    fn receive(&mut self, k: usize) -> usize {
        let n = self.ends[k].rx_burst(0, &mut self.pkts, 32);
        for m in self.pkts.iter() {
            let Some(dst) = m.data().get(..6) else {
                continue;
            };
            if dst == [0xff; 6] {
                self.counts.broadcasts.add(1);
            } else if dst == station_mac(k) {
                self.counts.delivered.add(1);
            } else {
                self.counts.misdelivered.add(1);
            }
        }
        self.pkts.clear();
        n
    }
}

impl Task for Stations {
    fn run(&mut self, _quota: usize) -> usize {
        let mut work = 0;
        for k in 0..STATIONS {
            self.send(k);
            work += self.receive(k) + 1;
        }
        work
    }

    fn finish(&mut self) {
        // What the switch already sent on is counted.
        for _ in 0..64 {
            if (0..STATIONS).map(|k| self.receive(k)).sum::<usize>() == 0 {
                break;
            }
        }
    }
}
