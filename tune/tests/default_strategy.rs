//! The default search on a recorded space of a real kernel (issue 36): a
//! replay of tune/spaces/unrolled_dot.t4.json (420 configurations of a dot
//! product's unroll, accumulators and vector width, timed on an AMD EPYC)
//! with the recorded times as the objective, so deterministic. The default
//! reaches the space's top 1 % within 50 evaluations for at least 18 of 20
//! seeds, where random search does for far fewer: the space is not one any
//! search finds the best of by luck.

use std::path::{Path, PathBuf};
use tune::replay::{replay, RecordedSpace, ReplayRequest};
use tune::Strategy;

const SEEDS: u64 = 20;
const BUDGET: u64 = 50;

fn space() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("spaces/unrolled_dot.t4.json")
}

/// The time a search must reach: the ceil(1 %)-th fastest recorded, or
/// within 5 % of the best where the top 1 % spans more (as
/// scripts/bench-search judges).
fn target() -> f64 {
    let times = RecordedSpace::read(&space()).unwrap().times_ns();
    let k = (times.len() as f64 * 0.01).ceil() as usize;
    times[k - 1].min(1.05 * times[0])
}

/// Seeds of 20 whose search ended at most as slow as `target`.
fn reached(strategy: Option<Strategy>, dir: &Path, target: f64) -> u64 {
    (0..SEEDS)
        .filter(|&seed| {
            let out = replay(
                ReplayRequest {
                    file: space(),
                    strategy,
                    budget: Some(BUDGET),
                    seed,
                    log: Some(dir.join(format!("{strategy:?}-{seed}.jsonl"))),
                },
                &mut (),
            )
            .unwrap();
            assert!(out.search.evaluations <= BUDGET as usize);
            out.search.best_ns <= target
        })
        .count() as u64
}

#[test]
fn the_default_reaches_the_top_percent_of_a_recorded_space_for_18_of_20_seeds() {
    let dir = tempfile::tempdir().unwrap();
    let target = target();
    let default = reached(None, dir.path(), target);
    let random = reached(Some(Strategy::Random), dir.path(), target);
    assert!(
        default >= 18,
        "the default reached the top 1 % ({target:.0} ns) for {default} of {SEEDS} seeds"
    );
    // 20 and 12 of 20 when this was written (docs/benchmarks.md).
    assert!(
        random < default,
        "random search reached it for {random}, the default for {default}"
    );
}
