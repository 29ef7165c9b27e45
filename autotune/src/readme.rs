//! The deployment directory's README: how to use the tuned routine, with
//! tdg and without it, and what it was measured to do, from the record.

use crate::proof::OutputCheck;
use crate::record::{Outcome, Record};
use crate::targets::Target;
use serde::Serialize;
use std::path::Path;

const TEMPLATE: &str = include_str!("../templates/README.md.hbs");

#[derive(Serialize)]
struct View {
    routine: String,
    program: String,
    date: String,
    host: String,
    verdict_sentence: String,
    plain_s: String,
    plain_runs: usize,
    share: String,
    amdahl: String,
    predicted_s: String,
    predicted_speedup: String,
    measured: String,
    output: String,
    implementation: String,
    defined_in: String,
    rows: Vec<Row>,
    left_out: Vec<LeftOut>,
    dir: String,
    symbol: String,
    preload: String,
    archive: String,
}

#[derive(Serialize)]
struct Row {
    label: String,
    calls: u64,
    config: String,
    specialised: bool,
    original: String,
    chosen: String,
    target: String,
}

#[derive(Serialize)]
struct LeftOut {
    label: String,
    calls: u64,
    why: String,
}

fn view(r: &Record) -> View {
    let program =
        crate::program::command_line(&r.program.iter().map(Into::into).collect::<Vec<_>>());
    let measured = match &r.proof.speedup {
        Some(s) => format!(
            "{} ({} rounds, {} %)",
            s.text(),
            r.proof.rounds.len(),
            (s.coverage * 100.0).round()
        ),
        None => format!("undecided after {} rounds", r.proof.rounds.len()),
    };
    View {
        routine: r.routine.clone(),
        program: program.clone(),
        date: r.date.clone(),
        host: r.host.clone(),
        verdict_sentence: match r.outcome {
            Outcome::Faster => "The program is measurably faster with it.".into(),
            Outcome::NotFaster => format!(
                "The program is {} with it: keep running it plain.",
                r.proof.verdict.words()
            ),
        },
        plain_s: format!("{:.3}", r.profile.plain_median_s),
        plain_runs: r.profile.plain_runs_s.len(),
        share: format!("{:.1}", r.profile.share * 100.0),
        amdahl: format!("{:.2}", r.profile.amdahl_bound),
        predicted_s: format!("{:.3}", r.prediction.program_s),
        predicted_speedup: format!("{:.3}", r.prediction.speedup),
        measured,
        output: match &r.proof.output {
            OutputCheck::Same { bytes, .. } => {
                format!("the same {bytes} bytes in every run, plain and tuned")
            }
            OutputCheck::VariesUnaided => {
                "not compared: the plain program prints different bytes from run to run".into()
            }
        },
        implementation: r.implementation.display().to_string(),
        defined_in: r.profile.defined_in.clone(),
        rows: r
            .choices
            .iter()
            .map(|c| {
                let t = r.contexts.iter().find(|t| t.rank == c.rank);
                Row {
                    label: c.label.clone(),
                    calls: t.map_or(0, |t| t.calls),
                    config: c.config.to_string(),
                    specialised: c.specialised,
                    original: stats::ns(c.original_ns),
                    chosen: stats::ns(c.chosen_ns),
                    target: t
                        .and_then(|t| t.target.as_ref())
                        .map_or(String::new(), Target::described),
                }
            })
            .collect(),
        left_out: r
            .contexts
            .iter()
            .filter(|t| t.target.is_none())
            .map(|t| LeftOut {
                label: t.label.clone(),
                calls: t.calls,
                why: t.rejected.join("; ").replace('|', "/"),
            })
            .collect(),
        dir: r.deployment.dir.display().to_string(),
        symbol: r.deployment.symbol.clone(),
        preload: r.deployment.preload_library.display().to_string(),
        archive: r.deployment.wrap_archive.display().to_string(),
    }
}

/// Writes `dir/README.md` for `record`.
pub fn write(dir: &Path, record: &Record) -> std::io::Result<()> {
    let mut hb = handlebars::Handlebars::new();
    hb.register_escape_fn(handlebars::no_escape);
    hb.set_strict_mode(true);
    let text = hb
        .render_template(TEMPLATE, &view(record))
        // The template is built in and the view has every field it names.
        .unwrap_or_else(|e| panic!("autotune/templates/README.md.hbs: {e}"));
    fsguard::write_atomic(&dir.join("README.md"), text.as_bytes())
}
