//! The objects a raw-Ethernet port needs besides the ICM (digest §2.2
//! steps 6–7, §2.7): the one physical memory region every WQE names,
//! MTT entries for the queue buffers, and the numbers of CQs and QPs.
//!
//! As mlx4_en does, rpmd registers one physical MR covering all memory
//! (`core/en_main.c`): WQEs carry bus addresses (IOVAs) and its lkey. The
//! queue buffers (EQ, CQ, QP) are described to the device by MTT entries,
//! one per 4 KiB page, which the native driver writes straight into the
//! MTT table's ICM memory (`core/mr.c` `mlx4_write_mtt_chunk`).
use crate::caps::DevCap;
use crate::hcr::Cmd;
use crate::icm::{Layout, Table};
use crate::prm::layout::Mpt;
use crate::prm::mem::{DevBuf, Wire};
use crate::prm::{mpt, op};
use crate::{Error, Hca};
use rpmd_pmd::endian::{Be32, Be64};

/// Bytes per page of a queue buffer (each one MTT entry).
pub const PAGE: u64 = 4096;

/// Numbers of one kind of object (CQ, QP), from the first the firmware
/// leaves to the driver.
#[derive(Debug)]
pub(crate) struct Ids {
    next: u32,
    end: u32,
    free: Vec<u32>,
}

impl Ids {
    pub(crate) fn new(first: u32, end: u32) -> Ids {
        Ids {
            next: first,
            end,
            free: Vec::new(),
        }
    }

    pub(crate) fn take(&mut self, what: &str) -> Result<u32, Error> {
        if let Some(n) = self.free.pop() {
            return Ok(n);
        }
        if self.next >= self.end {
            return Err(Error::Firmware(format!(
                "no {what} numbers left (the ICM holds {})",
                self.end
            )));
        }
        self.next += 1;
        Ok(self.next - 1)
    }

    pub(crate) fn give(&mut self, n: u32) {
        self.free.push(n);
    }

    /// `count` consecutive numbers, the first a multiple of `count` (a
    /// power of two): an RSS QP's range.
    pub(crate) fn take_aligned(&mut self, what: &str, count: u32) -> Result<u32, Error> {
        let first = self.next.next_multiple_of(count);
        if first.checked_add(count).is_none_or(|e| e > self.end) {
            return Err(Error::Firmware(format!(
                "no run of {count} {what} numbers left (the ICM holds {})",
                self.end
            )));
        }
        self.free.extend(self.next..first);
        self.next = first + count;
        Ok(first)
    }
}

/// A run of MTT entries describing one buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MttRange {
    /// Index of the first entry.
    pub first: u64,
    /// Entries (one per [`PAGE`]).
    pub count: u64,
}

impl MttRange {
    /// The byte offset contexts carry: bits 39:32 (`mtt_h`) and 31:0
    /// (`mtt_l`).
    pub fn offset(&self) -> (u8, Be32) {
        let off = self.first * mpt::MTT_ENTRY;
        ((off >> 32) as u8, Be32::new(off as u32))
    }
}

/// First-fit allocation of MTT entries past the firmware's.
#[derive(Debug)]
pub(crate) struct MttAlloc {
    /// Free runs (first, count), sorted.
    free: Vec<(u64, u64)>,
}

impl MttAlloc {
    /// The table of `layout`, less the reserved entries rounded up to a
    /// cache line (the firmware writes those; digest §2.5).
    pub(crate) fn new(layout: &Layout, cap: &DevCap) -> MttAlloc {
        let rsvd = (1u64 << cap.log_rsvd_mtts).next_multiple_of(8);
        let total = layout.get(Table::Mtt).count;
        MttAlloc {
            free: vec![(rsvd, total.saturating_sub(rsvd))],
        }
    }

    fn take(&mut self, count: u64) -> Option<MttRange> {
        let i = self.free.iter().position(|&(_, n)| n >= count)?;
        let (first, n) = self.free[i];
        if n == count {
            self.free.remove(i);
        } else {
            self.free[i] = (first + count, n - count);
        }
        Some(MttRange { first, count })
    }

    fn give(&mut self, r: MttRange) {
        let i = self.free.partition_point(|&(f, _)| f < r.first);
        self.free.insert(i, (r.first, r.count));
        // Merge with the neighbours.
        if i + 1 < self.free.len() && self.free[i].0 + self.free[i].1 == self.free[i + 1].0 {
            self.free[i].1 += self.free.remove(i + 1).1;
        }
        if i > 0 && self.free[i - 1].0 + self.free[i - 1].1 == self.free[i].0 {
            self.free[i - 1].1 += self.free.remove(i).1;
        }
    }
}

impl Hca {
    /// MTT entries for `buf`, one per 4 KiB page, written into the MTT
    /// table.
    pub(crate) fn map_mtt(&mut self, buf: &DevBuf) -> Result<MttRange, Error> {
        let count = (buf.len() as u64).div_ceil(PAGE);
        let (Some(icm), Some(alloc)) = (self.icm.as_ref(), self.mtts.as_mut()) else {
            return Err(Error::Firmware("the HCA is closed".into()));
        };
        let r = alloc
            .take(count)
            .ok_or_else(|| Error::Firmware(format!("no run of {count} free MTT entries left")))?;
        let base = icm.layout.get(Table::Mtt).base;
        for k in 0..count {
            let entry = Be64::new((buf.iova() + k * PAGE) | mpt::MTT_PRESENT);
            let at = base + (r.first + k) * mpt::MTT_ENTRY;
            if !icm.write(at, &entry.get().to_be_bytes()) {
                alloc.give(r);
                return Err(Error::Firmware(format!(
                    "MTT entry {} at ICM {at:#x} has no memory",
                    r.first + k
                )));
            }
        }
        Ok(r)
    }

    /// Gives MTT entries back (after the object using them was destroyed).
    pub(crate) fn unmap_mtt(&mut self, r: MttRange) {
        if let Some(a) = self.mtts.as_mut() {
            a.give(r);
        }
    }

    /// SW2HW_MPT of mlx4_en's physical MR (start 0, all of memory, local
    /// read and write, 4 KiB entity size); its lkey.
    pub(crate) fn register_mr(&mut self, index: u32, pd: u32) -> Result<u32, Error> {
        let mut m = Mpt::zeroed();
        m.flags = Be32::new(mpt::EN_FLAGS);
        m.key = Be32::new(mpt::key(index));
        m.pd_flags = Be32::new(pd | mpt::PD_EN_INV);
        m.start = Be64::new(0);
        m.length = Be64::new(u64::MAX);
        m.lkey = Be32::new(mpt::key(index));
        m.entity_size = Be32::new(12);
        self.mailbox.clear();
        self.mailbox.put(0, &m);
        let mpts = self
            .icm
            .as_ref()
            .map_or(1, |i| i.layout.get(Table::Dmpt).count as u32);
        self.hcr.exec(Cmd {
            opcode: op::SW2HW_MPT,
            in_mod: index & (mpts - 1),
            in_param: self.mailbox.iova(),
            ..Cmd::default()
        })?;
        Ok(mpt::key(index))
    }

    /// HW2SW_MPT (op_mod 1: no output mailbox).
    pub(crate) fn deregister_mr(&mut self, index: u32) -> Result<(), Error> {
        self.hcr
            .exec(Cmd {
                opcode: op::HW2SW_MPT,
                op_mod: 1,
                in_mod: index,
                ..Cmd::default()
            })
            .map(drop)
    }
}
