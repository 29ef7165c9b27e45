//! Is a target faithful to the program? A generated driver at a context's
//! sizes times the original routine (linked from the library the program
//! called it in), in two cache states, warm and flushed; the profiled
//! program runs between them, round by round, so a slow stretch of the
//! host falls on both sides. Each round gives, per context and state, the
//! driver's median time per call over the program's median time per call
//! of that context; the rounds' ratios give a distribution-free interval,
//! and a state whose interval lies within the tolerance matches (the rule
//! of `tdg checkpoint validate`, shared through `checkpoint::validate`).

use checkpoint::validate::{ratio_estimate, verdict, RatioEstimate, Verdict};
pub use instrument::contexts::CacheState;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The rules of the driver's comparison with the program.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FidelityRules {
    pub min_rounds: usize,
    pub max_rounds: usize,
    /// A target matches when its time is within this fraction of the
    /// program's (both ways).
    pub tolerance: f64,
    pub confidence: f64,
}

impl Default for FidelityRules {
    fn default() -> Self {
        FidelityRules {
            min_rounds: 6,
            max_rounds: 20,
            tolerance: 0.10,
            confidence: 0.95,
        }
    }
}

/// One context's driver in one cache state against the program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateFidelity {
    pub state: CacheState,
    /// Driver over program, each round.
    pub ratios: Vec<f64>,
    pub estimate: Option<RatioEstimate>,
    pub verdict: Verdict,
}

/// What the rounds said of one context's driver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriverFidelity {
    pub rank: usize,
    pub states: Vec<StateFidelity>,
}

impl DriverFidelity {
    /// The matching state, if one matches; `likely` where both do. The
    /// original routine may not tell the states apart (a routine bound by
    /// its arithmetic runs alike warm and flushed) while a faster candidate
    /// would: then what the program does with its buffers decides, not
    /// which ratio the host's noise put nearer 1.
    pub fn faithful(&self, likely: CacheState) -> Option<&StateFidelity> {
        let matching: Vec<&StateFidelity> = self
            .states
            .iter()
            .filter(|s| s.verdict == Verdict::Matches)
            .collect();
        matching
            .iter()
            .find(|s| s.state == likely)
            .or(matching.first())
            .copied()
    }

    /// Where no state matches: the state whose rounds, all of them run,
    /// leave it undecided only by the host's noise (its interval holds 1
    /// and its ratio lies within the tolerance), the likely one first. A
    /// target the noise could not confirm is not one the rounds showed
    /// off; leaving its context out would give up a share of the gain for
    /// nothing. The caller says it is consistent, not matching.
    pub fn consistent(&self, likely: CacheState, rules: &FidelityRules) -> Option<&StateFidelity> {
        let fits = |s: &&StateFidelity| {
            s.verdict == Verdict::Undecided
                && s.ratios.len() >= rules.max_rounds
                && s.estimate.as_ref().is_some_and(|e| {
                    e.low <= 1.0 && e.high >= 1.0 && (e.ratio - 1.0).abs() <= rules.tolerance
                })
        };
        let candidates: Vec<&StateFidelity> = self.states.iter().filter(fits).collect();
        candidates
            .iter()
            .find(|s| s.state == likely)
            .or(candidates.first())
            .copied()
    }

    /// Why no state matches, in words ("warm 0.55x (0.51-0.60), flushed
    /// 1.31x (1.20-1.44)").
    pub fn why_not(&self) -> String {
        self.states
            .iter()
            .map(|s| match s.estimate {
                Some(e) => format!(
                    "{} {:.2}x ({:.2}-{:.2}, {})",
                    s.state.word(),
                    e.ratio,
                    e.low,
                    e.high,
                    s.verdict.word()
                ),
                None => format!("{} undecided", s.state.word()),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Runs the interleaved rounds. `in_app` runs the profiled program once
/// and returns the median time per call of each context it was asked
/// about (by rank; a context the run did not call is missing);
/// `driver(rank, state)` runs that driver once and returns its median time
/// per call. Contexts whose every state is decided stop being driven.
pub fn judge_drivers<E>(
    rules: &FidelityRules,
    ranks: &[usize],
    mut in_app: impl FnMut() -> Result<BTreeMap<usize, f64>, E>,
    mut driver: impl FnMut(usize, CacheState) -> Result<f64, E>,
    mut progress: impl FnMut(usize),
) -> Result<Vec<DriverFidelity>, E> {
    let mut ratios: BTreeMap<(usize, CacheState), Vec<f64>> = BTreeMap::new();
    let decided = |ratios: &[f64]| -> bool {
        ratios.len() >= rules.min_rounds
            && verdict(
                ratio_estimate(ratios, rules.confidence).as_ref(),
                rules.tolerance,
            ) != Verdict::Undecided
    };
    for round in 1..=rules.max_rounds {
        let open: Vec<(usize, CacheState)> = ranks
            .iter()
            .flat_map(|&r| CacheState::BOTH.map(|s| (r, s)))
            .filter(|k| !decided(ratios.get(k).map_or(&[][..], Vec::as_slice)))
            .collect();
        // A context is done once one state matches: the other is not
        // needed for a target.
        let open: Vec<(usize, CacheState)> = open
            .into_iter()
            .filter(|(r, _)| {
                !CacheState::BOTH.iter().any(|s| {
                    let v = ratios.get(&(*r, *s)).map_or(&[][..], Vec::as_slice);
                    v.len() >= rules.min_rounds
                        && verdict(
                            ratio_estimate(v, rules.confidence).as_ref(),
                            rules.tolerance,
                        ) == Verdict::Matches
                })
            })
            .collect();
        if open.is_empty() {
            break;
        }
        progress(round);
        let app = in_app()?;
        for (rank, state) in open {
            let Some(&app_ns) = app.get(&rank).filter(|t| **t > 0.0) else {
                continue;
            };
            let t = driver(rank, state)?;
            ratios.entry((rank, state)).or_default().push(t / app_ns);
        }
    }
    Ok(ranks
        .iter()
        .map(|&rank| DriverFidelity {
            rank,
            states: CacheState::BOTH
                .iter()
                .map(|&state| {
                    let r = ratios.remove(&(rank, state)).unwrap_or_default();
                    let estimate = ratio_estimate(&r, rules.confidence);
                    StateFidelity {
                        state,
                        verdict: verdict(estimate.as_ref(), rules.tolerance),
                        estimate,
                        ratios: r,
                    }
                })
                .collect(),
        })
        .collect())
}

/// The cache state a context's operands are likely in: warm when every
/// pointer argument comes back to a few buffers (the program works on the
/// same data call after call), flushed when it passes fresh buffers.
pub fn likely_state(distinct_pointers: &[(String, usize)], calls: u64) -> CacheState {
    let reused = distinct_pointers
        .iter()
        .all(|(_, distinct)| (*distinct as u64).saturating_mul(4) <= calls.max(4));
    if reused {
        CacheState::Warm
    } else {
        CacheState::Flushed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_passed_again_and_again_are_warm_fresh_ones_flushed() {
        let one = vec![("x".to_string(), 1)];
        assert_eq!(likely_state(&one, 2000), CacheState::Warm);
        let ten = vec![("x".to_string(), 10)];
        assert_eq!(likely_state(&ten, 20000), CacheState::Warm);
        let fresh = vec![("x".to_string(), 900), ("y".to_string(), 1)];
        assert_eq!(likely_state(&fresh, 1000), CacheState::Flushed);
        assert_eq!(likely_state(&[], 5), CacheState::Warm);
    }

    /// The program's calls take 100 ns at host speed `s`; context 1's
    /// driver reads them warm within 3 %, flushed 1.6x; context 2's reads
    /// 0.5x in both states (the program's data are not the driver's).
    fn host(round: usize) -> f64 {
        1.0 + 0.4 * ((round * 37) % 5) as f64 / 4.0
    }

    #[test]
    fn a_faithful_state_is_found_and_an_unfaithful_driver_is_named() {
        let round = std::cell::Cell::new(0);
        let mut driven = 0;
        let f = judge_drivers::<()>(
            &FidelityRules::default(),
            &[1, 2],
            || {
                round.set(round.get() + 1);
                let s = host(round.get());
                Ok(BTreeMap::from([(1, 100.0 * s), (2, 100.0 * s)]))
            },
            |rank, state| {
                driven += 1;
                let r = match (rank, state) {
                    (1, CacheState::Warm) => 1.03,
                    (1, CacheState::Flushed) => 1.6,
                    _ => 0.5,
                };
                Ok(100.0 * host(round.get()) * r)
            },
            |_| {},
        )
        .unwrap();
        let one = f[0]
            .faithful(CacheState::Flushed)
            .expect("context 1 matches warm");
        assert_eq!(one.state, CacheState::Warm);
        assert!(f[1].faithful(CacheState::Warm).is_none());
        assert!(f[1].why_not().contains("warm 0.50x"), "{}", f[1].why_not());
        assert_eq!(f[1].states[0].verdict, Verdict::Faster);
        // Everything decided at the sixth round: no more was driven.
        assert_eq!(round.get(), 6);
        assert_eq!(driven, 6 * 4);
    }

    #[test]
    fn a_context_the_program_did_not_call_in_a_round_is_skipped_there() {
        let mut round = 0;
        let f = judge_drivers::<()>(
            &FidelityRules {
                max_rounds: 8,
                ..Default::default()
            },
            &[1],
            || {
                round += 1;
                Ok(if round % 2 == 0 {
                    BTreeMap::new()
                } else {
                    BTreeMap::from([(1, 50.0)])
                })
            },
            |_, _| Ok(50.0),
            |_| {},
        )
        .unwrap();
        assert_eq!(f[0].states[0].ratios.len(), 4);
        assert_eq!(f[0].states[0].verdict, Verdict::Undecided, "too few rounds");
    }

    fn state(state: CacheState, rounds: usize, ratio: f64, low: f64, high: f64) -> StateFidelity {
        StateFidelity {
            state,
            ratios: vec![ratio; rounds],
            estimate: Some(RatioEstimate {
                ratio,
                low,
                high,
                coverage: 0.95,
            }),
            verdict: Verdict::Undecided,
        }
    }

    #[test]
    fn an_undecided_state_is_consistent_only_after_every_round_with_1_in_its_interval() {
        let rules = FidelityRules::default();
        let noisy = DriverFidelity {
            rank: 1,
            states: vec![
                state(CacheState::Warm, 20, 1.00, 0.93, 1.14),
                state(CacheState::Flushed, 20, 0.90, 0.84, 1.01),
            ],
        };
        assert_eq!(noisy.faithful(CacheState::Warm), None);
        let c = noisy.consistent(CacheState::Flushed, &rules).unwrap();
        // The likely state is preferred only when it qualifies: flushed
        // holds 1 too, and lies within the tolerance.
        assert_eq!(c.state, CacheState::Flushed);
        assert_eq!(
            noisy.consistent(CacheState::Warm, &rules).unwrap().state,
            CacheState::Warm
        );
        // Rounds left to run, 1 outside the interval, or a ratio beyond
        // the tolerance: not consistent.
        for s in [
            state(CacheState::Warm, 12, 1.00, 0.93, 1.14),
            state(CacheState::Warm, 20, 1.08, 1.02, 1.20),
            state(CacheState::Warm, 20, 1.15, 0.95, 1.40),
        ] {
            let one = DriverFidelity {
                rank: 1,
                states: vec![s],
            };
            assert_eq!(one.consistent(CacheState::Warm, &rules), None);
        }
    }
}
