//! The profile -> spec -> prediction pipeline from the command line:
//! `tdg profile` interposes a shared-library routine in an unmodified host
//! program, `tdg spec-from-profile` turns the profile into a spec and a
//! contexts file, and `tdg run --contexts` times the heaviest contexts with
//! the generated driver and predicts the program's total time in the routine.

use crate::instrument_support::build_host_with_shared_kernel;
use std::path::Path;
use std::process::Output;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn tdg(dir: &Path, args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    crate::support::tdg_in(args, dir)
}

fn ok(o: &Output) -> String {
    let (so, se) = crate::support::text(o);
    assert!(o.status.success(), "{so}{se}");
    so
}

/// A host program that calls `ddot` from a shared library in two contexts:
/// 3000 short vectors and 200 long ones.
const HOST: &str = r#"
#include <stdio.h>
#include <stdlib.h>
double ddot(const int N, const double *X, const double *Y);
int main(void)
{
    int n = 200000, i;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), s = 0;
    for (i = 0; i < n; i++) { x[i] = (i % 7) - 3; y[i] = (i % 5) - 2; }
    for (i = 0; i < 3000; i++) s += ddot(1000, x + (i % 64), y);
    for (i = 0; i < 200; i++) s += ddot(100000, x, y + (i % 64));
    printf("%g\n", s);
    return 0;
}
"#;

#[test]
fn contexts_prediction_from_a_real_profile() {
    let _alone = testkit::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let host = build_host_with_shared_kernel(d, &Path::new(ROOT).join("specs/dot.c"), HOST);
    let spec = Path::new(ROOT).join("specs/dot.spec");

    ok(&tdg(
        d,
        &[
            &"profile",
            &"--spec",
            &spec,
            &"-o",
            &"dot.tdgp",
            &"--",
            &host,
        ],
    ));
    ok(&tdg(
        d,
        &[
            &"spec-from-profile",
            &"dot.tdgp",
            &"--spec",
            &spec,
            &"-o",
            &"dot.profiled.spec",
            &"--contexts",
            &"dot.contexts.json",
        ],
    ));
    let contexts: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("dot.contexts.json")).unwrap())
            .unwrap();
    assert_eq!(contexts["calls"], 3200, "{contexts}");

    let so = ok(&tdg(
        d,
        &[
            &"run",
            &"dot.profiled.spec",
            &"--impl",
            &Path::new(ROOT).join("specs/dot.c"),
            &"--contexts",
            &"dot.contexts.json",
            &"--top",
            &"2",
            &"--samples",
            &"3",
            &"--json",
        ],
    ));
    let p: serde_json::Value = serde_json::from_str(&so).unwrap_or_else(|e| panic!("{e}: {so}"));
    let rows = p["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{p}");
    let row = |n: &str| {
        rows.iter()
            .find(|r| {
                r["label"]
                    .as_str()
                    .unwrap()
                    .split(", ")
                    .any(|kv| kv == format!("N={n}"))
            })
            .unwrap_or_else(|| panic!("no N={n} context in {p}"))
    };
    let (short, long) = (row("1000"), row("100000"));
    assert_eq!(short["calls"], 3000);
    assert_eq!(long["calls"], 200);
    // The driver really ran each context at its own size: 100x the work
    // takes far more than 10x the time per call.
    let per_call = |r: &serde_json::Value| r["driver_ns_per_call"].as_f64().unwrap();
    assert!(
        per_call(long) > 10.0 * per_call(short),
        "short {} ns, long {} ns",
        per_call(short),
        per_call(long)
    );
    // The prediction is calls x driver time, summed, against the profile's
    // own total for the same contexts.
    let predicted: f64 = rows
        .iter()
        .map(|r| per_call(r) * r["calls"].as_f64().unwrap())
        .sum();
    let p_ns = p["predicted_ns"].as_f64().unwrap();
    assert!((p_ns - predicted).abs() <= 1e-6 * predicted, "{p}");
    let measured = p["measured_ns"].as_f64().unwrap();
    assert!(measured > 0.0);
    let error = p["error"].as_f64().unwrap();
    assert!(((p_ns - measured) / measured - error).abs() < 1e-9, "{p}");
    assert!(p["coverage"].as_f64().unwrap() > 0.99, "{p}");
}

#[test]
fn run_without_an_implementation_says_what_is_missing() {
    // The paper's GEMM spec is a bare prototype: no body to run instead.
    let dir = tempfile::tempdir().unwrap();
    let o = tdg(
        dir.path(),
        &[&"run", &Path::new(ROOT).join("specs/gemm.spec")],
    );
    assert!(!o.status.success());
    let se = String::from_utf8_lossy(&o.stderr);
    assert!(
        se.contains("--impl FILE is required") && se.contains("ATL_USERMM"),
        "{se}"
    );
}
