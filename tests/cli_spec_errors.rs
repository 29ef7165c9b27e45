//! Every command that loads a spec reports a bad one the same way `tdg check`
//! does: `file:line:col: error: ...`, the source line and a caret, once.

use std::process::Command;

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
        let out = Command::new(env!("CARGO_BIN_EXE_tdg"))
            .args(args)
            .output()
            .unwrap();
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
