//! The bundled example specs parse and check, and mean what they say.

use spec_lang::ast::*;
use std::path::PathBuf;

fn specs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../specs")
}

fn load(name: &str) -> Spec {
    let path = specs_dir().join(name);
    match spec_lang::load(&path, &[]).and_then(|c| c.for_use(spec_lang::Use::Driver)) {
        Ok(s) => s.spec,
        Err(d) => panic!("{name} does not load:\n{d}"),
    }
}

#[test]
fn every_bundled_spec_loads() {
    let mut n = 0;
    for e in std::fs::read_dir(specs_dir()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "spec") {
            if let Err(d) = spec_lang::load(&p, &[]).and_then(|c| c.for_use(spec_lang::Use::Driver))
            {
                panic!("{} does not load:\n{d}", p.display());
            }
            n += 1;
        }
    }
    assert!(n >= 5, "expected at least 5 bundled specs, found {n}");
}

#[test]
fn gemm_is_the_papers_spec() {
    let s = load("gemm.spec");
    assert_eq!(s.routine.name.name, "ATL_USERMM");
    assert_eq!(s.routine.ret.base, BaseType::Void);
    let names: Vec<&str> = s
        .routine
        .params
        .iter()
        .map(|p| p.name.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["M", "N", "K", "alpha", "A", "lda", "B", "ldb", "beta", "C", "ldc"]
    );
    let a = &s.routine.params[4].ty;
    assert!(a.is_const && a.base == BaseType::Double && a.pointers == 1);
    let c = &s.routine.params[9].ty;
    assert!(!c.is_const && c.pointers == 1);
    assert_eq!(s.init.len(), 11);
    let InitValue::Scalar(Expr::Macro { name, default, .. }) = &s.init[0].value else {
        panic!("M is not a Macro: {:?}", s.init[0].value)
    };
    assert_eq!(name.name, "MS");
    assert_eq!(**default, Expr::Int(72, Span::default()));
    let InitValue::Array(a) = &s.init[8].value else {
        panic!("A is not an array")
    };
    assert_eq!(a.kind, ArrayKind::Matrix);
    assert_eq!(a.elem.base, BaseType::Double);
    assert_eq!(a.dims.len(), 2);
    assert!(matches!(a.fill, Fill::Random(_)));
    assert_eq!(
        a.attrs,
        vec![
            Attr::Flush(Span::default()),
            Attr::Align(16, Span::default())
        ]
    );
    let flop = s.flop.as_ref().unwrap();
    assert_eq!(flop.text, "2*M*N*K+M*N");
    // 2*M*N*K + M*N: the top node is the addition.
    assert!(matches!(flop.expr, Expr::Binary { op: BinOp::Add, .. }));
    assert!(s.routine.body.is_none());
}

#[test]
fn kernels_with_outputs_have_a_reference_body_and_returns() {
    for (file, outputs) in [
        ("dot.spec", &["ddot"][..]),
        ("axpy.spec", &["Y"][..]),
        ("gemv.spec", &["Y"][..]),
        ("zmv3.spec", &["c"][..]),
    ] {
        let s = load(file);
        let body = s
            .routine
            .body
            .as_ref()
            .unwrap_or_else(|| panic!("{file} has no body"));
        assert!(
            body.text.contains("for ("),
            "{file}: body is {:?}",
            body.text
        );
        let r: Vec<&str> = s.returns.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(r, outputs, "{file}");
        assert!(s.flop.is_some(), "{file} has no flop formula");
    }
}

#[test]
fn zmv3_uses_double_complex_operands() {
    let s = load("zmv3.spec");
    for p in &s.routine.params[1..] {
        assert_eq!(p.ty.base, BaseType::DoubleComplex, "{}", p.name.name);
        assert_eq!(p.ty.pointers, 1);
    }
    let InitValue::Array(c) = &s.init[3].value else {
        panic!()
    };
    assert!(matches!(c.fill, Fill::Zero(_)));
}

#[test]
fn crlf_and_byte_order_mark_are_accepted() {
    let src = std::fs::read_to_string(specs_dir().join("gemm.spec")).unwrap();
    let dos = format!("\u{FEFF}{}", src.replace('\n', "\r\n"));
    let a = spec_lang::check_source(&dos, "dos.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(a.spec, load("gemm.spec"));
    assert_eq!(
        spec_lang::format_source(&dos, "dos.spec").unwrap(),
        spec_lang::format_source(&src, "gemm.spec").unwrap()
    );
}

/// The acceptance text, character for character (specs/gemm.spec
/// carries a comment and could be reformatted; this literal cannot drift).
#[test]
fn the_papers_gemm_text_is_accepted_as_written() {
    let src = "routine=void ATL_USERMM(const int M, const int N, const int K,
    const double alpha, const double* A, const int lda,
    const double* B, const int ldb, const double beta,
    double* C, const int ldc);
init={
  M=Macro(MS,72); N=Macro(NS,72); K=Macro(KS,72);
  lda=MS; ldb=KS; ldc=MS; alpha=1; beta=1;
  A=Matrix(double, M, K, RANDOM, flush|align(16));
  B=Matrix(double, K, N, RANDOM, flush|align(16));
  C=Matrix(double, M, N, RANDOM, flush|align(16));
};
flop=\"2*M*N*K+M*N\";
";
    let s = match spec_lang::check_source(src, "paper.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
    {
        Ok(s) => s,
        Err(d) => panic!("the paper's spec is rejected:\n{d}"),
    };
    assert_eq!(s.spec, load("gemm.spec"), "specs/gemm.spec means the same");
    let flops = spec_lang::eval::flop_count(&s, &Default::default()).unwrap();
    assert_eq!(flops, Some(2.0 * 72f64.powi(3) + 72f64.powi(2)));
}
