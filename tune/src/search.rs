//! The search: evaluate the model's starting points, then hill-climb from
//! the best with growing strides; every configuration is built and timed at
//! most once, and every evaluation is logged.

use crate::measurement::{Measurement, TimeSplit};
use crate::space::{Point, Space};
use crate::TuneError;
use config::{Config, Value};
use serde::Serialize;
use std::collections::HashMap;
use std::io::Write;
use std::time::Instant;

/// Something that times a configuration: the generated driver, or a
/// synthetic function in tests.
pub trait Objective {
    /// Builds and times the candidate at `config`.
    fn evaluate(&mut self, config: &Config) -> Result<Measurement, TuneError>;

    /// Evaluate one round of independent configurations together (default:
    /// one after another). An objective may interleave them to share drift.
    fn evaluate_round(&mut self, round: &[Config]) -> Vec<Result<Measurement, TuneError>> {
        round.iter().map(|config| self.evaluate(config)).collect()
    }

    /// Time configurations again, side by side, to name the best among
    /// them (default: as a round).
    fn retime(&mut self, round: &[Config]) -> Vec<Result<Measurement, TuneError>> {
        self.evaluate_round(round)
    }

    /// One side-by-side timing of `round`, each configuration in a single
    /// run, for a caller that repeats such rounds itself: its rounds
    /// interleave the configurations, as a re-timing's passes would
    /// (default: [`Self::retime`]).
    fn retime_once(&mut self, round: &[Config]) -> Vec<Result<Measurement, TuneError>> {
        self.retime(round)
    }

    /// Whether [`Self::retime`] times again (an objective that can only
    /// read back what it measured once cannot).
    fn retimes(&self) -> bool {
        true
    }

    /// The node and CPU model `config` was last evaluated on, when the
    /// objective knows (the campaign log records it per evaluation).
    fn placement(&self, _config: &Config) -> Option<Placement> {
        None
    }
}

/// `evaluate` for an objective whose unit of work is the round: a round of
/// one configuration.
pub fn evaluate_as_round<O: Objective + ?Sized>(
    objective: &mut O,
    config: &Config,
) -> Result<Measurement, TuneError> {
    objective
        .evaluate_round(std::slice::from_ref(config))
        .pop()
        .expect("one result per configuration")
}

/// Where an evaluation ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Placement {
    /// Slurm's name for the node, or this host's name for local runs.
    pub node: String,
    /// `model name` from the node's /proc/cpuinfo.
    pub cpu: String,
}

/// One line of the JSON log.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Evaluation {
    /// 1-based count of configurations built and timed.
    pub n: usize,
    /// "model", "local" or "exhaustive".
    pub phase: String,
    pub config: Config,
    /// `null` when the configuration failed (see `error`).
    pub time_ns: Option<f64>,
    pub mflops: Option<f64>,
    pub error: Option<String>,
    /// Why it failed, when the objective could tell (T4's `invalidity`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<failure::Failure>,
    /// Every sample's time per call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples_ns: Vec<f64>,
    /// The driver's stated uncertainty of `time_ns`, per cent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncertainty_pct: Option<f64>,
    /// Seconds since the search started.
    pub elapsed_s: f64,
    /// Best time so far, including this evaluation.
    pub best_ns: Option<f64>,
    /// Node the configuration was timed on, when the objective says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// CPU model of that node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// Why its timing ended: all passes, or stopped by racing and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// Where the evaluation's time went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<TimeSplit>,
}

/// Progress notifications, for a progress bar.
pub trait Progress {
    fn evaluated(&mut self, e: &Evaluation, budget: usize, describe: &str);

    /// One line on what the run decided (a start, the campaign), before
    /// or between evaluations.
    fn note(&mut self, _line: &str) {}
}

impl Progress for () {
    fn evaluated(&mut self, _: &Evaluation, _: usize, _: &str) {}
}

/// Result of a search.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub best: Config,
    pub best_description: String,
    pub best_ns: f64,
    /// How sure `best_ns` is, per cent: the stated uncertainty, or the
    /// half-width of its median's 95 % interval over the final re-timing.
    pub best_uncertainty_pct: Option<f64>,
    /// Configurations the final re-timing could not tell from the best at
    /// 95 % confidence, or within the host's noise of it: any of them is
    /// as good a choice.
    pub tied: Vec<Config>,
    /// The best configurations by the search's own times, in that order,
    /// when the final re-timing was left to the caller
    /// ([`Tuner::leaving_finalists`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub finalists: Vec<Config>,
    /// The noise the finalists were judged against, per cent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise_pct: Option<f64>,
    pub best_mflops: Option<f64>,
    /// Configurations built and timed.
    pub evaluations: usize,
    pub failed: usize,
    pub space_size: u128,
    pub budget: usize,
    pub starts: Vec<String>,
    pub seconds: f64,
    /// Where the evaluations' time went, summed over those that said.
    pub time_split: TimeSplit,
    /// Evaluations the split covers.
    pub split_evaluations: usize,
    /// The model's own choice and how the search's best compares.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelChoice>,
}

/// The model's own choice (0 evaluations), its time once measured and how
/// far the search moved from it.
#[derive(Debug, Clone, Serialize)]
pub struct ModelChoice {
    pub configuration: String,
    pub reason: String,
    /// Its time per call, if this run evaluated it.
    pub time_ns: Option<f64>,
    /// The best's time over the model choice's (below 1: the search gained).
    pub best_over_model: Option<f64>,
    /// Each parameter the best changed: name, the model's value, the best's.
    pub moved: Vec<(String, Value, Value)>,
    /// Value steps from the model's choice to the best, over all parameters.
    pub steps: usize,
}

/// Configurations of an exhaustive search evaluated as one round (one job
/// array on a cluster): large enough to fill many nodes, small enough that
/// an interrupted campaign loses little.
const EXHAUSTIVE_ROUND: usize = 64;

/// Configurations re-timed side by side at the end of a search.
pub const FINALISTS: usize = 3;

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

fn lcm(a: i64, b: i64) -> i64 {
    (a / gcd(a, b).max(1) * b).abs()
}

/// What a round says about one of its points.
pub(crate) struct Scored {
    pub(crate) time: Option<f64>,
    /// It improved on the best when it was recorded.
    pub(crate) became_best: bool,
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
    /// Finalists the re-timing could not tell from the best.
    tied: Vec<Point>,
    /// The noise (per cent) the finalists were judged against.
    noise_pct: Option<f64>,
    /// The finalists, unjudged, when the caller re-times them.
    left_finalists: Option<Vec<Point>>,
    started: Instant,
    model_choice: Option<crate::model::Start>,
    /// Seeds the model-free strategies' random choices (`--seed`).
    pub(crate) seed: u64,
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
            tied: Vec::new(),
            noise_pct: None,
            left_finalists: None,
            started: Instant::now(),
            model_choice: None,
            seed: 0,
        }
    }

    /// The model's own choice, reported in the outcome against the best.
    pub fn with_model_choice(mut self, choice: Option<crate::model::Start>) -> Self {
        self.model_choice = choice;
        self
    }

    /// Ends the search with the finalists listed, not re-timed: for a
    /// caller that re-times them itself, against a reference of its own.
    pub fn leaving_finalists(mut self, leave: bool) -> Self {
        self.left_finalists = leave.then(Vec::new);
        self
    }

    /// The seed of the model-free strategies' random choices: the same
    /// seed and objective make the same search.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    pub(crate) fn space(&self) -> &'a Space {
        self.space
    }

    pub(crate) fn budget(&self) -> usize {
        self.budget
    }

    /// Whether `p` was evaluated (or failed) already.
    pub(crate) fn seen(&self, p: &Point) -> bool {
        self.seen.contains_key(p)
    }

    pub fn evaluations(&self) -> &[Evaluation] {
        &self.evaluations
    }

    /// Every point evaluated so far with its time (`None`: it failed), in
    /// the space's order.
    pub(crate) fn timed_points(&self) -> Vec<(Point, Option<f64>)> {
        let mut all: Vec<(Point, Option<f64>)> = self
            .seen
            .iter()
            .map(|(p, m)| (p.clone(), m.as_ref().map(|m| m.time_ns)))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    pub(crate) fn exhausted(&self) -> bool {
        self.evaluations.len() >= self.budget
    }

    pub(crate) fn best_ns(&self) -> f64 {
        self.best.as_ref().map_or(f64::INFINITY, |b| b.1.time_ns)
    }

    /// Evaluates one round of independent points together and returns,
    /// per point, its time (`None` when it failed or the budget is spent)
    /// and whether it became the best. A point seen before comes from the
    /// cache; a repeated point, a point the space's constraints rule out
    /// and points past the budget are not evaluated. Results are recorded in the round's order, so the log,
    /// the budget and the running best are those of evaluating the points
    /// one after another. The first configuration's failure aborts the
    /// search: it is almost always a broken spec or kernel rather than a
    /// bad parameter value; so does an executor's failure (the cluster,
    /// not the configuration).
    pub(crate) fn eval_round(
        &mut self,
        points: &[Point],
        phase: &str,
    ) -> Result<Vec<Scored>, TuneError> {
        let mut fresh: Vec<&Point> = Vec::new();
        for p in points {
            let left = self.budget.saturating_sub(self.evaluations.len());
            // A point the constraints rule out is never built: it scores as
            // a failure that costs nothing and is not logged.
            if !self.seen.contains_key(p)
                && !fresh.contains(&p)
                && fresh.len() < left
                && self.space.allows(p)
            {
                fresh.push(p);
            }
        }
        if self.evaluations.is_empty() && fresh.len() > 1 {
            // The search's first configuration goes alone: when it fails,
            // the kernel is broken, and no round of doomed evaluations (a
            // job array on a cluster) is spent finding that out.
            let first = points
                .iter()
                .position(|p| p == fresh[0])
                .expect("from points");
            self.eval_round(&points[..=first], phase)?;
            return self.eval_round(points, phase);
        }
        let values: Vec<Config> = fresh.iter().map(|p| self.space.config(p)).collect();
        let mut results = if values.is_empty() {
            Vec::new()
        } else {
            self.objective.evaluate_round(&values)
        };
        if results.len() != values.len() {
            return Err(TuneError::Executor(format!(
                "the objective returned {} results for a round of {}",
                results.len(),
                values.len()
            )));
        }
        let mut fresh_results: HashMap<&Point, (Config, _)> = HashMap::new();
        for ((p, v), r) in fresh.iter().zip(values).zip(results.drain(..)) {
            fresh_results.insert(*p, (v, r));
        }
        let mut scored = Vec::with_capacity(points.len());
        for p in points {
            let time = match fresh_results.remove(p) {
                Some((values, result)) => self.record(p, values, result, phase)?,
                None => self.seen.get(p).cloned().flatten().map(|m| m.time_ns),
            };
            let became_best = time.is_some() && self.best.as_ref().is_some_and(|b| &b.0 == p);
            scored.push(Scored { time, became_best });
        }
        Ok(scored)
    }

    /// One point on its own (a step that depends on the previous one).
    pub(crate) fn eval(&mut self, p: &Point, phase: &str) -> Result<Option<f64>, TuneError> {
        Ok(self.eval_round(std::slice::from_ref(p), phase)?[0].time)
    }

    /// Logs one new evaluation and updates the running best.
    fn record(
        &mut self,
        p: &Point,
        values: Config,
        result: Result<Measurement, TuneError>,
        phase: &str,
    ) -> Result<Option<f64>, TuneError> {
        let (m, error, failure) = match result {
            Ok(m) if m.time_ns.is_finite() && m.time_ns > 0.0 => (Some(m), None, None),
            Ok(m) => (
                None,
                Some(format!("the driver reported {}", stats::ns(m.time_ns))),
                Some(failure::Failure::Crash),
            ),
            Err(e @ TuneError::Executor(_)) => return Err(e),
            Err(e) if self.evaluations.is_empty() => return Err(e),
            Err(e) => (None, Some(e.to_string()), e.failure()),
        };
        if let Some(m) = &m {
            if m.time_ns < self.best_ns() {
                self.best = Some((p.clone(), m.clone()));
            }
        }
        self.seen.insert(p.clone(), m.clone());
        let placement = self.objective.placement(&values);
        let e = Evaluation {
            n: self.evaluations.len() + 1,
            phase: phase.to_string(),
            config: values,
            time_ns: m.as_ref().map(|m| m.time_ns),
            mflops: m.as_ref().and_then(|m| m.mflops),
            error,
            failure,
            samples_ns: m.as_ref().map(|m| m.samples_ns.clone()).unwrap_or_default(),
            uncertainty_pct: m.as_ref().and_then(|m| m.uncertainty_pct),
            elapsed_s: self.started.elapsed().as_secs_f64(),
            best_ns: self.best.as_ref().map(|b| b.1.time_ns),
            node: placement.as_ref().map(|p| p.node.clone()),
            cpu: placement.map(|p| p.cpu),
            stopped: m.as_ref().and_then(|m| m.stopped.clone()),
            split: m.as_ref().and_then(|m| m.split.clone()),
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
    /// when no stride improves or the budget is spent. A categorical
    /// parameter's neighbours are all its other names, tried at stride 1
    /// (it has no direction to follow or stride to widen).
    pub fn search(mut self, starts: &[crate::model::Start]) -> Result<Outcome, TuneError> {
        let start_points: Vec<Point> = starts.iter().map(|s| s.point.clone()).collect();
        self.eval_round(&start_points, "model")?;
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
            // The neighbourhood is one round: its members are independent.
            let mut neighbours: Vec<(Point, usize, isize)> = (0..dims)
                .flat_map(|dim| [-1isize, 1].map(|dir| (dim, dir * stride)))
                .filter_map(|(dim, delta)| {
                    self.space
                        .step(&current, dim, delta)
                        .map(|q| (q, dim, delta))
                })
                .collect();
            if stride == 1 {
                for dim in (0..dims).filter(|&d| self.space.params[d].categorical()) {
                    neighbours.extend(
                        self.space
                            .neighbours(&current, dim)
                            .into_iter()
                            .map(|q| (q, dim, 0)),
                    );
                }
            }
            let points: Vec<Point> = neighbours.iter().map(|n| n.0.clone()).collect();
            let scored = self.eval_round(&points, "local")?;
            let mut moved: Option<(usize, isize)> = None;
            for ((_, dim, delta), s) in neighbours.iter().zip(&scored) {
                if s.time.is_some_and(|t| t < before) && s.became_best {
                    moved = Some((*dim, *delta));
                }
            }
            if let Some((dim, delta)) = moved {
                // Follow the improving direction while it keeps improving
                // (a name has none: `step` does not move it).
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
        self.retime_finalists()?;
        self.finish(starts.iter().map(|s| s.reason.clone()).collect())
    }

    /// The model's own choice alone (the first start): what the model is
    /// worth without a search.
    pub fn model_only(mut self, starts: &[crate::model::Start]) -> Result<Outcome, TuneError> {
        if let Some(first) = starts.first() {
            self.eval(&first.point, "model")?;
        }
        self.finish(starts.iter().take(1).map(|s| s.reason.clone()).collect())
    }

    /// Yotov et al.'s local search (4.2): the model's starts (one per cache
    /// level) as one round; from the best, the cache tile within
    /// +-lcm(rows, cols) of it (the first tiles both register extents
    /// divide; at least the neighbouring values of a coarser range); then a
    /// hill-climb of the register tile (each of rows and cols +-1, following
    /// the path of increasing performance to a local optimum), then of the
    /// k unrolling and of every parameter without a role; the tile once
    /// more if the register tile moved.
    pub fn yotov(
        mut self,
        starts: &[crate::model::Start],
        roles: &crate::roles::Roles,
    ) -> Result<Outcome, TuneError> {
        use crate::roles::Role;
        let start_points: Vec<Point> = starts.iter().map(|s| s.point.clone()).collect();
        self.eval_round(&start_points, "model")?;
        let tile = roles.dim(Role::Tile);
        let register: Vec<usize> = [Role::Rows, Role::Cols]
            .iter()
            .filter_map(|r| roles.dim(*r))
            .collect();
        let rest: Vec<usize> = roles
            .dim(Role::KUnroll)
            .into_iter()
            .chain((0..self.space.params.len()).filter(|d| roles.role_of(*d).is_none()))
            .collect();
        if let Some(t) = tile {
            self.tile_neighbourhood(t, roles)?;
        }
        let before = self.best.as_ref().map(|b| b.0.clone());
        self.climb(&register)?;
        let moved = self.best.as_ref().map(|b| b.0.clone()) != before;
        for d in rest {
            self.climb(&[d])?;
        }
        if let (Some(t), true) = (tile, moved) {
            self.tile_neighbourhood(t, roles)?;
        }
        self.retime_finalists()?;
        self.finish(starts.iter().map(|s| s.reason.clone()).collect())
    }

    /// Every cache tile of the space within +-lcm(rows, cols) of the best
    /// point's, and at least its neighbours, as one round.
    fn tile_neighbourhood(
        &mut self,
        dim: usize,
        roles: &crate::roles::Roles,
    ) -> Result<(), TuneError> {
        use crate::roles::Role;
        let Some((current, _)) = self.best.clone() else {
            return Ok(());
        };
        let extent = |r: Role| {
            roles
                .dim(r)
                .map_or(1, |d| self.space.value(&current, d).max(1))
        };
        let reach = lcm(extent(Role::Rows), extent(Role::Cols));
        let nb = self.space.value(&current, dim);
        let at = current.0[dim];
        let candidates = &self.space.params[dim];
        let round: Vec<Point> = (0..candidates.values.len())
            .filter(|&i| (candidates.int(i) - nb).abs() <= reach || i.abs_diff(at) == 1)
            .filter(|&i| i != at)
            .map(|i| {
                let mut q = current.clone();
                q.0[dim] = i;
                q
            })
            .collect();
        self.eval_round(&round, "local")?;
        Ok(())
    }

    /// Hill-climbing over `dims`: each +-1 value (any other name of a
    /// categorical parameter) from the best point as one round, moving to
    /// the best improvement until none improves.
    fn climb(&mut self, dims: &[usize]) -> Result<(), TuneError> {
        while !self.exhausted() {
            let Some((current, _)) = self.best.clone() else {
                return Ok(());
            };
            let before = self.best_ns();
            let round: Vec<Point> = dims
                .iter()
                .flat_map(|&d| self.space.neighbours(&current, d))
                .collect();
            self.eval_round(&round, "local")?;
            if self.best_ns() >= before {
                return Ok(());
            }
        }
        Ok(())
    }

    /// ATLAS's orthogonal line search (Yotov et al. 2.2): from `reference`
    /// (the model's choice), optimise one group of parameters at a time
    /// with the others at their best values so far: the cache tile, then
    /// the register tile (every rows x cols pair in the space that
    /// `fits_registers` allows, as ATLAS tries those within inequality 1),
    /// then the k unrolling, then every parameter without a role, each
    /// group's candidates as one round.
    pub fn line(
        mut self,
        reference: &crate::model::Start,
        roles: &crate::roles::Roles,
        fits_registers: &dyn Fn(i64, i64) -> bool,
    ) -> Result<Outcome, TuneError> {
        use crate::roles::Role;
        self.eval(&reference.point, "model")?;
        let mut groups: Vec<Vec<usize>> = Vec::new();
        if let Some(t) = roles.dim(Role::Tile) {
            groups.push(vec![t]);
        }
        let register: Vec<usize> = [Role::Rows, Role::Cols]
            .iter()
            .filter_map(|r| roles.dim(*r))
            .collect();
        if !register.is_empty() {
            groups.push(register);
        }
        if let Some(k) = roles.dim(Role::KUnroll) {
            groups.push(vec![k]);
        }
        for d in 0..self.space.params.len() {
            if roles.role_of(d).is_none() {
                groups.push(vec![d]);
            }
        }
        let rows = roles.dim(Role::Rows);
        let cols = roles.dim(Role::Cols);
        for group in groups {
            if self.exhausted() {
                break;
            }
            let Some((current, _)) = self.best.clone() else {
                break;
            };
            let mut round: Vec<Point> = vec![current.clone()];
            for &d in &group {
                round = round
                    .into_iter()
                    .flat_map(|p| {
                        (0..self.space.params[d].values.len()).map(move |i| {
                            let mut q = p.clone();
                            q.0[d] = i;
                            q
                        })
                    })
                    .collect();
            }
            if group.len() == 2 {
                if let (Some(r), Some(c)) = (rows, cols) {
                    round
                        .retain(|p| fits_registers(self.space.value(p, r), self.space.value(p, c)));
                }
            }
            self.eval_round(&round, "line")?;
        }
        self.retime_finalists()?;
        self.finish(vec![reference.reason.clone()])
    }

    /// Re-times the [`FINALISTS`] best configurations side by side, in
    /// rounds, until their order is decided at [`crate::ties::CONFIDENCE`]
    /// or the others are tied with the leader within the host's noise
    /// (at most [`crate::ties::MAX_ROUNDS`]): over a whole search the best
    /// time comes from whichever moment was fastest, and rounds minutes
    /// apart met different moments. The re-timing is logged (phase
    /// "final", not counted as evaluations); the outcome reports the
    /// leader, its time and uncertainty, and the tied set.
    pub(crate) fn retime_finalists(&mut self) -> Result<(), TuneError> {
        let finalists = self.finalists();
        if let Some(left) = self.left_finalists.as_mut() {
            *left = finalists;
            return Ok(());
        }
        if finalists.len() < 2 {
            return Ok(());
        }
        if !self.objective.retimes() {
            self.progress.note(
                "the finalists are not re-timed: each was timed once, as its own task; their order is the search's",
            );
            return Ok(());
        }
        let values: Vec<Config> = finalists.iter().map(|p| self.space.config(p)).collect();
        let mut pooled: Vec<Vec<f64>> = vec![Vec::new(); finalists.len()];
        let mut reported: Vec<Vec<f64>> = vec![Vec::new(); finalists.len()];
        let mut last: Vec<Option<Measurement>> = vec![None; finalists.len()];
        let mut verdict = None;
        for round in 1..=crate::ties::MAX_ROUNDS {
            let results = self.objective.retime(&values);
            let mut stated: Option<f64> = None;
            for (i, (v, r)) in values.iter().zip(results).enumerate() {
                self.log_final(v, &r, round)?;
                match r {
                    Ok(m) if m.time_ns.is_finite() && m.time_ns > 0.0 => {
                        if m.samples_ns.is_empty() {
                            pooled[i].push(m.time_ns);
                        } else {
                            pooled[i].extend(&m.samples_ns);
                        }
                        reported[i].push(m.time_ns);
                        stated = match (stated, m.uncertainty_pct) {
                            (Some(a), Some(b)) => Some(a.max(b)),
                            (a, b) => a.or(b),
                        };
                        last[i] = Some(m);
                    }
                    // A finalist that fails now is out of the decision.
                    _ => {
                        pooled[i].clear();
                        reported[i].clear();
                    }
                }
            }
            verdict = crate::ties::judge(&pooled, &reported, stated);
            // An objective that times many samples per evaluation gets 3
            // rounds (each a whole timing of every finalist); one that gives
            // a single time needs the rounds for an interval at all.
            let sampled = last.iter().flatten().all(|m| m.samples_ns.len() > 1);
            if verdict.as_ref().is_none_or(|v| v.open.is_empty())
                || (sampled && round >= crate::ties::SAMPLED_ROUNDS)
            {
                break;
            }
        }
        if let Some(v) = verdict {
            if let Some(m) = last[v.leader].take() {
                self.take_verdict(&finalists, &v, m);
            }
        }
        Ok(())
    }

    /// The [`FINALISTS`] fastest configurations timed so far, fastest
    /// first; ties go to the earlier point of the space, so the finalists
    /// do not depend on the map's order.
    fn finalists(&self) -> Vec<Point> {
        let mut timed: Vec<(&Point, f64)> = self
            .seen
            .iter()
            .filter_map(|(p, m)| m.as_ref().map(|m| (p, m.time_ns)))
            .collect();
        timed.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(b.0)));
        timed
            .iter()
            .take(FINALISTS)
            .map(|(p, _)| (*p).clone())
            .collect()
    }

    /// The re-timing's verdict as the search's outcome: its leader, timed
    /// as `leader_last` last, and the finalists not told apart from it.
    fn take_verdict(
        &mut self,
        finalists: &[Point],
        v: &crate::ties::Verdict,
        mut leader_last: Measurement,
    ) {
        // The leader's figure is its last side-by-side timing's (the
        // driver's, as every other time of the search), with the larger of
        // its stated uncertainty and its median's interval.
        leader_last.uncertainty_pct = Some(
            leader_last
                .uncertainty_pct
                .unwrap_or(0.0)
                .max(v.uncertainty_pct),
        );
        self.best = Some((finalists[v.leader].clone(), leader_last));
        // Still open when the rounds ran out: not told apart.
        self.tied = v
            .tied
            .iter()
            .chain(&v.open)
            .map(|&i| finalists[i].clone())
            .collect();
        self.noise_pct = Some(v.noise_pct);
    }

    fn log_final(
        &mut self,
        v: &Config,
        r: &Result<Measurement, TuneError>,
        round: usize,
    ) -> Result<(), TuneError> {
        let line = Evaluation {
            n: self.evaluations.len(),
            phase: "final".into(),
            config: v.clone(),
            time_ns: r.as_ref().ok().map(|m| m.time_ns),
            mflops: r.as_ref().ok().and_then(|m| m.mflops),
            error: r.as_ref().err().map(|e| e.to_string()),
            failure: r.as_ref().err().and_then(|e| e.failure()),
            samples_ns: r.as_ref().map(|m| m.samples_ns.clone()).unwrap_or_default(),
            uncertainty_pct: r.as_ref().ok().and_then(|m| m.uncertainty_pct),
            elapsed_s: self.started.elapsed().as_secs_f64(),
            best_ns: None,
            node: None,
            cpu: None,
            stopped: Some(format!(
                "re-timed side by side with the other finalists (round {round})"
            )),
            split: None,
        };
        if let Some(log) = self.log.as_mut() {
            let text = serde_json::to_string(&line).expect("evaluations serialise");
            writeln!(log, "{text}")
                .and_then(|_| log.flush())
                .map_err(TuneError::Log)?;
        }
        Ok(())
    }

    /// Every configuration, in order (the reference the bench compares to).
    pub fn exhaustive(mut self) -> Result<Outcome, TuneError> {
        let mut points = self.space.all_points();
        while !self.exhausted() {
            let left = self.budget - self.evaluations.len();
            let round: Vec<Point> = points.by_ref().take(left.min(EXHAUSTIVE_ROUND)).collect();
            if round.is_empty() {
                break;
            }
            self.eval_round(&round, "exhaustive")?;
        }
        self.retime_finalists()?;
        self.finish(Vec::new())
    }

    pub(crate) fn finish(self, starts: Vec<String>) -> Result<Outcome, TuneError> {
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
        let model = self.model_choice.as_ref().map(|c| {
            let time_ns = self
                .seen
                .get(&c.point)
                .cloned()
                .flatten()
                .map(|m| m.time_ns);
            let from = self.space.config(&c.point);
            let to = self.space.config(&p);
            ModelChoice {
                configuration: self.space.describe(&c.point),
                reason: c.reason.clone(),
                time_ns,
                best_over_model: time_ns.map(|t| m.time_ns / t),
                moved: from
                    .iter()
                    .zip(&to)
                    .filter(|(a, b)| a.value() != b.value())
                    .map(|(a, b)| (a.name().to_string(), a.value().clone(), b.value().clone()))
                    .collect(),
                steps: self.space.steps(&c.point, &p),
            }
        });
        Ok(Outcome {
            model,
            best: self.space.config(&p),
            best_description: self.space.describe(&p),
            best_ns: m.time_ns,
            best_uncertainty_pct: m.uncertainty_pct,
            tied: self.tied.iter().map(|p| self.space.config(p)).collect(),
            finalists: self
                .left_finalists
                .iter()
                .flatten()
                .map(|p| self.space.config(p))
                .collect(),
            noise_pct: self.noise_pct,
            best_mflops: m.mflops,
            evaluations: self.evaluations.len(),
            failed,
            space_size: self
                .space
                .allowed_size()
                .unwrap_or_else(|| self.space.size()),
            budget: self.budget,
            starts,
            seconds: self.started.elapsed().as_secs_f64(),
            time_split: self
                .evaluations
                .iter()
                .filter_map(|e| e.split.as_ref())
                .fold(TimeSplit::default(), |mut sum, s| {
                    sum.add(s);
                    sum
                }),
            split_evaluations: self
                .evaluations
                .iter()
                .filter(|e| e.split.is_some())
                .count(),
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
        calls: Vec<Config>,
        fail_when: Option<config::Setting>,
    }

    impl Objective for Bowl {
        fn evaluate(&mut self, v: &Config) -> Result<Measurement, TuneError> {
            self.calls.push(v.clone());
            if let Some(bad) = &self.fail_when {
                if v.iter().any(|s| s == bad) {
                    return Err(TuneError::Objective(format!("{bad} does not compile")));
                }
            }
            let g = |n: &str| v.get(n).unwrap() as f64;
            let t = 100.0
                + ((g("NB") - 96.0) / 16.0).powi(2)
                + 3.0 * (g("MU") - 4.0).powi(2)
                + 2.0 * (g("NU") - 3.0).powi(2);
            Ok(Measurement {
                time_ns: t,
                mflops: Some(1e5 / t),
                samples_ns: Vec::new(),
                uncertainty_pct: None,
                split: None,
                stopped: None,
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

    /// A start at the configuration of `space` nearest `values`.
    fn start_at(space: &Space, values: [i64; 3], reason: &str) -> Start {
        Start {
            point: space.nearest(&values),
            reason: reason.into(),
        }
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
        let start = start_at(&space, [32, 3, 3], "test");
        let out = Tuner::new(&space, &mut obj, &mut (), None, 200)
            .search(&[start])
            .unwrap();
        assert_eq!(out.best_description, "NB=96 MU=4 NU=3");
        assert_eq!(out.best_ns, 100.0);
        // Far fewer than the 1024 configurations.
        assert!(out.evaluations < 80, "{}", out.evaluations);
    }

    #[test]
    fn finalists_left_to_the_caller_are_listed_in_order_and_not_timed_again() {
        let space = space();
        let mut obj = bowl();
        let start = start_at(&space, [32, 3, 3], "test");
        let out = Tuner::new(&space, &mut obj, &mut (), None, 200)
            .leaving_finalists(true)
            .search(&[start])
            .unwrap();
        assert_eq!(obj.calls.len(), out.evaluations);
        assert_eq!(out.finalists.len(), FINALISTS);
        assert_eq!(out.finalists[0], out.best);
        assert!(out.tied.is_empty() && out.noise_pct.is_none());
        let mut again = bowl();
        let time = |c: &Config| again.evaluate(c).unwrap().time_ns;
        let times: Vec<f64> = out.finalists.iter().map(time).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    }

    #[test]
    fn no_configuration_is_timed_twice_and_the_budget_holds() {
        let space = space();
        let mut obj = bowl();
        let start = start_at(&space, [256, 1, 8], "far");
        let out = Tuner::new(&space, &mut obj, &mut (), None, 25)
            .search(&[start])
            .unwrap();
        assert_eq!(out.evaluations, 25);
        // The search's 25, then the finalists re-timed side by side in
        // rounds until decided.
        let retimed = obj.calls.len() - 25;
        assert!(
            retimed.is_multiple_of(FINALISTS)
                && (1..=crate::ties::MAX_ROUNDS).contains(&(retimed / FINALISTS)),
            "{retimed}"
        );
        let (search, finalists) = obj.calls.split_at(25);
        let mut uniq = search.to_vec();
        uniq.sort();
        uniq.dedup();
        assert_eq!(uniq.len(), search.len(), "a configuration was timed twice");
        assert!(finalists.iter().all(|f| search.contains(f)));
    }

    #[test]
    fn log_has_one_json_line_per_evaluation_with_running_best() {
        let space = space();
        let mut obj = bowl();
        let mut buf: Vec<u8> = Vec::new();
        let start = start_at(&space, [32, 3, 3], "test");
        let out = Tuner::new(&space, &mut obj, &mut (), Some(Box::new(&mut buf)), 200)
            .search(&[start])
            .unwrap();
        let (lines, finals): (Vec<serde_json::Value>, Vec<serde_json::Value>) =
            String::from_utf8(buf)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
                .partition(|l| l["phase"] != "final");
        assert_eq!(lines.len(), out.evaluations);
        // The finalists' re-timing (in rounds) names the best, and the log
        // says so.
        assert!(finals.len().is_multiple_of(FINALISTS));
        let retimed_best = finals
            .iter()
            .map(|l| l["time_ns"].as_f64().unwrap())
            .fold(f64::INFINITY, f64::min);
        assert_eq!(retimed_best, out.best_ns);
        assert!(finals.iter().all(|l| l["stopped"]
            .as_str()
            .unwrap()
            .contains("re-timed side by side")));
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
        obj.fail_when = Some(config::Setting::new("MU", 4).unwrap());
        let start = start_at(&space, [96, 3, 3], "t");
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
        obj.fail_when = Some(config::Setting::new("MU", 3).unwrap());
        let start = start_at(&space, [96, 3, 3], "t");
        let err = Tuner::new(&space, &mut obj, &mut (), None, 100)
            .search(&[start])
            .unwrap_err();
        assert!(err.to_string().contains("MU=3 does not compile"), "{err}");
    }

    /// Evaluates each round back to front (as a cluster finishing tasks in
    /// any order would) and remembers the rounds it was given.
    struct Rounds {
        bowl: Bowl,
        rounds: Vec<usize>,
    }

    impl Objective for Rounds {
        fn evaluate(&mut self, v: &Config) -> Result<Measurement, TuneError> {
            self.bowl.evaluate(v)
        }
        fn evaluate_round(&mut self, round: &[Config]) -> Vec<Result<Measurement, TuneError>> {
            self.rounds.push(round.len());
            let mut out: Vec<_> = round.iter().rev().map(|v| self.evaluate(v)).collect();
            out.reverse();
            out
        }
    }

    #[test]
    fn rounds_evaluated_together_log_and_count_as_one_after_another() {
        let space = space();
        let starts = [
            start_at(&space, [32, 1, 8], "a"),
            start_at(&space, [256, 8, 1], "b"),
        ];
        let run = |obj: &mut dyn Objective, budget| {
            let mut buf: Vec<u8> = Vec::new();
            let out = Tuner::new(&space, obj, &mut (), Some(Box::new(&mut buf)), budget)
                .search(&starts)
                .unwrap();
            let configs: Vec<String> = String::from_utf8(buf)
                .unwrap()
                .lines()
                .map(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).unwrap();
                    format!("{} {} {}", v["n"], v["phase"], v["config"])
                })
                .collect();
            (out.best_description, out.evaluations, configs)
        };
        for budget in [200, 17] {
            let mut one_by_one = bowl();
            let mut together = Rounds {
                bowl: bowl(),
                rounds: Vec::new(),
            };
            let a = run(&mut one_by_one, budget);
            let b = run(&mut together, budget);
            assert_eq!(a, b);
            assert_eq!(b.1, budget.min(b.1));
            // The first start alone, then the other, then neighbourhoods
            // of up to six configurations.
            assert_eq!(together.rounds[..2], [1, 1]);
            assert!(
                together.rounds.iter().any(|&n| n >= 4),
                "{:?}",
                together.rounds
            );
            // The last rounds are the finalists' re-timing.
            let retimed = together.rounds.iter().sum::<usize>() - b.1;
            assert!(retimed.is_multiple_of(FINALISTS));
            assert_eq!(together.rounds.last(), Some(&FINALISTS));
            let (mut x, mut y) = (one_by_one.calls.clone(), together.bowl.calls.clone());
            x.sort();
            y.sort();
            assert_eq!(x, y, "the same configurations, each evaluated once");
        }
    }

    /// The bowl's rounds timed in interleaved, raced passes.
    struct Raced(Bowl);

    impl Objective for Raced {
        fn evaluate(&mut self, v: &Config) -> Result<Measurement, TuneError> {
            self.0.evaluate(v)
        }
        fn evaluate_round(&mut self, round: &[Config]) -> Vec<Result<Measurement, TuneError>> {
            let plan = crate::race::RacePlan {
                passes: crate::race::PASSES,
                racing: true,
            };
            crate::race::race(round.len(), plan, |i, _| {
                let m = self.0.evaluate(&round[i])?;
                Ok(crate::race::Pass {
                    reported_ns: m.time_ns,
                    samples_ns: vec![m.time_ns],
                    uncertainty_pct: Some(0.0),
                    mflops: m.mflops,
                    split: TimeSplit::default(),
                })
            })
        }
    }

    #[test]
    fn interleaved_raced_rounds_choose_what_sequential_ones_choose() {
        let space = space();
        let start = start_at(&space, [32, 1, 8], "far");
        let mut sequential = bowl();
        let a = Tuner::new(&space, &mut sequential, &mut (), None, 200)
            .search(std::slice::from_ref(&start))
            .unwrap();
        let mut raced = Raced(bowl());
        let b = Tuner::new(&space, &mut raced, &mut (), None, 200)
            .search(&[start])
            .unwrap();
        assert_eq!(a.best_description, b.best_description);
        assert_eq!(a.best_ns, b.best_ns);
        assert_eq!(a.evaluations, b.evaluations);
        // Racing ran fewer passes than every configuration's every pass.
        let passes = raced.0.calls.len();
        assert!(
            passes < crate::race::PASSES * (b.evaluations + FINALISTS),
            "{passes}"
        );
        // And the exhaustive search, whose rounds are large enough to be
        // bounded by a quantile of their spreads, and Yotov's.
        let all = usize::try_from(space.size()).unwrap();
        let mut sequential = bowl();
        let a = Tuner::new(&space, &mut sequential, &mut (), None, all)
            .exhaustive()
            .unwrap();
        let mut raced = Raced(bowl());
        let b = Tuner::new(&space, &mut raced, &mut (), None, all)
            .exhaustive()
            .unwrap();
        assert_eq!(a.best_description, b.best_description);
        assert_eq!(a.best_ns, b.best_ns);
        assert_eq!((a.evaluations, b.evaluations), (all, all));
        let passes = raced.0.calls.len();
        assert!(
            passes < 5 * (b.evaluations + FINALISTS) / 2,
            "racing ran {passes} passes for {} configurations",
            b.evaluations
        );
        let starts = [
            start_at(&space, [64, 3, 3], "L1"),
            start_at(&space, [208, 3, 3], "L2"),
        ];
        let mut sequential = bowl();
        let a = Tuner::new(&space, &mut sequential, &mut (), None, 200)
            .yotov(&starts, &roles(&space))
            .unwrap();
        let mut raced = Raced(bowl());
        let b = Tuner::new(&space, &mut raced, &mut (), None, 200)
            .yotov(&starts, &roles(&space))
            .unwrap();
        assert_eq!(a.best_description, b.best_description);
        assert_eq!(a.best_ns, b.best_ns);
    }

    fn roles(space: &Space) -> crate::roles::Roles {
        crate::roles::Roles::resolve(space, &[], None, None).unwrap()
    }

    #[test]
    fn yotov_search_moves_the_tile_then_climbs_the_register_tile() {
        let space = space();
        let mut obj = bowl();
        let starts = [
            start_at(&space, [64, 3, 3], "L1"),
            start_at(&space, [208, 3, 3], "L2"),
        ];
        let out = Tuner::new(&space, &mut obj, &mut (), None, 200)
            .with_model_choice(Some(starts[0].clone()))
            .yotov(&starts, &roles(&space))
            .unwrap();
        assert_eq!(out.best_description, "NB=96 MU=4 NU=3");
        // A few dozen evaluations of the 1024 configurations.
        assert!(out.evaluations <= 30, "{}", out.evaluations);
        let m = out.model.unwrap();
        assert_eq!(m.configuration, "NB=64 MU=3 NU=3");
        assert!(m.best_over_model.unwrap() < 1.0);
        assert_eq!(
            m.moved,
            [
                ("NB".to_string(), Value::Int(64), Value::Int(96)),
                ("MU".to_string(), Value::Int(3), Value::Int(4))
            ]
        );
        assert_eq!(m.steps, 3);
    }

    #[test]
    fn line_search_sweeps_one_group_at_a_time_from_the_reference() {
        let space = space();
        let mut obj = bowl();
        let start = start_at(&space, [32, 2, 2], "model");
        let fits = |mu: i64, nu: i64| mu * nu + mu + nu <= 16;
        let out = Tuner::new(&space, &mut obj, &mut (), None, 500)
            .line(&start, &roles(&space), &fits)
            .unwrap();
        // NB swept at MU=2 NU=2 (16 values), then the register pairs that
        // fit 16 registers at the best NB.
        let pairs = (1..=8)
            .flat_map(|mu| (1..=8).map(move |nu| (mu, nu)))
            .filter(|&(mu, nu)| fits(mu, nu))
            .count();
        assert_eq!(out.evaluations, 16 + pairs - 1);
        // The bowl's optimum 4x3 needs 19 registers: the line search, held
        // within them, ends at the best pair that fits.
        assert_eq!(out.best_description, "NB=96 MU=4 NU=2");
        // Register tiles beyond the registers are never tried.
        assert!(obj
            .calls
            .iter()
            .all(|v| fits(v.get("MU").unwrap(), v.get("NU").unwrap())));
    }

    #[test]
    fn the_model_alone_is_one_evaluation() {
        let space = space();
        let mut obj = bowl();
        let start = start_at(&space, [64, 3, 3], "model");
        let out = Tuner::new(&space, &mut obj, &mut (), None, 50)
            .with_model_choice(Some(start.clone()))
            .model_only(std::slice::from_ref(&start))
            .unwrap();
        assert_eq!(out.evaluations, 1);
        let m = out.model.unwrap();
        assert_eq!(m.best_over_model, Some(1.0));
        assert!(m.moved.is_empty());
    }

    #[test]
    fn a_configuration_that_violates_a_constraint_is_never_evaluated() {
        let space = space()
            .constrained(
                vec![
                    crate::space::parse_constraint("MU != 4").unwrap(),
                    crate::space::parse_constraint("NB % (MU * NU) == 0 || NU == 1").unwrap(),
                ],
                Default::default(),
            )
            .unwrap();
        let violates = |v: &Config| {
            let g = |n: &str| v.get(n).unwrap();
            g("MU") == 4 || (g("NB") % (g("MU") * g("NU")) != 0 && g("NU") != 1)
        };
        let start = start_at(&space, [96, 4, 3], "m");
        assert!(
            space.allows(&start.point),
            "the start is snapped to an allowed point"
        );
        for strategy in 0..4 {
            let mut obj = bowl();
            let mut quiet = ();
            let t = Tuner::new(&space, &mut obj, &mut quiet, None, 2000);
            let out = match strategy {
                0 => t.exhaustive(),
                1 => t.search(std::slice::from_ref(&start)),
                2 => t.yotov(std::slice::from_ref(&start), &roles(&space)),
                _ => t.line(&start, &roles(&space), &|_, _| true),
            }
            .unwrap();
            assert!(!obj.calls.is_empty());
            assert!(
                obj.calls.iter().all(|v| !violates(v)),
                "strategy {strategy} evaluated a configuration a constraint rules out"
            );
            assert!(
                !out.best_description.contains("MU=4"),
                "{}",
                out.best_description
            );
            if strategy == 0 {
                let allowed = space.allowed_size().unwrap();
                assert_eq!(out.evaluations as u128, allowed);
                assert_eq!(out.space_size, allowed);
                assert!(allowed < space.size());
            }
        }
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
