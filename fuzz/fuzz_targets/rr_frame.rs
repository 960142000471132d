//! rr's frame parser on whatever arrives, and its response builder on
//! every frame the parser takes for a request.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rpmd_apps::rr::frame::{frame_len, make_response, parse, REQUEST, RESPONSE};

fuzz_target!(|data: &[u8]| {
    let Some(p) = parse(data) else { return };
    assert!(p.kind == REQUEST || p.kind == RESPONSE);
    if p.kind == REQUEST {
        // A response of every size fits the largest frame rr sends.
        let resp = data.first().map_or(1, |b| 1 + *b as usize);
        let mut f = data.to_vec();
        f.resize(data.len().max(frame_len(resp)), 0);
        let len = make_response(&mut f, resp);
        assert!(len <= f.len());
        let r = parse(&f[..len]).expect("the response parses");
        assert_eq!(
            (r.kind, r.client_port, r.seq),
            (RESPONSE, p.client_port, p.seq)
        );
    }
});
