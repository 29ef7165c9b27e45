//! A threaded library's call checkpointed through the shim: Debian's python3
//! and numpy over OpenBLAS with `OPENBLAS_NUM_THREADS=2`, `cblas_dgemm`
//! captured with no source change. The image holds OpenBLAS's worker thread
//! (the self-dump starts CRIU without fork(), whose atfork handler would
//! stop it), so the restored copy replays the call in place with both
//! threads, at a per-sample cost measured against a restore per sample in
//! the same run; an OpenMP candidate runs there with a team of its own.
//! Real CRIU: needs root and `scripts/setup`.

use crate::interpose_support::PYTHON;
use crate::support::{json_of, tdg_command};
use std::path::Path;
use std::process::Output;

/// C = A B with A 400x300 and B 300x350, five times: numpy calls the
/// row-major cblas_dgemm with m=400, n=350, k=300, ldc=350, large enough
/// that OpenBLAS splits it between its two threads.
const SCRIPT: &str = r#"
import numpy as np
rng = np.random.default_rng(7)
a, b = rng.random((400, 300)), rng.random((300, 350))
x = sum((a @ b).sum() for _ in range(5))
print(f"checksum {x:.6f}")
"#;
const C_BYTES: u64 = 400 * 350 * 8;

/// The reference dgemm for numpy's row-major, untransposed call, its
/// columns shared by an OpenMP team; the first call in a process writes
/// the team size and the thread numbers that took part to MARKER.
const OMP_CANDIDATE: &str = r#"
#include <fcntl.h>
#include <omp.h>
#include <stdio.h>
#include <unistd.h>

static int reported;

void cblas_dgemm(int layout, int transa, int transb, int m, int n, int k, double alpha,
                 const double *a, int lda, const double *b, int ldb, double beta, double *c, int ldc)
{
    unsigned mask = 0;
    int team = 0;
    (void)layout, (void)transa, (void)transb;
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double s = 0.0;
                for (int p = 0; p < k; p++)
                    s += a[(long)i * lda + p] * b[(long)p * ldb + j];
                c[(long)i * ldc + j] = alpha * s + (beta == 0.0 ? 0.0 : beta * c[(long)i * ldc + j]);
            }
#pragma omp atomic
        mask |= 1u << (omp_get_thread_num() & 31);
#pragma omp single
        team = omp_get_num_threads();
    }
    if (!reported) {
        char line[64];
        int len = snprintf(line, sizeof line, "team %d mask %x\n", team, mask);
        int fd = open(MARKER, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            reported = write(fd, line, (size_t)len) == len ? 1 : -1;
            close(fd);
        }
    }
}
"#;

/// `tdg ARGS` in `dir` with OpenBLAS on two threads.
fn tdg(args: &[&str], dir: &Path) -> Output {
    tdg_command()
        .args(args)
        .current_dir(dir)
        .env("OPENBLAS_NUM_THREADS", "2")
        .output()
        .unwrap()
}

fn numbers(rep: &serde_json::Value, key: &str) -> Vec<u64> {
    rep[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key}: {rep}"))
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect()
}

#[test]
fn numpys_threaded_dgemm_is_replayed_in_place_with_openblass_threads() {
    let _alone = testkit::exclusive();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("script.py"), SCRIPT).unwrap();
    std::fs::write(d.join("dgemm_omp.c"), OMP_CANDIDATE).unwrap();
    let spec = testkit::repo()
        .join("instrument/examples/blas/cblas_dgemm.spec")
        .display()
        .to_string();
    let plain = std::process::Command::new(PYTHON)
        .arg("script.py")
        .current_dir(d)
        .env("OPENBLAS_NUM_THREADS", "2")
        .output()
        .unwrap();
    assert!(
        plain.status.success(),
        "python3-numpy missing? run scripts/setup"
    );

    let cap = tdg(
        &[
            "checkpoint",
            "capture",
            "--spec",
            &spec,
            "--call",
            "3",
            "--delay",
            "1",
            "-o",
            "img",
            "--",
            PYTHON,
            "script.py",
        ],
        d,
    );
    let err = String::from_utf8_lossy(&cap.stderr);
    assert!(cap.status.success(), "{err}");
    assert_eq!(cap.stdout, plain.stdout, "{err}");

    // Side by side: one restore replaying 30 samples in place, then three
    // restores of one sample each.
    let in_place = json_of(&tdg(
        &["checkpoint", "time", "-r", "30", "--json", "img"],
        d,
    ));
    let restored = json_of(&tdg(
        &[
            "checkpoint",
            "time",
            "-r",
            "3",
            "--restore-per-sample",
            "--json",
            "img",
        ],
        d,
    ));
    assert_eq!(in_place["sampling"], "in-place", "{in_place}");
    assert_eq!(in_place["restores"], 1, "{in_place}");
    assert!(in_place["fallback"].is_null(), "{in_place}");
    assert_eq!(in_place["in_place"]["output_bytes"], C_BYTES, "{in_place}");
    // Both of OpenBLAS's threads are in every copy and work together (a
    // worker the scheduler wakes late leaves a call to the calling
    // thread, so not necessarily in every one).
    assert_eq!(numbers(&in_place, "samples_threads"), vec![2; 30]);
    let busy = numbers(&in_place, "samples_busy_threads");
    assert!(busy.iter().all(|b| (1..=2).contains(b)), "{busy:?}");
    assert!(busy.contains(&2), "{busy:?}");
    assert_eq!(restored["sampling"], "restore", "{restored}");
    assert_eq!(numbers(&restored, "samples_threads"), vec![2; 3]);
    let cost = |r: &serde_json::Value| r["cost_per_sample_ms"].as_f64().unwrap();
    let median = |r: &serde_json::Value| r["region_ns"]["median"].as_f64().unwrap();
    // One restore for thirty samples is the effect; what that saves per
    // sample against a restore each is a benchmark's figure
    // (scripts/bench-checkpoint-threads, docs/benchmarks.md), printed here.
    eprintln!(
        "numpy dgemm 400x350x300, OPENBLAS_NUM_THREADS=2: cost per sample {:.2} ms in place, {:.2} ms one restore each; region median {:.2} ms in place, {:.2} ms restored",
        cost(&in_place),
        cost(&restored),
        median(&in_place) / 1e6,
        median(&restored) / 1e6
    );

    // An OpenMP candidate: libgomp loads into the threaded copy, its team of
    // two runs the call, and C equals OpenBLAS's on the image.
    let marker = d.join("team.txt");
    let define = format!("MARKER=\"{}\"", marker.display());
    let cand = json_of(&tdg(
        &[
            "checkpoint",
            "time",
            "-r",
            "4",
            "--json",
            "--impl",
            "dgemm_omp.c",
            "--cflags",
            "-O2 -fopenmp",
            "-D",
            &define,
            "img",
        ],
        d,
    ));
    assert_eq!(cand["sampling"], "in-place", "{cand}");
    assert_eq!(cand["verification"]["outputs"], 1, "{cand}");
    assert!(cand["verification"]["mismatch"].is_null(), "{cand}");
    assert!(
        numbers(&cand, "samples_threads").iter().all(|&t| t >= 3),
        "OpenBLAS's two threads and the candidate's worker: {cand}"
    );
    let teams = std::fs::read_to_string(&marker).unwrap();
    assert!(
        !teams.is_empty() && teams.lines().all(|l| l == "team 2 mask 3"),
        "{teams}"
    );
}
