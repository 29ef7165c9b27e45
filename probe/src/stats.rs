//! The statistics BlackjackBench uses to turn noisy micro-benchmark curves
//! into numbers: monotonicity enforcement, the biggest relative step, and
//! quality-threshold clustering with a diameter relative to the cluster mean.

/// Curves that must rise with the control variable (latency against buffer
/// size) only fall through noise, so each point is lowered to the smallest
/// value at or after it: `y[i] = min(y[j] for j >= i)`.
pub fn enforce_monotonic(ys: &[f64]) -> Vec<f64> {
    let mut out = ys.to_vec();
    for i in (0..out.len().saturating_sub(1)).rev() {
        if out[i + 1] < out[i] {
            out[i] = out[i + 1];
        }
    }
    out
}

/// `(y[i+1] - y[i]) / y[i]` for each adjacent pair.
pub fn relative_steps(ys: &[f64]) -> Vec<f64> {
    ys.windows(2).map(|w| (w[1] - w[0]) / w[0]).collect()
}

/// Index `i` of the largest relative step between points `i` and `i + 1`.
pub fn biggest_relative_step(ys: &[f64]) -> Option<usize> {
    relative_steps(ys)
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_finite())
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(i, _)| i)
}

/// The quality threshold: a cluster's diameter may not exceed this fraction
/// of its mean (BlackjackBench's variable diameter).
pub const QT_RELATIVE_DIAMETER: f64 = 0.25;

/// Would `values` form an acceptable cluster?
pub fn fits_quality_threshold(values: &[f64], relative_diameter: f64) -> bool {
    if values.is_empty() {
        return true;
    }
    let (lo, hi) = values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    hi - lo <= relative_diameter * mean
}

/// Quality-threshold clustering of one-dimensional values. Every point seeds
/// a candidate cluster that greedily takes the point keeping the diameter
/// smallest while the diameter stays within `relative_diameter` of the
/// candidate's mean; the largest candidate is kept, its points removed, and
/// the rest clustered again. Returns clusters as sorted index lists, ordered
/// by their smallest index.
pub fn qt_clusters(values: &[f64], relative_diameter: f64) -> Vec<Vec<usize>> {
    let mut remaining: Vec<usize> = (0..values.len()).collect();
    let mut clusters = Vec::new();
    while !remaining.is_empty() {
        let mut best: Vec<usize> = Vec::new();
        for &seed in &remaining {
            let mut members = vec![seed];
            let (mut lo, mut hi) = (values[seed], values[seed]);
            let mut sum = values[seed];
            loop {
                // In one dimension the diameter after adding j is
                // max(hi, v_j) - min(lo, v_j).
                let candidate = remaining
                    .iter()
                    .filter(|j| !members.contains(j))
                    .map(|&j| (j, hi.max(values[j]) - lo.min(values[j])))
                    .min_by(|a, b| a.1.total_cmp(&b.1));
                let Some((j, diameter)) = candidate else {
                    break;
                };
                let mean = sum / members.len() as f64;
                if diameter > relative_diameter * mean {
                    break;
                }
                members.push(j);
                lo = lo.min(values[j]);
                hi = hi.max(values[j]);
                sum += values[j];
            }
            if members.len() > best.len() {
                best = members;
            }
        }
        best.sort_unstable();
        remaining.retain(|i| !best.contains(i));
        clusters.push(best);
    }
    clusters.sort_by_key(|c| c[0]);
    clusters
}

/// A plateau of a step-shaped curve.
#[derive(Debug, Clone, PartialEq)]
pub struct Plateau {
    /// Indices into the curve, ascending.
    pub points: Vec<usize>,
    /// Largest x still on the plateau: the level's effective size.
    pub max_x: f64,
    /// Smallest y on the plateau: the level's latency.
    pub min_y: f64,
}

/// Steps of a rising curve: the plateaus that hold at least `min_points`
/// points (fewer means a transition between two levels, where a buffer is
/// partly in each), plus the last cluster, which is what lies beyond every
/// level (main memory for the cache curve) and is returned separately.
/// `ys` must already be monotonic.
pub fn plateaus(xs: &[f64], ys: &[f64], min_points: usize) -> (Vec<Plateau>, Option<Plateau>) {
    let clusters = qt_clusters(ys, QT_RELATIVE_DIAMETER);
    let mut all: Vec<Plateau> = clusters
        .into_iter()
        .map(|points| Plateau {
            max_x: points
                .iter()
                .map(|&i| xs[i])
                .fold(f64::NEG_INFINITY, f64::max),
            min_y: points.iter().map(|&i| ys[i]).fold(f64::INFINITY, f64::min),
            points,
        })
        .collect();
    let beyond = all.pop();
    all.retain(|p| p.points.len() >= min_points);
    (all, beyond)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn monotonic_lowers_noise_dips_only() {
        assert_eq!(
            enforce_monotonic(&[1.0, 3.0, 2.0, 2.5, 10.0, 9.0]),
            vec![1.0, 2.0, 2.0, 2.5, 9.0, 9.0]
        );
    }

    #[test]
    fn biggest_relative_step_prefers_relative_over_absolute() {
        // 1 -> 2 is +100%; 10 -> 15 is larger in absolute terms but +50%.
        assert_eq!(biggest_relative_step(&[1.0, 1.0, 2.0, 10.0, 15.0]), Some(2));
        assert_eq!(biggest_relative_step(&[1.0]), None);
    }

    #[test]
    fn qt_separates_three_noisy_levels() {
        let ys = [1.0, 1.05, 0.98, 1.02, 3.0, 3.2, 2.9, 3.1, 10.0, 11.0, 10.5];
        let c = qt_clusters(&ys, QT_RELATIVE_DIAMETER);
        assert_eq!(c, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9, 10]]);
    }

    #[test]
    fn plateaus_drop_transitions_and_split_off_memory() {
        let xs: Vec<f64> = (0..14).map(|i| f64::from(1u32 << i)).collect();
        let ys = [
            1.0, 1.0, 1.0, 1.0, 1.9, 3.0, 3.1, 3.0, 3.2, 3.1, 6.0, 40.0, 41.0, 42.0,
        ];
        let (levels, beyond) = plateaus(&xs, &enforce_monotonic(&ys), 3);
        assert_eq!(levels.len(), 2, "{levels:?}");
        assert_eq!(levels[0].max_x, 8.0);
        assert_eq!(levels[1].max_x, 512.0);
        assert_eq!(levels[1].min_y, 3.0);
        assert_eq!(beyond.unwrap().min_y, 40.0);
    }

    proptest! {
        #[test]
        fn monotonic_is_monotonic_and_never_raises(ys in proptest::collection::vec(0.1f64..100.0, 0..40)) {
            let m = enforce_monotonic(&ys);
            for w in m.windows(2) { prop_assert!(w[0] <= w[1]); }
            for (a, b) in m.iter().zip(&ys) { prop_assert!(a <= b); }
        }

        #[test]
        fn qt_partitions_and_respects_threshold(ys in proptest::collection::vec(0.1f64..100.0, 1..25)) {
            let c = qt_clusters(&ys, QT_RELATIVE_DIAMETER);
            let mut seen: Vec<usize> = c.iter().flatten().copied().collect();
            seen.sort_unstable();
            prop_assert_eq!(seen, (0..ys.len()).collect::<Vec<_>>());
            for cluster in &c {
                let vals: Vec<f64> = cluster.iter().map(|&i| ys[i]).collect();
                // Growth checks the threshold against the mean before the
                // last addition, so allow the mean to move by that point.
                let (lo, hi) = vals.iter().fold((f64::MAX, f64::MIN), |(l, h), &v| (l.min(v), h.max(v)));
                prop_assert!(hi - lo <= QT_RELATIVE_DIAMETER * hi + 1e-9);
            }
        }
    }
}
