//! Parallel routines: the team size reaches the routine's runtime, each
//! thread runs on its own CPU, the operands' pages are first written by the
//! threads that use them, CPU time is refused, and two threads beat one in
//! the driver wherever they do in a real OpenMP program calling the same
//! kernel.

mod driver_support;

use driver_gen::{RunError, RunOptions, RunReport};
use driver_support::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The CPUs two threads run on, or `None` (said loudly) on a machine that
/// gives this process fewer than two.
fn two_cpus(test: &str) -> Option<Vec<u32>> {
    let cpus = usable_cpus();
    if cpus.len() < 2 {
        eprintln!("SKIPPED {test}: this process may use {cpus:?}; two threads need two CPUs");
        return None;
    }
    Some(cpus[..2].iter().map(|c| *c as u32).collect())
}

fn openmp_opts() -> RunOptions {
    let mut o = opts();
    o.cflags = vec!["-O2".into(), "-fopenmp".into()];
    o.timing.samples = None;
    o.timing.min_time_ms = Some(20);
    o.timing.max_time_ms = Some(60);
    o
}

fn kernel(name: &str) -> String {
    std::fs::read_to_string(spec_path(name)).unwrap()
}

/// Pages of the triad's three operands at its default size.
fn triad_pages() -> i64 {
    3 * 98304 * 8 / 4096
}

fn check_first_touch(r: &RunReport, what: &str) {
    assert_eq!(r.team.first_touch, "threads", "{what}");
    assert_eq!(r.team.first_touch_faults.len(), 2, "{what}: {:?}", r.team);
    // Each thread wrote its half of every operand first, so the kernel
    // charged it at least one fault for most of the pages of that half.
    for (k, faults) in r.team.first_touch_faults.iter().enumerate() {
        assert!(
            *faults >= triad_pages() * 2 / 5,
            "{what}: thread {k} first-touched {faults} pages of {}'s halves: {:?}",
            triad_pages(),
            r.team.first_touch_faults
        );
    }
}

#[test]
fn two_openmp_threads_run_pinned_after_first_touching_their_pages() {
    let Some(cpus) = two_cpus("two_openmp_threads_run_pinned_after_first_touching_their_pages")
    else {
        return;
    };
    let _heavy = testkit::shared();
    let spec = kernel("omp_triad.spec");
    let imp = kernel("omp_triad.c");
    let o = openmp_opts();
    let kit = build(&spec, &imp, &o);
    let r = kit.run(&o);
    assert_eq!(r.verification.status, "passed");
    assert_eq!(r.team.threads_requested, 2);
    assert!(r.team.openmp);
    assert_eq!(r.team.omp_team, 2, "{:?}", r.team);
    assert_eq!(
        r.team.threads, 2,
        "both threads ran the timed calls: {:?}",
        r.team
    );
    assert_eq!(
        r.team.thread_cpus,
        cpus.iter().map(|c| *c as i32).collect::<Vec<_>>(),
        "thread k on the k-th CPU of the affinity mask"
    );
    assert!(r.flush_all_cpus, "the flush reaches every CPU of the team");
    assert!(
        !r.warnings.iter().any(|w| w.contains("not pinned")),
        "{:?}",
        r.warnings
    );
    check_first_touch(&r, "OpenMP");

    // The switch: the main thread writes every page, the threads none.
    let mut main = o.clone();
    main.timing.first_touch_main = true;
    let m = kit.run(&main);
    assert_eq!(m.team.first_touch, "main");
    assert!(m.team.first_touch_faults.is_empty());

    // One thread: the team size reaches OpenMP and the report says so.
    let mut one = o.clone();
    one.timing.threads = Some(1);
    let s = kit.run(&one);
    assert_eq!((s.team.threads, s.team.omp_team), (1, 1), "{:?}", s.team);
}

#[test]
fn a_serial_routine_asked_for_two_threads_is_reported_as_one() {
    let Some(_) = two_cpus("a_serial_routine_asked_for_two_threads_is_reported_as_one") else {
        return;
    };
    let _heavy = testkit::shared();
    // Built without -fopenmp: the pragma is ignored, the loop is serial.
    let mut o = openmp_opts();
    o.cflags = vec!["-O2".into()];
    let kit = build(&kernel("omp_triad.spec"), &kernel("omp_triad.c"), &o);
    let r = kit.run(&o);
    assert!(!r.team.openmp);
    assert_eq!(
        (r.team.threads_requested, r.team.threads),
        (2, 1),
        "{:?}",
        r.team
    );
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("2 thread(s) asked for, 1 ran") && w.contains("-fopenmp")),
        "{:?}",
        r.warnings
    );
    // Without OpenMP the driver's own pinned threads do the first touch.
    check_first_touch(&r, "pthreads");
}

#[test]
fn cpu_time_is_refused_for_a_parallel_routine() {
    let mut o = opts();
    o.timing.timer = Some(spec_lang::ast::TimerMethod::Cpu);
    o.timing.threads = Some(2);
    let e = try_build(DOT_SPEC, &dot_impl(), &o).err().expect("refused");
    let msg = e.to_string();
    assert!(
        matches!(e, RunError::Model(_))
            && msg.contains("--timer cpu cannot time a routine on 2 threads"),
        "{msg}"
    );
    assert!(msg.contains("--timer cycle or --timer wall"), "{msg}");
    // A driver built without tdg refuses it too, in one line.
    let kit = build(DOT_SPEC, &dot_impl(), &opts());
    let (_, err) = kit.run_raw(&["--threads=2", "--timer=cpu"]);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--timer=cpu cannot time 2 threads"), "{err}");
    // Pins: one per thread, none twice.
    let mut o = opts();
    o.timing.threads = Some(2);
    o.timing.pin_cpus = vec![0];
    let msg = try_build(DOT_SPEC, &dot_impl(), &o)
        .err()
        .unwrap()
        .to_string();
    assert!(msg.contains("need a CPU each but --pin lists 1"), "{msg}");
    o.timing.pin_cpus = vec![0, 0];
    let msg = try_build(DOT_SPEC, &dot_impl(), &o)
        .err()
        .unwrap()
        .to_string();
    assert!(msg.contains("--pin lists CPU 0 twice"), "{msg}");
}

/// An OpenMP program from specs/apps/ built with the kernel it calls.
struct App {
    _dir: tempfile::TempDir,
    exe: PathBuf,
}

fn build_app(app: &str, kernel: &str, defines: &[&str]) -> App {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("app");
    let out = Command::new("gcc")
        .args(["-O2", "-fopenmp"])
        .args(defines)
        .arg(repo().join("specs/apps").join(app))
        .arg(spec_path(kernel))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    App { _dir: dir, exe }
}

/// The program's least call on `threads` threads, each bound to a CPU.
fn app_least_ns(exe: &Path, threads: u32, cpus: &[u32]) -> f64 {
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
    let mut words = text.split_whitespace();
    assert_eq!(words.next(), Some("least_call_ns"), "{text}");
    let ns: f64 = words.next().unwrap().parse().unwrap();
    assert_eq!(words.nth(1), Some(threads.to_string().as_str()), "{text}");
    ns
}

/// The least time of the driver and of the program on one and on two
/// threads, [driver 1, driver 2, program 1, program 2], over `rounds`
/// rounds of the four runs interleaved (noise only ever adds time). Every
/// driver run is checked to have run its team as asked: each thread on its
/// own CPU of `cpus`, each busy while the driver sampled.
fn least_times(spec: &str, imp: &str, app: &App, cpus: &[u32], rounds: usize) -> [f64; 4] {
    let mut o = openmp_opts();
    o.timing.min_time_ms = None;
    o.timing.max_time_ms = None;
    o.timing.pin_cpus = cpus.to_vec();
    let kit = build(&kernel(spec), &kernel(imp), &o);
    let mut least = [f64::INFINITY; 4];
    for _ in 0..rounds {
        for (i, threads) in [1u32, 2].into_iter().enumerate() {
            let mut t = o.clone();
            t.timing.threads = Some(threads);
            let r = kit.run(&t);
            assert_eq!(r.team.threads, threads, "{:?}", r.team);
            let ran_on = &r.team.thread_cpus;
            assert_eq!(ran_on.len(), threads as usize, "{:?}", r.team);
            assert!(
                ran_on.iter().zip(cpus).all(|(a, b)| *a == *b as i32),
                "thread k on the k-th CPU of {cpus:?}: {:?}",
                r.team
            );
            assert!(
                r.team.thread_busy_ms.iter().all(|ms| *ms > 0.0),
                "{:?}",
                r.team
            );
            least[i] = least[i].min(r.reported_ns);
            least[2 + i] = least[2 + i].min(app_least_ns(&app.exe, threads, cpus));
        }
    }
    least
}

/// Two threads run the kernel faster than one in the driver wherever they
/// do in the OpenMP program calling the same kernel. How close the two
/// speedups are is a benchmark, not a test: on a shared 2-vCPU host the
/// ratio of two speedups moves by more than any band a test could hold it
/// to (scripts/bench-threads, docs/benchmarks.md "parallel speedup").
#[test]
fn two_threads_beat_one_in_the_driver_wherever_they_do_in_the_openmp_program() {
    let test = "two_threads_beat_one_in_the_driver_wherever_they_do_in_the_openmp_program";
    let Some(cpus) = two_cpus(test) else {
        return;
    };
    let _serial = exclusive();
    let mut compared = 0;
    for (spec, imp, app) in [
        ("omp_triad.spec", "omp_triad.c", "omp_triad_app.c"),
        ("omp_gemm.spec", "omp_gemm.c", "omp_gemm_app.c"),
    ] {
        let program = build_app(app, imp, &[]);
        let [d1, d2, p1, p2] = least_times(spec, imp, &program, &cpus, 3);
        eprintln!("{spec}: driver {d1:.0} ns on 1 thread, {d2:.0} ns on 2; program {p1:.0} ns, {p2:.0} ns");
        if p2 >= p1 {
            eprintln!(
                "SKIPPED {test} for {spec}: the OpenMP program itself ran no faster on two threads ({p1:.0} ns vs {p2:.0} ns): this host did not give the team two CPUs' worth of time"
            );
            continue;
        }
        compared += 1;
        assert!(
            d2 < d1,
            "{spec}: the program gains from its second thread ({p1:.0} -> {p2:.0} ns) but the driver does not ({d1:.0} -> {d2:.0} ns)"
        );
    }
    eprintln!("{test}: {compared} of 2 kernels compared");
}
