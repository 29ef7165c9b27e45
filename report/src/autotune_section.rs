//! A `tdg autotune` record's section: the verdict and its figures (the
//! measured speedup with its interval beside the predicted one and the
//! Amdahl bound), each context with its target, fidelity and chosen
//! configuration, the contexts left out and why, and the proof's rounds
//! plain against tuned.

use crate::chart::{Axis, Chart, ChartError, Mark, Scale, Series, PALETTE};
use crate::html::{self, Block, Cell, Section};
use autotune::record::{Outcome, Record};

pub fn section(id: &str, r: &Record) -> Result<Section, ChartError> {
    let mut blocks = vec![verdict(r), contexts(id, r)];
    blocks.extend(left_out(r));
    blocks.push(proof_figure(id, r)?);
    blocks.push(html::note(&format!(
        "Deployed in {}: `tdg autotune exec {} -- PROGRAM`, or LD_PRELOAD={} (its README.md says how to link it statically).",
        r.deployment.dir.display(),
        r.deployment.dir.display(),
        r.deployment.preload_library.display()
    )));
    Ok(Section {
        id: id.into(),
        kind: "autotune",
        heading: format!(
            "Autotune: {} in {}",
            r.routine,
            html::shortened(&r.program.join(" "), 60)
        ),
        blocks,
    })
}

fn verdict(r: &Record) -> Block {
    let measured = match &r.proof.speedup {
        Some(s) => format!(
            "{} over {} interleaved rounds",
            s.text(),
            r.proof.rounds.len()
        ),
        None => format!("undecided after {} rounds", r.proof.rounds.len()),
    };
    html::facts(&[
        (
            "outcome",
            match r.outcome {
                Outcome::Faster => "faster: the gain is proven in the program".into(),
                Outcome::NotFaster => format!("not faster ({})", r.proof.verdict.words()),
            },
        ),
        ("measured speedup", measured),
        (
            "predicted speedup",
            format!(
                "{:.3}x ({:.3} s against {:.3} s plain)",
                r.prediction.speedup, r.prediction.program_s, r.profile.plain_median_s
            ),
        ),
        (
            "Amdahl bound",
            format!(
                "{:.2}x ({:.1} % of the run in {}, {} calls)",
                r.profile.amdahl_bound,
                r.profile.share * 100.0,
                r.routine,
                r.profile.calls
            ),
        ),
        (
            "contexts tuned",
            format!(
                "{} contexts, {:.1} % of the routine's time (asked {:.0} %)",
                r.choices.len(),
                r.cover_reached * 100.0,
                r.cover_asked * 100.0
            ),
        ),
        ("original", r.profile.defined_in.clone()),
        ("candidate", r.implementation.display().to_string()),
        ("host", format!("{}, {}", r.host, r.date)),
    ])
}

fn contexts(id: &str, r: &Record) -> Block {
    let rows = r
        .choices
        .iter()
        .map(|c| {
            let t = r.contexts.iter().find(|t| t.rank == c.rank);
            let fidelity = t
                .and_then(|t| t.fidelity.as_ref())
                .map_or(String::new(), |f| {
                    format!("{:.2}x ({:.2}-{:.2})", f.ratio, f.low, f.high)
                });
            (
                vec![
                    Cell::num(c.rank.to_string()),
                    Cell::text(c.label.clone()),
                    Cell::num(t.map_or(0, |t| t.calls).to_string()),
                    Cell::num(t.map_or(String::new(), |t| format!("{:.1} %", t.share * 100.0))),
                    Cell::text(
                        t.and_then(|t| t.target.as_ref())
                            .map_or(String::new(), |x| x.described()),
                    ),
                    Cell::num(fidelity),
                    Cell::text(format!(
                        "{}{}",
                        c.config,
                        if c.specialised { " (its own)" } else { "" }
                    )),
                    Cell::num(stats::ns(c.original_ns)),
                    Cell::num(stats::ns(c.chosen_ns)),
                    Cell::num(format!("{:.2}x", c.original_ns / c.chosen_ns)),
                ],
                "",
            )
        })
        .collect();
    html::table(
        &format!("{id}-contexts"),
        "Each tuned context: its target and that target's time over the program's for the original (fidelity, with its interval), the configuration it runs, and the time per call of the original in the program against the tuned one's on the target.",
        &[
            "#", "context", "calls", "share", "target", "fidelity", "configuration", "original",
            "tuned", "gain",
        ],
        rows,
    )
}

fn left_out(r: &Record) -> Option<Block> {
    let rows: Vec<(Vec<Cell>, &str)> = r
        .contexts
        .iter()
        .filter(|t| t.target.is_none())
        .map(|t| {
            (
                vec![
                    Cell::num(t.rank.to_string()),
                    Cell::text(t.label.clone()),
                    Cell::num(t.calls.to_string()),
                    Cell::text(t.rejected.join("; ")),
                ],
                "failed",
            )
        })
        .collect();
    (!rows.is_empty()).then(|| {
        html::table(
            "autotune-left-out",
            "Contexts left out of the tuning and the prediction: no target timed the original as the program does.",
            &["#", "context", "calls", "why"],
            rows,
        )
    })
}

fn proof_figure(id: &str, r: &Record) -> Result<Block, ChartError> {
    let rounds = &r.proof.rounds;
    let points = |f: fn(&autotune::proof::Round) -> f64| -> Vec<(f64, f64)> {
        rounds
            .iter()
            .enumerate()
            .map(|(i, x)| ((i + 1) as f64, f(x) * 1e9))
            .collect()
    };
    let max = rounds
        .iter()
        .map(|x| x.plain_s.max(x.tuned_s) * 1e9)
        .fold(0.0, f64::max);
    let mut chart = Chart::new(
        "the whole program's time per round, plain and tuned",
        Axis::integer("round (plain and tuned run back to back, order alternated)"),
        Axis::time("program time", max, Scale::Linear),
    );
    chart.series.push(Series::new(
        "plain",
        Mark::Dots,
        PALETTE[0],
        points(|x| x.plain_s),
    ));
    chart.series.push(Series::new(
        "tuned",
        Mark::Rings,
        PALETTE[1],
        points(|x| x.tuned_s),
    ));
    chart.description = format!(
        "{} rounds of the whole program, plain and with the tuned routine, interleaved.",
        rounds.len()
    );
    Ok(html::figure(
        &format!("{id}-proof"),
        "proof",
        &chart.svg()?,
        "Each round runs the program plain and tuned back to back, the order alternating, so the host's drift falls on both; the speedup's interval is that of the rounds' median ratio.",
    ))
}
