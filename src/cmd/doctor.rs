//! `tdg doctor`: whether this machine can checkpoint, time and profile.
use super::CmdResult;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> CmdResult {
    let report = checkpoint::run_doctor();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render_text());
    }
    Ok(if report.can_checkpoint {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
