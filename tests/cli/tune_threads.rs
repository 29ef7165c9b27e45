//! `tdg tune --param threads=1:2 --param NB=...` on the OpenMP GEMM: the
//! team size is searched like any macro, reaches the driver as `--threads`,
//! and the choice is checked in the application: the OpenMP program built and
//! run with the chosen settings is faster than with each rejected one.

use crate::support::tdg_command;
use std::path::{Path, PathBuf};
use std::process::Command;
use testkit::repo;

/// The OpenMP program of specs/apps/ around specs/omp_gemm.c at one NB.
fn build_app(dir: &Path, nb: i64) -> PathBuf {
    let exe = dir.join(format!("gemm_app_nb{nb}"));
    let out = Command::new("gcc")
        .args(["-O2", "-fopenmp", &format!("-DNB={nb}")])
        .arg(repo().join("specs/apps/omp_gemm_app.c"))
        .arg(repo().join("specs/omp_gemm.c"))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// The program's least call on `threads` threads, one CPU each.
fn app_least_ns(exe: &Path, threads: i64, cpus: &[i32]) -> f64 {
    let places: Vec<String> = cpus.iter().map(|c| format!("{{{c}}}")).collect();
    let out = Command::new(exe)
        .env("OMP_NUM_THREADS", threads.to_string())
        .env("OMP_PROC_BIND", "close")
        .env("OMP_PLACES", places.join(","))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no least_call_ns in {text}"))
}

#[test]
fn tune_picks_the_team_size_and_blocking_the_openmp_program_runs_fastest() {
    let cpus = testkit::usable_cpus();
    if cpus.len() < 2 {
        eprintln!("SKIPPED tune_picks_the_team_size_and_blocking...: this process may use {cpus:?}; two threads need two CPUs");
        return;
    }
    let _alone = testkit::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("tune.jsonl");
    let out = tdg_command()
        .arg("tune")
        .arg(repo().join("specs/omp_gemm.spec"))
        .arg("--impl")
        .arg(repo().join("specs/omp_gemm.c"))
        .args(["--cflags", "-O2 -fopenmp"])
        // NB=256 is one column block, which leaves the second thread idle;
        // NB=128 is two, one per thread: the team size pays only with the
        // blocking that splits the work (NB hardly matters on one thread).
        .args(["--param", "threads=1:2", "--param", "NB=128,256"])
        .args(["--exhaustive", "--json", "--log"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let o: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(o["evaluations"], 4, "{o}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let configs: Vec<(i64, i64)> = lines
        .iter()
        .map(|l| {
            (
                l["config"]["threads"].as_i64().unwrap(),
                l["config"]["NB"].as_i64().unwrap(),
            )
        })
        .collect();
    let best = o["best_description"].as_str().unwrap().to_string();
    let chosen = configs
        .iter()
        .copied()
        .find(|(t, nb)| {
            best == format!("threads={t} NB={nb}") || best == format!("NB={nb} threads={t}")
        })
        .unwrap_or_else(|| panic!("best {best} is none of {configs:?}"));
    eprintln!(
        "tdg tune chose {best}; the driver's times: {:?}",
        lines
            .iter()
            .map(|l| (&l["config"], &l["time_ns"]))
            .collect::<Vec<_>>()
    );

    // In the application, interleaved: the chosen settings against each
    // rejected one, the least of three rounds each.
    let apps: Vec<(i64, PathBuf)> = [128, 256]
        .iter()
        .map(|nb| (*nb, build_app(dir.path(), *nb)))
        .collect();
    let exe = |nb: i64| &apps.iter().find(|(n, _)| *n == nb).unwrap().1;
    let mut best_in_app = vec![f64::INFINITY; configs.len()];
    for _ in 0..3 {
        for (i, (threads, nb)) in configs.iter().enumerate() {
            best_in_app[i] = best_in_app[i].min(app_least_ns(exe(*nb), *threads, &cpus[..2]));
        }
    }
    let at = |c: (i64, i64)| best_in_app[configs.iter().position(|x| *x == c).unwrap()];
    eprintln!(
        "in the program: {:?}",
        configs.iter().zip(&best_in_app).collect::<Vec<_>>()
    );
    for (c, ns) in configs.iter().zip(&best_in_app) {
        if *c != chosen {
            assert!(
                at(chosen) < *ns,
                "tune chose threads={} NB={} ({} ns in the program) but threads={} NB={} runs {ns} ns there",
                chosen.0,
                chosen.1,
                at(chosen),
                c.0,
                c.1
            );
        }
    }
}
