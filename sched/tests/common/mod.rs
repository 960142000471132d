//! What the run loop's integration tests share.
use std::sync::{Mutex, MutexGuard};
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

/// Held by each test of a file whose lcores are pinned to CPU 0 and whose
/// assertions count spins, sleeps and wake-ups: run side by side, the
/// tests' lcores would share that CPU, and each would rightly yield and
/// sleep for the others (CI saw an extra sleep inside a spin budget).
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}
