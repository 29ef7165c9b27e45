//! What a report holds: the routine's totals and timer, and each call
//! context's statistics, as `build` computes them and the table, the plots
//! and the JSON show them.

use serde::Serialize;
use stats::Summary;

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
    /// Threads the process ran with during these calls (OpenMP's team size
    /// where libgomp was loaded, else the process's threads): contexts are
    /// split by it. `None` for profiles that do not record it.
    pub threads: Option<u16>,
    /// Distinct threads that made these calls.
    pub callers: usize,
    pub calls: u64,
    pub total_ns: f64,
    /// Of the routine's total recorded time.
    pub share: f64,
    #[serde(serialize_with = "crate::summary_json::write")]
    pub all: Summary,
    /// The first `early_calls` calls of this context.
    #[serde(serialize_with = "crate::summary_json::write_option")]
    pub early: Option<Summary>,
    /// The rest.
    #[serde(serialize_with = "crate::summary_json::write_option")]
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
    /// `len=4096, level=6`, and `threads=2` when the profile says.
    pub fn label(&self) -> String {
        let mut parts: Vec<String> = self
            .values
            .iter()
            .map(|v| format!("{}={}", v.name, v.display))
            .collect();
        parts.extend(self.threads.map(|n| format!("threads={n}")));
        if parts.is_empty() {
            return "(no integer parameters)".into();
        }
        parts.join(", ")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub routine: String,
    /// The loaded object whose definition the shim forwarded to (empty for
    /// calls recorded by markers).
    pub defined_in: String,
    /// The definition's address modulo 4096 in the application (recorded by
    /// an interposer; `None` for markers): the `code_offset` that times the
    /// routine as placed there.
    pub code_page_offset: Option<u64>,
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
