//! The driver side: virtqueues in DMA memory carrying mbufs ([`split`] and
//! [`packed`] rings), the net data path over either, and its two
//! transports, [`user`] (virtio-user over a vhost-user socket) and [`pci`]
//! (a virtio-net PCI function through VFIO). Nothing the device writes is
//! trusted for driver-private state.
mod ctrl;
pub(crate) mod net;
pub mod packed;
pub mod pci;
mod ring;
pub mod split;
#[cfg(test)]
mod testdev;
pub mod user;

pub use ring::Ring;
