//! Step 3: a faithful target for each chosen context. First a generated
//! driver at the context's sizes, timing the original routine (from the
//! library the program called it in), warm and flushed, held against the
//! profiled program round by round ([`crate::fidelity`]); where neither
//! state matches, a checkpoint of the program at one of that context's
//! calls, captured through the spec's region shim and held against the
//! program at growing delays (`--auto-delay --reference app`). A context
//! neither reproduces is named with the figures that say why, and left
//! out of the tuning and of the prediction.

use crate::fidelity::{judge_drivers, CacheState, DriverFidelity, FidelityRules};
use crate::profile::{medians_by_values, profiled_run, Profiled};
use crate::program::Program;
use crate::AutotuneError;
use checkpoint::validate::{RatioEstimate, Verdict};
use driver_gen::{build_driver, BuiltDriver, RunOptions};
use instrument::contexts::ContextEntry;
use serde::{Deserialize, Serialize};
use spec_lang::CheckedSpec;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a context is timed on while the candidate is tuned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Target {
    /// The spec's generated driver, with the context's `-D` values and
    /// this cache state.
    Driver {
        state: CacheState,
        defines: BTreeMap<String, String>,
    },
    /// Restored copies of the program at one of the context's calls.
    Checkpoint {
        image: PathBuf,
        call: u64,
        delay: u64,
    },
}

/// How sure the target's faithfulness is: its time of the original routine
/// over the program's, with the interval, as the comparison measured it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Fidelity {
    pub ratio: f64,
    pub low: f64,
    pub high: f64,
    pub rounds: usize,
}

impl Fidelity {
    fn of(e: &RatioEstimate, rounds: usize) -> Fidelity {
        Fidelity {
            ratio: e.ratio,
            low: e.low,
            high: e.high,
            rounds,
        }
    }
}

/// One chosen context and what it is tuned on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextTarget {
    pub rank: usize,
    pub label: String,
    pub values: BTreeMap<String, i64>,
    pub calls: u64,
    /// The program's median time per call in the profile.
    pub in_app_ns: f64,
    /// Its share of the routine's time.
    pub share: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fidelity: Option<Fidelity>,
    /// Why each kind of target was not faithful, when one was not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<String>,
}

impl Target {
    /// "warm driver", "checkpoint, delay 3": the target in a few words.
    pub fn described(&self) -> String {
        match self {
            Target::Driver { state, .. } => format!("{} driver", state.word()),
            Target::Checkpoint { delay, .. } => format!("checkpoint, delay {delay}"),
        }
    }
}

/// In the work directory: the C that calls the program's own definition
/// of the routine, as the drivers time the original.
pub const ORIGINAL_SOURCE: &str = "original.c";

/// How the targets are found.
pub struct TargetRequest<'a> {
    pub program: &'a Program,
    pub profiled: &'a Profiled,
    /// The profiled spec (the contexts' macros), loaded.
    pub spec: &'a CheckedSpec,
    pub spec_path: &'a Path,
    pub include_dirs: Vec<PathBuf>,
    /// Compiler, timeout, machine defaults for the drivers.
    pub base: RunOptions,
    pub rules: FidelityRules,
    /// Try checkpoints where no driver matches.
    pub checkpoints: bool,
    pub work: &'a Path,
}

/// Finds a target for each context of `ranks`; `note` hears one line per
/// decision.
pub fn find_targets(
    req: &TargetRequest,
    ranks: &[usize],
    note: &mut dyn FnMut(&str),
) -> Result<Vec<ContextTarget>, AutotuneError> {
    let contexts: Vec<&ContextEntry> = ranks
        .iter()
        .filter_map(|r| req.profiled.contexts.contexts.iter().find(|c| c.rank == *r))
        .collect();
    let mut found: Vec<ContextTarget> = contexts
        .iter()
        .map(|c| ContextTarget {
            rank: c.rank,
            label: req.profiled.label(c.rank),
            values: c.values.clone(),
            calls: c.calls,
            in_app_ns: c.in_app_median_ns,
            share: c.share,
            target: None,
            fidelity: None,
            rejected: Vec::new(),
        })
        .collect();
    match driver_problem(req) {
        Some(why) => {
            note(&format!("no driver targets: {why}"));
            for t in &mut found {
                t.rejected.push(format!("driver: {why}"));
            }
        }
        None => driver_targets(req, &contexts, &mut found, note)?,
    }
    for t in found.iter_mut().filter(|t| t.target.is_none()) {
        if !req.checkpoints {
            t.rejected
                .push("checkpoint: not tried (--no-checkpoint)".to_string());
            continue;
        }
        checkpoint_target(req, t, note)?;
    }
    Ok(found)
}

/// Each context's driver in the state that matches the program, or is
/// consistent with it, where one is; else why not, in `rejected`.
fn driver_targets(
    req: &TargetRequest,
    contexts: &[&ContextEntry],
    found: &mut [ContextTarget],
    note: &mut dyn FnMut(&str),
) -> Result<(), AutotuneError> {
    let judged = judge_contexts(req, contexts, note)?;
    for (t, j) in found.iter_mut().zip(&judged) {
        let likely = req
            .profiled
            .report
            .contexts
            .iter()
            .find(|c| c.rank == t.rank)
            .map_or(CacheState::Warm, |c| {
                crate::fidelity::likely_state(&c.distinct_pointers, c.calls)
            });
        let (found_state, how) = match j.faithful(likely) {
            Some(s) => (Some(s), "matches the program"),
            None => (
                j.consistent(likely, &req.rules),
                "is consistent with the program (its interval holds 1 after every round; undecided only by the host's noise)",
            ),
        };
        match found_state {
            Some(s) => {
                let ctx = contexts.iter().find(|c| c.rank == t.rank).expect("chosen");
                t.target = Some(Target::Driver {
                    state: s.state,
                    defines: ctx.defines.clone(),
                });
                t.fidelity = s.estimate.as_ref().map(|e| Fidelity::of(e, s.ratios.len()));
                note(&format!(
                    "context {}: the {} driver {how} ({})",
                    t.label,
                    s.state.word(),
                    j.why_not()
                ));
            }
            None => {
                t.rejected.push(format!("driver: {}", j.why_not()));
                note(&format!(
                    "context {}: no driver state matches the program: {}",
                    t.label,
                    j.why_not()
                ));
            }
        }
    }
    Ok(())
}

/// Why the spec cannot give drivers here, if it cannot.
fn driver_problem(req: &TargetRequest) -> Option<String> {
    if !req.spec.serves(spec_lang::Use::Driver) {
        let first = req
            .spec
            .problems(spec_lang::Use::Driver)
            .first()
            .map(|d| d.message.clone())
            .unwrap_or_default();
        return Some(format!(
            "the spec describes no driver ({first}); give it an init clause that allocates the operands from the sizes"
        ));
    }
    if req.profiled.summary.defined_in.is_empty() {
        return Some("the profile does not say which library defines the routine".into());
    }
    None
}

/// The drivers of every context in both states, held against profiled runs.
fn judge_contexts(
    req: &TargetRequest,
    contexts: &[&ContextEntry],
    note: &mut dyn FnMut(&str),
) -> Result<Vec<DriverFidelity>, AutotuneError> {
    let original = req.work.join(ORIGINAL_SOURCE);
    fsguard::write_atomic(
        &original,
        instrument::interpose::generate_original(
            req.spec,
            Path::new(&req.profiled.summary.defined_in),
        )?
        .as_bytes(),
    )?;
    let mut drivers: BTreeMap<(usize, CacheState), (BuiltDriver, RunOptions)> = BTreeMap::new();
    for c in contexts {
        for state in CacheState::BOTH {
            let mut o = tune::contexts::driver_options(&req.base, c, Some(state));
            // The original has no reference to be verified against.
            o.verify = false;
            let built = build_driver(req.spec, &original, &o)?;
            drivers.insert((c.rank, state), (built, o));
        }
    }
    let wanted: BTreeMap<BTreeMap<String, i64>, usize> = contexts
        .iter()
        .map(|c| (c.values.clone(), c.rank))
        .collect();
    let routine = req.spec.routine.name.name.clone();
    let ranks: Vec<usize> = contexts.iter().map(|c| c.rank).collect();
    let judged = judge_drivers(
        &req.rules,
        &ranks,
        || {
            let run = profiled_run(req.program, &req.profiled.shim, &routine, req.work)?;
            Ok::<_, AutotuneError>(
                medians_by_values(&run.report)
                    .into_iter()
                    .filter_map(|(values, median)| wanted.get(&values).map(|r| (*r, median)))
                    .collect(),
            )
        },
        |rank, state| {
            let (built, o) = &drivers[&(rank, state)];
            Ok(built.run(o)?.stats.median)
        },
        |round| {
            note(&format!(
                "fidelity round {round}: the profiled program, then each open driver"
            ))
        },
    )?;
    Ok(judged)
}

/// The 1-based call number, among all the routine's calls, of the middle
/// call of context `rank` (in the steady state of the run, not its start).
pub fn middle_call(profiled: &Profiled, rank: usize) -> Option<u64> {
    let positions: Vec<usize> = profiled
        .report
        .timeline
        .iter()
        .enumerate()
        .filter(|(_, (_, r))| *r == rank)
        .map(|(i, _)| i + 1)
        .collect();
    positions.get(positions.len() / 2).map(|&p| p as u64)
}

/// A checkpoint at one of the context's calls, with the delay that makes
/// it match the program, or why there is none.
fn checkpoint_target(
    req: &TargetRequest,
    t: &mut ContextTarget,
    note: &mut dyn FnMut(&str),
) -> Result<(), AutotuneError> {
    let (criu, call) = match checkpoint_premise(req, t.rank) {
        Ok(premise) => premise,
        Err(why) => {
            t.rejected.push(format!("checkpoint: {why}"));
            return Ok(());
        }
    };
    match capture_growing_delays(req, t, call, &criu, note)? {
        Ok(report) => judge_checkpoint(t, &report, call, note),
        Err(why) => t.rejected.push(format!("checkpoint: {why}")),
    }
    Ok(())
}

/// CRIU and the call to capture, or why no checkpoint can be tried.
fn checkpoint_premise(req: &TargetRequest, rank: usize) -> Result<(checkpoint::Criu, u64), String> {
    let criu = checkpoint::find_criu().map_err(|e| e.to_string())?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("CRIU needs root; run tdg autotune as root".into());
    }
    let Some(call) = middle_call(req.profiled, rank) else {
        return Err("the profile's timeline holds no call of it".into());
    };
    if call < 2 {
        return Err(
            "its first call is the one to capture, which leaves no room to replay the program's work before it".into(),
        );
    }
    Ok((criu, call))
}

/// Call `call` of the program captured through the spec's region shim,
/// its delay grown until restored copies match the program
/// (`--auto-delay --reference app`); the capture's failure as a line.
fn capture_growing_delays(
    req: &TargetRequest,
    t: &ContextTarget,
    call: u64,
    criu: &checkpoint::Criu,
    note: &mut dyn FnMut(&str),
) -> Result<Result<checkpoint::AutoDelayReport, String>, AutotuneError> {
    let scratch = req.work.join(format!("region-shim-{}", t.rank));
    let shim = checkpoint::region_shim(
        req.spec,
        req.spec_path,
        &req.include_dirs,
        &toolchain::CCompiler::find(req.base.cc.as_deref())?,
        &scratch,
        req.base
            .build_cache
            .as_deref()
            .and_then(toolchain::BuildCache::open_or_warn)
            .as_ref(),
    )
    .map_err(|e| AutotuneError::Profile(format!("building the region shim: {e}")))?;
    let image = req.work.join(format!("image-{}", t.rank));
    note(&format!(
        "context {}: capturing call {call} of the program, delays growing until it matches the program",
        t.label
    ));
    let report = checkpoint::auto_delay(
        &checkpoint::AutoDelayRequest {
            capture: checkpoint::CaptureRequest {
                command: req.program.argv.clone(),
                image,
                site: Some(shim.site.clone()),
                call,
                delay: 0,
                timeout: Some(req.program.timeout),
                quiet: true,
                preload: Some(shim.shared_object.clone()),
            },
            samples: 15,
            threshold: 0.05,
            max_delay: 64,
            time: checkpoint::TimeOptions::default(),
            reference: checkpoint::DelayReference::Application(comparison(&req.rules)),
        },
        criu,
    );
    Ok(report.map_err(|e| e.to_string()))
}

/// The restored copies' comparison with the program under the rules the
/// drivers' is judged by (`--fidelity-tolerance`): one bar for every kind
/// of target.
fn comparison(rules: &FidelityRules) -> checkpoint::validate::Comparison {
    checkpoint::validate::Comparison {
        min_rounds: rules.min_rounds,
        max_rounds: rules.max_rounds,
        tolerance: rules.tolerance,
        confidence: rules.confidence,
        ..Default::default()
    }
}

/// `t`'s target: the checkpoint at the delay `report` chose, where it
/// matches the program; else every delay's comparison, as why not.
fn judge_checkpoint(
    t: &mut ContextTarget,
    report: &checkpoint::AutoDelayReport,
    call: u64,
    note: &mut dyn FnMut(&str),
) {
    let chosen = report.rows.iter().find(|r| r.delay == report.chosen);
    let validation = chosen.and_then(|r| r.against_application.as_ref());
    if let Some(v) = validation.filter(|v| v.verdict == Verdict::Matches) {
        t.target = Some(Target::Checkpoint {
            image: report.image.clone(),
            call,
            delay: report.chosen,
        });
        t.fidelity = v.estimate.as_ref().map(|e| Fidelity::of(e, v.rounds));
        note(&format!(
            "context {}: the checkpoint at delay {} matches the program",
            t.label, report.chosen
        ));
        return;
    }
    let rows: Vec<String> = report
        .rows
        .iter()
        .filter_map(|r| {
            r.against_application.as_ref().map(|v| match v.estimate {
                Some(e) => format!("delay {} {:.2}x ({})", r.delay, e.ratio, v.verdict.word()),
                None => format!("delay {} {}", r.delay, v.verdict.word()),
            })
        })
        .collect();
    t.rejected.push(format!(
        "checkpoint: no delay matches the program ({})",
        rows.join(", ")
    ));
    note(&format!(
        "context {}: no checkpoint matches the program ({})",
        t.label,
        rows.join(", ")
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checkpoint is held to the bar the user set for every target, not
    /// to `tdg checkpoint validate`'s default.
    #[test]
    fn restored_copies_are_judged_by_the_fidelity_rules_given() {
        let rules = FidelityRules {
            min_rounds: 7,
            max_rounds: 12,
            tolerance: 0.3,
            confidence: 0.9,
        };
        let c = comparison(&rules);
        assert_eq!(
            (c.min_rounds, c.max_rounds, c.tolerance, c.confidence),
            (7, 12, 0.3, 0.9)
        );
        assert_ne!(
            checkpoint::validate::Comparison::default().tolerance,
            0.3,
            "the default would not show the rules reach the comparison"
        );
    }
}
