//! Restores that must survive: many in a row, concurrent ones, applications
//! with a terminal and output files, the explicit enter/stop pair; and every
//! CRIU failure arriving as one clear line. Real CRIU; needs root and setup.
mod common;

use checkpoint::{
    auto_delay, capture, time_image, AutoDelayRequest, CheckpointError, Manifest, TimeOptions,
};
use common::*;
use std::path::Path;

#[test]
fn fifty_restores_in_a_row_all_succeed_and_leave_no_process() {
    let ws = Workspace::new("fifty");
    let exe = ws.build("datasens.c", "datasens", &[]);
    let img = ws.image("img");
    capture(
        &request(
            os_args(&[&exe, &"search", &ws.out_file()]),
            img.clone(),
            "search",
            6,
            2,
        ),
        &criu(),
    )
    .unwrap();
    let before = listing(&img);
    let report = time_image(&img, &opts(50)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.samples_ns.len(), 50);
    assert!(report.samples_ns.iter().all(|&ns| ns > 0));
    assert!(
        processes_running(&exe).is_empty(),
        "restored copies left behind: {:?}",
        processes_running(&exe)
    );
    let helpers = processes_mentioning(&img);
    assert!(
        helpers.is_empty(),
        "criu/unshare processes left behind: {helpers:?}"
    );
    // Restores write nothing into the image (CRIU's log and statistics go
    // to tdg's private work directory); the image is unchanged.
    assert_eq!(listing(&img), before);
    Manifest::read(&img).unwrap().verify(&img).unwrap();
}

/// Every copy comes back with the original PID; two timings of one image at
/// once only work because each restore gets its own PID namespace.
#[test]
fn concurrent_timings_of_one_image_do_not_collide_on_pids() {
    let ws = Workspace::new("concurrent");
    let exe = ws.build("datasens.c", "datasens", &[]);
    let img = ws.image("img");
    capture(
        &request(
            os_args(&[&exe, &"search", &ws.out_file()]),
            img.clone(),
            "search",
            4,
            1,
        ),
        &criu(),
    )
    .unwrap();
    let runs: Vec<_> = (0..2)
        .map(|_| {
            let img = img.clone();
            std::thread::spawn(move || time_image(&img, &opts(6)).map(|r| r.samples_ns.len()))
        })
        .collect();
    for r in runs {
        assert_eq!(r.join().unwrap().unwrap_or_else(|e| panic!("{e}")), 6);
    }
    assert!(processes_running(&exe).is_empty());
}

/// Captured under a pseudo-terminal (as from an interactive shell), with an
/// output file it truncates and keeps writing: restores still work, and the
/// copies do not touch the real output file. `script` gives the program a
/// terminal through `sh -c LINE`; LINE decides where the program sits.
fn restores_an_application_on_a_terminal(name: &str, line: &str, expected_shape: &str) {
    let ws = Workspace::new(name);
    let exe = ws.build("datasens.c", "datasens", &[]);
    let img = ws.image("img");
    let out = ws.out_file();
    let line = line
        .replace("APP", &exe.display().to_string())
        .replace("OUT", &out.display().to_string());
    // SHELL is set: `script` runs $SHELL, and CI's environment has none.
    let command = os_args(&[
        &"env",
        &"SHELL=/bin/sh",
        &"script",
        &"-qec",
        &line,
        &"/dev/null",
    ]);
    capture(&request(command, img.clone(), "search", 5, 2), &criu())
        .unwrap_or_else(|e| panic!("{e}"));
    let m = Manifest::read(&img).unwrap();
    assert!(
        m.capture.descriptors.iter().any(|d| d.tty_key.is_some()),
        "the application should have held a terminal: {:?}",
        m.capture.descriptors
    );
    assert_eq!(m.exe, exe.canonicalize().unwrap());
    let written = std::fs::read(&out).unwrap();
    let text = String::from_utf8_lossy(&written);
    assert!(
        text.lines().next() == Some(expected_shape),
        "the test did not set up the case it names: {text:.120}"
    );
    assert!(text.contains("checksum"));
    let report = time_image(&img, &opts(5)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.samples_ns.len(), 5);
    assert_eq!(
        std::fs::read(&out).unwrap(),
        written,
        "a restored copy wrote to the real output file"
    );
}

/// `exec` in the shell: the program leads the terminal's session.
#[test]
fn session_leader_on_a_terminal_is_restored() {
    restores_an_application_on_a_terminal(
        "tty-leader",
        "exec APP search OUT",
        "session leader, process group leader, terminal foreground yes",
    );
}

/// A shell without job control forks the program and leaves it in the
/// shell's process group: CRIU moves the copy into the restorer's session
/// and group (a CI run, where `sh` is dash: "tty: Failed to set group 0 on 0").
#[test]
fn program_in_its_shells_process_group_on_a_terminal_is_restored() {
    restores_an_application_on_a_terminal(
        "tty-member",
        "APP search OUT; true",
        "session member, process group member, terminal foreground yes",
    );
}

/// An interactive shell's foreground job: its own process group, the
/// shell's session. CRIU makes the copy's group the terminal's foreground.
#[test]
fn foreground_job_of_an_interactive_shell_is_restored() {
    restores_an_application_on_a_terminal(
        "tty-job",
        "set -m; APP search OUT; true",
        "session member, process group leader, terminal foreground yes",
    );
}

#[test]
fn explicit_enter_stop_pair_is_captured_and_timed() {
    let ws = Workspace::new("pair");
    let exe = ws.build("datasens.c", "datasens", &[]);
    let img = ws.image("img");
    let mut req = request(
        os_args(&[&exe, &"pair", &ws.out_file()]),
        img.clone(),
        "unused",
        1,
        0,
    );
    req.site = None;
    capture(&req, &criu()).unwrap_or_else(|e| panic!("{e}"));
    let m = Manifest::read(&img).unwrap();
    assert_eq!(m.capture.api, checkpoint::capture_info::MarkerApi::Pair);
    assert_eq!(m.delay, None);
    let report = time_image(&img, &opts(5)).unwrap_or_else(|e| panic!("{e}"));
    // The region between enter and stop is one search of an 8192-node list:
    // more than a microsecond, far less than a second.
    assert!(
        report.region_ns.min > 1_000.0 && report.region_ns.max < 1e9,
        "{:?}",
        report.region_ns
    );
}

#[test]
fn established_tcp_connection_fails_the_capture_with_one_clear_line() {
    let ws = Workspace::new("tcp");
    let exe = ws.build("datasens.c", "datasens", &[]);
    let img = ws.image("img");
    let err = capture(
        &request(
            os_args(&[&exe, &"tcp", &ws.out_file()]),
            img.clone(),
            "search",
            3,
            0,
        ),
        &criu(),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, CheckpointError::Criu { action: "dump", .. }),
        "{msg}"
    );
    assert!(msg.contains("socket") && msg.contains("TCP"), "{msg}");
    assert!(!msg.contains('\n'), "{msg}");
    // The image that was never made is not left behind; the dump's log is
    // kept apart and named.
    assert!(!img.exists());
    let log = msg.split("(log: ").nth(1).unwrap().trim_end_matches(')');
    assert!(log.contains("tdg-dump-"), "{msg}");
    assert!(
        std::fs::read_to_string(log).unwrap().contains("Error"),
        "{log}"
    );
    std::fs::remove_file(log).unwrap();
}

#[test]
fn input_file_that_changed_size_fails_the_restore_with_its_name_and_log() {
    let ws = Workspace::new("input");
    let exe = ws.build("datasens.c", "datasens", &[]);
    let img = ws.image("img");
    let input = ws.dir.path().join("input.dat");
    std::fs::write(&input, b"some input").unwrap();
    capture(
        &request(
            os_args(&[&exe, &"input", &ws.out_file(), &input]),
            img.clone(),
            "search",
            3,
            1,
        ),
        &criu(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    time_image(&img, &opts(1)).unwrap_or_else(|e| panic!("before the change: {e}"));
    std::fs::write(&input, b"some input that grew").unwrap();
    let err = time_image(&img, &opts(1)).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("changed size") && msg.contains("input.dat"),
        "{msg}"
    );
    assert!(
        msg.contains("log: ") && msg.contains("tdg-restore-"),
        "{msg}"
    );
    assert!(!msg.contains('\n'), "{msg}");
    // The log the error names is there, and stays there when the next
    // restore of the same image by the same process goes well: each
    // restore logs to a file of its own.
    let log = match &err {
        CheckpointError::Criu { log, .. } => log.clone(),
        other => panic!("not CRIU's failure: {other:?}"),
    };
    let failed_log =
        std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    assert!(failed_log.contains("bad size"), "{failed_log}");
    std::fs::write(&input, b"some input").unwrap();
    time_image(&img, &opts(1)).unwrap_or_else(|e| panic!("after putting it back: {e}"));
    assert_eq!(
        std::fs::read_to_string(&log).ok().as_deref(),
        Some(failed_log.as_str()),
        "the failed restore's log after a good restore"
    );
}

/// A restored copy whose calling thread needs none of its other threads
/// (numpy's idle BLAS pool, here idle_threads.c's) can finish before CRIU
/// has let go of them all: CRIU detaches a copy's threads one after
/// another, and the copy's exit then took a thread CRIU still had to
/// detach down with it, so CRIU failed the restore ("Unable to detach N:
/// No such process", CRIU issue 2072). The application runs at a real-time
/// priority, which the copies keep, on the one CPU the restores run on: a
/// copy gets that CPU the moment CRIU lets go of its calling thread, so
/// before copies waited for CRIU every one of these restores failed.
#[test]
fn a_threaded_copy_that_gets_the_cpu_before_criu_is_restored_every_time() {
    let _alone = exclusive();
    let ws = Workspace::new("outrun");
    let exe = ws.build_app(
        &["idle_threads.c"],
        "idle_threads",
        &["-pthread", "-rdynamic"],
    );
    let img = ws.image("img");
    let chrt = Path::new("/usr/bin/chrt");
    let forced = std::process::Command::new(chrt)
        .args(["-f", "1", "true"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !forced {
        eprintln!(
            "NOT FORCED: this machine refuses SCHED_FIFO (`chrt -f 1 true` failed), so the copies \
             below get the CPU before CRIU only as often as the scheduler happens to let them"
        );
    }
    let mut command = if forced {
        os_args(&[&chrt, &"-f", &"1"])
    } else {
        Vec::new()
    };
    command.extend(os_args(&[&exe, &"2", &"5"]));
    capture(&request(command, img.clone(), "scale", 3, 1), &criu())
        .unwrap_or_else(|e| panic!("{e}"));
    pin_to_one_cpu();
    let restores = 50;
    let each = time_image(
        &img,
        &TimeOptions {
            restore_per_sample: true,
            ..opts(restores)
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(each.restores, restores, "{}", each.render_text());
    assert_eq!(each.samples_ns.len(), restores);
    assert_eq!(
        each.samples_threads,
        vec![3; restores],
        "every copy ran with both idle threads"
    );
    // The same copy taking its samples in place, its idle threads parked.
    let in_place = time_image(&img, &opts(20)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(in_place.sampling, "in-place", "{}", in_place.render_text());
    assert_eq!(in_place.samples_ns.len(), 20);
    let logs: Vec<_> = std::fs::read_dir(&img)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("restore."))
        .collect();
    assert!(logs.is_empty(), "logs of failed restores: {logs:?}");
    assert!(processes_running(&exe).is_empty());
}

#[test]
fn image_of_a_rebuilt_binary_is_refused_before_restoring() {
    let ws = Workspace::new("rebuilt");
    let exe = ws.build("datasens.c", "datasens", &[]);
    let img = ws.image("img");
    capture(
        &request(
            os_args(&[&exe, &"search", &ws.out_file()]),
            img.clone(),
            "search",
            3,
            1,
        ),
        &criu(),
    )
    .unwrap();
    // Same path, different code.
    ws.build("datasens.c", "datasens", &["-DCALLS=13"]);
    let err = time_image(&img, &opts(1)).unwrap_err();
    assert!(
        matches!(err, CheckpointError::BinaryChanged { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("recapture"), "{err}");
}

#[test]
fn corrupted_images_are_refused() {
    let ws = Workspace::new("corrupt");
    let exe = ws.build("datasens.c", "datasens", &[]);
    let img = ws.image("img");
    capture(
        &request(
            os_args(&[&exe, &"search", &ws.out_file()]),
            img.clone(),
            "search",
            3,
            1,
        ),
        &criu(),
    )
    .unwrap();
    let pages = std::fs::read_dir(&img)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("pages-"))
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&pages).unwrap();
    bytes[0] ^= 0xff;
    std::fs::write(&pages, bytes).unwrap();
    let err = time_image(&img, &opts(1)).unwrap_err().to_string();
    assert!(err.contains("does not match its checksum"), "{err}");
}

#[test]
fn bad_requests_get_a_cause_and_a_way_out() {
    let ws = Workspace::new("bad");
    let exe = ws.build("datasens.c", "datasens", &[]);
    let cmd = os_args(&[&exe, &"search", &ws.out_file()]);
    let err = capture(
        &request(cmd.clone(), ws.image("a"), "search", 3, 3),
        &criu(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("--delay 3 needs --call > 3"), "{err}");
    // The application has 12 calls; call 40 is never reached.
    let err = capture(
        &request(cmd.clone(), ws.image("b"), "search", 40, 2),
        &criu(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("before call 38 of region search"), "{err}");
    let err = capture(&request(cmd, ws.image("c"), "no-such-site", 2, 0), &criu())
        .unwrap_err()
        .to_string();
    assert!(err.contains("region no-such-site"), "{err}");
    let err = time_image(Path::new("/nonexistent/image"), &opts(1))
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a tdg checkpoint image"), "{err}");
    // A directory with someone else's files is not overwritten.
    let theirs = ws.image("theirs");
    std::fs::create_dir_all(&theirs).unwrap();
    std::fs::write(theirs.join("notes.txt"), "mine").unwrap();
    let err = capture(
        &request(
            os_args(&[&exe, &"search", &ws.out_file()]),
            theirs.clone(),
            "search",
            2,
            0,
        ),
        &criu(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("tdg did not create it"), "{err}");
    assert!(theirs.join("notes.txt").exists());
}

/// Seed 003 section 3.2: delays 0, 1, 2, 4, ... until successive ones agree
/// (and a larger one confirms it, when there is room). The
/// search is ~15x slower right after a restore, so delay 0 is never chosen.
#[test]
fn auto_delay_walks_delays_until_they_agree_and_keeps_that_image() {
    let ws = Workspace::new("auto");
    let exe = ws.build("datasens.c", "datasens", &[]);
    let img = ws.image("img");
    let report = auto_delay(
        &AutoDelayRequest {
            capture: request(
                os_args(&[&exe, &"search", &ws.out_file()]),
                img.clone(),
                "search",
                8,
                0,
            ),
            samples: 7,
            threshold: 0.10,
            max_delay: 5,
            time: opts(7),
            reference: checkpoint::DelayReference::Delays,
        },
        &criu(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{}", report.render_text());
    assert!(report.chosen >= 1, "{}", report.render_text());
    assert!(report.rows.len() >= 2);
    let chosen = report
        .rows
        .iter()
        .find(|r| r.delay == report.chosen)
        .expect("the chosen delay was timed");
    assert!(report.rows[0].region_ns.median > 2.0 * chosen.region_ns.median);
    let m = Manifest::read(&img).unwrap();
    assert_eq!(m.delay, Some(report.chosen));
    m.verify(&img).unwrap();
    // The trials lived in tdg's own scratch: nothing but the image is
    // beside it (no `IMG.delayK`, no staged directory).
    assert_eq!(
        listing(&ws.images),
        [img.file_name().unwrap().to_string_lossy().into_owned()]
    );
}

/// A spec's `checkpoint` clause: `tdg run SPEC` times the image through
/// `time_checkpoint_clause`, which refuses an image captured with another delay.
#[test]
fn spec_checkpoint_clause_times_the_image_and_checks_its_mode() {
    let ws = Workspace::new("clause");
    let exe = ws.build("datasens.c", "datasens", &[]);
    let img = ws.image("search-img");
    capture(
        &request(
            os_args(&[&exe, &"search", &ws.out_file()]),
            img.clone(),
            "search",
            6,
            2,
        ),
        &criu(),
    )
    .unwrap();
    let spec_for = |mode: &str| {
        let src = format!(
            "routine=void search(long key);\ninit={{ key=Macro(KEY, 1); }};\ncheckpoint={{ image=\"search-img\"; mode={mode}; }};\n"
        );
        spec_lang::parse(&src, "search.spec").unwrap_or_else(|e| panic!("{e}"))
    };
    let spec = spec_for("delayed(2)");
    let clause = spec.checkpoint.as_ref().expect("checkpoint clause parsed");
    let report = checkpoint::time_checkpoint_clause(clause, &ws.images, &opts(3))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.samples_ns.len(), 3);
    assert_eq!(report.delay, Some(2));
    let spec = spec_for("immediate");
    let err =
        checkpoint::time_checkpoint_clause(spec.checkpoint.as_ref().unwrap(), &ws.images, &opts(1))
            .unwrap_err()
            .to_string();
    assert!(
        err.contains("captured with delay 2") && err.contains("--delay 0"),
        "{err}"
    );
}

/// The names in a directory, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}
