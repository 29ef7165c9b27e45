//! Checkpoints of threaded applications: an OpenMP program's image cannot
//! take its samples by fork (fork copies only the calling thread), so the
//! restored copy replays the timed call in place, its team parked in
//! libgomp's pool between samples. These tests prove that the samples ran
//! on the image with its two threads, that they cost far less than a
//! restore each (measured side by side), that putting the outputs back is
//! checked, and that a candidate runs there with a team of its own.
//! Real CRIU: needs root and `scripts/setup`.

mod common;

use checkpoint::{
    build_candidate, capture, time_image, CandidateSource, ImageTimer, TimeOptions, TimingReport,
};
use common::{criu, exclusive, opts, request, Workspace};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Doubles per array: two arrays of 2 MiB, more than one core's L2 on
/// either host kind, so the two threads' halves are real work.
const N: usize = 262_144;
const CALLS: u64 = 8;
const CALL: u64 = 6;
const DELAY: u64 = 2;

fn build(ws: &Workspace) -> PathBuf {
    ws.build_app(&["omp_region.c"], "omp_region", &["-fopenmp", "-rdynamic"])
}

/// `env OMP_NUM_THREADS=threads OMP_WAIT_POLICY=passive omp_region ...`:
/// passive, so a parked worker sleeps and accrues no CPU time; a busy
/// thread is then one that worked in the timed call.
fn command(exe: &Path, threads: usize, extra: &[&str]) -> Vec<OsString> {
    let mut c: Vec<OsString> = vec![
        "/usr/bin/env".into(),
        format!("OMP_NUM_THREADS={threads}").into(),
        "OMP_WAIT_POLICY=passive".into(),
        exe.into(),
        CALLS.to_string().into(),
        N.to_string().into(),
    ];
    c.extend(extra.iter().map(OsString::from));
    c
}

fn capture_image(ws: &Workspace, exe: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let image = ws.image(name);
    let req = request(command(exe, 2, extra), image.clone(), "update", CALL, DELAY);
    capture(&req, &criu()).unwrap_or_else(|e| panic!("{e}"));
    image
}

fn time(image: &Path, o: &TimeOptions) -> TimingReport {
    time_image(image, o).unwrap_or_else(|e| panic!("{e}"))
}

fn restore_per_sample(samples: usize) -> TimeOptions {
    TimeOptions {
        restore_per_sample: true,
        ..opts(samples)
    }
}

/// Every sample ran with both threads of the team present, and the two
/// worked together in the timed calls. Which thread takes how much of one
/// call is the scheduler's: a worker woken late (the first call after the
/// restore finds it asleep in the kernel; on a loaded host any call can)
/// leaves the loop to the calling thread, so a call may count one busy
/// thread (with a restore per sample, every call is a first one); the
/// worker is a real one when some call counts both.
fn assert_team_of_two(r: &TimingReport, what: &str) {
    let n = r.samples_ns.len();
    assert!(n >= 2, "{what}: {n} samples");
    assert_eq!(r.samples_threads, vec![2; n], "{what}: threads per sample");
    let busy = &r.samples_busy_threads;
    assert!(
        busy.iter().all(|b| (1..=2).contains(b)),
        "{what}: threads that worked in each timed call: {busy:?}"
    );
    assert!(
        busy.contains(&2),
        "{what}: both threads worked in a timed call: {busy:?}"
    );
}

#[test]
fn an_openmp_image_is_sampled_in_place_with_its_team_for_far_less_than_a_restore_each() {
    let _alone = exclusive();
    let ws = Workspace::new("threads");
    let exe = build(&ws);
    let image = capture_image(&ws, &exe, "omp", &[]);

    // Side by side, interleaved: one restore replaying 40 samples in place,
    // then 4 samples of one restore each, twice.
    let (mut in_place, mut restored) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        in_place.push(time(&image, &opts(40)));
        restored.push(time(&image, &restore_per_sample(4)));
    }
    for r in &in_place {
        assert_eq!(r.sampling, "in-place", "{}", r.render_text());
        assert_eq!(r.restores, 1, "{}", r.render_text());
        assert!(r.fallback.is_none(), "{}", r.render_text());
        assert_eq!(r.samples_ns.len(), 40);
        assert_team_of_two(r, "in place");
        let put_back = r.in_place.expect("what was put back");
        assert_eq!(put_back.output_bytes, (N * 8) as u64, "the declared a[N]");
        assert_eq!(put_back.threads, 2);
        // After the first sample every page the call touches is there.
        assert!(
            r.samples_minflt[1..].iter().all(|&f| f == 0),
            "page faults in later timed calls: {:?}",
            r.samples_minflt
        );
    }
    for r in &restored {
        assert_eq!(r.sampling, "restore", "{}", r.render_text());
        assert_eq!(r.restores, 4);
        assert_team_of_two(r, "one restore per sample");
    }
    let cost = |v: &[TimingReport]| {
        stats::Summary::of(&v.iter().map(|r| r.cost_per_sample_ms).collect::<Vec<_>>())
            .unwrap()
            .median
    };
    // The least sample of each path: a loaded host slows some samples of
    // either path, never all of them.
    let region = |v: &[TimingReport]| {
        stats::Summary::of(
            &v.iter()
                .flat_map(|r| r.samples_ns.iter().map(|&n| n as f64))
                .collect::<Vec<_>>(),
        )
        .unwrap()
        .min
    };
    let (c_in, c_re) = (cost(&in_place), cost(&restored));
    let (t_in, t_re) = (region(&in_place), region(&restored));
    eprintln!(
        "omp update, 2 threads: cost per sample {c_in:.2} ms in place, {c_re:.2} ms one restore each ({:.1}x); region least {:.1} us in place, {:.1} us restored",
        c_re / c_in,
        t_in / 1e3,
        t_re / 1e3
    );
    assert!(
        c_in * 5.0 < c_re,
        "in place {c_in:.2} ms per sample is not far below a restore per sample ({c_re:.2} ms)"
    );
    // The same call on the same data and team: the two paths do the same
    // work (the in-place samples follow the previous sample, the restored
    // ones the delay calls; both leave the arrays where the application had
    // them). A path that skipped the work would be off by far more than
    // that (the team is checked above); how close the two time it is a benchmark
    // (scripts/bench-checkpoint-threads), not this test.
    assert!(
        t_in < 2.0 * t_re && t_re < 2.0 * t_in,
        "region least in place {t_in:.0} ns against {t_re:.0} ns restored"
    );
    eprintln!("{}", in_place[0].render_text());
}

/// A call that writes memory it reads on the next call besides its declared
/// output (here b) cannot be replayed in place: the second sample's output
/// differs from the first's, the copy says so, and tdg restores per sample.
#[test]
fn a_call_that_writes_undeclared_memory_it_reads_falls_back_to_a_restore_per_sample() {
    let _alone = exclusive();
    let ws = Workspace::new("threads-undeclared");
    let exe = build(&ws);
    let image = capture_image(&ws, &exe, "undeclared", &["undeclared"]);
    let r = time(&image, &opts(3));
    let why = r.fallback.as_deref().unwrap_or("");
    assert!(
        why.contains("sample 2 replayed in place wrote other outputs than the first sample")
            && why.contains("reads memory it writes besides its declared outputs"),
        "{}",
        r.render_text()
    );
    assert_eq!(r.sampling, "restore", "{}", r.render_text());
    assert_eq!(r.samples_ns.len(), 3);
    assert_eq!(
        r.restores,
        1 + 3,
        "the in-place attempt, then one restore per sample"
    );
    assert_team_of_two(&r, "after the fallback");
}

/// Whether samples ran in place. The other outcome this allows is the
/// hidden-write check's fallback (one restore per sample), which is
/// conservative: a page the first call wrote and later calls did not
/// (seen at load 6-7: the original's first call after the restore, in
/// anonymous memory, 1 run in 4) costs restores, never a wrong time. It is
/// said loudly; any other way of not running in place fails.
fn ran_in_place(sampling: &str, fallback: Option<&str>, what: &str) -> bool {
    if sampling == "in-place" && fallback.is_none() {
        return true;
    }
    let why = fallback.unwrap_or("");
    assert!(
        why.contains("on its first run that its"),
        "{what}: not in place ({sampling}) for another reason: {why}"
    );
    eprintln!("SKIPPED the in-place checks of {what}: the hidden-write check fell back: {why}");
    false
}

/// A candidate built with -fopenmp replaces the application's update in the
/// restored copy and runs with a team of two there: it writes the team size
/// and the thread numbers that took part, the copy's thread clocks show two
/// threads working, and its outputs equal the application's. A tune round
/// (original and candidate interleaved in one restore) is replayed in place
/// too.
#[test]
fn an_openmp_candidate_runs_with_its_threads_on_the_threaded_image() {
    let _alone = exclusive();
    let ws = Workspace::new("threads-candidate");
    let exe = build(&ws);
    let image = capture_image(&ws, &exe, "cand", &[]);
    let build_with = |flags: &[&str], name: &str| {
        let marker = ws.dir.path().join(format!("{name}.txt"));
        let mut cflags = vec!["-O2".to_string()];
        cflags.extend(flags.iter().map(|f| f.to_string()));
        let so = build_candidate(
            &CandidateSource {
                implementation: Path::new(common::APPS).join("omp_update_candidate.c"),
                cflags,
                defines: vec![("MARKER".into(), format!("\"{}\"", marker.display()))],
                ..Default::default()
            },
            ws.dir.path(),
            name,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        (so, marker)
    };
    let (candidate, marker) = build_with(&["-fopenmp"], "parallel");

    let r = time(
        &image,
        &TimeOptions {
            candidate: Some(candidate.clone()),
            ..opts(12)
        },
    );
    ran_in_place(&r.sampling, r.fallback.as_deref(), "the candidate");
    assert_eq!(r.candidate.as_deref(), Some(candidate.source.as_path()));
    assert_team_of_two(&r, "the candidate");
    let lines = std::fs::read_to_string(&marker).unwrap();
    assert_eq!(lines, "team 2 mask 3\n", "one restored copy, a team of two");

    // The control: the same source without -fopenmp is serial (its
    // omp_* calls bind to the application's libgomp); on the same image
    // one thread of two works.
    let (serial, serial_marker) = build_with(&[], "serial");
    let s = time(
        &image,
        &TimeOptions {
            candidate: Some(serial),
            ..opts(6)
        },
    );
    ran_in_place(&s.sampling, s.fallback.as_deref(), "the serial candidate");
    assert_eq!(s.samples_threads, vec![2; 6]);
    assert_eq!(s.samples_busy_threads, vec![1; 6], "{}", s.render_text());
    assert_eq!(
        std::fs::read_to_string(&serial_marker).unwrap(),
        "team 1 mask 1\n"
    );

    let timer = ImageTimer::open(&image, &opts(1)).unwrap();
    let v = timer.verify(&candidate, 0.0).unwrap();
    assert_eq!((v.outputs, v.elements), (1, N as u64), "{v:?}");
    assert!(v.mismatch.is_none(), "{v:?}");

    // One restore, original and candidate in turn, as a tune round runs.
    let schedule: Vec<usize> = (0..10).map(|i| i % 2).collect();
    let taken = timer
        .take_samples(std::slice::from_ref(&candidate), &schedule, false)
        .unwrap();
    assert!(taken.failures.is_empty(), "{:?}", taken.failures);
    let sampling = if taken.fallback.is_none() {
        "in-place"
    } else {
        "restore"
    };
    if ran_in_place(sampling, taken.fallback.as_deref(), "a tune round") {
        assert_eq!(taken.restores, 1, "{:?}", taken.fallback);
        assert!(taken.in_place.is_some());
    }
    let runs: Vec<_> = taken.runs.iter().flatten().collect();
    assert_eq!(runs.len(), schedule.len());
    // The same rule as `assert_team_of_two`: a team of two in every call,
    // both at work in some (a loaded host may wake a worker late).
    let teams: Vec<_> = runs.iter().map(|r| r.team).collect();
    assert!(
        teams
            .iter()
            .all(|t| t.is_some_and(|t| t.threads == 2 && (1..=2).contains(&t.busy_threads))),
        "{teams:?}"
    );
    assert!(
        teams.iter().any(|t| t.is_some_and(|t| t.busy_threads == 2)),
        "{teams:?}"
    );
}
