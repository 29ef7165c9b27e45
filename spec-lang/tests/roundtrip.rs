//! `parse(format(ast)) == ast` over generated specs, formatter idempotence,
//! and no panic on arbitrary or mutated input.

use proptest::prelude::*;
use spec_lang::ast::*;
use spec_lang::vocabulary;

fn sp() -> Span {
    Span::default()
}

const NAMES: &[&str] = &[
    "M", "N", "K", "lda", "ldb", "A", "B", "C", "X", "Y", "alpha", "beta", "n_1", "_tmp", "ZERO",
    "SEQ", "flush", "init",
];

fn ident() -> impl Strategy<Value = Ident> {
    prop_oneof![
        prop::sample::select(NAMES).prop_map(|s| s.to_string()),
        "[a-z_][a-zA-Z0-9_]{0,6}".prop_filter("not a keyword", |s| !is_reserved(s)),
    ]
    .prop_map(|name| Ident { name, span: sp() })
}

/// Words that mean something else where a name can stand.
fn is_reserved(s: &str) -> bool {
    s == "_"
        || [
            vocabulary::SCALAR_FUNCTIONS,
            vocabulary::C_TYPE_NAMES,
            vocabulary::C_TYPE_QUALIFIERS,
            vocabulary::C_DECLARATION_KEYWORDS,
        ]
        .iter()
        .any(|words| words.contains(&s))
}

fn base_type() -> impl Strategy<Value = BaseType> {
    let builtin: Vec<BaseType> = BaseType::BUILTIN
        .iter()
        .filter(|b| **b != BaseType::Void)
        .cloned()
        .collect();
    prop_oneof![
        prop::sample::select(builtin),
        prop::sample::select(vec!["node", "su3_matrix", "s_2"])
            .prop_map(|n| BaseType::Struct(n.into())),
        prop::sample::select(vec!["su3_matrix", "real_t"]).prop_map(|n| BaseType::Named(n.into())),
    ]
}

/// A parameter's type: any of the above, or `void` behind at least one `*`.
fn param_type() -> impl Strategy<Value = CType> {
    prop_oneof![
        4 => ctype(3),
        1 => (any::<bool>(), 1u8..=2).prop_map(|(is_const, pointers)| CType {
            is_const,
            base: BaseType::Void,
            pointers,
            span: sp(),
        }),
    ]
}

fn ctype(max_ptr: u8) -> impl Strategy<Value = CType> {
    (any::<bool>(), base_type(), 0..=max_ptr).prop_map(|(is_const, base, pointers)| CType {
        is_const,
        base,
        pointers,
        span: sp(),
    })
}

fn string_text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 _./#<>\"\\\\\t\n-]{0,12}"
}

fn leaf(strings: bool) -> BoxedStrategy<Expr> {
    let base = prop_oneof![
        (0i64..1_000_000).prop_map(|i| Expr::Int(i, sp())),
        (0i64..=i64::MAX).prop_map(|i| Expr::Int(i, sp())),
        (0.0f64..1e12).prop_map(|f| Expr::Float(f, sp())),
        prop::sample::select(vec![
            0.0,
            0.5,
            1e-300,
            1e300,
            2.5e-7,
            f64::MAX,
            f64::MIN_POSITIVE
        ])
        .prop_map(|f| Expr::Float(f, sp())),
        ident().prop_map(Expr::Name),
        Just(Expr::Random(sp())),
    ];
    if strings {
        prop_oneof![9 => base, 1 => string_text().prop_map(|s| Expr::Str(s, sp()))].boxed()
    } else {
        base.boxed()
    }
}

/// `->a.b`: one to three member steps.
fn member_path() -> impl Strategy<Value = Vec<MemberStep>> {
    prop::collection::vec((any::<bool>(), ident()), 1..4).prop_map(|steps| {
        steps
            .into_iter()
            .map(|(arrow, member)| MemberStep {
                arrow,
                member,
                span: sp(),
            })
            .collect()
    })
}

fn expr_with(strings: bool) -> impl Strategy<Value = Expr> {
    leaf(strings).prop_recursive(5, 48, 3, |inner| {
        prop_oneof![
            (ident(), member_path()).prop_map(|(root, path)| Expr::Member {
                root,
                path,
                span: sp()
            }),
            (ident(), inner.clone()).prop_map(|(name, d)| Expr::Macro {
                name,
                default: Box::new(d),
                span: sp()
            }),
            (inner.clone(), inner.clone()).prop_map(|(lo, hi)| Expr::RandomRange {
                lo: Box::new(lo),
                hi: Box::new(hi),
                span: sp()
            }),
            (inner.clone(), inner.clone()).prop_map(|(b, i)| Expr::Range {
                begin: Box::new(b),
                incr: Box::new(i),
                span: sp()
            }),
            inner.clone().prop_map(|e| Expr::Unary {
                op: UnaryOp::Neg,
                operand: Box::new(e),
                span: sp()
            }),
            (
                prop::sample::select(vec![
                    BinOp::Add,
                    BinOp::Sub,
                    BinOp::Mul,
                    BinOp::Div,
                    BinOp::Mod
                ]),
                inner.clone(),
                inner
            )
                .prop_map(|(op, l, r)| Expr::Binary {
                    op,
                    lhs: Box::new(l),
                    rhs: Box::new(r),
                    span: sp()
                }),
        ]
    })
}

fn expr() -> impl Strategy<Value = Expr> {
    expr_with(true)
}

fn fill() -> impl Strategy<Value = Fill> {
    prop_oneof![
        Just(Fill::Random(sp())),
        (expr(), expr()).prop_map(|(lo, hi)| Fill::RandomRange { lo, hi, span: sp() }),
        Just(Fill::Zero(sp())),
        expr().prop_map(|e| Fill::Const(e, sp())),
        Just(Fill::Seq(sp())),
        string_text().prop_map(|p| Fill::File(p, sp())),
    ]
}

fn attr() -> impl Strategy<Value = Attr> {
    prop_oneof![
        Just(Attr::Flush(sp())),
        Just(Attr::Warm(sp())),
        Just(Attr::Touch(sp())),
        (0u32..13).prop_map(|k| Attr::Align(1 << k, sp())),
        (0u32..13).prop_map(|k| Attr::Misalign(1 << k, sp())),
    ]
}

fn array() -> impl Strategy<Value = ArrayInit> {
    (
        prop::sample::select(vec![
            ArrayKind::Vector,
            ArrayKind::Matrix,
            ArrayKind::Array2D,
            ArrayKind::SVector,
            ArrayKind::SMatrix,
        ]),
        ctype(1),
        prop::collection::vec(expr(), 2),
        fill(),
        prop::collection::vec(attr(), 0..4),
    )
        .prop_map(|(kind, elem, mut dims, fill, attrs)| {
            if matches!(kind, ArrayKind::Vector | ArrayKind::SVector) {
                dims.truncate(1);
            }
            ArrayInit {
                kind,
                elem,
                dims,
                fill,
                attrs,
                span: sp(),
            }
        })
}

fn init() -> impl Strategy<Value = Init> {
    (
        ident(),
        prop_oneof![
            expr().prop_map(InitValue::Scalar),
            array().prop_map(InitValue::Array)
        ],
    )
        .prop_map(|(name, value)| Init {
            name,
            value,
            span: sp(),
            implicit: false,
        })
}

const BODIES: &[&str] = &[
    "",
    " ",
    "\n  for (int i = 0; i < N; i++) Y[i] += a * X[i];\n",
    "\n  if (n) { x[0] = '}'; } /* } */ // {\n  return;\n",
    " const char *s = \"{\\\"}\"; (void)s; ",
    "{}{{}}",
];

fn routine() -> impl Strategy<Value = Routine> {
    (
        prop_oneof![
            Just(CType {
                is_const: false,
                base: BaseType::Void,
                pointers: 0,
                span: sp()
            }),
            param_type()
        ],
        ident(),
        prop::collection::vec((ident(), param_type()), 0..7),
        prop::option::of(prop::sample::select(BODIES)),
    )
        .prop_map(|(ret, name, params, body)| Routine {
            ret,
            name,
            params: params
                .into_iter()
                .map(|(name, ty)| Param { name, ty })
                .collect(),
            body: body.map(|t| Body {
                text: t.to_string(),
                span: sp(),
            }),
            span: sp(),
        })
}

fn timer() -> impl Strategy<Value = TimerClause> {
    (
        prop::option::of(prop::sample::select(vec![
            TimerMethod::Wall,
            TimerMethod::Cycle,
            TimerMethod::Cpu,
        ])),
        prop::option::of(1u32..=u32::MAX),
        prop::option::of(prop::sample::select(vec![
            Selection::Min,
            Selection::Median,
        ])),
        prop::option::of(prop::sample::select(vec![
            FlushMethod::Read,
            FlushMethod::Clflush,
            FlushMethod::None,
        ])),
        prop::option::of(prop_oneof![
            (1u8..=3).prop_map(FlushSize::Level),
            Just(FlushSize::Llc),
            (1u64..1 << 40).prop_map(FlushSize::KiB),
        ]),
        prop::option::of(prop_oneof![
            0u64..1 << 40,
            (0u64..1000).prop_map(|v| v * 1_000_000_000)
        ]),
        // The sampling budget: max_time, when both are set, at least min_time.
        prop::option::of(0u64..100_000),
        prop::option::of(1u64..100_000),
        prop::option::of((1u32..10_000).prop_map(|v| v as f64 / 100.0)),
        prop::option::of(0u32..4096),
        prop::option::of(1u32..=spec_lang::ast::MAX_THREADS),
    )
        .prop_map(
            |(
                method,
                samples,
                select,
                flush,
                flush_size,
                min_interval_ns,
                min_time_ms,
                max_time_ms,
                stable_pct,
                code_offset,
                threads,
            )| TimerClause {
                // CPU time is refused for more than one thread.
                method: match (method, threads) {
                    (Some(TimerMethod::Cpu), Some(n)) if n > 1 => Some(TimerMethod::Wall),
                    (m, _) => m,
                },
                samples,
                select,
                flush,
                flush_size,
                min_interval_ns,
                min_time_ms,
                max_time_ms: match (min_time_ms, max_time_ms) {
                    (Some(lo), Some(hi)) => Some(lo.max(hi)),
                    (_, hi) => hi,
                },
                stable_pct,
                code_offset: code_offset
                    .and_then(|o| spec_lang::ast::CodeOffset::new(i64::from(o))),
                threads,
                span: sp(),
            },
        )
}

fn checkpoint() -> impl Strategy<Value = CheckpointClause> {
    (
        string_text(),
        prop_oneof![
            Just(CheckpointMode::Immediate),
            (1u32..=u32::MAX).prop_map(CheckpointMode::Delayed)
        ],
    )
        .prop_map(|(image, mode)| CheckpointClause {
            image,
            mode,
            span: sp(),
        })
}

fn comparison() -> impl Strategy<Value = Condition> {
    (
        expr_with(false),
        prop::sample::select(vec![
            CmpOp::Eq,
            CmpOp::Ne,
            CmpOp::Lt,
            CmpOp::Le,
            CmpOp::Gt,
            CmpOp::Ge,
        ]),
        expr_with(false),
    )
        .prop_map(|(lhs, op, rhs)| Condition::Compare {
            op,
            lhs,
            rhs,
            span: sp(),
        })
}

fn condition() -> impl Strategy<Value = Condition> {
    prop_oneof![
        comparison(),
        prop::collection::vec(comparison(), 2..4).prop_map(|v| Condition::All(v, sp())),
        prop::collection::vec(comparison(), 2..4).prop_map(|v| Condition::Any(v, sp())),
    ]
}

/// A condition as a user writes it (`&&` binds tighter than `||`, so an
/// `||` inside an `&&` needs parentheses).
fn condition_text(c: &Condition) -> String {
    match c {
        Condition::Compare { op, lhs, rhs, .. } => format!(
            "{} {} {}",
            spec_lang::format::expr(lhs),
            op.symbol(),
            spec_lang::format::expr(rhs)
        ),
        Condition::All(v, _) => v
            .iter()
            .map(condition_text)
            .collect::<Vec<_>>()
            .join(" && "),
        Condition::Any(v, _) => v
            .iter()
            .map(condition_text)
            .collect::<Vec<_>>()
            .join(" || "),
    }
}

fn tune() -> impl Strategy<Value = TuneClause> {
    (
        prop::sample::subsequence(vec!["NB", "MU", "NU", "KU", "T_1"], 0..4),
        prop::option::of(prop::sample::select(vec![
            TuneLayout::ColMajor,
            TuneLayout::RowMajor,
        ])),
        prop::collection::vec(condition(), 0..3),
    )
        .prop_map(|(names, layout, conditions)| TuneClause {
            layout,
            roles: names
                .iter()
                .zip([
                    TuneRole::Tile,
                    TuneRole::Rows,
                    TuneRole::Cols,
                    TuneRole::KUnroll,
                ])
                .map(|(n, r)| {
                    (
                        Ident {
                            name: n.to_string(),
                            span: sp(),
                        },
                        r,
                    )
                })
                .collect(),
            constraints: conditions
                .into_iter()
                .map(|condition| Constraint {
                    text: condition_text(&condition),
                    condition,
                })
                .collect(),
            span: sp(),
        })
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop::collection::vec(string_text(), 0..3),
        prop::sample::select(vec![Lang::C, Lang::Fortran]),
        routine(),
        prop::collection::vec(init(), 0..6),
        prop::collection::vec(
            (
                ident(),
                prop::option::of(member_path()),
                prop::option::of(expr_with(false)),
            ),
            0..3,
        ),
        prop::option::of(prop::collection::vec(ident(), 1..4)),
        prop::option::of(expr_with(false)),
        prop::option::of(timer()),
        prop::option::of(checkpoint()),
        prop::option::of(tune()),
    )
        .prop_map(
            |(includes, lang, routine, init, returns, record, flop, timer, checkpoint, tune)| {
                Spec {
                    includes: includes
                        .into_iter()
                        .map(|text| Include { text, span: sp() })
                        .collect(),
                    lang,
                    routine,
                    init,
                    returns: returns
                        .into_iter()
                        .map(|(id, path, count)| Output {
                            name: id.name,
                            span: id.span,
                            path: path.unwrap_or_default(),
                            count,
                        })
                        .collect(),
                    record: record.map(|names| RecordClause { names, span: sp() }),
                    flop: flop.map(|e| Flop {
                        text: spec_lang::format::expr(&e),
                        expr: e,
                        span: sp(),
                    }),
                    timer,
                    checkpoint,
                    tune,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn parse_of_format_is_identity(s in spec()) {
        let text = spec_lang::format(&s);
        match spec_lang::parse(&text, "p.spec") {
            Ok(back) => prop_assert_eq!(&back, &s, "formatted text:\n{}", text),
            Err(d) => prop_assert!(false, "formatted spec does not parse:\n{}\n---\n{}", d, text),
        }
    }

    #[test]
    fn format_is_idempotent(s in spec()) {
        let once = spec_lang::format(&s);
        let twice = spec_lang::format_source(&once, "p.spec").unwrap();
        prop_assert_eq!(once, twice);
    }

    #[test]
    fn expressions_round_trip_with_minimal_parentheses(e in expr()) {
        let text = spec_lang::format::expr(&e);
        let back = spec_lang::parse_expr(&text, 0).unwrap();
        prop_assert_eq!(back, e);
    }

    #[test]
    fn arbitrary_text_never_panics(src in "\\PC{0,200}") {
        let _ = spec_lang::check_source(&src, "p.spec", &[]).and_then(|c| c.for_use(spec_lang::Use::Driver));
        let _ = spec_lang::format_source(&src, "p.spec");
    }

    #[test]
    fn mutated_specs_never_panic(s in spec(), cuts in prop::collection::vec((any::<prop::sample::Index>(), 0usize..8, "[(){}\";,=|*/ a-z0-9-]{0,3}"), 1..4)) {
        let mut text = spec_lang::format(&s);
        for (at, len, insert) in cuts {
            let mut i = at.index(text.len() + 1);
            while !text.is_char_boundary(i) { i -= 1; }
            let mut j = (i + len).min(text.len());
            while !text.is_char_boundary(j) { j -= 1; }
            text.replace_range(i..j, &insert);
        }
        // Must not panic; any result is fine, and an error must render.
        if let Err(d) = spec_lang::check_source(&text, "m.spec", &[]).and_then(|c| c.for_use(spec_lang::Use::Driver)) {
            prop_assert!(!d.items.is_empty());
            let _ = d.to_string();
        }
        let _ = spec_lang::format_source(&text, "m.spec");
    }
}

#[test]
fn bundled_specs_keep_comments_and_are_canonical_after_one_pass() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../specs");
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "spec") {
            continue;
        }
        let src = std::fs::read_to_string(&p).unwrap();
        let once = spec_lang::format_source(&src, "s").unwrap();
        assert_eq!(
            spec_lang::format_source(&once, "s").unwrap(),
            once,
            "{}",
            p.display()
        );
        assert_eq!(
            spec_lang::parse(&once, "s").unwrap(),
            spec_lang::parse(&src, "s").unwrap()
        );
        let comments_in = src
            .lines()
            .filter(|l| l.trim_start().starts_with("//"))
            .count();
        let comments_out = once
            .lines()
            .filter(|l| l.trim_start().starts_with("//"))
            .count();
        assert_eq!(
            comments_in,
            comments_out,
            "{}: comments lost\n{once}",
            p.display()
        );
    }
}

#[test]
fn format_layout_of_a_messy_spec() {
    let src = "flop = \"2*N\" ;   // per call\n\
               routine = double   f( const int N ,const  double *X ) ;\n\
               /* sizes */ init = { N = Macro( NS , 8 ) ; X = Vector( double , RANDOM , , (N+1)*2 ) ; X2=1; } ;\n\
               timer={samples=7;min_interval=2000us;flush_size=2048K;};\n\
               checkpoint={image=\"img\"; mode=delayed(3);};";
    let want = "routine=double f(const int N, const double* X);\n\
                init={\n  \
                /* sizes */\n  \
                N=Macro(NS, 8);\n  \
                X=Vector(double, RANDOM, _, (N + 1)*2);\n  \
                X2=1;\n\
                };\n\
                flop=\"2*N\"; // per call\n\
                timer={ samples=7; flush_size=2M; min_interval=2ms; };\n\
                checkpoint={ image=\"img\"; mode=delayed(3); };\n";
    assert_eq!(spec_lang::format_source(src, "m.spec").unwrap(), want);
}

/// Found by the fuzzer: an unclosed `/*` inside the routine body is C text,
/// not a spec comment, and must not swallow the rest of the file.
#[test]
fn unclosed_block_comment_inside_a_body_stays_in_the_body() {
    let src =
        "routine=void f(const int N) {\n  int x; /* never closed\n};\ninit={N=1;};\nflop=\"N\";\n";
    let spec = spec_lang::parse(src, "b.spec").unwrap();
    assert!(spec
        .routine
        .body
        .as_ref()
        .unwrap()
        .text
        .contains("/* never closed"));
    let out = spec_lang::format_source(src, "b.spec").unwrap();
    assert_eq!(spec_lang::parse(&out, "o.spec").unwrap(), spec, "{out}");
    assert_eq!(out, src.replace("init={N=1;}", "init={\n  N=1;\n}"));
}

/// An empty body once made the comment scanner loop forever.
#[test]
fn empty_body_formats() {
    let src = "routine=void f(void) {}; // nothing\n";
    assert_eq!(
        spec_lang::format_source(src, "e.spec").unwrap(),
        "// nothing\nroutine=void f() {};\n"
    );
}

/// Found by the fuzzer: an unquoted flop formula is printed back in quotes,
/// so it may not contain a string (or a comment with a quote).
#[test]
fn unquoted_flop_formula_is_kept_canonical() {
    let d = spec_lang::parse("routine=void f(const int N);\nflop=2*\"N\";", "f.spec").unwrap_err();
    assert_eq!((d.first().line, d.first().col), (2, 8));
    assert!(d.first().message.contains("cannot contain a string"));
    let s = spec_lang::parse(
        "routine=void f(const int N);\nflop=2* /* \" */ N;",
        "f.spec",
    )
    .unwrap();
    assert_eq!(s.flop.as_ref().unwrap().text, "2*N");
    let out = spec_lang::format(&s);
    assert_eq!(spec_lang::parse(&out, "o.spec").unwrap(), s);
}

#[test]
fn durations_in_decimal_seconds_are_exact() {
    let s = spec_lang::parse(
        "routine=void f(void);\ntimer={min_interval=0.1s;};",
        "t.spec",
    )
    .unwrap();
    assert_eq!(s.timer.unwrap().min_interval_ns, Some(100_000_000));
    let d = spec_lang::parse(
        "routine=void f(void);\ntimer={min_interval=0.5ns;};",
        "t.spec",
    )
    .unwrap_err();
    assert!(d.first().message.contains("not a duration"));
}

/// Found by the fuzzer: a comment after a body was printed on the body's
/// last line, where a stray quote in the (verbatim) C text paired with a
/// quote in the comment and swallowed the closing brace.
#[test]
fn comment_after_a_body_goes_above_the_routine() {
    let src = "// head\nroutine=void f(void) {\n  x = '\"'; }\n// after \" quote\n;\n";
    let out = spec_lang::format_source(src, "c.spec").unwrap();
    assert_eq!(
        out,
        "// head\n// after \" quote\nroutine=void f() {\n  x = '\"'; };\n"
    );
    assert_eq!(
        spec_lang::parse(&out, "o.spec").unwrap(),
        spec_lang::parse(src, "c.spec").unwrap()
    );
    assert_eq!(spec_lang::format_source(&out, "o.spec").unwrap(), out);
}
