//! The contexts file written by `tdg spec-from-profile`, and the prediction
//! `tdg run --contexts FILE` makes from it: time each of the top contexts
//! with the generated driver and predict the application's total time in
//! the routine as sum over contexts of (calls x driver time per call).

use crate::report::{ContextStats, Report};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

pub const FORMAT_NAME: &str = "tdg-contexts";
/// Version 2 adds what each context is tuned on (`cache`, `image`,
/// `fidelity`); version 1 files, without them, are still read.
pub const FORMAT_VERSION: u32 = 2;
const OLDEST_VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum ContextsError {
    #[error("cannot read contexts file {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a tdg contexts file ({detail}); write one with `tdg spec-from-profile PROFILE --spec SPEC`")]
    Parse { path: String, detail: String },
    #[error("{path} is contexts format version {found}; this tdg reads {OLDEST_VERSION} to {FORMAT_VERSION}: regenerate it with `tdg spec-from-profile`")]
    Version { path: String, found: u32 },
    #[error("{path} lists no context")]
    Empty { path: String },
}

/// One call context as the application ran it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextEntry {
    pub rank: usize,
    /// Parameter name to recorded value.
    pub values: BTreeMap<String, i64>,
    /// `-D NAME=VALUE` overrides that make the spec's driver run this
    /// context (the spec's `Macro` names for those parameters).
    pub defines: BTreeMap<String, String>,
    /// Threads the application ran with during these calls (absent when
    /// the profile does not say): `tdg run --contexts` times the context on
    /// as many, unless `--threads` says otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u16>,
    pub calls: u64,
    pub share: f64,
    pub in_app_total_ns: f64,
    /// Without calls the report judged interrupted (descheduled mid-call).
    pub in_app_uninterrupted_total_ns: f64,
    pub interrupted_calls: u64,
    pub in_app_min_ns: f64,
    pub in_app_median_ns: f64,
    pub in_app_mean_ns: f64,
    /// The cache state the context's driver reproduces the application in
    /// (absent: the spec's own settings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheState>,
    /// A checkpoint image of the application at one of the context's
    /// calls, which times it instead of a driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<std::path::PathBuf>,
    /// The target's time of the original routine over the application's
    /// (from an interleaved comparison): a time measured on the target is
    /// divided by it to predict the application's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fidelity: Option<f64>,
}

/// The cache state a driver times a context in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheState {
    /// No flush between samples: the operands as the previous call left them.
    Warm,
    /// The spec's flush, or a read flush of the last-level cache.
    Flushed,
}

impl CacheState {
    pub const BOTH: [CacheState; 2] = [CacheState::Warm, CacheState::Flushed];

    pub fn word(self) -> &'static str {
        match self {
            CacheState::Warm => "warm",
            CacheState::Flushed => "flushed",
        }
    }
}

impl ContextEntry {
    pub fn label(&self) -> String {
        let mut parts: Vec<String> = self
            .values
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        parts.extend(self.threads.map(|n| format!("threads={n}")));
        if parts.is_empty() {
            return "(all calls)".into();
        }
        parts.join(", ")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextsFile {
    pub format: String,
    pub version: u32,
    pub routine: String,
    /// The spec written beside this file, if any.
    pub spec: Option<String>,
    pub calls: u64,
    pub dropped: u64,
    /// All recorded time in the routine, every context.
    pub measured_total_ns: f64,
    pub contexts: Vec<ContextEntry>,
}

impl ContextsFile {
    /// From a report; `defines_for` maps a context's values to the `-D`
    /// overrides that select it in the spec's driver.
    pub fn from_report(
        report: &Report,
        spec: Option<String>,
        defines_for: impl Fn(&ContextStats) -> BTreeMap<String, String>,
    ) -> ContextsFile {
        let contexts = report
            .contexts
            .iter()
            .map(|c| {
                let values: BTreeMap<String, i64> =
                    c.values.iter().map(|v| (v.name.clone(), v.value)).collect();
                ContextEntry {
                    rank: c.rank,
                    defines: defines_for(c),
                    threads: c.threads,
                    values,
                    calls: c.calls,
                    share: c.share,
                    in_app_total_ns: c.total_ns,
                    in_app_uninterrupted_total_ns: c.uninterrupted_total_ns,
                    interrupted_calls: c.interrupted,
                    in_app_min_ns: c.all.min,
                    in_app_median_ns: c.all.median,
                    in_app_mean_ns: c.all.mean,
                    cache: None,
                    image: None,
                    fidelity: None,
                }
            })
            .collect();
        ContextsFile {
            format: FORMAT_NAME.into(),
            version: FORMAT_VERSION,
            routine: report.routine.clone(),
            spec,
            calls: report.calls,
            dropped: report.dropped,
            measured_total_ns: report.total_ns,
            contexts,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("plain data serialises") + "\n"
    }

    pub fn load(path: &Path) -> Result<ContextsFile, ContextsError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ContextsError::Io {
            path: p.clone(),
            source,
        })?;
        Self::parse(&text, &p)
    }

    pub fn parse(text: &str, path: &str) -> Result<ContextsFile, ContextsError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| ContextsError::Parse {
                path: path.into(),
                detail: e.to_string(),
            })?;
        if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT_NAME) {
            return Err(ContextsError::Parse {
                path: path.into(),
                detail: format!("no \"format\": \"{FORMAT_NAME}\" field"),
            });
        }
        let version = value.get("version").and_then(|v| v.as_u64()).unwrap_or(0) as u32;
        if !(OLDEST_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(ContextsError::Version {
                path: path.into(),
                found: version,
            });
        }
        let file: ContextsFile =
            serde_json::from_value(value).map_err(|e| ContextsError::Parse {
                path: path.into(),
                detail: e.to_string(),
            })?;
        if file.contexts.is_empty() {
            return Err(ContextsError::Empty { path: path.into() });
        }
        Ok(file)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextPrediction {
    pub rank: usize,
    pub label: String,
    pub calls: u64,
    pub driver_ns_per_call: f64,
    pub in_app_mean_ns: f64,
    pub predicted_ns: f64,
    pub measured_ns: f64,
    /// (predicted - measured) / measured.
    pub error: f64,
    pub measured_uninterrupted_ns: f64,
    pub error_uninterrupted: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    pub routine: String,
    pub rows: Vec<ContextPrediction>,
    /// Sum over the timed contexts.
    pub predicted_ns: f64,
    /// In-app time of the same contexts.
    pub measured_ns: f64,
    pub error: f64,
    /// In-app time of the timed contexts without interrupted calls.
    pub measured_uninterrupted_ns: f64,
    pub error_uninterrupted: f64,
    pub interrupted_calls: u64,
    /// Share of all in-app time the timed contexts cover.
    pub coverage: f64,
    pub measured_total_ns: f64,
}

/// Times the `top` highest-ranked contexts with `time_context` (nanoseconds
/// per call as the driver measures it) and compares calls x driver time with
/// the application's own time for those contexts.
pub fn predict<E>(
    file: &ContextsFile,
    top: usize,
    mut time_context: impl FnMut(&ContextEntry) -> Result<f64, E>,
) -> Result<Prediction, E> {
    let mut rows = Vec::new();
    let mut contexts: Vec<&ContextEntry> = file.contexts.iter().collect();
    contexts.sort_by_key(|c| c.rank);
    for c in contexts.into_iter().take(top.max(1)) {
        let per_call = time_context(c)?;
        let predicted = per_call * c.calls as f64;
        rows.push(ContextPrediction {
            rank: c.rank,
            label: c.label(),
            calls: c.calls,
            driver_ns_per_call: per_call,
            in_app_mean_ns: c.in_app_mean_ns,
            predicted_ns: predicted,
            measured_ns: c.in_app_total_ns,
            error: rel_error(predicted, c.in_app_total_ns),
            measured_uninterrupted_ns: c.in_app_uninterrupted_total_ns,
            error_uninterrupted: rel_error(predicted, c.in_app_uninterrupted_total_ns),
        });
    }
    let predicted_ns: f64 = rows.iter().map(|r| r.predicted_ns).sum();
    let measured_ns: f64 = rows.iter().map(|r| r.measured_ns).sum();
    let measured_uninterrupted_ns: f64 = rows.iter().map(|r| r.measured_uninterrupted_ns).sum();
    let interrupted_calls = file
        .contexts
        .iter()
        .filter(|c| rows.iter().any(|r| r.rank == c.rank))
        .map(|c| c.interrupted_calls)
        .sum();
    Ok(Prediction {
        error_uninterrupted: rel_error(predicted_ns, measured_uninterrupted_ns),
        measured_uninterrupted_ns,
        interrupted_calls,
        routine: file.routine.clone(),
        error: rel_error(predicted_ns, measured_ns),
        coverage: if file.measured_total_ns > 0.0 {
            measured_ns / file.measured_total_ns
        } else {
            0.0
        },
        predicted_ns,
        measured_ns,
        measured_total_ns: file.measured_total_ns,
        rows,
    })
}

fn rel_error(predicted: f64, measured: f64) -> f64 {
    if measured > 0.0 {
        (predicted - measured) / measured
    } else {
        0.0
    }
}

pub fn render_prediction(p: &Prediction) -> String {
    let mut o = String::new();
    let w = p
        .rows
        .iter()
        .map(|r| r.label.len())
        .max()
        .unwrap_or(7)
        .max(7);
    let _ = writeln!(
        o,
        "{:>4}  {:<w$}  {:>9}  {:>11}  {:>11}  {:>11}  {:>11}  {:>8}  {:>11}  {:>8}",
        "rank",
        "context",
        "calls",
        "driver/call",
        "app/call",
        "predicted",
        "in-app",
        "error",
        "in-app*",
        "error*"
    );
    for r in &p.rows {
        let _ = writeln!(
            o,
            "{:>4}  {:<w$}  {:>9}  {:>11}  {:>11}  {:>11}  {:>11}  {:>+7.1}%  {:>11}  {:>+7.1}%",
            r.rank,
            r.label,
            r.calls,
            stats::ns(r.driver_ns_per_call),
            stats::ns(r.in_app_mean_ns),
            stats::ns(r.predicted_ns),
            stats::ns(r.measured_ns),
            r.error * 100.0,
            stats::ns(r.measured_uninterrupted_ns),
            r.error_uninterrupted * 100.0
        );
    }
    let _ = writeln!(
        o,
        "(* without the {} call(s) that ran over 10x their context's median: descheduled mid-call)",
        p.interrupted_calls
    );
    let _ = writeln!(
        o,
        "{}: predicted {} vs measured in-app {} for the {} timed context(s): error {:+.1}% ({:+.1}% against the {} of uninterrupted calls; the contexts cover {:.1}% of the {} recorded in the routine)",
        p.routine,
        stats::ns(p.predicted_ns),
        stats::ns(p.measured_ns),
        p.rows.len(),
        p.error * 100.0,
        p.error_uninterrupted * 100.0,
        stats::ns(p.measured_uninterrupted_ns),
        p.coverage * 100.0,
        stats::ns(p.measured_total_ns)
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> ContextsFile {
        let entry = |rank, n: i64, calls, mean: f64| ContextEntry {
            rank,
            values: [("n".to_string(), n)].into_iter().collect(),
            defines: [("N".to_string(), n.to_string())].into_iter().collect(),
            threads: None,
            calls,
            share: 0.0,
            in_app_total_ns: mean * calls as f64,
            in_app_uninterrupted_total_ns: mean * calls as f64,
            interrupted_calls: 0,
            in_app_min_ns: mean,
            in_app_median_ns: mean,
            in_app_mean_ns: mean,
            cache: None,
            image: None,
            fidelity: None,
        };
        ContextsFile {
            format: FORMAT_NAME.into(),
            version: FORMAT_VERSION,
            routine: "f".into(),
            spec: None,
            calls: 111,
            dropped: 0,
            measured_total_ns: 100.0 * 100.0 + 10.0 * 500.0 + 1.0 * 7.0,
            contexts: vec![
                entry(2, 50, 10, 500.0),
                entry(1, 10, 100, 100.0),
                entry(3, 1, 1, 7.0),
            ],
        }
    }

    #[test]
    fn predicts_sum_of_calls_times_driver_time_over_top_contexts() {
        let f = file();
        let mut asked = vec![];
        let p = predict(&f, 2, |c| {
            asked.push(c.defines["N"].clone());
            // a driver that is 10% slower than the application
            Ok::<f64, ()>(c.in_app_mean_ns * 1.1)
        })
        .unwrap();
        assert_eq!(asked, vec!["10", "50"]);
        assert!((p.predicted_ns - 1.1 * 15000.0).abs() < 1e-6);
        assert!((p.error - 0.1).abs() < 1e-9);
        assert!((p.coverage - 15000.0 / 15007.0).abs() < 1e-9);
        let text = render_prediction(&p);
        assert!(text.contains("+10.0%"), "{text}");
    }

    #[test]
    fn json_round_trip_and_bad_files() {
        let f = file();
        let back = ContextsFile::parse(&f.to_json(), "x").unwrap();
        assert_eq!(back, f);
        let e = ContextsFile::parse("{\"a\":1}", "x").unwrap_err();
        assert!(e.to_string().contains("spec-from-profile"), "{e}");
        let e = ContextsFile::parse(
            &f.to_json().replace("\"version\": 2", "\"version\": 7"),
            "x",
        )
        .unwrap_err();
        assert!(e.to_string().contains("version 7"), "{e}");
        // Version 1, without what each context is tuned on, still reads.
        let old = ContextsFile::parse(
            &f.to_json().replace("\"version\": 2", "\"version\": 1"),
            "x",
        )
        .unwrap();
        assert_eq!(old.contexts, f.contexts);
        // What a context is tuned on survives a round trip.
        let mut tuned = f.clone();
        tuned.contexts[0].cache = Some(CacheState::Warm);
        tuned.contexts[1].image = Some("img".into());
        tuned.contexts[1].fidelity = Some(0.97);
        assert_eq!(ContextsFile::parse(&tuned.to_json(), "x").unwrap(), tuned);
        let e = predict(&f, 3, |_| Err::<f64, &str>("driver failed")).unwrap_err();
        assert_eq!(e, "driver failed");
    }
}
