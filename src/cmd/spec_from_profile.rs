//! `tdg spec-from-profile FILE --spec SPEC`: a spec whose Macro defaults are
//! the dominant call context, plus the contexts file for `tdg run --contexts`.
use super::CmdResult;
use crate::args::output::TableOrJsonOutput;
use anyhow::Context as _;
use instrument::{format, report, specgen};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(next_help_heading = "Spec")]
pub struct Args {
    /// A profile written by `tdg profile`.
    profile: PathBuf,
    /// The spec of the profiled routine (its text is kept; only defaults change).
    #[arg(long)]
    spec: PathBuf,
    /// Spec to write [default: <spec stem>.profiled.spec in the current directory].
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Contexts file to write [default: <spec stem>.contexts.json].
    #[arg(long, value_name = "FILE")]
    contexts: Option<PathBuf>,
    /// Routine in the profile [default: the spec's routine].
    #[arg(long)]
    routine: Option<String>,
    /// Which context becomes the default (1 = most time in the application).
    #[arg(long, default_value_t = 1)]
    rank: usize,
    #[command(flatten)]
    report: TableOrJsonOutput,
}

pub fn run(a: Args) -> CmdResult {
    // A prototype is enough: the profile fills in what it recorded.
    let spec = spec_lang::load(&a.spec, &[])?.for_use(spec_lang::Use::Checkpoint)?;
    let (src, file) = (spec.source(), spec.file());
    let profile = format::read(&a.profile)?;
    let routine = a
        .routine
        .clone()
        .unwrap_or_else(|| spec.routine.name.name.clone());
    let rep = report::build(
        &profile,
        &report::ReportOptions {
            routine: Some(routine),
            ..Default::default()
        },
    )?;
    let stem = a
        .spec
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "routine".into());
    let out = a
        .output
        .unwrap_or_else(|| PathBuf::from(format!("{stem}.profiled.spec")));
    let ctx_path = a
        .contexts
        .unwrap_or_else(|| PathBuf::from(format!("{stem}.contexts.json")));
    let derived = specgen::derive(
        &spec,
        src,
        file,
        &rep,
        a.rank,
        Some(out.display().to_string()),
    )?;
    // derive() has checked that this rank exists; ranks are 1-based labels,
    // not positions, so look it up rather than index.
    let chosen = rep
        .contexts
        .iter()
        .find(|c| c.rank == a.rank)
        .context("the chosen context vanished from the report")?;
    let edit = &derived.edit;
    // fsguard's errors name the file.
    fsguard::write_atomic(&out, edit.text.as_bytes())?;
    let file = &derived.contexts;
    fsguard::write_atomic(&ctx_path, file.to_json().as_bytes())?;
    let document = serde_json::json!({
        "context": chosen.label(),
        "rank": chosen.rank,
        "calls": chosen.calls,
        "of_calls": rep.calls,
        "share": chosen.share,
        "spec": out.display().to_string(),
        "contexts_file": ctx_path.display().to_string(),
        "contexts": file.contexts.len(),
        "macros": edit.macros,
        "notes": edit.notes,
    });
    a.report.write_report(&document, || {
        written(chosen, rep.calls, &out, &derived, &ctx_path)
    })?;
    Ok(ExitCode::SUCCESS)
}

/// What was written, for people: the default context, the macros that now
/// default to it, the notes, and how to time every context.
fn written(
    chosen: &report::ContextStats,
    of_calls: u64,
    out: &Path,
    derived: &specgen::Derived,
    ctx_path: &Path,
) -> String {
    let mut s = format!(
        "context {} ({} of {of_calls} calls, {:.1}% of the time) is the default in {}\n",
        chosen.label(),
        chosen.calls,
        chosen.share * 100.0,
        out.display()
    );
    for (p, m) in &derived.edit.macros {
        s.push_str(&format!("  {p} <- Macro {m}\n"));
    }
    for n in &derived.edit.notes {
        s.push_str(&format!("note: {n}\n"));
    }
    s.push_str(&format!(
        "{} contexts written to {}; time them with `tdg run {} --contexts {}`\n",
        derived.contexts.contexts.len(),
        ctx_path.display(),
        out.display(),
        ctx_path.display()
    ));
    s
}
