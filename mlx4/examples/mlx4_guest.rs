//! Runs inside the QEMU guest of `tests/vm/run.sh`: the ConnectX-3
//! driver's generic VFIO path on functions bound to vfio-pci behind the
//! guest's IOMMU. QEMU has no ConnectX-3, so this goes as far as PCI and
//! VFIO go on the NICs it has:
//!
//! - the registry: `pci:BDF` of a function no registered driver claims is
//!   refused naming its IDs (mlx4 takes only 15b3:1003 and 15b3:1007);
//! - [`Hca::open`] over VFIO reads the identity from config space and
//!   refuses the function by name, leaving it working (a second open
//!   reads the same identity);
//! - the driver's DMA memory ([`DevBuf`]: mailboxes, the firmware area in
//!   naturally aligned blocks) mapped through the VFIO container, written
//!   and read back, and unmapped when dropped, many times over;
//! - a BAR mapped as the driver maps BAR0 and BAR2, and read;
//! - the function-level reset the driver uses where a function offers it.
//!
//! ```text
//! mlx4_guest BDF...
//! ```
//!
//! Prints `case ...: ok|FAIL` lines and `mlx4_guest: N passed, M failed`.
use rpmd_mlx4::fw::blocks;
use rpmd_mlx4::prm::mem::DevBuf;
use rpmd_mlx4::{Error, Hca, Options};
use rpmd_pmd::function::{cfg, PciFunction};
use rpmd_pmd::vfio::VfioBus;
use rpmd_pmd::Registry;
use std::sync::Arc;

type R<T> = Result<T, String>;

fn open(bdf: &str) -> R<(VfioBus, Arc<dyn PciFunction>)> {
    VfioBus::open_alone(bdf).map_err(|e| format!("open {bdf}: {e}"))
}

fn identity(func: &dyn PciFunction) -> R<(u16, u16)> {
    let c = func.config().map_err(|e| e.to_string())?;
    let v = c.read16(cfg::VENDOR).map_err(|e| e.to_string())?;
    let d = c.read16(cfg::DEVICE).map_err(|e| e.to_string())?;
    Ok((v, d))
}

fn registry_refuses(bdf: &str) -> R<String> {
    let mut reg = Registry::empty();
    rpmd_mlx4::register(&mut reg);
    match reg.open(&format!("pci:{bdf}")) {
        Ok(_) => Err("a non-ConnectX function opened as a port".into()),
        Err(e) if e.to_string().contains("no registered driver handles") => Ok(e.to_string()),
        Err(e) => Err(format!("not the refusal expected: {e}")),
    }
}

fn open_refuses(bdf: &str) -> R<String> {
    let (_bus, func) = open(bdf)?;
    let before = identity(&*func)?;
    let e = match Hca::open(func.clone(), &Options::default()) {
        Ok(_) => return Err("Hca::open took a function that is no ConnectX-3".into()),
        Err(e) => e,
    };
    match e {
        Error::NotConnectX3 { vendor, device, .. } if (vendor, device) == before => {}
        e => return Err(format!("not the refusal expected: {e}")),
    }
    let after = identity(&*func)?;
    if after != before {
        return Err(format!("identity {before:04x?} became {after:04x?}"));
    }
    Ok(e.to_string())
}

fn dma(bdf: &str) -> R<String> {
    let (_bus, func) = open(bdf)?;
    for round in 0..64u32 {
        let mb = DevBuf::new(&*func, "mlx4 mailbox", 4096).map_err(|e| e.to_string())?;
        let fa = DevBuf::new(&*func, "mlx4 firmware area", 23 * 4096).map_err(|e| e.to_string())?;
        let pattern: Vec<u8> = (0..4096u32).map(|i| (i ^ round) as u8).collect();
        if !mb.write(0, &pattern) || !fa.write(22 * 4096, &pattern) {
            return Err("a write inside the buffer refused".into());
        }
        let mut back = vec![0u8; 4096];
        if !fa.read(22 * 4096, &mut back) || back != pattern {
            return Err(format!("round {round}: the firmware area read back wrong"));
        }
        if mb.iova() % 4096 != 0 || fa.iova() % 4096 != 0 {
            return Err(format!(
                "IOVAs {:#x}, {:#x} not page-aligned",
                mb.iova(),
                fa.iova()
            ));
        }
        let b = blocks(fa.iova(), fa.len() as u64);
        let total: u64 = b.iter().map(|&(_, log)| 1u64 << log).sum();
        let aligned = b.iter().all(|&(a, log)| a % (1u64 << log) == 0);
        if total != fa.len() as u64 || !aligned {
            return Err(format!("firmware-area blocks {b:x?}"));
        }
    }
    Ok("64 rounds of a mailbox and a 23-page area mapped, checked, unmapped".into())
}

fn bars(bdf: &str) -> R<String> {
    let (_bus, func) = open(bdf)?;
    for bar in 0..6 {
        if let Ok(regs) = func.bar(bar) {
            let v = regs.read32(0).map_err(|e| e.to_string())?;
            return Ok(format!("BAR{bar} mapped, dword 0 = {v:#x}"));
        }
    }
    Err("no memory BAR could be mapped".into())
}

fn reset(bdf: &str) -> R<String> {
    let (_bus, func) = open(bdf)?;
    if !func.can_reset() {
        return Ok(
            "no function-level reset offered (the driver's register reset would be used)".into(),
        );
    }
    let before = identity(&*func)?;
    func.reset().map_err(|e| e.to_string())?;
    let after = identity(&*func)?;
    if after != before {
        return Err(format!("identity {before:04x?} after reset {after:04x?}"));
    }
    Ok("reset, identity unchanged".into())
}

fn main() {
    let (mut pass, mut fail) = (0u32, 0u32);
    for bdf in std::env::args().skip(1) {
        type Case = fn(&str) -> R<String>;
        let cases: [(&str, Case); 5] = [
            ("registry refuses", registry_refuses),
            ("Hca::open refuses", open_refuses),
            ("DMA memory", dma),
            ("BAR", bars),
            ("reset", reset),
        ];
        for (name, f) in cases {
            match f(&bdf) {
                Ok(what) => {
                    pass += 1;
                    println!("case mlx4 {bdf} {name}: ok ({what})");
                }
                Err(e) => {
                    fail += 1;
                    println!("case mlx4 {bdf} {name}: FAIL: {e}");
                }
            }
        }
    }
    println!("mlx4_guest: {pass} passed, {fail} failed");
    std::process::exit(i32::from(fail > 0));
}
