//! PCI devices through sysfs: addresses, discovery, driver binding.
//!
//! Everything here reads and writes files under a sysfs root ([`Sysfs`],
//! `/sys` normally), so tests can run it on a tree of their own.
//! Binding follows the kernel's `driver_override` protocol, as
//! dpdk-devbind does: unbind from the current driver, write the wanted
//! driver's name to `driver_override`, then ask the kernel to probe.
use crate::Error;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A PCI function address: `domain:bus:device.function`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PciAddr {
    /// PCI domain (segment).
    pub domain: u32,
    /// Bus.
    pub bus: u8,
    /// Device (0..32).
    pub dev: u8,
    /// Function (0..8).
    pub func: u8,
}

impl fmt::Display for PciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.dev, self.func
        )
    }
}

impl fmt::Debug for PciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for PciAddr {
    type Err = Error;

    /// Accepts `DDDD:BB:DD.F` and `BB:DD.F` (domain 0), in hex.
    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = |why: &str| Error::Pci {
            addr: s.to_string(),
            detail: format!("malformed address: {why}"),
            hint: Some("write it as DDDD:BB:DD.F or BB:DD.F in hex, e.g. 0000:00:04.0".into()),
        };
        let parts: Vec<&str> = s.split(':').collect();
        let (dom, bus, rest) = match parts.as_slice() {
            [d, b, r] => (*d, *b, *r),
            [b, r] => ("0", *b, *r),
            _ => return Err(bad("expected two or three `:`-separated fields")),
        };
        let (dev, func) = rest
            .split_once('.')
            .ok_or_else(|| bad("no `.` before the function number"))?;
        let hex = |f: &str, max: u32, what: &str| -> Result<u32, Error> {
            if f.is_empty() || f.len() > 8 {
                return Err(bad(&format!("{what} {f:?}")));
            }
            match u32::from_str_radix(f, 16) {
                Ok(v) if v <= max => Ok(v),
                _ => Err(bad(&format!("{what} {f:?} (at most {max:#x})"))),
            }
        };
        Ok(PciAddr {
            domain: hex(dom, 0xffff_ffff, "domain")?,
            bus: hex(bus, 0xff, "bus")? as u8,
            dev: hex(dev, 0x1f, "device")? as u8,
            func: hex(func, 7, "function")? as u8,
        })
    }
}

/// Vendor and device ID.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct PciId {
    /// Vendor ID.
    pub vendor: u16,
    /// Device ID.
    pub device: u16,
}

impl fmt::Display for PciId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04x}:{:04x}", self.vendor, self.device)
    }
}

/// What sysfs says about one PCI function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciDevice {
    /// Its address.
    pub addr: PciAddr,
    /// Vendor and device.
    pub id: PciId,
    /// Class code (`0x020000` = Ethernet controller).
    pub class: u32,
    /// The kernel driver bound to it, if any.
    pub driver: Option<String>,
    /// Its IOMMU group, if an IOMMU is active.
    pub iommu_group: Option<u32>,
    /// Network interfaces the kernel made for it.
    pub interfaces: Vec<String>,
}

impl PciDevice {
    /// Whether it is a network controller (class 0x02).
    pub fn is_network(&self) -> bool {
        self.class >> 16 == 0x02
    }
}

/// A sysfs tree: `/sys`, or a copy for tests.
#[derive(Clone, Debug)]
pub struct Sysfs {
    root: PathBuf,
}

impl Default for Sysfs {
    fn default() -> Self {
        Sysfs::new("/sys")
    }
}

fn read_trim(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn link_name(p: &Path) -> Option<String> {
    fs::read_link(p)
        .ok()
        .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
}

fn parse_hex(s: &str) -> Option<u32> {
    u32::from_str_radix(s.trim_start_matches("0x"), 16).ok()
}

impl Sysfs {
    /// A tree rooted at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Sysfs { root: root.into() }
    }

    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<root>/bus/pci/devices/<addr>`.
    pub fn device_dir(&self, addr: PciAddr) -> PathBuf {
        self.root.join(format!("bus/pci/devices/{addr}"))
    }

    /// Reads one device; a missing one is an error naming the address.
    pub fn device(&self, addr: PciAddr) -> Result<PciDevice, Error> {
        let d = self.device_dir(addr);
        let err = |detail: String| Error::Pci {
            addr: addr.to_string(),
            detail,
            hint: None,
        };
        if !d.exists() {
            return Err(Error::Pci {
                addr: addr.to_string(),
                detail: format!("no such device ({} does not exist)", d.display()),
                hint: Some("list devices with `rpmd-bind --status`".into()),
            });
        }
        let num = |f: &str| -> Result<u32, Error> {
            read_trim(&d.join(f))
                .as_deref()
                .and_then(parse_hex)
                .ok_or_else(|| err(format!("cannot read {}", d.join(f).display())))
        };
        let interfaces = fs::read_dir(d.join("net"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        Ok(PciDevice {
            addr,
            id: PciId {
                vendor: num("vendor")? as u16,
                device: num("device")? as u16,
            },
            class: num("class")?,
            driver: link_name(&d.join("driver")),
            iommu_group: link_name(&d.join("iommu_group")).and_then(|g| g.parse().ok()),
            interfaces,
        })
    }

    /// Every PCI function, sorted by address.
    pub fn devices(&self) -> Result<Vec<PciDevice>, Error> {
        let dir = self.root.join("bus/pci/devices");
        let rd = fs::read_dir(&dir).map_err(|source| Error::File {
            path: dir.clone(),
            source,
            hint: Some("is sysfs mounted?"),
        })?;
        let mut v = Vec::new();
        for e in rd.flatten() {
            if let Ok(a) = e.file_name().to_string_lossy().parse::<PciAddr>() {
                v.push(self.device(a)?);
            }
        }
        v.sort_by_key(|d| d.addr);
        Ok(v)
    }

    /// The functions in IOMMU group `group`.
    pub fn group_members(&self, group: u32) -> Result<Vec<PciAddr>, Error> {
        let dir = self
            .root
            .join(format!("kernel/iommu_groups/{group}/devices"));
        let rd = fs::read_dir(&dir).map_err(|source| Error::File {
            path: dir.clone(),
            source,
            hint: None,
        })?;
        let mut v: Vec<PciAddr> = rd
            .flatten()
            .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
            .collect();
        v.sort();
        Ok(v)
    }

    /// Whether the kernel has any IOMMU group (an IOMMU is on).
    pub fn has_iommu_groups(&self) -> bool {
        fs::read_dir(self.root.join("kernel/iommu_groups"))
            .map(|mut d| d.next().is_some())
            .unwrap_or(false)
    }

    /// Whether a driver named `driver` is registered (its module loaded).
    pub fn driver_loaded(&self, driver: &str) -> bool {
        self.root.join("bus/pci/drivers").join(driver).is_dir()
    }

    fn write(&self, path: PathBuf, value: &str) -> Result<(), Error> {
        fs::write(&path, value).map_err(|source| Error::File {
            path,
            source,
            hint: Some("binding needs root"),
        })
    }

    /// Unbinds `addr` from its driver (nothing to do if it has none).
    pub fn unbind(&self, addr: PciAddr) -> Result<(), Error> {
        let d = self.device(addr)?;
        if d.driver.is_some() {
            self.write(
                self.device_dir(addr).join("driver/unbind"),
                &addr.to_string(),
            )?;
        }
        Ok(())
    }

    /// Binds `addr` to `driver` (`vfio-pci`, or a kernel driver such as
    /// `virtio-pci`) through `driver_override`, unbinding it first.
    /// Afterwards the device is checked: an error says which driver has it.
    pub fn bind(&self, addr: PciAddr, driver: &str) -> Result<(), Error> {
        let before = self.device(addr)?;
        if before.driver.as_deref() == Some(driver) {
            return Ok(());
        }
        if !self.driver_loaded(driver) {
            return Err(Error::Pci {
                addr: addr.to_string(),
                detail: format!("driver {driver} is not loaded"),
                hint: Some(format!("modprobe {driver}")),
            });
        }
        self.unbind(addr)?;
        self.write(self.device_dir(addr).join("driver_override"), driver)?;
        self.write(self.root.join("bus/pci/drivers_probe"), &addr.to_string())?;
        let after = self.device(addr)?;
        if after.driver.as_deref() != Some(driver) {
            return Err(Error::Pci {
                addr: addr.to_string(),
                detail: format!(
                    "still bound to {} after probing {driver}",
                    after.driver.as_deref().unwrap_or("no driver")
                ),
                hint: Some("see `dmesg` for why the driver refused it".into()),
            });
        }
        Ok(())
    }

    /// Clears `driver_override`, so the kernel's own driver may take the
    /// device again on the next probe.
    pub fn clear_override(&self, addr: PciAddr) -> Result<(), Error> {
        self.write(self.device_dir(addr).join("driver_override"), "\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_and_print() {
        let a: PciAddr = "0000:00:04.0".parse().unwrap();
        assert_eq!(
            a,
            PciAddr {
                domain: 0,
                bus: 0,
                dev: 4,
                func: 0
            }
        );
        assert_eq!(
            "3b:1f.7".parse::<PciAddr>().unwrap().to_string(),
            "0000:3b:1f.7"
        );
        for bad in [
            "",
            "0000:00:04",
            "00:20.0",
            "00:04.8",
            "zz:00.0",
            "1:2:3:4.0",
            "00:04.",
            "0:0:0:0",
        ] {
            let e = bad.parse::<PciAddr>().unwrap_err().to_string();
            assert!(e.contains("malformed"), "{bad}: {e}");
        }
    }

    #[test]
    fn reads_a_fake_sysfs_tree() {
        let root = std::env::temp_dir().join(format!("rpmd-sysfs-{}", std::process::id()));
        let dev = root.join("bus/pci/devices/0000:00:03.0");
        fs::create_dir_all(dev.join("net/eth0")).unwrap();
        fs::create_dir_all(root.join("bus/pci/drivers/virtio-pci")).unwrap();
        fs::create_dir_all(root.join("kernel/iommu_groups/5/devices")).unwrap();
        fs::write(dev.join("vendor"), "0x1af4\n").unwrap();
        fs::write(dev.join("device"), "0x1041\n").unwrap();
        fs::write(dev.join("class"), "0x020000\n").unwrap();
        std::os::unix::fs::symlink(root.join("bus/pci/drivers/virtio-pci"), dev.join("driver"))
            .unwrap();
        std::os::unix::fs::symlink(root.join("kernel/iommu_groups/5"), dev.join("iommu_group"))
            .unwrap();
        std::os::unix::fs::symlink(
            &dev,
            root.join("kernel/iommu_groups/5/devices/0000:00:03.0"),
        )
        .unwrap();
        let s = Sysfs::new(&root);
        let d = s.device("00:03.0".parse().unwrap()).unwrap();
        assert_eq!(
            d.id,
            PciId {
                vendor: 0x1af4,
                device: 0x1041
            }
        );
        assert!(d.is_network());
        assert_eq!(d.driver.as_deref(), Some("virtio-pci"));
        assert_eq!(d.iommu_group, Some(5));
        assert_eq!(d.interfaces, vec!["eth0".to_string()]);
        assert_eq!(s.devices().unwrap().len(), 1);
        assert_eq!(s.group_members(5).unwrap(), vec![d.addr]);
        assert!(s.has_iommu_groups());
        let e = s
            .device("00:09.0".parse().unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("no such device"), "{e}");
        let e = s.bind(d.addr, "vfio-pci").unwrap_err().to_string();
        assert!(
            e.contains("vfio-pci is not loaded") && e.contains("modprobe vfio-pci"),
            "{e}"
        );
        fs::remove_dir_all(&root).unwrap();
    }
}
