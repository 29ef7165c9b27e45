//! Each command reads its spec file once: `spec_lang::load` is the one
//! read, and everything after it (the use the command needs, the `-D`
//! values, the driver model) works on the `CheckedSpec` it returned.

use std::process::Command;
use testkit::have;

/// The system calls that open a file, as strace names them.
const OPENS: &str = "trace=open,openat,openat2";

#[test]
fn tdg_run_explain_and_check_open_the_spec_file_once() {
    let _heavy = testkit::shared();
    assert!(
        have("strace"),
        "strace is not installed; scripts/setup.d/25-strace.sh installs it"
    );
    let dir = tempfile::tempdir().unwrap();
    // A path of its own, so no other file's open can match it.
    let spec = dir.path().join("once.spec");
    std::fs::copy(testkit::repo().join("specs/dot.spec"), &spec).unwrap();
    let spec = spec.to_str().unwrap();
    // `run` without --impl times the spec's body: the whole road from the
    // spec to a report, a compiled and run driver included.
    let commands: [&[&str]; 3] = [
        &["run", spec, "--samples", "1", "-D", "NS=4096"],
        &["explain", spec, "-D", "NS=4096"],
        &["check", spec],
    ];
    for args in commands {
        let log = dir.path().join(format!("{}.strace", args[0]));
        let out = Command::new("strace")
            .args(["-f", "-qq", "-e", OPENS, "-o"])
            .arg(&log)
            .arg(env!("CARGO_BIN_EXE_tdg"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?} under strace failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let trace = std::fs::read_to_string(&log).unwrap();
        let opens: Vec<&str> = trace
            .lines()
            .filter(|l| l.contains(&format!("\"{spec}\"")))
            .collect();
        assert_eq!(
            opens.len(),
            1,
            "tdg {args:?} opened the spec {} times:\n{}",
            opens.len(),
            opens.join("\n")
        );
    }
}
