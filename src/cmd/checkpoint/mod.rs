//! `tdg checkpoint`: capture CRIU images of a running application and time
//! the region of interest by restoring them. The logic is the `checkpoint`
//! crate's; these files parse arguments, call it and print. One file per
//! group: capturing, the image (time, info, validate), the application's markers
//! (sites, inapp, lib), and what `capture`, `sites` and `inapp` share: the
//! application run and the region shim.
mod application;
mod capture;
mod image;
mod markers;
mod shim;

use super::CmdResult;

/// Samples one restored copy can take (MAX_SAMPLES in tdg_checkpoint.c).
const MAX_SAMPLES: u64 = 1_000_000;
/// Plain runs, rounds and restores: far past any comparison's need, and
/// small enough to allocate for.
const MAX_RUNS: u64 = 100_000;

/// A count option: 1 to `max`, anything else a usage error naming the range.
fn count(max: u64) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..=max)
}

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
    Inapp(markers::InAppArgs),
    /// What an image holds and what its restored copies get in place of
    /// each file the application had open (a private copy, /dev/null, ...).
    Info(image::InfoArgs),
    /// Compare an image with its application: plain runs (the call timed
    /// through the same markers or shim) and samples of the image alternate
    /// round by round; the ratio, its interval and a verdict.
    #[command(after_help = image::VALIDATE_HELP)]
    Validate(image::ValidateArgs),
    /// Write tdg_checkpoint.h, tdg_checkpoint.c and tdg_timing.h (the host library) into a directory.
    Lib(markers::LibArgs),
    /// Run the application once and list every marked site: calls and per-call times.
    Sites(markers::SitesArgs),
}

pub fn run(args: Args) -> CmdResult {
    match args.action {
        Action::Capture(a) => capture::capture(a),
        Action::Time(a) => image::time(a),
        Action::Inapp(a) => markers::inapp(a),
        Action::Validate(a) => image::validate(a),
        Action::Info(a) => image::info(a),
        Action::Lib(a) => markers::lib(a),
        Action::Sites(a) => markers::sites(a),
    }
}
