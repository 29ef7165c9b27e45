//! tdg runs as root: a directory it is pointed at that it did not make is
//! refused with one line, and nothing in it is lost (fsguard).

use crate::support::{tdg, text};
use testkit::entry_names;

/// A directory that merely holds a `dump.log` (CRIU's log name, and a
/// common one) is not a tdg image: the capture refuses it before the
/// application runs, and the user's thesis is still there.
#[test]
fn capture_refuses_a_users_directory_that_holds_a_dump_log() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("dump.log"), "my own log\n").unwrap();
    std::fs::write(out.join("thesis.tex"), "\\chapter{Four years}\n").unwrap();
    let o = tdg(&[
        "checkpoint".as_ref(),
        "capture".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
        "--".as_ref(),
        "true".as_ref(),
    ]);
    let (so, se) = text(&o);
    assert!(!o.status.success(), "{so}{se}");
    assert_eq!(entry_names(&out), ["dump.log", "thesis.tex"], "{se}");
    assert_eq!(
        std::fs::read_to_string(out.join("thesis.tex")).unwrap(),
        "\\chapter{Four years}\n"
    );
    assert_eq!(se.trim().lines().count(), 1, "{se}");
    assert!(
        se.contains(&out.display().to_string()) && se.contains("choose another -o"),
        "{se}"
    );
}

/// `tdg gen -o DIR` writes a Makefile: into a directory of the user's
/// (with their own Makefile) it refuses; into its own it writes again.
#[test]
fn gen_refuses_a_users_directory_and_rewrites_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let spec = testkit::repo().join("specs/dot.spec");
    let users = dir.path().join("project");
    std::fs::create_dir(&users).unwrap();
    std::fs::write(users.join("Makefile"), "all:\n\techo mine\n").unwrap();
    let o = tdg(&[
        "gen".as_ref(),
        spec.as_os_str(),
        "-o".as_ref(),
        users.as_os_str(),
    ]);
    let (so, se) = text(&o);
    assert!(!o.status.success(), "{so}{se}");
    assert_eq!(
        std::fs::read_to_string(users.join("Makefile")).unwrap(),
        "all:\n\techo mine\n"
    );
    assert_eq!(entry_names(&users), ["Makefile"]);
    assert_eq!(se.trim().lines().count(), 1, "{se}");
    assert!(se.contains("choose another -o"), "{se}");

    let ours = dir.path().join("driver");
    for _ in 0..2 {
        let o = tdg(&[
            "gen".as_ref(),
            spec.as_os_str(),
            "-o".as_ref(),
            ours.as_os_str(),
        ]);
        let (so, se) = text(&o);
        assert!(o.status.success(), "{so}{se}");
    }
    assert!(ours.join("Makefile").exists() && ours.join("driver.c").exists());
}

/// `tdg instrument -o DIR` and `tdg checkpoint lib -o DIR` write sources
/// and libraries: into a user's directory they refuse, in one line.
#[test]
fn instrument_and_checkpoint_lib_refuse_a_users_directory() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("src");
    std::fs::create_dir(&users).unwrap();
    std::fs::write(users.join("tdg_checkpoint.c"), "/* my patched copy */\n").unwrap();
    for args in [
        vec!["instrument", "--runtime-only", "-o"],
        vec!["checkpoint", "lib", "-o"],
    ] {
        let mut all: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
        all.push(users.as_os_str());
        let o = tdg(&all);
        let (so, se) = text(&o);
        assert!(!o.status.success(), "{args:?}: {so}{se}");
        assert_eq!(se.trim().lines().count(), 1, "{args:?}: {se}");
        assert!(se.contains("choose another -o"), "{args:?}: {se}");
        assert_eq!(entry_names(&users), ["tdg_checkpoint.c"]);
        assert_eq!(
            std::fs::read_to_string(users.join("tdg_checkpoint.c")).unwrap(),
            "/* my patched copy */\n"
        );
    }
}
