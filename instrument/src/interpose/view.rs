//! The interposers' C, rendered from handlebars templates in
//! `instrument/c/` as the driver is from `templates/`: the spec's routine
//! and what is recorded or declared around it become one view struct per
//! template, with every C spelling (a recorded value's conversion, an
//! output's count, the pointers it dereferences) made here, so the
//! templates only lay the text out.

use super::error::InterposeError;
use super::routine::{c_type, InterposerKind, RecordedValue, Signature};
use crate::format::ValueKind;
use handlebars::Handlebars;
use serde::Serialize;
use spec_lang::ast::{member_path_text, BaseType, Expr, Lang, MemberStep, Output, Spec, UnaryOp};

const INTERPOSER: &str = include_str!("../../c/interposer.c.hbs");
const REGION_SHIM: &str = include_str!("../../c/region_shim.c.hbs");
/// Partials both LD_PRELOAD kinds share: the resolution on the first call,
/// and forwarding nested calls untouched.
const PRELOAD_HEAD: &str = include_str!("../../c/preload_head.c.hbs");
const FORWARD_NESTED: &str = include_str!("../../c/forward_nested.c.hbs");
const DISPATCHER: &str = include_str!("../../c/dispatcher.c.hbs");
const ORIGINAL: &str = include_str!("../../c/original.c.hbs");

/// What every interposer template reads about the routine.
#[derive(Serialize)]
struct RoutineView<'a> {
    #[serde(flatten)]
    sig: &'a Signature,
    /// The routine's name as the spec writes it (the profile's and the
    /// region's name).
    routine: &'a str,
    /// The spec's `include=` lines, in order.
    includes: Vec<&'a str>,
    /// What a call is forwarded to: the resolved pointer or `__real_NAME`.
    callee: String,
    /// The profile shim registers the routine on the first call.
    profile: bool,
    /// `name:kind,...` of the recorded values (empty when none).
    descr: String,
    /// What `tdg_resolve` runs before ending the program when the routine
    /// is nowhere: the profile shim writes what it has.
    before_exit: &'static str,
}

#[derive(Serialize)]
struct InterposerView<'a> {
    #[serde(flatten)]
    routine: RoutineView<'a>,
    preload: bool,
    records_double: bool,
    /// Each recorded value as C yielding an `int64_t`, in record order.
    values: Vec<String>,
    value_count: usize,
}

#[derive(Serialize)]
struct RegionShimView<'a> {
    #[serde(flatten)]
    routine: RoutineView<'a>,
    site: &'a str,
    /// The result is a declared output, kept in `tdg_ret_`.
    return_value: bool,
    /// Its type there (a `const int` result kept as an `int`).
    kept_ret: String,
    uses_count_op: bool,
    declares_outputs: bool,
    outputs: Vec<OutputView>,
}

#[derive(Serialize)]
struct DispatcherView<'a> {
    #[serde(flatten)]
    routine: RoutineView<'a>,
    preload: bool,
    records_double: bool,
    /// The context's values as C yielding `int64_t`s, in record order (a
    /// constant 0 when the routine records none: one context).
    values: Vec<String>,
    key_names: String,
    key_len: usize,
    variants: Vec<VariantView<'a>>,
    routes: Vec<RouteView>,
}

/// `text` inside a C comment.
fn in_comment(text: &str) -> String {
    text.replace("*/", "* /")
}

#[derive(Serialize)]
struct VariantView<'a> {
    symbol: &'a str,
    label: String,
}

#[derive(Serialize)]
struct RouteView {
    /// The key's values as C `int64_t` constants.
    key: String,
    /// -1: the original.
    variant: i64,
    label: String,
}

/// One `returns(...)` item: the call's result, or `count` elements at
/// `data` (each `size_kind`), read only when `non_null` holds.
#[derive(Serialize, Default)]
struct OutputView {
    return_value: bool,
    /// The comment that opens its statements: a compiler error after it is
    /// about this item (`failing_item`).
    marker: String,
    non_null: String,
    count: String,
    data: String,
    size_kind: String,
}

/// The templates, parsed once per process.
fn handlebars() -> &'static Handlebars<'static> {
    static TEMPLATES: std::sync::OnceLock<Handlebars<'static>> = std::sync::OnceLock::new();
    TEMPLATES.get_or_init(parse_templates)
}

fn parse_templates() -> Handlebars<'static> {
    let mut hb = Handlebars::new();
    hb.register_escape_fn(handlebars::no_escape);
    hb.set_strict_mode(true);
    for (name, text) in [
        ("interposer", INTERPOSER),
        ("region_shim", REGION_SHIM),
        ("preload_head", PRELOAD_HEAD),
        ("forward_nested", FORWARD_NESTED),
        ("dispatcher", DISPATCHER),
        ("original", ORIGINAL),
    ] {
        hb.register_template_string(name, text)
            .unwrap_or_else(|e| panic!("instrument/c/{name}.c.hbs does not parse: {e}"));
    }
    hb
}

fn render(name: &str, view: &impl Serialize) -> String {
    // The templates are built in and every field they name is in the view
    // (strict mode), so a failure is a bug in tdg, caught by the tests.
    handlebars()
        .render(name, view)
        .unwrap_or_else(|e| panic!("instrument/c/{name}.c.hbs: {e}"))
}

fn routine_view<'a>(
    spec: &'a Spec,
    sig: &'a Signature,
    callee: String,
    descr: String,
    profile: bool,
) -> RoutineView<'a> {
    RoutineView {
        sig,
        routine: &spec.routine.name.name,
        includes: spec.includes.iter().map(|i| i.text.as_str()).collect(),
        callee,
        profile,
        descr,
        before_exit: if profile {
            "tdg_write_profile_"
        } else {
            "NULL"
        },
    }
}

/// A recorded value as C yielding an `int64_t`: integers sign- or
/// zero-extended, a double's bit pattern, a pointer's address.
fn value_c(v: &RecordedValue) -> String {
    let deref = if v.by_reference { "*" } else { "" };
    let name = &v.param;
    match v.kind {
        ValueKind::Signed => format!("(int64_t)({deref}{name})"),
        ValueKind::Unsigned => format!("(int64_t)(uint64_t)({deref}{name})"),
        ValueKind::Double => format!("tdg_double_bits_((double)({deref}{name}))"),
        ValueKind::Pointer => format!("TDG_PTR({name})"),
    }
}

/// The profiling interposer's C.
pub(super) fn interposer(
    spec: &Spec,
    sig: &Signature,
    kind: InterposerKind,
    values: &[RecordedValue],
) -> String {
    let descr = values
        .iter()
        .map(|v| format!("{}:{}", v.param, v.kind.code()))
        .collect::<Vec<_>>()
        .join(",");
    let callee = match kind {
        InterposerKind::Preload => "tdg_fn_".to_string(),
        InterposerKind::Wrap => format!("__real_{}", sig.sym),
    };
    let view = InterposerView {
        routine: routine_view(spec, sig, callee, descr, true),
        preload: kind == InterposerKind::Preload,
        // Only when used: clang warns about an unused static inline function.
        records_double: values.iter().any(|v| v.kind == ValueKind::Double),
        values: values.iter().map(value_c).collect(),
        value_count: values.len(),
    };
    render("interposer", &view)
}

/// The dispatcher's C: `key` are the recorded context values, in order.
pub(super) fn dispatcher(
    spec: &Spec,
    sig: &Signature,
    kind: InterposerKind,
    key: &[RecordedValue],
    dispatch: &super::dispatch::Dispatch,
) -> String {
    let callee = match kind {
        InterposerKind::Preload => "tdg_fn_".to_string(),
        InterposerKind::Wrap => format!("__real_{}", sig.sym),
    };
    let int64 = |v: i64| {
        // INT64_MIN has no literal of its own in C.
        if v == i64::MIN {
            "INT64_MIN".to_string()
        } else {
            format!("INT64_C({v})")
        }
    };
    let mut routes: Vec<RouteView> = dispatch
        .routes
        .iter()
        .map(|r| RouteView {
            key: if key.is_empty() {
                "0".to_string()
            } else {
                key.iter()
                    .map(|v| int64(r.values[&v.param]))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            variant: r.variant as i64,
            label: in_comment(&r.label),
        })
        .collect();
    if routes.is_empty() {
        // C has no empty initialiser list: a route no key reaches.
        routes.push(RouteView {
            key: vec!["INT64_MIN"; key.len().max(1)].join(", "),
            variant: -1,
            label: "no context was tuned: every call runs the original".into(),
        });
    }
    let view = DispatcherView {
        routine: routine_view(spec, sig, callee, String::new(), false),
        preload: kind == InterposerKind::Preload,
        records_double: key.iter().any(|v| v.kind == ValueKind::Double),
        values: if key.is_empty() {
            vec!["0".to_string()]
        } else {
            key.iter().map(value_c).collect()
        },
        key_names: if key.is_empty() {
            "nothing (the routine records no value: every call is one context)".to_string()
        } else {
            key.iter()
                .map(|v| v.param.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        },
        key_len: key.len().max(1),
        variants: dispatch
            .variants
            .iter()
            .map(|v| VariantView {
                symbol: &v.symbol,
                label: in_comment(&v.label),
            })
            .collect(),
        routes,
    };
    render("dispatcher", &view)
}

#[derive(Serialize)]
struct OriginalView<'a> {
    #[serde(flatten)]
    routine: RoutineView<'a>,
    /// A C string literal's contents.
    library: String,
    exit_unresolved: i32,
}

/// The forwarder to the original definition in `library`.
pub(super) fn original(spec: &Spec, sig: &Signature, library: &str) -> String {
    let view = OriginalView {
        routine: routine_view(spec, sig, String::new(), String::new(), false),
        library: library
            .chars()
            .flat_map(|c| match c {
                '"' | '\\' => vec!['\\', c],
                c => vec![c],
            })
            .collect(),
        exit_unresolved: crate::runtime::exit_unresolved(),
    };
    render("original", &view)
}

/// The region shim's C (outputs declared before each call).
pub(super) fn region_shim(spec: &Spec, sig: &Signature) -> Result<String, InterposeError> {
    let site = &spec.routine.name.name;
    let outputs = outputs(spec, sig)?;
    let return_value = outputs.iter().any(|o| o.return_value);
    let mut kept = spec.routine.ret.clone();
    kept.is_const &= kept.is_pointer();
    let view = RegionShimView {
        routine: routine_view(spec, sig, "tdg_fn_".into(), String::new(), false),
        site,
        return_value,
        kept_ret: c_type(&kept),
        uses_count_op: outputs.iter().any(|o| o.count.contains("tdg_count_op_")),
        declares_outputs: outputs.iter().any(|o| !o.return_value),
        outputs,
    };
    Ok(render("region_shim", &view))
}

fn outputs(spec: &Spec, sig: &Signature) -> Result<Vec<OutputView>, InterposeError> {
    let routine = &spec.routine.name.name;
    let mut views = Vec::new();
    for (index, out) in spec.returns.iter().enumerate() {
        if out.path.is_empty() && out.name == *routine && !sig.is_void {
            views.push(OutputView {
                return_value: true,
                ..Default::default()
            });
            continue;
        }
        let fail = |reason: String| InterposeError::OutputCount {
            routine: routine.clone(),
            output: out.text(),
            reason,
        };
        // What is declared: `count` elements at `data`, each `sizeof ELEM`.
        let (data, elem, count) = if out.path.is_empty() {
            let p = spec
                .param(&out.name)
                .filter(|p| p.ty.pointers == 1)
                .ok_or_else(|| fail("is not a pointer parameter".into()))?;
            let count = spec
                .output_count(out)
                .ok_or_else(|| fail("has no count and no Vector or Matrix allocation".into()))?;
            // `void *` data has no element type: its count is in bytes.
            let elem = (p.ty.base != BaseType::Void).then(|| format!("*{}", out.name));
            (out.name.clone(), elem, Some(count))
        } else {
            // With a count the member points to (or is an array of) the
            // elements; without, the member itself is the one element.
            let member = out.text();
            match &out.count {
                Some(c) => (member.clone(), Some(format!("*{member}")), Some(c.clone())),
                None => (format!("&{member}"), Some(member), None),
            }
        };
        let count_c = match &count {
            Some(c) => count_in_c(spec, c).map_err(fail)?,
            None => "1LL".to_string(),
        };
        views.push(OutputView {
            return_value: false,
            marker: item_marker(index, out),
            non_null: dereferenced_by(out, count.as_ref())
                .iter()
                .map(|g| format!("{g} != NULL"))
                .collect::<Vec<_>>()
                .join(" && "),
            count: count_c,
            data,
            size_kind: match elem {
                Some(e) => format!("sizeof {e}, TDG_OUTPUT_KIND({e})"),
                None => "1, TDG_OUTPUT_BYTES".to_string(),
            },
        });
    }
    Ok(views)
}

/// `count`, an output's element count in the spec, as C computing it from
/// the call's arguments through `tdg_count_op_` (checked arithmetic); the
/// error says why it cannot be computed there.
fn count_in_c(spec: &Spec, count: &Expr) -> Result<String, String> {
    let deref = if spec.lang == Lang::Fortran { "*" } else { "" };
    Ok(match count {
        Expr::Int(i, _) => format!("{i}LL"),
        Expr::Name(id) => match spec.param(&id.name) {
            Some(p) if !p.ty.is_pointer() && p.ty.base.is_integral() => {
                format!("(long long)({deref}{})", id.name)
            }
            _ => {
                return Err(format!(
                    "has a count that uses `{}`, not an integer parameter",
                    id.name
                ))
            }
        },
        Expr::Unary {
            op: UnaryOp::Neg,
            operand,
            ..
        } => format!(
            "tdg_count_op_('-', 0LL, {}, &tdg_bad_)",
            count_in_c(spec, operand)?
        ),
        Expr::Binary { op, lhs, rhs, .. } => format!(
            "tdg_count_op_('{}', {}, {}, &tdg_bad_)",
            op.symbol(),
            count_in_c(spec, lhs)?,
            count_in_c(spec, rhs)?
        ),
        // `| 0LL` makes the compiler refuse a member that is not an integer
        // (a cast alone would convert a pointer or a double silently).
        Expr::Member { root, path, .. } => {
            format!("(long long)({} | 0LL)", member_path_text(&root.name, path))
        }
        _ => {
            return Err(
                "has a count that is not an integer expression of the call's arguments".into(),
            )
        }
    })
}

/// The pointers a member path dereferences, in order: for `s->cfg.p->n`,
/// `s` and `s->cfg.p`. Each must be non-NULL before the path is read.
fn dereferenced(root: &str, path: &[MemberStep]) -> Vec<String> {
    (0..path.len())
        .filter(|&i| path[i].arrow)
        .map(|i| member_path_text(root, &path[..i]))
        .collect()
}

/// Everything `out` dereferences (its path and its count's member paths),
/// each once, in order.
fn dereferenced_by(out: &Output, count: Option<&Expr>) -> Vec<String> {
    let mut all = dereferenced(&out.name, &out.path);
    if let Some(count) = count {
        count.walk(&mut |e| {
            if let Expr::Member { root, path, .. } = e {
                all.extend(dereferenced(&root.name, path));
            }
        });
    }
    let mut seen = std::collections::BTreeSet::new();
    all.retain(|g| seen.insert(g.clone()));
    all
}

/// The comment that opens an output's statements in the shim: what the
/// compiler says about the lines after it is about that `returns` item.
pub(super) fn item_marker(index: usize, out: &Output) -> String {
    let count = out
        .count
        .as_ref()
        .map(|c| format!("[{}]", spec_lang::format::expr(c)))
        .unwrap_or_default();
    format!("/* returns item {}: {}{count} */", index + 1, out.text())
}
