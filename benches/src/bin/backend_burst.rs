//! `backend_burst`: the vhost-user backend's device side alone, one ring
//! and no peer process: a driver in this thread makes 32 buffers
//! available, the backend takes them (`rx`: the guest's TX, 64-byte
//! frames after a 12-byte header, into mbufs it frees at once) or fills
//! them (`tx`: the guest's RX, 64-byte frames copied in), over and over.
//! MRG_RXBUF, EVENT_IDX and IN_ORDER negotiated, as DPDK's virtio-user
//! does by default. Prints ns per frame; under callgrind (`benches/backend_burst.sh`) it
//! gives instructions per frame of the backend's own code, free of the
//! cross-core effects `compare.sh vhost` measures.
//!
//! usage: `backend_burst split|packed rx|tx BURSTS [csum]` (`csum`: CSUM
//! and GUEST_CSUM negotiated too, the headers all zero)
use rpmd_pmd::peer::PeerRegionInfo;
use rpmd_pmd::port::Pkts;
use rpmd_pmd::{DmaRegion, IovaMode, Mempool, MempoolConfig, PageSize};
use rpmd_virtio::device::testing::{DeviceRing, RingOptions};
use std::time::Instant;

const NUM: u16 = 256;
const BURST: u16 = 32;
const REGION: usize = 1 << 20;
/// Ring parts: descriptors, avail ring (driver event area), used ring
/// (device event area); buffers of 2 KiB from `BUFS`, one per slot.
const DESC: u64 = 0;
const AVAIL: u64 = 0x2000;
const USED: u64 = 0x4000;
const BUFS: u64 = 0x8000;
const HDR: usize = 12;
const FRAME: usize = 64;

const F_WRITE: u16 = 2;
const F_AVAIL: u16 = 1 << 7;
const F_USED: u16 = 1 << 15;

/// The driver: makes buffers available as a guest's virtio-net does, one
/// descriptor a buffer.
struct Driver<'a> {
    region: &'a DmaRegion,
    base: u64,
    packed: bool,
    write: bool,
    /// Packed: next slot and wrap counter; split: the avail index.
    next: u16,
    wrap: bool,
}

impl Driver<'_> {
    fn put(&self, off: u64, bytes: &[u8]) {
        assert!(off as usize + bytes.len() <= REGION);
        // SAFETY: inside the region (asserted); the backend is not
        // running (this thread calls it between the driver's writes).
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.region.as_ptr().add(off as usize),
                bytes.len(),
            )
        };
    }

    fn desc(&self, slot: u16, flags: u16, id_or_next: u16) {
        let len = if self.write {
            2048
        } else {
            (HDR + FRAME) as u32
        };
        let mut d = [0u8; 16];
        d[..8].copy_from_slice(&(self.base + BUFS + slot as u64 * 2048).to_le_bytes());
        d[8..12].copy_from_slice(&len.to_le_bytes());
        // Packed: id, then flags (written last, as they hand it over);
        // split: flags, then next.
        let (a, b) = if self.packed {
            (id_or_next, flags)
        } else {
            (flags, id_or_next)
        };
        d[12..14].copy_from_slice(&a.to_le_bytes());
        d[14..16].copy_from_slice(&b.to_le_bytes());
        self.put(DESC + 16 * slot as u64, &d);
    }

    /// Makes `BURST` buffers available.
    fn post(&mut self) {
        let w = if self.write { F_WRITE } else { 0 };
        for _ in 0..BURST {
            if self.packed {
                let f = if self.wrap { F_AVAIL } else { F_USED };
                self.desc(self.next, f | w, self.next);
                self.next += 1;
                if self.next == NUM {
                    (self.next, self.wrap) = (0, !self.wrap);
                }
            } else {
                let slot = self.next % NUM;
                self.put(AVAIL + 4 + 2 * slot as u64, &slot.to_le_bytes());
                self.next = self.next.wrapping_add(1);
            }
        }
        if !self.packed {
            self.put(AVAIL + 2, &self.next.to_le_bytes());
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: backend_burst split|packed rx|tx BURSTS [csum]";
    let (Some(ring), Some(dir), Some(Ok(bursts))) = (
        args.get(1),
        args.get(2),
        args.get(3).map(|b| b.parse::<u64>()),
    ) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let (packed, write) = (ring == "packed", dir == "tx");
    let csum = args.get(4).is_some_and(|a| a == "csum");
    let region = DmaRegion::with_page_size("bb", REGION, IovaMode::Va, PageSize::Base4K)
        .expect("the driver's memory");
    let mut pc = MempoolConfig::new("bb", 1024);
    pc.cache_size = 64;
    let pool = Mempool::new(&pc).expect("a pool");
    let base = region.as_ptr() as u64;
    let info = PeerRegionInfo {
        guest_addr: base,
        size: REGION as u64,
        user_addr: base,
        offset: 0,
    };
    let opts = RingOptions {
        packed,
        mrg: true,
        event_idx: true,
        // As DPDK's virtio-user negotiates by default.
        in_order: true,
        csum,
        guest_csum: csum,
        ..RingOptions::default()
    };
    let addrs = (base + DESC, base + AVAIL, base + USED);
    let mut dev = DeviceRing::new(region.fd(), info, NUM, addrs, opts).expect("the ring");
    let mut drv = Driver {
        region: &region,
        base,
        packed,
        write,
        next: 0,
        wrap: true,
    };
    if !packed {
        let f = if write { F_WRITE } else { 0 };
        for s in 0..NUM {
            drv.desc(s, f, 0);
        }
    }
    let mut pkts = Pkts::new();
    let start = Instant::now();
    let mut frames = 0u64;
    for _ in 0..bursts {
        drv.post();
        let n = if write {
            for _ in 0..BURST {
                let Ok(mut m) = pool.get() else { break };
                if let Some(b) = m.append(FRAME) {
                    b.fill(0x5a);
                }
                let _ = pkts.push(m);
            }
            dev.enqueue(&mut pkts)
        } else {
            dev.dequeue(&pool, &mut pkts, BURST as usize)
        };
        pkts.clear();
        assert_eq!(n, BURST as usize, "the backend took {n} of {BURST}");
        frames += n as u64;
    }
    let ns = start.elapsed().as_nanos() as f64 / frames as f64;
    assert!(
        dev.broken().is_none() && dev.errors() == 0,
        "the ring broke"
    );
    let with = if csum { " (csum)" } else { "" };
    println!("backend_burst {ring} {dir}{with}: {frames} frames, {ns:.1} ns a frame");
}
