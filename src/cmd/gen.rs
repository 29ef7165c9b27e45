//! `tdg gen SPEC -o DIR`: write the C timing driver, its runtime and a
//! Makefile; `make IMPL=kernel.c` then builds it without tdg.

use super::CmdResult;
use crate::args::timing::TimingArgs;
use driver_gen::{render, DriverModel, RunOptions};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(next_help_heading = "Driver")]
pub struct Args {
    /// The routine's spec file.
    pub spec: PathBuf,
    /// Output directory (created if missing).
    #[arg(short, long, default_value = "driver")]
    pub output: PathBuf,
    #[command(flatten)]
    pub timing: TimingArgs,
    /// Directory whose templates override the built-in ones.
    #[arg(long)]
    pub templates: Option<PathBuf>,
}

/// The model for a spec file under the command-line timing settings; the
/// `-D` values are checked against the spec as `tdg check -D` checks them.
pub fn model_for(path: &Path, timing: &TimingArgs) -> anyhow::Result<DriverModel> {
    let mut o = RunOptions::default();
    timing.apply(&mut o);
    o.defines = timing.define.clone();
    let checked = spec_lang::load(path, &o.defines)?.for_use(spec_lang::Use::Driver)?;
    if !checked.warnings.is_empty() {
        eprintln!("{}", checked.warnings);
    }
    Ok(DriverModel::from_checked(&checked, &o.driver_config())?)
}

pub fn run(args: Args) -> CmdResult {
    let model = model_for(&args.spec, &args.timing)?;
    let generated = render(&model, args.templates.as_deref())?;
    let written = generated.write_to(&args.output)?;
    for p in written {
        println!("wrote {}", p.display());
    }
    println!(
        "build: make -C {} IMPL=/path/to/{}.c   then run ./driver --help",
        args.output.display(),
        model.routine.name
    );
    Ok(ExitCode::SUCCESS)
}
