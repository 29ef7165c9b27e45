//! `tdg profile` / `instrument` / `spec-from-profile` on bad input: one
//! clear line with the cause and a way out, never a panic.

use crate::support::tdg_in as tdg;
use std::process::{Command, Output};

fn one_error_line(out: &Output) -> String {
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!err.contains("panicked"), "{err}");
    let first = err.lines().next().unwrap_or("").to_string();
    assert!(first.starts_with("tdg: error:"), "{err}");
    first
}

#[test]
fn bad_inputs_get_one_line_errors_with_a_way_out() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("junk.tdgp"), "this is not a profile at all").unwrap();

    let e = one_error_line(&tdg(&["profile", "report", "missing.tdgp"], d));
    assert!(
        e.contains("missing.tdgp") && e.contains("No such file"),
        "{e}"
    );
    let e = one_error_line(&tdg(&["profile", "report", "junk.tdgp"], d));
    assert!(
        e.contains("not a tdg profile") && e.contains("tdg profile"),
        "{e}"
    );
    let e = one_error_line(&tdg(&["profile"], d));
    assert!(e.contains("after `--`"), "{e}");
    let e = one_error_line(&tdg(&["profile", "--", "/nonexistent/program"], d));
    assert!(e.contains("could not be started"), "{e}");
    // A zero or wrapping buffer size would be ignored or overflow inside the
    // runtime: refused before the program runs.
    let e = one_error_line(&tdg(&["profile", "--calls", "0", "--", "true"], d));
    assert!(e.contains("--calls 0") && e.contains("positive"), "{e}");
    let e = one_error_line(&tdg(
        &["profile", "--records", "288230376151711744", "--", "true"],
        d,
    ));
    assert!(e.contains("--records") && e.contains("memory"), "{e}");
    // A program that never calls a profiled routine: say why nothing came.
    let e = one_error_line(&tdg(&["profile", "--", "true"], d));
    assert!(
        e.contains("recorded no profiled call") && e.contains("TDG_PROFILE"),
        "{e}"
    );

    std::fs::write(
        d.join("opaque.spec"),
        "routine=void f(struct big b, int n);\ninit={ n=Macro(N, 1); b=0; };\n",
    )
    .unwrap();
    let e = one_error_line(&tdg(&["instrument", "opaque.spec", "-o", "inst"], d));
    assert!(e.contains("struct big"), "{e}");
    // A spec that cannot be read is reported as every spec problem is, in
    // the spec's own name (as `tdg run` reports it), before the profile is
    // opened.
    let out = tdg(
        &["spec-from-profile", "junk.tdgp", "--spec", "nothere.spec"],
        d,
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    let first = err.lines().next().unwrap_or("");
    assert!(
        first.starts_with("nothere.spec: error: cannot read spec")
            && first.contains("check the path"),
        "{err}"
    );
}

#[test]
fn runtime_only_output_builds_a_marker_program_that_tdg_profile_collects() {
    let _heavy = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = tdg(&["instrument", "--runtime-only", "-o", "rt"], d);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "tdg_instrument.h",
        "libtdg_instrument.a",
        "libtdg_instrument.so",
    ] {
        assert!(d.join("rt").join(f).is_file(), "{f}");
    }
    // A `static` routine: only the markers can see it.
    std::fs::write(
        d.join("app.c"),
        r#"#include "tdg_instrument.h"
static volatile double sink;
static double poly(const double *c, int n, double x) { double r = 0; for (int i = n - 1; i >= 0; i--) r = r * x + c[i]; return r; }
int main(void) {
    double c[32] = {1};
    for (int k = 0; k < 500; k++) { int n = k % 2 ? 32 : 8; TDG_PROFILE("poly", "n:i", sink = poly(c, n, 0.5), n); }
    return 0;
}
"#,
    )
    .unwrap();
    let st = Command::new("cc")
        .args([
            "-O2",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-Irt",
            "app.c",
            "rt/libtdg_instrument.a",
            "-lpthread",
            "-o",
            "app",
        ])
        .current_dir(d)
        .status()
        .unwrap();
    assert!(st.success());
    let out = tdg(&["profile", "-o", "poly.tdgp", "--", "./app"], d);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rep = tdg(&["profile", "report", "poly.tdgp"], d);
    let text = String::from_utf8_lossy(&rep.stdout);
    assert!(text.contains("500 calls"), "{text}");
    assert!(text.contains("n=32") && text.contains("n=8"), "{text}");
    // The profiled program's status is reported, not passed through: it
    // would collide with tdg's own (3 is "did not compile").
    let out = tdg(
        &["profile", "-o", "x.tdgp", "--", "sh", "-c", "./app; exit 3"],
        d,
    );
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("exited with status 3"), "{err}");
}
