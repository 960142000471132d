//! `af_packet:IFNAME[,qdisc_bypass=0|1][,frames=N][,queues=N]`: a packet
//! socket with TPACKET_V2 mmap rings, like DPDK's `net_af_packet`, for
//! kernels or interfaces where AF_XDP is not available.
//!
//! Each queue is one socket with an RX ring and a TX ring in one mapping.
//! A frame slot's status word is the hand-off: the kernel sets
//! TP_STATUS_USER on an RX slot it filled and we give it back with
//! TP_STATUS_KERNEL; we set TP_STATUS_SEND_REQUEST on a TX slot we filled,
//! kick the socket once per burst, and the kernel returns the slot as
//! TP_STATUS_AVAILABLE once sent. Frames are copied between the slots and
//! mbufs (a copy the kernel makes anyway for packet sockets). Several
//! queues share the interface's traffic through a PACKET_FANOUT hash
//! group. The kernel's drop counter (PACKET_STATISTICS) is an xstat.
use crate::netdev::{driver, Netdev};
use crate::port::{check_room, frame_len, rx_pool, Backend, KernelPort, Live};
use crate::sys::{self, Mapping};
use crossbeam_utils::CachePadded;
use rpmd_pmd::port::stats::{QueueStats, StatsBlock};
use rpmd_pmd::port::{
    Capabilities, DevArgs, Driver, Offloads, Pkts, Port, PortConfig, Queues, RxQueue, TxQueue,
    Xstat,
};
use rpmd_pmd::{DmaDomain, Error, Mbuf, Mempool};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

// TPACKET_V2 (linux/if_packet.h).
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
const TP_STATUS_WRONG_FORMAT: u32 = 4;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
/// Where TX data starts in a slot without PACKET_TX_HAS_OFF:
/// TPACKET2_HDRLEN - sizeof(struct sockaddr_ll).
const TX_DATA: usize = 32;
const PACKET_IGNORE_OUTGOING: i32 = 23;
// Offsets in struct tpacket2_hdr.
const H_STATUS: usize = 0;
const H_LEN: usize = 4;
const H_SNAPLEN: usize = 8;
const H_MAC: usize = 12;
const H_VLAN_TCI: usize = 24;
const H_VLAN_TPID: usize = 26;
const _: () = assert!(std::mem::size_of::<libc::tpacket2_hdr>() == 32);
const _: () = assert!(std::mem::offset_of!(libc::tpacket2_hdr, tp_mac) == H_MAC);
const _: () = assert!(std::mem::offset_of!(libc::tpacket2_hdr, tp_vlan_tpid) == H_VLAN_TPID);

/// The `af_packet` driver.
pub struct AfPacketDriver;

struct Options {
    qdisc_bypass: bool,
    frames: u32,
    queues: u16,
}

impl Driver for AfPacketDriver {
    fn kind(&self) -> &'static str {
        "af_packet"
    }

    fn usage(&self) -> &'static str {
        "af_packet:IFNAME[,qdisc_bypass=0|1][,frames=N][,queues=N]  packet socket with TPACKET_V2 rings on a kernel interface"
    }

    fn open(&self, args: &DevArgs, _: &DmaDomain) -> Result<Box<dyn Port>, Error> {
        args.only_options(&["qdisc_bypass", "frames", "queues"])?;
        let ifname = args.require_target("an interface name")?;
        let bad = |detail: String| Error::Config {
            port: args.raw().into(),
            what: "device options",
            detail,
        };
        let frames = args.opt_u64("frames", 512)?;
        if !frames.is_power_of_two() || !(16..=65536).contains(&frames) {
            return Err(bad(format!(
                "frames={frames}; a power of two in 16..=65536"
            )));
        }
        let queues = args.opt_u64("queues", 16)?;
        if !(1..=16).contains(&queues) {
            return Err(bad(format!("queues={queues}; 1..=16 allowed")));
        }
        let qdisc_bypass = args.opt_bool("qdisc_bypass", false)?;
        let dev = Netdev::open(args.raw(), ifname)?;
        let opts = Options {
            qdisc_bypass,
            frames: frames as u32,
            queues: queues as u16,
        };
        Ok(Box::new(KernelPort::new(
            args.raw(),
            dev,
            AfPacket {
                opts,
                socks: Vec::new(),
                drops: Arc::default(),
            },
        )))
    }
}

struct AfPacket {
    opts: Options,
    socks: Vec<Arc<OwnedFd>>,
    /// PACKET_STATISTICS resets on read: the sums so far.
    drops: Arc<Mutex<(u64, u64)>>,
}

/// One socket's rings.
struct Rings {
    fd: Arc<OwnedFd>,
    map: Mapping,
    frame_size: usize,
    frames: u32,
}

impl Rings {
    fn open(port: &str, dev: &Netdev, o: &Options, fanout: Option<u32>) -> Result<Rings, Error> {
        let e = |what: &str| {
            let what = what.to_string();
            move |err: std::io::Error| {
                let hint = if err.raw_os_error() == Some(libc::EPERM) {
                    " (packet sockets need CAP_NET_RAW: run as root)"
                } else {
                    ""
                };
                driver(port, &format!("{what}{hint}"), err)
            }
        };
        let proto = (libc::ETH_P_ALL as u16).to_be() as i32;
        let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW, proto)
            .map_err(e("opening a packet socket"))?;
        let b = fd.as_fd();
        sys::setsockopt(
            b,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            &(libc::tpacket_versions::TPACKET_V2 as i32),
        )
        .map_err(e("asking for TPACKET_V2"))?;
        sys::setsockopt(b, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &1i32)
            .map_err(e("PACKET_IGNORE_OUTGOING"))?;
        if o.qdisc_bypass {
            sys::setsockopt(b, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &1i32)
                .map_err(e("PACKET_QDISC_BYPASS"))?;
        }
        // A slot holds the header, the MAC offset's alignment and a frame.
        let frame_size = (frame_len(dev.mtu()?) + 128).next_power_of_two().max(2048);
        let block = frame_size.max(4096);
        let req = libc::tpacket_req {
            tp_block_size: block as u32,
            tp_block_nr: (o.frames as usize * frame_size / block) as u32,
            tp_frame_size: frame_size as u32,
            tp_frame_nr: o.frames,
        };
        sys::setsockopt(b, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)
            .map_err(e("setting up the RX ring"))?;
        sys::setsockopt(b, libc::SOL_PACKET, libc::PACKET_TX_RING, &req)
            .map_err(e("setting up the TX ring"))?;
        let ring_bytes = o.frames as usize * frame_size;
        let map = Mapping::new(b, 2 * ring_bytes, 0).map_err(e("mapping the rings"))?;
        let mut sll: libc::sockaddr_ll = zeroed_sll();
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto as u16;
        sll.sll_ifindex = dev.ifindex as i32;
        sys::bind(b, &sll).map_err(e("binding to the interface"))?;
        if let Some(group) = fanout {
            let arg = (group & 0xffff) | (libc::PACKET_FANOUT_HASH << 16);
            sys::setsockopt(b, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg)
                .map_err(e("joining the fanout group"))?;
        }
        Ok(Rings {
            fd: Arc::new(fd),
            map,
            frame_size,
            frames: o.frames,
        })
    }
}

fn zeroed_sll() -> libc::sockaddr_ll {
    libc::sockaddr_ll {
        sll_family: 0,
        sll_protocol: 0,
        sll_ifindex: 0,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    }
}

impl Backend for AfPacket {
    fn driver(&self) -> &'static str {
        "af_packet"
    }

    fn capabilities(&self, _: &Netdev) -> Capabilities {
        Capabilities {
            max_rx_queues: self.opts.queues,
            max_tx_queues: self.opts.queues,
            min_desc: 1,
            max_desc: u16::MAX,
            desc_pow2: false,
            offloads: Offloads::TX_MULTI_SEGS,
            min_mtu: 68,
            max_mtu: 9000,
            rx_interrupts: true,
            needs_rx_pool: true,
        }
    }

    fn start(
        &mut self,
        port: &str,
        dev: &Netdev,
        conf: &PortConfig,
        stats: &StatsBlock,
        live: &Live,
    ) -> Result<Queues, Error> {
        let pool = rx_pool(port, conf)?;
        check_room(port, dev, pool.data_room(), "an rx mbuf's data room")?;
        let n = conf.rx_queues.max(conf.tx_queues) as usize;
        let fanout = (n > 1).then(|| std::process::id() ^ dev.ifindex << 8);
        let mut rings = Vec::new();
        for _ in 0..n {
            rings.push(Rings::open(port, dev, &self.opts, fanout)?);
        }
        self.socks = rings.iter().map(|r| r.fd.clone()).collect();
        *self.drops.lock().unwrap_or_else(|p| p.into_inner()) = (0, 0);
        let mut q = Queues {
            rx: Vec::new(),
            tx: Vec::new(),
        };
        for (i, r) in rings.into_iter().enumerate() {
            let r = Arc::new(r);
            if i < conf.rx_queues as usize {
                q.rx.push(Box::new(PacketRx {
                    rings: r.clone(),
                    next: 0,
                    pool: pool.clone(),
                    live: live.clone(),
                    stats: stats.rx(i),
                }));
            }
            if i < conf.tx_queues as usize {
                q.tx.push(Box::new(PacketTx {
                    rings: r,
                    next: 0,
                    live: live.clone(),
                    stats: stats.tx(i),
                }));
            }
        }
        Ok(q)
    }

    fn stop(&mut self, _: &Netdev) {
        self.socks.clear();
    }

    fn xstats(&self, out: &mut Vec<Xstat>) {
        let mut d = self.drops.lock().unwrap_or_else(|p| p.into_inner());
        for s in &self.socks {
            if let Ok((st, _)) = sys::getsockopt::<libc::tpacket_stats>(
                s.as_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
            ) {
                d.0 += st.tp_packets as u64;
                d.1 += st.tp_drops as u64;
            }
        }
        out.push(Xstat {
            name: "kernel_packet_received".into(),
            value: d.0,
        });
        out.push(Xstat {
            name: "kernel_packet_drops".into(),
            value: d.1,
        });
    }
}

#[repr(align(128))]
struct PacketRx {
    rings: Arc<Rings>,
    next: u32,
    pool: Mempool,
    live: Live,
    stats: Arc<CachePadded<QueueStats>>,
}

impl PacketRx {
    fn slot(&self, i: u32) -> usize {
        i as usize * self.rings.frame_size
    }

    /// Copies the frame in slot `at` into `m`; false to drop it.
    fn copy_frame(&self, at: usize, status: u32, m: &mut Mbuf) -> bool {
        let r = &self.rings;
        let snap = r.map.read::<u32>(at + H_SNAPLEN) as usize;
        let mac = r.map.read::<u16>(at + H_MAC) as usize;
        // The kernel's offsets, checked before use.
        if mac < 32 || mac.checked_add(snap).is_none_or(|e| e > r.frame_size) || snap < 14 {
            return false;
        }
        let vlan = status & TP_STATUS_VLAN_VALID != 0;
        let total = snap + if vlan { 4 } else { 0 };
        let Some(buf) = m.append(total) else {
            return false;
        };
        if vlan {
            // The kernel took the tag out (VLAN acceleration); put it back
            // where it was on the wire.
            let tci = r.map.read::<u16>(at + H_VLAN_TCI);
            let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 {
                r.map.read::<u16>(at + H_VLAN_TPID)
            } else {
                0x8100
            };
            r.map.copy_out(at + mac, &mut buf[..12]);
            buf[12..14].copy_from_slice(&tpid.to_be_bytes());
            buf[14..16].copy_from_slice(&tci.to_be_bytes());
            r.map.copy_out(at + mac + 12, &mut buf[16..]);
        } else {
            r.map.copy_out(at + mac, buf);
        }
        true
    }
}

impl RxQueue for PacketRx {
    fn rx_burst(&mut self, out: &mut Pkts, max: usize) -> usize {
        let room = max.min(out.capacity() - out.len());
        if room == 0 || !self.live.load(Ordering::Relaxed) {
            return 0;
        }
        let (mut got, mut bytes) = (0usize, 0u64);
        let local = self.pool.local();
        while got < room {
            let at = self.slot(self.next);
            // Acquire: pairs with the kernel's smp_wmb + status store in
            // __packet_set_status (tpacket_rcv), so the frame bytes and the
            // header fields it announces are complete.
            let status = self
                .rings
                .map
                .atomic_u32(at + H_STATUS)
                .load(Ordering::Acquire);
            if status & TP_STATUS_USER == 0 {
                break;
            }
            match local.get() {
                Ok(mut m) => {
                    if self.copy_frame(at, status, &mut m) {
                        bytes += m.pkt_len() as u64;
                        out.push(m).ok();
                        got += 1;
                    } else {
                        self.stats.errors.add(1);
                    }
                }
                Err(_) => {
                    self.stats.nombuf.add(1);
                    break;
                }
            }
            // Release: our reads of the slot finish before the kernel may
            // refill it (it checks the status with smp_rmb first).
            self.rings
                .map
                .atomic_u32(at + H_STATUS)
                .store(TP_STATUS_KERNEL, Ordering::Release);
            self.next = (self.next + 1) % self.rings.frames;
        }
        self.stats.packets.add(got as u64);
        self.stats.bytes.add(bytes);
        got
    }

    fn interrupt_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.rings.fd.as_fd())
    }

    fn set_interrupt(&mut self, _enabled: bool) -> Result<(), Error> {
        Ok(())
    }

    fn has_work(&self) -> bool {
        let at = self.slot(self.next);
        self.rings
            .map
            .atomic_u32(at + H_STATUS)
            .load(Ordering::Relaxed)
            & TP_STATUS_USER
            != 0
    }
}

#[repr(align(128))]
struct PacketTx {
    rings: Arc<Rings>,
    next: u32,
    live: Live,
    stats: Arc<CachePadded<QueueStats>>,
}

impl TxQueue for PacketTx {
    fn tx_burst(&mut self, pkts: &mut Pkts) -> usize {
        if pkts.is_empty() || !self.live.load(Ordering::Relaxed) {
            return 0;
        }
        let r = &*self.rings;
        let base = r.frames as usize * r.frame_size;
        let (mut n, mut sent, mut bytes, mut errors) = (0usize, 0u64, 0u64, 0u64);
        for m in pkts.iter() {
            let at = base + self.next as usize * r.frame_size;
            let st = r.map.atomic_u32(at + H_STATUS);
            // Acquire: pairs with the kernel's status store when it is done
            // with the slot (tpacket_destruct_skb), so it no longer reads it.
            let s = st.load(Ordering::Acquire);
            if s == TP_STATUS_WRONG_FORMAT {
                // The kernel refused the frame that was here; count it and
                // take the slot back.
                errors += 1;
            } else if s != TP_STATUS_AVAILABLE {
                break;
            }
            let len = m.pkt_len();
            if len <= r.frame_size - TX_DATA {
                let mut off = at + TX_DATA;
                for seg in m.segments() {
                    r.map.copy_in(off, seg);
                    off += seg.len();
                }
                r.map.write::<u32>(at + H_LEN, len as u32);
                // Release: the frame and its length are written before the
                // kernel sees the request (tpacket_snd reads the status,
                // then smp_rmb, then the slot).
                st.store(TP_STATUS_SEND_REQUEST, Ordering::Release);
                self.next = (self.next + 1) % r.frames;
                sent += 1;
                bytes += len as u64;
            } else {
                errors += 1;
            }
            n += 1;
        }
        if sent > 0 && sys::kick_send(r.fd.as_fd()).is_err() {
            self.stats.errors.add(1);
        }
        pkts.drop_front(n);
        self.stats.packets.add(sent);
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
