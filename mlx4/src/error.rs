//! The mlx4 crate's error type.
use std::time::Duration;

/// What went wrong bringing a ConnectX-3 up or talking to it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// DMA memory for the device could not be had or mapped.
    #[error("mlx4: {what}: {source}")]
    Memory {
        /// What the memory was for.
        what: String,
        /// The runtime's error.
        #[source]
        source: rpmd_pmd::Error,
    },
    /// A register window could not be opened or accessed.
    #[error("mlx4: {what}: {source}")]
    Register {
        /// Which access.
        what: String,
        /// The runtime's error.
        #[source]
        source: rpmd_pmd::Error,
    },
    /// The function is not a ConnectX-3.
    #[error("mlx4: {addr} is {vendor:04x}:{device:04x}, not a ConnectX-3 (15b3:1003) or ConnectX-3 Pro (15b3:1007)")]
    NotConnectX3 {
        /// The function.
        addr: String,
        /// Its vendor ID.
        vendor: u16,
        /// Its device ID.
        device: u16,
    },
    /// Another driver owns the device (the ownership semaphore read
    /// non-zero).
    #[error("mlx4: {addr} is owned by another driver (ownership semaphore {value:#x}); unbind it (rpmd-bind) or stop the process using it")]
    Owned {
        /// The function.
        addr: String,
        /// What the semaphore read.
        value: u32,
    },
    /// A firmware command completed with a non-zero status.
    #[error("mlx4: command {name} ({opcode:#05x}, op_mod {op_mod}, in_mod {in_mod:#x}) failed: status {status:#04x} ({status_name})")]
    Command {
        /// The command's name.
        name: &'static str,
        /// Its opcode.
        opcode: u16,
        /// Its op_modifier.
        op_mod: u8,
        /// Its in_modifier.
        in_mod: u32,
        /// The status byte.
        status: u8,
        /// The status's name.
        status_name: &'static str,
    },
    /// A wait on the device ran out of time.
    #[error("mlx4: timed out after {waited:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        waited: Duration,
    },
    /// The card reported an internal error in its catastrophic-error
    /// buffer: it takes no commands and moves no frames until a reset.
    #[error("mlx4: the card failed (catastrophic-error buffer {code:#010x}); it was reset and takes nothing more: close its ports and open them again")]
    Catastrophic {
        /// The buffer's first dword.
        code: u32,
    },
    /// The firmware reported something this driver cannot work with.
    #[error("mlx4: firmware: {0}")]
    Firmware(String),
}
