//! A kernel network interface, as the port control path sees it: index,
//! flags (up, running, promiscuous, all-multicast), MTU, MAC, queue counts
//! and the kernel's own counters, through interface ioctls and sysfs.
use crate::sys;
use rpmd_pmd::port::{Link, MacAddr, Xstat};
use rpmd_pmd::Error;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Mutex;

/// An interface looked up by name.
pub(crate) struct Netdev {
    pub(crate) name: String,
    pub(crate) ifindex: u32,
    ctl: OwnedFd,
    port: String,
    /// The receive modes (IFF_PROMISC, IFF_ALLMULTI) the port changed,
    /// each with whether it was on before: put back on drop, so that an
    /// app's promiscuous mode does not outlive it on the interface.
    changed_modes: Mutex<Vec<(i32, bool)>>,
}

/// Checks an interface name as the kernel would (1..=15 bytes, no '/',
/// no whitespace).
pub(crate) fn check_ifname(port: &str, name: &str) -> Result<(), Error> {
    if name.is_empty()
        || name.len() >= libc::IFNAMSIZ
        || name
            .bytes()
            .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0)
    {
        return Err(Error::Config {
            port: port.into(),
            what: "interface name",
            detail: format!("{name:?}: 1 to 15 bytes, no '/', ':' or spaces"),
        });
    }
    Ok(())
}

impl Netdev {
    /// Looks `name` up; an interface that does not exist is an error that
    /// says so.
    pub(crate) fn open(port: &str, name: &str) -> Result<Netdev, Error> {
        check_ifname(port, name)?;
        let ifindex = sys::ifindex(name);
        if ifindex == 0 {
            return Err(Error::Port {
                port: port.into(),
                detail: format!("no network interface {name:?} here (ip link show lists them; is it in another network namespace?)"),
            });
        }
        let ctl = sys::socket(libc::AF_INET, libc::SOCK_DGRAM, 0)
            .map_err(|e| driver(port, "a control socket for interface ioctls", e))?;
        Ok(Netdev {
            name: name.into(),
            ifindex,
            ctl,
            port: port.into(),
            changed_modes: Mutex::new(Vec::new()),
        })
    }

    fn ioctl(&self, req: libc::c_ulong, r: &mut libc::ifreq, what: &str) -> Result<(), Error> {
        sys::ioctl_ifreq(self.ctl.as_fd(), req, r).map_err(|e| {
            let hint = if e.raw_os_error() == Some(libc::EPERM) {
                " (needs CAP_NET_ADMIN: run as root)"
            } else {
                ""
            };
            driver(&self.port, &format!("{what} of {}{hint}", self.name), e)
        })
    }

    /// The interface flags (`IFF_*`).
    pub(crate) fn flags(&self) -> Result<i16, Error> {
        let mut r = sys::ifreq(&self.name);
        self.ioctl(libc::SIOCGIFFLAGS, &mut r, "reading the flags")?;
        Ok(sys::ifreq_flags(&r))
    }

    /// Sets or clears `flag` (IFF_PROMISC, IFF_ALLMULTI, IFF_UP). A
    /// receive mode's first change is remembered and undone on drop.
    pub(crate) fn set_flag(&self, flag: i32, on: bool) -> Result<(), Error> {
        let was = self.write_flag(flag, on)?;
        if was != on && (flag == libc::IFF_PROMISC || flag == libc::IFF_ALLMULTI) {
            let mut changed = self.changed_modes.lock().unwrap_or_else(|e| e.into_inner());
            if !changed.iter().any(|&(f, _)| f == flag) {
                changed.push((flag, was));
            }
        }
        Ok(())
    }

    /// Sets or clears `flag`; returns whether it was set.
    fn write_flag(&self, flag: i32, on: bool) -> Result<bool, Error> {
        let mut r = sys::ifreq(&self.name);
        self.ioctl(libc::SIOCGIFFLAGS, &mut r, "reading the flags")?;
        let f = sys::ifreq_flags(&r) as i32;
        let want = if on { f | flag } else { f & !flag };
        if want != f {
            sys::set_ifreq_flags(&mut r, want as i16);
            self.ioctl(libc::SIOCSIFFLAGS, &mut r, "setting the flags")?;
        }
        Ok(f & flag != 0)
    }

    /// Whether `flag` is set (false when the interface cannot be read).
    pub(crate) fn has_flag(&self, flag: i32) -> bool {
        self.flags().is_ok_and(|f| f as i32 & flag != 0)
    }

    /// The MTU.
    pub(crate) fn mtu(&self) -> Result<u16, Error> {
        let mut r = sys::ifreq(&self.name);
        self.ioctl(libc::SIOCGIFMTU, &mut r, "reading the MTU")?;
        Ok(sys::ifreq_int(&r).clamp(0, u16::MAX as i32) as u16)
    }

    /// Sets the MTU.
    pub(crate) fn set_mtu(&self, mtu: u16) -> Result<(), Error> {
        let mut r = sys::ifreq(&self.name);
        sys::set_ifreq_int(&mut r, mtu as i32);
        self.ioctl(libc::SIOCSIFMTU, &mut r, "setting the MTU")
    }

    /// The MAC address (zero when it cannot be read).
    pub(crate) fn mac(&self) -> MacAddr {
        let mut r = sys::ifreq(&self.name);
        match self.ioctl(libc::SIOCGIFHWADDR, &mut r, "reading the MAC") {
            Ok(()) => MacAddr(sys::ifreq_hwaddr(&r)),
            Err(_) => MacAddr([0; 6]),
        }
    }

    /// Link state: up when the interface is up and has carrier (IFF_RUNNING).
    pub(crate) fn link(&self) -> Link {
        // Under the same name, another interface may now be there.
        let same = sys::ifindex(&self.name) == self.ifindex;
        let up = same
            && self.flags().is_ok_and(|f| {
                let f = f as i32;
                f & libc::IFF_UP != 0 && f & libc::IFF_RUNNING != 0
            });
        let speed = self
            .sysfs("speed")
            .and_then(|s| s.parse::<i64>().ok())
            .unwrap_or(0);
        Link {
            up,
            speed_mbps: speed.clamp(0, u32::MAX as i64) as u32,
            full_duplex: true,
        }
    }

    /// Why the interface can no longer carry the port's frames, if it
    /// cannot: deleted (or moved to another network namespace), made
    /// again under the same name, or down.
    pub(crate) fn gone(&self) -> Option<String> {
        let name = &self.name;
        match sys::ifindex(name) {
            0 => Some(format!(
                "interface {name} is gone (deleted, or moved to another network namespace); restart the port once it is back"
            )),
            i if i != self.ifindex => Some(format!(
                "interface {name} was deleted and made again (index {} is now {i}); restart the port",
                self.ifindex
            )),
            _ if !self.link().up => Some(format!(
                "interface {name} is down or has no carrier (ip link set dev {name} up)"
            )),
            _ => None,
        }
    }

    fn sysfs(&self, file: &str) -> Option<String> {
        std::fs::read_to_string(format!("/sys/class/net/{}/{file}", self.name))
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// The number of rx (or tx) queues the kernel gave the interface.
    pub(crate) fn queue_count(&self, rx: bool) -> u32 {
        let prefix = if rx { "rx-" } else { "tx-" };
        std::fs::read_dir(format!("/sys/class/net/{}/queues", self.name))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
                    .count() as u32
            })
            .unwrap_or(1)
            .max(1)
    }

    /// The kernel's interface counters that say where frames were lost, as
    /// `kernel_*` xstats.
    /// One of the kernel's counters of the interface
    /// (`/sys/class/net/NAME/statistics/`).
    pub(crate) fn counter(&self, name: &str) -> Option<u64> {
        self.sysfs(&format!("statistics/{name}"))?.parse().ok()
    }

    pub(crate) fn kernel_xstats(&self) -> Vec<Xstat> {
        [
            "rx_packets",
            "tx_packets",
            "rx_dropped",
            "tx_dropped",
            "rx_errors",
            "tx_errors",
        ]
        .iter()
        .filter_map(|c| {
            let v = self.sysfs(&format!("statistics/{c}"))?.parse().ok()?;
            Some(Xstat {
                name: format!("kernel_{c}"),
                value: v,
            })
        })
        .collect()
    }
}

/// A driver error with its OS cause kept as the source.
pub(crate) fn driver(port: &str, what: &str, e: std::io::Error) -> Error {
    Error::Driver {
        port: port.into(),
        what: what.into(),
        source: Box::new(e),
    }
}

impl Drop for Netdev {
    fn drop(&mut self) {
        let changed = std::mem::take(
            self.changed_modes
                .get_mut()
                .unwrap_or_else(|e| e.into_inner()),
        );
        // Only on the interface the port opened (not one made again under
        // its name since).
        if changed.is_empty() || sys::ifindex(&self.name) != self.ifindex {
            return;
        }
        for (flag, was) in changed {
            if let Err(e) = self.write_flag(flag, was) {
                eprintln!(
                    "rpmd: warning: {}: putting back the receive mode of {}: {e}",
                    self.port, self.name
                );
            }
        }
    }
}
