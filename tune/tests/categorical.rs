//! Every strategy on a space with a categorical parameter (issue 36): a
//! loop order of five names, whose costs are not ordered by the names'
//! listing, times a tile size with an optimum. The search starts at the
//! second-best order, whose listed neighbours (the names before and after
//! it) are both slower: a search that stepped through the names as if they
//! were ordered would stop there; one that treats them as unordered moves
//! to the best order in one step.

use config::{Config, Value};
use tune::model::Start;
use tune::run::search_with;
use tune::space::{parse_constraint, parse_param, Space};
use tune::{Measurement, Strategy, TuneError};

const ORDERS: [&str; 5] = ["kij", "jik", "ikj", "ijk", "jki"];
/// Cost of each order, by its position in `ORDERS`: the best first, the
/// start (ikj, second best) between two slower ones.
const COST: [f64; 5] = [1.0, 5.0, 2.0, 4.0, 3.0];

/// The synthetic objective; it keeps every configuration it was given.
struct Orders {
    seen: Vec<Config>,
}

impl tune::search::Objective for Orders {
    fn evaluate(&mut self, config: &Config) -> Result<Measurement, TuneError> {
        self.seen.push(config.clone());
        let Some(Value::Name(order)) = config.value("ORDER") else {
            panic!("ORDER is not a name in {config}");
        };
        let i = ORDERS.iter().position(|o| o == order).unwrap();
        let nb = config.get("NB").unwrap() as f64;
        Ok(Measurement {
            time_ns: 1000.0 * COST[i] * (1.0 + (nb - 5.0).powi(2) / 20.0),
            mflops: None,
            samples_ns: Vec::new(),
            uncertainty_pct: None,
            split: None,
            stopped: None,
        })
    }
}

fn space(constraint: Option<&str>) -> Space {
    let space = Space::new(vec![
        parse_param(&format!("ORDER={}", ORDERS.join(","))).unwrap(),
        parse_param("NB=1:8").unwrap(),
    ])
    .unwrap();
    match constraint {
        Some(c) => space
            .constrained(vec![parse_constraint(c).unwrap()], Default::default())
            .unwrap(),
        None => space,
    }
}

fn search(
    space: &Space,
    strategy: Strategy,
    budget: usize,
    seed: u64,
) -> (tune::search::Outcome, Vec<Config>) {
    let start_at = Config::from_pairs([
        ("ORDER", Value::name("ikj").unwrap()),
        ("NB", Value::Int(5)),
    ])
    .unwrap();
    let start = Start {
        point: space.point_of(&start_at).unwrap(),
        reason: "the trap".into(),
    };
    let mut objective = Orders { seen: Vec::new() };
    let mut quiet = ();
    let tuner =
        tune::search::Tuner::new(space, &mut objective, &mut quiet, None, budget).with_seed(seed);
    let out = search_with(
        tuner,
        strategy,
        &[start],
        &tune::roles::Roles::default(),
        None,
    )
    .unwrap();
    (out, objective.seen)
}

fn best() -> Config {
    Config::from_pairs([
        ("ORDER", Value::name("kij").unwrap()),
        ("NB", Value::Int(5)),
    ])
    .unwrap()
}

#[test]
fn local_searches_move_from_a_name_to_any_other() {
    let space = space(None);
    // Hill-climbing from the trap: its first round holds every other
    // order (4) and NB 4 and 6; a dozen evaluations of the 40 suffice.
    let (out, seen) = search(&space, Strategy::Hill, 12, 0);
    assert_eq!(out.best, best(), "hill: {seen:?}");
    for seed in 0..10 {
        let (out, seen) = search(&space, Strategy::Multistart, 12, seed);
        assert_eq!(out.best, best(), "multistart seed {seed}: {seen:?}");
        // Its first round from the start tried every order.
        for order in ORDERS {
            assert!(
                seen[..7]
                    .iter()
                    .any(|c| c.value("ORDER") == Some(&Value::Name(order.into()))),
                "multistart seed {seed}: {order} not among the first round {:?}",
                &seen[..7]
            );
        }
    }
}

#[test]
fn annealing_and_bayes_find_the_best_order() {
    let space = space(None);
    for seed in 0..10 {
        for (strategy, budget) in [(Strategy::Anneal, 25), (Strategy::Bayes, 20)] {
            let (out, seen) = search(&space, strategy, budget, seed);
            assert!(out.evaluations <= budget);
            assert_eq!(out.best, best(), "{strategy:?} seed {seed}: {seen:?}");
        }
    }
}

#[test]
fn every_strategy_keeps_to_the_names_and_the_constraints() {
    // jik ruled out by a constraint on the names: never evaluated.
    let space = space(Some("ORDER != jik"));
    for strategy in [
        Strategy::Random,
        Strategy::Anneal,
        Strategy::Multistart,
        Strategy::Bayes,
        Strategy::Hill,
        Strategy::Exhaustive,
    ] {
        for seed in 0..3 {
            let (out, seen) = search(&space, strategy, 32, seed);
            assert!(!seen.is_empty());
            for c in &seen {
                let Some(Value::Name(order)) = c.value("ORDER") else {
                    panic!("{strategy:?}: {c}");
                };
                assert!(
                    ORDERS.contains(&order.as_str()) && order != "jik",
                    "{strategy:?} seed {seed} evaluated {c}"
                );
            }
            // 32 evaluations of the 32 allowed: every strategy but the
            // local ones sees the whole space and so the best.
            if matches!(strategy, Strategy::Random | Strategy::Exhaustive) {
                assert_eq!(out.best, best(), "{strategy:?}");
                let mut distinct = seen.clone();
                distinct.sort();
                distinct.dedup();
                assert_eq!(distinct.len(), 32, "{strategy:?}");
            }
        }
    }
}
