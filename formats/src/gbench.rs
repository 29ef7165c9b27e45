//! Google Benchmark JSON from `tdg run` reports: a document the library's
//! own tools (`compare.py`) and dashboards read unchanged.
//!
//! Each timing sample becomes one repetition (`run_type: iteration`), the
//! way Google Benchmark writes `--benchmark_repetitions=N`: `compare.py`
//! then pairs the two runs' repetitions of one name and applies its
//! Mann-Whitney U test. The aggregates follow (mean, median, min, stddev,
//! cv); the one tdg reports (min or median) carries every sample in
//! `tdg_samples_ns`. Fields starting `tdg_` are tdg's own; Google
//! Benchmark's readers ignore fields they do not know.

use crate::machine::Machine;
use driver_gen::RunReport;
use serde_json::{json, Map, Value};
use spec_lang::vocabulary::Keyword;
use std::path::PathBuf;

/// What was run, for the context block.
#[derive(Debug, Clone)]
pub struct RunIdentity {
    /// The program that did the timing (this tdg).
    pub executable: String,
    pub tdg_version: String,
    pub spec: PathBuf,
    /// SHA-256 of the spec file's bytes: two runs of one spec agree.
    pub spec_sha256: String,
    pub implementation: Option<PathBuf>,
}

impl RunIdentity {
    /// Reads the spec to hash it.
    pub fn new(
        executable: String,
        tdg_version: &str,
        spec: PathBuf,
        implementation: Option<PathBuf>,
    ) -> std::io::Result<RunIdentity> {
        use sha2::Digest;
        let bytes = std::fs::read(&spec).map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot read {}: {e}", spec.display()))
        })?;
        let digest = sha2::Sha256::digest(&bytes);
        Ok(RunIdentity {
            executable,
            tdg_version: tdg_version.to_string(),
            spec,
            spec_sha256: digest.iter().map(|b| format!("{b:02x}")).collect(),
            implementation,
        })
    }
}

/// The benchmark's name: the routine, then each `-D` as `NAME:VALUE` (the
/// way Google Benchmark names arguments), then the flush size when a sweep
/// times several. The implementation is not in it, so two implementations
/// of one spec pair up in `compare.py`.
pub fn benchmark_name(r: &RunReport, in_sweep: bool) -> String {
    let mut name = r.routine.clone();
    for d in &r.defines {
        let (k, v) = d.split_once('=').unwrap_or((d.as_str(), "1"));
        name.push_str(&format!("/{k}:{v}"));
    }
    if in_sweep {
        name.push_str(&format!("/flush_kib:{}", r.flush_kib));
    }
    name
}

/// The whole document for the reports of one `tdg run`.
pub fn document(
    reports: &[RunReport],
    run: &RunIdentity,
    machine: &Machine,
    probe: Option<&probe::ProbeResult>,
    date: &str,
) -> Value {
    let in_sweep = reports.len() > 1;
    let benchmarks: Vec<Value> = reports
        .iter()
        .enumerate()
        .flat_map(|(family, r)| entries(r, family, &benchmark_name(r, in_sweep)))
        .collect();
    json!({
        "context": context(reports.first(), run, machine, probe, date),
        "benchmarks": benchmarks,
    })
}

fn context(
    first: Option<&RunReport>,
    run: &RunIdentity,
    machine: &Machine,
    probe: Option<&probe::ProbeResult>,
    date: &str,
) -> Value {
    let mut c = Map::new();
    c.insert("date".into(), date.into());
    c.insert("host_name".into(), machine.host_name.clone().into());
    c.insert("executable".into(), run.executable.clone().into());
    c.insert("num_cpus".into(), machine.num_cpus.into());
    c.insert("mhz_per_cpu".into(), machine.mhz_per_cpu.into());
    c.insert(
        "cpu_scaling_enabled".into(),
        machine.cpu_scaling_enabled.into(),
    );
    c.insert("caches".into(), json!(machine.caches));
    c.insert("load_avg".into(), json!(machine.load_avg));
    c.insert("library_build_type".into(), "release".into());
    c.insert("tdg_version".into(), run.tdg_version.clone().into());
    c.insert("tdg_spec".into(), run.spec.display().to_string().into());
    c.insert("tdg_spec_sha256".into(), run.spec_sha256.clone().into());
    if let Some(i) = &run.implementation {
        c.insert("tdg_implementation".into(), i.display().to_string().into());
    }
    if let Some(r) = first {
        c.insert("tdg_compiler".into(), r.compiler.clone().into());
        c.insert("tdg_cflags".into(), json!(r.impl_cflags));
        c.insert("tdg_timer".into(), r.timer.spelling().into());
        c.insert("tdg_timer_overhead_ns".into(), r.timer_overhead_ns.into());
        c.insert(
            "tdg_timer_resolution_ns".into(),
            r.timer_resolution_ns.into(),
        );
        c.insert("tdg_flush".into(), r.flush.spelling().into());
        c.insert("tdg_flush_kib".into(), r.flush_kib.into());
        c.insert("tdg_pinned_cpu".into(), json!(r.pinned_cpu));
        c.insert("tdg_selection".into(), r.selection.spelling().into());
    }
    if let Some(p) = probe {
        let effective: Vec<Value> = p
            .caches
            .iter()
            .map(|l| json!({"level": l.level, "effective_bytes": l.effective_bytes, "latency_ns": l.latency_ns}))
            .collect();
        c.insert("tdg_effective_caches".into(), effective.into());
    }
    Value::Object(c)
}

/// MFLOPS at `ns` per call, when the spec counts flops.
fn mflops(r: &RunReport, ns: f64) -> Option<f64> {
    r.flops_per_call.filter(|_| ns > 0.0).map(|f| f / ns * 1e3)
}

/// The repetitions and aggregates of one timed configuration.
fn entries(r: &RunReport, family: usize, name: &str) -> Vec<Value> {
    let entry = Entry { r, family, name };
    let mut out: Vec<Value> = r
        .samples_ns
        .iter()
        .enumerate()
        .map(|(i, &ns)| entry.iteration(i, ns))
        .collect();
    let cv = if r.stats.mean > 0.0 {
        r.stats.stddev / r.stats.mean
    } else {
        0.0
    };
    let aggregates = [
        ("mean", r.stats.mean, "time"),
        ("median", r.stats.median, "time"),
        ("min", r.stats.min, "time"),
        ("stddev", r.stats.stddev, "time"),
        ("cv", cv, "percentage"),
    ];
    for (stat, value, unit) in aggregates {
        out.push(entry.aggregate(stat, value, unit));
    }
    out
}

/// The entries of one configuration's run, `name` in benchmark `family`.
struct Entry<'a> {
    r: &'a RunReport,
    family: usize,
    name: &'a str,
}

impl Entry<'_> {
    /// The fields every entry has: `name`'s time `ns` over `iterations`
    /// calls, and its MFLOPS where the spec counts flops.
    fn timed(&self, name: String, ns: f64, iterations: u64) -> Value {
        // The timer measures one clock; Google Benchmark's cpu_time gets the
        // same figure (`tdg_timer` in the context says which clock it is).
        let mut e = json!({
            "name": name,
            "family_index": self.family,
            "per_family_instance_index": 0,
            "repetitions": self.r.samples_ns.len(),
            "threads": 1,
            "iterations": iterations,
            "real_time": ns,
            "cpu_time": ns,
            "time_unit": "ns",
            "run_name": self.name,
        });
        if let Some(m) = mflops(self.r, ns) {
            e["MFLOPS"] = m.into();
        }
        e
    }

    /// Sample `i`, timed at `ns` per call.
    fn iteration(&self, i: usize, ns: f64) -> Value {
        let mut e = self.timed(self.name.to_string(), ns, self.r.reps_per_sample);
        e["run_type"] = "iteration".into();
        e["repetition_index"] = i.into();
        e["tdg_cpu"] = json!(self.r.sample_cpus.get(i));
        e
    }

    /// The aggregate `stat` of the samples; the one the run reports carries
    /// tdg's account of the run.
    fn aggregate(&self, stat: &str, value: f64, unit: &str) -> Value {
        let r = self.r;
        let mut e = self.timed(
            format!("{}_{stat}", self.name),
            value,
            r.samples_ns.len() as u64,
        );
        e["run_type"] = "aggregate".into();
        e["aggregate_name"] = stat.into();
        e["aggregate_unit"] = unit.into();
        if matches!(stat, "stddev" | "cv") {
            // A spread is not a rate.
            if let Some(o) = e.as_object_mut() {
                o.remove("MFLOPS");
            }
        }
        if stat == r.selection.spelling() {
            e["tdg_reported"] = true.into();
            e["tdg_reported_why"] = r.reported_why.clone().into();
            e["tdg_samples_ns"] = json!(r.samples_ns);
            e["tdg_verification"] = r.verification.status.clone().into();
            e["tdg_mode"] = r.mode.clone().into();
            e["tdg_calls_per_sample"] = r.reps_per_sample.into();
            e["tdg_flush_kib"] = r.flush_kib.into();
            // A user counter (Google Benchmark's readers show extra numeric
            // fields as counters): the run's own uncertainty of this figure.
            if let Some(u) = r.uncertainty_pct {
                e["uncertainty_pct"] = u.into();
            }
            e["tdg_stable"] = r.stable.into();
            if !r.stable {
                e["tdg_unstable_reason"] = r.unstable_reason.clone().into();
            }
            if !r.warnings.is_empty() {
                e["tdg_warnings"] = json!(r.warnings);
            }
        }
        e
    }
}
