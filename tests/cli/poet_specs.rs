//! The reference generator's own test specs (specs/poet, from POET's
//! test/timerGeneration): all six accepted for a driver, and gemv.spec's
//! `returns(Y)` without a body verified against a second implementation
//! given with `--reference`, or not verified with one line saying why.

use crate::support::tdg_in as tdg;

fn poet(name: &str) -> String {
    testkit::repo()
        .join("specs/poet")
        .join(name)
        .display()
        .to_string()
}

const SIX: [&str; 6] = [
    "chfac.spec",
    "dgemm.spec",
    "gemm1.spec",
    "gemv.spec",
    "ger.spec",
    "trmm.spec",
];

#[test]
fn the_reference_generators_six_test_specs_are_accepted() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = vec!["check".to_string(), "--for".into(), "driver".into()];
    args.extend(SIX.iter().map(|s| poet(s)));
    let out = tdg(&args, tmp.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for s in SIX {
        assert!(
            text.lines()
                .any(|l| l.contains(s) && l.contains(": ok for driver")),
            "{s}: {text}"
        );
    }
}

/// ATLAS's column-at-a-time dgemvN, the implementation timed.
const BY_COLUMNS: &str = r#"
void ATL_dgemvN_a1_x1_bX_y1(const int M, const int N, const double alpha, const double *A, const int lda,
                            const double *X, const int incX, const double beta, double *Y, const int incY)
{
    (void)alpha; (void)incX; (void)incY;
    for (int i = 0; i < M; i++)
        Y[i] *= beta;
    for (int j = 0; j < N; j++)
        for (int i = 0; i < M; i++)
            Y[i] += A[j * lda + i] * X[j];
}
"#;

/// A row-at-a-time dot product per element: the reference it is checked with.
const BY_ROWS: &str = r#"
void ATL_dgemvN_a1_x1_bX_y1(const int M, const int N, const double alpha, const double *A, const int lda,
                            const double *X, const int incX, const double beta, double *Y, const int incY)
{
    (void)alpha; (void)incX; (void)incY;
    for (int i = 0; i < M; i++) {
        double s = beta * Y[i];
        for (int j = 0; j < N; j++)
            s += A[j * lda + i] * X[j];
        Y[i] = s;
    }
}
"#;

#[test]
fn gemv_without_a_body_is_verified_against_a_reference_implementation() {
    let _heavy = testkit::shared();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("columns.c"), BY_COLUMNS).unwrap();
    std::fs::write(d.join("rows.c"), BY_ROWS).unwrap();
    // Leaves out the first column: a wrong result the comparison must catch.
    std::fs::write(
        d.join("wrong.c"),
        BY_COLUMNS.replace("for (int j = 0; j < N; j++)", "for (int j = 1; j < N; j++)"),
    )
    .unwrap();
    let spec = poet("gemv.spec");
    let run = |implementation: &str, reference: Option<&str>| {
        let mut args = vec![
            "run",
            spec.as_str(),
            "--impl",
            implementation,
            "--samples",
            "5",
        ];
        if let Some(r) = reference {
            args.extend(["--reference", r]);
        }
        let out = tdg(&args, d);
        (
            out.status,
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (status, out, err) = run("columns.c", Some("rows.c"));
    assert!(status.success(), "{err}");
    assert!(out.contains("verification passed"), "{out}");
    assert!(!err.contains("not verifying"), "{err}");

    let (status, _, err) = run("wrong.c", Some("rows.c"));
    assert!(!status.success());
    assert!(
        err.contains("verification FAILED: Y[") && err.contains("the reference gives"),
        "{err}"
    );

    let (status, out, err) = run("columns.c", None);
    assert!(status.success(), "{err}");
    let said: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("not verifying"))
        .collect();
    assert_eq!(
        said,
        ["tdg run: not verifying `Y`: the spec gives `ATL_dgemvN_a1_x1_bX_y1` no body to compare with; pass --reference K.c, a second implementation, to compare the outputs"],
        "{err}"
    );
    assert!(!out.contains("verification passed"), "{out}");
}
