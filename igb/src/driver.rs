//! The registry's way to an igb port: `pci:BDF` for a function bound to
//! vfio-pci whose IDs are an 82576's, 82580's or I350's.
use crate::regs::{DEVICE_IDS, VENDOR_INTEL};
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

const IDS: [PciId; DEVICE_IDS.len()] = {
    let mut ids = [id(0); DEVICE_IDS.len()];
    let mut k = 0;
    while k < ids.len() {
        ids[k] = id(DEVICE_IDS[k]);
        k += 1;
    }
    ids
};

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

/// The igb PCI driver.
pub struct IgbDriver;

impl PciDriver for IgbDriver {
    fn name(&self) -> &'static str {
        "igb"
    }

    fn ids(&self) -> &'static [PciId] {
        &IDS
    }

    fn features(&self) -> &'static [Declared] {
        FEATURES
    }

    fn probe(
        &self,
        func: Arc<dyn PciFunction>,
        _: &PciDevice,
        args: &DevArgs,
    ) -> Result<Box<dyn Port>, rpmd_pmd::Error> {
        args.only_options(&[])?;
        let name = args.raw().to_string();
        let p = crate::ethdev::open_port(&name, func, args.port_id()).map_err(|e| {
            rpmd_pmd::Error::Driver {
                port: name.clone(),
                what: "opening the igb function".into(),
                source: Box::new(e),
            }
        })?;
        Ok(Box::new(p))
    }
}

/// Registers the igb PCI driver.
pub fn register(reg: &mut rpmd_pmd::Registry) {
    reg.register_pci(Box::new(IgbDriver));
}
