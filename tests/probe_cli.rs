//! `tdg probe` end to end: the first run measures and caches, the next one
//! reads the cache; `--json` and `--svg` carry the same result.

use std::process::Command;

fn tdg(cache: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tdg"));
    c.env("TDG_CACHE_DIR", cache).env_remove("XDG_CACHE_HOME");
    c
}

#[test]
fn probe_measures_once_then_reads_its_cache() {
    let dir = tempfile::tempdir().unwrap();
    let first = tdg(dir.path()).args(["probe", "--json"]).output().unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let measured: serde_json::Value =
        serde_json::from_slice(&first.stdout).expect("--json prints JSON");
    let cached_file = dir.path().join("probe.json");
    assert!(
        cached_file.exists(),
        "the result is cached under TDG_CACHE_DIR"
    );
    assert!(
        measured["caches"].as_array().unwrap().len() >= 2,
        "{measured}"
    );

    let svg = dir.path().join("curve.svg");
    let started = std::time::Instant::now();
    let second = tdg(dir.path())
        .arg("probe")
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(second.status.success());
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("cached"),
        "says it used the cache: {stderr}"
    );
    // Reading the cache takes no measuring; the probe itself takes seconds.
    assert!(started.elapsed().as_secs_f64() < measured["duration_s"].as_f64().unwrap());
    let table = String::from_utf8_lossy(&second.stdout);
    let l2 = measured["caches"][1]["effective_bytes"].as_u64().unwrap();
    assert!(
        table.contains("L2") && table.contains("documented"),
        "{table}"
    );
    assert!(
        table.contains(&format!("{} KiB", (l2 as f64 / 1024.0).round() as u64)) || l2 >= 1 << 20,
        "{table}"
    );
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.starts_with("<svg") && plot.contains("L2: "), "{plot}");

    let again = tdg(dir.path()).args(["probe", "--json"]).output().unwrap();
    let reread: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(reread, measured, "the cached result is the measured one");
}

#[test]
fn probe_rejects_a_nonsense_sweep_bound() {
    let dir = tempfile::tempdir().unwrap();
    let out = tdg(dir.path())
        .args(["probe", "--max-buffer-mib", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("max-buffer-mib"), "{err}");
    assert!(!dir.path().join("probe.json").exists());
}
