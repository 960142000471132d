//! The backend's control path: the vhost-user messages (through rust-vmm's
//! `vhost` crate, its backend side), and the thread that listens or
//! connects, serves one frontend at a time, and starts over when it goes.
//!
//! A message the crate cannot parse, or one whose contents we refuse (a
//! feature we did not offer, a region that overlaps another or lies past
//! its file, ring addresses outside the memory table, a vring index past
//! the queues), ends the connection: the reason is kept for the port's
//! `last_error` and written to stderr, every ring stops, the link goes
//! down, and the next frontend is served.
use super::vq::{Negotiated, VringSlot};
use crate::consts::{
    VHOST_USER_F_PROTOCOL_FEATURES, VIRTIO_F_VERSION_1, VIRTIO_NET_F_MRG_RXBUF,
    VIRTIO_RING_F_EVENT_IDX,
};
use rpmd_pmd::peer::{PeerMemory, PeerRegionInfo};
use rpmd_pmd::port::stats::Counter;
use rpmd_pmd::port::LinkNotifier;
use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use vhost::vhost_user::message::*;
use vhost::vhost_user::{Backend, BackendReqHandler, Error, GpuBackend};
use vhost::vhost_user::{VhostUserBackendReqHandlerMut, VhostUserProtocolFeatures};
use vhost::VhostUserMemoryRegionBase;

type Result<T> = std::result::Result<T, Error>;

/// Most regions a memory table may hold (GET_MAX_MEM_SLOTS).
pub(crate) const MAX_REGIONS: usize = 32;

/// What the port, its queues and the control thread share.
pub(crate) struct Shared {
    pub(crate) name: String,
    /// RX of pair q is vring 2q (we write it), TX is 2q + 1 (we read it).
    pub(crate) vrings: Vec<Arc<VringSlot>>,
    pub(crate) connected: AtomicBool,
    pub(crate) features: AtomicU64,
    pub(crate) connections: Counter,
    /// Connections ended because of something the frontend sent.
    pub(crate) rejected: Counter,
    /// SET_VRING_ENABLE messages that came before SET_FEATURES (QEMU).
    pub(crate) early_enables: Counter,
    /// The device status the frontend last set (SET_STATUS), 0 without.
    pub(crate) status: AtomicU64,
    pub(crate) last_error: Mutex<Option<String>>,
    pub(crate) quit: AtomicBool,
    /// A clone of the connection, to unblock the thread at the end.
    pub(crate) closer: Mutex<Option<UnixStream>>,
    /// The frontend's memory as mapped now, for the watchdog to see a
    /// region its frontend shrank ([`PeerMemory::faulted`]).
    pub(crate) memory: Mutex<Option<Arc<PeerMemory>>>,
    /// The port's link events.
    pub(crate) link_events: LinkNotifier,
}

impl Shared {
    pub(crate) fn new(name: &str, pairs: u16) -> Self {
        Shared {
            name: name.to_string(),
            vrings: (0..2 * pairs).map(|_| Arc::new(VringSlot::new())).collect(),
            connected: AtomicBool::new(false),
            features: AtomicU64::new(0),
            connections: Counter::default(),
            rejected: Counter::default(),
            early_enables: Counter::default(),
            status: AtomicU64::new(0),
            last_error: Mutex::new(None),
            quit: AtomicBool::new(false),
            closer: Mutex::new(None),
            memory: Mutex::new(None),
            link_events: LinkNotifier::default(),
        }
    }

    /// The port's link: a frontend connected whose first pair runs.
    pub(crate) fn link(&self) -> bool {
        self.connected.load(Ordering::Acquire) && self.link_up()
    }

    /// Raises the link events if the link changed since last told (from
    /// the control thread: at connection, after every request, at the
    /// end).
    pub(crate) fn note_link(&self) {
        self.link_events.note(self.link());
    }

    /// Whether the first queue pair runs (DPDK's vhost calls its device
    /// ready then).
    pub(crate) fn link_up(&self) -> bool {
        self.vrings[..2]
            .iter()
            .all(|v| v.running.load(Ordering::Acquire))
    }

    fn note_error(&self, what: String) {
        eprintln!("rpmd: {}: {what}", self.name);
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(what);
    }
}

/// What the port offers a frontend.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Offer {
    pub(crate) features: u64,
    pub(crate) pairs: u16,
    pub(crate) mac: [u8; 6],
    pub(crate) mtu: u16,
    /// The port's `call_coalesce` (see `Negotiated::call_coalesce`).
    pub(crate) call_coalesce: u32,
    /// The port's `fault_used_every` (see `Negotiated::fault_every`).
    #[cfg(feature = "fault-injection")]
    pub(crate) fault_every: u32,
}

/// Features the backend offers, before the port's options take some out.
pub(crate) const BASE_FEATURES: u64 = VIRTIO_F_VERSION_1
    | VIRTIO_NET_F_MRG_RXBUF
    | VIRTIO_RING_F_EVENT_IDX
    | VHOST_USER_F_PROTOCOL_FEATURES
    | crate::consts::VIRTIO_NET_F_MQ
    | crate::consts::VIRTIO_NET_F_MTU
    | crate::consts::VIRTIO_NET_F_MAC
    | crate::consts::VIRTIO_F_RING_PACKED
    | crate::consts::VIRTIO_F_IN_ORDER
    | crate::consts::VIRTIO_NET_F_CSUM
    | crate::consts::VIRTIO_NET_F_GUEST_CSUM;

/// Where frontends come from.
pub(crate) enum Endpoint {
    /// We listen on the path.
    Server(UnixListener),
    /// We connect to the path (the frontend listens).
    Client(String),
}

/// Serves frontends until `shared.quit`.
pub(crate) fn serve(ep: Endpoint, shared: Arc<Shared>, offer: Offer) {
    while !shared.quit.load(Ordering::Relaxed) {
        let Some(sock) = next_connection(&ep) else {
            continue;
        };
        let closer = sock.try_clone().ok();
        *shared.closer.lock().unwrap_or_else(|e| e.into_inner()) = closer;
        if shared.quit.load(Ordering::Relaxed) {
            break;
        }
        serve_connection(sock, &shared, offer);
        *shared.closer.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// How long the backend may spend on one request of a frontend's (reading
/// it, acting on it, writing the reply into a socket whose reader may
/// never read): past it the connection is shut down and the frontend
/// dropped. Waiting for its next request has no limit (an idle frontend
/// is no fault).
pub(crate) const PEER_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves one frontend on `sock` until it hangs up, is refused or stalls
/// a request past [`PEER_TIMEOUT`]; the rings it set up are stopped and
/// forgotten at the end.
pub(crate) fn serve_connection(sock: UnixStream, shared: &Arc<Shared>, offer: Offer) {
    shared.connections.add(1);
    shared.connected.store(true, Ordering::Release);
    shared.note_link();
    let handler = Arc::new(Mutex::new(Handler::new(shared.clone(), offer)));
    let watch = Watchdog::new(sock.try_clone().ok());
    std::thread::scope(|s| {
        let dog = s.spawn(|| watch.run(shared));
        let why = serve_requests(sock, &handler, shared, &watch);
        watch.done.store(true, Ordering::Release);
        dog.thread().unpark();
        // Joined here, not only at the scope's end: the scope waits for
        // the closure, this for the thread itself (its thread-locals).
        let _ = dog.join();
        let why = match watch.fired.lock().unwrap_or_else(|e| e.into_inner()).take() {
            Some(fired) => Some(fired),
            None => why,
        };
        // The rings go before the reason is told, so that the port's
        // `last_error` shows it from then on (not a stopped ring's).
        let broken = handler.lock().unwrap_or_else(|e| e.into_inner()).teardown();
        match why.filter(|_| !shared.quit.load(Ordering::Relaxed)) {
            Some(why) => {
                shared.note_error(format!(
                    "vhost-user frontend dropped: {why}; serving the next one"
                ));
                // After the reason: whoever sees the count sees it.
                shared.rejected.add(1);
            }
            None => {
                if let Some(broken) = broken {
                    shared.note_error(format!("{broken}; then the frontend left"));
                }
            }
        }
    });
    shared.connected.store(false, Ordering::Release);
    shared.note_link();
}

/// Handles requests until the frontend hangs up (None) or one fails
/// (the reason).
fn serve_requests(
    sock: UnixStream,
    handler: &Arc<Mutex<Handler>>,
    shared: &Arc<Shared>,
    watch: &Watchdog,
) -> Option<String> {
    let peeker = sock.try_clone().ok();
    let mut h = BackendReqHandler::from_stream(sock, handler.clone());
    let mut head = vec![0u8; HEADER + MAX_BODY];
    loop {
        // The next message, left in the socket for the crate to read once
        // it is all there (a stream socket may deliver a body in pieces,
        // and the crate reads it with one call): what the requests the
        // crate refuses but we serve (`Peeked`) asked.
        let peeked = match peeker.as_ref().map(|p| peek_message(p, &mut head)) {
            Some(Err(why)) => return Some(why),
            Some(Ok(n)) => n,
            None => 0,
        };
        watch.begin();
        let res = match h.handle_request() {
            Ok(()) => Ok(()),
            Err(Error::Disconnected | Error::PartialMessage) => Err(None),
            Err(e) => {
                let req = Peeked::of(&head[..peeked]);
                match serve_refused(e, req, handler, shared, peeker.as_ref()) {
                    None => Ok(()),
                    Some(e) => Err(Some(e)),
                }
            }
        };
        watch.end();
        shared.note_link();
        match res {
            Ok(()) => continue,
            Err(None) => return None,
            Err(Some(e)) => {
                let refusal = handler
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .refusal
                    .take();
                return Some(refusal.unwrap_or_else(|| describe(&e, &head[..peeked])));
            }
        }
    }
}

/// A message header's bytes: request, flags, body size.
const HEADER: usize = 12;
/// The longest body the crate accepts (its `MAX_MSG_SIZE`).
const MAX_BODY: usize = 0x1000;

/// Waits until the next message is in `s` whole (header and body), and
/// copies it into `buf` without consuming it: how many bytes (0 at the
/// end of the stream), or why the message will not be whole (part of it
/// still missing after [`PEER_TIMEOUT`], or the frontend gone with part
/// sent). A body longer than the crate takes is not waited for (the
/// crate refuses its header). Blocks without a limit for the first byte
/// (an idle frontend is no fault).
fn peek_message(s: &UnixStream, buf: &mut [u8]) -> std::result::Result<usize, String> {
    use crate::fd::{peek, peek_at_least};
    if peek(s, &mut buf[..HEADER]) == 0 {
        return Ok(0);
    }
    let n = peek_at_least(s, &mut buf[..HEADER], HEADER, PEER_TIMEOUT);
    if n < HEADER {
        return Err(format!("{n} bytes of a message header, then nothing"));
    }
    let size = u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
    if size > buf.len() - HEADER {
        return Ok(n);
    }
    let n = peek_at_least(s, &mut buf[..HEADER + size], HEADER + size, PEER_TIMEOUT);
    match n == HEADER + size {
        true => Ok(n),
        false => Err(format!(
            "{}: {} of its {size} body bytes, then nothing",
            request_name(&buf[..n]),
            n - HEADER
        )),
    }
}

/// The name of the request whose header begins `message`.
fn request_name(message: &[u8]) -> String {
    match message.get(..4) {
        Some(b) => {
            let code = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            match FrontendReq::try_from(code) {
                Ok(r) => format!("{r:?}"),
                Err(()) => format!("unknown request {code}"),
            }
        }
        None => "a request".to_string(),
    }
}

/// What a request the crate refused asked for, and why it was refused,
/// by name: `message` is what was peeked of it.
fn describe(e: &Error, message: &[u8]) -> String {
    let request = request_name(message);
    let why = match e {
        Error::InactiveOperation(f) => {
            format!("needs protocol feature {f:?}, which was not negotiated")
        }
        Error::InactiveFeature(f) => format!("needs feature {f:?}, which was not negotiated"),
        Error::InvalidOperation(what) => format!("refused: {what}"),
        e => e.to_string(),
    };
    format!("{request}: {why}")
}

/// Shuts a connection down when one request takes longer than
/// [`PEER_TIMEOUT`] (the crate's socket I/O blocks without a limit, and
/// retries a send that would block, so a socket timeout would not end
/// it): the blocked read or write then fails, and the frontend is
/// dropped. It also drops a frontend that shrank a file of its memory
/// under our mapping (the access that found it faulted into private
/// zeroes: see `rpmd_pmd::peer`).
struct Watchdog {
    sock: Option<UnixStream>,
    base: std::time::Instant,
    /// When the current request began, in ns after `base`, plus 1 (0:
    /// between requests).
    started: std::sync::atomic::AtomicU64,
    /// Why it shut the connection down, if it did.
    fired: Mutex<Option<String>>,
    done: std::sync::atomic::AtomicBool,
}

impl Watchdog {
    fn new(sock: Option<UnixStream>) -> Self {
        Watchdog {
            sock,
            base: std::time::Instant::now(),
            started: Default::default(),
            fired: Mutex::new(None),
            done: Default::default(),
        }
    }

    fn begin(&self) {
        let now = self.base.elapsed().as_nanos() as u64;
        self.started.store(now + 1, Ordering::Release);
    }

    fn end(&self) {
        self.started.store(0, Ordering::Release);
    }

    /// Checks every 50 ms until the connection is done (and unparks it).
    fn run(&self, shared: &Shared) {
        while !self.done.load(Ordering::Acquire) {
            std::thread::park_timeout(Duration::from_millis(50));
            if let Some(why) = self.check(shared) {
                *self.fired.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
                if let Some(s) = &self.sock {
                    let _ = s.shutdown(std::net::Shutdown::Both);
                }
                return;
            }
        }
    }

    /// Why the connection should end now, if it should.
    fn check(&self, shared: &Shared) -> Option<String> {
        let started = self.started.load(Ordering::Acquire);
        let now = self.base.elapsed().as_nanos() as u64;
        if started != 0 && now.saturating_sub(started - 1) > PEER_TIMEOUT.as_nanos() as u64 {
            return Some(format!(
                "a request (or its reply, unread) took over {PEER_TIMEOUT:?}"
            ));
        }
        let mem = shared.memory.lock().unwrap_or_else(|e| e.into_inner());
        let shrunk = mem.as_ref()?.faulted()?;
        Some(format!(
            "memory region {shrunk:x?}: its file was made shorter under our mapping \
             (the mapping now holds private zeroes)"
        ))
    }
}

/// A request the `vhost` crate's backend side reads whole and refuses,
/// which we serve from the copy of its first 20 bytes (header: request,
/// flags, size; then the body) peeked before the crate read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Peeked {
    /// SET_VRING_ENABLE: refused before SET_FEATURES, where QEMU sends
    /// it (and QEMU 8 and later wait for its ack, with REPLY_ACK).
    Enable {
        index: u32,
        on: bool,
        need_reply: bool,
    },
    /// SET_STATUS and GET_STATUS (protocol feature STATUS), which the
    /// crate does not implement.
    SetStatus {
        value: u64,
        need_reply: bool,
    },
    GetStatus,
    Other,
}

impl Peeked {
    fn of(m: &[u8]) -> Peeked {
        let word = |i: usize| {
            m.get(i..i + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        let body = m
            .get(12..20)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
        let need_reply = |flags: u32| flags & VhostUserHeaderFlag::NEED_REPLY.bits() != 0;
        match (word(0), word(4), word(8)) {
            (Some(r), Some(flags), Some(8)) if r == FrontendReq::SET_VRING_ENABLE as u32 => {
                // No body peeked: an index no vring has, ignored.
                let b = body.unwrap_or(u32::MAX as u64);
                Peeked::Enable {
                    index: b as u32,
                    on: b >> 32 == 1,
                    need_reply: need_reply(flags),
                }
            }
            (Some(r), Some(flags), Some(8)) if r == FrontendReq::SET_STATUS as u32 => {
                Peeked::SetStatus {
                    // No body peeked: a value no status has, refused.
                    value: body.unwrap_or(u64::MAX),
                    need_reply: need_reply(flags),
                }
            }
            (Some(r), _, Some(0)) if r == FrontendReq::GET_STATUS as u32 => Peeked::GetStatus,
            _ => Peeked::Other,
        }
    }
}

/// Serves `req` if the crate's error `e` was its refusal of one we serve
/// (`Peeked`); the error that ends the connection otherwise.
fn serve_refused(
    e: Error,
    req: Peeked,
    handler: &Mutex<Handler>,
    shared: &Shared,
    sock: Option<&UnixStream>,
) -> Option<Error> {
    let mut g = handler.lock().unwrap_or_else(|e| e.into_inner());
    match (e, req) {
        // SET_VRING_ENABLE before SET_FEATURES (the crate's only use of
        // this error). QEMU's virtio-net sends one for each vring when
        // the device is created, long before it starts the rings, and
        // does not send it again (7.2); DPDK's vhost library keeps what
        // it asked. The crate has read the whole message and dropped
        // it, so the connection goes on and we apply what it asked, and
        // ack it if asked to (QEMU 8 and later wait for the ack).
        (Error::InactiveFeature(f), req) if f == VhostUserVirtioFeatures::PROTOCOL_FEATURES => {
            shared.early_enables.add(1);
            match req {
                Peeked::Enable {
                    index,
                    on,
                    need_reply,
                } if index != u32::MAX => match g.set_vring_enable(index, on) {
                    Err(e) => Some(e),
                    Ok(()) if need_reply && g.reply_ack() => {
                        send_reply(sock, FrontendReq::SET_VRING_ENABLE, 0).err()
                    }
                    Ok(()) => None,
                },
                _ => None,
            }
        }
        (Error::InvalidMessage, Peeked::SetStatus { .. } | Peeked::GetStatus) => {
            g.status_request(req, sock).err()
        }
        (e, _) => Some(e),
    }
}

/// Waits (a bounded while) for the next frontend.
fn next_connection(ep: &Endpoint) -> Option<UnixStream> {
    match ep {
        Endpoint::Server(l) => match l.accept() {
            Ok((s, _)) => s.set_nonblocking(false).ok().map(|()| s),
            Err(_) => {
                std::thread::sleep(Duration::from_millis(20));
                None
            }
        },
        Endpoint::Client(path) => match UnixStream::connect(path) {
            Ok(s) => Some(s),
            Err(_) => {
                std::thread::sleep(Duration::from_millis(100));
                None
            }
        },
    }
}

/// Whether RPMD_VHOST_TRACE is set: each request is then written to
/// stderr as it is handled (for debugging a frontend's sequence).
fn tracing() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("RPMD_VHOST_TRACE").is_some())
}

macro_rules! trace {
    ($($a:tt)*) => {
        if tracing() {
            eprintln!("rpmd vhost: {}", format_args!($($a)*));
        }
    };
}

/// One connection's state.
struct Handler {
    shared: Arc<Shared>,
    offer: Offer,
    acked: u64,
    protocol: bool,
    /// Protocol features the frontend acknowledged.
    protocol_acked: VhostUserProtocolFeatures,
    /// The memory table: each region, its file, and how many times it
    /// was added (QEMU adds the same regions once per queue pair).
    regions: Vec<(PeerRegionInfo, File, u32)>,
    mem: Option<Arc<PeerMemory>>,
    /// Why the last request was refused, for the connection's end.
    refusal: Option<String>,
}

impl Handler {
    fn new(shared: Arc<Shared>, offer: Offer) -> Self {
        Handler {
            shared,
            offer,
            acked: 0,
            protocol: false,
            protocol_acked: VhostUserProtocolFeatures::empty(),
            regions: Vec::new(),
            mem: None,
            refusal: None,
        }
    }

    fn refuse<T>(&mut self, why: String) -> Result<T> {
        self.refusal = Some(why);
        Err(Error::InvalidParam)
    }

    fn slot(&mut self, index: u32) -> Result<Arc<VringSlot>> {
        match self.shared.vrings.get(index as usize) {
            Some(s) => Ok(s.clone()),
            None => {
                let n = self.shared.vrings.len();
                self.refuse(format!("vring {index}: this port has {n} vrings"))
            }
        }
    }

    /// Refuses a kick or call fd that is not an eventfd; makes one that
    /// is non-blocking ([`crate::fd::peer_eventfd`]).
    fn check_eventfd(&mut self, req: &str, index: u8, fd: Option<&File>) -> Result<()> {
        match fd.map(crate::fd::peer_eventfd) {
            Some(Err(why)) => self.refuse(format!("{req} {index}: {why}")),
            _ => Ok(()),
        }
    }

    /// Starts vring `index` if everything is set up; an error (which
    /// ends the connection) if its addresses are not in the memory.
    fn try_start(&mut self, index: u32) -> Result<()> {
        let slot = self.slot(index)?;
        let mut v = slot.lock();
        match v.start(self.mem.as_ref()) {
            Ok(running) => {
                if running {
                    slot.counters.starts.add(1);
                }
                slot.running.store(running, Ordering::Release);
                Ok(())
            }
            Err(why) => {
                slot.running.store(false, Ordering::Release);
                drop(v);
                self.refuse(format!("vring {index}: {why}"))
            }
        }
    }

    /// Counts `info` once more if the table has it already, from the same
    /// file (QEMU's vhost-user net device sends its regions once per
    /// queue pair); whether it did.
    fn add_again(&mut self, info: &PeerRegionInfo, f: &File) -> bool {
        use std::os::unix::fs::MetadataExt;
        let id = |f: &File| f.metadata().ok().map(|m| (m.dev(), m.ino()));
        let Some(same) = self
            .regions
            .iter_mut()
            .find(|(x, g, _)| x == info && id(g).is_some() && id(g) == id(f))
        else {
            return false;
        };
        same.2 += 1;
        true
    }

    /// Maps the regions again and restarts the running rings on them.
    fn remap(&mut self) -> Result<()> {
        let mut mem = PeerMemory::new();
        for (info, f, _) in &self.regions {
            if let Err(e) = mem.add(f.as_fd(), *info) {
                let why = format!("memory table: {e}");
                return self.refuse(why);
            }
        }
        let mem = Arc::new(mem);
        *self.shared.memory.lock().unwrap_or_else(|e| e.into_inner()) = Some(mem.clone());
        self.mem = Some(mem);
        for i in 0..self.shared.vrings.len() {
            let running = self.shared.vrings[i].lock().running();
            if running {
                self.try_start(i as u32)?;
            }
        }
        Ok(())
    }

    /// Stops every ring and forgets the connection's set-up; why the
    /// first ring that stopped for a fault of the driver's did, if one
    /// did.
    fn teardown(&mut self) -> Option<String> {
        let mut broken = None;
        for (i, s) in self.shared.vrings.iter().enumerate() {
            let mut v = s.lock();
            if let Some(why) = v.broken.take() {
                broken.get_or_insert(format!("vring {i} stopped: {why}"));
            }
            v.stop(&s.counters);
            v.cfg = Default::default();
            s.running.store(false, Ordering::Release);
        }
        self.mem = None;
        *self.shared.memory.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.regions.clear();
        self.shared.features.store(0, Ordering::Relaxed);
        self.shared.status.store(0, Ordering::Relaxed);
        broken
    }

    /// SET_STATUS and GET_STATUS (virtio 1.2 §2.1's device status): the
    /// status is kept and reported, with DEVICE_NEEDS_RESET added while
    /// a ring is stopped for a fault of the driver's. The rings run on
    /// their own set-up as for frontends without STATUS, so a status
    /// changes nothing else. Replies go out on `sock` as the crate's
    /// would (an ack only if asked for, with REPLY_ACK).
    fn status_request(&mut self, req: Peeked, sock: Option<&UnixStream>) -> Result<()> {
        if !self.protocol
            || !self
                .protocol_acked
                .contains(VhostUserProtocolFeatures::STATUS)
        {
            return self.refuse(format!("{req:?} without the STATUS protocol feature"));
        }
        let (code, value) = match req {
            Peeked::SetStatus { value, need_reply } => {
                if value > 0xff {
                    return self.refuse(format!(
                        "SET_STATUS {value:#x}: a device status is one byte"
                    ));
                }
                trace!("SET_STATUS {value:#x}");
                self.shared.status.store(value, Ordering::Relaxed);
                if !(need_reply && self.reply_ack()) {
                    return Ok(());
                }
                (FrontendReq::SET_STATUS, 0)
            }
            _ => {
                let broken = self.shared.vrings.iter().any(|v| v.lock().broken.is_some());
                let status = self.shared.status.load(Ordering::Relaxed)
                    | if broken { STATUS_NEEDS_RESET } else { 0 };
                (FrontendReq::GET_STATUS, status)
            }
        };
        send_reply(sock, code, value)
    }

    /// Whether the frontend acknowledged REPLY_ACK (then it waits for an
    /// ack of each request it flags NEED_REPLY).
    fn reply_ack(&self) -> bool {
        self.protocol_acked
            .contains(VhostUserProtocolFeatures::REPLY_ACK)
    }
}

/// Writes a reply to request `code` with a u64 body on `sock`, as the
/// crate would (for requests it refuses and we serve).
fn send_reply(sock: Option<&UnixStream>, code: FrontendReq, value: u64) -> Result<()> {
    let mut reply = [0u8; 20];
    reply[..4].copy_from_slice(&(code as u32).to_le_bytes());
    let flags = 1 | VhostUserHeaderFlag::REPLY.bits(); // version 1
    reply[4..8].copy_from_slice(&flags.to_le_bytes());
    reply[8..12].copy_from_slice(&8u32.to_le_bytes());
    reply[12..].copy_from_slice(&value.to_le_bytes());
    let mut sock = sock.ok_or(Error::InvalidOperation("no socket to reply on"))?;
    std::io::Write::write_all(&mut sock, &reply).map_err(Error::SocketBroken)
}

/// §2.1: DEVICE_NEEDS_RESET, the device status bit a device sets when it
/// can go on no further.
const STATUS_NEEDS_RESET: u64 = 0x40;

fn region_info(r: &VhostUserMemoryRegion) -> PeerRegionInfo {
    PeerRegionInfo {
        guest_addr: r.guest_phys_addr,
        size: r.memory_size,
        user_addr: r.user_addr,
        offset: r.mmap_offset,
    }
}

fn unsupported<T>() -> Result<T> {
    Err(Error::InvalidOperation(
        "not offered by rpmd's vhost-user backend",
    ))
}

impl VhostUserBackendReqHandlerMut for Handler {
    fn set_owner(&mut self) -> Result<()> {
        Ok(())
    }
    fn reset_owner(&mut self) -> Result<()> {
        trace!("RESET_OWNER");
        self.teardown();
        Ok(())
    }
    fn reset_device(&mut self) -> Result<()> {
        self.teardown();
        Ok(())
    }
    fn get_features(&mut self) -> Result<u64> {
        Ok(self.offer.features)
    }
    fn set_features(&mut self, features: u64) -> Result<()> {
        trace!("SET_FEATURES {features:#x}");
        let extra = features & !self.offer.features;
        if extra != 0 {
            return self.refuse(format!(
                "SET_FEATURES {features:#x} asks for {extra:#x}, which we did not offer ({:#x})",
                self.offer.features
            ));
        }
        self.acked = features;
        let neg = Negotiated {
            hdr_len: if features & (VIRTIO_F_VERSION_1 | VIRTIO_NET_F_MRG_RXBUF) != 0 {
                12
            } else {
                10
            },
            mrg: features & VIRTIO_NET_F_MRG_RXBUF != 0,
            event_idx: features & VIRTIO_RING_F_EVENT_IDX != 0,
            packed: features & crate::consts::VIRTIO_F_RING_PACKED != 0,
            csum: features & crate::consts::VIRTIO_NET_F_CSUM != 0,
            guest_csum: features & crate::consts::VIRTIO_NET_F_GUEST_CSUM != 0,
            in_order: features & crate::consts::VIRTIO_F_IN_ORDER != 0,
            call_coalesce: self.offer.call_coalesce,
            #[cfg(feature = "fault-injection")]
            fault_every: self.offer.fault_every,
        };
        self.protocol = features & VHOST_USER_F_PROTOCOL_FEATURES != 0;
        for s in &self.shared.vrings {
            let mut v = s.lock();
            v.neg = neg;
            // Without protocol features a ring is enabled by its kick.
            if !self.protocol && v.cfg.kicked {
                v.cfg.enabled = true;
            }
        }
        self.shared.features.store(features, Ordering::Relaxed);
        Ok(())
    }
    fn set_mem_table(
        &mut self,
        ctx: &[VhostUserMemoryRegion],
        files: Vec<File>,
        _postcopy_listening: Option<bool>,
    ) -> Result<Option<Vec<VhostUserMemoryRegionBase>>> {
        trace!("SET_MEM_TABLE {} regions", ctx.len());
        if ctx.len() > MAX_REGIONS || ctx.len() != files.len() {
            return self.refuse(format!(
                "SET_MEM_TABLE with {} regions and {} fds (at most {MAX_REGIONS})",
                ctx.len(),
                files.len()
            ));
        }
        self.regions.clear();
        for (info, f) in ctx.iter().map(region_info).zip(files) {
            if !self.add_again(&info, &f) {
                self.regions.push((info, f, 1));
            }
        }
        self.remap()?;
        Ok(None)
    }
    fn set_vring_num(&mut self, index: u32, num: u32) -> Result<()> {
        trace!("SET_VRING_NUM {index} {num}");
        let slot = self.slot(index)?;
        let packed = self.acked & crate::consts::VIRTIO_F_RING_PACKED != 0;
        if !(1..=32768).contains(&num) || (!packed && !num.is_power_of_two()) {
            return self.refuse(format!(
                "vring {index}: size {num} (up to 32768, a power of two for split rings)"
            ));
        }
        slot.lock().cfg.num = num as u16;
        Ok(())
    }
    fn set_vring_addr(
        &mut self,
        index: u32,
        _flags: VhostUserVringAddrFlags,
        descriptor: u64,
        used: u64,
        available: u64,
        _log: u64,
    ) -> Result<()> {
        trace!("SET_VRING_ADDR {index} desc {descriptor:#x} avail {available:#x} used {used:#x}");
        let slot = self.slot(index)?;
        let running = {
            let mut v = slot.lock();
            v.cfg.addrs = Some((descriptor, available, used));
            v.running()
        };
        if running {
            self.try_start(index)?;
        }
        Ok(())
    }
    fn set_vring_base(&mut self, index: u32, base: u32) -> Result<()> {
        trace!("SET_VRING_BASE {index} {base:#x}");
        let slot = self.slot(index)?;
        // A packed ring's base is 32 bits (QEMU's, as the spec's
        // VHOST_USER_SET_VRING_BASE describes): the next available
        // descriptor and the driver's wrap counter in bits 0-15, the used
        // position and its wrap counter in 16-31. We resume where the
        // driver's available descriptors begin, as DPDK's vhost does (a
        // chain taken and not completed by an earlier backend is still
        // available in a packed ring).
        let packed = self.acked & crate::consts::VIRTIO_F_RING_PACKED != 0;
        if base > u16::MAX as u32 && !packed {
            return self.refuse(format!(
                "vring {index}: base {base:#x} (a split ring's is 16-bit)"
            ));
        }
        slot.lock().cfg.base = base as u16;
        Ok(())
    }
    fn get_vring_base(&mut self, index: u32) -> Result<VhostUserVringState> {
        trace!("GET_VRING_BASE {index}");
        let slot = self.slot(index)?;
        let mut v = slot.lock();
        let base = v.stop(&slot.counters) as u32;
        v.cfg.kicked = false;
        slot.running.store(false, Ordering::Release);
        // Packed: the used position is the available one (every chain
        // taken was completed), in the high half.
        let base = match v.neg.packed {
            true => base | base << 16,
            false => base,
        };
        trace!("  -> base {base:#x}");
        Ok(VhostUserVringState::new(index, base))
    }
    fn set_vring_kick(&mut self, index: u8, fd: Option<File>) -> Result<()> {
        trace!("SET_VRING_KICK {index} fd {}", fd.is_some());
        let slot = self.slot(index as u32)?;
        self.check_eventfd("SET_VRING_KICK", index, fd.as_ref())?;
        {
            let mut v = slot.lock();
            v.cfg.kick = fd.map(Arc::new);
            v.cfg.kicked = true;
            if !self.protocol {
                v.cfg.enabled = true;
            }
        }
        slot.kick_gen.fetch_add(1, Ordering::Release);
        self.try_start(index as u32)
    }
    fn set_vring_call(&mut self, index: u8, fd: Option<File>) -> Result<()> {
        trace!("SET_VRING_CALL {index} fd {}", fd.is_some());
        let slot = self.slot(index as u32)?;
        self.check_eventfd("SET_VRING_CALL", index, fd.as_ref())?;
        slot.lock().cfg.call = fd;
        Ok(())
    }
    fn set_vring_err(&mut self, index: u8, _fd: Option<File>) -> Result<()> {
        self.slot(index as u32).map(drop)
    }
    fn get_protocol_features(&mut self) -> Result<VhostUserProtocolFeatures> {
        Ok(VhostUserProtocolFeatures::MQ
            | VhostUserProtocolFeatures::CONFIG
            | VhostUserProtocolFeatures::CONFIGURE_MEM_SLOTS
            | VhostUserProtocolFeatures::STATUS)
    }
    fn set_protocol_features(&mut self, features: u64) -> Result<()> {
        self.protocol_acked = VhostUserProtocolFeatures::from_bits_truncate(features);
        Ok(())
    }
    fn get_queue_num(&mut self) -> Result<u64> {
        // Vrings, not pairs: rust-vmm's frontend checks vring indices
        // against it (QEMU and DPDK compare pairs with it, and a QEMU
        // asking for more pairs than `max_virtqueue_pairs` is refused at
        // its first vring past ours).
        Ok(2 * self.offer.pairs as u64)
    }
    fn set_vring_enable(&mut self, index: u32, enable: bool) -> Result<()> {
        trace!("SET_VRING_ENABLE {index} {enable}");
        let slot = self.slot(index)?;
        slot.lock().cfg.enabled = enable;
        if enable {
            self.try_start(index)
        } else {
            let mut v = slot.lock();
            v.stop(&slot.counters);
            slot.running.store(false, Ordering::Release);
            Ok(())
        }
    }
    fn get_config(&mut self, offset: u32, size: u32, _: VhostUserConfigFlags) -> Result<Vec<u8>> {
        // §5.1.4: mac, status (LINK_UP), max_virtqueue_pairs, mtu.
        let mut cfg = [0u8; 12];
        cfg[..6].copy_from_slice(&self.offer.mac);
        cfg[6..8].copy_from_slice(&1u16.to_le_bytes());
        cfg[8..10].copy_from_slice(&self.offer.pairs.to_le_bytes());
        cfg[10..12].copy_from_slice(&self.offer.mtu.to_le_bytes());
        let (o, n) = (offset as usize, size as usize);
        match cfg.get(o..o.saturating_add(n)) {
            Some(b) => Ok(b.to_vec()),
            None => self.refuse(format!("GET_CONFIG of {n} bytes at {o}: the config has 12")),
        }
    }
    fn set_config(&mut self, _: u32, _: &[u8], _: VhostUserConfigFlags) -> Result<()> {
        unsupported()
    }
    fn set_backend_req_fd(&mut self, _backend: Backend) {}
    fn set_gpu_socket(&mut self, _gpu_backend: GpuBackend) -> Result<()> {
        unsupported()
    }
    fn get_shared_object(&mut self, _uuid: VhostUserSharedMsg) -> Result<File> {
        unsupported()
    }
    fn get_inflight_fd(&mut self, _: &VhostUserInflight) -> Result<(VhostUserInflight, File)> {
        unsupported()
    }
    fn set_inflight_fd(&mut self, _: &VhostUserInflight, _file: File) -> Result<()> {
        unsupported()
    }
    fn get_max_mem_slots(&mut self) -> Result<u64> {
        Ok(MAX_REGIONS as u64)
    }
    fn add_mem_region(
        &mut self,
        r: &VhostUserSingleMemoryRegion,
        fd: File,
        _: Option<bool>,
    ) -> Result<Option<VhostUserMemoryRegionBase>> {
        let (info, fd) = (region_info(r), fd);
        trace!("ADD_MEM_REG {info:x?}");
        if self.add_again(&info, &fd) {
            return Ok(None);
        }
        if self.regions.len() == MAX_REGIONS {
            return self.refuse(format!("ADD_MEM_REG past {MAX_REGIONS} regions"));
        }
        self.regions.push((info, fd, 1));
        if let Err(e) = self.remap() {
            self.regions.pop();
            let _ = self.remap();
            return Err(e);
        }
        Ok(None)
    }
    fn remove_mem_region(&mut self, r: &VhostUserSingleMemoryRegion) -> Result<()> {
        let i = region_info(r);
        trace!("REM_MEM_REG {i:x?}");
        let Some(k) = self
            .regions
            .iter()
            .position(|(x, ..)| x.guest_addr == i.guest_addr && x.size == i.size)
        else {
            return self.refuse(format!("REM_MEM_REG of a region we do not have: {i:x?}"));
        };
        self.regions[k].2 -= 1;
        if self.regions[k].2 > 0 {
            return Ok(());
        }
        self.regions.remove(k);
        self.remap()
    }
    fn set_device_state_fd(
        &mut self,
        _: VhostTransferStateDirection,
        _: VhostTransferStatePhase,
        _fd: File,
    ) -> Result<Option<File>> {
        unsupported()
    }
    fn check_device_state(&mut self) -> Result<()> {
        unsupported()
    }
    fn get_shmem_config(&mut self) -> Result<VhostUserShMemConfig> {
        unsupported()
    }
    fn set_log_base(&mut self, _: &VhostUserLog, _file: File) -> Result<()> {
        unsupported()
    }
}
