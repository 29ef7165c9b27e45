//! `tdg run SPEC --impl kernel.c`: build the driver against an
//! implementation, run it and report (table, --json or --csv).
//! Two other paths share the command: `--contexts FILE` times a profile's
//! top call contexts and predicts the application's total time in the
//! routine; a spec with a `checkpoint` clause times its CRIU image instead
//! of a generated driver.

use super::keyword::keyword;
use super::output::{OutputArgs, ReportFormat};
use super::CmdResult;
use driver_gen::report::{format_csv_row, format_sweep, format_table, CSV_HEADER};
use driver_gen::{build_driver, flush_sweep, RunOptions};
use spec_lang::ast::{FlushMethod, Selection, TimerMethod};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Timing configuration shared by `tdg gen`, `tdg run` and `tdg explain`.
#[derive(clap::Args, Clone)]
pub struct TimingArgs {
    /// Timer (default: the spec's, else cycle).
    #[arg(long, value_parser = keyword::<TimerMethod>())]
    #[arg(help_heading = "Timing")]
    pub timer: Option<TimerMethod>,
    /// Number of timing samples (default: the spec's, else 7).
    #[arg(long)]
    #[arg(help_heading = "Timing")]
    pub samples: Option<u32>,
    /// Reported statistic (default: min for wall/cycle, median for cpu).
    #[arg(long, value_parser = keyword::<Selection>())]
    #[arg(help_heading = "Timing")]
    pub select: Option<Selection>,
    /// Cache flush before each timed call.
    #[arg(long, value_parser = keyword::<FlushMethod>())]
    #[arg(help_heading = "Timing")]
    pub flush: Option<FlushMethod>,
    /// Flush size(s) in KiB; several (comma-separated) run a flush sweep.
    #[arg(long = "flush-kb", alias = "flush-kib", value_delimiter = ',')]
    #[arg(help_heading = "Timing")]
    pub flush_kb: Vec<u64>,
    /// Flush sized from this cache level (1, 2, 3; twice its sysfs size).
    #[arg(long, conflicts_with = "flush_kb")]
    #[arg(help_heading = "Timing")]
    pub flush_level: Option<u8>,
    /// Flush on every CPU (for parallel routines).
    #[arg(long)]
    #[arg(help_heading = "Timing")]
    pub flush_all_cpus: bool,
    /// Shortest timed interval in ns (0: always one call per sample).
    #[arg(long)]
    #[arg(help_heading = "Timing")]
    pub min_interval_ns: Option<u64>,
    /// Pin the driver to this CPU; with --threads, thread k to the k-th of
    /// a list (default then: the CPUs tdg may use, from its affinity mask).
    #[arg(long, value_delimiter = ',', value_name = "CPU[,CPU...]")]
    #[arg(help_heading = "Timing")]
    pub pin: Vec<u32>,
    /// The routine's threads (default: the spec's threads, else 1): OpenMP's
    /// team size, exported as OMP_NUM_THREADS/OPENBLAS_NUM_THREADS for other
    /// runtimes, each thread pinned to its own CPU, wall or cycle time only.
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(spec_lang::ast::MAX_THREADS)))]
    #[arg(help_heading = "Timing")]
    pub threads: Option<u32>,
    /// Who writes the operands' pages first when threads > 1: the threads
    /// that use them (default), or the main thread.
    #[arg(long, value_name = "WHO", value_parser = ["threads", "main"])]
    #[arg(help_heading = "Timing")]
    pub first_touch: Option<String>,
    /// Spread the samples over at least this many milliseconds (default:
    /// the spec's min_time, else 100).
    #[arg(long, value_name = "MS")]
    #[arg(help_heading = "Timing")]
    pub min_time_ms: Option<u64>,
    /// Stop sampling after this many milliseconds; the result is then marked
    /// unstable if it has not settled (default: the spec's max_time, else 250).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    #[arg(help_heading = "Timing")]
    pub max_time_ms: Option<u64>,
    /// The estimator over the two halves of the samples must agree within
    /// this many per cent (default: the spec's stable, else 0.5).
    #[arg(long, value_name = "PCT", value_parser = positive_percent)]
    #[arg(help_heading = "Timing")]
    pub stable_pct: Option<f64>,
    /// Start the routine's code this many bytes past a 4096-byte boundary
    /// (0-4095; default: the spec's code_offset, else 0): its address
    /// modulo 4096 in the application (`nm APP | grep ROUTINE`) times it as
    /// placed there.
    #[arg(long, value_name = "BYTES",
          value_parser = clap::value_parser!(u32).range(0..i64::from(driver_gen::CODE_PAGE)))]
    #[arg(help_heading = "Timing")]
    pub code_offset: Option<u32>,
    /// Define a size macro, e.g. -D NS=4096 (repeatable).
    #[arg(short = 'D', value_name = "NAME=VALUE")]
    #[arg(help_heading = "Build")]
    pub define: Vec<String>,
}

impl TimingArgs {
    pub fn apply(&self, o: &mut RunOptions) -> anyhow::Result<()> {
        o.timing.timer = self.timer;
        o.timing.samples = self.samples;
        if o.timing.samples == Some(0) {
            return Err(formats::contract::usage("--samples must be at least 1"));
        }
        o.timing.selection = self.select;
        o.timing.flush = self.flush;
        o.timing.flush_kib = self.flush_kb.first().copied();
        o.timing.flush_level = self.flush_level;
        o.timing.flush_all_cpus = self.flush_all_cpus;
        o.timing.min_interval_ns = self.min_interval_ns;
        o.timing.pin_cpus = self.pin.clone();
        o.timing.threads = self.threads;
        o.timing.first_touch_main = self.first_touch.as_deref() == Some("main");
        o.timing.min_time_ms = self.min_time_ms;
        o.timing.max_time_ms = self.max_time_ms;
        o.timing.stable_pct = self.stable_pct;
        o.timing.code_offset = self.code_offset;
        o.defines = parse_defines(&self.define)?;
        // The one place a machine probe may start (and says so).
        o.machine = Some(driver_gen::machine_defaults());
        Ok(())
    }
}

/// A tolerance in per cent: a positive number.
fn positive_percent(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("`{text}` is not a positive percentage; e.g. 0.5")),
    }
}

pub fn parse_defines(defs: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    defs.iter()
        .map(|d| {
            let (k, v) = d.split_once('=').unwrap_or((d.as_str(), "1"));
            let ok = !k.is_empty()
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !k.starts_with(|c: char| c.is_ascii_digit());
            if !ok {
                return Err(formats::contract::usage(format!(
                    "-D {d}: expected NAME=VALUE with a C identifier as NAME, e.g. -D NS=4096"
                )));
            }
            Ok((k.to_string(), v.to_string()))
        })
        .collect()
}

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
    /// C compiler (default: $CC, cc, gcc, clang).
    #[arg(long)]
    #[arg(help_heading = "Build")]
    pub cc: Option<String>,
    /// Flags for the implementation, split as a shell would, e.g.
    /// --cflags "-O3 -DMSG='\"a b\"'".
    #[arg(long, allow_hyphen_values = true, default_value = "-O2", value_parser = super::words::words)]
    #[arg(help_heading = "Build")]
    pub cflags: super::words::Words,
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
    /// Stop the driver after this many seconds.
    #[arg(long, default_value_t = 600)]
    #[arg(help_heading = "Driver")]
    pub timeout: u64,
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

/// What `tdg run` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
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

impl ReportFormat for RunFormat {
    const FOR_PEOPLE: Self = RunFormat::Table;
    const JSON: Self = RunFormat::Json;
}

pub fn run(args: Args) -> CmdResult {
    let spec = load_spec(&args.spec, args.default_driver)?;
    if let tune::Target::Checkpoint { image } =
        tune::Target::of(&spec, &args.spec, args.default_driver).map_err(super::tune::tune_error)?
    {
        return run_checkpoint(&args, &image);
    }
    // Without --impl the spec's body is the implementation (kept alive
    // until the driver is built from it).
    let body_impl = match &args.implementation {
        Some(_) => None,
        None => Some(write_body_implementation(&spec)?),
    };
    let implementation = match (&args.implementation, &body_impl) {
        (Some(p), _) => p.as_path(),
        (None, Some(f)) => f.path(),
        (None, None) => unreachable!("one of the two is set above"),
    };
    let mut o = RunOptions {
        cc: args.cc.clone(),
        cflags: args.cflags.to_vec(),
        reps: args.reps,
        cold_code: args.cold_code,
        touch_pages: !args.no_touch,
        dummy_call: !args.no_dummy_call,
        overflow_guard: !args.no_overflow_guard,
        verify: !args.no_verify,
        timeout: Duration::from_secs(args.timeout),
        templates_dir: args.templates.clone(),
        extra_sources: args.extra.clone(),
        ..RunOptions::default()
    };
    args.timing.apply(&mut o)?;
    if body_impl.is_some() {
        // Checking the body against itself would prove nothing.
        o.verify = false;
        eprintln!(
            "tdg run: timing the body of `{}` in {} as the implementation (no --impl given; nothing to verify against)",
            spec.routine.name.name,
            args.spec.display()
        );
    }
    o.timing.tolerance = args.tolerance;
    add_env_params(&mut o.defines);
    // The -D values checked against the spec, located as `tdg check -D` does.
    let checked = spec_lang::load_with_defines(&args.spec, &o.defines)?;
    if !checked.warnings.is_empty() {
        eprintln!("{}", checked.warnings);
    }
    if let Some(path) = &args.contexts {
        return run_contexts(&args, &spec, implementation, &o, path);
    }
    let built = build_driver(&spec, implementation, &o)?;
    let reports = if args.timing.flush_kb.len() > 1 {
        flush_sweep(&built, &o, &args.timing.flush_kb)?
    } else {
        vec![built.run(&o)?]
    };
    print_reports(&args, &reports)?;
    Ok(ExitCode::SUCCESS)
}

/// The spec's body as a C file implementing the routine, or the reason
/// there is nothing to time.
fn write_body_implementation(
    spec: &spec_lang::ast::Spec,
) -> anyhow::Result<tempfile::NamedTempFile> {
    let Some(text) = driver_gen::model::body_as_implementation(spec) else {
        return Err(formats::contract::usage(format!(
            "--impl FILE is required: the C file implementing `{}` (a spec whose routine has a body {{ ... }} runs without one, timing the body; so does a spec with a checkpoint clause)",
            spec.routine.name.name
        )));
    };
    let mut file = tempfile::Builder::new()
        .prefix("tdg-body-")
        .suffix(".c")
        .tempfile()?;
    std::io::Write::write_all(&mut file, text.as_bytes())?;
    Ok(file)
}

/// `TDG_PARAM_NAME=VALUE` in the environment is `-D NAME=VALUE`, for tuners
/// that export a candidate's parameters; a `-D` on the command line wins.
pub fn add_env_params(defines: &mut Vec<(String, String)>) {
    for (name, value) in formats::contract::params_from_env(std::env::vars_os()) {
        if !defines.iter().any(|(k, _)| *k == name) {
            defines.push((name, value));
        }
    }
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
    use formats::Format;
    let format = output_format(args);
    let text = if args.cost_only {
        match reports {
            [r] => format!("{}\n", r.reported_ns * 1e-9),
            _ => {
                return Err(formats::contract::usage(
                    "--cost-only reports one time; give one --flush-kb size, not a sweep",
                ))
            }
        }
    } else {
        match format {
            Format::Json if reports.len() == 1 => formats::json_document("report", &reports[0])?,
            Format::Json => formats::json_document("reports", &reports)?,
            Format::Csv => std::iter::once(CSV_HEADER.to_string())
                .chain(reports.iter().map(format_csv_row))
                .map(|l| l + "\n")
                .collect(),
            Format::Gbench => {
                let run = formats::gbench::RunIdentity::new(
                    std::env::current_exe()?.display().to_string(),
                    env!("CARGO_PKG_VERSION"),
                    args.spec.clone(),
                    args.implementation.clone(),
                )?;
                let probe = probe::load_cached_from(&probe::cache_path()).ok().flatten();
                let doc = formats::gbench::document(
                    reports,
                    &run,
                    &formats::machine::this_machine(),
                    probe.as_ref(),
                    &formats::machine::date_now(),
                );
                serde_json::to_string_pretty(&doc)? + "\n"
            }
            Format::T4 => unreachable!("not a value of --format here"),
            Format::Table if reports.len() > 1 => {
                let mut s = format_sweep(reports);
                for w in &reports[0].warnings {
                    s.push_str(&format!("warning: {w}\n"));
                }
                s
            }
            Format::Table => format_table(&reports[0]),
        }
    };
    args.output.write(&text)
}

/// `--contexts`: Σ calls × driver time over the heaviest contexts, beside
/// the in-application total the profile measured.
fn run_contexts(
    args: &Args,
    spec: &spec_lang::ast::Spec,
    implementation: &Path,
    o: &RunOptions,
    path: &Path,
) -> CmdResult {
    // Refused before anything is built, not after.
    formats::table_or_json("tdg run --contexts", output_format(args), &(), String::new)?;
    let file = instrument::contexts::ContextsFile::load(path)?;
    let prediction =
        instrument::drive::predict_with_driver(spec, implementation, o, &file, args.top)?;
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
    if args.timing.code_offset.is_some() {
        return Err(formats::contract::usage(
            "--code-offset places the implementation in a generated driver; on a checkpoint the candidate is a shared library mapped by the restored process (add --default-driver to time it in a driver)",
        ));
    }
    let mut opts = checkpoint::TimeOptions {
        timeout: Duration::from_secs(args.timeout),
        ..Default::default()
    };
    if let Some(n) = args.timing.samples {
        if n == 0 {
            return Err(formats::contract::usage("--samples must be at least 1"));
        }
        opts.samples = n as usize;
    }
    let candidate = super::checkpoint::CandidateArgs {
        implementation: args.implementation.clone(),
        extra: args.extra.clone(),
        cflags: args.cflags.clone(),
        define: args.timing.define.clone(),
        cc: args.cc.clone(),
        no_verify: args.no_verify,
        tolerance: args
            .tolerance
            .unwrap_or(super::checkpoint::DEFAULT_TOLERANCE),
    };
    let format = if args.cost_only {
        None
    } else {
        Some(output_format(args))
    };
    super::checkpoint::time_with_candidate(
        image,
        &candidate,
        opts,
        format,
        args.output.out.as_deref(),
    )
}

/// The spec as `tdg run` and `tdg tune` use it. Timed on its checkpoint
/// image (a `checkpoint` clause, no `--default-driver`), the routine runs
/// with the application's own arguments, so the spec only needs to be sound
/// as a signature, as for the shim that captured the image; a prototype-only
/// spec then times and tunes candidates with no init written. Otherwise a
/// driver is generated from it, which needs everything `tdg check` asks for.
pub fn load_spec(path: &Path, default_driver: bool) -> anyhow::Result<spec_lang::ast::Spec> {
    let spec = spec_lang::load_prototype(path)?;
    if tune::Target::uses_checkpoint(&spec, default_driver) {
        return Ok(spec);
    }
    Ok(spec_lang::load(path)?)
}
