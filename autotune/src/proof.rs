//! The proof: is the program faster with the tuned routine? Whole-program
//! runs, plain and tuned, alternate in pairs whose order flips every round
//! (plain first, then tuned first), so a slow stretch of the shared host
//! and whatever the first run of a pair warms for the second fall on both
//! sides alike. Each round's plain time over its tuned time is one
//! speedup; the rounds' speedups give a distribution-free interval of the
//! median speedup, and the rounds go on until it decides.
//!
//! Every run's standard output is compared with the first plain run's: a
//! tuned routine that changes what the program prints is a failed
//! candidate, however fast.

use crate::program::ProgramRun;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The rules of the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProofRules {
    /// Rounds before a verdict may end it (6 is the fewest for a 95 %
    /// sign-test interval).
    pub min_rounds: usize,
    /// Rounds after which an undecided comparison ends.
    pub max_rounds: usize,
    /// Confidence of the speedup's interval.
    pub confidence: f64,
    /// A speedup within 1/(1+m) .. 1+m is no gain worth having: the
    /// program is faster only when its whole interval lies above 1+m.
    pub negligible: f64,
}

impl Default for ProofRules {
    fn default() -> Self {
        ProofRules {
            min_rounds: 6,
            max_rounds: 30,
            confidence: 0.95,
            negligible: 0.01,
        }
    }
}

impl ProofRules {
    /// One line on what is wrong with these rules, if anything.
    pub fn check(&self) -> Result<(), String> {
        if self.min_rounds < 6 {
            return Err(format!(
                "--min-rounds {} is too few: 6 rounds are the fewest a 95% interval of the median speedup needs",
                self.min_rounds
            ));
        }
        if self.max_rounds < self.min_rounds {
            return Err(format!(
                "--max-rounds {} is below --min-rounds {}",
                self.max_rounds, self.min_rounds
            ));
        }
        Ok(())
    }
}

/// Which side ran first in a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    PlainFirst,
    TunedFirst,
}

/// One round: a plain run and a tuned run, back to back.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Round {
    pub order: Order,
    pub plain_s: f64,
    pub tuned_s: f64,
}

impl Round {
    pub fn speedup(&self) -> f64 {
        self.plain_s / self.tuned_s
    }
}

/// The median speedup with its interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Speedup {
    pub median: f64,
    pub low: f64,
    pub high: f64,
    /// The interval's coverage (at least the confidence asked for).
    pub coverage: f64,
}

impl Speedup {
    pub fn of(rounds: &[Round], confidence: f64) -> Option<Speedup> {
        let ratios: Vec<f64> = rounds.iter().map(Round::speedup).collect();
        let interval = stats::median_interval(&ratios, confidence)?;
        Some(Speedup {
            median: stats::Summary::of(&ratios)?.median,
            low: interval.low,
            high: interval.high,
            coverage: interval.coverage,
        })
    }

    /// "1.38x (1.31-1.44)".
    pub fn text(&self) -> String {
        format!("{:.3}x ({:.3}-{:.3})", self.median, self.low, self.high)
    }
}

/// What the interval says. A gain within the negligible band around 1
/// is no gain worth deploying, however sure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProofVerdict {
    /// The whole interval lies above 1 + negligible: the program is
    /// faster by more than the negligible band.
    Faster,
    /// The whole interval lies below 1: the program is slower.
    Slower,
    /// The whole interval lies within the negligible band around 1.
    NoGain,
    /// Neither, after the last round.
    Undecided,
}

impl ProofVerdict {
    pub fn of(speedup: Option<&Speedup>, negligible: f64) -> ProofVerdict {
        let Some(s) = speedup else {
            return ProofVerdict::Undecided;
        };
        if s.low > 1.0 + negligible {
            ProofVerdict::Faster
        } else if s.high < 1.0 {
            ProofVerdict::Slower
        } else if s.low >= 1.0 / (1.0 + negligible) && s.high <= 1.0 + negligible {
            ProofVerdict::NoGain
        } else {
            ProofVerdict::Undecided
        }
    }

    pub fn words(self) -> &'static str {
        match self {
            ProofVerdict::Faster => "faster",
            ProofVerdict::Slower => "slower",
            ProofVerdict::NoGain => "not measurably faster",
            ProofVerdict::Undecided => "undecided",
        }
    }
}

/// Whether the tuned program printed what the plain one did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum OutputCheck {
    /// Every run printed the same bytes.
    Same { sha256: String, bytes: u64 },
    /// The plain program itself printed different bytes from run to run
    /// (a time stamp, a random seed): the outputs cannot be compared.
    VariesUnaided,
}

/// The comparison's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proof {
    pub rules: ProofRules,
    pub rounds: Vec<Round>,
    pub speedup: Option<Speedup>,
    pub verdict: ProofVerdict,
    pub output: OutputCheck,
}

/// Why the comparison stopped without a verdict.
#[derive(Debug, thiserror::Error)]
pub enum ProofError {
    #[error("the tuned program's standard output differs from the plain program's (round {round}: {tuned_bytes} bytes, sha256 {tuned} against {plain_bytes} bytes, sha256 {plain}): the tuned routine computes something else; check the candidate at the chosen configuration against the original")]
    OutputChanged {
        round: usize,
        plain: String,
        plain_bytes: u64,
        tuned: String,
        tuned_bytes: u64,
    },
    #[error("the tuned program {how} in round {round} while the plain program succeeds: the tuned routine breaks it")]
    TunedFailed { round: usize, how: String },
    #[error("the plain program {how} in round {round}; autotune needs a program that succeeds")]
    PlainFailed { round: usize, how: String },
    #[error(transparent)]
    Run(#[from] crate::program::ProgramError),
}

/// Which program a run is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Plain,
    Tuned,
}

/// Runs rounds with `run` until the speedup's interval decides or the
/// rules' last round; `progress` hears of each round.
pub fn prove(
    rules: &ProofRules,
    mut run: impl FnMut(Side) -> Result<ProgramRun, crate::program::ProgramError>,
    mut progress: impl FnMut(&Round, Option<&Speedup>),
) -> Result<Proof, ProofError> {
    let mut rounds: Vec<Round> = Vec::new();
    let mut outputs = Outputs::default();
    loop {
        let round = run_round(rounds.len() + 1, &mut run, &mut outputs)?;
        rounds.push(round);
        let speedup = Speedup::of(&rounds, rules.confidence);
        progress(&round, speedup.as_ref());
        let verdict = ProofVerdict::of(speedup.as_ref(), rules.negligible);
        let decided = verdict != ProofVerdict::Undecided && rounds.len() >= rules.min_rounds;
        if decided || rounds.len() >= rules.max_rounds {
            return Ok(Proof {
                rules: *rules,
                rounds,
                speedup,
                verdict,
                output: outputs.check(),
            });
        }
    }
}

/// Round `n`: a plain and a tuned run, plain first in odd rounds; each
/// run's success and output checked.
fn run_round(
    n: usize,
    run: &mut impl FnMut(Side) -> Result<ProgramRun, crate::program::ProgramError>,
    outputs: &mut Outputs,
) -> Result<Round, ProofError> {
    let order = if n % 2 == 1 {
        Order::PlainFirst
    } else {
        Order::TunedFirst
    };
    let sides = match order {
        Order::PlainFirst => [Side::Plain, Side::Tuned],
        Order::TunedFirst => [Side::Tuned, Side::Plain],
    };
    let mut plain: Option<Duration> = None;
    let mut tuned: Option<Duration> = None;
    for side in sides {
        let r = run(side)?;
        match side {
            Side::Plain => {
                if !r.succeeded() {
                    return Err(ProofError::PlainFailed {
                        round: n,
                        how: r.how_it_ended(),
                    });
                }
                outputs.plain(&r);
                plain = Some(r.wall);
            }
            Side::Tuned => {
                if !r.succeeded() {
                    return Err(ProofError::TunedFailed {
                        round: n,
                        how: r.how_it_ended(),
                    });
                }
                tuned = Some(r.wall);
                outputs.tuned(n, r)?;
            }
        }
    }
    Ok(Round {
        order,
        plain_s: plain.expect("ran").as_secs_f64(),
        tuned_s: tuned.expect("ran").as_secs_f64(),
    })
}

/// What the runs printed so far: the first plain run's output (the
/// reference), and whether a later plain run printed another.
#[derive(Default)]
struct Outputs {
    reference: Option<(String, u64)>,
    varies: bool,
}

impl Outputs {
    fn plain(&mut self, r: &ProgramRun) {
        match &self.reference {
            None => self.reference = Some((r.stdout_sha256.clone(), r.stdout_bytes)),
            Some((sha, _)) if *sha != r.stdout_sha256 => self.varies = true,
            Some(_) => {}
        }
    }

    /// A tuned run of round `n` that printed other bytes than the
    /// reference, while the plain program prints the same, fails.
    fn tuned(&self, n: usize, r: ProgramRun) -> Result<(), ProofError> {
        // Round one runs plain first, so the reference is set.
        let (sha, bytes) = self.reference.as_ref().expect("a plain run came first");
        if !self.varies && *sha != r.stdout_sha256 {
            return Err(ProofError::OutputChanged {
                round: n,
                plain: sha.clone(),
                plain_bytes: *bytes,
                tuned: r.stdout_sha256,
                tuned_bytes: r.stdout_bytes,
            });
        }
        Ok(())
    }

    fn check(self) -> OutputCheck {
        let (sha256, bytes) = self.reference.expect("a run happened");
        if self.varies {
            OutputCheck::VariesUnaided
        } else {
            OutputCheck::Same { sha256, bytes }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    fn run(secs: f64, out: &str, code: i32) -> ProgramRun {
        ProgramRun {
            wall: Duration::from_secs_f64(secs),
            status: ExitStatus::from_raw(code << 8),
            stdout_sha256: out.to_string(),
            stdout_bytes: out.len() as u64,
            stderr_tail: String::new(),
            leftovers_stopped: false,
        }
    }

    /// A host whose speed drifts by a factor `drift(i)` per run, on which
    /// the tuned program is `gain` times faster.
    fn drifting(
        gain: f64,
        drift: impl Fn(usize) -> f64,
    ) -> impl FnMut(Side) -> Result<ProgramRun, crate::program::ProgramError> {
        let mut i = 0;
        move |side| {
            i += 1;
            let base = 1.0 * drift(i);
            Ok(match side {
                Side::Plain => run(base, "out", 0),
                Side::Tuned => run(base / gain, "out", 0),
            })
        }
    }

    #[test]
    fn a_real_gain_is_proven_through_a_drifting_host() {
        // The host slows 3x over the comparison and jitters by 20 %: each
        // round's pair still sees nearly the same speed.
        let drift =
            |i: usize| (1.0 + i as f64 * 0.05) * if i.is_multiple_of(3) { 1.2 } else { 1.0 };
        let p = prove(&ProofRules::default(), drifting(1.25, drift), |_, _| {}).unwrap();
        assert_eq!(p.verdict, ProofVerdict::Faster, "{p:?}");
        let s = p.speedup.unwrap();
        assert!(s.low > 1.0 && s.low <= 1.25 * 1.25 && s.high >= 1.25 / 1.25);
        assert!(matches!(p.output, OutputCheck::Same { .. }));
    }

    #[test]
    fn orders_alternate_round_by_round() {
        let p = prove(&ProofRules::default(), drifting(1.5, |_| 1.0), |_, _| {}).unwrap();
        let orders: Vec<Order> = p.rounds.iter().map(|r| r.order).collect();
        assert_eq!(
            orders[..4],
            [
                Order::PlainFirst,
                Order::TunedFirst,
                Order::PlainFirst,
                Order::TunedFirst
            ]
        );
    }

    /// `prove` over `run(i, side)`, the comparison's i-th run (from 1).
    fn prove_runs(
        rules: &ProofRules,
        mut run: impl FnMut(usize, Side) -> ProgramRun,
    ) -> Result<Proof, ProofError> {
        let mut i = 0;
        prove(
            rules,
            |side| {
                i += 1;
                Ok(run(i, side))
            },
            |_, _| {},
        )
    }

    #[test]
    fn no_gain_is_said_when_the_interval_hugs_one() {
        // Tiny alternating noise, no real difference.
        let p = prove_runs(&ProofRules::default(), |i, _| {
            run(1.0 + if i % 2 == 0 { 0.002 } else { -0.002 }, "x", 0)
        })
        .unwrap();
        assert_eq!(p.verdict, ProofVerdict::NoGain, "{p:?}");
        assert_eq!(p.rounds.len(), 6);
    }

    #[test]
    fn a_noisy_host_without_a_gain_stays_undecided_up_to_the_last_round() {
        let rules = ProofRules {
            max_rounds: 10,
            ..Default::default()
        };
        // +-30 % noise that no pairing cancels.
        let p = prove_runs(&rules, |i, _| {
            run(1.0 + 0.3 * (((i * 7919) % 13) as f64 / 6.0 - 1.0), "x", 0)
        })
        .unwrap();
        assert_eq!(p.verdict, ProofVerdict::Undecided);
        assert_eq!(p.rounds.len(), 10);
    }

    #[test]
    fn a_changed_output_fails_the_candidate_at_once() {
        let mut n = 0;
        let e = prove_runs(&ProofRules::default(), |i, side| {
            n = i;
            let out = if side == Side::Plain {
                "right"
            } else {
                "wrong"
            };
            run(1.0, out, 0)
        })
        .unwrap_err();
        assert!(
            matches!(e, ProofError::OutputChanged { round: 1, .. }),
            "{e}"
        );
        assert_eq!(n, 2);
    }

    #[test]
    fn a_plain_program_whose_output_varies_is_compared_on_time_alone() {
        let time = |side| if side == Side::Plain { 2.0 } else { 1.0 };
        let p = prove_runs(&ProofRules::default(), |i, side| {
            run(time(side), &format!("stamp {i}"), 0)
        });
        // The first tuned run differs from the first plain run before the
        // plain side has shown that it varies: that is a changed output.
        assert!(p.is_err());
        // Plain runs vary among themselves; tuned output equals the first
        // plain output only in round one.
        let p = prove_runs(&ProofRules::default(), |i, side| {
            let out = if side == Side::Plain {
                format!("p{i}")
            } else {
                "p1".to_string()
            };
            run(time(side), &out, 0)
        })
        .unwrap();
        assert_eq!(p.output, OutputCheck::VariesUnaided);
        assert_eq!(p.verdict, ProofVerdict::Faster);
    }

    #[test]
    fn a_failing_program_ends_the_comparison_with_the_side_that_failed() {
        let e = prove_runs(&ProofRules::default(), |_, side| {
            run(1.0, "x", if side == Side::Tuned { 139 } else { 0 })
        })
        .unwrap_err();
        assert!(matches!(e, ProofError::TunedFailed { round: 1, .. }), "{e}");
        let e = prove_runs(&ProofRules::default(), |_, side| {
            run(1.0, "x", if side == Side::Plain { 2 } else { 0 })
        })
        .unwrap_err();
        assert!(matches!(e, ProofError::PlainFailed { round: 1, .. }), "{e}");
    }

    #[test]
    fn rules_below_six_rounds_are_refused() {
        assert!(ProofRules {
            min_rounds: 5,
            ..Default::default()
        }
        .check()
        .is_err());
        assert!(ProofRules {
            max_rounds: 5,
            ..Default::default()
        }
        .check()
        .is_err());
        assert!(ProofRules::default().check().is_ok());
    }
}
