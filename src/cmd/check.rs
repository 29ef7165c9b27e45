//! `tdg check FILE...`: parse and check specs, say per use (driver,
//! profile, checkpoint) whether each file serves it, print every diagnostic
//! of the uses asked for.
use super::CmdResult;
use crate::args::output::{OutputArgs, ReportFormat};
use spec_lang::{Diagnostic, Diagnostics, Use};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
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

/// What one file's check found for one use.
#[derive(serde::Serialize)]
struct UseResult {
    #[serde(rename = "use")]
    for_use: Use,
    ok: bool,
    /// Asked for, by `--for` or by default: only these fail the file.
    asked: bool,
    diagnostics: Vec<Diagnostic>,
}

/// One file's findings.
#[derive(serde::Serialize)]
struct FileResult {
    file: String,
    ok: bool,
    summary: Option<String>,
    uses: Vec<UseResult>,
    /// The errors of the failing uses asked for and the warnings, in the
    /// order of the source.
    diagnostics: Vec<Diagnostic>,
    #[serde(skip)]
    shown: Option<Diagnostics>,
    #[serde(skip)]
    warnings: Option<Diagnostics>,
}

pub fn run(args: Args) -> CmdResult {
    let overrides: BTreeMap<String, f64> = args.defines.iter().cloned().collect();
    let asked: Vec<Use> = args.for_uses.iter().map(|u| u.spec_use()).collect();
    let results: Vec<FileResult> = args
        .files
        .iter()
        .map(|path| check_file(path, &overrides, &asked))
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

fn check_file(path: &Path, overrides: &BTreeMap<String, f64>, asked: &[Use]) -> FileResult {
    let file = path.display().to_string();
    let failed = |d: Diagnostics| FileResult {
        file: file.clone(),
        ok: false,
        summary: None,
        uses: Use::ALL
            .iter()
            .map(|&u| UseResult {
                for_use: u,
                ok: false,
                asked: asked.is_empty() || asked.contains(&u),
                diagnostics: d.items.clone(),
            })
            .collect(),
        diagnostics: d.items.clone(),
        shown: Some(d),
        warnings: None,
    };
    let spec = match spec_lang::load(path, &[]) {
        Ok(s) => s,
        Err(d) => return failed(d),
    };
    // -D values for the spec's own macros and scalars: the driver's facts
    // resolved again under them, from the same read.
    let driver = if overrides.is_empty() {
        spec.require(Use::Driver).map(|()| spec.clone())
    } else {
        spec.under(overrides)
    };
    let mut uses: Vec<UseResult> = Use::ALL
        .iter()
        .map(|&u| {
            let outcome = match u {
                Use::Driver => driver.as_ref().map(|_| ()).map_err(|d| d.items.clone()),
                other => spec.require(other).map_err(|d| d.items),
            };
            UseResult {
                for_use: u,
                ok: outcome.is_ok(),
                asked: false,
                diagnostics: outcome.err().unwrap_or_default(),
            }
        })
        .collect();
    // Without --for: every use the spec serves, so a library routine's
    // prototype-only spec passes for its shims; -D values mean something
    // only to a driver, so they ask for it. A spec that serves no use
    // fails for all of them.
    let served_any = uses.iter().any(|u| u.ok);
    for u in &mut uses {
        u.asked = if asked.is_empty() {
            u.ok || !served_any || (u.for_use == Use::Driver && !overrides.is_empty())
        } else {
            asked.contains(&u.for_use)
        };
    }
    let ok = uses.iter().all(|u| u.ok || !u.asked);
    // The asked uses' errors, each once (the uses share most checks).
    let mut errors: Vec<Diagnostic> = Vec::new();
    for u in uses.iter().filter(|u| u.asked && !u.ok) {
        for d in &u.diagnostics {
            if !errors
                .iter()
                .any(|e| e.message == d.message && e.span == d.span)
            {
                errors.push(d.clone());
            }
        }
    }
    let warnings = driver
        .as_ref()
        .ok()
        .map(|c| c.warnings.clone())
        .filter(|w| !w.items.is_empty());
    let summary = match &driver {
        Ok(checked) => Some(driver_summary(checked)),
        Err(_) if served_any => Some(signature_summary(&spec)),
        Err(_) => None,
    };
    let shown = (!errors.is_empty()).then(|| Diagnostics::new(&file, spec.source(), errors));
    let mut diagnostics: Vec<Diagnostic> = warnings
        .iter()
        .flat_map(|w| w.items.iter().cloned())
        .chain(shown.iter().flat_map(|d| d.items.iter().cloned()))
        .collect();
    diagnostics.sort_by_key(|d| d.span.map(|s| s.start));
    FileResult {
        file,
        ok,
        summary,
        uses,
        diagnostics,
        shown,
        warnings,
    }
}

impl FileResult {
    /// `f.spec: ok for profile, checkpoint (routine f, 2 parameters)`, then
    /// a line for each use the spec does not serve and was not asked for.
    fn line(&self) -> String {
        let names = |pick: &dyn Fn(&UseResult) -> bool| {
            self.uses
                .iter()
                .filter(|u| pick(u))
                .map(|u| u.for_use.name())
                .collect::<Vec<_>>()
        };
        let served = names(&|u| u.ok);
        if served.is_empty() {
            return String::new();
        }
        let mut s = format!("{}: ", self.file);
        if !self.ok {
            let failing = names(&|u| u.asked && !u.ok);
            s.push_str(&format!("FAILS for {}; ", failing.join(", ")));
        }
        s.push_str(&format!("ok for {}", served.join(", ")));
        if let Some(summary) = &self.summary {
            s.push_str(&format!(" ({summary})"));
        }
        s.push('\n');
        for u in self.uses.iter().filter(|u| !u.ok && !u.asked) {
            let first = u.diagnostics.first().map_or("", |d| d.message.as_str());
            let more = match u.diagnostics.len() {
                0 | 1 => "where".to_string(),
                n => format!("{n} errors"),
            };
            s.push_str(&format!(
                "  not for a {}: {first} (`tdg check --for {} {}` shows {more})\n",
                u.for_use.name(),
                u.for_use.name(),
                self.file,
            ));
        }
        s
    }
}

/// `routine f, 3 parameters, 2 arrays totalling 1.5 MiB, 256 flop per call`.
fn driver_summary(c: &spec_lang::CheckedSpec) -> String {
    let arrays = c.operands.len();
    let bytes = c
        .operands
        .iter()
        .fold(0u64, |acc, o| acc.saturating_add(o.bytes().unwrap_or(0)));
    let mut s = format!(
        "routine {}, {} parameter{}, {arrays} array{} totalling {}",
        c.routine.name.name,
        c.routine.params.len(),
        plural(c.routine.params.len()),
        plural(arrays),
        stats::bytes(bytes)
    );
    if let Some(f) = c.flop_count() {
        s.push_str(&format!(", {f} flop per call"));
    }
    s
}

/// `routine f, 3 parameters`: a spec that no driver is built from.
fn signature_summary(spec: &spec_lang::Spec) -> String {
    let n = spec.routine.params.len();
    format!(
        "routine {}, {n} parameter{}",
        spec.routine.name.name,
        plural(n)
    )
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
