//! Semantic checks on a parsed [`Spec`]: everything the grammar cannot say
//! but the driver relies on. Each check adds diagnostics and goes on, so one
//! run reports every problem.

use crate::ast::*;
use crate::checked::{resolve, spec_overrides, CheckedSpec, Use};
use crate::diag::{did_you_mean, line_col, Diagnostic, Diagnostics};
use crate::eval;
use crate::vocabulary::C_TYPE_NAMES;
use std::collections::{BTreeMap, BTreeSet};

/// Values a profile records per call at most: the profiling runtime's
/// `TDG_MAX_VALUES` (instrument's tests hold the two equal).
pub const MAX_RECORDED: usize = 40;

/// Checks a parsed spec for every [`Use`] at once and, when it serves a
/// driver, resolves it under the `-D` definitions that name its macros.
/// Each use's problems are kept, located, in the result, for the command
/// that needs that use to report ([`CheckedSpec::require`]).
pub(crate) fn check_spec(
    spec: Spec,
    src: &str,
    file: &str,
    defines: &[(String, String)],
) -> CheckedSpec {
    let driver = match spec_overrides(&spec, defines) {
        Ok(overrides) => resolve_driver(&spec, src, file, &overrides),
        Err(why) => Err(Diagnostics::single(file, src, Diagnostic::whole_file(why))),
    };
    with_uses(spec, src, file, driver)
}

/// `spec`'s signature problems for a shim's uses beside the driver's
/// outcome, packaged as one [`CheckedSpec`].
pub(crate) fn with_uses(
    spec: Spec,
    src: &str,
    file: &str,
    driver: Result<CheckedSpec, Diagnostics>,
) -> CheckedSpec {
    // A shim calls with the application's own arguments: the signature and
    // whatever init there is must be sound, nothing more.
    let profile = problems(&spec, src);
    // A region shim also declares each output it hands back from the call's
    // arguments, so each needs a count.
    let mut checkpoint = profile.clone();
    let mut c = Checker::new(&spec, src);
    c.outputs_have_counts();
    checkpoint.extend(c.out);
    let located = |items: Vec<Diagnostic>| Diagnostics::new(file, src, items).items;
    let (mut checked, driver_problems) = match driver {
        Ok(c) => (c, Vec::new()),
        Err(d) => (CheckedSpec::signature_only(&spec, file, src), d.items),
    };
    let uses = BTreeMap::from([
        (Use::Driver, driver_problems),
        (Use::Profile, located(profile)),
        (Use::Checkpoint, located(checkpoint)),
    ]);
    checked.spec = spec;
    checked.set_uses(file, src, uses);
    checked
}

/// The driver's checks on `spec` (completed with its implicit scalar
/// values), then its facts resolved under `overrides`: a value the
/// overrides make impossible (a size of 0, an overflow) is located at the
/// expression it breaks, with the overrides named in the hint.
pub(crate) fn resolve_driver(
    spec: &Spec,
    src: &str,
    file: &str,
    overrides: &BTreeMap<String, f64>,
) -> Result<CheckedSpec, Diagnostics> {
    let (completed, warnings) = crate::implicit::complete(spec);
    let spec = &completed;
    let mut errors = problems(spec, src);
    errors.extend(driver_problems(spec, src));
    if !errors.is_empty() {
        return Err(Diagnostics::new(file, src, errors));
    }
    let mut checked = resolve(spec, overrides).map_err(|e| {
        let mut d = e.to_diagnostic();
        if let Some(name) = failing_array(spec, &e) {
            d.message = format!("`{name}`: {}", d.message);
        }
        if !overrides.is_empty() {
            let defs: Vec<String> = overrides
                .iter()
                .map(|(k, v)| format!("-D {k}={v}"))
                .collect();
            let with = format!("with {}", defs.join(" "));
            d.hint = Some(match d.hint.take() {
                Some(h) => format!("{h} ({with})"),
                None => with,
            });
        }
        Diagnostics::single(file, src, d)
    })?;
    checked.warnings = Diagnostics::new(file, src, warnings);
    Ok(checked)
}

impl CheckedSpec {
    /// This spec resolved for a driver under `overrides` for its own macros
    /// and scalars (`tdg check -D`): a name that is neither, or a value that
    /// breaks a size, is a located error. Nothing is read or parsed again.
    pub fn under(&self, overrides: &BTreeMap<String, f64>) -> Result<CheckedSpec, Diagnostics> {
        self.require(Use::Driver)?;
        let (src, file) = (self.source(), self.file());
        let driver = resolve_driver(&self.spec, src, file, overrides)?;
        Ok(with_uses(self.spec.clone(), src, file, Ok(driver)))
    }
}

/// The array whose size expression holds the failing span, for messages.
/// Whether `name` is listed in `clause` for the first time; a second
/// listing is an error.
fn listed_once(
    seen: &mut BTreeSet<String>,
    name: String,
    clause: &str,
    span: Span,
    out: &mut Vec<Diagnostic>,
) -> bool {
    let first = !seen.contains(&name);
    if !first {
        out.push(
            Diagnostic::new(format!("`{name}` is listed twice in {clause}"), span)
                .with_hint("list it once"),
        );
    }
    seen.insert(name);
    first
}

fn failing_array<'s>(spec: &'s Spec, e: &eval::EvalError) -> Option<&'s str> {
    let at = e.span?;
    spec.init.iter().find_map(|i| match &i.value {
        InitValue::Array(a) if a.span.start <= at.start && at.end <= a.span.end => {
            Some(i.name.name.as_str())
        }
        _ => None,
    })
}

/// What a driver additionally needs: a value for every parameter (pointers
/// an allocation), since the driver makes the arguments itself.
fn driver_problems(spec: &Spec, src: &str) -> Vec<Diagnostic> {
    let mut c = Checker::new(spec, src);
    c.missing_values();
    if spec.checkpoint.is_none() {
        c.member_paths_need_an_application();
    }
    c.out
}

/// The checks' findings without packaging (empty when the spec is sound as
/// a signature with its init; [`driver_problems`] adds the driver's needs).
fn problems(spec: &Spec, src: &str) -> Vec<Diagnostic> {
    let mut c = Checker::new(spec, src);
    c.duplicate_params();
    c.types();
    c.macros();
    c.init_entries();
    c.names_defined();
    c.cycles();
    c.arrays();
    c.returns();
    c.record();
    c.per_call_whole_values();
    c.flop();
    c.checkpoint();
    // Sizes can only be evaluated once every name they use has a value.
    if c.out.is_empty() && driver_problems(spec, src).is_empty() {
        c.sizes_evaluate();
    }
    c.out
}

struct Checker<'a> {
    spec: &'a Spec,
    src: &'a str,
    out: Vec<Diagnostic>,
}

impl<'a> Checker<'a> {
    fn new(spec: &'a Spec, src: &'a str) -> Checker<'a> {
        Checker {
            spec,
            src,
            out: Vec::new(),
        }
    }

    fn line(&self, span: Span) -> usize {
        line_col(self.src, span.start).0
    }

    fn duplicate_params(&mut self) {
        let mut seen: BTreeMap<&str, Span> = BTreeMap::new();
        for p in &self.spec.routine.params {
            if let Some(first) = seen.get(p.name.name.as_str()) {
                let d = Diagnostic::new(
                    format!("parameter `{}` is declared twice", p.name.name),
                    p.name.span,
                )
                .with_hint(format!(
                    "the first declaration is on line {}",
                    self.line(*first)
                ));
                self.out.push(d);
            } else {
                seen.insert(&p.name.name, p.name.span);
            }
        }
    }

    /// Typedef names must come from an `include=`; otherwise it is most
    /// likely a misspelt C type. A header the spec includes may define any
    /// name, and what it defines is the C compiler's to check, not this one's.
    fn types(&mut self) {
        if self
            .spec
            .includes
            .iter()
            .any(|i| i.text.trim_start().starts_with("#include"))
        {
            return;
        }
        let mut types: Vec<&CType> = vec![&self.spec.routine.ret];
        types.extend(self.spec.routine.params.iter().map(|p| &p.ty));
        for i in &self.spec.init {
            if let InitValue::Array(a) = &i.value {
                types.push(&a.elem);
            }
        }
        let includes: String = self
            .spec
            .includes
            .iter()
            .map(|i| i.text.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        for t in types {
            if let BaseType::Named(n) = &t.base {
                if !contains_word(&includes, n) {
                    let d = Diagnostic::new(format!("unknown type `{n}`"), t.span).with_hint(
                        did_you_mean(n, C_TYPE_NAMES.iter().copied()).unwrap_or_else(|| {
                            format!("define it in an include= clause (include=\"typedef struct {{ ... }} {n};\";), include its header (include=\"#include \\\"HEADER.h\\\"\";) or write `struct {n}`")
                        }),
                    );
                    self.out.push(d);
                }
            }
        }
    }

    /// A macro defined twice with different defaults, or named like a
    /// parameter: the driver's `#define` would rewrite the parameter.
    fn macros(&mut self) {
        let mut defaults: BTreeMap<&str, (&Expr, Span)> = BTreeMap::new();
        for init in &self.spec.init {
            let InitValue::Scalar(e) = &init.value else {
                continue;
            };
            e.walk(&mut |sub| {
                if let Expr::Macro { name, default, .. } = sub {
                    if self.spec.param(&name.name).is_some() {
                        self.out.push(
                            Diagnostic::new(format!("macro `{}` has the name of a parameter", name.name), name.span)
                                .with_hint(format!(
                                    "the driver #defines macros, which would rewrite the parameter; call it e.g. `{}S`",
                                    name.name
                                )),
                        );
                    }
                    match defaults.get(name.name.as_str()) {
                        Some((first, first_span)) if **first != **default => {
                            let line = line_col(self.src, first_span.start).0;
                            self.out.push(
                                Diagnostic::new(
                                    format!("macro `{}` is given two different defaults", name.name),
                                    default.span(),
                                )
                                .with_hint(format!("the first is on line {line}; refer to the macro by name instead")),
                            );
                        }
                        Some(_) => {}
                        None => {
                            defaults.insert(&name.name, (default, default.span()));
                        }
                    }
                }
            });
        }
    }

    fn init_entries(&mut self) {
        let mut seen: BTreeMap<&str, Span> = BTreeMap::new();
        let params: Vec<&str> = self.spec.routine.param_names().collect();
        for init in &self.spec.init {
            let name = init.name.name.as_str();
            if let Some(first) = seen.get(name) {
                self.out.push(
                    Diagnostic::new(format!("`{name}` is initialised twice"), init.name.span)
                        .with_hint(format!(
                            "the first definition is on line {}; keep one",
                            self.line(*first)
                        )),
                );
                continue;
            }
            seen.insert(name, init.name.span);
            if self.spec.param(name).is_none() {
                let hint = did_you_mean(name, params.iter().copied()).unwrap_or_else(|| {
                    format!(
                        "the parameters of `{}` are: {}",
                        self.spec.routine.name.name,
                        params.join(", ")
                    )
                });
                self.out.push(
                    Diagnostic::new(
                        format!(
                            "`{name}` is not a parameter of `{}`",
                            self.spec.routine.name.name
                        ),
                        init.name.span,
                    )
                    .with_hint(hint),
                );
            }
        }
    }

    /// Names visible in expressions: parameters and macro names.
    fn known_names(&self) -> BTreeSet<&'a str> {
        let mut k: BTreeSet<&str> = self.spec.routine.param_names().collect();
        for (m, _) in self.spec.macros() {
            k.insert(&m.name);
        }
        k
    }

    fn undefined(&mut self, id: &Ident, known: &BTreeSet<&str>, context: &str) {
        if known.contains(id.name.as_str()) {
            return;
        }
        let hint = did_you_mean(&id.name, known.iter().copied()).unwrap_or_else(|| {
            format!(
                "names must be parameters of the routine or Macro names (here: {})",
                known.iter().copied().collect::<Vec<_>>().join(", ")
            )
        });
        self.out.push(
            Diagnostic::new(
                format!("undefined name `{}` in {context}", id.name),
                id.span,
            )
            .with_hint(hint),
        );
    }

    fn names_defined(&mut self) {
        let known = self.known_names();
        self.members_only_in_counts();
        for init in &self.spec.init {
            match &init.value {
                InitValue::Scalar(e) => {
                    for id in e.names() {
                        self.undefined(id, &known, &format!("the value of `{}`", init.name.name));
                    }
                }
                InitValue::Array(a) => {
                    for d in &a.dims {
                        for id in d.names() {
                            self.undefined(
                                id,
                                &known,
                                &format!("the size of `{}`", init.name.name),
                            );
                        }
                    }
                    let fill_exprs: Vec<&Expr> = match &a.fill {
                        Fill::RandomRange { lo, hi, .. } => vec![lo, hi],
                        Fill::Const(e, _) => vec![e],
                        _ => vec![],
                    };
                    for e in fill_exprs {
                        for id in e.names() {
                            self.undefined(
                                id,
                                &known,
                                &format!("the fill of `{}`", init.name.name),
                            );
                        }
                    }
                }
            }
        }
        if let Some(f) = &self.spec.flop {
            for id in f.expr.names() {
                self.undefined(id, &known, "the flop formula");
            }
        }
    }

    /// A member path has a value only in the application's call, so only
    /// an output's count (evaluated there, by the interposer) may use one.
    fn members_only_in_counts(&mut self) {
        let mut exprs: Vec<&Expr> = Vec::new();
        for init in &self.spec.init {
            match &init.value {
                InitValue::Scalar(e) => exprs.push(e),
                InitValue::Array(a) => {
                    exprs.extend(&a.dims);
                    match &a.fill {
                        Fill::RandomRange { lo, hi, .. } => exprs.extend([lo, hi]),
                        Fill::Const(e, _) => exprs.push(e),
                        _ => {}
                    }
                }
            }
        }
        exprs.extend(self.spec.flop.as_ref().map(|f| &f.expr));
        for e in exprs {
            e.walk(&mut |sub| {
                if let Expr::Member { root, path, span } = sub {
                    self.out.push(
                        Diagnostic::new(
                            format!(
                                "`{}` is a struct member: it has a value only in the application's call",
                                member_path_text(&root.name, path)
                            ),
                            *span,
                        )
                        .with_hint("member paths may appear in returns(...) and its counts only"),
                    );
                }
            });
        }
    }

    /// `N=M; M=N;` has no value; the driver would evaluate garbage.
    fn cycles(&mut self) {
        let deps: BTreeMap<&str, (Vec<&Ident>, Span)> = self
            .spec
            .init
            .iter()
            .filter_map(|i| match &i.value {
                InitValue::Scalar(e) => Some((i.name.name.as_str(), (e.names(), i.name.span))),
                InitValue::Array(_) => None,
            })
            .collect();
        let mut reported: BTreeSet<&str> = BTreeSet::new();
        for (&start, (_, span)) in &deps {
            // Depth-first search for a path back to `start`.
            let mut stack: Vec<(&str, Vec<&str>)> = vec![(start, vec![start])];
            let mut visited: BTreeSet<&str> = BTreeSet::new();
            while let Some((n, path)) = stack.pop() {
                let Some((next, _)) = deps.get(n) else {
                    continue;
                };
                for id in next {
                    let m = id.name.as_str();
                    if m == start {
                        if path.iter().all(|p| !reported.contains(p)) {
                            reported.extend(path.iter().copied());
                            let mut shown = path.clone();
                            shown.push(start);
                            self.out.push(
                                Diagnostic::new(
                                    format!("`{start}` is defined in terms of itself"),
                                    *span,
                                )
                                .with_hint(format!("cycle: {}", shown.join(" -> "))),
                            );
                        }
                        stack.clear();
                        break;
                    }
                    if visited.insert(m) {
                        let mut p = path.clone();
                        p.push(m);
                        stack.push((m, p));
                    }
                }
            }
        }
    }

    fn arrays(&mut self) {
        for init in &self.spec.init {
            let InitValue::Array(a) = &init.value else {
                continue;
            };
            let name = &init.name.name;
            if let Some(p) = self.spec.param(name) {
                self.array_fits_param(name, &p.ty, a);
            }
            self.elements_allocatable(a);
            self.fill_fits_storage(a);
            self.attrs(a);
            for d in &a.dims {
                self.integral_size(d, name);
                self.fixed_size(d, name);
            }
            self.fill_values(a);
        }
    }

    /// Whether parameter `name` of type `ty` can be passed the array `a`:
    /// pointers enough (two for `Array2D`'s row pointers), and the
    /// elements' type what they point to.
    fn array_fits_param(&mut self, name: &str, ty: &CType, a: &ArrayInit) {
        let want_ptrs = match a.kind {
            ArrayKind::Array2D => 2,
            _ => 1,
        };
        let pointee_ptrs = ty.pointers.saturating_sub(want_ptrs);
        if ty.pointers < want_ptrs {
            let what = if ty.pointers == 0 {
                "not a pointer"
            } else {
                "a single pointer"
            };
            let hint = if want_ptrs == 2 {
                format!(
                    "Array2D passes a pointer to row pointers: declare `{}** {name}`",
                    a.elem.base.c_name()
                )
            } else {
                format!(
                    "give it a scalar value (`{name}=...;`) or declare it `{}* {name}`",
                    ty.base.c_name()
                )
            };
            self.out.push(
                Diagnostic::new(
                    format!(
                        "`{name}` is {what} (`{}`) but is initialised as an array",
                        ty.text()
                    ),
                    a.span,
                )
                .with_hint(hint),
            );
        } else if ty.base != a.elem.base || pointee_ptrs != a.elem.pointers {
            let want = CType {
                is_const: false,
                base: ty.base.clone(),
                pointers: pointee_ptrs,
                span: Span::default(),
            };
            self.out.push(
                Diagnostic::new(
                    format!(
                        "element type `{}` does not match parameter `{name}` (`{}`)",
                        a.elem.text(),
                        ty.text()
                    ),
                    a.elem.span,
                )
                .with_hint(format!("write `{}` as the element type", want.text())),
            );
        }
    }

    /// Elements the driver can allocate and fill: not `void`, and a
    /// struct's only with zeros or recorded bytes.
    fn elements_allocatable(&mut self, a: &ArrayInit) {
        if a.elem.base == BaseType::Void && a.elem.pointers == 0 {
            self.out.push(
                Diagnostic::new("cannot allocate elements of type `void`", a.elem.span)
                    .with_hint("use `unsigned char` for raw bytes"),
            );
        }
        if matches!(a.elem.base, BaseType::Struct(_))
            && a.elem.pointers == 0
            && !matches!(a.fill, Fill::Zero(_) | Fill::File(..))
        {
            self.out.push(
                Diagnostic::new(
                    format!(
                        "`{}` elements can only be filled with ZERO or FILE(...)",
                        a.elem.text()
                    ),
                    a.fill_span(),
                )
                .with_hint("the driver does not know the struct's fields"),
            );
        }
    }

    /// A fill's values are numbers, and a `FILE(...)` names a file.
    fn fill_values(&mut self, a: &ArrayInit) {
        let fill_values: Vec<&Expr> = match &a.fill {
            Fill::RandomRange { lo, hi, .. } => vec![lo, hi],
            Fill::Const(e, _) => vec![e],
            _ => vec![],
        };
        for e in fill_values {
            e.walk(&mut |x| {
                if let Expr::Str(_, s) = x {
                    self.out.push(
                        Diagnostic::new("a fill value must be a number, not a string", *s)
                            .with_hint("use FILE(\"path\") to fill from recorded bytes"),
                    );
                }
            });
        }
        if let Fill::File(path, span) = &a.fill {
            if path.is_empty() {
                self.out.push(
                    Diagnostic::new("FILE(\"\") names no file", *span)
                        .with_hint("give the path of the recorded bytes"),
                );
            }
        }
    }

    fn attrs(&mut self, a: &ArrayInit) {
        let mut seen: BTreeMap<&str, Span> = BTreeMap::new();
        for at in &a.attrs {
            let key = match at {
                Attr::Flush(_) => "flush",
                Attr::Warm(_) => "warm",
                Attr::Touch(_) => "touch",
                Attr::Align(..) => "align",
                Attr::Misalign(..) => "misalign",
            };
            if seen.contains_key(key) {
                self.out.push(
                    Diagnostic::new(format!("attribute `{key}` given twice"), at.span())
                        .with_hint("keep one"),
                );
            }
            seen.insert(key, at.span());
        }
        if let (Some(_), Some(w)) = (seen.get("flush"), seen.get("warm")) {
            self.out.push(
                Diagnostic::new("`flush` and `warm` conflict: an operand cannot be both evicted and cache-resident", *w)
                    .with_hint("keep `flush` (cold, as on first touch in the application) or `warm` (reused from cache)"),
            );
        }
        if let Some(m) = a.misalign() {
            let n = a.effective_align();
            let m_span = seen["misalign"];
            if m <= n {
                let (message, hint) = if a.align().is_some() {
                    (
                        format!("misalign({m}) must be larger than align({n})"),
                        format!(
                            "misalign(m) means aligned to {n} bytes but never to m; try misalign({})",
                            n * 2
                        ),
                    )
                } else {
                    (
                        format!("misalign({m}) must be larger than the default align({n})"),
                        format!(
                            "without align(n) an operand is aligned to {n} bytes (malloc's guarantee); for an address aligned to {m} but not {} write align({m})|misalign({})",
                            m * 2,
                            m * 2
                        ),
                    )
                };
                self.out
                    .push(Diagnostic::new(message, m_span).with_hint(hint));
            }
            if a.is_static() {
                self.out.push(
                    Diagnostic::new("static arrays cannot be misaligned", m_span)
                        .with_hint("use Vector/Matrix (heap) for misalignment"),
                );
            }
        }
    }

    /// Value fills need arithmetic elements (a typedef'd type only takes
    /// RANDOM, as random words; pointers take ZERO or FILE), and FILE needs
    /// one contiguous block.
    fn fill_fits_storage(&mut self, a: &ArrayInit) {
        let e = &a.elem;
        let arithmetic = e.pointers == 0 && (e.base.is_integral() || e.base.is_floating());
        let value_fill = match &a.fill {
            Fill::RandomRange { .. } => Some("RANDOM(lo, hi)"),
            Fill::Const(..) => Some("CONST"),
            Fill::Seq(_) => Some("SEQ"),
            Fill::Random(_) if e.pointers > 0 => Some("RANDOM"),
            _ => None,
        };
        let opaque_struct = matches!(e.base, BaseType::Struct(_)) && e.pointers == 0;
        if let (Some(what), false, false) = (value_fill, arithmetic, opaque_struct) {
            self.out.push(
                Diagnostic::new(
                    format!(
                        "a {what} fill needs an arithmetic element type; `{}` is not",
                        e.text()
                    ),
                    a.fill_span(),
                )
                .with_hint("use ZERO or FILE(\"...\")"),
            );
        }
        if let (Fill::File(_, span), ArrayKind::Array2D) = (&a.fill, a.kind) {
            self.out.push(
                Diagnostic::new("FILE(...) fills need contiguous storage", *span)
                    .with_hint("use Matrix instead of Array2D"),
            );
        }
    }

    /// A size is fixed for the whole run: it may not use a scalar that
    /// changes per call (Range/RANDOM), directly or through other scalars.
    fn fixed_size(&mut self, e: &Expr, array: &str) {
        for id in e.names() {
            if let Some(per_call) = self.per_call_source(&id.name, 0) {
                self.out.push(
                    Diagnostic::new(
                        format!(
                            "the size of `{array}` uses `{}`, which changes per call ({per_call}); sizes must be fixed",
                            id.name
                        ),
                        id.span,
                    )
                    .with_hint(format!(
                        "give `{}` a fixed value, or size `{array}` from a Macro",
                        id.name
                    )),
                );
                return;
            }
        }
    }

    /// `Range` or `RANDOM` if the scalar `name` changes per call.
    fn per_call_source(&self, name: &str, depth: usize) -> Option<&'static str> {
        // Cycles are reported by `cycles`; stop rather than recurse forever.
        if depth > self.spec.init.len() {
            return None;
        }
        let e = self.spec.scalar_for(name)?;
        match e {
            Expr::Range { .. } => Some("Range"),
            Expr::Random(_) | Expr::RandomRange { .. } => Some("RANDOM"),
            _ => e
                .names()
                .iter()
                .find_map(|d| self.per_call_source(&d.name, depth + 1)),
        }
    }

    /// Sizes must be integers in C: no doubles, strings, per-call values.
    fn integral_size(&mut self, e: &Expr, array: &str) {
        let mut bad: Option<(String, Span)> = None;
        e.walk(&mut |sub| {
            if bad.is_some() {
                return;
            }
            match sub {
                Expr::Float(f, s) => bad = Some((format!("the double `{f}`"), *s)),
                Expr::Str(_, s) => bad = Some(("a string".into(), *s)),
                Expr::Random(s) | Expr::RandomRange { span: s, .. } => {
                    bad = Some(("RANDOM, which changes on every call".into(), *s))
                }
                Expr::Range { span, .. } => {
                    bad = Some(("Range(...), which changes on every call".into(), *span))
                }
                Expr::Name(id) => {
                    if let Some(p) = self.spec.param(&id.name) {
                        if p.ty.pointers > 0 || !p.ty.base.is_integral() {
                            bad = Some((
                                format!("`{}`, which is a `{}`", id.name, p.ty.text()),
                                id.span,
                            ));
                        }
                    }
                }
                _ => {}
            }
        });
        if let Some((what, span)) = bad {
            self.out.push(
                Diagnostic::new(
                    format!("the size of `{array}` is not integral: it uses {what}"),
                    span,
                )
                .with_hint("sizes are element counts: use integer parameters, macros and literals"),
            );
        }
    }

    /// Every parameter needs a value: pointers an allocation, scalars an init.
    fn missing_values(&mut self) {
        for p in &self.spec.routine.params {
            let name = &p.name.name;
            match self.spec.init_for(name).map(|i| &i.value) {
                None if p.ty.is_pointer() => self.out.push(
                    Diagnostic::new(
                        format!("pointer parameter `{name}` has no allocation"),
                        p.name.span,
                    )
                    .with_hint(format!(
                        "add e.g. `{name}=Vector({}, RANDOM, _, N);` to init",
                        CType {
                            is_const: false,
                            base: p.ty.base.clone(),
                            pointers: p.ty.pointers - 1,
                            span: Span::default()
                        }
                        .text()
                    )),
                ),
                None => self.out.push(
                    Diagnostic::new(format!("parameter `{name}` has no value"), p.name.span)
                        .with_hint(format!(
                            "add e.g. `{name}=Macro({}S, 100);` to init",
                            name.to_ascii_uppercase()
                        )),
                ),
                Some(InitValue::Scalar(e)) if p.ty.is_pointer() => {
                    let char_string = matches!(e, Expr::Str(..))
                        && p.ty.pointers == 1
                        && matches!(
                            p.ty.base,
                            BaseType::Char | BaseType::SignedChar | BaseType::UnsignedChar
                        );
                    if !char_string {
                        self.out.push(
                            Diagnostic::new(format!("pointer parameter `{name}` has no allocation"), e.span()).with_hint(
                                format!("a pointer needs an array: `{name}=Vector(...)` or `Matrix(...)`; only `char*` may take a string"),
                            ),
                        );
                    }
                }
                Some(InitValue::Scalar(Expr::Str(_, s))) => self.out.push(
                    Diagnostic::new(format!("`{name}` is a `{}`, not a string", p.ty.text()), *s)
                        .with_hint("strings can only initialise `const char*` parameters"),
                ),
                _ => {}
            }
        }
    }

    fn returns(&mut self) {
        let r = &self.spec.routine;
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for id in &self.spec.returns {
            if !listed_once(&mut seen, id.text(), "returns", id.span, &mut self.out) {
                continue;
            }
            if !id.path.is_empty() {
                let root = Ident {
                    name: id.name.clone(),
                    span: id.span,
                };
                self.out.extend(self.member_path_problem(&root, &id.path));
            } else if id.name == r.name.name {
                if r.ret.base == BaseType::Void && r.ret.pointers == 0 {
                    self.out.push(
                        Diagnostic::new(
                            format!(
                                "`{}` returns void: there is no return value to verify",
                                id.name
                            ),
                            id.span,
                        )
                        .with_hint("list the output arrays instead"),
                    );
                }
            } else {
                self.output_param(id);
            }
        }
        self.return_counts();
    }

    /// A parameter listed in returns: one the routine can write.
    fn output_param(&mut self, id: &Output) {
        let r = &self.spec.routine;
        match self.spec.param(&id.name) {
            None => {
                let mut cands: Vec<&str> = r.param_names().collect();
                cands.push(&r.name.name);
                self.out.push(
                    Diagnostic::new(format!("returns names `{}`, which is not a parameter", id.name), id.span).with_hint(
                        did_you_mean(&id.name, cands.iter().copied()).unwrap_or_else(|| {
                            format!("list output parameters, or `{}` for the return value", r.name.name)
                        }),
                    ),
                );
            }
            Some(p) if !p.ty.is_pointer() => self.out.push(
                Diagnostic::new(format!("`{}` is passed by value: the routine cannot change it", id.name), id.span)
                    .with_hint("only pointer parameters (or the routine's name, for its return value) are outputs"),
            ),
            Some(p) if p.ty.is_const && p.ty.pointers == 1 => self.out.push(
                Diagnostic::new(format!("`{}` is `{}`: the routine cannot write it", id.name, p.ty.text()), id.span)
                    .with_hint("drop it from returns, or the `const` if the routine writes it"),
            ),
            Some(_) => {}
        }
    }

    /// The counts of returns' `X[n]`: integer parameters, and none on the
    /// return value.
    fn return_counts(&mut self) {
        let r = &self.spec.routine;
        for out in &self.spec.returns {
            if let Some(count) = &out.count {
                if out.name == r.name.name && out.path.is_empty() {
                    self.out.push(
                        Diagnostic::new(
                            format!(
                                "`{}` is the return value, a single value: it takes no count",
                                out.name
                            ),
                            count.span(),
                        )
                        .with_hint(format!("write `returns({})`", out.name)),
                    );
                } else {
                    self.count_uses_integer_parameters(&out.text(), count, None);
                }
            }
        }
    }

    /// Why `root` followed by `path` cannot be read from the call's
    /// arguments, if it cannot. The members themselves are the C
    /// compiler's to check, against the struct's definition that an
    /// `include=` brings in.
    fn member_path_problem(&self, root: &Ident, path: &[MemberStep]) -> Option<Diagnostic> {
        let r = &self.spec.routine;
        let text = member_path_text(&root.name, path);
        let first = path.first()?;
        let Some(p) = self.spec.param(&root.name) else {
            let cands = r.param_names();
            return Some(
                Diagnostic::new(
                    format!(
                        "`{text}` starts at `{}`, which is not a parameter",
                        root.name
                    ),
                    root.span,
                )
                .with_hint(did_you_mean(&root.name, cands).unwrap_or_else(|| {
                    "a member path starts at a pointer parameter, e.g. `s->ptr` for `EState* s`"
                        .into()
                })),
            );
        };
        let ty = p.ty.text();
        let problem = if self.spec.lang == Lang::Fortran {
            Some((
                "a Fortran routine's arguments have no C members".to_string(),
                "name whole arguments in returns(...)".to_string(),
            ))
        } else if !p.ty.is_pointer() {
            Some((
                format!("`{}` is passed by value (`{ty}`): the call's members of it are the caller's copy", root.name),
                "a member path starts at a pointer parameter, e.g. `s->ptr` for `EState* s`".to_string(),
            ))
        } else if p.ty.pointers > 1 {
            Some((
                format!("`{}` is `{ty}`: `->` reaches a pointer, not a struct", root.name),
                "a member path starts at a pointer to a struct; declare blocks behind pointers to pointers with TDG_REGION_OUTPUT(site, ptr, count) (tdg_checkpoint.h)".to_string(),
            ))
        } else if !matches!(p.ty.base, BaseType::Struct(_) | BaseType::Named(_)) {
            Some((
                format!("`{}` is `{ty}`, which has no members", root.name),
                "a member path starts at a pointer to a struct".to_string(),
            ))
        } else if !first.arrow {
            Some((
                format!(
                    "`{}` is a pointer (`{ty}`): its members are reached with `->`",
                    root.name
                ),
                format!(
                    "write `{}`",
                    member_path_text(
                        &root.name,
                        &[MemberStep {
                            arrow: true,
                            ..first.clone()
                        }]
                    )
                ),
            ))
        } else if self.spec.includes.is_empty() {
            let base = CType {
                is_const: false,
                pointers: 0,
                ..p.ty.clone()
            }
            .text();
            Some((
                format!("`{text}` reads members of `{base}`, and the spec has no include= that defines it"),
                "add the struct's header: include=\"#include \\\"HEADER.h\\\"\"; (and -I DIR for its directory)".to_string(),
            ))
        } else {
            None
        };
        let (message, hint) = problem?;
        let at = if p.ty.is_pointer() && p.ty.pointers == 1 {
            first.span
        } else {
            root.span
        };
        Some(Diagnostic::new(message, at).with_hint(hint))
    }

    /// A driver makes the arguments itself, so there is no struct of the
    /// application's to read members from.
    fn member_paths_need_an_application(&mut self) {
        for out in self.spec.returns.iter().filter(|o| !o.path.is_empty()) {
            self.out.push(
                Diagnostic::new(
                    format!("`{}` is a member path: a driver makes its own arguments and has no struct to read it from", out.text()),
                    out.span,
                )
                .with_hint("member paths are for interposed calls (`tdg checkpoint capture --spec`, a spec timed on its checkpoint image)"),
            );
        }
    }

    /// A driver compares the outputs with its reference implementation.
    /// `record=`: parameters of the routine, each once, no more than a
    /// profile record holds, none a struct passed by value (a record holds
    /// numbers and addresses).
    fn record(&mut self) {
        let Some(clause) = &self.spec.record else {
            return;
        };
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let params = || self.spec.routine.param_names();
        for id in &clause.names {
            let Some(p) = self.spec.param(&id.name) else {
                let hint = did_you_mean(&id.name, params()).unwrap_or_else(|| {
                    format!(
                        "record= lists parameters of `{}`: {}",
                        self.spec.routine.name.name,
                        params().collect::<Vec<_>>().join(", ")
                    )
                });
                self.out.push(
                    Diagnostic::new(
                        format!("`{}` in record= is not a parameter of the routine", id.name),
                        id.span,
                    )
                    .with_hint(hint),
                );
                continue;
            };
            if !listed_once(
                &mut seen,
                id.name.clone(),
                "record=",
                id.span,
                &mut self.out,
            ) {
                continue;
            }
            let number =
                p.ty.base.is_integral() || matches!(p.ty.base, BaseType::Float | BaseType::Double);
            if p.ty.pointers == 0 && !number {
                self.out.push(
                    Diagnostic::new(
                        format!(
                            "`{}` is a `{}` passed by value: a profile records numbers and addresses",
                            id.name,
                            p.ty.text()
                        ),
                        id.span,
                    )
                    .with_hint("record the integer or floating-point parameters that describe the call"),
                );
            }
        }
        if clause.names.len() > MAX_RECORDED {
            let extra = &clause.names[MAX_RECORDED];
            self.out.push(
                Diagnostic::new(
                    format!(
                        "record= lists {} parameters; a profile records at most {MAX_RECORDED} per call",
                        clause.names.len()
                    ),
                    extra.span,
                )
                .with_hint("keep the parameters that size the work and choose the call's context"),
            );
        }
    }

    /// An interposer declares each output of the application's call from
    /// the call's own arguments (`tdg checkpoint capture --spec`), so each
    /// needs a count of them: written with it, or its allocation's sizes.
    fn outputs_have_counts(&mut self) {
        let r = &self.spec.routine;
        for out in &self.spec.returns {
            if !out.path.is_empty() {
                continue; // one member, or its count: checked by returns()
            }
            let Some(p) = self.spec.param(&out.name).filter(|p| p.ty.is_pointer()) else {
                continue; // the return value, or reported by returns()
            };
            if p.ty.pointers > 1 {
                self.out.push(
                    Diagnostic::new(
                        format!(
                            "`{}` is `{}`: an output is one block of elements, and its elements are pointers to other blocks",
                            out.name,
                            p.ty.text()
                        ),
                        out.span,
                    )
                    .with_hint("declare the blocks in the application with TDG_REGION_OUTPUT(site, ptr, count) (tdg_checkpoint.h)"),
                );
                continue;
            }
            if out.count.is_some() {
                continue; // checked by returns()
            }
            let hint = format!(
                "give the count with the output: `returns({}[COUNT])`, COUNT an expression of {}'s integer parameters",
                out.name, r.name.name
            );
            match (self.spec.output_count(out), self.spec.array_for(&out.name)) {
                (Some(count), _) => self.count_uses_integer_parameters(&out.name, &count, Some(&hint)),
                (None, Some(a)) => self.out.push(
                    Diagnostic::new(
                        format!("`{}` is an Array2D, one block per row: its elements are not counted from one pointer", out.name),
                        a.span,
                    )
                    .with_hint("declare the rows in the application with TDG_REGION_OUTPUT(site, ptr, count) (tdg_checkpoint.h)"),
                ),
                (None, None) => self.out.push(
                    Diagnostic::new(
                        format!("output `{}` has no count: nothing says how many elements the call writes", out.name),
                        out.span,
                    )
                    .with_hint(hint),
                ),
            }
        }
    }

    /// `count` (the element count of output `name`) must be computable from
    /// the call's arguments: integers, + - * / %, and the routine's integer
    /// parameters passed by value.
    fn count_uses_integer_parameters(&mut self, name: &str, count: &Expr, hint: Option<&str>) {
        let r = &self.spec.routine;
        let mut found = Vec::new();
        count.walk(&mut |e| {
            let problem = match e {
                Expr::Int(..) | Expr::Unary { .. } | Expr::Binary { .. } => None,
                Expr::Name(id) => match self.spec.param(&id.name) {
                    None => Some(
                        Diagnostic::new(
                            format!("the count of `{name}` names `{}`, which is not a parameter of {}", id.name, r.name.name),
                            id.span,
                        )
                        .with_hint_opt(did_you_mean(&id.name, r.param_names())),
                    ),
                    Some(p) if p.ty.is_pointer() || !p.ty.base.is_integral() => Some(Diagnostic::new(
                        format!(
                            "the count of `{name}` uses `{}`, a `{}`: a count is made of integer parameters",
                            id.name,
                            p.ty.text()
                        ),
                        id.span,
                    )),
                    Some(_) => None,
                },
                Expr::Member { root, path, .. } => self.member_path_problem(root, path),
                _ => Some(Diagnostic::new(
                    format!("the count of `{name}` must be an integer expression of the call's arguments"),
                    e.span(),
                )),
            };
            found.extend(problem);
        });
        for mut d in found {
            if d.hint.is_none() {
                d.hint = Some(hint.map_or_else(
                    || "write it with integers, + - * / % and the routine's integer parameters, e.g. `C[ldc*n]`".to_string(),
                    str::to_string,
                ));
            }
            self.out.push(d);
        }
    }

    /// `Range` and `RANDOM` change per call, so each must be a scalar's
    /// whole value: inside an expression the driver has no per-call value
    /// to put there.
    fn per_call_whole_values(&mut self) {
        for init in &self.spec.init {
            let InitValue::Scalar(e) = &init.value else {
                continue;
            };
            let inner: Vec<&Expr> = match e {
                Expr::Range { begin, incr, .. } => vec![begin, incr],
                Expr::RandomRange { lo, hi, .. } => vec![lo, hi],
                Expr::Random(_) => vec![],
                other => vec![other],
            };
            for x in inner {
                x.walk(&mut |sub| {
                    if let Expr::Random(s) | Expr::RandomRange { span: s, .. } | Expr::Range { span: s, .. } = sub {
                        let what = if matches!(sub, Expr::Range { .. }) { "Range(...)" } else { "RANDOM" };
                        self.out.push(
                            Diagnostic::new(
                                format!("{what} changes per call and must be the whole value of `{}`", init.name.name),
                                *s,
                            )
                            .with_hint("give it a scalar of its own, e.g. `t=Range(1, 1);`, or a fixed value"),
                        );
                    }
                });
            }
        }
    }

    fn flop(&mut self) {
        let Some(f) = &self.spec.flop else { return };
        f.expr.walk(&mut |e| match e {
            Expr::Random(s)
            | Expr::RandomRange { span: s, .. }
            | Expr::Range { span: s, .. }
            | Expr::Macro { span: s, .. } => self.out.push(
                Diagnostic::new(
                    "the flop formula must be arithmetic on parameters and macros",
                    *s,
                )
                .with_hint("write e.g. flop=\"2*M*N*K\""),
            ),
            Expr::Str(_, s) => self.out.push(
                Diagnostic::new("a string in the flop formula", *s)
                    .with_hint("write e.g. flop=\"2*N\""),
            ),
            _ => {}
        });
    }

    fn checkpoint(&mut self) {
        if let Some(c) = &self.spec.checkpoint {
            if c.image.trim().is_empty() {
                self.out.push(
                    Diagnostic::new("the checkpoint image path is empty", c.span).with_hint(
                        "give the directory `tdg checkpoint` wrote, e.g. checkpoint=\"gemm.img\";",
                    ),
                );
            }
        }
    }

    /// With every name defined, the sizes must evaluate (at the defaults) to
    /// positive integers that do not overflow.
    fn sizes_evaluate(&mut self) {
        let env = match eval::typed_env(self.spec, &BTreeMap::new()) {
            Ok(env) => env,
            Err(e) => {
                self.out.push(e.to_diagnostic());
                return;
            }
        };
        for init in &self.spec.init {
            let InitValue::Array(a) = &init.value else {
                continue;
            };
            if let Err(e) = eval::array_bytes(a, &env) {
                let mut d = e.to_diagnostic();
                d.message = format!(
                    "`{}`: {} (with the default macro values)",
                    init.name.name, d.message
                );
                if d.hint.is_none() {
                    d.hint = Some(
                        "change the default, or the expression the size is computed from".into(),
                    );
                }
                self.out.push(d);
            }
        }
        self.const_fills_fit(&env);
        // RANDOM(lo, hi) with lo > hi would draw from an empty interval.
        let mut ranges: Vec<(&Expr, &Expr, Span)> = Vec::new();
        for init in &self.spec.init {
            match &init.value {
                InitValue::Scalar(e) => e.walk(&mut |x| {
                    if let Expr::RandomRange { lo, hi, span } = x {
                        ranges.push((lo, hi, *span));
                    }
                }),
                InitValue::Array(a) => {
                    if let Fill::RandomRange { lo, hi, span } = &a.fill {
                        ranges.push((lo, hi, *span));
                    }
                }
            }
        }
        for (lo, hi, span) in ranges {
            if let (Ok(l), Ok(h)) = (eval::eval_value(lo, &env), eval::eval_value(hi, &env)) {
                if l.as_f64() > h.as_f64() {
                    self.out.push(
                        Diagnostic::new(format!("RANDOM({l}, {h}) has its bounds reversed"), span)
                            .with_hint(format!("write RANDOM({h}, {l})")),
                    );
                }
            }
        }
        if let Some(f) = &self.spec.flop {
            let float_env = env
                .iter()
                .map(|(k, v)| (k.clone(), eval::Value::Float(v.as_f64())))
                .collect();
            if let Err(e) = eval::eval_value(&f.expr, &float_env) {
                self.out.push(e.to_diagnostic());
            }
        }
    }
}

impl Checker<'_> {
    /// A constant fill of integer elements must be a whole number the
    /// element type holds: C would truncate 1.5 or wrap 300 in a `char`
    /// without a word, and the timed data would not be what the spec says.
    fn const_fills_fit(&mut self, env: &BTreeMap<String, eval::Value>) {
        for init in &self.spec.init {
            let InitValue::Array(a) = &init.value else {
                continue;
            };
            let (Fill::Const(e, span), false, true) =
                (&a.fill, a.elem.pointers > 0, a.elem.base.is_integral())
            else {
                continue;
            };
            let Ok(v) = eval::eval_value(e, env) else {
                continue;
            };
            let ty = a.elem.text();
            let (lo, hi) = eval::int_range(&a.elem.base);
            let f = v.as_f64();
            if f.fract() != 0.0 {
                self.out.push(
                    Diagnostic::new(
                        format!(
                            "`{ty}` elements cannot hold {f}: C would truncate it to {}",
                            f.trunc()
                        ),
                        *span,
                    )
                    .with_hint("give a whole number, or a floating element type"),
                );
            } else if (f as i128) < lo || (f as i128) > hi {
                self.out.push(
                    Diagnostic::new(
                        format!("`{ty}` elements cannot hold {f} (they hold {lo} to {hi})"),
                        *span,
                    )
                    .with_hint("use a wider element type or a value in range"),
                );
            }
        }
    }
}

impl ArrayInit {
    fn fill_span(&self) -> Span {
        match &self.fill {
            Fill::Random(s)
            | Fill::Zero(s)
            | Fill::Seq(s)
            | Fill::Const(_, s)
            | Fill::File(_, s) => *s,
            Fill::RandomRange { span, .. } => *span,
        }
    }
}

fn contains_word(hay: &str, word: &str) -> bool {
    hay.match_indices(word).any(|(i, _)| {
        let before = hay[..i].chars().next_back();
        let after = hay[i + word.len()..].chars().next();
        let is_id = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !is_id(before) && !is_id(after)
    })
}
