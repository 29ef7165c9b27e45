//! The human-readable report `tdg profile report` prints.

use super::contents::Report;
use std::fmt::Write as _;

/// The human-readable report: header, context table (top `top` rows) and
/// the early/late split of the dominant contexts.
pub fn render_table(report: &Report, top: usize) -> String {
    let mut o = String::new();
    header(&mut o, report);
    contexts(&mut o, report, top);
    early_late(&mut o, report, top);
    o
}

/// The routine, its calls and where it lives, the timer, and what was left
/// out of the contexts.
fn header(o: &mut String, report: &Report) {
    let _ = writeln!(
        o,
        "routine {}: {} calls in {} thread(s), {} process(es), {} in the routine; {} dropped",
        report.routine,
        report.calls,
        report.threads,
        report.processes,
        stats::ns(report.total_ns),
        report.dropped
    );
    if !report.defined_in.is_empty() {
        let _ = writeln!(
            o,
            "defined in {} (where the shim found it)",
            report.defined_in
        );
    }
    if let Some(offset) = report.code_page_offset {
        let _ = writeln!(
            o,
            "code at page offset {offset} (timer={{ code_offset={offset}; }} times it as placed there)"
        );
    }
    let _ = writeln!(
        o,
        "timer: {:.3} GHz ticks, empty begin/end pair {} (subtracted from every call), {} stores",
        report.ticks_per_sec as f64 / 1e9,
        stats::ns(report.timer_overhead_ns),
        if report.nontemporal {
            "non-temporal"
        } else {
            "ordinary"
        }
    );
    if report.interrupted > 0 {
        let _ = writeln!(
            o,
            "{} call(s) ran over 10x their context's median (descheduled or interrupted): {} of the total; {} without them",
            report.interrupted,
            stats::ns(report.total_ns - report.uninterrupted_total_ns),
            stats::ns(report.uninterrupted_total_ns)
        );
    }
    for (name, n) in &report.data_values {
        let _ = writeln!(
            o,
            "{name}: {n} distinct values, treated as data rather than part of the call context"
        );
    }
}

/// The top `top` contexts ranked by time, and what the rest add up to.
fn contexts(o: &mut String, report: &Report, top: usize) {
    let _ = writeln!(o);
    let label_w = report
        .contexts
        .iter()
        .take(top)
        .map(|c| c.label().len())
        .max()
        .unwrap_or(7)
        .max(7);
    let _ = writeln!(
        o,
        "{:>4}  {:<label_w$}  {:>9}  {:>7}  {:>10}  {:>10}  {:>10}  {:>10}",
        "rank", "context", "calls", "share", "total", "min", "median", "mean"
    );
    for c in report.contexts.iter().take(top) {
        let _ = writeln!(
            o,
            "{:>4}  {:<label_w$}  {:>9}  {:>6.2}%  {:>10}  {:>10}  {:>10}  {:>10}",
            c.rank,
            c.label(),
            c.calls,
            c.share * 100.0,
            stats::ns(c.total_ns),
            stats::ns(c.all.min),
            stats::ns(c.all.median),
            stats::ns(c.all.mean)
        );
    }
    if report.contexts.len() > top {
        let rest: f64 = report.contexts[top..].iter().map(|c| c.share).sum();
        let _ = writeln!(
            o,
            "      ... {} more contexts, {:.2}% of the time",
            report.contexts.len() - top,
            rest * 100.0
        );
    }
}

/// The dominant contexts' first calls against the rest (cold against warm
/// caches), their buffers and threads.
fn early_late(o: &mut String, report: &Report, top: usize) {
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "early (first {} calls of a context) vs late (the rest):",
        report.early_calls
    );
    for c in report.contexts.iter().take(top.min(5)) {
        match (&c.early, &c.late) {
            (Some(e), Some(l)) => {
                let _ = writeln!(
                    o,
                    "  {}: early min {} mean {} | late min {} mean {} | early/late mean x{:.2}",
                    c.label(),
                    stats::ns(e.min),
                    stats::ns(e.mean),
                    stats::ns(l.min),
                    stats::ns(l.mean),
                    e.mean / l.mean
                );
            }
            _ => {
                let _ = writeln!(
                    o,
                    "  {}: only {} call(s), no late group",
                    c.label(),
                    c.calls
                );
            }
        }
        let reuse: Vec<String> = c
            .distinct_pointers
            .iter()
            .map(|(n, k)| format!("{n}: {k} distinct"))
            .collect();
        if !reuse.is_empty() {
            let _ = writeln!(o, "    buffers: {}", reuse.join(", "));
        }
        if let Some(n) = c.threads {
            let _ = writeln!(
                o,
                "    the process ran with {n} thread(s); called from {} thread(s)",
                c.callers
            );
        }
    }
}
