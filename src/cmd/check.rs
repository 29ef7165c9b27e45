//! `tdg check FILE...`: parse and check specs, print every diagnostic.
use super::CmdResult;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Spec files to validate (all are checked; the exit code is 1 if any is bad).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Also evaluate sizes and the flop count with this macro value, as `tdg gen -D` would.
    #[arg(short = 'D', long = "define", value_name = "NAME=VALUE", value_parser = spec_lang::eval::parse_define)]
    pub defines: Vec<(String, f64)>,
}

pub fn run(args: Args) -> CmdResult {
    let overrides: BTreeMap<String, f64> = args.defines.into_iter().collect();
    let mut bad = 0usize;
    for path in &args.files {
        match spec_lang::check_file(path, &overrides) {
            Ok(summary) => println!("{}: ok ({summary})", path.display()),
            Err(d) => {
                bad += 1;
                eprintln!("{d}");
            }
        }
    }
    if bad > 0 {
        let n = args.files.len();
        eprintln!(
            "tdg check: {bad} of {n} spec file{} failed",
            if n == 1 { "" } else { "s" }
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
