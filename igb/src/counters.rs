//! The device's statistics registers (datasheet §8.19), which clear on
//! read: each read adds to a running total, so that every reader (stats,
//! xstats, `imissed`) sees counts since the port opened.
use crate::hw::Hw;
use crate::regs::*;
use rpmd_pmd::port::Xstat;
use std::sync::Mutex;

/// The registers kept, by xstat name (64-bit octet counters read as
/// their low register; the high one follows it).
const REGISTERS: [(&str, u64, bool); 16] = [
    ("rx_good_packets", GPRC, false),
    ("tx_good_packets", GPTC, false),
    ("rx_good_bytes", GORCL, true),
    ("tx_good_bytes", GOTCL, true),
    ("rx_broadcast_packets", BPRC, false),
    ("rx_multicast_packets", MPRC, false),
    ("tx_broadcast_packets", BPTC, false),
    ("tx_multicast_packets", MPTC, false),
    ("rx_total_packets", TPR, false),
    ("tx_total_packets", TPT, false),
    ("rx_crc_errors", CRCERRS, false),
    ("rx_length_errors", RLEC, false),
    ("rx_undersize_errors", RUC, false),
    ("rx_oversize_errors", ROC, false),
    ("rx_no_buffer_count", RNBC, false),
    ("rx_missed_errors", MPC, false),
];

/// Index of MPC in [`REGISTERS`].
const MISSED: usize = 15;

/// Running totals of the statistics registers.
#[derive(Default)]
pub(crate) struct Counters {
    totals: Mutex<[u64; REGISTERS.len()]>,
}

impl Counters {
    /// Reads every register into the totals; a register that cannot be
    /// read adds nothing.
    fn update(&self, hw: &Hw) -> [u64; REGISTERS.len()] {
        let mut t = self.totals.lock().unwrap_or_else(|e| e.into_inner());
        for (k, &(_, off, wide)) in REGISTERS.iter().enumerate() {
            let lo = hw.read(off).unwrap_or(0) as u64;
            let hi = if wide {
                hw.read(off + 4).unwrap_or(0) as u64
            } else {
                0
            };
            t[k] += hi << 32 | lo;
        }
        *t
    }

    /// Zeroes the registers (read and discarded): at open.
    pub(crate) fn clear(&self, hw: &Hw) {
        self.update(hw);
        *self.totals.lock().unwrap_or_else(|e| e.into_inner()) = Default::default();
    }

    /// Frames the device dropped for lack of room (MPC), since open.
    pub(crate) fn missed(&self, hw: &Hw) -> u64 {
        self.update(hw)[MISSED]
    }

    /// Every register as an xstat.
    pub(crate) fn xstats(&self, hw: &Hw, out: &mut Vec<Xstat>) {
        let t = self.update(hw);
        for (k, &(name, _, _)) in REGISTERS.iter().enumerate() {
            out.push(Xstat {
                name: name.to_string(),
                value: t[k],
            });
        }
    }
}
