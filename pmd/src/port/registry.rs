//! The driver registry: turns device strings into ports.
//!
//! A [`Registry`] is a value, not global state: an application makes one
//! (it comes with the software drivers `ring`, `shm` and `null`), lets each driver
//! crate it links register itself (`rpmd_virtio::register(&mut reg)`), and
//! opens ports by string. Virtual-device drivers are found by the string's
//! kind; `pci:ADDR` asks the registry's [`PciBus`] (VFIO through sysfs,
//! or device models) for the function's IDs, picks the PCI driver whose
//! ID table contains them, and hands it the opened [`PciFunction`].
//!
//! The registry owns the [`DmaDomain`] its ports share: PCI functions
//! attach their IOMMU to it and drivers register their pools there, so a
//! port can transmit the mbufs of a pool another port received into.
use super::devargs::DevArgs;
use super::features::{self, Declared};
use super::Port;
use crate::domain::DmaDomain;
use crate::function::{PciBus, PciFunction};
use crate::pci::{PciAddr, PciDevice, PciId, Sysfs};
use crate::vfio::VfioBus;
use crate::Error;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

/// A driver for devices named by kind (`ring:NAME`, `null`, `virtio-user:PATH`).
pub trait Driver: Send + Sync {
    /// The kind it answers to.
    fn kind(&self) -> &'static str;

    /// The accepted form, for error messages: e.g.
    /// `ring:NAME[,queues=N][,size=N]  in-process ring pair`.
    fn usage(&self) -> &'static str;

    /// Checks `args` as [`open`](Self::open) would, without opening or
    /// touching anything (no socket, file, interface or device): the
    /// target's form and every option's name and value. Apps run it on
    /// their command line before they start, so that a bad option is a
    /// usage error (exit status 2) before anything runs.
    fn check(&self, args: &DevArgs) -> Result<(), Error>;

    /// Opens a port whose DMA memory comes from `domain`.
    fn open(&self, args: &DevArgs, domain: &DmaDomain) -> Result<Box<dyn Port>, Error>;

    /// The features its ports offer beyond the generic port's
    /// ([`features::COMMON`]), for the features
    /// matrix; the conformance test holds each to a check.
    fn features(&self) -> &'static [Declared] {
        &[]
    }
}

/// A driver for PCI functions bound to vfio-pci.
pub trait PciDriver: Send + Sync {
    /// The driver's name.
    fn name(&self) -> &'static str;

    /// The vendor/device IDs it drives.
    fn ids(&self) -> &'static [PciId];

    /// Opens the port for function `func`, which `dev` describes (its IDs
    /// are in [`ids`](Self::ids)).
    fn probe(
        &self,
        func: Arc<dyn PciFunction>,
        dev: &PciDevice,
        args: &DevArgs,
    ) -> Result<Box<dyn Port>, Error>;

    /// The features its ports offer beyond the generic port's, as
    /// [`Driver::features`].
    fn features(&self) -> &'static [Declared] {
        &[]
    }
}

/// The registered drivers.
pub struct Registry {
    vdevs: Vec<Box<dyn Driver>>,
    pci: Vec<Box<dyn PciDriver>>,
    bus: Box<dyn PciBus>,
    domain: DmaDomain,
    /// The id of the next port opened.
    next_port_id: AtomicU16,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// Every registered driver's name and features (the generic port's
    /// added), virtual devices first, for the features matrix.
    pub fn features(&self) -> Vec<(&'static str, Vec<Declared>)> {
        let vdevs = self
            .vdevs
            .iter()
            .map(|d| (d.kind(), features::of(d.features())));
        let pci = self
            .pci
            .iter()
            .map(|d| (d.name(), features::of(d.features())));
        vdevs.chain(pci).collect()
    }

    /// A registry with the built-in software drivers, `ring`, `shm` and
    /// `null`.
    pub fn new() -> Self {
        let mut r = Self::empty();
        r.register(Box::new(super::ring::RingDriver::default()));
        r.register(Box::new(super::shm::ShmDriver));
        r.register(Box::new(super::null::NullDriver));
        r
    }

    /// A registry with no drivers at all.
    pub fn empty() -> Self {
        Registry {
            vdevs: Vec::new(),
            pci: Vec::new(),
            bus: Box::new(VfioBus::default()),
            domain: DmaDomain::new(),
            next_port_id: AtomicU16::new(0),
        }
    }

    /// Uses another sysfs tree for `pci:` lookups (tests).
    pub fn with_sysfs(self, sysfs: Sysfs) -> Self {
        self.with_bus(Box::new(VfioBus::new(sysfs, "/dev/vfio")))
    }

    /// Takes `pci:` functions from `bus` (device models) instead of VFIO.
    pub fn with_bus(mut self, bus: Box<dyn PciBus>) -> Self {
        self.bus = bus;
        self
    }

    /// The DMA domain every port of this registry shares: register pools
    /// here (before starting ports that take snapshots, as virtio-user
    /// does) so that any port can transmit their mbufs.
    pub fn domain(&self) -> &DmaDomain {
        &self.domain
    }

    /// Adds a virtual-device driver; a later one with the same kind
    /// replaces the earlier.
    pub fn register(&mut self, d: Box<dyn Driver>) {
        self.vdevs.retain(|x| x.kind() != d.kind());
        self.vdevs.push(d);
    }

    /// Adds a PCI driver.
    pub fn register_pci(&mut self, d: Box<dyn PciDriver>) {
        self.pci.retain(|x| x.name() != d.name());
        self.pci.push(d);
    }

    /// The accepted device-string forms, one per line.
    pub fn accepted_forms(&self) -> String {
        let mut lines = Vec::new();
        let ids: Vec<String> = self
            .pci
            .iter()
            .map(|d| {
                let ids: Vec<String> = d.ids().iter().map(|i| i.to_string()).collect();
                format!("{} {}", d.name(), ids.join(","))
            })
            .collect();
        lines.push(format!(
            "  pci:DDDD:BB:DD.F  a PCI function bound to vfio-pci (drivers: {})",
            if ids.is_empty() {
                "none registered".to_string()
            } else {
                ids.join("; ")
            }
        ));
        for d in &self.vdevs {
            lines.push(format!("  {}", d.usage()));
        }
        lines.join("\n")
    }

    fn reject(&self, input: &str, reason: String) -> Error {
        Error::DeviceString {
            input: input.to_string(),
            reason,
            accepted: self.accepted_forms(),
        }
    }

    /// Opens the port a device string names.
    pub fn open(&self, s: &str) -> Result<Box<dyn Port>, Error> {
        let id = self.next_port_id.load(Ordering::Relaxed);
        let p = self.open_as(s, id)?;
        self.next_port_id
            .store(id.wrapping_add(1), Ordering::Relaxed);
        Ok(p)
    }

    /// Opens a port with port id `id` (stamped on its received mbufs)
    /// rather than the next in order.
    pub fn open_as(&self, s: &str, id: u16) -> Result<Box<dyn Port>, Error> {
        let mut args = self.parse(s)?;
        args.set_port_id(id);
        if args.kind() == "pci" {
            return self.open_pci(&args);
        }
        match self.vdevs.iter().find(|d| d.kind() == args.kind()) {
            Some(d) => d.open(&args, &self.domain).map_err(|e| match e {
                Error::DeviceString { input, reason, .. } => self.reject(&input, reason),
                e => e,
            }),
            None => Err(self.unknown_kind(&args)),
        }
    }

    /// Checks `s` as [`open`](Self::open) would before opening: its
    /// syntax, that a driver takes its kind (the error names the accepted
    /// forms, as `open`'s does), and the driver's own check of its target
    /// and options ([`Driver::check`]).
    pub fn check(&self, s: &str) -> Result<(), Error> {
        let args = self.parse(s)?;
        if args.kind() == "pci" {
            // The address's form is the user's to get right (a usage
            // error); whether a device is there, the open finds out.
            return self.pci_addr(&args).map(drop);
        }
        match self.vdevs.iter().find(|d| d.kind() == args.kind()) {
            Some(d) => d.check(&args),
            None => Err(self.unknown_kind(&args)),
        }
    }

    /// Parses `s`; a malformed string's error lists the accepted forms.
    fn parse(&self, s: &str) -> Result<DevArgs, Error> {
        DevArgs::parse(s).map_err(|e| match e {
            Error::DeviceString { input, reason, .. } => self.reject(&input, reason),
            e => e,
        })
    }

    fn unknown_kind(&self, args: &DevArgs) -> Error {
        self.reject(
            args.raw(),
            format!(
                "no driver for device kind `{}`{}",
                args.kind(),
                registered_by(args.kind())
                    .map(|r| format!(" in this registry; {r}"))
                    .unwrap_or_default()
            ),
        )
    }

    /// The address of a `pci:` device string, or why it is malformed.
    fn pci_addr(&self, args: &DevArgs) -> Result<PciAddr, Error> {
        let target = args.require_target("a PCI address").map_err(|_| {
            self.reject(
                args.raw(),
                "`pci` needs an address, as in pci:0000:00:04.0".into(),
            )
        })?;
        target.parse()
    }

    fn open_pci(&self, args: &DevArgs) -> Result<Box<dyn Port>, Error> {
        let addr = self.pci_addr(args)?;
        let dev = self.bus.describe(addr)?;
        match self.pci.iter().find(|d| d.ids().contains(&dev.id)) {
            Some(d) => {
                let func = self.bus.open(addr, &self.domain)?;
                d.probe(func, &dev, args)
            }
            None => Err(Error::Pci {
                addr: addr.to_string(),
                detail: format!(
                    "no registered driver handles {} (class {:06x})",
                    dev.id, dev.class
                ),
                hint: Some(format!(
                    "registered PCI drivers:\n{}",
                    self.accepted_forms()
                )),
            }),
        }
    }
}

/// Where the drivers of rpmd's other crates come from, for a registry
/// that lacks one.
fn registered_by(kind: &str) -> Option<&'static str> {
    match kind {
        "virtio-user" => {
            Some("it comes with the rpmd-virtio crate: rpmd_virtio::register(&mut registry)")
        }
        "vhost-user" | "af_xdp" | "af_packet" | "tap" => Some("rpmd has no driver for it yet"),
        _ => None,
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds: Vec<&str> = self.vdevs.iter().map(|d| d.kind()).collect();
        let pci: Vec<&str> = self.pci.iter().map(|d| d.name()).collect();
        f.debug_struct("Registry")
            .field("vdevs", &kinds)
            .field("pci", &pci)
            .finish()
    }
}
