//! What a profile says about one routine: its call contexts (distinct tuples
//! of the non-pointer recorded values) ranked by share of time, the per-call
//! timeline, and the early/late split of seed 003 Figs. 8-9 (the first calls
//! of a context run with cold caches, later ones warm).

use crate::format::{Profile, ValueKind};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("the profile has no routine `{name}`; it has: {have}")]
    NoSuchRoutine { name: String, have: String },
    #[error("the profile records {count} routines ({have}); choose one with --routine")]
    Ambiguous { count: usize, have: String },
    #[error("the profile holds no routine at all")]
    Empty,
    #[error("routine `{0}` has no recorded call (all were dropped? raise TDG_PROFILE_CALLS)")]
    NoCalls(String),
}

#[derive(Debug, Clone)]
pub struct ReportOptions {
    pub routine: Option<String>,
    /// Calls of each context that count as "early" (seed 003 uses 4).
    pub early_calls: usize,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            routine: None,
            early_calls: 4,
        }
    }
}

/// min / median / mean of a group of calls, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    pub calls: u64,
    pub min_ns: f64,
    pub median_ns: f64,
    pub mean_ns: f64,
}

impl Summary {
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        let n = s.len();
        let median = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        Some(Summary {
            calls: n as u64,
            min_ns: s[0],
            median_ns: median,
            mean_ns: s.iter().sum::<f64>() / n as f64,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextValue {
    pub name: String,
    pub value: i64,
    pub display: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextStats {
    /// 1 = most total time.
    pub rank: usize,
    pub values: Vec<ContextValue>,
    pub calls: u64,
    pub total_ns: f64,
    /// Of the routine's total recorded time.
    pub share: f64,
    pub all: Summary,
    /// The first `early_calls` calls of this context.
    pub early: Option<Summary>,
    /// The rest.
    pub late: Option<Summary>,
    /// Calls far slower than this context's median (over 10x and 50 us
    /// more): the thread was descheduled or interrupted mid-call, so their
    /// wall time is mostly not the routine's. Only judged with >= 3 calls.
    pub interrupted: u64,
    /// `total_ns` without the interrupted calls.
    pub uninterrupted_total_ns: f64,
    /// Distinct addresses seen per pointer argument: 1 means the application
    /// reuses one workspace (likely warm), many means fresh buffers.
    pub distinct_pointers: Vec<(String, usize)>,
}

impl ContextStats {
    /// `len=4096, level=6`.
    pub fn label(&self) -> String {
        if self.values.is_empty() {
            return "(no integer parameters)".into();
        }
        self.values
            .iter()
            .map(|v| format!("{}={}", v.name, v.display))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub routine: String,
    /// The loaded object whose definition the shim forwarded to (empty for
    /// calls recorded by markers).
    pub defined_in: String,
    pub calls: u64,
    pub dropped: u64,
    pub threads: usize,
    pub processes: usize,
    pub total_ns: f64,
    /// Calls judged interrupted (see [`ContextStats::interrupted`]).
    pub interrupted: u64,
    pub uninterrupted_total_ns: f64,
    pub ticks_per_sec: u64,
    pub timer_overhead_ns: f64,
    pub nontemporal: bool,
    pub early_calls: usize,
    pub contexts: Vec<ContextStats>,
    /// Values left out of the context key (name, distinct values seen).
    pub data_values: Vec<(String, usize)>,
    /// Per-call time in call order (start tick), with the call's context rank.
    #[serde(skip)]
    pub timeline: Vec<(f64, usize)>,
}

/// Up to this many distinct values a parameter always counts as part of the
/// call context; above it, only if at least one call in ten repeats a value
/// (a running checksum or a fresh seed never does; a size usually does).
pub const DATA_DISTINCT_FLOOR: usize = 32;

/// A call slower than INTERRUPTED_FACTOR x its context's median and at
/// least INTERRUPTED_EXTRA_NS more counts as interrupted (a scheduler time
/// slice is milliseconds; no cache effect makes a call 10x slower).
pub const INTERRUPTED_FACTOR: f64 = 10.0;
pub const INTERRUPTED_EXTRA_NS: f64 = 50_000.0;

/// Builds the report for one routine of `profile`.
pub fn build(profile: &Profile, opts: &ReportOptions) -> Result<Report, ReportError> {
    let have = || {
        profile
            .routines
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let id = match &opts.routine {
        Some(name) => profile
            .routine_id(name)
            .ok_or_else(|| ReportError::NoSuchRoutine {
                name: name.clone(),
                have: have(),
            })?,
        None => match profile.routines.len() {
            0 => return Err(ReportError::Empty),
            1 => 0,
            n => {
                return Err(ReportError::Ambiguous {
                    count: n,
                    have: have(),
                })
            }
        },
    };
    let info = &profile.routines[id as usize];
    let mut records: Vec<_> = profile.records.iter().filter(|r| r.routine == id).collect();
    if records.is_empty() {
        return Err(ReportError::NoCalls(info.name.clone()));
    }
    records.sort_by_key(|r| r.start);

    // A value that differs on (nearly) every call, like a running checksum,
    // is data, not a problem size: keying contexts on it would make every
    // call its own context.
    let limit = DATA_DISTINCT_FLOOR.max(records.len() * 9 / 10);
    let mut excluded = Vec::new();
    let context_idx: Vec<usize> = info
        .values
        .iter()
        .enumerate()
        .filter(|(_, v)| v.kind.is_context())
        .filter(|&(i, v)| {
            let distinct: HashSet<i64> = records
                .iter()
                .map(|r| r.values().get(i).copied().unwrap_or(0))
                .collect();
            let keep = distinct.len() <= limit;
            if !keep {
                excluded.push((v.name.clone(), distinct.len()));
            }
            keep
        })
        .map(|(i, _)| i)
        .collect();
    let pointer_idx: Vec<usize> = info
        .values
        .iter()
        .enumerate()
        .filter(|(_, v)| v.kind == ValueKind::Pointer)
        .map(|(i, _)| i)
        .collect();

    struct Acc {
        key: Vec<i64>,
        samples: Vec<f64>,
        pointers: Vec<HashSet<i64>>,
    }
    let mut by_key: HashMap<Vec<i64>, usize> = HashMap::new();
    let mut accs: Vec<Acc> = Vec::new();
    let mut call_ctx = Vec::with_capacity(records.len());
    let mut threads = HashSet::new();
    for r in &records {
        let vals = r.values();
        let key: Vec<i64> = context_idx
            .iter()
            .map(|&i| vals.get(i).copied().unwrap_or(0))
            .collect();
        let next = accs.len();
        let slot = *by_key.entry(key.clone()).or_insert(next);
        if slot == next {
            accs.push(Acc {
                key,
                samples: Vec::new(),
                pointers: vec![HashSet::new(); pointer_idx.len()],
            });
        }
        // The empty begin/end cost is part of every recorded interval; the
        // driver subtracts its own, so the profile does too.
        let ns = profile.ticks_to_ns(r.ticks.saturating_sub(profile.timer_overhead_ticks));
        accs[slot].samples.push(ns);
        for (j, &pi) in pointer_idx.iter().enumerate() {
            accs[slot].pointers[j].insert(vals.get(pi).copied().unwrap_or(0));
        }
        call_ctx.push((ns, slot));
        threads.insert(r.thread);
    }
    let total_ns: f64 = call_ctx.iter().map(|c| c.0).sum();
    let mut order: Vec<usize> = (0..accs.len()).collect();
    let totals: Vec<f64> = accs.iter().map(|a| a.samples.iter().sum()).collect();
    order.sort_by(|&a, &b| totals[b].total_cmp(&totals[a]));
    let mut rank_of = vec![0usize; accs.len()];
    for (rank0, &slot) in order.iter().enumerate() {
        rank_of[slot] = rank0 + 1;
    }
    let contexts: Vec<ContextStats> = order
        .iter()
        .map(|&slot| {
            let a = &accs[slot];
            let split = opts.early_calls.min(a.samples.len());
            let all = Summary::of(&a.samples).expect("non-empty");
            let cutoff =
                (all.median_ns * INTERRUPTED_FACTOR).max(all.median_ns + INTERRUPTED_EXTRA_NS);
            let (interrupted, uninterrupted_total_ns) = if a.samples.len() >= 3 {
                let slow: Vec<f64> = a.samples.iter().copied().filter(|&t| t > cutoff).collect();
                (slow.len() as u64, totals[slot] - slow.iter().sum::<f64>())
            } else {
                (0, totals[slot])
            };
            ContextStats {
                rank: rank_of[slot],
                values: context_idx
                    .iter()
                    .zip(&a.key)
                    .map(|(&i, &v)| ContextValue {
                        name: info.values[i].name.clone(),
                        value: v,
                        display: info.values[i].kind.display(v),
                    })
                    .collect(),
                calls: a.samples.len() as u64,
                total_ns: totals[slot],
                share: if total_ns > 0.0 {
                    totals[slot] / total_ns
                } else {
                    0.0
                },
                all,
                interrupted,
                uninterrupted_total_ns,
                early: Summary::of(&a.samples[..split]),
                late: Summary::of(&a.samples[split..]),
                distinct_pointers: pointer_idx
                    .iter()
                    .zip(&a.pointers)
                    .map(|(&i, set)| (info.values[i].name.clone(), set.len()))
                    .collect(),
            }
        })
        .collect();
    Ok(Report {
        interrupted: contexts.iter().map(|c| c.interrupted).sum(),
        uninterrupted_total_ns: contexts.iter().map(|c| c.uninterrupted_total_ns).sum(),
        routine: info.name.clone(),
        defined_in: info.defined_in.clone(),
        calls: records.len() as u64,
        dropped: info.dropped,
        threads: threads.len(),
        processes: profile.pids.len(),
        total_ns,
        ticks_per_sec: profile.ticks_per_sec,
        timer_overhead_ns: profile.ticks_to_ns(profile.timer_overhead_ticks),
        nontemporal: profile.nontemporal,
        early_calls: opts.early_calls,
        contexts,
        data_values: excluded,
        timeline: call_ctx
            .into_iter()
            .map(|(ns, slot)| (ns, rank_of[slot]))
            .collect(),
    })
}

/// Nanoseconds with a unit that keeps 3-4 significant digits.
pub fn fmt_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e4 {
        format!("{:.2} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// The human-readable report: header, context table (top `top` rows) and
/// the early/late split of the dominant contexts.
pub fn render_table(report: &Report, top: usize) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "routine {}: {} calls in {} thread(s), {} process(es), {} in the routine; {} dropped",
        report.routine,
        report.calls,
        report.threads,
        report.processes,
        fmt_ns(report.total_ns),
        report.dropped
    );
    if !report.defined_in.is_empty() {
        let _ = writeln!(
            o,
            "defined in {} (where the shim found it)",
            report.defined_in
        );
    }
    let _ = writeln!(
        o,
        "timer: {:.3} GHz ticks, empty begin/end pair {} (subtracted from every call), {} stores",
        report.ticks_per_sec as f64 / 1e9,
        fmt_ns(report.timer_overhead_ns),
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
            fmt_ns(report.total_ns - report.uninterrupted_total_ns),
            fmt_ns(report.uninterrupted_total_ns)
        );
    }
    for (name, n) in &report.data_values {
        let _ = writeln!(
            o,
            "{name}: {n} distinct values, treated as data rather than part of the call context"
        );
    }
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
            fmt_ns(c.total_ns),
            fmt_ns(c.all.min_ns),
            fmt_ns(c.all.median_ns),
            fmt_ns(c.all.mean_ns)
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
                    fmt_ns(e.min_ns),
                    fmt_ns(e.mean_ns),
                    fmt_ns(l.min_ns),
                    fmt_ns(l.mean_ns),
                    e.mean_ns / l.mean_ns
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
    }
    o
}

const PALETTE: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

/// Per-call time (log scale) over call index, coloured by context rank;
/// hand-written because a scatter plot is a few dozen lines of SVG and a
/// plotting crate would be the largest dependency of the workspace.
pub fn render_svg(report: &Report) -> String {
    const W: f64 = 900.0;
    const H: f64 = 420.0;
    const L: f64 = 70.0;
    const R: f64 = 180.0;
    const T: f64 = 40.0;
    const B: f64 = 50.0;
    let pts = &report.timeline;
    let max_points = 20_000usize;
    let stride = pts.len().div_ceil(max_points).max(1);
    let lo = pts
        .iter()
        .map(|p| p.0)
        .fold(f64::INFINITY, f64::min)
        .max(0.1);
    let hi = pts
        .iter()
        .map(|p| p.0)
        .fold(0.0f64, f64::max)
        .max(lo * 10.0);
    let (llo, lhi) = (lo.log10().floor(), hi.log10().ceil());
    let n = pts.len().max(2) as f64;
    let x = |i: usize| L + (i as f64) / (n - 1.0) * (W - L - R);
    let y = |ns: f64| {
        let v = ns.max(0.1).log10();
        T + (1.0 - (v - llo) / (lhi - llo)) * (H - T - B)
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let title = if stride > 1 {
        format!(
            "{}: time per call over call index (every {stride}th of {} calls)",
            report.routine,
            pts.len()
        )
    } else {
        format!("{}: time per call over call index", report.routine)
    };
    let _ = writeln!(
        s,
        r#"<text x="{L}" y="22" font-size="14">{}</text>"#,
        xml_escape(&title)
    );
    let _ = writeln!(
        s,
        r#"<line x1="{L}" y1="{0}" x2="{1}" y2="{0}" stroke="black"/><line x1="{L}" y1="{T}" x2="{L}" y2="{0}" stroke="black"/>"#,
        H - B,
        W - R
    );
    let mut e = llo as i32;
    while e as f64 <= lhi {
        let ns = 10f64.powi(e);
        let yy = y(ns);
        let _ = writeln!(
            s,
            r##"<line x1="{L}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            W - R,
            L - 6.0,
            yy + 4.0,
            fmt_ns(ns)
        );
        e += 1;
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">call index (0 .. {})</text>"#,
        (L + W - R) / 2.0,
        H - 15.0,
        pts.len().saturating_sub(1)
    );
    for (i, &(ns, rank)) in pts.iter().enumerate().step_by(stride) {
        let color = PALETTE
            .get(rank.wrapping_sub(1))
            .copied()
            .unwrap_or("#999999");
        let _ = writeln!(
            s,
            r#"<circle cx="{:.1}" cy="{:.1}" r="1.6" fill="{color}"/>"#,
            x(i),
            y(ns)
        );
    }
    for (k, c) in report.contexts.iter().take(PALETTE.len()).enumerate() {
        let ly = T + 10.0 + 18.0 * k as f64;
        let _ = writeln!(
            s,
            r#"<circle cx="{:.1}" cy="{ly:.1}" r="4" fill="{}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            W - R + 15.0,
            PALETTE[k],
            W - R + 24.0,
            ly + 4.0,
            xml_escape(&truncate(&c.label(), 24))
        );
    }
    if report.contexts.len() > PALETTE.len() {
        let ly = T + 10.0 + 18.0 * PALETTE.len() as f64;
        let _ = writeln!(
            s,
            r##"<circle cx="{:.1}" cy="{ly:.1}" r="4" fill="#999999"/><text x="{:.1}" y="{:.1}">other contexts</text>"##,
            W - R + 15.0,
            W - R + 24.0,
            ly + 4.0
        );
    }
    s.push_str("</svg>\n");
    s
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}...", s.chars().take(n).collect::<String>())
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Record, RoutineInfo};

    fn profile(calls: &[(i64, u64)]) -> Profile {
        Profile {
            ticks_per_sec: 1_000_000_000,
            dropped: 0,
            capacity: 1000,
            pids: vec![1],
            threads: 1,
            nontemporal: true,
            tsc: true,
            timer_overhead_ticks: 0,
            routines: vec![RoutineInfo {
                name: "f".into(),
                values: RoutineInfo::parse_params("n:i,buf:p").unwrap(),
                defined_in: String::new(),
                dropped: 0,
            }],
            records: calls
                .iter()
                .enumerate()
                .map(|(i, &(n, ticks))| Record {
                    start: i as u64 * 1000,
                    ticks,
                    routine: 0,
                    thread: 0,
                    nvalues: 2,
                    values: [n, 0x1000 + (i as i64 % 2) * 64, 0, 0, 0],
                })
                .collect(),
        }
    }

    #[test]
    fn contexts_ranked_by_time_with_shares_and_early_late() {
        // n=8: 10 calls, first four slow (cold), total 4*500+6*100 = 2600
        // n=2: 3 calls of 1000 = 3000 -> rank 1
        let mut calls = vec![];
        for i in 0..10 {
            calls.push((8, if i < 4 { 500 } else { 100 }));
        }
        for _ in 0..3 {
            calls.push((2, 1000));
        }
        let r = build(&profile(&calls), &ReportOptions::default()).unwrap();
        assert_eq!(r.calls, 13);
        assert_eq!(r.contexts.len(), 2);
        assert_eq!(r.contexts[0].values[0].value, 2);
        assert_eq!(r.contexts[1].values[0].value, 8);
        assert!((r.contexts[0].share - 3000.0 / 5600.0).abs() < 1e-9);
        let c = &r.contexts[1];
        assert_eq!(c.early.unwrap().mean_ns, 500.0);
        assert_eq!(c.late.unwrap().mean_ns, 100.0);
        assert_eq!(c.all.median_ns, 100.0);
        assert_eq!(c.distinct_pointers, vec![("buf".to_string(), 2)]);
        assert!(r.contexts[0].late.is_none());
        let table = render_table(&r, 10);
        assert!(table.contains("n=8") && table.contains("x5.00"), "{table}");
        let svg = render_svg(&r);
        assert_eq!(svg.matches("<circle").count(), 13 + 2);
    }

    #[test]
    fn running_checksums_are_data_and_descheduled_calls_are_flagged() {
        let mut p = profile(&[]);
        p.routines[0].values = RoutineInfo::parse_params("crc:u,len:u").unwrap();
        p.records = (0..100u64)
            .map(|i| Record {
                start: i,
                // call 50 was descheduled: 20 ms instead of 1 us
                ticks: if i == 50 { 20_000_000 } else { 1000 },
                routine: 0,
                thread: 0,
                nvalues: 2,
                values: [
                    (i * 7919) as i64,
                    if i % 2 == 0 { 4096 } else { 512 },
                    0,
                    0,
                    0,
                ],
            })
            .collect();
        let r = build(&p, &ReportOptions::default()).unwrap();
        assert_eq!(r.data_values, vec![("crc".to_string(), 100)]);
        assert_eq!(r.contexts.len(), 2);
        assert_eq!(r.interrupted, 1);
        assert_eq!(r.contexts[0].interrupted, 1);
        assert!((r.contexts[0].uninterrupted_total_ns - 49_000.0).abs() < 1e-6);
        assert!((r.uninterrupted_total_ns - 99_000.0).abs() < 1e-6);
        assert!(render_table(&r, 5).contains("treated as data"));
    }

    #[test]
    fn unknown_routine_lists_the_known_ones() {
        let e = build(
            &profile(&[(1, 1)]),
            &ReportOptions {
                routine: Some("g".into()),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("it has: f"), "{e}");
    }
}
