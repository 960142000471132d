//! What the igb driver refuses or fails at.

/// The igb driver's errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The function is not an igb family member the driver runs.
    #[error("{addr}: {vendor:04x}:{device:04x} is not an Intel 82576, 82580, I350, I210 or I211, nor a virtual function of one (igb takes 8086:{known})")]
    NotIgb {
        /// The function's address.
        addr: String,
        /// Its vendor ID.
        vendor: u16,
        /// Its device ID.
        device: u16,
        /// The IDs it takes.
        known: String,
    },
    /// The EEPROM image's checksum is wrong: its contents (the MAC
    /// address among them) cannot be trusted.
    #[error("{addr}: the EEPROM checksum is not valid (words {first:#06x}-{last:#06x} sum to {sum:#06x}, not 0xbaba): the NVM image is corrupt")]
    EepromChecksum {
        /// The function's address.
        addr: String,
        /// The section's first word.
        first: u16,
        /// Its checksum word.
        last: u16,
        /// What the words summed to.
        sum: u16,
    },
    /// The function's link is not the internal copper PHY's, which is
    /// the only one the driver brings up.
    #[error("{addr}: the {family}'s link mode is {mode} (CTRL_EXT bits 23:22 = {bits:#04b}); rpmd's igb drives the internal copper PHY only")]
    LinkMode {
        /// The function's address.
        addr: String,
        /// The family member.
        family: &'static str,
        /// The mode's name.
        mode: &'static str,
        /// The mode's bits.
        bits: u32,
    },
    /// A PHY register access that no PHY answered.
    #[error("{addr}: PHY register {reg}: the MDI access failed (MDIC error bit)")]
    Phy {
        /// The function's address.
        addr: String,
        /// The register.
        reg: u32,
    },
    /// What the PCI function layer reported (a register window, a wait
    /// that timed out, DMA).
    #[error("{addr}: {what}: {source}")]
    Function {
        /// The function's address.
        addr: String,
        /// What was being done.
        what: &'static str,
        /// The underlying error.
        #[source]
        source: rpmd_pmd::Error,
    },
    /// DMA memory for a ring or its mapping for the device.
    #[error("{what}: {source}")]
    Memory {
        /// Which memory.
        what: String,
        /// The underlying error.
        #[source]
        source: rpmd_pmd::Error,
    },
    /// A virtual function's PF is being reset, or its driver has not
    /// brought it up (the mailbox's RSTI stays set).
    #[error("{addr}: the virtual function's PF is in reset (mailbox RSTI set for {ms} ms): bring the PF's interface up (Linux: ip link set <pf> up)")]
    PfNotReady {
        /// The VF's address.
        addr: String,
        /// How long it was waited for.
        ms: u64,
    },
    /// A mailbox step the PF did not complete in time.
    #[error("{addr}: mailbox message {message}: {source}")]
    MailboxWait {
        /// The VF's address.
        addr: String,
        /// The message.
        message: &'static str,
        /// The wait that timed out.
        #[source]
        source: Box<rpmd_pmd::Error>,
    },
    /// A reply that does not answer the message sent.
    #[error("{addr}: mailbox message {message}: {detail}")]
    Mailbox {
        /// The VF's address.
        addr: String,
        /// The message.
        message: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// The PF refused a request (NACK).
    #[error("{addr}: the PF refused {message} (reply {reply:#010x})")]
    PfRefused {
        /// The VF's address.
        addr: String,
        /// The message.
        message: &'static str,
        /// The reply's first word.
        reply: u32,
    },
    /// An NVM word the I210's or I211's iNVM has no record for.
    #[error("{addr}: NVM word {word:#04x} is not in the iNVM (no word-autoload record for it in the OTP)")]
    InvmWord {
        /// The function's address.
        addr: String,
        /// The word.
        word: u16,
    },
    /// A ring that cannot be made as asked.
    #[error("{what}: {detail}")]
    Ring {
        /// Which ring.
        what: String,
        /// What is wrong.
        detail: String,
    },
}
