//! Hidden writes of samples replayed in place (real CRIU; root and
//! `scripts/setup`, as in CI): a threaded routine that builds a table on its
//! first call and only reads it afterwards leaves state the next call reads,
//! which putting back the outputs and the stack does not undo. Before the
//! schedule each implementation runs twice with the pages it writes
//! tracked; a page the first run wrote and the second did not is found, the
//! copy says so and tdg restores once per sample, where every sample is a
//! first call, as the application's was. The same holds for a candidate,
//! and an image whose table is already built samples in place as before.

mod common;

use checkpoint::{build_candidate, capture, time_image, CandidateSource, TimeOptions};
use common::{criu, exclusive, opts, request, Workspace};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

const N: usize = 100_000;
const CALLS: u64 = 5;

fn build(ws: &Workspace) -> PathBuf {
    ws.build_app(&["omp_table.c"], "omp_table", &["-fopenmp", "-rdynamic"])
}

fn capture_at(ws: &Workspace, exe: &Path, name: &str, call: u64, delay: u64) -> PathBuf {
    capture_with(ws, exe, name, call, delay, "passive", &[])
}

/// `omp_table CALLS N extra...` under OMP_WAIT_POLICY=`policy`, captured.
fn capture_with(
    ws: &Workspace,
    exe: &Path,
    name: &str,
    call: u64,
    delay: u64,
    policy: &str,
    extra: &[OsString],
) -> PathBuf {
    let image = ws.image(name);
    let mut command: Vec<OsString> = vec![
        "/usr/bin/env".into(),
        "OMP_NUM_THREADS=2".into(),
        format!("OMP_WAIT_POLICY={policy}").into(),
        exe.into(),
        CALLS.to_string().into(),
        N.to_string().into(),
    ];
    command.extend(extra.iter().cloned());
    capture(
        &request(command, image.clone(), "lookup", call, delay),
        &criu(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    image
}

/// The timed call is the application's first: it builds the table. Found
/// in every run, confirmed at the same page on a fresh restore, named, and
/// each sample is then a restore of its own.
#[test]
fn a_table_built_on_the_first_call_is_found_and_each_sample_restores() {
    let _alone = exclusive();
    let ws = Workspace::new("hidden-first");
    let exe = build(&ws);
    let image = capture_at(&ws, &exe, "first", 1, 0);
    for run in 0..2 {
        let r = time_image(&image, &opts(4)).unwrap_or_else(|e| panic!("{e}"));
        let why = r.fallback.as_deref().unwrap_or("");
        assert!(
            why.contains("the timed call wrote")
                && why.contains("on its first run that its 3 later run(s) did not write again")
                && why.contains("a table or a cache built once"),
            "run {run}: {}",
            r.render_text()
        );
        assert!(
            why.contains("flagged again at the same page on a fresh restore (2 restores)"),
            "run {run}: {}",
            r.render_text()
        );
        assert_eq!(r.sampling, "restore", "run {run}: {}", r.render_text());
        assert_eq!(
            (r.samples_ns.len(), r.restores),
            (4, 6),
            "two restores checked, then one per sample: {}",
            r.render_text()
        );
        assert!(r
            .render_text()
            .contains("one restore per sample: the timed call wrote"));
    }
}

/// The table is built by call 1, before the checkpoint at call 3: the timed
/// call only reads it, both check runs agree, and the samples are replayed
/// in place. A candidate with a table of its own, whose first call is the
/// timed one (an immediate checkpoint), is found as the application's
/// routine would be.
#[test]
fn a_candidate_that_builds_its_own_table_is_found_and_a_built_one_is_not() {
    let _alone = exclusive();
    let ws = Workspace::new("hidden-later");
    let exe = build(&ws);
    let image = capture_at(&ws, &exe, "later", 3, 0);
    let r = time_image(&image, &opts(8)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.sampling, "in-place", "{}", r.render_text());
    assert!(r.fallback.is_none(), "{}", r.render_text());
    let p = r.in_place.unwrap();
    assert_eq!(p.checked, 1, "{p:?}");
    assert!(
        r.render_text()
            .contains("each implementation ran twice first"),
        "{}",
        r.render_text()
    );

    let src = ws.dir.path().join("lookup_cached.c");
    std::fs::write(
        &src,
        "static double table[1 << 16];\nstatic int ready;\n\
         void lookup(int n, const double *x, double *out) {\n\
           if (!ready) {\n\
         #pragma omp parallel for schedule(static)\n\
             for (int i = 0; i < (1 << 16); i++) {\n\
               double v = 0.0, t = 1.0 + i * 1e-5;\n\
               for (int k = 1; k <= 400; k++) { t = t * 1.0000001 + 1.0 / (k + t); v += t / k; }\n\
               table[i] = v;\n\
             }\n\
             ready = 1;\n\
           }\n\
         #pragma omp parallel for schedule(static)\n\
           for (int i = 0; i < n; i++) out[i] = table[(unsigned)(x[i] * 7919.0) & ((1 << 16) - 1)];\n\
         }\n",
    )
    .unwrap();
    let candidate = build_candidate(
        &CandidateSource {
            implementation: src,
            extra: Vec::new(),
            cflags: vec!["-O2".into(), "-fopenmp".into()],
            defines: Vec::new(),
            cc: None,
        },
        ws.dir.path(),
        "candidate",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let r = time_image(
        &image,
        &TimeOptions {
            candidate: Some(candidate),
            ..opts(4)
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let why = r.fallback.as_deref().unwrap_or("");
    assert!(
        why.contains("candidate 1's timed call wrote")
            && why.contains("later run(s) did not write again"),
        "{}",
        r.render_text()
    );
    assert_eq!(r.sampling, "restore", "{}", r.render_text());
}

/// A first-call write that one restore makes and a fresh one does not (the
/// call fills a page when it creates a marker file: the first restore's
/// first check run creates it, the second restore finds it) is not state a
/// later call reads: the fresh restore's check passes, the samples are
/// replayed in place, and the report names the unconfirmed flag.
#[test]
fn a_first_call_write_a_fresh_restore_does_not_repeat_is_named_not_a_fallback() {
    let _alone = exclusive();
    let ws = Workspace::new("hidden-unconfirmed");
    let exe = build(&ws);
    let marker = ws.dir.path().join("marker");
    // The table is built by call 1; the marker too, removed after capture.
    let image = capture_with(
        &ws,
        &exe,
        "marked",
        3,
        0,
        "passive",
        &[marker.clone().into()],
    );
    std::fs::remove_file(&marker).expect("the application created the marker");
    let r = time_image(&image, &opts(6)).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        marker.exists(),
        "the first restore's check run created the marker"
    );
    assert_eq!(r.sampling, "in-place", "{}", r.render_text());
    assert!(r.fallback.is_none(), "{}", r.render_text());
    assert_eq!(
        (r.samples_ns.len(), r.restores),
        (6, 2),
        "the flagging restore, then the fresh one that took the samples: {}",
        r.render_text()
    );
    let note = r.hidden_unconfirmed.as_deref().unwrap_or("");
    assert!(
        note.contains("flagged the timed call at 0x")
            && note.contains("a fresh restore's check did not flag it again"),
        "{}",
        r.render_text()
    );
    assert!(r
        .render_text()
        .contains("not confirmed: the hidden-write check"));
}

/// The kernel writes the CPU a thread runs on into its restartable-sequences
/// area (in glibc's thread descriptor, for the main thread an anonymous
/// page below libc) whenever the thread comes back after a preemption or a
/// migration: on a loaded host the first check run was preempted and the
/// quick later ones were not, and that page was flagged as a hidden write
/// (1 run in 4 at load 6-7). Here the first check run of each restore moves
/// the calling thread to another CPU (deterministically what a preemption
/// does at random; the pool spins, so the thread does not block, which
/// would write the area on every run): not flagged, no second restore.
#[test]
fn a_cpu_migration_in_the_first_check_run_is_not_a_hidden_write() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("SKIPPED a_cpu_migration_in_the_first_check_run_is_not_a_hidden_write: one CPU, nowhere to move to");
        return;
    }
    let _alone = exclusive();
    let ws = Workspace::new("hidden-rseq");
    let exe = build(&ws);
    let marker = ws.dir.path().join("marker");
    let image = capture_with(
        &ws,
        &exe,
        "migrate",
        3,
        0,
        "active",
        &[marker.clone().into(), "migrate".into()],
    );
    for run in 0..3 {
        std::fs::remove_file(&marker).expect("the application or the last run created the marker");
        let r = time_image(&image, &opts(4)).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            marker.exists(),
            "run {run}: the first check run moved the thread"
        );
        assert_eq!(r.sampling, "in-place", "run {run}: {}", r.render_text());
        assert_eq!(
            (r.restores, r.hidden_unconfirmed.as_deref()),
            (1, None),
            "run {run}: nothing flagged: {}",
            r.render_text()
        );
    }
}
