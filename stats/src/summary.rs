//! Order statistics and moments of a group of samples.

use serde::{Deserialize, Serialize};

/// What tdg reports of a group of samples (times in ns, or any other unit:
/// the fields carry the samples' unit).
///
/// The generated driver computes the same figures in C (`tdg_stats` in the
/// runtime) and reports them in its JSON line; this is the type they are
/// read into, with the same definitions: the median of an even count is the
/// mean of the middle two, the standard deviation is the sample one (n - 1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    pub min: f64,
    pub median: f64,
    pub mean: f64,
    pub max: f64,
    /// Sample standard deviation; 0 for a single sample.
    pub stddev: f64,
}

impl Summary {
    /// None for an empty slice. NaNs are not expected (samples come from
    /// clocks); `total_cmp` orders them last rather than panicking.
    pub fn of(samples: &[f64]) -> Option<Summary> {
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
        let mean = sorted.iter().sum::<f64>() / n as f64;
        let stddev = if n > 1 {
            let squares: f64 = sorted.iter().map(|x| (x - mean) * (x - mean)).sum();
            (squares / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        Some(Summary {
            n,
            min: sorted[0],
            median,
            mean,
            max: sorted[n - 1],
            stddev,
        })
    }

    /// `min 1.500 us  median 1.520 us  mean 1.530 us  max 1.700 us`, for
    /// samples in nanoseconds: the one-line form every text report uses.
    pub fn ns_line(&self) -> String {
        format!(
            "min {}  median {}  mean {}  max {}",
            crate::ns(self.min),
            crate::ns(self.median),
            crate::ns(self.mean),
            crate::ns(self.max)
        )
    }
}

/// Relative difference |a-b|/b (infinite when b is 0).
pub fn relative_difference(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        f64::INFINITY
    } else {
        (a - b).abs() / b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn stats_of_odd_and_even_counts() {
        let s = Summary::of(&[5.0, 1.0, 3.0]).unwrap();
        assert_eq!((s.min, s.median, s.mean, s.max), (1.0, 3.0, 3.0, 5.0));
        assert_eq!(s.n, 3);
        let s = Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(s.median, 2.5);
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn stddev_is_the_sample_one() {
        // Deviations -2, 0, 2 from the mean 4: (4 + 0 + 4) / (3 - 1) = 4.
        assert_eq!(Summary::of(&[2.0, 4.0, 6.0]).unwrap().stddev, 2.0);
        assert_eq!(Summary::of(&[7.0]).unwrap().stddev, 0.0);
    }

    #[test]
    fn ns_line_names_each_figure_with_its_unit() {
        let s = Summary::of(&[1_500.0, 1_700.0, 1_520.0, 1_530.0, 1_490.0]).unwrap();
        assert_eq!(
            s.ns_line(),
            "min 1.490 us  median 1.520 us  mean 1.548 us  max 1.700 us"
        );
    }

    #[test]
    fn relative_difference_is_against_the_second() {
        assert_eq!(relative_difference(110.0, 100.0), 0.1);
        assert_eq!(relative_difference(90.0, 100.0), 0.1);
        assert!(relative_difference(1.0, 0.0).is_infinite());
    }

    proptest! {
        #[test]
        fn order_statistics_bracket_each_other(v in proptest::collection::vec(0.0f64..1e12, 1..50)) {
            let s = Summary::of(&v).unwrap();
            prop_assert!(s.min <= s.median && s.median <= s.max);
            prop_assert!(s.min <= s.mean * (1.0 + 1e-12) && s.mean <= s.max * (1.0 + 1e-12));
            prop_assert!(s.stddev >= 0.0 && s.stddev <= s.max - s.min);
            prop_assert_eq!(s.n, v.len());
        }
    }
}
