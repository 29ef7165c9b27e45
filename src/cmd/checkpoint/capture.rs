//! `tdg checkpoint capture`: one image at a given delay, or `--auto-delay`.
use super::application::ApplicationRun;
use super::shim::RegionArgs;
use crate::cmd::CmdResult;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
#[command(next_help_heading = "Capture")]
pub(super) struct CaptureArgs {
    /// Image directory to create (keep it on tmpfs, e.g. /dev/shm, for fast restores).
    #[arg(short, long)]
    output: PathBuf,
    #[command(flatten)]
    region: RegionArgs,
    /// Checkpoint this many calls before the timed one (0: immediate).
    #[arg(
        long,
        default_value_t = 0,
        conflicts_with = "auto_delay",
        help_heading = "Capture"
    )]
    delay: u64,
    /// Try delays 0, 1, 2, 4, 8, ... until two successive medians agree within
    /// --threshold and a much larger delay confirms it; with --reference app,
    /// until one's samples match the application (interleaved, as `checkpoint
    /// validate`); with --inapp-runs, until one is within --threshold of the
    /// in-app median.
    #[arg(long)]
    #[arg(help_heading = "Auto delay")]
    auto_delay: bool,
    /// What --auto-delay holds each delay against.
    #[arg(long, value_enum, default_value_t = Reference::Delays, requires = "auto_delay")]
    #[arg(help_heading = "Auto delay")]
    reference: Reference,
    /// Relative agreement that ends --auto-delay [default: 0.05 between
    /// delays, 0.10 against the application].
    #[arg(long, requires = "auto_delay")]
    #[arg(help_heading = "Auto delay")]
    threshold: Option<f64>,
    /// Largest delay --auto-delay tries (capped at --call - 1); with
    /// --reference app, larger ones (doubling, up to --call - 1) while each
    /// brings the copy nearer the application.
    #[arg(long, default_value_t = 64, requires = "auto_delay")]
    #[arg(help_heading = "Auto delay")]
    max_delay: u64,
    /// Time the call in this many plain runs first and choose the smallest
    /// delay that reproduces the in-app median (not interleaved; --reference
    /// app compares side by side).
    #[arg(long, requires = "auto_delay", conflicts_with = "reference", value_parser = super::count(super::MAX_RUNS))]
    #[arg(help_heading = "Auto delay")]
    inapp_runs: Option<usize>,
    /// With --reference app: rounds after which a delay's comparison ends
    /// undecided (6 at least; a verdict ends it sooner).
    #[arg(long, default_value_t = 20, requires = "auto_delay", value_parser = super::count(super::MAX_RUNS))]
    #[arg(help_heading = "Auto delay")]
    max_rounds: usize,
    /// Restores per delay for --auto-delay (with --reference app: samples
    /// of the image per round).
    #[arg(long, requires = "auto_delay", value_parser = super::count(super::MAX_SAMPLES))]
    #[arg(help_heading = "Auto delay")]
    samples: Option<usize>,
    #[command(flatten, next_help_heading = "Capture")]
    app: ApplicationRun,
}

/// What `--auto-delay` holds a delay's samples against.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Reference {
    /// The next delays: two successive ones agree and a larger one confirms.
    Delays,
    /// The application: plain runs interleaved with the image's samples.
    App,
}

pub(super) fn capture(a: CaptureArgs) -> CmdResult {
    let criu = checkpoint::find_criu()?;
    // Kept until the capture ends: the capture copies the shim into the image.
    let scratch = toolchain::scratch_dir("tdg-capture-shim")?;
    let (site, preload) = a.region.region(scratch.path())?;
    let req = checkpoint::CaptureRequest {
        command: a.app.command,
        image: a.output,
        site,
        preload,
        call: a.region.call,
        delay: a.delay,
        timeout: Some(Duration::from_secs(a.app.timeout)),
        quiet: a.auto_delay,
    };
    if a.auto_delay {
        let report = checkpoint::auto_delay(
            &checkpoint::AutoDelayRequest {
                capture: req,
                samples: a.samples.unwrap_or(11),
                threshold: a.threshold.unwrap_or(0.05),
                max_delay: a.max_delay,
                reference: match (a.reference, a.inapp_runs) {
                    (Reference::App, _) => {
                        let c = checkpoint::Comparison::default();
                        checkpoint::DelayReference::Application(checkpoint::Comparison {
                            tolerance: a.threshold.unwrap_or(c.tolerance),
                            samples_per_round: a.samples.unwrap_or(c.samples_per_round),
                            max_rounds: a.max_rounds,
                            ..c
                        })
                    }
                    (Reference::Delays, Some(runs)) => {
                        checkpoint::DelayReference::InAppMedian { runs }
                    }
                    (Reference::Delays, None) => checkpoint::DelayReference::Delays,
                },
                // A restored copy is the application too: same limit.
                time: checkpoint::TimeOptions {
                    timeout: Duration::from_secs(a.app.timeout),
                    ..Default::default()
                },
            },
            &criu,
        )?;
        a.app
            .report
            .write_report(&report, || report.render_text())?;
        return Ok(ExitCode::SUCCESS);
    }
    let out = checkpoint::capture(&req, &criu)?;
    let table = out.render_text(&req.image);
    if a.app.report.is_json() || a.app.report.out.is_some() {
        a.app
            .report
            .write_report(&out.document(&req.image), || table.clone())?;
    } else {
        // The application's own output owns stdout.
        eprint!("{table}");
    }
    Ok(ExitCode::SUCCESS)
}
