//! A real open-source program: bzip2 1.0.8, built from Debian's source by
//! scripts/setup.d/50-checkpoint-apps.sh with region markers around the
//! mainQSort3 bucket sorts (seed 003's mainGtU experiment). Call 550 of the
//! region, compressing bzip2's own manual.ps at -9, is captured and timed.
mod common;

use common::*;
use stats::relative_difference;
use std::ffi::OsString;
use std::path::PathBuf;

const CALL: u64 = 550;
/// Forty calls of delay, not three: the sort's ~6 MiB of arrays stay partly
/// in the L3 across many calls when the host's other tenants are quiet, and
/// a few replayed calls do not rebuild that. The delay sweep of
/// `scripts/bench-checkpoint` shows where the samples start to reach the
/// plain runs' fastest share; forty keeps a margin over the delay where
/// they do. When the tenants are busy every delay reads the same as in-app,
/// so a short delay can pass on a busy host and fail on a quiet one.
const DELAY: u64 = 40;

fn bzip2_dir() -> PathBuf {
    let deps = std::env::var_os("TDG_DEPS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.deps")));
    let dir = deps.join("bzip2-ckpt");
    assert!(
        dir.join("bzip2").is_file(),
        "{} is missing: run scripts/setup (scripts/setup.d/50-checkpoint-apps.sh builds it)",
        dir.display()
    );
    dir
}

/// A workspace holding a copy of bzip2's manual.ps, and the command line
/// compressing it at -9 with one of the bzip2 build's programs. -k -f keep
/// the input and (over)write manual.ps.bz2, an output file that keeps
/// growing after the checkpoint.
fn bzip2_workspace(name: &str) -> (Workspace, impl Fn(&str) -> Vec<OsString>) {
    let bz = bzip2_dir();
    let ws = Workspace::new(name);
    let input = ws.dir.path().join("manual.ps");
    std::fs::copy(bz.join("manual.ps"), &input).unwrap();
    (ws, move |exe: &str| {
        os_args(&[&bz.join(exe), &"-kf9", &input])
    })
}

#[test]
fn bzip2_bucket_sort_captured_and_timed_delayed_matches_in_app() {
    // Alone: beside the candidates test the two share the L3 and the second
    // core, and the comparison would measure the neighbour.
    let _serial = exclusive();
    pin_to_one_cpu();
    let (ws, run) = bzip2_workspace("bzip2");
    let command = run("bzip2");
    // One plain run, then three forked samples of one restore of each image,
    // eight times: a shared host's speed changes within milliseconds, so
    // each side gets as many separate moments as the other. (Five plain
    // runs against one restore's five samples would give the plain runs
    // seconds of the host's states and the samples a few milliseconds.)
    // Up to three measurements while the minima disagree, as in
    // criu_accuracy.rs: one unlucky measurement on this shared host is
    // measured again; a real disagreement misses every time.
    let plan = Rounds {
        rounds: 8,
        runs: 1,
        samples: 3,
    };
    let measure =
        || compare_in_app_delayed_immediate(&ws, command.clone(), "mainQSort3", CALL, DELAY, &plan);
    let mut c = measure();
    for attempt in 2..=3 {
        let (in_app, delayed) = (c.in_app.cpu_stats(), c.delayed.cpu_stats());
        if relative_difference(delayed.min, in_app.min) < 0.10 {
            break;
        }
        eprintln!(
            "mainQSort3: minima disagree on measurement {}; measuring again",
            attempt - 1
        );
        c = measure();
    }
    // This region is ~0.6 ms: long enough to be preempted now and then on the
    // shared machine, so the assertion uses CPU time (wall time is printed),
    // and the minimum, as criu_accuracy.rs does: each plain run is a new
    // process on new physical pages, whose median moves with where they
    // land, while the restores of one image reuse each other's pages; the
    // minima are what the two have in common.
    let (in_app, delayed, immediate) = (
        c.in_app.cpu_stats(),
        c.delayed.cpu_stats(),
        c.immediate.cpu_stats(),
    );
    let err = relative_difference(delayed.min, in_app.min);
    eprintln!(
        "bzip2 mainQSort3 call {CALL}: delayed {:+.1}%, immediate {:+.1}% vs in-app \
         (CPU-time minima; medians {:+.1}%, {:+.1}%)",
        (delayed.min / in_app.min - 1.0) * 100.0,
        (immediate.min / in_app.min - 1.0) * 100.0,
        (delayed.median / in_app.median - 1.0) * 100.0,
        (immediate.median / in_app.median - 1.0) * 100.0
    );
    assert!(
        err < 0.10,
        "delayed minimum {:.0} ns is {:.1}% away from in-app {:.0} ns (medians: delayed {:.0} ns, in-app {:.0} ns)",
        delayed.min,
        err * 100.0,
        in_app.min,
        delayed.median,
        in_app.median
    );
    // The restored copies' writes went to substitutes: the real output is a
    // valid bzip2 stream of the input.
    let out = ws.dir.path().join("manual.ps.bz2");
    let check = std::process::Command::new(bzip2_dir().join("bzip2"))
        .arg("-t")
        .arg(&out)
        .status()
        .unwrap();
    assert!(check.success(), "{} was corrupted", out.display());
}

/// Candidates from bzip2's own source on one image against two application
/// builds: mainQSort3 compiled at -O0 and at -O2 as candidates (built from
/// the same blocksort.c) and timed on one image of the -O2 program, against
/// the program built with blocksort.c at -O0 and at -O2 in plain runs. Each
/// candidate is verified against the program's own code on the image, and
/// each really runs there: the -O0 one is slower on the image, as the -O0
/// build is in its plain runs (the -O0/-O2 ratio reads 2.7-5.7 on either
/// side; candidates that did not run would read 1). How near the image's
/// ratio comes to the application's is printed, not asserted: a Zen 3
/// host read 5.73 against 4.22 once, the -O2 build's CPU-time minimum at
/// 0.83 ms in one round and 1.29 ms in the next (docs/benchmarks.md).
#[test]
fn bzip2_candidates_from_its_own_source_run_on_the_image_slower_at_o0_as_in_app() {
    let bz = bzip2_dir();
    let _serial = exclusive();
    pin_to_one_cpu();
    let (ws, run) = bzip2_workspace("bzip2-cand");
    let image = ws.image("img");
    checkpoint::capture(
        &checkpoint::CaptureRequest {
            command: run("bzip2"),
            image: image.clone(),
            site: Some("mainQSort3".into()),
            call: CALL,
            delay: DELAY,
            timeout: Some(std::time::Duration::from_secs(300)),
            quiet: true,
            preload: None,
        },
        &criu(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let source =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("apps/bzip2-mainQSort3-candidate.c");
    let build = |opt: &str| {
        checkpoint::build_candidate(
            &checkpoint::CandidateSource {
                implementation: source.clone(),
                cflags: vec![opt.into(), format!("-I{}", bz.join("src").display())],
                ..Default::default()
            },
            ws.dir.path(),
            &format!("mainQSort3{opt}"),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let candidates = [build("-O0"), build("-O2")];
    let timer = checkpoint::ImageTimer::open(
        &image,
        &checkpoint::TimeOptions {
            criu: Some(criu()),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for c in &candidates {
        let v = timer.verify(c, 0.0).unwrap_or_else(|e| panic!("{e}"));
        assert!(v.outputs == 1 && v.mismatch.is_none(), "{v:?}");
    }
    let candidates = &candidates;
    let timer = &timer;
    let measure = || {
        let mut on_image = [Samples::default(), Samples::default()];
        let mut in_app = [Samples::default(), Samples::default()];
        // Two rounds, interleaved, so each side meets two moments of the
        // host: the CPU-time minima of ten restores and six plain runs a
        // side.
        for round in 0..2 {
            for (i, c) in candidates.iter().enumerate() {
                for s in 0..5 {
                    let r = timer
                        .restore(
                            round * 5 + s + 1,
                            &checkpoint::CopyInstructions {
                                candidate: Some(c.clone()),
                                outputs: None,
                            },
                        )
                        .unwrap_or_else(|e| panic!("{e}"));
                    on_image[i].add(&[r.region_ns], &[r.region_cpu_ns]);
                }
            }
            for (i, exe) in ["bzip2-sort-O0", "bzip2"].iter().enumerate() {
                let r = plain_runs(&run(exe), "mainQSort3", CALL, 3);
                in_app[i].add(&r.samples_ns, &r.samples_cpu_ns);
            }
        }
        // CPU-time minima, as in the test above (this region is preempted now
        // and then on the shared machine; plain runs land on new pages).
        let ratio = |s: &[Samples; 2]| s[0].cpu_stats().min / s[1].cpu_stats().min;
        let (image_ratio, app_ratio) = (ratio(&on_image), ratio(&in_app));
        for (label, s) in [
            ("image -O0", &on_image[0]),
            ("image -O2", &on_image[1]),
            ("in-app -O0", &in_app[0]),
            ("in-app -O2", &in_app[1]),
        ] {
            eprintln!(
                "{}",
                describe(&format!("mainQSort3 {label} cpu"), &s.cpu_stats())
            );
        }
        eprintln!("-O0/-O2: {image_ratio:.3} on the image, {app_ratio:.3} in-app");
        (image_ratio, app_ratio)
    };
    // A candidate that did not run leaves the application's -O2 code in
    // both columns: a ratio of 1. -O0 against -O2 is several times slower
    // on any host, far past what a slow moment of the host puts on one
    // side.
    const RAN: f64 = 1.5;
    let (image_ratio, app_ratio) = measure();
    eprintln!(
        "-O0/-O2 on the image is {:.1}% away from in-app (reported, not asserted)",
        relative_difference(image_ratio, app_ratio) * 100.0
    );
    assert!(
        image_ratio > RAN && app_ratio > RAN,
        "-O0/-O2: {image_ratio:.3} on the image, {app_ratio:.3} in-app: the -O0 candidate did not run slower"
    );
}

/// A ~100 ns call of a real program (issue 37): call 600 of mainQSort3
/// sorts a tiny bucket (~90 ns on both host kinds). `validate` compares the
/// image with bzip2's plain runs, interleaved, reading such a short call
/// five times a side per round and comparing the middle halves' means (the
/// timer's 10 ns steps are a ninth of the call). What holds under any
/// noise: both sides run the call with the same page sizes and without a
/// page fault before or in it; the verdict is the benchmark's
/// (scripts/bench-checkpoint-fidelity), and when it is not "matches" the
/// report names a cause.
#[test]
fn bzip2_sub_microsecond_call_replays_in_the_applications_state() {
    let _serial = exclusive();
    pin_to_one_cpu();
    let (ws, run) = bzip2_workspace("bzip2-short");
    let image = ws.image("short");
    checkpoint::capture(
        &request(run("bzip2"), image.clone(), "mainQSort3", 600, DELAY),
        &criu(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // Three rounds (~3 s each: five plain runs of bzip2 and a restore):
    // what is asserted is each call's state and that a verdict other than
    // "matches" names a cause, whichever verdict three rounds reach.
    let report = checkpoint::validate(&checkpoint::ValidateRequest {
        image,
        comparison: checkpoint::Comparison {
            min_rounds: 3,
            max_rounds: 3,
            ..Default::default()
        },
        time: opts(3),
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let text = report.render_text();
    eprintln!("{text}");
    assert!(
        report.in_app_ns.median < 1000.0,
        "the premise: a sub-microsecond call ({} ns)",
        report.in_app_ns.median
    );
    assert!(
        text.contains("5 plain run(s) and 15 image sample(s) each"),
        "a short call is read 5 and 15 times a round: {text}"
    );
    let f = report.fidelity.as_ref().unwrap_or_else(|| {
        panic!(
            "bzip2 reports no state around the call: it was built with an older host library; run scripts/setup"
        )
    });
    use checkpoint::fidelity::Effect;
    for effect in [Effect::PageSizes, Effect::FaultsInCall] {
        assert!(
            f.findings.iter().all(|x| x.effect != effect),
            "{effect:?}: {text}"
        );
    }
    for r in &report.rounds {
        for s in r.in_app_states.iter().chain(&r.image_states) {
            assert_eq!(
                (s.gap_minor_faults, s.minor_faults),
                (Some(0), Some(0)),
                "{s:?}"
            );
        }
    }
    if report.verdict != checkpoint::Verdict::Matches {
        assert!(text.contains("\ncause   "), "{text}");
    }
}
