//! The recorded search spaces of tune/spaces/ are usable as the objective
//! of replayed searches: each is a whole exhaustive campaign of at least
//! 400 valid configurations of its kernel's macros, every entry a time with
//! its samples, the space steep enough that a search can be told from a
//! random pick, and the README's table of spreads says what the files hold.
//! Reads only the committed files: deterministic.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The recorded spaces; each is `tune/spaces/NAME.t4.json`, recorded from
/// `specs/NAME.{spec,c}`.
const SPACES: &[&str] = &[
    "blocked_gemm",
    "tiled_matmul",
    "blocked_stencil",
    "unrolled_dot",
    "hybrid_sort",
];

/// Issue 36: every recorded space holds at least this many configurations.
const LEAST_CONFIGURATIONS: usize = 400;

/// The median configuration at least this much slower than the best: on a
/// flatter space a random pick is as good as a search, and no strategy can
/// be measured on it.
const LEAST_MEDIAN_OVER_BEST: f64 = 1.25;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("spaces")
}

fn specs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs")
}

type Configuration = BTreeMap<String, i64>;

/// One configuration that built, verified and was timed.
struct Timed {
    configuration: Configuration,
    time_s: f64,
}

/// What a file holds, with everything a replay relies on checked.
struct Space {
    timed: Vec<Timed>,
    entries: usize,
}

fn measurement(entry: &Value, name: &str) -> Option<f64> {
    entry["measurements"]
        .as_array()?
        .iter()
        .find(|m| m["name"] == name)?["value"]
        .as_f64()
}

fn load(name: &str) -> Space {
    let path = dir().join(format!("{name}.t4.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (tune/spaces/record {name})", path.display()));
    let doc: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(doc["schema_version"], "1.0.0", "{name}: T4 1.0.0");
    let results = doc["results"]
        .as_array()
        .unwrap_or_else(|| panic!("{name}: no results array"));
    let kernel = std::fs::read_to_string(specs().join(format!("{name}.c"))).unwrap();
    let mut names: Option<BTreeSet<String>> = None;
    let mut seen = BTreeSet::new();
    let mut timed = Vec::new();
    for (i, entry) in results.iter().enumerate() {
        let configuration: Configuration = entry["configuration"]
            .as_object()
            .unwrap_or_else(|| panic!("{name}: entry {i} has no configuration"))
            .iter()
            .map(|(k, v)| {
                let v = v
                    .as_i64()
                    .unwrap_or_else(|| panic!("{name}: entry {i}: {k}={v} is not an integer"));
                (k.clone(), v)
            })
            .collect();
        let keys: BTreeSet<String> = configuration.keys().cloned().collect();
        match &names {
            None => {
                for k in &keys {
                    assert!(
                        kernel.contains(&format!("#ifndef {k}\n")),
                        "{name}: parameter {k} is not a macro of specs/{name}.c"
                    );
                }
                names = Some(keys);
            }
            Some(first) => assert_eq!(first, &keys, "{name}: entry {i} has other parameters"),
        }
        assert!(
            seen.insert(configuration.clone()),
            "{name}: {configuration:?} recorded twice"
        );
        if entry["invalidity"] != "correct" {
            continue;
        }
        assert_eq!(entry["correctness"], 1, "{name}: entry {i}");
        let time_s =
            measurement(entry, "time").unwrap_or_else(|| panic!("{name}: entry {i} has no time"));
        assert!(
            time_s.is_finite() && time_s > 0.0,
            "{name}: entry {i}: time {time_s}"
        );
        let runtimes: Vec<f64> = entry["times"]["runtimes"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: entry {i} has no runtimes"))
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert!(
            runtimes.len() >= 3 && runtimes.iter().all(|t| t.is_finite() && *t > 0.0),
            "{name}: entry {i}: runtimes {runtimes:?}"
        );
        // The figure is the least sample (the min estimator over every
        // pass), so a replay drawing from the samples sees the same best.
        let least = runtimes.iter().copied().fold(f64::INFINITY, f64::min);
        assert_eq!(
            time_s, least,
            "{name}: entry {i}: time is not its least sample"
        );
        let uncertainty = measurement(entry, "time_uncertainty")
            .unwrap_or_else(|| panic!("{name}: entry {i} has no time_uncertainty"));
        assert!(
            uncertainty >= 0.0,
            "{name}: entry {i}: uncertainty {uncertainty}"
        );
        timed.push(Timed {
            configuration,
            time_s,
        });
    }
    Space {
        timed,
        entries: results.len(),
    }
}

/// The figures the README's table states for a space, computed.
struct Spread {
    configurations: usize,
    best: Configuration,
    best_s: f64,
    median_over_best: f64,
    worst_over_best: f64,
    within_5_pct: usize,
}

fn spread(space: &Space) -> Spread {
    let times: Vec<f64> = space.timed.iter().map(|t| t.time_s).collect();
    let summary = stats::Summary::of(&times).expect("timed configurations");
    let best = space
        .timed
        .iter()
        .min_by(|a, b| a.time_s.total_cmp(&b.time_s))
        .unwrap();
    Spread {
        configurations: times.len(),
        best: best.configuration.clone(),
        best_s: summary.min,
        median_over_best: summary.median / summary.min,
        worst_over_best: summary.max / summary.min,
        within_5_pct: times.iter().filter(|&&t| t <= 1.05 * summary.min).count(),
    }
}

#[test]
fn every_space_is_a_whole_campaign_of_at_least_400_valid_configurations() {
    for name in SPACES {
        let space = load(name);
        assert_eq!(
            space.timed.len(),
            space.entries,
            "{name}: every configuration of a recorded space built, verified and was timed"
        );
        assert!(
            space.timed.len() >= LEAST_CONFIGURATIONS,
            "{name}: {} valid configurations, fewer than {LEAST_CONFIGURATIONS}",
            space.timed.len()
        );
        let s = spread(&space);
        assert!(
            s.median_over_best >= LEAST_MEDIAN_OVER_BEST,
            "{name}: the median configuration is only {:.3} x the best: too flat to tell a search from a random pick",
            s.median_over_best
        );
    }
}

#[test]
fn every_file_in_the_directory_is_a_listed_space() {
    let files: BTreeSet<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|f| f.strip_suffix(".t4.json").map(str::to_string))
        .collect();
    let listed: BTreeSet<String> = SPACES.iter().map(|s| s.to_string()).collect();
    assert_eq!(files, listed, "tune/spaces/*.t4.json against SPACES");
    for name in SPACES {
        for ext in ["spec", "c"] {
            assert!(
                specs().join(format!("{name}.{ext}")).exists(),
                "{name}: specs/{name}.{ext} is gone"
            );
        }
    }
}

/// The README's row for `name` in its table of spreads, as its cells.
fn readme_row(readme: &str, name: &str) -> Vec<String> {
    let table = readme
        .split("## Spreads")
        .nth(1)
        .expect("README.md has a section `## Spreads`");
    let prefix = format!("| {name} |");
    let line = table
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("README.md's spreads table has no row for {name}"));
    line.trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_string())
        .collect()
}

#[test]
fn the_readme_states_each_spaces_spread_as_the_file_holds_it() {
    let readme = std::fs::read_to_string(dir().join("README.md")).unwrap();
    for name in SPACES {
        let s = spread(&load(name));
        let row = readme_row(&readme, name);
        let best: Configuration = row[2]
            .split_whitespace()
            .map(|kv| {
                let (k, v) = kv.split_once('=').expect("NAME=VALUE");
                (k.to_string(), v.parse().unwrap())
            })
            .collect();
        let computed = vec![
            name.to_string(),
            s.configurations.to_string(),
            row[2].clone(),
            stats::ns(s.best_s * 1e9),
            format!("{:.2}", s.median_over_best),
            format!("{:.1}", s.worst_over_best),
            s.within_5_pct.to_string(),
        ];
        assert_eq!(
            best, s.best,
            "{name}: README's best configuration against the file's"
        );
        assert_eq!(
            row, computed,
            "{name}: README.md's row (space, configurations, best, best time, median/best, worst/best, within 5 %) against the file"
        );
    }
}
