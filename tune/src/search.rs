//! The search: evaluate the model's starting points, then hill-climb from
//! the best with growing strides; every configuration is built and timed at
//! most once, and every evaluation is logged.

use crate::space::{Point, Space};
use crate::TuneError;
use serde::Serialize;
use std::collections::HashMap;
use std::io::Write;
use std::time::Instant;

/// What one timing of one configuration produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measurement {
    /// Time per call the driver reported (lower is better).
    pub time_ns: f64,
    pub mflops: Option<f64>,
}

/// Something that times a configuration: the generated driver, or a
/// synthetic function in tests.
pub trait Objective {
    /// `values` are the parameter names and values to compile with.
    fn evaluate(&mut self, values: &[(String, i64)]) -> Result<Measurement, TuneError>;

    /// Evaluate one round of independent configurations together (default:
    /// one after another). An objective may interleave them to share drift.
    fn evaluate_round(
        &mut self,
        round: &[Vec<(String, i64)>],
    ) -> Vec<Result<Measurement, TuneError>> {
        round.iter().map(|values| self.evaluate(values)).collect()
    }
}

/// One line of the JSON log.
#[derive(Debug, Clone, Serialize)]
pub struct Evaluation {
    /// 1-based count of configurations built and timed.
    pub n: usize,
    /// "model", "local" or "exhaustive".
    pub phase: String,
    pub config: serde_json::Map<String, serde_json::Value>,
    /// `null` when the configuration failed (see `error`).
    pub time_ns: Option<f64>,
    pub mflops: Option<f64>,
    pub error: Option<String>,
    /// Seconds since the search started.
    pub elapsed_s: f64,
    /// Best time so far, including this evaluation.
    pub best_ns: Option<f64>,
}

/// Progress notifications, for a progress bar.
pub trait Progress {
    fn evaluated(&mut self, e: &Evaluation, budget: usize, describe: &str);
}

impl Progress for () {
    fn evaluated(&mut self, _: &Evaluation, _: usize, _: &str) {}
}

/// Result of a search.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub best: serde_json::Map<String, serde_json::Value>,
    pub best_description: String,
    pub best_ns: f64,
    pub best_mflops: Option<f64>,
    /// Configurations built and timed.
    pub evaluations: usize,
    pub failed: usize,
    pub space_size: u128,
    pub budget: usize,
    pub starts: Vec<String>,
    pub seconds: f64,
}

pub struct Tuner<'a> {
    space: &'a Space,
    objective: &'a mut dyn Objective,
    progress: &'a mut dyn Progress,
    log: Option<Box<dyn Write + 'a>>,
    budget: usize,
    seen: HashMap<Point, Option<Measurement>>,
    evaluations: Vec<Evaluation>,
    best: Option<(Point, Measurement)>,
    started: Instant,
}

impl<'a> Tuner<'a> {
    pub fn new(
        space: &'a Space,
        objective: &'a mut dyn Objective,
        progress: &'a mut dyn Progress,
        log: Option<Box<dyn Write + 'a>>,
        budget: usize,
    ) -> Tuner<'a> {
        Tuner {
            space,
            objective,
            progress,
            log,
            budget: budget.max(1),
            seen: HashMap::new(),
            evaluations: Vec::new(),
            best: None,
            started: Instant::now(),
        }
    }

    pub fn evaluations(&self) -> &[Evaluation] {
        &self.evaluations
    }

    fn exhausted(&self) -> bool {
        self.evaluations.len() >= self.budget
    }

    fn best_ns(&self) -> f64 {
        self.best.as_ref().map_or(f64::INFINITY, |b| b.1.time_ns)
    }

    /// Time of `p`, from the cache when it was evaluated before; `None`
    /// when it failed or the budget is spent. The first configuration's
    /// failure aborts the search: it is almost always a broken spec or
    /// kernel rather than a bad parameter value.
    fn eval(&mut self, p: &Point, phase: &str) -> Result<Option<f64>, TuneError> {
        if let Some(m) = self.seen.get(p) {
            return Ok(m.as_ref().map(|m| m.time_ns));
        }
        if self.exhausted() {
            return Ok(None);
        }
        let values = self.space.values(p);
        let result = self.objective.evaluate(&values);
        let (m, error) = match result {
            Ok(m) if m.time_ns.is_finite() && m.time_ns > 0.0 => (Some(m), None),
            Ok(m) => (None, Some(format!("the driver reported {} ns", m.time_ns))),
            Err(e) if self.evaluations.is_empty() => return Err(e),
            Err(e) => (None, Some(e.to_string())),
        };
        if let Some(m) = &m {
            if m.time_ns < self.best_ns() {
                self.best = Some((p.clone(), m.clone()));
            }
        }
        self.seen.insert(p.clone(), m.clone());
        let e = Evaluation {
            n: self.evaluations.len() + 1,
            phase: phase.to_string(),
            config: values
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::from(*v)))
                .collect(),
            time_ns: m.as_ref().map(|m| m.time_ns),
            mflops: m.as_ref().and_then(|m| m.mflops),
            error,
            elapsed_s: self.started.elapsed().as_secs_f64(),
            best_ns: self.best.as_ref().map(|b| b.1.time_ns),
        };
        if let Some(log) = self.log.as_mut() {
            let line = serde_json::to_string(&e).expect("evaluations serialise");
            writeln!(log, "{line}")
                .and_then(|_| log.flush())
                .map_err(TuneError::Log)?;
        }
        let described = self.space.describe(p);
        self.progress.evaluated(&e, self.budget, &described);
        self.evaluations.push(e);
        Ok(m.map(|m| m.time_ns))
    }

    /// Model starts, then local search (seed 002, section 4.2): from the
    /// best point, try +-1 step in every parameter; move to the best
    /// improving neighbour and keep going in that direction while it
    /// improves. At a local optimum, widen the stride (2, 4, ... steps) so a
    /// noisy or rugged neighbourhood does not stop the search early; stop
    /// when no stride improves or the budget is spent.
    pub fn search(mut self, starts: &[crate::model::Start]) -> Result<Outcome, TuneError> {
        for s in starts {
            self.eval(&s.point, "model")?;
        }
        let dims = self.space.params.len();
        let max_stride = self
            .space
            .params
            .iter()
            .map(|p| p.values.len())
            .max()
            .unwrap_or(1);
        let mut stride = 1isize;
        while !self.exhausted() {
            let Some((current, _)) = self.best.clone() else {
                break;
            };
            let before = self.best_ns();
            let mut moved: Option<(usize, isize)> = None;
            for dim in 0..dims {
                for dir in [-1isize, 1] {
                    if let Some(q) = self.space.step(&current, dim, dir * stride) {
                        if let Some(t) = self.eval(&q, "local")? {
                            if t < before && self.best.as_ref().is_some_and(|b| b.0 == q) {
                                moved = Some((dim, dir * stride));
                            }
                        }
                    }
                }
            }
            if let Some((dim, delta)) = moved {
                // Follow the improving direction while it keeps improving.
                let mut at = self.best.clone().expect("moved").0;
                while let Some(q) = self.space.step(&at, dim, delta) {
                    let prev = self.best_ns();
                    match self.eval(&q, "local")? {
                        Some(t) if t < prev => at = q,
                        _ => break,
                    }
                }
                stride = 1;
            } else if self.best_ns() < before {
                stride = 1;
            } else {
                stride *= 2;
                if stride as usize >= max_stride {
                    break;
                }
            }
        }
        self.finish(starts.iter().map(|s| s.reason.clone()).collect())
    }

    /// Every configuration, in order (the reference the bench compares to).
    pub fn exhaustive(mut self) -> Result<Outcome, TuneError> {
        for p in self.space.all_points() {
            if self.exhausted() {
                break;
            }
            self.eval(&p, "exhaustive")?;
        }
        self.finish(Vec::new())
    }

    fn finish(self, starts: Vec<String>) -> Result<Outcome, TuneError> {
        let failed = self
            .evaluations
            .iter()
            .filter(|e| e.time_ns.is_none())
            .count();
        let Some((p, m)) = self.best else {
            let last = self
                .evaluations
                .iter()
                .rev()
                .find_map(|e| e.error.clone())
                .unwrap_or_default();
            return Err(TuneError::NothingWorked {
                tried: self.evaluations.len(),
                last,
            });
        };
        Ok(Outcome {
            best: self
                .space
                .values(&p)
                .into_iter()
                .map(|(k, v)| (k, serde_json::Value::from(v)))
                .collect(),
            best_description: self.space.describe(&p),
            best_ns: m.time_ns,
            best_mflops: m.mflops,
            evaluations: self.evaluations.len(),
            failed,
            space_size: self.space.size(),
            budget: self.budget,
            starts,
            seconds: self.started.elapsed().as_secs_f64(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Start;
    use crate::space::parse_param;

    /// A smooth bowl with its minimum at NB=96, MU=4, NU=3, counting calls.
    struct Bowl {
        calls: Vec<Vec<(String, i64)>>,
        fail_when: Option<(String, i64)>,
    }

    impl Objective for Bowl {
        fn evaluate(&mut self, v: &[(String, i64)]) -> Result<Measurement, TuneError> {
            self.calls.push(v.to_vec());
            if let Some((n, x)) = &self.fail_when {
                if v.iter().any(|(k, y)| k == n && y == x) {
                    return Err(TuneError::Objective(format!("{n}={x} does not compile")));
                }
            }
            let g = |n: &str| v.iter().find(|(k, _)| k == n).unwrap().1 as f64;
            let t = 100.0
                + ((g("NB") - 96.0) / 16.0).powi(2)
                + 3.0 * (g("MU") - 4.0).powi(2)
                + 2.0 * (g("NU") - 3.0).powi(2);
            Ok(Measurement {
                time_ns: t,
                mflops: Some(1e5 / t),
            })
        }
    }

    fn space() -> Space {
        Space::new(vec![
            parse_param("NB=16:256:16").unwrap(),
            parse_param("MU=1:8").unwrap(),
            parse_param("NU=1:8").unwrap(),
        ])
        .unwrap()
    }

    fn bowl() -> Bowl {
        Bowl {
            calls: Vec::new(),
            fail_when: None,
        }
    }

    #[test]
    fn local_search_reaches_the_optimum_from_a_model_start() {
        let space = space();
        let mut obj = bowl();
        let start = Start {
            point: space.nearest(&[32, 3, 3]),
            reason: "test".into(),
        };
        let out = Tuner::new(&space, &mut obj, &mut (), None, 200)
            .search(&[start])
            .unwrap();
        assert_eq!(out.best_description, "NB=96 MU=4 NU=3");
        assert_eq!(out.best_ns, 100.0);
        // Far fewer than the 1024 configurations.
        assert!(out.evaluations < 80, "{}", out.evaluations);
    }

    #[test]
    fn no_configuration_is_timed_twice_and_the_budget_holds() {
        let space = space();
        let mut obj = bowl();
        let start = Start {
            point: space.nearest(&[256, 1, 8]),
            reason: "far".into(),
        };
        let out = Tuner::new(&space, &mut obj, &mut (), None, 25)
            .search(&[start])
            .unwrap();
        assert_eq!(out.evaluations, 25);
        assert_eq!(obj.calls.len(), 25);
        let mut uniq = obj.calls.clone();
        uniq.sort();
        uniq.dedup();
        assert_eq!(
            uniq.len(),
            obj.calls.len(),
            "a configuration was timed twice"
        );
    }

    #[test]
    fn log_has_one_json_line_per_evaluation_with_running_best() {
        let space = space();
        let mut obj = bowl();
        let mut buf: Vec<u8> = Vec::new();
        let start = Start {
            point: space.nearest(&[32, 3, 3]),
            reason: "test".into(),
        };
        let out = Tuner::new(&space, &mut obj, &mut (), Some(Box::new(&mut buf)), 200)
            .search(&[start])
            .unwrap();
        let lines: Vec<serde_json::Value> = String::from_utf8(buf)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), out.evaluations);
        assert_eq!(lines[0]["phase"], "model");
        assert_eq!(lines[0]["config"]["NB"], 32);
        let bests: Vec<f64> = lines
            .iter()
            .map(|l| l["best_ns"].as_f64().unwrap())
            .collect();
        assert!(bests.windows(2).all(|w| w[1] <= w[0]));
        assert_eq!(*bests.last().unwrap(), out.best_ns);
        let min_time = lines
            .iter()
            .map(|l| l["time_ns"].as_f64().unwrap())
            .fold(f64::INFINITY, f64::min);
        assert_eq!(min_time, out.best_ns);
    }

    #[test]
    fn failing_configurations_are_skipped_but_a_failing_first_one_aborts() {
        let space = space();
        let mut obj = bowl();
        obj.fail_when = Some(("MU".into(), 4));
        let start = Start {
            point: space.nearest(&[96, 3, 3]),
            reason: "t".into(),
        };
        let out = Tuner::new(&space, &mut obj, &mut (), None, 100)
            .search(&[start])
            .unwrap();
        assert!(out.failed > 0);
        assert!(
            !out.best_description.contains("MU=4"),
            "{}",
            out.best_description
        );

        let mut obj = bowl();
        obj.fail_when = Some(("MU".into(), 3));
        let start = Start {
            point: space.nearest(&[96, 3, 3]),
            reason: "t".into(),
        };
        let err = Tuner::new(&space, &mut obj, &mut (), None, 100)
            .search(&[start])
            .unwrap_err();
        assert!(err.to_string().contains("MU=3 does not compile"), "{err}");
    }

    #[test]
    fn exhaustive_visits_everything_once() {
        let space = Space::new(vec![
            parse_param("NB=32:128:32").unwrap(),
            parse_param("MU=1:4").unwrap(),
            parse_param("NU=2:3").unwrap(),
        ])
        .unwrap();
        let mut obj = bowl();
        let out = Tuner::new(&space, &mut obj, &mut (), None, usize::MAX)
            .exhaustive()
            .unwrap();
        assert_eq!(out.evaluations, 32);
        assert_eq!(out.best_description, "NB=96 MU=4 NU=3");
    }
}
