//! What a user types: device strings (the parser, and the registry's
//! check of the kind), core lists, and the apps' own value parsers
//! (--pcap specs, seconds, egress specs). Each accepts or refuses with a message; a
//! string it accepts says again what it parsed.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rpmd_pmd::port::DevArgs;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    match DevArgs::parse(s) {
        Ok(a) => {
            assert_eq!(a.raw(), s.trim());
            assert!(!a.kind().is_empty());
            // Parsing what it parsed gives the same.
            let again = DevArgs::parse(a.raw()).expect("a parsed string parses again");
            assert_eq!(again.kind(), a.kind());
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    let reg = rpmd_apps::cli::registry();
    let _ = reg.check(s).map_err(|e| e.to_string());
    if let Ok(cores) = rpmd_sched::parse_cores(s) {
        assert!(!cores.is_empty() && cores.iter().all(|&c| c < 1024));
        let mut sorted = cores.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), cores.len(), "no core twice");
    }
    let _ = s.parse::<rpmd_apps::capture::PcapSpec>();
    if let Ok(v) = rpmd_apps::cli::seconds(s) {
        assert!(v > 0.0 && v.is_finite());
    }
    let _ = rpmd_apps::cli::core_list(s);
    // Egress specs (`--tx-rate`, `--egress PORT=SPEC`): refused with a
    // message, or a configuration the scheduler can run.
    for cfg in [
        rpmd_apps::egress::tx_rate(s).ok(),
        rpmd_apps::egress::port_egress(s).ok().map(|p| p.1),
    ]
    .into_iter()
    .flatten()
    {
        use rpmd_sched::egress::spec;
        assert!(!cfg.classes.is_empty() && cfg.limit > 0);
        assert!((spec::MIN_BURST..=spec::MAX_BURST).contains(&cfg.burst));
        assert!(cfg.rate.is_some_and(|r| (1..=spec::MAX_RATE).contains(&r)));
        assert!(cfg.default_class() < cfg.classes.len());
        let shaper = rpmd_sched::egress::Shaper::new(&cfg);
        assert!(shaper.classify(data) < cfg.classes.len());
    }
});
