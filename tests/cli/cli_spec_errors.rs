//! Every command that loads a spec reports a bad one the same way `tdg check`
//! does: `file:line:col: error: ...`, the source line and a caret, once.

#[test]
fn spec_errors_print_once_with_location_and_caret_from_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("bad.spec");
    std::fs::write(&spec, "routine=void f(int n);\ninit={ n=Macro(N, 10) };\n").unwrap();
    let s = spec.to_str().unwrap();
    let kernel = dir.path().join("k.c");
    std::fs::write(&kernel, "void f(int n) { (void)n; }\n").unwrap();
    let k = kernel.to_str().unwrap();
    let out_dir = dir.path().join("gen");
    let o = out_dir.to_str().unwrap();
    let commands: [&[&str]; 6] = [
        &["check", s],
        &["explain", s],
        &["gen", s, "-o", o],
        &["run", s, "--impl", k],
        &["instrument", s, "-o", o],
        &["tune", s, "--impl", k, "--param", "N=1:2"],
    ];
    for args in commands {
        let out = crate::support::tdg(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(
            err.contains("bad.spec:2:23: error: expected `;`"),
            "{args:?}: {err}"
        );
        assert!(
            err.contains("   |                       ^"),
            "{args:?}: {err}"
        );
        assert!(
            !err.contains("tdg: error"),
            "{args:?} doubles the prefix: {err}"
        );
    }
}

/// A spec that parses and serves a profiling shim but not a driver (a
/// pointer without an allocation): every command that builds a driver
/// refuses it with the checker's located error, caret and hint.
#[test]
fn a_spec_that_serves_no_driver_is_refused_located_by_every_driver_command() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("shim.spec");
    std::fs::write(
        &spec,
        "routine=void f(const int n, double* x);\ninit={ n=Macro(N, 10); };\n",
    )
    .unwrap();
    let s = spec.to_str().unwrap();
    let kernel = dir.path().join("k.c");
    std::fs::write(
        &kernel,
        "void f(const int n, double* x) { (void)n; (void)x; }\n",
    )
    .unwrap();
    let k = kernel.to_str().unwrap();
    let o = dir.path().join("gen");
    let o = o.to_str().unwrap();
    let commands: [&[&str]; 4] = [
        &["explain", s],
        &["gen", s, "-o", o],
        &["run", s, "--impl", k],
        &["tune", s, "--impl", k, "--param", "NB=1:2"],
    ];
    for args in commands {
        let (ok, _, err) = tdg(args);
        assert!(!ok, "{args:?} accepted a spec without an allocation for x");
        assert!(
            err.contains("shim.spec:1:37: error: pointer parameter `x` has no allocation"),
            "{args:?}: {err}"
        );
        assert!(
            err.contains("   |                                     ^"),
            "{args:?}: {err}"
        );
        assert!(
            err.contains("= hint: add e.g. `x=Vector(double"),
            "{args:?}: {err}"
        );
    }
}

fn tdg(args: &[&str]) -> (bool, String, String) {
    let out = crate::support::tdg(args);
    let (stdout, stderr) = crate::support::text(&out);
    (out.status.success(), stdout, stderr)
}

const DOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/specs/dot.spec");

#[test]
fn explain_sizes_operands_with_the_same_d_expression_check_evaluates() {
    let (ok, out, err) = tdg(&["check", "-D", "NS=2*64", DOT]);
    assert!(ok, "{err}");
    assert!(out.contains("2 arrays totalling 2.0 KiB"), "{out}");
    let (ok, out, err) = tdg(&["explain", "-D", "NS=2*64", DOT]);
    assert!(ok, "{err}");
    assert!(out.contains("= 128: fixed for every call"), "{out}");
    assert!(
        out.contains("X (const double*): double [N] in one heap block, 1024 bytes"),
        "{out}"
    );
    // An override that breaks a size is the same located error on both paths.
    for cmd in ["check", "explain"] {
        let (ok, _, err) = tdg(&[cmd, "-D", "NS=2-2", DOT]);
        assert!(!ok, "{cmd} accepted a size of 0");
        assert!(
            err.contains("dot.spec:10:45: error: `X`: size is 0"),
            "{cmd}: {err}"
        );
        assert!(err.contains("hint: with -D NS=0"), "{cmd}: {err}");
    }
    // A value that is no number is named with its way out.
    let (ok, _, err) = tdg(&["explain", "-D", "NS=many", DOT]);
    assert!(!ok);
    assert!(
        err.contains("-D NS=many") && err.contains("e.g. -D NS=4096"),
        "{err}"
    );
}

#[test]
fn misalignment_against_the_default_alignment_is_located_by_check() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("mis.spec");
    std::fs::write(
        &spec,
        "routine=void f(const int N, double* X);\ninit={\n  N=Macro(NS, 100);\n  X=Vector(double, RANDOM, misalign(8), N);\n};\n",
    )
    .unwrap();
    let s = spec.to_str().unwrap();
    let kernel = dir.path().join("k.c");
    std::fs::write(
        &kernel,
        "void f(const int N, double *X) { (void)N; (void)X; }\n",
    )
    .unwrap();
    for args in [
        vec!["check", s],
        vec!["explain", s],
        vec!["run", s, "--impl", kernel.to_str().unwrap()],
    ] {
        let (ok, _, err) = tdg(&args);
        assert!(
            !ok,
            "{args:?} accepted misalign(8) under the default align(16)"
        );
        assert!(
            err.contains(
                "mis.spec:4:28: error: misalign(8) must be larger than the default align(16)"
            ),
            "{args:?}: {err}"
        );
        assert!(err.contains("align(8)|misalign(16)"), "{args:?}: {err}");
    }
    // The suggested fix passes.
    std::fs::write(
        &spec,
        "routine=void f(const int N, double* X);\ninit={\n  N=Macro(NS, 100);\n  X=Vector(double, RANDOM, align(8)|misalign(16), N);\n};\n",
    )
    .unwrap();
    let (ok, out, err) = tdg(&["explain", s]);
    assert!(ok, "{err}");
    assert!(out.contains("aligned to 8 bytes and never to 16"), "{out}");
}

#[test]
fn an_unclosed_comment_is_the_error_not_the_brace_it_hides() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("cmt.spec");
    std::fs::write(
        &spec,
        "routine=void f(const int N, double* X);\ninit={\n  N=Macro(NS, 100); /* unfinished\n  X=Vector(double, RANDOM, _, N);\n};\n",
    )
    .unwrap();
    let (ok, _, err) = tdg(&["check", spec.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        err.contains("cmt.spec:3:21: error: this comment is never closed"),
        "{err}"
    );
    assert!(err.contains("                     ^^"), "{err}");
    assert!(err.contains("add `*/`"), "{err}");
    assert!(!err.contains("`{` is never closed"), "{err}");
}
