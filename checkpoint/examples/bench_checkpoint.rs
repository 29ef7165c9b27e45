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
//!
//! Checkpoint columns come in two paths: one CRIU restore per sample
//! (`--restore-per-sample`) and one restore whose copy forks a child
//! per sample (the default). A per-phase breakdown of one sample on each
//! path follows the tables; then bzip2's per-call sweep and its delay sweep
//! (how many replayed calls its call 550 needs).

use checkpoint::breakdown::criu_restore_phases;
use checkpoint::{
    build_candidate, capture, measure_in_app, time_image, CandidateSource, CaptureRequest,
    CopyInstructions, ImageTimer, InAppRequest, TimeOptions, TimingReport,
};
use stats::{ns as human_ns, Summary};
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
    /// What one sample costs: a whole run, a restore, or (forked) everything
    /// of the round over its samples.
    cost_ms: Vec<f64>,
    /// Forked: one sample's own cost, fork to the child's exit.
    marginal_ms: Vec<f64>,
    /// Largest minor-fault count inside a timed call.
    max_faults: u64,
}

impl Column {
    fn add(&mut self, t: &TimingReport, forked: bool) {
        self.region_wall
            .extend(t.samples_ns.iter().map(|&n| n as f64));
        self.region_cpu
            .extend(t.samples_cpu_ns.iter().map(|&n| n as f64));
        if forked {
            self.cost_ms.push(t.cost_per_sample_ms);
            self.marginal_ms.push(t.restore_wall_ms.median);
        } else {
            self.cost_ms.push(t.restore_wall_ms.median);
        }
        self.max_faults = self
            .max_faults
            .max(t.samples_minflt.iter().copied().max().unwrap_or(0));
    }
}

impl Column {
    fn med(v: &[f64]) -> f64 {
        Summary::of(v).map(|s| s.median).unwrap_or(f64::NAN)
    }
}

struct Row {
    name: &'static str,
    in_app: Column,
    delayed: Column,
    immediate: Column,
    delayed_fork: Column,
    immediate_fork: Column,
    breakdown: Vec<(String, f64)>,
    driver: Option<Column>,
    candidate: Option<Column>,
    capture_ms: f64,
    image_mib: f64,
}

fn main() {
    let rounds = env_count("BENCH_ROUNDS", 4);
    let per_round = env_count("BENCH_PER_ROUND", 5);
    let criu = checkpoint::find_criu().unwrap_or_else(|e| fail(&e.to_string()));
    let work = tempfile::tempdir().expect("temp dir");
    let images = PathBuf::from(format!("/dev/shm/tdg-bench-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&images).expect("image dir on /dev/shm");
    let _ = IMAGES.set(images.clone());

    let mut cases = datasens_cases(work.path());
    cases.extend(bzip2_cases(work.path()));

    let mut rows = Vec::new();
    for case in &cases {
        eprintln!("bench: {} ...", case.name);
        rows.push(bench_case(case, &criu, &images, rounds, per_round));
    }
    print_tables(&rows, rounds * per_round);
    if let Some(bz_case) = cases.iter().rfind(|c| c.site == "mainQSort3") {
        eprintln!("bench: bzip2 per-call sweep ...");
        call_sweep(bz_case, &criu, &images, per_round);
        eprintln!("bench: bzip2 delay sweep ...");
        delay_sweep(bz_case, &criu, &images);
    }
    let _ = std::fs::remove_dir_all(&images);
}

/// A count from the environment, `default` when unset or not a number.
fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

impl Case {
    /// `site`'s `call` captured `delay` calls early, no driver, no candidate.
    fn plain(
        name: &'static str,
        command: Vec<OsString>,
        site: &'static str,
        call: u64,
        delay: u64,
    ) -> Case {
        Case {
            name,
            command,
            site,
            call,
            delay,
            default_driver: None,
            candidate: None,
        }
    }
}

/// The datasens program (built in `work`): its search and sort, and the
/// region-timing overhead of an empty and a ~200 ns region.
fn datasens_cases(work: &Path) -> Vec<Case> {
    let datasens = build_datasens(work);
    let out = work.join("out.txt");
    let command = |mode: &str| -> Vec<OsString> {
        vec![datasens.clone().into(), mode.into(), out.clone().into()]
    };
    let mut cases = vec![
        Case::plain(
            "datasens search (pointer chase)",
            command("search"),
            "search",
            8,
            3,
        ),
        Case {
            default_driver: Some((
                Path::new(APPS).join("isort.spec"),
                Path::new(APPS).join("isort.c"),
            )),
            candidate: Some(CandidateSource {
                implementation: Path::new(APPS).join("isort.c"),
                cflags: vec!["-O2".into()],
                ..Default::default()
            }),
            ..Case::plain(
                "datasens sort (nearly sorted)",
                command("sort"),
                "sort",
                8,
                3,
            )
        },
    ];
    // Region-timing overhead: an empty region and a ~200 ns one, plain runs
    // against restored copies (each copy measures and subtracts its own
    // empty-region cost).
    for (name, site) in [
        ("datasens empty region", "empty"),
        ("datasens ~200 ns region", "short"),
    ] {
        cases.push(Case::plain(name, command("tiny"), site, 8, 3));
    }
    cases
}

/// bzip2's mainQSort3 call 550 at delays 3 and 40, with a candidate (none
/// when scripts/setup has not built bzip2).
fn bzip2_cases(work: &Path) -> Vec<Case> {
    let deps = std::env::var_os("TDG_DEPS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.deps")));
    let bz = deps.join("bzip2-ckpt");
    if !bz.join("bzip2").is_file() {
        eprintln!(
            "bench: {} missing (run scripts/setup); skipping bzip2",
            bz.display()
        );
        return Vec::new();
    }
    let input = work.join("manual.ps");
    std::fs::copy(bz.join("manual.ps"), &input).expect("copy manual.ps");
    // Delay 3 is the cheap sample; three calls do not rebuild the L3
    // state the sort's ~6 MiB of arrays keep across calls, which forty
    // do (criu_bzip2.rs, DELAY): the two rows show what accuracy costs.
    [
        ("bzip2 mainQSort3 #550, delay 3", 3),
        ("bzip2 mainQSort3 #550, delay 40", 40),
    ]
    .into_iter()
    .map(|(name, delay)| Case {
        candidate: Some(CandidateSource {
            implementation: Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("apps/bzip2-mainQSort3-candidate.c"),
            cflags: vec!["-O2".into(), format!("-I{}", bz.join("src").display())],
            ..Default::default()
        }),
        ..Case::plain(
            name,
            vec![bz.join("bzip2").into(), "-kf9".into(), input.clone().into()],
            "mainQSort3",
            550,
            delay,
        )
    })
    .collect()
}

/// Seed 003 Fig. 11(b): several distinct calls of the routine, each captured
/// (delayed and immediate) and timed, against the in-app time of that call.
fn call_sweep(case: &Case, criu: &checkpoint::Criu, images: &Path, samples: usize) {
    println!(
        "Per-call sweep: bzip2 mainQSort3, delay {}, wall-clock medians of {samples} samples per cell",
        case.delay
    );
    println!(
        "{:>6} {:>12} {:>22} {:>22}",
        "call", "in-app", "delayed (ratio)", "immediate (ratio)"
    );
    for call in [300u64, 450, 500, 548, 550, 552, 600] {
        let c = Case::plain(case.name, case.command.clone(), case.site, call, case.delay);
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

/// `case`'s call captured `delay` calls early into `image`: the image, the
/// capture's milliseconds and the image's MiB.
fn capture_image(
    case: &Case,
    criu: &checkpoint::Criu,
    image: &Path,
    delay: u64,
) -> (PathBuf, f64, f64) {
    let started = Instant::now();
    let outcome = capture(
        &CaptureRequest {
            command: case.command.clone(),
            image: image.to_path_buf(),
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
    (
        image.to_path_buf(),
        started.elapsed().as_secs_f64() * 1e3,
        mib,
    )
}

/// How long a delay `case`'s call needs: captured at delays 3, 10, 20 and
/// 40, then fifteen rounds of one plain run and three forked samples of one
/// restore of each image, CPU times. The fast moments, when the host's
/// tenants leave the routine's data in the L3, are where too short a delay
/// shows, so the table gives the low quantiles and the share of samples
/// within 10 % of the fastest plain run (criu_bzip2.rs's DELAY).
fn delay_sweep(case: &Case, criu: &checkpoint::Criu, images: &Path) {
    const DELAYS: [u64; 4] = [3, 10, 20, 40];
    let captured: Vec<PathBuf> = DELAYS
        .iter()
        .map(|&d| {
            capture_image(
                case,
                criu,
                &images.join(format!("{}-sweep{d}", case.site)),
                d,
            )
            .0
        })
        .collect();
    let opts = TimeOptions {
        samples: 3,
        criu: Some(criu.clone()),
        ..Default::default()
    };
    let mut in_app = Vec::new();
    let mut on_image = vec![Vec::new(); DELAYS.len()];
    for _ in 0..15 {
        let r = measure_in_app(&InAppRequest {
            command: case.command.clone(),
            site: Some(case.site.into()),
            call: case.call,
            runs: 1,
            timeout: Some(Duration::from_secs(600)),
            preload: None,
        })
        .unwrap_or_else(|e| fail(&e.to_string()));
        in_app.extend(r.samples_cpu_ns.iter().map(|&n| n as f64));
        for (image, samples) in captured.iter().zip(&mut on_image) {
            let t = time_image(image, &opts).unwrap_or_else(|e| fail(&e.to_string()));
            samples.extend(t.samples_cpu_ns.iter().map(|&n| n as f64));
        }
    }
    let quantile = |v: &[f64], q: f64| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[((v.len() - 1) as f64 * q).round() as usize]
    };
    let fast = quantile(&in_app, 0.0) * 1.1;
    println!(
        "Delay sweep: {} call {}, CPU time, 15 rounds of one plain run and 3 forked samples per image",
        case.site, case.call
    );
    println!(
        "{:>9} {:>12} {:>12} {:>12} {:>12}  within 10 % of the fastest plain run",
        "", "min", "q10", "q25", "median"
    );
    let rows = std::iter::once(("in-app".to_string(), &in_app)).chain(
        DELAYS
            .iter()
            .zip(&on_image)
            .map(|(d, v)| (format!("delay {d}"), v)),
    );
    for (label, v) in rows {
        let share = v.iter().filter(|&&x| x <= fast).count() as f64 / v.len() as f64;
        println!(
            "{label:>9} {:>12} {:>12} {:>12} {:>12}  {:>5.0} %",
            human_ns(quantile(v, 0.0)),
            human_ns(quantile(v, 0.1)),
            human_ns(quantile(v, 0.25)),
            human_ns(quantile(v, 0.5)),
            share * 100.0
        );
    }
    println!();
}

/// How each column's samples are taken: one restore each, forked from one
/// restore, and forked running the candidate (if the case has one).
struct ColumnOptions {
    restore: TimeOptions,
    fork: TimeOptions,
    candidate: Option<TimeOptions>,
}

impl ColumnOptions {
    fn new(case: &Case, criu: &checkpoint::Criu, images: &Path, per_round: usize) -> Self {
        let restore = TimeOptions {
            samples: per_round,
            criu: Some(criu.clone()),
            restore_per_sample: true,
            ..Default::default()
        };
        let fork = TimeOptions {
            restore_per_sample: false,
            ..restore.clone()
        };
        let candidate = case.candidate.as_ref().map(|source| TimeOptions {
            candidate: Some(
                build_candidate(source, images, case.site).unwrap_or_else(|e| fail(&e.to_string())),
            ),
            ..fork.clone()
        });
        ColumnOptions {
            restore,
            fork,
            candidate,
        }
    }
}

/// The case's default driver (if it has one), built to take `per_round`
/// samples a run, and the options it runs with.
fn default_driver(
    case: &Case,
    per_round: usize,
) -> Option<(driver_gen::BuiltDriver, driver_gen::RunOptions)> {
    case.default_driver.as_ref().map(|(spec, imp)| {
        let spec = spec_lang::load(spec, &[])
            .and_then(|c| c.for_use(spec_lang::Use::Driver))
            .unwrap_or_else(|e| fail(&e.to_string()));
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
    })
}

/// The two images of a case: delayed and immediate.
struct Images {
    delayed: PathBuf,
    immediate: PathBuf,
}

fn bench_case(
    case: &Case,
    criu: &checkpoint::Criu,
    images: &Path,
    rounds: usize,
    per_round: usize,
) -> Row {
    let capture_at = |delay: u64, name: &str| capture_image(case, criu, &images.join(name), delay);
    let (delayed, capture_ms, image_mib) =
        capture_at(case.delay, &format!("{}-delayed", case.site));
    let (immediate, _, _) = capture_at(0, &format!("{}-immediate", case.site));
    let imgs = Images { delayed, immediate };
    let built = default_driver(case, per_round);
    let opts = ColumnOptions::new(case, criu, images, per_round);
    let mut row = Row {
        name: case.name,
        in_app: Column::default(),
        delayed: Column::default(),
        immediate: Column::default(),
        delayed_fork: Column::default(),
        immediate_fork: Column::default(),
        breakdown: Vec::new(),
        driver: built.as_ref().map(|_| Column::default()),
        candidate: opts.candidate.as_ref().map(|_| Column::default()),
        capture_ms,
        image_mib,
    };
    for _ in 0..rounds {
        bench_round(case, &imgs, &opts, built.as_ref(), per_round, &mut row);
    }
    if rounds > 1 {
        // As many samples per restore as a tuning run takes per image.
        let samples = env_count("BENCH_BREAKDOWN_SAMPLES", 200);
        row.breakdown = breakdown(&imgs.delayed, &opts.fork, samples);
        let whole = Column::med(&row.in_app.cost_ms);
        if let Some((_, cost)) = row.breakdown.last() {
            row.breakdown.push((
                format!("  whole run / cost per sample at {samples} samples per restore"),
                whole / cost,
            ));
        }
    }
    row
}

/// One round of every column, in the same order each round: plain runs,
/// the four image columns, the candidate, the default driver.
fn bench_round(
    case: &Case,
    imgs: &Images,
    opts: &ColumnOptions,
    built: Option<&(driver_gen::BuiltDriver, driver_gen::RunOptions)>,
    per_round: usize,
    row: &mut Row,
) {
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
    for (img, col, o, forked) in [
        (&imgs.delayed, &mut row.delayed, &opts.restore, false),
        (&imgs.delayed, &mut row.delayed_fork, &opts.fork, true),
        (&imgs.immediate, &mut row.immediate, &opts.restore, false),
        (&imgs.immediate, &mut row.immediate_fork, &opts.fork, true),
    ] {
        let t = time_image(img, o).unwrap_or_else(|e| fail(&e.to_string()));
        col.add(&t, forked);
    }
    if let (Some(o), Some(col)) = (&opts.candidate, row.candidate.as_mut()) {
        let t = time_image(&imgs.delayed, o).unwrap_or_else(|e| fail(&e.to_string()));
        col.add(&t, true);
    }
    if let (Some((b, o)), Some(col)) = (built, row.driver.as_mut()) {
        let started = Instant::now();
        let rep = b.run(o).unwrap_or_else(|e| fail(&e.to_string()));
        col.cost_ms
            .push(started.elapsed().as_secs_f64() * 1e3 / per_round as f64);
        col.region_wall.extend(rep.samples_ns.iter().copied());
    }
}

/// Where one sample's time goes on each path (milliseconds), measured on the
/// delayed image: a restore with CRIU's log at level 4 (its phases from the
/// log's timestamps), an empty PID namespace for what unshare and setsid
/// cost, and one forked run of `samples` for the forked phases.
fn breakdown(image: &Path, fork_opts: &TimeOptions, samples: usize) -> Vec<(String, f64)> {
    let mut timer = ImageTimer::open(image, fork_opts).unwrap_or_else(|e| fail(&e.to_string()));
    timer.plan_mut().log_level = 4;
    timer.plan_mut().keep_log = true;
    let run = timer
        .restore(1, &CopyInstructions::default())
        .unwrap_or_else(|e| fail(&e.to_string()));
    let kept = run
        .kept_log
        .clone()
        .unwrap_or_else(|| fail("no restore log kept"));
    let log = std::fs::read_to_string(&kept).unwrap_or_default();
    let _ = std::fs::remove_file(&kept);
    let phases = criu_restore_phases(&log);
    let namespace_ms = empty_namespace_ms(timer.plan_mut());
    let forked = time_image(
        image,
        &TimeOptions {
            samples,
            ..fork_opts.clone()
        },
    )
    .unwrap_or_else(|e| fail(&e.to_string()));
    let p = forked
        .phases_median
        .unwrap_or_else(|| fail("no forked phases"));
    let wall = run.wall.as_secs_f64() * 1e3;
    let mut out = restore_path(wall, namespace_ms, &phases, &forked, &p);
    out.extend(fork_path(&forked, &p));
    out
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// The restore path's lines: the whole sample (`wall` ms), the namespace,
/// CRIU's phases, the copy's replay and timed call, and the rest.
fn restore_path(
    wall: f64,
    namespace_ms: f64,
    phases: &[checkpoint::breakdown::Phase],
    forked: &TimingReport,
    p: &checkpoint::SamplePhases,
) -> Vec<(String, f64)> {
    let criu_ms: f64 = phases.iter().map(|p| p.ms).sum();
    let copy_ms = ms(p.delay_ns) + forked.region_ns.median / 1e6;
    let mut out = vec![
        (
            "restore path: whole sample (restore, replay, exit), CRIU log at level 4".into(),
            wall,
        ),
        (
            "  unshare + setsid + exec (an empty PID namespace)".into(),
            namespace_ms,
        ),
    ];
    for ph in phases {
        out.push((format!("  criu: {}", ph.name), ph.ms));
    }
    out.push((
        "  copy: replayed delay calls + timed call (forked medians)".into(),
        copy_ms,
    ));
    out.push((
        "  rest: copy exit, namespace teardown, tdg's wait".into(),
        wall - namespace_ms - criu_ms - copy_ms,
    ));
    out
}

/// The fork path's lines: one sample's own cost by phase, and what the
/// shared restore adds per sample.
fn fork_path(forked: &TimingReport, p: &checkpoint::SamplePhases) -> Vec<(String, f64)> {
    let marginal = forked.restore_wall_ms.median;
    vec![
        (
            format!(
                "fork path: one sample, end of the previous one to its own (median of {})",
                forked.samples_ns.len()
            ),
            marginal,
        ),
        (
            "  fork() until the child runs (the previous child exits meanwhile)".into(),
            ms(p.fork_ns),
        ),
        (
            format!(
                "  pre-fault {} learned pages ({} faults) + file pages",
                forked.pages.map_or(0, |p| p.written),
                p.prepare_faults,
            ),
            ms(p.prepare_ns - p.flush_ns.min(p.prepare_ns)),
        ),
        (
            format!(
                "  flush the pages a replay touches ({} of {} present)",
                forked.pages.map_or(0, |p| p.flushed),
                forked.pages.map_or(0, |p| p.present)
            ),
            ms(p.flush_ns),
        ),
        ("  replayed delay calls".into(), ms(p.delay_ns)),
        ("  timed call".into(), forked.region_ns.median / 1e6),
        (
            "  rest: hand-offs, reap, offsets put back, the exit the fork did not hide".into(),
            marginal
                - ms(p.fork_ns)
                - ms(p.prepare_ns)
                - ms(p.delay_ns)
                - forked.region_ns.median / 1e6,
        ),
        (
            format!(
                "  per sample over {} samples: the restore and learning pass shared",
                forked.samples_ns.len()
            ),
            forked.cost_per_sample_ms - marginal,
        ),
        ("  = cost per sample".into(), forked.cost_per_sample_ms),
    ]
}

/// Median wall time of an empty restore namespace: the same unshare and
/// setsid a restore runs, around `true`.
fn empty_namespace_ms(plan: &checkpoint::RestorePlan) -> f64 {
    let times: Vec<f64> = (0..11)
        .map(|_| {
            let started = Instant::now();
            let ok = std::process::Command::new(&plan.unshare)
                .args(["--pid", "--fork", "--mount-proc", "--kill-child", "--"])
                .arg(&plan.setsid)
                .args(["--wait", "true"])
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if !ok {
                fail("an empty PID namespace did not start");
            }
            started.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    Column::med(&times)
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
    print_cost_table(rows);
    println!("Minor page faults inside the timed call (largest over all samples)");
    for r in rows {
        println!(
            "{:<32} delayed: restore {}, fork {}; immediate: restore {}, fork {}",
            r.name,
            r.delayed.max_faults,
            r.delayed_fork.max_faults,
            r.immediate.max_faults,
            r.immediate_fork.max_faults
        );
    }
    println!();
    print_region_table(rows, "wall", |c| &c.region_wall);
    print_region_table(rows, "CPU", |c| &c.region_cpu);
    for r in rows.iter().filter(|r| !r.breakdown.is_empty()) {
        println!(
            "Where one sample's time goes: {} (delayed image, ms)",
            r.name
        );
        for (what, ms) in &r.breakdown {
            println!("  {what:<78} {ms:>8.3}");
        }
        println!();
    }
}

/// The cost of one timing sample on each path, a row a case.
fn print_cost_table(rows: &[Row]) {
    println!("Cost of one timing sample (wall time, median), as in seed 003 Table 1");
    println!(
        "  restore: one CRIU restore per sample; fork: one restore per round of {} samples, a fork of the copy each",
        rows.first().map(|r| r.delayed_fork.region_wall.len() / r.delayed_fork.cost_ms.len().max(1)).unwrap_or(0)
    );
    println!("  (cost = the round's whole wall time over its samples; one forked sample's own share in brackets)");
    println!(
        "{:<32} {:>10} {:>11} {:>22} {:>9} {:>11} {:>22} {:>22} {:>12} {:>11} {:>8}",
        "routine",
        "whole run",
        "delayed:rst",
        "delayed:fork",
        "run/fork",
        "immed.:rst",
        "immediate:fork",
        "candidate:fork (vs d)",
        "def. driver",
        "capture",
        "image"
    );
    for r in rows {
        let d = r
            .driver
            .as_ref()
            .map(|c| format!("{:.1} ms", Column::med(&c.cost_ms)))
            .unwrap_or_else(|| "n/a".into());
        let delayed_fork = Column::med(&r.delayed_fork.cost_ms);
        let c = r
            .candidate
            .as_ref()
            .map(|c| {
                let v = Column::med(&c.cost_ms);
                format!("{v:.2} ms ({:.2}x)", v / delayed_fork)
            })
            .unwrap_or_else(|| "n/a".into());
        let fork = |c: &Column| {
            format!(
                "{:.2} ms [{:.2} ms]",
                Column::med(&c.cost_ms),
                Column::med(&c.marginal_ms)
            )
        };
        let whole = Column::med(&r.in_app.cost_ms);
        println!(
            "{:<32} {:>7.1} ms {:>8.1} ms {:>22} {:>8.0}x {:>8.1} ms {:>22} {:>22} {:>12} {:>8.1} ms {:>4.1} MiB",
            r.name,
            whole,
            Column::med(&r.delayed.cost_ms),
            fork(&r.delayed_fork),
            whole / delayed_fork,
            Column::med(&r.immediate.cost_ms),
            fork(&r.immediate_fork),
            c,
            d,
            r.capture_ms,
            r.image_mib
        );
    }
    println!();
}

/// Region times on `clock` (`figures` picks its samples), each with its
/// ratio to the in-app median; the default driver has wall times only.
fn print_region_table(rows: &[Row], clock: &str, figures: fn(&Column) -> &Vec<f64>) {
    println!("Region time, {clock} clock (median; ratio to the in-app median in parentheses)");
    println!(
        "{:<32} {:>11} {:>20} {:>20} {:>20} {:>20} {:>20} {:>22}",
        "routine",
        "in-app",
        "delayed:restore",
        "delayed:fork",
        "immediate:restore",
        "immediate:fork",
        "candidate:fork",
        "default driver"
    );
    let wall = clock == "wall";
    for r in rows {
        let get = |c: &Column| Column::med(figures(c));
        let base = get(&r.in_app);
        let cell = |v: f64| format!("{} ({:.2}x)", human_ns(v), v / base);
        let d = match (&r.driver, wall) {
            (Some(c), true) => cell(Column::med(&c.region_wall)),
            (Some(_), false) => "(wall only)".into(),
            (None, _) => "n/a".into(),
        };
        let c = r
            .candidate
            .as_ref()
            .map(|c| cell(get(c)))
            .unwrap_or_else(|| "n/a".into());
        println!(
            "{:<32} {:>11} {:>20} {:>20} {:>20} {:>20} {:>20} {:>22}",
            r.name,
            human_ns(base),
            cell(get(&r.delayed)),
            cell(get(&r.delayed_fork)),
            cell(get(&r.immediate)),
            cell(get(&r.immediate_fork)),
            c,
            d
        );
    }
    println!();
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
        None,
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
