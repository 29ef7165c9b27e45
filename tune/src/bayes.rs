//! Bayesian optimisation: a Gaussian-process surrogate of the log time
//! over the parameters' value positions, and the next configuration the
//! one of greatest expected improvement (the method of "Bayesian
//! Optimization for auto-tuning GPU kernels", Willemsen et al., 2021, on a
//! discrete space). A search starts from the given point and a seeded
//! random design, then evaluates one configuration at a time; every
//! candidate is an allowed, not yet evaluated point, so constraints hold
//! before anything is built. The linear algebra (the kernel matrix's
//! Cholesky factor and its solves) is nalgebra's.

use crate::search::{Outcome, Tuner};
use crate::space::{Point, Space};
use crate::TuneError;
use nalgebra::{DMatrix, DVector};
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_xorshift::XorShiftRng;

/// Candidates scored per step: every allowed point of a space this small,
/// else this many seeded random ones plus the best points' neighbours.
const CANDIDATES: usize = 4096;

/// Length scales tried for each parameter (in units of its whole range).
const LENGTHS: [f64; 6] = [0.08, 0.15, 0.3, 0.6, 1.2, 2.4];

/// Noise variances tried, relative to the signal's: measured times
/// repeat to a few per cent, a model of them should not interpolate more.
const NOISES: [f64; 3] = [1e-4, 1e-2, 1e-1];

/// The surrogate's hyper-parameters and the factor they give.
struct Fit {
    lengths: Vec<f64>,
    /// Cholesky factor of the kernel matrix with its noise.
    chol: nalgebra::Cholesky<f64, nalgebra::Dyn>,
    /// K⁻¹ y (y standardised).
    alpha: DVector<f64>,
    /// The concentrated signal variance, yᵀK⁻¹y / n.
    variance: f64,
    log_likelihood: f64,
}

/// Matérn 5/2 over the scaled distance.
fn matern(a: &[f64], b: &[f64], lengths: &[f64]) -> f64 {
    let r = a
        .iter()
        .zip(b)
        .zip(lengths)
        .map(|((x, y), l)| ((x - y) / l).powi(2))
        .sum::<f64>()
        .sqrt();
    let s = 5f64.sqrt() * r;
    (1.0 + s + s * s / 3.0) * (-s).exp()
}

fn fit(x: &[Vec<f64>], y: &DVector<f64>, lengths: &[f64], noise: f64) -> Option<Fit> {
    let n = x.len();
    let k = DMatrix::from_fn(n, n, |i, j| {
        matern(&x[i], &x[j], lengths) + if i == j { noise } else { 0.0 }
    });
    let chol = k.cholesky()?;
    let solved = chol.solve(y);
    let variance = (y.dot(&solved) / n as f64).max(1e-12);
    let log_det: f64 = chol.l_dirty().diagonal().iter().map(|d| d.ln()).sum();
    Some(Fit {
        lengths: lengths.to_vec(),
        alpha: solved,
        chol,
        variance,
        log_likelihood: -0.5 * n as f64 * variance.ln() - log_det,
    })
}

/// The hyper-parameters of greatest marginal likelihood: a common length
/// scale and noise on a grid, then each parameter's length in turn.
fn best_fit(x: &[Vec<f64>], y: &DVector<f64>) -> Option<Fit> {
    let d = x[0].len();
    let better = |best: Option<Fit>, f: Option<Fit>| match (best, f) {
        (Some(b), Some(f)) if f.log_likelihood > b.log_likelihood => Some(f),
        (None, f) => f,
        (b, _) => b,
    };
    let mut best: Option<Fit> = None;
    let mut noise_of_best = NOISES[0];
    for &noise in &NOISES {
        for &l in &LENGTHS {
            let f = fit(x, y, &vec![l; d], noise);
            let before = best.as_ref().map(|b| b.log_likelihood);
            best = better(best, f);
            if best.as_ref().map(|b| b.log_likelihood) != before {
                noise_of_best = noise;
            }
        }
    }
    for dim in 0..d {
        let Some(current) = best.as_ref().map(|b| b.lengths.clone()) else {
            break;
        };
        for &l in &LENGTHS {
            let mut lengths = current.clone();
            lengths[dim] = l;
            best = better(best, fit(x, y, &lengths, noise_of_best));
        }
    }
    best
}

/// Standard normal density and distribution function.
fn phi(z: f64) -> f64 {
    (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

fn big_phi(z: f64) -> f64 {
    0.5 * libm::erfc(-z / std::f64::consts::SQRT_2)
}

/// A point's position in the unit cube: an integer parameter's value index
/// over its last index (its values are sorted); a categorical parameter
/// one-hot, one coordinate per name at 1/sqrt(2), so any two of its names
/// are the same distance apart (1, as an integer parameter's ends) and the
/// surrogate sees no order among them.
fn position(space: &Space, p: &Point) -> Vec<f64> {
    let mut out = Vec::with_capacity(p.0.len());
    for (&i, q) in p.0.iter().zip(&space.params) {
        let n = q.values.len();
        if q.categorical() {
            out.extend((0..n).map(|j| {
                if i == j {
                    std::f64::consts::FRAC_1_SQRT_2
                } else {
                    0.0
                }
            }));
        } else if n > 1 {
            out.push(i as f64 / (n - 1) as f64);
        } else {
            out.push(0.0);
        }
    }
    out
}

impl Tuner<'_> {
    /// Bayesian optimisation from `start`: a random design of a tenth of
    /// the budget (3 to 10 configurations) as one round, then the
    /// configuration of greatest expected improvement, one at a time.
    pub fn bayes(mut self, start: &crate::model::Start) -> Result<Outcome, TuneError> {
        let mut rng = XorShiftRng::seed_from_u64(self.seed);
        let space = self.space();
        // Every allowed point when there are few, so each step scores
        // them all; else fresh random draws each step.
        let listed: Option<Vec<Point>> = (space.recorded.is_some()
            || space.size() <= CANDIDATES as u128)
            .then(|| space.all_points().collect());
        let design = (self.budget() / 10).clamp(3, 10);
        let mut first = vec![start.point.clone()];
        first.extend(self.draw(&mut rng, listed.as_deref(), design - 1));
        self.eval_round(&first, "design")?;
        while !self.exhausted() {
            let Some(next) = self.most_promising(&mut rng, listed.as_deref()) else {
                break;
            };
            self.eval(&next, "bayes")?;
        }
        self.retime_finalists()?;
        self.finish(vec![start.reason.clone()])
    }

    /// Up to `n` allowed points not evaluated yet, seeded.
    fn draw(&self, rng: &mut XorShiftRng, listed: Option<&[Point]>, n: usize) -> Vec<Point> {
        let space = self.space();
        if let Some(all) = listed {
            let mut fresh: Vec<&Point> = all.iter().filter(|p| !self.seen(p)).collect();
            fresh.shuffle(rng);
            return fresh.into_iter().take(n).cloned().collect();
        }
        let mut out: Vec<Point> = Vec::new();
        for _ in 0..n * 50 {
            if out.len() == n {
                break;
            }
            let p = Point(
                space
                    .params
                    .iter()
                    .map(|q| rng.random_range(0..q.values.len()))
                    .collect(),
            );
            if space.allows(&p) && !self.seen(&p) && !out.contains(&p) {
                out.push(p);
            }
        }
        out
    }

    /// The unevaluated candidate of greatest expected improvement of the
    /// log time under the surrogate; a random one if no surrogate fits.
    fn most_promising(&self, rng: &mut XorShiftRng, listed: Option<&[Point]>) -> Option<Point> {
        let space = self.space();
        let timed = self.timed_points();
        let worst = timed
            .iter()
            .filter_map(|t| t.1)
            .fold(f64::NEG_INFINITY, f64::max);
        // A failed configuration counts as the slowest seen: the search
        // moves away from it without a model of failure.
        let observed: Vec<(Vec<f64>, f64)> = timed
            .iter()
            .filter_map(|(p, t)| {
                let t = t.or(worst.is_finite().then_some(worst))?;
                Some((position(space, p), t.ln()))
            })
            .collect();
        let mut candidates: Vec<Point> = match listed {
            Some(all) => all.iter().filter(|p| !self.seen(p)).cloned().collect(),
            None => {
                let mut c = self.draw(rng, None, CANDIDATES);
                let mut best: Vec<&(Point, Option<f64>)> =
                    timed.iter().filter(|t| t.1.is_some()).collect();
                best.sort_by(|a, b| a.1.unwrap().total_cmp(&b.1.unwrap()).then(a.0.cmp(&b.0)));
                for (p, _) in best.into_iter().take(3) {
                    for d in 0..space.params.len() {
                        for q in space.neighbours(p, d) {
                            if space.allows(&q) && !self.seen(&q) && !c.contains(&q) {
                                c.push(q);
                            }
                        }
                    }
                }
                c
            }
        };
        if candidates.is_empty() {
            return None;
        }
        if observed.len() < 2 {
            return Some(candidates.swap_remove(rng.random_range(0..candidates.len())));
        }
        let n = observed.len() as f64;
        let mean = observed.iter().map(|o| o.1).sum::<f64>() / n;
        let spread = (observed.iter().map(|o| (o.1 - mean).powi(2)).sum::<f64>() / n)
            .sqrt()
            .max(1e-9);
        let x: Vec<Vec<f64>> = observed.iter().map(|o| o.0.clone()).collect();
        let y = DVector::from_iterator(
            observed.len(),
            observed.iter().map(|o| (o.1 - mean) / spread),
        );
        let Some(model) = best_fit(&x, &y) else {
            return Some(candidates.swap_remove(rng.random_range(0..candidates.len())));
        };
        let incumbent = y.min();
        let mut best: Option<(f64, Point)> = None;
        for c in candidates {
            let at = position(space, &c);
            let k =
                DVector::from_iterator(x.len(), x.iter().map(|xi| matern(xi, &at, &model.lengths)));
            let mu = k.dot(&model.alpha);
            let v = model.chol.solve(&k);
            let var = (model.variance * (1.0 - k.dot(&v))).max(1e-12);
            let s = var.sqrt();
            let z = (incumbent - mu) / s;
            let ei = (incumbent - mu) * big_phi(z) + s * phi(z);
            // Ties go to the earlier point, so the order of the candidates
            // (a set's) does not decide.
            if best
                .as_ref()
                .is_none_or(|(e, p)| ei > *e || (ei == *e && c < *p))
            {
                best = Some((ei, c));
            }
        }
        best.map(|b| b.1)
    }
}
