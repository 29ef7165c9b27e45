//! The checkpoint section: each `tdg checkpoint time` report's samples
//! against the in-application times (`tdg checkpoint inapp`), and the
//! delay sweep of `capture --auto-delay` with the delay it chose.

use crate::chart::{Axis, Chart, ChartError, Mark, Rule, Scale, Series, PALETTE};
use crate::html::{self, Block, Cell, Section};
use crate::input::Input;

/// The checkpoint reports among the inputs, by kind, in command-line order.
#[derive(Default)]
struct CheckpointInputs<'a> {
    times: Vec<&'a checkpoint::TimingReport>,
    in_app: Vec<&'a checkpoint::InAppReport>,
    sweeps: Vec<&'a checkpoint::AutoDelayReport>,
}

impl<'a> CheckpointInputs<'a> {
    fn of(inputs: &'a [Input]) -> Self {
        let mut found = CheckpointInputs::default();
        for input in inputs {
            match input {
                Input::CheckpointTime(t) => found.times.push(t),
                Input::InApp(a) => found.in_app.push(a),
                Input::AutoDelay(s) => found.sweeps.push(s),
                _ => {}
            }
        }
        found
    }
}

pub fn section(id: &str, inputs: &[Input]) -> Result<Section, ChartError> {
    let CheckpointInputs {
        times,
        in_app,
        sweeps,
    } = CheckpointInputs::of(inputs);
    let mut body: Vec<Block> = Vec::new();
    if !times.is_empty() || !in_app.is_empty() {
        body.push(html::heading("Samples against the application"));
        body.push(samples_figure(id, &times, &in_app)?);
        body.push(timings_table(id, &times, &in_app));
    }
    for (si, s) in sweeps.iter().enumerate() {
        body.push(html::heading(format!(
            "Delay sweep of {}",
            s.image.display()
        )));
        body.push(sweep_figure(id, si, s)?);
        body.push(sweep_table(id, si, s));
    }
    Ok(Section {
        id: id.into(),
        kind: "checkpoint",
        heading: "Checkpoint".into(),
        blocks: body,
    })
}

/// Each sample against its number (from 1), as the samples chart plots it.
fn numbered(samples_ns: &[u64]) -> Vec<(f64, f64)> {
    samples_ns
        .iter()
        .enumerate()
        .map(|(i, &v)| ((i + 1) as f64, v as f64))
        .collect()
}

/// Every sample of the restored copies beside the application's.
fn samples_figure(
    id: &str,
    times: &[&checkpoint::TimingReport],
    in_app: &[&checkpoint::InAppReport],
) -> Result<Block, ChartError> {
    let all: Vec<f64> = times
        .iter()
        .flat_map(|t| t.samples_ns.iter().map(|&v| v as f64))
        .chain(
            in_app
                .iter()
                .flat_map(|a| a.samples_ns.iter().map(|&v| v as f64)),
        )
        .collect();
    let max = all.iter().copied().fold(0.0, f64::max);
    let mut ch = Chart::new(
        "Region time of each sample: restored copies and the application",
        Axis::linear("sample (restored copy, or plain run of the application)"),
        Axis::time("region wall time", max, Scale::of(&all)),
    );
    let mut k = 0;
    let mut plotted = 0;
    for t in times {
        let pts = numbered(&t.samples_ns);
        plotted += pts.len();
        let what = match &t.candidate {
            Some(c) => format!("candidate {}", c.display()),
            None => format!(
                "checkpoint{}",
                t.delay.map_or(String::new(), |d| format!(", delay {d}"))
            ),
        };
        ch.series.push(Series::new(
            format!("{what} ({})", pts.len()),
            Mark::Dots,
            PALETTE[k % PALETTE.len()],
            pts,
        ));
        k += 1;
    }
    for a in in_app {
        let pts = numbered(&a.samples_ns);
        plotted += pts.len();
        ch.series.push(Series::new(
            format!("in-app, call {} ({})", a.call, pts.len()),
            Mark::Rings,
            PALETTE[k % PALETTE.len()],
            pts,
        ));
        k += 1;
    }
    ch.description = format!(
        "{plotted} samples plotted: {} checkpoint timing(s) as dots, {} in-application measurement(s) as rings.",
        times.len(),
        in_app.len()
    );
    Ok(html::figure(
        &format!("{id}-samples"),
        "checkpoint-samples",
        &ch.svg()?,
        "Dots: the routine timed in restored copies of the checkpoint; rings: the same call timed in plain runs of the application. A faithful checkpoint puts the dots on the rings.",
    ))
}

/// Each timing's summary against the in-application median.
fn timings_table(
    id: &str,
    times: &[&checkpoint::TimingReport],
    in_app: &[&checkpoint::InAppReport],
) -> Block {
    let reference = in_app.first().map(|a| a.region_ns.median);
    let mut rows: Vec<(Vec<Cell>, &str)> = Vec::new();
    for t in times {
        rows.push((
            vec![
                Cell::text(t.image.display().to_string()),
                Cell::text(
                    t.candidate
                        .as_ref()
                        .map_or("the application's code".into(), |c| c.display().to_string()),
                ),
                Cell::num(t.region_ns.n.to_string()),
                Cell::num(stats::ns(t.region_ns.min)),
                Cell::num(stats::ns(t.region_ns.median)),
                Cell::num(stats::ns(t.region_cpu_ns.median)),
                Cell::num(match reference {
                    Some(r) if r > 0.0 => {
                        format!("{:+.1} %", 100.0 * (t.region_ns.median / r - 1.0))
                    }
                    _ => "-".into(),
                }),
                Cell::text(format!(
                    "{}; {} per sample",
                    if t.sampling.is_empty() {
                        "restore"
                    } else {
                        t.sampling.as_str()
                    },
                    stats::ns(t.cost_per_sample_ms * 1e6)
                )),
            ],
            "",
        ));
    }
    for a in in_app {
        rows.push((
            vec![
                Cell::text(format!(
                    "plain runs{}",
                    a.site
                        .as_ref()
                        .map_or(String::new(), |s| format!(", site {s}"))
                )),
                Cell::text(format!("call {}", a.call)),
                Cell::num(a.region_ns.n.to_string()),
                Cell::num(stats::ns(a.region_ns.min)),
                Cell::num(stats::ns(a.region_ns.median)),
                Cell::num(stats::ns(a.region_cpu_ns.median)),
                Cell::num("reference".to_string()),
                Cell::text(format!("{} per run", stats::ns(a.run_wall_ms.median * 1e6))),
            ],
            "",
        ));
    }
    html::table(
        &format!("{id}-timings"),
        "Each timing's summary; the median's difference from the in-application median",
        &[
            "timed",
            "code",
            "samples",
            "min",
            "median",
            "CPU median",
            "vs in-app",
            "cost",
        ],
        rows,
    )
}

/// Region time against the checkpoint's delay, with the one chosen.
fn sweep_figure(id: &str, si: usize, s: &checkpoint::AutoDelayReport) -> Result<Block, ChartError> {
    let meds: Vec<(f64, f64)> = s
        .rows
        .iter()
        .map(|r| (r.delay as f64, r.region_ns.median))
        .collect();
    let all: Vec<f64> = s
        .rows
        .iter()
        .flat_map(|r| [r.region_ns.min, r.region_ns.max])
        .chain(s.in_app_ns)
        .collect();
    let max = all.iter().copied().fold(0.0, f64::max);
    let mut ch = Chart::new(
        "Region time against the checkpoint's delay",
        Axis::integer("delay (calls replayed before the timed one)"),
        Axis::time("region wall time", max, Scale::of(&all)),
    );
    let mut series = Series::new("median, min-max bar", Mark::Dots, PALETTE[0], meds.clone());
    series.error = s
        .rows
        .iter()
        .map(|r| Some((r.region_ns.min, r.region_ns.max)))
        .collect();
    ch.series.push(series);
    ch.series
        .push(Series::new("", Mark::Line, PALETTE[0], meds));
    if let Some(a) = s.in_app_ns {
        let x0 = s.rows.first().map_or(0.0, |r| r.delay as f64);
        let x1 = s.rows.last().map_or(1.0, |r| r.delay as f64);
        ch.series.push(Series::new(
            "in-app median",
            Mark::DashedLine,
            PALETTE[1],
            vec![(x0, a), (x1, a)],
        ));
    }
    ch.rules.push(Rule::measured(
        s.chosen as f64,
        format!("chosen: {}", s.chosen),
        PALETTE[2],
    ));
    ch.description = format!(
        "{} delays captured and timed; delay {} chosen{}.",
        s.rows.len(),
        s.chosen,
        if s.converged {
            ""
        } else {
            " (the sweep did not converge)"
        }
    );
    Ok(html::figure(
        &format!("{id}-delay-{}", si + 1),
        "delay-sweep",
        &ch.svg()?,
        &format!(
            "Each delay is a checkpoint taken that many calls before the timed one; {}. Threshold {:.1} %.",
            match (s.in_app_ns, s.confirmed_by) {
                (Some(_), _) => "the chosen delay is the smallest that reproduces the in-application time".to_string(),
                (None, Some(c)) => format!("the chosen delay agrees with the previous one and delay {c} confirms the plateau"),
                (None, None) => "the chosen delay is where successive medians agree".to_string(),
            },
            s.threshold * 100.0
        ),
    ))
}

fn sweep_table(id: &str, si: usize, s: &checkpoint::AutoDelayReport) -> Block {
    let pct = |v: Option<f64>| v.map_or("-".into(), |c| format!("{:+.1} %", c * 100.0));
    let rows: Vec<(Vec<Cell>, &str)> = s
        .rows
        .iter()
        .map(|r| {
            (
                vec![
                    Cell::num(r.delay.to_string()),
                    Cell::num(stats::ns(r.region_ns.median)),
                    Cell::num(stats::ns(r.region_ns.min)),
                    Cell::num(pct(r.change_from_previous)),
                    Cell::num(pct(r.gap_to_in_app)),
                ],
                if r.delay == s.chosen { "best" } else { "" },
            )
        })
        .collect();
    html::table(
        &format!("{id}-delay-{}-rows", si + 1),
        "Each delay's region time; the chosen one in bold",
        &[
            "delay",
            "median",
            "min",
            "change from previous",
            "vs in-app",
        ],
        rows,
    )
}
