//! `tdg run --format gbench` read by Google Benchmark's own compare.py
//! (Debian's libbenchmark-tools): two implementations of one spec, timed
//! by tdg, compared by the tool, which must name the faster one either way
//! round. Run under the timing lock (it times).

use crate::formats_support::support;
use crate::support::{stderr, tdg_env as tdg};
use std::path::Path;
use std::process::Command;
use testkit::repo;

const COMPARE_PY: &str = "/usr/share/benchmark/compare.py";

/// Times `kernel` on specs/dot.spec with x and y in cache, as gbench JSON.
fn gbench_run(kernel: &Path, out: &Path) -> serde_json::Value {
    let spec = repo().join("specs/dot.spec");
    let o = tdg(
        &[
            "run",
            spec.to_str().unwrap(),
            "--impl",
            kernel.to_str().unwrap(),
            "-D",
            "NS=4096",
            "--flush",
            "none",
            "--samples",
            "15",
            "--format",
            "gbench",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(o.stdout.is_empty(), "--out leaves stdout empty");
    serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap()
}

/// compare.py's verdict on the median: relative time change from `a` to `b`
/// and the U test's p-value, from its JSON dump.
fn compare(a: &Path, b: &Path, dir: &Path) -> (f64, f64, String) {
    assert!(
        Path::new(COMPARE_PY).is_file(),
        "{COMPARE_PY} is missing: run scripts/setup (step 70-tuners.sh installs libbenchmark-tools)"
    );
    let dump = dir.join("compare.json");
    // Debian's interpreter: its python3-scipy is what compare.py imports.
    let o = Command::new("/usr/bin/python3")
        .arg(COMPARE_PY)
        .args(["--no-color", "-a", "-d"])
        .arg(&dump)
        .arg("benchmarks")
        .args([a, b])
        .output()
        .unwrap();
    assert!(o.status.success(), "compare.py failed: {}", stderr(&o));
    let printed = String::from_utf8_lossy(&o.stdout).into_owned();
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&dump).unwrap()).unwrap();
    let median = rows
        .iter()
        .find(|r| r["name"] == "ddot/NS:4096_median")
        .unwrap_or_else(|| panic!("no median row in {printed}"));
    let change = median["measurements"][0]["time"].as_f64().unwrap();
    let repeated = rows.iter().find(|r| r["name"] == "ddot/NS:4096").unwrap();
    let p = repeated["utest"]["time_pvalue"].as_f64().unwrap();
    (change, p, printed)
}

#[test]
fn compare_py_names_the_faster_implementation() {
    let _alone = testkit::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let eight_sums = dir.path().join("eight_sums.json");
    let kahan = dir.path().join("kahan.json");
    let fast = gbench_run(&repo().join("specs/dot.c"), &eight_sums);
    gbench_run(&support("ddot_kahan.c"), &kahan);

    // What Google Benchmark's readers rely on, and tdg's own fields.
    let context = &fast["context"];
    for field in [
        "date",
        "host_name",
        "executable",
        "num_cpus",
        "mhz_per_cpu",
        "cpu_scaling_enabled",
        "caches",
        "load_avg",
    ] {
        assert!(
            !context[field].is_null(),
            "context.{field} missing: {context}"
        );
    }
    assert_eq!(context["tdg_spec_sha256"].as_str().unwrap().len(), 64);
    assert_eq!(context["tdg_flush"], "none");
    let benchmarks = fast["benchmarks"].as_array().unwrap();
    let repetitions: Vec<_> = benchmarks
        .iter()
        .filter(|b| b["run_type"] == "iteration")
        .collect();
    assert_eq!(repetitions.len(), 15, "one repetition per sample");
    let reported = benchmarks
        .iter()
        .find(|b| b["tdg_reported"] == true)
        .unwrap();
    assert_eq!(reported["tdg_samples_ns"].as_array().unwrap().len(), 15);
    assert!(reported["MFLOPS"].as_f64().unwrap() > 0.0);
    // The run's stated uncertainty rides along as a counter.
    assert!(
        reported["uncertainty_pct"].as_f64().unwrap() >= 0.0,
        "{reported}"
    );
    assert!(reported["tdg_stable"].is_boolean(), "{reported}");

    // Kahan summation's dependent chain is several times slower than eight
    // independent sums; compare.py must see it, significantly, both ways.
    let (change, p, printed) = compare(&eight_sums, &kahan, dir.path());
    assert!(
        change > 0.5,
        "compare.py says the Kahan sum is {change:+.2} slower:\n{printed}"
    );
    assert!(p < 0.05, "U test p = {p}:\n{printed}");
    let (change, _, printed) = compare(&kahan, &eight_sums, dir.path());
    assert!(
        change < -0.3,
        "reversed, compare.py says {change:+.2}:\n{printed}"
    );
    eprintln!("{printed}");
}
