//! Timing a round's configurations side by side, and racing them.
//!
//! Timed one after another, a configuration timed during a slow stretch of
//! a shared host loses to one timed during a fast stretch. So a round is
//! timed in passes: each pass gives every configuration still in the race a
//! share of its sampling budget, in round-robin order (starting one further
//! each pass, so no configuration always goes first), and a configuration's
//! figure is the least over its passes. Between passes, a configuration
//! whose lower bound is above the round's best upper bound stops: no later
//! pass can make it the best. Its bounds come from its stated uncertainty
//! (the driver's halves disagreement) or, when larger, the spread between
//! its passes' figures or the round's (an upper quantile of the round's
//! spreads), twice over (each pass is another process, processes of one
//! driver differ by more than the halves of one process do, and two passes
//! of one configuration can both meet a slow stretch); racing starts once
//! two passes give that spread.

use crate::measurement::{Measurement, TimeSplit};
use crate::TuneError;

/// What one pass of one configuration measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Pass {
    pub reported_ns: f64,
    pub samples_ns: Vec<f64>,
    /// The run's own uncertainty of `reported_ns`, per cent.
    pub uncertainty_pct: Option<f64>,
    pub mflops: Option<f64>,
    pub split: TimeSplit,
}

/// How a round is timed: `passes` shares of the sampling budget, and
/// whether configurations that cannot win stop early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RacePlan {
    pub passes: usize,
    pub racing: bool,
}

/// How far the least of a few processes' figures can still be above what
/// the configuration runs at, in multiples of the spread between them: two
/// processes that both met a slow stretch differ by little.
const SPREAD_MARGIN: f64 = 2.0;

/// Passes per round: enough for the spread between processes to show and
/// for a configuration that cannot win to stop after two thirds of its
/// budget or less.
pub const PASSES: usize = 3;

enum State {
    Running(Vec<Pass>),
    Stopped(Vec<Pass>, String),
    Failed(TuneError),
}

/// A configuration's figure (the least over its passes) and its relative
/// uncertainty (a fraction): the larger of its last pass's stated one and
/// the spread of its passes' figures; `None` before any pass, or when it
/// states none and has one pass.
fn bounds(passes: &[Pass]) -> Option<(f64, f64)> {
    let best = passes
        .iter()
        .map(|p| p.reported_ns)
        .fold(f64::INFINITY, f64::min);
    let worst = passes.iter().map(|p| p.reported_ns).fold(0.0, f64::max);
    if passes.len() < 2 || !(best.is_finite() && best > 0.0) {
        return None;
    }
    let stated = passes.last().and_then(|p| p.uncertainty_pct).unwrap_or(0.0) / 100.0;
    Some((best, stated.max((worst - best) / best)))
}

/// Times `n` configurations as `plan` says; `pass(i, k)` runs pass `k` of
/// configuration `i`. Results are in configuration order; each records in
/// `stopped` why its timing ended.
pub fn race(
    n: usize,
    plan: RacePlan,
    mut pass: impl FnMut(usize, usize) -> Result<Pass, TuneError>,
) -> Vec<Result<Measurement, TuneError>> {
    let passes = plan.passes.max(1);
    let mut states: Vec<State> = (0..n).map(|_| State::Running(Vec::new())).collect();
    for k in 0..passes {
        let running: Vec<usize> = (0..n)
            .filter(|&i| matches!(states[i], State::Running(_)))
            .collect();
        if running.is_empty() {
            break;
        }
        let start = k % running.len();
        for &i in running[start..].iter().chain(&running[..start]) {
            match pass(i, k) {
                Ok(p) => {
                    if let State::Running(done) = &mut states[i] {
                        done.push(p);
                    }
                }
                Err(e) => states[i] = State::Failed(e),
            }
        }
        if plan.racing && k + 1 < passes {
            stop_the_slow(&mut states, k + 1, passes);
        }
    }
    states
        .into_iter()
        .map(|s| match s {
            State::Failed(e) => Err(e),
            State::Running(done) => Ok(measurement(done, format!("timed in all {passes} passes"))),
            State::Stopped(done, why) => Ok(measurement(done, why)),
        })
        .collect()
}

/// Stops every running configuration whose lower bound is above the
/// upper bound of the round's best, after `done` of `passes` passes.
fn stop_the_slow(states: &mut [State], done: usize, passes: usize) {
    let measured: Vec<(usize, f64, f64)> = states
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match s {
            State::Running(p) => bounds(p).map(|(t, u)| (i, t, u)),
            _ => None,
        })
        .collect();
    // One configuration's passes are few, and two of them can both meet a
    // slow stretch: every configuration is bounded by at least the host's
    // variation between processes as the round shows it.
    let round_spread = round_spread(measured.iter().map(|m| m.2).collect());
    let bounded: Vec<(usize, f64, f64, bool)> = measured
        .iter()
        .map(|&(i, t, u)| (i, t, SPREAD_MARGIN * u.max(round_spread), u <= round_spread))
        .collect();
    let Some(&(leader, t_best, u_best, _)) = bounded.iter().min_by(|a, b| a.1.total_cmp(&b.1))
    else {
        return;
    };
    let upper = t_best * (1.0 + u_best);
    // Only a configuration whose passes agree as well as the round's do
    // can stop: one whose passes differ by more met a disturbance in at
    // least one of them, and maybe in both (a pass stalled twice looks
    // slow by however much the stalls took), so it gets its last pass.
    let slow: Vec<(usize, String)> = bounded
        .iter()
        .filter(|&&(i, t, u, agrees)| i != leader && agrees && t * (1.0 - u) > upper)
        .map(|&(i, t, u, _)| {
            (
                i,
                format!(
                    "stopped after {done} of {passes} passes: at least {} (+-{:.2}%), above the round's best at most {} (+-{:.2}%)",
                    stats::ns(t * (1.0 - u)),
                    u * 100.0,
                    stats::ns(upper),
                    u_best * 100.0
                ),
            )
        })
        .collect();
    for (i, why) in slow {
        if let State::Running(p) = &mut states[i] {
            states[i] = State::Stopped(std::mem::take(p), why);
        }
    }
}

/// Rounds this large bound the host's variation by an upper quantile of
/// their spreads rather than the largest.
const QUANTILE_FROM: usize = 16;

/// The host's variation between processes in a round: the largest spread
/// of a small round; in a round of [`QUANTILE_FROM`] or more, the spread a
/// quarter of its configurations reach. Not the largest there: in a round
/// of dozens, one configuration whose pass met a stall (another process on
/// its CPU for a while) would widen every bound and stop nothing; that
/// configuration is still bounded by its own spread.
fn round_spread(mut spreads: Vec<f64>) -> f64 {
    spreads.sort_by(|a, b| b.total_cmp(a));
    let at = if spreads.len() >= QUANTILE_FROM {
        spreads.len() / 4
    } else {
        0
    };
    spreads.get(at).copied().unwrap_or(0.0)
}

fn measurement(passes: Vec<Pass>, stopped: String) -> Measurement {
    let best = passes
        .iter()
        .min_by(|a, b| a.reported_ns.total_cmp(&b.reported_ns))
        .cloned();
    let uncertainty_pct = match bounds(&passes) {
        Some((_, u)) => Some(u * 100.0),
        None => passes.last().and_then(|p| p.uncertainty_pct),
    };
    let mut split = TimeSplit::default();
    for p in &passes {
        split.add(&p.split);
    }
    Measurement {
        time_ns: best.as_ref().map_or(f64::NAN, |b| b.reported_ns),
        mflops: best.as_ref().and_then(|b| b.mflops),
        samples_ns: passes.into_iter().flat_map(|p| p.samples_ns).collect(),
        uncertainty_pct,
        split: Some(split),
        stopped: Some(stopped),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// xorshift64*: a seeded generator for the simulation.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> f64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
        }
        /// |N(0, 1)| by Box-Muller.
        fn half_normal(&mut self) -> f64 {
            let (a, b) = (self.next().max(1e-12), self.next());
            ((-2.0 * a.ln()).sqrt() * (2.0 * std::f64::consts::PI * b).cos()).abs()
        }
    }

    /// One simulated driver process: a speed for the whole process (the
    /// host's state while it ran, which only ever slows it), then samples
    /// with noise that only adds; the minimum is reported with the halves'
    /// disagreement as its stated uncertainty.
    fn simulated_pass(rng: &mut Rng, true_ns: f64, slow_stretch: f64) -> Pass {
        let process = 1.0 + 0.01 * rng.half_normal() + slow_stretch;
        let samples: Vec<f64> = (0..20)
            .map(|_| true_ns * process * (1.0 + 0.03 * rng.half_normal()))
            .collect();
        let min = |s: &[f64]| s.iter().copied().fold(f64::INFINITY, f64::min);
        let (a, b) = (min(&samples[..10]), min(&samples[10..]));
        let reported = a.min(b);
        Pass {
            reported_ns: reported,
            samples_ns: samples,
            uncertainty_pct: Some((a - b).abs() / reported * 100.0),
            mflops: None,
            split: TimeSplit::default(),
        }
    }

    /// Whether racing stopped configuration `i` before its last pass.
    fn stopped_early(raced: &[Result<Measurement, TuneError>], i: usize) -> bool {
        raced[i]
            .as_ref()
            .unwrap()
            .stopped
            .as_deref()
            .unwrap()
            .starts_with("stopped")
    }

    /// Asserts that racing (`raced`) kept running the configuration that
    /// won when all were re-timed, every pass (`retimed`).
    fn assert_winner_kept(
        seed: u64,
        raced: &[Result<Measurement, TuneError>],
        retimed: &[Result<Measurement, TuneError>],
    ) {
        let t = |i: usize| retimed[i].as_ref().unwrap().time_ns;
        let winner = (0..retimed.len())
            .min_by(|&a, &b| t(a).total_cmp(&t(b)))
            .unwrap();
        assert!(
            !stopped_early(raced, winner),
            "seed {seed}: racing dropped configuration {winner}, which won the re-timing: {:?}",
            raced[winner]
        );
    }

    #[test]
    fn a_round_in_passes_chooses_what_one_after_another_chooses_on_a_deterministic_cost() {
        let cost = [530.0, 410.0, 415.0, 990.0, 411.0];
        let exact = |i: usize| Pass {
            reported_ns: cost[i],
            samples_ns: vec![cost[i]; 5],
            uncertainty_pct: Some(0.0),
            mflops: None,
            split: TimeSplit::default(),
        };
        let sequential: Vec<f64> = (0..cost.len()).map(|i| exact(i).reported_ns).collect();
        let mut order = Vec::new();
        let raced = race(
            cost.len(),
            RacePlan {
                passes: PASSES,
                racing: true,
            },
            |i, k| {
                order.push((k, i));
                Ok(exact(i))
            },
        );
        let times: Vec<f64> = raced.iter().map(|r| r.as_ref().unwrap().time_ns).collect();
        let argmin = |t: &[f64]| (0..t.len()).min_by(|&a, &b| t[a].total_cmp(&t[b])).unwrap();
        assert_eq!(argmin(&times), argmin(&sequential));
        assert_eq!(times[argmin(&times)], 410.0);
        // Every configuration had its first pass before any had a second
        // (interleaved), and the start moved on in the second pass.
        let first_pass: Vec<usize> = order
            .iter()
            .filter(|(k, _)| *k == 0)
            .map(|(_, i)| *i)
            .collect();
        assert_eq!(first_pass, vec![0, 1, 2, 3, 4]);
        assert_eq!(order[cost.len()], (1, 1));
        // With no uncertainty, everything slower than the best stopped
        // after two passes, and says so; the best ran all three.
        let why = |i: usize| raced[i].as_ref().unwrap().stopped.clone().unwrap();
        assert!(
            why(3).starts_with("stopped after 2 of 3 passes"),
            "{}",
            why(3)
        );
        assert_eq!(why(1), "timed in all 3 passes");
        assert_eq!(order.iter().filter(|(_, i)| *i == 3).count(), 2);
    }

    #[test]
    fn racing_never_drops_the_configuration_that_wins_the_final_retiming() {
        // 2000 seeded rounds of 8 configurations, some within a per cent of
        // each other, on a host with slow stretches: whatever racing
        // stopped, the configuration that wins when all are re-timed side
        // by side, every pass, was still running.
        let truth = [
            1000.0, 1004.0, 1009.0, 1030.0, 1100.0, 1250.0, 1003.0, 1500.0,
        ];
        let mut dropped_something = 0;
        for seed in 1..=2000u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let pass = |i: usize, _k: usize, rng: &mut Rng| {
                let stretch = if rng.next() < 0.1 {
                    0.05 * rng.next()
                } else {
                    0.0
                };
                Ok(simulated_pass(rng, truth[i], stretch))
            };
            let raced = race(
                truth.len(),
                RacePlan {
                    passes: PASSES,
                    racing: true,
                },
                |i, k| pass(i, k, &mut rng),
            );
            let retimed = race(
                truth.len(),
                RacePlan {
                    passes: PASSES,
                    racing: false,
                },
                |i, k| pass(i, k, &mut rng),
            );
            assert_winner_kept(seed, &raced, &retimed);
            dropped_something += (0..truth.len())
                .filter(|&i| stopped_early(&raced, i))
                .count();
        }
        // And it does race: the clearly slower ones stop early.
        assert!(dropped_something > 2000, "only {dropped_something} stopped");
    }

    #[test]
    fn a_stalled_pass_in_a_large_round_neither_stops_the_race_nor_drops_the_winner() {
        // 300 seeded rounds of 64 configurations spread like an exhaustive
        // GEMM space (the best few within a per cent or two, the slowest
        // ten times slower), on a host with slow stretches where now and
        // then a pass stalls (another process takes the CPU: 1.5-2.5x).
        let truth: Vec<f64> = (0..64)
            .map(|i| match i {
                0 => 1000.0,
                1 => 1004.0,
                2 => 1012.0,
                i => 1000.0 * (1.0 + 0.15 * i as f64 / 4.0),
            })
            .collect();
        let (mut clearly_slow, mut stopped_slow) = (0usize, 0usize);
        for seed in 1..=300u64 {
            let mut rng = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
            let pass = |i: usize, rng: &mut Rng| {
                let u = rng.next();
                let disturbance = if u < 0.03 {
                    0.5 + rng.next()
                } else if u < 0.13 {
                    0.05 * rng.next()
                } else {
                    0.0
                };
                Ok(simulated_pass(rng, truth[i], disturbance))
            };
            let plan = |racing| RacePlan {
                passes: PASSES,
                racing,
            };
            let raced = race(truth.len(), plan(true), |i, _| pass(i, &mut rng));
            let retimed = race(truth.len(), plan(false), |i, _| pass(i, &mut rng));
            assert_winner_kept(seed, &raced, &retimed);
            for i in (0..truth.len()).filter(|&i| truth[i] > 1.5 * truth[0]) {
                clearly_slow += 1;
                stopped_slow += usize::from(stopped_early(&raced, i));
            }
        }
        // The largest spread of a round this size is almost always a stall;
        // bounded by it, nothing would stop. Bounded by the quantile, all
        // but the configurations whose passes disagree more than most (a
        // quarter, by its definition) stop.
        eprintln!(
            "{stopped_slow} of {clearly_slow} configurations 1.5x slower than the best stopped"
        );
        assert!(
            stopped_slow * 3 >= clearly_slow * 2,
            "only {stopped_slow} of {clearly_slow} configurations 1.5x slower than the best stopped"
        );
    }

    #[test]
    fn a_round_spread_is_its_largest_when_small_and_an_upper_quantile_when_large() {
        assert_eq!(round_spread(vec![0.01, 0.5, 0.02]), 0.5);
        let mut large: Vec<f64> = (0..16).map(|i| 0.01 * f64::from(i)).collect();
        large[3] = 1.5; // a stall
        assert_eq!(round_spread(large.clone()), 0.12);
        large.pop();
        assert_eq!(round_spread(large), 1.5);
        assert_eq!(round_spread(Vec::new()), 0.0);
    }

    #[test]
    fn a_failed_pass_fails_that_configuration_only() {
        let raced = race(
            3,
            RacePlan {
                passes: 2,
                racing: true,
            },
            |i, _| {
                if i == 1 {
                    Err(TuneError::Objective("does not compile".into()))
                } else {
                    Ok(Pass {
                        reported_ns: 100.0 + i as f64,
                        samples_ns: vec![100.0],
                        uncertainty_pct: Some(5.0),
                        mflops: None,
                        split: TimeSplit::default(),
                    })
                }
            },
        );
        assert!(raced[1].is_err());
        assert_eq!(raced[0].as_ref().unwrap().time_ns, 100.0);
        assert_eq!(raced[2].as_ref().unwrap().time_ns, 102.0);
    }
}
