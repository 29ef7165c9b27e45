//! `tdg validate PROFILE --spec SPEC --impl IMPL.c`: one context's in-app
//! per-call distribution beside the driver's, warm and flushed, and which
//! cache state the application actually runs the routine in.
use super::CmdResult;
use crate::args::output::TableOrJsonOutput;
use driver_gen::contexts as drive;
use instrument::{format, report, specgen, validate};
use spec_lang::vocabulary::Keyword;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
#[command(next_help_heading = "Profile")]
pub struct Args {
    /// A profile written by `tdg profile`.
    profile: PathBuf,
    /// Spec of the profiled routine.
    #[arg(long)]
    spec: PathBuf,
    /// C file implementing the routine (what the driver times).
    #[arg(long = "impl", value_name = "FILE")]
    #[arg(help_heading = "Build")]
    implementation: PathBuf,
    /// More C files to link with the implementation.
    #[arg(long = "extra", value_name = "FILE")]
    #[arg(help_heading = "Build")]
    extra: Vec<PathBuf>,
    /// Context to validate (1 = most time in the application).
    #[arg(long, default_value_t = 1)]
    rank: usize,
    /// Routine in the profile [default: the spec's routine].
    #[arg(long)]
    routine: Option<String>,
    /// Calls of the context counted as "early" (cold start).
    #[arg(long, default_value_t = 4)]
    early: usize,
    /// Driver samples per cache state.
    #[arg(long, default_value_t = 21)]
    #[arg(help_heading = "Driver")]
    samples: u32,
    /// Flush size in KiB for the flushed run [default: the last-level cache].
    #[arg(long = "flush-kb")]
    #[arg(help_heading = "Driver")]
    flush_kb: Option<u64>,
    /// Pin the driver to this CPU.
    #[arg(long)]
    #[arg(help_heading = "Driver")]
    pin: Option<u32>,
    #[command(flatten, next_help_heading = "Build")]
    build: crate::args::build::BuildArgs,
    #[command(flatten)]
    output: TableOrJsonOutput,
}

pub fn run(a: Args) -> CmdResult {
    anyhow::ensure!(
        a.samples >= 3,
        "--samples must be at least 3 to compare distributions"
    );
    let spec = spec_lang::load(&a.spec, &[])?.for_use(spec_lang::Use::Driver)?;
    let (src, file) = (spec.source(), spec.file());
    let profile = format::read(&a.profile)?;
    let rep = report::build(
        &profile,
        &report::ReportOptions {
            routine: Some(
                a.routine
                    .clone()
                    .unwrap_or_else(|| spec.routine.name.name.clone()),
            ),
            early_calls: a.early,
        },
    )?;
    // Drive the spec edited to this context, so parameters that had no
    // Macro get one the -D overrides can reach.
    let derived = specgen::derive(&spec, src, file, &rep, a.rank, None)?;
    let opts = driver_gen::RunOptions {
        cc: a.build.cc.clone(),
        cflags: a.build.cflags.to_vec(),
        timing: driver_gen::TimingOverrides {
            samples: Some(a.samples),
            flush_kib: a.flush_kb,
            pin_cpus: a.pin.into_iter().collect(),
            ..Default::default()
        },
        extra_sources: a.extra.clone(),
        verify: false,
        timeout: Duration::from_secs(600),
        ..Default::default()
    };
    let (v, runs) = drive::validate_context(
        &derived.spec,
        &a.implementation,
        &opts,
        &rep,
        &derived.contexts,
        a.rank,
    )?;
    let json = serde_json::json!({
        "validation": v,
        "driver_warm": runs.warm,
        "driver_flushed": runs.flushed,
    });
    a.output.write_report(&json, || {
        format!(
            "{}driver flush: {} ({} KiB), {} call(s) per sample\n",
            validate::render(&v),
            runs.flushed.flush.spelling(),
            runs.flushed.flush_kib,
            runs.flushed.reps_per_sample
        )
    })?;
    Ok(ExitCode::SUCCESS)
}
