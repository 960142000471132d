//! A device write aimed outside every mapping, blocked by the IOMMU, with
//! the 82576 itself as the device.
//!
//! Port A's receive ring is set up by hand (the driver never posts an
//! address it did not map): every buffer it offers is the guest-physical
//! address of a page of ours that is mapped nowhere. Port B, an rpmd port,
//! sends frames to A's address. Without the IOMMU they would land in the
//! page; with it the page stays as we wrote it, QEMU logs the translation
//! fault for A (`tests/vm/run.sh` checks the address it prints), and A
//! opens afterwards as an rpmd port as if nothing had happened.
use crate::frames::frame;
use rpmd_igb::desc::{RxRead, RxWb};
use rpmd_igb::hw::Hw;
use rpmd_igb::regs::{
    rdbah, rdbal, rdh, rdlen, rdt, rxdctl, srrctl, DCTL_ENABLE, RCTL, RCTL_BAM, RCTL_EN, RCTL_MPE,
    RCTL_SECRC, RCTL_UPE, RXDCTL_THRESH, SRRCTL_BSIZEPKT_SHIFT, SRRCTL_DESCTYPE_ADV_ONEBUF,
};
use rpmd_igb::ring::{DescRing, DESC};
use rpmd_pmd::endian::Le64;
use rpmd_pmd::port::MacAddr;
use rpmd_pmd::{DmaRegion, IovaMode, Mempool, MempoolConfig, PageSize, Pkts, PortConfig, Registry};
use std::time::{Duration, Instant};

type R<T> = Result<T, String>;

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Descriptors in A's hand-made receive ring.
const RING: u32 = 8;
/// The victim page's pattern.
const PATTERN: u8 = 0x5a;

/// The case: see the module doc.
pub fn blocked(a: &str, b: &str) -> R<String> {
    let (_bus, func) = crate::open(a)?;
    let hw = Hw::open(func.clone()).map_err(s)?;
    hw.reset().map_err(s)?;
    hw.set_link_up().map_err(s)?;
    let mac = hw.mac().map_err(s)?.ok_or("no MAC in receive address 0")?;
    let ring = DescRing::new(&*func, "igb blocked rx ring", RING).map_err(s)?;
    let victim =
        DmaRegion::with_page_size("igb-victim", 4096, IovaMode::Pa, PageSize::Base4K).map_err(s)?;
    // SAFETY: our own page, mapped for no device; nothing else holds it.
    unsafe { victim.as_ptr().write_bytes(PATTERN, 4096) };
    let victim_pa = victim
        .iova(0)
        .ok_or("the victim page has no address")?
        .raw();
    for i in 0..RING {
        let read = RxRead {
            pkt_addr: Le64::new(victim_pa),
            hdr_addr: Le64::new(0),
        };
        ring.put(i, read);
    }
    start_receiving(&hw, &ring).map_err(s)?;
    wait_link(&hw)?;
    let sent = send_from(b, mac, 4)?;
    // The frames arrive within milliseconds; give the device ample time.
    let t = Instant::now();
    let mut written_back = false;
    while t.elapsed() < Duration::from_millis(1500) && !written_back {
        written_back = ring.dword(0, RxWb::STATUS_DWORD) & 1 != 0;
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut page = [0u8; 4096];
    // SAFETY: our own page; no device may write it (that is the test),
    // and reading it races with nothing we allowed.
    unsafe {
        victim
            .as_ptr()
            .copy_to_nonoverlapping(page.as_mut_ptr(), page.len())
    };
    hw.write(RCTL, 0).map_err(s)?;
    hw.reset().map_err(s)?;
    if let Some(i) = page.iter().position(|&x| x != PATTERN) {
        return Err(format!(
            "the 82576 wrote our unmapped page at PA {victim_pa:#x} (byte {i})"
        ));
    }
    Ok(format!(
        "82576 write to unmapped IOVA {victim_pa:#x} (a PA of ours) blocked, page intact; {sent} frames from {b}; descriptor 0 {}",
        if written_back { "written back" } else { "not written back" }
    ))
}

/// Receive queue 0 on `ring`, one buffer of 2 KiB per descriptor, the
/// first offered; the receiver on, taking every frame.
fn start_receiving(hw: &Hw, ring: &DescRing) -> Result<(), rpmd_igb::Error> {
    hw.write(RCTL, 0)?;
    hw.write(rxdctl(0), 0)?;
    hw.write(rdbal(0), ring.iova() as u32)?;
    hw.write(rdbah(0), (ring.iova() >> 32) as u32)?;
    hw.write(rdlen(0), RING * DESC as u32)?;
    hw.write(
        srrctl(0),
        2 << SRRCTL_BSIZEPKT_SHIFT | SRRCTL_DESCTYPE_ADV_ONEBUF,
    )?;
    hw.write(rdh(0), 0)?;
    hw.write(rdt(0), 0)?;
    hw.write(rxdctl(0), RXDCTL_THRESH | DCTL_ENABLE)?;
    hw.wait_reg("RXDCTL.ENABLE", rxdctl(0), |v| v & DCTL_ENABLE != 0)?;
    hw.write(rdt(0), 1)?;
    hw.write(RCTL, RCTL_EN | RCTL_BAM | RCTL_UPE | RCTL_MPE | RCTL_SECRC)
}

fn wait_link(hw: &Hw) -> R<()> {
    let t = Instant::now();
    while !hw.link().map_err(s)?.up {
        if t.elapsed() > Duration::from_secs(5) {
            return Err("port A's link stayed down".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// Sends `n` frames to `dst` from `pci:B`, an rpmd port; returns `n`.
fn send_from(b: &str, dst: MacAddr, n: u32) -> R<u32> {
    let mut reg = Registry::new();
    rpmd_igb::register(&mut reg);
    let pool = Mempool::new(&MempoolConfig::new("igb-blocked", 4096)).map_err(s)?;
    reg.domain().register_pool(&pool).map_err(s)?;
    let mut p = reg.open(&format!("pci:{b}")).map_err(s)?;
    p.configure(&PortConfig::with_pool(&pool)).map_err(s)?;
    let mut q = p.start().map_err(s)?;
    let t = Instant::now();
    while !p.link().up {
        if t.elapsed() > Duration::from_secs(5) {
            return Err(format!("pci:{b}: link stayed down"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut out = Pkts::new();
    for k in 0..n {
        let bytes = frame(dst, p.mac_addr(), 60, k);
        let mut m = pool.get().map_err(s)?;
        m.append(bytes.len())
            .ok_or("a frame larger than an mbuf")?
            .copy_from_slice(&bytes);
        out.push(m).map_err(|_| "a full burst")?;
    }
    let t = Instant::now();
    while !out.is_empty() {
        q.tx_burst(0, &mut out);
        if t.elapsed() > Duration::from_secs(2) {
            return Err(format!("{} frames not taken for sending in 2 s", out.len()));
        }
    }
    // Let the device put them on the wire before the port stops.
    std::thread::sleep(Duration::from_millis(100));
    drop(q);
    p.stop().map_err(s)?;
    Ok(n)
}
