//! `preflight`: what a machine lacks before rpmd can drive a NIC, and the
//! command that fixes each thing.
//!
//! The checks, in the order a user has to fix them: an IOMMU (IOMMU
//! groups in sysfs), the vfio-pci driver, `/dev/vfio/vfio` access, free
//! hugepages (a warning: rpmd falls back to 4 KiB pages), and for each
//! device asked about: it exists, it is bound to vfio-pci, its IOMMU group
//! is viable (every member on vfio-pci or on no driver), and
//! `/dev/vfio/N` is accessible.
use crate::pci::{PciAddr, PciDevice, Sysfs};
use std::fmt;
use std::path::{Path, PathBuf};

/// The outcome of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Fine.
    Ok,
    /// Works, but not as well as it could.
    Warn,
    /// Blocks using VFIO devices.
    Fail,
}

/// One check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// What was checked.
    pub name: String,
    /// The outcome.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// How to fix it (for `Warn` and `Fail`).
    pub fix: Option<String>,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = match self.status {
            Status::Ok => "ok  ",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        };
        write!(f, "[{tag}] {}: {}", self.name, self.detail)?;
        if let Some(fix) = &self.fix {
            write!(f, "\n       fix: {fix}")?;
        }
        Ok(())
    }
}

/// Where preflight looks: sysfs and the VFIO device directory.
#[derive(Clone, Debug)]
pub struct Preflight {
    /// The sysfs tree.
    pub sysfs: Sysfs,
    /// The VFIO device nodes (`/dev/vfio`).
    pub dev_vfio: PathBuf,
    /// Whether to check hugepages (off for fake sysfs trees in tests).
    pub check_hugepages: bool,
}

impl Default for Preflight {
    fn default() -> Self {
        Preflight {
            sysfs: Sysfs::default(),
            dev_vfio: "/dev/vfio".into(),
            check_hugepages: true,
        }
    }
}

fn check(name: &str, status: Status, detail: String, fix: Option<String>) -> Check {
    Check {
        name: name.into(),
        status,
        detail,
        fix,
    }
}

fn rw_access(p: &Path) -> Result<(), std::io::Error> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(p)
        .map(drop)
}

impl Preflight {
    /// Runs every check, for the system and for each of `devices`.
    pub fn run(&self, devices: &[PciAddr]) -> Vec<Check> {
        let mut out = Vec::new();
        let s = &self.sysfs;
        out.push(if s.has_iommu_groups() {
            check("IOMMU", Status::Ok, "IOMMU groups present".into(), None)
        } else {
            check(
                "IOMMU",
                Status::Fail,
                format!("no IOMMU groups under {}/kernel/iommu_groups", s.root().display()),
                Some("enable VT-d (or AMD-Vi) in the firmware and boot with intel_iommu=on iommu=pt (or amd_iommu=on)".into()),
            )
        });
        out.push(if s.driver_loaded("vfio-pci") {
            check("vfio-pci", Status::Ok, "driver loaded".into(), None)
        } else {
            check(
                "vfio-pci",
                Status::Fail,
                "the vfio-pci driver is not loaded".into(),
                Some("modprobe vfio-pci".into()),
            )
        });
        let node = self.dev_vfio.join("vfio");
        out.push(match rw_access(&node) {
            Ok(()) => check(
                "VFIO container",
                Status::Ok,
                format!("{} usable", node.display()),
                None,
            ),
            Err(e) => check(
                "VFIO container",
                Status::Fail,
                format!("{}: {e}", node.display()),
                Some(if e.kind() == std::io::ErrorKind::PermissionDenied {
                    format!("run as root, or grant your user rw on {}", node.display())
                } else {
                    "modprobe vfio-pci (it creates /dev/vfio/vfio)".into()
                }),
            ),
        });
        if self.check_hugepages {
            out.push(self.hugepage_check());
        }
        for &a in devices {
            out.extend(self.device_checks(a));
        }
        out
    }

    fn hugepage_check(&self) -> Check {
        let fix = "reserve some: echo 512 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages (or rpmd-bind --hugepages 512)";
        let brief = |p: &[crate::hugepages::Pool]| {
            let v: Vec<String> = p
                .iter()
                .map(|p| {
                    format!(
                        "{} MiB pages: {} free of {}",
                        p.page_size >> 20,
                        p.free,
                        p.total
                    )
                })
                .collect();
            v.join("; ")
        };
        match crate::hugepages::pools() {
            Ok(p) if p.iter().any(|p| p.free > 0) => {
                check("hugepages", Status::Ok, brief(&p), None)
            }
            Ok(p) => check(
                "hugepages",
                Status::Warn,
                format!(
                    "no free hugepages ({}); DMA memory falls back to 4 KiB pages",
                    brief(&p)
                ),
                Some(fix.into()),
            ),
            Err(e) => check("hugepages", Status::Warn, e.to_string(), Some(fix.into())),
        }
    }

    fn device_checks(&self, a: PciAddr) -> Vec<Check> {
        let name = format!("device {a}");
        let d = match self.sysfs.device(a) {
            Ok(d) => d,
            Err(e) => {
                return vec![check(
                    &name,
                    Status::Fail,
                    e.to_string(),
                    Some("check the address: rpmd-bind --status lists network devices".into()),
                )]
            }
        };
        let mut out = vec![driver_check(&name, a, &d)];
        let Some(g) = d.iommu_group else {
            out.push(check(
                &format!("{name} IOMMU group"),
                Status::Fail,
                "the device has no IOMMU group".into(),
                Some("enable the IOMMU (intel_iommu=on or amd_iommu=on)".into()),
            ));
            return out;
        };
        out.push(self.group_check(&name, a, g));
        if d.driver.as_deref() == Some("vfio-pci") {
            out.push(self.group_node_check(&name, g));
        }
        out
    }

    /// Whether every other member of device `a`'s IOMMU group `g` is
    /// off its kernel driver (the group is viable).
    fn group_check(&self, name: &str, a: PciAddr, g: u32) -> Check {
        let s = &self.sysfs;
        let gname = format!("{name} IOMMU group {g}");
        let blockers: Vec<String> = s
            .group_members(g)
            .unwrap_or_default()
            .into_iter()
            .filter(|&m| m != a)
            .filter_map(|m| {
                let drv = s.device(m).ok()?.driver?;
                (drv != "vfio-pci").then(|| format!("{m} ({drv})"))
            })
            .collect();
        if blockers.is_empty() {
            return check(&gname, Status::Ok, "viable".into(), None);
        }
        check(
            &gname,
            Status::Fail,
            format!(
                "not viable: other members on kernel drivers: {}",
                blockers.join(", ")
            ),
            Some(
                "bind them to vfio-pci too (rpmd-bind --bind vfio-pci ADDR), or unbind them".into(),
            ),
        )
    }

    /// Whether this process can open group `g`'s VFIO node.
    fn group_node_check(&self, name: &str, g: u32) -> Check {
        let node = self.dev_vfio.join(g.to_string());
        let what = format!("{name} {}", node.display());
        match rw_access(&node) {
            Ok(()) => check(&what, Status::Ok, "accessible".into(), None),
            // EBUSY means another process holds the group: usable by it, not by us.
            Err(e) => {
                let fix = match e.kind() {
                    std::io::ErrorKind::PermissionDenied => {
                        format!("run as root, or chown your user {}", node.display())
                    }
                    _ => "is another process using the device? One process per group".into(),
                };
                check(&what, Status::Fail, e.to_string(), Some(fix))
            }
        }
    }
}

/// Whether device `a` (`d`, seen in sysfs) is bound to vfio-pci.
fn driver_check(name: &str, a: PciAddr, d: &PciDevice) -> Check {
    let bind = format!("rpmd-bind --bind vfio-pci {a}");
    match d.driver.as_deref() {
        Some("vfio-pci") => check(
            name,
            Status::Ok,
            format!("{} bound to vfio-pci", d.id),
            None,
        ),
        Some(k) => {
            let ifs = if d.interfaces.is_empty() {
                String::new()
            } else {
                format!(
                    " (interfaces: {}; bring them down first)",
                    d.interfaces.join(", ")
                )
            };
            let why = format!("{} is still bound to its kernel driver {k}{ifs}", d.id);
            check(name, Status::Fail, why, Some(bind))
        }
        None => check(
            name,
            Status::Fail,
            format!("{} is bound to no driver", d.id),
            Some(bind),
        ),
    }
}

/// Whether no check failed.
pub fn all_ok(checks: &[Check]) -> bool {
    checks.iter().all(|c| c.status != Status::Fail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_bare_machine_gets_a_fix_for_everything() {
        let root = std::env::temp_dir().join(format!("rpmd-preflight-{}", std::process::id()));
        let dev = root.join("sys/bus/pci/devices/0000:00:03.0");
        let other = root.join("sys/bus/pci/devices/0000:00:03.1");
        for d in [&dev, &other] {
            fs::create_dir_all(d.join("net/eth0")).unwrap();
            fs::write(d.join("vendor"), "0x8086\n").unwrap();
            fs::write(d.join("device"), "0x10d3\n").unwrap();
            fs::write(d.join("class"), "0x020000\n").unwrap();
        }
        fs::create_dir_all(root.join("sys/bus/pci/drivers/e1000e")).unwrap();
        let p = Preflight {
            sysfs: Sysfs::new(root.join("sys")),
            dev_vfio: root.join("dev/vfio"),
            check_hugepages: false,
        };
        let a: PciAddr = "00:03.0".parse().unwrap();
        let r = p.run(&[a]);
        let text: Vec<String> = r.iter().map(|c| c.to_string()).collect();
        let text = text.join("\n");
        assert!(!all_ok(&r));
        for want in [
            "intel_iommu=on",
            "modprobe vfio-pci",
            "bound to no driver",
            "rpmd-bind --bind vfio-pci 0000:00:03.0",
            "no IOMMU group",
        ] {
            assert!(text.contains(want), "missing {want:?} in:\n{text}");
        }

        // Now: an IOMMU, the device on e1000e in a group with another device.
        let g = root.join("sys/kernel/iommu_groups/7/devices");
        fs::create_dir_all(&g).unwrap();
        for (d, n) in [(&dev, "0000:00:03.0"), (&other, "0000:00:03.1")] {
            symlink(root.join("sys/bus/pci/drivers/e1000e"), d.join("driver")).unwrap();
            symlink(
                root.join("sys/kernel/iommu_groups/7"),
                d.join("iommu_group"),
            )
            .unwrap();
            symlink(d, g.join(n)).unwrap();
        }
        let text: Vec<String> = p.run(&[a]).iter().map(|c| c.to_string()).collect();
        let text = text.join("\n");
        assert!(
            text.contains("still bound to its kernel driver e1000e (interfaces: eth0"),
            "{text}"
        );
        assert!(
            text.contains("not viable: other members on kernel drivers: 0000:00:03.1 (e1000e)"),
            "{text}"
        );
        assert!(text.contains("[ok  ] IOMMU"), "{text}");
        let text: Vec<String> = p
            .run(&["00:09.0".parse().unwrap()])
            .iter()
            .map(|c| c.to_string())
            .collect();
        assert!(text.join("\n").contains("no such device"));
        fs::remove_dir_all(&root).unwrap();
    }
}
