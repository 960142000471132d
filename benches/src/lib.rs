//! Shared helpers for rpmd's benchmark programs: TSC reads and thread
//! pinning, so every program measures the same way DPDK's perf tests do.
#![deny(missing_docs)]

pub mod tsc;

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

#[cfg(test)]
mod tests {
    #[test]
    fn medians() {
        assert_eq!(super::median(vec![]), 0.0);
        assert_eq!(super::median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
