//! `tdg tune`'s command line: the search, the build, the checkpoint
//! candidate, the output and the campaign (local or Slurm), and the stored
//! form a campaign keeps for `--resume` and its tasks.

use crate::args::build::{BuildArgs, TimeoutArgs};
use crate::args::output::{report_format, OutputArgs};
use crate::args::timing::TimingArgs;
use driver_gen::cli::keyword;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The routine's spec file.
    #[arg(required_unless_present_any = ["resume", "task", "replay"])]
    pub spec: Option<PathBuf>,
    /// C file implementing the routine, parameterised by macros.
    #[arg(long = "impl", value_name = "FILE", required_unless_present_any = ["resume", "task", "replay"])]
    #[arg(help_heading = "Build")]
    pub implementation: Option<PathBuf>,
    /// Search a recorded space instead, its recorded times the objective:
    /// a T4 results file (`--format t4`) or a tune log; the parameters and
    /// their values come from the file (--strategy, --budget, --seed,
    /// --log and the output options apply).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["spec", "implementation", "params", "resume", "campaign", "contexts"])]
    #[arg(help_heading = "Search")]
    pub replay: Option<PathBuf>,
    #[command(flatten)]
    pub search: SearchOptions,
    /// JSON-lines log of every evaluation (default: <spec name>.tune.jsonl).
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = "Search")]
    pub log: Option<PathBuf>,
    /// End with the three best listed (JSON `finalists`, in the search's
    /// order) instead of re-timed side by side, for a caller that re-times
    /// them against a reference of its own (as `tdg autotune` does, against
    /// the program's original routine).
    #[arg(long)]
    #[arg(help_heading = "Search")]
    pub no_final_retime: bool,
    /// Ignore the spec's `checkpoint` clause and tune with a generated driver.
    #[arg(long)]
    #[arg(help_heading = "Checkpoint tuning")]
    pub default_driver: bool,
    /// Score each configuration by the program's time in the routine over
    /// the call contexts of this file (`tdg spec-from-profile` writes one
    /// for the profiled spec): calls x time per call, each context on its
    /// own driver (or checkpoint image).
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = "The program's time")]
    pub contexts: Option<PathBuf>,
    /// With --contexts: the contexts ranked 1 to N (by the program's time in them).
    #[arg(long, value_name = "N", default_value_t = 3, requires = "contexts")]
    #[arg(help_heading = "The program's time")]
    pub top: usize,
    #[command(flatten)]
    pub output: OutputArgs<TuneFormat>,
    /// At the end, write the campaign's HTML page (as `tdg report`) to FILE.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub report: Option<PathBuf>,
}

/// What a search needs beyond the routine and its implementation: the
/// space, the strategy, the build, the timing, the checkpoint candidate and
/// the campaign; `tdg autotune` takes the same options.
#[derive(clap::Args)]
pub struct SearchOptions {
    /// A macro to tune: NAME=LO:HI[:STEP] or NAME=V1,V2,... of integers, or
    /// NAME=a,b,c of names (a categorical choice: `-DNAME=a -DNAME_a=1`)
    /// (repeatable).
    #[arg(long = "param", value_name = "NAME=RANGE", required_unless_present_any = ["resume", "task", "replay"])]
    #[arg(help_heading = "Search")]
    pub params: Vec<String>,
    /// Most configurations to build and time (default: all of a small
    /// space, else 60).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    #[arg(help_heading = "Search")]
    pub budget: Option<u64>,
    /// Time every configuration instead of searching (the reference for
    /// judging the search; same as --strategy exhaustive).
    #[arg(long, conflicts_with = "strategy")]
    #[arg(help_heading = "Search")]
    pub exhaustive: bool,
    /// How to search: yotov (the model's starts, then Yotov et al.'s local
    /// search; the default where a parameter has a role), hill
    /// (hill-climbing every parameter with growing strides), line (ATLAS's
    /// orthogonal line search), model (the model's own choice alone),
    /// exhaustive, random, anneal (simulated annealing), multistart
    /// (hill-climbs from random starts) or bayes (a Gaussian-process
    /// surrogate and expected improvement; the default where no parameter
    /// has a role).
    #[arg(long, value_parser = strategy)]
    #[arg(help_heading = "Search")]
    pub strategy: Option<tune::Strategy>,
    /// Seed of the random choices of random, anneal, multistart and bayes: the
    /// same seed makes the same search.
    #[arg(long, default_value_t = 0)]
    #[arg(help_heading = "Search")]
    pub seed: u64,
    /// What a parameter is to the model: NAME=ROLE with ROLE tile (the
    /// cache block), rows or cols (the register tile), kunroll (repeatable;
    /// NB, MU, NU, KU need none; overrides the spec's tune clause).
    #[arg(long = "role", value_name = "NAME=ROLE")]
    #[arg(help_heading = "Search")]
    pub roles: Vec<String>,
    /// The result's layout: col_major (a column is contiguous; the
    /// default) or row_major; the model vectorises the register tile along
    /// the contiguous extent.
    #[arg(long, value_parser = keyword::<spec_lang::ast::TuneLayout>())]
    #[arg(help_heading = "Search")]
    pub layout: Option<spec_lang::ast::TuneLayout>,
    /// A condition every configuration must meet, e.g. "NB % MU == 0"
    /// (repeatable; beside the spec's); a configuration that violates one
    /// is never built.
    #[arg(long = "constraint", value_name = "CONDITION")]
    #[arg(help_heading = "Search")]
    pub constraints: Vec<String>,
    /// Start value for a parameter instead of the model's (repeatable).
    #[arg(long = "start", value_name = "NAME=VALUE")]
    #[arg(help_heading = "Search")]
    pub start: Vec<String>,
    /// Start mid-range instead of from the probe-based model (no probe run).
    #[arg(long)]
    #[arg(help_heading = "Search")]
    pub no_model: bool,
    #[command(flatten, next_help_heading = "Build")]
    pub build: BuildArgs,
    #[command(flatten)]
    pub timing: TimingArgs,
    #[command(flatten, next_help_heading = "Driver")]
    pub timeout: TimeoutArgs,
    /// More C files for the candidate (checkpoint tuning).
    #[arg(long = "extra", value_name = "FILE")]
    #[arg(help_heading = "Build")]
    pub extra: Vec<PathBuf>,
    /// Skip verifying each configuration against the application's code on
    /// the image (checkpoint tuning).
    #[arg(long)]
    #[arg(help_heading = "Checkpoint tuning")]
    pub no_verify: bool,
    /// Relative tolerance for floating-point outputs (checkpoint tuning).
    #[arg(long, default_value_t = checkpoint::DEFAULT_TOLERANCE)]
    #[arg(help_heading = "Checkpoint tuning")]
    pub tolerance: f64,
    #[command(flatten)]
    pub campaign: CampaignArgs,
}

report_format! {
    /// What `tdg tune` writes.
    pub enum TuneFormat {
        /// For people.
        Table,
        /// tdg's JSON outcome, with a top-level "version" (docs/integration.md).
        Json,
        /// Every evaluation as T4 tuning results (Kernel Tuner's schema).
        T4,
    }
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExecutorKind {
    /// Here, one configuration after another.
    Local,
    /// Each round of the search one Slurm job array, one configuration per task.
    Slurm,
}

#[derive(clap::Args)]
pub struct CampaignArgs {
    /// Where evaluations run.
    #[arg(long, value_enum, default_value = "local")]
    #[arg(help_heading = "Campaign")]
    pub executor: ExecutorKind,
    /// Campaign directory: every result is stored there as it arrives, so
    /// `--resume` can continue (for slurm it must be on a filesystem the
    /// nodes share; default <spec name>.campaign).
    #[arg(long, value_name = "DIR")]
    #[arg(help_heading = "Campaign")]
    pub campaign: Option<PathBuf>,
    /// Continue the campaign in DIR with its original options (a new
    /// --budget, --format and --out apply; a new --cc or --cflags is a
    /// changed input): finished evaluations are read back, not run again;
    /// refused if an input changed (--allow-changed).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["spec", "implementation", "params", "campaign"])]
    #[arg(help_heading = "Campaign")]
    pub resume: Option<PathBuf>,
    /// Slurm partition for the evaluations.
    #[arg(long)]
    #[arg(help_heading = "Slurm")]
    pub partition: Option<String>,
    /// Slurm account to charge.
    #[arg(long)]
    #[arg(help_heading = "Slurm")]
    pub account: Option<String>,
    /// Time limit of each evaluation's task (sbatch --time: MM, MM:SS, HH:MM:SS, D-HH:MM:SS).
    #[arg(long, value_name = "TIME")]
    #[arg(help_heading = "Slurm")]
    pub time_limit: Option<String>,
    /// More sbatch options, split as a shell would, e.g.
    /// --sbatch-option="--constraint=avx512 --comment='tdg tune'" (repeatable).
    #[arg(
        long = "sbatch-option",
        value_name = "OPTIONS",
        allow_hyphen_values = true,
        value_parser = crate::args::words::words
    )]
    #[arg(help_heading = "Slurm")]
    pub sbatch_options: Vec<crate::args::words::Words>,
    /// TOML file with partition, account, time_limit, sbatch_options (flags override it).
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = "Slurm")]
    pub slurm_config: Option<PathBuf>,
    /// The nodes are identical: they share one probe measurement (kept in
    /// the campaign directory) instead of each measuring itself.
    #[arg(long)]
    #[arg(help_heading = "Slurm")]
    pub identical_nodes: bool,
    /// Build each configuration's driver once, on this machine, into the
    /// campaign directory; the tasks only run it (nodes identical to this
    /// machine: same compiler and CPU; the drivers carry this machine's
    /// probe results).
    #[arg(long, requires = "identical_nodes")]
    #[arg(help_heading = "Slurm")]
    pub build_once: bool,
    /// Accept evaluations timed on different CPU models in one campaign.
    #[arg(long)]
    #[arg(help_heading = "Campaign")]
    pub allow_mixed_cpus: bool,
    /// Resume although an input changed since the campaign started (the
    /// spec, implementation, extra files, a header they include, the
    /// compiler or its flags, the checkpoint image or its application,
    /// tdg): every configuration the search reaches is evaluated again
    /// (stored results from the old inputs are not used).
    #[arg(long, requires = "resume")]
    #[arg(help_heading = "Campaign")]
    pub allow_changed: bool,
    /// Stop after the Slurm controller has not answered for this many
    /// seconds (the campaign stays resumable).
    #[arg(long, value_name = "SECONDS", default_value_t = 120, value_parser = toolchain::time_limit_secs)]
    #[arg(help_heading = "Slurm")]
    pub controller_timeout: u64,
    /// Run one evaluation of a campaign round (what each Slurm task runs).
    #[arg(long, value_name = "ROUND_DIR", hide = true)]
    pub task: Option<PathBuf>,
}

impl CampaignArgs {
    /// The first cluster setting given, which only a Slurm campaign uses.
    pub(super) fn slurm_only_flag(&self) -> Option<&'static str> {
        [
            (self.partition.is_some(), "--partition"),
            (self.account.is_some(), "--account"),
            (self.time_limit.is_some(), "--time-limit"),
            (!self.sbatch_options.is_empty(), "--sbatch-option"),
            (self.slurm_config.is_some(), "--slurm-config"),
            (self.identical_nodes, "--identical-nodes"),
            (self.build_once, "--build-once"),
            (self.controller_timeout != 120, "--controller-timeout"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }
}

fn strategy(text: &str) -> Result<tune::Strategy, String> {
    tune::Strategy::ALL
        .into_iter()
        .find(|s| s.spelling() == text)
        .ok_or_else(|| {
            format!(
                "`{text}` is not a strategy; use one of: {}",
                tune::Strategy::ALL.map(|s| s.spelling()).join(", ")
            )
        })
}

/// `tdg tune` arguments as stored in a campaign, parsed again for
/// `--resume` and by the tasks on the nodes.
#[derive(clap::Parser)]
#[command(name = "tdg tune", no_binary_name = true)]
struct StoredArgs {
    #[command(flatten)]
    args: Args,
}

pub(super) fn stored_args(manifest: &tune::Manifest) -> anyhow::Result<Args> {
    parse_args(&manifest.args).map_err(|e| {
        anyhow::anyhow!(
            "the campaign's stored arguments do not parse: {}",
            e.to_string().lines().next().unwrap_or("")
        )
    })
}

/// `tdg tune`'s arguments from words (after `tune`): a stored campaign's,
/// or those `tdg autotune` composes for each of its searches.
pub(crate) fn parse_args(words: &[String]) -> Result<Args, clap::Error> {
    use clap::Parser;
    StoredArgs::try_parse_from(words).map(|s| s.args)
}

/// The campaign's stored arguments with the build options (`--cc`,
/// `--cflags`) `given` with `--resume` in place of the stored ones, so a
/// resume builds with them, its check of the inputs sees the change, and
/// the campaign's tasks and later resumes use them once it is accepted.
pub(super) fn with_build_options(stored: &[String], given: &[String]) -> Vec<String> {
    const BUILD: [&str; 2] = ["--cc", "--cflags"];
    // Each occurrence of a build option with its value: `--cc X` or `--cc=X`.
    let split = |args: &[String]| -> (Vec<String>, Vec<(String, Vec<String>)>) {
        let (mut rest, mut build) = (Vec::new(), Vec::new());
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            match BUILD
                .iter()
                .find(|f| a == *f || a.starts_with(&format!("{f}=")))
            {
                Some(f) if a == f => {
                    build.push((f.to_string(), args[i..(i + 2).min(args.len())].to_vec()));
                    i += 2;
                }
                Some(f) => {
                    build.push((f.to_string(), vec![a.clone()]));
                    i += 1;
                }
                None => {
                    rest.push(a.clone());
                    i += 1;
                }
            }
        }
        (rest, build)
    };
    let (_, new) = split(given);
    let (mut out, old) = split(stored);
    for flag in BUILD {
        let from = if new.iter().any(|(f, _)| f == flag) {
            &new
        } else {
            &old
        };
        for (_, words) in from.iter().filter(|(f, _)| f == flag) {
            out.extend(words.iter().cloned());
        }
    }
    out
}

/// This command's own arguments (after `tune`), as the campaign stores them.
pub(super) fn own_args() -> Vec<String> {
    std::env::args()
        .skip(1)
        .skip_while(|a| a != "tune")
        .skip(1)
        // The global logging flags belong to `tdg`, not to the campaign.
        .filter(|a| {
            !matches!(
                a.as_str(),
                "-v" | "-vv" | "-vvv" | "--verbose" | "-q" | "--quiet"
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::with_build_options;

    fn words(s: &[&str]) -> Vec<String> {
        s.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn build_options_given_with_resume_replace_the_stored_ones() {
        let stored = words(&["k.spec", "--cflags", "-O2", "--param", "NB=1:4", "--cc=gcc"]);
        assert_eq!(
            with_build_options(
                &stored,
                &words(&["--resume", "c", "--cflags", "-O3 -march=native"])
            ),
            words(&[
                "k.spec",
                "--param",
                "NB=1:4",
                "--cc=gcc",
                "--cflags",
                "-O3 -march=native"
            ])
        );
        assert_eq!(
            with_build_options(&stored, &words(&["--resume", "c", "--cc", "clang"])),
            words(&["k.spec", "--param", "NB=1:4", "--cc", "clang", "--cflags", "-O2"])
        );
        assert_eq!(
            with_build_options(&stored, &words(&["--resume", "c"])),
            words(&["k.spec", "--param", "NB=1:4", "--cc=gcc", "--cflags", "-O2"])
        );
    }
}
