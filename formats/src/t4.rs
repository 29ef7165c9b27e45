//! T4 tuning results (the open autotuning results schema Kernel Tuner
//! reads and writes) from the evaluations of a `tdg tune` search: every
//! configuration tried, with its timing samples, its validity as the
//! schema's `invalidity` value, and its measurements. Times are seconds.

use crate::contract::Failure;
use config::Config;
use serde_json::{json, Value};

/// The T4 results schema version this writer follows.
pub const SCHEMA_VERSION: &str = "1.0.0";

/// One evaluated configuration, whatever ran it (here or a Slurm task).
#[derive(Debug, Clone, PartialEq)]
pub struct Tried {
    pub configuration: Config,
    /// The reported time per call; `None` when the configuration failed.
    pub time_ns: Option<f64>,
    /// Every sample's time per call, in order.
    pub samples_ns: Vec<f64>,
    /// The driver's stated uncertainty of `time_ns`, per cent (the halves
    /// of its samples disagree by this much).
    pub uncertainty_pct: Option<f64>,
    pub mflops: Option<f64>,
    /// Why it failed, when tdg could tell (else a run-time failure).
    pub failure: Option<Failure>,
    pub error: Option<String>,
    /// When it finished, as seconds since the epoch.
    pub finished_unix_s: f64,
    /// Node it ran on, when known.
    pub node: Option<String>,
}

/// A search's evaluations, as its log holds them, as T4 results: each
/// finishes `elapsed_s` after `started_unix_s`. The finalists' re-timing
/// repeats configurations already listed and is left out.
pub fn from_evaluations(evaluations: Vec<tune::Evaluation>, started_unix_s: f64) -> Vec<Tried> {
    evaluations
        .into_iter()
        .filter(|e| e.phase != "final")
        .map(|e| Tried {
            configuration: e.config,
            time_ns: e.time_ns,
            samples_ns: e.samples_ns,
            uncertainty_pct: e.uncertainty_pct,
            mflops: e.mflops,
            failure: e.failure,
            error: e.error,
            finished_unix_s: started_unix_s + e.elapsed_s,
            node: e.node,
        })
        .collect()
}

/// The T4 `invalidity` of an evaluation.
pub fn invalidity(t: &Tried) -> &'static str {
    match (t.time_ns, t.failure) {
        (Some(_), _) => "correct",
        (None, Some(f)) => f.t4_invalidity(),
        (None, None) => "runtime",
    }
}

fn result(t: &Tried) -> Value {
    let valid = t.time_ns.is_some();
    let mut measurements = Vec::new();
    if let Some(ns) = t.time_ns {
        measurements.push(json!({"name": "time", "value": ns * 1e-9, "unit": "s"}));
    }
    if let (Some(_), Some(u)) = (t.time_ns, t.uncertainty_pct) {
        measurements.push(json!({"name": "time_uncertainty", "value": u, "unit": "%"}));
    }
    if let Some(m) = t.mflops {
        measurements.push(json!({"name": "MFLOPS", "value": m, "unit": "MFLOPS"}));
    }
    let mut r = json!({
        "timestamp": crate::machine::date_utc(t.finished_unix_s.max(0.0) as u64),
        "configuration": t.configuration,
        "objectives": ["time"],
        "times": {
            "runtimes": t.samples_ns.iter().map(|ns| ns * 1e-9).collect::<Vec<f64>>(),
        },
        "invalidity": invalidity(t),
        // The driver verifies every run against the spec's reference: a
        // configuration with a time passed that check.
        "correctness": if valid { 1 } else { 0 },
        "measurements": measurements,
    });
    if let Some(e) = &t.error {
        r["tdg_error"] = e.clone().into();
    }
    if let Some(n) = &t.node {
        r["tdg_node"] = n.clone().into();
    }
    r
}

/// The whole document.
pub fn document(tried: &[Tried]) -> Value {
    json!({
        "schema_version": SCHEMA_VERSION,
        "results": tried.iter().map(result).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_map_to_their_invalidity() {
        let mut t = Tried {
            configuration: Config::new(),
            time_ns: None,
            samples_ns: vec![],
            uncertainty_pct: None,
            mflops: None,
            failure: Some(Failure::Compile),
            error: Some("x".into()),
            finished_unix_s: 0.0,
            node: None,
        };
        assert_eq!(invalidity(&t), "compile");
        t.failure = None;
        assert_eq!(invalidity(&t), "runtime");
        t.time_ns = Some(5.0);
        assert_eq!(invalidity(&t), "correct");
    }

    #[test]
    fn a_stated_uncertainty_becomes_a_measurement_of_a_valid_result() {
        let mut t = Tried {
            configuration: Config::new(),
            time_ns: Some(2000.0),
            samples_ns: vec![2000.0, 2010.0, 2001.0, 2003.0],
            uncertainty_pct: Some(0.05),
            mflops: None,
            failure: None,
            error: None,
            finished_unix_s: 0.0,
            node: None,
        };
        let m = &result(&t)["measurements"];
        assert_eq!(m[1]["name"], "time_uncertainty");
        assert_eq!(m[1]["value"], 0.05);
        assert_eq!(m[1]["unit"], "%");
        t.time_ns = None;
        t.failure = Some(Failure::Compile);
        assert_eq!(result(&t)["measurements"].as_array().unwrap().len(), 0);
    }
}
