//! Firmware start: QUERY_FW, the firmware area (MAP_FA), RUN_FW,
//! MOD_STAT_CFG and UNMAP_FA (digest §2.2 steps 2, §2.3; `core/fw.c`).
use crate::hcr::{Cmd, Hcr};
use crate::prm::layout::QueryFw;
use crate::prm::mem::{DevBuf, Wire};
use crate::prm::{self, op, page_list, query_fw};
use crate::Error;
use rpmd_pmd::function::PciFunction;

/// What QUERY_FW reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FwInfo {
    /// Firmware-area size in 4 KiB pages.
    pub pages: u16,
    /// major.minor.subminor.
    pub version: (u16, u16, u16),
    /// Command-interface revision.
    pub cmd_if_rev: u16,
    /// Log2 of the commands the firmware takes at once.
    pub log_max_cmds: u8,
    /// The catastrophic-error buffer: BAR, offset, size in dwords.
    pub catas: (u8, u64, u32),
}

/// QUERY_FW, checked for what this driver needs.
pub fn query_fw(hcr: &mut Hcr, mb: &DevBuf) -> Result<FwInfo, Error> {
    let b: [u8; 0x40] = hcr.query(
        mb,
        Cmd {
            opcode: op::QUERY_FW,
            ..Cmd::default()
        },
    )?;
    let m = QueryFw::from_bytes(&b).unwrap_or_else(QueryFw::zeroed);
    let info = FwInfo {
        pages: m.fw_pages.get(),
        version: (m.ver_major.get(), m.ver_minor.get(), m.ver_subminor.get()),
        cmd_if_rev: m.cmd_if_rev.get(),
        log_max_cmds: m.log_max_cmds,
        catas: (
            (m.catas_bar >> 6) * 2,
            m.catas_base.get(),
            m.catas_size.get(),
        ),
    };
    let rev = query_fw::MIN_CMD_IF_REV..=query_fw::MAX_CMD_IF_REV;
    if !rev.contains(&info.cmd_if_rev) {
        return Err(Error::Firmware(format!(
            "command interface revision {} (firmware {}.{}.{}); this driver speaks {}..={}",
            info.cmd_if_rev,
            info.version.0,
            info.version.1,
            info.version.2,
            rev.start(),
            rev.end()
        )));
    }
    if info.pages == 0 {
        return Err(Error::Firmware(
            "QUERY_FW asks for a firmware area of 0 pages".into(),
        ));
    }
    Ok(info)
}

/// Splits `[iova, iova+len)` into naturally aligned blocks of at least
/// 4 KiB, largest first where alignment allows (Linux splits by the
/// lowest set bit of address | size): (address, log2 bytes).
pub fn blocks(iova: u64, len: u64) -> Vec<(u64, u32)> {
    blocks_at(iova, iova, len)
        .into_iter()
        .map(|(_, pa, log)| (pa, log))
        .collect()
}

/// As [`blocks`] for memory the device sees at ICM address `va` and bus
/// address `pa`: each block is aligned in both (va, pa, log2 bytes).
pub fn blocks_at(va: u64, pa: u64, len: u64) -> Vec<(u64, u64, u32)> {
    let mut out = Vec::new();
    let (mut at, end) = (0u64, len);
    while at < end {
        let both = (va + at) | (pa + at);
        let align = if both == 0 { 63 } else { both.trailing_zeros() };
        let mut log = align.min(63 - (end - at).leading_zeros());
        while log > 12 && at + (1 << log) > end {
            log -= 1;
        }
        out.push((va + at, pa + at, log));
        at += 1 << log;
    }
    out
}

/// Writes `list` (ICM address, bus address, log2 bytes) as page lists
/// into `mb` and runs `opcode` (MAP_FA, MAP_ICM_AUX: ICM address 0;
/// MAP_ICM) once per 256 entries.
pub fn post_page_list(
    hcr: &mut Hcr,
    mb: &DevBuf,
    opcode: u16,
    list: &[(u64, u64, u32)],
) -> Result<(), Error> {
    for chunk in list.chunks(page_list::MAX_ENTRIES) {
        mb.clear();
        for (i, &(va, pa, log)) in chunk.iter().enumerate() {
            let mut e = [0u8; page_list::ENTRY];
            e[..8].copy_from_slice(&va.to_be_bytes());
            e[8..].copy_from_slice(&(pa | (log as u64 - 12)).to_be_bytes());
            mb.write(i * page_list::ENTRY, &e);
        }
        hcr.exec(Cmd {
            opcode,
            in_mod: chunk.len() as u32,
            in_param: mb.iova(),
            ..Cmd::default()
        })?;
    }
    Ok(())
}

/// Maps all of `area` with `opcode` (MAP_FA, MAP_ICM_AUX), which take no
/// ICM address.
pub fn map_pages(hcr: &mut Hcr, mb: &DevBuf, opcode: u16, area: &DevBuf) -> Result<(), Error> {
    let list: Vec<_> = blocks(area.iova(), area.len() as u64)
        .into_iter()
        .map(|(pa, log)| (0, pa, log))
        .collect();
    post_page_list(hcr, mb, opcode, &list)
}

/// The firmware area and the firmware running in it.
pub struct RunningFw {
    /// What QUERY_FW said.
    pub info: FwInfo,
    /// The firmware area (the device owns it until UNMAP_FA).
    area: Option<DevBuf>,
}

impl RunningFw {
    /// QUERY_FW, MAP_FA, RUN_FW, MOD_STAT_CFG (4 KiB pages; a failure
    /// only warns, as in Linux).
    pub fn start(func: &dyn PciFunction, hcr: &mut Hcr, mb: &DevBuf) -> Result<RunningFw, Error> {
        let info = query_fw(hcr, mb)?;
        let area = DevBuf::new(func, "mlx4 firmware area", info.pages as usize * 4096)?;
        map_pages(hcr, mb, op::MAP_FA, &area)?;
        let mut fw = RunningFw {
            info,
            area: Some(area),
        };
        if let Err(e) = hcr.exec(Cmd {
            opcode: op::RUN_FW,
            ..Cmd::default()
        }) {
            fw.stop(hcr);
            return Err(e);
        }
        mb.clear();
        mb.write(prm::mod_stat_cfg::MODIFY, &[1, 0]);
        if let Err(e) = hcr.exec(Cmd {
            opcode: op::MOD_STAT_CFG,
            in_param: mb.iova(),
            ..Cmd::default()
        }) {
            eprintln!("rpmd: warning: mlx4: MOD_STAT_CFG (4 KiB pages) failed, going on: {e}");
        }
        Ok(fw)
    }

    /// UNMAP_FA. The area is freed only if the device let it go: memory
    /// the firmware may still write is leaked rather than reused.
    /// Lets the firmware area go without UNMAP_FA: the card was reset
    /// and reaches it no more.
    pub fn abandon(&mut self) {
        self.area = None;
    }

    /// UNMAP_FA; the area is kept for good if the card would not let go.
    pub fn stop(&mut self, hcr: &mut Hcr) {
        let Some(area) = self.area.take() else {
            return;
        };
        match hcr.exec(Cmd {
            opcode: op::UNMAP_FA,
            ..Cmd::default()
        }) {
            Ok(_) => drop(area),
            Err(e) => {
                eprintln!("rpmd: error: mlx4: UNMAP_FA failed; keeping the firmware area: {e}");
                std::mem::forget(area);
            }
        }
    }
}
