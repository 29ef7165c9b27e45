//! Optuna drives `tdg run --cost-only` (examples/optuna_tune.py) over
//! specs/blocked_gemm's space: every trial is one tdg evaluation, and the
//! best Optuna reports is a configuration of the space whose time is the
//! least of its trials, in the unit tdg gives. How its best compares with
//! `tdg tune`'s and the exhaustive search's is a benchmark
//! (scripts/bench-tune, docs/benchmarks.md), not this test.

use crate::formats_support::tuners_python;
use crate::support::{stderr, tdg_env as tdg};
use std::process::Command;
use testkit::repo;

const SIZES: [&str; 6] = ["-D", "MS=128", "-D", "NS=128", "-D", "KS=128"];
/// Each parameter's range, as `--param` gives it.
const SPACE: [(&str, i64, i64, i64); 3] = [("NB", 32, 128, 32), ("MU", 1, 8, 1), ("NU", 1, 4, 1)];
const TRIALS: u64 = 6;

#[test]
fn optuna_drives_tdg_run_and_reports_the_least_time_of_its_trials() {
    // No time is compared with another: the trials run beside other light
    // tests, and what is asserted holds whatever the machine is doing.
    let _shared = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("blocked_gemm.spec");
    std::fs::write(
        &spec,
        std::fs::read_to_string(repo().join("specs/blocked_gemm.spec")).unwrap()
            + "timer={ min_time=5ms; max_time=20ms; };\n",
    )
    .unwrap();
    let kernel = repo().join("specs/blocked_gemm.c");
    let out = dir.path().join("optuna.json");
    let mut optuna = Command::new(tuners_python());
    optuna
        .arg(repo().join("examples/optuna_tune.py"))
        .arg(&spec)
        .arg("--impl")
        .arg(&kernel)
        .args(SIZES);
    for (name, lo, hi, step) in SPACE {
        optuna
            .arg("--param")
            .arg(format!("{name}={lo}:{hi}:{step}"));
    }
    optuna
        .args([
            "--trials",
            &TRIALS.to_string(),
            "--tdg",
            crate::support::TDG,
        ])
        .arg("--out")
        .arg(&out);
    let o = optuna.output().unwrap();
    assert!(
        o.status.success(),
        "the Optuna example failed: {}",
        stderr(&o)
    );
    let found: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(found["trials"].as_u64(), Some(TRIALS), "{found:#}");
    assert_eq!(found["failed"].as_u64(), Some(0), "{found:#}");
    let history = found["history"].as_array().unwrap();
    assert_eq!(history.len() as u64, TRIALS, "{found:#}");
    for t in history {
        for (name, lo, hi, step) in SPACE {
            let v = t["params"][name].as_i64().unwrap();
            assert!(
                (lo..=hi).contains(&v) && (v - lo) % step == 0,
                "{name}={v} is outside --param {name}={lo}:{hi}:{step}: {t}"
            );
        }
        let s = t["seconds"].as_f64().unwrap();
        assert!(s > 0.0 && s.is_finite(), "{t}");
    }
    let least = history
        .iter()
        .min_by(|a, b| {
            a["seconds"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["seconds"].as_f64().unwrap())
        })
        .unwrap();
    assert_eq!(found["best"], least["params"], "{found:#}");
    assert_eq!(found["best_s"], least["seconds"], "{found:#}");

    // The time is tdg's seconds per call: the same configuration run by
    // hand reads the same order of magnitude (a unit slip is 1000x).
    let mut args: Vec<String> = ["run", spec.to_str().unwrap(), "--impl"]
        .into_iter()
        .chain([kernel.to_str().unwrap(), "--cost-only"])
        .chain(SIZES)
        .map(String::from)
        .collect();
    for (name, value) in found["best"].as_object().unwrap() {
        args.extend(["-D".into(), format!("{name}={value}")]);
    }
    let o = tdg(&args, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let again: f64 = String::from_utf8(o.stdout).unwrap().trim().parse().unwrap();
    let ratio = again / found["best_s"].as_f64().unwrap();
    assert!(
        (0.1..10.0).contains(&ratio),
        "Optuna recorded {} s per call, tdg run reads {again} s",
        found["best_s"]
    );
}
