//! `tdg tune` with a categorical parameter end to end: `--param
//! PASSES=eightfold,once` names two variants of a vector sum; each name
//! reaches the compiled candidate both as the macro's value (the kernel
//! pastes it into the function it calls) and as its selector macro
//! (`PASSES_once`, which the kernel's `#error` demands), so a candidate
//! builds only if both arrive. The eightfold variant sums the vector
//! eight times: slower by far more than any host's noise. The outcome, the
//! log, the T4 file and a replay of it all carry the names.

use crate::support::tdg_command;
use std::path::Path;

const SPEC: &str = r#"routine=double vsum(const int N, const double* X) {
  double s = 0.0;
  for (int i = 0; i < N; i++)
    s += X[i];
  return s;
};
init={
  N=Macro(NS, 4096);
  X=Vector(double, RANDOM, warm|align(64), N);
};
returns(vsum);
flop="N";
"#;

const KERNEL: &str = r#"#if !defined(PASSES_once) && !defined(PASSES_eightfold)
#error "tune with --param PASSES=once,eightfold: PASSES_<name> selects the variant"
#endif

#define PASTE(a, b) a##b
#define VARIANT(a, b) PASTE(a, b)

static double sum_once(int n, const double *x) {
  double s = 0.0;
  for (int i = 0; i < n; i++)
    s += x[i];
  return s;
}

/* The same sum eight times over; the volatile keeps every pass. */
static double sum_eightfold(int n, const double *x) {
  volatile double s = 0.0;
  for (int pass = 0; pass < 8; pass++) {
    s = 0.0;
    for (int i = 0; i < n; i++)
      s += x[i];
  }
  return s;
}

double vsum(const int N, const double *X) { return VARIANT(sum_, PASSES)(N, X); }
"#;

fn tune(dir: &Path, args: &[&str]) -> std::process::Output {
    tdg_command()
        .env("TDG_CACHE_DIR", dir)
        .env("TDG_NO_PROBE", "1")
        .arg("tune")
        .args(args)
        .output()
        .unwrap()
}

fn ok(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn a_categorical_choice_is_tuned_end_to_end_and_replayed() {
    let _heavy = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("vsum.spec");
    let kernel = dir.path().join("vsum.c");
    std::fs::write(&spec, SPEC).unwrap();
    std::fs::write(&kernel, KERNEL).unwrap();
    let log = dir.path().join("tune.jsonl");
    let (spec_arg, kernel_arg, log_arg) = (
        spec.to_str().unwrap(),
        kernel.to_str().unwrap(),
        log.to_str().unwrap(),
    );
    let common = [
        spec_arg,
        "--impl",
        kernel_arg,
        "--param",
        "PASSES=eightfold,once",
        // Two configurations, both evaluated: no starting point to model.
        "--no-model",
        "--log",
        log_arg,
    ];
    let json: serde_json::Value =
        serde_json::from_str(&ok(&tune(dir.path(), &[&common[..], &["--json"]].concat()))).unwrap();
    assert_eq!(json["best"]["PASSES"], "once", "{json}");
    assert_eq!(json["evaluations"], 2, "{json}");
    assert_eq!(json["space_size"], 2, "{json}");
    let timed: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["phase"] != "final")
        .collect();
    let mut names: Vec<&str> = timed
        .iter()
        .map(|e| e["config"]["PASSES"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["eightfold", "once"], "{timed:?}");
    assert!(timed.iter().all(|e| e["time_ns"].is_f64()), "{timed:?}");

    // The text outcome names the flags that build the best.
    let text = ok(&tune(
        dir.path(),
        &[&common[..], &["--format", "table"]].concat(),
    ));
    assert!(text.contains("-DPASSES=once -DPASSES_once=1"), "{text}");

    // T4 carries the name; a replay of the file searches the same space.
    let t4 = dir.path().join("tune.t4.json");
    let t4_text = ok(&tune(
        dir.path(),
        &[&common[..], &["--format", "t4"]].concat(),
    ));
    assert!(t4_text.contains(r#""PASSES": "once""#), "{t4_text}");
    std::fs::write(&t4, &t4_text).unwrap();
    for (file, strategy) in [(&t4, "bayes"), (&log, "anneal"), (&t4, "multistart")] {
        let replayed: serde_json::Value = serde_json::from_str(&ok(&tune(
            dir.path(),
            &[
                "--replay",
                file.to_str().unwrap(),
                "--strategy",
                strategy,
                "--json",
                "--log",
                dir.path().join("replay.jsonl").to_str().unwrap(),
            ],
        )))
        .unwrap();
        assert_eq!(replayed["best"]["PASSES"], "once", "{strategy}: {replayed}");
        assert_eq!(replayed["space_size"], 2, "{replayed}");
    }

    // A name among integers is refused with one line saying why.
    let bad = tune(
        dir.path(),
        &[spec_arg, "--impl", kernel_arg, "--param", "PASSES=once,8"],
    );
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("`8` is an integer among names") && err.trim().lines().count() == 1,
        "{err}"
    );
}
