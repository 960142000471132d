//! Setting up one AF_XDP socket: the mempool registered as its UMEM, the
//! four rings sized and mapped, the bind to an interface queue, the
//! busy-poll options and the XSKMAP entry that steers the queue to it.
use super::prog::Attachment;
use super::ring::{XskRing, ADDR_ENTRY, DESC_ENTRY};
use super::{Options, Posted};
use crate::netdev::{driver, Netdev};
use crate::sys::{self, Mapping};
use rpmd_pmd::port::PortConfig;
use rpmd_pmd::{Error, Mempool};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

/// One socket: its fd and where it is bound; the rings belong to the
/// queue handles.
pub(super) struct Socket {
    /// Declared first: dropped (closed) before `graveyard`, so the kernel
    /// has let go of the UMEM before the mbufs it held are freed.
    pub(super) fd: OwnedFd,
    /// Mbufs still posted to the kernel when their queue handle went:
    /// freed only once the socket is closed (the kernel may write a fill
    /// buffer, or read a TX one, until then).
    pub(super) graveyard: std::sync::Mutex<Vec<Posted>>,
    pub(super) queue: u32,
    /// None only in unit tests, which play the kernel's side of the rings.
    pub(super) prog: Option<Arc<Attachment>>,
    pub(super) zerocopy: bool,
}

impl Socket {
    pub(super) fn bury(&self, p: &mut Posted) {
        let p = std::mem::replace(p, Posted { slots: Vec::new() });
        self.graveyard
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(p);
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        // The kernel also drops the entry when the socket closes; clearing
        // it first stops redirects to a socket on its way out.
        if let Some(p) = &self.prog {
            p.remove(self.queue);
        }
    }
}

/// A socket's four rings before they are split between the handles.
pub(super) struct RingSet {
    pub(super) fill: XskRing,
    pub(super) comp: XskRing,
    pub(super) rx: XskRing,
    pub(super) tx: XskRing,
}

/// The error for a failed socket call, with the hint its errno calls for.
fn os_error(port: &str, what: &str, err: std::io::Error) -> Error {
    let hint = match err.raw_os_error() {
        Some(libc::EPERM) => " (AF_XDP needs CAP_NET_RAW and CAP_NET_ADMIN: run as root)",
        Some(libc::EAFNOSUPPORT) => " (this kernel has no AF_XDP: CONFIG_XDP_SOCKETS; use af_packet)",
        Some(libc::ENOMEM | libc::ENOBUFS) => " (the UMEM is pinned: raise ulimit -l, or run as root)",
        Some(libc::EINVAL) if what.starts_with("registering") => " (the mbuf buffers are AF_XDP's chunks: the kernel takes 2048 to 4096 bytes, more only on hugepages)",
        _ => "",
    };
    driver(port, &format!("{what}{hint}"), err)
}

/// Opens the socket for interface queue `queue`.
pub(super) fn open(
    port: &str,
    dev: &Netdev,
    pool: &Mempool,
    prog: &Arc<Attachment>,
    opts: &Options,
    queue: u32,
    conf: &PortConfig,
) -> Result<(Socket, RingSet), Error> {
    let fd = sys::socket(libc::AF_XDP, libc::SOCK_RAW, 0)
        .map_err(|e| os_error(port, "opening an AF_XDP socket", e))?;
    let b = fd.as_fd();
    register_umem(port, b, pool)?;
    let rings = make_rings(port, b, conf.rx_desc as u32, conf.tx_desc as u32)?;
    bind(port, b, dev, opts, queue)?;
    let zerocopy = sys::getsockopt::<libc::xdp_options>(b, libc::SOL_XDP, libc::XDP_OPTIONS)
        .map(|(o, _)| o.flags & libc::XDP_OPTIONS_ZEROCOPY != 0)
        .unwrap_or(false);
    if opts.busy_poll_us > 0 {
        for (opt, v, what) in [
            (libc::SO_PREFER_BUSY_POLL, 1i32, "SO_PREFER_BUSY_POLL"),
            (libc::SO_BUSY_POLL, opts.busy_poll_us as i32, "SO_BUSY_POLL"),
            (
                libc::SO_BUSY_POLL_BUDGET,
                opts.busy_budget as i32,
                "SO_BUSY_POLL_BUDGET",
            ),
        ] {
            sys::setsockopt(b, libc::SOL_SOCKET, opt, &v).map_err(|e| os_error(port, what, e))?;
        }
    }
    prog.insert(queue, sys::raw(&fd)).map_err(|d| Error::Port {
        port: port.into(),
        detail: d,
    })?;
    let sock = Socket {
        fd,
        graveyard: Default::default(),
        queue,
        prog: Some(prog.clone()),
        zerocopy,
    };
    Ok((sock, rings))
}

/// Registers the pool's whole region as the socket's UMEM, one chunk per
/// mbuf buffer (unaligned chunks: the kernel takes any offset).
fn register_umem(port: &str, b: BorrowedFd<'_>, pool: &Mempool) -> Result<(), Error> {
    let region = pool.region();
    let reg = libc::xdp_umem_reg {
        addr: region.as_ptr() as u64,
        len: region.len() as u64,
        chunk_size: pool.buf_len() as u32,
        headroom: 0,
        flags: libc::XDP_UMEM_UNALIGNED_CHUNK_FLAG,
        tx_metadata_len: 0,
    };
    sys::setsockopt(b, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg).map_err(|e| {
        os_error(
            port,
            &format!(
                "registering the mempool as UMEM ({}-byte buffers)",
                pool.buf_len()
            ),
            e,
        )
    })
}

/// Sizes the four rings and maps them at the offsets the kernel gives.
fn make_rings(port: &str, b: BorrowedFd<'_>, rx_n: u32, tx_n: u32) -> Result<RingSet, Error> {
    for (opt, n, what) in [
        (libc::XDP_UMEM_FILL_RING, rx_n, "sizing the fill ring"),
        (
            libc::XDP_UMEM_COMPLETION_RING,
            tx_n,
            "sizing the completion ring",
        ),
        (libc::XDP_RX_RING, rx_n, "sizing the RX ring"),
        (libc::XDP_TX_RING, tx_n, "sizing the TX ring"),
    ] {
        sys::setsockopt(b, libc::SOL_XDP, opt, &n).map_err(|e| os_error(port, what, e))?;
    }
    let (off, _) =
        sys::getsockopt::<libc::xdp_mmap_offsets>(b, libc::SOL_XDP, libc::XDP_MMAP_OFFSETS)
            .map_err(|e| os_error(port, "reading the ring offsets", e))?;
    let map = |o: &libc::xdp_ring_offset,
               n: u32,
               entry: usize,
               pgoff: u64,
               producer: bool|
     -> Result<XskRing, Error> {
        let len = o.desc as usize + n as usize * entry;
        let m = Mapping::new(b, len, pgoff).map_err(|e| os_error(port, "mapping a ring", e))?;
        XskRing::new(m, o, n, entry, producer).ok_or_else(|| Error::Port {
            port: port.into(),
            detail: "the kernel's ring offsets fall outside the ring mapping".into(),
        })
    };
    Ok(RingSet {
        fill: map(
            &off.fr,
            rx_n,
            ADDR_ENTRY,
            libc::XDP_UMEM_PGOFF_FILL_RING,
            true,
        )?,
        comp: map(
            &off.cr,
            tx_n,
            ADDR_ENTRY,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
            false,
        )?,
        rx: map(
            &off.rx,
            rx_n,
            DESC_ENTRY,
            libc::XDP_PGOFF_RX_RING as u64,
            false,
        )?,
        tx: map(
            &off.tx,
            tx_n,
            DESC_ENTRY,
            libc::XDP_PGOFF_TX_RING as u64,
            true,
        )?,
    })
}

/// Binds the socket to `queue` of `dev` in the mode the options ask for.
fn bind(
    port: &str,
    b: BorrowedFd<'_>,
    dev: &Netdev,
    opts: &Options,
    queue: u32,
) -> Result<(), Error> {
    let mut flags = 0u16;
    if opts.need_wakeup {
        flags |= libc::XDP_USE_NEED_WAKEUP;
    }
    match opts.zerocopy {
        Some(true) => flags |= libc::XDP_ZEROCOPY,
        Some(false) => flags |= libc::XDP_COPY,
        None => {}
    }
    let sxdp = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: dev.ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: 0,
    };
    bind_queue(b, &sxdp).map_err(|err| {
        let name = &dev.name;
        if opts.zerocopy == Some(true) && matches!(err.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EINVAL)) {
            let what = format!("binding to {name} queue {queue} in zero-copy mode ({name} offers no AF_XDP zero-copy: use zerocopy=0)");
            return driver(port, &what, err);
        }
        let hint = if err.raw_os_error() == Some(libc::EBUSY) { " (another AF_XDP socket holds that queue)" } else { "" };
        driver(port, &format!("binding to {name} queue {queue}{hint}"), err)
    })
}

/// Binds an AF_XDP socket to its queue. A queue whose previous socket was
/// just closed stays taken until the kernel's deferred release of that
/// socket's buffer pool has run (a work item): EBUSY is retried for up to
/// a second before it is an error.
fn bind_queue(fd: BorrowedFd<'_>, sxdp: &libc::sockaddr_xdp) -> std::io::Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        match sys::bind(fd, sxdp) {
            Err(e)
                if e.raw_os_error() == Some(libc::EBUSY)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            r => return r,
        }
    }
}
