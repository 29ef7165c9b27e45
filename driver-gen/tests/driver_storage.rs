//! Storage kinds, fills and calling conventions: the kernel itself checks
//! what it receives on every call and reports at exit.

mod driver_support;
use driver_support::*;

const CHECKING_KERNEL: &str = r#"
#include <stdio.h>
#include <stdlib.h>
static long violations, calls;
static int registered;
static void report(void) { fprintf(stderr, "violations=%ld calls=%ld\n", violations, calls); }
#define CHECK(c) do { if (!(c)) violations++; } while (0)
void fills(const int n, double **A, const double *S, const int *Q, const unsigned char *F,
           const double *R, double *out)
{
    int i, j;
    if (!registered) { registered = 1; atexit(report); }
    calls++;
    for (i = 0; i < n; i++) {
        CHECK(((size_t)A[i]) % 32 == 0);            /* each row aligned */
        if (i) CHECK(A[i] != A[i - 1]);              /* separate rows */
        for (j = 0; j < 8; j++) CHECK(A[i][j] == 1.5); /* CONST */
        CHECK(S[i] == 2.5);                          /* static, CONST */
        CHECK(Q[i] == i);                            /* SEQ */
        CHECK(R[i] >= 3.0 && R[i] <= 4.0);           /* RANDOM(3, 4) */
    }
    for (i = 0; i < 32; i++) CHECK(F[i] == (unsigned char)(7 * i)); /* FILE */
    for (i = 0; i < 2 * n; i++) out[i] = 1.0;         /* static output */
}
"#;

#[test]
fn array2d_static_and_every_fill_kind_reach_the_kernel_intact() {
    let _load = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let bytes: Vec<u8> = (0..32u32).map(|i| (7 * i) as u8).collect();
    let file = dir.path().join("recorded.bin");
    std::fs::write(&file, &bytes).unwrap();
    let spec_src = format!(
        r#"
routine=void fills(const int n, double** A, const double* S, const int* Q,
                   const unsigned char* F, const double* R, double* out);
init={{
  n=Macro(NN, 16);
  A=Array2D(double, n, 8, CONST(1.5), align(32));
  S=SVector(double, CONST(2.5), _, n);
  Q=Vector(int, SEQ, _, n);
  F=Vector(unsigned char, FILE("{}"), _, 32);
  R=Vector(double, RANDOM(3, 4), _, n);
  out=SMatrix(double, 2, n, ZERO, _);
}};
"#,
        file.display()
    );
    let kit = build(&spec_src, CHECKING_KERNEL, &opts());
    let (stdout, stderr) = kit.run_raw(&["--json", "--samples=3"]);
    let line = stderr
        .lines()
        .find(|l| l.starts_with("violations="))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.starts_with("violations=0 "), "{line}");
    let v: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    // Array2D: 16 rows of 8 doubles plus the 16 row pointers.
    assert_eq!(v["operands"][0]["bytes"], 16 * 64 + 16 * 8);
    // Static operands never rotate, whatever the mode.
    assert_eq!(v["operands"][1]["copies"], 1);
    assert_eq!(v["operands"][5]["copies"], 1);

    // A recorded file of the wrong size is a clear error, not garbage data.
    std::fs::write(&file, [1u8; 5]).unwrap();
    let (_, stderr) = kit.run_raw(&["--json", "--samples=1"]);
    assert!(
        stderr.contains("holds 5 bytes but the operand needs 32"),
        "{stderr}"
    );
}

#[test]
fn fortran_routines_get_arguments_by_reference() {
    let _load = testkit::shared();
    let spec_src = r#"
lang=fortran;
routine=void DSCAL(const int N, const double alpha, double* X) {
  for (int i = 0; i < N; i++) X[i] *= alpha;
};
init={ N=1000; alpha=0.5; X=Vector(double, RANDOM, _, N); };
returns(X);
"#;
    let imp = "void dscal_(const int *n, const double *alpha, double *x) { int i; for (i = 0; i < *n; i++) x[i] *= *alpha; }\n";
    let kit = build(spec_src, imp, &opts());
    let r = kit.run(&opts());
    assert_eq!(r.verification.status, "passed");
    assert_eq!(kit.built.model.routine.symbol, "dscal_");
}

const SU3_SPEC: &str = r#"
include="typedef struct { double _Complex e[3][3]; } su3_matrix;";
include="typedef struct { double _Complex c[3]; } su3_vector;";
routine=void mult_su3_mat_vec(const int n, const su3_matrix* a, const su3_vector* b, su3_vector* c) {
  for (int s = 0; s < n; s++)
    for (int i = 0; i < 3; i++)
      c[s].c[i] = a[s].e[i][0] * b[s].c[0] + a[s].e[i][1] * b[s].c[1] + a[s].e[i][2] * b[s].c[2];
};
init={ n=500; a=Vector(su3_matrix, RANDOM, flush, n); b=Vector(su3_vector, RANDOM, flush, n); c=Vector(su3_vector, ZERO, flush, n); };
returns(c);
flop="66*n";
"#;

fn su3_impl(scale: &str) -> String {
    format!(
        "typedef struct {{ double _Complex e[3][3]; }} su3_matrix;\n\
         typedef struct {{ double _Complex c[3]; }} su3_vector;\n\
         void mult_su3_mat_vec(const int n, const su3_matrix *a, const su3_vector *b, su3_vector *c) {{\n\
           int s, i;\n\
           for (s = 0; s < n; s++) for (i = 0; i < 3; i++)\n\
             c[s].c[i] = {scale} * (a[s].e[i][2] * b[s].c[2] + a[s].e[i][1] * b[s].c[1] + a[s].e[i][0] * b[s].c[0]);\n\
         }}\n"
    )
}

#[test]
fn struct_operands_are_filled_randomly_and_compared_with_tolerance() {
    let _load = testkit::shared();
    // Summation order differs from the reference: equal within tolerance.
    let kit = build(SU3_SPEC, &su3_impl("1.0"), &opts());
    let r = kit.run(&opts());
    assert_eq!(r.verification.status, "passed");
    assert_eq!(r.operands[0].bytes, 500 * 144);
    // A relative error of 1e-7 is not.
    let kit = build(SU3_SPEC, &su3_impl("1.0000001"), &opts());
    let e = kit.built.run(&opts()).expect_err("must fail verification");
    assert!(e.to_string().contains("c: double"), "{e}");
}

#[test]
fn macro_names_cannot_collide_with_the_drivers_identifiers() {
    let _load = testkit::shared();
    // `b` and `S` are names the driver's own C uses; -D still resizes.
    let spec_src = r#"
routine=double ddot(const int N, const double* X, const double* Y);
init={ N=Macro(b, 1000) + Macro(S, 0); X=Vector(double, RANDOM, flush, N); Y=Vector(double, RANDOM, flush, N); };
"#;
    let mut o = opts();
    o.defines = vec![("b".into(), "3000".into())];
    let kit = build(spec_src, &dot_impl(), &o);
    let r = kit.run(&o);
    assert_eq!(r.operands[0].bytes, 3000 * 8);
}
