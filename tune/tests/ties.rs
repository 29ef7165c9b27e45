//! Ties under noise through the whole search: a seeded noisy objective
//! whose two best configurations are equal is reported tied, unequal ones
//! decided (tune/src/ties.rs judges; tune/src/search.rs re-times).

/// A noisy objective: X=1..6, its true time 1000 ns at X=1 and at X=2
/// when `equal` (else 1300 ns there), 2000 ns elsewhere; each timing
/// is one value, off by up to +-5 % from a seeded generator.
struct Noisy {
    equal: bool,
    rng: u64,
}

impl tune::search::Objective for Noisy {
    fn evaluate(&mut self, config: &config::Config) -> Result<tune::Measurement, tune::TuneError> {
        self.rng = self
            .rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let jitter = ((self.rng >> 33) as f64 / (1u64 << 31) as f64) * 0.1 - 0.05;
        let truth = match config.get("X") {
            Some(1) => 1000.0,
            Some(2) if self.equal => 1000.0,
            Some(2) => 1300.0,
            _ => 2000.0,
        };
        Ok(tune::Measurement {
            time_ns: truth * (1.0 + jitter),
            mflops: None,
            samples_ns: Vec::new(),
            uncertainty_pct: None,
            split: None,
            stopped: None,
        })
    }
}

fn searched(equal: bool, seed: u64) -> tune::search::Outcome {
    let space = tune::space::Space::new(vec![tune::space::parse_param("X=1:6").unwrap()]).unwrap();
    let mut objective = Noisy { equal, rng: seed };
    let mut log = Vec::new();
    let out =
        tune::search::Tuner::new(&space, &mut objective, &mut (), Some(Box::new(&mut log)), 6)
            .exhaustive()
            .unwrap();
    let text = String::from_utf8(log).unwrap();
    let finals = text.lines().filter(|l| l.contains("\"final\"")).count();
    assert!(finals >= 3 && finals.is_multiple_of(3), "{text}");
    out
}

#[test]
fn two_equal_best_are_reported_tied_and_unequal_ones_decided() {
    for seed in 0..10 {
        let out = searched(true, seed);
        let best = out.best.get("X").unwrap();
        let tied: Vec<i64> = out.tied.iter().map(|c| c.get("X").unwrap()).collect();
        assert!(
            [1, 2].contains(&best) && tied == vec![3 - best],
            "seed {seed}: best X={best}, tied {tied:?}"
        );
        let out = searched(false, seed);
        assert_eq!(out.best.get("X"), Some(1), "seed {seed}");
        assert!(out.tied.is_empty(), "seed {seed}: {:?}", out.tied);
        // The best's time is one of its re-timings, with its
        // uncertainty.
        assert!(
            (out.best_ns / 1000.0 - 1.0).abs() <= 0.05,
            "{}",
            out.best_ns
        );
        assert!(out
            .best_uncertainty_pct
            .is_some_and(|u| u > 0.0 && u <= 5.0));
    }
}
