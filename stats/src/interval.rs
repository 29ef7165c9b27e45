//! How sure a figure is: a distribution-free confidence interval for a
//! median, and the halves-agreement measure the drivers state as their
//! uncertainty.

use serde::{Deserialize, Serialize};

/// A confidence interval for the median of a group of samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MedianInterval {
    pub low: f64,
    pub high: f64,
    /// The probability that the interval holds the true median (at least
    /// the confidence asked for: order statistics give discrete levels).
    pub coverage: f64,
}

/// The interval between the k-th smallest and the k-th largest sample, with
/// the largest k whose coverage is still at least `confidence` (the sign
/// test's interval: no assumption about the samples' distribution, so a
/// bimodal host or a few outliers neither narrow nor break it). None when
/// there are too few samples for that confidence (fewer than 6 at 95%) or
/// `confidence` is not in (0, 1).
pub fn median_interval(samples: &[f64], confidence: f64) -> Option<MedianInterval> {
    let n = samples.len();
    if n == 0 || !(confidence > 0.0 && confidence < 1.0) {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    // P(B <= i) for B ~ Binomial(n, 1/2), accumulated in logs so large n
    // does not underflow 2^-n.
    let ln_half_n = -(n as f64) * std::f64::consts::LN_2;
    let mut ln_pmf = ln_half_n; // P(B = 0)
    let mut cdf = 0.0;
    let mut best: Option<(usize, f64)> = None;
    for i in 0..n / 2 {
        cdf += ln_pmf.exp();
        let coverage = 1.0 - 2.0 * cdf;
        if coverage < confidence {
            break;
        }
        best = Some((i + 1, coverage)); // k = i + 1: excludes i samples each side
        ln_pmf += ((n - i) as f64).ln() - ((i + 1) as f64).ln();
    }
    let (k, coverage) = best?;
    Some(MedianInterval {
        low: sorted[k - 1],
        high: sorted[n - k],
        coverage,
    })
}

/// How far the estimate (`median`, else the minimum) over the first half of
/// `samples` and over the second half differ, relative to the estimate over
/// all of them: the drivers' stated uncertainty (tdg_runtime.c,
/// `tdg_halves_disagreement`), here for samples taken in order. None for
/// fewer than 4 samples.
pub fn halves_disagreement(samples: &[f64], median: bool) -> Option<f64> {
    let n = samples.len();
    if n < 4 {
        return None;
    }
    let estimate = |v: &[f64]| {
        let s = crate::Summary::of(v).expect("non-empty");
        if median {
            s.median
        } else {
            s.min
        }
    };
    let (a, b, all) = (
        estimate(&samples[..n / 2]),
        estimate(&samples[n / 2..]),
        estimate(samples),
    );
    Some(if all <= 0.0 {
        if a == b {
            0.0
        } else {
            1.0
        }
    } else {
        (a - b).abs() / all
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_is_the_sign_tests() {
        // n = 10 at 95%: the 2nd smallest and the 2nd largest (coverage
        // 1 - 2 * 11/1024 = 97.85%); k = 3 would cover only 89%.
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        let i = median_interval(&v, 0.95).unwrap();
        assert_eq!((i.low, i.high), (2.0, 9.0));
        assert!((i.coverage - (1.0 - 22.0 / 1024.0)).abs() < 1e-12, "{i:?}");
        // Six samples are the fewest at 95% (1 - 2/64 = 96.9%), five too few.
        assert_eq!(
            median_interval(&v[..6], 0.95).map(|i| (i.low, i.high)),
            Some((1.0, 6.0))
        );
        assert!(median_interval(&v[..5], 0.95).is_none());
        assert!(median_interval(&v, 1.0).is_none());
    }

    #[test]
    fn the_interval_narrows_with_samples_and_ignores_their_order() {
        let many: Vec<f64> = (0..2000).map(|i| f64::from((i * 7919) % 2000)).collect();
        let i = median_interval(&many, 0.95).unwrap();
        // About median +- 1.96 * sqrt(n)/2 ranks: 1000 +- 44.
        assert!(
            i.low > 940.0 && i.high < 1060.0 && i.low < 1000.0 && i.high > 999.0,
            "{i:?}"
        );
        assert!(i.coverage >= 0.95 && i.coverage < 0.96, "{i:?}");
    }

    #[test]
    fn halves_agree_or_say_how_far_apart() {
        assert_eq!(
            halves_disagreement(&[10.0, 10.0, 10.0, 10.0], true),
            Some(0.0)
        );
        // Halves' medians 10 and 12, overall median 11.
        let d = halves_disagreement(&[10.0, 10.0, 12.0, 12.0], true).unwrap();
        assert!((d - 2.0 / 11.0).abs() < 1e-12);
        // Minima 10 and 12 against the overall 10.
        assert_eq!(
            halves_disagreement(&[10.0, 11.0, 12.0, 13.0], false),
            Some(0.2)
        );
        assert_eq!(halves_disagreement(&[1.0, 2.0, 3.0], true), None);
    }
}
