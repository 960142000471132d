//! What the I210 and I211 need beyond the rest of the family (Linux's
//! igb `e1000_i210.c`; the I210 datasheet §4.7 and §6): their firmware
//! shares the NVM and the PHY, so software takes each through the
//! semaphores first, and their NVM may be the iNVM, a one-time
//! programmable array of records rather than addressable words.
//!
//! Taking a shared resource: the software semaphore (a read of SWSM that
//! finds SMBI clear has set it), then the software/firmware one (SWESMBI,
//! which latches only while firmware does not hold it), then the
//! resource's bit in SW_FW_SYNC if neither side's is set; both
//! semaphores are released at once, the SW_FW_SYNC bit only when done.
//! Every wait is bounded ([`WAIT`]); a resource firmware never lets go
//! fails naming it.
use crate::hw::{Hw, WAIT};
use crate::regs::*;
use crate::Error;
use rpmd_pmd::function::wait_until;
use std::time::Duration;

impl Hw {
    /// Runs `f` while software holds `resource` in SW_FW_SYNC.
    pub(crate) fn holding<T>(
        &self,
        resource: u32,
        f: impl FnOnce() -> Result<T, Error>,
    ) -> Result<T, Error> {
        self.acquire(resource)?;
        let r = f();
        let released = self.release(resource);
        let v = r?;
        released.map(|()| v)
    }

    /// Both semaphores, or neither (bounded).
    fn semaphore(&self) -> Result<(), Error> {
        let bar = self.regs();
        wait_until("igb software semaphore (SWSM.SMBI)", WAIT, || {
            Ok(bar.read32(SWSM)? & SWSM_SMBI == 0)
        })
        .map_err(self.fail("NVM/PHY semaphore"))?;
        let firmware = wait_until("igb firmware semaphore (SWSM.SWESMBI)", WAIT, || {
            let v = bar.read32(SWSM)?;
            bar.write32(SWSM, v | SWSM_SWESMBI)?;
            Ok(bar.read32(SWSM)? & SWSM_SWESMBI != 0)
        });
        if let Err(e) = firmware {
            self.put_semaphore();
            return Err(self.fail("NVM/PHY semaphore")(e));
        }
        Ok(())
    }

    /// Releases both semaphores.
    fn put_semaphore(&self) {
        if let Ok(v) = self.read(SWSM) {
            let _ = self.write(SWSM, v & !(SWSM_SMBI | SWSM_SWESMBI));
        }
    }

    /// Sets `resource`'s software bit in SW_FW_SYNC once neither side
    /// holds it.
    fn acquire(&self, resource: u32) -> Result<(), Error> {
        let held = resource | resource << 16;
        let what = match resource {
            SWFW_EEP_SM => "igb NVM held by firmware (SW_FW_SYNC)",
            _ => "igb PHY held by firmware (SW_FW_SYNC)",
        };
        wait_until(what, WAIT, || {
            self.semaphore().map_err(|e| rpmd_pmd::Error::Driver {
                port: self.addr().to_string(),
                what: "taking the semaphore".into(),
                source: Box::new(e),
            })?;
            let sync = self.regs().read32(SW_FW_SYNC)?;
            if sync & held == 0 {
                self.regs().write32(SW_FW_SYNC, sync | resource)?;
                self.put_semaphore();
                return Ok(true);
            }
            self.put_semaphore();
            std::thread::sleep(Duration::from_millis(1));
            Ok(false)
        })
        .map_err(self.fail("taking a resource shared with firmware"))
    }

    /// Clears `resource`'s software bit.
    fn release(&self, resource: u32) -> Result<(), Error> {
        self.semaphore()?;
        let r = self
            .read(SW_FW_SYNC)
            .and_then(|v| self.write(SW_FW_SYNC, v & !resource));
        self.put_semaphore();
        r
    }

    /// NVM word `word` from the iNVM's first word-autoload record for it
    /// (as Linux's `igb_read_invm_word_i210` reads it); CSR-autoload and
    /// RSA-key records are skipped with the dwords that follow them, and
    /// an uninitialized record ends the records.
    pub(crate) fn invm_word(&self, word: u16) -> Result<u16, Error> {
        let mut i = 0;
        while i < INVM_SIZE {
            let d = self.read(invm_data_reg(i))?;
            match d & 0x7 {
                INVM_UNINITIALIZED => break,
                INVM_CSR_AUTOLOAD => i += INVM_CSR_AUTOLOAD_DWORDS,
                INVM_RSA_KEY_SHA256 => i += INVM_RSA_KEY_SHA256_DWORDS,
                INVM_WORD_AUTOLOAD if (d >> 9) & 0x7f == word as u32 => {
                    return Ok((d >> 16) as u16);
                }
                _ => {}
            }
            i += 1;
        }
        Err(Error::InvmWord {
            addr: self.addr().to_string(),
            word,
        })
    }
}
