//! Source text -> [`Spec`]: the pest grammar plus a builder that turns the
//! generic parts of the parse tree (words, calls, settings) into typed AST
//! nodes with precise diagnostics.

use crate::ast::*;
use crate::diag::{did_you_mean, Diagnostic, Diagnostics};
use crate::vocabulary::{
    Keyword, ATTRIBUTES, CHECKPOINT_MODES, CLAUSES, FILLS, SCALAR_FUNCTIONS, TIMER_SETTINGS,
    TUNE_SETTINGS,
};
use pest::iterators::Pair;
use pest::Parser;

mod ctypes;
mod errors;
mod grammar;
mod literals;

use crate::number::parse_int;
use ctypes::*;
use errors::*;
pub use grammar::MAX_DEPTH;
use grammar::{span_of, Built, InputKind, Rule, SpecParser};
pub(crate) use literals::unescape;
use literals::*;

/// Parses a spec without semantic checks (see [`crate::check`]).
pub fn parse(src: &str, file: &str) -> Result<Spec, Diagnostics> {
    if let Some(d) = nesting_too_deep(src) {
        return Err(Diagnostics::single(file, src, d));
    }
    pest::set_error_detail(true);
    let mut pairs = match SpecParser::parse(Rule::spec, src) {
        Ok(p) => p,
        Err(e) => {
            return Err(Diagnostics::single(
                file,
                src,
                pest_error(&e, src, 0, InputKind::File),
            ))
        }
    };
    let spec_pair = pairs.next().expect("grammar: spec is the root rule");
    let mut b = Builder {
        src: src.to_string(),
        ..Builder::default()
    };
    let spec = b.spec(spec_pair);
    match spec {
        Some(s) if b.errors.is_empty() => Ok(s),
        _ => Err(Diagnostics::new(file, src, b.errors)),
    }
}

/// Parses one scalar expression (as written in a `-D NAME=expr` override or a
/// flop formula). Spans are offsets into `src` plus `base`.
pub fn parse_expr(src: &str, base: usize) -> Result<Expr, Diagnostic> {
    parse_formula(src, base, Rule::flop_formula, InputKind::Formula, |b, p| {
        b.expr(p, 0)
    })
}

/// Parses a search-space constraint (a `constraint="..."` of the `tune`
/// clause, or `tdg tune --constraint`): comparisons of expressions joined
/// by `&&` and `||`. Spans are offsets into `src` plus `base`.
pub fn parse_condition(src: &str, base: usize) -> Result<Condition, Diagnostic> {
    parse_formula(
        src,
        base,
        Rule::condition_formula,
        InputKind::Condition,
        |b, p| b.condition(p, 0),
    )
}

/// A formula on its own (`rule` wraps one item and the end of input):
/// refused early when nested too deep for the parser's stack, else parsed
/// and its one item built.
fn parse_formula<T>(
    src: &str,
    base: usize,
    rule: Rule,
    kind: InputKind,
    build: impl FnOnce(&mut Builder, Pair<Rule>) -> Built<T>,
) -> Result<T, Diagnostic> {
    if let Some(mut d) = nesting_too_deep(src) {
        if let Some(s) = d.span.as_mut() {
            s.start += base;
            s.end += base;
        }
        return Err(d);
    }
    pest::set_error_detail(true);
    let mut pairs = SpecParser::parse(rule, src).map_err(|e| pest_error(&e, src, base, kind))?;
    let item = pairs
        .next()
        .expect("grammar: a formula's root")
        .into_inner()
        .next()
        .expect("grammar: a formula holds one item");
    let mut b = Builder {
        base,
        ..Builder::default()
    };
    build(&mut b, item)
}

#[derive(Default)]
struct Builder {
    errors: Vec<Diagnostic>,
    /// Offset added to every span (non-zero when parsing inside a string).
    base: usize,
    /// Whole source, for line numbers in hints.
    src: String,
}

/// The clauses of a spec as they are read, each at most once (includes
/// repeat).
#[derive(Default)]
struct Clauses {
    includes: Vec<Include>,
    lang: Option<Lang>,
    routine: Option<Routine>,
    init: Option<Vec<Init>>,
    returns: Option<Vec<Output>>,
    record: Option<RecordClause>,
    flop: Option<Flop>,
    timer: Option<TimerClause>,
    checkpoint: Option<CheckpointClause>,
    tune: Option<TuneClause>,
}

impl Builder {
    fn err(&mut self, d: Diagnostic) {
        self.errors.push(d);
    }

    fn sp(&self, p: &Pair<Rule>) -> Span {
        span_of(p, self.base)
    }

    fn spec(&mut self, pair: Pair<Rule>) -> Option<Spec> {
        let mut c = Clauses::default();
        let mut seen: Vec<(&'static str, Span)> = Vec::new();
        for clause in pair.into_inner() {
            let span = self.sp(&clause);
            let Some(key) = self.clause_key(&clause) else {
                continue;
            };
            if key != "include" {
                if let Some(&(_, first)) = seen.iter().find(|(k, _)| *k == key) {
                    self.duplicate_clause(key, span, first);
                    continue;
                }
                seen.push((key, span));
            }
            self.clause(key, clause, span, &mut c);
        }
        let Some(routine) = c.routine else {
            if !self.errors.is_empty() {
                return None;
            }
            self.err(
                Diagnostic::whole_file("no `routine=` clause: the spec must say which routine to time")
                    .with_hint("add e.g. `routine=void daxpy(const int N, const double alpha, const double* X, double* Y);`"),
            );
            return None;
        };
        Some(Spec {
            includes: c.includes,
            lang: c.lang.unwrap_or_default(),
            routine,
            init: c.init.unwrap_or_default(),
            returns: c.returns.unwrap_or_default(),
            record: c.record,
            flop: c.flop,
            timer: c.timer,
            checkpoint: c.checkpoint,
            tune: c.tune,
        })
    }

    /// The clause's keyword; `None` for the end of input and for an unknown
    /// clause (reported, with the nearest known one).
    fn clause_key(&mut self, clause: &Pair<Rule>) -> Option<&'static str> {
        Some(match clause.as_rule() {
            Rule::include_clause => "include",
            Rule::lang_clause => "lang",
            Rule::routine_clause => "routine",
            Rule::init_clause => "init",
            Rule::returns_clause => "returns",
            Rule::record_clause => "record",
            Rule::flop_clause => "flop",
            Rule::timer_clause => "timer",
            Rule::checkpoint_clause => "checkpoint",
            Rule::tune_clause => "tune",
            Rule::unknown_clause => {
                let w = clause
                    .clone()
                    .into_inner()
                    .next()
                    .expect("grammar: unknown_clause word");
                let name = w.as_str();
                let d = Diagnostic::new(format!("unknown clause `{name}=`"), self.sp(&w))
                    .with_hint(did_you_mean(name, CLAUSES.iter().copied()).unwrap_or_else(|| {
                        "clauses are include=, lang=, routine=, init=, returns(...), record=, flop=, timer=, checkpoint=, tune=".into()
                    }));
                self.err(d);
                return None;
            }
            Rule::EOI => return None,
            r => unreachable!("grammar: unexpected clause rule {r:?}"),
        })
    }

    fn duplicate_clause(&mut self, key: &str, span: Span, first: Span) {
        self.err(
            Diagnostic::new(
                format!("duplicate `{key}` clause"),
                Span::new(span.start, span.start + key.len()),
            )
            .with_hint(format!(
                "merge it with the first one (line {})",
                crate::diag::line_col(&self.src, first.start).0
            )),
        );
    }

    /// A clause built into its place in `c`; its errors are collected.
    fn clause(&mut self, key: &str, clause: Pair<Rule>, span: Span, c: &mut Clauses) {
        match key {
            "include" => {
                let s = clause.into_inner().next().expect("grammar: include string");
                c.includes.push(Include {
                    text: unescape(inner_str(&s)),
                    span,
                });
            }
            "lang" => c.lang = self.lang(clause),
            "routine" => c.routine = self.kept(|b| b.routine(clause)),
            "init" => {
                let mut entries = Vec::new();
                for e in clause.into_inner() {
                    entries.extend(self.kept(|b| b.init_entry(e)));
                }
                c.init = Some(entries);
            }
            "returns" => {
                let mut outputs = Vec::new();
                for item in clause.into_inner() {
                    outputs.extend(self.kept(|b| b.returns_item(item)));
                }
                c.returns = Some(outputs);
            }
            "record" => {
                let names = clause
                    .into_inner()
                    .map(|w| Ident {
                        name: w.as_str().to_string(),
                        span: self.sp(&w),
                    })
                    .collect();
                c.record = Some(RecordClause { names, span });
            }
            "flop" => c.flop = self.kept(|b| b.flop(clause)),
            "timer" => c.timer = self.kept(|b| b.timer(clause)),
            "checkpoint" => c.checkpoint = self.kept(|b| b.checkpoint(clause)),
            "tune" => c.tune = self.kept(|b| b.tune(clause)),
            _ => unreachable!("clause_key names every clause"),
        }
    }

    /// What `build` built, or `None` with its diagnostic collected.
    fn kept<T>(&mut self, build: impl FnOnce(&mut Self) -> Built<T>) -> Option<T> {
        match build(self) {
            Ok(t) => Some(t),
            Err(d) => {
                self.err(d);
                None
            }
        }
    }

    fn lang(&mut self, clause: Pair<Rule>) -> Option<Lang> {
        let w = clause.into_inner().next().expect("grammar: lang word");
        match w.as_str().to_ascii_lowercase().as_str() {
            "c" => Some(Lang::C),
            "fortran" => Some(Lang::Fortran),
            other => {
                let d = Diagnostic::new(format!("unknown language `{other}`"), self.sp(&w))
                    .with_hint("write `lang=c;` or `lang=fortran;`");
                self.err(d);
                None
            }
        }
    }

    fn routine(&mut self, clause: Pair<Rule>) -> Built<Routine> {
        let span = self.sp(&clause);
        let mut it = clause.into_inner();
        let decl = it.next().expect("grammar: routine decl");
        let decl_span = self.sp(&decl);
        let (ret, name) = self.declaration(decl, "routine")?;
        let ret = ret.ok_or_else(|| {
            Diagnostic::new("the routine has no return type", decl_span)
                .with_hint("write `void NAME(...)` for a routine that returns nothing")
        })?;
        let params_pair = it.next().expect("grammar: routine params");
        let mut params = Vec::new();
        let plist: Vec<Pair<Rule>> = params_pair.into_inner().collect();
        // `f(void)` is C for "no parameters".
        let only_void = plist.len() == 1 && plist[0].as_str().trim() == "void";
        if !only_void {
            for p in plist {
                let pspan = self.sp(&p);
                let mut toks = p.into_inner().peekable();
                let mut decl_toks = Vec::new();
                let mut array = false;
                for t in toks.by_ref() {
                    match t.as_rule() {
                        Rule::array_suffix => array = true,
                        _ => decl_toks.push(DeclToken {
                            text: t.as_str().to_string(),
                            span: self.sp(&t),
                        }),
                    }
                }
                let (ty, pname) = self.decl_tokens(decl_toks, pspan, "parameter")?;
                let mut ty = ty.ok_or_else(|| {
                    Diagnostic::new(
                        format!("parameter `{}` has no type", pname.name),
                        pname.span,
                    )
                    .with_hint(format!("write e.g. `const int {}`", pname.name))
                })?;
                if array {
                    ty.pointers = ty.pointers.saturating_add(1);
                }
                if ty.base == BaseType::Void && ty.pointers == 0 {
                    return Err(
                        Diagnostic::new("a parameter cannot have type `void`", ty.span)
                            .with_hint("did you mean `void*`?"),
                    );
                }
                params.push(Param { name: pname, ty });
            }
        }
        let body = it.next().map(|b| {
            let text_pair = b.into_inner().next().expect("grammar: body_text");
            Body {
                text: text_pair.as_str().to_string(),
                span: self.sp(&text_pair),
            }
        });
        Ok(Routine {
            ret,
            name,
            params,
            body,
            span,
        })
    }

    /// `decl` pair: type tokens followed by a name.
    fn declaration(&mut self, decl: Pair<Rule>, what: &str) -> Built<(Option<CType>, Ident)> {
        let span = self.sp(&decl);
        let toks = decl
            .into_inner()
            .map(|t| DeclToken {
                text: t.as_str().to_string(),
                span: self.sp(&t),
            })
            .collect();
        self.decl_tokens(toks, span, what)
    }

    fn decl_tokens(
        &mut self,
        mut toks: Vec<DeclToken>,
        span: Span,
        what: &str,
    ) -> Built<(Option<CType>, Ident)> {
        let last = toks.pop().expect("grammar: a declaration has a token");
        if last.text == "*" || is_type_word(&last.text) {
            let mut shown = toks.iter().map(|t| t.text.as_str()).collect::<Vec<_>>();
            shown.push(&last.text);
            return Err(
                Diagnostic::new(format!("this {what} has no name"), span).with_hint(format!(
                    "write `{} NAME`",
                    shown.join(" ").replace(" *", "*")
                )),
            );
        }
        let name = Ident {
            name: last.text,
            span: last.span,
        };
        if toks.is_empty() {
            return Ok((None, name));
        }
        let ty = ctype_from_tokens(&toks)?;
        Ok((Some(ty), name))
    }

    fn init_entry(&mut self, e: Pair<Rule>) -> Built<Init> {
        let span = self.sp(&e);
        let mut it = e.into_inner();
        let w = it.next().expect("grammar: init name");
        let name = Ident {
            name: w.as_str().to_string(),
            span: self.sp(&w),
        };
        let v = it.next().expect("grammar: init value");
        let value = match v.as_rule() {
            Rule::array_init => InitValue::Array(self.array_init(v)?),
            _ => InitValue::Scalar(self.expr(v, 0)?),
        };
        Ok(Init {
            name,
            value,
            span,
            implicit: false,
        })
    }

    fn array_init(&mut self, v: Pair<Rule>) -> Built<ArrayInit> {
        let span = self.sp(&v);
        let mut it = v.into_inner();
        let kind_pair = it.next().expect("grammar: array kind");
        let kind_span = self.sp(&kind_pair);
        let (kind, sig, nargs) = match kind_pair.as_str() {
            "Vector" => (ArrayKind::Vector, "Vector(type, fill, attrs, n)", 3),
            "SVector" => (ArrayKind::SVector, "SVector(type, fill, attrs, n)", 3),
            "Matrix" => (
                ArrayKind::Matrix,
                "Matrix(type, rows, cols, fill, attrs)",
                4,
            ),
            "SMatrix" => (
                ArrayKind::SMatrix,
                "SMatrix(type, rows, cols, fill, attrs)",
                4,
            ),
            "Array2D" => (
                ArrayKind::Array2D,
                "Array2D(type, rows, cols, fill, attrs)",
                4,
            ),
            k => unreachable!("grammar: array kind {k}"),
        };
        let ty_pair = it.next().expect("grammar: elem type");
        let toks: Vec<DeclToken> = ty_pair
            .into_inner()
            .map(|t| DeclToken {
                text: t.as_str().to_string(),
                span: self.sp(&t),
            })
            .collect();
        let elem = ctype_from_tokens(&toks)?;
        let args: Vec<Pair<Rule>> = it.collect();
        if args.len() != nargs {
            return Err(Diagnostic::new(
                format!(
                    "`{}` takes {} arguments after the type, found {}",
                    kind_pair.as_str(),
                    nargs,
                    args.len()
                ),
                Span::new(kind_span.start, span.end),
            )
            .with_hint(format!("write {sig}; an empty attribute list is `_`")));
        }
        let (dim_args, fill_arg, attr_arg) = match kind {
            ArrayKind::Vector | ArrayKind::SVector => (vec![args[2].clone()], &args[0], &args[1]),
            _ => (vec![args[0].clone(), args[1].clone()], &args[2], &args[3]),
        };
        let mut dims = Vec::new();
        for d in dim_args {
            dims.push(self.single_expr(d, "a size", sig)?);
        }
        let fill = self.fill(fill_arg.clone(), sig)?;
        let attrs = self.attrs(attr_arg.clone())?;
        Ok(ArrayInit {
            kind,
            elem,
            dims,
            fill,
            attrs,
            span,
        })
    }

    /// An `array_arg` that must be exactly one expression.
    fn single_expr(&mut self, arg: Pair<Rule>, what: &str, sig: &str) -> Built<Expr> {
        let span = self.sp(&arg);
        let mut exprs: Vec<Pair<Rule>> = arg.into_inner().collect();
        if exprs.len() != 1 {
            let msg = if exprs.is_empty() {
                format!("expected {what} here")
            } else {
                format!("expected {what}, found an attribute list")
            };
            return Err(Diagnostic::new(msg, span).with_hint(format!("the arguments are {sig}")));
        }
        self.expr(exprs.remove(0), 0)
    }

    fn fill(&mut self, arg: Pair<Rule>, sig: &str) -> Built<Fill> {
        let span = self.sp(&arg);
        let exprs: Vec<Pair<Rule>> = arg.into_inner().collect();
        let bad = |found: &str| {
            Diagnostic::new(
                format!("expected a fill (RANDOM, RANDOM(lo,hi), ZERO, CONST(v) or a number, SEQ or FILE(\"path\")), found {found}"),
                span,
            )
            .with_hint(format!("the arguments are {sig}"))
        };
        if exprs.len() != 1 {
            return Err(bad(if exprs.is_empty() {
                "nothing"
            } else {
                "an attribute list"
            }));
        }
        // The reference generator's spelling of CONST(v): a bare number,
        // possibly negative (`Vector(double, 0, flush, M)`).
        // Its span is the number's own, which is how `tdg fmt` knows to
        // keep the spelling (`CONST(v)` spans more than `v`).
        if is_number_literal(&exprs[0]) {
            let value = self.expr(exprs[0].clone(), 0)?;
            let at = value.span();
            return Ok(Fill::Const(value, at));
        }
        let Some(prim) = sole_primary(exprs[0].clone()) else {
            return Err(bad(&format!("`{}`", exprs[0].as_str())));
        };
        let pspan = self.sp(&prim);
        match prim.as_rule() {
            Rule::name => fill_word(prim.as_str(), pspan, &bad),
            Rule::call => self.fill_call(prim, pspan, &bad),
            _ => Err(bad(&format!("`{}`", prim.as_str()))),
        }
    }

    /// A fill with arguments: `RANDOM(lo, hi)`, `CONST(v)`, `FILE("path")`.
    fn fill_call(
        &mut self,
        prim: Pair<Rule>,
        pspan: Span,
        bad: &dyn Fn(&str) -> Diagnostic,
    ) -> Built<Fill> {
        let (f, args) = call_parts(prim);
        let fname = f.as_str();
        match (fname, args.len()) {
            ("RANDOM", 2) => {
                let (lo, hi) = self.two_args(&args, 0)?;
                Ok(Fill::RandomRange {
                    lo: *lo,
                    hi: *hi,
                    span: pspan,
                })
            }
            ("CONST", 1) => Ok(Fill::Const(self.expr(args[0].clone(), 0)?, pspan)),
            ("FILE", 1) => match sole_primary(args[0].clone()) {
                Some(s) if s.as_rule() == Rule::string => {
                    Ok(Fill::File(unescape(inner_str(&s)), pspan))
                }
                _ => Err(
                    Diagnostic::new("FILE takes a quoted path", self.sp(&args[0]))
                        .with_hint("write FILE(\"operand.bin\")"),
                ),
            },
            ("RANDOM", n) | ("CONST", n) | ("FILE", n) => {
                let want = match fname {
                    "RANDOM" => "RANDOM(lo, hi)",
                    "CONST" => "CONST(value)",
                    _ => "FILE(\"path\")",
                };
                Err(
                    Diagnostic::new(format!("`{fname}` given {n} arguments"), pspan)
                        .with_hint(format!("write {want}")),
                )
            }
            _ => Err(bad(&format!("`{fname}(...)`"))
                .with_hint_opt(did_you_mean(fname, FILLS.iter().copied()))),
        }
    }

    fn attrs(&mut self, arg: Pair<Rule>) -> Built<Vec<Attr>> {
        let exprs: Vec<Pair<Rule>> = arg.into_inner().collect();
        if exprs.len() == 1 && exprs[0].as_str().trim() == "_" {
            return Ok(Vec::new());
        }
        exprs.into_iter().map(|e| self.attr(e)).collect()
    }

    /// One attribute of an array initialiser (`flush`, `align(16)`).
    fn attr(&mut self, e: Pair<Rule>) -> Built<Attr> {
        let espan = self.sp(&e);
        let not_an_attribute = |found: &str| {
            Diagnostic::new(format!("expected an attribute, found `{found}`"), espan).with_hint(
                "attributes are flush, warm, touch, align(n), misalign(m), joined with `|`",
            )
        };
        let Some(prim) = sole_primary(e.clone()) else {
            return Err(not_an_attribute(e.as_str()));
        };
        match prim.as_rule() {
            Rule::name => attr_word(prim.as_str(), espan),
            Rule::call => self.attr_call(prim, espan),
            _ => Err(not_an_attribute(prim.as_str())),
        }
    }

    /// `align(n)` or `misalign(m)`.
    fn attr_call(&mut self, prim: Pair<Rule>, espan: Span) -> Built<Attr> {
        let (f, args) = call_parts(prim);
        let fname = f.as_str();
        if fname != "align" && fname != "misalign" {
            return Err(unknown_attribute(fname, &format!("{fname}(...)"), espan));
        }
        let n = match args.as_slice() {
            [a] => self.byte_count(a.clone())?,
            _ => {
                return Err(
                    Diagnostic::new(format!("`{fname}` takes one byte count"), espan)
                        .with_hint(format!("write {fname}(16)")),
                )
            }
        };
        Ok(if fname == "align" {
            Attr::Align(n, espan)
        } else {
            Attr::Misalign(n, espan)
        })
    }

    /// A positive power-of-two integer literal (alignment in bytes).
    fn byte_count(&mut self, e: Pair<Rule>) -> Built<u64> {
        let span = self.sp(&e);
        let value = match sole_primary(e) {
            Some(p) if p.as_rule() == Rule::int => parse_int(p.as_str()),
            _ => None,
        };
        match value {
            Some(n) if n > 0 && (n as u64).is_power_of_two() => Ok(n as u64),
            Some(n) => Err(Diagnostic::new(
                format!("alignment must be a power of two, got {n}"),
                span,
            )
            .with_hint("use 8, 16, 32, 64, 4096, ...")),
            None => Err(
                Diagnostic::new("alignment must be an integer literal", span)
                    .with_hint("write e.g. align(64)"),
            ),
        }
    }

    fn flop(&mut self, clause: Pair<Rule>) -> Built<Flop> {
        let span = self.sp(&clause);
        let v = clause.into_inner().next().expect("grammar: flop value");
        match v.as_rule() {
            Rule::string => {
                let inner = v.clone().into_inner().next().expect("grammar: str_inner");
                let text = inner.as_str().to_string();
                let start = self.sp(&inner).start;
                if text.trim().is_empty() {
                    return Err(
                        Diagnostic::new("empty flop formula", self.sp(&v)).with_hint(
                            "write the operation count, e.g. flop=\"2*M*N*K\"; or drop the clause",
                        ),
                    );
                }
                let expr = parse_expr(&text, start).map_err(|mut d| {
                    d.message = format!("flop formula does not parse: {}", d.message);
                    d
                })?;
                Ok(Flop { text, expr, span })
            }
            _ => {
                let e = v.into_inner().next().expect("grammar: flop_bare expr");
                let expr = self.expr(e, 0)?;
                let mut string = None;
                expr.walk(&mut |x| {
                    if let Expr::Str(_, s) = x {
                        string.get_or_insert(*s);
                    }
                });
                if let Some(s) = string {
                    return Err(Diagnostic::new("a flop formula cannot contain a string", s)
                        .with_hint("write the formula itself in quotes: flop=\"2*M*N\";"));
                }
                // Canonical text (no comments): it is printed back inside quotes.
                let text = crate::format::expr(&expr);
                Ok(Flop { text, expr, span })
            }
        }
    }

    /// A clause's `key=value;` settings, each key one of `known` and given
    /// once.
    fn settings<'i>(
        &mut self,
        clause: Pair<'i, Rule>,
        known: &[&str],
    ) -> Built<Vec<(Ident, Pair<'i, Rule>)>> {
        let mut out: Vec<(Ident, Pair<'i, Rule>)> = Vec::new();
        for (key, value) in self.setting_parts(clause) {
            if !known.contains(&key.name.as_str()) {
                return Err(
                    Diagnostic::new(format!("unknown setting `{}`", key.name), key.span).with_hint(
                        did_you_mean(&key.name, known.iter().copied())
                            .unwrap_or_else(|| format!("settings here are {}", known.join(", "))),
                    ),
                );
            }
            if out.iter().any(|(k, _)| k.name == key.name) {
                return Err(Diagnostic::new(
                    format!("setting `{}` given twice", key.name),
                    key.span,
                )
                .with_hint("keep one"));
            }
            out.push((key, value));
        }
        Ok(out)
    }

    /// Every `key=value;` of a clause as written: the key and the value's
    /// expression.
    fn setting_parts<'i>(&mut self, clause: Pair<'i, Rule>) -> Vec<(Ident, Pair<'i, Rule>)> {
        clause
            .into_inner()
            .filter(|s| s.as_rule() == Rule::setting)
            .map(|s| {
                let mut it = s.into_inner();
                let k = it.next().expect("grammar: setting key");
                let key = Ident {
                    name: k.as_str().to_string(),
                    span: self.sp(&k),
                };
                let v = it.next().expect("grammar: setting value");
                let inner = v.into_inner().next().expect("grammar: setting_value inner");
                (key, inner)
            })
            .collect()
    }

    fn timer(&mut self, clause: Pair<Rule>) -> Built<TimerClause> {
        let span = self.sp(&clause);
        let mut t = TimerClause {
            span,
            ..TimerClause::default()
        };
        let mut method_span = None;
        for (key, v) in self.settings(clause, TIMER_SETTINGS)? {
            let vspan = self.sp(&v);
            if key.name == "method" {
                method_span = Some(vspan);
            }
            timer_setting(&mut t, &key.name, v.as_str(), vspan)?;
        }
        timer_consistent(&t, method_span)?;
        Ok(t)
    }

    fn checkpoint(&mut self, clause: Pair<Rule>) -> Built<CheckpointClause> {
        let span = self.sp(&clause);
        let first = clause.clone().into_inner().next();
        if let Some(s) = first.filter(|p| p.as_rule() == Rule::string) {
            return Ok(CheckpointClause {
                image: unescape(inner_str(&s)),
                mode: CheckpointMode::Immediate,
                span,
            });
        }
        let mut image = None;
        let mut mode = CheckpointMode::Immediate;
        for (key, v) in self.settings(clause, &["image", "mode"])? {
            let vspan = self.sp(&v);
            match key.name.as_str() {
                "image" => {
                    if v.as_rule() != Rule::string {
                        return Err(Diagnostic::new(
                            "the checkpoint image must be a quoted path",
                            vspan,
                        )
                        .with_hint(format!("write image=\"{}\";", v.as_str())));
                    }
                    image = Some(unescape(inner_str(&v)));
                }
                "mode" => mode = checkpoint_mode(&v, vspan)?,
                _ => unreachable!(),
            }
        }
        let image = image.ok_or_else(|| {
            Diagnostic::new("the checkpoint clause has no image", span)
                .with_hint("add image=\"path/to/image-dir\";")
        })?;
        Ok(CheckpointClause { image, mode, span })
    }

    /// `tune={ NB=tile; MU=rows; constraint="NB % MU == 0"; };`
    fn tune(&mut self, clause: Pair<Rule>) -> Built<TuneClause> {
        let span = self.sp(&clause);
        let mut t = TuneClause {
            roles: Vec::new(),
            layout: None,
            constraints: Vec::new(),
            span,
        };
        for (key, v) in self.setting_parts(clause) {
            if key.name == "layout" {
                let layout = self.tune_layout(&v)?;
                if t.layout.is_some() {
                    return Err(Diagnostic::new("setting `layout` given twice", key.span)
                        .with_hint("keep one"));
                }
                t.layout = Some(layout);
            } else if TUNE_SETTINGS.contains(&key.name.as_str()) {
                t.constraints.push(self.constraint(&v)?);
            } else {
                // Anything else names a macro and gives its role.
                let role = self.tune_role(&key, &v, &t.roles)?;
                t.roles.push((key, role));
            }
        }
        Ok(t)
    }

    fn tune_layout(&self, v: &Pair<Rule>) -> Built<TuneLayout> {
        let layout = match v.as_rule() {
            Rule::word => TuneLayout::from_spelling(v.as_str()),
            _ => None,
        };
        layout.ok_or_else(|| {
            let text = v.as_str();
            Diagnostic::new(
                format!("`{text}` is not a {}", TuneLayout::FAMILY),
                self.sp(v),
            )
            .with_hint(
                did_you_mean(text, TuneLayout::spellings())
                    .unwrap_or_else(|| "write layout=col_major; or layout=row_major;".into()),
            )
        })
    }

    /// `constraint="..."`: a condition on the tuned macros, in quotes.
    fn constraint(&self, v: &Pair<Rule>) -> Built<Constraint> {
        let vspan = self.sp(v);
        if v.as_rule() != Rule::string {
            return Err(
                Diagnostic::new("a constraint is a condition in quotes", vspan)
                    .with_hint("write e.g. constraint=\"NB % MU == 0\";"),
            );
        }
        let inner = v.clone().into_inner().next().expect("grammar: str_inner");
        let text = inner.as_str().to_string();
        if text.trim().is_empty() {
            return Err(Diagnostic::new("empty constraint", vspan).with_hint(
                "write a condition on the tuned macros, e.g. constraint=\"NB % MU == 0\"; or drop the setting",
            ));
        }
        let condition = parse_condition(&text, self.sp(&inner).start).map_err(|mut d| {
            d.message = format!("constraint does not parse: {}", d.message);
            d
        })?;
        Ok(Constraint { text, condition })
    }

    /// The role `key = v` gives a macro: a known role, and neither the
    /// macro nor the role given before.
    fn tune_role(
        &self,
        key: &Ident,
        v: &Pair<Rule>,
        roles: &[(Ident, TuneRole)],
    ) -> Built<TuneRole> {
        let role = match v.as_rule() {
            Rule::word => TuneRole::from_spelling(v.as_str()),
            _ => None,
        };
        let Some(role) = role else {
            let text = v.as_str();
            return Err(Diagnostic::new(
                format!("`{text}` is not a tuning role of `{}`", key.name),
                self.sp(v),
            )
            .with_hint(
                did_you_mean(text, TuneRole::spellings()).unwrap_or_else(|| {
                    format!(
                        "roles are {}; or write constraint=\"...\";",
                        TuneRole::spellings().join(", ")
                    )
                }),
            ));
        };
        if let Some((first, _)) = roles.iter().find(|(n, _)| n.name == key.name) {
            return Err(
                Diagnostic::new(format!("`{}` is given a role twice", key.name), key.span)
                    .with_hint(format!(
                        "keep one (the first is on line {})",
                        crate::diag::line_col(&self.src, first.span.start).0
                    )),
            );
        }
        if let Some((other, _)) = roles.iter().find(|(_, r)| *r == role) {
            return Err(Diagnostic::new(
                format!(
                    "`{}` and `{}` both have the role {}",
                    other.name,
                    key.name,
                    role.spelling()
                ),
                key.span,
            )
            .with_hint(format!(
                "a kernel has one {}: give `{}` another role or none",
                role.help(),
                key.name
            )));
        }
        Ok(role)
    }

    /// `a < b && (c == d || e != f)`.
    fn condition(&mut self, p: Pair<Rule>, depth: usize) -> Built<Condition> {
        if depth > MAX_DEPTH {
            return Err(Diagnostic::new("condition nested too deeply", self.sp(&p)));
        }
        let span = self.sp(&p);
        match p.as_rule() {
            Rule::condition | Rule::conjunction => {
                let any = p.as_rule() == Rule::condition;
                let mut parts = Vec::new();
                for q in p.into_inner() {
                    parts.push(self.condition(q, depth + 1)?);
                }
                Ok(if parts.len() == 1 {
                    parts.pop().expect("one part")
                } else if any {
                    Condition::Any(parts, span)
                } else {
                    Condition::All(parts, span)
                })
            }
            Rule::comparison => {
                let mut it = p.into_inner();
                let first = it.next().expect("grammar: comparison operand");
                if first.as_rule() == Rule::condition {
                    return self.condition(first, depth + 1);
                }
                let lhs = self.expr(first, 0)?;
                let op = match it.next().expect("grammar: cmp_op").as_str() {
                    "==" => CmpOp::Eq,
                    "!=" => CmpOp::Ne,
                    "<" => CmpOp::Lt,
                    "<=" => CmpOp::Le,
                    ">" => CmpOp::Gt,
                    _ => CmpOp::Ge,
                };
                let rhs = self.expr(it.next().expect("grammar: comparison rhs"), 0)?;
                Ok(Condition::Compare { op, lhs, rhs, span })
            }
            r => unreachable!("grammar: unexpected condition rule {r:?}"),
        }
    }

    /// `C`, `C[count]` or `s->ptr[count]` in `returns(...)`.
    fn returns_item(&mut self, item: Pair<Rule>) -> Built<Output> {
        let mut it = item.into_inner().peekable();
        let w = it.next().expect("grammar: returns_item word");
        let mut path = Vec::new();
        while let Some(step) = it.next_if(|p| p.as_rule() == Rule::member_step) {
            path.push(self.member_step(step, w.as_str(), &path)?);
        }
        Ok(Output {
            name: w.as_str().to_string(),
            span: self.sp(&w),
            path,
            count: it.next().map(|e| self.expr(e, 0)).transpose()?,
        })
    }

    /// `->name` or `.name` after `root` and the steps `before` it.
    fn member_step(
        &mut self,
        step: Pair<Rule>,
        root: &str,
        before: &[MemberStep],
    ) -> Built<MemberStep> {
        let span = self.sp(&step);
        let mut it = step.into_inner();
        let op = it.next().expect("grammar: member_step operator");
        let arrow = op.as_str() == "->";
        let Some(member) = it.next() else {
            let written = format!("{}{}", member_path_text(root, before), op.as_str());
            return Err(
                Diagnostic::new(format!("`{written}` names no member"), span).with_hint(format!(
                    "write the member after `{}`, e.g. `{written}ptr`",
                    op.as_str()
                )),
            );
        };
        Ok(MemberStep {
            arrow,
            member: Ident {
                name: member.as_str().to_string(),
                span: self.sp(&member),
            },
            span,
        })
    }

    fn expr(&mut self, p: Pair<Rule>, depth: usize) -> Built<Expr> {
        let span = self.sp(&p);
        if depth > MAX_DEPTH {
            return Err(Diagnostic::new(
                format!("expression nested more than {MAX_DEPTH} deep"),
                span,
            )
            .with_hint("split it up"));
        }
        match p.as_rule() {
            Rule::expr | Rule::term => self.binary_chain(p, depth),
            Rule::unary => self.negations(p, depth),
            Rule::int => match parse_int(p.as_str()) {
                Some(v) => Ok(Expr::Int(v, span)),
                None => Err(Diagnostic::new(
                    format!("integer `{}` does not fit in 64 bits", p.as_str()),
                    span,
                )
                .with_hint("write it as a float (e.g. 1e20) if that is what you mean")),
            },
            Rule::float => match p.as_str().parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(Expr::Float(v, span)),
                _ => Err(
                    Diagnostic::new(format!("number `{}` is out of range", p.as_str()), span)
                        .with_hint("doubles go up to about 1.8e308"),
                ),
            },
            Rule::string => Ok(Expr::Str(unescape(inner_str(&p)), span)),
            Rule::name => {
                let w = p.as_str();
                match w {
                    "RANDOM" => Ok(Expr::Random(span)),
                    "Macro" | "Range" => Err(Diagnostic::new(
                        format!("`{w}` needs arguments"),
                        span,
                    )
                    .with_hint(if w == "Macro" {
                        "write Macro(NAME, default)"
                    } else {
                        "write Range(begin, incr)"
                    })),
                    _ => Ok(Expr::Name(Ident {
                        name: w.to_string(),
                        span,
                    })),
                }
            }
            Rule::call => self.call(p, depth),
            Rule::member => {
                let mut it = p.into_inner();
                let w = it.next().expect("grammar: member root");
                let mut path = Vec::new();
                for step in it {
                    path.push(self.member_step(step, w.as_str(), &path)?);
                }
                Ok(Expr::Member {
                    root: Ident {
                        name: w.as_str().to_string(),
                        span: self.sp(&w),
                    },
                    path,
                    span,
                })
            }
            r => unreachable!("grammar: unexpected expression rule {r:?}"),
        }
    }

    /// `a + b - c` (or `a * b / c % d`): operands joined left to right.
    fn binary_chain(&mut self, p: Pair<Rule>, depth: usize) -> Built<Expr> {
        let span = self.sp(&p);
        let mut it = p.into_inner();
        let first = it.next().expect("grammar: expr has an operand");
        let mut lhs = self.expr(first, depth + 1)?;
        let mut chain = 0;
        while let Some(op) = it.next() {
            chain += 1;
            if depth + chain > MAX_DEPTH {
                return Err(Diagnostic::new(
                    format!("expression has more than {MAX_DEPTH} operators in a row"),
                    span,
                )
                .with_hint("split it up"));
            }
            let rhs_pair = it.next().expect("grammar: operator has an operand");
            let rhs = self.expr(rhs_pair, depth + 1)?;
            let op = match op.as_str() {
                "+" => BinOp::Add,
                "-" => BinOp::Sub,
                "*" => BinOp::Mul,
                "/" => BinOp::Div,
                "%" => BinOp::Mod,
                o => unreachable!("grammar: operator {o}"),
            };
            let s = Span::new(lhs.span().start, rhs.span().end);
            lhs = Expr::Binary {
                op,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
                span: s,
            };
        }
        Ok(lhs)
    }

    /// `- - x`: the operand under each leading minus, innermost first.
    fn negations(&mut self, p: Pair<Rule>, depth: usize) -> Built<Expr> {
        let span = self.sp(&p);
        let mut negs = Vec::new();
        let mut operand = None;
        for q in p.into_inner() {
            if q.as_rule() == Rule::neg {
                negs.push(self.sp(&q));
            } else {
                operand = Some(q);
            }
        }
        if negs.len() + depth > MAX_DEPTH {
            return Err(Diagnostic::new("too many `-` signs in a row", span)
                .with_hint("remove them in pairs"));
        }
        let mut e = self.expr(operand.expect("grammar: unary operand"), depth + 1)?;
        for n in negs.into_iter().rev() {
            let s = Span::new(n.start, e.span().end);
            e = Expr::Unary {
                op: UnaryOp::Neg,
                operand: Box::new(e),
                span: s,
            };
        }
        Ok(e)
    }

    fn call(&mut self, p: Pair<Rule>, depth: usize) -> Built<Expr> {
        let span = self.sp(&p);
        let (f, args) = call_parts(p);
        let fname = f.as_str().to_string();
        let arity = |want: usize, sig: &str| -> Built<()> {
            if args.len() == want {
                Ok(())
            } else {
                Err(Diagnostic::new(
                    format!("`{fname}` takes {want} arguments, found {}", args.len()),
                    span,
                )
                .with_hint(format!("write {sig}")))
            }
        };
        match fname.as_str() {
            "Macro" => {
                arity(2, "Macro(NAME, default)")?;
                let name = match sole_primary(args[0].clone()) {
                    Some(n) if n.as_rule() == Rule::name => Ident {
                        name: n.as_str().to_string(),
                        span: self.sp(&n),
                    },
                    _ => {
                        return Err(Diagnostic::new("the first argument of Macro must be a macro name", self.sp(&args[0]))
                            .with_hint("write Macro(NS, 100): `-D NS=...` then overrides the default 100"))
                    }
                };
                let default = self.expr(args[1].clone(), depth + 1)?;
                Ok(Expr::Macro {
                    name,
                    default: Box::new(default),
                    span,
                })
            }
            "Range" => {
                arity(2, "Range(begin, incr)")?;
                let (begin, incr) = self.two_args(&args, depth + 1)?;
                Ok(Expr::Range { begin, incr, span })
            }
            "RANDOM" => {
                arity(2, "RANDOM(lo, hi)")?;
                let (lo, hi) = self.two_args(&args, depth + 1)?;
                Ok(Expr::RandomRange { lo, hi, span })
            }
            "Vector" | "Matrix" | "SVector" | "SMatrix" | "Array2D" => Err(Diagnostic::new(
                format!("`{fname}(...)` is an array and can only be the whole value of an init entry"),
                span,
            )
            .with_hint("give it its own entry, e.g. `X=Vector(double, RANDOM, _, N);`")),
            _ => Err(Diagnostic::new(format!("unknown function `{fname}`"), self.sp(&f)).with_hint(
                did_you_mean(&fname, SCALAR_FUNCTIONS.iter().copied())
                    .unwrap_or_else(|| "expressions may call Macro(NAME, default), Range(begin, incr) and RANDOM(lo, hi)".into()),
            )),
        }
    }

    /// The two arguments of `Range(begin, incr)` or `RANDOM(lo, hi)`.
    fn two_args(&mut self, args: &[Pair<Rule>], depth: usize) -> Built<(Box<Expr>, Box<Expr>)> {
        let first = self.expr(args[0].clone(), depth)?;
        let second = self.expr(args[1].clone(), depth)?;
        Ok((Box::new(first), Box::new(second)))
    }
}

/// A call's name and its arguments.
fn call_parts(p: Pair<'_, Rule>) -> (Pair<'_, Rule>, Vec<Pair<'_, Rule>>) {
    let mut it = p.into_inner();
    let f = it.next().expect("grammar: call name");
    (f, it.collect())
}

/// A fill without arguments: `RANDOM`, `ZERO`, `SEQ`.
fn fill_word(w: &str, pspan: Span, bad: &dyn Fn(&str) -> Diagnostic) -> Built<Fill> {
    match w {
        "RANDOM" => Ok(Fill::Random(pspan)),
        "ZERO" => Ok(Fill::Zero(pspan)),
        "SEQ" => Ok(Fill::Seq(pspan)),
        "CONST" | "FILE" => Err(Diagnostic::new(format!("`{w}` needs an argument"), pspan)
            .with_hint(if w == "CONST" {
                "write CONST(1.0)"
            } else {
                "write FILE(\"operand.bin\")"
            })),
        _ => Err(bad(&format!("`{w}`")).with_hint_opt(did_you_mean(w, FILLS.iter().copied()))),
    }
}

/// An attribute without arguments: `flush`, `warm`, `touch`.
fn attr_word(w: &str, espan: Span) -> Built<Attr> {
    match w {
        "flush" => Ok(Attr::Flush(espan)),
        "warm" => Ok(Attr::Warm(espan)),
        "touch" => Ok(Attr::Touch(espan)),
        "_" => Err(Diagnostic::new(
            "`_` (no attributes) cannot be combined with attributes",
            espan,
        )
        .with_hint("drop the `_`")),
        "align" | "misalign" => Err(Diagnostic::new(format!("`{w}` needs a byte count"), espan)
            .with_hint(format!("write {w}(16)"))),
        w => Err(unknown_attribute(w, w, espan)),
    }
}

/// `name` is no attribute (written `shown`: `name` or `name(...)`).
fn unknown_attribute(name: &str, shown: &str, espan: Span) -> Diagnostic {
    Diagnostic::new(format!("unknown attribute `{shown}`"), espan).with_hint(
        did_you_mean(name, ATTRIBUTES.iter().copied())
            .unwrap_or_else(|| "attributes are flush, warm, touch, align(n), misalign(m)".into()),
    )
}

/// `mode=` of `checkpoint={...}`: `immediate` or `delayed(k)`.
fn checkpoint_mode(v: &Pair<Rule>, vspan: Span) -> Built<CheckpointMode> {
    match (v.as_rule(), v.as_str()) {
        (Rule::word, "immediate") => Ok(CheckpointMode::Immediate),
        (Rule::call, _) => delayed_mode(v, vspan),
        (_, "delayed") => Err(Diagnostic::new("delayed needs a call count", vspan)
            .with_hint("write delayed(k), e.g. delayed(2)")),
        (_, other) => Err(
            Diagnostic::new(format!("`{other}` is not a checkpoint mode"), vspan).with_hint(
                did_you_mean(other, CHECKPOINT_MODES.iter().copied())
                    .unwrap_or_else(|| "use `immediate` or `delayed(k)`".into()),
            ),
        ),
    }
}

/// `delayed(k)`: the checkpoint `k` calls before the timed one.
fn delayed_mode(v: &Pair<Rule>, vspan: Span) -> Built<CheckpointMode> {
    let (f, args) = call_parts(v.clone());
    let k = match args.as_slice() {
        [a] => sole_primary(a.clone())
            .filter(|p| p.as_rule() == Rule::int)
            .and_then(|p| parse_int(p.as_str())),
        _ => None,
    };
    match (f.as_str(), k) {
        ("delayed", Some(k)) if (1..=u32::MAX as i64).contains(&k) => {
            Ok(CheckpointMode::Delayed(k as u32))
        }
        ("delayed", _) => Err(
            Diagnostic::new("delayed(k) needs a positive integer k", vspan)
                .with_hint("k is how many calls before the timed one, e.g. delayed(2)"),
        ),
        _ => Err(
            Diagnostic::new(format!("`{}` is not a checkpoint mode", v.as_str()), vspan)
                .with_hint("use `immediate` or `delayed(k)`"),
        ),
    }
}

/// One `timer={...}` setting, checked and stored in `t`.
fn timer_setting(t: &mut TimerClause, key: &str, text: &str, vspan: Span) -> Built<()> {
    match key {
        "method" => t.method = Some(keyword(text, vspan)?),
        "samples" => {
            t.samples = Some(count_in(text, vspan, u32::MAX, "a sample count", || {
                "write a positive integer, e.g. samples=7".into()
            })?)
        }
        "select" => t.select = Some(keyword(text, vspan)?),
        "flush" => t.flush = Some(keyword(text, vspan)?),
        "flush_size" => {
            t.flush_size = Some(parse_flush_size(text).ok_or_else(|| {
                Diagnostic::new(format!("`{text}` is not a flush size"), vspan).with_hint(
                    "write a cache level (L1, L2, L3, LLC) or a size with unit (512K, 4M)",
                )
            })?)
        }
        "min_interval" => {
            t.min_interval_ns = Some(parse_duration_ns(text).ok_or_else(|| {
                Diagnostic::new(format!("`{text}` is not a duration"), vspan)
                    .with_hint("write a number with a unit: ns, us, ms or s (e.g. 1ms)")
            })?)
        }
        "code_offset" => {
            t.code_offset = Some(parse_int(text).and_then(CodeOffset::new).ok_or_else(|| {
                Diagnostic::new(format!("`{text}` is not an offset within a page"), vspan)
                    .with_hint(CodeOffset::HINT)
            })?)
        }
        "threads" => {
            t.threads = Some(count_in(
                text,
                vspan,
                MAX_THREADS,
                "a thread count",
                || {
                    format!("write how many threads the routine runs with, 1 to {MAX_THREADS}, e.g. threads=2")
                },
            )?)
        }
        "min_time" => t.min_time_ms = Some(sampling_ms(text, vspan, 0)?),
        "max_time" => t.max_time_ms = Some(sampling_ms(text, vspan, 1)?),
        "stable" => {
            let pct = text
                .strip_suffix('%')
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|p| p.is_finite() && *p > 0.0 && *p < 100.0);
            t.stable_pct = Some(pct.ok_or_else(|| {
                Diagnostic::new(format!("`{text}` is not a tolerance in per cent"), vspan)
                    .with_hint("write a percentage above 0 and below 100, e.g. stable=0.5%")
            })?);
        }
        _ => unreachable!("settings() admits only TIMER_SETTINGS"),
    }
    Ok(())
}

/// A keyword of family `K` (a timer method, an estimator, a flush method).
fn keyword<K: Keyword>(text: &str, span: Span) -> Built<K> {
    K::from_spelling(text).ok_or_else(|| {
        let choices = K::spellings();
        Diagnostic::new(format!("`{text}` is not a valid {}", K::FAMILY), span).with_hint(
            did_you_mean(text, choices.iter().copied())
                .unwrap_or_else(|| format!("use one of: {}", choices.join(", "))),
        )
    })
}

/// A whole number from 1 to `max`, else `` `text` is not WHAT `` with the hint.
fn count_in(
    text: &str,
    span: Span,
    max: u32,
    what: &str,
    hint: impl FnOnce() -> String,
) -> Built<u32> {
    match parse_int(text) {
        Some(n) if (1..=i64::from(max)).contains(&n) => Ok(n as u32),
        _ => Err(Diagnostic::new(format!("`{text}` is not {what}"), span).with_hint(hint())),
    }
}

/// The rules between a timer clause's settings.
fn timer_consistent(t: &TimerClause, method_span: Option<Span>) -> Built<()> {
    // CPU time sums what every thread spent, so a parallel routine would
    // read as perfectly parallel (the ATLAS timing paper's rule: wall
    // time for parallel code).
    if let (Some(TimerMethod::Cpu), Some(n), Some(at)) = (t.method, t.threads, method_span) {
        if n > 1 {
            return Err(Diagnostic::new(
                format!("method=cpu cannot time a routine on {n} threads"),
                at,
            )
            .with_hint(
                "CPU time adds up the threads' time and hides their waiting; use method=cycle or method=wall",
            ));
        }
    }
    // The budget's two ends, when the spec sets both, are checked here
    // where both are located; against the command line the model checks.
    if let (Some(lo), Some(hi)) = (t.min_time_ms, t.max_time_ms) {
        if hi < lo {
            return Err(Diagnostic::new(
                format!("max_time ({hi} ms) is below min_time ({lo} ms)"),
                t.span,
            )
            .with_hint("sampling stops at max_time: make it at least min_time"));
        }
    }
    Ok(())
}
