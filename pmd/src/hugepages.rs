//! Inspecting and reserving hugepages through sysfs, like DPDK's
//! `dpdk-hugepages.py`. rpmd maps hugepages through memfds, so no hugetlbfs
//! mount is needed; only the reservation (`nr_hugepages`) matters.
use crate::Error;
use std::path::{Path, PathBuf};

/// Where the kernel lists hugepage pools, one directory per page size.
pub const SYSFS: &str = "/sys/kernel/mm/hugepages";

/// One hugepage size's pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    /// Page size in bytes.
    pub page_size: u64,
    /// Pages reserved (`nr_hugepages`).
    pub total: u64,
    /// Pages reserved and not in use (`free_hugepages`).
    pub free: u64,
}

fn read_u64(path: &Path) -> Result<u64, Error> {
    let s = std::fs::read_to_string(path).map_err(|source| Error::File {
        path: path.into(),
        source,
        hint: None,
    })?;
    s.trim().parse().map_err(|e| Error::Invalid {
        what: "sysfs value",
        detail: format!("{}: {s:?}: {e}", path.display()),
    })
}

fn dir_for(page_size: u64) -> PathBuf {
    Path::new(SYSFS).join(format!("hugepages-{}kB", page_size / 1024))
}

/// The hugepage pools of this system, smallest page size first. Empty when
/// the kernel has no hugepage support.
pub fn pools() -> Result<Vec<Pool>, Error> {
    let rd = match std::fs::read_dir(SYSFS) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(Error::File {
                path: SYSFS.into(),
                source,
                hint: None,
            })
        }
    };
    let mut out = Vec::new();
    for entry in rd.flatten() {
        let name = entry.file_name();
        let Some(kb) = name.to_str().and_then(|n| {
            n.strip_prefix("hugepages-")?
                .strip_suffix("kB")?
                .parse::<u64>()
                .ok()
        }) else {
            continue;
        };
        out.push(Pool {
            page_size: kb * 1024,
            total: read_u64(&entry.path().join("nr_hugepages"))?,
            free: read_u64(&entry.path().join("free_hugepages"))?,
        });
    }
    out.sort_by_key(|p| p.page_size);
    Ok(out)
}

/// The pool of `page_size`-byte pages, if the system has that size.
pub fn pool(page_size: u64) -> Result<Option<Pool>, Error> {
    Ok(pools()?.into_iter().find(|p| p.page_size == page_size))
}

/// Sets the number of reserved `page_size`-byte pages to `count` and
/// returns the pool as the kernel left it (it may reserve fewer when memory
/// is fragmented; check `total`).
pub fn reserve(page_size: u64, count: u64) -> Result<Pool, Error> {
    let path = dir_for(page_size).join("nr_hugepages");
    std::fs::write(&path, count.to_string()).map_err(|source| Error::File {
        path: path.clone(),
        source,
        hint: Some("writing nr_hugepages needs root"),
    })?;
    pool(page_size)?.ok_or_else(|| Error::Invalid {
        what: "hugepage size",
        detail: format!("no {} kB pool after reserving", page_size / 1024),
    })
}

/// One line per pool, like `dpdk-hugepages.py --show`.
pub fn describe(pools: &[Pool]) -> String {
    if pools.is_empty() {
        return "no hugepage support in this kernel (no /sys/kernel/mm/hugepages)".into();
    }
    pools
        .iter()
        .map(|p| {
            format!(
                "{:>8} pages: {} reserved, {} free ({} MiB free)",
                if p.page_size >= 1 << 30 {
                    format!("{}G", p.page_size >> 30)
                } else {
                    format!("{}M", p.page_size >> 20)
                },
                p.total,
                p.free,
                (p.free * p.page_size) >> 20
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_pools_and_describes_them() {
        let pools = pools().unwrap();
        let text = describe(&pools);
        if pools.is_empty() {
            assert!(text.contains("no hugepage support"));
        } else {
            assert!(pools.iter().any(|p| p.page_size == 2 << 20), "{pools:?}");
            assert!(text.contains("2M pages"), "{text}");
        }
    }

    #[test]
    fn describe_formats_sizes() {
        let t = describe(&[
            Pool {
                page_size: 2 << 20,
                total: 10,
                free: 4,
            },
            Pool {
                page_size: 1 << 30,
                total: 1,
                free: 1,
            },
        ]);
        assert_eq!(
            t,
            "      2M pages: 10 reserved, 4 free (8 MiB free)\n      1G pages: 1 reserved, 1 free (1024 MiB free)"
        );
    }
}
