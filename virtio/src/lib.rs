//! rpmd virtio-net driver (work not started yet).
//!
//! This crate will hold the virtio-net poll-mode driver: split and packed
//! virtqueues, feature negotiation, the PCI transports over VFIO (modern and
//! legacy), and virtio-user, where this process drives a vhost-user backend
//! over a Unix socket. Later it will also hold the device side (a vhost-user
//! backend with busy polling).
#![deny(missing_docs)]
#![deny(unsafe_code)]
