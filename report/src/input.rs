//! What `tdg report` reads: every file or directory named on its command
//! line, recognised by its content (a campaign directory, a tune log, a
//! `.tdgp` profile, or one of the JSON documents tdg and Google Benchmark
//! write), read through the owning crate's own types.

use serde_json::Value;
use std::path::{Path, PathBuf};

/// One input, read and checked.
#[derive(Debug, Clone)]
pub enum Input {
    Campaign(Campaign),
    Profile(Profile),
    Probe(Box<probe::ProbeResult>),
    CheckpointTime(Box<checkpoint::TimingReport>),
    AutoDelay(Box<checkpoint::AutoDelayReport>),
    InApp(Box<checkpoint::InAppReport>),
    Runs(RunFile),
    Autotune(Box<autotune::record::Record>),
    /// `scripts/bench-search --json`: strategy curves on recorded spaces.
    StrategyCurves(Box<crate::strategy_section::StrategyCurves>),
}

/// A tuning campaign: its evaluations in the order they were made.
#[derive(Debug, Clone)]
pub struct Campaign {
    pub path: PathBuf,
    /// The `tdg tune` arguments it was started with, when it is a campaign
    /// directory.
    pub args: Option<Vec<String>>,
    pub evaluations: Vec<tune::Evaluation>,
    /// Where the evaluations came from, said on the page.
    pub origin: String,
}

/// A profile and each routine's report.
#[derive(Debug, Clone)]
pub struct Profile {
    pub path: PathBuf,
    pub reports: Vec<instrument::report::Report>,
}

/// Timed runs from one file: `tdg run --json`, `tdg checkpoint time
/// --json`, or Google Benchmark JSON (tdg's `--format gbench` or the
/// library's own `--benchmark_out`).
#[derive(Debug, Clone)]
pub struct RunFile {
    pub path: PathBuf,
    pub kind: &'static str,
    pub runs: Vec<RunSamples>,
}

/// One benchmark's samples.
#[derive(Debug, Clone)]
pub struct RunSamples {
    /// The benchmark's name (Google Benchmark's `run_name`, the routine
    /// and its -D values for tdg).
    pub name: String,
    /// Wall-clock time per call of every sample (repetition), ns.
    pub real_ns: Vec<f64>,
    /// CPU time per call of the same samples, when recorded.
    pub cpu_ns: Option<Vec<f64>>,
    /// The figure the tool reported for it (tdg: min or median), ns.
    pub reported_ns: Option<f64>,
}

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{path}: {why}")]
    Read { path: String, why: String },
    #[error("{path}: not a campaign directory, tune log, profile, probe result, checkpoint report or run (JSON); {hint}")]
    Unknown { path: String, hint: String },
}

fn read_err(path: &Path, why: impl std::fmt::Display) -> InputError {
    InputError::Read {
        path: path.display().to_string(),
        why: why.to_string(),
    }
}

/// Reads `path` and recognises what it is.
pub fn load(path: &Path) -> Result<Input, InputError> {
    let meta = std::fs::metadata(path).map_err(|e| read_err(path, e))?;
    if meta.is_dir() {
        return load_campaign_dir(path).map(Input::Campaign);
    }
    let bytes = std::fs::read(path).map_err(|e| read_err(path, e))?;
    if bytes.starts_with(instrument::format::MAGIC) {
        return load_profile(path, &bytes).map(Input::Profile);
    }
    let text = String::from_utf8(bytes).map_err(|_| InputError::Unknown {
        path: path.display().to_string(),
        hint: "it is neither text nor a tdg profile".into(),
    })?;
    let trimmed = text.trim_start();
    // One JSON document, or JSON lines (a tune log).
    match serde_json::from_str::<Value>(&text) {
        Ok(v) => from_json(path, v),
        Err(whole) if trimmed.starts_with('{') && trimmed.lines().count() > 1 => {
            tune_log(path, &text)
                .map(|evaluations| {
                    Input::Campaign(Campaign {
                        path: path.to_path_buf(),
                        args: None,
                        evaluations,
                        origin: format!("the tune log {}", path.display()),
                    })
                })
                .map_err(|line_err| match line_err {
                    InputError::Read { why, .. } => read_err(
                        path,
                        format!("{why} (nor is it one JSON document: {whole})"),
                    ),
                    other => other,
                })
        }
        Err(e) => Err(InputError::Unknown {
            path: path.display().to_string(),
            hint: format!("it does not parse as JSON ({e})"),
        }),
    }
}

fn from_json(path: &Path, v: Value) -> Result<Input, InputError> {
    let v = unwrapped(v);
    let has = |k: &str| v.get(k).is_some();
    let typed = |what: &str, e: serde_json::Error| {
        read_err(
            path,
            format!("looks like {what} but does not read as one ({e}); was it written by another tdg version?"),
        )
    };
    if v.get("format").and_then(Value::as_str) == Some(autotune::record::FORMAT_NAME) {
        let r = autotune::record::Record::from_value(v).map_err(|why| read_err(path, why))?;
        return Ok(Input::Autotune(Box::new(r)));
    }
    if v.get("kind").and_then(Value::as_str) == Some(crate::strategy_section::KIND) {
        let c = crate::strategy_section::StrategyCurves::from_value(v)
            .map_err(|why| read_err(path, why))?;
        return Ok(Input::StrategyCurves(Box::new(c)));
    }
    // A tune log of a single evaluation is one JSON object.
    if has("phase") && has("config") && has("n") {
        let e: tune::Evaluation = serde_json::from_value(v).map_err(|e| typed("a tune log", e))?;
        return Ok(Input::Campaign(Campaign {
            path: path.to_path_buf(),
            args: None,
            evaluations: vec![e],
            origin: format!("the tune log {}", path.display()),
        }));
    }
    if has("cache_curve") && has("caches") {
        let r: probe::ProbeResult =
            serde_json::from_value(v).map_err(|e| typed("a probe result", e))?;
        return Ok(Input::Probe(Box::new(r)));
    }
    if has("rows") && has("chosen") {
        let r: checkpoint::AutoDelayReport =
            serde_json::from_value(v).map_err(|e| typed("an --auto-delay report", e))?;
        return Ok(Input::AutoDelay(Box::new(r)));
    }
    if has("run_wall_ms") && has("samples_ns") {
        let r: checkpoint::InAppReport =
            serde_json::from_value(v).map_err(|e| typed("a `tdg checkpoint inapp` report", e))?;
        return Ok(Input::InApp(Box::new(r)));
    }
    if has("image") && has("samples_ns") && has("region_ns") {
        let r: checkpoint::TimingReport =
            serde_json::from_value(v).map_err(|e| typed("a `tdg checkpoint time` report", e))?;
        return Ok(Input::CheckpointTime(Box::new(r)));
    }
    if has("benchmarks") {
        return gbench(path, &v).map(Input::Runs);
    }
    if v.is_object() && has("routine") && has("samples_ns") {
        let r: driver_gen::RunReport =
            serde_json::from_value(v).map_err(|e| typed("a `tdg run --json` report", e))?;
        return Ok(Input::Runs(tdg_runs(path, &[r])));
    }
    if let Some(items) = v.as_array() {
        if !items.is_empty()
            && items
                .iter()
                .all(|i| i.get("routine").is_some() && i.get("samples_ns").is_some())
        {
            let rs: Vec<driver_gen::RunReport> =
                serde_json::from_value(v).map_err(|e| typed("a `tdg run --json` sweep", e))?;
            return Ok(Input::Runs(tdg_runs(path, &rs)));
        }
    }
    Err(InputError::Unknown {
        path: path.display().to_string(),
        hint: "give a campaign directory, a tune log (.jsonl), a .tdgp profile, probe.json, or the JSON of tdg run, tdg checkpoint time/inapp/capture --auto-delay, or Google Benchmark".into(),
    })
}

/// tdg's `--format json` documents put a report that is not an object (a
/// list of runs), or one versioned on its own (a probe record), under one
/// key beside the document's `"version"`: the report itself is what the
/// page reads.
fn unwrapped(v: Value) -> Value {
    if let Value::Object(map) = &v {
        if map.len() == 2 && map.get("version").is_some_and(Value::is_u64) {
            if let Some((_, inner)) = map.iter().find(|(k, _)| k.as_str() != "version") {
                if inner.is_object() || inner.is_array() {
                    return inner.clone();
                }
            }
        }
    }
    v
}

/// A tdg run's name: the routine, its -D values, and the flush size when
/// a sweep timed several (Google Benchmark's naming, as `--format gbench`).
fn tdg_runs(path: &Path, reports: &[driver_gen::RunReport]) -> RunFile {
    let runs = reports
        .iter()
        .map(|r| RunSamples {
            name: formats::gbench::benchmark_name(r, reports.len() > 1),
            real_ns: r.samples_ns.clone(),
            cpu_ns: None,
            reported_ns: Some(r.reported_ns),
        })
        .collect();
    RunFile {
        path: path.to_path_buf(),
        kind: "tdg run",
        runs,
    }
}

/// Nanoseconds in one Google Benchmark `time_unit`.
fn ns_per(unit: &str) -> Option<f64> {
    match unit {
        "ns" => Some(1.0),
        "us" => Some(1e3),
        "ms" => Some(1e6),
        "s" => Some(1e9),
        _ => None,
    }
}

/// The figure tdg reported (the aggregate it marks), when the file is
/// tdg's own.
fn mark_reported(list: &[Value], runs: &mut [RunSamples]) {
    for b in list {
        if b.get("tdg_reported").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let unit = b
            .get("time_unit")
            .and_then(Value::as_str)
            .and_then(ns_per)
            .unwrap_or(1.0);
        if let (Some(name), Some(t)) = (
            b.get("run_name").and_then(Value::as_str),
            b.get("real_time").and_then(Value::as_f64),
        ) {
            if let Some(r) = runs.iter_mut().find(|r| r.name == name) {
                r.reported_ns = Some(t * unit);
            }
        }
    }
}

/// Google Benchmark JSON: each benchmark's repetitions (`run_type`
/// `iteration`), times converted from `time_unit` to ns.
fn gbench(path: &Path, v: &Value) -> Result<RunFile, InputError> {
    let list = v["benchmarks"].as_array().ok_or_else(|| {
        read_err(
            path,
            "`benchmarks` is not a list; is this Google Benchmark JSON?",
        )
    })?;
    let mut runs: Vec<RunSamples> = Vec::new();
    for (i, b) in list.iter().enumerate() {
        if b.get("run_type")
            .and_then(Value::as_str)
            .unwrap_or("iteration")
            != "iteration"
        {
            continue;
        }
        if b.get("error_occurred").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        let name = b
            .get("run_name")
            .or_else(|| b.get("name"))
            .and_then(Value::as_str)
            .ok_or_else(|| read_err(path, format!("benchmark {i} has no name")))?
            .to_string();
        let unit_word = b.get("time_unit").and_then(Value::as_str).unwrap_or("ns");
        let unit = ns_per(unit_word).ok_or_else(|| {
            read_err(
                path,
                format!("benchmark {name}: unknown time_unit `{unit_word}`"),
            )
        })?;
        let num = |k: &str| b.get(k).and_then(Value::as_f64).filter(|t| t.is_finite());
        let real = num("real_time")
            .ok_or_else(|| read_err(path, format!("benchmark {name} has no real_time")))?;
        let cpu = num("cpu_time");
        let at = match runs.iter().position(|r| r.name == name) {
            Some(at) => at,
            None => {
                runs.push(RunSamples {
                    name,
                    real_ns: Vec::new(),
                    cpu_ns: Some(Vec::new()),
                    reported_ns: None,
                });
                runs.len() - 1
            }
        };
        let r = &mut runs[at];
        r.real_ns.push(real * unit);
        match (cpu, r.cpu_ns.as_mut()) {
            (Some(c), Some(cs)) => cs.push(c * unit),
            _ => r.cpu_ns = None,
        }
    }
    mark_reported(list, &mut runs);
    if runs.is_empty() {
        return Err(read_err(
            path,
            "the Google Benchmark JSON holds no repetition (run_type iteration) to show",
        ));
    }
    Ok(RunFile {
        path: path.to_path_buf(),
        kind: "Google Benchmark JSON",
        runs,
    })
}

fn load_profile(path: &Path, bytes: &[u8]) -> Result<Profile, InputError> {
    let profile = instrument::format::parse(bytes, &path.display().to_string())
        .map_err(|e| read_err(path, e))?;
    let mut reports = Vec::new();
    for r in &profile.routines {
        match instrument::report::build(
            &profile,
            &instrument::report::ReportOptions {
                routine: Some(r.name.clone()),
                ..Default::default()
            },
        ) {
            Ok(rep) => reports.push(rep),
            // A routine the program registered but never called.
            Err(instrument::report::ReportError::NoCalls(_)) => {}
            Err(e) => return Err(read_err(path, e)),
        }
    }
    if reports.is_empty() {
        return Err(read_err(
            path,
            "the profile recorded no call of any routine",
        ));
    }
    Ok(Profile {
        path: path.to_path_buf(),
        reports,
    })
}

/// The evaluations of a tune log, one JSON object a line.
pub fn tune_log(path: &Path, text: &str) -> Result<Vec<tune::Evaluation>, InputError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let e: tune::Evaluation = serde_json::from_str(line)
            .map_err(|e| read_err(path, format!("line {}: not a tune log entry ({e})", i + 1)))?;
        out.push(e);
    }
    Ok(out)
}

/// A campaign directory: the log `tdg tune` kept there (or its `--log`),
/// else the stored results, in the order they were written.
fn load_campaign_dir(dir: &Path) -> Result<Campaign, InputError> {
    let (_, manifest) = tune::Campaign::open(dir).map_err(|e| InputError::Unknown {
        path: dir.display().to_string(),
        hint: e.to_string(),
    })?;
    let log = manifest
        .args
        .iter()
        .position(|a| a == "--log")
        .and_then(|i| manifest.args.get(i + 1))
        .map(|l| manifest.cwd.join(l))
        .or_else(|| {
            manifest
                .args
                .iter()
                .find_map(|a| a.strip_prefix("--log="))
                .map(|l| manifest.cwd.join(l))
        })
        .unwrap_or_else(|| dir.join("tune.jsonl"));
    let evaluations;
    let origin;
    match std::fs::read_to_string(&log) {
        Ok(text) => {
            evaluations = tune_log(&log, &text)?;
            origin = format!("the campaign's log {}", log.display());
        }
        Err(_) => {
            evaluations = from_results(dir)?;
            origin = format!(
                "the campaign's stored results in {} (no log at {}; phases unknown, ordered by when each was written)",
                dir.join("results").display(),
                log.display()
            );
        }
    }
    Ok(Campaign {
        path: dir.to_path_buf(),
        args: Some(manifest.args),
        evaluations,
        origin,
    })
}

fn from_results(dir: &Path) -> Result<Vec<tune::Evaluation>, InputError> {
    let results = dir.join("results");
    let entries = std::fs::read_dir(&results).map_err(|e| read_err(&results, e))?;
    let mut stored: Vec<(std::time::SystemTime, tune::campaign::TaskResult)> = Vec::new();
    for entry in entries.flatten() {
        let p = entry.path();
        if p.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let text = std::fs::read_to_string(&p).map_err(|e| read_err(&p, e))?;
        let r: tune::campaign::TaskResult = serde_json::from_str(&text)
            .map_err(|e| read_err(&p, format!("not a campaign result ({e})")))?;
        let when = entry
            .metadata()
            .and_then(|m| m.modified())
            .unwrap_or(std::time::UNIX_EPOCH);
        stored.push((when, r));
    }
    stored.sort_by_key(|s| s.0);
    let first = stored.first().map(|s| s.0);
    let mut best: Option<f64> = None;
    Ok(stored
        .into_iter()
        .enumerate()
        .map(|(i, (when, r))| {
            if let Some(t) = r.time_ns {
                best = Some(best.map_or(t, |b: f64| b.min(t)));
            }
            let elapsed = first
                .and_then(|f| when.duration_since(f).ok())
                .map_or(0.0, |d| d.as_secs_f64());
            tune::Evaluation {
                n: i + 1,
                phase: "stored".into(),
                config: r.config,
                time_ns: r.time_ns,
                mflops: r.mflops,
                error: r.error,
                failure: r.failure,
                samples_ns: r.samples_ns,
                uncertainty_pct: r.uncertainty_pct,
                elapsed_s: elapsed,
                best_ns: best,
                node: Some(r.node).filter(|n| !n.is_empty()),
                cpu: Some(r.cpu).filter(|c| !c.is_empty()),
                stopped: None,
                split: None,
            }
        })
        .collect())
}
