//! What a capture and a restore may do to the user's files and how long
//! they may wait (real CRIU; root and `scripts/setup`, as in CI): an image
//! is replaced only by a complete one, nothing is written through a link
//! planted in an image directory, an image anyone else could have changed
//! is refused, and a sample that hangs is stopped after its own limit.

mod common;

use checkpoint::{
    build_candidate, capture, time_image, CandidateSource, CaptureRequest, CheckpointError,
    TimeOptions,
};
use common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use testkit::entry_names;

const CALL: u64 = 8;
const DELAY: u64 = 2;

fn nearsort(ws: &Workspace) -> PathBuf {
    ws.build_app(&["nearsort.c", "hsort.c"], "nearsort", &["-rdynamic"])
}

fn capture_req(exe: &Path, image: &Path) -> CaptureRequest {
    CaptureRequest {
        command: os_args(&[&exe]),
        image: image.to_path_buf(),
        site: Some("hsort".into()),
        call: CALL,
        delay: DELAY,
        timeout: Some(Duration::from_secs(120)),
        quiet: true,
        preload: None,
    }
}

/// A capture that fails (the command mistyped, the application ending
/// before the call) leaves the image already at `-o` whole and restorable,
/// and leaves nothing of its own beside it.
#[test]
fn a_failing_capture_leaves_the_previous_image_intact() {
    let _serial = exclusive();
    let ws = Workspace::new("keep-prev");
    let exe = nearsort(&ws);
    let image = ws.image("img");
    capture(&capture_req(&exe, &image), &criu()).unwrap_or_else(|e| panic!("{e}"));
    let manifest = std::fs::read(image.join("tdg-manifest.json")).unwrap();

    let mut typo = capture_req(&exe, &image);
    typo.command = os_args(&[&ws.dir.path().join("nearsrot")]);
    let e = capture(&typo, &criu()).unwrap_err().to_string();
    assert!(
        e.contains("cannot start") && e.contains("is unchanged"),
        "{e}"
    );
    let mut too_far = capture_req(&exe, &image);
    too_far.call = 100_000;
    let e = capture(&too_far, &criu()).unwrap_err().to_string();
    assert!(e.contains("ended") && e.contains("is unchanged"), "{e}");

    assert_eq!(
        std::fs::read(image.join("tdg-manifest.json")).unwrap(),
        manifest
    );
    assert_eq!(
        entry_names(&ws.images),
        ["img"],
        "nothing staged is left beside it"
    );
    let r = time_image(&image, &opts(3)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.samples_ns.len(), 3);
}

/// An image is restored wherever it is: CRIU gets the directory it was
/// captured in (a staged one) from where the image is now.
#[test]
fn a_moved_image_still_restores() {
    let _serial = exclusive();
    let ws = Workspace::new("moved");
    let exe = nearsort(&ws);
    let image = ws.image("img");
    capture(&capture_req(&exe, &image), &criu()).unwrap_or_else(|e| panic!("{e}"));
    let moved = ws.image("elsewhere");
    std::fs::rename(&image, &moved).unwrap();
    let r = time_image(&moved, &opts(3)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.samples_ns.len(), 3);
    let r = time_image(
        &moved,
        &TimeOptions {
            restore_per_sample: true,
            ..opts(2)
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.samples_ns.len(), 2);
}

/// An image directory its group may write, one owned by another user, or
/// one holding a link (planted where CRIU or tdg would write) is refused
/// before anything is restored, with one line naming the way out, and the
/// link's target is untouched.
#[test]
fn an_image_anyone_else_could_change_is_refused() {
    let _serial = exclusive();
    let ws = Workspace::new("untrusted");
    let exe = nearsort(&ws);
    let image = ws.image("img");
    capture(&capture_req(&exe, &image), &criu()).unwrap_or_else(|e| panic!("{e}"));
    let refused = |what: &str| {
        let e = time_image(&image, &opts(2)).unwrap_err();
        assert!(
            matches!(e, CheckpointError::InvalidRequest(_)),
            "{what}: {e:?}"
        );
        let text = e.to_string();
        assert!(!text.contains('\n'), "{what}: {text}");
        text
    };

    std::fs::set_permissions(&image, std::fs::Permissions::from_mode(0o770)).unwrap();
    let e = refused("group-writable");
    assert!(
        e.contains("writable by its group") && e.contains("chmod go-w"),
        "{e}"
    );
    std::fs::set_permissions(&image, std::fs::Permissions::from_mode(0o700)).unwrap();

    std::os::unix::fs::chown(&image, Some(4242), None).unwrap();
    let e = refused("foreign");
    assert!(e.contains("belongs to uid 4242"), "{e}");
    std::os::unix::fs::chown(&image, Some(0), None).unwrap();

    let victim = ws.dir.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    for planted in ["stats-restore", "restore.log", "tdg-captured-call.txt.new"] {
        let link = image.join(planted);
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let e = refused(planted);
        assert!(e.contains("symbolic link"), "{planted}: {e}");
        std::fs::remove_file(&link).unwrap();
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    let r = time_image(&image, &opts(2)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.samples_ns.len(), 2);
}

/// The host library run by hand into a directory with links planted
/// where it and CRIU write (the dump log, the capture record) refuses to
/// checkpoint rather than write through them.
#[test]
fn the_host_library_never_writes_through_a_planted_link() {
    let _serial = exclusive();
    let ws = Workspace::new("planted");
    let exe = nearsort(&ws);
    let criu = criu();
    let victim = ws.dir.path().join("victim");
    for planted in ["dump.log", "tdg-capture.txt"] {
        std::fs::write(&victim, "precious").unwrap();
        let dir = ws.image(&format!("by-hand-{planted}"));
        std::fs::create_dir(&dir).unwrap();
        std::os::unix::fs::symlink(&victim, dir.join(planted)).unwrap();
        let mut cmd = std::process::Command::new(&exe);
        cmd.env("TDG_CKPT_IMAGE", &dir)
            .env("TDG_CKPT_CRIU", &criu.path)
            .env("TDG_REGION_SITE", "hsort")
            .env("TDG_REGION_CALL", CALL.to_string())
            .env("TDG_CKPT_DELAY", DELAY.to_string())
            .stdout(std::process::Stdio::null());
        if let Some(lib) = &criu.libcriu {
            cmd.env("TDG_CKPT_LIBCRIU", lib);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{planted}: {out:?}");
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "precious",
            "{planted} was written through"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        if planted == "dump.log" {
            assert!(stderr.contains("symbolic link"), "{stderr}");
        }
    }
    // A link as the image directory itself is not opened.
    let linked = ws.image("linked");
    std::os::unix::fs::symlink(ws.dir.path(), &linked).unwrap();
    let mut cmd = std::process::Command::new(&exe);
    cmd.env("TDG_CKPT_IMAGE", &linked)
        .env("TDG_CKPT_CRIU", &criu.path)
        .env("TDG_REGION_SITE", "hsort")
        .env("TDG_REGION_CALL", CALL.to_string())
        .stdout(std::process::Stdio::null());
    let out = cmd.output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("symbolic link"));
    assert!(!ws.dir.path().join("dump.log").exists());
}

/// `--timeout` is each sample's: a candidate that hangs in its fourth run
/// (the learning pass is the first) is stopped a limit after the last
/// sample that ended, not after a limit per sample of the whole batch.
#[test]
fn a_hung_sample_is_stopped_after_its_own_limit() {
    let _serial = exclusive();
    let ws = Workspace::new("hung");
    let exe = nearsort(&ws);
    let image = ws.image("img");
    capture(&capture_req(&exe, &image), &criu()).unwrap_or_else(|e| panic!("{e}"));
    let counter = ws.dir.path().join("runs");
    std::fs::write(&counter, "").unwrap();
    let src = ws.dir.path().join("late_hang.c");
    std::fs::write(
        &src,
        format!(
            "#include <fcntl.h>\n#include <unistd.h>\n\
             void hsort(long *A, const int N) {{\n\
               int fd = open(\"{}\", O_WRONLY | O_APPEND);\n\
               (void)!write(fd, \"x\", 1);\n\
               int runs = (int)lseek(fd, 0, SEEK_END);\n\
               close(fd);\n\
               if (runs >= 4 * 3) for (;;) pause();\n\
               for (int i = 1; i < N; i++) {{ long v = A[i]; int j = i - 1;\n\
                 while (j >= 0 && A[j] > v) {{ A[j + 1] = A[j]; j--; }} A[j + 1] = v; }}\n\
             }}\n",
            counter.display()
        ),
    )
    .unwrap();
    let candidate = build_candidate(
        &CandidateSource {
            implementation: src,
            extra: Vec::new(),
            cflags: vec!["-O2".into()],
            defines: Vec::new(),
            cc: None,
        },
        ws.dir.path(),
        "candidate",
    )
    .unwrap();
    let limit = Duration::from_secs(3);
    let samples = 40;
    let started = Instant::now();
    let e = time_image(
        &image,
        &TimeOptions {
            candidate: Some(candidate),
            timeout: limit,
            ..opts(samples)
        },
    )
    .unwrap_err()
    .to_string();
    let took = started.elapsed();
    // Before, the limit was the batch's: 3 s x (40 + 1 + 2) = 129 s.
    assert!(took < limit * 5, "stopped after {took:?}");
    assert!(
        e.contains("did not finish within 3 s") && e.contains("--timeout"),
        "{e}"
    );
}
