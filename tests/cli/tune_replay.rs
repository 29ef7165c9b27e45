//! `tdg tune --replay`: a recorded space (tune/spaces/hybrid_sort.t4.json,
//! a real exhaustive campaign) searched with its recorded times as the
//! objective; no compiler runs, so the whole command takes milliseconds
//! and its results are deterministic.

use crate::support::tdg;
use std::path::{Path, PathBuf};
use testkit::repo;

fn space() -> PathBuf {
    repo().join("tune/spaces/hybrid_sort.t4.json")
}

fn replay(log: &Path, extra: &[&str]) -> std::process::Output {
    let mut args: Vec<String> = vec![
        "tune".into(),
        "--replay".into(),
        space().display().to_string(),
        "--log".into(),
        log.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    tdg(&args)
}

/// The configurations a log evaluated, in order (not the final re-timing).
fn evaluated(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["phase"] != "final")
        .map(|e| e["config"].to_string())
        .collect()
}

#[test]
fn tune_replay_searches_a_recorded_space_seeded_with_a_live_searchs_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("a.jsonl");
    let out = replay(&log, &["--budget", "30", "--seed", "3", "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Without --strategy and without a machine model: the model-free default.
    assert_eq!(json["strategy"], "bayes", "{json}");
    assert_eq!(json["evaluations"], 30);
    assert_eq!(json["space_size"], 468);
    let best = json["best"].as_object().unwrap();
    let mut names: Vec<&str> = best.keys().map(|k| k.as_str()).collect();
    names.sort();
    assert_eq!(names, ["ALGO", "BITS", "CUTOFF", "SWITCH"]);
    // The best's time is the one the file recorded for it.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(space()).unwrap()).unwrap();
    let recorded = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["configuration"].as_object() == Some(best))
        .expect("the best is a recorded configuration");
    let seconds = recorded["measurements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "time")
        .unwrap();
    assert_eq!(seconds["unit"], "s");
    let recorded_ns = seconds["value"].as_f64().unwrap() * 1e9;
    let best_ns = json["best_ns"].as_f64().unwrap();
    assert!(
        (best_ns / recorded_ns - 1.0).abs() < 1e-9,
        "{best_ns} against {recorded_ns}"
    );
    let first = evaluated(&log);
    assert_eq!(first.len(), 30);

    // The same seed, the same search; another seed, another.
    let again = dir.path().join("b.jsonl");
    assert!(replay(&again, &["--budget", "30", "--seed", "3"])
        .status
        .success());
    assert_eq!(evaluated(&again), first);
    let other = dir.path().join("c.jsonl");
    assert!(replay(&other, &["--budget", "30", "--seed", "4"])
        .status
        .success());
    assert_ne!(evaluated(&other), first);

    // Text: the best and the -D flags to build it with.
    let out = replay(
        &dir.path().join("d.jsonl"),
        &["--budget", "30", "--strategy", "random"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("build with   -DALGO="),
        "{text}"
    );
    assert!(text.contains("strategy random"), "{text}");
}

#[test]
fn tune_replay_of_a_file_that_records_no_space_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("notes.txt");
    std::fs::write(&bad, "not a results file\n").unwrap();
    let out = tdg(&[
        "tune",
        "--replay",
        bad.to_str().unwrap(),
        "--log",
        dir.path().join("x.jsonl").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let error: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(error.len(), 1, "{err}");
    assert!(error[0].contains("give a T4 results file"), "{err}");
    // Read before anything is written: no log left behind.
    assert!(!dir.path().join("x.jsonl").exists());
}
