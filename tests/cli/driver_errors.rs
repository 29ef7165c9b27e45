//! What the user sees when things go wrong: build failures, crashes,
//! wrong results, bad input. Nothing may panic; every message says why.

use crate::driver_support::*;
use driver_gen::RunError;

const AXPY: &str = r#"
routine=void daxpy(const int N, const double alpha, const double* X, double* Y) {
  for (int i = 0; i < N; i++) Y[i] += alpha * X[i];
};
init={
  N=1000; alpha=RANDOM(-1, 1);
  X=Vector(double, RANDOM, flush, N);
  Y=Vector(double, RANDOM, flush, N);
};
returns(Y);
"#;

#[test]
fn build_failure_shows_the_compilers_message() {
    let _heavy = testkit::shared();
    let e = try_build(
        AXPY,
        "void daxpy(int N) { return undeclared_thing; }\n",
        &opts(),
    )
    .err()
    .expect("must fail");
    let msg = e.to_string();
    assert!(matches!(e, RunError::ImplBuild { .. }), "{msg}");
    assert!(msg.contains("undeclared_thing"), "{msg}");
}

#[test]
fn segfault_is_reported_with_signal_and_phase() {
    let _heavy = testkit::shared();
    // Crashes on its third call: the warm-up and the probe succeed.
    let imp = "static int n; void daxpy(const int N, const double a, const double *X, double *Y) { (void)N; (void)a; (void)X; (void)Y; if (++n == 3) *(volatile int *)0 = 1; }\n";
    let kit = build(AXPY, imp, &opts());
    let mut o = opts();
    o.timing.min_interval_ns = Some(0);
    let e = kit.built.run(&o).expect_err("must crash");
    let msg = e.to_string();
    assert!(msg.contains("SIGSEGV"), "{msg}");
    assert!(msg.contains("timing sample 1"), "{msg}");
}

#[test]
fn sigfpe_in_the_warm_up_call_names_that_call() {
    let _heavy = testkit::shared();
    let imp = "volatile int zero; int q; void daxpy(const int N, const double a, const double *X, double *Y) { (void)a; (void)X; (void)Y; q = N / zero; }\n";
    let kit = build(AXPY, imp, &opts());
    match kit.built.run(&opts()) {
        Err(RunError::Crashed {
            signal_name, phase, ..
        }) => {
            assert_eq!(signal_name, "SIGFPE");
            assert!(phase.contains("warm-up"), "{phase}");
        }
        other => panic!("expected a SIGFPE crash, got {other:?}"),
    }
}

#[test]
fn wrong_results_fail_verification_loudly() {
    let _heavy = testkit::shared();
    let wrong = "void daxpy(const int N, const double a, const double *X, double *Y) { int i; for (i = 0; i < N; i++) Y[i] += 2 * a * X[i]; }\n";
    let kit = build(AXPY, wrong, &opts());
    match kit.built.run(&opts()) {
        Err(e @ RunError::VerificationFailed { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("Y["), "{msg}");
            assert!(msg.contains("reference"), "{msg}");
        }
        other => panic!("expected a verification failure, got {other:?}"),
    }
    let right = "void daxpy(const int N, const double a, const double *X, double *Y) { int i; for (i = 0; i < N; i++) Y[i] += a * X[i]; }\n";
    let kit = build(AXPY, right, &opts());
    assert_eq!(kit.run(&opts()).verification.status, "passed");
}

#[test]
fn wrong_return_value_fails_verification() {
    let _heavy = testkit::shared();
    let spec_src = r#"
routine=double ddot(const int N, const double* X, const double* Y) {
  double s = 0; for (int i = 0; i < N; i++) s += X[i] * Y[i]; return s;
};
init={ N=500; X=Vector(double, RANDOM, _, N); Y=Vector(double, RANDOM, _, N); };
returns(ddot);
"#;
    let off_by_one = "double ddot(const int N, const double *X, const double *Y) { double s = 0; int i; for (i = 1; i < N; i++) s += X[i] * Y[i]; return s; }\n";
    let kit = build(spec_src, off_by_one, &opts());
    let e = kit.built.run(&opts()).expect_err("must fail");
    assert!(e.to_string().contains("return value"), "{e}");
}

/// A spec that does not serve a driver is refused by the model with
/// the checker's own located diagnostics, not a flattened message.
#[test]
fn the_model_refuses_a_spec_that_serves_no_driver_with_located_errors() {
    let no_allocation = "routine=void f(const int N, double* Y);\ninit={ N=10; };\n";
    let ranged_size = "routine=void f(const int N, double* Y);\ninit={ N=Range(10, 1); Y=Vector(double, RANDOM, _, N); };\n";
    for (src, message, at) in [
        (no_allocation, "has no allocation", "t.spec:1:37: error:"),
        (ranged_size, "sizes must be fixed", "t.spec:2:"),
    ] {
        let spec = spec_lang::check_source(src, "t.spec", &[]).unwrap();
        assert!(!spec.serves(spec_lang::Use::Driver));
        let e = driver_gen::DriverModel::from_checked(
            &spec,
            &driver_gen::DriverConfig::new(driver_gen::MachineDefaults::fixed_for_tests()),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains(message), "{e}");
        assert!(e.contains(at), "{e}");
        assert!(
            e.lines()
                .any(|l| l.trim_start().starts_with('|') && l.contains('^')),
            "no caret: {e}"
        );
    }
}

/// `tdg ARGS` in the repository: (exit status, stdout, stderr).
fn tdg(args: &[&str]) -> (i32, String, String) {
    let out = crate::support::tdg_in(args, &repo());
    let (stdout, stderr) = crate::support::text(&out);
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

#[test]
fn cli_rejects_bad_input_with_one_clear_line() {
    let (code, _, err) = tdg(&["run", "specs/dot.spec", "--impl", "no/such/kernel.c"]);
    assert_eq!(code, 2, "bad input is a usage error (docs/integration.md)");
    assert!(err.contains("--impl") && err.contains("not found"), "{err}");
    assert!(!err.contains("panicked"));

    let (code, _, err) = tdg(&[
        "run",
        "specs/dot.spec",
        "--impl",
        "specs/dot.c",
        "-D",
        "9X=1",
    ]);
    assert_eq!(code, 2, "bad input is a usage error (docs/integration.md)");
    assert!(err.contains("NAME=VALUE"), "{err}");

    let (code, _, err) = tdg(&["gen", "specs/missing.spec"]);
    assert_eq!(code, 2, "bad input is a usage error (docs/integration.md)");
    assert!(err.contains("missing.spec"), "{err}");

    let (code, _, err) = tdg(&[
        "run",
        "specs/dot.spec",
        "--impl",
        "specs/dot.c",
        "--flush-level",
        "9",
    ]);
    assert_eq!(code, 2, "bad input is a usage error (docs/integration.md)");
    assert!(err.contains("L9") && err.contains("L1"), "{err}");
}

#[test]
fn negative_size_is_a_clear_error_not_a_crash() {
    let _heavy = testkit::shared();
    // -D NS=-5 compiles, but a size cast to size_t is huge: the driver must
    // refuse it in one line instead of corrupting the heap.
    let mut o = opts();
    o.defines = vec![("NS".into(), "-5".into())];
    let kit = build(DOT_SPEC, &dot_impl(), &o);
    match kit.built.run(&o) {
        Err(e @ RunError::DriverFailed { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("X has a negative size"), "{msg}");
            assert!(msg.contains("-D"), "{msg}");
            assert_eq!(msg.lines().count(), 1, "{msg}");
        }
        other => panic!("expected a one-line driver error, got {other:?}"),
    }
}
