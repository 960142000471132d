//! The ConnectX-3 device model under any command traffic: a driver
//! brings the card up, then the fuzzer posts commands of its own through
//! the HCR (any opcode, op_mod, in_mod, with a mailbox of its bytes) and
//! writes doorbells into the UAR pages. The model never panics and every
//! command completes (the model's side of the HCR, the other half of
//! what the driver's fuzz targets check).
#![no_main]
use libfuzzer_sys::fuzz_target;
use rpmd_mlx4::model::{Mlx4Model, ModelOptions};
use rpmd_mlx4::prm::mem::DevBuf;
use rpmd_mlx4::prm::{bar0, hcr, op, unwire32, wire32};
use rpmd_mlx4::{Hca, Options};
use rpmd_pmd::DmaDomain;

/// The commands that undo the driver's own objects: posted by the fuzzer,
/// they would make the driver's teardown fail and keep (on purpose) the
/// memory the device would not give back, which over many runs fills
/// the fuzzer's memory limit. They become NOPs; the driver's teardown
/// runs each of them, and the tests check the model's answers.
const TEARDOWN: [u16; 9] = [
    op::CLOSE_HCA,
    op::UNMAP_FA,
    op::UNMAP_ICM,
    op::UNMAP_ICM_AUX,
    op::HW2SW_EQ,
    op::HW2SW_MPT,
    op::HW2SW_CQ,
    op::MAP_EQ,
    op::CLOSE_PORT,
];

fuzz_target!(|data: &[u8]| {
    let model = Mlx4Model::new("0000:00:11.0".parse().unwrap(), ModelOptions::default());
    let func = model.open(&DmaDomain::new()).expect("model function");
    let opts = Options {
        timeouts: rpmd_mlx4::hcr::Timeouts {
            hcr_free: std::time::Duration::from_millis(5),
            command: std::time::Duration::from_millis(5),
            ..Default::default()
        },
        ..Options::default()
    };
    let Ok(mut hca) = Hca::open(func.clone(), &opts) else {
        return;
    };
    let _ = hca.init_port(1, 1500);
    let regs = func.bar(0).expect("BAR0");
    let uar = func.bar(2).expect("BAR2");
    let mb = DevBuf::new(&*func, "fz-mlx4-mailbox", 4096).expect("mailbox");
    let mut input = data;
    let mut posted = 0u32;
    // Records: [kind, 4 bytes a, 4 bytes b, n, n bytes of mailbox].
    while let [kind, a0, a1, a2, a3, b0, b1, b2, b3, n, rest @ ..] = input {
        let n = (*n as usize * 4).min(rest.len());
        mb.write(0, &rest[..n]);
        input = &rest[n..];
        let a = u32::from_le_bytes([*a0, *a1, *a2, *a3]);
        let b = u32::from_le_bytes([*b0, *b1, *b2, *b3]);
        if kind & 1 == 1 {
            // A doorbell: any offset of the first pages, any value.
            let _ = uar.write32((a as u64 % (130 * 4096)) & !3, b);
            continue;
        }
        let iova = mb.iova();
        let words = [
            (iova >> 32) as u32,
            iova as u32,
            b,
            (iova >> 32) as u32,
            iova as u32,
            hcr::POLL_TOKEN,
        ];
        for (i, w) in words.iter().enumerate() {
            let _ = regs.write32(bar0::HCR + 4 * i as u64, wire32(*w));
        }
        let t = unwire32(regs.read32(bar0::HCR + 24).unwrap_or(0)) & hcr::TOGGLE;
        let mut d6 = (a & 0xff_ffff) & !(hcr::GO | hcr::TOGGLE | hcr::EVENT);
        if TEARDOWN.contains(&((d6 & 0xfff) as u16)) {
            d6 = d6 & !0xfff | op::NOP as u32;
        }
        let d6 = hcr::GO | (t ^ hcr::TOGGLE) | d6;
        let _ = regs.write32(bar0::HCR + 24, wire32(d6));
        posted += 1;
        let after = unwire32(regs.read32(bar0::HCR + 24).unwrap_or(0));
        assert_eq!(after & hcr::GO, 0, "every command completes");
    }
    // The driver's toggle expects an even count of commands it did not
    // post: a NOP evens it, so that its teardown runs.
    if posted % 2 == 1 {
        let t = unwire32(regs.read32(bar0::HCR + 24).unwrap_or(0)) & hcr::TOGGLE;
        let _ = regs.write32(
            bar0::HCR + 24,
            wire32(hcr::GO | (t ^ hcr::TOGGLE) | op::NOP as u32),
        );
    }
    drop(hca);
    drop(model);
});
