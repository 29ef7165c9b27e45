//! Values, sizes and flop counts computed from specs, with and without `-D` overrides.

use spec_lang::ast::*;
use spec_lang::eval::{self, Value};
use std::collections::BTreeMap;

fn spec(src: &str) -> Spec {
    spec_lang::check_source(src, "t.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .unwrap_or_else(|d| panic!("{d}"))
        .spec
}

fn gemm() -> Spec {
    spec_lang::load(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/gemm.spec"),
        &[],
    )
    .and_then(|c| c.for_use(spec_lang::Use::Driver))
    .unwrap()
    .spec
}

fn defs(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn gemm_defaults_and_overrides() {
    let s = gemm();
    let v = eval::scalar_values(&s, &BTreeMap::new()).unwrap();
    for k in ["M", "N", "K", "lda", "ldb", "ldc"] {
        assert_eq!(v[k], 72.0, "{k}");
    }
    assert_eq!(v["alpha"], 1.0);
    let v = eval::scalar_values(&s, &defs(&[("MS", 100.0), ("KS", 40.0)])).unwrap();
    assert_eq!(
        (v["M"], v["N"], v["K"], v["lda"], v["ldb"], v["ldc"]),
        (100.0, 72.0, 40.0, 100.0, 40.0, 100.0)
    );
    let m = eval::macro_values(&s, &defs(&[("NS", 8.0)])).unwrap();
    assert_eq!(m.len(), 3);
    assert_eq!(m["NS"], Value::Int(8));
    assert_eq!(m["MS"], Value::Int(72));
}

#[test]
fn gemm_sizes_and_flops_follow_overrides() {
    let s = gemm();
    let o = defs(&[("MS", 100.0), ("NS", 50.0), ("KS", 30.0)]);
    let env = eval::typed_env(&s, &o).unwrap();
    let a = s.array_for("A").unwrap();
    assert_eq!(eval::array_dims(a, &env).unwrap(), vec![100, 30]);
    assert_eq!(eval::array_bytes(a, &env).unwrap(), Some(100 * 30 * 8));
    let c = s.array_for("C").unwrap();
    assert_eq!(eval::array_elems(c, &env).unwrap(), 100 * 50);
    assert_eq!(
        eval::flop_count(&s, &o).unwrap(),
        Some(2.0 * 100.0 * 50.0 * 30.0 + 100.0 * 50.0)
    );
}

#[test]
fn unknown_override_is_an_error_with_a_suggestion() {
    let e = eval::typed_env(&gemm(), &defs(&[("NSS", 3.0)])).unwrap_err();
    assert!(e.message.contains("-D NSS"), "{e}");
    assert_eq!(e.hint.as_deref(), Some("did you mean `NS`?"));
}

#[test]
fn c_integer_semantics() {
    let s = spec(
        "routine=void f(const int N, const int H, const int R, const double h, double* X);\n\
         init={N=Macro(NS, 7); H=N/2; R=N%4; h=N/2.0; X=Vector(double, RANDOM, _, H*2+R);};",
    );
    let v = eval::scalar_values(&s, &BTreeMap::new()).unwrap();
    assert_eq!(v["H"], 3.0, "int division truncates");
    assert_eq!(v["R"], 3.0);
    assert_eq!(v["h"], 3.5, "a double operand makes it double division");
    let v = eval::scalar_values(&s, &defs(&[("NS", -7.0)])).unwrap();
    assert_eq!(v["H"], -3.0, "truncates toward zero as C99");
    assert_eq!(v["R"], -3.0);
}

#[test]
fn scalar_params_take_their_c_type() {
    let s = spec(
        "routine=void f(const int N, const double a, double* X);\ninit={N=2.9; a=3; X=Vector(double, RANDOM, _, 4);};",
    );
    let env = eval::typed_env(&s, &BTreeMap::new()).unwrap();
    assert_eq!(env["N"], Value::Int(2), "int N = 2.9 is 2 in C");
    assert_eq!(env["a"], Value::Float(3.0));
}

#[test]
fn definition_order_does_not_matter() {
    let s = spec(
        "routine=void f(const int lda, const int M, double* A);\ninit={lda=M+1; M=Macro(MS, 10); A=Matrix(double, lda, M, RANDOM, _);};",
    );
    let env = eval::typed_env(&s, &BTreeMap::new()).unwrap();
    assert_eq!(env["lda"], Value::Int(11));
    assert_eq!(
        eval::array_dims(s.array_for("A").unwrap(), &env).unwrap(),
        vec![11, 10]
    );
}

#[test]
fn random_and_range_values() {
    let s = spec(
        "routine=void f(const int N, const int off, const double a, double* X);\n\
         init={N=4; off=Range(3, 2); a=RANDOM(-1, 1); X=Vector(double, RANDOM, _, N);};",
    );
    let v = eval::scalar_values(&s, &BTreeMap::new()).unwrap();
    assert_eq!(v["off"], 3.0, "Range gives its first value");
    assert!(!v.contains_key("a"), "RANDOM has no single value");
}

#[test]
fn overflow_and_division_by_zero_are_errors_not_wraps() {
    let e = spec_lang::parse_expr("9223372036854775807 + 1", 0).unwrap();
    assert!(eval::eval(&e, &BTreeMap::new())
        .unwrap_err()
        .message
        .contains("overflow"));
    let e = spec_lang::parse_expr("N / (N - N)", 0).unwrap();
    let env = defs(&[("N", 3.0)]);
    assert!(eval::eval(&e, &env)
        .unwrap_err()
        .message
        .contains("division by zero"));
    let e = spec_lang::parse_expr("7.5 % 2", 0).unwrap();
    assert!(eval::eval(&e, &BTreeMap::new())
        .unwrap_err()
        .message
        .contains("`%`"));
}

#[test]
fn eval_precedence_and_unary_minus() {
    let env = defs(&[("M", 3.0), ("N", 4.0)]);
    for (src, want) in [
        ("2*M*N+M*N", 36.0),
        ("2*(M+N)", 14.0),
        ("M - N - 1", -2.0),
        ("M - (N - 1)", 0.0),
        ("-M*-N", 12.0),
        ("--M", 3.0),
        ("N/M*M", 3.0),
        ("1e3 + .5", 1000.5),
        ("0x10", 16.0),
    ] {
        let e = spec_lang::parse_expr(src, 0).unwrap();
        assert_eq!(eval::eval(&e, &env).unwrap(), want, "{src}");
    }
}

#[test]
fn parse_define_accepts_numbers_and_expressions() {
    assert_eq!(eval::parse_define("MS=100").unwrap(), ("MS".into(), 100.0));
    assert_eq!(eval::parse_define("MS=2*64").unwrap(), ("MS".into(), 128.0));
    assert!(eval::parse_define("MS").unwrap_err().contains("NAME=VALUE"));
    assert!(eval::parse_define("1X=3")
        .unwrap_err()
        .contains("not a macro name"));
    assert!(eval::parse_define("X=abc").is_err());
}

#[test]
fn helpers_find_params_inits_and_attributes() {
    let s = gemm();
    assert!(s.param("lda").unwrap().ty.base.is_integral());
    assert!(s.param("nope").is_none());
    assert!(s.init_for("C").is_some());
    assert!(matches!(s.scalar_for("lda"), Some(Expr::Name(_))));
    let a = s.array_for("A").unwrap();
    assert!(a.is_flushed() && !a.is_warm() && !a.is_touched());
    assert_eq!(a.align(), Some(16));
    assert_eq!(a.misalign(), None);
    let names: Vec<&str> = s.macros().iter().map(|(n, _)| n.name.as_str()).collect();
    assert_eq!(names, ["MS", "NS", "KS"]);
    assert_eq!(s.symbol(), "ATL_USERMM");
    let f = spec("lang=fortran;\nroutine=void DAXPY(const int N, double* X);\ninit={N=1; X=Vector(double, SEQ, _, N);};");
    assert_eq!(f.symbol(), "daxpy_");
}

/// However deep a formula nests (parentheses, signs, operator chains), it
/// parses or is refused with a located error; the parser's recursion never
/// runs out of a small thread's stack.
#[test]
fn any_nesting_depth_parses_or_is_refused_on_a_small_stack() {
    let deep = |n: usize| {
        vec![
            format!("{}1{}", "(".repeat(n), ")".repeat(n)),
            format!("{}1", "-".repeat(n)),
            format!("1{}", " + 1".repeat(n)),
            format!("{}N{}", "(-".repeat(n), ")".repeat(n)),
        ]
    };
    let outcome = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || {
            let mut refused = 0;
            for n in [1, 10, 50, 100, 199, 200, 201, 400, 5000] {
                for src in deep(n) {
                    let refusals = [
                        spec_lang::parse_expr(&src, 0).err(),
                        spec_lang::parse_condition(&format!("{src} < 2"), 0).err(),
                    ];
                    for d in refusals.into_iter().flatten() {
                        assert!(d.span.is_some(), "{src}: {}", d.message);
                        refused += 1;
                    }
                }
            }
            refused
        })
        .unwrap()
        .join()
        .expect("no stack overflow or panic");
    assert!(outcome > 0, "the deepest formulas are refused");
}
