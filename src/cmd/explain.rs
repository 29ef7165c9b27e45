//! `tdg explain SPEC`: what the driver will do with each operand, in words,
//! from the same model the driver is generated from.

use super::run::TimingArgs;
use super::CmdResult;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The routine's spec file.
    pub spec: PathBuf,
    #[command(flatten)]
    pub timing: TimingArgs,
}

pub fn run(args: Args) -> CmdResult {
    let model = super::gen::model_for(&args.spec, &args.timing)?;
    print!("{}", driver_gen::explain(&model));
    Ok(ExitCode::SUCCESS)
}
