//! A recorded space searched again with its recorded times as the
//! objective (`tdg tune --replay FILE`), as Kernel Tuner's simulation mode
//! does: the space and its parameters' names come from the file (a T4
//! results file tdg writes, or a search's evaluation log), the
//! configurations it does not hold are not part of the space, and every
//! strategy runs unchanged, [`ReplayObjective`] being one more
//! [`Objective`]. A strategy's quality on a kernel is then measured in
//! milliseconds instead of hours (scripts/bench-search).

use crate::measurement::Measurement;
use crate::model::Start;
use crate::roles::Roles;
use crate::run::{search_with, Strategy, TuneOutcome, DEFAULT_BUDGET};
use crate::search::{Evaluation, Objective, Progress, Tuner};
use crate::space::{Param, Point, Space};
use crate::TuneError;
use config::{Config, Value};
use failure::Failure;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// What the file recorded for one configuration.
#[derive(Debug, Clone)]
enum Recorded {
    Timed(Measurement),
    Failed(Failure, String),
}

/// A recorded space: every configuration of the file, with its result.
pub struct RecordedSpace {
    pub file: PathBuf,
    /// The parameters (in the file's order), each with the values the file
    /// holds, and only the recorded points.
    pub space: Space,
    results: HashMap<Point, Recorded>,
}

fn bad(path: &Path, why: String) -> TuneError {
    TuneError::Objective(format!(
        "--replay {}: {why}; give a T4 results file (tdg tune --format t4) or a tune log (.tune.jsonl)",
        path.display()
    ))
}

impl RecordedSpace {
    /// Reads a T4 document or an evaluation log (one JSON object per line).
    pub fn read(path: &Path) -> Result<RecordedSpace, TuneError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| bad(path, format!("cannot read it ({e})")))?;
        let entries = match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(doc) if doc.get("results").is_some() => t4_entries(path, &doc)?,
            _ => log_entries(path, &text)?,
        };
        RecordedSpace::of(path, entries)
    }

    fn of(path: &Path, entries: Vec<(Config, Recorded)>) -> Result<RecordedSpace, TuneError> {
        let Some((first, _)) = entries.first() else {
            return Err(bad(path, "it records no configuration".into()));
        };
        let names: Vec<String> = first.iter().map(|s| s.name().to_string()).collect();
        let mut params: Vec<Param> = first
            .iter()
            .map(|s| Param {
                name: s.name().to_string(),
                kind: s.kind(),
                values: Vec::new(),
            })
            .collect();
        for (config, _) in &entries {
            if config.len() != names.len() || names.iter().any(|n| config.value(n).is_none()) {
                return Err(bad(
                    path,
                    format!(
                        "`{config}` does not have the parameters {}",
                        names.join(", ")
                    ),
                ));
            }
            for p in &mut params {
                let v = config.value(&p.name).expect("checked above");
                if let Err(i) = p.values.binary_search(v) {
                    p.values.insert(i, v.clone());
                }
            }
        }
        // Integers order before names, so a parameter is categorical when
        // its first value is a name and mixed when its last is one too.
        if let Some(p) = params
            .iter()
            .find(|p| !p.categorical() && p.values.last().is_some_and(Value::is_name))
        {
            return Err(bad(
                path,
                format!(
                    "`{}` records integers and names; a parameter's values are all one or the other",
                    p.name
                ),
            ));
        }
        let mut space = Space::new(params)?;
        let mut results = HashMap::new();
        for (config, result) in entries {
            let point = space.point_of(&config).expect("every value was collected");
            // A configuration recorded twice keeps its first result, as a
            // search never times one twice.
            results.entry(point).or_insert(result);
        }
        space.recorded = Some(results.keys().cloned().collect::<BTreeSet<Point>>());
        Ok(RecordedSpace {
            file: path.to_path_buf(),
            space,
            results,
        })
    }

    /// The best recorded time per call.
    pub fn best_ns(&self) -> Option<f64> {
        self.results
            .values()
            .filter_map(|r| match r {
                Recorded::Timed(m) => Some(m.time_ns),
                Recorded::Failed(..) => None,
            })
            .min_by(f64::total_cmp)
    }

    /// Every recorded time per call, ascending.
    pub fn times_ns(&self) -> Vec<f64> {
        let mut t: Vec<f64> = self
            .results
            .values()
            .filter_map(|r| match r {
                Recorded::Timed(m) => Some(m.time_ns),
                Recorded::Failed(..) => None,
            })
            .collect();
        t.sort_by(f64::total_cmp);
        t
    }
}

/// A T4 time in nanoseconds.
fn ns(value: f64, unit: &str) -> Option<f64> {
    let scale = match unit {
        "s" => 1e9,
        "ms" => 1e6,
        "us" | "µs" => 1e3,
        "ns" => 1.0,
        _ => return None,
    };
    Some(value * scale).filter(|t| t.is_finite() && *t > 0.0)
}

fn t4_entries(path: &Path, doc: &serde_json::Value) -> Result<Vec<(Config, Recorded)>, TuneError> {
    let results = doc["results"]
        .as_array()
        .ok_or_else(|| bad(path, "`results` is not a list".into()))?;
    results
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let at = |why: String| bad(path, format!("result {}: {why}", i + 1));
            let config: Config = serde_json::from_value(r["configuration"].clone())
                .map_err(|e| at(format!("its configuration is not one tdg can build ({e})")))?;
            let measured = |name: &str| {
                r["measurements"].as_array().and_then(|m| {
                    m.iter()
                        .find(|x| x["name"] == name)
                        .and_then(|x| Some((x["value"].as_f64()?, x["unit"].as_str()?)))
                })
            };
            let invalidity = r["invalidity"].as_str().unwrap_or("correct");
            if invalidity != "correct" {
                let failure = match invalidity {
                    "compile" => Failure::Compile,
                    "timeout" => Failure::Timeout,
                    "correctness" => Failure::Verification,
                    "constraints" => Failure::Usage,
                    _ => Failure::Crash,
                };
                let why = r["tdg_error"].as_str().unwrap_or(invalidity).to_string();
                return Ok((config, Recorded::Failed(failure, why)));
            }
            let samples_ns: Vec<f64> = r["times"]["runtimes"]
                .as_array()
                .map(|a| a.iter().filter_map(|v| ns(v.as_f64()?, "s")).collect())
                .unwrap_or_default();
            let time_ns = measured("time")
                .and_then(|(v, unit)| ns(v, unit))
                .or_else(|| stats::Summary::of(&samples_ns).map(|s| s.median))
                .ok_or_else(|| at("a correct result without a time".into()))?;
            Ok((
                config,
                Recorded::Timed(Measurement {
                    time_ns,
                    mflops: measured("MFLOPS").map(|m| m.0),
                    samples_ns,
                    uncertainty_pct: measured("time_uncertainty").map(|u| u.0),
                    split: None,
                    stopped: None,
                }),
            ))
        })
        .collect()
}

fn log_entries(path: &Path, text: &str) -> Result<Vec<(Config, Recorded)>, TuneError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let e: Evaluation = serde_json::from_str(line).map_err(|e| {
            bad(
                path,
                format!("line {}: not a T4 document nor an evaluation ({e})", i + 1),
            )
        })?;
        if e.phase == "final" {
            continue;
        }
        let recorded = match e.time_ns {
            Some(t) if t.is_finite() && t > 0.0 => Recorded::Timed(Measurement {
                time_ns: t,
                mflops: e.mflops,
                samples_ns: e.samples_ns,
                uncertainty_pct: e.uncertainty_pct,
                split: None,
                stopped: None,
            }),
            _ => Recorded::Failed(
                e.failure.unwrap_or(Failure::Crash),
                e.error.unwrap_or_else(|| "no time recorded".into()),
            ),
        };
        out.push((e.config, recorded));
    }
    Ok(out)
}

/// The recorded times as the objective: each configuration's result is
/// what the file recorded for it, the same every time it is asked.
pub struct ReplayObjective<'r> {
    pub recorded: &'r RecordedSpace,
}

impl Objective for ReplayObjective<'_> {
    fn evaluate(&mut self, config: &Config) -> Result<Measurement, TuneError> {
        let r = self
            .recorded
            .space
            .point_of(config)
            .and_then(|p| self.recorded.results.get(&p));
        match r {
            Some(Recorded::Timed(m)) => Ok(m.clone()),
            Some(Recorded::Failed(failure, why)) => Err(TuneError::Failed {
                failure: *failure,
                message: format!("{config}: {why} (recorded)"),
            }),
            None => Err(TuneError::Objective(format!(
                "{config} is not recorded in {}",
                self.recorded.file.display()
            ))),
        }
    }
}

/// What `tdg tune --replay` was asked.
pub struct ReplayRequest {
    pub file: PathBuf,
    /// `None`: by what the space offers, as a live search without a
    /// machine model (a replay has none).
    pub strategy: Option<Strategy>,
    pub budget: Option<u64>,
    pub seed: u64,
    /// The evaluation log (default `<file stem>.replay.jsonl`).
    pub log: Option<PathBuf>,
}

/// Searches the recorded space of `request.file`.
pub fn replay(
    request: ReplayRequest,
    progress: &mut dyn Progress,
) -> Result<TuneOutcome, TuneError> {
    let recorded = RecordedSpace::read(&request.file)?;
    let space = &recorded.space;
    let roles = Roles::resolve(space, &[], None, None)?;
    let strategy = request
        .strategy
        .unwrap_or_else(|| Strategy::default_for(&roles, false));
    let size = space.allowed_size().unwrap_or_else(|| space.size());
    let budget = match request.budget {
        Some(b) => usize::try_from(b).unwrap_or(usize::MAX),
        None if strategy == Strategy::Exhaustive || size <= DEFAULT_BUDGET as u128 => {
            usize::try_from(size).unwrap_or(usize::MAX)
        }
        None => DEFAULT_BUDGET,
    };
    let wanted: Vec<Value> = space
        .params
        .iter()
        .map(|p| p.values[p.values.len() / 2].clone())
        .collect();
    let point = space.nearest(&wanted);
    let start = Start {
        reason: format!(
            "{} (mid-range: a replay has no model)",
            space.describe(&point)
        ),
        point,
    };
    let log_path = request.log.unwrap_or_else(|| {
        let stem = request
            .file
            .file_stem()
            .map_or("replay".into(), |s| s.to_string_lossy().to_string());
        PathBuf::from(format!("{stem}.replay.jsonl"))
    });
    let log_file = fsguard::create_file(&log_path).map_err(|e| {
        TuneError::Objective(format!("{e}; pass --log FILE in a writable directory"))
    })?;
    progress.note(&format!(
        "replaying {}: {space}: {size} recorded configurations, budget {budget}, strategy {}",
        request.file.display(),
        strategy.spelling()
    ));
    let mut objective = ReplayObjective {
        recorded: &recorded,
    };
    let started = std::time::SystemTime::now();
    let tuner = Tuner::new(
        space,
        &mut objective,
        progress,
        Some(Box::new(std::io::BufWriter::new(log_file))),
        budget,
    )
    .with_seed(request.seed);
    let search = search_with(tuner, strategy, std::slice::from_ref(&start), &roles, None)?;
    Ok(TuneOutcome {
        search,
        log: log_path,
        campaign: None,
        strategy,
        roles,
        constraints: Vec::new(),
        unconstrained_size: space.size(),
        machine: None,
        contexts: None,
        started,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recorded space of 9 x 8 x 7 configurations less every one with
    /// B == 3 (as if a constraint had ruled them out) and one that failed:
    /// a rugged function with its minimum at A=6 B=2 C=5.
    fn recorded(dir: &Path) -> PathBuf {
        let mut results = Vec::new();
        for a in 0..9i64 {
            for b in 0..8i64 {
                for c in 0..7i64 {
                    if b == 3 {
                        continue;
                    }
                    let config = serde_json::json!({"A": a, "B": b, "C": c});
                    if (a, b, c) == (8, 7, 6) {
                        results.push(serde_json::json!({
                            "configuration": config, "invalidity": "compile",
                            "times": {"runtimes": []}, "measurements": []}));
                        continue;
                    }
                    let t = 1000.0
                        + 40.0 * ((a - 6) as f64).powi(2)
                        + 30.0 * ((b - 2) as f64).abs()
                        + 25.0 * ((c - 5) as f64).powi(2)
                        + 60.0 * ((a * 7 + b * 3 + c + 2) % 5) as f64;
                    results.push(serde_json::json!({
                        "configuration": config, "invalidity": "correct",
                        "times": {"runtimes": [t * 1e-9]},
                        "measurements": [{"name": "time", "value": t * 1e-6, "unit": "ms"}]}));
                }
            }
        }
        let path = dir.join("space.json");
        std::fs::write(
            &path,
            serde_json::json!({"schema_version": "1.0.0", "results": results}).to_string(),
        )
        .unwrap();
        path
    }

    fn replayed(dir: &Path, strategy: Strategy, seed: u64) -> (TuneOutcome, Vec<Evaluation>) {
        let log = dir.join(format!("{}-{seed}.jsonl", strategy.spelling()));
        let out = replay(
            ReplayRequest {
                file: recorded(dir),
                strategy: Some(strategy),
                budget: Some(40),
                seed,
                log: Some(log.clone()),
            },
            &mut (),
        )
        .unwrap();
        (out, crate::run::read_log(&log).unwrap())
    }

    #[test]
    fn the_space_and_its_names_come_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let r = RecordedSpace::read(&recorded(dir.path())).unwrap();
        assert_eq!(
            r.space.to_string(),
            "A (9 values 0..8) x B (7 values 0..7) x C (7 values 0..6)"
        );
        assert_eq!(r.space.allowed_size(), Some(9 * 7 * 7));
        assert_eq!(r.best_ns(), Some(1000.0));
        let mut o = ReplayObjective { recorded: &r };
        let at = |a, b, c| Config::from_pairs([("A", a), ("B", b), ("C", c)]).unwrap();
        assert_eq!(o.evaluate(&at(6, 2, 5)).unwrap().time_ns, 1000.0);
        let e = o.evaluate(&at(8, 7, 6)).unwrap_err();
        assert_eq!(e.failure(), Some(Failure::Compile));
        assert!(o
            .evaluate(&at(1, 3, 1))
            .unwrap_err()
            .to_string()
            .contains("not recorded"));
        // A file that is neither is one line with the way out.
        std::fs::write(dir.path().join("bad.json"), "{\"x\": 1}\n").unwrap();
        let e = RecordedSpace::read(&dir.path().join("bad.json"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("give a T4 results file") && e.lines().count() == 1,
            "{e}"
        );
    }

    #[test]
    fn every_strategy_replays_unchanged_seeded_and_within_the_recorded_space() {
        let dir = tempfile::tempdir().unwrap();
        for strategy in Strategy::ALL {
            let (out, log) = replayed(dir.path(), strategy, 1);
            assert!(out.search.evaluations >= 1, "{strategy:?}");
            for e in &log {
                assert_ne!(
                    e.config.get("B"),
                    Some(3),
                    "{strategy:?} left the recorded space"
                );
            }
            // The same seed, the same search.
            let (_, again) = replayed(dir.path(), strategy, 1);
            let configs =
                |l: &[Evaluation]| l.iter().map(|e| e.config.to_string()).collect::<Vec<_>>();
            assert_eq!(configs(&log), configs(&again), "{strategy:?}");
            // The outcome is a live search's, as JSON.
            let json = serde_json::to_value(&out).unwrap();
            for key in [
                "best",
                "best_ns",
                "evaluations",
                "space_size",
                "strategy",
                "log",
                "roles",
            ] {
                assert!(json.get(key).is_some(), "{strategy:?}: no {key} in {json}");
            }
        }
        let (_, a) = replayed(dir.path(), Strategy::Random, 1);
        let (_, b) = replayed(dir.path(), Strategy::Random, 2);
        assert_ne!(
            a.iter().map(|e| e.config.to_string()).collect::<Vec<_>>(),
            b.iter().map(|e| e.config.to_string()).collect::<Vec<_>>(),
            "another seed, another random order"
        );
        // Without roles the default is the model-free strategy.
        let out = replay(
            ReplayRequest {
                file: recorded(dir.path()),
                strategy: None,
                budget: Some(40),
                seed: 0,
                log: Some(dir.path().join("default.jsonl")),
            },
            &mut (),
        )
        .unwrap();
        assert_eq!(out.strategy, Strategy::MODEL_FREE);
        // Over 20 seeds, the default reaches the space's top 1 % (here
        // within 5 % of the best) in 40 of 441 evaluations far more often
        // than random search does (9 and 1 of 20 when this was written;
        // scripts/bench-search prints the curves).
        let reached = |strategy| {
            (0..20)
                .filter(|&seed| replayed(dir.path(), strategy, seed).0.search.best_ns <= 1050.0)
                .count()
        };
        let (default, random) = (reached(Strategy::MODEL_FREE), reached(Strategy::Random));
        assert!(
            default >= 6 && default >= 3 * random.max(1),
            "{default} against {random}"
        );
    }
}
