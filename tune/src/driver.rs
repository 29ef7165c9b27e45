//! The generated timing driver as the search objective.

use crate::campaign::Prebuild;
use crate::measurement::{Measurement, TimeSplit};
use crate::race::{race, Pass, RacePlan, PASSES};
use crate::search::{Objective, Placement};
use crate::TuneError;
use config::Config;
use driver_gen::{BuiltDriver, RunOptions};
use spec_lang::CheckedSpec;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

/// Builds the spec's driver against the kernel compiled with each
/// configuration's macros, runs it, and scores the reported time per call.
/// Every run verifies the kernel against the spec's reference body when the
/// spec has one, so a configuration that computes wrong results fails.
#[derive(Clone)]
pub struct DriverObjective<'s> {
    pub spec: &'s CheckedSpec,
    pub impl_c: PathBuf,
    /// Everything but the tuned macros (flush, samples, fixed -D sizes).
    pub base: RunOptions,
    /// Run the drivers [`Prebuild::prebuild`] kept under this directory
    /// (a campaign's `builds/`) instead of building them here.
    pub kept: Option<PathBuf>,
    /// The last round's drivers, run again when the next round asks for
    /// the same configurations (a re-timing's rounds): built once, they
    /// are not rendered, looked up in the build cache and linked again.
    last_round: RoundDrivers,
}

/// Drivers built for one round, each with the options it was built for.
#[derive(Default)]
struct RoundDrivers(Mutex<Vec<(RunOptions, BuiltDriver)>>);

impl Clone for RoundDrivers {
    /// A copy builds its own: a driver's directory is its builder's.
    fn clone(&self) -> Self {
        RoundDrivers::default()
    }
}

impl<'s> DriverObjective<'s> {
    /// The driver of `spec` timing `impl_c` with the options `base`, built
    /// here.
    pub fn new(spec: &'s CheckedSpec, impl_c: PathBuf, base: RunOptions) -> Self {
        DriverObjective {
            spec,
            impl_c,
            base,
            kept: None,
            last_round: RoundDrivers::default(),
        }
    }

    /// Runs the drivers kept under `kept` instead of building them.
    pub fn with_kept(mut self, kept: Option<PathBuf>) -> Self {
        self.kept = kept;
        self
    }
}

impl DriverObjective<'_> {
    /// The options of one configuration: the base with the configuration
    /// applied (its macros as `-D`, its team size as `--threads`, its
    /// code offset as `--code-offset`).
    fn options(&self, config: &Config) -> RunOptions {
        let mut opts = self.base.clone();
        config.apply(&mut opts.defines, &mut opts.timing.threads);
        if let Some(offset) = config.code_offset() {
            opts.timing.code_offset = spec_lang::ast::CodeOffset::new(i64::from(offset));
        }
        opts
    }
}

/// A configuration that failed, as the search and T4 file record it.
fn failed(config: &Config, e: &driver_gen::RunError) -> TuneError {
    let message = format!("{}: {e}", config);
    match e.failure() {
        Some(failure) => TuneError::Failed { failure, message },
        None => TuneError::Objective(message),
    }
}

impl DriverObjective<'_> {
    /// Builds every configuration of `round` (the build cache compiles only
    /// what changed), then times them in passes as `plan` says: each pass
    /// runs every driver still in the race with its share of the sampling
    /// budget, the first with verification. A configuration that does not
    /// build fails alone.
    fn time_round(&self, round: &[Config], plan: RacePlan) -> Vec<Result<Measurement, TuneError>> {
        let mut last = std::mem::take(&mut *self.last_round.0.lock().expect("not poisoned"));
        let built: Vec<Result<(BuiltDriver, RunOptions, bool), TuneError>> = round
            .iter()
            .map(|config| {
                let opts = self.options(config);
                if let Some(i) = last.iter().position(|(o, _)| *o == opts) {
                    let (_, driver) = last.swap_remove(i);
                    return Ok((driver, opts, true));
                }
                driver_gen::build_driver(self.spec, &self.impl_c, &opts)
                    .map(|driver| (driver, opts, false))
                    .map_err(|e| failed(config, &e))
            })
            .collect();
        let ready: Vec<usize> = (0..round.len()).filter(|&i| built[i].is_ok()).collect();
        let mut raced = race(ready.len(), plan, |j, k| {
            let i = ready[j];
            let (driver, opts, reused) = built[i].as_ref().expect("built");
            let began = Instant::now();
            let report = driver
                .run(&pass_options(opts, &driver.model, k, plan))
                .map_err(|e| failed(&round[i], &e))?;
            let build_s = if k == 0 && !reused {
                driver.build.seconds
            } else {
                0.0
            };
            Ok(Pass {
                reported_ns: report.reported_ns,
                uncertainty_pct: report.uncertainty_pct,
                mflops: report.mflops_best,
                split: TimeSplit {
                    build_s,
                    sampling_s: report.sampling.elapsed_ms / 1e3,
                    flush_s: report.flush_ns_per_sample.unwrap_or(0.0)
                        * report.samples_ns.len() as f64
                        / 1e9,
                    total_s: build_s + began.elapsed().as_secs_f64(),
                },
                samples_ns: report.samples_ns,
            })
        })
        .into_iter();
        let mut kept = Vec::new();
        let results = built
            .into_iter()
            .map(|b| match b {
                Ok((driver, opts, _)) => {
                    kept.push((opts, driver));
                    raced.next().expect("one result per built driver")
                }
                Err(e) => Err(e),
            })
            .collect();
        *self.last_round.0.lock().expect("not poisoned") = kept;
        results
    }
}

impl DriverObjective<'_> {
    /// Passes per round: [`PASSES`], or fewer when a fixed sample count
    /// has fewer samples to share out.
    fn passes(&self) -> usize {
        match self.base.timing.samples {
            Some(n) => PASSES.min(n.max(1) as usize),
            None => PASSES,
        }
    }

    /// A round timed side by side in passes, `racing` or not; a single
    /// configuration, or a campaign's kept drivers, one by one (as a
    /// campaign's tasks are).
    fn side_by_side(
        &mut self,
        round: &[Config],
        racing: bool,
    ) -> Vec<Result<Measurement, TuneError>> {
        let plan = RacePlan {
            passes: self.passes(),
            racing,
        };
        self.in_passes(round, plan)
    }

    /// A round timed as `plan` says; a single configuration, or a
    /// campaign's kept drivers, one by one with the whole budget.
    fn in_passes(
        &mut self,
        round: &[Config],
        plan: RacePlan,
    ) -> Vec<Result<Measurement, TuneError>> {
        match (&self.kept, round) {
            (Some(_), _) | (None, [_]) => {
                round.iter().map(|config| self.evaluate(config)).collect()
            }
            (None, _) => self.time_round(round, plan),
        }
    }
}

/// One pass's options: its share of the sampling budget (or of a fixed
/// sample count), verification in the first pass only.
///
/// A raced round ranks configurations; it does not need each loser's figure
/// to the driver's stability target. So a raced pass samples for its share
/// of the minimum time and stops there, where the driver would go on
/// towards its maximum until the halves of its samples agree: the race
/// bounds each figure by its passes' spread instead, and the finalists are
/// timed again with the whole adaptive budget (a round that is not raced)
/// before one is named the best.
fn pass_options(
    opts: &RunOptions,
    model: &driver_gen::DriverModel,
    pass: usize,
    plan: RacePlan,
) -> RunOptions {
    let mut o = opts.clone();
    let passes = plan.passes;
    if passes > 1 {
        let share = |ms: u64| (ms / passes as u64).max(1);
        let sampling = &model.timing.sampling;
        let min_time = share(sampling.min_time_ms.value);
        o.timing.min_time_ms = Some(min_time);
        o.timing.max_time_ms = Some(if plan.racing {
            min_time
        } else {
            share(sampling.max_time_ms.value)
        });
        if let Some(n) = o.timing.samples {
            // A fixed count is shared out exactly: the run takes the
            // samples it was asked for (fewer when racing stops it).
            let (p, k) = (passes as u32, pass as u32);
            o.timing.samples = Some(n / p + u32::from(k < n % p));
        }
    }
    o.verify = o.verify && pass == 0;
    o
}

impl Objective for DriverObjective<'_> {
    fn evaluate(&mut self, config: &Config) -> Result<Measurement, TuneError> {
        let opts = self.options(config);
        let report = match &self.kept {
            None => {
                return evaluate_alone(self, config);
            }
            Some(root) => {
                let dir = root.join(config.file_stem());
                match BuiltDriver::open_kept(self.spec, &opts, &dir) {
                    Ok(Some(driver)) => driver.run(&opts),
                    Ok(None) => {
                        return Err(TuneError::Objective(format!(
                            "{}: no driver was kept in {} (the campaign builds each configuration once before submitting it); resume the campaign from the machine that started it",
                            config,
                            dir.display()
                        )))
                    }
                    Err(e) => Err(e),
                }
            }
        }
        .map_err(|e| failed(config, &e))?;
        Ok(Measurement {
            time_ns: report.reported_ns,
            mflops: report.mflops_best,
            samples_ns: report.samples_ns,
            uncertainty_pct: report.uncertainty_pct,
            split: None,
            stopped: None,
        })
    }

    /// The round's configurations timed side by side in passes, and raced
    /// (a campaign's kept drivers are timed one by one, as its tasks are).
    fn evaluate_round(&mut self, round: &[Config]) -> Vec<Result<Measurement, TuneError>> {
        self.side_by_side(round, true)
    }

    /// The finalists side by side, every pass, no racing.
    fn retime(&mut self, round: &[Config]) -> Vec<Result<Measurement, TuneError>> {
        self.side_by_side(round, false)
    }

    /// The round side by side in one pass: each driver runs once, with the
    /// whole sampling budget.
    fn retime_once(&mut self, round: &[Config]) -> Vec<Result<Measurement, TuneError>> {
        self.in_passes(
            round,
            RacePlan {
                passes: 1,
                racing: false,
            },
        )
    }

    fn placement(&self, _config: &Config) -> Option<Placement> {
        Some(crate::campaign::this_host())
    }
}

impl Prebuild for DriverObjective<'_> {
    fn prebuild(&self, config: &Config, dir: &Path) -> Result<(), TuneError> {
        let opts = self.options(config);
        driver_gen::build_driver(self.spec, &self.impl_c, &opts)
            .and_then(|driver| driver.keep(dir))
            .map_err(|e| failed(config, &e))
    }
}

/// One configuration with the whole sampling budget in one run.
fn evaluate_alone(
    objective: &DriverObjective<'_>,
    config: &Config,
) -> Result<Measurement, TuneError> {
    let mut one = objective.time_round(
        std::slice::from_ref(config),
        RacePlan {
            passes: 1,
            racing: false,
        },
    );
    let mut m = one.pop().expect("one result")?;
    m.stopped = Some("timed alone, in one run with its whole sampling budget".into());
    Ok(m)
}
