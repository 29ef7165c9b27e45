//! `--impl` and its build options for a candidate run in restored copies
//! of a checkpoint (`tdg checkpoint time`, `tdg run` on a checkpoint spec).

use super::build::BuildArgs;
use super::defines::{define, with_env_params};
use crate::cmd::CmdResult;
use std::path::PathBuf;
use std::process::ExitCode;

/// A candidate implementation for the restored copies (`--impl`).
#[derive(clap::Args, Clone)]
#[command(next_help_heading = "Candidate")]
pub struct CandidateArgs {
    /// C file implementing the routine the application calls through
    /// TDG_ROUTINE (same name and signature); every restored copy runs it for
    /// the delay calls and the timed call. Without it: the application's code.
    #[arg(long = "impl", value_name = "FILE")]
    pub implementation: Option<PathBuf>,
    /// More C files for the candidate's shared object.
    #[arg(long = "extra", value_name = "FILE", requires = "implementation")]
    pub extra: Vec<PathBuf>,
    #[command(flatten)]
    pub build: BuildArgs,
    /// Define a macro for the candidate, e.g. -D CUTOFF=64 (repeatable).
    #[arg(short = 'D', value_name = "NAME=VALUE", requires = "implementation", value_parser = define)]
    pub define: Vec<(String, String)>,
    /// Skip comparing the candidate's outputs with the original's on the image.
    #[arg(long, requires = "implementation")]
    pub no_verify: bool,
    /// Relative tolerance for floating-point outputs.
    #[arg(long, default_value_t = checkpoint::DEFAULT_TOLERANCE, requires = "implementation")]
    pub tolerance: f64,
}

impl CandidateArgs {
    /// The candidate as the checkpoint crate runs it: `-D` values from the
    /// command line, then `TDG_PARAM_*`; `None` without `--impl`.
    pub fn run(&self) -> anyhow::Result<Option<checkpoint::CandidateRun>> {
        let Some(implementation) = &self.implementation else {
            return Ok(None);
        };
        Ok(Some(checkpoint::CandidateRun {
            source: checkpoint::CandidateSource {
                implementation: implementation.clone(),
                extra: self.extra.clone(),
                cflags: self.build.cflags.to_vec(),
                defines: with_env_params(self.define.clone()),
                cc: self.build.cc.clone(),
            },
            verify: !self.no_verify,
            tolerance: self.tolerance,
        }))
    }
}

/// Time `image` with the application's code or, with `--impl`, the
/// candidate after verifying it against the original on the image (the
/// contract's verification status when its outputs differ), written in
/// `format`, or only the median in seconds when `format` is `None`
/// (`--cost-only`). Shared by `checkpoint time` and `tdg run` on a spec with
/// a checkpoint clause.
pub fn time_with_candidate(
    image: &std::path::Path,
    candidate: &CandidateArgs,
    opts: checkpoint::TimeOptions,
    format: Option<formats::Format>,
    out: Option<&std::path::Path>,
) -> CmdResult {
    // Refused before the restores, not after them.
    if let Some(format) = format {
        formats::table_or_json("tdg checkpoint time", format, &(), String::new)?;
    }
    let timing = checkpoint::time_with_candidate(image, candidate.run()?.as_ref(), opts)?;
    let report = match &timing {
        checkpoint::CandidateTiming::Differs(v) => {
            eprint!("tdg: {}", v.render_text());
            return Ok(ExitCode::from(formats::Failure::Verification.exit_code()));
        }
        checkpoint::CandidateTiming::Timed { report, .. } => report,
    };
    let text = match format {
        // The one figure a tuner reads (--cost-only): seconds.
        None => format!("{}\n", report.region_ns.median * 1e-9),
        Some(format) => {
            formats::table_or_json("tdg checkpoint time", format, &timing.document(), || {
                timing.render_text()
            })?
        }
    };
    formats::write_document(out, &text)?;
    Ok(ExitCode::SUCCESS)
}
