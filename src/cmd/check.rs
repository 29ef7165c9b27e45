//! `tdg check FILE...`: parse and check specs, print every diagnostic.
use super::CmdResult;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// `file:line:col: error: ...` with the source line, a caret and a hint.
    Text,
    /// One JSON object per file on stdout (for editors and scripts).
    Json,
}

#[derive(clap::Args)]
pub struct Args {
    /// Spec files to validate (all are checked; the exit code is 1 if any is bad).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Also evaluate sizes and the flop count with this macro value, as `tdg gen -D` would.
    #[arg(short = 'D', long = "define", value_name = "NAME=VALUE", value_parser = spec_lang::eval::parse_define)]
    pub defines: Vec<(String, f64)>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

pub fn run(args: Args) -> CmdResult {
    let overrides: BTreeMap<String, f64> = args.defines.into_iter().collect();
    let mut bad = 0usize;
    for path in &args.files {
        let result = spec_lang::load_with(path, &overrides);
        if result.is_err() {
            bad += 1;
        }
        match (args.format, result) {
            (Format::Text, Ok(checked)) => {
                if !checked.warnings.is_empty() {
                    eprintln!("{}", checked.warnings);
                }
                println!("{}: ok ({})", path.display(), summary(&checked));
            }
            (Format::Text, Err(d)) => eprintln!("{d}"),
            (Format::Json, r) => {
                let (ok, summary, diagnostics) = match r {
                    Ok(c) => (true, Some(summary(&c)), c.warnings.items),
                    Err(d) => (false, None, d.items),
                };
                let obj = serde_json::json!({
                    "file": path.display().to_string(),
                    "ok": ok,
                    "summary": summary,
                    "diagnostics": diagnostics,
                });
                println!("{obj}");
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

/// `routine f, 3 parameters, 2 arrays totalling 1.5 MiB, 256 flop per call`.
fn summary(c: &spec_lang::CheckedSpec) -> String {
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let params = c.routine.params.len();
    let arrays = c.operands.len();
    let bytes = c
        .operands
        .iter()
        .fold(0u64, |acc, o| acc.saturating_add(o.bytes().unwrap_or(0)));
    let mut s = format!(
        "routine {}, {params} parameter{}, {arrays} array{} totalling {}",
        c.routine.name.name,
        plural(params),
        plural(arrays),
        stats::bytes(bytes)
    );
    if let Some(f) = c.flop_count() {
        s.push_str(&format!(", {f} flop per call"));
    }
    s
}
