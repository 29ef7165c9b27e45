//! Malformed specs: each is rejected with the right message at the right
//! line:column, and a hint where one is possible.

/// A prototype and init that are fine on their own, so each case below can
/// break exactly one thing.
use spec_lang::ast::{Fill, InitValue};

const OK_HEAD: &str = "routine=void f(const int N, double* X);\n";

struct Expect {
    line: usize,
    col: usize,
    message: &'static str,
    hint: &'static str,
}

fn first_error(src: &str) -> spec_lang::Diagnostic {
    match spec_lang::check_source(src, "t.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
    {
        Ok(_) => panic!("accepted a malformed spec:\n{src}"),
        Err(d) => d.first().clone(),
    }
}

/// The spec is rejected with a diagnostic whose message contains
/// `e.message`, at `e.line:e.col`, with a hint containing `e.hint`: every
/// case asserts both the location and the way out, as docs/ARCHITECTURE.md
/// promises of every spec error.
#[track_caller]
fn rejects(src: &str, e: Expect) {
    let all = match spec_lang::check_source(src, "t.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
    {
        Ok(_) => panic!("accepted a malformed spec:\n{src}"),
        Err(d) => d,
    };
    let Some(d) = all.items.iter().find(|d| d.message.contains(e.message)) else {
        panic!(
            "no diagnostic contains {:?}; got:\n{all}\nsource:\n{src}",
            e.message
        )
    };
    assert_eq!(
        (d.line, d.col),
        (e.line, e.col),
        "location of {:?}\nsource:\n{src}",
        d.message
    );
    let got = d.hint.as_deref().unwrap_or("");
    assert!(
        !e.hint.is_empty() && got.contains(e.hint),
        "hint {got:?} does not contain {:?} (message {:?})",
        e.hint,
        d.message
    );
}

fn x(line: usize, col: usize, message: &'static str, hint: &'static str) -> Expect {
    Expect {
        line,
        col,
        message,
        hint,
    }
}

// ---- syntax -------------------------------------------------------------

#[test]
fn missing_semicolon_after_prototype_points_at_end_of_line() {
    rejects(
        "routine=void f(const int N, double* X)\ninit={N=1;};",
        x(1, 39, "expected `;`", "ends with `;`"),
    );
}

#[test]
fn missing_semicolon_between_init_entries() {
    rejects(
        &format!("{OK_HEAD}init={{N=1 X=Vector(double, RANDOM, _, N);}};"),
        x(
            2,
            11,
            "expected `;` or an operator, found `X`",
            "every clause and init entry ends with",
        ),
    );
}

#[test]
fn clause_keyword_without_equals() {
    rejects(
        "routine void f(const int N);",
        x(1, 1, "expected `=` after `routine`", "routine="),
    );
}

#[test]
fn unknown_clause_suggests_the_right_one() {
    rejects(
        &format!("{OK_HEAD}flops=\"2*N\";"),
        x(2, 1, "unknown clause `flops=`", "`flop`"),
    );
}

#[test]
fn unterminated_string() {
    rejects(
        &format!("include=\"#include <stdio.h>\n{OK_HEAD}"),
        x(1, 9, "string is never closed", "closing"),
    );
}

#[test]
fn unbalanced_body_brace() {
    rejects(
        "routine=void f(const int N, double* X) {\n  if (N) { X[0] = 1;\n};\n",
        x(1, 40, "this `{` is never closed", "braces"),
    );
}

#[test]
fn parameter_without_name() {
    rejects(
        "routine=void f(const int, double* X);",
        x(1, 16, "this parameter has no name", "const int NAME"),
    );
}

#[test]
fn routine_without_return_type() {
    rejects("routine=f(const int N);", x(1, 9, "no return type", "void"));
}

#[test]
fn not_a_c_type() {
    rejects(
        &format!("{OK_HEAD}init={{N=1; X=Matrix(unsigned double, N, N, RANDOM, _);}};"),
        x(2, 21, "`unsigned double` is not a C type", "supported"),
    );
}

#[test]
fn integer_literal_too_large() {
    rejects(
        &format!("{OK_HEAD}init={{N=99999999999999999999;}};"),
        x(2, 9, "does not fit in 64 bits", "float"),
    );
}

#[test]
fn float_literal_out_of_range() {
    rejects(
        &format!("{OK_HEAD}init={{N=1e999;}};"),
        x(2, 9, "out of range", "doubles go up to about 1.8e308"),
    );
}

#[test]
fn no_routine_clause_is_a_whole_file_error() {
    let d = first_error("init={N=1;};");
    assert!(d.message.contains("no `routine=` clause"), "{}", d.message);
    assert!(d.span.is_none());
    assert!(d.hint.unwrap().contains("routine=void"));
}

#[test]
fn duplicate_clause_names_the_first() {
    rejects(
        &format!("{OK_HEAD}init={{N=1;}};\nflop=\"N\";\nflop=\"2*N\";"),
        x(4, 1, "duplicate `flop` clause", "line 3"),
    );
}

#[test]
fn unknown_language() {
    rejects(
        &format!("lang=cobol;\n{OK_HEAD}"),
        x(1, 6, "unknown language `cobol`", "fortran"),
    );
}

// ---- arrays, fills, attributes -----------------------------------------

#[test]
fn vector_with_too_few_arguments() {
    rejects(
        &format!("{OK_HEAD}init={{N=1; X=Vector(double, RANDOM, N);}};"),
        x(
            2,
            14,
            "`Vector` takes 3 arguments after the type, found 2",
            "Vector(type, fill, attrs, n)",
        ),
    );
}

#[test]
fn misspelt_fill() {
    rejects(
        &format!("{OK_HEAD}init={{N=1; X=Vector(double, RANDM, _, N);}};"),
        x(2, 29, "expected a fill", "`RANDOM`"),
    );
}

#[test]
fn misspelt_attribute() {
    rejects(
        &format!("{OK_HEAD}init={{N=1; X=Vector(double, RANDOM, flsh|align(16), N);}};"),
        x(2, 37, "unknown attribute `flsh`", "`flush`"),
    );
}

#[test]
fn alignment_not_a_power_of_two() {
    rejects(
        &format!("{OK_HEAD}init={{N=1; X=Vector(double, RANDOM, align(24), N);}};"),
        x(
            2,
            43,
            "power of two, got 24",
            "use 8, 16, 32, 64, 4096, ...",
        ),
    );
}

#[test]
fn flush_and_warm_conflict() {
    rejects(
        &format!("{OK_HEAD}init={{N=1; X=Vector(double, RANDOM, flush|warm, N);}};"),
        x(2, 43, "`flush` and `warm` conflict", "keep `flush`"),
    );
}

#[test]
fn misalign_not_larger_than_align() {
    rejects(
        &format!("{OK_HEAD}init={{N=1; X=Vector(double, RANDOM, align(64)|misalign(32), N);}};"),
        x(
            2,
            47,
            "misalign(32) must be larger than align(64)",
            "misalign(128)",
        ),
    );
    rejects(
        &format!("{OK_HEAD}init={{N=1; X=Vector(double, RANDOM, align(64)|misalign(64), N);}};"),
        x(
            2,
            47,
            "misalign(64) must be larger than align(64)",
            "misalign",
        ),
    );
}

#[test]
fn attribute_given_twice() {
    rejects(
        &format!("{OK_HEAD}init={{N=1; X=Vector(double, RANDOM, flush|flush, N);}};"),
        x(2, 43, "attribute `flush` given twice", "keep one"),
    );
}

#[test]
fn element_type_mismatch() {
    rejects(
        &format!("{OK_HEAD}init={{N=1; X=Vector(float, RANDOM, _, N);}};"),
        x(
            2,
            21,
            "element type `float` does not match parameter `X` (`double*`)",
            "`double`",
        ),
    );
}

#[test]
fn array_for_a_scalar_parameter() {
    rejects(
        &format!("{OK_HEAD}init={{N=Vector(int, RANDOM, _, 4); X=Vector(double, RANDOM, _, 4);}};"),
        x(
            2,
            9,
            "`N` is not a pointer (`const int`) but is initialised as an array",
            "give it a scalar value",
        ),
    );
}

#[test]
fn array_expression_inside_arithmetic() {
    rejects(
        &format!("{OK_HEAD}init={{N=1+Vector(int, RANDOM, _, 4);}};"),
        x(
            2,
            11,
            "can only be the whole value of an init entry",
            "give it its own entry",
        ),
    );
}

// ---- names and values ---------------------------------------------------

#[test]
fn undefined_name_in_size_suggests_a_parameter() {
    rejects(
        "routine=void f(const int M, const int lda, double* A);\ninit={M=4; lda=M; A=Matrix(double, ldaa, M, RANDOM, _);};",
        x(2, 36, "undefined name `ldaa` in the size of `A`", "did you mean `lda`?"),
    );
}

#[test]
fn undefined_name_in_flop_formula_points_inside_the_string() {
    rejects(
        &format!("{OK_HEAD}init={{N=1; X=Vector(double, RANDOM, _, N);}};\nflop=\"2*N*K\";"),
        x(3, 11, "undefined name `K` in the flop formula", "N, X"),
    );
}

#[test]
fn flop_formula_that_does_not_parse_points_inside_the_string() {
    rejects(
        &format!("{OK_HEAD}init={{N=1; X=Vector(double, RANDOM, _, N);}};\nflop=\"2*(N+\";"),
        x(
            3,
            12,
            "flop formula does not parse: expected an expression, found end of formula",
            "a flop formula is arithmetic",
        ),
    );
    rejects(
        &format!("{OK_HEAD}init={{N=1; X=Vector(double, RANDOM, _, N);}};\nflop=\"2 N\";"),
        x(
            3,
            9,
            "flop formula does not parse",
            "e.g. \"2*M*N*K + M*N\"",
        ),
    );
}

#[test]
fn pointer_parameter_without_allocation() {
    rejects(
        &format!("{OK_HEAD}init={{N=1;}};"),
        x(
            1,
            37,
            "pointer parameter `X` has no allocation",
            "X=Vector(double, RANDOM, _, N);",
        ),
    );
}

#[test]
fn pointer_parameter_given_a_number() {
    rejects(
        &format!("{OK_HEAD}init={{N=1; X=0;}};"),
        x(
            2,
            14,
            "pointer parameter `X` has no allocation",
            "a pointer needs an array",
        ),
    );
}

#[test]
fn scalar_parameter_without_value_is_accepted_with_a_located_warning_and_the_value_one() {
    let src = "routine=void f(const int N, const double alpha, double* X);\ninit={X=Vector(double, RANDOM, _, N);};";
    let checked = spec_lang::check_source(src, "t.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .expect("accepted");
    let w = &checked.warnings.items;
    assert_eq!(w.len(), 2, "{}", checked.warnings);
    assert_eq!((w[0].line, w[0].col), (1, 26));
    assert!(
        w[0].message
            .contains("`N` has no init: the driver passes 1"),
        "{}",
        w[0].message
    );
    assert_eq!(
        w[0].hint.as_deref(),
        Some("add e.g. `N=Macro(NS, 100);` to init to choose its value")
    );
    assert_eq!(w[0].severity, spec_lang::diag::Severity::Warning);
    assert_eq!((w[1].line, w[1].col), (1, 42));
    let text = checked.warnings.to_string();
    assert!(
        text.starts_with("t.spec:1:26: warning: scalar parameter `N`"),
        "{text}"
    );
    // The value is defined and used: X has N = 1 element.
    assert_eq!(checked.operands[0].dims, vec![1]);
    let n = checked.scalars.iter().find(|s| s.name == "N").unwrap();
    assert!(n.implicit);
    assert_eq!(checked.values["N"], spec_lang::eval::Value::Int(1));
    assert_eq!(checked.values["alpha"], spec_lang::eval::Value::Float(1.0));
    // A spec that initialises everything has no warnings.
    let full =
        "routine=void f(const int N, double* X);\ninit={N=4; X=Vector(double, RANDOM, _, N);};";
    assert!(spec_lang::check_source(full, "t.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .unwrap()
        .warnings
        .is_empty());
}

#[test]
fn opaque_scalar_parameter_without_value_is_still_an_error() {
    rejects(
        "routine=void f(struct cfg c, double* X);\ninit={X=Vector(double, RANDOM, _, 8);};",
        x(1, 27, "parameter `c` has no value", "c="),
    );
}

#[test]
fn a_number_is_a_constant_fill_as_in_the_reference_generator() {
    for (fill, want) in [
        ("0", "Vector(double, 0, flush, N)"),
        ("-1.5", "Vector(double, -1.5, flush, N)"),
        ("2e-3", "Vector(double, 0.002, flush, N)"),
        ("CONST(-1.5)", "Vector(double, CONST(-1.5), flush, N)"),
    ] {
        let src = format!("{OK_HEAD}init={{N=8; X=Vector(double, {fill}, flush, N);}};");
        let spec = spec_lang::check_source(&src, "t.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Driver))
            .unwrap();
        let InitValue::Array(a) = &spec.init_for("X").unwrap().value else {
            panic!("X is an array")
        };
        assert!(matches!(a.fill, Fill::Const(..)), "{fill}: {:?}", a.fill);
        // tdg fmt keeps the spelling (numbers in canonical form).
        let out = spec_lang::format_source(&src, "t.spec").unwrap();
        assert!(out.contains(want), "{fill}: {out}");
    }
    let ints = "routine=void f(const int N, int* X);\ninit={N=8; X=Vector(int, -3, _, N);};";
    spec_lang::check_source(ints, "t.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .unwrap();
}

#[test]
fn a_constant_fill_must_fit_integer_elements() {
    rejects(
        "routine=void f(const int N, char* X);\ninit={N=8; X=Vector(char, 300, _, N);};",
        x(
            2,
            27,
            "`char` elements cannot hold 300 (they hold -128 to 127)",
            "wider",
        ),
    );
    rejects(
        "routine=void f(const int N, unsigned* X);\ninit={N=8; X=Vector(unsigned int, CONST(-1), _, N);};",
        x(2, 35, "cannot hold -1", "use a wider element type or a value in range"),
    );
    rejects(
        "routine=void f(const int N, int* X);\ninit={N=8; X=Vector(int, 1.5, _, N);};",
        x(
            2,
            26,
            "`int` elements cannot hold 1.5: C would truncate it to 1",
            "give a whole number, or a floating element type",
        ),
    );
}

#[test]
fn init_for_a_name_the_routine_does_not_have() {
    rejects(
        &format!("{OK_HEAD}init={{N=1; X=Vector(double, RANDOM, _, N); Y=Vector(double, RANDOM, _, N);}};"),
        x(2, 44, "`Y` is not a parameter of `f`", "N, X"),
    );
    rejects(
        "routine=void f(const int lda, double* X);\ninit={ld=1; X=Vector(double, RANDOM, _, 4);};",
        x(
            2,
            7,
            "`ld` is not a parameter of `f`",
            "did you mean `lda`?",
        ),
    );
}

#[test]
fn duplicate_init_entry() {
    rejects(
        &format!("{OK_HEAD}init={{N=1;\n N=2; X=Vector(double, RANDOM, _, N);}};"),
        x(3, 2, "`N` is initialised twice", "line 2"),
    );
}

#[test]
fn duplicate_parameter() {
    rejects(
        "routine=void f(const int N, double* N);",
        x(
            1,
            37,
            "parameter `N` is declared twice",
            "the first declaration is on line 1",
        ),
    );
}

#[test]
fn size_uses_a_double() {
    rejects(
        "routine=void f(const int N, const double alpha, double* X);\ninit={N=1; alpha=2; X=Vector(double, RANDOM, _, alpha);};",
        x(2, 49, "size of `X` is not integral: it uses `alpha`, which is a `const double`", "sizes are element counts"),
    );
    rejects(
        &format!("{OK_HEAD}init={{N=1; X=Vector(double, RANDOM, _, 2.5*N);}};"),
        x(
            2,
            40,
            "not integral: it uses the double `2.5`",
            "sizes are element counts",
        ),
    );
}

#[test]
fn size_uses_a_per_call_value() {
    rejects(
        &format!("{OK_HEAD}init={{N=1; X=Vector(double, RANDOM, _, Range(1, 2));}};"),
        x(2, 40, "changes on every call", "sizes are element counts"),
    );
}

#[test]
fn size_that_evaluates_to_zero_or_less() {
    rejects(
        &format!("{OK_HEAD}init={{N=Macro(NS, 3) - 3; X=Vector(double, RANDOM, _, N);}};"),
        x(
            2,
            55,
            "`X`: size is 0; it must be at least 1",
            "change the default, or the expression the size is computed from",
        ),
    );
}

#[test]
fn division_by_zero_in_a_value() {
    rejects(
        &format!("{OK_HEAD}init={{N=8/(2-2); X=Vector(double, RANDOM, _, N);}};"),
        x(
            2,
            9,
            "division by zero",
            "the divisor is 0 with these values",
        ),
    );
}

#[test]
fn cyclic_definitions() {
    rejects(
        "routine=void f(const int N, const int M, double* X);\ninit={N=M; M=N; X=Vector(double, RANDOM, _, N);};",
        x(2, 12, "`M` is defined in terms of itself", "M -> N -> M"),
    );
}

#[test]
fn macro_named_like_a_parameter() {
    rejects(
        &format!("{OK_HEAD}init={{N=Macro(N, 10); X=Vector(double, RANDOM, _, N);}};"),
        x(2, 15, "macro `N` has the name of a parameter", "NS"),
    );
}

#[test]
fn macro_with_two_defaults() {
    rejects(
        "routine=void f(const int N, const int ld, double* X);\ninit={N=Macro(NS, 10); ld=Macro(NS, 12); X=Vector(double, RANDOM, _, N);};",
        x(2, 37, "macro `NS` is given two different defaults", "line 2"),
    );
}

#[test]
fn unknown_function_in_an_expression() {
    rejects(
        &format!("{OK_HEAD}init={{N=Macor(NS, 1);}};"),
        x(2, 9, "unknown function `Macor`", "`Macro`"),
    );
}

#[test]
fn misspelt_typedef_is_an_unknown_type() {
    rejects(
        "routine=void f(const int N, dobule* X);\ninit={N=1; X=Vector(double, RANDOM, _, N);};",
        x(1, 29, "unknown type `dobule`", "did you mean `double`?"),
    );
}

#[test]
fn typedef_from_an_include_is_known() {
    let src = "include=\"typedef struct { double e[3][3]; } su3_matrix;\";\nroutine=void f(const int N, su3_matrix* X);\ninit={N=1; X=Vector(su3_matrix, ZERO, _, N);};";
    spec_lang::check_source(src, "t.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .unwrap_or_else(|d| panic!("{d}"));
}

// ---- returns, timer, checkpoint ----------------------------------------

/// The reference generator's own gemv.spec lists `returns(Y)` with no
/// body: accepted (the driver compares against `--reference K.c`, or says
/// it cannot verify).
#[test]
fn returns_without_a_reference_body_is_accepted() {
    let src = format!("{OK_HEAD}init={{N=1; X=Vector(double, RANDOM, _, N);}};\nreturns(X);");
    let spec = spec_lang::check_source(&src, "t.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(spec.returns[0].name, "X");
}

#[test]
fn returns_of_a_const_or_by_value_parameter() {
    let src = "routine=void f(const int N, const double* X) { }\ninit={N=1; X=Vector(double, RANDOM, _, N);};\nreturns(X, N);";
    rejects(
        src,
        x(
            3,
            9,
            "`X` is `const double*`: the routine cannot write it",
            "drop it from returns, or the `const` if the routine writes it",
        ),
    );
    let all = spec_lang::check_source(src, "t.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .unwrap_err();
    assert_eq!(all.len(), 2, "{all}");
    assert!(all.items[1].message.contains("`N` is passed by value"));
    assert_eq!((all.items[1].line, all.items[1].col), (3, 12));
    assert!(all.items[1].hint.is_some(), "{all}");
}

#[test]
fn returns_of_a_void_routine_value() {
    rejects(
        "routine=void f(const int N, double* X) { }\ninit={N=1; X=Vector(double, RANDOM, _, N);};\nreturns(f);",
        x(3, 9, "`f` returns void", "list the output arrays instead"),
    );
}

#[test]
fn timer_setting_with_a_typo() {
    rejects(
        &format!("{OK_HEAD}timer={{method=cylce;}};"),
        x(2, 15, "`cylce` is not a valid timer method", "`cycle`"),
    );
    rejects(
        &format!("{OK_HEAD}timer={{metod=cycle;}};"),
        x(2, 8, "unknown setting `metod`", "`method`"),
    );
    rejects(
        &format!("{OK_HEAD}timer={{min_interval=5;}};"),
        x(2, 21, "`5` is not a duration", "ms"),
    );
    rejects(
        &format!("{OK_HEAD}timer={{samples=0;}};"),
        x(
            2,
            16,
            "`0` is not a sample count",
            "write a positive integer",
        ),
    );
    rejects(
        &format!("{OK_HEAD}timer={{max_time=500us;}};"),
        x(
            2,
            17,
            "`500us` is not a whole number of milliseconds of at least 1",
            "0.25s",
        ),
    );
    rejects(
        &format!("{OK_HEAD}timer={{stable=0.5;}};"),
        x(2, 15, "`0.5` is not a tolerance in per cent", "0.5%"),
    );
    rejects(
        &format!("{OK_HEAD}timer={{code_offset=4096;}};"),
        x(
            2,
            20,
            "`4096` is not an offset within a page",
            "modulo 4096",
        ),
    );
    rejects(
        &format!("{OK_HEAD}timer={{threads=0;}};"),
        x(2, 16, "`0` is not a thread count", "threads=2"),
    );
    rejects(
        &format!("{OK_HEAD}timer={{threads=two;}};"),
        x(2, 16, "`two` is not a thread count", "1 to 1024"),
    );
    rejects(
        &format!("{OK_HEAD}timer={{ threads=2; method=cpu; }};"),
        x(
            2,
            27,
            "method=cpu cannot time a routine on 2 threads",
            "method=cycle or method=wall",
        ),
    );
    rejects(
        &format!("{OK_HEAD}timer={{ min_time=200ms; max_time=100ms; }};"),
        x(
            2,
            1,
            "max_time (100 ms) is below min_time (200 ms)",
            "at least min_time",
        ),
    );
}

#[test]
fn checkpoint_clause_problems() {
    rejects(
        &format!("{OK_HEAD}checkpoint={{mode=delayed(2);}};"),
        x(
            2,
            1,
            "the checkpoint clause has no image",
            "add image=\"path/to/image-dir\"",
        ),
    );
    rejects(
        &format!("{OK_HEAD}checkpoint={{image=\"a\"; mode=delayed(0);}};"),
        x(
            2,
            29,
            "delayed(k) needs a positive integer k",
            "k is how many calls before the timed one",
        ),
    );
    rejects(
        &format!("{OK_HEAD}checkpoint={{image=\"a\"; mode=imediate;}};"),
        x(2, 29, "`imediate` is not a checkpoint mode", "`immediate`"),
    );
}

#[test]
fn tune_clause_problems() {
    // A role that is not one, with the nearest spelling.
    rejects(
        &format!("{OK_HEAD}tune={{ NB=tiel; }};"),
        x(2, 11, "`tiel` is not a tuning role of `NB`", "`tile`"),
    );
    // Two macros cannot share a role.
    rejects(
        &format!("{OK_HEAD}tune={{ NB=tile; TB=tile; }};"),
        x(
            2,
            17,
            "`NB` and `TB` both have the role tile",
            "a kernel has one",
        ),
    );
    rejects(
        &format!("{OK_HEAD}tune={{ NB=tile;\n  NB=rows; }};"),
        x(3, 3, "`NB` is given a role twice", "line 2"),
    );
    // A constraint is located inside its string: the operator that is
    // missing its right-hand side.
    rejects(
        &format!("{OK_HEAD}tune={{ constraint=\"NB % MU == \"; }};"),
        x(
            2,
            31,
            "constraint does not parse: expected an expression",
            "a constraint compares",
        ),
    );
    rejects(
        &format!("{OK_HEAD}tune={{ constraint=\"NB < 4 &&\"; }};"),
        x(2, 29, "constraint does not parse", "joined by && and ||"),
    );
    rejects(
        &format!("{OK_HEAD}tune={{ constraint=NB; }};"),
        x(
            2,
            19,
            "a constraint is a condition in quotes",
            "constraint=\"NB % MU == 0\"",
        ),
    );
    rejects(
        &format!("{OK_HEAD}tune={{ constraint=\" \"; }};"),
        x(2, 19, "empty constraint", "drop the setting"),
    );
    rejects(
        &format!("{OK_HEAD}tune={{ layout=row; }};"),
        x(2, 15, "`row` is not a result layout", "row_major"),
    );
    rejects(
        &format!("{OK_HEAD}tune={{}};\ntune={{}};"),
        x(3, 1, "duplicate `tune` clause", "line 2"),
    );
}

#[test]
fn a_tune_clause_reads_back_roles_and_conditions() {
    let spec = spec_lang::parse(
        &format!(
            "{OK_HEAD}tune={{ TILE=tile; RT_R=rows; RT_C=cols; KU=kunroll;\n  constraint=\"TILE % RT_R == 0 && (RT_R*RT_C <= 16 || RT_C == 1)\"; }};"
        ),
        "t.spec",
    )
    .unwrap();
    let t = spec.tune.expect("a tune clause");
    use spec_lang::ast::TuneRole::*;
    assert_eq!(
        t.roles
            .iter()
            .map(|(n, r)| (n.name.as_str(), *r))
            .collect::<Vec<_>>(),
        [
            ("TILE", Tile),
            ("RT_R", Rows),
            ("RT_C", Cols),
            ("KU", KUnroll)
        ]
    );
    let c = &t.constraints[0];
    let env = |tile: i64, r: i64, cc: i64| {
        [("TILE", tile), ("RT_R", r), ("RT_C", cc)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), spec_lang::eval::Value::Int(v)))
            .collect()
    };
    let holds =
        |tile, r, cc| spec_lang::eval::eval_condition(&c.condition, &env(tile, r, cc)).unwrap();
    assert!(holds(64, 4, 4));
    assert!(!holds(64, 3, 4), "64 % 3 != 0");
    assert!(!holds(64, 4, 8), "32 registers > 16 and RT_C != 1");
    assert!(holds(64, 32, 1), "RT_C == 1 allows the long tile");
    let names: Vec<String> = c.condition.names().into_iter().map(|i| i.name).collect();
    assert_eq!(names, ["TILE", "RT_R", "RT_C"]);
    // An unknown name is an evaluation error naming it, not a false.
    let e = spec_lang::eval::eval_condition(&c.condition, &Default::default()).unwrap_err();
    assert!(e.message.contains("`TILE` has no value"), "{e}");
}

// ---- rendering ------------------------------------------------------------

#[test]
fn display_shows_location_source_line_caret_and_hint() {
    let src = "routine=void f(const int M, const int lda, double* A);\ninit={M=4; lda=M; A=Matrix(double, ldaa, M, RANDOM, _);};";
    let d = spec_lang::check_source(src, "gemm.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .unwrap_err();
    let text = d.to_string();
    let want = "gemm.spec:2:36: error: undefined name `ldaa` in the size of `A`\n \
                2 | init={M=4; lda=M; A=Matrix(double, ldaa, M, RANDOM, _);};\n   \
                |                                    ^^^^\n   \
                = hint: did you mean `lda`?";
    assert_eq!(text, want);
}

#[test]
fn every_error_is_reported_not_only_the_first() {
    let src = "routine=void f(const int N, double* X, double* Y);\ninit={N=K; X=Vector(double, RANDOM, flush|warm, N);};";
    let d = spec_lang::check_source(src, "t.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .unwrap_err();
    let msgs: Vec<&str> = d.items.iter().map(|i| i.message.as_str()).collect();
    assert!(msgs.iter().any(|m| m.contains("no allocation")), "{msgs:?}");
    assert!(
        msgs.iter().any(|m| m.contains("undefined name `K`")),
        "{msgs:?}"
    );
    assert!(msgs.iter().any(|m| m.contains("conflict")), "{msgs:?}");
    // Sorted by position: the prototype's `Y` comes first.
    assert!(d.items[0].message.contains("`Y`"), "{msgs:?}");
    // Each one located, each with a way out.
    for i in &d.items {
        assert!(i.span.is_some() && i.hint.is_some(), "{d}");
    }
}

#[test]
fn random_bounds_reversed() {
    rejects(
        &format!("{OK_HEAD}init={{N=1; X=Vector(double, RANDOM(1, -1), _, N);}};"),
        x(
            2,
            29,
            "RANDOM(1, -1) has its bounds reversed",
            "RANDOM(-1, 1)",
        ),
    );
    rejects(
        "routine=void f(const double a);\ninit={a=RANDOM(Macro(HI, 2), 0.5);};",
        x(
            2,
            9,
            "RANDOM(2, 0.5) has its bounds reversed",
            "write RANDOM",
        ),
    );
}

#[test]
fn string_as_a_fill_value() {
    rejects(
        &format!("{OK_HEAD}init={{N=1; X=Vector(double, CONST(\"1\"), _, N);}};"),
        x(2, 35, "a fill value must be a number, not a string", "FILE"),
    );
}

#[test]
fn opaque_struct_elements_cannot_be_filled_with_numbers() {
    rejects(
        "routine=void f(const int N, struct node* p);\ninit={N=4; p=Vector(struct node, RANDOM, _, N);};",
        x(2, 34, "`struct node` elements can only be filled with ZERO or FILE(...)", "fields"),
    );
    let ok = "routine=void f(const int N, struct node* p);\ninit={N=4; p=Vector(struct node, FILE(\"nodes.bin\"), _, N);};";
    spec_lang::check_source(ok, "t.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .unwrap_or_else(|d| panic!("{d}"));
}

#[test]
fn array2d_needs_a_pointer_to_pointer_parameter() {
    rejects(
        "routine=void f(const int N, double* A);\ninit={N=4; A=Array2D(double, N, N, RANDOM, _);};",
        x(
            2,
            14,
            "`A` is a single pointer (`double*`) but is initialised as an array",
            "double** A",
        ),
    );
    let ok = "routine=void f(const int N, double** A);\ninit={N=4; A=Array2D(double, N, N, RANDOM, _);};";
    spec_lang::check_source(ok, "t.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .unwrap_or_else(|d| panic!("{d}"));
}

#[test]
fn const_char_parameter_takes_a_string() {
    let ok = "routine=void dgemm(const char* transa, const int N, double* A);\ninit={transa=\"N\"; N=4; A=Vector(double, RANDOM, _, N*N);};";
    spec_lang::check_source(ok, "t.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .unwrap_or_else(|d| panic!("{d}"));
    rejects(
        "routine=void f(const int N);\ninit={N=\"4\";};",
        x(
            2,
            9,
            "`N` is a `const int`, not a string",
            "strings can only initialise `const char*` parameters",
        ),
    );
}

#[test]
fn stray_token_between_clauses_says_what_a_clause_looks_like() {
    rejects(
        &format!("{OK_HEAD}init={{N=1; X=Vector(double, RANDOM, _, N);}};\n}}\n"),
        x(
            3,
            1,
            "expected end of file or a clause (`routine=`, `init=`, `flop=`, ...), found `}`",
            "each clause reads `name=value;`",
        ),
    );
}

/// C would wrap these silently; sizes computed from the unwrapped value would
/// then disagree with what the routine receives.
#[test]
fn integer_value_that_does_not_fit_its_parameter_type() {
    rejects(
        "routine=void f(const int N, double* X);\ninit={N=3000000000; X=Vector(double, RANDOM, _, 4);};",
        x(
            2,
            9,
            "`N` is a `const int`: 3000000000 does not fit (it holds -2147483648 to 2147483647)",
            "wider type",
        ),
    );
    rejects(
        "routine=void f(size_t n, double* X);\ninit={n=Macro(NS, 1) - 2; X=Vector(double, RANDOM, _, 4);};",
        x(2, 9, "`n` is a `size_t`: -1 does not fit", "wider type"),
    );
    rejects(
        "routine=void f(unsigned char c, double* X);\ninit={c=256; X=Vector(double, RANDOM, _, 4);};",
        x(2, 9, "`c` is a `unsigned char`: 256 does not fit (it holds 0 to 255)", "use a wider type in the prototype"),
    );
    // The edges themselves are fine.
    for ok in [
        "routine=void f(const int N);\ninit={N=2147483647;};",
        "routine=void f(const int N);\ninit={N=-2147483648;};",
        "routine=void f(size_t n);\ninit={n=9223372036854775807;};",
    ] {
        if let Err(d) = spec_lang::check_source(ok, "ok.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Driver))
        {
            panic!("{ok}\n{d}");
        }
    }
}

#[test]
fn division_by_zero_has_a_hint() {
    rejects(
        &format!("{OK_HEAD}init={{N=1/0; X=Vector(double, RANDOM, _, 4);}};"),
        x(2, 9, "division by zero", "divisor is 0"),
    );
}

#[test]
fn a_prototype_is_a_complete_spec_for_interposition_but_not_for_a_driver() {
    let src = "routine=int BZ2_blockSort(EState* s);\ninclude=\"typedef struct EState EState;\";\n";
    let spec = spec_lang::check_source(src, "bz.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Checkpoint))
        .unwrap();
    assert_eq!(spec.routine.params.len(), 1);
    let e = spec_lang::check_source(src, "bz.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .map_err(located_with_hints)
        .unwrap_err()
        .to_string();
    assert!(e.contains("pointer parameter `s` has no allocation"), "{e}");
    // Everything else is still checked: a misspelt type is an error either way.
    let e = spec_lang::check_source("routine=int f(Estate* s);\n", "x.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Checkpoint))
        .map_err(located_with_hints)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown type `Estate`"), "{e}");
}

/// Every diagnostic of a rejected spec points into the source and carries
/// a hint (the callers then check the rendered text's message).
#[track_caller]
fn located_with_hints(d: spec_lang::Diagnostics) -> spec_lang::Diagnostics {
    for i in &d.items {
        assert!(
            i.span.is_some() && i.hint.as_deref().is_some_and(|h| !h.is_empty()),
            "{:?} has no location or no hint\n{d}",
            i.message
        );
    }
    d
}

/// The prototype-only spec's first diagnostic, as `line:col message (hint)`;
/// it must point into the source and carry a hint.
#[track_caller]
fn prototype_error(src: &str) -> String {
    match spec_lang::check_source(src, "p.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Checkpoint))
    {
        Ok(_) => panic!("accepted:\n{src}"),
        Err(d) => {
            let d = d.first();
            assert!(
                d.span.is_some() && d.hint.as_deref().is_some_and(|h| !h.is_empty()),
                "{:?} has no location or no hint",
                d.message
            );
            format!(
                "{}:{} {} ({})",
                d.line,
                d.col,
                d.message,
                d.hint.as_deref().unwrap_or("")
            )
        }
    }
}

const DGEMM: &str = "routine=void dgemm(int layout, int m, int n, int k, double alpha, const double* a, int lda, const double* b, int ldb, double beta, double* c, int ldc);\n";

#[test]
fn outputs_of_a_prototype_carry_their_counts() {
    // The count written with the output, or its allocation's sizes; no
    // body needed, since the comparison is on a checkpoint image.
    for ok in [
        format!("{DGEMM}returns(c[ldc*m]);"),
        format!("{DGEMM}returns(c[(ldc - 0) * n + 0 / 1 % 7]);"),
        format!("{DGEMM}init={{c=Matrix(double, ldc, n, ZERO, _);}};\nreturns(c);"),
        "routine=long f(const int n, double* x);\nreturns(f, x[n]);".to_string(),
    ] {
        if let Err(d) = spec_lang::check_source(&ok, "p.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Checkpoint))
        {
            panic!("{ok}\n{d}");
        }
    }
    // Formatting keeps the count.
    let src = format!("{DGEMM}returns(c[ldc * m]);\n");
    let spec = spec_lang::parse(&src, "p.spec").unwrap();
    assert!(spec_lang::format::format(&spec).contains("returns(c[ldc*m]);"));
    assert_eq!(
        spec_lang::format::expr(spec.output_count(&spec.returns[0]).as_ref().unwrap()),
        "ldc*m"
    );

    let e = prototype_error(&format!("{DGEMM}returns(c);"));
    assert!(
        e.starts_with("2:9 output `c` has no count") && e.contains("returns(c[COUNT])"),
        "{e}"
    );
    let e = prototype_error(&format!("{DGEMM}returns(c[ldcc*m]);"));
    assert!(
        e.starts_with("2:11 the count of `c` names `ldcc`, which is not a parameter of dgemm")
            && e.contains("did you mean `ldc`"),
        "{e}"
    );
    let e = prototype_error(&format!("{DGEMM}returns(c[alpha]);"));
    assert!(
        e.starts_with("2:11 the count of `c` uses `alpha`, a `double`"),
        "{e}"
    );
    let e = prototype_error(&format!("{DGEMM}returns(c[a]);"));
    assert!(e.contains("uses `a`, a `const double*`"), "{e}");
    let e = prototype_error(&format!("{DGEMM}returns(c[m*2.5]);"));
    assert!(
        e.starts_with("2:13 the count of `c` must be an integer expression"),
        "{e}"
    );
    let e = prototype_error(&format!("{DGEMM}returns(ldc[4]);"));
    assert!(e.contains("`ldc` is passed by value"), "{e}");
    let e = prototype_error(&format!("{DGEMM}returns(d[4]);"));
    assert!(
        e.contains("returns names `d`, which is not a parameter"),
        "{e}"
    );
    let e = prototype_error("routine=long f(const int n, double* x);\nreturns(f[n]);");
    assert!(
        e.contains("`f` is the return value, a single value: it takes no count"),
        "{e}"
    );
    let e = prototype_error("routine=void f(int n, double** rows);\nreturns(rows[n]);");
    assert!(
        e.contains("its elements are pointers") && e.contains("TDG_REGION_OUTPUT"),
        "{e}"
    );
    // An allocation whose size is not the call's to give: a macro.
    let e = prototype_error(&format!(
        "{DGEMM}init={{c=Vector(double, ZERO, _, Macro(CN, 64));}};\nreturns(c);"
    ));
    assert!(
        e.contains("the count of `c` must be an integer expression")
            && e.contains("returns(c[COUNT])"),
        "{e}"
    );
    // A driver still needs an allocation for each pointer.
    let e = spec_lang::check_source(&format!("{DGEMM}returns(c[ldc*m]);"), "p.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .map_err(located_with_hints)
        .unwrap_err()
        .to_string();
    assert!(e.contains("has no allocation"), "{e}");
}

// ---- properties of the spec text that `check` finds, not the model -------

#[test]
fn misalign_is_checked_against_the_default_alignment() {
    rejects(
        &format!("{OK_HEAD}init={{N=1; X=Vector(double, RANDOM, misalign(8), N);}};"),
        x(
            2,
            37,
            "misalign(8) must be larger than the default align(16)",
            "align(8)|misalign(16)",
        ),
    );
}

#[test]
fn a_size_from_a_per_call_scalar_is_located() {
    rejects(
        &format!("{OK_HEAD}init={{N=Range(10, 1); X=Vector(double, RANDOM, _, N);}};"),
        x(
            2,
            51,
            "the size of `X` uses `N`, which changes per call (Range); sizes must be fixed",
            "give `N` a fixed value",
        ),
    );
    // Through another scalar, too.
    rejects(
        "routine=void f(const int N, const int M, double* X);\ninit={N=RANDOM(1, 9); M=N+1; X=Vector(double, ZERO, _, M);};",
        x(2, 56, "uses `M`, which changes per call (RANDOM)", "give `M` a fixed value, or size `X` from a Macro"),
    );
}

#[test]
fn value_fills_need_arithmetic_elements_and_file_needs_one_block() {
    rejects(
        "include=\"typedef struct { double re, im; } cplx;\";\nroutine=void f(const int N, cplx* X);\ninit={N=4; X=Vector(cplx, SEQ, _, N);};",
        x(
            3,
            27,
            "a SEQ fill needs an arithmetic element type; `cplx` is not",
            "ZERO",
        ),
    );
    rejects(
        "routine=void f(const int N, double** X);\ninit={N=4; X=Array2D(double, N, N, FILE(\"x.bin\"), _);};",
        x(2, 36, "FILE(...) fills need contiguous storage", "Matrix"),
    );
}

#[test]
fn a_per_call_value_inside_an_expression_is_located() {
    rejects(
        "routine=void f(const int N, const double a, double* X);\ninit={N=4; a=Range(1, 1) * 2; X=Vector(double, ZERO, _, N);};",
        x(
            2,
            14,
            "Range(...) changes per call and must be the whole value of `a`",
            "a scalar of its own",
        ),
    );
    rejects(
        "routine=void f(const int N, double* X);\ninit={N=Macro(NS, RANDOM); X=Vector(double, ZERO, _, N);};",
        x(2, 19, "RANDOM changes per call", "give it a scalar of its own"),
    );
    // As whole values they are fine.
    spec_lang::check_source("routine=void f(const int N, const double a, const double b, const int k, double* X);\ninit={N=4; a=RANDOM; b=RANDOM(0, N); k=Range(1, N); X=Vector(double, ZERO, _, N);};", "t.spec", &[]).and_then(|c| c.for_use(spec_lang::Use::Driver))
    .unwrap_or_else(|d| panic!("{d}"));
}

const BLOCKSORT: &str = "include=\"#include \\\"bzlib_private.h\\\"\";\nroutine=void BZ2_blockSort(EState* s, EState** pp, int n, void* raw);\n";

#[test]
fn outputs_reached_through_a_struct_are_member_paths_of_a_pointer_parameter() {
    // The block a member points to (counted by an integer member, reached
    // from the same or another pointer parameter) and a member itself; the
    // typedef comes from the header, which the C compiler reads.
    for ok in [
        format!("{BLOCKSORT}returns(s->ptr[s->nblock], s->origPtr);"),
        format!("{BLOCKSORT}returns(s->cfg.p->block[(s->nblock + 1) * n], s->arr[4]);"),
    ] {
        if let Err(d) = spec_lang::check_source(&ok, "p.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Checkpoint))
        {
            panic!("{ok}\n{d}");
        }
    }
    // The canonical layout keeps the paths (spaces around `->` dropped).
    let spec = spec_lang::parse(
        &format!("{BLOCKSORT}returns(s -> ptr[s->nblock * 2], s->cfg . n);\n"),
        "p.spec",
    )
    .unwrap();
    assert_eq!(spec.returns[0].text(), "s->ptr");
    assert_eq!(spec.returns[1].text(), "s->cfg.n");
    assert!(
        spec_lang::format::format(&spec).contains("returns(s->ptr[s->nblock*2], s->cfg.n);"),
        "{}",
        spec_lang::format::format(&spec)
    );

    // Located errors: line:col of the step (or the root) at fault.
    let e = prototype_error(&format!("{BLOCKSORT}returns(n->x);"));
    assert!(
        e.starts_with("3:9 `n` is passed by value (`int`)")
            && e.contains("starts at a pointer parameter"),
        "{e}"
    );
    let e = prototype_error(&format!("{BLOCKSORT}returns(s->ptr[4], pp->ptr[4]);"));
    assert!(
        e.starts_with("3:20 `pp` is `EState**`: `->` reaches a pointer, not a struct"),
        "{e}"
    );
    let e = prototype_error(&format!("{BLOCKSORT}returns(s->);"));
    assert!(
        e.starts_with("3:10 `s->` names no member") && e.contains("`s->ptr`"),
        "{e}"
    );
    let e = prototype_error(&format!("{BLOCKSORT}returns(s->ptr[s->cfg.]);"));
    assert!(e.starts_with("3:22 `s->cfg.` names no member"), "{e}");
    let e = prototype_error(&format!("{BLOCKSORT}returns(s.ptr[4]);"));
    assert!(
        e.starts_with("3:10 `s` is a pointer (`EState*`): its members are reached with `->`")
            && e.contains("write `s->ptr`"),
        "{e}"
    );
    let e = prototype_error(&format!("{BLOCKSORT}returns(raw->x);"));
    assert!(e.contains("`raw` is `void*`, which has no members"), "{e}");
    let e = prototype_error(&format!("{BLOCKSORT}returns(t->x);"));
    assert!(
        e.starts_with("3:9 `t->x` starts at `t`, which is not a parameter"),
        "{e}"
    );
    // Counts: the same rules for the paths they read.
    let e = prototype_error(&format!("{BLOCKSORT}returns(s->ptr[n->m]);"));
    assert!(e.starts_with("3:16 `n` is passed by value"), "{e}");
    let e = prototype_error(&format!(
        "{BLOCKSORT}returns(s->ptr[s->nblock], s->ptr[4]);"
    ));
    assert!(e.contains("`s->ptr` is listed twice in returns"), "{e}");
    // Without an include= nothing defines the struct: the hint names the way out.
    let e = prototype_error(
        "routine=void BZ2_blockSort(struct EState* s);\nreturns(s->ptr[s->nblock]);",
    );
    assert!(
        e.starts_with("2:10 `s->ptr` reads members of `struct EState`, and the spec has no include= that defines it")
            && e.contains("the struct's header"),
        "{e}"
    );
    let e = prototype_error(
        "lang=fortran;\ninclude=\"typedef struct S S;\";\nroutine=void f(S* s);\nreturns(s->x);",
    );
    assert!(
        e.contains("a Fortran routine's arguments have no C members"),
        "{e}"
    );
    // A member has a value only in the application's call: not in an init
    // entry, and never in a driver (which makes its own arguments).
    let e = prototype_error(&format!("{BLOCKSORT}init={{ n=s->nblock; }};"));
    assert!(
        e.contains("`s->nblock` is a struct member: it has a value only in the application's call"),
        "{e}"
    );
    let e = spec_lang::check_source("routine=void f(struct S* s) { }\ninclude=\"struct S { int* p; int n; };\";\ninit={ s=Vector(struct S, ZERO, _, 1); };\nreturns(s->p[s->n]);\n", "d.spec", &[]).and_then(|c| c.for_use(spec_lang::Use::Driver))
        .map_err(located_with_hints)
    .unwrap_err()
    .to_string();
    assert!(e.contains("a driver makes its own arguments"), "{e}");
}

/// `record=` names parameters, each once, numbers or addresses, at most as
/// many as a profile record holds; a sound one is kept in order.
#[test]
fn record_lists_parameters_to_profile() {
    const HEAD: &str = "include=\"typedef struct cfg cfg;\";\nroutine=void f(const int M, const int lda, double alpha, double* A, cfg c);\n";
    rejects(
        &format!("{HEAD}record=M, ldaa;\n"),
        x(
            3,
            11,
            "`ldaa` in record= is not a parameter",
            "did you mean `lda`?",
        ),
    );
    rejects(
        &format!("{HEAD}record=M, lda, M;\n"),
        x(3, 16, "`M` is listed twice in record=", "list it once"),
    );
    rejects(
        &format!("{HEAD}record=c;\n"),
        x(3, 8, "`c` is a `cfg` passed by value", "record the integer"),
    );
    let many: Vec<String> = (0..41).map(|i| format!("p{i}")).collect();
    let params: Vec<String> = many.iter().map(|p| format!("int {p}")).collect();
    let src = format!(
        "routine=void g({});\nrecord={};\n",
        params.join(", "),
        many.join(",")
    );
    let col = "record=".len() + many[..40].iter().map(|p| p.len() + 1).sum::<usize>() + 1;
    rejects(
        &src,
        x(
            2,
            col,
            "record= lists 41 parameters; a profile records at most 40",
            "keep the parameters that size the work",
        ),
    );
    let ok = format!("{HEAD}record=lda, A, alpha;\n");
    let spec = spec_lang::check_source(&ok, "t.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Checkpoint))
        .unwrap();
    let names: Vec<&str> = spec
        .record
        .as_ref()
        .unwrap()
        .names
        .iter()
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(names, ["lda", "A", "alpha"]);
    assert_eq!(
        spec_lang::format(&spec).lines().last(),
        Some("record=lda, A, alpha;")
    );
}

/// One load checks every use: the spec keeps which it serves and, located,
/// why not the others; `-D` values naming its macros are applied, other
/// names are left to the implementation's compile.
#[test]
fn one_load_says_which_uses_a_spec_serves_and_why_not_the_others() {
    use spec_lang::Use;
    let proto = "routine=void f(const int n, double* x);\nreturns(x[n]);\n";
    let c = spec_lang::check_source(proto, "p.spec", &[]).unwrap();
    assert!(c.serves(Use::Profile) && c.serves(Use::Checkpoint));
    assert!(!c.serves(Use::Driver));
    let e = c.require(Use::Driver).unwrap_err().to_string();
    assert!(
        e.contains("p.spec:1:37: error: pointer parameter `x` has no allocation"),
        "{e}"
    );
    assert!(
        e.contains("   |                                     ^"),
        "{e}"
    );

    // The spec is kept as written; the driver's value for a scalar without
    // init is a resolved fact beside it.
    let implicit =
        "routine=void f(const int N, double* X);\ninit={X=Vector(double, RANDOM, _, 8);};";
    let c = spec_lang::check_source(implicit, "i.spec", &[]).unwrap();
    assert!(c.serves(Use::Driver));
    assert!(c.spec.init_for("N").is_none());
    assert!(c.scalars.iter().any(|s| s.name == "N" && s.implicit));

    let sized = "routine=void f(const int N, double* X);\ninit={N=Macro(NS, 10); X=Vector(double, RANDOM, _, N);};";
    let d = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let c = spec_lang::check_source(sized, "d.spec", &d(&[("NS", "2*2"), ("NB", "64")])).unwrap();
    assert!(c.serves(Use::Driver));
    assert_eq!(c.operands[0].dims, vec![4]);
    assert_eq!(c.overrides.keys().collect::<Vec<_>>(), vec!["NS"]);
    // A define that breaks a size fails the driver only, located.
    let c = spec_lang::check_source(sized, "d.spec", &d(&[("NS", "0")])).unwrap();
    assert!(c.serves(Use::Profile) && !c.serves(Use::Driver));
    let e = c.require(Use::Driver).unwrap_err().to_string();
    assert!(e.contains("d.spec:2:"), "{e}");
    assert!(e.contains("size is 0") && e.contains("with -D NS=0"), "{e}");
    // `tdg check -D` resolves the same read again, scalars included.
    let c = spec_lang::check_source(sized, "d.spec", &[]).unwrap();
    let n5 = c
        .under(&std::collections::BTreeMap::from([("N".to_string(), 5.0)]))
        .unwrap();
    assert_eq!(n5.operands[0].dims, vec![5]);
}
