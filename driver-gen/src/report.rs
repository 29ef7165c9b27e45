//! Human and CSV renderings of run reports (JSON is serde's).

use crate::model::Origin;
use crate::run::{OperandReport, RunReport, SettingSources};
use spec_lang::vocabulary::Keyword;
use stats::ns;
use std::fmt::Write;

/// What the flush did before each sample, and what it cost.
fn flush_line(r: &RunReport) -> String {
    let every_cpu = if r.flush_all_cpus {
        ", on every CPU"
    } else {
        ""
    };
    let what = match (&r.flush_eviction, r.flush_clflushes_operands) {
        (Some(e), true) => format!(
            "clflush of the flushed operands, then read {} ({}) and one line in each of {} pages ({}){every_cpu}",
            stats::bytes(e.read_kib * 1024),
            e.read_source,
            e.tlb_pages,
            e.tlb_source
        ),
        (_, true) => format!(
            "clflush of the flushed operands, then read {} KiB ({}){every_cpu}",
            r.flush_kib, r.flush_kib_source
        ),
        (_, false) => format!(
            "{} {} KiB ({}{}){every_cpu}",
            r.flush.spelling(),
            r.flush_kib,
            r.flush_kib_source,
            r.sources
                .as_ref()
                .map(|s| format!("; {} by {}", r.flush.spelling(), s.flush))
                .unwrap_or_default()
        ),
    };
    match r.flush_ns_per_sample {
        Some(t) => format!("{what}; {} per sample, outside the timed call", ns(t)),
        None => what,
    }
}

/// " (command line)": where a setting came from, for the table; empty for
/// a report read back from a tdg that did not record it.
fn source(r: &RunReport, setting: impl Fn(&SettingSources) -> &Origin) -> String {
    r.sources
        .as_ref()
        .map(|s| format!(" ({})", setting(s)))
        .unwrap_or_default()
}

/// "cycle (default; 2.597 GHz TSC, calibrated)": the timer that ran, where
/// the one asked for came from, and the TSC's rate.
fn timer_words(r: &RunReport) -> String {
    let mut notes = Vec::new();
    if let Some(s) = &r.sources {
        notes.push(s.timer.to_string());
    }
    if r.timer != r.timer_requested {
        notes.push(format!(
            "{} asked for is not available",
            r.timer_requested.spelling()
        ));
    }
    if let Some(hz) = r.tsc_hz {
        notes.push(format!("{:.3} GHz TSC, {}", hz / 1e9, r.tsc_hz_source));
    }
    match notes.is_empty() {
        true => r.timer.spelling().to_string(),
        false => format!("{} ({})", r.timer.spelling(), notes.join("; ")),
    }
}

/// The default `tdg run` output: one block per run, a labelled line per
/// fact.
pub fn format_table(r: &RunReport) -> String {
    let mut rows: Vec<(&str, String)> = vec![
        ("routine", r.routine.clone()),
        (
            "timer",
            format!(
                "{}, overhead {} (subtracted), resolution {}",
                timer_words(r),
                ns(r.timer_overhead_ns),
                ns(r.timer_resolution_ns)
            ),
        ),
        (
            "method",
            format!(
                "{}, {} call(s) per sample, {} working set(s), min interval {} ({})",
                r.mode,
                r.reps_per_sample,
                r.working_sets,
                ns(r.min_interval_ns as f64),
                r.min_interval_source
            ),
        ),
        ("flush", flush_line(r)),
    ];
    if r.team.threads_requested > 1 || r.team.threads > 1 {
        rows.push(("threads", team_line(r)));
    }
    if let Some(offset) = r.code_page_offset {
        rows.push((
            "code",
            format!(
                "{}, {} at page offset {offset}{}",
                r.code,
                r.routine,
                source(r, |s| &s.code_offset)
            ),
        ));
    }
    rows.extend(r.operands.iter().map(|op| ("operand", operand_line(op))));
    rows.push(("samples", samples_line(r)));
    rows.push((
        "per call",
        format!("{}  stddev {}", r.stats.ns_line(), ns(r.stats.stddev)),
    ));
    rows.push((
        "reported",
        format!("{} ({})", ns(r.reported_ns), r.reported_why),
    ));
    rows.push(("uncertainty", uncertainty(r)));
    if !r.stable {
        rows.push(("UNSTABLE", r.unstable_reason.clone()));
    }
    if let (Some(b), Some(a)) = (r.mflops_best, r.mflops_avg) {
        rows.push(("MFLOPS", format!("best {b:.1}, average {a:.1}")));
    }
    rows.push(("verification", verification_line(r)));
    rows.extend(r.warnings.iter().map(|w| ("warning", w.clone())));
    rows.iter()
        .map(|(label, value)| format!("{label:<12} {value}\n"))
        .collect()
}

fn team_line(r: &RunReport) -> String {
    let cpus = r
        .team
        .thread_cpus
        .iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    format!(
        "{} ran (of {} asked for{}), pinned to CPUs {}, operand pages first touched by {}",
        r.team.threads,
        r.team.threads_requested,
        if r.team.openmp { ", OpenMP" } else { "" },
        if cpus.is_empty() { "none".into() } else { cpus },
        if r.team.first_touch == "threads" {
            "the threads"
        } else {
            "the main thread"
        }
    )
}

fn operand_line(op: &OperandReport) -> String {
    format!(
        "{} {} bytes at 0x{:x} (align {}{}), {}{}",
        op.name,
        op.bytes,
        op.address,
        op.align,
        if op.misalign > 0 {
            format!(", never {}", op.misalign)
        } else {
            String::new()
        },
        op.cache,
        if op.copies > 1 {
            format!(", {} rotating copies", op.copies)
        } else {
            String::new()
        }
    )
}

/// Adaptive sampling can take thousands: the first few, and how many over
/// how long (`--json` has every one).
fn samples_line(r: &RunReport) -> String {
    const SHOWN: usize = 10;
    let shown = r
        .samples_ns
        .iter()
        .take(SHOWN)
        .map(|v| ns(*v))
        .collect::<Vec<_>>()
        .join("  ");
    if r.samples_ns.len() > SHOWN {
        format!(
            "{shown}  ... ({} samples over {:.0} ms)",
            r.samples_ns.len(),
            r.sampling.elapsed_ms
        )
    } else {
        shown
    }
}

fn verification_line(r: &RunReport) -> String {
    if r.verification.detail.is_empty() {
        r.verification.status.clone()
    } else {
        format!("{}: {}", r.verification.status, r.verification.detail)
    }
}

/// The run's stated uncertainty in words.
pub fn uncertainty(r: &RunReport) -> String {
    match r.uncertainty_pct {
        Some(p) => format!(
            "+-{p:.2}% ({} over the first and the second half of the {} samples agree within it{})",
            r.selection.spelling(),
            r.samples_ns.len(),
            if r.sampling.adaptive {
                format!(
                    "; sampled until within {}%, over at least {} ms",
                    r.sampling.stable_pct, r.sampling.min_time_ms
                )
            } else {
                String::new()
            }
        ),
        None => format!(
            "unknown ({} sample(s) are too few to judge)",
            r.samples_ns.len()
        ),
    }
}

pub const CSV_HEADER: &str = "routine,timer,mode,reps,working_sets,flush,flush_kib,samples,min_ns,median_ns,mean_ns,max_ns,stddev_ns,reported_ns,selection,uncertainty_pct,stable,mflops_best,mflops_avg,timer_overhead_ns,verification";

pub fn format_csv_row(r: &RunReport) -> String {
    let opt = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_default();
    format!(
        "{},{},{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{},{},{},{},{},{:.3},{}",
        r.routine,
        r.timer.spelling(),
        r.mode,
        r.reps_per_sample,
        r.working_sets,
        r.flush.spelling(),
        r.flush_kib,
        r.samples_ns.len(),
        r.stats.min,
        r.stats.median,
        r.stats.mean,
        r.stats.max,
        r.stats.stddev,
        r.reported_ns,
        r.selection.spelling(),
        opt(r.uncertainty_pct),
        r.stable,
        opt(r.mflops_best),
        opt(r.mflops_avg),
        r.timer_overhead_ns,
        r.verification.status
    )
}

/// Flush sweep table: time per flush size, with the ratio to the unflushed run.
pub fn format_sweep(reports: &[RunReport]) -> String {
    let mut s = String::new();
    let base = reports.first().map(|r| r.reported_ns).unwrap_or(0.0);
    let _ = writeln!(
        s,
        "{:>10}  {:>14}  {:>8}  {:>6}  {:>14}",
        "flush KiB", "reported", "x first", "R", "mode"
    );
    for r in reports {
        let _ = writeln!(
            s,
            "{:>10}  {:>14}  {:>8.2}  {:>6}  {:>14}",
            r.flush_kib,
            ns(r.reported_ns),
            if base > 0.0 {
                r.reported_ns / base
            } else {
                0.0
            },
            r.reps_per_sample,
            r.mode
        );
    }
    // Where the curve flattens: the first size within 5% of the slowest.
    let slowest = reports.iter().map(|r| r.reported_ns).fold(0.0, f64::max);
    if let Some(cold) = reports.iter().find(|r| r.reported_ns >= 0.95 * slowest) {
        if reports.len() > 2 && cold.flush_kib > 0 {
            let _ = writeln!(
                s,
                "time stops rising (within 5% of the slowest) from {} KiB: operands cold there",
                cold.flush_kib
            );
        }
    }
    s
}
