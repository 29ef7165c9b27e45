//! A tuning campaign's section: how the best time fell with each
//! evaluation and with wall time, every evaluation with its uncertainty,
//! each parameter's effect (a heatmap for the two that matter most), the
//! failed configurations and why, the model's start and any re-timing.

use crate::chart::{Axis, Chart, ChartError, Heatmap, Mark, Scale, Series, PALETTE};
use crate::html::{self, Block, Cell, Section};
use crate::input::Campaign;
use std::collections::BTreeMap;
use tune::Evaluation;

/// Phases whose evaluations re-time configurations already seen, to name
/// the best side by side rather than search.
fn is_retiming(phase: &str) -> bool {
    let p = phase.to_ascii_lowercase();
    p.contains("retim") || p.contains("re-tim") || p.starts_with("final")
}

/// The parameters in the order `--param` gave them (a log's configurations
/// keep it; older logs sorted their keys, so the stored command line, when
/// there is one, decides).
fn parameter_order(c: &Campaign) -> Vec<String> {
    let mut names: Vec<String> = c
        .evaluations
        .first()
        .map(|e| e.config.iter().map(|s| s.name().to_string()).collect())
        .unwrap_or_default();
    if let Some(args) = &c.args {
        let given: Vec<&str> = args
            .iter()
            .zip(args.iter().skip(1))
            .filter_map(|(flag, value)| (flag == "--param").then_some(value.as_str()))
            .chain(args.iter().filter_map(|a| a.strip_prefix("--param=")))
            .filter_map(|p| p.split_once('=').map(|(n, _)| n.trim()))
            .collect();
        names.sort_by_key(|n| given.iter().position(|g| g == n).unwrap_or(usize::MAX));
    }
    names
}

fn config_text_in(e: &Evaluation, order: &[String]) -> String {
    let mut parts: Vec<String> = order
        .iter()
        .filter_map(|k| e.config.get(k).map(|v| format!("{k}={v}")))
        .collect();
    // Parameters a later evaluation has that the first had not.
    for s in &e.config {
        if !order.iter().any(|k| k == s.name()) {
            parts.push(s.to_string());
        }
    }
    parts.join(" ")
}

fn value_of(e: &Evaluation, param: &str) -> Option<f64> {
    e.config.get(param).map(|v| v as f64)
}

/// The time's uncertainty as a (low, high) band.
fn band(e: &Evaluation) -> Option<(f64, f64)> {
    match (e.time_ns, e.uncertainty_pct) {
        (Some(t), Some(u)) if u.is_finite() && u > 0.0 => {
            Some((t * (1.0 - u / 100.0), t * (1.0 + u / 100.0)))
        }
        _ => None,
    }
}

/// A parameter and the spread of the best time over its values.
type Effect = (String, f64);

/// A campaign's evaluations as the section reads them, worked out once.
struct View<'a> {
    id: &'a str,
    c: &'a Campaign,
    /// The search's evaluations; the finalists' re-timing at the end is
    /// shown on its own (it is not an evaluation of a new configuration).
    evals: Vec<Evaluation>,
    retimed: Vec<&'a Evaluation>,
    params: Vec<String>,
    times: Vec<f64>,
    max_ns: f64,
    scale: Scale,
    phases: Vec<String>,
}

impl<'a> View<'a> {
    fn new(id: &'a str, c: &'a Campaign) -> View<'a> {
        let evals: Vec<Evaluation> = c
            .evaluations
            .iter()
            .filter(|e| !is_retiming(&e.phase))
            .cloned()
            .collect();
        let times: Vec<f64> = evals.iter().filter_map(|e| e.time_ns).collect();
        let mut phases: Vec<String> = Vec::new();
        for e in &evals {
            if !phases.contains(&e.phase) {
                phases.push(e.phase.clone());
            }
        }
        View {
            id,
            c,
            retimed: c
                .evaluations
                .iter()
                .filter(|e| is_retiming(&e.phase))
                .collect(),
            params: parameter_order(c),
            max_ns: times.iter().copied().fold(0.0, f64::max),
            scale: Scale::of(&times),
            times,
            phases,
            evals,
        }
    }

    fn timed(&self) -> Vec<&Evaluation> {
        self.evals.iter().filter(|e| e.time_ns.is_some()).collect()
    }

    fn failed(&self) -> Vec<&Evaluation> {
        self.evals.iter().filter(|e| e.time_ns.is_none()).collect()
    }

    fn best(&self) -> Option<&Evaluation> {
        fastest(self.evals.iter())
    }

    fn config_text(&self, e: &Evaluation) -> String {
        config_text_in(e, &self.params)
    }

    /// What the campaign is.
    fn facts(&self) -> Block {
        let (evals, timed, failed) = (&self.evals, self.timed(), self.failed());
        let mut facts: Vec<(&str, String)> = Vec::new();
        if let Some(args) = &self.c.args {
            facts.push(("command", format!("tdg tune {}", args.join(" "))));
        }
        facts.push(("read from", self.c.origin.clone()));
        facts.push((
            "evaluations",
            format!(
                "{} ({} timed, {} failed)",
                evals.len(),
                timed.len(),
                failed.len()
            ),
        ));
        if let Some(b) = self.best() {
            let mut t = stats::ns(b.time_ns.unwrap_or(f64::NAN));
            if let Some(u) = b.uncertainty_pct {
                t.push_str(&format!(" ± {u:.2} %"));
            }
            if let Some(m) = b.mflops {
                t.push_str(&format!(", {m:.1} MFLOPS"));
            }
            facts.push((
                "best",
                format!(
                    "{} at evaluation {} ({:.1} s in): {t}",
                    self.config_text(b),
                    b.n,
                    b.elapsed_s
                ),
            ));
        }
        if let Some(r) = fastest(self.retimed.iter().copied()) {
            facts.push((
                "best re-timed",
                format!(
                    "{}: {} when the {} finalists were timed again side by side at the end",
                    self.config_text(r),
                    stats::ns(r.time_ns.unwrap_or(f64::NAN)),
                    self.retimed.len()
                ),
            ));
        }
        if let Some(last) = evals.last() {
            facts.push((
                "wall time",
                format!("{:.1} s to the last evaluation", last.elapsed_s),
            ));
        }
        let hosts = hosts(evals);
        if !hosts.is_empty() {
            facts.push(("timed on", hosts.join(", ")));
        }
        html::facts(&facts)
    }

    /// Every evaluation, by phase, with the best so far.
    fn evaluations_figure(&self) -> Result<Block, ChartError> {
        let (timed, failed) = (self.timed(), self.failed());
        let mut chart = Chart::new(
            "Time per call of every evaluation",
            Axis::integer("evaluation (in the order timed)"),
            Axis::time("time per call", self.max_ns, self.scale),
        );
        for (k, phase) in self.phases.iter().enumerate() {
            let of_phase: Vec<&&Evaluation> = timed.iter().filter(|e| e.phase == *phase).collect();
            if of_phase.is_empty() {
                continue;
            }
            let mark = if phase == "model" {
                Mark::Rings
            } else {
                Mark::Dots
            };
            let mut s = Series::new(
                format!("{phase} ({})", of_phase.len()),
                mark,
                PALETTE[(k + 1) % PALETTE.len()],
                of_phase
                    .iter()
                    .map(|e| (e.n as f64, e.time_ns.unwrap_or(f64::NAN)))
                    .collect(),
            );
            s.error = of_phase.iter().map(|e| band(e)).collect();
            chart.series.push(s);
        }
        let best_line: Vec<(f64, f64)> = self
            .evals
            .iter()
            .filter_map(|e| e.best_ns.map(|b| (e.n as f64, b)))
            .collect();
        chart.series.push(Series::new(
            "best so far",
            Mark::Steps,
            PALETTE[0],
            best_line,
        ));
        chart.description = format!(
            "{} timed evaluations plotted as points (time per call against evaluation number, bars: each driver's stated uncertainty), with the best time so far as a staircase; {} failed evaluations are not plotted.",
            timed.len(),
            failed.len()
        );
        Ok(html::figure(
            &format!("{}-evaluations", self.id),
            "evaluations",
            &chart.svg()?,
            &format!(
                "{} timed evaluations{}; hollow rings are the model's starting points, bars each driver's stated uncertainty (how far the halves of its samples disagree); the staircase is the best time so far.{}",
                timed.len(),
                if failed.is_empty() { String::new() } else { format!(" ({} failed, listed below)", failed.len()) },
                if self.scale == Scale::Log { " Time axis logarithmic." } else { "" }
            ),
        ))
    }

    /// Best so far against wall time (none before the first improvement).
    fn best_over_time(&self) -> Result<Option<Block>, ChartError> {
        let improvements = improvements(&self.evals);
        let (Some(first), Some(end)) = (improvements.first(), self.evals.last()) else {
            return Ok(None);
        };
        let mut stair = improvements.clone();
        let last_best = improvements.last().map_or(first.1, |p| p.1);
        stair.push((end.elapsed_s.max(first.0), last_best));
        let best_scale = Scale::of(&improvements.iter().map(|p| p.1).collect::<Vec<_>>());
        let mut wall = Chart::new(
            "Best time so far against wall time",
            Axis::linear("wall time since the search started (s)"),
            Axis::time("best time per call", first.1.max(last_best), best_scale),
        );
        wall.series
            .push(Series::new("best so far", Mark::Steps, PALETTE[0], stair));
        wall.series.push(Series::new(
            "improvement",
            Mark::Dots,
            PALETTE[1],
            improvements.clone(),
        ));
        wall.description = format!(
            "The best time per call found so far, against seconds since the search started; {} improvements marked.",
            improvements.len()
        );
        Ok(Some(html::figure(
            &format!("{}-best-over-time", self.id),
            "best-over-time",
            &wall.svg()?,
            &format!(
                "{} improvements; the last at {:.1} s, of {:.1} s in all.",
                improvements.len(),
                improvements.last().map_or(0.0, |p| p.0),
                end.elapsed_s
            ),
        )))
    }

    /// Each parameter's figure (or why it has none), and how much the best
    /// time moves with it: the worst value's best over the best value's.
    fn parameter_effects(&self) -> Result<(Vec<Block>, Vec<Effect>), ChartError> {
        let timed = self.timed();
        let mut effects: Vec<Effect> = Vec::new();
        let mut row: Vec<Block> = Vec::new();
        for p in &self.params {
            let points: Vec<(f64, f64)> = timed
                .iter()
                .filter_map(|e| Some((value_of(e, p)?, e.time_ns?)))
                .collect();
            let best_per = best_per_value(&points);
            if best_per.len() < 2 {
                row.push(html::note(&format!(
                    "{p}: every timed evaluation had {p} = {}, so its effect is not seen.",
                    best_per.keys().next().map_or("-".into(), |v| v.to_string())
                )));
                continue;
            }
            let bests: Vec<f64> = best_per.values().copied().collect();
            let lo = bests.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = bests.iter().copied().fold(0.0, f64::max);
            effects.push((p.clone(), hi / lo));
            row.push(self.parameter_figure(p, points, &best_per, hi / lo)?);
        }
        Ok((row, effects))
    }

    fn parameter_figure(
        &self,
        p: &str,
        points: Vec<(f64, f64)>,
        best_per: &BTreeMap<i64, f64>,
        spread: f64,
    ) -> Result<Block, ChartError> {
        let mut ch = Chart::new(
            format!("Time per call against {p}"),
            Axis::integer(format!("{p} (compiled with -D{p}=value)")),
            Axis::time("time per call", self.max_ns, self.scale),
        );
        let n = points.len();
        ch.series.push(Series::new(
            "every evaluation",
            Mark::Dots,
            PALETTE[2],
            points,
        ));
        ch.series.push(Series::new(
            format!("best at each {p}"),
            Mark::Line,
            PALETTE[0],
            best_per.iter().map(|(v, t)| (*v as f64, *t)).collect(),
        ));
        ch.width = 540;
        ch.height = 340;
        ch.description = format!(
            "{n} timed evaluations against {p}; the line joins the best time at each of {} values. The best at the worst value is {spread:.2}x the best at the best value.",
            best_per.len(),
        );
        Ok(html::figure(
            &format!("{}-param-{}", self.id, css_id(p)),
            "parameter",
            &ch.svg()?,
            &format!(
                "{p}: the best time at its worst value is {spread:.2}x that at its best value ({} values tried).",
                best_per.len()
            ),
        ))
    }

    /// A heatmap for the two parameters that matter most.
    fn heatmap(&self, px: &str, py: &str) -> Result<Block, ChartError> {
        let timed = self.timed();
        let xs = distinct(&timed, px);
        let ys = distinct(&timed, py);
        let mut cells = vec![vec![None; xs.len()]; ys.len()];
        for e in &timed {
            let (Some(vx), Some(vy), Some(t)) = (value_of(e, px), value_of(e, py), e.time_ns)
            else {
                continue;
            };
            let xi = xs.iter().position(|&v| v == vx as i64);
            let yi = ys.iter().position(|&v| v == vy as i64);
            if let (Some(xi), Some(yi)) = (xi, yi) {
                let cell: &mut Option<f64> = &mut cells[yi][xi];
                *cell = Some(cell.map_or(t, |c: f64| c.min(t)));
            }
        }
        let filled = cells.iter().flatten().filter(|c| c.is_some()).count();
        let h = Heatmap {
            title: format!("Best time per call over {px} and {py}"),
            description: format!(
                "{filled} of {} pairs of {px} and {py} timed; each cell the best time over the other parameters, darker is faster.",
                xs.len() * ys.len()
            ),
            x_label: px.to_string(),
            y_label: py.to_string(),
            x_values: xs.iter().map(|v| v.to_string()).collect(),
            y_values: ys.iter().map(|v| v.to_string()).collect(),
            cells,
            cell_text: |v| stats::ns(v),
        };
        Ok(html::figure(
            &format!("{}-heatmap", self.id),
            "heatmap",
            &h.svg()?,
            &format!(
                "{px} and {py}, the two parameters with the largest effect: each cell is the best time with that pair (over the other parameters), darker is faster; \"-\" was not timed ({filled} of {} pairs timed).",
                xs.len() * ys.len()
            ),
        ))
    }

    /// Failed configurations.
    fn failures(&self) -> Block {
        let failed = self.failed();
        if failed.is_empty() {
            return html::para("Every configuration tried was built and timed.");
        }
        let rows: Vec<(Vec<Cell>, &str)> = failed
            .iter()
            .map(|e| {
                (
                    vec![
                        Cell::num(e.n.to_string()),
                        Cell::text(self.config_text(e)),
                        Cell::text(
                            e.failure
                                .map_or("-".to_string(), |f| format!("{f:?}").to_lowercase()),
                        ),
                        Cell::text(e.error.clone().unwrap_or_default()),
                    ],
                    "failed",
                )
            })
            .collect();
        html::table(
            &format!("{}-failed", self.id),
            &format!("{} configurations failed", failed.len()),
            &["evaluation", "configuration", "failure", "reason"],
            rows,
        )
    }

    /// The model's start, and how far the search moved from it.
    fn model_starts(&self) -> Block {
        let starts: Vec<&Evaluation> = self.evals.iter().filter(|e| e.phase == "model").collect();
        if starts.is_empty() {
            return html::para(&format!(
                "No evaluation of this campaign is a model start (phases: {}).",
                self.phases.join(", ")
            ));
        }
        let best_t = self.best().and_then(|b| b.time_ns);
        let rows: Vec<(Vec<Cell>, &str)> = starts
            .iter()
            .map(|e| {
                let vs = match (e.time_ns, best_t) {
                    (Some(t), Some(b)) if b > 0.0 => format!("{:.2}x", t / b),
                    _ => "-".into(),
                };
                (
                    vec![
                        Cell::num(e.n.to_string()),
                        Cell::text(self.config_text(e)),
                        Cell::num(e.time_ns.map_or("failed".into(), stats::ns)),
                        Cell::num(vs),
                    ],
                    "",
                )
            })
            .collect();
        html::table(
            &format!("{}-starts", self.id),
            "The configurations the model predicted, timed first; the last column is each one's time over the campaign's best.",
            &["evaluation", "configuration", "time per call", "x best"],
            rows,
        )
    }

    /// The finalists timed again side by side.
    fn final_retiming(&self) -> Block {
        if self.retimed.is_empty() {
            return html::para(
                "This campaign's log holds no re-timing of its best configurations side by side; the best above is each configuration's own timing.",
            );
        }
        let rows: Vec<(Vec<Cell>, &str)> = self
            .retimed
            .iter()
            .map(|e| {
                (
                    vec![
                        Cell::num(e.n.to_string()),
                        Cell::text(self.config_text(e)),
                        Cell::num(e.time_ns.map_or("failed".into(), stats::ns)),
                        Cell::num(uncertainty(e)),
                    ],
                    "",
                )
            })
            .collect();
        html::table(
            &format!("{}-retimed", self.id),
            "The best configurations timed again side by side at the end",
            &[
                "evaluation",
                "configuration",
                "time per call",
                "uncertainty",
            ],
            rows,
        )
    }

    /// Every evaluation, folded.
    fn every_evaluation(&self) -> Block {
        let best_n = self.best().map(|b| b.n);
        let rows: Vec<(Vec<Cell>, &str)> = self
            .evals
            .iter()
            .map(|e| {
                let class = if Some(e.n) == best_n {
                    "best"
                } else if e.time_ns.is_none() {
                    "failed"
                } else {
                    ""
                };
                (
                    vec![
                        Cell::num(e.n.to_string()),
                        Cell::text(e.phase.clone()),
                        Cell::text(self.config_text(e)),
                        Cell::num(e.time_ns.map_or("failed".into(), stats::ns)),
                        Cell::num(uncertainty(e)),
                        Cell::num(if e.samples_ns.is_empty() {
                            "-".into()
                        } else {
                            e.samples_ns.len().to_string()
                        }),
                        Cell::num(e.best_ns.map_or("-".into(), stats::ns)),
                        Cell::num(format!("{:.1}", e.elapsed_s)),
                        Cell::text(e.stopped.clone().unwrap_or_default()),
                        Cell::text(e.node.clone().unwrap_or_default()),
                    ],
                    class,
                )
            })
            .collect();
        Block::Details {
            summary: format!("Every evaluation ({})", self.evals.len()),
            blocks: vec![html::table(
                &format!("{}-all", self.id),
                "Every evaluation in the order timed; the best in bold",
                &[
                    "n",
                    "phase",
                    "configuration",
                    "time per call",
                    "uncertainty",
                    "samples",
                    "best so far",
                    "at (s)",
                    "timing ended",
                    "node",
                ],
                rows,
            )],
        }
    }
}

pub fn section(id: &str, c: &Campaign) -> Result<Section, ChartError> {
    let v = View::new(id, c);
    let mut body: Vec<Block> = vec![v.facts()];
    if v.evals.is_empty() {
        body.push(html::para("The campaign has no evaluation yet."));
    } else {
        body.push(v.evaluations_figure()?);
        body.extend(v.best_over_time()?);
        let (row, mut effects) = v.parameter_effects()?;
        if !v.times.is_empty() {
            body.push(html::heading("Each parameter's effect"));
            body.push(Block::FigureRow { blocks: row });
        }
        effects.sort_by(|a, b| b.1.total_cmp(&a.1));
        if let [(px, _), (py, _), ..] = effects.as_slice() {
            body.push(v.heatmap(px, py)?);
        }
        body.push(html::heading("Failed configurations"));
        body.push(v.failures());
        body.push(html::heading("The model's start"));
        body.push(v.model_starts());
        body.push(html::heading("Final re-timing"));
        body.push(v.final_retiming());
        body.push(v.every_evaluation());
    }
    Ok(Section {
        id: id.into(),
        kind: "campaign",
        heading: format!("Campaign {}", c.path.display()),
        blocks: body,
    })
}

/// The fastest of `evals` that has a time.
fn fastest<'e>(evals: impl Iterator<Item = &'e Evaluation>) -> Option<&'e Evaluation> {
    evals.filter(|e| e.time_ns.is_some()).min_by(|a, b| {
        a.time_ns
            .unwrap_or(f64::INFINITY)
            .total_cmp(&b.time_ns.unwrap_or(f64::INFINITY))
    })
}

/// The nodes (and CPUs) the evaluations ran on, each once, sorted.
fn hosts(evals: &[Evaluation]) -> Vec<String> {
    let mut hosts: Vec<String> = evals
        .iter()
        .filter_map(|e| match (&e.node, &e.cpu) {
            (Some(n), Some(c)) => Some(format!("{n} ({c})")),
            (Some(n), None) => Some(n.clone()),
            _ => None,
        })
        .collect();
    hosts.sort();
    hosts.dedup();
    hosts
}

/// (wall time, best) at each evaluation that lowered the best so far.
fn improvements(evals: &[Evaluation]) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let mut last = f64::INFINITY;
    for e in evals {
        if let Some(b) = e.best_ns {
            if b < last {
                out.push((e.elapsed_s, b));
                last = b;
            }
        }
    }
    out
}

/// The best time at each value of a parameter.
fn best_per_value(points: &[(f64, f64)]) -> BTreeMap<i64, f64> {
    let mut best_per: BTreeMap<i64, f64> = BTreeMap::new();
    for &(v, t) in points {
        let slot = best_per.entry(v as i64).or_insert(f64::INFINITY);
        *slot = slot.min(t);
    }
    best_per
}

fn uncertainty(e: &Evaluation) -> String {
    e.uncertainty_pct
        .map_or("-".into(), |u| format!("± {u:.2} %"))
}

fn distinct(evals: &[&Evaluation], p: &str) -> Vec<i64> {
    let mut v: Vec<i64> = evals
        .iter()
        .filter_map(|e| value_of(e, p))
        .map(|x| x as i64)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// A parameter name as an id fragment.
pub fn css_id(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}
