//! Optuna tunes specs/blocked_gemm through `tdg run --cost-only`
//! (examples/optuna_tune.py), `tdg tune` searches the same space with the
//! same budget, and tdg re-times both bests side by side: they must agree
//! within the spread of those re-timings. Run under the timing lock.

use crate::formats_support::tuners_python;
use crate::support::{stderr, tdg_env as tdg};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use testkit::repo;

const SIZES: [&str; 6] = ["-D", "MS=256", "-D", "NS=256", "-D", "KS=256"];
const SPACE: [&str; 6] = [
    "--param",
    "NB=32:128:32",
    "--param",
    "MU=1:8",
    "--param",
    "NU=1:4",
];
/// Half the space. Exhaustively, about 8 of the 128 configurations are
/// within 5 % of the best: 32 trials drawn at random miss all 8 one time in
/// ten, and Optuna's sampler starts out random; with 64, one time in three
/// hundred.
const BUDGET: &str = "64";

type Config = BTreeMap<String, i64>;

fn config(v: &serde_json::Value) -> Config {
    v.as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_i64().unwrap()))
        .collect()
}

/// One `tdg run --cost-only` of `c`: seconds per call.
fn cost(spec: &Path, c: &Config) -> f64 {
    let kernel = repo().join("specs/blocked_gemm.c");
    let mut args = vec![
        "run".to_string(),
        spec.display().to_string(),
        "--impl".into(),
        kernel.display().to_string(),
        "--cost-only".into(),
    ];
    args.extend(SIZES.iter().map(|s| s.to_string()));
    for (k, v) in c {
        args.extend(["-D".to_string(), format!("{k}={v}")]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = tdg(&args, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    String::from_utf8(o.stdout).unwrap().trim().parse().unwrap()
}

fn median(v: Vec<f64>) -> f64 {
    stats::Summary::of(&v).expect("samples").median
}

#[test]
fn optunas_best_agrees_with_tdg_tunes_within_the_retiming_spread() {
    let _alone = testkit::exclusive();
    let dir = tempfile::tempdir().unwrap();
    // blocked_gemm's spec sampling each of the ~150 evaluations (both
    // searches, the re-timings) for 30-80 ms rather than the default
    // 100-250 ms: a call takes ~2 ms, and the verdict is measured against
    // the spread of re-timings sampled the same way.
    let spec = dir.path().join("blocked_gemm.spec");
    std::fs::write(
        &spec,
        std::fs::read_to_string(repo().join("specs/blocked_gemm.spec")).unwrap()
            + "timer={ min_time=30ms; max_time=80ms; };\n",
    )
    .unwrap();
    let kernel = repo().join("specs/blocked_gemm.c");
    let mut tune_args = vec![
        "tune",
        spec.to_str().unwrap(),
        "--impl",
        kernel.to_str().unwrap(),
        "--budget",
        BUDGET,
        "--format",
        "json",
    ];
    tune_args.extend(SIZES);
    tune_args.extend(SPACE);
    let log = dir.path().join("tune.jsonl");
    tune_args.extend(["--log", log.to_str().unwrap()]);
    let o = tdg(&tune_args, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let tuned: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let tune_best = config(&tuned["best"]);

    let out = dir.path().join("optuna.json");
    let mut optuna = Command::new(tuners_python());
    optuna
        .arg(repo().join("examples/optuna_tune.py"))
        .arg(&spec)
        .arg("--impl")
        .arg(&kernel)
        .args(SIZES)
        .args(SPACE)
        .args(["--trials", BUDGET, "--tdg", crate::support::TDG, "--out"])
        .arg(&out);
    let o = optuna.output().unwrap();
    assert!(
        o.status.success(),
        "the Optuna example failed: {}",
        stderr(&o)
    );
    let found: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(found["trials"].to_string(), BUDGET);
    let optuna_best = config(&found["best"]);

    // Side by side, interleaved, so drift on this shared machine hits both.
    // Once more when they disagree: the spread of four re-timings of each
    // moves with the host's load, so one unlucky set is measured again; a
    // real difference shows both times.
    let measure = || {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..4 {
            a.push(cost(&spec, &optuna_best));
            b.push(cost(&spec, &tune_best));
        }
        let spread = |v: &[f64]| {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(0.0, f64::max);
            hi / lo - 1.0
        };
        // The uncertainty of one re-timing: how far repeats of one
        // configuration disagree, never taken below 5%.
        let uncertainty = spread(&a).max(spread(&b)).max(0.05);
        let (ta, tb) = (median(a.clone()), median(b.clone()));
        let gap = (ta / tb - 1.0).abs();
        eprintln!(
            "Optuna {optuna_best:?}: {:.3} ms; tdg tune {tune_best:?}: {:.3} ms; gap {:.1}%, uncertainty {:.1}%",
            ta * 1e3,
            tb * 1e3,
            gap * 100.0,
            uncertainty * 100.0
        );
        (a, b, gap, uncertainty)
    };
    let mut m = measure();
    if m.2 > m.3 {
        eprintln!("measuring once more");
        m = measure();
    }
    let (a, b, gap, uncertainty) = m;
    assert!(
        gap <= uncertainty,
        "Optuna's best {optuna_best:?} ({a:?}) and tdg tune's {tune_best:?} ({b:?}) differ by {:.1}%, more than the {:.1}% the re-timings spread",
        gap * 100.0,
        uncertainty * 100.0
    );
}
