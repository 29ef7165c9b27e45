//! Shared by the real-CRIU tests: building the test application against the
//! host library, image directories on tmpfs, and a process census.
#![allow(dead_code)]

use checkpoint::{
    capture, measure_in_app, time_image, CaptureRequest, Criu, InAppReport, InAppRequest,
    TimeOptions,
};
use stats::Summary;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;
#[allow(unused_imports)]
pub use testkit::{exclusive, pin_to_one_cpu};

pub const APPS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/apps");

/// CRIU is provisioned by `scripts/setup` (CI runs it before the tests); a
/// missing one is a setup failure, not a reason to skip.
pub fn criu() -> Criu {
    checkpoint::find_criu().unwrap_or_else(|e| panic!("{e}"))
}

pub struct Workspace {
    pub dir: tempfile::TempDir,
    pub images: PathBuf,
}

impl Workspace {
    /// Sources and binaries in a temp dir; images on tmpfs (fast restores).
    pub fn new(name: &str) -> Workspace {
        let dir = tempfile::tempdir().unwrap();
        let images = PathBuf::from(format!(
            "/dev/shm/tdg-ckpt-test-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&images);
        std::fs::create_dir_all(&images).unwrap();
        Workspace { dir, images }
    }

    pub fn image(&self, name: &str) -> PathBuf {
        self.images.join(name)
    }

    /// Build tests/apps/<main>.c (+ isort.c) with the host library.
    pub fn build(&self, main: &str, exe_name: &str, defines: &[&str]) -> PathBuf {
        self.build_app(&[main, "isort.c"], exe_name, defines)
    }

    /// Build tests/apps/<sources> with the host library (-O2, warnings as errors).
    pub fn build_app(&self, sources: &[&str], exe_name: &str, flags: &[&str]) -> PathBuf {
        let lib = checkpoint::write_host_library(&self.dir.path().join("hostlib")).unwrap();
        let cc = toolchain::CCompiler::find(None).unwrap();
        let exe = self.dir.path().join(exe_name);
        let mut all = vec!["-O2", "-Wall", "-Wextra", "-Werror"];
        all.extend_from_slice(flags);
        let sources: Vec<PathBuf> = sources.iter().map(|s| Path::new(APPS).join(s)).collect();
        // The host library's object from the build cache, as tdg's own
        // builds take it: the tests build dozens of applications with it.
        let cache = toolchain::BuildCache::open_or_warn(&driver_gen::default_build_cache());
        checkpoint::build_with_host_library(&cc, &lib, &sources, &exe, &all, cache.as_ref())
            .unwrap();
        exe
    }

    pub fn out_file(&self) -> PathBuf {
        self.dir.path().join("out.txt")
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        // A failed test keeps its images and CRIU logs: the error names them.
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.images);
        }
    }
}

/// PIDs of live processes running `exe`.
pub fn processes_running(exe: &Path) -> Vec<u32> {
    let want = exe.canonicalize().unwrap_or_else(|_| exe.to_path_buf());
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(target) = std::fs::read_link(e.path().join("exe")) {
            if target == want {
                out.push(pid);
            }
        }
    }
    out
}

/// PIDs of live processes whose command line mentions `path` (criu or
/// unshare restoring an image would).
pub fn processes_mentioning(path: &Path) -> Vec<u32> {
    let needle = path.to_string_lossy().to_string();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmdline).contains(&needle) {
                out.push(pid);
            }
        }
    }
    out
}

pub fn os_args(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<std::ffi::OsString> {
    args.iter().map(|a| a.as_ref().to_os_string()).collect()
}

/// How far a delayed checkpoint's sort may read from its in-app time and
/// still be the application's call: within a factor of two either way.
/// The same sort on the default driver's random data reads thousands of
/// times the in-app time (`criu_accuracy.rs`), so the factor tells a replay
/// of the application's data from anything else. How near the replay
/// comes is a benchmark, not this bound: restored copies have read the
/// sort from 0.71x to 1.13x its in-app time depending on the host, each
/// host the same way run after run (docs/checkpoint.md, Limits;
/// docs/benchmarks.md).
pub const REPLAY_FACTOR: f64 = 2.0;

/// Whether `replayed` is within [`REPLAY_FACTOR`] of `in_app`.
pub fn within_replay_factor(replayed: f64, in_app: f64) -> bool {
    let ratio = replayed / in_app;
    (1.0 / REPLAY_FACTOR..=REPLAY_FACTOR).contains(&ratio)
}

/// Right after an immediate restore the pointer chase's list is out of the
/// caches: its median must be clearly (over 2x) slower than the delayed one.
pub fn assert_immediate_is_cold(site: &str, immediate: &Summary, delayed: &Summary) {
    assert!(
        immediate.median > 2.0 * delayed.median,
        "{site}: immediate median {:.0} ns is not clearly slower than delayed {:.0} ns",
        immediate.median,
        delayed.median
    );
}

/// What the delay buys where the in-app time itself scatters widely (the
/// pointer chase's plain runs, between runs of the same binary;
/// docs/checkpoint.md, Limits): the delayed checkpoint is at least four
/// times nearer the in-app time than the immediate one.
pub fn assert_delay_rebuilds_the_cache_state(
    site: &str,
    in_app: f64,
    delayed: f64,
    immediate: f64,
) {
    let (d, i) = (
        stats::relative_difference(delayed, in_app),
        stats::relative_difference(immediate, in_app),
    );
    assert!(
        4.0 * d < i,
        "{site}: delayed {delayed:.0} ns is {:.1}% from in-app {in_app:.0} ns, not clearly nearer than immediate {immediate:.0} ns ({:.1}%)",
        100.0 * d,
        100.0 * i
    );
}

pub fn describe(label: &str, s: &Summary) -> String {
    format!(
        "{label}: min {:.0} ns, median {:.0} ns, max {:.0} ns (n={})",
        s.min, s.median, s.max, s.n
    )
}

#[derive(Default)]
pub struct Samples {
    pub cpu: Vec<f64>,
    pub wall: Vec<f64>,
}

impl Samples {
    pub fn add(&mut self, wall: &[u64], cpu: &[u64]) {
        self.wall.extend(wall.iter().map(|&n| n as f64));
        self.cpu.extend(cpu.iter().map(|&n| n as f64));
    }
    pub fn wall_stats(&self) -> Summary {
        Summary::of(&self.wall).unwrap()
    }
    pub fn cpu_stats(&self) -> Summary {
        Summary::of(&self.cpu).unwrap()
    }
}

pub struct Comparison {
    pub in_app: Samples,
    pub delayed: Samples,
    pub immediate: Samples,
}

/// `runs` plain runs of `command`, timing call `call` of `site` in each.
pub fn plain_runs(command: &[OsString], site: &str, call: u64, runs: usize) -> InAppReport {
    measure_in_app(&InAppRequest {
        command: command.to_vec(),
        site: Some(site.to_string()),
        call,
        runs,
        timeout: Some(Duration::from_secs(300)),
        preload: None,
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// How the three sides are interleaved: each of `rounds` rounds takes
/// `runs` plain in-app runs, then `samples` forked samples of one restore of
/// each image.
pub struct Rounds {
    pub rounds: usize,
    pub runs: usize,
    pub samples: usize,
}

/// Capture `call` of `site` delayed by `delay` and immediately, then measure
/// plain in-app runs and restores of both images interleaved in rounds, so
/// the shared machine's noise falls on all three alike.
pub fn compare_in_app_delayed_immediate(
    ws: &Workspace,
    command: Vec<OsString>,
    site: &str,
    call: u64,
    delay: u64,
    plan: &Rounds,
) -> Comparison {
    let criu = criu();
    let capture_at = |delay: u64, name: &str| {
        let req = CaptureRequest {
            command: command.clone(),
            image: ws.image(name),
            site: Some(site.to_string()),
            call,
            delay,
            timeout: Some(Duration::from_secs(300)),
            quiet: true,
            preload: None,
        };
        capture(&req, &criu).unwrap_or_else(|e| panic!("{e}"));
        ws.image(name)
    };
    let delayed_img = capture_at(delay, "delayed");
    let immediate_img = capture_at(0, "immediate");
    let opts = TimeOptions {
        samples: plan.samples,
        criu: Some(criu.clone()),
        ..Default::default()
    };
    let mut c = Comparison {
        in_app: Samples::default(),
        delayed: Samples::default(),
        immediate: Samples::default(),
    };
    for _ in 0..plan.rounds {
        let r = plain_runs(&command, site, call, plan.runs);
        c.in_app.add(&r.samples_ns, &r.samples_cpu_ns);
        let time = |img: &Path| time_image(img, &opts).unwrap_or_else(|e| panic!("{e}"));
        let d = time(&delayed_img);
        c.delayed.add(&d.samples_ns, &d.samples_cpu_ns);
        let i = time(&immediate_img);
        c.immediate.add(&i.samples_ns, &i.samples_cpu_ns);
    }
    for (label, s) in [
        ("in-app", &c.in_app),
        ("delayed", &c.delayed),
        ("immediate", &c.immediate),
    ] {
        eprintln!(
            "{site}: {}",
            describe(&format!("{label} wall"), &s.wall_stats())
        );
        eprintln!(
            "{site}: {}",
            describe(&format!("{label} cpu"), &s.cpu_stats())
        );
    }
    c
}

/// Capture `command` at call `call` of `site`, `delay` calls early.
pub fn request(
    command: Vec<OsString>,
    image: PathBuf,
    site: &str,
    call: u64,
    delay: u64,
) -> CaptureRequest {
    CaptureRequest {
        command,
        image,
        site: Some(site.to_string()),
        call,
        delay,
        timeout: Some(Duration::from_secs(120)),
        quiet: true,
        preload: None,
    }
}

/// `samples` samples with the provisioned CRIU.
pub fn opts(samples: usize) -> TimeOptions {
    TimeOptions {
        samples,
        criu: Some(criu()),
        ..Default::default()
    }
}
