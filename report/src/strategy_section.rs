//! Strategy curves (`scripts/bench-search --json`): for each recorded
//! space, the fraction of the space's best each search strategy had
//! reached after each evaluation, median and interquartile spread over the
//! seeds (the methodology of Schoonhoven et al., "Benchmarking optimization
//! algorithms for auto-tuning GPU kernels"), and how many seeded searches
//! reached the top 1 %.

use crate::chart::{Axis, Chart, ChartError, Mark, Series, PALETTE};
use crate::html::{self, Block, Cell, Section};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The document's `kind`.
pub const KIND: &str = "tdg-strategy-curves";

/// One strategy at one budget on one space.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Runs {
    /// Seeded searches that ended in the space's top 1 %.
    pub reached_top: u64,
    pub seeds: u64,
    /// Per seed, the fraction of the best reached after each evaluation.
    pub curves: Vec<Vec<f64>>,
}

/// Space file name -> strategy -> budget -> runs.
#[derive(Debug, Clone, Deserialize)]
pub struct StrategyCurves {
    pub kind: String,
    pub spaces: BTreeMap<String, BTreeMap<String, BTreeMap<String, Runs>>>,
}

impl StrategyCurves {
    /// The curves of a bench-search file, checked: why not, in one line.
    pub fn from_value(v: serde_json::Value) -> Result<StrategyCurves, String> {
        let c: StrategyCurves = serde_json::from_value(v)
            .map_err(|e| format!("not a scripts/bench-search --json file ({e})"))?;
        if c.spaces.is_empty() {
            return Err("it holds no space's curves".into());
        }
        for (space, strategies) in &c.spaces {
            for (strategy, budgets) in strategies {
                for (budget, runs) in budgets {
                    let at = format!("{space}, {strategy} at budget {budget}");
                    budget
                        .parse::<u64>()
                        .map_err(|_| format!("{at}: a budget is a whole number"))?;
                    if runs.curves.is_empty() || runs.curves.iter().any(Vec::is_empty) {
                        return Err(format!("{at}: an empty curve"));
                    }
                    if runs.reached_top > runs.seeds {
                        return Err(format!(
                            "{at}: {} of {} seeds reached the top",
                            runs.reached_top, runs.seeds
                        ));
                    }
                    let bad = runs
                        .curves
                        .iter()
                        .flatten()
                        .find(|f| !(f.is_finite() && **f >= 0.0 && **f <= 1.0 + 1e-9));
                    if let Some(f) = bad {
                        return Err(format!("{at}: {f} is no fraction of the best (0 to 1)"));
                    }
                }
            }
        }
        Ok(c)
    }
}

pub fn section(id: &str, c: &StrategyCurves) -> Result<Section, ChartError> {
    let mut blocks = vec![reached(id, c)];
    for (i, (space, strategies)) in c.spaces.iter().enumerate() {
        blocks.push(figure(&format!("{id}-space-{i}"), space, strategies)?);
    }
    Ok(Section {
        id: id.into(),
        kind: "strategies",
        heading: format!("Search strategies on {} recorded spaces", c.spaces.len()),
        blocks,
    })
}

/// The budget whose curves a figure draws: the largest (its curves hold
/// every smaller budget's evaluations too).
fn largest(budgets: &BTreeMap<String, Runs>) -> Option<(u64, &Runs)> {
    budgets
        .iter()
        .filter_map(|(b, r)| Some((b.parse::<u64>().ok()?, r)))
        .max_by_key(|(b, _)| *b)
}

fn reached(id: &str, c: &StrategyCurves) -> Block {
    let mut rows = Vec::new();
    for (space, strategies) in &c.spaces {
        for (strategy, budgets) in strategies {
            let mut by_budget: Vec<(u64, &Runs)> = budgets
                .iter()
                .filter_map(|(b, r)| Some((b.parse::<u64>().ok()?, r)))
                .collect();
            by_budget.sort_by_key(|(b, _)| *b);
            for (budget, runs) in by_budget {
                rows.push((
                    vec![
                        Cell::text(space.clone()),
                        Cell::text(strategy.clone()),
                        Cell::num(budget.to_string()),
                        Cell::num(format!("{}/{}", runs.reached_top, runs.seeds)),
                    ],
                    "",
                ));
            }
        }
    }
    html::table(
        &format!("{id}-reached"),
        "Seeded searches of each strategy that ended in the space's top 1 % (within 5 % of the best where the top 1 % spans more), by budget.",
        &["space", "strategy", "budget", "reached top 1 %"],
        rows,
    )
}

/// A quantile of sorted values (nearest rank).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

fn figure(
    id: &str,
    space: &str,
    strategies: &BTreeMap<String, BTreeMap<String, Runs>>,
) -> Result<Block, ChartError> {
    let mut chart = Chart::new(
        format!("{space}: fraction of the best reached"),
        Axis::integer("evaluations"),
        Axis::linear("fraction of the best (best time / best so far)"),
    );
    for (k, (strategy, budgets)) in strategies.iter().enumerate() {
        let Some((_, runs)) = largest(budgets) else {
            continue;
        };
        let longest = runs.curves.iter().map(Vec::len).max().unwrap_or(0);
        let mut points = Vec::new();
        let mut error = Vec::new();
        for e in 0..longest {
            // A search that stopped early (a small space) keeps its best.
            let mut at: Vec<f64> = runs.curves.iter().map(|c| c[e.min(c.len() - 1)]).collect();
            at.sort_by(f64::total_cmp);
            points.push(((e + 1) as f64, quantile(&at, 0.5)));
            error.push(Some((quantile(&at, 0.25), quantile(&at, 0.75))));
        }
        let mut series = Series::new(
            strategy.clone(),
            Mark::Line,
            PALETTE[k % PALETTE.len()],
            points,
        );
        series.error = error;
        chart.series.push(series);
    }
    chart.description = format!(
        "Median over the seeds of the fraction of the best reached after each evaluation, per strategy, with the interquartile range, on {space}."
    );
    Ok(html::figure(
        id,
        "strategy-curves",
        &chart.svg()?,
        "Each line is a strategy's median search (the seeds' median of best time over best so far), its bars the seeds' interquartile range; 1 is the recorded best.",
    ))
}
