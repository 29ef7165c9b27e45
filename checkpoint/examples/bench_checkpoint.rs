//! The checkpoint cost and accuracy tables (run by scripts/bench-checkpoint).
//!
//! For each routine: plain whole runs of the application (the in-app
//! reference and the "whole run" cost), restores of a delayed and an
//! immediate image, restores of the delayed image running a candidate
//! implementation (built from the routine's own source, so its region time
//! must match the delayed column and its cost shows what loading a candidate
//! adds), and the default driver where a spec can describe the data, all
//! interleaved in rounds in one process so the shared machine's
//! noise falls on every column alike. Figures are medians; ratios compare
//! columns measured side by side.

use checkpoint::stats::human_ns;
use checkpoint::{
    build_candidate, capture, measure_in_app, time_image, CandidateSource, CaptureRequest,
    InAppRequest, SampleStats, TimeOptions,
};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const APPS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/apps");

struct Case {
    name: &'static str,
    command: Vec<OsString>,
    site: &'static str,
    call: u64,
    delay: u64,
    /// (spec, implementation) of a default driver for the routine, if a spec can describe its data.
    default_driver: Option<(PathBuf, PathBuf)>,
    /// The routine's own source as a candidate, if the application calls it
    /// through TDG_ROUTINE.
    candidate: Option<CandidateSource>,
}

#[derive(Default)]
struct Column {
    region_wall: Vec<f64>,
    region_cpu: Vec<f64>,
    cost_ms: Vec<f64>,
}

impl Column {
    fn med(v: &[f64]) -> f64 {
        SampleStats::of(v).map(|s| s.median).unwrap_or(f64::NAN)
    }
}

struct Row {
    name: &'static str,
    in_app: Column,
    delayed: Column,
    immediate: Column,
    driver: Option<Column>,
    candidate: Option<Column>,
    capture_ms: f64,
    image_mib: f64,
}

fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let per_round: usize = std::env::var("BENCH_PER_ROUND")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let criu = checkpoint::find_criu().unwrap_or_else(|e| fail(&e.to_string()));
    let work = tempfile::tempdir().expect("temp dir");
    let images = PathBuf::from(format!("/dev/shm/tdg-bench-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&images).expect("image dir on /dev/shm");
    let _ = IMAGES.set(images.clone());

    let datasens = build_datasens(work.path());
    let out = work.path().join("out.txt");
    let mut cases = vec![
        Case {
            name: "datasens search (pointer chase)",
            command: vec![datasens.clone().into(), "search".into(), out.clone().into()],
            site: "search",
            call: 8,
            delay: 3,
            default_driver: None,
            candidate: None,
        },
        Case {
            name: "datasens sort (nearly sorted)",
            command: vec![datasens.clone().into(), "sort".into(), out.clone().into()],
            site: "sort",
            call: 8,
            delay: 3,
            default_driver: Some((
                Path::new(APPS).join("isort.spec"),
                Path::new(APPS).join("isort.c"),
            )),
            candidate: Some(CandidateSource {
                implementation: Path::new(APPS).join("isort.c"),
                cflags: vec!["-O2".into()],
                ..Default::default()
            }),
        },
    ];
    // Region-timing overhead: an empty region and a ~200 ns one, plain runs
    // against restored copies (each copy measures and subtracts its own
    // empty-region cost).
    for (name, site) in [
        ("datasens empty region", "empty"),
        ("datasens ~200 ns region", "short"),
    ] {
        cases.push(Case {
            name,
            command: vec![datasens.clone().into(), "tiny".into(), out.clone().into()],
            site,
            call: 8,
            delay: 3,
            default_driver: None,
            candidate: None,
        });
    }
    let deps = std::env::var_os("TDG_DEPS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.deps")));
    let bz = deps.join("bzip2-ckpt");
    if bz.join("bzip2").is_file() {
        let input = work.path().join("manual.ps");
        std::fs::copy(bz.join("manual.ps"), &input).expect("copy manual.ps");
        cases.push(Case {
            name: "bzip2 -9 mainQSort3 call 550",
            command: vec![bz.join("bzip2").into(), "-kf9".into(), input.into()],
            site: "mainQSort3",
            call: 550,
            delay: 3,
            default_driver: None,
            candidate: Some(CandidateSource {
                implementation: Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("apps/bzip2-mainQSort3-candidate.c"),
                cflags: vec!["-O2".into(), format!("-I{}", bz.join("src").display())],
                ..Default::default()
            }),
        });
    } else {
        eprintln!(
            "bench: {} missing (run scripts/setup); skipping bzip2",
            bz.display()
        );
    }

    let mut rows = Vec::new();
    for case in &cases {
        eprintln!("bench: {} ...", case.name);
        rows.push(bench_case(case, &criu, &images, rounds, per_round));
    }
    print_tables(&rows, rounds * per_round);
    if let Some(bz_case) = cases.iter().find(|c| c.site == "mainQSort3") {
        eprintln!("bench: bzip2 per-call sweep ...");
        call_sweep(bz_case, &criu, &images, per_round);
    }
    let _ = std::fs::remove_dir_all(&images);
}

/// Seed 003 Fig. 11(b): several distinct calls of the routine, each captured
/// (delayed and immediate) and timed, against the in-app time of that call.
fn call_sweep(case: &Case, criu: &checkpoint::Criu, images: &Path, samples: usize) {
    println!("Per-call sweep: bzip2 mainQSort3, wall-clock medians of {samples} samples per cell");
    println!(
        "{:>6} {:>12} {:>22} {:>22}",
        "call", "in-app", "delayed (ratio)", "immediate (ratio)"
    );
    for call in [300u64, 450, 500, 548, 550, 552, 600] {
        let c = Case {
            name: case.name,
            command: case.command.clone(),
            site: case.site,
            call,
            delay: case.delay,
            default_driver: None,
            candidate: None,
        };
        let row = bench_case(&c, criu, images, 1, samples);
        let base = Column::med(&row.in_app.region_wall);
        let cell = |col: &Column| {
            let v = Column::med(&col.region_wall);
            format!("{} ({:.2}x)", human_ns(v), v / base)
        };
        println!(
            "{:>6} {:>12} {:>22} {:>22}",
            call,
            human_ns(base),
            cell(&row.delayed),
            cell(&row.immediate)
        );
    }
    println!();
}

fn bench_case(
    case: &Case,
    criu: &checkpoint::Criu,
    images: &Path,
    rounds: usize,
    per_round: usize,
) -> Row {
    let capture_at = |delay: u64, name: &str| -> (PathBuf, f64, f64) {
        let image = images.join(name);
        let started = Instant::now();
        let outcome = capture(
            &CaptureRequest {
                command: case.command.clone(),
                image: image.clone(),
                site: Some(case.site.into()),
                call: case.call,
                delay,
                timeout: Some(Duration::from_secs(600)),
                quiet: true,
                preload: None,
            },
            criu,
        )
        .unwrap_or_else(|e| fail(&e.to_string()));
        let mib = outcome.manifest.image_bytes() as f64 / (1024.0 * 1024.0);
        (image, started.elapsed().as_secs_f64() * 1e3, mib)
    };
    let (delayed_img, capture_ms, image_mib) =
        capture_at(case.delay, &format!("{}-delayed", case.site));
    let (immediate_img, _, _) = capture_at(0, &format!("{}-immediate", case.site));
    let built = case.default_driver.as_ref().map(|(spec, imp)| {
        let spec = spec_lang::load(spec).unwrap_or_else(|e| fail(&e.to_string()));
        let opts = driver_gen::RunOptions {
            timing: driver_gen::TimingOverrides {
                samples: Some(per_round as u32),
                ..Default::default()
            },
            ..Default::default()
        };
        let b =
            driver_gen::build_driver(&spec, imp, &opts).unwrap_or_else(|e| fail(&e.to_string()));
        (b, opts)
    });
    let opts = TimeOptions {
        samples: per_round,
        criu: Some(criu.clone()),
        ..Default::default()
    };
    let candidate_opts = case.candidate.as_ref().map(|source| TimeOptions {
        candidate: Some(
            build_candidate(source, images, case.site).unwrap_or_else(|e| fail(&e.to_string())),
        ),
        ..opts.clone()
    });
    let mut row = Row {
        name: case.name,
        in_app: Column::default(),
        delayed: Column::default(),
        immediate: Column::default(),
        driver: built.as_ref().map(|_| Column::default()),
        candidate: candidate_opts.as_ref().map(|_| Column::default()),
        capture_ms,
        image_mib,
    };
    for _ in 0..rounds {
        let r = measure_in_app(&InAppRequest {
            command: case.command.clone(),
            site: Some(case.site.into()),
            call: case.call,
            runs: per_round,
            timeout: Some(Duration::from_secs(600)),
            preload: None,
        })
        .unwrap_or_else(|e| fail(&e.to_string()));
        row.in_app
            .region_wall
            .extend(r.samples_ns.iter().map(|&n| n as f64));
        row.in_app
            .region_cpu
            .extend(r.samples_cpu_ns.iter().map(|&n| n as f64));
        row.in_app.cost_ms.push(r.run_wall_ms.median);
        for (img, col) in [
            (&delayed_img, &mut row.delayed),
            (&immediate_img, &mut row.immediate),
        ] {
            let t = time_image(img, &opts).unwrap_or_else(|e| fail(&e.to_string()));
            col.region_wall
                .extend(t.samples_ns.iter().map(|&n| n as f64));
            col.region_cpu
                .extend(t.samples_cpu_ns.iter().map(|&n| n as f64));
            col.cost_ms.push(t.restore_wall_ms.median);
        }
        if let (Some(o), Some(col)) = (&candidate_opts, row.candidate.as_mut()) {
            let t = time_image(&delayed_img, o).unwrap_or_else(|e| fail(&e.to_string()));
            col.region_wall
                .extend(t.samples_ns.iter().map(|&n| n as f64));
            col.region_cpu
                .extend(t.samples_cpu_ns.iter().map(|&n| n as f64));
            col.cost_ms.push(t.restore_wall_ms.median);
        }
        if let (Some((b, o)), Some(col)) = (&built, row.driver.as_mut()) {
            let started = Instant::now();
            let rep = b.run(o).unwrap_or_else(|e| fail(&e.to_string()));
            col.cost_ms
                .push(started.elapsed().as_secs_f64() * 1e3 / per_round as f64);
            col.region_wall.extend(rep.samples_ns.iter().copied());
        }
    }
    row
}

fn print_tables(rows: &[Row], n: usize) {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "tdg checkpoint bench: medians of {n} samples per cell, columns interleaved in rounds"
    );
    println!(
        "machine load average (1/5/15 min): {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!();
    println!("Cost of one timing sample (wall time, median), as in seed 003 Table 1");
    println!(
        "{:<34} {:>11} {:>13} {:>15} {:>24} {:>15} {:>13} {:>8}",
        "routine",
        "whole run",
        "delayed ckpt",
        "immediate ckpt",
        "candidate (vs delayed)",
        "default driver",
        "capture once",
        "image"
    );
    for r in rows {
        let d = r
            .driver
            .as_ref()
            .map(|c| format!("{:.1} ms", Column::med(&c.cost_ms)))
            .unwrap_or_else(|| "n/a".into());
        let delayed_cost = Column::med(&r.delayed.cost_ms);
        let c = r
            .candidate
            .as_ref()
            .map(|c| {
                let v = Column::med(&c.cost_ms);
                format!("{v:.1} ms ({:.2}x)", v / delayed_cost)
            })
            .unwrap_or_else(|| "n/a".into());
        println!(
            "{:<34} {:>8.1} ms {:>10.1} ms {:>12.1} ms {:>24} {:>15} {:>10.1} ms {:>4.1} MiB",
            r.name,
            Column::med(&r.in_app.cost_ms),
            delayed_cost,
            Column::med(&r.immediate.cost_ms),
            c,
            d,
            r.capture_ms,
            r.image_mib
        );
    }
    println!();
    for (clock, pick) in [("wall", 0usize), ("CPU", 1usize)] {
        println!("Region time, {clock} clock (median; ratio to the in-app median in parentheses)");
        println!(
            "{:<34} {:>12} {:>22} {:>22} {:>22} {:>24}",
            "routine",
            "in-app",
            "delayed ckpt",
            "immediate ckpt",
            "candidate (delayed)",
            "default driver (random)"
        );
        for r in rows {
            let get = |c: &Column| {
                Column::med(if pick == 0 {
                    &c.region_wall
                } else {
                    &c.region_cpu
                })
            };
            let base = get(&r.in_app);
            let cell = |v: f64| format!("{} ({:.2}x)", human_ns(v), v / base);
            let d = match (&r.driver, pick) {
                (Some(c), 0) => cell(Column::med(&c.region_wall)),
                (Some(_), _) => "(wall only)".into(),
                (None, _) => "n/a".into(),
            };
            let c = r
                .candidate
                .as_ref()
                .map(|c| cell(get(c)))
                .unwrap_or_else(|| "n/a".into());
            println!(
                "{:<34} {:>12} {:>22} {:>22} {:>22} {:>24}",
                r.name,
                human_ns(base),
                cell(get(&r.delayed)),
                cell(get(&r.immediate)),
                c,
                d
            );
        }
        println!();
    }
}

fn build_datasens(dir: &Path) -> PathBuf {
    let lib = checkpoint::write_host_library(&dir.join("hostlib")).expect("host library");
    let cc = toolchain::CCompiler::find(None).unwrap_or_else(|e| fail(&e.to_string()));
    let exe = dir.join("datasens");
    checkpoint::build_with_host_library(
        &cc,
        &lib,
        &[
            Path::new(APPS).join("datasens.c"),
            Path::new(APPS).join("isort.c"),
        ],
        &exe,
        &["-O2"],
    )
    .unwrap_or_else(|e| fail(&e.to_string()));
    exe
}

/// The images directory (in RAM), removed by `fail` too: a failed bench
/// must not leave hundreds of MiB in /dev/shm.
static IMAGES: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

fn fail(msg: &str) -> ! {
    if let Some(dir) = IMAGES.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
    eprintln!("bench-checkpoint: {msg}");
    std::process::exit(1)
}
