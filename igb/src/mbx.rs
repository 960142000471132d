//! A virtual function's mailbox to its physical function (82576
//! datasheet §7.8.2.9, "PF/VF Mailbox"): 16 shared dwords and a control
//! register whose ownership bits say who may write them.
//!
//! A request: take the memory (VFU, and it reads back set unless the PF
//! holds it), write the message, hand it over (REQ, which drops VFU and
//! interrupts the PF), wait until the PF says it read it (PFACK), wait
//! for its reply (PFSTS), take the memory, read the reply, acknowledge
//! (ACK, which releases it). The PF answers every message with the
//! message's type and ACK or NACK (Linux's igb: `igb_rcv_msg_from_vf`);
//! between a request and its reply it may also send a control message of
//! its own (`PF_CONTROL_MSG`: its reset, a link change), which is
//! acknowledged and passed over.
//!
//! PFSTS, PFACK and RSTD clear when the register is read, so every read
//! keeps them in `seen` until the step that waits for them takes them
//! (as Linux's igbvf does); no status is lost to a read made for another
//! reason. Every wait is bounded ([`MAILBOX_WAIT`]) and fails naming the
//! message and what did not come.
use crate::hw::Hw;
use crate::regs::*;
use crate::Error;
use rpmd_pmd::function::wait_until;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long each step of a request may wait for the PF (Linux's igbvf
/// waits up to 1 s; the PF answers from its interrupt handler, slower
/// under emulation).
pub const MAILBOX_WAIT: Duration = Duration::from_secs(2);

/// The status bits that clear when read.
const READ_CLEARS: u32 = V2PMAILBOX_PFSTS | V2PMAILBOX_PFACK | V2PMAILBOX_RSTD;

/// The VF's end of the mailbox.
#[derive(Default)]
pub(crate) struct Mailbox {
    /// Read-to-clear bits read but not yet taken.
    seen: AtomicU32,
}

/// A message's name, for errors.
pub(crate) fn message_name(word0: u32) -> &'static str {
    match word0 & 0xffff {
        VF_RESET => "VF_RESET",
        VF_SET_MAC_ADDR => "VF_SET_MAC_ADDR",
        VF_SET_MULTICAST => "VF_SET_MULTICAST",
        VF_SET_VLAN => "VF_SET_VLAN",
        VF_SET_LPE => "VF_SET_LPE",
        VF_SET_PROMISC => "VF_SET_PROMISC",
        _ => "an unknown message",
    }
}

impl Mailbox {
    /// V2PMAILBOX as read now, with the read-to-clear bits seen before.
    pub(crate) fn status(&self, hw: &Hw) -> Result<u32, rpmd_pmd::Error> {
        let v = hw.regs().read32(V2PMAILBOX)?;
        let before = self.seen.fetch_or(v & READ_CLEARS, Ordering::Relaxed);
        Ok(v | before)
    }

    /// Whether any of `mask` was set; takes them.
    pub(crate) fn take(&self, hw: &Hw, mask: u32) -> Result<bool, rpmd_pmd::Error> {
        let v = self.status(hw)?;
        self.seen.fetch_and(!mask, Ordering::Relaxed);
        Ok(v & mask != 0)
    }

    /// Sends `msg` and reads the PF's reply into `reply` (its first word
    /// the message's type with ACK), control messages passed over.
    pub(crate) fn request(&self, hw: &Hw, msg: &[u32], reply: &mut [u32]) -> Result<(), Error> {
        let name = message_name(msg[0]);
        self.post(hw, msg, name)?;
        let deadline = Instant::now() + MAILBOX_WAIT;
        loop {
            self.receive(hw, reply, name)?;
            let word = reply[0];
            if word & 0xffff == PF_CONTROL_MSG && Instant::now() < deadline {
                continue;
            }
            if word & 0xffff != msg[0] & 0xffff {
                return Err(Error::Mailbox {
                    addr: hw.addr().to_string(),
                    message: name,
                    detail: format!("the PF answered with {word:#010x}, not this message's type"),
                });
            }
            if word & VT_MSGTYPE_ACK != 0 {
                return Ok(());
            }
            return Err(Error::PfRefused {
                addr: hw.addr().to_string(),
                message: name,
                reply: word,
            });
        }
    }

    /// Writes `msg` into the memory and waits until the PF has read it.
    fn post(&self, hw: &Hw, msg: &[u32], name: &'static str) -> Result<(), Error> {
        self.lock(hw, name)?;
        // Whatever the PF left unread is about to be overwritten.
        self.take(hw, V2PMAILBOX_PFACK | V2PMAILBOX_PFSTS)
            .map_err(|e| self.fail(hw, name, e))?;
        for (k, w) in msg.iter().take(VMBMEM_WORDS).enumerate() {
            hw.write(VMBMEM + 4 * k as u64, *w)?;
        }
        hw.write(V2PMAILBOX, V2PMAILBOX_REQ)?;
        self.wait_for(
            hw,
            V2PMAILBOX_PFACK,
            name,
            "the PF to read the message (PFACK)",
        )
    }

    /// Waits for the PF's message and reads it into `out`.
    fn receive(&self, hw: &Hw, out: &mut [u32], name: &'static str) -> Result<(), Error> {
        self.wait_for(hw, V2PMAILBOX_PFSTS, name, "the PF's reply (PFSTS)")?;
        self.lock(hw, name)?;
        for (k, w) in out.iter_mut().take(VMBMEM_WORDS).enumerate() {
            *w = hw.read(VMBMEM + 4 * k as u64)?;
        }
        hw.write(V2PMAILBOX, V2PMAILBOX_ACK)
    }

    /// Takes the memory (VFU), waiting while the PF holds it.
    fn lock(&self, hw: &Hw, name: &'static str) -> Result<(), Error> {
        wait_until("the mailbox memory (VFU)", MAILBOX_WAIT, || {
            hw.regs().write32(V2PMAILBOX, V2PMAILBOX_VFU)?;
            Ok(self.status(hw)? & V2PMAILBOX_VFU != 0)
        })
        .map_err(|e| self.fail(hw, name, e))
    }

    fn wait_for(
        &self,
        hw: &Hw,
        bit: u32,
        name: &'static str,
        what: &'static str,
    ) -> Result<(), Error> {
        wait_until(what, MAILBOX_WAIT, || self.take(hw, bit)).map_err(|e| self.fail(hw, name, e))
    }

    fn fail(&self, hw: &Hw, message: &'static str, source: rpmd_pmd::Error) -> Error {
        Error::MailboxWait {
            addr: hw.addr().to_string(),
            message,
            source: Box::new(source),
        }
    }
}
