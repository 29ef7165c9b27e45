//! `tdg tune --executor slurm` on a real single-node Slurm cluster
//! (scripts/slurm-cluster), with a kernel whose cost is a fixed function of
//! its macros (tests/tune_slurm_support/cost.c): every run of the search
//! takes the same path, so the executors can be compared evaluation by
//! evaluation, and faults are injected by the kernel killing its task.
//!
//! The kernel spends its cost in CPU time and its spec times CPU time, so
//! a neighbour on the CPUs cannot stretch a figure (three busy processes
//! on the two CPUs moved none by 0.5 %): these tests hold
//! `testkit::shared`, not `exclusive`, and run beside the suite's other
//! heavy tests. Most of their time is Slurm starting one array task a
//! second, which needs no quiet machine.

use crate::support::tdg_command;
use crate::tune_slurm_support::Cluster;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn support(name: &str) -> PathBuf {
    testkit::repo().join("tests/tune_slurm_support").join(name)
}

/// How every figure in these tests is timed: the spin kernel needs no flush,
/// and its fixed CPU-time cost makes three samples enough.
const TIMING: [&str; 4] = ["--flush", "none", "--samples", "3"];

/// The search over P x Q (R fixed): from the mid-range start P=2 Q=2 it
/// needs several rounds, one with four configurations, to reach P=1 Q=3.
fn tune(dir: &Path, args: &[&str]) -> Command {
    let mut c = tdg_command();
    c.current_dir(dir)
        .env("TDG_NO_PROBE", "1")
        .env("TDG_TEST_TALLY", dir.join("tally"))
        .arg("tune")
        .arg(support("cost.spec"))
        .arg("--impl")
        .arg(support("cost.c"))
        .args(["--param", "P=1:3", "--param", "Q=1:3", "--param", "R=1"])
        .arg("--no-model")
        // The executors' mechanics are under test: the hill-climb's several
        // rounds from the mid-range start, whatever the default strategy is.
        .args(["--strategy", "hill"])
        .args(TIMING)
        .arg("--json")
        .args(args);
    c
}

/// A campaign on the test cluster whose array tasks share its one node, two
/// at a time: Slurm starts about one task a second per free slot, and the
/// kernel's CPU-time cost is the same beside a neighbour, so sharing cuts
/// a campaign from 8.3 s to 5.3 s and changes no figure. The executor's own
/// `--exclusive` (no two timings on one node) is what
/// [`slurm_whole_node`] submits and the killed-task test checks.
fn slurm(cluster: &Cluster, dir: &Path, args: &[&str]) -> Command {
    let mut c = slurm_whole_node(cluster, dir, args);
    c.arg("--sbatch-option=--oversubscribe");
    c
}

fn slurm_whole_node(cluster: &Cluster, dir: &Path, args: &[&str]) -> Command {
    let mut c = tune(dir, &["--executor", "slurm", "--campaign"]);
    c.arg(dir.join("campaign"))
        .args(args)
        .env("SLURM_CONF", &cluster.conf);
    c
}

fn ok(out: Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "tdg tune failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The search's evaluations in the log, without the finalists' side-by-side
/// re-timing (phase "final"), which re-times configurations already counted.
fn log(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["phase"] != "final")
        .collect()
}

fn config(line: &serde_json::Value) -> String {
    let c = &line["config"];
    format!("P={} Q={} R={}", c["P"], c["Q"], c["R"])
}

/// How many driver processes each configuration started.
fn tally(dir: &Path) -> BTreeMap<String, usize> {
    let mut t = BTreeMap::new();
    for l in std::fs::read_to_string(dir.join("tally"))
        .unwrap_or_default()
        .lines()
    {
        *t.entry(l.to_string()).or_default() += 1;
    }
    t
}

/// Sizes of the job arrays the campaign submitted, in order.
fn rounds(campaign: &Path) -> Vec<usize> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(campaign.join("rounds"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    dirs.iter()
        .map(|d| {
            let tasks: Vec<serde_json::Value> =
                serde_json::from_str(&std::fs::read_to_string(d.join("tasks.json")).unwrap())
                    .unwrap();
            tasks.len()
        })
        .collect()
}

/// The local and the Slurm figure of one configuration agree within 2 %.
/// When they do not, the configuration is timed again here: the spin
/// kernel's cost is CPU time, which a neighbour can add to (the switches
/// and cold caches it causes are charged to the kernel) but never take
/// from, so the slower figure is excused when the faster one is what the
/// configuration costs now. A result
/// stored under a cheaper configuration is the faster figure and still
/// fails; one stored under a dearer configuration leaves that
/// configuration's own pair with a faster figure that fails.
fn assert_same_cost(config: &serde_json::Value, local_ns: f64, slurm_ns: f64) {
    let (fast, slow) = (local_ns.min(slurm_ns), local_ns.max(slurm_ns));
    if slow / fast < 1.02 {
        return;
    }
    let defines: Vec<String> = ["P", "Q", "R"]
        .iter()
        .flat_map(|k| ["-D".to_string(), format!("{k}={}", config[k])])
        .collect();
    let again = (0..3)
        .map(|_| {
            let out = tdg_command()
                .env("TDG_NO_PROBE", "1")
                .arg("run")
                .arg(support("cost.spec"))
                .arg("--impl")
                .arg(support("cost.c"))
                .args(&defines)
                .args(TIMING)
                .arg("--json")
                .output()
                .unwrap();
            ok(out)["reported_ns"].as_f64().unwrap()
        })
        .fold(f64::INFINITY, f64::min);
    assert!(
        (fast / again - 1.0).abs() < 0.02,
        "{}: local {local_ns} ns, slurm {slurm_ns} ns, timed again {again} ns",
        defines.join(" ")
    );
    eprintln!(
        "{}: local {local_ns} ns, slurm {slurm_ns} ns; timed again {again} ns: the slower figure was disturbed",
        defines.join(" ")
    );
}

#[test]
fn local_and_slurm_evaluate_the_same_configurations_in_the_same_order() {
    let _beside = testkit::shared();
    let here = tempfile::tempdir().unwrap();
    let there = tempfile::tempdir().unwrap();
    // The local campaign runs before the cluster starts: the daemons' own
    // start-up work would land inside its timings.
    let local = ok(tune(here.path(), &["--log", "local.jsonl"])
        .output()
        .unwrap());
    let Some(cluster) = Cluster::shared() else {
        return;
    };
    let remote = ok(slurm(cluster, there.path(), &[]).output().unwrap());
    assert_eq!(local["best_description"], "P=1 Q=3 R=1");
    assert_eq!(remote["best_description"], "P=1 Q=3 R=1");
    let a = log(&here.path().join("local.jsonl"));
    let b = log(&there.path().join("campaign/tune.jsonl"));
    assert!(a.len() >= 6, "the search should take several rounds: {a:?}");
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(
            (x["n"].clone(), x["phase"].clone(), config(x)),
            (y["n"].clone(), y["phase"].clone(), config(y))
        );
        // Costs differ by 5 % or more between configurations: a result
        // stored under the wrong configuration cannot pass this.
        let (tx, ty) = (
            x["time_ns"].as_f64().unwrap(),
            y["time_ns"].as_f64().unwrap(),
        );
        assert_same_cost(&x["config"], tx, ty);
        assert!(
            !y["node"].as_str().unwrap().is_empty() && !y["cpu"].as_str().unwrap().is_empty(),
            "{y}"
        );
    }
    // Rounds went to the cluster together: the starts, then neighbourhoods.
    let sizes = rounds(&there.path().join("campaign"));
    assert_eq!(sizes.iter().sum::<usize>(), b.len(), "{sizes:?}");
    assert!(sizes.iter().any(|&n| n >= 3), "{sizes:?}");
    // Each configuration the search evaluated ran, and on the cluster in
    // one task each. The local executor times a round in interleaved passes
    // and re-times the finalists side by side, so a configuration runs
    // there in one process per pass.
    let evaluated: std::collections::BTreeSet<String> = a.iter().map(config).collect();
    let local = tally(here.path());
    assert_eq!(
        local
            .keys()
            .cloned()
            .collect::<std::collections::BTreeSet<_>>(),
        evaluated,
        "{local:?}"
    );
    let remote = tally(there.path());
    assert_eq!(remote.len(), a.len(), "{remote:?}");
    assert!(remote.values().all(|&n| n == 1), "{remote:?}");
}

#[test]
fn a_killed_task_is_retried_and_one_that_dies_twice_is_recorded_failed() {
    let _beside = testkit::shared();
    let Some(cluster) = Cluster::shared() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // Both are in the start's neighbourhood: P=1 Q=2 improves on the start
    // (the search must get its time to go on the same way), P=3 Q=2 does not.
    // Settings from a file reach sbatch (checked on the job below).
    let settings = dir.path().join("cluster.toml");
    std::fs::write(&settings, "partition = \"tdg\"\ntime_limit = \"7:00\"\n").unwrap();
    let out = slurm_whole_node(
        cluster,
        dir.path(),
        &["--slurm-config", settings.to_str().unwrap()],
    )
    .env("TDG_TEST_KILL_ONCE", "P=1 Q=2 R=1")
    .env("TDG_TEST_KILL_MARK", dir.path().join("killed-once"))
    .env("TDG_TEST_KILL_ALWAYS", "P=3 Q=2 R=1")
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let o = ok(out);
    assert!(dir.path().join("killed-once").exists());
    assert_eq!(o["best_description"], "P=1 Q=3 R=1");
    assert_eq!(o["failed"], 1, "{o}");
    assert!(
        stderr.contains("ended without a result; retrying once"),
        "{stderr}"
    );
    let lines = log(&dir.path().join("campaign/tune.jsonl"));
    let line = |c: &str| lines.iter().find(|l| config(l) == c).unwrap().clone();
    assert!(line("P=1 Q=2 R=1")["time_ns"].as_f64().is_some());
    let failed = line("P=3 Q=2 R=1");
    let why = failed["error"].as_str().unwrap();
    assert!(
        failed["time_ns"].is_null() && why.contains("failed twice") && why.contains("FAILED"),
        "{failed}"
    );
    let t = tally(dir.path());
    assert_eq!(t["P=1 Q=2 R=1"], 2, "{t:?}");
    assert_eq!(t["P=3 Q=2 R=1"], 2, "{t:?}");
    let others = t
        .iter()
        .filter(|(c, _)| !["P=1 Q=2 R=1", "P=3 Q=2 R=1"].contains(&c.as_str()));
    assert!(others.clone().all(|(_, &n)| n == 1), "{t:?}");
    assert!(others.count() >= 4, "{t:?}");
    // The retry was a job of its own holding just the two lost tasks.
    assert!(rounds(&dir.path().join("campaign")).contains(&2));
    let job = std::fs::read_to_string(dir.path().join("campaign/rounds/0001/job")).unwrap();
    let shown = cluster
        .command("scontrol")
        .args(["-o", "show", "job", job.trim()])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("Partition=tdg")
            && shown.contains("TimeLimit=00:07:00")
            && shown.contains("OverSubscribe=NO"),
        "{shown}"
    );
}

/// Nodes without a compiler: the tasks of a `--build-once` campaign only
/// run the drivers tdg built before submitting, while without it every
/// task must build its own and fails.
#[test]
fn build_once_campaigns_run_on_nodes_without_a_compiler() {
    let _beside = testkit::shared();
    let Some(cluster) = Cluster::shared() else {
        return;
    };
    let no_compiler = "--sbatch-option=--export=ALL,PATH=/nonexistent";
    let dir = tempfile::tempdir().unwrap();
    let o = ok(slurm(
        cluster,
        dir.path(),
        // The start alone, then its neighbourhood: two rounds.
        &[
            no_compiler,
            "--identical-nodes",
            "--build-once",
            "--budget",
            "5",
        ],
    )
    .output()
    .unwrap());
    assert_eq!(o["failed"], 0, "{o}");
    let lines = log(&dir.path().join("campaign/tune.jsonl"));
    let kept = std::fs::read_dir(dir.path().join("campaign/builds"))
        .unwrap()
        .count();
    assert_eq!(kept, lines.len(), "one kept build per evaluation");
    assert_eq!(tally(dir.path()).len(), lines.len());

    let dir = tempfile::tempdir().unwrap();
    let out = slurm(cluster, dir.path(), &[no_compiler, "--identical-nodes"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a task found a compiler");
    assert!(stderr.contains("compiler"), "{stderr}");
}

#[test]
fn resume_after_killing_tdg_mid_campaign_evaluates_nothing_twice() {
    let _beside = testkit::shared();
    let Some(cluster) = Cluster::shared() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let campaign = dir.path().join("campaign");
    let mut child = slurm(cluster, dir.path(), &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill tdg while the start's neighbourhood (four tasks) is running.
    let started = Instant::now();
    loop {
        let done = std::fs::read_dir(campaign.join("results")).map_or(0, |d| d.count());
        if done >= 2 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "no progress");
        assert!(child.try_wait().unwrap().is_none(), "tdg ended early");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let out = tdg_command()
        .args(["tune", "--json", "--resume"])
        .arg(&campaign)
        .env("SLURM_CONF", &cluster.conf)
        .env("TDG_NO_PROBE", "1")
        .env("TDG_TEST_TALLY", dir.path().join("tally"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let o = ok(out);
    assert!(
        stderr.contains("waiting for job"),
        "the killed run's job was still running: {stderr}"
    );
    assert_eq!(o["best_description"], "P=1 Q=3 R=1");
    let lines = log(&campaign.join("tune.jsonl"));
    let t = tally(dir.path());
    assert_eq!(t.len(), lines.len(), "{t:?}");
    assert!(
        t.values().all(|&n| n == 1),
        "a configuration was evaluated twice: {t:?}"
    );
}

#[test]
fn ctrl_c_cancels_the_campaigns_jobs() {
    let _beside = testkit::shared();
    let Some(cluster) = Cluster::shared() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The job may not start for a minute, so it is surely still queued.
    let child = slurm(cluster, dir.path(), &["--sbatch-option=--begin=now+60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let job_file = dir.path().join("campaign/rounds/0001/job");
    let started = Instant::now();
    while !job_file.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no job submitted"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let job = std::fs::read_to_string(&job_file).unwrap();
    let queued = |job: &str| {
        let out = cluster
            .command("squeue")
            .args(["-h", "-o", "%i %T", "-j", job.trim()])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert!(queued(&job).contains("PENDING"), "{}", queued(&job));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("interrupted: cancelled the campaign's jobs")
            && stderr.contains("--resume"),
        "{stderr}"
    );
    assert_eq!(
        stderr
            .trim()
            .lines()
            .last()
            .unwrap()
            .matches("tdg: error")
            .count(),
        1,
        "{stderr}"
    );
    let started = Instant::now();
    while !queued(&job).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "job {job} still queued: {}",
            queued(&job)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn no_slurm_or_a_dead_controller_is_one_line_with_a_way_out() {
    let _beside = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    // No Slurm commands on PATH.
    let out = tune(dir.path(), &["--executor", "slurm"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("not found") && err.contains("--executor local"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        !dir.path().join("cost.campaign").exists(),
        "a campaign was left behind"
    );

    let out = tdg_command()
        .args(["tune", "--resume"])
        .arg(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("is not a tdg campaign"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    // A cluster setting without the Slurm executor is a mistake, not a no-op.
    let out = tune(dir.path(), &["--partition", "big"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("--partition is for --executor slurm"),
        "{err}"
    );

    let Some(cluster) = Cluster::start() else {
        return;
    };
    cluster.stop();
    let started = Instant::now();
    let out = slurm(&cluster, dir.path(), &[]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("controller does not answer") && err.contains("SLURM_CONF"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        !dir.path().join("campaign").exists(),
        "a campaign was left behind"
    );
    let _ = cluster.dir();
}

#[test]
fn a_local_campaign_resumed_with_a_larger_budget_goes_on_without_repeating() {
    let _beside = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let whole = ok(tune(dir.path(), &["--log", "whole.jsonl"])
        .output()
        .unwrap());
    let first_run = tally(dir.path());
    std::fs::remove_file(dir.path().join("tally")).unwrap();
    let campaign = dir.path().join("campaign");
    let part = ok(
        tune(dir.path(), &["--budget", "3", "--campaign", "campaign"])
            .output()
            .unwrap(),
    );
    assert_eq!(part["evaluations"], 3);
    let mut finalists = finalists_in(&campaign.join("tune.jsonl"));
    let resumed = ok(tdg_command()
        .args(["tune", "--json", "--budget", "100", "--resume"])
        .arg(&campaign)
        .env("TDG_NO_PROBE", "1")
        .env("TDG_TEST_TALLY", dir.path().join("tally"))
        .output()
        .unwrap());
    // The same search as one uninterrupted run, each configuration timed once.
    assert_eq!(resumed["evaluations"], whole["evaluations"]);
    assert_eq!(resumed["best_description"], whole["best_description"]);
    let a: Vec<String> = log(&dir.path().join("whole.jsonl"))
        .iter()
        .map(config)
        .collect();
    let b: Vec<String> = log(&campaign.join("tune.jsonl"))
        .iter()
        .map(config)
        .collect();
    assert_eq!(a, b);
    // The interrupted campaign and its resume ran the same configurations
    // as the whole run, none of them evaluated twice: a configuration runs
    // again only as a finalist, each run's best re-timed side by side (in
    // processes of their own, not read back from the campaign).
    let resumed_runs = tally(dir.path());
    assert_eq!(
        resumed_runs.keys().collect::<Vec<_>>(),
        first_run.keys().collect::<Vec<_>>()
    );
    finalists.extend(finalists_in(&campaign.join("tune.jsonl")));
    for (c, runs) in &resumed_runs {
        if finalists.contains(c) {
            assert!(
                *runs > 1,
                "{c}, a finalist, was not re-timed: {resumed_runs:?}"
            );
        } else {
            assert_eq!(*runs, 1, "{c} ran again: {resumed_runs:?}");
        }
    }
}

/// The configurations a log's final re-timing ran (a run's finalists).
fn finalists_in(path: &Path) -> std::collections::BTreeSet<String> {
    let finalists: std::collections::BTreeSet<String> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["phase"] == "final")
        .map(|l| config(&l))
        .collect();
    assert!(
        !finalists.is_empty(),
        "{}: no final re-timing",
        path.display()
    );
    finalists
}

/// `tdg tune` on copies of the cost kernel and spec in `dir`, named
/// relative to it (so a test can change the implementation a campaign
/// started with), with a local campaign in `dir/campaign`.
fn tune_copied(dir: &Path, args: &[&str]) -> Command {
    for f in ["cost.c", "cost.spec"] {
        if !dir.join(f).exists() {
            std::fs::copy(support(f), dir.join(f)).unwrap();
        }
    }
    let mut c = tdg_command();
    c.current_dir(dir)
        .env("TDG_NO_PROBE", "1")
        .env("TDG_TEST_TALLY", dir.join("tally"))
        .args(["tune", "cost.spec", "--impl", "cost.c"])
        .args(["--param", "P=1:3", "--param", "Q=1:3", "--param", "R=1"])
        .arg("--no-model")
        // The executors' mechanics are under test: the hill-climb's several
        // rounds from the mid-range start, whatever the default strategy is.
        .args(["--strategy", "hill"])
        .args(TIMING)
        .args(["--json", "--campaign", "campaign"])
        .args(args);
    c
}

fn resume(dir: &Path, args: &[&str]) -> Command {
    let mut c = tdg_command();
    c.env("TDG_NO_PROBE", "1")
        .env("TDG_TEST_TALLY", dir.join("tally"))
        .args(["tune", "--json", "--budget", "100", "--resume"])
        .arg(dir.join("campaign"))
        .args(args);
    c
}

#[test]
fn a_changed_implementation_is_refused_on_resume_and_allow_changed_evaluates_again() {
    let _beside = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let part = ok(tune_copied(dir.path(), &["--budget", "3"])
        .output()
        .unwrap());
    assert_eq!(part["evaluations"], 3);
    let first = tally(dir.path());
    assert!(!first.is_empty(), "{first:?}");
    // Each stored result carries the digest of the inputs it came from.
    let digests = |dir: &Path| -> BTreeMap<String, String> {
        std::fs::read_dir(dir.join("campaign/results"))
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                let v: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
                (
                    p.display().to_string(),
                    v["inputs"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let before = digests(dir.path());
    assert!(!before.is_empty());

    // The same code with a comment more: other bytes, so other results.
    let kernel = dir.path().join("cost.c");
    let mut text = std::fs::read_to_string(&kernel).unwrap();
    text.push_str("/* edited after the campaign started */\n");
    std::fs::write(&kernel, text).unwrap();
    let out = resume(dir.path(), &[]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("the implementation cost.c changed since the campaign started")
            && err.contains("--allow-changed"),
        "{err}"
    );
    assert_eq!(tally(dir.path()), first, "a refused resume ran something");

    let out = resume(dir.path(), &["--allow-changed"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let o = ok(out);
    assert!(err.contains("evaluated again"), "{err}");
    assert_eq!(o["best_description"], "P=1 Q=3 R=1");
    // Every configuration the first run evaluated was evaluated again from
    // the new implementation: run again, and its stored result replaced by
    // one from the new inputs.
    let t = tally(dir.path());
    for (config, n) in &first {
        assert!(t[config] > *n, "{config} was not evaluated again: {t:?}");
    }
    let after = digests(dir.path());
    for (file, digest) in &before {
        assert_ne!(
            &after[file], digest,
            "{file} still holds a result from the old inputs"
        );
    }
    let now: std::collections::BTreeSet<&String> = after.values().collect();
    assert_eq!(now.len(), 1, "results from two sets of inputs: {after:?}");
    // The change is recorded: the next resume goes on without the flag.
    ok(resume(dir.path(), &[]).output().unwrap());
}

/// The one line a refused resume prints, after checking it ran nothing.
fn refused(dir: &Path, args: &[&str], envs: &[(&str, &Path)]) -> String {
    let before = tally(dir);
    let mut c = resume(dir, args);
    for (k, v) in envs {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--allow-changed"), "{err}");
    assert_eq!(tally(dir), before, "a refused resume ran something");
    err
}

#[test]
fn a_changed_header_compiler_or_flag_is_refused_on_resume() {
    let _beside = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The kernel reads a header of its own.
    std::fs::copy(support("cost.c"), d.join("cost.c")).unwrap();
    let kernel = std::fs::read_to_string(d.join("cost.c")).unwrap();
    std::fs::write(
        d.join("cost.c"),
        format!("#include \"cost_note.h\"\n{kernel}"),
    )
    .unwrap();
    let header = d.join("cost_note.h");
    std::fs::write(&header, "/* nothing yet */\n").unwrap();
    ok(tune_copied(d, &["--budget", "3"]).output().unwrap());
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("campaign/campaign.json")).unwrap())
            .unwrap();
    let roles: Vec<&str> = manifest["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["role"].as_str().unwrap())
        .collect();
    for role in ["header", "compiler", "compiler flags"] {
        assert!(roles.contains(&role), "{role} is not an input: {roles:?}");
    }

    // An edited header: the kernel the stored results came from is gone.
    std::fs::write(&header, "#define COST_NOTE 1\n").unwrap();
    let err = refused(d, &[], &[]);
    assert!(
        err.contains("the header cost_note.h changed since the campaign started"),
        "{err}"
    );
    std::fs::write(&header, "/* nothing yet */\n").unwrap();

    // Another compiler: the same one behind a wrapper is another executable.
    let wrapper = d.join("my-cc");
    std::fs::write(&wrapper, "#!/bin/sh\nexec cc \"$@\"\n").unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let err = refused(d, &[], &[("CC", &wrapper)]);
    assert!(
        err.contains("the compiler changed since the campaign started") && err.contains("my-cc"),
        "{err}"
    );

    // Other flags given with --resume.
    let err = refused(d, &["--cflags", "-O1"], &[]);
    assert!(
        err.contains(
            "the compiler flags changed since the campaign started (`-O2` then, `-O1` now)"
        ),
        "{err}"
    );
    // Accepted, they are the campaign's from then on.
    let out = resume(d, &["--cflags", "-O1", "--allow-changed"])
        .output()
        .unwrap();
    ok(out);
    let manifest = std::fs::read_to_string(d.join("campaign/campaign.json")).unwrap();
    assert!(manifest.contains("-O1"), "{manifest}");
    ok(resume(d, &[]).output().unwrap());
}

#[test]
fn a_second_concurrent_resume_is_refused_and_a_killed_one_releases_the_campaign() {
    let _beside = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    ok(tune_copied(dir.path(), &["--budget", "1"])
        .output()
        .unwrap());
    let mut first = resume(dir.path(), &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lock = dir.path().join("campaign/campaign.lock");
    let started = Instant::now();
    while std::fs::read_to_string(&lock).unwrap_or_default() != first.id().to_string() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the resume never took the lock"
        );
        assert!(
            first.try_wait().unwrap().is_none(),
            "the resume ended early"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = resume(dir.path(), &[]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        first.try_wait().unwrap().is_none(),
        "the first resume finished before the second was refused: the test proves nothing"
    );
    // Nothing is wrong with the request; the campaign cannot be resumed
    // now: the contract's "not ready" status, not a generic failure.
    assert_eq!(out.status.code(), Some(7), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("in use by another tdg tune (pid {})", first.id())),
        "{err}"
    );
    // tdg dies mid-search: the kernel releases its lock and the campaign
    // resumes to the end.
    first.kill().unwrap();
    first.wait().unwrap();
    let o = ok(resume(dir.path(), &[]).output().unwrap());
    assert_eq!(o["best_description"], "P=1 Q=3 R=1");
}

#[test]
fn the_controller_dying_mid_campaign_ends_in_one_line_and_the_campaign_resumes() {
    let _beside = testkit::shared();
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let campaign = dir.path().join("campaign");
    let child = slurm(&cluster, dir.path(), &["--controller-timeout", "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !campaign.join("rounds/0001/job").exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no job submitted"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid_file = cluster.dir().join("slurmctld.pid");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let died = Instant::now();
    let mut child = child;
    while child.try_wait().unwrap().is_none() {
        assert!(
            died.elapsed() < Duration::from_secs(120),
            "tdg still waits for a dead controller after {:?}",
            died.elapsed()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("controller has not answered") && err.contains("tdg tune --resume"),
        "{err}"
    );
    // Told 3 s, tdg stops within seconds: a squeue against the dead
    // controller takes about 18 s to fail, and tdg used to start counting
    // only after the first had failed, and stop after the second (36 s).
    // One squeue already under way when the controller died may still
    // take its 18 s.
    assert!(
        died.elapsed() < Duration::from_secs(30),
        "tdg stopped {:?} after the controller died, told --controller-timeout 3",
        died.elapsed()
    );
    eprintln!("tdg stopped {:?} after the controller died", died.elapsed());

    // The controller comes back (its state saved): the campaign resumes.
    let status = cluster
        .command("slurmctld")
        .env(
            "PATH",
            format!(
                "{}:/usr/sbin:/sbin",
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .arg("-f")
        .arg(&cluster.conf)
        .status()
        .unwrap();
    assert!(status.success());
    let back = Instant::now();
    while !cluster
        .command("scontrol")
        .arg("ping")
        .output()
        .unwrap()
        .status
        .success()
    {
        assert!(
            back.elapsed() < Duration::from_secs(60),
            "the controller did not come back"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let o = ok(tdg_command()
        .args(["tune", "--json", "--resume"])
        .arg(&campaign)
        .env("SLURM_CONF", &cluster.conf)
        .env("TDG_NO_PROBE", "1")
        .env("TDG_TEST_TALLY", dir.path().join("tally"))
        .output()
        .unwrap());
    assert_eq!(o["best_description"], "P=1 Q=3 R=1");
}
