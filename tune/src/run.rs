//! One tuning run from a request to its outcome: the objective (the
//! generated driver or the spec's checkpoint), the evaluation log, the
//! campaign and executor, the starting points and the search. The `tdg`
//! binary parses arguments into a [`TuneRequest`], calls [`run`] and prints
//! the [`TuneOutcome`].

use crate::campaign::{Campaign, CampaignObjective, Executor, LocalTasks, Manifest, Prebuild};
use crate::contexts::{ContextsObjective, WeightedContexts};
use crate::measurement::Measurement;
use crate::model::{MachineModel, Start};
use crate::objectives::{checkpoint_objective, driver_objective};
pub use crate::objectives::{CandidateSettings, CHECKPOINT_SAMPLES};
use crate::roles::Roles;
use crate::search::{Evaluation, Objective, Outcome, Placement, Progress, Tuner};
use crate::slurm::SlurmExecutor;
use crate::space::{ConstraintOrigin, Space, SpaceConstraint};
use crate::{CheckpointObjective, DriverObjective, TuneError};
use config::{Config, Kind};
use driver_gen::RunOptions;
use serde::Serialize;
use spec_lang::ast::Spec;
use spec_lang::CheckedSpec;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What a configuration is timed with.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// The spec's generated driver, on the data its `init` describes.
    Driver,
    /// A candidate shared object in restored copies of this CRIU image,
    /// on the application's own data.
    Checkpoint { image: PathBuf },
    /// The program's call contexts, each on its own target, scored by the
    /// program's predicted time in the routine ([`crate::contexts`]).
    Contexts(WeightedContexts),
}

impl Target {
    /// Every checkpoint image the target times on.
    pub fn images(&self) -> Vec<PathBuf> {
        match self {
            Target::Driver => Vec::new(),
            Target::Checkpoint { image } => vec![image.clone()],
            Target::Contexts(c) => c.images(),
        }
    }

    /// Whether a spec is timed on its checkpoint: it has a `checkpoint`
    /// clause and `--default-driver` was not given. The one place `tdg run`
    /// and `tdg tune` make that choice.
    pub fn uses_checkpoint(spec: &Spec, default_driver: bool) -> bool {
        spec.checkpoint.is_some() && !default_driver
    }

    /// The target for `spec` (read from `spec_path`, whose directory a
    /// relative image path starts from); the image is checked against the
    /// clause (its delay) here.
    pub fn of(spec: &Spec, spec_path: &Path, default_driver: bool) -> Result<Target, TuneError> {
        match &spec.checkpoint {
            Some(clause) if Target::uses_checkpoint(spec, default_driver) => {
                let image = checkpoint::clause_image(clause, spec_lang::spec_dir(spec_path))
                    .map_err(TuneError::Checkpoint)?;
                Ok(Target::Checkpoint { image })
            }
            _ => Ok(Target::Driver),
        }
    }
}

/// The driver or the checkpoint: one objective for either target.
// One value per run, so the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum TargetObjective<'s> {
    Driver(DriverObjective<'s>),
    Checkpoint(CheckpointObjective),
    Contexts(ContextsObjective<'s>),
}

impl<'s> TargetObjective<'s> {
    /// The objective timing `implementation` on `target`, with the driver
    /// options `base` (the checkpoint uses its compiler, flags, `-D`
    /// values, sample count and timeout).
    pub fn new(
        target: &Target,
        spec: &'s CheckedSpec,
        implementation: &Path,
        base: &RunOptions,
        candidate: &CandidateSettings,
    ) -> Result<TargetObjective<'s>, TuneError> {
        match target {
            Target::Driver => Ok(TargetObjective::Driver(driver_objective(
                spec,
                implementation,
                base,
            ))),
            Target::Checkpoint { image } => Ok(TargetObjective::Checkpoint(checkpoint_objective(
                image,
                implementation,
                base,
                candidate,
            )?)),
            Target::Contexts(contexts) => Ok(TargetObjective::Contexts(ContextsObjective::new(
                contexts,
                spec,
                implementation,
                base,
                candidate,
            )?)),
        }
    }

    fn inner(&mut self) -> &mut dyn Objective {
        match self {
            TargetObjective::Driver(d) => d,
            TargetObjective::Checkpoint(c) => c,
            TargetObjective::Contexts(c) => c,
        }
    }
}

impl Objective for TargetObjective<'_> {
    fn evaluate(&mut self, config: &Config) -> Result<Measurement, TuneError> {
        self.inner().evaluate(config)
    }

    fn evaluate_round(&mut self, round: &[Config]) -> Vec<Result<Measurement, TuneError>> {
        self.inner().evaluate_round(round)
    }

    fn retime(&mut self, round: &[Config]) -> Vec<Result<Measurement, TuneError>> {
        self.inner().retime(round)
    }

    fn retime_once(&mut self, round: &[Config]) -> Vec<Result<Measurement, TuneError>> {
        self.inner().retime_once(round)
    }

    fn placement(&self, config: &Config) -> Option<Placement> {
        match self {
            TargetObjective::Driver(d) => d.placement(config),
            TargetObjective::Checkpoint(c) => c.placement(config),
            TargetObjective::Contexts(c) => c.placement(config),
        }
    }
}

/// Where the evaluations run.
pub enum Runner {
    /// Here, one configuration after another.
    Local,
    /// Each round of the search one Slurm job array (a campaign is required).
    Slurm(Box<SlurmExecutor>),
}

/// The campaign directory results are kept in, if any.
pub enum CampaignChoice {
    /// No campaign (local runs only): results live in the log.
    None,
    /// A new campaign in this directory, recording how it was started.
    New { dir: PathBuf, manifest: Manifest },
    /// Continue a campaign: its stored results are read, not run again.
    Resume(Campaign),
}

/// Where the search starts.
#[derive(Debug, Clone)]
pub enum StartFrom {
    /// The machine model's predictions (one per cache level).
    Model(Box<MachineModel>),
    /// The middle of every parameter's range (no probe needed).
    MidRange,
}

/// How the space is searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Yotov et al.'s local search from the model's starts: the cache tile
    /// within +-lcm(rows, cols), then hill-climbing of the register tile
    /// and the other parameters.
    Yotov,
    /// Model starts, then a hill-climb over every parameter with growing
    /// strides.
    Hill,
    /// ATLAS's orthogonal line search from the model's choice.
    Line,
    /// The model's own choice alone, one evaluation.
    Model,
    /// Every configuration, in order (the reference for judging a search).
    Exhaustive,
    /// Configurations in a seeded random order (the baseline a strategy
    /// is judged against).
    Random,
    /// Simulated annealing over one- and two-value moves, seeded.
    Anneal,
    /// Hill-climbs from the start, then from seeded random configurations.
    Multistart,
    /// Bayesian optimisation: a Gaussian-process surrogate and expected
    /// improvement, seeded.
    Bayes,
}

impl Strategy {
    pub const ALL: [Strategy; 9] = [
        Strategy::Yotov,
        Strategy::Hill,
        Strategy::Line,
        Strategy::Model,
        Strategy::Exhaustive,
        Strategy::Random,
        Strategy::Anneal,
        Strategy::Multistart,
        Strategy::Bayes,
    ];

    /// The model-free strategy the default takes for a space none of whose
    /// parameters has a role (chosen by the strategy curves on recorded
    /// spaces, docs/benchmarks.md).
    pub const MODEL_FREE: Strategy = Strategy::Bayes;

    /// What `tdg tune` does without `--strategy`: the model's start and
    /// Yotov's search where a parameter has a role the model knows and a
    /// machine model gives the start, else the model-free default (Yotov's
    /// local search from the middle of the ranges stops short: 0 of 20
    /// seeds reach blocked_gemm's top 1 % in 50 replayed evaluations).
    pub fn default_for(roles: &Roles, model: bool) -> Strategy {
        if roles.assigned.is_empty() || !model {
            Strategy::MODEL_FREE
        } else {
            Strategy::Yotov
        }
    }

    pub fn spelling(self) -> &'static str {
        match self {
            Strategy::Yotov => "yotov",
            Strategy::Hill => "hill",
            Strategy::Line => "line",
            Strategy::Model => "model",
            Strategy::Exhaustive => "exhaustive",
            Strategy::Random => "random",
            Strategy::Anneal => "anneal",
            Strategy::Multistart => "multistart",
            Strategy::Bayes => "bayes",
        }
    }
}

/// Everything one tuning run needs; the binary builds it from the command
/// line (or from a campaign's stored command line).
pub struct TuneRequest<'s> {
    pub spec: &'s CheckedSpec,
    /// The spec's file name without extension: the default log and
    /// campaign names.
    pub name: String,
    pub implementation: PathBuf,
    pub target: Target,
    /// Driver options every configuration shares (compiler, flags, timing,
    /// fixed `-D` values, timeout).
    pub base: RunOptions,
    pub candidate: CandidateSettings,
    pub space: Space,
    /// `--role NAME=ROLE`, over the spec's `tune` clause and ATLAS's names.
    pub roles: Vec<(String, crate::roles::Role)>,
    /// `--layout`, over the spec's.
    pub layout: Option<spec_lang::ast::TuneLayout>,
    /// `--constraint`s, beside the spec's.
    pub constraints: Vec<crate::space::SpaceConstraint>,
    /// Start values given for some parameters (`--start NAME=V`).
    pub fixed: Config,
    pub start: StartFrom,
    /// `None`: by what the space offers ([`Strategy::default_for`]).
    pub strategy: Option<Strategy>,
    /// Seeds the model-free strategies' random choices.
    pub seed: u64,
    /// Most configurations to build and time (default: all of a space of at
    /// most [`DEFAULT_BUDGET`], else that many).
    pub budget: Option<u64>,
    pub runner: Runner,
    pub campaign: CampaignChoice,
    /// Build each configuration's driver once here; the tasks only run it.
    pub build_once: bool,
    /// Accept evaluations timed on different CPU models in one campaign.
    pub allow_mixed_cpus: bool,
    /// The evaluation log (default: the campaign's `tune.jsonl`, else
    /// `<name>.tune.jsonl`).
    pub log: Option<PathBuf>,
    /// End with the finalists listed, not re-timed side by side (the
    /// caller re-times them against a reference of its own).
    pub leave_finalists: bool,
}

/// The budget of a search when none is given and the space is larger.
pub const DEFAULT_BUDGET: usize = 60;

/// What a run produced.
#[derive(Debug, Clone, Serialize)]
pub struct TuneOutcome {
    #[serde(flatten)]
    pub search: Outcome,
    pub log: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub campaign: Option<PathBuf>,
    pub strategy: Strategy,
    /// The parameters' roles and where each came from.
    pub roles: Roles,
    /// The constraints every configuration met.
    pub constraints: Vec<SpaceConstraint>,
    /// The configurations before the constraints ruled some out.
    pub unconstrained_size: u128,
    /// The model the starts came from (absent with --no-model).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineModel>,
    /// With `--contexts`: how many contexts the time is the program's over
    /// (it is then the program's time in the routine, not a time per call).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contexts: Option<usize>,
    /// When the search began (the log's `elapsed_s` count from it).
    #[serde(skip)]
    pub started: std::time::SystemTime,
}

/// What the search will do, decided from the request before anything is
/// built or measured: the constrained space, the parameters' roles, the
/// strategy, the budget and where the search starts.
struct SearchPlan {
    space: Space,
    /// The configurations before the constraints ruled some out.
    unconstrained_size: u128,
    /// The configurations the constraints allow (where known).
    size: u128,
    roles: Roles,
    strategy: Strategy,
    budget: usize,
    /// The model the starts came from (absent with --no-model).
    machine: Option<MachineModel>,
    starts: Vec<Start>,
}

impl SearchPlan {
    /// The plan for `request`: the spec's constraints and the command
    /// line's over its space, the roles, the strategy (by what the space
    /// offers when none is given), the budget and the starts.
    fn of(request: &TuneRequest) -> Result<SearchPlan, TuneError> {
        let unconstrained_size = request.space.size();
        let space = request.space.clone().constrained(
            request
                .spec
                .tune
                .iter()
                .flat_map(|t| &t.constraints)
                .map(|c| SpaceConstraint {
                    text: c.text.clone(),
                    origin: ConstraintOrigin::Spec,
                    constraint: c.clone(),
                })
                .chain(request.constraints.iter().cloned())
                .collect(),
            fixed_macros(request.spec, &request.base),
        )?;
        let roles = Roles::resolve(
            &space,
            &request.roles,
            request.layout,
            request.spec.tune.as_ref(),
        )?;
        let strategy = request.strategy.unwrap_or_else(|| {
            Strategy::default_for(&roles, matches!(request.start, StartFrom::Model(_)))
        });
        let size = space.allowed_size().unwrap_or(unconstrained_size);
        let budget = match request.budget {
            Some(b) => usize::try_from(b).unwrap_or(usize::MAX),
            None if strategy == Strategy::Exhaustive || size <= DEFAULT_BUDGET as u128 => {
                usize::try_from(size).unwrap_or(usize::MAX)
            }
            None => DEFAULT_BUDGET,
        };
        let machine = match &request.start {
            StartFrom::Model(m) => Some(m.as_ref().clone()),
            StartFrom::MidRange => None,
        };
        let starts = match &machine {
            Some(m) => crate::model::starts(&space, &roles, m, &request.fixed),
            None => vec![mid_range(&space, &request.fixed)],
        };
        if starts.is_empty() {
            return Err(TuneError::BadConstraint {
                text: space
                    .constraints
                    .iter()
                    .map(|c| c.text.as_str())
                    .collect::<Vec<_>>()
                    .join("; "),
                why: "no configuration near the model's choice meets them; widen a --param range"
                    .into(),
            });
        }
        Ok(SearchPlan {
            space,
            unconstrained_size,
            size,
            roles,
            strategy,
            budget,
            machine,
            starts,
        })
    }

    /// What the run decided before it began, as one-line notes: the space
    /// and its constraints, the roles, the starts and the target.
    fn announce(&self, target: &Target, progress: &mut dyn Progress) {
        let constrained = if self.space.constraints.is_empty() {
            String::new()
        } else {
            format!(
                " ({} before the constraints {})",
                self.unconstrained_size,
                self.space
                    .constraints
                    .iter()
                    .map(|c| format!("`{}`", c.text))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        progress.note(&format!(
            "{}: {} configurations{constrained}, budget {}, strategy {}",
            self.space,
            self.size,
            self.budget,
            self.strategy.spelling()
        ));
        if !self.roles.assigned.is_empty() {
            progress.note(&format!("roles {}", self.roles.describe()));
        }
        if self.strategy != Strategy::Exhaustive {
            for s in &self.starts {
                progress.note(&format!("start {}", s.reason));
            }
        }
        if let Target::Checkpoint { image } = target {
            progress.note(&format!(
                "every configuration runs in restored copies of {} (--default-driver for random data instead)",
                image.display()
            ));
        }
        if let Target::Contexts(c) = target {
            progress.note(&format!(
                "every configuration is timed in {} context(s) and scored by the program's time in the routine, calls x time per call",
                c.contexts.len()
            ));
        }
    }

    /// The run's outcome: the search's, with what the plan decided.
    fn outcome(
        self,
        search: Outcome,
        log: PathBuf,
        campaign: Option<Campaign>,
        target: &Target,
        started: std::time::SystemTime,
    ) -> TuneOutcome {
        TuneOutcome {
            search,
            log,
            campaign: campaign.map(|c| c.dir),
            strategy: self.strategy,
            roles: self.roles,
            constraints: self.space.constraints,
            unconstrained_size: self.unconstrained_size,
            machine: self.machine,
            contexts: match target {
                Target::Contexts(c) => Some(c.contexts.len()),
                _ => None,
            },
            started,
        }
    }
}

/// Refuses a target the runner or the run's options cannot serve: a
/// checkpoint on Slurm or with a threads parameter, `--build-once` but on
/// a generated driver.
fn refuse_unserved(
    target: &Target,
    runner: &Runner,
    space: &Space,
    build_once: bool,
) -> Result<(), TuneError> {
    let on_checkpoint = match target {
        Target::Driver => false,
        Target::Checkpoint { .. } => true,
        Target::Contexts(c) => c.any_checkpoint(),
    };
    if let (true, Runner::Slurm(_)) = (on_checkpoint, runner) {
        return Err(TuneError::Objective(
            "a checkpoint image restores only on the machine that captured it, so checkpoint tuning runs with --executor local; add --default-driver to tune on a Slurm cluster with generated drivers".into(),
        ));
    }
    if on_checkpoint && space.params.iter().any(|p| p.kind == Kind::Threads) {
        return Err(TuneError::Objective(
            "--param threads sets a generated driver's team size; a checkpoint's threads are the application's. Add --default-driver to search it".into(),
        ));
    }
    if build_once && *target != Target::Driver {
        return Err(TuneError::Objective(
            "--build-once builds one generated driver per configuration; a checkpoint's candidates are built where they are restored, and --contexts builds one per context".into(),
        ));
    }
    Ok(())
}

/// The campaign the results are kept in: the resumed one, a new one made
/// now, or none (refused for Slurm, whose nodes share the directory).
fn open_campaign(choice: CampaignChoice, runner: &Runner) -> Result<Option<Campaign>, TuneError> {
    match choice {
        CampaignChoice::Resume(c) => Ok(Some(c)),
        CampaignChoice::New { dir, manifest } => Ok(Some(Campaign::create(&dir, &manifest)?)),
        CampaignChoice::None if matches!(runner, Runner::Slurm(_)) => Err(TuneError::Objective(
            "a Slurm run keeps its results in a campaign directory the nodes share; give one with --campaign DIR".into(),
        )),
        CampaignChoice::None => Ok(None),
    }
}

/// The evaluation log, created: `--log`, else the campaign's `tune.jsonl`,
/// else `<name>.tune.jsonl`.
fn open_log(
    log: Option<PathBuf>,
    campaign: Option<&Campaign>,
    name: &str,
) -> Result<(PathBuf, Box<dyn Write>), TuneError> {
    let path = log.unwrap_or_else(|| match campaign {
        Some(c) => c.dir.join("tune.jsonl"),
        None => PathBuf::from(format!("{name}.tune.jsonl")),
    });
    // A link planted at the log's name is refused, not followed.
    let file = fsguard::create_file(&path).map_err(|e| {
        TuneError::Objective(if fsguard::is_refusal(&e) {
            format!("{e} (--log)")
        } else {
            format!("{e}; pass --log FILE in a writable directory")
        })
    })?;
    Ok((path, Box::new(std::io::BufWriter::new(file))))
}

/// Readies a Slurm executor for `campaign`: where each node keeps its
/// probe, and no task of an earlier run still writing into it.
fn ready_slurm(
    slurm: &mut SlurmExecutor,
    campaign: &Campaign,
    progress: &mut dyn Progress,
) -> Result<(), TuneError> {
    // A cache directory the user chose is theirs (and exported to the
    // tasks); otherwise each node's probe is kept with the campaign.
    if std::env::var_os("TDG_CACHE_DIR").is_none() {
        slurm.probe_dir = Some(campaign.dir.join("probe"));
    }
    progress.note(&format!(
        "each round one Slurm job array; campaign {}",
        campaign.dir.display()
    ));
    slurm.wait_for_leftovers(campaign)?;
    Ok(())
}

/// Runs the search `request` describes; `progress` hears of every
/// evaluation and of what the run decided before it began (the starts,
/// the campaign), as one-line notes.
pub fn run(request: TuneRequest, progress: &mut dyn Progress) -> Result<TuneOutcome, TuneError> {
    let plan = SearchPlan::of(&request)?;
    let TuneRequest {
        spec,
        name,
        implementation,
        target,
        base,
        candidate,
        seed,
        mut runner,
        campaign,
        build_once,
        allow_mixed_cpus,
        log,
        leave_finalists,
        ..
    } = request;
    refuse_unserved(&target, &runner, &plan.space, build_once)?;
    let campaign = open_campaign(campaign, &runner)?;
    let (log_path, log_writer) = open_log(log, campaign.as_ref(), &name)?;
    plan.announce(&target, progress);
    let mut target_objective =
        TargetObjective::new(&target, spec, &implementation, &base, &candidate)?;
    let prebuilder: Option<DriverObjective> = match (&target_objective, build_once) {
        (TargetObjective::Driver(d), true) => Some(d.clone()),
        _ => None,
    };
    let mut local;
    let mut in_campaign;
    let objective: &mut dyn Objective = match &campaign {
        None => &mut target_objective,
        Some(campaign) => {
            let executor: &mut dyn Executor = match &mut runner {
                Runner::Local => {
                    local = LocalTasks {
                        objective: &mut target_objective,
                    };
                    &mut local
                }
                Runner::Slurm(slurm) => {
                    ready_slurm(slurm, campaign, progress)?;
                    slurm.as_mut()
                }
            };
            in_campaign = CampaignObjective::new(campaign, executor, allow_mixed_cpus);
            in_campaign.prebuild = prebuilder.as_ref().map(|p| p as &dyn Prebuild);
            &mut in_campaign
        }
    };
    let started = std::time::SystemTime::now();
    let tuner = Tuner::new(
        &plan.space,
        objective,
        progress,
        Some(log_writer),
        plan.budget,
    )
    .with_model_choice(
        plan.machine
            .as_ref()
            .and_then(|_| plan.starts.first().cloned()),
    )
    .with_seed(seed)
    .leaving_finalists(leave_finalists);
    let search = search_with(
        tuner,
        plan.strategy,
        &plan.starts,
        &plan.roles,
        plan.machine.as_ref(),
    )?;
    Ok(plan.outcome(search, log_path, campaign, &target, started))
}

/// Runs `strategy` from `starts` (the first is where a single-start
/// strategy begins); `machine` bounds the line search's register tiles.
pub fn search_with(
    tuner: Tuner,
    strategy: Strategy,
    starts: &[Start],
    roles: &Roles,
    machine: Option<&MachineModel>,
) -> Result<Outcome, TuneError> {
    match strategy {
        Strategy::Exhaustive => tuner.exhaustive(),
        Strategy::Hill => tuner.search(starts),
        Strategy::Yotov => tuner.yotov(starts, roles),
        Strategy::Model => tuner.model_only(starts),
        Strategy::Random => tuner.random(),
        Strategy::Anneal => tuner.anneal(&starts[0]),
        Strategy::Multistart => tuner.multistart(&starts[0]),
        Strategy::Bayes => tuner.bayes(&starts[0]),
        Strategy::Line => {
            let bound = machine.cloned();
            let layout = roles.layout.unwrap_or(spec_lang::ast::TuneLayout::ColMajor);
            tuner.line(&starts[0], roles, &move |rows, cols| {
                bound
                    .as_ref()
                    .is_none_or(|m| crate::model::fits_registers(m, layout, rows, cols))
            })
        }
    }
}

/// What a constraint may read beside the tuned parameters: the spec's
/// macros with their values for this run (the checked spec resolved `-D`
/// over their defaults) and every other `-D` whose value is an integer.
fn fixed_macros(spec: &CheckedSpec, base: &RunOptions) -> BTreeMap<String, i64> {
    let mut env: BTreeMap<String, i64> = spec
        .macros
        .iter()
        .filter_map(|m| Some((m.name.clone(), m.value?.as_i64()?)))
        .collect();
    for (name, text) in &base.defines {
        if spec.macros.iter().any(|m| m.name == *name) {
            continue;
        }
        if let Some(v) = spec_lang::eval::define_value(text)
            .ok()
            .filter(|v| v.fract() == 0.0 && v.abs() < 9.0e15)
        {
            env.entry(name.clone()).or_insert(v as i64);
        }
    }
    env
}

/// The middle of every range, with the given start values.
fn mid_range(space: &Space, fixed: &Config) -> Start {
    let wanted: Vec<config::Value> = space
        .params
        .iter()
        .map(|p| {
            fixed
                .value(&p.name)
                .unwrap_or(&p.values[p.values.len() / 2])
                .clone()
        })
        .collect();
    let point = space.nearest(&wanted);
    Start {
        reason: format!("{} (mid-range, --no-model)", space.describe(&point)),
        point,
    }
}

/// Every evaluation of a log, in order.
pub fn read_log(path: &Path) -> Result<Vec<Evaluation>, TuneError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        TuneError::Objective(format!(
            "cannot read the evaluation log {}: {e}",
            path.display()
        ))
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|e| {
                TuneError::Objective(format!(
                    "{}:{}: not an evaluation ({e}); the log is damaged",
                    path.display(),
                    i + 1
                ))
            })
        })
        .collect()
}
