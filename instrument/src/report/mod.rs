//! What a profile says about one routine: its call contexts (distinct tuples
//! of the non-pointer recorded values) ranked by share of time, the per-call
//! timeline, and the early/late split of seed 003 Figs. 8-9 (the first calls
//! of a context run with cold caches, later ones warm).

use crate::format::{Profile, Record, RoutineInfo, ValueKind};
use stats::Summary;
use std::collections::{HashMap, HashSet};

mod contents;
mod table;
pub use contents::{ContextStats, ContextValue, Report};
pub use table::render_table;

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

/// Up to this many distinct values a parameter always counts as part of the
/// call context; above it, only if at least one call in ten repeats a value
/// (a running checksum or a fresh seed never does; a size usually does).
pub const DATA_DISTINCT_FLOOR: usize = 32;

/// A call slower than INTERRUPTED_FACTOR x its context's median and at
/// least INTERRUPTED_EXTRA_NS more counts as interrupted (a scheduler time
/// slice is milliseconds; no cache effect makes a call 10x slower).
pub const INTERRUPTED_FACTOR: f64 = 10.0;
pub const INTERRUPTED_EXTRA_NS: f64 = 50_000.0;

/// Builds the report for one routine of `profile`: its calls grouped into
/// contexts, ranked by time, each summarised.
pub fn build(profile: &Profile, opts: &ReportOptions) -> Result<Report, ReportError> {
    let id = routine_id(profile, opts)?;
    let info = &profile.routines[id as usize];
    let mut records: Vec<&Record> = profile.records.iter().filter(|r| r.routine == id).collect();
    if records.is_empty() {
        return Err(ReportError::NoCalls(info.name.clone()));
    }
    records.sort_by_key(|r| r.start);
    let columns = Columns::of(info, &records);
    let groups = Groups::of(profile, &records, &columns);
    let total_ns: f64 = groups.calls.iter().map(|c| c.0).sum();
    let totals: Vec<f64> = groups
        .contexts
        .iter()
        .map(|a| a.samples.iter().sum())
        .collect();
    let mut order: Vec<usize> = (0..groups.contexts.len()).collect();
    order.sort_by(|&a, &b| totals[b].total_cmp(&totals[a]));
    let mut rank_of = vec![0usize; groups.contexts.len()];
    for (rank0, &slot) in order.iter().enumerate() {
        rank_of[slot] = rank0 + 1;
    }
    let contexts: Vec<ContextStats> = order
        .iter()
        .map(|&slot| ContextStats {
            rank: rank_of[slot],
            share: if total_ns > 0.0 {
                totals[slot] / total_ns
            } else {
                0.0
            },
            ..groups.contexts[slot].stats(info, &columns, opts.early_calls)
        })
        .collect();
    Ok(Report {
        interrupted: contexts.iter().map(|c| c.interrupted).sum(),
        uninterrupted_total_ns: contexts.iter().map(|c| c.uninterrupted_total_ns).sum(),
        routine: info.name.clone(),
        defined_in: info.defined_in.clone(),
        code_page_offset: info
            .address
            .map(|a| a % u64::from(spec_lang::ast::CODE_PAGE)),
        calls: records.len() as u64,
        dropped: info.dropped,
        threads: groups.threads,
        processes: profile.pids.len(),
        total_ns,
        ticks_per_sec: profile.ticks_per_sec,
        timer_overhead_ns: profile.ticks_to_ns(profile.timer_overhead_ticks),
        nontemporal: profile.nontemporal,
        early_calls: opts.early_calls,
        contexts,
        data_values: columns.data_values,
        timeline: groups
            .calls
            .into_iter()
            .map(|(ns, slot)| (ns, rank_of[slot]))
            .collect(),
    })
}

/// The routine the report is about: the one asked for, else the only one.
fn routine_id(profile: &Profile, opts: &ReportOptions) -> Result<u16, ReportError> {
    let have = || {
        profile
            .routines
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match &opts.routine {
        Some(name) => profile
            .routine_id(name)
            .ok_or_else(|| ReportError::NoSuchRoutine {
                name: name.clone(),
                have: have(),
            }),
        None => match profile.routines.len() {
            0 => Err(ReportError::Empty),
            1 => Ok(0),
            n => Err(ReportError::Ambiguous {
                count: n,
                have: have(),
            }),
        },
    }
}

/// Which recorded values key a call context and which are pointers.
struct Columns {
    context: Vec<usize>,
    pointer: Vec<usize>,
    /// Context-kind values left out as data: name and distinct count.
    data_values: Vec<(String, usize)>,
}

impl Columns {
    fn of(info: &RoutineInfo, records: &[&Record]) -> Columns {
        // A value that differs on (nearly) every call, like a running
        // checksum, is data, not a problem size: keying contexts on it
        // would make every call its own context.
        let limit = DATA_DISTINCT_FLOOR.max(records.len() * 9 / 10);
        let mut data_values = Vec::new();
        let context = info
            .values
            .iter()
            .enumerate()
            .filter(|(_, v)| v.kind.is_context())
            .filter(|&(i, v)| {
                let distinct: HashSet<i64> = records.iter().map(|r| value(r, i)).collect();
                let keep = distinct.len() <= limit;
                if !keep {
                    data_values.push((v.name.clone(), distinct.len()));
                }
                keep
            })
            .map(|(i, _)| i)
            .collect();
        let pointer = info
            .values
            .iter()
            .enumerate()
            .filter(|(_, v)| v.kind == ValueKind::Pointer)
            .map(|(i, _)| i)
            .collect();
        Columns {
            context,
            pointer,
            data_values,
        }
    }
}

/// Recorded value `i` of a call (0 where the record holds fewer).
fn value(r: &Record, i: usize) -> i64 {
    r.values().get(i).copied().unwrap_or(0)
}

/// The calls grouped by context, in order of first appearance.
struct Groups {
    contexts: Vec<Context>,
    /// Each call's time and the index of its context, in call order.
    calls: Vec<(f64, usize)>,
    /// Distinct threads that called the routine.
    threads: usize,
}

/// One context's calls as they are gathered.
struct Context {
    key: Vec<i64>,
    threads: Option<u16>,
    callers: HashSet<u16>,
    samples: Vec<f64>,
    pointers: Vec<HashSet<i64>>,
}

impl Groups {
    fn of(profile: &Profile, records: &[&Record], columns: &Columns) -> Groups {
        // A call context includes the threads the process ran with: the
        // same sizes on 1 and on 2 threads are different work for a
        // parallel routine.
        let mut by_key: HashMap<(Vec<i64>, Option<u16>), usize> = HashMap::new();
        let mut contexts: Vec<Context> = Vec::new();
        let mut calls = Vec::with_capacity(records.len());
        let mut threads = HashSet::new();
        for r in records {
            let key: Vec<i64> = columns.context.iter().map(|&i| value(r, i)).collect();
            let team = r.threads();
            let next = contexts.len();
            let slot = *by_key.entry((key.clone(), team)).or_insert(next);
            if slot == next {
                contexts.push(Context {
                    key,
                    threads: team,
                    callers: HashSet::new(),
                    samples: Vec::new(),
                    pointers: vec![HashSet::new(); columns.pointer.len()],
                });
            }
            let c = &mut contexts[slot];
            c.callers.insert(r.thread);
            // The empty begin/end cost is part of every recorded interval;
            // the driver subtracts its own, so the profile does too.
            let ns = profile.ticks_to_ns(r.ticks.saturating_sub(profile.timer_overhead_ticks));
            c.samples.push(ns);
            for (set, &pi) in c.pointers.iter_mut().zip(&columns.pointer) {
                set.insert(value(r, pi));
            }
            calls.push((ns, slot));
            threads.insert(r.thread);
        }
        Groups {
            contexts,
            calls,
            threads: threads.len(),
        }
    }
}

impl Context {
    /// The context's statistics; its rank and share are the caller's.
    fn stats(&self, info: &RoutineInfo, columns: &Columns, early_calls: usize) -> ContextStats {
        let total: f64 = self.samples.iter().sum();
        let split = early_calls.min(self.samples.len());
        let all = Summary::of(&self.samples).expect("a context has at least one call");
        let cutoff = (all.median * INTERRUPTED_FACTOR).max(all.median + INTERRUPTED_EXTRA_NS);
        let (interrupted, uninterrupted_total_ns) = if self.samples.len() >= 3 {
            let slow: Vec<f64> = self
                .samples
                .iter()
                .copied()
                .filter(|&t| t > cutoff)
                .collect();
            (slow.len() as u64, total - slow.iter().sum::<f64>())
        } else {
            (0, total)
        };
        ContextStats {
            rank: 0,
            values: columns
                .context
                .iter()
                .zip(&self.key)
                .map(|(&i, &v)| ContextValue {
                    name: info.values[i].name.clone(),
                    value: v,
                    display: info.values[i].kind.display(v),
                })
                .collect(),
            threads: self.threads,
            callers: self.callers.len(),
            calls: self.samples.len() as u64,
            total_ns: total,
            share: 0.0,
            all,
            interrupted,
            uninterrupted_total_ns,
            early: Summary::of(&self.samples[..split]),
            late: Summary::of(&self.samples[split..]),
            distinct_pointers: columns
                .pointer
                .iter()
                .zip(&self.pointers)
                .map(|(&i, set)| (info.values[i].name.clone(), set.len()))
                .collect(),
        }
    }
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
                address: None,
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
                    threads: 1,
                    values: vec![n, 0x1000 + (i as i64 % 2) * 64],
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
        assert_eq!(c.early.unwrap().mean, 500.0);
        assert_eq!(c.late.unwrap().mean, 100.0);
        assert_eq!(c.all.median, 100.0);
        assert_eq!(c.distinct_pointers, vec![("buf".to_string(), 2)]);
        assert!(r.contexts[0].late.is_none());
        let table = render_table(&r, 10);
        assert!(table.contains("n=8") && table.contains("x5.00"), "{table}");
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
                threads: 1,
                values: vec![(i * 7919) as i64, if i % 2 == 0 { 4096 } else { 512 }],
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

    /// The same sizes on one and on two threads are two contexts, each
    /// saying how many threads made its calls.
    #[test]
    fn contexts_split_by_the_threads_the_process_ran_with() {
        let mut p = profile(&[(8, 60), (8, 60), (8, 100), (8, 100), (8, 100)]);
        for (i, r) in p.records.iter_mut().enumerate() {
            r.threads = if i < 2 { 1 } else { 2 };
            r.thread = i as u16 % 2;
        }
        let r = build(&p, &ReportOptions::default()).unwrap();
        let got: Vec<(String, u64, usize)> = r
            .contexts
            .iter()
            .map(|c| (c.label(), c.calls, c.callers))
            .collect();
        assert_eq!(
            got,
            [
                ("n=8, threads=2".to_string(), 3, 2),
                ("n=8, threads=1".to_string(), 2, 2)
            ]
        );
        assert!(render_table(&r, 5)
            .contains("the process ran with 2 thread(s); called from 2 thread(s)"));
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
