//! The VFIO test that runs inside the QEMU guest of `tests/vm/run.sh`
//! (it needs a kernel with VFIO and a virtual IOMMU, which CI hosts lack).
//! Built statically and put in the guest's initramfs; the guest script
//! binds the NICs to vfio-pci and runs it:
//!
//! ```text
//! vfio_guest [--modern BDF]... [--transitional BDF]... [--e1000e BDF]...
//!            [--not-viable BDF]... [--kernel-bound BDF]...
//! ```
//!
//! Every case prints `ok` or `FAIL: why`; the last line is
//! `vfio_guest: N passed, M failed` and the exit status is 0 only when nothing failed.
//!
//! To make the device do DMA it drives a modern virtio-net just far enough
//! (reset, features, one TX and one RX queue, a frame each way with the
//! host peer). That is test scaffolding, not the virtio driver, which lives
//! in `virtio/`.
#![allow(unsafe_code)]

use rpmd_pmd::function::{wait_until, Regs};
use rpmd_pmd::pci::{PciAddr, Sysfs};
use rpmd_pmd::vfio::{Container, Device, DmaMapping};
use rpmd_pmd::{DmaRegion, Error, Iova, IovaMode, PageSize, Registry};
use std::sync::atomic::{fence, Ordering};
use std::time::Duration;

type R<T> = Result<T, String>;

fn e2s(e: Error) -> String {
    e.to_string()
}

// ---------------------------------------------------------------- virtio bits
// Virtio 1.2 §4.1.4: PCI capabilities and the common configuration layout.
const CAP_VENDOR: u8 = 0x09;
const CFG_COMMON: u8 = 1;
const CFG_NOTIFY: u8 = 2;
const CFG_DEVICE: u8 = 4;
const COMMON_DFSELECT: u64 = 0x00;
const COMMON_DF: u64 = 0x04;
const COMMON_GFSELECT: u64 = 0x08;
const COMMON_GF: u64 = 0x0c;
const COMMON_MSIX: u64 = 0x10;
const COMMON_STATUS: u64 = 0x14;
const COMMON_Q_SELECT: u64 = 0x16;
const COMMON_Q_SIZE: u64 = 0x18;
const COMMON_Q_MSIX: u64 = 0x1a;
const COMMON_Q_ENABLE: u64 = 0x1c;
const COMMON_Q_NOFF: u64 = 0x1e;
const COMMON_Q_DESC: u64 = 0x20;
const COMMON_Q_DRIVER: u64 = 0x28;
const COMMON_Q_DEVICE: u64 = 0x30;
// §2.1 device status bits.
const S_ACK: u8 = 1;
const S_DRIVER: u8 = 2;
const S_DRIVER_OK: u8 = 4;
const S_FEATURES_OK: u8 = 8;
const S_NEEDS_RESET: u8 = 0x40;
const F_VERSION_1: u64 = 1 << 32;
const F_ACCESS_PLATFORM: u64 = 1 << 33;
const NO_VECTOR: u16 = 0xffff;
const QSIZE: u16 = 16;
const NET_HDR: usize = 12;

/// Where one virtqueue sits in the test region.
#[derive(Clone, Copy)]
struct Vq {
    index: u16,
    desc: usize,
    avail: usize,
    used: usize,
    notify: u64,
}

/// A modern virtio-net driven just enough to move one frame each way.
struct Virtio<'a> {
    bars: Vec<Option<Regs>>,
    common: (usize, u64),
    notify: (usize, u64, u32),
    device_cfg: (usize, u64),
    mem: &'a DmaRegion,
    iova_base: u64,
}

impl<'a> Virtio<'a> {
    fn open(dev: &'a Device, mem: &'a DmaRegion, iova_base: u64) -> R<Self> {
        let cfg = dev.config().map_err(e2s)?;
        let (mut common, mut notify, mut device_cfg) = (None, None, None);
        for c in dev.capabilities().map_err(e2s)? {
            if c.id != CAP_VENDOR {
                continue;
            }
            let o = c.offset as u64;
            let ty = cfg.read8(o + 3).map_err(e2s)?;
            let bar = cfg.read8(o + 4).map_err(e2s)? as usize;
            let off = cfg.read32(o + 8).map_err(e2s)? as u64;
            match ty {
                CFG_COMMON => common = Some((bar, off)),
                CFG_NOTIFY => notify = Some((bar, off, cfg.read32(o + 16).map_err(e2s)?)),
                CFG_DEVICE => device_cfg = Some((bar, off)),
                _ => {}
            }
        }
        let (Some(common), Some(notify), Some(device_cfg)) = (common, notify, device_cfg) else {
            return Err("virtio common/notify/device capabilities missing".into());
        };
        let mut bars: Vec<Option<Regs>> = (0..6).map(|_| None).collect();
        for b in [common.0, notify.0, device_cfg.0] {
            if bars[b].is_none() {
                bars[b] = Some(dev.bar(b as u32).map_err(e2s)?);
            }
        }
        Ok(Virtio {
            bars,
            common,
            notify,
            device_cfg,
            mem,
            iova_base,
        })
    }

    fn bar(&self, b: usize) -> &Regs {
        self.bars[b].as_ref().expect("mapped in open")
    }
    fn c(&self) -> (&Regs, u64) {
        (self.bar(self.common.0), self.common.1)
    }
    fn status(&self) -> R<u8> {
        let (r, o) = self.c();
        r.read8(o + COMMON_STATUS).map_err(e2s)
    }
    fn set_status(&self, s: u8) -> R<()> {
        let (r, o) = self.c();
        r.write8(o + COMMON_STATUS, s).map_err(e2s)
    }

    fn mac(&self) -> R<[u8; 6]> {
        let mut m = [0; 6];
        self.bar(self.device_cfg.0)
            .read_bytes(self.device_cfg.1, &mut m)
            .map_err(e2s)?;
        Ok(m)
    }

    fn reset(&self) -> R<()> {
        self.set_status(0)?;
        wait_until("virtio reset", Duration::from_secs(1), || {
            Ok(self.status().map_err(|e| Error::Port {
                port: "virtio".into(),
                detail: e,
            })? == 0)
        })
        .map_err(e2s)
    }

    /// Reset, negotiate, set up RX (0) and TX (1) queues, DRIVER_OK.
    fn start(&self, tx_vector: u16) -> R<(Vq, Vq)> {
        self.reset()?;
        self.set_status(S_ACK | S_DRIVER)?;
        let (r, o) = self.c();
        let mut feat = 0u64;
        for sel in 0..2u32 {
            r.write32(o + COMMON_DFSELECT, sel).map_err(e2s)?;
            feat |= (r.read32(o + COMMON_DF).map_err(e2s)? as u64) << (32 * sel);
        }
        if feat & F_VERSION_1 == 0 {
            return Err(format!("device offers no VERSION_1 (features {feat:#x})"));
        }
        let want = feat & (F_VERSION_1 | F_ACCESS_PLATFORM);
        for sel in 0..2u32 {
            r.write32(o + COMMON_GFSELECT, sel).map_err(e2s)?;
            r.write32(o + COMMON_GF, (want >> (32 * sel)) as u32)
                .map_err(e2s)?;
        }
        self.set_status(S_ACK | S_DRIVER | S_FEATURES_OK)?;
        if self.status()? & S_FEATURES_OK == 0 {
            return Err(format!("device refused features {want:#x}"));
        }
        r.write16(o + COMMON_MSIX, NO_VECTOR).map_err(e2s)?;
        let rx = self.setup_queue(0, 0x0000, NO_VECTOR)?;
        let tx = self.setup_queue(1, 0x4000, tx_vector)?;
        self.set_status(S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK)?;
        Ok((rx, tx))
    }

    fn setup_queue(&self, index: u16, base: usize, vector: u16) -> R<Vq> {
        let (r, o) = self.c();
        r.write16(o + COMMON_Q_SELECT, index).map_err(e2s)?;
        let max = r.read16(o + COMMON_Q_SIZE).map_err(e2s)?;
        if max < QSIZE {
            return Err(format!("queue {index} has only {max} entries"));
        }
        r.write16(o + COMMON_Q_SIZE, QSIZE).map_err(e2s)?;
        let q = Vq {
            index,
            desc: base,
            avail: base + 0x1000,
            used: base + 0x2000,
            notify: self.notify.1
                + r.read16(o + COMMON_Q_NOFF).map_err(e2s)? as u64 * self.notify.2 as u64,
        };
        // Zero the rings (the region may hold an earlier run's).
        // SAFETY: base..base+0x3000 is inside the region, and the device
        // has no access to this queue until queue_enable below.
        unsafe { self.mem.as_ptr().add(base).write_bytes(0, 0x3000) };
        r.write64(o + COMMON_Q_DESC, self.iova_base + q.desc as u64)
            .map_err(e2s)?;
        r.write64(o + COMMON_Q_DRIVER, self.iova_base + q.avail as u64)
            .map_err(e2s)?;
        r.write64(o + COMMON_Q_DEVICE, self.iova_base + q.used as u64)
            .map_err(e2s)?;
        r.write16(o + COMMON_Q_MSIX, vector).map_err(e2s)?;
        if r.read16(o + COMMON_Q_MSIX).map_err(e2s)? != vector {
            return Err(format!(
                "device refused MSI-X vector {vector} for queue {index}"
            ));
        }
        r.write16(o + COMMON_Q_ENABLE, 1).map_err(e2s)?;
        Ok(q)
    }

    fn w<T>(&self, off: usize, v: T) {
        // SAFETY: test offsets are inside the region; volatile because the
        // device reads this memory.
        unsafe { self.mem.as_ptr().add(off).cast::<T>().write_volatile(v) }
    }
    fn r16(&self, off: usize) -> u16 {
        // SAFETY: as above; the device writes this memory.
        unsafe { self.mem.as_ptr().add(off).cast::<u16>().read_volatile() }
    }
    fn r32(&self, off: usize) -> u32 {
        // SAFETY: as above.
        unsafe { self.mem.as_ptr().add(off).cast::<u32>().read_volatile() }
    }

    /// Posts descriptor `slot` (buffer at IOVA `addr`, `len` bytes) as the
    /// `n`-th avail entry of `q` and kicks the device.
    fn post(&self, q: Vq, n: u16, addr: u64, len: u32, device_writes: bool) -> R<()> {
        let d = q.desc + 16 * (n % QSIZE) as usize;
        self.w(d, addr.to_le());
        self.w(d + 8, len.to_le());
        self.w(d + 12, (if device_writes { 2u16 } else { 0 }).to_le());
        self.w(q.avail + 4 + 2 * (n % QSIZE) as usize, (n % QSIZE).to_le());
        // The descriptor and ring entry must be visible before the index
        // that publishes them (pairs with the device's read of avail.idx).
        fence(Ordering::Release);
        self.w(q.avail + 2, (n + 1).to_le());
        // The index store must reach memory before the doorbell.
        fence(Ordering::SeqCst);
        self.bar(self.notify.0)
            .write16(q.notify, q.index)
            .map_err(e2s)
    }

    /// Waits until `q`'s used index reaches `n`; returns the last used length.
    fn wait_used(&self, q: Vq, n: u16, timeout: Duration) -> R<u32> {
        wait_until("used ring", timeout, || Ok(self.r16(q.used + 2) == n)).map_err(e2s)?;
        // Read the entry only after seeing the index (pairs with the
        // device's write barrier before it bumps used.idx).
        fence(Ordering::Acquire);
        Ok(self.r32(q.used + 4 + 8 * ((n - 1) % QSIZE) as usize + 4))
    }
}

// ---------------------------------------------------------------- cases
const BUF_TX: usize = 0x10000;
const BUF_RX: usize = 0x20000;

fn ping_frame(mac: [u8; 6], tag: &str) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[0x88, 0xb5]);
    f.extend_from_slice(format!("RPMD-VM PING {tag}").as_bytes());
    f.resize(60, 0);
    f
}

/// TX a frame and RX the host peer's echo; optionally through MSI-X.
fn txrx(dev: &Device, c: &Container, page: PageSize, irq: bool) -> R<String> {
    let mem = DmaRegion::with_page_size("vm-test", 2 << 20, IovaMode::Va, page).map_err(e2s)?;
    let map: DmaMapping = c.map_dma(&mem).map_err(e2s)?;
    let base = map.iova().raw();
    let fds = if irq {
        dev.enable_msix(1).map_err(e2s)?
    } else {
        Vec::new()
    };
    let v = Virtio::open(dev, &mem, base)?;
    let (rx, tx) = v.start(if irq { 0 } else { NO_VECTOR })?;
    let mac = v.mac()?;
    let frame = ping_frame(mac, &format!("{page:?}"));
    // SAFETY: buffers inside the region; the device only sees them once posted.
    unsafe {
        let p = mem.as_ptr().add(BUF_TX);
        p.write_bytes(0, NET_HDR);
        p.add(NET_HDR)
            .copy_from_nonoverlapping(frame.as_ptr(), frame.len());
    }
    v.post(rx, 0, base + BUF_RX as u64, 2048, true)?;
    v.post(
        tx,
        0,
        base + BUF_TX as u64,
        (NET_HDR + frame.len()) as u32,
        false,
    )?;
    v.wait_used(tx, 1, Duration::from_secs(5))
        .map_err(|e| format!("TX completion: {e}"))?;
    if irq {
        let n = fds[0].wait(Duration::from_secs(5)).map_err(e2s)?;
        if n == 0 {
            return Err("no MSI-X interrupt on the eventfd within 5 s".into());
        }
    }
    let len = v
        .wait_used(rx, 1, Duration::from_secs(5))
        .map_err(|e| format!("RX of the echo: {e}"))? as usize;
    let mut got = vec![0u8; len.min(2048)];
    // SAFETY: the device completed this buffer; it no longer writes it.
    unsafe {
        mem.as_ptr()
            .add(BUF_RX)
            .copy_to_nonoverlapping(got.as_mut_ptr(), got.len())
    };
    let payload = &got[NET_HDR.min(got.len())..];
    if payload.len() < 26 || payload[..6] != mac || &payload[14..26] != b"RPMD-VM PONG" {
        return Err(format!(
            "unexpected echo ({len} bytes): {:02x?}",
            &payload[..payload.len().min(32)]
        ));
    }
    v.reset()?;
    if irq {
        dev.disable_msix().map_err(e2s)?;
    }
    Ok(format!(
        "frame out and echo back by DMA at IOVA {base:#x} ({page:?}){}",
        if irq { ", MSI-X -> eventfd" } else { "" }
    ))
}

/// A device write aimed outside every mapping must be blocked by the
/// IOMMU. The RX buffer's IOVA is the guest-physical address of a page of
/// ours that is *not* mapped in the container: without the IOMMU the echo
/// would land in it. Afterwards the page is intact, and the device (after
/// a reset) and the process work on.
fn blocked(dev: &Device, c: &Container) -> R<String> {
    let mem = DmaRegion::with_page_size("vm-block", 2 << 20, IovaMode::Va, PageSize::Huge2M)
        .map_err(e2s)?;
    let map = c.map_dma(&mem).map_err(e2s)?;
    let base = map.iova().raw();
    let victim = DmaRegion::with_page_size("vm-victim", 4096, IovaMode::Pa, PageSize::Base4K)
        .map_err(e2s)?;
    // SAFETY: our own page, not visible to any device.
    unsafe { victim.as_ptr().write_bytes(0x5a, 4096) };
    let victim_pa = victim.iova(0).ok_or("victim page has no address")?.raw();
    let v = Virtio::open(dev, &mem, base)?;
    let (rx, tx) = v.start(NO_VECTOR)?;
    let frame = ping_frame(v.mac()?, "blocked");
    // SAFETY: buffer inside the mapped region, not yet posted.
    unsafe {
        let p = mem.as_ptr().add(BUF_TX);
        p.write_bytes(0, NET_HDR);
        p.add(NET_HDR)
            .copy_from_nonoverlapping(frame.as_ptr(), frame.len());
    }
    v.post(rx, 0, victim_pa, 2048, true)?;
    v.post(
        tx,
        0,
        base + BUF_TX as u64,
        (NET_HDR + frame.len()) as u32,
        false,
    )?;
    v.wait_used(tx, 1, Duration::from_secs(5))
        .map_err(|e| format!("TX completion: {e}"))?;
    // The echo comes back within milliseconds; give it ample time to try.
    let rx_used = match v.wait_used(rx, 1, Duration::from_millis(1500)) {
        Ok(len) => format!("RX completed with length {len}"),
        Err(e) if e.contains("timed out") => "RX never completed".into(),
        Err(e) => return Err(e),
    };
    let mut page = [0u8; 4096];
    // SAFETY: our own page; reading it races with nothing we allowed.
    unsafe {
        victim
            .as_ptr()
            .copy_to_nonoverlapping(page.as_mut_ptr(), 4096)
    };
    if let Some(i) = page.iter().position(|&b| b != 0x5a) {
        return Err(format!(
            "the device wrote our unmapped page at PA {victim_pa:#x} (byte {i}); {rx_used}"
        ));
    }
    let st = v.status()?;
    drop(v);
    let after = txrx(dev, c, PageSize::Huge2M, false)?;
    Ok(format!(
        "device write to unmapped IOVA {victim_pa:#x} (a PA of ours) blocked, page intact, {rx_used}, status {st:#x}{}; afterwards: {after}",
        if st & S_NEEDS_RESET != 0 { " NEEDS_RESET" } else { "" }
    ))
}

fn mappings(c: &Container) -> R<String> {
    let info = c.iommu_info().map_err(e2s)?;
    let huge = DmaRegion::with_page_size("vm-map-2m", 4 << 20, IovaMode::Va, PageSize::Huge2M)
        .map_err(e2s)?;
    let small = DmaRegion::with_page_size("vm-map-4k", 64 << 10, IovaMode::Va, PageSize::Base4K)
        .map_err(e2s)?;
    let m1 = c.map_dma(&huge).map_err(e2s)?;
    let m2 = c.map_dma(&small).map_err(e2s)?;
    match c.map_dma(&small) {
        Err(e) if e.to_string().contains("already mapped") => {}
        other => return Err(format!("a second map of one range gave {other:?}")),
    }
    // A region reaching past the IOMMU's last usable IOVA is refused with a
    // clear error before the kernel is asked.
    let &(_, top) = info
        .iova_ranges
        .last()
        .ok_or("the kernel reported no IOVA ranges")?;
    match c.map_dma_at(&huge, Iova::new(top + 1 - (2 << 20))) {
        Err(e) if e.to_string().contains("outside the IOMMU's usable ranges") => {}
        other => return Err(format!("mapping past the aperture gave {other:?}")),
    }
    Ok(format!(
        "page sizes {:#x}, ranges {:x?}; mapped 2 MiB-page region at {:#x} and 4 KiB-page region at {:#x}",
        info.page_sizes,
        info.iova_ranges,
        m1.iova().raw(),
        m2.iova().raw()
    ))
}

fn modern_caps(dev: &Device) -> R<String> {
    let caps = dev.capabilities().map_err(e2s)?;
    let cfg = dev.config().map_err(e2s)?;
    let (vendor, device) = (cfg.read16(0).map_err(e2s)?, cfg.read16(2).map_err(e2s)?);
    let mut types = Vec::new();
    for c in caps.iter().filter(|c| c.id == CAP_VENDOR) {
        types.push(cfg.read8(c.offset as u64 + 3).map_err(e2s)?);
    }
    for t in [CFG_COMMON, CFG_NOTIFY, 3, CFG_DEVICE] {
        if !types.contains(&t) {
            return Err(format!("virtio cfg_type {t} missing (found {types:?})"));
        }
    }
    if !caps.iter().any(|c| c.id == 0x11) {
        return Err("no MSI-X capability".into());
    }
    Ok(format!(
        "{vendor:04x}:{device:04x}, caps {:?}, virtio cfg types {types:?}, {} MSI-X vectors",
        caps.iter().map(|c| (c.id, c.offset)).collect::<Vec<_>>(),
        dev.msix_vectors().map_err(e2s)?
    ))
}

fn legacy_io(dev: &Device) -> R<String> {
    // Virtio 1.2 §4.1.4.8: the legacy interface in I/O BAR0; with MSI-X
    // off the device config (the MAC) starts at 20.
    let bar = dev.bar(0).map_err(e2s)?;
    if bar.is_mmio() {
        return Err("BAR0 of a transitional device should be an I/O BAR".into());
    }
    let feat = bar.read32(0).map_err(e2s)?;
    let mut mac = [0u8; 6];
    bar.read_bytes(20, &mut mac).map_err(e2s)?;
    if mac[..5] != [0x52, 0x54, 0, 0, 0] {
        return Err(format!("legacy MAC reads {mac:02x?}"));
    }
    if bar.read32(bar.len() - 2).is_ok() {
        return Err("an access past the I/O BAR was allowed".into());
    }
    Ok(format!(
        "I/O BAR0 of {} bytes: host features {feat:#x}, MAC {mac:02x?}",
        bar.len()
    ))
}

fn e1000e(dev: &Device) -> R<String> {
    let bar = dev.bar(0).map_err(e2s)?;
    // 82574 datasheet §10.2: STATUS at 0x8 (bit 1 = link up), RAL0/RAH0 at
    // 0x5400/0x5404 hold the MAC.
    let status = bar.read32(0x8).map_err(e2s)?;
    let (ral, rah) = (
        bar.read32(0x5400).map_err(e2s)?,
        bar.read32(0x5404).map_err(e2s)?,
    );
    let mac = [
        ral as u8,
        (ral >> 8) as u8,
        (ral >> 16) as u8,
        (ral >> 24) as u8,
        rah as u8,
        (rah >> 8) as u8,
    ];
    if mac[..5] != [0x52, 0x54, 0, 0, 0] || status & 2 == 0 {
        return Err(format!("STATUS {status:#x}, MAC {mac:02x?}"));
    }
    if bar.read32(bar.len()).is_ok() {
        return Err("an access past BAR0 was allowed".into());
    }
    let reset = if dev.can_reset() {
        dev.reset().map_err(e2s)?;
        "VFIO reset done"
    } else {
        "no VFIO reset offered"
    };
    Ok(format!(
        "BAR0 mmapped ({} bytes): STATUS {status:#x}, MAC {mac:02x?}, {reset}",
        bar.len()
    ))
}

// ---------------------------------------------------------------- driver
struct Tally {
    pass: u32,
    fail: u32,
}

impl Tally {
    fn case(&mut self, name: &str, r: R<String>) {
        match r {
            Ok(m) => {
                self.pass += 1;
                println!("case {name}: ok: {m}");
            }
            Err(e) => {
                self.fail += 1;
                println!("case {name}: FAIL: {e}");
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut t = Tally { pass: 0, fail: 0 };
    let sysfs = Sysfs::default();
    let mut i = 0;
    while i + 1 < args.len() {
        let (flag, bdf) = (&args[i], &args[i + 1]);
        i += 2;
        let addr: PciAddr = match bdf.parse() {
            Ok(a) => a,
            Err(e) => {
                t.case("arguments", Err(e.to_string()));
                continue;
            }
        };
        // One container per device, as separate processes would have.
        let c = match Container::open() {
            Ok(c) => c,
            Err(e) => {
                t.case(&format!("{addr} container"), Err(e.to_string()));
                continue;
            }
        };
        match flag.as_str() {
            "--not-viable" => t.case(
                &format!("{addr} non-viable group refused"),
                match c.device(&sysfs, addr) {
                    Err(e) if e.to_string().contains("not viable") => Ok(e.to_string()),
                    Err(e) => Err(format!("wrong error: {e}")),
                    Ok(_) => Err("a device in a non-viable group was opened".into()),
                },
            ),
            "--kernel-bound" => t.case(
                &format!("{addr} kernel-bound device refused"),
                match c.device(&sysfs, addr) {
                    Err(e) if e.to_string().contains("rpmd-bind --bind vfio-pci") => {
                        Ok(e.to_string())
                    }
                    Err(e) => Err(format!("wrong error: {e}")),
                    Ok(_) => Err("opened a device bound to a kernel driver".into()),
                },
            ),
            kind => {
                let dev = match c.device(&sysfs, addr) {
                    Ok(d) => d,
                    Err(e) => {
                        t.case(&format!("{addr} open"), Err(e.to_string()));
                        continue;
                    }
                };
                t.case(&format!("{addr} open"), Ok(format!("{dev:?}")));
                if let Err(e) = dev.enable_bus_master() {
                    t.case(&format!("{addr} bus master"), Err(e.to_string()));
                    continue;
                }
                match kind {
                    "--modern" => {
                        t.case(&format!("{addr} virtio capabilities"), modern_caps(&dev));
                        t.case(&format!("{addr} DMA mappings"), mappings(&c));
                        t.case(
                            &format!("{addr} DMA 2M pages"),
                            txrx(&dev, &c, PageSize::Huge2M, false),
                        );
                        t.case(
                            &format!("{addr} DMA 4K pages"),
                            txrx(&dev, &c, PageSize::Base4K, false),
                        );
                        t.case(
                            &format!("{addr} MSI-X"),
                            txrx(&dev, &c, PageSize::Huge2M, true),
                        );
                        t.case(&format!("{addr} IOMMU blocks"), blocked(&dev, &c));
                        let reg = Registry::new();
                        t.case(
                            &format!("{addr} registry"),
                            match reg.open(&format!("pci:{addr}")) {
                                Err(e)
                                    if e.to_string()
                                        .contains("no registered driver handles 1af4:1041") =>
                                {
                                    Ok(e.to_string())
                                }
                                Err(e) => Err(format!("wrong error: {e}")),
                                Ok(_) => Err("opened with no PCI driver registered".into()),
                            },
                        );
                    }
                    "--transitional" => {
                        t.case(&format!("{addr} virtio capabilities"), modern_caps(&dev));
                        t.case(&format!("{addr} legacy I/O BAR"), legacy_io(&dev));
                    }
                    "--e1000e" => t.case(&format!("{addr} e1000e registers"), e1000e(&dev)),
                    other => t.case("arguments", Err(format!("unknown flag {other}"))),
                }
            }
        }
    }
    println!("vfio_guest: {} passed, {} failed", t.pass, t.fail);
    std::process::exit(if t.fail == 0 && t.pass > 0 { 0 } else { 1 });
}
