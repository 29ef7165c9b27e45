//! The application's markers, no image involved: `sites` (every marked site
//! in one plain run), `inapp` (a marked region timed in plain runs: the in-app
//! reference) and `lib` (the host library that marks the application).
use super::application::ApplicationRun;
use super::shim::RegionArgs;
use crate::cmd::CmdResult;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
#[command(next_help_heading = "Run")]
pub(super) struct SitesArgs {
    #[command(flatten)]
    app: ApplicationRun,
}

#[derive(clap::Args)]
#[command(next_help_heading = "In-app runs")]
pub(super) struct InAppArgs {
    #[command(flatten)]
    region: RegionArgs,
    /// Number of plain runs of the application.
    #[arg(long, default_value_t = 10, value_parser = super::count(super::MAX_RUNS), help_heading = "In-app runs")]
    runs: usize,
    #[command(flatten, next_help_heading = "In-app runs")]
    app: ApplicationRun,
}

#[derive(clap::Args)]
pub(super) struct LibArgs {
    /// Directory to write the header and source into.
    #[arg(short, long)]
    output: PathBuf,
}

pub(super) fn sites(a: SitesArgs) -> CmdResult {
    let report = checkpoint::list_sites(&a.app.command, Some(Duration::from_secs(a.app.timeout)))?;
    a.app
        .report
        .write_report(&report, || report.render_text())?;
    Ok(ExitCode::SUCCESS)
}

pub(super) fn inapp(a: InAppArgs) -> CmdResult {
    let scratch = toolchain::scratch_dir("tdg-inapp-shim")?;
    let (site, preload) = a.region.region(scratch.path())?;
    let report = checkpoint::measure_in_app(&checkpoint::InAppRequest {
        command: a.app.command,
        site,
        call: a.region.call,
        runs: a.runs,
        timeout: Some(Duration::from_secs(a.app.timeout)),
        preload,
    })?;
    a.app
        .report
        .write_report(&report, || report.render_text())?;
    Ok(ExitCode::SUCCESS)
}

pub(super) fn lib(a: LibArgs) -> CmdResult {
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
