//! Packet capture to pcapng, like `dpdk-dumpcap`, written off the data
//! path.
//!
//! A [`CaptureFile`] is one pcapng file with an interface block per port.
//! Its [`Tap`]s are the data path's side: each copies the frames of a
//! burst into mbufs of the capture's own pool ([`Mbuf::copy`]) and hands
//! them, with a nanosecond timestamp, to the writer thread through a
//! single-producer ring. Nothing on the data path blocks, allocates or
//! makes a system call: when the pool or the ring is short, the frame is
//! not captured and the tap counts it as dropped. The writer thread
//! empties the rings into the file; at [`finish`](CaptureFile::finish)
//! it writes an interface statistics block per interface (frames seen,
//! frames dropped) and returns the counts.
//!
//! Any app hooks a queue with [`tap_rx`] or [`tap_tx`], which wrap a
//! queue handle and pass everything else through; l2fwd and gen do it for
//! `--pcap PORT[:rx|tx|both]=FILE`.
use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::blocks::interface_statistics::{
    InterfaceStatisticsBlock, InterfaceStatisticsOption,
};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;
use rpmd_pmd::port::stats::Counter;
use rpmd_pmd::port::{Pkts, RxQueue, TxQueue};
use rpmd_pmd::{Error as PmdError, Mbuf, Mempool, MempoolConfig};
use rpmd_ring::{Burst, Consumer, Producer, Single};
use std::borrow::Cow;
use std::io::{BufWriter, Write};
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Which way the frames of a tap go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Received by the port.
    Rx,
    /// Sent by the port.
    Tx,
}

/// A frame on its way to the writer.
struct Record {
    ns: u64,
    m: Mbuf,
}

/// Slots in each tap's ring to the writer.
const RING: usize = 4096;

/// The counters of one tap.
#[derive(Debug, Default)]
struct TapCounts {
    captured: Counter,
    dropped: Counter,
}

/// The data path's end of a capture: one per queue handle, used by the
/// lcore polling that queue.
pub struct Tap {
    ring: Producer<Record, Single, Single>,
    pool: Mempool,
    counts: Arc<TapCounts>,
}

impl Tap {
    /// Captures copies of `pkts` (all of them, or as many as the ring
    /// and the pool have room for; the rest count as dropped).
    #[inline]
    pub fn record(&self, pkts: &[Mbuf]) {
        if pkts.is_empty() {
            return;
        }
        let ns = now_ns();
        // Room is read once a burst: with one producer it only grows
        // while this burst is enqueued.
        let room = self.ring.free();
        let mut kept = 0;
        for m in pkts.iter().take(room) {
            let Ok(copy) = m.copy(&self.pool) else { break };
            if self.ring.enqueue(Record { ns, m: copy }).is_err() {
                break;
            }
            kept += 1;
        }
        self.counts.captured.add(kept as u64);
        self.counts.dropped.add((pkts.len() - kept) as u64);
    }
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// What went into a capture file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CaptureSummary {
    /// The file.
    pub path: PathBuf,
    /// Frames written.
    pub written: u64,
    /// Frames the taps could not capture (pool or ring full).
    pub dropped: u64,
}

impl CaptureSummary {
    /// The summary line an app prints at exit.
    pub fn line(&self) -> String {
        format!(
            "capture {}: {} frames written, {} not captured (capture ring or pool full)",
            self.path.display(),
            self.written,
            self.dropped
        )
    }

    /// As one JSON object, for an app's `--json` summary.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({"file": self.path, "written": self.written, "dropped": self.dropped})
    }
}

/// The capture errors: the file, or the capture pool.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The file could not be created or written.
    #[error("capture file {path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// The pcapng encoding failed.
    #[error("capture file {path}: {source}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What failed.
        #[source]
        source: pcap_file::PcapError,
    },
    /// The capture's mempool could not be made.
    #[error("capture pool: {0}")]
    Pool(#[from] PmdError),
}

/// The writer's end of one tap.
struct Source {
    iface: u32,
    dir: Direction,
    ring: Consumer<Record, Single, Single>,
    counts: Arc<TapCounts>,
}

/// A pcapng file being written: add interfaces, take taps, then
/// [`start`](Self::start) the writer; [`finish`](Self::finish) at the end.
pub struct CaptureFile {
    path: PathBuf,
    pool: Mempool,
    ifaces: Vec<String>,
    sources: Vec<Source>,
    writer: Option<JoinHandle<Result<u64, CaptureError>>>,
    quit: Arc<AtomicBool>,
    taps: Vec<Arc<TapCounts>>,
}

impl CaptureFile {
    /// A capture to `path` (created when the writer starts), with a pool
    /// of `mbufs` copies in flight.
    pub fn new(path: &Path, mbufs: u32) -> Result<CaptureFile, CaptureError> {
        let mut pc = MempoolConfig::new(&format!("pcap-{}", path.display()), mbufs);
        pc.cache_size = 64.min(mbufs / 2);
        Ok(CaptureFile {
            path: path.to_path_buf(),
            pool: Mempool::new(&pc)?,
            ifaces: Vec::new(),
            sources: Vec::new(),
            writer: None,
            quit: Arc::new(AtomicBool::new(false)),
            taps: Vec::new(),
        })
    }

    /// Adds an interface block named `name` (a port's device string);
    /// returns its id in the file.
    pub fn interface(&mut self, name: &str) -> u32 {
        if let Some(i) = self.ifaces.iter().position(|n| n == name) {
            return i as u32;
        }
        self.ifaces.push(name.to_string());
        self.ifaces.len() as u32 - 1
    }

    /// A tap for interface `iface`'s frames going `dir` (before
    /// [`start`](Self::start)).
    pub fn tap(&mut self, iface: u32, dir: Direction) -> Tap {
        let (ring, cons) = rpmd_ring::new::<Record, Single, Single>(RING).expect("a power of two");
        let counts = Arc::new(TapCounts::default());
        self.sources.push(Source {
            iface,
            dir,
            ring: cons,
            counts: counts.clone(),
        });
        self.taps.push(counts.clone());
        Tap {
            ring,
            pool: self.pool.clone(),
            counts,
        }
    }

    /// Creates the file, writes its header and interface blocks, and
    /// starts the writer thread.
    pub fn start(&mut self) -> Result<(), CaptureError> {
        let file_err = |source| CaptureError::File {
            path: self.path.clone(),
            source,
        };
        let f = std::fs::File::create(&self.path).map_err(file_err)?;
        let mut w = PcapNgWriter::new(BufWriter::with_capacity(1 << 20, f)).map_err(|source| {
            CaptureError::Format {
                path: self.path.clone(),
                source,
            }
        })?;
        for name in &self.ifaces {
            let idb = InterfaceDescriptionBlock {
                linktype: DataLink::ETHERNET,
                snaplen: 0,
                options: vec![
                    InterfaceDescriptionOption::IfName(Cow::Owned(name.clone())),
                    // Timestamps in nanoseconds.
                    InterfaceDescriptionOption::IfTsResol(9),
                ],
            };
            w.write_pcapng_block(idb)
                .map_err(|source| CaptureError::Format {
                    path: self.path.clone(),
                    source,
                })?;
        }
        let sources = std::mem::take(&mut self.sources);
        let (quit, path) = (self.quit.clone(), self.path.clone());
        let t = std::thread::Builder::new()
            .name("pcap-writer".into())
            .spawn(move || write_loop(w, sources, &quit, &path))
            .map_err(file_err)?;
        self.writer = Some(t);
        Ok(())
    }

    /// Stops the writer once the rings are empty, closes the file and
    /// says what went into it. Stop the taps' lcores first, so every
    /// frame they captured is written.
    pub fn finish(mut self) -> Result<CaptureSummary, CaptureError> {
        self.quit.store(true, Ordering::Release);
        let written = match self.writer.take() {
            Some(t) => t.join().unwrap_or_else(|_| {
                Err(CaptureError::File {
                    path: self.path.clone(),
                    source: std::io::Error::other("the writer thread panicked"),
                })
            })?,
            None => 0,
        };
        Ok(CaptureSummary {
            path: self.path.clone(),
            written,
            dropped: self.taps.iter().map(|t| t.dropped.get()).sum(),
        })
    }
}

impl Drop for CaptureFile {
    fn drop(&mut self) {
        self.quit.store(true, Ordering::Release);
        if let Some(t) = self.writer.take() {
            let _ = t.join();
        }
    }
}

/// The writer thread: empty every ring into the file until told to quit
/// (and then once more), then the statistics blocks; returns the frames
/// written.
fn write_loop<W: Write>(
    mut w: PcapNgWriter<W>,
    sources: Vec<Source>,
    quit: &AtomicBool,
    path: &Path,
) -> Result<u64, CaptureError> {
    let fmt = |source| CaptureError::Format {
        path: path.to_path_buf(),
        source,
    };
    let mut burst: Burst<Record, 64> = Burst::new();
    let mut flat = Vec::with_capacity(16 << 10);
    let mut written = 0u64;
    loop {
        // Read the flag before the rings: whatever was enqueued before a
        // quit was set is drained by this pass.
        let last = quit.load(Ordering::Acquire);
        let mut moved = 0;
        for s in &sources {
            while s.ring.dequeue_burst_into(&mut burst, 64).n > 0 {
                while let Some(r) = burst.pop() {
                    flat.clear();
                    r.m.segments().for_each(|seg| flat.extend_from_slice(seg));
                    let flags = match s.dir {
                        Direction::Rx => 1, // epb_flags: inbound
                        Direction::Tx => 2, // outbound
                    };
                    let epb = EnhancedPacketBlock {
                        interface_id: s.iface,
                        timestamp: Duration::from_nanos(r.ns),
                        original_len: flat.len() as u32,
                        data: Cow::Borrowed(&flat),
                        options: vec![EnhancedPacketOption::Flags(flags)],
                    };
                    w.write_pcapng_block(epb).map_err(fmt)?;
                    written += 1;
                    moved += 1;
                }
            }
        }
        if last {
            break;
        }
        if moved == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    write_statistics(&mut w, &sources).map_err(fmt)?;
    w.get_mut().flush().map_err(|source| CaptureError::File {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(written)
}

/// One statistics block per interface: frames its taps saw and dropped.
fn write_statistics<W: Write>(
    w: &mut PcapNgWriter<W>,
    sources: &[Source],
) -> Result<(), pcap_file::PcapError> {
    let mut ifaces: Vec<u32> = sources.iter().map(|s| s.iface).collect();
    ifaces.sort_unstable();
    ifaces.dedup();
    for i in ifaces {
        let (mut recv, mut drop) = (0, 0);
        for s in sources.iter().filter(|s| s.iface == i) {
            recv += s.counts.captured.get() + s.counts.dropped.get();
            drop += s.counts.dropped.get();
        }
        let isb = InterfaceStatisticsBlock {
            interface_id: i,
            timestamp: now_ns(),
            options: vec![
                InterfaceStatisticsOption::IsbIfRecv(recv),
                InterfaceStatisticsOption::IsbIfDrop(drop),
            ],
        };
        w.write_pcapng_block(isb)?;
    }
    Ok(())
}

/// An rx queue whose received frames are also captured.
struct TapRx {
    inner: Box<dyn RxQueue>,
    tap: Tap,
}

impl RxQueue for TapRx {
    fn rx_burst(&mut self, out: &mut Pkts, max: usize) -> usize {
        let n = self.inner.rx_burst(out, max);
        if n > 0 {
            self.tap.record(&out[out.len() - n..]);
        }
        n
    }

    fn interrupt_fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner.interrupt_fd()
    }

    fn set_interrupt(&mut self, enabled: bool) -> Result<(), PmdError> {
        self.inner.set_interrupt(enabled)
    }

    fn has_work(&self) -> bool {
        self.inner.has_work()
    }
}

/// A tx queue whose sent frames are also captured.
struct TapTx {
    inner: Box<dyn TxQueue>,
    tap: Tap,
}

impl TxQueue for TapTx {
    fn tx_burst(&mut self, pkts: &mut Pkts) -> usize {
        // The queue takes frames from the front, so what it took is the
        // first `n` of the burst as it was: copy first (as far as the
        // pool and ring have room), then keep the copies of those `n`.
        let room = self.tap.ring.free();
        let mut copies: Burst<Mbuf, { rpmd_pmd::port::MAX_BURST }> = Burst::new();
        for m in pkts.iter().take(room) {
            let Ok(c) = m.copy(&self.tap.pool) else { break };
            let _ = copies.push(c);
        }
        let n = self.inner.tx_burst(pkts);
        let copied = copies.len();
        copies.truncate(n.min(copied));
        self.tap
            .record_copies(&mut copies, n.saturating_sub(copied));
        n
    }

    fn in_flight(&mut self) -> usize {
        self.inner.in_flight()
    }
}

impl Tap {
    /// Hands over copies made already; `missed` more frames could not be
    /// copied.
    fn record_copies<const N: usize>(&self, copies: &mut Burst<Mbuf, N>, missed: usize) {
        let ns = now_ns();
        let (mut kept, mut lost) = (0u64, missed as u64);
        while let Some(m) = copies.pop() {
            match self.ring.enqueue(Record { ns, m }) {
                Ok(()) => kept += 1,
                Err(_) => lost += 1,
            }
        }
        self.counts.captured.add(kept);
        self.counts.dropped.add(lost);
    }
}

/// `rx` with its received frames captured through `tap`.
pub fn tap_rx(rx: Box<dyn RxQueue>, tap: Tap) -> Box<dyn RxQueue> {
    Box::new(TapRx { inner: rx, tap })
}

/// `tx` with its sent frames captured through `tap`.
pub fn tap_tx(tx: Box<dyn TxQueue>, tap: Tap) -> Box<dyn TxQueue> {
    Box::new(TapTx { inner: tx, tap })
}

/// One `--pcap PORT[:rx|tx|both]=FILE` option.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PcapSpec {
    /// The port (its index among the app's devices).
    pub port: usize,
    /// Capture received frames.
    pub rx: bool,
    /// Capture sent frames.
    pub tx: bool,
    /// The file.
    pub file: PathBuf,
}

impl std::str::FromStr for PcapSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let usage = "write it PORT[:rx|tx|both]=FILE, e.g. 0:rx=/tmp/p0.pcapng";
        let (what, file) = s
            .split_once('=')
            .filter(|(_, f)| !f.is_empty())
            .ok_or_else(|| format!("--pcap {s:?}: no file; {usage}"))?;
        let (port, dir) = what.split_once(':').unwrap_or((what, "both"));
        let port = port
            .parse()
            .map_err(|_| format!("--pcap {s:?}: {port:?} is not a port number; {usage}"))?;
        let (rx, tx) = match dir {
            "rx" => (true, false),
            "tx" => (false, true),
            "both" => (true, true),
            d => return Err(format!("--pcap {s:?}: direction {d:?}; {usage}")),
        };
        Ok(PcapSpec {
            port,
            rx,
            tx,
            file: file.into(),
        })
    }
}

/// The captures an app's `--pcap` options ask for: one file each (specs
/// naming the same file share it), taps handed out per queue.
pub struct Captures {
    specs: Vec<PcapSpec>,
    files: Vec<CaptureFile>,
    /// Index into `files` of each spec.
    file_of: Vec<usize>,
}

impl Captures {
    /// The files for `specs`; `names[port]` names each port's interface.
    pub fn new(specs: &[PcapSpec], names: &[String]) -> Result<Captures, String> {
        let mut c = Captures {
            specs: specs.to_vec(),
            files: Vec::new(),
            file_of: Vec::new(),
        };
        for s in specs {
            let name = names.get(s.port).ok_or_else(|| {
                format!(
                    "--pcap: port {} does not exist (the app has {} ports)",
                    s.port,
                    names.len()
                )
            })?;
            let f = match c.specs.iter().position(|o| o.file == s.file) {
                Some(k) if k < c.file_of.len() => c.file_of[k],
                _ => {
                    let f = CaptureFile::new(&s.file, 8192).map_err(|e| e.to_string())?;
                    c.files.push(f);
                    c.files.len() - 1
                }
            };
            c.files[f].interface(name);
            c.file_of.push(f);
        }
        Ok(c)
    }

    /// Whether nothing is captured.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    fn taps(&mut self, port: usize, dir: Direction, name: &str) -> Vec<Tap> {
        let mut taps = Vec::new();
        for (k, s) in self.specs.iter().enumerate() {
            let wanted = match dir {
                Direction::Rx => s.rx,
                Direction::Tx => s.tx,
            };
            if s.port == port && wanted {
                let f = &mut self.files[self.file_of[k]];
                let i = f.interface(name);
                taps.push(f.tap(i, dir));
            }
        }
        taps
    }

    /// `rx` of port `port` (named `name`), captured if asked for.
    pub fn rx(&mut self, port: usize, name: &str, mut rx: Box<dyn RxQueue>) -> Box<dyn RxQueue> {
        for t in self.taps(port, Direction::Rx, name) {
            rx = tap_rx(rx, t);
        }
        rx
    }

    /// `tx` of port `port` (named `name`), captured if asked for.
    pub fn tx(&mut self, port: usize, name: &str, mut tx: Box<dyn TxQueue>) -> Box<dyn TxQueue> {
        for t in self.taps(port, Direction::Tx, name) {
            tx = tap_tx(tx, t);
        }
        tx
    }

    /// Starts every file's writer.
    pub fn start(&mut self) -> Result<(), String> {
        self.files
            .iter_mut()
            .try_for_each(|f| f.start().map_err(|e| e.to_string()))
    }

    /// Closes every file (after the lcores stopped), adding what went
    /// into each to `done`; the first error, after all are closed.
    pub fn finish(self, done: &mut Vec<CaptureSummary>) -> Result<(), String> {
        let mut first = Ok(());
        for r in self.files.into_iter().map(CaptureFile::finish) {
            match r {
                Ok(s) => done.push(s),
                Err(e) => {
                    if first.is_ok() {
                        first = Err(format!("capture: {e}"));
                    }
                }
            }
        }
        first
    }
}
