//! What the run loop's integration tests share.
use std::time::{Duration, Instant};

/// Waits (at most 10 s, else fails naming `what`) until `f` holds.
pub fn wait_for(what: &str, f: impl Fn() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}
