//! Google Benchmark's comparison of two runs (its `tools/compare.py`):
//! the relative change of a statistic, `(new - old) / |old|`, and the
//! Mann-Whitney U test of the two runs' repetitions, two-sided, computed
//! as SciPy's `mannwhitneyu` computes it for compare.py (exact when both
//! runs are small and have no ties, otherwise the normal approximation
//! with tie and continuity corrections), so the page and the tool agree
//! to the printed digits.

/// compare.py computes no U test below this many repetitions per side.
pub const UTEST_MIN_REPETITIONS: usize = 2;
/// Below this many, compare.py warns that the result is unreliable.
pub const UTEST_OPTIMAL_REPETITIONS: usize = 9;
/// compare.py's default significance level.
pub const UTEST_ALPHA: f64 = 0.05;

/// compare.py's `calculate_change`.
pub fn change(old: f64, new: f64) -> f64 {
    if old == 0.0 && new == 0.0 {
        0.0
    } else if old == 0.0 {
        (new - old) / ((old + new) / 2.0)
    } else {
        (new - old) / old.abs()
    }
}

/// Two-sided p-value of the Mann-Whitney U test of `a` against `b`;
/// `None` with fewer than [`UTEST_MIN_REPETITIONS`] values on a side or
/// any non-finite value.
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> Option<f64> {
    let (n1, n2) = (a.len(), b.len());
    if n1 < UTEST_MIN_REPETITIONS || n2 < UTEST_MIN_REPETITIONS {
        return None;
    }
    if a.iter().chain(b).any(|v| !v.is_finite()) {
        return None;
    }
    // Ranks of the pooled values, ties sharing their average rank.
    let mut pooled: Vec<(f64, bool)> = a
        .iter()
        .map(|&v| (v, true))
        .chain(b.iter().map(|&v| (v, false)))
        .collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = pooled.len();
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0;
    let mut has_ties = false;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        if t > 1.0 {
            has_ties = true;
            tie_term += t * t * t - t;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        rank_sum_a += rank * pooled[i..=j].iter().filter(|p| p.1).count() as f64;
        i = j + 1;
    }
    let (fn1, fn2) = (n1 as f64, n2 as f64);
    let u1 = rank_sum_a - fn1 * (fn1 + 1.0) / 2.0;
    let u2 = fn1 * fn2 - u1;
    let u = u1.max(u2);
    let p = if (n1 > 8 && n2 > 8) || has_ties {
        let mu = fn1 * fn2 / 2.0;
        let nf = n as f64;
        let s = (fn1 * fn2 / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)))).sqrt();
        let z = (u - mu - 0.5) / s;
        2.0 * normal_sf(z)
    } else {
        2.0 * exact_sf(u.round() as usize, n1, n2)
    };
    Some(p.clamp(0.0, 1.0))
}

/// P(U >= u) under the null hypothesis: the number of arrangements of n1
/// and n2 values with statistic k, counted by the usual recurrence.
fn exact_sf(u: usize, n1: usize, n2: usize) -> f64 {
    let max = n1 * n2;
    // f[m][k]: arrangements of m values of the first sample among
    // `nn` of the second with statistic k, built up over nn.
    let mut f = vec![vec![0f64; max + 1]; n1 + 1];
    for row in f.iter_mut() {
        row[0] = 1.0;
    }
    for nn in 1..=n2 {
        let mut g = vec![vec![0f64; max + 1]; n1 + 1];
        g[0][0] = 1.0;
        for m in 1..=n1 {
            for k in 0..=max {
                // The largest value belongs to the first sample (it beats
                // all nn of the second) or to the second.
                let with_first = if k >= nn { g[m - 1][k - nn] } else { 0.0 };
                g[m][k] = with_first + f[m][k];
            }
        }
        f = g;
    }
    let total: f64 = f[n1].iter().sum();
    let tail: f64 = f[n1][u.min(max)..].iter().sum();
    tail / total
}

/// The standard normal's survival function, 1 - Φ(z).
fn normal_sf(z: f64) -> f64 {
    0.5 * libm::erfc(z / std::f64::consts::SQRT_2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_is_compare_pys() {
        assert_eq!(change(100.0, 80.0), -0.2);
        assert_eq!(change(0.0, 0.0), 0.0);
        assert_eq!(change(0.0, 2.0), 2.0);
    }

    #[test]
    fn too_few_repetitions_give_no_p_value() {
        assert_eq!(mann_whitney_p(&[1.0], &[2.0, 3.0]), None);
        assert_eq!(mann_whitney_p(&[1.0, f64::NAN], &[2.0, 3.0]), None);
    }

    #[test]
    fn exact_small_samples() {
        // Complete separation of 3 vs 3: P(U >= 9) = 1/20, two-sided 0.1.
        let p = mann_whitney_p(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert!((p - 0.1).abs() < 1e-12, "{p}");
    }
}
