//! Which finalist is fastest, decided under noise: the finalists are
//! re-timed side by side (interleaved by the objective) in rounds, each
//! one's samples pooled over the rounds, and one is slower than the leader
//! only when the confidence intervals of their medians
//! ([`stats::median_interval`], distribution-free) do not overlap. Two
//! whose medians differ by less than the host's noise are tied; a pair
//! neither separated nor within the noise gets another round, and is tied
//! when the rounds run out. The outcome then names the tied set rather than
//! a single winner the noise chose.

/// The confidence at which one finalist is declared slower than another.
pub const CONFIDENCE: f64 = 0.95;

/// Re-timing rounds at most: enough for an objective of one time per
/// evaluation (no samples) to reach the 6 values a 95 % interval needs.
pub const MAX_ROUNDS: usize = 8;

/// Rounds at most when every finalist's timing has samples of its own.
pub const SAMPLED_ROUNDS: usize = 3;

/// The smallest noise assumed: a host whose timings agree better than
/// this still differs by it between runs of one binary.
const NOISE_FLOOR: f64 = 0.005;

/// What the rounds so far say.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The finalist of least median.
    pub leader: usize,
    /// Finalists within the noise of the leader, or never separated.
    pub tied: Vec<usize>,
    /// Finalists neither separated nor within the noise yet.
    pub open: Vec<usize>,
    /// The leader's median and its interval's half-width, per cent of it.
    pub median: f64,
    pub uncertainty_pct: f64,
    /// The noise the ties were judged against, per cent.
    pub noise_pct: f64,
}

/// The verdict on finalists with these pooled samples (an empty list for
/// one that failed) and each round's reported time (the objective's own
/// figure, which may not be the samples' median: a driver that reports the
/// least sample ranks a loaded two-thread run by its best, while its
/// median carries the load), given the noise the objective stated (per
/// cent, the largest of the finalists'). The leader is the finalist of
/// least median reported time, as every other time of the search is
/// compared; the samples give the intervals. `None` when none has a time.
pub fn judge(
    samples: &[Vec<f64>],
    reported: &[Vec<f64>],
    stated_noise_pct: Option<f64>,
) -> Option<Verdict> {
    let median_of = |s: &[f64]| stats::Summary::of(s).map(|m| m.median);
    let medians: Vec<Option<f64>> = reported.iter().map(|r| median_of(r)).collect();
    let leader = (0..reported.len())
        .filter(|&i| medians[i].is_some() && !samples[i].is_empty())
        .min_by(|&a, &b| medians[a].unwrap().total_cmp(&medians[b].unwrap()))?;
    let median = medians[leader]?;
    let interval = |i: usize| stats::median_interval(&samples[i], CONFIDENCE);
    let lead = interval(leader);
    let sample_median = median_of(&samples[leader]).unwrap_or(median);
    let uncertainty = lead.map_or(0.0, |m| (m.high - m.low) / 2.0 / sample_median);
    let noise = (stated_noise_pct.unwrap_or(0.0) / 100.0)
        .max(uncertainty)
        .max(NOISE_FLOOR);
    let mut tied = Vec::new();
    let mut open = Vec::new();
    for (i, m) in medians.iter().enumerate() {
        let Some(m) = m.filter(|_| i != leader && !samples[i].is_empty()) else {
            continue;
        };
        let separated = matches!((lead, interval(i)), (Some(l), Some(o)) if o.low > l.high);
        if separated {
            continue;
        }
        if m / median - 1.0 <= noise {
            tied.push(i);
        } else {
            open.push(i);
        }
    }
    Some(Verdict {
        leader,
        tied,
        open,
        median,
        uncertainty_pct: 100.0 * uncertainty,
        noise_pct: 100.0 * noise,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The verdict when each round reported its samples' median (the
    /// samples stand for the rounds' figures too).
    fn judge_samples(samples: &[Vec<f64>], stated: Option<f64>) -> Option<Verdict> {
        judge(samples, samples, stated)
    }

    /// Samples around `ns`, spread +-`pct` per cent, deterministically.
    fn around(ns: f64, pct: f64, n: usize, phase: usize) -> Vec<f64> {
        (0..n)
            .map(|i| ns * (1.0 + pct / 100.0 * (((i * 7 + phase * 3) % 11) as f64 / 5.0 - 1.0)))
            .collect()
    }

    #[test]
    fn equal_finalists_are_tied_and_a_clearly_slower_one_is_not() {
        let v = judge_samples(
            &[
                around(1000.0, 3.0, 15, 0),
                around(1000.0, 3.0, 15, 1),
                around(1200.0, 3.0, 15, 2),
            ],
            Some(1.0),
        )
        .unwrap();
        assert_eq!(v.tied.len() + 1, 2, "{v:?}");
        assert!(v.leader < 2 && v.tied[0] < 2 && v.open.is_empty(), "{v:?}");
        let v = judge_samples(
            &[around(1000.0, 3.0, 15, 0), around(1300.0, 3.0, 15, 1)],
            None,
        )
        .unwrap();
        assert_eq!(
            (v.leader, v.tied.clone(), v.open.clone()),
            (0, vec![], vec![])
        );
    }

    #[test]
    fn too_few_samples_leave_a_difference_beyond_the_noise_open() {
        // Three values each: no 95 % interval yet; 8 % apart is more than
        // the stated 1 % noise, so another round is wanted.
        let v = judge_samples(
            &[vec![1000.0, 1010.0, 990.0], vec![1080.0, 1085.0, 1075.0]],
            Some(1.0),
        )
        .unwrap();
        assert_eq!(v.open, vec![1]);
        // A failed finalist is neither.
        let v = judge_samples(&[vec![], vec![1000.0; 6]], None).unwrap();
        assert_eq!((v.leader, v.tied.len(), v.open.len()), (1, 0, 0));
    }

    #[test]
    fn the_leader_is_the_least_reported_time_not_the_least_sample_median() {
        // A two-thread run on a loaded host: its least samples (what the
        // driver reports) are half the one-thread run's, its median is
        // worse than it. The search compared the reported figures; so
        // does the decision.
        let loaded: Vec<f64> = (0..15)
            .map(|i| {
                if i % 3 == 0 {
                    1150.0
                } else {
                    2900.0 + i as f64
                }
            })
            .collect();
        let single = around(2600.0, 1.0, 15, 0);
        let v = judge(
            &[loaded.clone(), single.clone()],
            &[vec![1150.0, 1160.0, 1145.0], vec![2580.0, 2600.0, 2610.0]],
            None,
        )
        .unwrap();
        assert_eq!(v.leader, 0, "{v:?}");
        assert_eq!(v.median, 1150.0);
    }
}
