//! `tdg`: timing-driver generator for empirical performance tuning.

mod args;
mod cmd;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "tdg", version, about, propagate_version = true)]
struct Cli {
    /// More log output (-v: debug, -vv: trace).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Only errors.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate spec files: say per use (driver, profile, checkpoint) whether each serves it.
    Check(cmd::check::Args),
    /// Rewrite a spec in canonical layout (or only check it is).
    Fmt(cmd::fmt::Args),
    /// Say in words what the driver will do with each operand.
    Explain(cmd::explain::Args),
    /// Write the C timing driver and its build file for a spec.
    Gen(cmd::gen::Args),
    /// Build the driver against an implementation, run it and report.
    Run(cmd::run::Args),
    /// Run a program with the routine profiled, or report on a profile.
    Profile(cmd::profile::Args),
    /// Generate the profiling interposer (LD_PRELOAD shim or --wrap object) for a spec.
    Instrument(cmd::instrument::Args),
    /// Turn a profile into a spec whose defaults are the dominant call context.
    SpecFromProfile(cmd::spec_from_profile::Args),
    /// Compare the in-application per-call distribution with the driver's.
    Validate(cmd::validate::Args),
    /// Capture and time CRIU checkpoints of a running application.
    Checkpoint(cmd::checkpoint::Args),
    /// Report whether this machine can checkpoint, time and profile, and how to fix what is missing.
    Doctor(cmd::doctor::Args),
    /// Measure cache sizes, latencies and timer properties of this machine.
    Probe(cmd::probe::Args),
    /// One self-contained HTML page for campaigns, profiles, probes, checkpoints and runs.
    Report(cmd::report::Args),
    /// Search implementation parameters with the driver as the objective.
    // Boxed: its campaign and checkpoint options make it far larger than the others.
    Tune(Box<cmd::tune::Args>),
    /// Make a program faster: profile the routine in it, tune the candidate
    /// on faithful targets of its contexts, deploy it into the unmodified
    /// program and prove the gain there.
    Autotune(cmd::autotune::Args),
    /// Print a shell completion script.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// The command line with the exit-status table as `tdg --help`'s footer,
/// from the one table docs/integration.md also holds.
fn command() -> clap::Command {
    Cli::command().after_help(formats::contract::exit_status_help())
}

fn main() -> ExitCode {
    let cli = match Cli::from_arg_matches(&command().get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    init_logging(cli.verbose, cli.quiet);
    let result = match cli.command {
        Command::Check(a) => cmd::check::run(a),
        Command::Fmt(a) => cmd::fmt::run(a),
        Command::Explain(a) => cmd::explain::run(a),
        Command::Gen(a) => cmd::gen::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Profile(a) => cmd::profile::run(a),
        Command::Instrument(a) => cmd::instrument::run(a),
        Command::SpecFromProfile(a) => cmd::spec_from_profile::run(a),
        Command::Validate(a) => cmd::validate::run(a),
        Command::Checkpoint(a) => cmd::checkpoint::run(a),
        Command::Doctor(a) => cmd::doctor::run(a),
        Command::Probe(a) => cmd::probe::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Tune(a) => cmd::tune::run(*a),
        Command::Autotune(a) => cmd::autotune::run(a),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut command(), "tdg", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // Spec diagnostics already name file:line:col and say "error:";
            // they are printed as they are, source line and caret included.
            match e.downcast_ref::<spec_lang::Diagnostics>() {
                Some(d) => eprintln!("{}", d.to_string().trim_end()),
                None => eprintln!("tdg: error: {e:#}"),
            }
            // The one-evaluation contract (docs/integration.md): a tuner
            // tells a compile failure from a crash by the status alone.
            ExitCode::from(formats::exit_status(&*e))
        }
    }
}

fn init_logging(verbose: u8, quiet: bool) {
    use tracing_subscriber::EnvFilter;
    let level = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "debug",
        (false, _) => "trace",
    };
    let filter = EnvFilter::try_from_env("TDG_LOG").unwrap_or_else(|_| EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        .init();
}

#[cfg(test)]
mod tests {
    /// `--help` groups a command's options under headings (Build, Timing,
    /// Search, Output, ...); an option without one lands in a flat
    /// "Options" list of its own below them. A command whose options all
    /// go without a heading is short enough to be one list.
    #[test]
    fn no_option_is_left_outside_the_headings_of_its_command() {
        fn walk(cmd: &clap::Command, path: &str, flat: &mut Vec<String>) {
            let own: Vec<&clap::Arg> = cmd
                .get_arguments()
                .filter(|a| {
                    !a.is_positional()
                        && !a.is_hide_set()
                        && !a.is_global_set()
                        && !matches!(a.get_id().as_str(), "help" | "version")
                })
                .collect();
            if own.iter().any(|a| a.get_help_heading().is_some()) {
                flat.extend(
                    own.iter()
                        .filter(|a| a.get_help_heading().is_none())
                        .map(|a| format!("{path} --{}", a.get_id())),
                );
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), flat);
            }
        }
        let mut cmd = super::command();
        cmd.build();
        let mut flat = Vec::new();
        walk(&cmd, "tdg", &mut flat);
        assert!(
            flat.is_empty(),
            "options outside their command's --help headings: {flat:?}"
        );
    }
}
