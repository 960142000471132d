//! The ICM: the device's context tables, kept in host memory the driver
//! gives it (digest §2.2 step 4, §2.5; `core/profile.c`
//! `mlx4_make_profile`, `core/main.c` `mlx4_init_icm`, `core/icm.c`).
//!
//! The profile sizes each table for a poll-mode driver (a few hundred
//! queues, not Linux's quarter million QPs), packs the tables into one
//! ICM address space largest first so each is naturally aligned, and
//! asks SET_ICM_SIZE how many auxiliary pages the firmware wants. Linux
//! maps most tables lazily in 256 KiB chunks as objects are created; with
//! tables this small rpmd maps all of each one up front (about 2 MiB),
//! except cMPT, whose address space is fixed at 4 × 2^24 entries and of
//! which only each type's first `count` entries are mapped. Teardown
//! unmaps every range (UNMAP_ICM), then the auxiliary area
//! (UNMAP_ICM_AUX); memory the device did not let go of is leaked, never
//! reused.
use crate::caps::{DevCap, Steering};
use crate::fw::{blocks_at, map_pages, post_page_list};
use crate::hcr::{Cmd, Hcr};
use crate::prm::icm::{self as p, CMPT_SHIFT};
use crate::prm::init_hca as ih;
use crate::prm::layout::InitHca;
use crate::prm::mem::{DevBuf, Wire};
use crate::prm::{op, page_list};
use crate::Error;
use rpmd_pmd::endian::{Be32, Be64};
use rpmd_pmd::function::PciFunction;

/// How many of each object the driver asks for (each rounded up to a
/// power of two, at least twice what the firmware reserves, at most what
/// the card allows).
#[derive(Clone, Copy, Debug)]
pub struct Profile {
    /// Queue pairs.
    pub qps: u64,
    /// Shared receive queues (unused by Ethernet, but the table exists).
    pub srqs: u64,
    /// Completion queues.
    pub cqs: u64,
    /// Memory regions (dMPT entries).
    pub mpts: u64,
    /// MTT entries (one per queue buffer here).
    pub mtts: u64,
    /// Multicast-group entries (MAC steering in B0 mode).
    pub mcgs: u64,
    /// RDMA read contexts per QP.
    pub rdmarc_per_qp: u64,
}

impl Default for Profile {
    fn default() -> Self {
        Profile {
            qps: 1 << 10,
            srqs: 1 << 6,
            cqs: 1 << 10,
            mpts: 1 << 10,
            mtts: 1 << 14,
            mcgs: 1 << 8,
            rdmarc_per_qp: 1,
        }
    }
}

/// The ICM tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // each is the context table of that name
pub enum Table {
    Qpc,
    Auxc,
    Altc,
    Rdmarc,
    Srqc,
    Cqc,
    Eqc,
    Dmpt,
    Mtt,
    Cmpt,
    Mcg,
}

/// One table placed in ICM.
#[derive(Clone, Copy, Debug)]
pub struct Placed {
    /// Which.
    pub table: Table,
    /// ICM address of entry 0.
    pub base: u64,
    /// Entries (a power of two).
    pub count: u64,
    /// Bytes per entry.
    pub entry: u64,
}

impl Placed {
    /// Bytes of ICM address space, at least a page.
    pub fn bytes(&self) -> u64 {
        (self.count * self.entry).max(p::PAGE)
    }
}

/// The tables' sizes and places, and the address space they fill.
#[derive(Clone, Debug)]
pub struct Layout {
    /// Every table, largest first.
    pub tables: Vec<Placed>,
    /// ICM bytes in all (what SET_ICM_SIZE is told).
    pub total: u64,
}

/// `n` rounded up to a power of two, at least `2 × reserved`, at most
/// `2^log_max`; refused if the card reserves all of them.
fn count(what: &str, n: u64, reserved: u64, log_max: u8) -> Result<u64, Error> {
    let max = 1u64 << log_max.min(40);
    let want = n.max(2 * reserved).next_power_of_two().min(max);
    if want <= reserved {
        return Err(Error::Firmware(format!(
            "QUERY_DEV_CAP: the card reserves {reserved} of its {max} {what}, leaving none"
        )));
    }
    Ok(want)
}

impl Layout {
    /// Sizes every table from `cap` and `req` and packs them (digest
    /// §2.5 steps 1–3); refuses a total over the card's maximum ICM.
    pub fn new(cap: &DevCap, req: &Profile) -> Result<Layout, Error> {
        let e = |i: usize| cap.entry_sizes[i] as u64;
        let qps = count("QPs", req.qps, 1 << cap.log_rsvd_qps, cap.log_max_qps)?;
        let srqs = count("SRQs", req.srqs, 1 << cap.log_rsvd_srqs, cap.log_max_srqs)?;
        let cqs = count("CQs", req.cqs, 1 << cap.log_rsvd_cqs, cap.log_max_cqs)?;
        let mpts = count("MPTs", req.mpts, 1 << cap.log_rsvd_mpts, cap.log_max_mpts)?;
        // Without SYS_EQS, Linux reserves at least 4 EQs per reserved UAR.
        let rsvd_eqs = (1u64 << cap.log_rsvd_eqs).max(4 * cap.rsvd_uars as u64);
        let eqs = count("EQs", p::EQC_ENTRIES, rsvd_eqs, cap.log_max_eqs)?;
        let mtts = count("MTTs", req.mtts, 1 << cap.log_rsvd_mtts, 40)?;
        let mcgs = count("MCGs", req.mcgs, 0, cap.log_max_mcgs)?;
        let rdmarc = req.rdmarc_per_qp.max(1).next_power_of_two();
        // Entry sizes in QUERY_DEV_CAP order: RDMARC, QPC, AUXC, ALTC,
        // EQC, CQC, SRQC, cMPT, MTT, dMPT.
        let mut tables = vec![
            (Table::Qpc, qps, e(1)),
            (Table::Auxc, qps, e(2)),
            (Table::Altc, qps, e(3)),
            (Table::Rdmarc, qps * rdmarc, e(0)),
            (Table::Srqc, srqs, e(6)),
            (Table::Cqc, cqs, e(5)),
            (Table::Eqc, eqs, e(4)),
            (Table::Dmpt, mpts, e(9)),
            (Table::Mtt, mtts, e(8)),
            (Table::Cmpt, 4 << CMPT_SHIFT, e(7)),
            (Table::Mcg, mcgs, 1 << p::LOG_MGM_ENTRY),
        ]
        .into_iter()
        .map(|(table, count, entry)| {
            if !entry.is_power_of_two() {
                return Err(Error::Firmware(format!(
                    "QUERY_DEV_CAP: {table:?} entries of {entry} bytes (not a power of two)"
                )));
            }
            Ok(Placed {
                table,
                base: 0,
                count,
                entry,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
        tables.sort_by_key(|t| std::cmp::Reverse(t.bytes()));
        let mut total = 0;
        for t in &mut tables {
            t.base = total;
            total += t.bytes();
        }
        if total > cap.max_icm {
            return Err(Error::Firmware(format!(
                "the ICM profile needs {total} bytes; the card takes at most {}",
                cap.max_icm
            )));
        }
        Ok(Layout { tables, total })
    }

    /// The INIT_HCA mailbox for this layout (digest §2.6): 64-byte
    /// cache lines, a little-endian host, B0 unicast steering when the card
    /// offers it, 4 KiB UAR pages over the card's UAR area.
    pub fn init_hca(&self, cap: &DevCap) -> InitHca {
        let mut m = InitHca::zeroed();
        m.version = ih::VERSION;
        m.cacheline = ih::CACHELINE_64;
        let big_endian = if cfg!(target_endian = "big") {
            ih::FLAG_BIG_ENDIAN_HOST
        } else {
            0
        };
        m.flags = Be32::new(ih::FLAG_CHECK_AV_PORT | big_endian);
        let with_log = |t: Table, log: u8| Be64::new(self.get(t).base | log as u64);
        m.qpc = with_log(Table::Qpc, self.log(Table::Qpc));
        m.srqc = with_log(Table::Srqc, self.log(Table::Srqc));
        m.cqc = with_log(Table::Cqc, self.log(Table::Cqc));
        m.altc = Be64::new(self.get(Table::Altc).base);
        m.auxc = Be64::new(self.get(Table::Auxc).base);
        m.eqc = with_log(Table::Eqc, self.log(Table::Eqc));
        let rdmarc_per_qp = self.log(Table::Rdmarc) - self.log(Table::Qpc);
        m.rdmarc = with_log(Table::Rdmarc, rdmarc_per_qp);
        m.mc_base = Be64::new(self.get(Table::Mcg).base);
        m.log_mgm_entry = p::LOG_MGM_ENTRY as u8;
        let log_mcgs = self.log(Table::Mcg);
        m.log_mc_hash = log_mcgs.saturating_sub(1);
        m.log_mc_table = log_mcgs;
        if cap.steering == Steering::B0 {
            m.uc_steering = ih::UC_STEERING;
        }
        m.dmpt_base = Be64::new(self.get(Table::Dmpt).base);
        m.log_mpts = self.log(Table::Dmpt);
        m.mtt_base = Be64::new(self.get(Table::Mtt).base);
        m.cmpt_base = Be64::new(self.get(Table::Cmpt).base);
        m.log_uar_pages = (cap.uar_size / p::PAGE).trailing_zeros() as u8;
        m.uar_page_sz = 0;
        m
    }

    /// log2 of the entries of table `t`.
    pub fn log(&self, t: Table) -> u8 {
        self.get(t).count.trailing_zeros() as u8
    }

    /// The table placed as `t`.
    pub fn get(&self, t: Table) -> Placed {
        // Every table is placed by `new`.
        self.tables
            .iter()
            .copied()
            .find(|p| p.table == t)
            .unwrap_or(Placed {
                table: t,
                base: 0,
                count: 0,
                entry: 0,
            })
    }

    /// The ICM ranges rpmd maps: every table whole but cMPT, and of cMPT
    /// each object type's entries (QP, SRQ, CQ, EQ); (ICM address, bytes).
    pub fn ranges(&self) -> Vec<(u64, u64)> {
        let cmpt = self.get(Table::Cmpt);
        let mut out: Vec<(u64, u64)> = self
            .tables
            .iter()
            .filter(|t| t.table != Table::Cmpt)
            .map(|t| (t.base, t.bytes()))
            .collect();
        let per_type = [
            (p::CMPT_QP, self.log(Table::Qpc)),
            (p::CMPT_SRQ, self.log(Table::Srqc)),
            (p::CMPT_CQ, self.log(Table::Cqc)),
            (p::CMPT_EQ, self.log(Table::Eqc)),
        ];
        for (ty, log) in per_type {
            let base = cmpt.base + ty * (cmpt.entry << CMPT_SHIFT);
            out.push((base, ((1u64 << log) * cmpt.entry).max(p::PAGE)));
        }
        out
    }
}

/// The ICM mapped for the device: the auxiliary area and the tables.
pub struct Icm {
    /// Where everything is.
    pub layout: Layout,
    /// Ranges mapped (ICM address, bytes), in mapping order.
    mapped: Vec<(u64, u64)>,
    /// The firmware's auxiliary pages (MAP_ICM_AUX).
    aux: Option<DevBuf>,
    /// The tables' memory, one buffer for all ranges.
    tables: Option<DevBuf>,
    /// Where each range lies in `tables`: (ICM address, byte offset,
    /// bytes).
    placed: Vec<(u64, usize, u64)>,
}

impl Icm {
    /// SET_ICM_SIZE, MAP_ICM_AUX and MAP_ICM for every range of
    /// `layout`; on a failure, whatever was mapped is unmapped again.
    pub fn map(
        func: &dyn PciFunction,
        hcr: &mut Hcr,
        mb: &DevBuf,
        layout: Layout,
    ) -> Result<Icm, Error> {
        let aux_pages = hcr.exec(Cmd {
            opcode: op::SET_ICM_SIZE,
            in_param: layout.total,
            ..Cmd::default()
        })?;
        if aux_pages > 1 << 20 {
            return Err(Error::Firmware(format!(
                "SET_ICM_SIZE asks for {aux_pages} auxiliary pages"
            )));
        }
        let mut icm = Icm {
            layout,
            mapped: Vec::new(),
            aux: None,
            tables: None,
            placed: Vec::new(),
        };
        match icm.map_all(func, hcr, mb, aux_pages) {
            Ok(()) => Ok(icm),
            Err(e) => {
                icm.unmap(hcr);
                Err(e)
            }
        }
    }

    fn map_all(
        &mut self,
        func: &dyn PciFunction,
        hcr: &mut Hcr,
        mb: &DevBuf,
        aux_pages: u64,
    ) -> Result<(), Error> {
        if aux_pages > 0 {
            let aux = DevBuf::new(func, "mlx4 ICM auxiliary area", aux_pages as usize * 4096)?;
            let mapped = map_pages(hcr, mb, op::MAP_ICM_AUX, &aux);
            // Kept even on a failure: part of it may be the device's.
            self.aux = Some(aux);
            mapped?;
        }
        // Each range at an offset of the buffer aligned to its size (the
        // ranges are powers of two), largest first, so that blocks can be
        // as large as the ICM side allows.
        let mut ranges = self.layout.ranges();
        ranges.sort_by_key(|r| std::cmp::Reverse(r.1));
        let bytes: u64 = ranges.iter().map(|r| r.1).sum();
        let mem = DevBuf::new(func, "mlx4 ICM tables", bytes as usize)?;
        let base = mem.iova();
        let tables = self.tables.insert(mem);
        let mut at = 0;
        for (va, len) in ranges {
            self.placed.push((va, at as usize, len));
            // One command per 256 blocks, each recorded once it succeeded
            // (a failed command maps nothing), so that teardown unmaps
            // exactly what the device holds.
            for list in blocks_at(va, base + at, len).chunks(page_list::MAX_ENTRIES) {
                post_page_list(hcr, mb, op::MAP_ICM, list)?;
                let bytes = list.iter().map(|b| 1u64 << b.2).sum();
                self.mapped.push((list[0].0, bytes));
            }
            at += len;
        }
        debug_assert_eq!(at as usize, tables.len());
        Ok(())
    }

    /// Writes `data` at ICM address `va` straight into the table memory
    /// (how the native driver writes MTT entries, `mlx4_write_mtt_chunk`);
    /// false if that address has no memory of ours behind it.
    pub fn write(&self, va: u64, data: &[u8]) -> bool {
        let Some(tables) = &self.tables else {
            return false;
        };
        let end = va + data.len() as u64;
        self.placed
            .iter()
            .find(|&&(base, _, len)| base <= va && end <= base + len)
            .is_some_and(|&(base, off, _)| tables.write(off + (va - base) as usize, data))
    }

    /// UNMAP_ICM for every range mapped, then UNMAP_ICM_AUX. Memory is
    /// freed only if the device gave all of it back.
    pub fn unmap(&mut self, hcr: &mut Hcr) {
        let mut kept = false;
        for (va, len) in std::mem::take(&mut self.mapped) {
            if let Err(e) = hcr.exec(Cmd {
                opcode: op::UNMAP_ICM,
                in_param: va,
                in_mod: (len / p::PAGE) as u32,
                ..Cmd::default()
            }) {
                eprintln!("rpmd: error: mlx4: UNMAP_ICM {va:#x}+{len:#x} failed: {e}");
                kept = true;
            }
        }
        if let Some(tables) = self.tables.take() {
            if kept {
                std::mem::forget(tables);
            }
        }
        if let Some(aux) = self.aux.take() {
            match hcr.exec(Cmd {
                opcode: op::UNMAP_ICM_AUX,
                ..Cmd::default()
            }) {
                Ok(_) => drop(aux),
                Err(e) => {
                    eprintln!("rpmd: error: mlx4: UNMAP_ICM_AUX failed; keeping the area: {e}");
                    std::mem::forget(aux);
                }
            }
        }
    }
}
