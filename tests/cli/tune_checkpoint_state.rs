//! `tdg tune` on a checkpoint says once, as a warning line, which part of
//! the state around the call makes the restored copies unlike the captured
//! application and by how much (issue 37): the comparison `tdg checkpoint
//! time` makes, on samples of the application's own code taken beside the
//! first round's candidates. Real CRIU: needs root and `scripts/setup`.

use crate::checkpoint_cli::build_with_host_library;
use crate::support::{tdg_in, text};
use std::path::{Path, PathBuf};

const APPS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/checkpoint/tests/apps");
/// nearsort's rounds paced at one per FRAME_MS against absolute deadlines.
const FRAME_MS: &str = "50";
/// The call timed, and the rounds replayed before it: the original catches
/// up with its deadlines within DELAY frames (1.5 s) after its dump, so it
/// waits before the call; a copy, restored after the application's whole
/// run, finds all its deadlines past and never waits.
const CALL: &str = "40";
const DELAY: &str = "30";

#[test]
fn tune_on_an_image_of_a_paced_loop_warns_once_that_its_copies_do_not_wait() {
    let _alone = testkit::exclusive();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let exe = build_with_host_library(d, &["nearsort.c", "hsort.c"], "nearsort", &["-rdynamic"]);
    let image = PathBuf::from(format!(
        "/dev/shm/tdg-cli-tune-state-{}",
        std::process::id()
    ));
    let image_text = image.display().to_string();
    let exe_text = exe.display().to_string();
    let cap = tdg_in(
        &[
            "checkpoint",
            "capture",
            "--site",
            "hsort",
            "--call",
            CALL,
            "--delay",
            DELAY,
            "-o",
            &image_text,
            "--",
            &exe_text,
            CALL,
            FRAME_MS,
        ],
        d,
    );
    let (_, err) = text(&cap);
    assert!(cap.status.success(), "{err}");
    std::fs::write(
        d.join("hsort.spec"),
        format!(
            "routine=void hsort(long* A, const int N);\n\
             checkpoint={{ image=\"{image_text}\"; mode=delayed({DELAY}); }};\n"
        ),
    )
    .unwrap();
    let hsort = Path::new(APPS).join("hsort.c").display().to_string();
    // Every restore of this image costs about DELAY x FRAME_MS (its copy
    // replays the delay frames on the capture's clock), so the search is
    // kept to the fewest restores that still make several rounds: two
    // configurations, one per round (random, a fixed seed), and no
    // verification restores (verification is not what this test is about).
    // The warning must still come once over all the rounds.
    let tune = tdg_in(
        &[
            "tune",
            "hsort.spec",
            "--impl",
            &hsort,
            "--param",
            "CUTOFF=16,4096",
            "--strategy",
            "random",
            "--budget",
            "2",
            "--seed",
            "1",
            "--no-model",
            "--no-verify",
            "--samples",
            "3",
        ],
        d,
    );
    let (out, err) = text(&tune);
    assert!(tune.status.success(), "{out}{err}");
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "one warning line:\n{err}");
    let line = warnings[0];
    assert!(
        line.starts_with("tdg tune: warning: the restored copies of ")
            && line.contains("waiting before the call: the application waited ")
            && line.contains("the copies' median "),
        "{line}"
    );
    assert!(out.contains("best         CUTOFF="), "{out}");
    let _ = std::fs::remove_dir_all(&image);
}
