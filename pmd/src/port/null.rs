//! `null`: a port that receives an endless stream of frames and frees
//! whatever it is given to send, like DPDK's net_null. It measures the
//! cost of everything but a driver.
//!
//! Options: `size=N` (frame bytes, 14..=2048, default 64), `queues=N` (most
//! queues, 1..=16, default 16). Received frames are `size` bytes of
//! whatever the buffer held (nothing is written, as net_null does without
//! `copy=1`), taken from [`PortConfig::rx_pool`](super::PortConfig::rx_pool); when the pool runs dry
//! the burst comes back short and `rx_nombuf` counts the miss.
use super::ethdev::{Device, EthDev, StartContext};
use super::events::LinkEvents;
use super::features::{Declared, Feature, Support};
use super::stats::QueueStats;
use super::{
    Capabilities, DevArgs, Driver, Link, MacAddr, Offloads, Pkts, Port, Queues, RxQueue, RxStamp,
    TxQueue,
};
use crate::{Error, Mbuf, Mempool};
use crossbeam_utils::CachePadded;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// The `null` driver.
pub struct NullDriver;

impl Driver for NullDriver {
    fn features(&self) -> &'static [Declared] {
        &[
            (Feature::LinkStatusEvent, Support::Yes),
            (Feature::MultiSegmentTx, Support::Yes),
        ]
    }

    fn kind(&self) -> &'static str {
        "null"
    }

    fn usage(&self) -> &'static str {
        "null[,size=N][,queues=N]  receives endless N-byte frames, frees what it sends"
    }

    fn check(&self, args: &DevArgs) -> Result<(), Error> {
        options(args).map(drop)
    }

    fn open(&self, args: &DevArgs, _: &crate::DmaDomain) -> Result<Box<dyn Port>, Error> {
        let (size, queues) = options(args)?;
        Ok(Box::new(EthDev::new(
            args,
            NullDevice {
                size,
                max_queues: queues,
            },
        )))
    }
}

/// The frame size and queue count `args` asks for.
fn options(args: &DevArgs) -> Result<(usize, u16), Error> {
    args.no_target()?;
    args.only_options(&["size", "queues"])?;
    let size = args.opt_u64("size", 64)?;
    let queues = args.opt_u64("queues", 16)?;
    let bad = |detail: String| Error::Config {
        port: args.raw().to_string(),
        what: "device options",
        detail,
    };
    if !(14..=2048).contains(&size) {
        return Err(bad(format!("size={size}; 14..=2048 allowed")));
    }
    if !(1..=16).contains(&queues) {
        return Err(bad(format!("queues={queues}; 1..=16 allowed")));
    }
    Ok((size as usize, queues as u16))
}

/// A null device: frames from nowhere, sends to nowhere.
pub struct NullDevice {
    size: usize,
    max_queues: u16,
}

struct NullRx {
    pool: Mempool,
    size: usize,
    live: super::LiveFlag,
    stats: Arc<CachePadded<QueueStats>>,
    stamp: RxStamp,
}

struct NullTx {
    live: super::LiveFlag,
    stats: Arc<CachePadded<QueueStats>>,
}

impl RxQueue for NullRx {
    #[inline]
    fn rx_burst(&mut self, out: &mut Pkts, max: usize) -> usize {
        if !self.live.load(Relaxed) {
            return 0;
        }
        let n = max.min(out.capacity() - out.len());
        if n == 0 {
            return 0;
        }
        let before = out.len();
        if self.pool.get_bulk(out, n).is_err() {
            // Short of n: take what is there, one by one.
            self.stats.nombuf.add(1);
            while out.len() - before < n {
                match self.pool.get() {
                    Ok(m) => {
                        let _ = out.push(m);
                    }
                    Err(_) => break,
                }
            }
        }
        let got = out.len() - before;
        for m in out[before..].iter_mut() {
            // A fresh mbuf has 2048 bytes of room and `size` is at most
            // that, so the append cannot fail.
            let _ = m.append(self.size);
        }
        self.stats.packets.add(got as u64);
        self.stats.bytes.add((got * self.size) as u64);
        self.stamp.apply(out, got)
    }
}

impl TxQueue for NullTx {
    #[inline]
    fn tx_burst(&mut self, pkts: &mut Pkts) -> usize {
        if !self.live.load(Relaxed) {
            return 0;
        }
        let n = pkts.len();
        let bytes: usize = pkts.iter().map(Mbuf::pkt_len).sum();
        pkts.clear();
        self.stats.packets.add(n as u64);
        self.stats.bytes.add(bytes as u64);
        n
    }
}

impl Device for NullDevice {
    fn driver(&self) -> &'static str {
        "null"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_rx_queues: self.max_queues,
            max_tx_queues: self.max_queues,
            min_desc: 1,
            max_desc: u16::MAX,
            desc_pow2: false,
            offloads: Offloads::TX_MULTI_SEGS,
            min_mtu: 68,
            max_mtu: 9600,
            rx_interrupts: false,
            needs_rx_pool: true,
        }
    }

    fn start(&mut self, ctx: StartContext<'_>) -> Result<Queues, Error> {
        // `validate` made sure the pool is there.
        let pool = ctx.conf.rx_pool.clone().ok_or_else(|| Error::Port {
            port: ctx.name.to_string(),
            detail: "no rx pool (a bug in the null driver)".into(),
        })?;
        let rx = (0..ctx.conf.rx_queues as usize)
            .map(|q| {
                Box::new(NullRx {
                    pool: pool.clone(),
                    size: self.size,
                    live: ctx.rx_live[q].clone(),
                    stats: ctx.stats.rx(q),
                    stamp: ctx.stamp,
                }) as Box<dyn RxQueue>
            })
            .collect();
        let tx = (0..ctx.conf.tx_queues as usize)
            .map(|q| {
                Box::new(NullTx {
                    live: ctx.tx_live[q].clone(),
                    stats: ctx.stats.tx(q),
                }) as Box<dyn TxQueue>
            })
            .collect();
        Ok(Queues::new(rx, tx))
    }

    fn link(&self, started: bool) -> Link {
        Link {
            up: started,
            speed_mbps: 10_000,
            full_duplex: true,
        }
    }

    fn mac_addr(&self) -> MacAddr {
        MacAddr::local(0x6e75)
    }

    /// The link follows start and stop only, which the port reports.
    fn watch_link(&mut self, _name: &str, _events: &LinkEvents) -> Result<bool, Error> {
        Ok(true)
    }
}
