//! A profile's section: per routine, the contexts table, the timeline of
//! every call coloured by context, each leading context's own timeline
//! with its early calls marked, and the early/late medians side by side.

use crate::chart::{Axis, Chart, ChartError, Mark, Scale, Series, GREY, PALETTE};
use crate::html::{self, Block, Cell, Section};
use crate::input::Profile;
use instrument::report::{ContextStats, Report};
use stats::Summary;

/// Contexts drawn in their own colour (and given their own timeline); the
/// rest are grey.
pub const SHOWN_CONTEXTS: usize = 6;

/// Points one timeline draws at most: every k-th call beyond it (the
/// caption says which), so a long profile stays a light page.
pub const MAX_TIMELINE_POINTS: usize = 20_000;

/// Where a call timed at 0 ns (no longer than the timer's own overhead,
/// which is subtracted) sits on a log time axis: its floor, not off the
/// plot, so every call is a point.
pub const ZERO_CALL_NS: f64 = 0.1;

/// The stride that keeps `n` points under [`MAX_TIMELINE_POINTS`].
pub fn stride(n: usize) -> usize {
    n.div_ceil(MAX_TIMELINE_POINTS).max(1)
}

/// Every call's time over its index, coloured by context rank: the plot
/// `tdg profile report --svg` writes.
pub fn timeline_chart(r: &Report) -> Chart {
    let pts = &r.timeline;
    let step = stride(pts.len());
    let max = pts.iter().map(|p| p.0).fold(0.0, f64::max);
    let title = if step > 1 {
        format!(
            "{}: time per call over call index (every {step}th of {} calls)",
            r.routine,
            pts.len()
        )
    } else {
        format!("{}: time per call over call index", r.routine)
    };
    let mut chart = Chart::new(
        title,
        Axis::linear(format!("call index (0 .. {})", pts.len().saturating_sub(1))),
        Axis::time("time per call", max, Scale::Log),
    );
    let mut drawn = 0;
    for k in 0..=SHOWN_CONTEXTS {
        let in_k = |rank: usize| {
            if k < SHOWN_CONTEXTS {
                rank == k + 1
            } else {
                rank == 0 || rank > SHOWN_CONTEXTS
            }
        };
        let points: Vec<(f64, f64)> = pts
            .iter()
            .enumerate()
            .step_by(step)
            .filter(|(_, p)| in_k(p.1))
            .map(|(i, p)| (i as f64, p.0.max(ZERO_CALL_NS)))
            .collect();
        if points.is_empty() {
            continue;
        }
        drawn += points.len();
        let (name, color) = match r.contexts.get(k) {
            Some(c) if k < SHOWN_CONTEXTS => (
                format!("#{} {}", c.rank, html::shortened(&c.label(), 28)),
                PALETTE[k % PALETTE.len()],
            ),
            _ => ("other contexts".to_string(), GREY),
        };
        chart
            .series
            .push(Series::new(name, Mark::Dots, color, points));
    }
    chart.description = format!(
        "{drawn} calls of {} plotted (time per call, log scale, against call index), coloured by call context; {} contexts in all.",
        r.routine,
        r.contexts.len()
    );
    chart
}

/// The standalone SVG of [`timeline_chart`].
pub fn timeline_svg(r: &Report) -> Result<String, ChartError> {
    timeline_chart(r).svg()
}

pub fn section(id: &str, p: &Profile) -> Result<Section, ChartError> {
    let mut body: Vec<Block> = Vec::new();
    for (ri, r) in p.reports.iter().enumerate() {
        let rid = format!("{id}-r{}", ri + 1);
        if p.reports.len() > 1 {
            body.push(Block::Heading {
                text: format!("Routine {}", r.routine),
                id: Some(rid.clone()),
            });
        }
        routine(&rid, r, &mut body)?;
    }
    Ok(Section {
        id: id.into(),
        kind: "profile",
        heading: format!("Profile {}", p.path.display()),
        blocks: body,
    })
}

fn routine(id: &str, r: &Report, body: &mut Vec<Block>) -> Result<(), ChartError> {
    body.push(facts(r));
    body.push(contexts_table(id, r));
    if !r.data_values.is_empty() {
        body.push(html::note(&format!(
            "Left out of the context (data, not sizes): {}.",
            r.data_values
                .iter()
                .map(|(n, k)| format!("{n} ({k} distinct values)"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    body.push(timeline_figure(id, r)?);
    // Each leading context's own timeline, early calls marked.
    for (k, c) in r.contexts.iter().take(SHOWN_CONTEXTS).enumerate() {
        body.extend(context_figure(id, r, k, c)?);
    }
    body.extend(early_late_figure(id, r)?);
    Ok(())
}

/// The routine's calls, where it is defined and how it was timed.
fn facts(r: &Report) -> Block {
    let mut facts: Vec<(&str, String)> = vec![
        ("routine", r.routine.clone()),
        (
            "calls",
            format!(
                "{} recorded{}, in {} thread(s) of {} process(es)",
                r.calls,
                if r.dropped > 0 {
                    format!(", {} dropped (buffer full)", r.dropped)
                } else {
                    String::new()
                },
                r.threads,
                r.processes
            ),
        ),
        ("time in the routine", stats::ns(r.total_ns)),
    ];
    if !r.defined_in.is_empty() {
        facts.push(("defined in", r.defined_in.clone()));
    }
    if let Some(off) = r.code_page_offset {
        facts.push((
            "code page offset",
            format!("{off} (spec: timer={{ code_offset={off}; }})"),
        ));
    }
    if r.interrupted > 0 {
        facts.push((
            "interrupted calls",
            format!(
                "{} (over {}x their context's median and 50 µs more); {} without them",
                r.interrupted,
                instrument::report::INTERRUPTED_FACTOR,
                stats::ns(r.uninterrupted_total_ns)
            ),
        ));
    }
    facts.push((
        "timer",
        format!(
            "{} ticks/s, overhead {} per call subtracted; {} stores",
            r.ticks_per_sec,
            stats::ns(r.timer_overhead_ns),
            if r.nontemporal {
                "non-temporal"
            } else {
                "cached"
            }
        ),
    ));
    html::facts(&facts)
}

/// A context's median, or "-" without calls.
fn med(s: &Option<stats::Summary>) -> String {
    s.as_ref().map_or("-".to_string(), |s| stats::ns(s.median))
}

fn contexts_table(id: &str, r: &Report) -> Block {
    let rows: Vec<(Vec<Cell>, &str)> = r
        .contexts
        .iter()
        .map(|c| {
            let ratio = match (&c.early, &c.late) {
                (Some(e), Some(l)) if l.median > 0.0 => format!("{:.2}x", e.median / l.median),
                _ => "-".into(),
            };
            (
                vec![
                    Cell::num(c.rank.to_string()),
                    Cell::text(c.label()),
                    Cell::num(c.calls.to_string()),
                    Cell::num(format!("{:.1} %", c.share * 100.0)),
                    Cell::num(stats::ns(c.all.median)),
                    Cell::num(stats::ns(c.all.min)),
                    Cell::num(med(&c.early)),
                    Cell::num(med(&c.late)),
                    Cell::num(ratio),
                    Cell::num(c.interrupted.to_string()),
                    Cell::text(
                        c.distinct_pointers
                            .iter()
                            .map(|(n, k)| format!("{n}: {k}"))
                            .collect::<Vec<_>>()
                            .join(", "),
                    ),
                ],
                "",
            )
        })
        .collect();
    html::table(
        &format!("{id}-contexts"),
        &format!(
            "Call contexts (distinct values of the integer parameters), by share of the routine's time; early = each context's first {} calls",
            r.early_calls
        ),
        &[
            "rank", "context", "calls", "share", "median", "min", "early median", "late median", "early / late", "interrupted",
            "distinct pointers",
        ],
        rows,
    )
}

fn timeline_figure(id: &str, r: &Report) -> Result<Block, ChartError> {
    let tl = timeline_chart(r);
    let step = stride(r.timeline.len());
    Ok(html::figure(
        &format!("{id}-timeline"),
        "timeline",
        &tl.svg()?,
        &format!(
            "Every{} call of {} in the order made ({} calls), coloured by context (the {} leading contexts; grey: the rest). Time axis logarithmic.",
            if step > 1 { format!(" {step}th") } else { String::new() },
            r.routine,
            r.timeline.len(),
            SHOWN_CONTEXTS.min(r.contexts.len())
        ),
    ))
}

/// Context `c`'s own timeline, its early calls marked (none with fewer
/// than two calls); `k` picks its colour.
fn context_figure(
    id: &str,
    r: &Report,
    k: usize,
    c: &instrument::report::ContextStats,
) -> Result<Option<Block>, ChartError> {
    let times: Vec<f64> = r
        .timeline
        .iter()
        .filter(|p| p.1 == c.rank)
        .map(|p| p.0.max(ZERO_CALL_NS))
        .collect();
    if times.len() < 2 {
        return Ok(None);
    }
    let step = stride(times.len());
    let early: Vec<(f64, f64)> = times
        .iter()
        .take(r.early_calls)
        .enumerate()
        .map(|(i, &t)| ((i + 1) as f64, t))
        .collect();
    let late: Vec<(f64, f64)> = times
        .iter()
        .enumerate()
        .skip(r.early_calls)
        .step_by(step)
        .map(|(i, &t)| ((i + 1) as f64, t))
        .collect();
    let max = times.iter().copied().fold(0.0, f64::max);
    let scale = Scale::of(&times);
    let mut ch = Chart::new(
        format!("Context #{}: {}", c.rank, html::shortened(&c.label(), 48)),
        Axis::linear(format!("call of this context (1 .. {})", times.len())),
        Axis::time("time per call", max, scale),
    );
    let color = PALETTE[k % PALETTE.len()];
    let n_early = early.len();
    let n_late = late.len();
    ch.series.push(early_series(
        format!("first {} calls (early)", r.early_calls),
        early,
    ));
    ch.series
        .push(Series::new("later calls", Mark::Dots, color, late));
    ch.width = 640;
    ch.height = 300;
    ch.description = format!(
        "{} calls of context #{} plotted against their order within the context: {n_early} early, {n_late} later.",
        n_early + n_late,
        c.rank
    );
    Ok(Some(html::figure(
        &format!("{id}-context-{}", c.rank),
        "context-timeline",
        &ch.svg()?,
        &format!(
            "Context #{} ({} calls, {:.1} % of the time): early median {}, late median {}.",
            c.rank,
            c.calls,
            c.share * 100.0,
            med(&c.early),
            med(&c.late)
        ),
    )))
}

/// Early calls, drawn as rings in the second colour on both profile
/// charts (late calls are dots).
fn early_series(label: String, points: Vec<(f64, f64)>) -> Series {
    Series::new(label, Mark::Rings, PALETTE[1], points)
}

/// Early against late medians of the leading contexts.
fn early_late_figure(id: &str, r: &Report) -> Result<Option<Block>, ChartError> {
    let shown: Vec<&ContextStats> = r
        .contexts
        .iter()
        .take(12)
        .filter(|c| c.early.is_some() && c.late.is_some())
        .collect();
    if shown.is_empty() {
        return Ok(None);
    }
    // Each shown context's rank against the median of one of its halves.
    let medians = |half: fn(&ContextStats) -> &Option<Summary>| -> Vec<(f64, f64)> {
        shown
            .iter()
            .map(|c| {
                (
                    c.rank as f64,
                    half(c).as_ref().map_or(f64::NAN, |s| s.median),
                )
            })
            .collect()
    };
    let early = medians(|c| &c.early);
    let late = medians(|c| &c.late);
    let all: Vec<f64> = early
        .iter()
        .chain(&late)
        .map(|p| p.1)
        .filter(|v| v.is_finite())
        .collect();
    let max = all.iter().copied().fold(0.0, f64::max);
    let scale = Scale::of(&all);
    let mut ch = Chart::new(
        "Early and late calls of each context",
        Axis::integer("context rank (1 = most time)"),
        Axis::time("median time per call", max, scale),
    );
    ch.series.push(early_series(
        format!("early (first {} calls)", r.early_calls),
        early,
    ));
    ch.series
        .push(Series::new("late (the rest)", Mark::Dots, PALETTE[0], late));
    ch.width = 640;
    ch.height = 320;
    ch.description = format!(
        "Median time of the early and the late calls of {} contexts: a cold start shows as early above late.",
        shown.len()
    );
    Ok(Some(html::figure(
        &format!("{id}-early-late"),
        "early-late",
        &ch.svg()?,
        "Each context's first calls run with cold caches (early); the rest warm (late). A driver should time the state of the calls that dominate.",
    )))
}
