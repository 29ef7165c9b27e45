//! The program's time as the objective (`tdg tune --contexts FILE`, and
//! `tdg autotune`): a configuration is timed in each call context of a
//! profile on that context's own target (the spec's driver with the
//! context's `-D` values in its cache state, or restored copies of a
//! checkpoint at one of its calls), and scored by the time the program
//! would spend in the routine over those contexts, the sum of calls x time
//! per call, each time divided by its target's fidelity (the target's time
//! of the original routine over the program's). A configuration that is
//! fast on small sizes and slow on the program's large ones loses here.

use crate::measurement::{Measurement, TimeSplit};
use crate::objectives::{checkpoint_objective, driver_objective, CandidateSettings};
use crate::search::Objective;
use crate::TuneError;
use config::Config;
use driver_gen::RunOptions;
use instrument::contexts::{ContextEntry, ContextsFile};
use spec_lang::CheckedSpec;
use std::path::{Path, PathBuf};

/// The contexts a search is scored over.
#[derive(Debug, Clone, PartialEq)]
pub struct WeightedContexts {
    /// Where they were read from (relative image paths start there).
    pub file: PathBuf,
    pub contexts: Vec<ContextEntry>,
}

impl WeightedContexts {
    /// The contexts of `file` ranked 1 to `top` (by the program's time in
    /// them).
    pub fn top(path: &Path, file: &ContextsFile, top: usize) -> WeightedContexts {
        let mut contexts: Vec<ContextEntry> = file.contexts.clone();
        contexts.sort_by_key(|c| c.rank);
        contexts.truncate(top.max(1));
        WeightedContexts {
            file: path.to_path_buf(),
            contexts,
        }
    }

    /// Whether a context is timed on a checkpoint (which restores only
    /// here, and takes no team size).
    pub fn any_checkpoint(&self) -> bool {
        self.contexts.iter().any(|c| c.image.is_some())
    }

    /// Every context's image, where one is timed on a checkpoint.
    pub fn images(&self) -> Vec<PathBuf> {
        self.contexts.iter().filter_map(|c| self.image(c)).collect()
    }

    /// Where a context's image is: relative to the contexts file.
    fn image(&self, c: &ContextEntry) -> Option<PathBuf> {
        c.image.as_ref().map(|i| {
            if i.is_absolute() {
                i.clone()
            } else {
                spec_lang::spec_dir(&self.file).join(i)
            }
        })
    }
}

/// The driver options that time `ctx` in `cache` (`None`: the spec's
/// own): the one rule, driver-gen's, that `tdg run --contexts` and `tdg
/// validate` use too.
pub use driver_gen::contexts::options_for as driver_options;

/// One context's share of the score.
struct Part<'s> {
    label: String,
    calls: u64,
    fidelity: f64,
    objective: Box<dyn Objective + 's>,
}

/// The program's predicted time in the routine over weighted contexts.
pub struct ContextsObjective<'s> {
    parts: Vec<Part<'s>>,
}

impl<'s> ContextsObjective<'s> {
    pub fn new(
        contexts: &WeightedContexts,
        spec: &'s CheckedSpec,
        implementation: &Path,
        base: &RunOptions,
        candidate: &CandidateSettings,
    ) -> Result<ContextsObjective<'s>, TuneError> {
        let mut parts = Vec::new();
        for c in &contexts.contexts {
            let objective: Box<dyn Objective + 's> = match contexts.image(c) {
                Some(image) => Box::new(checkpoint_objective(
                    &image,
                    implementation,
                    base,
                    candidate,
                )?),
                None => Box::new(driver_objective(
                    spec,
                    implementation,
                    &driver_options(base, c, c.cache),
                )),
            };
            let fidelity = c.fidelity.filter(|f| f.is_finite() && *f > 0.0);
            parts.push(Part {
                label: c.label(),
                calls: c.calls,
                fidelity: fidelity.unwrap_or(1.0),
                objective,
            });
        }
        if parts.is_empty() {
            return Err(TuneError::Objective(
                "the contexts file lists no context to tune on".into(),
            ));
        }
        Ok(ContextsObjective { parts })
    }

    /// The contexts' labels, in the order [`Self::retime_each`] answers.
    pub fn labels(&self) -> Vec<String> {
        self.parts.iter().map(|p| p.label.clone()).collect()
    }

    /// The configurations of `round` timed again side by side in every
    /// context, one run each (the caller repeats the rounds): per
    /// configuration, each context's predicted time per call (its target's
    /// time divided by its fidelity).
    pub fn retime_each(&mut self, round: &[Config]) -> Vec<Vec<Result<f64, TuneError>>> {
        let per_part: Vec<Vec<Result<Measurement, TuneError>>> = self
            .parts
            .iter_mut()
            .map(|p| p.objective.retime_once(round))
            .collect();
        (0..round.len())
            .map(|i| {
                self.parts
                    .iter()
                    .zip(&per_part)
                    .map(|(p, results)| match &results[i] {
                        Ok(m) => Ok(m.time_ns / p.fidelity),
                        Err(e) => Err(in_context(&p.label, e)),
                    })
                    .collect()
            })
            .collect()
    }

    /// Each context's results for `round`, combined per configuration.
    fn combine(
        &mut self,
        round: &[Config],
        each: impl Fn(&mut dyn Objective, &[Config]) -> Vec<Result<Measurement, TuneError>>,
    ) -> Vec<Result<Measurement, TuneError>> {
        let per_part: Vec<Vec<Result<Measurement, TuneError>>> = self
            .parts
            .iter_mut()
            .map(|p| each(p.objective.as_mut(), round))
            .collect();
        (0..round.len())
            .map(|i| {
                let mut total = 0.0;
                let mut spread = 0.0;
                let mut split = TimeSplit::default();
                let mut stopped = Vec::new();
                for (p, results) in self.parts.iter().zip(&per_part) {
                    let m = match &results[i] {
                        Ok(m) => m,
                        Err(e) => return Err(in_context(&p.label, e)),
                    };
                    let per_call = m.time_ns / p.fidelity;
                    total += p.calls as f64 * per_call;
                    spread += p.calls as f64 * per_call * m.uncertainty_pct.unwrap_or(0.0);
                    if let Some(s) = &m.split {
                        split.add(s);
                    }
                    if let Some(s) = &m.stopped {
                        stopped.push(format!("{}: {s}", p.label));
                    }
                }
                Ok(Measurement {
                    time_ns: total,
                    mflops: None,
                    samples_ns: Vec::new(),
                    uncertainty_pct: (total > 0.0).then(|| spread / total),
                    split: Some(split),
                    stopped: (!stopped.is_empty()).then(|| stopped.join("; ")),
                })
            })
            .collect()
    }
}

/// `e` with the context it happened in.
fn in_context(label: &str, e: &TuneError) -> TuneError {
    match e {
        TuneError::Failed { failure, message } => TuneError::Failed {
            failure: *failure,
            message: format!("context {label}: {message}"),
        },
        other => TuneError::Objective(format!("context {label}: {other}")),
    }
}

impl Objective for ContextsObjective<'_> {
    fn evaluate(&mut self, config: &Config) -> Result<Measurement, TuneError> {
        crate::search::evaluate_as_round(self, config)
    }

    fn evaluate_round(&mut self, round: &[Config]) -> Vec<Result<Measurement, TuneError>> {
        self.combine(round, |o, r| o.evaluate_round(r))
    }

    fn retime(&mut self, round: &[Config]) -> Vec<Result<Measurement, TuneError>> {
        self.combine(round, |o, r| o.retime(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use instrument::contexts::CacheState;
    use spec_lang::ast::FlushMethod;
    use std::collections::BTreeMap;

    fn entry(defines: &[(&str, &str)]) -> ContextEntry {
        ContextEntry {
            rank: 1,
            values: BTreeMap::new(),
            defines: defines
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            threads: Some(2),
            calls: 1,
            share: 1.0,
            in_app_total_ns: 1.0,
            in_app_uninterrupted_total_ns: 1.0,
            interrupted_calls: 0,
            in_app_min_ns: 1.0,
            in_app_median_ns: 1.0,
            in_app_mean_ns: 1.0,
            cache: None,
            image: None,
            fidelity: None,
        }
    }

    #[test]
    fn a_contexts_values_win_and_its_cache_state_sets_the_flush() {
        let base = RunOptions {
            defines: vec![("N".into(), "5".into()), ("K".into(), "1".into())],
            ..Default::default()
        };
        let c = entry(&[("N", "64")]);
        let o = driver_options(&base, &c, Some(CacheState::Warm));
        assert_eq!(
            o.defines,
            vec![
                ("K".to_string(), "1".to_string()),
                ("N".into(), "64".into())
            ]
        );
        assert_eq!(o.timing.threads, Some(2));
        assert_eq!(o.timing.flush, Some(FlushMethod::None));
        let o = driver_options(&base, &c, Some(CacheState::Flushed));
        assert_eq!(o.timing.flush, Some(FlushMethod::Read));
        let mut clflush = base.clone();
        clflush.timing.flush = Some(FlushMethod::Clflush);
        let o = driver_options(&clflush, &c, Some(CacheState::Flushed));
        assert_eq!(
            o.timing.flush,
            Some(FlushMethod::Clflush),
            "the user's flush kept"
        );
        assert_eq!(driver_options(&base, &c, None).timing.flush, None);
    }
}
