//! The vhost-user backend under test and a frontend of the tests' own:
//! rust-vmm's `vhost` crate for the messages, rings written by hand in a
//! memfd it shares, raw messages for what the crate would not send.
#![allow(dead_code)]

use crate::common;
pub use rpmd_pmd::port::{DevArgs, Pkts};
pub use rpmd_pmd::{
    DmaRegion, IovaMode, Mempool, MempoolConfig, PageSize, Port, PortConfig, Queues,
};
pub use rpmd_virtio::device::{VhostUserDevice, VhostUserPort};
pub use rpmd_virtio::vring::{split_sizes, DescFields, SplitView};
pub use std::io::Write;
pub use std::os::fd::AsRawFd;
pub use std::os::unix::net::UnixStream;
pub use std::sync::atomic::Ordering;
pub use std::time::{Duration, Instant};
pub use vhost::vhost_user::Frontend;
pub use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
pub use vmm_sys_util::eventfd::EventFd;

pub const VERSION_1: u64 = 1 << 32;
pub const RING: u16 = 64;
/// Offsets in the shared region: the two rings, then buffers.
pub const RX_RING: usize = 0;
pub const TX_RING: usize = 0x4000;
pub const BUFS: usize = 0x10000;
pub const F_NEXT: u16 = 1;
pub const F_WRITE: u16 = 2;

pub struct Backend {
    pub port: VhostUserPort,
    pub q: Queues,
    pub pool: Mempool,
    pub sock: String,
}

pub fn backend(tag: &str) -> Backend {
    let sock = format!("/tmp/rpmd-hf-{tag}-{}.sock", std::process::id());
    let pool = Mempool::new(&MempoolConfig::new(&format!("hf{tag}"), 2048)).unwrap();
    let mut port =
        VhostUserDevice::open(&DevArgs::parse(&format!("vhost-user:{sock}")).unwrap()).unwrap();
    port.configure(&PortConfig::with_pool(&pool)).unwrap();
    let q = port.start().unwrap();
    Backend {
        port,
        q,
        pool,
        sock,
    }
}

pub fn xstat(p: &dyn Port, name: &str) -> u64 {
    p.xstats()
        .into_iter()
        .find(|x| x.name == name)
        .unwrap_or_else(|| panic!("no xstat {name}"))
        .value
}

/// Waits for xstat `name` of `b` to reach `n`.
pub fn wait_xstat(b: &Backend, name: &str, n: u64) {
    let t = Instant::now();
    while xstat(&b.port, name) < n {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{name} stays below {n}; last error {:?}",
            b.port.last_error()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A good frontend (our virtio-user port) is served and frames cross
/// both ways; it goes again afterwards.
pub fn good_frontend_works(b: &mut Backend) {
    let mut reg = rpmd_pmd::Registry::new();
    rpmd_virtio::register(&mut reg);
    let fpool = Mempool::new(&MempoolConfig::new("hfgood", 1024)).unwrap();
    let mut f = reg.open(&format!("virtio-user:{}", b.sock)).unwrap();
    f.configure(&PortConfig::with_pool(&fpool)).unwrap();
    let mut fq = f.start().unwrap();
    let t = Instant::now();
    while !b.port.link().up {
        assert!(t.elapsed() < Duration::from_secs(5), "link stays down");
        std::thread::sleep(Duration::from_millis(5));
    }
    let (mut got_b, mut got_f) = (0, 0);
    let mut p = Pkts::new();
    while got_f < 10 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "good frontend: {got_b} / {got_f}"
        );
        if got_b < 10 {
            let mut m = fpool.get().unwrap();
            m.append(64)
                .unwrap()
                .copy_from_slice(&common::frame(got_b, 64));
            p.push(m).unwrap();
            fq.tx_burst(0, &mut p);
            p.clear();
        }
        got_b += b.q.rx_burst(0, &mut p, 32) as u32;
        b.q.tx_burst(0, &mut p);
        p.clear();
        got_f += fq.rx_burst(0, &mut p, 32);
        p.clear();
    }
    f.stop().unwrap();
    drop(fq);
    drop(f);
    let t = Instant::now();
    while b.port.link().up {
        assert!(t.elapsed() < Duration::from_secs(5), "link stays up");
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub fn finish(b: Backend) {
    let Backend {
        mut port, q, pool, ..
    } = b;
    port.stop().unwrap();
    drop(q);
    drop(port);
    assert_eq!(pool.available(), 2048, "every mbuf back in the pool");
}

/// The hostile frontend's memory and its connection.
pub struct Guest {
    pub mem: DmaRegion,
    pub fe: Frontend,
    pub kick: [EventFd; 2],
    pub call: [EventFd; 2],
}

impl Guest {
    pub fn connect(sock: &str) -> Guest {
        // Room for vring indices past the port's, to send them.
        Guest::with(Frontend::connect(sock, 16).unwrap())
    }

    pub fn with(fe: Frontend) -> Guest {
        let mem =
            DmaRegion::with_page_size("hfguest", 1 << 20, IovaMode::Va, PageSize::Base4K).unwrap();
        let ev = || EventFd::new(libc::EFD_NONBLOCK).unwrap();
        Guest {
            mem,
            fe,
            kick: [ev(), ev()],
            call: [ev(), ev()],
        }
    }

    pub fn base(&self) -> u64 {
        self.mem.as_ptr() as u64
    }

    pub fn region(&self, offset: u64, size: u64, at: u64) -> VhostUserMemoryRegionInfo {
        VhostUserMemoryRegionInfo {
            guest_phys_addr: at,
            memory_size: size,
            userspace_addr: at,
            mmap_offset: offset,
            mmap_handle: self.mem.fd().as_raw_fd(),
        }
    }

    /// Owner, VERSION_1, the whole region as memory.
    pub fn handshake(&mut self) {
        self.handshake_with(VERSION_1);
    }

    pub fn handshake_with(&mut self, features: u64) {
        self.fe.set_owner().unwrap();
        self.fe.get_features().unwrap();
        self.fe.set_features(features).unwrap();
        let r = self.region(0, 1 << 20, self.base());
        self.fe.set_mem_table(&[r]).unwrap();
    }

    pub fn ring_at(&self, off: usize) -> (u64, u64, u64) {
        let (d, a, _) = split_sizes(RING);
        let b = self.base() + off as u64;
        (b, b + d as u64, (b + (d + a) as u64 + 3) & !3)
    }

    /// Vring `i` at offset `off`, its kick last (which starts it).
    pub fn ring(&mut self, i: usize, off: usize) -> Result<(), vhost::Error> {
        let (desc, avail, used) = self.ring_at(off);
        self.fe.set_vring_num(i, RING)?;
        self.fe.set_vring_base(i, 0)?;
        self.fe.set_vring_addr(
            i,
            &VringConfigData {
                queue_max_size: RING,
                queue_size: RING,
                flags: 0,
                desc_table_addr: desc,
                used_ring_addr: used,
                avail_ring_addr: avail,
                log_addr: None,
            },
        )?;
        self.fe.set_vring_call(i, &self.call[i])?;
        self.fe.set_vring_kick(i, &self.kick[i])
    }

    pub fn view(&self, off: usize) -> SplitView {
        let (d, a, u) = self.ring_at(off);
        // SAFETY: the three parts lie in our 1 MiB region (offsets well
        // inside it), aligned; the backend writes them only atomically or
        // volatile, as do we through the view.
        unsafe { SplitView::new(d as *mut u8, a as *mut u8, u as *mut u8, RING) }
    }

    /// Writes `data` at buffer offset `off` of our memory.
    pub fn put(&self, off: usize, data: &[u8]) {
        // SAFETY: inside our region (the tests keep offsets below 1 MiB);
        // the backend only reads TX buffers.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.mem.as_ptr().add(off), data.len())
        };
    }
}

/// A TX frame (net header, then `len` bytes of frame `tag`) at buffer
/// offset `off`: its guest address and length.
pub fn tx_frame(g: &Guest, off: usize, tag: u32, len: usize) -> (u64, u32) {
    let mut b = vec![0u8; 12];
    b.extend_from_slice(&common::frame(tag, len));
    g.put(BUFS + off, &b);
    (g.base() + (BUFS + off) as u64, b.len() as u32)
}

pub fn wait_link_down_then_good(b: &mut Backend) {
    let t = Instant::now();
    while b.port.link().up || xstat(&b.port, "connections") == 0 {
        assert!(t.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(5));
    }
    // The connection is gone once the next one is served.
    good_frontend_works(b);
}

/// Runs `bad` on a fresh hostile connection and checks the backend drops
/// it with an error containing `why`, then serves a good frontend.
pub fn refused(b: &mut Backend, n: u64, why: &str, bad: impl FnOnce(&mut Guest)) {
    let mut g = Guest::connect(&b.sock);
    bad(&mut g);
    wait_xstat(b, "frontends_rejected", n);
    let e = b.port.last_error().unwrap_or_default();
    assert!(e.contains(why), "expected {why:?} in {e:?}");
    drop(g);
    good_frontend_works(b);
}

/// Raw bytes on the socket: a request header (request, flags, size) and
/// what follows.
pub fn raw(sock: &str, bytes: &[u8]) {
    let mut s = UnixStream::connect(sock).unwrap();
    let _ = s.write_all(bytes);
    std::thread::sleep(Duration::from_millis(50));
}

pub fn header(req: u32, size: u32) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&req.to_le_bytes());
    h.extend_from_slice(&1u32.to_le_bytes());
    h.extend_from_slice(&size.to_le_bytes());
    h
}

/// Waits (at most `limit`) for `frontends_rejected` to reach `n`.
pub fn wait_rejected(b: &Backend, n: u64, limit: Duration) {
    let t = Instant::now();
    while xstat(&b.port, "frontends_rejected") < n {
        assert!(
            t.elapsed() < limit,
            "still served after {limit:?}; last error {:?}",
            b.port.last_error()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A request on `s` (request, flags, body) and, if `reply`, the reply's
/// request, flags and u64 body.
pub fn request(
    s: &mut UnixStream,
    req: u32,
    flags: u32,
    body: &[u8],
    reply: bool,
) -> Option<(u32, u32, u64)> {
    use std::io::Read;
    let mut m = Vec::new();
    for w in [req, flags, body.len() as u32] {
        m.extend_from_slice(&w.to_le_bytes());
    }
    m.extend_from_slice(body);
    s.write_all(&m).unwrap();
    if !reply {
        return None;
    }
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut r = [0u8; 20];
    s.read_exact(&mut r).unwrap();
    let word = |i: usize| u32::from_le_bytes(r[i..i + 4].try_into().unwrap());
    assert_eq!(word(8), 8, "reply size");
    Some((
        word(0),
        word(4),
        u64::from_le_bytes(r[12..20].try_into().unwrap()),
    ))
}
