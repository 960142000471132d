//! The registry's way to an igb port: `pci:BDF` for a function bound to
//! vfio-pci whose IDs are an 82576's, 82580's, I350's, I210's or I211's
//! (driver `igb`),
//! or one of the 82576's or I350's virtual functions (driver `igbvf`).
use crate::regs::{DEVICE_IDS, DEVICE_IDS_VF, VENDOR_INTEL};
use rpmd_pmd::function::PciFunction;
use rpmd_pmd::pci::{PciDevice, PciId};
use rpmd_pmd::port::features::{Declared, Feature, Support};
use rpmd_pmd::port::{DevArgs, PciDriver, Port};
use std::sync::Arc;

const fn id(device: u16) -> PciId {
    PciId {
        vendor: VENDOR_INTEL,
        device,
    }
}

const IDS: [PciId; DEVICE_IDS.len()] = ids(DEVICE_IDS);
const IDS_VF: [PciId; DEVICE_IDS_VF.len()] = ids(DEVICE_IDS_VF);

const fn ids<const N: usize>(devices: [u16; N]) -> [PciId; N] {
    let mut ids = [id(0); N];
    let mut k = 0;
    while k < N {
        ids[k] = id(devices[k]);
        k += 1;
    }
    ids
}

/// What an igb port offers beyond the generic port.
const FEATURES: &[Declared] = &[
    (Feature::RssKeyUpdate, Support::Yes),
    (Feature::RssRetaUpdate, Support::Yes),
    (Feature::LinkStatusEvent, Support::Yes),
    (Feature::RxInterrupt, Support::Yes),
    (Feature::ScatteredRx, Support::Yes),
    (Feature::MultiSegmentTx, Support::Yes),
    (Feature::PromiscuousMode, Support::Yes),
    (Feature::AllmulticastMode, Support::Yes),
    (Feature::MacFilter, Support::Yes),
    (Feature::RssHash, Support::Yes),
    (Feature::VlanFilter, Support::Yes),
    (Feature::VlanOffload, Support::Yes),
    (Feature::ChecksumOffload, Support::Yes),
    (Feature::FwVersion, Support::Yes),
];

/// What an igb VF port offers beyond the generic port: its PF programs
/// the filters it asks for.
const FEATURES_VF: &[Declared] = &[
    (Feature::RxInterrupt, Support::Yes),
    (Feature::ScatteredRx, Support::Yes),
    (Feature::MultiSegmentTx, Support::Yes),
    (
        Feature::AllmulticastMode,
        Support::Partial("as the PF grants it (Linux's igb does)"),
    ),
    (
        Feature::MacFilter,
        Support::Partial("as the PF grants it (Linux's igb: multicast always, unicast unless the VF's MAC was set by the host)"),
    ),
    (Feature::VlanFilter, Support::Partial("as the PF grants it")),
    (
        Feature::VlanOffload,
        Support::Partial("insertion by the VF; stripping is the PF's (Linux's igb always strips)"),
    ),
    (Feature::ChecksumOffload, Support::Yes),
];

/// How a driver opens a function as its port.
type Opener<P> = fn(&str, Arc<dyn PciFunction>, u16) -> Result<P, crate::Error>;

/// The two igb PCI drivers: a physical function's and a virtual one's.
pub struct Driver<P: Port + 'static> {
    name: &'static str,
    what: &'static str,
    ids: &'static [PciId],
    features: &'static [Declared],
    open: Opener<P>,
}

/// The igb PCI driver (82576, 82580, I350, I210, I211).
pub type IgbDriver = Driver<crate::IgbPort>;
/// The igb VF PCI driver (the 82576's and I350's virtual functions).
pub type IgbVfDriver = Driver<crate::IgbVfPort>;

impl IgbDriver {
    /// The physical functions' driver.
    pub const PF: Self = Driver {
        name: "igb",
        what: "opening the igb function",
        ids: &IDS,
        features: FEATURES,
        open: crate::ethdev::open_port,
    };
}

impl IgbVfDriver {
    /// The virtual functions' driver.
    pub const VF: Self = Driver {
        name: "igbvf",
        what: "opening the igb virtual function",
        ids: &IDS_VF,
        features: FEATURES_VF,
        open: crate::vf::open_vf_port,
    };
}

impl<P: Port + 'static> PciDriver for Driver<P> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn ids(&self) -> &'static [PciId] {
        self.ids
    }

    fn features(&self) -> &'static [Declared] {
        self.features
    }

    fn probe(
        &self,
        func: Arc<dyn PciFunction>,
        _: &PciDevice,
        args: &DevArgs,
    ) -> Result<Box<dyn Port>, rpmd_pmd::Error> {
        args.only_options(&[])?;
        let name = args.raw().to_string();
        let p = (self.open)(&name, func, args.port_id()).map_err(|e| rpmd_pmd::Error::Driver {
            port: name.clone(),
            what: self.what.into(),
            source: Box::new(e),
        })?;
        Ok(Box::new(p))
    }
}

/// Registers the igb PCI drivers: the PF's and the VF's.
pub fn register(reg: &mut rpmd_pmd::Registry) {
    reg.register_pci(Box::new(IgbDriver::PF));
    reg.register_pci(Box::new(IgbVfDriver::VF));
}
