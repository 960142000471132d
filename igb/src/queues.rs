//! What the PF's and the VF's ports share to start and stop their
//! queues: the receive pool registered for the device, each ring's
//! registers set up and the queue enabled and awaited, the queue handles
//! made, and on stop (or a start that fails half-way) every queue
//! disabled and awaited before what dropped handles held goes home.
use crate::hw::Hw;
use crate::irq::LinkWatch;
use crate::regs::*;
use crate::ring::DescRing;
use crate::rxtx::{Graveyard, Running, RxMode, RxRing, TxRing};
use crate::Error;
use crossbeam_utils::CachePadded;
use rpmd_pmd::mbuf::Slots;
use rpmd_pmd::port::{Offloads, PortConfig, Queues, StartContext, MAX_BURST};
use rpmd_pmd::{Mempool, Pkts};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// What a start made.
pub(crate) struct Started {
    pub running: Running,
    pub graveyard: Graveyard,
    pub rx_queues: u16,
    pub tx_queues: u16,
    /// MSI-X is on.
    pub msix: bool,
    /// The other causes' vector, until a link watch takes it.
    pub other: Option<rpmd_pmd::function::EventFd>,
    /// The link watch, once the app asked for link events.
    pub watch: Option<LinkWatch>,
}

impl Started {
    /// A start of `ctx`'s queues, nothing made yet.
    pub(crate) fn new(ctx: &StartContext<'_>) -> Started {
        Started {
            running: Arc::new(CachePadded::new(AtomicBool::new(true))),
            graveyard: Graveyard::default(),
            rx_queues: ctx.conf.rx_queues,
            tx_queues: ctx.conf.tx_queues,
            msix: false,
            other: None,
            watch: None,
        }
    }
}

/// What the PF's and the VF's devices share for start and stop: the
/// queues built into a [`Started`], which is torn down whether a start
/// fails half-way or the port stops.
pub(crate) trait QueueOwner {
    /// Everything a start sets up, queues handed out.
    fn build_queues(&mut self, ctx: &StartContext<'_>, st: &mut Started) -> Result<Queues, Error>;
    /// Turns the queues of `st` off and frees what dropped handles left.
    fn tear_down(&mut self, st: Started) -> Result<(), Error>;
    /// Where the running start is kept.
    fn running(&mut self) -> &mut Option<Started>;
    /// `e` as the port's error while doing `what`.
    fn driver_err(&self, what: &str, e: Error) -> rpmd_pmd::Error;
}

/// A start: the queues built, or every step undone.
pub(crate) fn start_queues_of<D: QueueOwner>(
    d: &mut D,
    ctx: StartContext<'_>,
) -> Result<Queues, rpmd_pmd::Error> {
    let mut st = Started::new(&ctx);
    match d.build_queues(&ctx, &mut st) {
        Ok(q) => {
            *d.running() = Some(st);
            Ok(q)
        }
        Err(e) => {
            let _ = d.tear_down(st);
            Err(d.driver_err("starting the queues", e))
        }
    }
}

/// A stop (or a drop): the running start torn down, if any.
pub(crate) fn stop_queues_of<D: QueueOwner>(d: &mut D) -> Result<(), rpmd_pmd::Error> {
    match d.running().take() {
        Some(st) => d
            .tear_down(st)
            .map_err(|e| d.driver_err("stopping the queues", e)),
        None => Ok(()),
    }
}

/// The configuration's receive pool, registered with the function's DMA
/// domain so that the device may write its mbufs.
pub(crate) fn rx_pool_for(hw: &Hw, conf: &PortConfig) -> Result<Mempool, Error> {
    let pool = conf.rx_pool.clone().ok_or_else(|| Error::Ring {
        what: "receive queues".into(),
        detail: "no rx_pool in the configuration".into(),
    })?;
    hw.function()
        .domain()
        .register_pool(&pool)
        .map_err(|e| Error::Memory {
            what: "registering the receive pool for the device".into(),
            source: e,
        })?;
    Ok(pool)
}

/// The receive buffer size the pool's mbufs allow, in KiB (the device's
/// unit), if at least one.
pub(crate) fn buffer_kib(pool: &Mempool) -> u32 {
    (pool.data_room() as u32 >> SRRCTL_BSIZEPKT_SHIFT).min(127)
}

/// Checks that `pool`'s mbufs can be receive buffers for frames of
/// `mtu`: one KiB at least, and the whole frame unless scattered.
pub(crate) fn check_rx_buffers(
    name: &str,
    pool: &Mempool,
    mtu: u16,
    offloads: Offloads,
) -> Result<(), rpmd_pmd::Error> {
    let config_err = |what, detail| rpmd_pmd::Error::Config {
        port: name.to_string(),
        what,
        detail,
    };
    let kib = buffer_kib(pool);
    if kib == 0 {
        return Err(config_err(
            "rx_pool",
            format!(
                "{name}: mbufs of {} bytes; igb receive buffers are 1 KiB at least",
                pool.data_room()
            ),
        ));
    }
    let fits = max_frame(mtu) <= kib << SRRCTL_BSIZEPKT_SHIFT;
    if !fits && !offloads.contains(Offloads::RX_SCATTER) {
        return Err(config_err(
            "mtu",
            format!(
                "{name}: MTU {mtu} needs {}-byte frames, more than one {kib} KiB buffer; \
                 ask for rx-scatter or a pool with larger mbufs",
                max_frame(mtu)
            ),
        ));
    }
    Ok(())
}

/// The largest frame the MTU admits: header, a VLAN tag, the MTU.
pub(crate) fn max_frame(mtu: u16) -> u32 {
    mtu as u32 + 14 + 4
}

/// Queue `q`'s ring registers, given as `regs` (base low and high,
/// length, head, tail, control): the queue disabled, the ring's address
/// and length, head and tail 0, `setup` written (SRRCTL for a receive
/// queue), then the queue enabled with thresholds `dctl` and awaited.
fn start_ring(
    hw: &Hw,
    q: u16,
    regs: [fn(u16) -> u64; 6],
    ring: &DescRing,
    setup: Option<(u64, u32)>,
    dctl: u32,
) -> Result<(), Error> {
    let [bal, bah, len, head, tail, ctl] = regs.map(|r| r(q));
    hw.write(ctl, 0)?;
    hw.write(bal, ring.iova() as u32)?;
    hw.write(bah, (ring.iova() >> 32) as u32)?;
    hw.write(len, ring.len() * crate::ring::DESC as u32)?;
    hw.write(head, 0)?;
    hw.write(tail, 0)?;
    if let Some((reg, v)) = setup {
        hw.write(reg, v)?;
    }
    hw.write(ctl, dctl | DCTL_ENABLE)?;
    hw.wait_reg("igb queue enable (RXDCTL/TXDCTL.ENABLE)", ctl, |v| {
        v & DCTL_ENABLE != 0
    })
}

/// Starts transmit queue `q` on `ring`.
pub(crate) fn start_tx_ring(hw: &Hw, q: u16, ring: &DescRing) -> Result<(), Error> {
    let regs = [tdbal, tdbah, tdlen, tdh, tdt, txdctl];
    start_ring(hw, q, regs, ring, None, TXDCTL_THRESH)
}

/// Starts receive queue `q` on `ring`, with buffers of `kib` KiB (one
/// advanced descriptor a buffer, dropping when the ring is empty).
pub(crate) fn start_rx_ring(hw: &Hw, q: u16, ring: &DescRing, kib: u32) -> Result<(), Error> {
    let regs = [rdbal, rdbah, rdlen, rdh, rdt, rxdctl];
    let buffers = kib | SRRCTL_DESCTYPE_ADV_ONEBUF | SRRCTL_DROP_EN;
    start_ring(hw, q, regs, ring, Some((srrctl(q), buffers)), RXDCTL_THRESH)
}

/// Every queue of `st` disabled and awaited; the first failure, after
/// `result`, is returned.
pub(crate) fn disable_queues(
    hw: &Hw,
    st: &Started,
    mut result: Result<(), Error>,
) -> Result<(), Error> {
    let queues = (0..st.rx_queues)
        .map(|q| (rxdctl(q), "igb rx queue disable"))
        .chain((0..st.tx_queues).map(|q| (txdctl(q), "igb tx queue disable")));
    for (ctl, what) in queues {
        result = result.and(hw.write(ctl, 0));
        result = result.and(hw.wait_reg(what, ctl, |v| v & DCTL_ENABLE == 0));
    }
    result
}

/// Frees what dropped handles of `st` left, once `quiet` says the device
/// stopped using it; `quiet` returned.
pub(crate) fn bury(st: &Started, quiet: Result<(), Error>) -> Result<(), Error> {
    let mut parked = st.graveyard.lock().unwrap_or_else(|e| e.into_inner());
    if quiet.is_ok() {
        parked.clear();
    } else {
        // A device that does not say its queues are off may still
        // write their buffers: they stay out of the pool for good.
        std::mem::forget(std::mem::take(&mut *parked));
    }
    quiet
}

/// Receive queue `q`'s handle over `ring`.
pub(crate) fn rx_ring(
    hw: &Hw,
    ctx: &StartContext<'_>,
    st: &Started,
    q: u16,
    ring: DescRing,
    pool: &Mempool,
    mode: RxMode,
) -> RxRing {
    let n = ring.len();
    RxRing {
        running: st.running.clone(),
        gate: ctx.rx_live[q as usize].clone(),
        graveyard: st.graveyard.clone(),
        ring: Arc::new(ring),
        slots: Slots::new(n as usize),
        regs: hw.regs().clone(),
        rdt: rdt(q),
        next: 0,
        mask: n - 1,
        pool: pool.clone(),
        refill: Pkts::new(),
        partial: None,
        discarding: false,
        mode,
        stamp: ctx.stamp,
        stats: ctx.stats.rx(q as usize),
        irq: None,
    }
}

/// Transmit queue `q`'s handle over `ring`.
pub(crate) fn tx_ring(
    hw: &Hw,
    ctx: &StartContext<'_>,
    st: &Started,
    q: u16,
    ring: DescRing,
    pool: &Mempool,
) -> TxRing {
    let n = ring.len();
    TxRing {
        running: st.running.clone(),
        gate: ctx.tx_live[q as usize].clone(),
        graveyard: st.graveyard.clone(),
        ring: Arc::new(ring),
        slots: Slots::new(n as usize),
        last: vec![0; n as usize],
        lasts: vec![0; MAX_BURST],
        regs: hw.regs().clone(),
        tdt: tdt(q),
        prod: 0,
        clean: 0,
        mask: n - 1,
        context: None,
        pool: pool.clone(),
        done: Pkts::new(),
        stats: ctx.stats.tx(q as usize),
    }
}
