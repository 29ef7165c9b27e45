//! `tdg run SPEC --impl kernel.c`: build the driver against an
//! implementation, run it and report (table, --json or --csv).
//! Two other paths share the command: `--contexts FILE` times a profile's
//! top call contexts and predicts the application's total time in the
//! routine; a spec with a `checkpoint` clause times its CRIU image instead
//! of a generated driver.

use super::keyword::keyword;
use super::CmdResult;
use anyhow::bail;
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
    pub timer: Option<TimerMethod>,
    /// Number of timing samples (default: the spec's, else 7).
    #[arg(long)]
    pub samples: Option<u32>,
    /// Reported statistic (default: min for wall/cycle, median for cpu).
    #[arg(long, value_parser = keyword::<Selection>())]
    pub select: Option<Selection>,
    /// Cache flush before each timed call.
    #[arg(long, value_parser = keyword::<FlushMethod>())]
    pub flush: Option<FlushMethod>,
    /// Flush size(s) in KiB; several (comma-separated) run a flush sweep.
    #[arg(long = "flush-kb", alias = "flush-kib", value_delimiter = ',')]
    pub flush_kb: Vec<u64>,
    /// Flush sized from this cache level (1, 2, 3; twice its sysfs size).
    #[arg(long, conflicts_with = "flush_kb")]
    pub flush_level: Option<u8>,
    /// Flush on every CPU (for parallel routines).
    #[arg(long)]
    pub flush_all_cpus: bool,
    /// Shortest timed interval in ns (0: always one call per sample).
    #[arg(long)]
    pub min_interval_ns: Option<u64>,
    /// Pin the driver to this CPU.
    #[arg(long)]
    pub pin: Option<u32>,
    /// Define a size macro, e.g. -D NS=4096 (repeatable).
    #[arg(short = 'D', value_name = "NAME=VALUE")]
    pub define: Vec<String>,
}

impl TimingArgs {
    pub fn apply(&self, o: &mut RunOptions) -> anyhow::Result<()> {
        o.timing.timer = self.timer;
        o.timing.samples = self.samples;
        if o.timing.samples == Some(0) {
            bail!("--samples must be at least 1");
        }
        o.timing.selection = self.select;
        o.timing.flush = self.flush;
        o.timing.flush_kib = self.flush_kb.first().copied();
        o.timing.flush_level = self.flush_level;
        o.timing.flush_all_cpus = self.flush_all_cpus;
        o.timing.min_interval_ns = self.min_interval_ns;
        o.timing.pin_cpu = self.pin;
        o.defines = parse_defines(&self.define)?;
        // The one place a machine probe may start (and says so).
        o.machine = Some(driver_gen::machine_defaults());
        Ok(())
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
                bail!("-D {d}: expected NAME=VALUE with a C identifier as NAME, e.g. -D NS=4096");
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
    pub implementation: Option<PathBuf>,
    /// Time the top call contexts of this contexts file (written by
    /// `tdg spec-from-profile`) and predict the application's total time.
    #[arg(long, value_name = "FILE", conflicts_with = "flush_kb")]
    pub contexts: Option<PathBuf>,
    /// How many contexts `--contexts` times, heaviest first.
    #[arg(long, default_value_t = 3, requires = "contexts")]
    pub top: usize,
    /// Ignore the spec's `checkpoint` clause and time --impl with a generated driver.
    #[arg(long)]
    pub default_driver: bool,
    /// More C files to link with the implementation.
    #[arg(long = "extra", value_name = "FILE")]
    pub extra: Vec<PathBuf>,
    /// C compiler (default: $CC, cc, gcc, clang).
    #[arg(long)]
    pub cc: Option<String>,
    /// Flags for the implementation, e.g. --cflags "-O3 -march=native".
    #[arg(long, allow_hyphen_values = true, default_value = "-O2")]
    pub cflags: String,
    #[command(flatten)]
    pub timing: TimingArgs,
    /// Force this many calls per sample.
    #[arg(long)]
    pub reps: Option<u64>,
    /// Do not write every operand page before timing (shows lazy page zeroing).
    #[arg(long)]
    pub no_touch: bool,
    /// No untimed call before timing (shows instruction-load cost).
    #[arg(long)]
    pub no_dummy_call: bool,
    /// No alpha alternation / output restoring.
    #[arg(long)]
    pub no_overflow_guard: bool,
    /// Skip checking the outputs against the spec's reference body.
    #[arg(long)]
    pub no_verify: bool,
    /// Relative verification tolerance.
    #[arg(long)]
    pub tolerance: Option<f64>,
    /// Stop the driver after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// Directory whose templates override the built-in ones.
    #[arg(long)]
    pub templates: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the report as CSV.
    #[arg(long)]
    pub csv: bool,
}

pub fn run(args: Args) -> CmdResult {
    let spec = spec_lang::load(&args.spec)?;
    if let (Some(clause), false) = (&spec.checkpoint, args.default_driver) {
        return run_checkpoint(&args, clause);
    }
    let Some(implementation) = args.implementation.as_deref() else {
        bail!(
            "--impl FILE is required: the C file implementing `{}` (only specs with a checkpoint clause run without one)",
            spec.routine.name.name
        );
    };
    let mut o = RunOptions {
        cc: args.cc.clone(),
        cflags: args.cflags.split_whitespace().map(String::from).collect(),
        reps: args.reps,
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
    o.timing.tolerance = args.tolerance;
    // The -D values checked against the spec, located as `tdg check -D` does.
    spec_lang::load_with_defines(&args.spec, &o.defines)?;
    if let Some(path) = &args.contexts {
        return run_contexts(&args, &spec, implementation, &o, path);
    }
    let built = build_driver(&spec, implementation, &o)?;
    let reports = if args.timing.flush_kb.len() > 1 {
        flush_sweep(&built, &o, &args.timing.flush_kb)?
    } else {
        vec![built.run(&o)?]
    };
    if args.json {
        let text = if reports.len() == 1 {
            serde_json::to_string_pretty(&reports[0])?
        } else {
            serde_json::to_string_pretty(&reports)?
        };
        println!("{text}");
    } else if args.csv {
        println!("{CSV_HEADER}");
        for r in &reports {
            println!("{}", format_csv_row(r));
        }
    } else if reports.len() > 1 {
        print!("{}", format_sweep(&reports));
        for w in &reports[0].warnings {
            println!("warning: {w}");
        }
    } else {
        print!("{}", format_table(&reports[0]));
    }
    Ok(ExitCode::SUCCESS)
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
    let file = instrument::contexts::ContextsFile::load(path)?;
    let prediction =
        instrument::drive::predict_with_driver(spec, implementation, o, &file, args.top)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&prediction)?);
    } else {
        print!("{}", instrument::contexts::render_prediction(&prediction));
    }
    Ok(ExitCode::SUCCESS)
}

/// A spec with a `checkpoint` clause: restore its image and time the region
/// on the application's own data.
fn run_checkpoint(args: &Args, clause: &spec_lang::ast::CheckpointClause) -> CmdResult {
    let mut opts = checkpoint::TimeOptions {
        timeout: Duration::from_secs(args.timeout),
        ..Default::default()
    };
    if let Some(n) = args.timing.samples {
        if n == 0 {
            bail!("--samples must be at least 1");
        }
        opts.samples = n as usize;
    }
    let image = checkpoint::clause_image(clause, spec_dir(&args.spec))?;
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
    super::checkpoint::time_with_candidate(&image, &candidate, opts, args.json)
}

/// The directory a spec's relative paths (a checkpoint image) start from.
pub fn spec_dir(spec: &Path) -> &Path {
    spec.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}
