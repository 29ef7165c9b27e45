//! `tdg checkpoint`: capture CRIU images of a running application and time
//! the region of interest by restoring them. The logic is the `checkpoint`
//! crate's; these files parse arguments, call it and print. One file per
//! group: capturing, the image (time, validate), the application (sites,
//! inapp, lib).
mod app;
mod capture;
mod image;

use super::CmdResult;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Run the application and checkpoint it before call N-K of a marked region.
    #[command(after_help = checkpoint::IMAGES_ARE_TRUSTED)]
    Capture(capture::CaptureArgs),
    /// Restore an image R times and report the region's time.
    #[command(after_help = checkpoint::IMAGES_ARE_TRUSTED)]
    Time(image::TimeArgs),
    /// Time call N of a region in plain runs of the application (the in-app reference).
    Inapp(app::InAppArgs),
    /// Compare an image with its application: plain runs (the call timed
    /// through the same markers or shim) and samples of the image alternate
    /// round by round; the ratio, its interval and a verdict.
    #[command(after_help = image::VALIDATE_HELP)]
    Validate(image::ValidateArgs),
    /// Write tdg_checkpoint.h, tdg_checkpoint.c and tdg_timing.h (the host library) into a directory.
    Lib(app::LibArgs),
    /// Run the application once and list every marked site: calls and per-call times.
    Sites(app::SitesArgs),
}

pub fn run(args: Args) -> CmdResult {
    match args.action {
        Action::Capture(a) => capture::capture(a),
        Action::Time(a) => image::time(a),
        Action::Inapp(a) => app::inapp(a),
        Action::Validate(a) => image::validate(a),
        Action::Lib(a) => app::lib(a),
        Action::Sites(a) => app::sites(a),
    }
}

/// The region as a routine of an unmodified application (capture, inapp).
#[derive(clap::Args)]
#[command(next_help_heading = "Region shim")]
struct ShimArgs {
    /// Spec of a routine the unmodified application calls through a shared
    /// library: an LD_PRELOAD shim makes each call of it the region (no
    /// markers, no rebuild); the site is the routine's name.
    #[arg(long, value_name = "SPEC")]
    spec: Option<PathBuf>,
    /// Include directory for the spec's include= clauses [default: the spec's directory].
    #[arg(short = 'I', value_name = "DIR", requires = "spec")]
    include: Vec<PathBuf>,
    /// C compiler for the shim [default: $CC, cc, gcc, clang].
    #[arg(long, requires = "spec")]
    cc: Option<String>,
}

impl ShimArgs {
    /// With --spec: the site (the routine's name) and the region shim,
    /// built in `scratch`. Without: `site` as given, no shim.
    fn region(
        &self,
        site: Option<String>,
        scratch: &std::path::Path,
    ) -> anyhow::Result<(Option<String>, Option<PathBuf>)> {
        let Some(spec) = &self.spec else {
            return Ok((site, None));
        };
        let shim =
            checkpoint::region_shim_for_spec(spec, &self.include, self.cc.as_deref(), scratch)
                .map_err(|e| match e {
                    // Printed as every spec error is: located, with a caret.
                    checkpoint::RegionShimError::Spec(d) => anyhow::Error::from(d),
                    other => other.into(),
                })?;
        Ok((Some(shim.site), Some(shim.shared_object)))
    }
}
