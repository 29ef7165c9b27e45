//! `tdg run SPEC --impl kernel.c`: build the driver against an
//! implementation, run it and report (table, --json or --csv).
//! Two other paths share the command: `--contexts FILE` times a profile's
//! top call contexts and predicts the application's total time in the
//! routine; a spec with a `checkpoint` clause times its CRIU image instead
//! of a generated driver.

use super::CmdResult;
use crate::args::build::{BuildArgs, TimeoutArgs};
use crate::args::defines::with_env_params;
use crate::args::output::{report_format, OutputArgs};
use crate::args::spec::load_spec;
use crate::args::timing::TimingArgs;
use driver_gen::{build_driver, flush_sweep, RunOptions};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The routine's spec file.
    pub spec: PathBuf,
    /// C file implementing the routine. With a spec's `checkpoint` clause it
    /// is optional: without it the image's own code is timed, with it the
    /// candidate runs (and is verified) in every restored copy.
    #[arg(long = "impl", value_name = "FILE")]
    #[arg(help_heading = "Build")]
    pub implementation: Option<PathBuf>,
    /// Time the top call contexts of this contexts file (written by
    /// `tdg spec-from-profile`) and predict the application's total time.
    #[arg(long, value_name = "FILE", conflicts_with = "flush_kb")]
    #[arg(help_heading = "Profile contexts")]
    pub contexts: Option<PathBuf>,
    /// How many contexts `--contexts` times, heaviest first.
    #[arg(long, default_value_t = 3, requires = "contexts")]
    #[arg(help_heading = "Profile contexts")]
    pub top: usize,
    /// Ignore the spec's `checkpoint` clause and time --impl with a generated driver.
    #[arg(long)]
    #[arg(help_heading = "Checkpoint")]
    pub default_driver: bool,
    /// More C files to link with the implementation.
    #[arg(long = "extra", value_name = "FILE")]
    #[arg(help_heading = "Build")]
    pub extra: Vec<PathBuf>,
    /// A second C file defining the routine: the outputs `returns(...)`
    /// names are compared with its results instead of the spec's body
    /// (which a spec may leave out). Its definition is renamed so both link.
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = "Build")]
    pub reference: Option<PathBuf>,
    #[command(flatten, next_help_heading = "Build")]
    pub build: BuildArgs,
    #[command(flatten)]
    pub timing: TimingArgs,
    /// Force this many calls per sample.
    #[arg(long)]
    #[arg(help_heading = "Driver")]
    pub reps: Option<u64>,
    /// Do not write every operand page before timing (shows lazy page zeroing).
    #[arg(long)]
    #[arg(help_heading = "Driver")]
    pub no_touch: bool,
    /// No untimed call before timing (shows instruction-load cost).
    #[arg(long)]
    #[arg(help_heading = "Driver")]
    pub no_dummy_call: bool,
    /// After a flush, leave the routine's code cold as well (by default the
    /// driver re-warms the program's code, not its operands).
    #[arg(long)]
    #[arg(help_heading = "Driver")]
    pub cold_code: bool,
    /// No alpha alternation / output restoring.
    #[arg(long)]
    #[arg(help_heading = "Driver")]
    pub no_overflow_guard: bool,
    /// Skip checking the outputs against the spec's reference body.
    #[arg(long)]
    #[arg(help_heading = "Verification")]
    pub no_verify: bool,
    /// Relative verification tolerance.
    #[arg(long)]
    #[arg(help_heading = "Verification")]
    pub tolerance: Option<f64>,
    #[command(flatten, next_help_heading = "Driver")]
    pub timeout: TimeoutArgs,
    /// Directory whose templates override the built-in ones.
    #[arg(long)]
    #[arg(help_heading = "Build")]
    pub templates: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs<RunFormat>,
    /// Same as --format csv (kept for scripts).
    #[arg(long, hide = true, conflicts_with_all = ["format", "json"])]
    pub csv: bool,
    /// Print only the reported time per call in seconds (for tuners: the
    /// exit status says why there is none; see docs/integration.md).
    #[arg(long, conflicts_with_all = ["json", "csv", "format", "contexts"], help_heading = "Output")]
    pub cost_only: bool,
}

report_format! {
    /// What `tdg run` writes.
    pub enum RunFormat {
        /// For people.
        Table,
        /// tdg's JSON, with a top-level "version" (docs/integration.md).
        Json,
        /// One row per report.
        Csv,
        /// Google Benchmark JSON (`compare.py` and dashboards read it).
        Gbench,
    }
}

pub fn run(args: Args) -> CmdResult {
    let defines = with_env_params(args.timing.define.clone());
    let spec = load_spec(&args.spec, &defines, args.default_driver)?;
    if let tune::Target::Checkpoint { image } =
        tune::Target::of(&spec, &args.spec, args.default_driver).map_err(super::tune::tune_error)?
    {
        return run_checkpoint(&args, &image);
    }
    // Kept alive (a body written out) until the driver is built from it.
    let implementation =
        driver_gen::body::Implementation::choose(&spec, args.implementation.as_deref())?;
    let mut o = RunOptions {
        cc: args.build.cc.clone(),
        cflags: args.build.cflags.to_vec(),
        reps: args.reps,
        cold_code: args.cold_code,
        touch_pages: !args.no_touch,
        dummy_call: !args.no_dummy_call,
        overflow_guard: !args.no_overflow_guard,
        verify: !args.no_verify,
        timeout: args.timeout.duration(),
        templates_dir: args.templates.clone(),
        extra_sources: args.extra.clone(),
        reference: args.reference.clone(),
        ..RunOptions::default()
    };
    args.timing.apply(&mut o);
    if let Some(note) = implementation.settle(&spec, &args.spec, &mut o) {
        eprintln!("tdg run: {note}");
    }
    o.timing.tolerance = args.tolerance;
    // The defines the spec was loaded (and its -D values checked) under.
    o.defines = defines;
    if !spec.warnings.is_empty() {
        eprintln!("{}", spec.warnings);
    }
    if let Some(path) = &args.contexts {
        return run_contexts(&args, &spec, implementation.path(), &o, path);
    }
    let built = build_driver(&spec, implementation.path(), &o)?;
    let reports = match args.timing.sweep() {
        Some(kibs) => flush_sweep(&built, &o, kibs)?,
        None => vec![built.run(&o)?],
    };
    print_reports(&args, &reports)?;
    Ok(ExitCode::SUCCESS)
}

/// The format `tdg run` writes.
fn output_format(args: &Args) -> formats::Format {
    use formats::Format;
    if args.csv {
        return Format::Csv;
    }
    match args.output.chosen() {
        RunFormat::Table => Format::Table,
        RunFormat::Json => Format::Json,
        RunFormat::Csv => Format::Csv,
        RunFormat::Gbench => Format::Gbench,
    }
}

/// The reports of one run in the chosen format, to stdout or `--out`.
fn print_reports(args: &Args, reports: &[driver_gen::RunReport]) -> anyhow::Result<()> {
    let text = if args.cost_only {
        match reports {
            [r] => format!("{}\n", r.reported_ns * 1e-9),
            _ => {
                return Err(formats::contract::usage(
                    "--cost-only reports one time; give one --flush-kb size, not a sweep",
                )
                .into())
            }
        }
    } else {
        formats::run_reports::render(reports, output_format(args), || {
            formats::gbench::RunIdentity::new(
                std::env::current_exe()?.display().to_string(),
                env!("CARGO_PKG_VERSION"),
                args.spec.clone(),
                args.implementation.clone(),
            )
        })?
    };
    args.output.write(&text)
}

/// `--contexts`: Σ calls × driver time over the heaviest contexts, beside
/// the in-application total the profile measured.
fn run_contexts(
    args: &Args,
    spec: &spec_lang::CheckedSpec,
    implementation: &Path,
    o: &RunOptions,
    path: &Path,
) -> CmdResult {
    // Refused before anything is built, not after.
    formats::table_or_json("tdg run --contexts", output_format(args), &(), String::new)?;
    let file = instrument::contexts::ContextsFile::load(path)?;
    let prediction =
        driver_gen::contexts::predict_with_driver(spec, implementation, o, &file, args.top)?;
    let text = formats::table_or_json(
        "tdg run --contexts",
        output_format(args),
        &prediction,
        || instrument::contexts::render_prediction(&prediction),
    )?;
    args.output.write(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// A spec with a `checkpoint` clause: restore its image and time the region
/// on the application's own data.
fn run_checkpoint(args: &Args, image: &Path) -> CmdResult {
    if args.timing.overrides.code_offset.is_some() {
        return Err(formats::contract::usage(
            "--code-offset places the implementation in a generated driver; on a checkpoint the candidate is a shared library mapped by the restored process (add --default-driver to time it in a driver)",
        )
        .into());
    }
    let mut opts = checkpoint::TimeOptions {
        timeout: args.timeout.duration(),
        ..Default::default()
    };
    if let Some(n) = args.timing.overrides.samples {
        opts.samples = n as usize;
    }
    let candidate = crate::args::candidate::CandidateArgs {
        implementation: args.implementation.clone(),
        extra: args.extra.clone(),
        build: args.build.clone(),
        define: args.timing.define.clone(),
        no_verify: args.no_verify,
        tolerance: args.tolerance.unwrap_or(checkpoint::DEFAULT_TOLERANCE),
    };
    // --cost-only: the median alone, in seconds.
    let format = (!args.cost_only).then(|| output_format(args));
    crate::args::candidate::time_with_candidate(
        image,
        &candidate,
        opts,
        format,
        args.output.out.as_deref(),
    )
}
