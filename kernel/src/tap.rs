//! `tap:NAME[,queues=N]`: a TAP interface that rpmd creates, like DPDK's
//! `net_tap`, so the host's stack and tools (ping, tcpdump, iperf3) see
//! rpmd's traffic.
//!
//! The interface lives as long as the port (it is not persistent). Each
//! queue is one fd of a multi-queue TAP (IFF_MULTI_QUEUE): the kernel
//! spreads what it sends to the interface over the fds by flow hash.
//! Every frame is one read(2) or write(2), as in `net_tap`: a TAP fd has
//! no ring to share. Start brings the interface up, stop takes it down.
use crate::netdev::{check_ifname, driver, Netdev};
use crate::port::{copy_rx_pool, copying_port_caps, kernel_port, Backend, Live, KERNEL_FEATURES};
use crate::sys;
use crossbeam_utils::CachePadded;
use rpmd_pmd::port::features::Declared;
use rpmd_pmd::port::stats::QueueStats;
use rpmd_pmd::port::{
    Capabilities, DevArgs, Driver, Pkts, Port, Queues, RxQueue, RxStamp, TxQueue,
};
use rpmd_pmd::{DmaDomain, Error, Mbuf, Mempool};
use std::io::IoSlice;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The most queues a TAP takes (the kernel's MAX_TAP_QUEUES is 256).
const MAX_QUEUES: u16 = 16;

/// The `tap` driver.
pub struct TapDriver;

/// The interface name and queue count `args` asks for.
fn options(args: &DevArgs) -> Result<(String, u64), Error> {
    args.only_options(&["queues"])?;
    let name = args.require_target("an interface name")?.to_string();
    check_ifname(args.raw(), &name)?;
    let queues = args.opt_u64("queues", MAX_QUEUES as u64)?;
    if !(1..=MAX_QUEUES as u64).contains(&queues) {
        return Err(Error::Config {
            port: args.raw().into(),
            what: "device options",
            detail: format!("queues={queues}; 1..={MAX_QUEUES} allowed"),
        });
    }
    Ok((name, queues))
}

impl Driver for TapDriver {
    fn features(&self) -> &'static [Declared] {
        KERNEL_FEATURES
    }

    fn kind(&self) -> &'static str {
        "tap"
    }

    fn usage(&self) -> &'static str {
        "tap:NAME[,queues=N]  creates TAP interface NAME for the host's network stack"
    }

    fn check(&self, args: &DevArgs) -> Result<(), Error> {
        options(args).map(drop)
    }

    fn open(&self, args: &DevArgs, _: &DmaDomain) -> Result<Box<dyn Port>, Error> {
        let (name, queues) = options(args)?;
        let first = attach(args.raw(), &name)?;
        let dev = Netdev::open(args.raw(), &name)?;
        Ok(Box::new(kernel_port(
            args,
            dev,
            Tap {
                first: Arc::new(first),
                queues: queues as u16,
                up: false,
            },
        )))
    }
}

/// Opens one queue fd of TAP `name` (creating the interface on the first).
fn attach(port: &str, name: &str) -> Result<OwnedFd, Error> {
    let fd = sys::open_rw("/dev/net/tun").map_err(|e| {
        let hint = match e.raw_os_error() {
            Some(libc::ENOENT) => " (no /dev/net/tun: modprobe tun)",
            Some(libc::EACCES | libc::EPERM) => {
                " (needs root, or CAP_NET_ADMIN and access to /dev/net/tun)"
            }
            _ => "",
        };
        driver(port, &format!("opening /dev/net/tun{hint}"), e)
    })?;
    let mut r = sys::ifreq(name);
    sys::set_ifreq_flags(
        &mut r,
        (libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_MULTI_QUEUE) as i16,
    );
    sys::ioctl_ifreq(fd.as_fd(), libc::TUNSETIFF as libc::c_ulong, &mut r).map_err(|e| {
        let hint = match e.raw_os_error() {
            Some(libc::EPERM) => " (needs CAP_NET_ADMIN: run as root)",
            Some(libc::EINVAL | libc::EBUSY) => " (an interface of that name exists and is not a multi-queue TAP, or all its queues are taken)",
            _ => "",
        };
        driver(port, &format!("creating TAP {name}{hint}"), e)
    })?;
    sys::set_nonblocking(fd.as_fd())
        .map_err(|e| driver(port, "making the TAP fd non-blocking", e))?;
    Ok(fd)
}

struct Tap {
    first: Arc<OwnedFd>,
    queues: u16,
    up: bool,
}

impl Backend for Tap {
    fn driver(&self) -> &'static str {
        "tap"
    }

    fn capabilities(&self, _: &Netdev) -> Capabilities {
        copying_port_caps(self.queues)
    }

    fn start(
        &mut self,
        dev: &Netdev,
        ctx: &rpmd_pmd::port::StartContext<'_>,
    ) -> Result<Queues, Error> {
        let (port, conf, stats, stamp) = (ctx.name, ctx.conf, ctx.stats, ctx.stamp);
        let pool = copy_rx_pool(port, dev, conf)?;
        let n = conf.rx_queues.max(conf.tx_queues) as usize;
        let mut fds = vec![self.first.clone()];
        for _ in 1..n {
            fds.push(Arc::new(attach(port, &dev.name)?));
        }
        dev.set_flag(libc::IFF_UP, true)?;
        self.up = true;
        let mut q = Queues::default();
        for (i, fd) in fds.into_iter().enumerate() {
            if i < conf.rx_queues as usize {
                q.rx.push(Box::new(TapRx {
                    fd: fd.clone(),
                    pool: pool.clone(),
                    spare: None,
                    live: ctx.rx_live[i].clone(),
                    stats: stats.rx(i),
                    stamp,
                }));
            }
            if i < conf.tx_queues as usize {
                q.tx.push(Box::new(TapTx {
                    fd,
                    live: ctx.tx_live[i].clone(),
                    stats: stats.tx(i),
                }));
            }
        }
        Ok(q)
    }

    fn stop(&mut self, dev: &Netdev) {
        if std::mem::take(&mut self.up) {
            let _ = dev.set_flag(libc::IFF_UP, false);
        }
    }

    /// Frames the kernel dropped on their way into the TAP's queues (full
    /// while rpmd did not read): the interface's `tx_dropped`, the kernel
    /// sending into the TAP.
    fn missed(&self, dev: &Netdev) -> u64 {
        dev.counter("tx_dropped").unwrap_or(0)
    }
}

#[repr(align(128))]
struct TapRx {
    fd: Arc<OwnedFd>,
    pool: Mempool,
    /// An empty mbuf kept from the read that found nothing, so an idle
    /// poll costs one read(2) and no pool traffic.
    spare: Option<Mbuf>,
    live: Live,
    stats: Arc<CachePadded<QueueStats>>,
    stamp: RxStamp,
}

impl RxQueue for TapRx {
    fn rx_burst(&mut self, out: &mut Pkts, max: usize) -> usize {
        let room = max.min(out.capacity() - out.len());
        if room == 0 || !self.live.load(Ordering::Relaxed) {
            return 0;
        }
        let (mut got, mut bytes) = (0usize, 0u64);
        let local = self.pool.local();
        while got < room {
            let mut m = match self.spare.take() {
                Some(m) => m,
                None => match local.get() {
                    Ok(m) => m,
                    Err(_) => {
                        self.stats.nombuf.add(1);
                        break;
                    }
                },
            };
            let cap = m.tailroom();
            let Some(buf) = m.append(cap) else { break };
            match sys::read(self.fd.as_fd(), buf) {
                Ok(n) if (14..cap).contains(&n) => {
                    m.trim(cap - n);
                    bytes += n as u64;
                    out.push(m).ok();
                    got += 1;
                }
                // Shorter than an Ethernet header, or as long as the room
                // (cut short by the read): not a frame we can pass on.
                Ok(_) => self.stats.errors.add(1),
                Err(_) => {
                    // Nothing to read (EAGAIN): keep the buffer, emptied.
                    m.trim(cap);
                    self.spare = Some(m);
                    break;
                }
            }
        }
        self.stats.packets.add(got as u64);
        self.stats.bytes.add(bytes);
        self.stamp.apply(out, got)
    }

    fn interrupt_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.fd.as_fd())
    }

    fn set_interrupt(&mut self, _enabled: bool) -> Result<(), Error> {
        Ok(())
    }

    fn has_work(&self) -> bool {
        sys::poll_in(self.fd.as_fd(), 0)
    }
}

#[repr(align(128))]
struct TapTx {
    fd: Arc<OwnedFd>,
    live: Live,
    stats: Arc<CachePadded<QueueStats>>,
}

impl TxQueue for TapTx {
    fn tx_burst(&mut self, pkts: &mut Pkts) -> usize {
        if pkts.is_empty() || !self.live.load(Ordering::Relaxed) {
            return 0;
        }
        let (mut n, mut bytes, mut errors) = (0usize, 0u64, 0u64);
        for m in pkts.iter() {
            let mut parts = [IoSlice::new(&[]); 8];
            let segs = m.nb_segs();
            let r = if segs <= parts.len() {
                for (p, s) in parts.iter_mut().zip(m.segments()) {
                    *p = IoSlice::new(s);
                }
                sys::writev(self.fd.as_fd(), &parts[..segs])
            } else {
                Err(std::io::Error::from_raw_os_error(libc::EMSGSIZE))
            };
            match r {
                Ok(_) => bytes += m.pkt_len() as u64,
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => break,
                // EIO: the interface is down; others: the frame is refused.
                Err(_) => errors += 1,
            }
            n += 1;
        }
        pkts.drop_front(n);
        self.stats.packets.add(n as u64 - errors);
        self.stats.bytes.add(bytes);
        if errors > 0 {
            self.stats.errors.add(errors);
        }
        if !pkts.is_empty() {
            self.stats.full.add(1);
        }
        n
    }
}
