//! Runs side by side: every sample of each run (tdg run, tdg checkpoint
//! time, Google Benchmark), their summaries, and each later file compared
//! with the first the way Google Benchmark's compare.py compares two
//! result files (benchmarks paired by name, the relative change of the
//! median and mean, and the U test of the repetitions).

use crate::chart::{Axis, Chart, ChartError, Mark, Scale, Series, PALETTE};
use crate::compare;
use crate::html::{self, Block, Cell, Section};
use crate::input::{Input, RunSamples};
use std::path::PathBuf;

/// One file's runs, whatever wrote them.
#[derive(Debug, Clone)]
pub struct TimedFile {
    pub path: PathBuf,
    pub kind: &'static str,
    pub runs: Vec<RunSamples>,
}

/// The inputs that hold timed samples to set side by side.
pub fn timed_files(inputs: &[Input]) -> Vec<TimedFile> {
    inputs
        .iter()
        .filter_map(|i| match i {
            Input::Runs(f) => Some(TimedFile {
                path: f.path.clone(),
                kind: f.kind,
                runs: f.runs.clone(),
            }),
            Input::CheckpointTime(t) => Some(TimedFile {
                path: t.image.clone(),
                kind: "tdg checkpoint time",
                runs: vec![RunSamples {
                    name: match &t.candidate {
                        Some(c) => format!("checkpoint/{}", c.display()),
                        None => "checkpoint".into(),
                    },
                    real_ns: t.samples_ns.iter().map(|&v| v as f64).collect(),
                    cpu_ns: Some(t.samples_cpu_ns.iter().map(|&v| v as f64).collect())
                        .filter(|c: &Vec<f64>| c.len() == t.samples_ns.len()),
                    reported_ns: Some(t.region_ns.median),
                }],
            }),
            _ => None,
        })
        .collect()
}

/// One benchmark of a later file against the first file's.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub name: String,
    pub old: String,
    pub new: String,
    pub old_median: f64,
    pub new_median: f64,
    pub median_change: f64,
    pub mean_change: f64,
    pub time_pvalue: Option<f64>,
    pub cpu_pvalue: Option<f64>,
    pub repetitions: (usize, usize),
}

fn median(v: &[f64]) -> f64 {
    stats::Summary::of(v).map_or(f64::NAN, |s| s.median)
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// compare.py's pairing: the benchmarks of the same name; when each file
/// holds a single benchmark, those two whatever their names.
pub fn comparisons(files: &[TimedFile]) -> Vec<Comparison> {
    let Some((base, rest)) = files.split_first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for f in rest {
        let pairs: Vec<(&RunSamples, &RunSamples)> = if base.runs.len() == 1 && f.runs.len() == 1 {
            vec![(&base.runs[0], &f.runs[0])]
        } else {
            f.runs
                .iter()
                .filter_map(|n| base.runs.iter().find(|o| o.name == n.name).map(|o| (o, n)))
                .collect()
        };
        for (o, n) in pairs {
            let cpu_pvalue = match (&o.cpu_ns, &n.cpu_ns) {
                (Some(a), Some(b)) => compare::mann_whitney_p(a, b),
                _ => None,
            };
            out.push(Comparison {
                name: if o.name == n.name {
                    o.name.clone()
                } else {
                    format!("{} vs {}", o.name, n.name)
                },
                old: base.path.display().to_string(),
                new: f.path.display().to_string(),
                old_median: median(&o.real_ns),
                new_median: median(&n.real_ns),
                median_change: compare::change(median(&o.real_ns), median(&n.real_ns)),
                mean_change: compare::change(mean(&o.real_ns), mean(&n.real_ns)),
                time_pvalue: compare::mann_whitney_p(&o.real_ns, &n.real_ns),
                cpu_pvalue,
                repetitions: (o.real_ns.len(), n.real_ns.len()),
            });
        }
    }
    out
}

pub fn section(id: &str, files: &[TimedFile]) -> Result<Section, ChartError> {
    let runs: Vec<(&TimedFile, &RunSamples)> = files
        .iter()
        .flat_map(|f| f.runs.iter().map(move |r| (f, r)))
        .collect();
    let mut body: Vec<Block> = vec![samples_figure(id, files, &runs)?, summary_table(id, &runs)];
    let cmp = comparisons(files);
    if files.len() > 1 {
        body.push(html::heading(
            "Compared with the first file (Google Benchmark's compare.py statistics)",
        ));
        body.push(if cmp.is_empty() {
            html::para(
                "No benchmark of a later file has the name of one in the first file, so nothing pairs up (compare.py pairs by name).",
            )
        } else {
            compare_table(id, files, &cmp)
        });
    }
    Ok(Section {
        id: id.into(),
        kind: "runs",
        heading: "Runs side by side".into(),
        blocks: body,
    })
}

/// Every sample of each run, in the order taken.
fn samples_figure(
    id: &str,
    files: &[TimedFile],
    runs: &[(&TimedFile, &RunSamples)],
) -> Result<Block, ChartError> {
    let all: Vec<f64> = runs
        .iter()
        .flat_map(|(_, r)| r.real_ns.iter().copied())
        .collect();
    let max = all.iter().copied().fold(0.0, f64::max);
    let scale = Scale::of(&all);
    let mut ch = Chart::new(
        "Every sample of each run",
        Axis::integer("run (numbered as in the table below)"),
        Axis::time("time per call", max, scale),
    );
    let mut plotted = 0;
    for (k, (_, r)) in runs.iter().enumerate() {
        let n = r.real_ns.len().max(1) as f64;
        // Spread a run's samples across its slot in their order, so
        // drift over the run shows as a slope.
        let pts: Vec<(f64, f64)> = r
            .real_ns
            .iter()
            .enumerate()
            .map(|(i, &t)| ((k + 1) as f64 - 0.3 + 0.6 * (i as f64 + 0.5) / n, t))
            .collect();
        plotted += pts.len();
        ch.series.push(Series::new(
            format!("{} ({})", k + 1, html::shortened(&r.name, 32)),
            Mark::Dots,
            PALETTE[k % PALETTE.len()],
            pts,
        ));
    }
    ch.description = format!(
        "{plotted} samples of {} runs from {} files, each run's samples in the order taken.",
        runs.len(),
        files.len()
    );
    Ok(html::figure(
        &format!("{id}-samples"),
        "run-samples",
        &ch.svg()?,
        "Each run's samples spread across its slot in the order they were taken (a slope is drift during the run).",
    ))
}

/// Each run's samples summarised.
fn summary_table(id: &str, runs: &[(&TimedFile, &RunSamples)]) -> Block {
    let rows: Vec<(Vec<Cell>, &str)> = runs
        .iter()
        .enumerate()
        .map(|(k, (f, r))| {
            let s = stats::Summary::of(&r.real_ns);
            let cell = |g: &dyn Fn(&stats::Summary) -> f64| {
                Cell::num(s.as_ref().map_or("-".into(), |s| stats::ns(g(s))))
            };
            (
                vec![
                    Cell::num((k + 1).to_string()),
                    Cell::text(f.path.display().to_string()),
                    Cell::text(f.kind),
                    Cell::text(r.name.clone()),
                    Cell::num(r.real_ns.len().to_string()),
                    cell(&|s| s.min),
                    cell(&|s| s.median),
                    cell(&|s| s.mean),
                    Cell::num(s.as_ref().map_or("-".into(), |s| {
                        if s.mean > 0.0 && s.stddev.is_finite() {
                            format!("{:.2} %", 100.0 * s.stddev / s.mean)
                        } else {
                            "-".into()
                        }
                    })),
                    Cell::num(r.reported_ns.map_or("-".into(), stats::ns)),
                ],
                "",
            )
        })
        .collect();
    html::table(
        &format!("{id}-summary"),
        "Each run's samples summarised (time per call); reported: the figure the tool itself reported",
        &["run", "file", "written by", "benchmark", "samples", "min", "median", "mean", "CV", "reported"],
        rows,
    )
}

/// Each later file's benchmarks against the first's, as compare.py does.
fn compare_table(id: &str, files: &[TimedFile], cmp: &[Comparison]) -> Block {
    let p = |v: Option<f64>| v.map_or("-".into(), |p| format!("{p:.4}"));
    let rows: Vec<(Vec<Cell>, &str)> = cmp
        .iter()
        .map(|c| {
            let verdict = verdict(c);
            (
                vec![
                    Cell::text(c.name.clone()),
                    Cell::text(c.new.clone()),
                    Cell::num(stats::ns(c.old_median)),
                    Cell::num(stats::ns(c.new_median)),
                    Cell::num(format!("{:+.4}", c.median_change)),
                    Cell::num(format!("{:+.4}", c.mean_change)),
                    Cell::num(p(c.time_pvalue)),
                    Cell::num(p(c.cpu_pvalue)),
                    Cell::num(format!("{} vs {}", c.repetitions.0, c.repetitions.1)),
                    Cell::html(verdict),
                ],
                "",
            )
        })
        .collect();
    html::table(
        &format!("{id}-compare"),
        &format!(
            "Each benchmark against the first file ({}): change = (new - old) / |old|, negative is faster; p: two-sided Mann-Whitney U test of the repetitions, as compare.py reports it",
            files[0].path.display()
        ),
        &["benchmark", "file", "old median", "new median", "median change", "mean change", "time p-value", "CPU p-value", "repetitions", "verdict"],
        rows,
    )
}

/// The U test's verdict on one comparison, with a warning when it has too
/// few repetitions to be reliable (HTML: coloured spans).
fn verdict(c: &Comparison) -> String {
    let verdict = match c.time_pvalue {
        Some(pv) if pv < compare::UTEST_ALPHA => format!(
            "<span class=\"verdict-yes\">different (p &lt; {})</span>",
            compare::UTEST_ALPHA
        ),
        Some(_) => format!(
            "<span class=\"verdict-no\">not shown different (p ≥ {})</span>",
            compare::UTEST_ALPHA
        ),
        None => format!(
            "<span class=\"verdict-no\">no U test: fewer than {} repetitions</span>",
            compare::UTEST_MIN_REPETITIONS
        ),
    };
    let warn = if c.repetitions.0.min(c.repetitions.1) < compare::UTEST_OPTIMAL_REPETITIONS {
        format!(
            " <span class=\"note\">(unreliable: {}+ repetitions recommended)</span>",
            compare::UTEST_OPTIMAL_REPETITIONS
        )
    } else {
        String::new()
    };
    verdict + &warn
}
