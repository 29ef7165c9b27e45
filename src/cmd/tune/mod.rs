//! `tdg tune SPEC --impl kernel.c --param NB=16:256:8 ...`: search the
//! kernel's compile-time parameters with the generated driver as objective,
//! evaluating here or, with `--executor slurm`, as Slurm job arrays; for a
//! spec with a `checkpoint` clause the kernel runs as a candidate in
//! restored copies of the application's image instead.
mod args;

use super::CmdResult;
use anyhow::Context;
pub use args::Args;
use args::{own_args, stored_args, with_build_options, CampaignArgs, ExecutorKind, TuneFormat};
pub(crate) use args::{parse_args, SearchOptions};
use driver_gen::RunOptions;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Every input of the campaign's results, as it is now: the spec, the
/// implementation, the extra files, the headers they read at the space's
/// first configuration, the compiler and flags, the contexts file, each
/// checkpoint image and its application, tdg.
fn campaign_inputs(
    args: &Args,
    spec: &spec_lang::CheckedSpec,
    implementation: &Path,
    base: &RunOptions,
    space: &tune::Space,
    target: &tune::Target,
) -> anyhow::Result<Vec<tune::campaign::InputFile>> {
    let first = tune::Point(vec![0; space.params.len()]);
    let sources = tune::campaign::CampaignSources {
        spec_path: args.spec.as_deref().context("give the spec file")?,
        spec,
        implementation,
        extra: &args.search.extra,
        build: base,
        at: &space.config(&first),
        contexts: args.contexts.as_deref(),
        images: &target.images(),
    };
    tune::campaign::InputFile::of_campaign(&sources).map_err(tune_error)
}

/// A campaign being resumed, and how its inputs are judged.
pub(crate) struct Resumed {
    campaign: tune::Campaign,
    manifest: tune::Manifest,
    allow_changed: bool,
    /// The directory as the user named it.
    given: PathBuf,
}

/// The spec, the implementation and the driver options every evaluation
/// shares: the same for the search and for each task on a node.
pub(crate) fn objective_parts(
    args: &Args,
) -> anyhow::Result<(spec_lang::CheckedSpec, PathBuf, RunOptions)> {
    let spec_path = args.spec.as_ref().context("give the spec file")?;
    let implementation = args
        .implementation
        .clone()
        .context("give the implementation with --impl")?;
    let defines = &args.search.timing.define;
    let spec = crate::args::spec::load_spec(spec_path, defines, args.default_driver)?;
    if !implementation.is_file() {
        anyhow::bail!(
            "--impl {}: no such file; pass the C file that implements the routine",
            implementation.display()
        );
    }
    Ok((spec, implementation, base_options(&args.search)?))
}

/// The driver options every evaluation shares (compiler, flags, timing
/// settings, timeout), from the search options.
pub(crate) fn base_options(search: &SearchOptions) -> anyhow::Result<RunOptions> {
    let mut base = RunOptions {
        cc: search.build.cc.clone(),
        cflags: search.build.cflags.to_vec(),
        timeout: search.timeout.duration(),
        ..RunOptions::default()
    };
    search.timing.apply(&mut base);
    base.defines = search.timing.define.clone();
    Ok(base)
}

/// What each configuration is timed with: the contexts of `--contexts`,
/// the spec's checkpoint, or its driver.
fn target_of(
    args: &Args,
    spec: &spec_lang::CheckedSpec,
    spec_path: &Path,
) -> anyhow::Result<tune::Target> {
    if let Some(path) = &args.contexts {
        if spec.checkpoint.is_some() && !args.default_driver {
            anyhow::bail!(
                "--contexts times each context on its own target; the spec's checkpoint clause names one image: add --default-driver, or give the images in the contexts file"
            );
        }
        let file = instrument::contexts::ContextsFile::load(path)?;
        return Ok(tune::Target::Contexts(tune::WeightedContexts::top(
            path, &file, args.top,
        )));
    }
    tune::Target::of(spec, spec_path, args.default_driver).map_err(tune_error)
}

/// One task of a Slurm round: evaluate the configuration at
/// `$SLURM_ARRAY_TASK_ID` of the round and store its result in the campaign.
fn run_task(round: &Path) -> CmdResult {
    let task = tune::slurm::round_task(round).map_err(tune_error)?;
    let args = stored_args(&task.manifest)?;
    let (spec, impl_c, base) = objective_parts(&args)?;
    let spec_path = args.spec.clone().expect("checked by objective_parts");
    let result = match target_of(&args, &spec, &spec_path)? {
        tune::Target::Driver => {
            let mut objective = tune::DriverObjective::new(&spec, impl_c, base).with_kept(
                args.search
                    .campaign
                    .build_once
                    .then(|| task.campaign.builds_dir()),
            );
            tune::campaign::run_task(&mut objective, &task.config)
        }
        target => {
            let mut objective = tune::TargetObjective::new(
                &target,
                &spec,
                &impl_c,
                &base,
                &candidate_settings(&args),
            )
            .map_err(tune_error)?;
            tune::campaign::run_task(&mut objective, &task.config)
        }
    };
    task.campaign.store(&result)?;
    println!("{}", result.summary());
    Ok(ExitCode::SUCCESS)
}

/// How a candidate on an image is built and checked.
pub(crate) fn candidate_settings(args: &Args) -> tune::CandidateSettings {
    tune::CandidateSettings {
        extra: args.search.extra.clone(),
        verify: !args.search.no_verify,
        tolerance: args.search.tolerance,
    }
}

pub fn run(args: Args) -> CmdResult {
    if let Some(round) = &args.search.campaign.task {
        return run_task(round);
    }
    if let Some(file) = args.replay.clone() {
        return replay(args, file);
    }
    if let Some(dir) = &args.search.campaign.resume {
        let (mut stored, resumed) = resume_campaign(dir, args.search.campaign.allow_changed)?;
        // How the output is shown is this run's choice, and a campaign
        // may be given a larger budget to go on.
        stored.output = args.output.clone();
        stored.report = args.report.clone();
        stored.search.budget = args.search.budget.or(stored.search.budget);
        return search(stored, Some(resumed));
    }
    search(args, None)
}

/// The campaign in `dir`, locked, with the arguments it was started with
/// (build options given now replacing the stored ones: the check of the
/// inputs then sees them as changed); the process moves to the directory
/// it was started in.
pub(crate) fn resume_campaign(dir: &Path, allow_changed: bool) -> anyhow::Result<(Args, Resumed)> {
    // Locked first: a second resume must not see, or change, this one's
    // inputs or results.
    let (campaign, mut manifest) = tune::Campaign::open_exclusive(dir).map_err(tune_error)?;
    std::env::set_current_dir(&manifest.cwd).with_context(|| {
        format!(
            "the campaign was started in {}, which is not reachable here",
            manifest.cwd.display()
        )
    })?;
    manifest.args = with_build_options(&manifest.args, &own_args());
    let stored = stored_args(&manifest)?;
    let resumed = Resumed {
        campaign,
        manifest,
        allow_changed,
        given: dir.to_path_buf(),
    };
    Ok((stored, resumed))
}

/// The search, in a new campaign or (`resumed`) an existing one, and its
/// output.
fn search(args: Args, resumed: Option<Resumed>) -> CmdResult {
    let mut bar = tune::progress::Bar::new(0, !quiet(&args));
    let outcome = tune_outcome(&args, &own_args(), resumed, &mut bar);
    bar.finish();
    show(&args, outcome?)
}

/// A recorded space searched with its recorded times as the objective.
fn replay(args: Args, file: PathBuf) -> CmdResult {
    let request = tune::replay::ReplayRequest {
        file,
        strategy: chosen_strategy(&args),
        budget: args.search.budget,
        seed: args.search.seed,
        log: args.log.clone(),
    };
    let mut bar = tune::progress::Bar::new(0, !quiet(&args));
    let outcome = tune::replay::replay(request, &mut bar);
    bar.finish();
    show(&args, outcome.map_err(tune_error)?)
}

/// The outcome as `args` asks: the page, then the table, JSON or T4.
fn show(args: &Args, outcome: tune::TuneOutcome) -> CmdResult {
    let format = args.output.chosen();
    if let Some(page) = &args.report {
        let shown = outcome.campaign.as_ref().unwrap_or(&outcome.log);
        report::write_report(std::slice::from_ref(shown), page, None, "tdg tune --report")?;
        if !quiet(args) {
            eprintln!("tdg tune: wrote {}", page.display());
        }
    }
    let text = match format {
        TuneFormat::T4 => {
            let evaluations = tune::run::read_log(&outcome.log).map_err(tune_error)?;
            let started_unix_s = outcome
                .started
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            let tried = formats::t4::from_evaluations(evaluations, started_unix_s);
            serde_json::to_string_pretty(&formats::t4::document(&tried))? + "\n"
        }
        TuneFormat::Json => formats::tune_outcome_document(&outcome)?,
        TuneFormat::Table => outcome.render_text(),
    };
    args.output.write(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// The search `args` describe, run to its outcome (`tdg tune`, and each
/// search of `tdg autotune`); `words` are the arguments `args` were parsed
/// from, which a new campaign stores for `--resume` and its tasks;
/// `progress` hears of every evaluation.
pub(crate) fn tune_outcome(
    args: &Args,
    words: &[String],
    resumed: Option<Resumed>,
    progress: &mut dyn tune::Progress,
) -> anyhow::Result<tune::TuneOutcome> {
    // The space and the start are checked before the objective, whose
    // machine defaults may start a probe: a typo costs no measurement.
    let (space, fixed) = space_and_fixed(args)?;
    let (spec, implementation, base) = objective_parts(args)?;
    let spec_path = args.spec.clone().expect("checked by objective_parts");
    let target = target_of(args, &spec, &spec_path)?;
    let inputs = || campaign_inputs(args, &spec, &implementation, &base, &space, &target);
    // A resumed campaign's inputs are judged before anything is measured.
    let resumed = match resumed {
        Some(r) => Some(judge_inputs(r, inputs()?)?),
        None => None,
    };
    let strategy = chosen_strategy(args);
    let roles = parse_each(&args.search.roles, tune::parse_role)?;
    let constraints = parse_each(&args.search.constraints, tune::parse_constraint)?;
    let start = if args.search.no_model || strategy == Some(tune::Strategy::Exhaustive) {
        tune::StartFrom::MidRange
    } else {
        tune::StartFrom::Model(Box::new(machine_model(args, &spec, &base)?))
    };
    let name = spec_path
        .file_stem()
        .map_or("tune".into(), |s| s.to_string_lossy().to_string());
    // Slurm is checked before a campaign directory is made, so a cluster
    // that does not answer leaves nothing behind.
    let runner = runner_of(&args.search.campaign)?;
    let campaign = match (resumed, new_campaign_dir(&args.search.campaign, &name)) {
        (Some(c), _) => tune::CampaignChoice::Resume(c),
        (None, Some(dir)) => tune::CampaignChoice::New {
            dir,
            manifest: tune::Manifest::new(std::env::current_dir()?, words.to_vec(), inputs()?),
        },
        (None, None) => tune::CampaignChoice::None,
    };
    let request = tune::TuneRequest {
        spec: &spec,
        name,
        target,
        implementation,
        base,
        candidate: candidate_settings(args),
        space,
        roles,
        layout: args.search.layout,
        constraints,
        fixed,
        start,
        strategy,
        seed: args.search.seed,
        budget: args.search.budget,
        runner,
        campaign,
        build_once: args.search.campaign.build_once,
        allow_mixed_cpus: args.search.campaign.allow_mixed_cpus,
        log: args.log.clone(),
        leave_finalists: args.no_final_retime,
    };
    tune::run(request, progress).map_err(tune_error)
}

/// Each of `texts` (one flag's occurrences) read by `parse`.
fn parse_each<T>(
    texts: &[String],
    parse: impl Fn(&str) -> Result<T, tune::TuneError>,
) -> anyhow::Result<Vec<T>> {
    texts
        .iter()
        .map(|t| parse(t))
        .collect::<Result<Vec<_>, _>>()
        .map_err(tune_error)
}

/// The space of `--param` and the start values of `--start`.
fn space_and_fixed(args: &Args) -> anyhow::Result<(tune::Space, config::Config)> {
    let space = tune::Space::new(parse_each(&args.search.params, tune::parse_param)?)
        .map_err(tune_error)?;
    let mut fixed = config::Config::new();
    for text in &args.search.start {
        // A later --start of the same parameter wins, as a later flag does.
        fixed.set(tune::parse_start(text, &space).map_err(tune_error)?);
    }
    Ok((space, fixed))
}

/// The resumed campaign, once its inputs as they are `now` are accepted
/// (changed ones only with `--allow-changed`, said on stderr).
fn judge_inputs(
    mut r: Resumed,
    now: Vec<tune::campaign::InputFile>,
) -> anyhow::Result<tune::Campaign> {
    let changed = r
        .campaign
        .accept_inputs(&r.manifest, now, r.allow_changed, &r.given)
        .map_err(tune_error)?;
    if !changed.is_empty() {
        eprintln!(
            "tdg tune: {} (--allow-changed): every configuration the search reaches is evaluated again",
            changed.join("; ")
        );
    }
    Ok(r.campaign)
}

/// `--strategy`, or exhaustive for `--exhaustive`; `None`: by what the
/// space offers.
fn chosen_strategy(args: &Args) -> Option<tune::Strategy> {
    if args.search.exhaustive {
        Some(tune::Strategy::Exhaustive)
    } else {
        args.search.strategy
    }
}

/// Where the evaluations run; a Slurm-only flag without `--executor slurm`
/// is refused.
fn runner_of(a: &CampaignArgs) -> anyhow::Result<tune::Runner> {
    match a.executor {
        ExecutorKind::Slurm => Ok(tune::Runner::Slurm(Box::new(slurm_executor(a)?))),
        ExecutorKind::Local => {
            if let Some(flag) = a.slurm_only_flag() {
                anyhow::bail!(
                    "{flag} is for --executor slurm; add --executor slurm or drop {flag}"
                );
            }
            Ok(tune::Runner::Local)
        }
    }
}

/// The directory of a new campaign: `--campaign`, else `NAME.campaign` for
/// Slurm, whose nodes need a directory they share; a local search keeps
/// one only when asked.
fn new_campaign_dir(a: &CampaignArgs, name: &str) -> Option<PathBuf> {
    match (&a.campaign, a.executor) {
        (Some(d), _) => Some(d.clone()),
        (None, ExecutorKind::Slurm) => Some(PathBuf::from(format!("{name}.campaign"))),
        (None, ExecutorKind::Local) => None,
    }
}

/// Machine-readable output keeps stderr to errors.
fn quiet(args: &Args) -> bool {
    args.output.chosen() != TuneFormat::Table
}

/// A library error with its contract failure kind kept for the exit status.
pub(crate) fn tune_error(e: tune::TuneError) -> anyhow::Error {
    contract_error(e.failure(), e)
}

/// `e` as the binary's error: with its contract failure kind, if it has
/// one, kept for the exit status (tune's and autotune's errors).
pub(crate) fn contract_error<E>(failure: Option<formats::contract::Failure>, e: E) -> anyhow::Error
where
    E: std::error::Error + Send + Sync + 'static,
{
    match failure {
        Some(failure) => formats::contract::Failed {
            failure,
            message: e.to_string(),
        }
        .into(),
        None => e.into(),
    }
}

/// The machine as the starting-point model sees it: the probe (measured
/// now if nothing is cached) and what the compiler builds the kernel for.
fn machine_model(
    args: &Args,
    spec: &spec_lang::ast::Spec,
    base: &RunOptions,
) -> anyhow::Result<tune::MachineModel> {
    let probed = probe::cached_or_measure()
        .context("the starting-point model needs `tdg probe` (or pass --no-model)")?;
    let cc = toolchain::CCompiler::find(args.search.build.cc.as_deref())?;
    if !quiet(args) {
        eprintln!(
            "tdg tune: model from the probe cached at {} (effective caches {})",
            probe::cache_path().display(),
            probed
                .caches
                .iter()
                .map(|c| format!("L{} {}", c.level, stats::bytes(c.effective_bytes)))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(tune::MachineModel::for_compiler(
        &probed,
        &cc.program,
        &base.cflags,
        spec,
    ))
}

/// The Slurm executor with the settings file under the flags.
fn slurm_executor(a: &CampaignArgs) -> anyhow::Result<tune::SlurmExecutor> {
    let from_file = match &a.slurm_config {
        Some(f) => tune::SlurmConfig::load(f)?,
        None => tune::SlurmConfig::default(),
    };
    let config = from_file.overridden_by(tune::SlurmConfig {
        partition: a.partition.clone(),
        account: a.account.clone(),
        time_limit: a.time_limit.clone(),
        sbatch_options: crate::args::words::flatten(&a.sbatch_options),
    });
    let tdg = std::env::current_exe().context("cannot find the tdg binary the tasks should run")?;
    let mut executor = tune::SlurmExecutor::new(config, tdg, std::env::current_dir()?)?;
    executor.identical_nodes = a.identical_nodes;
    executor.unreachable_limit = Duration::from_secs(a.controller_timeout);
    Ok(executor)
}
