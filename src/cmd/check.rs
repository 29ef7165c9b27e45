//! `tdg check FILE...`: parse and check specs, say per use (driver,
//! profile, checkpoint) whether each file serves it, print every diagnostic
//! of the uses asked for.
use super::CmdResult;
use crate::args::output::{OutputArgs, ReportFormat};
use spec_lang::verdict::{check_file, FileVerdict};
use spec_lang::Use;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `file:line:col: error: ...` with the source line, a caret and a hint.
    Text,
    /// One JSON document: every file, every use, every diagnostic with its position.
    Json,
}

impl ReportFormat for Format {
    const FOR_PEOPLE: Self = Format::Text;
    const JSON: Self = Format::Json;
}

/// A use of a spec, as `--for` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ForUse {
    /// A generated driver (`tdg gen`, `run`, `explain`, `tune`): every argument needs a value.
    Driver,
    /// A profiling shim (`tdg profile --spec`, `tdg instrument`): the signature and its init.
    Profile,
    /// A checkpoint's region shim (`tdg checkpoint capture --spec`, a spec's
    /// checkpoint image): the signature, and a count for each output.
    Checkpoint,
}

impl ForUse {
    fn spec_use(self) -> Use {
        match self {
            ForUse::Driver => Use::Driver,
            ForUse::Profile => Use::Profile,
            ForUse::Checkpoint => Use::Checkpoint,
        }
    }
}

#[derive(clap::Args)]
#[command(next_help_heading = "Check")]
pub struct Args {
    /// Spec files to validate (all are checked; the exit status is 2 if any
    /// fails a use asked for).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The uses to check (comma-separated or repeated). Without it: every
    /// use the spec serves, and a file fails only when it serves none (or,
    /// with -D, not a driver).
    #[arg(long = "for", value_enum, value_delimiter = ',', value_name = "USE")]
    pub for_uses: Vec<ForUse>,
    /// Also evaluate sizes and the flop count with this macro value, as
    /// `tdg gen -D` would (asks for the driver use).
    #[arg(short = 'D', long = "define", value_name = "NAME=VALUE", value_parser = spec_lang::eval::parse_define)]
    pub defines: Vec<(String, f64)>,
    #[command(flatten)]
    pub output: OutputArgs<Format>,
}

pub fn run(args: Args) -> CmdResult {
    let overrides: BTreeMap<String, f64> = args.defines.iter().cloned().collect();
    let asked: Vec<Use> = args.for_uses.iter().map(|u| u.spec_use()).collect();
    let results: Vec<FileVerdict> = args
        .files
        .iter()
        .map(|path| check_file(path, &overrides, &asked, stats::bytes))
        .collect();
    let bad = results.iter().filter(|r| !r.ok).count();
    let n = results.len();
    if args.output.is_json() {
        let doc = serde_json::json!({ "ok": bad == 0, "files": results });
        args.output.write(&formats::json_document("files", &doc)?)?;
    } else {
        let mut stdout = String::new();
        for r in &results {
            if let Some(w) = &r.warnings {
                eprintln!("{w}");
            }
            if let Some(d) = &r.shown {
                eprintln!("{d}");
            }
            stdout.push_str(&r.line());
        }
        args.output.write(&stdout)?;
    }
    if bad > 0 {
        eprintln!(
            "tdg check: {bad} of {n} spec file{} failed",
            if n == 1 { "" } else { "s" }
        );
        return Ok(ExitCode::from(formats::Failure::Usage.exit_code()));
    }
    Ok(ExitCode::SUCCESS)
}
