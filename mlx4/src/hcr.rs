//! The host command register (HCR): firmware commands in polling mode.
//!
//! Digest §1 (`core/cmd.c` `mlx4_cmd_post`, `cmd_pending`,
//! `mlx4_cmd_poll`): dwords 0–5 carry the parameters, dword 6 the opcode,
//! op_modifier, GO and the toggle T. The HCR is busy while GO is set or T
//! equals the driver's toggle; the driver starts with toggle 1 (T reads 0
//! after a reset), writes T = toggle with GO, and flips toggle. Every wait
//! has a timeout ([`Timeouts`]); a non-zero status becomes
//! [`Error::Command`] naming the opcode and the status.
use crate::prm::mem::DevBuf;
use crate::prm::{self, hcr, op, status, unwire32, wire32};
use crate::Error;
use rpmd_pmd::function::Regs;
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

/// How long each wait on the device may last.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// For the HCR to be free before a post (Linux: 10 s).
    pub hcr_free: Duration,
    /// For a command to complete (Linux's every class: 60 s).
    pub command: Duration,
    /// After a register reset, before the device is looked at (1 s).
    pub reset_settle: Duration,
    /// For the device to answer config reads after a reset (2 s).
    pub reset_return: Duration,
    /// For the HW semaphore before a register reset (10 s).
    pub semaphore: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            hcr_free: Duration::from_secs(10),
            command: Duration::from_secs(60),
            reset_settle: Duration::from_secs(1),
            reset_return: Duration::from_secs(2),
            semaphore: Duration::from_secs(10),
        }
    }
}

/// One command: opcode, modifiers and the two 64-bit parameters (each an
/// immediate value or a mailbox's device address).
#[derive(Clone, Copy, Debug, Default)]
pub struct Cmd {
    /// The opcode (`prm::op`).
    pub opcode: u16,
    /// op_modifier (8 bits).
    pub op_mod: u8,
    /// in_modifier.
    pub in_mod: u32,
    /// in_param.
    pub in_param: u64,
    /// out_param.
    pub out_param: u64,
}

/// The HCR of one device.
pub struct Hcr {
    bar0: Regs,
    toggle: bool,
    timeouts: Timeouts,
    /// Commands posted, for telemetry.
    posted: u64,
    /// The catastrophic-error buffer's first dword (its window and
    /// offset), watched once QUERY_FW located it.
    catas: Option<(Regs, u64)>,
    /// What that buffer said when the card failed: no command is posted
    /// after.
    failed: Option<u32>,
}

impl Hcr {
    /// The HCR in BAR0 `bar0`, as after a reset (toggle 1).
    pub fn new(bar0: Regs, timeouts: Timeouts) -> Hcr {
        Hcr {
            bar0,
            toggle: true,
            timeouts,
            posted: 0,
            catas: None,
            failed: None,
        }
    }

    /// Watches the catastrophic-error buffer at `off` of `regs` (QUERY_FW
    /// says where), as Linux's `catas.c` polls it.
    pub fn watch_catas(&mut self, regs: Regs, off: u64) {
        self.catas = Some((regs, off));
    }

    /// The card's failure, if it failed: the buffer's first dword read now
    /// (non-zero: failed), or what it read when it first did.
    pub fn catastrophe(&mut self) -> Option<u32> {
        if self.failed.is_none() {
            let now = self.catas.as_ref().and_then(|(r, off)| r.read32(*off).ok());
            self.failed = now.map(unwire32).filter(|&v| v != 0 && v != u32::MAX);
        }
        self.failed
    }

    /// Whether a failure was seen (without reading the buffer).
    pub fn failed(&self) -> Option<u32> {
        self.failed
    }

    /// BAR0, for the other fixed registers.
    pub fn bar0(&self) -> &Regs {
        &self.bar0
    }

    /// The timeouts in force.
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// Commands posted so far.
    pub fn posted(&self) -> u64 {
        self.posted
    }

    /// Starts over as after a reset: T reads 0, so toggle is 1 again.
    pub fn reset(&mut self) {
        self.toggle = true;
    }

    fn read(&self, dword: u64) -> Result<u32, Error> {
        let off = prm::bar0::HCR + 4 * dword;
        self.bar0
            .read32(off)
            .map(unwire32)
            .map_err(|e| Error::Register {
                what: format!("HCR dword {dword} read"),
                source: e,
            })
    }

    fn write(&self, dword: u64, v: u32) -> Result<(), Error> {
        let off = prm::bar0::HCR + 4 * dword;
        self.bar0
            .write32(off, wire32(v))
            .map_err(|e| Error::Register {
                what: format!("HCR dword {dword} write"),
                source: e,
            })
    }

    /// Dword 6 once the HCR is not busy, or a timeout naming `what`; a
    /// card that failed meanwhile ends the wait at once.
    fn wait_free(&mut self, limit: Duration, what: impl Fn() -> String) -> Result<u32, Error> {
        let mut d6 = 0;
        let mut checks = 0u32;
        wait_until(limit, Duration::from_micros(100), what, || {
            d6 = self.read(6)?;
            if d6 & hcr::GO == 0 && (d6 & hcr::TOGGLE != 0) != self.toggle {
                return Ok(true);
            }
            // Every 100 polls (about 10 ms), the error buffer.
            checks += 1;
            if checks % 100 == 0 {
                if let Some(code) = self.catastrophe() {
                    return Err(Error::Catastrophic { code });
                }
            }
            Ok(false)
        })?;
        Ok(d6)
    }

    /// Posts `c` and polls it to completion; the immediate output
    /// (dwords 3–4) on success.
    pub fn exec(&mut self, c: Cmd) -> Result<u64, Error> {
        if let Some(code) = self.failed {
            return Err(Error::Catastrophic { code });
        }
        let name = op::name(c.opcode);
        self.wait_free(self.timeouts.hcr_free, || {
            format!("the HCR to be free before {name}")
        })?;
        self.write(0, (c.in_param >> 32) as u32)?;
        self.write(1, c.in_param as u32)?;
        self.write(2, c.in_mod)?;
        self.write(3, (c.out_param >> 32) as u32)?;
        self.write(4, c.out_param as u32)?;
        self.write(5, hcr::POLL_TOKEN)?;
        // The device reads dwords 0–5 once it sees GO in dword 6: they
        // must reach it first (Linux: `wmb()` before the last write).
        fence(Ordering::SeqCst);
        let t = if self.toggle { hcr::TOGGLE } else { 0 };
        let d6 = hcr::GO | t | (c.op_mod as u32) << hcr::OP_MOD_SHIFT | (c.opcode as u32 & 0xfff);
        self.write(6, d6)?;
        self.toggle = !self.toggle;
        self.posted += 1;
        let d6 = self.wait_free(self.timeouts.command, || format!("{name} to complete"))?;
        // The outputs are read after the completion was seen (the device
        // writes them before clearing GO).
        fence(Ordering::SeqCst);
        let st = (d6 >> hcr::STATUS_SHIFT) as u8;
        if st != status::OK {
            return Err(Error::Command {
                name,
                opcode: c.opcode,
                op_mod: c.op_mod,
                in_mod: c.in_mod,
                status: st,
                status_name: status::name(st),
            });
        }
        Ok((self.read(3)? as u64) << 32 | self.read(4)? as u64)
    }

    /// Runs `c` with `mb` as its output mailbox; the mailbox's first `N`
    /// bytes once it completed.
    pub fn query<const N: usize>(&mut self, mb: &DevBuf, c: Cmd) -> Result<[u8; N], Error> {
        mb.clear();
        self.exec(Cmd {
            out_param: mb.iova(),
            ..c
        })?;
        let mut b = [0u8; N];
        mb.read(0, &mut b);
        Ok(b)
    }
}

/// Polls `done` every `step` until it holds, or `limit` passes (a
/// timeout naming `what`).
pub(crate) fn wait_until(
    limit: Duration,
    step: Duration,
    what: impl Fn() -> String,
    mut done: impl FnMut() -> Result<bool, Error>,
) -> Result<(), Error> {
    let start = Instant::now();
    while !done()? {
        if start.elapsed() >= limit {
            return Err(Error::Timeout {
                what: what(),
                waited: limit,
            });
        }
        std::thread::sleep(step);
    }
    Ok(())
}
