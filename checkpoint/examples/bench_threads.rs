//! Checkpoints of threaded applications (run by
//! scripts/bench-checkpoint-threads): per-sample cost of samples replayed
//! in place in one restored copy against one CRIU restore per sample, and
//! the region times both give, side by side in rounds on the same images.
//!
//! Two programs, each captured with two threads:
//! - `omp_region` (checkpoint/tests/apps), an OpenMP update a = 0.5a + 3b
//!   over two arrays of 2 MiB, marked, call 6 with delay 2, the default
//!   libgomp wait policy;
//! - Debian's python3 + numpy with OPENBLAS_NUM_THREADS=2, cblas_dgemm
//!   400x350x300 captured through the shim, call 3 with delay 1.
//!
//! Each round: one restore taking BENCH_IN_PLACE samples in place, then
//! BENCH_RESTORES restores of one sample each. Figures are medians over the
//! rounds' samples; the ratio compares the two paths of the same run.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn tdg_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("own path");
    // target/release/examples/bench_threads -> target/release/tdg
    exe.parent()
        .and_then(Path::parent)
        .map(|d| d.join("tdg"))
        .filter(|p| p.is_file())
        .expect("build tdg first: cargo build --release")
}

fn run(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().expect("tdg runs");
    assert!(
        out.status.success(),
        "{:?}: {}",
        cmd,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

struct Case {
    name: &'static str,
    image: PathBuf,
    env: Vec<(&'static str, &'static str)>,
}

#[derive(Default)]
struct Side {
    cost_ms: Vec<f64>,
    region_ns: Vec<f64>,
    busy: Vec<f64>,
    threads: Vec<f64>,
}

impl Side {
    fn add(&mut self, rep: &Value) {
        self.cost_ms
            .push(rep["cost_per_sample_ms"].as_f64().unwrap());
        let all = |k: &str| -> Vec<f64> {
            rep[k]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default()
        };
        self.region_ns.extend(all("samples_ns"));
        self.busy.extend(all("samples_busy_threads"));
        self.threads.extend(all("samples_threads"));
    }
}

fn main() {
    let rounds = env_or("BENCH_ROUNDS", 3);
    let in_place_samples = env_or("BENCH_IN_PLACE", 40);
    let restores = env_or("BENCH_RESTORES", 4);
    let tdg = tdg_binary();
    let work = PathBuf::from(format!("/dev/shm/tdg-bench-threads-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let cases = [
        Case {
            name: "OpenMP update, 2 x 2 MiB (omp_region)",
            image: capture_omp_region(&tdg, &work),
            env: vec![("OMP_NUM_THREADS", "2")],
        },
        Case {
            name: "numpy dgemm 400x350x300, OpenBLAS",
            image: capture_numpy_dgemm(&tdg, &work),
            env: vec![("OPENBLAS_NUM_THREADS", "2")],
        },
    ];
    println!(
        "| routine (2 threads) | cost per sample, in place | one restore per sample | ratio | region, in place | region, restored | busy threads (in place) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for case in &cases {
        let (in_place, restored) = bench_case(&tdg, case, rounds, in_place_samples, restores);
        let (c_in, c_re) = (median(in_place.cost_ms.clone()), median(restored.cost_ms));
        println!(
            "| {} | {:.2} ms | {:.1} ms | {:.1}x | {} | {} | {:.0} of {:.0} |",
            case.name,
            c_in,
            c_re,
            c_re / c_in,
            stats::ns(median(in_place.region_ns)),
            stats::ns(median(restored.region_ns)),
            median(in_place.busy),
            median(in_place.threads),
        );
    }
    let _ = std::fs::remove_dir_all(&work);
}

/// omp_region built with the host library, as the tests build it, and
/// captured at call 6 with delay 2 on two threads into `work`/omp-img.
fn capture_omp_region(tdg: &Path, work: &Path) -> PathBuf {
    let apps = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps");
    run(Command::new(tdg)
        .args(["checkpoint", "lib", "-o"])
        .arg(work.join("lib")));
    let exe = work.join("omp_region");
    run(Command::new("cc")
        .args(["-O2", "-fopenmp", "-rdynamic", "-I"])
        .arg(work.join("lib"))
        .arg(apps.join("omp_region.c"))
        .arg(work.join("lib/tdg_checkpoint.c"))
        .arg("-o")
        .arg(&exe));
    let omp = work.join("omp-img");
    run(Command::new(tdg)
        .args(["checkpoint", "capture", "--site", "update", "--call", "6"])
        .args(["--delay", "2", "-o"])
        .arg(&omp)
        .arg("--")
        .arg(&exe)
        .args(["8", "262144"])
        .env("OMP_NUM_THREADS", "2"));
    omp
}

/// python3 + numpy's cblas_dgemm on two OpenBLAS threads, captured through
/// the shim at call 3 with delay 1 into `work`/numpy-img.
fn capture_numpy_dgemm(tdg: &Path, work: &Path) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    std::fs::write(
        work.join("mm.py"),
        "import numpy as np\nrng = np.random.default_rng(7)\n\
         a, b = rng.random((400, 300)), rng.random((300, 350))\n\
         x = sum((a @ b).sum() for _ in range(5))\nprint(f\"checksum {x:.6f}\")\n",
    )
    .unwrap();
    let numpy = work.join("numpy-img");
    run(Command::new(tdg)
        .args(["checkpoint", "capture", "--spec"])
        .arg(repo.join("instrument/examples/blas/cblas_dgemm.spec"))
        .args(["--call", "3", "--delay", "1", "-o"])
        .arg(&numpy)
        .args(["--", "/usr/bin/python3"])
        .arg(work.join("mm.py"))
        .current_dir(work)
        .env("OPENBLAS_NUM_THREADS", "2"));
    numpy
}

/// `rounds` rounds of one restore taking `in_place_samples` samples in
/// place, then `restores` restores of one sample each: both paths' figures.
fn bench_case(
    tdg: &Path,
    case: &Case,
    rounds: usize,
    in_place_samples: usize,
    restores: usize,
) -> (Side, Side) {
    let (mut in_place, mut restored) = (Side::default(), Side::default());
    let time = |extra: &[&str]| -> Value {
        let out = run(Command::new(tdg)
            .args(["checkpoint", "time", "--json"])
            .args(extra)
            .arg(&case.image)
            .envs(case.env.iter().copied()));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    for _ in 0..rounds {
        let r = time(&["-r", &in_place_samples.to_string()]);
        assert_eq!(r["sampling"], "in-place", "{r}");
        in_place.add(&r);
        let r = time(&["-r", &restores.to_string(), "--restore-per-sample"]);
        restored.add(&r);
    }
    (in_place, restored)
}
