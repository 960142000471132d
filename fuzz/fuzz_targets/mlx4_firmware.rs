//! The ConnectX-3 bring-up under firmware that reports anything at all:
//! the output mailboxes of QUERY_FW, QUERY_DEV_CAP, QUERY_PORT and
//! QUERY_ADAPTER come from the fuzzer. The open either fails with an
//! error or brings the card up; either way it never panics or hangs, and
//! once it is closed the device holds none of rpmd's memory.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rpmd_mlx4::model::{Mlx4Model, ModelOptions};
use rpmd_mlx4::prm::op;
use rpmd_mlx4::{Hca, Options};
use rpmd_pmd::DmaDomain;

fuzz_target!(|data: &[u8]| {
    let model = Mlx4Model::new("0000:00:10.0".parse().unwrap(), ModelOptions::default());
    // [which, len, bytes...] records: which replies to override.
    let ops = [
        op::QUERY_FW,
        op::QUERY_DEV_CAP,
        op::QUERY_PORT,
        op::QUERY_ADAPTER,
    ];
    let mut input = data;
    while let [which, len, rest @ ..] = input {
        let n = (*len as usize * 2).min(rest.len());
        model.override_output(ops[*which as usize % ops.len()], &rest[..n]);
        input = &rest[n..];
    }
    let func = model.open(&DmaDomain::new()).expect("model function");
    if let Ok(hca) = Hca::open(func, &Options::default()) {
        hca.close();
    }
    assert_eq!(
        model.mapped_regions(),
        0,
        "nothing left mapped for the device"
    );
});
