//! `ring:NAME`: two in-process ports joined back to back by rings, like
//! DPDK's net_ring.
//!
//! The first port opened as `ring:NAME` is side A, the second side B; what
//! one sends, the other receives, queue by queue (tx queue q of A feeds rx
//! queue q of B and the other way round). A third open of the same name is
//! an error until one of the two is dropped. Each direction of each queue
//! is one SP/SC ring of `size` mbufs, so a burst is a handful of loads and
//! stores with no locked instruction.
//!
//! Options: `queues=N` (1..=16, default 1), `size=N` (ring slots, a power of
//! two, default 1024). The second side inherits them and may only repeat
//! the same values. Descriptor counts in [`PortConfig`] are accepted and
//! ignored, as net_ring does; the ring size fixes the depth.
//!
//! The rings hold mbufs between the two sides, so they keep alive what
//! those mbufs need (`Keep`): the pools the ports were configured with
//! and the registry's domain (whose registered pools any port may send
//! from), until the last ring end is gone, whatever the order the user
//! drops pools, ports and queues in.
use super::ethdev::{Device, EthDev, StartContext};
use super::events::LinkEvents;
use super::features::{Declared, Feature, Support};
use super::stats::QueueStats;
use super::{
    Capabilities, DevArgs, Driver, Link, MacAddr, Offloads, Pkts, Port, PortConfig, Queues,
    RxQueue, RxStamp, TxQueue,
};
use crate::{Error, Mbuf};
use crossbeam_utils::CachePadded;
use rpmd_ring::{Consumer, Producer, Single};
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, Weak};

type Prod = Producer<Mbuf, Single, Single>;
type Cons = Consumer<Mbuf, Single, Single>;

/// A ring end parked in the port while no queue handle holds it, and what
/// keeps valid the mbufs its ring may hold (dropped after the end: fields
/// drop in order).
struct SlotInner<E> {
    end: Mutex<Option<E>>,
    /// Held for its drop only.
    _keep: Arc<Keep>,
}
type Slot<E> = Arc<SlotInner<E>>;

/// What the mbufs in one link's rings need alive: the pools its ports
/// were configured with and the domain of registered pools.
#[derive(Default)]
struct Keep {
    pools: Mutex<Vec<crate::Mempool>>,
    /// Held for its drop only (its registered pools).
    _domain: Option<crate::DmaDomain>,
}

impl Keep {
    fn add(&self, pool: &crate::Mempool) {
        let mut pools = lock(&self.pools);
        if !pools.iter().any(|p| p.same(pool)) {
            pools.push(pool.clone());
        }
    }
}

/// One side's ring ends.
struct Side {
    tx: Vec<Slot<Prod>>,
    rx: Vec<Slot<Cons>>,
}

/// The rings between the two sides of one name.
struct Link2 {
    queues: usize,
    size: usize,
    /// Sides not yet taken by a port.
    free: Mutex<Vec<(u8, Side)>>,
    keep: Arc<Keep>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The `ring` driver; it remembers the names in use.
#[derive(Default)]
pub struct RingDriver {
    links: Mutex<HashMap<String, Weak<Link2>>>,
}

impl Driver for RingDriver {
    fn features(&self) -> &'static [Declared] {
        &[
            (Feature::LinkStatusEvent, Support::Yes),
            (Feature::ScatteredRx, Support::Yes),
            (Feature::MultiSegmentTx, Support::Yes),
        ]
    }

    fn kind(&self) -> &'static str {
        "ring"
    }

    fn usage(&self) -> &'static str {
        "ring:NAME[,queues=N][,size=N]  in-process port; two ports of one NAME are joined back to back"
    }

    fn check(&self, args: &DevArgs) -> Result<(), Error> {
        options(args).map(drop)
    }

    fn open(&self, args: &DevArgs, domain: &crate::DmaDomain) -> Result<Box<dyn Port>, Error> {
        let (name, queues, size) = options(args)?;
        let bad = |detail: String| Error::Config {
            port: args.raw().to_string(),
            what: "device options",
            detail,
        };
        let mut links = lock(&self.links);
        links.retain(|_, w| w.strong_count() > 0);
        let link = match links.get(&name).and_then(Weak::upgrade) {
            Some(l) => {
                let explicit = |k| args.opt(k).is_some();
                if (explicit("queues") && l.queues as u64 != queues)
                    || (explicit("size") && l.size as u64 != size)
                {
                    return Err(bad(format!(
                        "ring:{name} exists with queues={},size={}",
                        l.queues, l.size
                    )));
                }
                l
            }
            None => {
                let l = Arc::new(Link2::new(queues as usize, size as usize, domain)?);
                links.insert(name.clone(), Arc::downgrade(&l));
                l
            }
        };
        let taken = lock(&link.free).pop();
        let Some((id, side)) = taken else {
            return Err(Error::Port {
                port: args.raw().to_string(),
                detail: format!("ring:{name} already joins two ports; drop one first"),
            });
        };
        Ok(Box::new(EthDev::new(
            args,
            RingDevice {
                driver: "ring",
                mac: MacAddr::from_name(&name, id),
                link,
                side: Some((id, side)),
            },
        )))
    }
}

/// The ring name, queue count and ring size `args` asks for.
fn options(args: &DevArgs) -> Result<(String, u64, u64), Error> {
    args.only_options(&["queues", "size"])?;
    let name = args.require_target("a ring name")?.to_string();
    let bad = |detail: String| Error::Config {
        port: args.raw().to_string(),
        what: "device options",
        detail,
    };
    let queues = args.opt_u64("queues", 1)?;
    let size = args.opt_u64("size", 1024)?;
    if !(1..=16).contains(&queues) {
        return Err(bad(format!("queues={queues}; 1..=16 allowed")));
    }
    if !size.is_power_of_two() || !(2..=1 << 20).contains(&size) {
        return Err(bad(format!("size={size}; a power of two in 2..=1048576")));
    }
    Ok((name, queues, size))
}

fn new_ring(size: usize) -> Result<(Prod, Cons), Error> {
    rpmd_ring::new::<Mbuf, Single, Single>(size).map_err(|source| Error::Ring {
        pool: "ring port".into(),
        source,
    })
}

fn slot<E>(end: E, keep: &Arc<Keep>) -> Slot<E> {
    Arc::new(SlotInner {
        end: Mutex::new(Some(end)),
        _keep: keep.clone(),
    })
}

impl Link2 {
    fn new(queues: usize, size: usize, domain: &crate::DmaDomain) -> Result<Self, Error> {
        let keep = Arc::new(Keep {
            pools: Mutex::default(),
            _domain: Some(domain.clone()),
        });
        let mut a = Side {
            tx: Vec::new(),
            rx: Vec::new(),
        };
        let mut b = Side {
            tx: Vec::new(),
            rx: Vec::new(),
        };
        for _ in 0..queues {
            let (ab_p, ab_c) = new_ring(size)?;
            let (ba_p, ba_c) = new_ring(size)?;
            a.tx.push(slot(ab_p, &keep));
            b.rx.push(slot(ab_c, &keep));
            b.tx.push(slot(ba_p, &keep));
            a.rx.push(slot(ba_c, &keep));
        }
        Ok(Link2 {
            queues,
            size,
            // Popped from the back: the first opener gets side A (id 0).
            free: Mutex::new(vec![(1, b), (0, a)]),
            keep,
        })
    }
}

/// One side of a `ring:NAME` pair (or a port looped onto itself).
pub struct RingDevice {
    driver: &'static str,
    mac: MacAddr,
    link: Arc<Link2>,
    side: Option<(u8, Side)>,
}

impl Drop for RingDevice {
    fn drop(&mut self) {
        // The port stopped before its device drops: no handle of ours
        // sends or receives any more.
        if let Some(side) = self.side.take() {
            lock(&self.link.free).push(side);
        }
    }
}

impl RingDevice {
    /// A device whose tx queue q feeds its own rx queue q (the
    /// test-support `loopback` driver).
    pub(crate) fn looped(name: &str, queues: usize, size: usize) -> Result<RingDevice, Error> {
        let mut side = Side {
            tx: Vec::new(),
            rx: Vec::new(),
        };
        let keep = Arc::new(Keep::default());
        for _ in 0..queues {
            let (p, c) = new_ring(size)?;
            side.tx.push(slot(p, &keep));
            side.rx.push(slot(c, &keep));
        }
        Ok(RingDevice {
            driver: "loopback",
            mac: MacAddr::from_name(name, 0),
            link: Arc::new(Link2 {
                queues,
                size,
                free: Mutex::new(Vec::new()),
                keep,
            }),
            side: Some((0, side)),
        })
    }

    fn side(&self) -> &Side {
        // Only `drop` takes the side out.
        &self
            .side
            .as_ref()
            .expect("ring port side present until drop")
            .1
    }
}

/// An end taken out of its slot for the life of a queue handle, and put
/// back when the handle drops.
struct Held<E> {
    end: Option<E>,
    slot: Slot<E>,
}

impl<E> Drop for Held<E> {
    fn drop(&mut self) {
        *lock(&self.slot.end) = self.end.take();
    }
}

fn take<E>(slot: &Slot<E>, port: &str) -> Result<Held<E>, Error> {
    match lock(&slot.end).take() {
        Some(end) => Ok(Held {
            end: Some(end),
            slot: slot.clone(),
        }),
        None => Err(Error::Port {
            port: port.to_string(),
            detail:
                "queue handles of an earlier start are still alive; drop them before starting again"
                    .into(),
        }),
    }
}

struct RingRx {
    cons: Held<Cons>,
    live: super::LiveFlag,
    stats: Arc<CachePadded<QueueStats>>,
    stamp: RxStamp,
}

struct RingTx {
    prod: Held<Prod>,
    live: super::LiveFlag,
    stats: Arc<CachePadded<QueueStats>>,
}

impl RxQueue for RingRx {
    #[inline]
    fn rx_burst(&mut self, out: &mut Pkts, max: usize) -> usize {
        // Relaxed: a stop need not be seen at once; the rings stay valid.
        let Some(c) = self.cons.end.as_ref() else {
            return 0;
        };
        if !self.live.load(Relaxed) {
            return 0;
        }
        let before = out.len();
        let n = c.dequeue_burst_into(out, max).n;
        if n > 0 {
            let bytes: usize = out[before..].iter().map(Mbuf::pkt_len).sum();
            self.stats.packets.add(n as u64);
            self.stats.bytes.add(bytes as u64);
        }
        self.stamp.apply(out, n)
    }
}

impl TxQueue for RingTx {
    #[inline]
    fn tx_burst(&mut self, pkts: &mut Pkts) -> usize {
        let Some(p) = self.prod.end.as_ref() else {
            return 0;
        };
        if !self.live.load(Relaxed) || pkts.is_empty() {
            return 0;
        }
        let total: usize = pkts.iter().map(Mbuf::pkt_len).sum();
        let n = p.enqueue_burst_from(pkts).n;
        // What stayed behind is still in `pkts`; the rest was sent.
        let left: usize = pkts.iter().map(Mbuf::pkt_len).sum();
        self.stats.packets.add(n as u64);
        self.stats.bytes.add((total - left) as u64);
        if !pkts.is_empty() {
            self.stats.full.add(1);
        }
        n
    }
}

impl Device for RingDevice {
    fn driver(&self) -> &'static str {
        self.driver
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_rx_queues: self.link.queues as u16,
            max_tx_queues: self.link.queues as u16,
            min_desc: 1,
            max_desc: u16::MAX,
            desc_pow2: false,
            offloads: Offloads::RX_SCATTER | Offloads::TX_MULTI_SEGS,
            min_mtu: 68,
            max_mtu: 9600,
            rx_interrupts: false,
            needs_rx_pool: false,
        }
    }

    fn configure(&mut self, _name: &str, conf: &PortConfig) -> Result<(), Error> {
        if let Some(pool) = &conf.rx_pool {
            self.link.keep.add(pool);
        }
        Ok(())
    }

    fn start(&mut self, ctx: StartContext<'_>) -> Result<Queues, Error> {
        // Take every end first, so a failure leaves all slots as they were
        // (the `Held`s put theirs back as they drop).
        let mut rx_ends = Vec::new();
        for q in 0..ctx.conf.rx_queues as usize {
            rx_ends.push(take(&self.side().rx[q], ctx.name)?);
        }
        let mut tx_ends = Vec::new();
        for q in 0..ctx.conf.tx_queues as usize {
            tx_ends.push(take(&self.side().tx[q], ctx.name)?);
        }
        let rx = rx_ends
            .into_iter()
            .enumerate()
            .map(|(q, cons)| {
                Box::new(RingRx {
                    cons,
                    live: ctx.rx_live[q].clone(),
                    stats: ctx.stats.rx(q),
                    stamp: ctx.stamp,
                }) as Box<dyn RxQueue>
            })
            .collect();
        let tx = tx_ends
            .into_iter()
            .enumerate()
            .map(|(q, prod)| {
                Box::new(RingTx {
                    prod,
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
            speed_mbps: 100_000,
            full_duplex: true,
        }
    }

    fn mac_addr(&self) -> MacAddr {
        self.mac
    }

    /// The link follows start and stop only, which the port reports.
    fn watch_link(&mut self, _name: &str, _events: &LinkEvents) -> Result<bool, Error> {
        Ok(true)
    }
}
