//! The application a subcommand runs (`sites`, `inapp`, `capture`): its
//! command line, how long it may run, and where the report goes.
use crate::args::output::TableOrJsonOutput;
use std::ffi::OsString;

#[derive(clap::Args)]
pub(super) struct ApplicationRun {
    /// Kill the application after this many seconds.
    #[arg(long, default_value_t = 600, value_parser = toolchain::time_limit_secs)]
    pub(super) timeout: u64,
    #[command(flatten)]
    pub(super) report: TableOrJsonOutput,
    /// The application and its arguments.
    #[arg(last = true, required = true)]
    pub(super) command: Vec<OsString>,
}
