//! The image: `time` (restore it and time the region) and `validate` (its
//! samples against plain runs of the application, interleaved).
use crate::args::candidate::CandidateArgs;
use crate::args::output::TableOrJsonOutput;
use crate::cmd::CmdResult;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
#[command(next_help_heading = "Restores")]
pub(super) struct TimeArgs {
    /// Image directory written by `tdg checkpoint capture`.
    image: PathBuf,
    /// Exactly this many samples (one timed region each). Without it: 20,
    /// then more until the medians over the first and the second half of
    /// the samples agree within --stable-pct, or --max-time runs out.
    #[arg(short = 'r', long, value_parser = super::count(super::MAX_SAMPLES))]
    samples: Option<usize>,
    /// Without -r: sample until the halves' medians agree within this many per cent.
    #[arg(long, default_value_t = checkpoint::timing::StableRule::default().pct, conflicts_with = "samples")]
    stable_pct: f64,
    /// Without -r: stop sampling after this many seconds, stable or not.
    #[arg(long, default_value_t = 10, conflicts_with = "samples", value_parser = toolchain::time_limit_secs)]
    max_time: u64,
    /// Per-sample limit in seconds.
    #[arg(long, default_value_t = 60, value_parser = toolchain::time_limit_secs)]
    timeout: u64,
    /// One CRIU restore per sample instead of one restore forking a child
    /// per sample (slower; for comparison, or to rule the fork path out).
    #[arg(long)]
    restore_per_sample: bool,
    #[command(flatten)]
    report: TableOrJsonOutput,
    #[command(flatten)]
    candidate: CandidateArgs,
}

#[derive(clap::Args)]
pub(super) struct InfoArgs {
    /// Image directory written by `tdg checkpoint capture`.
    image: PathBuf,
    #[command(flatten)]
    report: TableOrJsonOutput,
}

pub(super) fn info(a: InfoArgs) -> CmdResult {
    let info = checkpoint::image_info(&a.image)?;
    a.report.write_report(&info, || info.render_text())?;
    Ok(ExitCode::SUCCESS)
}

pub(super) const VALIDATE_HELP: &str = "\
Verdicts: matches (the whole interval within --within), slower or faster (the whole interval beyond it), \
undecided (neither after --max-rounds). The interval is the sign test's for the median of the rounds' \
ratios (no assumption about how the host's noise is distributed; 6 rounds at least). \
Exit status 0 when the image matches, 8 otherwise (docs/integration.md).
A checkpoint image is trusted input: restoring it runs the code and data it holds as root.";

#[derive(Clone, Copy, clap::ValueEnum)]
enum ValidateClock {
    Auto,
    Wall,
    Cpu,
}

#[derive(clap::Args)]
#[command(next_help_heading = "Comparison")]
pub(super) struct ValidateArgs {
    /// Image directory written by `tdg checkpoint capture`.
    image: PathBuf,
    /// Rounds before a verdict may end the comparison.
    #[arg(long, default_value_t = 6, value_parser = super::count(super::MAX_RUNS))]
    min_rounds: usize,
    /// Rounds after which an undecided comparison ends.
    #[arg(long, default_value_t = 20, value_parser = super::count(super::MAX_RUNS))]
    max_rounds: usize,
    /// Plain runs of the application per round.
    #[arg(long, default_value_t = 1, value_parser = super::count(super::MAX_RUNS))]
    runs: usize,
    /// Samples of the image per round (one restore, a fork of it each).
    #[arg(short = 'r', long, default_value_t = 3, value_parser = super::count(super::MAX_SAMPLES))]
    samples: usize,
    /// The image matches when its time is within this fraction of the application's.
    #[arg(long, default_value_t = 0.10)]
    within: f64,
    /// Limit in seconds for one plain run, and for one sample of the image.
    #[arg(long, default_value_t = 600, value_parser = toolchain::time_limit_secs)]
    timeout: u64,
    /// One CRIU restore per image sample instead of a fork of one restore each.
    #[arg(long)]
    restore_per_sample: bool,
    /// The clock compared: auto is the call's CPU time when it takes 1 ms or
    /// more (wall time swings with the host's other tenants), wall time below.
    #[arg(long, value_enum, default_value_t = ValidateClock::Auto)]
    clock: ValidateClock,
    #[command(flatten)]
    report: TableOrJsonOutput,
    #[command(flatten)]
    candidate: CandidateArgs,
    /// The application and its arguments [default: the command the image was
    /// captured from, run in the directory it was captured in].
    #[arg(last = true)]
    command: Vec<OsString>,
}

pub(super) fn time(a: TimeArgs) -> CmdResult {
    crate::args::candidate::time_with_candidate(
        &a.image,
        &a.candidate,
        checkpoint::TimeOptions {
            samples: a
                .samples
                .unwrap_or(checkpoint::TimeOptions::default().samples),
            timeout: Duration::from_secs(a.timeout),
            restore_per_sample: a.restore_per_sample,
            until_stable: a.samples.is_none().then(|| checkpoint::timing::StableRule {
                pct: a.stable_pct,
                max_time: Duration::from_secs(a.max_time),
                ..Default::default()
            }),
            ..Default::default()
        },
        Some(match a.report.chosen() {
            crate::args::output::TableOrJson::Table => formats::Format::Table,
            crate::args::output::TableOrJson::Json => formats::Format::Json,
        }),
        a.report.out.as_deref(),
    )
}

pub(super) fn validate(a: ValidateArgs) -> CmdResult {
    let req = checkpoint::ValidateRequest {
        image: a.image,
        command: (!a.command.is_empty()).then_some(a.command),
        comparison: checkpoint::Comparison {
            min_rounds: a.min_rounds,
            max_rounds: a.max_rounds,
            runs_per_round: a.runs,
            samples_per_round: a.samples,
            tolerance: a.within,
            clock: match a.clock {
                ValidateClock::Auto => checkpoint::ClockChoice::Auto,
                ValidateClock::Wall => checkpoint::ClockChoice::Wall,
                ValidateClock::Cpu => checkpoint::ClockChoice::Cpu,
            },
            ..Default::default()
        },
        app_timeout: Some(Duration::from_secs(a.timeout)),
        time: checkpoint::TimeOptions {
            timeout: Duration::from_secs(a.timeout),
            restore_per_sample: a.restore_per_sample,
            ..Default::default()
        },
    };
    let report = match checkpoint::validate_candidate(&req, a.candidate.run()?.as_ref())? {
        checkpoint::ValidationOutcome::Validated(report) => report,
        checkpoint::ValidationOutcome::Differs(v) => {
            eprint!("tdg: {}", v.render_text());
            return Ok(ExitCode::from(formats::Failure::Verification.exit_code()));
        }
    };
    a.report.write_report(&report, || report.render_text())?;
    Ok(if report.verdict == checkpoint::Verdict::Matches {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(formats::contract::EXIT_CHECK_SAID_NO)
    })
}
