//! `shm:NAME`: a port that crosses processes through shared memory, like
//! DPDK's memif in copy mode.
//!
//! Two ports of one NAME, in the same process or in two, are joined back
//! to back: tx queue q of one feeds rx queue q of the other. The link lives
//! in `/dev/shm/rpmd-shm-NAME`; the first port to open the name creates the
//! file and becomes side A, the second maps it and becomes side B. Each
//! direction of each queue is a single-producer/single-consumer ring of
//! fixed-size slots (see `region.rs` for the layout and the memory
//! ordering). Sending copies a frame into a slot and frees its mbuf;
//! receiving copies a slot into an mbuf from [`PortConfig::rx_pool`](super::PortConfig::rx_pool). The
//! copies keep the two processes' memory apart: a peer sees only the bytes
//! of the frames, never our mbufs, and a peer that writes garbage into the
//! file can corrupt frames but not us.
//!
//! A side whose process died is taken over by the next opener; when both
//! sides are gone the file is stale and the next opener starts afresh.
//! The last side to close removes the file.
//!
//! Options: `queues=N` (1..=16, default 1), `slots=N` (per ring, a power
//! of two in 2..=32768, default 1024), `slot_size=N` (largest frame, 64..=
//! 16384, default 2048). The second side
//! inherits them and may only repeat the same values.
mod region;

use super::ethdev::{Device, EthDev, StartContext};
use super::features::{Declared, Feature, Support};
use super::stats::QueueStats;
use super::{
    Capabilities, DevArgs, Driver, Link, MacAddr, Offloads, Pkts, Port, Queues, RxQueue, RxStamp,
    TxQueue,
};
use crate::{Error, Mbuf, Mempool};
use crossbeam_utils::CachePadded;
use region::{pid_alive, seq_of, Geometry, Mapping, RingView, MAGIC, VERSION};
use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The directory shm links live in.
pub const SHM_DIR: &str = "/dev/shm";

/// The `shm` driver.
pub struct ShmDriver;

impl Driver for ShmDriver {
    fn features(&self) -> &'static [Declared] {
        &[
            (Feature::ScatteredRx, Support::Yes),
            (Feature::MultiSegmentTx, Support::Yes),
        ]
    }

    fn kind(&self) -> &'static str {
        "shm"
    }

    fn usage(&self) -> &'static str {
        "shm:NAME[,queues=N][,slots=N][,slot_size=N]  shared-memory port; two ports of one NAME (any processes) are joined back to back"
    }

    fn check(&self, args: &DevArgs) -> Result<(), Error> {
        options(args).map(drop)
    }

    fn open(&self, args: &DevArgs, _: &crate::DmaDomain) -> Result<Box<dyn Port>, Error> {
        let (name, want) = options(args)?;
        let explicit = ["queues", "slots", "slot_size"].map(|k| args.opt(k).is_some());
        let link = Shared::attach(name, args.raw(), want, explicit)?;
        let side = link.side;
        Ok(Box::new(EthDev::new(
            args,
            ShmDevice {
                mac: MacAddr::from_name(name, side),
                link: Arc::new(link),
            },
        )))
    }
}

/// The link name and geometry `args` asks for.
fn options(args: &DevArgs) -> Result<(&str, Geometry), Error> {
    args.only_options(&["queues", "slots", "slot_size"])?;
    let name = args.require_target("a link name")?;
    let bad = |detail: String| Error::Config {
        port: args.raw().to_string(),
        what: "device options",
        detail,
    };
    if name.len() > 64
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
        || name.starts_with('.')
    {
        return Err(bad(format!(
            "name {name:?}; 1 to 64 of A-Z a-z 0-9 _ - . (not starting with a dot)"
        )));
    }
    let queues = args.opt_u64("queues", 1)?;
    let slots = args.opt_u64("slots", 1024)?;
    let slot_size = args.opt_u64("slot_size", 2048)?;
    if !(1..=16).contains(&queues) {
        return Err(bad(format!("queues={queues}; 1..=16 allowed")));
    }
    if !slots.is_power_of_two() || !(2..=32768).contains(&slots) {
        return Err(bad(format!("slots={slots}; a power of two in 2..=32768")));
    }
    if !(64..=16384).contains(&slot_size) {
        return Err(bad(format!("slot_size={slot_size}; 64..=16384 allowed")));
    }
    let want = Geometry {
        queues: queues as u32,
        slots: slots as u32,
        slot_size: slot_size as u32,
    };
    Ok((name, want))
}

/// One side's attachment to a link file.
struct Shared {
    map: Mapping,
    geo: Geometry,
    path: PathBuf,
    side: u8,
    /// Queue handles alive, per rx then tx queue, so a restart cannot make
    /// two producers of one ring.
    taken: Vec<AtomicBool>,
}

impl Shared {
    fn attach(
        name: &str,
        port: &str,
        want: Geometry,
        explicit: [bool; 3],
    ) -> Result<Shared, Error> {
        let path = PathBuf::from(format!("{SHM_DIR}/rpmd-shm-{name}"));
        let file_err = |source: std::io::Error, hint| Error::File {
            path: path.clone(),
            source,
            hint,
        };
        // A stale file (both sides dead) is removed and the open retried;
        // two rounds suffice unless another process races us each time.
        for _ in 0..4 {
            match OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(file) => return Self::create(file, path, want),
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(file_err(
                        e,
                        Some("shm ports need a writable /dev/shm (a tmpfs)"),
                    ))
                }
            }
            let file = match OpenOptions::new().read(true).write(true).open(&path) {
                Ok(f) => f,
                // Removed between our two opens: try creating again.
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(file_err(e, None)),
            };
            match Self::join(&file, &path, port, want, explicit)? {
                Some(shared) => return Ok(shared),
                None => {
                    // Stale: remove it, unless someone already replaced it.
                    let ours = file.metadata().map(|m| m.ino()).ok();
                    let now = std::fs::metadata(&path).map(|m| m.ino()).ok();
                    if ours.is_some() && ours == now {
                        let _ = std::fs::remove_file(&path);
                    }
                }
            }
        }
        Err(Error::Port {
            port: port.to_string(),
            detail: format!(
                "{} keeps changing under us; another program is racing for it",
                path.display()
            ),
        })
    }

    fn create(file: File, path: PathBuf, g: Geometry) -> Result<Shared, Error> {
        let fail = |e: Error| {
            let _ = std::fs::remove_file(&path);
            e
        };
        file.set_len(g.file_bytes() as u64)
            .map_err(|source| Error::File {
                path: path.clone(),
                source,
                hint: Some("is /dev/shm full? (df -h /dev/shm)"),
            })
            .map_err(fail)?;
        let map = Mapping::map(&file, g.file_bytes()).map_err(fail)?;
        map.write_geometry(&g);
        map.owner(0).store(std::process::id(), Ordering::Relaxed);
        // Release: publishes the geometry and our claim of side A; pairs
        // with the Acquire load of the magic in `join`.
        map.magic().store(MAGIC, Ordering::Release);
        Ok(Shared::new(map, g, path, 0))
    }

    fn new(map: Mapping, geo: Geometry, path: PathBuf, side: u8) -> Shared {
        Shared {
            map,
            geo,
            path,
            side,
            taken: (0..2 * geo.queues)
                .map(|_| AtomicBool::new(false))
                .collect(),
        }
    }

    /// Joins an existing file; `None` when it is stale.
    fn join(
        file: &File,
        path: &std::path::Path,
        port: &str,
        want: Geometry,
        explicit: [bool; 3],
    ) -> Result<Option<Shared>, Error> {
        let broken = |detail: String| Error::Port {
            port: port.to_string(),
            detail: format!(
                "{}: {detail}; if no rpmd program uses it, remove it",
                path.display()
            ),
        };
        let geo = Self::read_header(file, &broken)?;
        let map = Mapping::map(file, geo.file_bytes())?;
        let owners = [0, 1].map(|s| map.owner(s).load(Ordering::Acquire));
        if !owners.iter().any(|&p| pid_alive(p)) {
            return Ok(None);
        }
        let differs = [
            geo.queues != want.queues,
            geo.slots != want.slots,
            geo.slot_size != want.slot_size,
        ];
        if (0..3).any(|i| explicit[i] && differs[i]) {
            return Err(Error::Config {
                port: port.to_string(),
                what: "device options",
                detail: format!(
                    "the link exists with queues={},slots={},slot_size={}",
                    geo.queues, geo.slots, geo.slot_size
                ),
            });
        }
        let me = std::process::id();
        for side in [1u8, 0] {
            let cur = owners[side as usize];
            if pid_alive(cur) {
                continue;
            }
            // AcqRel: the claim orders after the peer's release of the side
            // (its last ring writes) and before our own ring accesses.
            if map
                .owner(side)
                .compare_exchange(cur, me, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return Ok(Some(Shared::new(map, geo, path.to_path_buf(), side)));
            }
        }
        Err(Error::Port {
            port: port.to_string(),
            detail: format!(
                "{} already joins two live ports (pids {} and {})",
                path.display(),
                owners[0],
                owners[1]
            ),
        })
    }

    /// The geometry in `file`'s header, once its creator has written it
    /// (waiting up to 2 s), if it is one this version can use and the
    /// file's length matches it; `broken` words the error.
    fn read_header(file: &File, broken: &dyn Fn(String) -> Error) -> Result<Geometry, Error> {
        // The creator sizes the file and then stores the magic; wait for
        // both, briefly.
        let deadline = Instant::now() + Duration::from_secs(2);
        let (version, geo) = loop {
            let len = file.metadata().map(|m| m.len()).unwrap_or(0);
            if len >= 4096 {
                let head = Mapping::map(file, 4096)?;
                // Acquire: pairs with the creator's Release store of the
                // magic, so the geometry read next is the one it wrote.
                if head.magic().load(Ordering::Acquire) == MAGIC {
                    break head.read_geometry();
                }
            }
            if Instant::now() >= deadline {
                return Err(broken("not an rpmd shm link (no header after 2 s)".into()));
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        if version != VERSION
            || !(1..=16).contains(&geo.queues)
            || !geo.slots.is_power_of_two()
            || !(2..=32768).contains(&geo.slots)
            || !(64..=16384).contains(&geo.slot_size)
        {
            return Err(broken(format!(
                "unusable header (version {version}, {geo:?})"
            )));
        }
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        if len != geo.file_bytes() as u64 {
            return Err(broken(format!(
                "{len} bytes where its header needs {}",
                geo.file_bytes()
            )));
        }
        Ok(geo)
    }

    fn peer_alive(&self) -> bool {
        pid_alive(self.map.owner(1 - self.side).load(Ordering::Relaxed))
    }

    /// The ring this side sends on (`tx`) or receives from, for queue `q`.
    fn ring(&self, q: u16, tx: bool) -> RingView {
        // Direction 0 is A->B: A transmits on it, B receives from it.
        let dir = (self.side as u32) ^ u32::from(!tx);
        RingView::new(&self.map, &self.geo, q as u32, dir)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Release: our ring writes happen before the side is seen free.
        self.map.owner(self.side).store(0, Ordering::Release);
        if !self.peer_alive() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// One side of a `shm:NAME` link.
pub struct ShmDevice {
    mac: MacAddr,
    link: Arc<Shared>,
}

/// Marks a queue taken for the life of a handle.
struct Claim {
    link: Arc<Shared>,
    index: usize,
}

impl Claim {
    fn new(link: &Arc<Shared>, index: usize, port: &str) -> Result<Claim, Error> {
        if link.taken[index].swap(true, Ordering::Acquire) {
            return Err(Error::Port {
                port: port.to_string(),
                detail:
                    "queue handles of an earlier start are still alive; drop them before starting again"
                        .into(),
            });
        }
        Ok(Claim {
            link: link.clone(),
            index,
        })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // Release: the handle's last ring accesses happen before a new
        // handle (whose Acquire swap pairs with this) starts.
        self.link.taken[self.index].store(false, Ordering::Release);
    }
}

/// Aligned to 128 bytes (a pair of cache lines, what the adjacent-line
/// prefetcher moves): the handles of two ports sit next to each other on
/// the heap, and the indices each one writes per burst must not share a
/// line with the other's, which another core writes.
#[repr(align(128))]
struct ShmTx {
    ring: RingView,
    /// The next index to fill (we are the only producer).
    head: u32,
    /// The consumer's tail as last read.
    tail: u32,
    live: super::LiveFlag,
    stats: Arc<CachePadded<QueueStats>>,
    _claim: Claim,
}

/// Aligned like [`ShmTx`], for the same reason.
#[repr(align(128))]
struct ShmRx {
    ring: RingView,
    /// The next index to read (we are the only consumer).
    tail: u32,
    pool: Mempool,
    live: super::LiveFlag,
    stats: Arc<CachePadded<QueueStats>>,
    stamp: RxStamp,
    _claim: Claim,
}

impl TxQueue for ShmTx {
    #[inline]
    fn tx_burst(&mut self, pkts: &mut Pkts) -> usize {
        if !self.live.load(Ordering::Relaxed) || pkts.is_empty() {
            return 0;
        }
        let slots = self.ring.slots();
        let mut free = slots.saturating_sub(self.head.wrapping_sub(self.tail));
        if (free as usize) < pkts.len() {
            // Acquire: pairs with the consumer's Release store of the tail,
            // so the slots it handed back are no longer being read.
            self.tail = self.ring.tail().load(Ordering::Acquire);
            // A peer writing a tail ahead of our head would make this wrap;
            // treat such a ring as full.
            free = slots.saturating_sub(self.head.wrapping_sub(self.tail));
        }
        let n = (free as usize).min(pkts.len());
        if n == 0 {
            self.stats.full.add(1);
            return 0;
        }
        let size = self.ring.slot_size();
        let (mut written, mut bytes, mut errors) = (0u32, 0usize, 0u64);
        for m in pkts[..n].iter() {
            let len = m.pkt_len();
            if len > size {
                // It could never be sent: drop it and count it.
                errors += 1;
                continue;
            }
            let idx = self.head.wrapping_add(written);
            if m.nb_segs() == 1 {
                self.ring.write(idx, 0, m.data());
            } else {
                let mut at = 0;
                for seg in m.segments() {
                    self.ring.write(idx, at, seg);
                    at += seg.len();
                }
            }
            // Release: the frame bytes written above are visible before
            // the ctrl word that announces them; pairs with the consumer's
            // Acquire load in `rx_burst`.
            self.ring
                .ctrl(idx)
                .store(seq_of(idx) << 16 | len as u32, Ordering::Release);
            written += 1;
            bytes += len;
        }
        self.head = self.head.wrapping_add(written);
        // Relaxed: the head is only read by a side that (re)starts, after
        // the claim handshake; the consumer follows the ctrl words.
        self.ring.head().store(self.head, Ordering::Relaxed);
        pkts.drop_front(n);
        self.stats.packets.add(written as u64);
        self.stats.bytes.add(bytes as u64);
        if errors > 0 {
            self.stats.errors.add(errors);
        }
        if !pkts.is_empty() {
            self.stats.full.add(1);
        }
        n
    }
}

impl ShmRx {
    /// Copies the frame of `len` bytes in slot `idx` into `m` (fresh from
    /// the pool); false when the frame is dropped. A frame that fits one
    /// mbuf, the common case, is copied inline; longer ones go to
    /// [`copy_chain`](Self::copy_chain).
    #[inline(always)]
    fn copy_out(&self, idx: u32, len: usize, m: &mut Mbuf) -> bool {
        if len == 0 || len > self.ring.slot_size() {
            self.stats.errors.add(1);
            return false;
        }
        match m.append(len) {
            Some(buf) => {
                self.ring.read(idx, 0, buf);
                true
            }
            None => self.copy_chain(idx, len, m),
        }
    }

    /// [`copy_out`](Self::copy_out) for a frame longer than `m`'s room:
    /// fills `m` and chains more mbufs for the rest.
    #[cold]
    #[inline(never)]
    fn copy_chain(&self, idx: u32, len: usize, m: &mut Mbuf) -> bool {
        let first = len.min(m.tailroom());
        match m.append(first) {
            Some(buf) => self.ring.read(idx, 0, buf),
            None => return false,
        }
        let mut at = first;
        while at < len {
            let Ok(mut seg) = self.pool.get() else {
                self.stats.nombuf.add(1);
                return false;
            };
            let take = (len - at).min(seg.tailroom());
            match seg.append(take) {
                Some(buf) => self.ring.read(idx, at, buf),
                None => return false,
            }
            at += take;
            if m.chain(seg).is_err() {
                self.stats.errors.add(1);
                return false;
            }
        }
        true
    }
}

impl RxQueue for ShmRx {
    #[inline]
    fn rx_burst(&mut self, out: &mut Pkts, max: usize) -> usize {
        // An empty poll, most polls of an idle port, is this one look at
        // the next slot, with no set-up for the copying below.
        // Relaxed: only a hint; `receive` orders the slot with an Acquire
        // load before reading it.
        let c = self.ring.ctrl(self.tail).load(Ordering::Relaxed);
        if c >> 16 != seq_of(self.tail) || max == 0 {
            return 0;
        }
        let n = self.receive(out, max);
        self.stamp.apply(out, n)
    }
}

impl ShmRx {
    /// `rx_burst` once a frame is ready.
    #[inline(never)]
    fn receive(&mut self, out: &mut Pkts, max: usize) -> usize {
        if !self.live.load(Ordering::Relaxed) {
            return 0;
        }
        let room = max.min(out.capacity() - out.len());
        // Count the frames ready: slots from the tail whose ctrl word
        // carries the seq of their index.
        let mut n = 0;
        while n < room {
            let idx = self.tail.wrapping_add(n as u32);
            // Acquire: pairs with the producer's Release store of the ctrl
            // word, so the frame bytes it announces are complete.
            let c = self.ring.ctrl(idx).load(Ordering::Acquire);
            if c >> 16 != seq_of(idx) {
                break;
            }
            n += 1;
        }
        if n == 0 {
            return 0;
        }
        let before = out.len();
        if self.pool.get_bulk(out, n).is_err() {
            // Leave the frames in the ring for the next poll.
            self.stats.nombuf.add(1);
            return 0;
        }
        // out[kept..fresh] are untouched buffers, out[fresh..end] buffers
        // of dropped frames; before slot k there are n - k untouched ones.
        let (mut kept, mut fresh, mut bytes) = (before, before + n, 0);
        for k in 0..n {
            let idx = self.tail.wrapping_add(k as u32);
            // Relaxed: the Acquire load above already ordered this slot's
            // bytes; the producer does not touch the slot again until we
            // hand it back.
            let len = (self.ring.ctrl(idx).load(Ordering::Relaxed) & 0xffff) as usize;
            if self.copy_out(idx, len, &mut out[kept]) {
                kept += 1;
                bytes += len;
            } else {
                fresh -= 1;
                out.swap(kept, fresh);
            }
        }
        out.truncate(kept);
        self.tail = self.tail.wrapping_add(n as u32);
        // Release: our reads of the slots finish before the producer may
        // reuse them; pairs with its Acquire load of the tail.
        self.ring.tail().store(self.tail, Ordering::Release);
        let got = kept - before;
        self.stats.packets.add(got as u64);
        self.stats.bytes.add(bytes as u64);
        got
    }
}

impl Device for ShmDevice {
    fn driver(&self) -> &'static str {
        "shm"
    }

    fn capabilities(&self) -> Capabilities {
        let g = self.link.geo;
        Capabilities {
            max_rx_queues: g.queues as u16,
            max_tx_queues: g.queues as u16,
            min_desc: 1,
            max_desc: u16::MAX,
            desc_pow2: false,
            offloads: Offloads::RX_SCATTER | Offloads::TX_MULTI_SEGS,
            min_mtu: 68,
            max_mtu: (g.slot_size - 18).min(u16::MAX as u32) as u16,
            rx_interrupts: false,
            needs_rx_pool: true,
        }
    }

    fn start(&mut self, ctx: StartContext<'_>) -> Result<Queues, Error> {
        let conf = ctx.conf;
        let Some(pool) = conf.rx_pool.clone() else {
            return Err(Error::Config {
                port: ctx.name.to_string(),
                what: "rx_pool",
                detail: "this port needs a mempool for receive buffers".into(),
            });
        };
        let queues = self.link.geo.queues as usize;
        let mut rx_claims = Vec::new();
        for q in 0..conf.rx_queues as usize {
            rx_claims.push(Claim::new(&self.link, q, ctx.name)?);
        }
        let mut tx_claims = Vec::new();
        for q in 0..conf.tx_queues as usize {
            tx_claims.push(Claim::new(&self.link, queues + q, ctx.name)?);
        }
        let rx = rx_claims
            .into_iter()
            .enumerate()
            .map(|(q, claim)| {
                let ring = self.link.ring(q as u16, false);
                // Relaxed: we are the tail's only writer; slots are read
                // only after an Acquire load of their ctrl word.
                let tail = ring.tail().load(Ordering::Relaxed);
                Box::new(ShmRx {
                    ring,
                    tail,
                    pool: pool.clone(),
                    live: ctx.rx_live[q].clone(),
                    stats: ctx.stats.rx(q),
                    stamp: ctx.stamp,
                    _claim: claim,
                }) as Box<dyn RxQueue>
            })
            .collect();
        let tx = tx_claims
            .into_iter()
            .enumerate()
            .map(|(q, claim)| {
                let ring = self.link.ring(q as u16, true);
                let head = ring.head().load(Ordering::Relaxed);
                // Acquire: as in tx_burst's refresh of the tail.
                let tail = ring.tail().load(Ordering::Acquire);
                Box::new(ShmTx {
                    ring,
                    head,
                    tail,
                    live: ctx.tx_live[q].clone(),
                    stats: ctx.stats.tx(q),
                    _claim: claim,
                }) as Box<dyn TxQueue>
            })
            .collect();
        Ok(Queues::new(rx, tx))
    }

    fn link(&self, started: bool) -> Link {
        Link {
            up: started && self.link.peer_alive(),
            speed_mbps: 100_000,
            full_duplex: true,
        }
    }

    fn mac_addr(&self) -> MacAddr {
        self.mac
    }
}
