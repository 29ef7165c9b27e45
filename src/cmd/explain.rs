//! `tdg explain SPEC`: what the driver will do with each operand, in words,
//! from the same model the driver is generated from.

use super::CmdResult;
use crate::args::output::TableOrJsonOutput;
use crate::args::timing::TimingArgs;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The routine's spec file.
    pub spec: PathBuf,
    #[command(flatten)]
    pub timing: TimingArgs,
    /// json: the driver model itself, every decision with its source.
    #[command(flatten)]
    pub output: TableOrJsonOutput,
}

pub fn run(args: Args) -> CmdResult {
    let model = super::gen::model_for(&args.spec, &args.timing)?;
    args.output
        .write_report(&model, || driver_gen::explain(&model))?;
    Ok(ExitCode::SUCCESS)
}
