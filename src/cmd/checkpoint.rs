//! `tdg checkpoint`: capture CRIU images of a running application and time
//! the region of interest by restoring them (logic in the `checkpoint` crate).
use super::CmdResult;
use crate::args::candidate::CandidateArgs;
use crate::args::output::TableOrJsonOutput;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Run the application and checkpoint it before call N-K of a marked region.
    #[command(after_help = checkpoint::IMAGES_ARE_TRUSTED)]
    Capture(CaptureArgs),
    /// Restore an image R times and report the region's time.
    #[command(after_help = checkpoint::IMAGES_ARE_TRUSTED)]
    Time(TimeArgs),
    /// Time call N of a region in plain runs of the application (the in-app reference).
    Inapp(InAppArgs),
    /// Compare an image with its application: plain runs (the call timed
    /// through the same markers or shim) and samples of the image alternate
    /// round by round; the ratio, its interval and a verdict.
    #[command(after_help = VALIDATE_HELP)]
    Validate(ValidateArgs),
    /// Write tdg_checkpoint.h, tdg_checkpoint.c and tdg_timing.h (the host library) into a directory.
    Lib(LibArgs),
    /// Run the application once and list every marked site: calls and per-call times.
    Sites(SitesArgs),
}

#[derive(clap::Args)]
#[command(next_help_heading = "Run")]
struct SitesArgs {
    /// Kill the application after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    #[command(flatten)]
    report: TableOrJsonOutput,
    /// The application and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<OsString>,
}

#[derive(clap::Args)]
#[command(next_help_heading = "Capture")]
struct CaptureArgs {
    /// Image directory to create (keep it on tmpfs, e.g. /dev/shm, for fast restores).
    #[arg(short, long)]
    output: PathBuf,
    /// Region site (the string passed to tdg_region_begin); default: the first one marked.
    #[arg(long, conflicts_with = "spec")]
    site: Option<String>,
    #[command(flatten)]
    shim: ShimArgs,
    /// Which call of the region to time (1-based).
    #[arg(long, default_value_t = 1)]
    call: u64,
    /// Checkpoint this many calls before the timed one (0: immediate).
    #[arg(long, default_value_t = 0, conflicts_with = "auto_delay")]
    delay: u64,
    /// Try delays 0, 1, 2, 4, 8, ... until two successive medians agree within
    /// --threshold and a much larger delay confirms it (or, with --inapp-runs,
    /// until one is within --threshold of the in-app median).
    #[arg(long)]
    #[arg(help_heading = "Auto delay")]
    auto_delay: bool,
    /// Relative agreement that ends --auto-delay.
    #[arg(long, default_value_t = 0.05, requires = "auto_delay")]
    #[arg(help_heading = "Auto delay")]
    threshold: f64,
    /// Largest delay --auto-delay tries (capped at --call - 1).
    #[arg(long, default_value_t = 64, requires = "auto_delay")]
    #[arg(help_heading = "Auto delay")]
    max_delay: u64,
    /// Time the call in this many plain runs first and choose the smallest
    /// delay that reproduces the in-app median (0: plateau rule only).
    #[arg(long, default_value_t = 0, requires = "auto_delay")]
    #[arg(help_heading = "Auto delay")]
    inapp_runs: usize,
    /// Restores per delay for --auto-delay.
    #[arg(long, default_value_t = 11, requires = "auto_delay")]
    #[arg(help_heading = "Auto delay")]
    samples: usize,
    /// Kill the application after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    #[command(flatten)]
    report: TableOrJsonOutput,
    /// The application and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<OsString>,
}

#[derive(clap::Args)]
#[command(next_help_heading = "Restores")]
struct TimeArgs {
    /// Image directory written by `tdg checkpoint capture`.
    image: PathBuf,
    /// Exactly this many samples (one timed region each). Without it: 20,
    /// then more until the medians over the first and the second half of
    /// the samples agree within --stable-pct, or --max-time runs out.
    #[arg(short = 'r', long)]
    samples: Option<usize>,
    /// Without -r: sample until the halves' medians agree within this many per cent.
    #[arg(long, default_value_t = checkpoint::timing::StableRule::default().pct, conflicts_with = "samples")]
    stable_pct: f64,
    /// Without -r: stop sampling after this many seconds, stable or not.
    #[arg(long, default_value_t = 10, conflicts_with = "samples")]
    max_time: u64,
    /// Per-sample limit in seconds.
    #[arg(long, default_value_t = 60)]
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

const VALIDATE_HELP: &str = "\
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
struct ValidateArgs {
    /// Image directory written by `tdg checkpoint capture`.
    image: PathBuf,
    /// Rounds before a verdict may end the comparison.
    #[arg(long, default_value_t = 6)]
    min_rounds: usize,
    /// Rounds after which an undecided comparison ends.
    #[arg(long, default_value_t = 20)]
    max_rounds: usize,
    /// Plain runs of the application per round.
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Samples of the image per round (one restore, a fork of it each).
    #[arg(short = 'r', long, default_value_t = 3)]
    samples: usize,
    /// The image matches when its time is within this fraction of the application's.
    #[arg(long, default_value_t = 0.10)]
    within: f64,
    /// Limit in seconds for one plain run, and for one sample of the image.
    #[arg(long, default_value_t = 600)]
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

#[derive(clap::Args)]
#[command(next_help_heading = "In-app runs")]
struct InAppArgs {
    #[arg(long, conflicts_with = "spec")]
    site: Option<String>,
    #[command(flatten)]
    shim: ShimArgs,
    #[arg(long, default_value_t = 1)]
    call: u64,
    /// Number of plain runs of the application.
    #[arg(long, default_value_t = 10)]
    runs: usize,
    /// Kill the application after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    #[command(flatten)]
    report: TableOrJsonOutput,
    /// The application and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<OsString>,
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
        let Some(spec_path) = &self.spec else {
            return Ok((site, None));
        };
        let spec = spec_lang::load_prototype(spec_path)?;
        let cc = toolchain::CCompiler::find(self.cc.as_deref())?;
        let shim = checkpoint::region_shim(&spec, spec_path, &self.include, &cc, scratch).map_err(
            |e| match e {
                // Printed as every spec error is: located, with a caret.
                checkpoint::RegionShimError::Spec(d) => anyhow::Error::from(d),
                other => other.into(),
            },
        )?;
        Ok((Some(shim.site), Some(shim.shared_object)))
    }
}

#[derive(clap::Args)]
struct LibArgs {
    /// Directory to write the header and source into.
    #[arg(short, long)]
    output: PathBuf,
}

pub fn run(args: Args) -> CmdResult {
    match args.action {
        Action::Capture(a) => capture(a),
        Action::Time(a) => time(a),
        Action::Inapp(a) => inapp(a),
        Action::Validate(a) => validate(a),
        Action::Lib(a) => lib(a),
        Action::Sites(a) => sites(a),
    }
}

fn sites(a: SitesArgs) -> CmdResult {
    let report = checkpoint::list_sites(&a.command, Some(Duration::from_secs(a.timeout)))?;
    a.report.write_report(&report, || report.render_text())?;
    Ok(ExitCode::SUCCESS)
}

fn capture(a: CaptureArgs) -> CmdResult {
    let criu = checkpoint::find_criu()?;
    // Kept until the capture ends: the capture copies the shim into the image.
    let scratch = toolchain::scratch_dir("tdg-capture-shim")?;
    let (site, preload) = a.shim.region(a.site, scratch.path())?;
    let req = checkpoint::CaptureRequest {
        command: a.command,
        image: a.output,
        site,
        preload,
        call: a.call,
        delay: a.delay,
        timeout: Some(Duration::from_secs(a.timeout)),
        quiet: a.auto_delay,
    };
    if a.auto_delay {
        let report = checkpoint::auto_delay(
            &checkpoint::AutoDelayRequest {
                capture: req,
                samples: a.samples,
                threshold: a.threshold,
                max_delay: a.max_delay,
                in_app_runs: a.inapp_runs,
                // A restored copy is the application too: same limit.
                time: checkpoint::TimeOptions {
                    timeout: Duration::from_secs(a.timeout),
                    ..Default::default()
                },
            },
            &criu,
        )?;
        a.report.write_report(&report, || report.render_text())?;
        return Ok(ExitCode::SUCCESS);
    }
    let out = checkpoint::capture(&req, &criu)?;
    let table = out.render_text(&req.image);
    if a.report.is_json() || a.report.out.is_some() {
        a.report
            .write_report(&out.document(&req.image), || table.clone())?;
    } else {
        // The application's own output owns stdout.
        eprint!("{table}");
    }
    Ok(ExitCode::SUCCESS)
}

fn time(a: TimeArgs) -> CmdResult {
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

fn validate(a: ValidateArgs) -> CmdResult {
    let mut time = checkpoint::TimeOptions {
        timeout: Duration::from_secs(a.timeout),
        restore_per_sample: a.restore_per_sample,
        ..Default::default()
    };
    let scratch = toolchain::scratch_dir("tdg-candidate")?;
    if let Some(run) = a.candidate.run()? {
        let so = checkpoint::build_candidate(&run.source, scratch.path(), "candidate")?;
        if run.verify {
            let timer = checkpoint::ImageTimer::open(&a.image, &time)?;
            let v = timer.verify(&so, run.tolerance)?;
            if v.mismatch.is_some() {
                eprint!("tdg: {}", v.render_text());
                return Ok(ExitCode::from(formats::Failure::Verification.exit_code()));
            }
            time.verify = false; // just checked
        }
        time.candidate = Some(so);
    }
    let report = checkpoint::validate(&checkpoint::ValidateRequest {
        image: a.image,
        command: (!a.command.is_empty()).then_some(a.command),
        min_rounds: a.min_rounds,
        max_rounds: a.max_rounds,
        runs_per_round: a.runs,
        samples_per_round: a.samples,
        tolerance: a.within,
        app_timeout: Some(Duration::from_secs(a.timeout)),
        time,
        clock: match a.clock {
            ValidateClock::Auto => checkpoint::validate::ClockChoice::Auto,
            ValidateClock::Wall => checkpoint::validate::ClockChoice::Wall,
            ValidateClock::Cpu => checkpoint::validate::ClockChoice::Cpu,
        },
        ..Default::default()
    })?;
    a.report.write_report(&report, || report.render_text())?;
    Ok(if report.verdict == checkpoint::Verdict::Matches {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(formats::contract::EXIT_CHECK_SAID_NO)
    })
}

fn inapp(a: InAppArgs) -> CmdResult {
    let scratch = toolchain::scratch_dir("tdg-inapp-shim")?;
    let (site, preload) = a.shim.region(a.site, scratch.path())?;
    let report = checkpoint::measure_in_app(&checkpoint::InAppRequest {
        command: a.command,
        site,
        call: a.call,
        runs: a.runs,
        timeout: Some(Duration::from_secs(a.timeout)),
        preload,
    })?;
    a.report.write_report(&report, || report.render_text())?;
    Ok(ExitCode::SUCCESS)
}

fn lib(a: LibArgs) -> CmdResult {
    let lib = checkpoint::write_host_library(&a.output)?;
    println!(
        "wrote {} and {} (with the tdg_timing.h they include)",
        lib.header.display(),
        lib.source.display()
    );
    println!(
        "build: cc -O2 -I{} app.c {} -o app   (libcriu is loaded at run time; no -lcriu)",
        lib.dir.display(),
        lib.source.display()
    );
    Ok(ExitCode::SUCCESS)
}
