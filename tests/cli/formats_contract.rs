//! The one-evaluation contract end to end: each way a candidate can end has
//! its own exit status from `tdg run --cost-only` and its own T4
//! `invalidity` from `tdg tune --format t4`, and the T4 document validates
//! against the schema Kernel Tuner publishes.

use crate::formats_support::{support, tuners_python};
use crate::support::{stderr, tdg_env as tdg};
use std::path::Path;
use std::process::Command;
use testkit::repo;

/// One candidate of tests/formats_support/ddot_variants.c through
/// `tdg run --cost-only`, its variant given the way a pyATF-style tuner
/// does: in a `TDG_PARAM_` environment variable.
fn cost_only(variant: &str, extra: &[&str]) -> std::process::Output {
    let spec = repo().join("specs/dot.spec");
    let kernel = support("ddot_variants.c");
    let mut args = vec![
        "run",
        spec.to_str().unwrap(),
        "--impl",
        kernel.to_str().unwrap(),
        "-D",
        "NS=2000",
        "--samples",
        "3",
        "--timeout",
        "3",
        "--cost-only",
    ];
    args.extend_from_slice(extra);
    tdg(&args, &[("TDG_PARAM_VARIANT", variant)])
}

/// Validates a T4 document against the results schema Kernel Tuner ships,
/// with the validator Kernel Tuner itself uses.
fn validate_t4(document: &Path) -> std::process::Output {
    Command::new(tuners_python())
        .arg("-c")
        .arg(
            "import json, sys, pathlib, jsonschema, kernel_tuner\n\
             schema = pathlib.Path(kernel_tuner.__file__).parent / 'schema/T4/1.0.0/results-schema.json'\n\
             jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(schema)))",
        )
        .arg(document)
        .output()
        .unwrap()
}

#[test]
fn each_outcome_has_its_documented_exit_status() {
    let _heavy = testkit::shared();
    let ok = cost_only("1", &[]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let text = String::from_utf8(ok.stdout).unwrap();
    let seconds: f64 = text
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("not one number: {text:?}"));
    // 2000 multiply-adds take between a nanosecond and a millisecond.
    assert!(seconds > 1e-9 && seconds < 1e-3, "{seconds} s");
    assert_eq!(text.lines().count(), 1);

    for (variant, status, says) in [
        ("2", 3, "failed to compile"),
        ("3", 4, "crashed with SIGSEGV"),
        ("4", 6, "verification FAILED"),
        ("5", 5, "longer than 3 s"),
    ] {
        let o = cost_only(variant, &[]);
        assert_eq!(
            o.status.code(),
            Some(status),
            "VARIANT={variant}: {}",
            stderr(&o)
        );
        assert!(o.stdout.is_empty(), "VARIANT={variant} printed a cost");
        assert!(
            stderr(&o).contains(says),
            "VARIANT={variant}: {}",
            stderr(&o)
        );
    }
    // A -D on the command line wins over the environment.
    let o = cost_only("2", &["-D", "VARIANT=1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn usage_errors_exit_2_and_say_what_to_do() {
    let o = cost_only("1", &["-D", "9X=1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("C identifier"), "{}", stderr(&o));
    let o = cost_only("1", &["--flush-kb", "0,64"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.spec");
    std::fs::write(
        &bad,
        "routine=void f(int N) {};\ninit={ N=Macro(NS, 10) ;\n",
    )
    .unwrap();
    let o = tdg(
        &["run", bad.to_str().unwrap(), "--impl", "x.c", "--cost-only"],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // T4 is for tuning results; `tdg run` says so rather than writing half of it.
    let spec = repo().join("specs/dot.spec");
    let o = tdg(
        &[
            "run",
            spec.to_str().unwrap(),
            "--impl",
            "x.c",
            "--format",
            "t4",
        ],
        &[],
    );
    // `tdg run` offers only the formats it writes: the argument parser
    // refuses t4 (tuning results) and lists them.
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("[possible values: table, json, csv, gbench]"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn t4_results_validate_and_name_every_failure() {
    let _heavy = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results.json");
    let log = dir.path().join("tune.jsonl");
    let spec = repo().join("specs/dot.spec");
    let kernel = support("ddot_variants.c");
    let o = tdg(
        &[
            "tune",
            spec.to_str().unwrap(),
            "--impl",
            kernel.to_str().unwrap(),
            "-D",
            "NS=2000",
            "--param",
            "VARIANT=1:5",
            "--exhaustive",
            "--samples",
            "3",
            "--timeout",
            "3",
            "--format",
            "t4",
            "--out",
            out.to_str().unwrap(),
            "--log",
            log.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(o.stdout.is_empty(), "--out leaves stdout empty");
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();

    let results = doc["results"].as_array().unwrap();
    let by_variant = |v: i64| {
        results
            .iter()
            .find(|r| r["configuration"]["VARIANT"] == v)
            .unwrap_or_else(|| panic!("VARIANT={v} missing from {doc}"))
    };
    for (v, invalidity) in [
        (1, "correct"),
        (2, "compile"),
        (3, "runtime"),
        (4, "correctness"),
        (5, "timeout"),
    ] {
        let r = by_variant(v);
        assert_eq!(r["invalidity"], invalidity, "VARIANT={v}: {r}");
        assert_eq!(r["correctness"], i64::from(v == 1), "VARIANT={v}: {r}");
    }
    let good = by_variant(1);
    assert_eq!(good["times"]["runtimes"].as_array().unwrap().len(), 3);
    let runtimes: Vec<f64> = good["times"]["runtimes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let time = &good["measurements"][0];
    assert_eq!(time["name"], "time");
    let reported = time["value"].as_f64().unwrap();
    assert!(
        runtimes.contains(&reported),
        "{reported} not among {runtimes:?}"
    );
    // Three samples are too few for the driver to state an uncertainty
    // (it compares the halves of the run), so T4 gets none rather than a
    // made-up one; formats::t4's unit test covers the measurement itself.
    assert!(
        !good["measurements"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "time_uncertainty"),
        "{good}"
    );

    let check = validate_t4(&out);
    assert!(
        check.status.success(),
        "T4 output does not validate: {}",
        stderr(&check)
    );
}

#[test]
fn the_schema_check_rejects_a_document_that_breaks_it() {
    // The validation above would prove nothing if it accepted anything.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"schema_version": "1.0.0", "results": [{"configuration": {}, "times": {}, "invalidity": "crashed", "correctness": 0}]}"#,
    )
    .unwrap();
    let check = validate_t4(&bad);
    assert!(!check.status.success());
    assert!(stderr(&check).contains("crashed"), "{}", stderr(&check));
}

/// The recorded search spaces (tune/spaces/, stored compact) are still T4
/// documents Kernel Tuner's tooling reads.
#[test]
fn the_recorded_spaces_validate_as_t4() {
    let spaces: Vec<_> = std::fs::read_dir(repo().join("tune/spaces"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".t4.json"))
        .collect();
    assert!(spaces.len() >= 5, "tune/spaces holds {spaces:?}");
    for space in spaces {
        let check = validate_t4(&space);
        assert!(
            check.status.success(),
            "{}: {}",
            space.display(),
            String::from_utf8_lossy(&check.stderr)
        );
    }
}
