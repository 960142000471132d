//! rpmd ConnectX-3 (mlx4) driver (work not started yet).
//!
//! This crate will hold a poll-mode driver for Mellanox ConnectX-3 NICs that
//! talks to the hardware directly (no vendor libraries), with its PRM layouts
//! transcribed in one file, and a behavioural device model used to test it.
#![deny(missing_docs)]
#![deny(unsafe_code)]
