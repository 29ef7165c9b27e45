//! `tdg checkpoint`: capture CRIU images of a running application and time
//! the region of interest by restoring them (logic in the `checkpoint` crate).
use super::CmdResult;
use checkpoint::stats::human_ns;
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
    Capture(CaptureArgs),
    /// Restore an image R times and report the region's time.
    Time(TimeArgs),
    /// Time call N of a region in plain runs of the application (the in-app reference).
    Inapp(InAppArgs),
    /// Write tdg_checkpoint.h and tdg_checkpoint.c (the host library) into a directory.
    Lib(LibArgs),
}

#[derive(clap::Args)]
struct CaptureArgs {
    /// Image directory to create (keep it on tmpfs, e.g. /dev/shm, for fast restores).
    #[arg(short, long)]
    output: PathBuf,
    /// Region site (the string passed to tdg_region_begin); default: the first one marked.
    #[arg(long)]
    site: Option<String>,
    /// Which call of the region to time (1-based).
    #[arg(long, default_value_t = 1)]
    call: u64,
    /// Checkpoint this many calls before the timed one (0: immediate).
    #[arg(long, default_value_t = 0, conflicts_with = "auto_delay")]
    delay: u64,
    /// Try delays 0, 1, 2, ... until successive medians agree within --threshold.
    #[arg(long)]
    auto_delay: bool,
    /// Relative agreement that ends --auto-delay.
    #[arg(long, default_value_t = 0.05, requires = "auto_delay")]
    threshold: f64,
    /// Largest delay --auto-delay tries.
    #[arg(long, default_value_t = 8, requires = "auto_delay")]
    max_delay: u64,
    /// Restores per delay for --auto-delay.
    #[arg(long, default_value_t = 11, requires = "auto_delay")]
    samples: usize,
    /// Kill the application after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// Print --auto-delay's table as JSON.
    #[arg(long)]
    json: bool,
    /// The application and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<OsString>,
}

#[derive(clap::Args)]
struct TimeArgs {
    /// Image directory written by `tdg checkpoint capture`.
    image: PathBuf,
    /// Number of restores (one timed region each).
    #[arg(short = 'r', long, default_value_t = 20)]
    samples: usize,
    /// Per-restore limit in seconds.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// JSON instead of text (same as --format json).
    #[arg(long, conflicts_with = "format")]
    json: bool,
    /// Output format: table or json.
    #[arg(long, value_enum)]
    format: Option<formats::Format>,
    /// Write the output to FILE (atomically) instead of stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

#[derive(clap::Args)]
struct InAppArgs {
    #[arg(long)]
    site: Option<String>,
    #[arg(long, default_value_t = 1)]
    call: u64,
    /// Number of plain runs of the application.
    #[arg(long, default_value_t = 10)]
    runs: usize,
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    #[arg(long)]
    json: bool,
    #[arg(last = true, required = true)]
    command: Vec<OsString>,
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
        Action::Lib(a) => lib(a),
    }
}

fn capture(a: CaptureArgs) -> CmdResult {
    let criu = checkpoint::find_criu()?;
    let req = checkpoint::CaptureRequest {
        command: a.command,
        image: a.output,
        site: a.site,
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
                // A restored copy is the application too: same limit.
                time: checkpoint::TimeOptions {
                    timeout: Duration::from_secs(a.timeout),
                    ..Default::default()
                },
            },
            &criu,
        )?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            print!("{}", report.render_text());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let out = checkpoint::capture(&req, &criu)?;
    let m = &out.manifest;
    eprintln!(
        "tdg: captured {} (region {}, call {}, delay {}; {:.1} MiB; whole run {:.1} ms)",
        req.image.display(),
        m.site.as_deref().unwrap_or("-"),
        m.call.map_or("-".into(), |c| c.to_string()),
        m.delay.map_or("-".into(), |d| d.to_string()),
        m.image_bytes() as f64 / (1024.0 * 1024.0),
        out.run_time.as_secs_f64() * 1e3
    );
    if let Some(code) = out.exit_code.filter(|&c| c != 0) {
        eprintln!("tdg: warning: the application exited with status {code} after the checkpoint");
    }
    Ok(ExitCode::SUCCESS)
}

fn time(a: TimeArgs) -> CmdResult {
    let format = formats::Format::chosen(a.format, a.json, false);
    // Refused before the restores, not after them.
    formats::table_or_json("tdg checkpoint time", format, &(), String::new)?;
    let report = checkpoint::time_image(
        &a.image,
        &checkpoint::TimeOptions {
            samples: a.samples,
            timeout: Duration::from_secs(a.timeout),
            ..Default::default()
        },
    )?;
    let text = formats::table_or_json("tdg checkpoint time", format, &report, || {
        report.render_text()
    })?;
    formats::write_document(a.out.as_deref(), &text)?;
    Ok(ExitCode::SUCCESS)
}

fn inapp(a: InAppArgs) -> CmdResult {
    let report = checkpoint::measure_in_app(&checkpoint::InAppRequest {
        command: a.command,
        site: a.site,
        call: a.call,
        runs: a.runs,
        timeout: Some(Duration::from_secs(a.timeout)),
    })?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let r = &report.region_ns;
        println!(
            "call {} in {} plain runs ({:.1} ms per run): min {}  median {}  mean {}  max {}",
            report.call,
            r.n,
            report.run_wall_ms.median,
            human_ns(r.min),
            human_ns(r.median),
            human_ns(r.mean),
            human_ns(r.max)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn lib(a: LibArgs) -> CmdResult {
    let lib = checkpoint::write_host_library(&a.output)?;
    println!(
        "wrote {} and {}",
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
