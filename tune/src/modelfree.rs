//! Strategies that need no role for any parameter (unroll factors, vector
//! widths, accumulator counts, cut-offs, team sizes): random search, the
//! baseline every strategy is judged against; simulated annealing; and
//! multi-start local search, the hill-climb of [`Tuner::search`] restarted
//! from random configurations while the budget lasts. Every random choice
//! comes from one generator seeded by `--seed`, so a search is the same
//! search on the same objective; points the space's constraints rule out
//! (or a replayed space does not hold) are never drawn.

use crate::search::{Outcome, Tuner};
use crate::space::Point;
use crate::TuneError;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_xorshift::XorShiftRng;

/// Configurations of a random search evaluated as one round.
const RANDOM_ROUND: usize = 8;

/// Allowed points listed (and shuffled) rather than drawn at random and
/// checked, up to this many configurations.
const LISTED: u128 = 1_000_000;

/// Starting temperature of the annealing, as a relative slowdown: a move
/// 25 % slower is accepted with probability 1/e at the start...
const T_START: f64 = 0.25;
/// ...and one 0.5 % slower with probability 1/e when the budget is spent.
const T_END: f64 = 0.005;

/// Draws allowed, not yet evaluated points in a seeded random order.
struct Draws {
    rng: XorShiftRng,
    /// The allowed points, shuffled, when the space is small enough.
    listed: Option<std::vec::IntoIter<Point>>,
}

impl Draws {
    fn new(tuner: &Tuner<'_>) -> Draws {
        let mut rng = XorShiftRng::seed_from_u64(tuner.seed);
        let space = tuner.space();
        let listed = (space.recorded.is_some() || space.size() <= LISTED).then(|| {
            let mut all: Vec<Point> = space.all_points().collect();
            all.shuffle(&mut rng);
            all.into_iter()
        });
        Draws { rng, listed }
    }

    /// The next point not evaluated yet, or `None` when none is left (or
    /// none was found in many draws of a huge, tightly constrained space).
    fn unseen(&mut self, tuner: &Tuner<'_>) -> Option<Point> {
        if let Some(listed) = &mut self.listed {
            return listed.find(|p| !tuner.seen(p));
        }
        let space = tuner.space();
        (0..10_000).find_map(|_| {
            let p = Point(
                space
                    .params
                    .iter()
                    .map(|q| self.rng.random_range(0..q.values.len()))
                    .collect(),
            );
            (space.allows(&p) && !tuner.seen(&p)).then_some(p)
        })
    }

    /// A random allowed neighbour of `p`: one parameter moved one or two
    /// values up or down, or a categorical one to any other of its names.
    fn neighbour(&mut self, tuner: &Tuner<'_>, p: &Point) -> Option<Point> {
        let space = tuner.space();
        let movable: Vec<usize> = (0..space.params.len())
            .filter(|&d| space.params[d].values.len() > 1)
            .collect();
        if movable.is_empty() {
            return None;
        }
        (0..50).find_map(|_| {
            let dim = movable[self.rng.random_range(0..movable.len())];
            if space.params[dim].categorical() {
                let others = space.neighbours(p, dim);
                let q = others[self.rng.random_range(0..others.len())].clone();
                return space.allows(&q).then_some(q);
            }
            let size = self.rng.random_range(1..=2i64) as isize;
            let delta = if self.rng.random_bool(0.5) {
                size
            } else {
                -size
            };
            space.step(p, dim, delta).filter(|q| space.allows(q))
        })
    }
}

impl Tuner<'_> {
    /// Random search: allowed configurations in a seeded random order,
    /// each at most once, until the budget is spent.
    pub fn random(mut self) -> Result<Outcome, TuneError> {
        let mut draws = Draws::new(&self);
        while !self.exhausted() {
            let mut round: Vec<Point> = Vec::new();
            while round.len() < RANDOM_ROUND {
                match draws.unseen(&self) {
                    Some(p) if !round.contains(&p) => round.push(p),
                    Some(_) => continue,
                    None => break,
                }
            }
            if round.is_empty() {
                break;
            }
            self.eval_round(&round, "random")?;
        }
        self.retime_finalists()?;
        self.finish(Vec::new())
    }

    /// Simulated annealing from `start`: a random neighbour is taken when
    /// it is faster, or when slower with probability exp(-slowdown / T),
    /// T falling geometrically from [`T_START`] to [`T_END`] over the
    /// budget. A neighbourhood evaluated through and through (many draws
    /// of configurations already timed) restarts at a random new point.
    pub fn anneal(mut self, start: &crate::model::Start) -> Result<Outcome, TuneError> {
        let mut draws = Draws::new(&self);
        let budget = self.budget();
        let cooling = (T_END / T_START).powf(1.0 / budget.max(1) as f64);
        let mut temperature = T_START;
        let mut current = start.point.clone();
        let mut current_ns = self.eval(&current, "model")?;
        let mut free = 0;
        while !self.exhausted() {
            let next = match draws.neighbour(&self, &current) {
                Some(q) if !self.seen(&q) || free < 20 => q,
                _ => match draws.unseen(&self) {
                    Some(q) => q,
                    None => break,
                },
            };
            let fresh = !self.seen(&next);
            let t = self.eval(&next, "anneal")?;
            free = if fresh { 0 } else { free + 1 };
            if fresh {
                temperature *= cooling;
            }
            let Some(t) = t else { continue };
            let accept = match current_ns {
                None => true,
                Some(c) if t <= c => true,
                Some(c) => draws.rng.random_bool((-(t / c - 1.0) / temperature).exp()),
            };
            if accept {
                current = next;
                current_ns = Some(t);
            }
        }
        self.retime_finalists()?;
        self.finish(vec![start.reason.clone()])
    }

    /// Multi-start local search: from `start`, then from random allowed
    /// configurations, climb to a local optimum (each configuration's
    /// neighbours one value up or down, or any other name of a categorical
    /// parameter, as one round, moving to the best
    /// that improves), until the budget is spent.
    pub fn multistart(mut self, start: &crate::model::Start) -> Result<Outcome, TuneError> {
        let mut draws = Draws::new(&self);
        let mut from = Some(start.point.clone());
        while let (Some(p), false) = (from.take(), self.exhausted()) {
            let mut at = p.clone();
            let mut at_ns = self.eval(&at, "start")?;
            while !self.exhausted() {
                let space = self.space();
                let round: Vec<Point> = (0..space.params.len())
                    .flat_map(|d| space.neighbours(&at, d))
                    .filter(|q| space.allows(q))
                    .collect();
                let scored = self.eval_round(&round, "local")?;
                let better = round
                    .iter()
                    .zip(&scored)
                    .filter_map(|(q, s)| s.time.map(|t| (q, t)))
                    .filter(|(_, t)| at_ns.is_none_or(|a| *t < a))
                    .min_by(|a, b| a.1.total_cmp(&b.1));
                match better {
                    Some((q, t)) => {
                        at = q.clone();
                        at_ns = Some(t);
                    }
                    None => break,
                }
            }
            from = draws.unseen(&self);
        }
        self.retime_finalists()?;
        self.finish(vec![start.reason.clone()])
    }
}
