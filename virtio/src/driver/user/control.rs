//! The vhost-user control connection: requests with a deadline, the
//! multiqueue negotiation, programming the backend with our rings, and
//! the watch that reconnects to a backend that restarted.
use super::{PmdError, MAX_PAIRS};
use crate::consts::{VHOST_USER_F_PROTOCOL_FEATURES, VIRTIO_F_VERSION_1, VIRTIO_NET_F_MQ};
use crate::driver::net::QueueHome;
use crate::driver::split::{used_idx, zero_ring, Layout};
use crate::fd::hung_up;
use crate::{perr, psrc};
use crossbeam_utils::CachePadded;
use rpmd_pmd::domain::{Span, SpanSource};
use rpmd_pmd::port::stats::QueueStats;
use rpmd_pmd::{DmaDomain, DmaRegion};
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use vhost::vhost_user::message::VhostUserProtocolFeatures;
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vmm_sys_util::eventfd::EventFd;

/// The vhost-user connection, with a deadline on every request: the
/// `vhost` crate waits for replies without one (it retries timed-out reads
/// forever), so a watchdog shuts the socket down when a request runs past
/// `timeout`, and the pending read fails at once. The port is then dead;
/// the error names the request.
pub(super) struct Control {
    pub(super) fe: Frontend,
    pub(super) sock: UnixStream,
    pub(super) timeout: Duration,
    pub(super) port: String,
}

impl Control {
    pub(super) fn call<T>(
        &mut self,
        what: &str,
        f: impl FnOnce(&mut Frontend) -> Result<T, vhost::Error>,
    ) -> Result<T, PmdError> {
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let (sock, timeout) = (&self.sock, self.timeout);
        let fe = &mut self.fe;
        let timed_out = AtomicBool::new(false);
        let flag = &timed_out;
        let r = std::thread::scope(|s| {
            let watchdog = s.spawn(move || {
                if let Err(RecvTimeoutError::Timeout) = wait.recv_timeout(timeout) {
                    flag.store(true, Ordering::Relaxed);
                    let _ = sock.shutdown(Shutdown::Both);
                }
            });
            let r = f(fe);
            let _ = done.send(());
            // Joined, not left to the scope: the scope only waits for the
            // closure, and the thread's exit (its thread-locals freed)
            // could still be under way when the call returned (found by
            // the frontend_replies fuzz target's leak check).
            let _ = watchdog.join();
            r
        });
        r.map_err(|e| {
            // Only a request the watchdog cut short timed out; any other
            // failure (a refused message, a closed socket) is named as it
            // is.
            if timed_out.load(Ordering::Relaxed) {
                crate::verr(
                    &self.port,
                    "vhost-user request",
                    crate::Error::NoReply {
                        request: what.to_string(),
                        after: self.timeout,
                    },
                )
            } else {
                psrc(&self.port, format!("vhost-user {what}"), e)
            }
        })
    }
}

/// Negotiates what several queue pairs need: the MQ device feature, and
/// the vhost-user protocol features (MQ) that let us ask the backend how
/// many queues it has and enable each ring.
/// The protocol features several queue pairs need from what the backend
/// offers (`proto`): MQ, and CONFIG where offered.
fn multiqueue_features(
    port: &str,
    offered: u64,
    proto: VhostUserProtocolFeatures,
    pairs: u16,
) -> Result<VhostUserProtocolFeatures, PmdError> {
    let need = VIRTIO_NET_F_MQ | VHOST_USER_F_PROTOCOL_FEATURES;
    if offered & need != need {
        return Err(crate::verr(
            port,
            "feature negotiation",
            crate::Error::MissingFeature {
                need: format!("queues={pairs}"),
                feature: "VIRTIO_NET_F_MQ with vhost-user protocol features",
                side: "backend",
                offered,
                hint: "; start it with more queues (testpmd: net_vhost0,iface=...,queues=N)",
            },
        ));
    }
    if !proto.contains(VhostUserProtocolFeatures::MQ) {
        return Err(crate::verr(
            port,
            "feature negotiation",
            crate::Error::MissingFeature {
                need: format!("queues={pairs}"),
                feature: "the vhost-user MQ protocol feature",
                side: "backend",
                offered: proto.bits(),
                hint: "",
            },
        ));
    }
    Ok(proto & (VhostUserProtocolFeatures::MQ | VhostUserProtocolFeatures::CONFIG))
}

/// With MQ (and CONFIG, if `config`) negotiated: the backend has `pairs`
/// queue pairs.
pub(super) fn multiqueue(ctl: &mut Control, config: bool, pairs: u16) -> Result<(), PmdError> {
    let port = ctl.port.clone();
    // The device config's max_virtqueue_pairs is the backend's real count
    // where it offers CONFIG. Otherwise GET_QUEUE_NUM is all there is,
    // and DPDK answers it with its maximum (128) whatever its `queues=`:
    // a pair it never serves then shows as frames posted and never
    // completed (`tx_qN_unfinished` in the xstats).
    if config {
        if let Some(max) = max_virtqueue_pairs(ctl)? {
            if max < pairs {
                return Err(perr(
                    &port,
                    format!("queues={pairs}: the backend's device config allows {max} queue pairs (max_virtqueue_pairs); start it with more queues"),
                ));
            }
        }
    }
    let n = ctl.call("GET_QUEUE_NUM", |fe| fe.get_queue_num())?;
    // DPDK answers with queue pairs, QEMU's backends with vrings; either
    // way fewer than we need is an error.
    if n < pairs as u64 {
        return Err(perr(
            &port,
            format!("queues={pairs}: the backend has {n} queues"),
        ));
    }
    Ok(())
}

/// The backend's `max_virtqueue_pairs` (virtio 1.2 §5.1.4: bytes 8..10
/// of the virtio-net config), read with GET_CONFIG; `None` when it sends
/// a config too short to hold it.
fn max_virtqueue_pairs(ctl: &mut Control) -> Result<Option<u16>, PmdError> {
    use vhost::vhost_user::message::VhostUserConfigFlags;
    let (_, cfg) = ctl.call("GET_CONFIG", |fe| {
        fe.get_config(0, 10, VhostUserConfigFlags::empty(), &[0u8; 10])
    })?;
    Ok(cfg.get(8..10).map(|b| u16::from_le_bytes([b[0], b[1]])))
}

/// How we reach the backend: we connect to its socket (client, the
/// default), or we listen and it connects to us (server; `server=1`,
/// testpmd's `net_vhost` with `client=1`).
pub(super) enum Endpoint {
    /// Connect to the backend's socket.
    Client(String),
    /// Accept on our socket.
    Server(UnixListener, String),
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // Our listening socket's file goes with it.
        if let Endpoint::Server(_, path) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Endpoint {
    /// A connection to the backend: connected at once (client), or the
    /// first one to arrive within `wait` (server).
    fn connect(&self, port: &str, wait: Duration) -> Result<UnixStream, PmdError> {
        match self {
            Endpoint::Client(path) => UnixStream::connect(path).map_err(|e| {
                psrc(
                    port,
                    format!("cannot connect to the vhost-user socket {path} (is the backend running and listening?)"),
                    e,
                )
            }),
            Endpoint::Server(l, path) => {
                let deadline = std::time::Instant::now() + wait;
                loop {
                    match l.accept() {
                        Ok((s, _)) => {
                            s.set_nonblocking(false)
                                .map_err(|e| psrc(port, "socket", e))?;
                            return Ok(s);
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) => return Err(psrc(port, format!("accept on {path}"), e)),
                    }
                    if std::time::Instant::now() >= deadline {
                        return Err(perr(
                            port,
                            format!("no vhost-user backend connected to {path} within {wait:?} (start it as a client, e.g. testpmd net_vhost0,iface={path},client=1)"),
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }
}

/// Listens on `path` for a backend (server mode). A stale socket file
/// (nothing accepts on it) is replaced; a socket something listens on is
/// never removed, and anything else at the path is an error.
pub(super) fn listen(path: &str, port: &str) -> Result<Endpoint, PmdError> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => match UnixStream::connect(path) {
            Ok(_) => {
                return Err(perr(
                    port,
                    format!("server=1: another program is listening on {path}; refusing to replace its socket (stop it, or connect to it with server=0)"),
                ))
            }
            // Nobody accepts: a socket file left by a program that died.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                let _ = std::fs::remove_file(path);
            }
            Err(e) => {
                return Err(psrc(
                    port,
                    format!("server=1: cannot tell whether a program listens on {path}"),
                    e,
                ))
            }
        },
        Ok(m) => {
            return Err(perr(
                port,
                format!(
                    "server=1: {path} exists and is not a socket ({}); choose another path",
                    if m.is_dir() { "a directory" } else { "a file" }
                ),
            ))
        }
        Err(_) => {}
    }
    let l =
        UnixListener::bind(path).map_err(|e| psrc(port, format!("cannot listen on {path}"), e))?;
    l.set_nonblocking(true)
        .map_err(|e| psrc(port, "socket", e))?;
    Ok(Endpoint::Server(l, path.to_string()))
}

/// Reaches the backend through `ep` (a server waits up to `accept_wait`
/// for it) and opens the session, every reply awaited at most `timeout`:
/// SET_OWNER,
/// GET_FEATURES (VERSION_1 required) and, for `pairs > 1`, the multiqueue
/// negotiation. Returns the connection and the features offered.
pub(super) fn handshake(
    ep: &Endpoint,
    port: &str,
    accept_wait: Duration,
    timeout: Duration,
    pairs: u16,
    max_vrings: u64,
    allow_mem_slots: bool,
) -> Result<Handshake, PmdError> {
    let sock = ep.connect(port, accept_wait)?;
    let watch = sock.try_clone().map_err(|e| psrc(port, "socket", e))?;
    let mut ctl = Control {
        fe: Frontend::from_stream(sock, max_vrings),
        sock: watch,
        timeout,
        port: port.to_string(),
    };
    ctl.call("SET_OWNER", |fe| fe.set_owner())?;
    let offered = ctl.call("GET_FEATURES", |fe| fe.get_features())?;
    if offered & VIRTIO_F_VERSION_1 == 0 {
        return Err(crate::verr(
            port,
            "feature negotiation",
            crate::Error::MissingFeature {
                need: "rpmd's virtio-user".into(),
                feature: "VIRTIO_F_VERSION_1",
                side: "backend",
                offered,
                hint: "; legacy backends are not supported",
            },
        ));
    }
    let proto = if offered & VHOST_USER_F_PROTOCOL_FEATURES != 0 {
        ctl.call("GET_PROTOCOL_FEATURES", |fe| fe.get_protocol_features())?
    } else {
        VhostUserProtocolFeatures::empty()
    };
    let mut want = VhostUserProtocolFeatures::empty();
    if pairs > 1 {
        want |= multiqueue_features(port, offered, proto, pairs)?;
    }
    // Regions registered after the start reach the backend by ADD_MEM_REG,
    // acknowledged (REPLY_ACK) where offered.
    let mem_slots =
        allow_mem_slots && proto.contains(VhostUserProtocolFeatures::CONFIGURE_MEM_SLOTS);
    if mem_slots {
        want |= VhostUserProtocolFeatures::CONFIGURE_MEM_SLOTS
            | (proto & VhostUserProtocolFeatures::REPLY_ACK);
    }
    if !want.is_empty() {
        ctl.call("SET_PROTOCOL_FEATURES", |fe| fe.set_protocol_features(want))?;
    }
    if pairs > 1 {
        multiqueue(
            &mut ctl,
            want.contains(VhostUserProtocolFeatures::CONFIG),
            pairs,
        )?;
    }
    Ok(Handshake {
        ctl,
        offered,
        proto: !want.is_empty(),
        mem_slots,
    })
}

/// Region `r` as a memory-table entry: IOVA = VA, so each region at its
/// own address. The fd stays open while the domain (and the session, for
/// the rings) holds the region.
pub(super) fn mem_region(r: &DmaRegion) -> VhostUserMemoryRegionInfo {
    VhostUserMemoryRegionInfo {
        guest_phys_addr: r.as_ptr() as u64,
        memory_size: r.len() as u64,
        userspace_addr: r.as_ptr() as u64,
        mmap_offset: 0,
        mmap_handle: r.fd().as_raw_fd(),
    }
}

/// A connected backend, its features offered, and what was negotiated.
pub(super) struct Handshake {
    pub(super) ctl: Control,
    pub(super) offered: u64,
    /// Protocol features were negotiated (rings then start disabled).
    pub(super) proto: bool,
    /// CONFIGURE_MEM_SLOTS was negotiated: regions can be added later.
    pub(super) mem_slots: bool,
}

/// One vring as the backend is told about it.
pub(super) struct Vring {
    pub(super) size: u16,
    pub(super) desc: u64,
    pub(super) avail: u64,
    pub(super) used: u64,
    /// Byte offset of the queue in the ring region (to read `used.idx`),
    /// and its length.
    pub(super) offset: usize,
    pub(super) len: usize,
    pub(super) layout: Layout,
    pub(super) kick: EventFd,
    pub(super) call: EventFd,
}

/// Everything needed to program a backend with our queues, again after a
/// reconnection: negotiated features, the two shared regions, the vrings.
pub(super) struct Session {
    /// Packed rings: after a reconnection they start over (every queue
    /// restarts its ring through its home, and the new backend begins at
    /// slot 0), where split rings resume.
    pub(super) packed: bool,
    /// One per vring that has a queue handle.
    pub(super) homes: Vec<Option<Arc<QueueHome>>>,
    /// Per vring, as `homes`: its queue's counters. A queue that stopped
    /// trusting the backend says so there, and the watch then replaces the
    /// backend. Only the queue clears its flag (when it starts over),
    /// except for a ring the watch restarts because its handle is gone.
    pub(super) stats: Vec<Option<Arc<CachePadded<QueueStats>>>>,
    pub(super) features: u64,
    pub(super) proto: bool,
    /// Where the shared regions come from, and which of them the
    /// backend is given (every VA region registered when the port
    /// started, and those added since; TX hands over only frames in
    /// these).
    pub(super) domain: DmaDomain,
    pub(super) shared: Arc<SharedSpans>,
    /// CONFIGURE_MEM_SLOTS was negotiated at the start (asked of every
    /// backend that replaces the first).
    pub(super) mem_slots: bool,
    pub(super) rings: Arc<DmaRegion>,
    pub(super) vrings: Vec<Vring>,
}

/// Programs the backend: features, memory table, then each vring (size,
/// base, addresses, call and kick eventfds), enabling the rings when
/// protocol features were negotiated. A vring's base is the backend's
/// next avail index: 0 for a ring that starts over (`fresh(i)`);
/// otherwise, after a reconnection, the `used.idx` the previous backend
/// left, so buffers it took but never returned are taken again (TX frames
/// may go out twice; RX buffers are reused).
pub(super) fn program(
    ctl: &mut Control,
    s: &Session,
    shared: &[Span],
    fresh: impl Fn(usize) -> bool,
) -> Result<(), PmdError> {
    let features = s.features;
    ctl.call("SET_FEATURES", |fe| fe.set_features(features))?;
    let entry = mem_region;
    let mut mem = Vec::with_capacity(shared.len() + 1);
    s.domain.for_each_region(|r| {
        let a = r.as_ptr() as u64;
        if shared.iter().any(|sp| sp.start == a) {
            mem.push(entry(r));
        }
    });
    mem.push(entry(&s.rings));
    ctl.call("SET_MEM_TABLE", |fe| fe.set_mem_table(&mem))?;
    for (i, v) in s.vrings.iter().enumerate() {
        let base = match (fresh(i), s.packed) {
            // vhost-user: a packed ring's base carries the avail wrap
            // counter in bit 15; it starts at 1.
            (true, true) => 1 << 15,
            (true, false) => 0,
            (false, false) => used_idx(&s.rings, v.offset, &v.layout),
            (false, true) => {
                return Err(perr(
                    &ctl.port,
                    "packed rings cannot resume where a backend left them; they start over",
                ))
            }
        };
        ctl.call("SET_VRING_NUM", |fe| fe.set_vring_num(i, v.size))?;
        ctl.call("SET_VRING_BASE", |fe| fe.set_vring_base(i, base))?;
        let cfg = VringConfigData {
            queue_max_size: v.size,
            queue_size: v.size,
            flags: 0,
            desc_table_addr: v.desc,
            used_ring_addr: v.used,
            avail_ring_addr: v.avail,
            log_addr: None,
        };
        ctl.call("SET_VRING_ADDR", |fe| fe.set_vring_addr(i, &cfg))?;
        ctl.call("SET_VRING_CALL", |fe| fe.set_vring_call(i, &v.call))?;
        ctl.call("SET_VRING_KICK", |fe| fe.set_vring_kick(i, &v.kick))?;
    }
    if s.proto {
        // With protocol features, rings start disabled (vhost-user spec,
        // "Ring states").
        for i in 0..s.vrings.len() {
            ctl.call("SET_VRING_ENABLE", |fe| fe.set_vring_enable(i, true))?;
        }
    }
    Ok(())
}

/// What the watch shares with the port.
pub(super) struct Watched {
    pub(super) ctl: Mutex<Control>,
    /// The backend is connected and programmed.
    pub(super) connected: AtomicBool,
    /// Reconnections so far.
    pub(super) reconnects: AtomicU64,
    /// The port is stopping: the watch ends.
    pub(super) quit: AtomicBool,
    /// The connected backend took CONFIGURE_MEM_SLOTS (ADD_MEM_REG).
    pub(super) mem_slots: AtomicBool,
    /// The port's link events.
    pub(super) link_events: rpmd_pmd::port::LinkNotifier,
}

impl Watched {
    /// Records whether the backend is connected and programmed, and tells
    /// the port's link events when that changed.
    pub(super) fn set_connected(&self, up: bool) {
        self.connected.store(up, Ordering::Release);
        self.link_events.note(up);
    }
}

/// The regions a backend was given besides the rings: the memory table
/// sent at the start, and the regions added since by ADD_MEM_REG. TX
/// queues follow it ([`Reach::following`](rpmd_pmd::domain::Reach)): a
/// region joins only once the backend has it. Its lock orders a region's
/// addition against a reconnection's memory table: whichever comes first,
/// the new backend gets the region.
#[derive(Default)]
pub(super) struct SharedSpans {
    spans: Mutex<Vec<Span>>,
    generation: AtomicU64,
}

impl SharedSpans {
    pub(super) fn new(spans: Vec<Span>) -> SharedSpans {
        SharedSpans {
            spans: Mutex::new(spans),
            generation: AtomicU64::new(0),
        }
    }

    /// Holds the set as it is (for a memory table and the connection
    /// that follows it).
    pub(super) fn hold(&self) -> std::sync::MutexGuard<'_, Vec<Span>> {
        self.spans.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Removes the span starting at `start` through `guard`; whether there
    /// was one. TX sees the change at its next miss.
    pub(super) fn remove(&self, guard: &mut Vec<Span>, start: u64) -> bool {
        let n = guard.len();
        guard.retain(|s| s.start != start);
        if guard.len() == n {
            return false;
        }
        self.generation.fetch_add(1, Ordering::Release);
        true
    }

    /// Adds `span` through `guard` (from `hold`); TX sees it from now on.
    pub(super) fn push(&self, guard: &mut Vec<Span>, span: Span) {
        guard.push(span);
        // Release: the span before the generation a TX queue reads.
        self.generation.fetch_add(1, Ordering::Release);
    }
}

impl SpanSource for SharedSpans {
    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
    fn spans(&self) -> Vec<Span> {
        self.hold().clone()
    }
}

/// Watches the connection of a started port: when the backend hangs up,
/// or a queue stopped trusting it (its ring saw the backend break the
/// protocol; the connection is then closed), marks the link down and
/// tries every 100 ms to connect again (a restarted backend listens on
/// the same path); once connected, programs it with the same queues and
/// marks the link up. The data path runs on meanwhile: TX fills its
/// rings and RX finds nothing until the backend is back.
///
/// Which rings start over: all of them after a fault and on packed rings
/// (each queue restarts at its next burst, and the watch restarts those
/// whose handle was dropped); on split rings otherwise only those whose
/// handle was dropped, while the others resume where the old backend
/// left them.
pub(super) fn watch(w: Arc<Watched>, s: Session, ep: Arc<Endpoint>, pairs: u16) {
    let port = w.ctl.lock().unwrap_or_else(|e| e.into_inner()).port.clone();
    while !w.quit.load(Ordering::Relaxed) {
        let fault = s
            .stats
            .iter()
            .flatten()
            .any(|q| q.stopped.load(Ordering::Relaxed));
        let gone = {
            let c = w.ctl.lock().unwrap_or_else(|e| e.into_inner());
            if fault {
                let _ = c.sock.shutdown(Shutdown::Both);
            }
            fault || hung_up(c.sock.as_fd(), 0)
        };
        if !gone {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        w.set_connected(false);
        note(
            &port,
            if fault {
                "a queue stopped trusting the backend (see device_errors); connection closed, link down, reconnecting"
            } else {
                "backend hung up; link down, reconnecting"
            },
        );
        if fault {
            // A backend we hung up on may still be in the middle of its
            // rings: give it time to stop before any ring starts over.
            std::thread::sleep(DROP_GRACE);
        }
        let all_fresh = fault || s.packed;
        if all_fresh {
            // The old backend is gone, so the rings may start over; each
            // queue does so at its next burst. Sleepers on rx interrupts
            // are woken to make that burst.
            for h in s.homes.iter().flatten() {
                h.ask();
            }
            for v in s.vrings.iter().step_by(2) {
                let _ = v.call.write(1);
            }
        }
        if reconnect(&w, &s, &ep, pairs, all_fresh) {
            w.reconnects.fetch_add(1, Ordering::Relaxed);
            w.set_connected(true);
            note(&port, "backend back; link up");
        }
    }
}

/// How long a backend the port hung up on gets to stop using its rings
/// before they start over.
const DROP_GRACE: Duration = Duration::from_millis(100);

/// Connects to a new backend and programs it (see [`watch`]); false when
/// the port stops first.
fn reconnect(w: &Watched, s: &Session, ep: &Endpoint, pairs: u16, all_fresh: bool) -> bool {
    let (port, timeout) = {
        let c = w.ctl.lock().unwrap_or_else(|e| e.into_inner());
        (c.port.clone(), c.timeout)
    };
    while !w.quit.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        let max = 2 * MAX_PAIRS as u64;
        // A server only looks for a waiting client; the loop polls.
        let wait = Duration::ZERO;
        let Ok(Handshake {
            ctl: mut c,
            offered,
            mem_slots,
            ..
        }) = handshake(ep, &port, wait, timeout, pairs, max, s.mem_slots)
        else {
            continue;
        };
        let need = s.features & !VHOST_USER_F_PROTOCOL_FEATURES;
        if offered & need != need {
            note(
                &port,
                &format!("the new backend lacks features {:#x}", need & !offered),
            );
            continue;
        }
        if all_fresh {
            // A queue restarts at its next burst; the link stays down
            // until every one has, or its handle is gone.
            while !s.homes.iter().flatten().all(|h| h.settled()) {
                if w.quit.load(Ordering::Relaxed) {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let fresh = restart_dropped(s, all_fresh, &port);
        // The shared set stays as it is from the memory table to the new
        // connection's taking over: a region added meanwhile waits, and
        // then goes to the new backend (see `SharedSpans`).
        let set = s.shared.hold();
        if program(&mut c, s, &set, |i| fresh[i]).is_ok() {
            *w.ctl.lock().unwrap_or_else(|e| e.into_inner()) = c;
            w.mem_slots.store(mem_slots, Ordering::Release);
            // Connected before the set is let go: a region added next is
            // sent to this backend.
            w.set_connected(true);
            drop(set);
            return true;
        }
    }
    false
}

/// Starts over the rings whose queue handle was dropped (no old backend
/// uses them now): their parked mbufs go back to the pool and their memory
/// is zeroed. Returns, per vring, whether it starts over (those, and every
/// ring when `all_fresh`).
fn restart_dropped(s: &Session, all_fresh: bool, port: &str) -> Vec<bool> {
    s.vrings
        .iter()
        .zip(&s.homes)
        .zip(&s.stats)
        .map(|((v, h), st)| {
            let Some(h) = h.as_ref().filter(|h| h.handle_dropped()) else {
                return all_fresh;
            };
            if let Err(e) = zero_ring(&s.rings, v.offset, v.len) {
                note(port, &e.to_string());
            }
            drop(h.take_parked());
            // Nobody else will clear it: the queue is gone.
            if let Some(st) = st {
                st.stopped.store(false, Ordering::Relaxed);
            }
            true
        })
        .collect()
}

/// One line on stderr (the pmd crates do not log through a framework).
fn note(port: &str, what: &str) {
    eprintln!("rpmd: {port}: {what}");
}
