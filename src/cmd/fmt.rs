//! `tdg fmt FILE... [--check]`: rewrite specs in canonical layout.
use super::CmdResult;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Spec files to format in place.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Change nothing; name the files that are not in canonical layout (exit status 8).
    #[arg(long, conflicts_with = "stdout")]
    pub check: bool,
    /// Print the formatted text instead of rewriting the file.
    #[arg(long)]
    pub stdout: bool,
}

pub fn run(args: Args) -> CmdResult {
    // The worst that happened decides the status: a spec that does not
    // parse (2) over a file that could not be written (1) over one that is
    // only not in canonical layout (8).
    let (mut bad_spec, mut unwritten, mut not_canonical) = (false, false, false);
    for path in &args.files {
        let file = path.display().to_string();
        // A bad file is reported and skipped so the rest still get formatted.
        let src = match spec_lang::read_source(path) {
            Ok(s) => s,
            Err(d) => {
                eprintln!("{d}");
                bad_spec = true;
                continue;
            }
        };
        let formatted = match spec_lang::format_source(&src, &file) {
            Ok(f) => f,
            Err(d) => {
                eprintln!("{d}");
                bad_spec = true;
                continue;
            }
        };
        if args.stdout {
            print!("{formatted}");
        } else if args.check {
            if let Some(line) = spec_lang::format::first_difference(&src, &formatted) {
                eprintln!("{file}:{line}: not in canonical layout (run `tdg fmt {file}`)");
                not_canonical = true;
            }
        } else if formatted != src {
            // The spec a link names is rewritten and the link kept: the
            // user named this file; the guard refuses links only where tdg
            // chose the path.
            let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            match fsguard::write_atomic(&real, formatted.as_bytes()) {
                Ok(()) => println!("formatted {file}"),
                Err(e) => {
                    eprintln!("{file}: error: cannot write the formatted spec: {e}; the file is unchanged (try `tdg fmt --stdout {file}`)");
                    unwritten = true;
                }
            }
        }
    }
    use formats::contract::{EXIT_CHECK_SAID_NO, EXIT_OTHER};
    Ok(if bad_spec {
        ExitCode::from(formats::Failure::Usage.exit_code())
    } else if unwritten {
        ExitCode::from(EXIT_OTHER)
    } else if not_canonical {
        ExitCode::from(EXIT_CHECK_SAID_NO)
    } else {
        ExitCode::SUCCESS
    })
}
