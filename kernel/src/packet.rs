//! `af_packet:IFNAME[,qdisc_bypass=0|1][,frames=N][,queues=N][,version=2|3]`:
//! a packet socket with TPACKET_V2 (or V3) mmap rings, like DPDK's
//! `net_af_packet`, for kernels or interfaces where AF_XDP is not
//! available. V2 is the default. V3 hands RX frames over a block at a
//! time, when the block is full or after a 1 ms timeout. That made
//! receive-only traffic about 10 % faster here, but it cut a ping-pong to
//! a twentieth, since every round trip then waits for the timeout (see
//! benches/RESULTS.md, the afxdp suite). V3 is `version=3`, for
//! receive-heavy uses.
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
use crate::netdev::{check_ifname, driver, Netdev};
use crate::port::{
    copy_rx_pool, copying_port_caps, frame_len, kernel_port, Backend, Live, KERNEL_FEATURES,
};
use crate::sys::{self, Mapping};
use crossbeam_utils::CachePadded;
use rpmd_pmd::port::features::Declared;
use rpmd_pmd::port::stats::QueueStats;
use rpmd_pmd::port::{
    Capabilities, DevArgs, Driver, Pkts, Port, Queues, RxQueue, RxStamp, TxQueue, Xstat,
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
const PACKET_IGNORE_OUTGOING: i32 = 23;
/// PACKET_LOSS (linux/if_packet.h): the kernel skips a TX slot whose frame
/// it refuses instead of stopping the ring at it.
const PACKET_LOSS: i32 = 14;
/// Where a version's frame header keeps its fields (struct tpacket2_hdr,
/// struct tpacket3_hdr), and where TX data starts
/// (TPACKET{2,3}_HDRLEN - sizeof(struct sockaddr_ll)).
#[derive(Clone, Copy)]
struct Hdr {
    status: usize,
    len: usize,
    snaplen: usize,
    mac: usize,
    vlan_tci: usize,
    vlan_tpid: usize,
    tx_data: usize,
}

const V2: Hdr = Hdr {
    status: 0,
    len: 4,
    snaplen: 8,
    mac: 12,
    vlan_tci: 24,
    vlan_tpid: 26,
    tx_data: 32,
};
// tp_vlan_tci is a u32 in tpacket3's hv1; the tag is its low half (read as
// a u16 at its address on little-endian hosts, which are all we build for).
const V3: Hdr = Hdr {
    status: 20,
    len: 16,
    snaplen: 12,
    mac: 24,
    vlan_tci: 32,
    vlan_tpid: 36,
    tx_data: 48,
};
const _: () = assert!(std::mem::size_of::<libc::tpacket3_hdr>() == 48);
const _: () = assert!(std::mem::offset_of!(libc::tpacket3_hdr, tp_status) == V3.status);
const _: () = assert!(std::mem::offset_of!(libc::tpacket3_hdr, tp_mac) == V3.mac);
const _: () = assert!(std::mem::offset_of!(libc::tpacket3_hdr, hv1) == V3.vlan_tci - 4);
// Offsets in struct tpacket_block_desc (V3 RX blocks).
const B_STATUS: usize = 8;
const B_NUM_PKTS: usize = 12;
const B_FIRST: usize = 16;
/// A V3 RX block is handed to us when full or after this long (ms).
const V3_RETIRE_MS: u32 = 1;
/// V3 RX blocks.
const V3_BLOCK: usize = 64 << 10;
const _: () = assert!(std::mem::size_of::<libc::tpacket2_hdr>() == 32);
const _: () = assert!(std::mem::offset_of!(libc::tpacket2_hdr, tp_mac) == V2.mac);
const _: () = assert!(std::mem::offset_of!(libc::tpacket2_hdr, tp_vlan_tpid) == V2.vlan_tpid);

/// The `af_packet` driver.
pub struct AfPacketDriver;

struct Options {
    qdisc_bypass: bool,
    /// TPACKET_V3 (RX in blocks) instead of V2.
    v3: bool,
    frames: u32,
    queues: u16,
}

impl Driver for AfPacketDriver {
    fn features(&self) -> &'static [Declared] {
        KERNEL_FEATURES
    }

    fn kind(&self) -> &'static str {
        "af_packet"
    }

    fn usage(&self) -> &'static str {
        "af_packet:IFNAME[,qdisc_bypass=0|1][,frames=N][,queues=N][,version=2|3]  packet socket with TPACKET_V2 (or V3) rings on a kernel interface"
    }

    fn check(&self, args: &DevArgs) -> Result<(), Error> {
        options(args).map(drop)
    }

    fn open(&self, args: &DevArgs, _: &DmaDomain) -> Result<Box<dyn Port>, Error> {
        let (ifname, opts) = options(args)?;
        let dev = Netdev::open(args.raw(), ifname)?;
        Ok(Box::new(kernel_port(
            args,
            dev,
            AfPacket {
                opts,
                socks: Vec::new(),
                drops: Arc::default(),
            },
        )))
    }
}

/// The interface name and options `args` asks for.
fn options(args: &DevArgs) -> Result<(&str, Options), Error> {
    args.only_options(&["qdisc_bypass", "frames", "queues", "version"])?;
    let ifname = args.require_target("an interface name")?;
    check_ifname(args.raw(), ifname)?;
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
    let v3 = match args.opt_u64("version", 2)? {
        2 => false,
        3 => true,
        v => {
            return Err(bad(format!(
                "version={v}; 2 (TPACKET_V2, the default) or 3"
            )))
        }
    };
    let opts = Options {
        qdisc_bypass,
        v3,
        frames: frames as u32,
        queues: queues as u16,
    };
    Ok((ifname, opts))
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
    hdr: Hdr,
    /// V3: RX blocks of `block_size` bytes (V2: none; RX is frames too).
    v3_blocks: u32,
    block_size: usize,
    /// Where the TX ring starts in the mapping.
    tx_base: usize,
    /// The interface's MTU at the start: longer frames are dropped and
    /// counted before the kernel would drop them unseen (PACKET_LOSS).
    tx_mtu: usize,
}

/// Whether frame `m` is longer than the kernel sends on an interface of
/// MTU `mtu` (packet_snd's check: the MTU and the Ethernet header, and a
/// VLAN tag's 4 bytes when the frame carries one).
#[inline]
fn too_long(m: &Mbuf, mtu: usize) -> bool {
    let len = m.pkt_len();
    if len <= mtu + 14 {
        return false;
    }
    let tagged = matches!(m.data().get(12..14), Some([0x81, 0x00] | [0x88, 0xa8]));
    len > mtu + 14 + if tagged { 4 } else { 0 }
}

impl Rings {
    fn open(port: &str, dev: &Netdev, o: &Options, fanout: Option<u32>) -> Result<Rings, Error> {
        let e = |what: &'static str| move |err: std::io::Error| os_error(port, what, err);
        let proto = (libc::ETH_P_ALL as u16).to_be() as i32;
        let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW, proto)
            .map_err(e("opening a packet socket"))?;
        let b = fd.as_fd();
        let version = if o.v3 {
            libc::tpacket_versions::TPACKET_V3
        } else {
            libc::tpacket_versions::TPACKET_V2
        };
        sys::setsockopt(b, libc::SOL_PACKET, libc::PACKET_VERSION, &(version as i32))
            .map_err(e("asking for the TPACKET version"))?;
        sys::setsockopt(b, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &1i32)
            .map_err(e("PACKET_IGNORE_OUTGOING"))?;
        // Without it a frame the kernel refuses (longer than the MTU)
        // leaves its slot marked wrong-format and the kernel's TX cursor
        // on it: every later frame waits until ours wraps round.
        sys::setsockopt(b, libc::SOL_PACKET, PACKET_LOSS, &1i32).map_err(e("PACKET_LOSS"))?;
        if o.qdisc_bypass {
            sys::setsockopt(b, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &1i32)
                .map_err(e("PACKET_QDISC_BYPASS"))?;
        }
        // A slot holds the header, the MAC offset's alignment and a frame.
        let mtu = dev.mtu()?;
        let frame_size = (frame_len(mtu) + 128).next_power_of_two().max(2048);
        let geo = Geometry::new(o, frame_size);
        geo.request(port, b, o.v3)?;
        let map = Mapping::new(b, 2 * geo.ring_bytes, 0).map_err(e("mapping the rings"))?;
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
            frames: geo.frame_nr,
            hdr: if o.v3 { V3 } else { V2 },
            v3_blocks: if o.v3 { geo.block_nr } else { 0 },
            block_size: geo.block,
            tx_base: geo.ring_bytes,
            tx_mtu: mtu as usize,
        })
    }
}

/// A packet socket call's error, with the hint its errno calls for.
fn os_error(port: &str, what: &str, err: std::io::Error) -> Error {
    let hint = if err.raw_os_error() == Some(libc::EPERM) {
        " (packet sockets need CAP_NET_RAW: run as root)"
    } else {
        ""
    };
    driver(port, &format!("{what}{hint}"), err)
}

/// The sizes of one ring (RX and TX are the same).
struct Geometry {
    block: usize,
    block_nr: u32,
    frame_nr: u32,
    ring_bytes: usize,
}

impl Geometry {
    fn new(o: &Options, frame_size: usize) -> Geometry {
        let block = if o.v3 {
            V3_BLOCK.max(frame_size)
        } else {
            frame_size.max(4096)
        };
        let ring_bytes = (o.frames as usize * frame_size).max(block);
        Geometry {
            block,
            block_nr: (ring_bytes / block) as u32,
            frame_nr: (ring_bytes / frame_size) as u32,
            ring_bytes,
        }
    }

    /// Asks for the RX and TX rings (V3: the RX ring in blocks retired
    /// after V3_RETIRE_MS; a V3 TX ring takes no retire timeout).
    fn request(&self, port: &str, b: BorrowedFd<'_>, v3: bool) -> Result<(), Error> {
        let frame_size = (self.ring_bytes / self.frame_nr as usize) as u32;
        let set = |what, r: std::io::Result<()>| r.map_err(|e| os_error(port, what, e));
        if v3 {
            let req = |retire: u32| libc::tpacket_req3 {
                tp_block_size: self.block as u32,
                tp_block_nr: self.block_nr,
                tp_frame_size: frame_size,
                tp_frame_nr: self.frame_nr,
                tp_retire_blk_tov: retire,
                tp_sizeof_priv: 0,
                tp_feature_req_word: 0,
            };
            let rx = sys::setsockopt(
                b,
                libc::SOL_PACKET,
                libc::PACKET_RX_RING,
                &req(V3_RETIRE_MS),
            );
            set("setting up the RX ring", rx)?;
            let tx = sys::setsockopt(b, libc::SOL_PACKET, libc::PACKET_TX_RING, &req(0));
            set("setting up the TX ring", tx)
        } else {
            let req = libc::tpacket_req {
                tp_block_size: self.block as u32,
                tp_block_nr: self.block_nr,
                tp_frame_size: frame_size,
                tp_frame_nr: self.frame_nr,
            };
            let rx = sys::setsockopt(b, libc::SOL_PACKET, libc::PACKET_RX_RING, &req);
            set("setting up the RX ring", rx)?;
            let tx = sys::setsockopt(b, libc::SOL_PACKET, libc::PACKET_TX_RING, &req);
            set("setting up the TX ring", tx)
        }
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
        copying_port_caps(self.opts.queues)
    }

    fn start(
        &mut self,
        dev: &Netdev,
        ctx: &rpmd_pmd::port::StartContext<'_>,
    ) -> Result<Queues, Error> {
        let (port, conf, stats, stamp) = (ctx.name, ctx.conf, ctx.stats, ctx.stamp);
        let pool = copy_rx_pool(port, dev, conf)?;
        let n = conf.rx_queues.max(conf.tx_queues) as usize;
        let fanout = (n > 1).then(|| std::process::id() ^ dev.ifindex << 8);
        let mut rings = Vec::new();
        for _ in 0..n {
            rings.push(Rings::open(port, dev, &self.opts, fanout)?);
        }
        self.socks = rings.iter().map(|r| r.fd.clone()).collect();
        *self.drops.lock().unwrap_or_else(|p| p.into_inner()) = (0, 0);
        let mut q = Queues::default();
        for (i, r) in rings.into_iter().enumerate() {
            let r = Arc::new(r);
            if i < conf.rx_queues as usize {
                q.rx.push(Box::new(PacketRx {
                    rings: r.clone(),
                    cur: Cursor::default(),
                    pool: pool.clone(),
                    live: ctx.rx_live[i].clone(),
                    stats: stats.rx(i),
                    stamp,
                }));
            }
            if i < conf.tx_queues as usize {
                q.tx.push(Box::new(PacketTx {
                    rings: r,
                    next: 0,
                    live: ctx.tx_live[i].clone(),
                    stats: stats.tx(i),
                }));
            }
        }
        Ok(q)
    }

    fn stop(&mut self, _: &Netdev) {
        // The sockets' counts go into the sums before the sockets go.
        self.kernel_counts();
        self.socks.clear();
    }

    fn xstats(&self, out: &mut Vec<Xstat>) {
        let (received, drops) = self.kernel_counts();
        out.push(Xstat {
            name: "kernel_packet_received".into(),
            value: received,
        });
        out.push(Xstat {
            name: "kernel_packet_drops".into(),
            value: drops,
        });
    }

    fn missed(&self, _: &Netdev) -> u64 {
        self.kernel_counts().1
    }
}

impl AfPacket {
    /// PACKET_STATISTICS summed over the sockets since they opened: frames
    /// the kernel counted, and those it dropped (the ring full).
    fn kernel_counts(&self) -> (u64, u64) {
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
        *d
    }
}

#[repr(align(128))]
struct PacketRx {
    rings: Arc<Rings>,
    cur: Cursor,
    pool: Mempool,
    live: Live,
    stats: Arc<CachePadded<QueueStats>>,
    stamp: RxStamp,
}

impl PacketRx {
    /// Copies the frame whose header is at `hdr` into `m`; `end` bounds
    /// the frame's slot (V2) or block (V3). False to drop it.
    fn copy_frame(&self, hdr: usize, end: usize, m: &mut Mbuf) -> bool {
        let (r, h) = (&self.rings, &self.rings.hdr);
        let status = r.map.read::<u32>(hdr + h.status);
        let snap = r.map.read::<u32>(hdr + h.snaplen) as usize;
        let mac = r.map.read::<u16>(hdr + h.mac) as usize;
        // The kernel's offsets, checked before use.
        if mac < 32 || snap < 14 || (hdr + mac).checked_add(snap).is_none_or(|e| e > end) {
            return false;
        }
        // A frame longer than the slot (the MTU raised under a running
        // port) arrives cut: dropped (and counted in `ierrors` by the
        // caller), never passed on as good.
        let wire = r.map.read::<u32>(hdr + h.len) as usize;
        if wire > snap {
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
            let tci = r.map.read::<u16>(hdr + h.vlan_tci);
            let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 {
                r.map.read::<u16>(hdr + h.vlan_tpid)
            } else {
                0x8100
            };
            r.map.copy_out(hdr + mac, &mut buf[..12]);
            buf[12..14].copy_from_slice(&tpid.to_be_bytes());
            buf[14..16].copy_from_slice(&tci.to_be_bytes());
            r.map.copy_out(hdr + mac + 12, &mut buf[16..]);
        } else {
            r.map.copy_out(hdr + mac, buf);
        }
        true
    }
}

/// Where an RX queue is in its ring.
#[derive(Default)]
struct Cursor {
    /// V2: the next frame slot. V3: the current block.
    next: u32,
    /// V3: frames left in the current block, and the offset of the next.
    left: u32,
    at: usize,
}

impl Cursor {
    /// The next frame's header offset and bound, if the kernel has handed
    /// one over: the slot's status (V2), or the current block's (V3).
    fn next_frame(&mut self, r: &Rings, stats: &QueueStats) -> Option<(usize, usize)> {
        if r.v3_blocks == 0 {
            let at = self.next as usize * r.frame_size;
            // Acquire: pairs with the kernel's smp_wmb + status store in
            // __packet_set_status (tpacket_rcv), so the frame bytes and the
            // header fields it announces are complete.
            let st = r.map.atomic_u32(at + V2.status).load(Ordering::Acquire);
            return (st & TP_STATUS_USER != 0).then_some((at, at + r.frame_size));
        }
        let base = self.next as usize * r.block_size;
        if self.left == 0 {
            // Acquire: pairs with the kernel's smp_wmb + block status store
            // in prb_close_block, which retires the block to us.
            let st = r.map.atomic_u32(base + B_STATUS).load(Ordering::Acquire);
            if st & TP_STATUS_USER == 0 {
                return None;
            }
            self.left = r.map.read::<u32>(base + B_NUM_PKTS);
            self.at = r.map.read::<u32>(base + B_FIRST) as usize;
            if self.left == 0 {
                self.release_block(r);
                return None;
            }
        }
        // A frame header past the block (a kernel bug) ends the block.
        if self
            .at
            .checked_add(V3.tx_data)
            .is_none_or(|e| e > r.block_size)
        {
            stats.device_errors.add(self.left as u64);
            self.release_block(r);
            return None;
        }
        Some((base + self.at, base + r.block_size))
    }

    /// Done with the frame `next_frame` gave: hands its slot (V2) or, at
    /// the block's last frame, its block (V3) back.
    fn done_frame(&mut self, r: &Rings, hdr: usize) {
        if r.v3_blocks == 0 {
            // Release: our reads of the slot finish before the kernel may
            // refill it (it checks the status with smp_rmb first).
            r.map
                .atomic_u32(hdr + V2.status)
                .store(TP_STATUS_KERNEL, Ordering::Release);
            self.next = (self.next + 1) % r.frames;
            return;
        }
        let step = r.map.read::<u32>(hdr) as usize;
        self.left -= 1;
        if self.left == 0 || step == 0 {
            self.release_block(r);
        } else {
            self.at += step;
        }
    }

    fn release_block(&mut self, r: &Rings) {
        // Release: as for a V2 slot, for the whole block.
        r.map
            .atomic_u32(self.next as usize * r.block_size + B_STATUS)
            .store(TP_STATUS_KERNEL, Ordering::Release);
        self.next = (self.next + 1) % r.v3_blocks;
        self.left = 0;
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
            let Some((hdr, end)) = self.cur.next_frame(&self.rings, &self.stats) else {
                break;
            };
            let Ok(mut m) = local.get() else {
                self.stats.nombuf.add(1);
                break;
            };
            if self.copy_frame(hdr, end, &mut m) {
                bytes += m.pkt_len() as u64;
                out.push(m).ok();
                got += 1;
            } else {
                self.stats.errors.add(1);
            }
            self.cur.done_frame(&self.rings, hdr);
        }
        self.stats.packets.add(got as u64);
        self.stats.bytes.add(bytes);
        self.stamp.apply(out, got)
    }

    fn interrupt_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.rings.fd.as_fd())
    }

    fn set_interrupt(&mut self, _enabled: bool) -> Result<(), Error> {
        Ok(())
    }

    fn has_work(&self) -> bool {
        let r = &*self.rings;
        let at = if r.v3_blocks == 0 {
            self.cur.next as usize * r.frame_size + V2.status
        } else {
            self.cur.next as usize * r.block_size + B_STATUS
        };
        self.cur.left > 0 || r.map.atomic_u32(at).load(Ordering::Relaxed) & TP_STATUS_USER != 0
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
        let (base, h) = (r.tx_base, r.hdr);
        let (mut n, mut sent, mut bytes, mut errors) = (0usize, 0u64, 0u64, 0u64);
        for m in pkts.iter() {
            let at = base + self.next as usize * r.frame_size;
            let st = r.map.atomic_u32(at + h.status);
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
            if len <= r.frame_size - h.tx_data && !too_long(m, r.tx_mtu) {
                let mut off = at + h.tx_data;
                for seg in m.segments() {
                    r.map.copy_in(off, seg);
                    off += seg.len();
                }
                r.map.write::<u32>(at + h.len, len as u32);
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

#[cfg(test)]
#[path = "packet_tests.rs"]
mod tests;
