//! The registry's two ways to a ConnectX-3 port: the PCI driver
//! (`pci:BDF[,port=1|2]`, for 15b3:1003 and 15b3:1007 bound to vfio-pci)
//! and the model (`mlx4-model:NAME[,port=1|2][,wire=0|1]`: a card in
//! software, made on first use of NAME, its two ports joined by a cable
//! when `wire=1`).
//!
//! A card opened once serves both its ports: the second port's open finds
//! the first's [`Hca`] by PCI address (the function it was handed is then
//! dropped).
use crate::ethdev::Card;
use crate::model::{Mlx4Model, ModelOptions};
use crate::{prm, Hca, Options};
use rpmd_pmd::function::PciFunction;
use rpmd_pmd::pci::{PciAddr, PciDevice, PciId};
use rpmd_pmd::port::features::{Declared, Feature, Support};
use rpmd_pmd::port::{DevArgs, Driver, PciDriver, Port};
use rpmd_pmd::DmaDomain;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

const IDS: [PciId; 2] = [
    PciId {
        vendor: prm::id::VENDOR,
        device: prm::id::CONNECTX3,
    },
    PciId {
        vendor: prm::id::VENDOR,
        device: prm::id::CONNECTX3_PRO,
    },
];

/// Cards open in this process, by PCI address.
static CARDS: Mutex<Vec<(PciAddr, Weak<Mutex<Hca>>)>> = Mutex::new(Vec::new());

/// The card at `func`'s address, brought up if no port holds it yet.
fn card_for(func: Arc<dyn PciFunction>, name: &str) -> Result<Card, rpmd_pmd::Error> {
    let addr = func.addr();
    let mut cards = CARDS.lock().unwrap_or_else(|e| e.into_inner());
    cards.retain(|(_, w)| w.strong_count() > 0);
    if let Some(card) = cards
        .iter()
        .find(|(a, _)| *a == addr)
        .and_then(|(_, w)| w.upgrade())
    {
        return Ok(card);
    }
    let hca = Hca::open(func, &Options::default()).map_err(|e| rpmd_pmd::Error::Driver {
        port: name.to_string(),
        what: "bringing the card up".into(),
        source: Box::new(e),
    })?;
    let card = Arc::new(Mutex::new(hca));
    cards.push((addr, Arc::downgrade(&card)));
    Ok(card)
}

fn open_port(func: Arc<dyn PciFunction>, args: &DevArgs) -> Result<Box<dyn Port>, rpmd_pmd::Error> {
    let name = args.raw().to_string();
    let port = args.opt_u64("port", 1)?;
    let card = card_for(func, &name)?;
    let p = crate::ethdev::open_port(&name, card, port.min(255) as u8, args.port_id()).map_err(
        |e| rpmd_pmd::Error::Driver {
            port: name.clone(),
            what: format!("opening port {port}"),
            source: Box::new(e),
        },
    )?;
    Ok(Box::new(p))
}

/// What a ConnectX-3 port offers beyond the generic port, on the card or
/// its model alike.
const FEATURES: &[Declared] = &[
    (Feature::RssKeyUpdate, Support::Yes),
    (Feature::MultiSegmentTx, Support::Yes),
    (Feature::PromiscuousMode, Support::Yes),
    (Feature::AllmulticastMode, Support::Yes),
    (Feature::MacFilter, Support::Yes),
    (Feature::RssHash, Support::Yes),
    (Feature::ChecksumOffload, Support::Yes),
    (Feature::FwVersion, Support::Yes),
    (Feature::RxInterrupt, Support::Yes),
    (Feature::LinkStatusEvent, Support::Yes),
];

/// The ConnectX-3 PCI driver.
pub struct Mlx4Driver;

impl PciDriver for Mlx4Driver {
    fn features(&self) -> &'static [Declared] {
        FEATURES
    }

    fn name(&self) -> &'static str {
        "mlx4"
    }

    fn ids(&self) -> &'static [PciId] {
        &IDS
    }

    fn probe(
        &self,
        func: Arc<dyn PciFunction>,
        _: &PciDevice,
        args: &DevArgs,
    ) -> Result<Box<dyn Port>, rpmd_pmd::Error> {
        args.only_options(&["port"])?;
        open_port(func, args)
    }
}

/// ConnectX-3 cards in software, by name.
#[derive(Default)]
pub struct Mlx4ModelDriver {
    /// Each card with whether its ports are cabled.
    models: Mutex<HashMap<String, (Arc<Mlx4Model>, bool)>>,
}

impl Driver for Mlx4ModelDriver {
    fn features(&self) -> &'static [Declared] {
        FEATURES
    }

    fn kind(&self) -> &'static str {
        "mlx4-model"
    }

    fn usage(&self) -> &'static str {
        "mlx4-model:NAME[,port=1|2][,wire=0|1]  a ConnectX-3 device model (wire: its two ports cabled together)"
    }

    fn check(&self, args: &DevArgs) -> Result<(), rpmd_pmd::Error> {
        args.only_options(&["port", "wire"])?;
        args.require_target("a model name")?;
        args.opt_bool("wire", false)?;
        match args.opt_u64("port", 1)? {
            1 | 2 => Ok(()),
            p => Err(rpmd_pmd::Error::Config {
                port: args.raw().into(),
                what: "device options",
                detail: format!("port={p}; a ConnectX-3 has ports 1..=2"),
            }),
        }
    }

    fn open(&self, args: &DevArgs, domain: &DmaDomain) -> Result<Box<dyn Port>, rpmd_pmd::Error> {
        self.check(args)?;
        let name = args.require_target("a model name")?.to_string();
        let wire = args.opt_bool("wire", false)?;
        let model = {
            let mut models = self.models.lock().unwrap_or_else(|e| e.into_inner());
            let n = models.len() as u8;
            if let Some((_, made_with)) = models.get(&name) {
                // The cable is the card's, made with its first port: a
                // later port asking otherwise would be silently ignored.
                if args.opt("wire").is_some() && wire != *made_with {
                    return Err(rpmd_pmd::Error::Config {
                        port: args.raw().into(),
                        what: "device options",
                        detail: format!(
                            "wire={}: card {name} was made with wire={} when its first port opened; give the same wire= on every port of a card (or only on the first)",
                            wire as u8, *made_with as u8
                        ),
                    });
                }
            }
            models
                .entry(name)
                .or_insert_with(|| {
                    let addr = PciAddr {
                        domain: 0,
                        bus: 0x7f,
                        dev: n % 32,
                        func: n / 32 % 8,
                    };
                    let opts = ModelOptions {
                        wire,
                        ..ModelOptions::default()
                    };
                    (Mlx4Model::new(addr, opts), wire)
                })
                .0
                .clone()
        };
        let func = model.open(domain)?;
        open_port(func, args)
    }
}
