//! The driver's JSON contract: the one line a generated driver prints with
//! `--json`, its format version, and the reader that refuses any other
//! version with the way out. The model stamps [`DRIVER_JSON_VERSION`] into
//! the driver it describes; `run` reads the line back with [`parse`]; the
//! table in docs/drivers.md describes each field.

use serde::{Deserialize, Serialize};
use stats::Summary;

/// Version of the driver's `--json` line (its `tdg_driver` field), the
/// contract between a generated driver and the tdg that reads it; the table
/// in docs/drivers.md describes each field. Bump it when a field changes
/// meaning or goes away (new fields alone do not need a bump).
///
/// Version 2: the sample count is the driver's to choose (adaptive
/// sampling), the timer overhead is measured through the timed path, and
/// the stability fields (`uncertainty_pct`, `stable`, `sampling`) exist.
pub const DRIVER_JSON_VERSION: u32 = 2;

/// What the driver prints with `--json` (one line).
#[derive(Debug, Clone, Deserialize)]
pub struct DriverJson {
    pub routine: String,
    #[serde(with = "crate::keyword_json")]
    pub timer: spec_lang::ast::TimerMethod,
    pub tsc_hz: Option<f64>,
    pub tsc_hz_source: String,
    pub timer_overhead_ns: Option<f64>,
    pub timer_resolution_ns: Option<f64>,
    pub mode: String,
    pub reps: u64,
    pub working_sets: u64,
    #[serde(with = "crate::keyword_json")]
    pub flush: spec_lang::ast::FlushMethod,
    pub flush_all_cpus: bool,
    pub flush_cpus: Vec<i32>,
    #[serde(default)]
    pub flush_clflushes_operands: bool,
    #[serde(default)]
    pub flush_evict_kib: u64,
    #[serde(default)]
    pub flush_evict_pages: u64,
    #[serde(default)]
    pub flush_ns_per_sample: Option<f64>,
    pub min_interval_ns: u64,
    pub min_interval_why: String,
    pub code: String,
    #[serde(default = "unknown_offset")]
    pub code_page_offset: i32,
    pub samples_ns: Vec<f64>,
    pub sample_cpus: Vec<i32>,
    #[serde(with = "crate::summary_json")]
    pub stats: Summary,
    pub reported_ns: f64,
    pub uncertainty_pct: Option<f64>,
    pub stable: bool,
    pub unstable_reason: String,
    pub sampling: Sampling,
    pub flops_per_call: Option<f64>,
    pub page_faults_during_timing: i64,
    pub pinned_cpu: i32,
    #[serde(flatten)]
    pub team: TeamReport,
    pub touch_pages: bool,
    pub dummy_call: bool,
    pub overflow_guard: String,
    pub outputs_finite: bool,
    pub outputs_denormal: i64,
    pub operands: Vec<OperandReport>,
    pub verification: Verification,
    pub warnings: Vec<String>,
}

fn unknown_offset() -> i32 {
    -1
}

/// The routine's threads as the driver ran them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamReport {
    /// Threads that ran the timed calls, measured: the driver's thread and
    /// every other thread of the process whose CPU time grew by a quarter of
    /// the timed time or more while it sampled.
    pub threads: u32,
    pub threads_requested: u32,
    /// The driver was built with OpenMP (the implementation's flags had it).
    pub openmp: bool,
    /// omp_get_num_threads() in the driver's start-up region (0 without OpenMP).
    pub omp_team: u32,
    /// CPU of thread k (empty: unpinned).
    pub thread_cpus: Vec<i32>,
    /// CPU time of each thread counted in `threads` while sampling, ms.
    pub thread_busy_ms: Vec<f64>,
    /// "threads": each thread first wrote its share of the operands' pages;
    /// "main": the driver's thread wrote them all.
    pub first_touch: String,
    /// Page faults each thread took while first-touching (the kernel's count:
    /// a page is placed where it first faults).
    pub first_touch_faults: Vec<i64>,
}

/// How the driver decided how many samples to take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// False when `--samples` fixed the count.
    pub adaptive: bool,
    pub min_samples: u32,
    pub min_time_ms: u64,
    pub max_time_ms: u64,
    pub stable_pct: f64,
    /// Wall time the samples took.
    pub elapsed_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperandReport {
    pub name: String,
    pub bytes: u64,
    /// Address of the first working set's copy.
    pub address: u64,
    pub align: u64,
    pub misalign: u64,
    /// "flushed" or "warm".
    pub cache: String,
    /// Copies in the self-flushing area (1 when it does not rotate).
    pub copies: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verification {
    /// "passed", "failed" or "skipped".
    pub status: String,
    pub detail: String,
}

/// The driver's `--json` line, checked against [`DRIVER_JSON_VERSION`];
/// the error says why it is not one this tdg reads, and what to do.
pub fn parse(line: &str) -> Result<DriverJson, String> {
    let value: serde_json::Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    match value.get("tdg_driver").and_then(serde_json::Value::as_u64) {
        Some(v) if v == u64::from(DRIVER_JSON_VERSION) => {}
        Some(v) => {
            return Err(format!(
                "report format version {v}, this tdg reads version {DRIVER_JSON_VERSION}; regenerate the driver with this tdg (`tdg gen`)"
            ))
        }
        None => return Err("no `tdg_driver` format version".into()),
    }
    serde_json::from_value(value).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_of_another_format_version_is_refused_with_the_way_out() {
        let e = parse(r#"{"tdg_driver":99,"routine":"f"}"#).unwrap_err();
        let msg = e;
        assert!(msg.contains("report format version 99"), "{msg}");
        assert!(msg.contains("regenerate the driver"), "{msg}");
        let e = parse(r#"{"routine":"f"}"#).unwrap_err();
        assert!(e.contains("no `tdg_driver`"), "{e}");
    }
}
