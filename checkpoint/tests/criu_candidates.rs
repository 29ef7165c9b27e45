//! Candidate implementations in restored copies: a restored copy of the
//! nearly-sorted-data application runs a candidate `hsort` (built as a
//! shared object, loaded through the control pipe) for the delay calls and
//! the timed call; its outputs are verified against the application's own
//! code on the image; every way a candidate can fail is one line, and the
//! image stays usable. Real CRIU; needs root and `scripts/setup`.
mod common;

use checkpoint::{
    build_candidate, capture, time_image, CandidateSource, CaptureRequest, CheckpointError,
    ImageTimer, TimeOptions,
};
use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

const CALL: u64 = 8;
const DELAY: u64 = 2;

struct Fixture {
    ws: Workspace,
    image: PathBuf,
    opts: TimeOptions,
}

fn fixture(name: &str) -> Fixture {
    let ws = Workspace::new(name);
    let exe = ws.build_app(&["nearsort.c", "hsort.c"], "nearsort", &["-rdynamic"]);
    let image = ws.image("img");
    capture(
        &CaptureRequest {
            command: os_args(&[&exe]),
            image: image.clone(),
            site: Some("hsort".into()),
            call: CALL,
            delay: DELAY,
            timeout: Some(Duration::from_secs(120)),
            quiet: true,
            preload: None,
        },
        &criu(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let opts = TimeOptions {
        samples: 3,
        criu: Some(criu()),
        ..Default::default()
    };
    Fixture { ws, image, opts }
}

impl Fixture {
    /// Write `text` as a candidate source and build it.
    fn candidate(
        &self,
        name: &str,
        text: &str,
        defines: &[(&str, &str)],
    ) -> checkpoint::Result<checkpoint::Candidate> {
        let src = self.ws.dir.path().join(format!("{name}.c"));
        std::fs::write(&src, text).unwrap();
        self.build(&src, defines, &[])
    }

    fn build(
        &self,
        src: &Path,
        defines: &[(&str, &str)],
        extra: &[PathBuf],
    ) -> checkpoint::Result<checkpoint::Candidate> {
        build_candidate(
            &CandidateSource {
                implementation: src.to_path_buf(),
                extra: extra.to_vec(),
                cflags: vec!["-O2".into()],
                defines: defines
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                cc: None,
            },
            self.ws.dir.path(),
            "candidate",
        )
    }

    fn time(
        &self,
        candidate: Option<checkpoint::Candidate>,
    ) -> checkpoint::Result<checkpoint::TimingReport> {
        time_image(
            &self.image,
            &TimeOptions {
                candidate,
                ..self.opts.clone()
            },
        )
    }

    /// The application's own code on the image still runs: nothing a failed
    /// candidate did has touched the image.
    fn assert_image_still_restores(&self) {
        let r = self
            .time(None)
            .unwrap_or_else(|e| panic!("after a failed candidate: {e}"));
        assert_eq!(r.samples_ns.len(), 3);
    }
}

fn hsort() -> PathBuf {
    Path::new(APPS).join("hsort.c")
}

/// A candidate with another insertion-sort cutoff runs in every copy: it
/// computes what the original does on the image's data, and its time is
/// its own (on nearly sorted data a large cutoff does half the work).
#[test]
fn candidate_runs_in_restored_copies_and_verifies() {
    let _serial = exclusive();
    let f = fixture("cand-ok");
    let wide = f.build(&hsort(), &[("CUTOFF", "4096")], &[]).unwrap();
    let timer = ImageTimer::open(&f.image, &f.opts).unwrap();
    let v = timer.verify(&wide, 0.0).unwrap();
    assert_eq!((v.outputs, v.elements), (1, 32768), "{v:?}");
    assert!(v.mismatch.is_none(), "{v:?}");
    // Proof the copies ran the candidate and not the application's CUTOFF=16
    // build: the candidate's work on this data is a fraction of the
    // original's. A shared host can switch between a fast and a slow state
    // over about a second, on both sides alike, so the two are timed in five
    // interleaved rounds and the least of each side's samples compared,
    // which puts both in the fast state whenever it shows at all; medians
    // round by round would follow the states wherever they fall unevenly.
    let (mut original, mut candidate) = (f64::INFINITY, f64::INFINITY);
    for round in 0..5 {
        let o = f.time(None).unwrap();
        let c = f.time(Some(wide.clone())).unwrap();
        assert_eq!(c.candidate.as_deref(), Some(hsort().as_path()));
        eprintln!(
            "round {round}: CPU time original {:.0}-{:.0} ns, CUTOFF=4096 candidate {:.0}-{:.0} ns",
            o.region_cpu_ns.min, o.region_cpu_ns.max, c.region_cpu_ns.min, c.region_cpu_ns.max
        );
        original = original.min(o.region_cpu_ns.min);
        candidate = candidate.min(c.region_cpu_ns.min);
    }
    assert!(
        candidate < 0.8 * original,
        "candidate {candidate:.0} ns vs original {original:.0} ns: {:.2}",
        candidate / original
    );
}

/// A candidate that uses the application's global (exported by -rdynamic)
/// and a helper from an --extra file resolves both and runs.
#[test]
fn candidate_symbols_resolve_against_the_application_and_extra_files() {
    let _serial = exclusive();
    let f = fixture("cand-syms");
    let dir = f.ws.dir.path();
    let main = dir.join("uses_app.c");
    std::fs::write(
        &main,
        "extern long nearsort_sorted_calls;\n\
         void sort_helper(long *A, const int N);\n\
         void hsort(long *A, const int N) { if (nearsort_sorted_calls >= 0) sort_helper(A, N); }\n",
    )
    .unwrap();
    // The helper sorts with hsort.c under another name, so the candidate's
    // `hsort` is the one the copy finds.
    let helper = dir.join("helper.c");
    std::fs::write(
        &helper,
        format!(
            "#define hsort sorted_by_helper\n#include \"{}\"\n\
             void sort_helper(long *A, const int N);\n\
             void sort_helper(long *A, const int N) {{ sorted_by_helper(A, N); }}\n",
            hsort().display()
        ),
    )
    .unwrap();
    let c = f.build(&main, &[], &[helper]).unwrap();
    let timer = ImageTimer::open(&f.image, &f.opts).unwrap();
    let v = timer.verify(&c, 0.0).unwrap_or_else(|e| panic!("{e}"));
    assert!(v.mismatch.is_none() && v.outputs == 1, "{v:?}");
}

#[test]
fn wrong_candidate_fails_verification_with_the_first_differing_element() {
    let _serial = exclusive();
    let f = fixture("cand-wrong");
    // Sorts, then breaks one element in the middle.
    let text = format!(
        "#define hsort correct_hsort\n#include \"{}\"\n#undef hsort\n\
         void hsort(long *A, const int N) {{ correct_hsort(A, N); A[N / 2] += 1; }}\n",
        hsort().display()
    );
    let c = f.candidate("wrong", &text, &[]).unwrap();
    let v = ImageTimer::open(&f.image, &f.opts)
        .unwrap()
        .verify(&c, 0.0)
        .unwrap();
    let m = v
        .mismatch
        .clone()
        .expect("a wrong candidate must fail verification");
    assert_eq!((m.output, m.element), (0, 16384), "{m}");
    // (The delay calls ran the wrong candidate too, so the values need not
    // differ by exactly one: the later calls sorted already broken data.)
    assert_ne!(m.candidate, m.original);
    assert!(v
        .render_text()
        .starts_with("verification FAILED: output 0 element 16384"));
    f.assert_image_still_restores();
}

#[test]
fn crashing_candidate_reports_its_signal_and_phase() {
    let _serial = exclusive();
    let f = fixture("cand-segv");
    let c = f
        .candidate(
            "segv",
            "void hsort(long *A, const int N) { (void)A; (void)N; *(volatile long *)0 = 1; }\n",
            &[],
        )
        .unwrap();
    let e = f.time(Some(c)).unwrap_err().to_string();
    assert!(
        e.contains("candidate ") && e.contains("segv.c was killed by SIGSEGV in delay call 1 of 2"),
        "{e}"
    );
    assert!(!e.contains('\n'), "one line: {e}");
    // Crashing only in the timed call (the third call after the checkpoint).
    let c = f
        .candidate(
            "late",
            &format!(
                "#define hsort correct_hsort\n#include \"{}\"\n#undef hsort\n\
                 extern long nearsort_sorted_calls;\n\
                 void hsort(long *A, const int N) {{ if (nearsort_sorted_calls == {}) __builtin_trap(); correct_hsort(A, N); }}\n",
                hsort().display(),
                CALL - 1
            ),
            &[],
        )
        .unwrap();
    let e = f.time(Some(c)).unwrap_err().to_string();
    assert!(e.contains("was killed by SIGILL in the timed call"), "{e}");
    f.assert_image_still_restores();
}

/// A candidate that never returns: the restore is killed at the time limit
/// with its whole PID namespace (the copy, its sample children, criu), the
/// error says so in one line, and nothing of it is left running.
#[test]
fn hanging_candidate_is_killed_with_its_namespace_and_says_so() {
    let _serial = exclusive();
    let f = fixture("cand-hang");
    let c = f
        .candidate(
            "hang",
            "#include <unistd.h>\nvoid hsort(long *A, const int N) { (void)A; (void)N; for (;;) pause(); }\n",
            &[],
        )
        .unwrap();
    let started = std::time::Instant::now();
    let e = time_image(
        &f.image,
        &TimeOptions {
            candidate: Some(c),
            timeout: Duration::from_secs(2),
            ..f.opts.clone()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert!(
        e.contains("did not finish within")
            && e.contains("PID namespace")
            && e.contains("--timeout"),
        "{e}"
    );
    assert!(!e.contains('\n'), "one line: {e}");
    let exe = f.ws.dir.path().join("nearsort");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let left = (processes_running(&exe), processes_mentioning(&f.image));
        if left.0.is_empty() && left.1.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "left running after the timeout: copies {:?}, restorers {:?}",
            left.0,
            left.1
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    f.assert_image_still_restores();
}

#[test]
fn uncompilable_and_unresolved_candidates_get_one_clear_error() {
    let _serial = exclusive();
    let f = fixture("cand-bad");
    match f.candidate("bad", "void hsort(long *A, const int N) { A + ; }\n", &[]) {
        Err(CheckpointError::CandidateBuild { file, stderr }) => {
            assert!(file.ends_with("bad.c"));
            assert!(
                stderr.contains("bad.c:1:") && stderr.contains("error:"),
                "{stderr}"
            );
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
    let c = f
        .candidate(
            "unresolved",
            "long helper_nobody_defines(long);\n\
             void hsort(long *A, const int N) { A[0] = helper_nobody_defines(N); }\n",
            &[],
        )
        .unwrap();
    let e = f.time(Some(c)).unwrap_err().to_string();
    assert!(
        e.contains("uses `helper_nobody_defines`, which neither it nor the application exports")
            && e.contains("-rdynamic"),
        "{e}"
    );
    assert!(!e.contains('\n'), "one line: {e}");
    let c = f
        .candidate(
            "other",
            "void other(long *A, const int N) { (void)A; (void)N; }\n",
            &[],
        )
        .unwrap();
    let e = f.time(Some(c)).unwrap_err().to_string();
    assert!(e.contains("defines no `hsort`"), "{e}");
    f.assert_image_still_restores();
}
