//! MSI-X: a vector per receive queue, armed only while its lcore sleeps,
//! and one for the device's other causes (link changes), whose watcher
//! thread raises the port's link events; on a VF, a vector per receive
//! queue only.
//!
//! In MSI-X mode (GPIE) each cause goes to the vector its IVAR entry
//! names. Every vector's cause clears when its message goes out (EIAC),
//! so the next one can interrupt again; a receive queue's vector also
//! masks itself then (EIAM), so that on the 82576 it fires once per
//! arming (QEMU's model does not apply EIAM: there it fires until the
//! run loop disarms it, which it does on waking). The queue's
//! `set_interrupt(true)` writes its bit to EIMS, and
//! `set_interrupt(false)` to EIMC. No throttling (EITR 0): a vector is
//! armed only when its queue was found empty.
use crate::hw::Hw;
use crate::regs::*;
use crate::Error;
use rpmd_pmd::function::{EventFd, Regs};
use rpmd_pmd::port::events::{watch_wait, LinkEvents, WatchThread};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A receive queue's interrupt: its eventfd and its vector's bit.
pub(crate) struct RxIrq {
    pub fd: EventFd,
    pub bit: u32,
    pub regs: Arc<Regs>,
}

impl RxIrq {
    /// Lets the vector fire once (`true`), or masks it. Arming first
    /// clears the cause latched while it was masked (EICR is write-1-to-
    /// clear): frames that came meanwhile are the caller's to find
    /// (`has_work` after arming), not a stale interrupt's.
    pub(crate) fn arm(&self, on: bool) -> Result<(), rpmd_pmd::Error> {
        if on {
            self.regs.write32(EICR, self.bit)?;
            self.regs.write32(EIMS, self.bit)
        } else {
            self.regs.write32(EIMC, self.bit)
        }
    }
}

/// Receive queue `q`'s interrupt for each of `fds` (vector `q`).
fn rx_irqs(hw: &Hw, fds: Vec<EventFd>) -> Vec<RxIrq> {
    fds.into_iter()
        .enumerate()
        .map(|(q, fd)| RxIrq {
            fd,
            bit: 1 << q,
            regs: hw.regs().clone(),
        })
        .collect()
}

/// The vectors of a start: one per receive queue, then the other causes'.
pub(crate) struct Vectors {
    pub rx: Vec<RxIrq>,
    pub other: EventFd,
}

/// Writes 8-bit IVAR entry `n` (register `n / 4`, byte `n % 4`).
fn set_ivar(hw: &Hw, n: u32, vector: u32) -> Result<(), Error> {
    let reg = IVAR0 + 4 * (n / 4) as u64;
    let shift = 8 * (n % 4);
    let v = hw.read(reg)? & !(0xff << shift);
    hw.write(reg, v | (vector | IVAR_VALID) << shift)
}

/// Enables MSI-X with a vector per receive queue and one for the other
/// causes, if the function has that many; `None` if it has fewer (the
/// queues then offer no interrupt and the run loop's sleep timer wakes
/// them).
pub(crate) fn enable(hw: &Hw, rx_queues: u16) -> Result<Option<Vectors>, Error> {
    let func = hw.function();
    let n = rx_queues as u32 + 1;
    if func.msix_vectors() < n {
        return Ok(None);
    }
    let fail = |what| {
        let addr = hw.addr().to_string();
        move |source| Error::Function { addr, what, source }
    };
    let mut fds = func.enable_msix(n).map_err(fail("enabling MSI-X"))?;
    let other = fds.pop().ok_or_else(|| Error::Ring {
        what: "MSI-X".into(),
        detail: format!("asked for {n} vectors, got none"),
    })?;
    let other_v = n - 1;
    hw.write(GPIE, GPIE_MSIX_MODE | GPIE_EIAME | GPIE_PBA | GPIE_NSICR)?;
    let rx_bits = (1u32 << (n - 1)) - 1;
    for q in 0..rx_queues {
        set_ivar(hw, hw.family().ivar_rx_entry(q), q as u32)?;
        hw.write(eitr(q as u32), 0)?;
    }
    hw.write(IVAR_MISC, (other_v | IVAR_VALID) << 8)?;
    hw.write(EIAC, rx_bits | 1 << other_v)?;
    hw.write(EIAM, rx_bits)?;
    hw.write(EIMC, u32::MAX)?;
    // Causes raised while masked (the link coming up at open) would hide
    // the next change of the same cause: read to clear them first.
    hw.read(ICR)?;
    hw.write(IMS, ICR_LSC)?;
    hw.write(EIMS, 1 << other_v)?;
    let rx = rx_irqs(hw, fds);
    Ok(Some(Vectors { rx, other }))
}

/// A VF's receive-queue vectors (82576 datasheet §7.8.2.11: the VF's
/// IVAR0 holds an 8-bit entry per queue, receive queue `q` in byte
/// `2q`; its EIMS, EIMC, EIAC and EIAM work on its own vector bits, and
/// MSI-X mode is the PF's to set). The mailbox's vector is not used: the
/// driver asks and waits. `None` if the VF has fewer vectors than
/// queues.
pub(crate) fn enable_vf(hw: &Hw, rx_queues: u16) -> Result<Option<Vec<RxIrq>>, Error> {
    let func = hw.function();
    let n = rx_queues as u32;
    if n == 0 || func.msix_vectors() < n {
        return Ok(None);
    }
    let fds = func.enable_msix(n).map_err(|source| Error::Function {
        addr: hw.addr().to_string(),
        what: "enabling the VF's MSI-X",
        source,
    })?;
    let bits = (1u32 << n) - 1;
    hw.write(EIMC, VF_VECTORS_MASK)?;
    let mut ivar = 0;
    for q in 0..n {
        ivar |= (q | IVAR_VALID) << (16 * q);
        hw.write(eitr(q), 0)?;
    }
    hw.write(IVAR0, ivar)?;
    hw.write(EIAC, bits)?;
    hw.write(EIAM, bits)?;
    let rx = rx_irqs(hw, fds);
    Ok(Some(rx))
}

/// Masks a VF's vectors and turns its MSI-X off.
pub(crate) fn disable_vf(hw: &Hw) -> Result<(), Error> {
    hw.write(EIMC, VF_VECTORS_MASK)?;
    hw.write(IVAR0, 0)?;
    hw.function()
        .disable_msix()
        .map_err(|source| Error::Function {
            addr: hw.addr().to_string(),
            what: "disabling the VF's MSI-X",
            source,
        })
}

/// Masks every vector and turns MSI-X off.
pub(crate) fn disable(hw: &Hw) -> Result<(), Error> {
    hw.write(EIMC, u32::MAX)?;
    hw.write(IMC, u32::MAX)?;
    hw.write(GPIE, 0)?;
    hw.function()
        .disable_msix()
        .map_err(|source| Error::Function {
            addr: hw.addr().to_string(),
            what: "disabling MSI-X",
            source,
        })
}

/// The thread that turns the other causes' vector into link events.
pub(crate) struct LinkWatch {
    _thread: WatchThread,
    /// Messages on the vector, link changes among them, and waits on it
    /// that failed (each returns at once).
    pub counts: Arc<[AtomicU64; 3]>,
}

impl LinkWatch {
    /// Waits on `other` and raises `events` on every message (reading ICR
    /// clears the cause), until dropped.
    pub(crate) fn spawn(regs: Arc<Regs>, other: EventFd, events: LinkEvents) -> LinkWatch {
        let counts: Arc<[AtomicU64; 3]> = Arc::default();
        let seen = counts.clone();
        let thread = WatchThread::spawn("igb-link", move || {
            if !watch_wait(&other, Duration::from_millis(100), &seen[2]) {
                return;
            }
            seen[0].fetch_add(1, Ordering::Relaxed);
            if regs.read32(ICR).is_ok_and(|c| c & ICR_LSC != 0) {
                seen[1].fetch_add(1, Ordering::Relaxed);
                events.raise();
            }
        });
        LinkWatch {
            _thread: thread,
            counts,
        }
    }
}
