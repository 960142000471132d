//! Shared helpers for rpmd's benchmark programs: TSC reads and thread
//! pinning, so every program measures the same way DPDK's perf tests do.
#![deny(missing_docs)]
// `unsafe` only where re-allowed: tsc (rdtsc) and `Proc`'s SIGINT.
#![deny(unsafe_code)]

pub mod tsc;

use std::process::Child;
use std::time::{Duration, Instant};

/// A peer process (testpmd, an rpmd app) stopped when dropped: SIGINT, so
/// it prints its final statistics and exits cleanly, then SIGKILL after
/// 5 s if it has not.
pub struct Proc(pub Child);

#[allow(unsafe_code)]
impl Drop for Proc {
    fn drop(&mut self) {
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGINT) };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The median of `v` (the mean of the middle two for an even count; 0 for
/// none): how every comparison reduces its interleaved runs.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The rows of a comparison's table for `compare.sh` to plot: when
/// `RPMD_PLOT_CSV` names a file, it gets a header (`row,` and the column
/// names) and one line per row (its name and values); otherwise nothing
/// is written.
pub struct PlotCsv(Option<std::io::BufWriter<std::fs::File>>);

impl PlotCsv {
    /// The file of `RPMD_PLOT_CSV`, with these columns.
    pub fn from_env(columns: &[&str]) -> PlotCsv {
        use std::io::Write;
        let f = std::env::var_os("RPMD_PLOT_CSV").and_then(|p| std::fs::File::create(p).ok());
        let mut w = f.map(std::io::BufWriter::new);
        if let Some(w) = w.as_mut() {
            let _ = writeln!(w, "row,{}", columns.join(","));
        }
        PlotCsv(w)
    }

    /// One row: its name (commas become spaces) and its values.
    pub fn row(&mut self, name: &str, values: &[f64]) {
        use std::io::Write;
        if let Some(w) = self.0.as_mut() {
            let v: Vec<String> = values.iter().map(f64::to_string).collect();
            let _ = writeln!(w, "{},{}", name.replace(',', " "), v.join(","));
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn medians() {
        assert_eq!(super::median(vec![]), 0.0);
        assert_eq!(super::median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
