//! `tdg autotune --spec S --impl K --param ... -- PROGRAM ARGS`: the
//! routine profiled in the unmodified program, tuned on faithful targets of
//! the contexts that hold its time, deployed in front of the original and
//! proven faster in whole-program runs (the `autotune` crate); `tdg
//! autotune exec DIR -- CMD` runs a command with a deployment preloaded.
//! The searches are `tdg tune --contexts` with the user's search options.

use super::tune::{
    base_options, candidate_settings, contract_error, objective_parts, parse_args, tune_error,
    SearchOptions,
};
use super::CmdResult;
use crate::args::output::{OutputArgs, ReportFormat};
use anyhow::Context;
use autotune::pipeline::{self, AutotuneRequest, RetimeTask, Retimed, SearchTask, Searcher};
use autotune::record::{Outcome, SearchRecord};
use autotune::AutotuneError;
use config::Config;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    #[command(flatten)]
    run: Box<RunArgs>,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Run a command with a deployment's tuned routine preloaded.
    Exec(ExecArgs),
}

#[derive(clap::Args)]
struct ExecArgs {
    /// A deployment directory `tdg autotune` wrote.
    dir: PathBuf,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// The routine's spec: its prototype builds the profiling shim and the
    /// dispatcher; an init clause that allocates the operands from the
    /// sizes lets generated drivers time the contexts.
    #[arg(long, value_name = "SPEC", required_unless_present = "resume")]
    #[arg(help_heading = "Autotune")]
    pub spec: Option<PathBuf>,
    /// The tunable replacement of the routine, parameterised by macros.
    #[arg(long = "impl", value_name = "FILE", required_unless_present = "resume")]
    #[arg(help_heading = "Autotune")]
    pub implementation: Option<PathBuf>,
    /// Deployment directory [default: autotune-ROUTINE].
    #[arg(short = 'o', long = "output-dir", value_name = "DIR")]
    #[arg(help_heading = "Autotune")]
    pub dir: Option<PathBuf>,
    /// Share of the routine's time in the program the tuned contexts must hold.
    #[arg(long, default_value_t = 0.9, value_name = "SHARE")]
    #[arg(help_heading = "Autotune")]
    pub cover: f64,
    /// Most contexts tuned, whatever share they reach.
    #[arg(long, default_value_t = 8, value_name = "N")]
    #[arg(help_heading = "Autotune")]
    pub max_contexts: usize,
    /// Plain runs of the program that give its time before tuning, each
    /// followed by a run under the profiling shim (the run whose routine
    /// share is the median is the profile).
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1000))]
    #[arg(help_heading = "Autotune")]
    pub plain_runs: u64,
    /// Rounds (a plain and a tuned run each, order alternated) after which
    /// an undecided proof stops.
    #[arg(long, default_value_t = 30, value_name = "N", value_parser = clap::value_parser!(u64).range(6..=10000))]
    #[arg(help_heading = "Autotune")]
    pub max_rounds: u64,
    /// How close a target's time of the original must be to the program's
    /// for the target to be tuned on: within this fraction both ways, over
    /// the whole interval of the interleaved comparison.
    #[arg(long, default_value_t = 0.10, value_name = "FRACTION")]
    #[arg(help_heading = "Autotune")]
    pub fidelity_tolerance: f64,
    /// Rounds (a profiled run of the program, then each open target) after
    /// which a target's undecided comparison with the program stops: a
    /// target whose interval still holds the program's time is then taken
    /// as consistent with it. Each round costs a run of the program.
    #[arg(long, default_value_t = autotune::fidelity::FidelityRules::default().max_rounds as u64, value_name = "N", value_parser = clap::value_parser!(u64).range(6..=1000))]
    #[arg(help_heading = "Autotune")]
    pub fidelity_rounds: u64,
    /// Stop one run of the program after this many seconds.
    #[arg(long, default_value_t = 600, value_name = "SECONDS", value_parser = toolchain::time_limit_secs)]
    #[arg(help_heading = "Autotune")]
    pub program_timeout: u64,
    /// Where no driver reproduces a context, do not try a checkpoint of the
    /// program (they need root and CRIU).
    #[arg(long)]
    #[arg(help_heading = "Autotune")]
    pub no_checkpoint: bool,
    /// One configuration for every context: no search per context.
    #[arg(long)]
    #[arg(help_heading = "Autotune")]
    pub no_specialise: bool,
    /// Deploy each configuration with its code where the spec places it:
    /// no re-timing at the other positions against fetch blocks.
    #[arg(long)]
    #[arg(help_heading = "Autotune")]
    pub no_placement: bool,
    /// Include directory for the spec's include= clauses [default: the spec's directory].
    #[arg(short = 'I', value_name = "DIR")]
    #[arg(help_heading = "Autotune")]
    pub include: Vec<PathBuf>,
    #[command(flatten)]
    pub search: SearchOptions,
    #[command(flatten)]
    pub output: OutputArgs<AutotuneFormat>,
    /// The program and its arguments.
    #[arg(
        last = true,
        value_name = "PROGRAM",
        required_unless_present = "resume"
    )]
    pub command: Vec<OsString>,
}

/// What `tdg autotune` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AutotuneFormat {
    /// For people.
    Table,
    /// The record (autotune.json), with a top-level "version".
    Json,
}

impl ReportFormat for AutotuneFormat {
    const FOR_PEOPLE: Self = AutotuneFormat::Table;
    const JSON: Self = AutotuneFormat::Json;
}

pub fn run(args: Args) -> CmdResult {
    match args.action {
        Some(Action::Exec(e)) => exec(e),
        None => autotune(*args.run),
    }
}

/// `tdg autotune exec DIR -- CMD`: CMD with DIR's library first in
/// `LD_PRELOAD`; its exit status is CMD's.
fn exec(e: ExecArgs) -> CmdResult {
    let library = e.dir.join(autotune::deploy::PRELOAD_LIBRARY);
    if !library.is_file() {
        anyhow::bail!(
            "{} holds no {}: give a directory `tdg autotune -o DIR` wrote",
            e.dir.display(),
            autotune::deploy::PRELOAD_LIBRARY
        );
    }
    let library = library.canonicalize()?;
    let status = std::process::Command::new(&e.command[0])
        .args(&e.command[1..])
        .env("LD_PRELOAD", toolchain::ld_preload_with(&library))
        .status()
        .with_context(|| format!("cannot start `{}`", e.command[0].to_string_lossy()))?;
    use std::os::unix::process::ExitStatusExt;
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from(code.clamp(0, 255) as u8),
        (None, Some(signal)) => ExitCode::from((128 + signal).clamp(0, 255) as u8),
        _ => ExitCode::FAILURE,
    })
}

/// autotune's own options: with a value, and without one. Every other
/// option is a search option, handed on to each search as `tdg tune` reads
/// it.
const OWN_WITH_VALUE: [&str; 14] = [
    "--fidelity-tolerance",
    "--fidelity-rounds",
    "--spec",
    "--impl",
    "-o",
    "--output-dir",
    "--cover",
    "--max-contexts",
    "--plain-runs",
    "--max-rounds",
    "--program-timeout",
    "--format",
    "--out",
    "-I",
];
const OWN_FLAGS: [&str; 6] = [
    "--no-checkpoint",
    "--no-specialise",
    "--no-placement",
    "--json",
    "-q",
    "--quiet",
];

/// The search options among `words` (this command's arguments, after
/// `autotune`), in the order given.
fn search_words(words: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = words.iter().peekable();
    while let Some(w) = it.next() {
        if w == "--" {
            break;
        }
        let name = w.split_once('=').map_or(w.as_str(), |(n, _)| n);
        if OWN_WITH_VALUE.contains(&name) {
            if !w.contains('=') {
                it.next();
            }
            continue;
        }
        if name.starts_with("-I") && name.len() > 2 {
            continue;
        }
        if OWN_FLAGS.contains(&name) || matches!(name, "-v" | "-vv" | "-vvv" | "--verbose") {
            continue;
        }
        out.push(w.clone());
    }
    out
}

/// The searches and re-timings, as `tdg tune --contexts` runs them.
struct TuneSearcher {
    implementation: PathBuf,
    words: Vec<String>,
    quiet: bool,
    /// A search whose campaign exists goes on from it (`--resume`).
    resume: bool,
}

impl TuneSearcher {
    /// The words of a search and its arguments parsed from them.
    fn tune_args(
        &self,
        spec: &Path,
        contexts: &Path,
        top: usize,
        more: &[String],
    ) -> anyhow::Result<(super::tune::Args, Vec<String>)> {
        let mut words: Vec<String> = vec![
            spec.display().to_string(),
            "--impl".into(),
            self.implementation.display().to_string(),
            "--contexts".into(),
            contexts.display().to_string(),
            "--top".into(),
            top.to_string(),
        ];
        words.extend(more.iter().cloned());
        words.extend(self.words.iter().cloned());
        let args = parse_args(&words).map_err(|e| {
            anyhow::anyhow!(
                "the search options do not parse: {}",
                e.to_string().lines().next().unwrap_or("")
            )
        })?;
        Ok((args, words))
    }
}

/// An error of the binary's tune path as autotune's.
fn searched(e: anyhow::Error) -> AutotuneError {
    match e.downcast::<formats::contract::Failed>() {
        Ok(f) => AutotuneError::Search {
            failure: Some(f.failure),
            message: f.message,
        },
        Err(e) => AutotuneError::Search {
            failure: None,
            message: format!("{e:#}"),
        },
    }
}

impl Searcher for TuneSearcher {
    fn search(&mut self, task: &SearchTask) -> Result<SearchRecord, AutotuneError> {
        let mut more = vec![
            "--log".to_string(),
            task.log.display().to_string(),
            "--campaign".to_string(),
            task.campaign.display().to_string(),
        ];
        if task.leave_finalists {
            more.push("--no-final-retime".to_string());
        }
        let mut bar = tune::progress::Bar::new(0, !self.quiet);
        let outcome = if self.resume && task.campaign.exists() {
            super::tune::resume_campaign(task.campaign, false).and_then(|(stored, resumed)| {
                super::tune::tune_outcome(&stored, &[], Some(resumed), &mut bar)
            })
        } else {
            self.tune_args(task.spec, task.contexts_file, task.contexts, &more)
                .and_then(|(args, words)| super::tune::tune_outcome(&args, &words, None, &mut bar))
        };
        bar.finish();
        let outcome = outcome.map_err(searched)?;
        Ok(SearchRecord {
            over: task.over.clone(),
            best: outcome.search.best.clone(),
            tied: outcome.search.tied.clone(),
            finalists: outcome.search.finalists.clone(),
            best_ns: outcome.search.best_ns,
            evaluations: outcome.search.evaluations,
            seconds: outcome.search.seconds,
            log: outcome.log.clone(),
            campaign: outcome.campaign.clone(),
        })
    }

    fn retime(&mut self, task: &RetimeTask) -> Result<Retimed, AutotuneError> {
        let RetimeTask {
            spec,
            contexts_file,
            configs,
            original,
            rounds,
        } = *task;
        let file = instrument::contexts::ContextsFile::load(contexts_file)
            .map_err(|e| AutotuneError::Profile(e.to_string()))?;
        let (args, _) = self
            .tune_args(spec, contexts_file, file.contexts.len(), &[])
            .map_err(searched)?;
        let (spec, implementation, base) = objective_parts(&args).map_err(searched)?;
        let contexts = tune::WeightedContexts::top(contexts_file, &file, file.contexts.len());
        let mut objective = tune::ContextsObjective::new(
            &contexts,
            &spec,
            &implementation,
            &base,
            &candidate_settings(&args),
        )
        .map_err(|e| searched(tune_error(e)))?;
        // The original on the same targets: the C calling the program's
        // own definition, built as a candidate with no configuration.
        let mut original_objective = original
            .map(|o| {
                tune::ContextsObjective::new(&contexts, &spec, o, &base, &candidate_settings(&args))
            })
            .transpose()
            .map_err(|e| searched(tune_error(e)))?;
        let plain = [Config::new()];
        // Each round starts at the next configuration, and the original
        // runs first in every other round: in a fixed order, one of them
        // would meet the same point of every round's drift.
        let mut round = |r: usize| -> Result<Vec<Vec<f64>>, AutotuneError> {
            let shift = r % configs.len().max(1);
            let order: Vec<Config> = configs[shift..]
                .iter()
                .chain(&configs[..shift])
                .cloned()
                .collect();
            let original_first = r % 2 == 1;
            let mut original_rows = None;
            if original_first {
                original_rows = original_objective.as_mut().map(|o| o.retime_each(&plain));
            }
            let mut rows = objective.retime_each(&order);
            rows.rotate_right(shift);
            if !original_first {
                original_rows = original_objective.as_mut().map(|o| o.retime_each(&plain));
            }
            rows.extend(original_rows.into_iter().flatten());
            rows.into_iter()
                .map(|row| {
                    row.into_iter()
                        .collect::<Result<Vec<f64>, _>>()
                        .map_err(|e| searched(tune_error(e)))
                })
                .collect()
        };
        // A restored copy can fail for reasons of the moment: a round is
        // tried once more before the run gives up.
        (0..rounds)
            .map(|r| round(r).or_else(|_| round(r)))
            .collect()
    }
}

/// Progress on stderr: the step, then its lines indented.
struct Steps {
    quiet: bool,
}

impl pipeline::Progress for Steps {
    fn step(&mut self, n: usize, what: &str) {
        if !self.quiet {
            eprintln!("tdg autotune [{n}/{}] {what}", pipeline::STEPS);
        }
    }

    fn note(&mut self, line: &str) {
        if !self.quiet {
            eprintln!("      {line}");
        }
    }
}

/// `tdg autotune` arguments as a run stored them, parsed again for `--resume`.
#[derive(clap::Parser)]
#[command(name = "tdg autotune", no_binary_name = true)]
struct Stored {
    #[command(flatten)]
    run: RunArgs,
}

fn autotune(a: RunArgs) -> CmdResult {
    if let Some(dir) = a.search.campaign.resume.clone() {
        use clap::Parser;
        let stored = autotune::pipeline::StoredArgs::load(&dir).map_err(autotune_error)?;
        std::env::set_current_dir(&stored.cwd).with_context(|| {
            format!(
                "the run was started in {}, which is not reachable here",
                stored.cwd.display()
            )
        })?;
        let mut run = Stored::try_parse_from(&stored.words)
            .map_err(|e| {
                anyhow::anyhow!(
                    "{}: the stored arguments do not parse ({}); run tdg autotune again without --resume",
                    dir.display(),
                    e.to_string().lines().next().unwrap_or("")
                )
            })?
            .run;
        run.output = a.output;
        return run_autotune(run, stored.words, true);
    }
    let words: Vec<String> = std::env::args()
        .skip_while(|w| w != "autotune")
        .skip(1)
        .filter(|w| {
            !matches!(
                w.as_str(),
                "-v" | "-vv" | "-vvv" | "--verbose" | "-q" | "--quiet"
            )
        })
        .collect();
    run_autotune(a, words, false)
}

/// A run of `a`, started with `words` (stored for `--resume`), resumed or not.
fn run_autotune(a: RunArgs, words: Vec<String>, resume: bool) -> CmdResult {
    let (request, mut searcher) = request_of(&a, words, resume)?;
    let mut steps = Steps {
        quiet: a.output.is_json(),
    };
    let record = match pipeline::autotune(&request, &mut searcher, &mut steps) {
        Ok(r) => r,
        // No target reproduces the program: a check said no.
        Err(e @ AutotuneError::NoFaithfulTarget(_)) => {
            eprintln!("tdg: error: {e}");
            return Ok(ExitCode::from(formats::contract::EXIT_CHECK_SAID_NO));
        }
        Err(e) => return Err(autotune_error(e)),
    };
    let text = match a.output.chosen() {
        AutotuneFormat::Json => formats::json_document("autotune", &record)?,
        AutotuneFormat::Table => autotune::summary::render(&record),
    };
    a.output.write(&text)?;
    Ok(match record.outcome {
        Outcome::Faster => ExitCode::SUCCESS,
        Outcome::NotFaster => ExitCode::from(formats::contract::EXIT_CHECK_SAID_NO),
    })
}

/// The pipeline's request from `a`, and the searcher of its searches,
/// every option checked before the program first runs.
fn request_of(
    a: &RunArgs,
    words: Vec<String>,
    resume: bool,
) -> anyhow::Result<(AutotuneRequest, TuneSearcher)> {
    refuse_campaign_options(a)?;
    let (spec_path, implementation, spec) = routine(a)?;
    let cwd = std::env::current_dir()?;
    let implementation = cwd.join(&implementation);
    let searcher = TuneSearcher {
        implementation: implementation.clone(),
        words: search_words(&words),
        quiet: a.output.is_json(),
        resume,
    };
    // Checked now, not after the profile: the words each search will read.
    searcher.tune_args(&spec_path, Path::new("contexts.json"), 1, &[])?;
    let driver = base_options(&a.search)?;
    let dir = a
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("autotune-{}", spec.routine.name.name)));
    let (cover, fidelity, proof) = rules(a)?;
    let request = AutotuneRequest {
        program: autotune::program::Program {
            argv: a.command.clone(),
            cwd: cwd.clone(),
            timeout: Duration::from_secs(a.program_timeout),
        },
        include_dirs: instrument::interpose::include_dirs_for(&spec_path, &a.include),
        spec_path: cwd.join(&spec_path),
        spec,
        implementation,
        extra: a.search.extra.iter().map(|e| cwd.join(e)).collect(),
        cc: a.search.build.cc.clone(),
        cflags: a.search.build.cflags.to_vec(),
        driver,
        dir,
        cover,
        plain_runs: a.plain_runs as usize,
        fidelity,
        proof,
        checkpoints: !a.no_checkpoint,
        specialise: !a.no_specialise,
        place: !a.no_placement,
        retime_rounds: 6,
        resume,
        words,
    };
    Ok((request, searcher))
}

/// The campaign options autotune does not take: it keeps each search's
/// campaign itself.
fn refuse_campaign_options(a: &RunArgs) -> anyhow::Result<()> {
    if a.search.campaign.task.is_some() {
        anyhow::bail!("--task runs one evaluation of a tdg tune campaign, not of autotune");
    }
    if a.search.campaign.campaign.is_some() {
        return Err(formats::contract::usage(
            "tdg autotune keeps each search's campaign in its deployment directory (DIR/work): drop --campaign, choose the directory with -o".to_string(),
        )
        .into());
    }
    Ok(())
}

/// The spec's path, the candidate's and the spec checked for profiling;
/// `--param threads` refused (the program's own threads run the routine).
fn routine(a: &RunArgs) -> anyhow::Result<(PathBuf, PathBuf, spec_lang::CheckedSpec)> {
    let spec_path = a.spec.clone().expect("required by clap");
    let implementation = a.implementation.clone().expect("required by clap");
    if !implementation.is_file() {
        return Err(formats::contract::usage(format!(
            "--impl {}: no such file; pass the C file that implements the routine",
            implementation.display()
        ))
        .into());
    }
    let spec = spec_lang::load(&spec_path, &[])?.for_use(spec_lang::Use::Profile)?;
    if a.search
        .params
        .iter()
        .any(|p| p.split('=').next() == Some(config::THREADS))
    {
        return Err(formats::contract::usage(
            "--param threads: a deployed routine runs on the program's own threads; tune its macros".to_string(),
        )
        .into());
    }
    Ok((spec_path, implementation, spec))
}

/// The cover, fidelity and proof rules of `a`, checked.
fn rules(
    a: &RunArgs,
) -> anyhow::Result<(
    autotune::choose::Cover,
    autotune::fidelity::FidelityRules,
    autotune::proof::ProofRules,
)> {
    let cover = autotune::choose::Cover {
        share: a.cover,
        most: a.max_contexts,
    };
    cover.check().map_err(formats::contract::usage)?;
    if !(a.fidelity_tolerance > 0.0 && a.fidelity_tolerance < 1.0) {
        return Err(formats::contract::usage(format!(
            "--fidelity-tolerance {} is not a fraction between 0 and 1 (e.g. 0.1 for 10%)",
            a.fidelity_tolerance
        ))
        .into());
    }
    let fidelity = autotune::fidelity::FidelityRules {
        tolerance: a.fidelity_tolerance,
        max_rounds: a.fidelity_rounds as usize,
        ..Default::default()
    };
    let proof = autotune::proof::ProofRules {
        max_rounds: a.max_rounds as usize,
        ..Default::default()
    };
    Ok((cover, fidelity, proof))
}

/// autotune's error with its contract failure kind kept for the exit status.
fn autotune_error(e: AutotuneError) -> anyhow::Error {
    contract_error(e.failure(), e)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every option `tdg autotune` declares beside the search's is in the
    /// lists that keep it from the searches: one added to `RunArgs` and not
    /// there would reach `tdg tune`, which rejects it.
    #[test]
    fn every_own_option_is_listed_as_autotunes() {
        use clap::{Args as _, CommandFactory as _};
        #[derive(clap::Parser)]
        struct Autotune {
            #[command(flatten)]
            run: RunArgs,
        }
        let search: Vec<String> = SearchOptions::augment_args(clap::Command::new("search"))
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .collect();
        let command = Autotune::command();
        for arg in command.get_arguments() {
            if search.contains(&arg.get_id().to_string()) || arg.is_positional() {
                continue;
            }
            let name = match (arg.get_long(), arg.get_short()) {
                (Some(long), _) => format!("--{long}"),
                (None, Some(short)) => format!("-{short}"),
                (None, None) => continue,
            };
            let listed = if arg.get_action().takes_values() {
                OWN_WITH_VALUE.contains(&name.as_str())
            } else {
                OWN_FLAGS.contains(&name.as_str())
            };
            assert!(listed, "{name} is autotune's own but not in its lists");
        }
    }

    #[test]
    fn only_the_search_options_reach_the_searches() {
        let words: Vec<String> = [
            "--spec",
            "s.spec",
            "--impl=k.c",
            "-o",
            "d",
            "--param",
            "NB=1:4",
            "--cover",
            "0.8",
            "-Iinc",
            "-I",
            "inc2",
            "--strategy",
            "hill",
            "--no-checkpoint",
            "--cflags=-O3 -march=native",
            "--format",
            "json",
            "--",
            "prog",
            "--param",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            search_words(&words),
            [
                "--param",
                "NB=1:4",
                "--strategy",
                "hill",
                "--cflags=-O3 -march=native"
            ]
        );
    }
}
