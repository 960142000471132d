//! The driver built with a deliberate defect fails the test its real self
//! passes: what the asynchronous model (engines on another CPU, late,
//! writing poison first) is for. Built with `--features defects` (the
//! test command runs it so); without the feature this file is empty.
#![cfg(feature = "defects")]
mod common;
use common::*;
use rpmd_mlx4::defects::{self, Defect};

/// The same exchange three times in one process: the driver as shipped
/// passes, the driver reading each CQE's body ahead of its owner bit
/// fails (frames lost, out of order or with wrong bytes or lengths; the
/// reason is printed), and switched back it passes again.
#[test]
fn a_driver_reading_ahead_of_the_owner_bit_fails_where_the_real_one_passes() {
    defects::set(Defect::None);
    exchange_with_a_late_engine("shipped").expect("the driver as shipped");
    defects::set(Defect::ReadAheadOfOwner);
    let broken = exchange_with_a_late_engine("read-ahead");
    defects::set(Defect::None);
    let wrong = broken.expect_err("a driver reading ahead of the owner bit went unseen");
    eprintln!("read ahead of the owner bit: {wrong}");
    exchange_with_a_late_engine("shipped-again").expect("the driver as shipped, again");
}
