//! Summary statistics of timing samples, the way a default driver reports them.

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SampleStats {
    pub n: usize,
    pub min: f64,
    pub median: f64,
    pub mean: f64,
    pub max: f64,
}

impl SampleStats {
    /// None for an empty slice; NaNs are not expected (times come from clocks).
    pub fn of(samples: &[f64]) -> Option<SampleStats> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Some(SampleStats {
            n,
            min: sorted[0],
            median,
            mean: sorted.iter().sum::<f64>() / n as f64,
            max: sorted[n - 1],
        })
    }
}

/// Relative difference |a-b|/b.
pub fn relative_difference(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        f64::INFINITY
    } else {
        (a - b).abs() / b
    }
}

/// Nanoseconds in a readable unit.
pub fn human_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.3} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_of_odd_and_even_counts() {
        let s = SampleStats::of(&[5.0, 1.0, 3.0]).unwrap();
        assert_eq!((s.min, s.median, s.mean, s.max), (1.0, 3.0, 3.0, 5.0));
        let s = SampleStats::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(s.median, 2.5);
        assert!(SampleStats::of(&[]).is_none());
    }

    #[test]
    fn human_units() {
        assert_eq!(human_ns(950.0), "950 ns");
        assert_eq!(human_ns(1_500.0), "1.500 us");
        assert_eq!(human_ns(2_000_000.0), "2.000 ms");
    }
}
