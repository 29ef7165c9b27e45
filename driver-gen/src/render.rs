//! Driver model -> C files: the handlebars templates in `templates/` rendered
//! for the spec, and the plain-C runtime (`tdg_runtime.{c,h}`) copied as it
//! is. All are embedded at build time; a directory given at run time
//! overrides any of them, so drivers can be reshaped without rebuilding tdg.

use handlebars::{handlebars_helper, Handlebars};
use std::path::{Path, PathBuf};

use crate::cexpr::{self, CExprError, ExprEnv};
use crate::model::{
    CacheState, CallArg, CallPlan, CheckedExpr, DriverModel, ElemKind, Eviction, FillValue,
    FlopPlan, OperandModel, OverflowGuard, Reference, RoutineModel, ScalarKind, ScalarModel,
    Storage, VerifyPlan,
};
use serde::Serialize;
use spec_lang::ast::Selection;
use spec_lang::vocabulary::Keyword;

/// What the templates read, and the only thing serialised for them: the
/// model's plain data, with its enums spelled (keyword and C constant) and
/// the booleans `{{#if}}` needs. The model holds the decisions (typed);
/// this view only lays them out.
#[derive(Serialize)]
struct DriverView<'a> {
    routine: RoutineView<'a>,
    includes: &'a [String],
    macros: Vec<MacroView<'a>>,
    scalars: Vec<ScalarView<'a>>,
    operands: Vec<OperandView<'a>>,
    flush: FlushView<'a>,
    timing: TimingView,
    /// Where the driver's option defaults read the budget.
    sampling: SamplingView,
    guard: &'a OverflowGuard,
    verify: &'a Option<VerifyPlan>,
    flop: Option<FlopView<'a>>,
    calls: CallText,
    per_call_scalars: bool,
    json_version: u32,
}

/// The routine as the driver declares it: the implementation's prototype
/// and the reference verification compares against.
#[derive(Serialize)]
struct RoutineView<'a> {
    name: &'a str,
    symbol: &'a str,
    prototype: String,
    reference: Option<String>,
}

impl<'a> RoutineView<'a> {
    fn of(r: &'a RoutineModel) -> Self {
        RoutineView {
            name: &r.name,
            symbol: &r.symbol,
            prototype: format!("{};", signature(r, &r.symbol, ParamTypes::Abi)),
            reference: r
                .reference
                .as_ref()
                .map(|reference| reference_c(r, reference)),
        }
    }
}

/// Which of a parameter's types a signature declares.
#[derive(Clone, Copy)]
enum ParamTypes {
    /// As the implementation receives it (Fortran: scalars by reference).
    Abi,
    /// As the spec declares it, for the spec's body.
    Spec,
}

/// `RET callee(T1 a, T2 b)`, or `RET callee(void)` without parameters.
fn signature(r: &RoutineModel, callee: &str, types: ParamTypes) -> String {
    let params: Vec<String> = r
        .params
        .iter()
        .map(|p| {
            let t = match types {
                ParamTypes::Abi => &p.abi_type,
                ParamTypes::Spec => &p.spec_type,
            };
            format!("{} {}", t.text(), p.name)
        })
        .collect();
    let list = if params.is_empty() {
        "void".to_string()
    } else {
        params.join(", ")
    };
    format!("{} {callee}({list})", r.ret.text())
}

/// The reference's C: the declaration of another implementation's
/// definition, or `static RET tdg_reference(PARAMS) { body }`.
fn reference_c(r: &RoutineModel, reference: &Reference) -> String {
    match reference {
        Reference::External => format!(
            "/* The reference: the definition of {} in the --reference file, compiled\n * as tdg_reference so it links beside the implementation. */\n{};",
            r.symbol,
            signature(r, "tdg_reference", ParamTypes::Abi)
        ),
        Reference::Body { text } => {
            // The spec's body need not use every parameter; keep -Wextra quiet.
            let unused: String = r
                .params
                .iter()
                .map(|p| format!("    (void){};\n", p.name))
                .collect();
            format!(
                "static {}\n{{\n{unused}{text}}}",
                signature(r, "tdg_reference", ParamTypes::Spec)
            )
        }
    }
}

/// A C file implementing the routine with the spec's own body, so a spec
/// with a body can be timed without `--impl` (the reference generator's
/// specs carry their implementation this way). `None` without a body.
/// The body keeps the spec's parameter types; a Fortran symbol receives
/// its scalars by reference and passes them on by value.
pub fn body_as_implementation(spec: &spec_lang::Spec) -> Option<String> {
    let routine = RoutineModel::with_body_reference(spec);
    let reference = reference_c(&routine, routine.reference.as_ref()?);
    let args: Vec<String> = routine
        .params
        .iter()
        .map(|p| {
            // Received by reference where the ABI's type is not the spec's.
            let by_ref = p.abi_type != p.spec_type;
            format!("{}{}", if by_ref { "*" } else { "" }, p.name)
        })
        .collect();
    let call = format!("tdg_reference({})", args.join(", "));
    let call = if routine.returns_value {
        format!("return {call};")
    } else {
        format!("{call};")
    };
    let includes: String = spec
        .includes
        .iter()
        .map(|i| format!("{}\n", i.text))
        .collect();
    let definition = signature(&routine, &routine.symbol, ParamTypes::Abi);
    Some(format!(
        "/* {name}: the body of its spec, timed as the implementation (tdg run without --impl). */\n\
         {includes}#include <complex.h>\n#include <math.h>\n#include <stdbool.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <string.h>\n\n\
         {definition};\n\n{reference}\n\n{definition}\n{{\n    {call}\n}}\n",
        name = routine.name,
    ))
}

/// The C statements (one call each) of the timed loop, the dummy call and
/// the two verification calls.
#[derive(Serialize)]
struct CallText {
    timed: String,
    dummy: String,
    verify_impl: String,
    verify_ref: String,
}

impl CallText {
    fn of(plan: &CallPlan) -> Self {
        // `op(name)` spells how an operand's pointer is reached and `scal`
        // how a scalar is in each context.
        let make = |callee: &str, scal: &str, op: &dyn Fn(&str) -> String, by_ref: bool| {
            let args: Vec<String> = plan
                .args
                .iter()
                .map(|a| match a {
                    CallArg::Operand { name, param_type } => {
                        format!("({}){}", param_type.text(), op(name))
                    }
                    CallArg::Scalar { name } if by_ref => format!("&{scal}{name}"),
                    CallArg::Scalar { name } => format!("{scal}{name}"),
                })
                .collect();
            sink_call(
                &format!("{callee}({})", args.join(", ")),
                plan.returns.as_ref(),
            )
        };
        CallText {
            timed: make(
                &plan.symbol,
                "tdg_S.",
                &|n| format!("tdg_users_{n}[tdg_set]"),
                plan.scalars_by_ref,
            ),
            dummy: make(
                &plan.symbol,
                "tdg_D->",
                &|n| format!("tdg_users_{n}[0]"),
                plan.scalars_by_ref,
            ),
            verify_impl: make(
                &plan.symbol,
                "tdg_V->",
                &|n| format!("tdg_vimp_{n}.user"),
                plan.scalars_by_ref,
            ),
            verify_ref: make(
                "tdg_reference",
                "tdg_V->",
                &|n| format!("tdg_vref_{n}.user"),
                plan.reference_scalars_by_ref,
            ),
        }
    }
}

/// Folds a call's return value into `tdg_ret_acc` so the call cannot be
/// dropped or hoisted as a pure function (the paper's `dot += alpha*...`).
fn sink_call(call: &str, returns: Option<&spec_lang::ast::CType>) -> String {
    let Some(ret) = returns else {
        return format!("{call};");
    };
    let ty = ret.text();
    match crate::model::elem_kind(ret) {
        ElemKind::Real | ElemKind::Integer => format!("tdg_ret_acc += (double)({call});"),
        ElemKind::Complex => {
            format!("{{ {ty} tdg_z = {call}; tdg_ret_acc += creal(tdg_z) + cimag(tdg_z); }}")
        }
        ElemKind::Pointer => format!("tdg_ret_acc += (double)(size_t)({call});"),
        _ => format!(
            "{{ {ty} tdg_r = {call}; tdg_ret_acc += (double)((const unsigned char *)&tdg_r)[0]; }}"
        ),
    }
}

/// The flop formula as the templates read it.
#[derive(Serialize)]
struct FlopView<'a> {
    text: &'a str,
    /// Every leaf cast to double: 2*M*N*K must not overflow an int.
    c_expr: String,
}

impl<'a> FlopView<'a> {
    fn of(f: &'a FlopPlan, env: &ExprEnv) -> Result<Self, CExprError> {
        Ok(FlopView {
            text: &f.text,
            c_expr: cexpr::to_c(&f.expr.expr, env, f.expr.style, true)?,
        })
    }
}

/// A size macro as the templates read it.
#[derive(Serialize)]
struct MacroView<'a> {
    name: &'a str,
    /// `TDG_MACRO_<name>`, what the driver's code uses.
    c_name: String,
    default_c: String,
}

/// A scalar as the templates read it.
#[derive(Serialize)]
struct ScalarView<'a> {
    name: &'a str,
    /// Type of the struct field holding it.
    c_type: String,
    /// Its value before the first call ("" for RANDOM, drawn per call).
    init_c: String,
    kind: ScalarKindView,
    integral: bool,
    text: &'a str,
    implicit_reason: Option<&'static str>,
    is_range: bool,
    is_random: bool,
}

/// How a scalar changes per call, its expressions in C.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ScalarKindView {
    Fixed,
    Range { incr_c: String },
    Random { lo_c: String, hi_c: String },
}

impl ScalarKindView {
    pub(crate) fn of(s: &ScalarModel, env: &ExprEnv) -> Result<Self, CExprError> {
        Ok(match &s.kind {
            ScalarKind::Fixed => ScalarKindView::Fixed,
            ScalarKind::Range { incr } => ScalarKindView::Range {
                incr_c: expr_c(incr, env)?,
            },
            ScalarKind::Random {
                bounds: Some((lo, hi)),
            } => ScalarKindView::Random {
                lo_c: expr_c(lo, env)?,
                hi_c: expr_c(hi, env)?,
            },
            // The driver's range for a RANDOM without bounds: small
            // non-negative integers, or mixed-sign reals.
            ScalarKind::Random { bounds: None } => {
                let (lo, hi) = if s.integral {
                    ("0", "100")
                } else {
                    ("-0.5", "0.5")
                };
                ScalarKindView::Random {
                    lo_c: lo.to_string(),
                    hi_c: hi.to_string(),
                }
            }
        })
    }
}

impl<'a> ScalarView<'a> {
    fn of(s: &'a ScalarModel, env: &ExprEnv) -> Result<Self, CExprError> {
        Ok(ScalarView {
            name: &s.name,
            c_type: s.field_type.text(),
            init_c: match &s.init {
                Some(e) => expr_c(e, env)?,
                None => String::new(),
            },
            kind: ScalarKindView::of(s, env)?,
            integral: s.integral,
            text: &s.text,
            implicit_reason: s.implicit_reason,
            is_range: matches!(s.kind, ScalarKind::Range { .. }),
            is_random: matches!(s.kind, ScalarKind::Random { .. }),
        })
    }
}

/// An operand as the templates read it: the model's fields, its fill's
/// value spelled in C, and the booleans `{{#if}}` needs.
#[derive(Serialize)]
struct OperandView<'a> {
    name: &'a str,
    param_c_type: String,
    elem_c_type: String,
    elem_kind: ElemKind,
    storage: Storage,
    /// Number of blocks (rows for Array2D, else 1) and elements per block,
    /// as `size_t` expressions of the scalars `S`.
    rows_c: String,
    cols_c: String,
    /// File-scope element count for static storage ("" otherwise).
    static_count_c: String,
    /// The dimensions as the spec writes them, for comments.
    dims_text: Vec<String>,
    align: u64,
    misalign: u64,
    fill: FillView<'a>,
    cache: CacheState,
    is_output: bool,
    seed: u64,
    warm: bool,
    flushed: bool,
    is_static: bool,
    row_pointers: bool,
}

/// How an operand is filled, as the templates read it.
#[derive(Serialize)]
struct FillView<'a> {
    kind: &'static str,
    /// C expression for element `k`, converted to the element type; empty
    /// when the fill sets no element by value.
    value_c: String,
    /// The file's path as a C string literal.
    file: Option<String>,
    text: &'a str,
}

/// A model expression in C, its names spelled as the model chose.
pub(crate) fn expr_c(e: &CheckedExpr, env: &ExprEnv) -> Result<String, CExprError> {
    cexpr::to_c(&e.expr, env, e.style, false)
}

/// `(size_t)d0 * (size_t)d1 ...`: an element count in C.
fn count_c(dims: &[CheckedExpr], env: &ExprEnv) -> Result<String, CExprError> {
    Ok(dims
        .iter()
        .map(|d| expr_c(d, env).map(|c| format!("(size_t){c}")))
        .collect::<Result<Vec<_>, _>>()?
        .join(" * "))
}

/// The C expression for one element of a fill, of type `elem_c`.
fn fill_value_c(value: &FillValue, elem_c: &str, env: &ExprEnv) -> Result<String, CExprError> {
    let c = |e: &CheckedExpr| expr_c(e, env);
    let real = |l: &str, h: &str| format!("tdg_rand_real((double)({l}), (double)({h}))");
    let v = match value {
        FillValue::RandomReal => "tdg_urand()".to_string(),
        FillValue::RandomComplex => "tdg_urand() + tdg_urand() * I".to_string(),
        FillValue::RandomInteger { lo, hi } => format!("tdg_rand_int({lo}, {hi})"),
        FillValue::Uniform { over, lo, hi } => {
            let (l, h) = (c(lo)?, c(hi)?);
            match over {
                ElemKind::Integer => {
                    format!("tdg_rand_int((long long)({l}), (long long)({h}))")
                }
                ElemKind::Complex => format!("{} + {} * I", real(&l, &h), real(&l, &h)),
                _ => real(&l, &h),
            }
        }
        FillValue::Constant { value } => c(value)?,
        FillValue::Index => "k".to_string(),
    };
    Ok(format!("({elem_c})({v})"))
}

impl<'a> OperandView<'a> {
    fn of(o: &'a OperandModel, env: &ExprEnv) -> Result<Self, CExprError> {
        let elem_c_type = o.elem_type.text();
        let (rows_c, cols_c) = match o.storage {
            Storage::RowPointers => (count_c(&o.dims[..1], env)?, count_c(&o.dims[1..], env)?),
            _ => ("(size_t)1".to_string(), count_c(&o.dims, env)?),
        };
        Ok(OperandView {
            name: &o.name,
            param_c_type: o.param_type.text(),
            elem_kind: o.elem_kind,
            storage: o.storage,
            rows_c,
            cols_c,
            static_count_c: count_c(&o.static_dims, env)?,
            dims_text: o.dims.iter().map(|d| cexpr::describe(&d.expr)).collect(),
            align: o.align,
            misalign: o.misalign,
            fill: FillView {
                kind: o.fill.kind,
                value_c: match &o.fill.value {
                    Some(v) => fill_value_c(v, &elem_c_type, env)?,
                    None => String::new(),
                },
                file: o.fill.file.as_deref().map(cexpr::c_string_literal),
                text: &o.fill.text,
            },
            cache: o.cache,
            is_output: o.is_output,
            seed: o.seed,
            warm: o.cache == CacheState::Warm,
            flushed: o.flushed(),
            is_static: o.storage == Storage::Static,
            row_pointers: o.storage == Storage::RowPointers,
            elem_c_type,
        })
    }
}

/// The flush plan's values as the templates read them.
#[derive(Serialize)]
struct FlushView<'a> {
    method: &'static str,
    method_c: &'static str,
    kib: u64,
    all_cpus: bool,
    to_memory: bool,
    eviction: &'a Option<Eviction>,
    any_operand_flushed: bool,
}

/// The timing plan's values as the templates read them.
#[derive(Serialize)]
struct TimingView {
    method: &'static str,
    method_c: &'static str,
    samples: u32,
    samples_exact: bool,
    selection: &'static str,
    selection_median: bool,
    min_interval_ns: u64,
    min_interval_is_machine_default: bool,
    /// "0,1": the `--pin` list as the driver parses it ("" unpinned).
    pin_cpus_text: String,
    threads: u32,
    first_touch_threads: bool,
    code_offset: u32,
}

/// The sampling budget's values as the templates read them.
#[derive(Serialize)]
struct SamplingView {
    min_time_ms: u64,
    max_time_ms: u64,
    stable_pct: f64,
}

impl<'a> DriverView<'a> {
    fn of(m: &'a DriverModel) -> Result<Self, CExprError> {
        let t = &m.timing;
        let env = m.names.env();
        Ok(DriverView {
            routine: RoutineView::of(&m.routine),
            includes: &m.includes,
            macros: m
                .macros
                .iter()
                .map(|d| {
                    Ok(MacroView {
                        name: &d.name,
                        c_name: cexpr::macro_c_name(&d.name),
                        default_c: expr_c(&d.default, &env)?,
                    })
                })
                .collect::<Result<_, CExprError>>()?,
            scalars: m
                .scalars
                .iter()
                .map(|s| ScalarView::of(s, &env))
                .collect::<Result<_, _>>()?,
            operands: m
                .operands
                .iter()
                .map(|o| OperandView::of(o, &env))
                .collect::<Result<_, _>>()?,
            flush: FlushView {
                method: m.flush.method.value.spelling(),
                method_c: m.flush.method.value.c_name(),
                kib: m.flush.kib.value,
                all_cpus: m.flush.all_cpus.value,
                to_memory: m.flush.to_memory,
                eviction: &m.flush.eviction,
                any_operand_flushed: m.flush.any_operand_flushed,
            },
            timing: TimingView {
                method: t.method.value.spelling(),
                method_c: t.method.value.c_name(),
                samples: t.samples.value,
                samples_exact: t.samples_exact,
                selection: t.selection.value.spelling(),
                selection_median: t.selection.value == Selection::Median,
                min_interval_ns: t.min_interval_ns.value,
                min_interval_is_machine_default: t.min_interval_is_machine_default(),
                pin_cpus_text: t
                    .pin_cpus
                    .value
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
                threads: t.threads.value,
                first_touch_threads: t.first_touch_threads.value,
                code_offset: t.code_offset.value,
            },
            sampling: SamplingView {
                min_time_ms: t.sampling.min_time_ms.value,
                max_time_ms: t.sampling.max_time_ms.value,
                stable_pct: t.sampling.stable_pct.value,
            },
            guard: &m.guard,
            verify: &m.verify,
            flop: match &m.flop {
                Some(f) => Some(FlopView::of(f, &env)?),
                None => None,
            },
            calls: CallText::of(&m.calls),
            per_call_scalars: m.per_call_scalars,
            json_version: m.json_version,
        })
    }
}

/// One file of a generated driver.
struct DriverFile {
    /// Its name in `templates/` (and in a `--templates` directory).
    source: &'static str,
    /// Its name in the driver's directory.
    output: &'static str,
    /// The text built into tdg.
    embedded: &'static str,
    /// Rendered through handlebars; the runtime is plain C, copied as it is.
    templated: bool,
}

impl DriverFile {
    /// A handlebars template, written out as `output`.
    const fn template(source: &'static str, output: &'static str, embedded: &'static str) -> Self {
        DriverFile {
            source,
            output,
            embedded,
            templated: true,
        }
    }

    /// Plain C, copied under its own name.
    const fn copied(name: &'static str, embedded: &'static str) -> Self {
        DriverFile {
            source: name,
            output: name,
            embedded,
            templated: false,
        }
    }
}

const DRIVER_FILES: &[DriverFile] = &[
    DriverFile::template(
        "driver.c.hbs",
        "driver.c",
        include_str!("../../templates/driver.c.hbs"),
    ),
    DriverFile::copied(
        "tdg_runtime.h",
        include_str!("../../templates/tdg_runtime.h"),
    ),
    DriverFile::copied("tdg_timing.h", c_timing::HEADER),
    DriverFile::copied(
        "tdg_runtime.c",
        include_str!("../../templates/tdg_runtime.c"),
    ),
    DriverFile::copied(
        "tdg_code_place.S",
        include_str!("../../templates/tdg_code_place.S"),
    ),
    DriverFile::template(
        "Makefile.hbs",
        "Makefile",
        include_str!("../../templates/Makefile.hbs"),
    ),
];

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("cannot read template {path}: {source}; check --templates (it must hold {names})")]
    ReadTemplate {
        path: PathBuf,
        names: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is no longer read: the runtime is plain C now; rename it to {plain} (drop any template syntax) or delete it")]
    RuntimeTemplate { path: PathBuf, plain: &'static str },
    #[error("template {name} does not parse: {message}")]
    Parse { name: String, message: String },
    /// The model holds an expression the C translator refuses: the model
    /// accepted it under the same names, so this is a bug in tdg.
    #[error("the driver model holds an expression with no C spelling ({0}); please report it")]
    Expr(#[from] CExprError),
    #[error("template {name} failed to render: {message}")]
    Render { name: String, message: String },
    /// Writing the driver's files (the message names the path: a
    /// directory tdg refuses to write into, or the failed call).
    #[error("{0}")]
    Write(std::io::Error),
}

/// What a generated driver's directory is to the guard: tdg writes its
/// files into one only when it made it (or found it empty), never over a
/// user's `Makefile`.
pub const DRIVER_DIR: fsguard::Purpose = fsguard::Purpose {
    what: "generated driver",
    option: "-o",
};

/// The rendered files of one driver.
#[derive(Debug, Clone)]
pub struct GeneratedDriver {
    /// (file name, contents): driver.c, tdg_runtime.h, tdg_timing.h,
    /// tdg_runtime.c, tdg_code_place.S, Makefile.
    pub files: Vec<(String, String)>,
}

impl GeneratedDriver {
    pub fn file(&self, name: &str) -> Option<&str> {
        self.files
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c.as_str())
    }

    pub fn write_to(&self, dir: &Path) -> Result<Vec<PathBuf>, RenderError> {
        fsguard::OwnedDir::open(dir, DRIVER_DIR).map_err(RenderError::Write)?;
        let mut out = Vec::new();
        for (name, text) in &self.files {
            let path = dir.join(name);
            fsguard::write_atomic(&path, text.as_bytes()).map_err(RenderError::Write)?;
            out.push(path);
        }
        Ok(out)
    }
}

handlebars_helper!(contains: |list: array, item: str| list.iter().any(|v| v.as_str() == Some(item)));

/// Renders every template for `model` and copies the plain-C runtime. With
/// `templates_dir`, a file present there replaces the embedded one of the
/// same name.
pub fn render(
    model: &DriverModel,
    templates_dir: Option<&Path>,
) -> Result<GeneratedDriver, RenderError> {
    if let Some(dir) = templates_dir.filter(|d| !d.is_dir()) {
        return Err(RenderError::ReadTemplate {
            path: dir.to_path_buf(),
            names: source_names(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory"),
        });
    }
    let mut hb = Handlebars::new();
    hb.register_escape_fn(handlebars::no_escape);
    hb.set_strict_mode(true);
    hb.register_helper("contains", Box::new(contains));
    let view = DriverView::of(model)?;
    let mut files = Vec::new();
    for file in DRIVER_FILES {
        let text = source_text(file, templates_dir)?;
        let text = if file.templated {
            hb.register_template_string(file.source, text)
                .map_err(|e| RenderError::Parse {
                    name: file.source.to_string(),
                    message: e.to_string(),
                })?;
            hb.render(file.source, &view)
                .map_err(|e| RenderError::Render {
                    name: file.source.to_string(),
                    message: e.to_string(),
                })?
        } else {
            text
        };
        files.push((file.output.to_string(), text));
    }
    Ok(GeneratedDriver { files })
}

fn source_names() -> String {
    DRIVER_FILES
        .iter()
        .map(|f| f.source)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The file's text: from `templates_dir` when it holds one of that name,
/// else the embedded one.
fn source_text(file: &DriverFile, templates_dir: Option<&Path>) -> Result<String, RenderError> {
    // A directory made for an older tdg, whose runtime was a template, must
    // not have its runtime silently replaced by the built-in one.
    if let Some(old) = templates_dir
        .filter(|_| !file.templated)
        .map(|dir| dir.join(format!("{}.hbs", file.source)))
        .filter(|old| old.exists())
    {
        return Err(RenderError::RuntimeTemplate {
            path: old,
            plain: file.source,
        });
    }
    match templates_dir.map(|dir| dir.join(file.source)) {
        Some(path) if path.exists() => {
            std::fs::read_to_string(&path).map_err(|source| RenderError::ReadTemplate {
                path,
                names: source_names(),
                source,
            })
        }
        _ => Ok(file.embedded.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DriverConfig, MachineDefaults};

    fn axpy() -> DriverModel {
        let spec = spec_lang::load(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/axpy.spec"),
            &[],
        )
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .unwrap_or_else(|d| panic!("{d}"));
        model_of(&spec)
    }

    /// The model holds the routine's parameters with both their types and
    /// what the reference is; the view declares the implementation with
    /// the types it receives (Fortran: scalars by reference) and the
    /// spec's body with the spec's own, or declares another
    /// implementation's definition (`--reference`) as the implementation.
    #[test]
    fn the_view_declares_the_routine_and_its_reference_from_the_model() {
        let src = r#"
lang=fortran;
routine=double FDOT(const int n, const double *x, const double *y) {
  double s = 0; for (int i = 0; i < n; i++) s += x[i] * y[i]; return s;
};
init={ n=Macro(N, 100); x=Vector(double, RANDOM, flush, n); y=Vector(double, RANDOM, flush, n); };
"#;
        let spec = spec_lang::check_source(src, "f.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Driver))
            .unwrap_or_else(|d| panic!("{d}"));
        let m = model_of(&spec);
        let n = &m.routine.params[0];
        assert_eq!(
            (n.abi_type.text(), n.spec_type.text()),
            ("const int*".to_string(), "const int".to_string())
        );
        assert!(matches!(m.routine.reference, Some(Reference::Body { .. })));
        let view = RoutineView::of(&m.routine);
        assert_eq!(
            view.prototype,
            "double fdot_(const int* n, const double* x, const double* y);"
        );
        let body = view.reference.unwrap();
        assert!(
            body.starts_with(
                "static double tdg_reference(const int n, const double* x, const double* y)\n{\n    (void)n;\n    (void)x;\n    (void)y;\n"
            ),
            "{body}"
        );

        let mut cfg = DriverConfig::new(MachineDefaults::fixed_for_tests());
        cfg.external_reference = true;
        let m = DriverModel::from_checked(&spec, &cfg).unwrap();
        assert!(matches!(m.routine.reference, Some(Reference::External)));
        let external = RoutineView::of(&m.routine).reference.unwrap();
        assert!(
            external.ends_with(
                "\ndouble tdg_reference(const int* n, const double* x, const double* y);"
            ),
            "{external}"
        );

        let implementation = body_as_implementation(&spec.spec).unwrap();
        assert!(
            implementation.contains(
                "double fdot_(const int* n, const double* x, const double* y)\n{\n    return tdg_reference(*n, x, y);\n}"
            ),
            "{implementation}"
        );
    }

    fn model_of(spec: &spec_lang::checked::CheckedSpec) -> DriverModel {
        DriverModel::from_checked(spec, &DriverConfig::new(MachineDefaults::fixed_for_tests()))
            .unwrap()
    }

    /// The model says what each element is (a choice and the spec's
    /// expressions); only the view writes it as C, once per fill kind.
    #[test]
    fn the_view_spells_each_fill_value_the_model_chose() {
        let src = r#"
routine=void f(const int n, unsigned* u, _Bool* b, long* l, float _Complex* z, int* q, double* c);
init={
  n=Macro(NN, 8);
  u=Vector(unsigned, RANDOM, _, n);
  b=Vector(_Bool, RANDOM, _, n);
  l=Vector(long, RANDOM(-n, n*3), _, n);
  z=Vector(float _Complex, RANDOM(-1.5, n), _, n);
  q=Vector(int, SEQ, _, n);
  c=Vector(double, CONST(2.5*n), _, n);
};
"#;
        let spec = spec_lang::check_source(src, "f.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Driver))
            .unwrap_or_else(|d| panic!("{d}"));
        let m = model_of(&spec);
        let value = |name: &str| m.operand(name).unwrap().fill.value.clone().unwrap();
        assert!(matches!(
            value("u"),
            FillValue::RandomInteger { lo: 0, hi: 100 }
        ));
        assert!(matches!(
            value("b"),
            FillValue::RandomInteger { lo: 0, hi: 1 }
        ));
        assert!(matches!(
            value("z"),
            FillValue::Uniform {
                over: ElemKind::Complex,
                ..
            }
        ));
        let view = DriverView::of(&m).unwrap();
        let spelled: Vec<(&str, &str)> = view
            .operands
            .iter()
            .map(|o| (o.name, o.fill.value_c.as_str()))
            .collect();
        assert_eq!(
            spelled,
            vec![
                ("u", "(unsigned int)(tdg_rand_int(0, 100))"),
                ("b", "(_Bool)(tdg_rand_int(0, 1))"),
                ("l", "(long)(tdg_rand_int((long long)((-S->n)), (long long)((S->n * 3))))"),
                ("z", "(float _Complex)(tdg_rand_real((double)((-1.5)), (double)(S->n)) + tdg_rand_real((double)((-1.5)), (double)(S->n)) * I)"),
                ("q", "(int)(k)"),
                ("c", "(double)((2.5 * S->n))"),
            ]
        );
    }

    /// Sizes, types and per-call changes are the spec's expressions and
    /// types in the model; the view writes the C that evaluates them.
    #[test]
    fn the_view_spells_sizes_types_and_scalar_changes_the_model_holds() {
        let src = r#"
routine=void f(const int n, const int r, const long b, const float c, double *x, double **y);
init={
  n=Macro(NN, 16);
  r=Range(2, n/4);
  b=RANDOM;
  c=RANDOM(-n, 2.5);
  x=SVector(double, ZERO, _, n*2);
  y=Array2D(double, n, n+1, RANDOM, flush);
};
flop="2*n*r";
"#;
        let spec = spec_lang::check_source(src, "f.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Driver))
            .unwrap_or_else(|d| panic!("{d}"));
        let m = model_of(&spec);
        let x = m.operand("x").unwrap();
        assert_eq!(
            (x.elem_type.text(), x.param_type.text(), x.dims.len()),
            ("double".to_string(), "double*".to_string(), 1)
        );
        let view = DriverView::of(&m).unwrap();
        let ops: Vec<(&str, &str, &str, &str)> = view
            .operands
            .iter()
            .map(|o| {
                (
                    o.rows_c.as_str(),
                    o.cols_c.as_str(),
                    o.static_count_c.as_str(),
                    o.param_c_type.as_str(),
                )
            })
            .collect();
        assert_eq!(
            ops,
            vec![
                (
                    "(size_t)1",
                    "(size_t)(S->n * 2)",
                    "(size_t)((TDG_MACRO_NN) * 2)",
                    "double*"
                ),
                ("(size_t)S->n", "(size_t)(S->n + 1)", "", "double**"),
            ]
        );
        assert_eq!(
            (
                view.macros[0].c_name.as_str(),
                view.macros[0].default_c.as_str()
            ),
            ("TDG_MACRO_NN", "16")
        );
        let scalars: Vec<String> = view
            .scalars
            .iter()
            .map(|s| {
                let how = match &s.kind {
                    ScalarKindView::Fixed => String::new(),
                    ScalarKindView::Range { incr_c } => format!("+= {incr_c}"),
                    ScalarKindView::Random { lo_c, hi_c } => format!("[{lo_c}, {hi_c}]"),
                };
                format!("{} {} = {} {how}", s.c_type, s.name, s.init_c)
            })
            .collect();
        assert_eq!(
            scalars,
            vec![
                "int n = TDG_MACRO_NN ",
                "int r = 2 += (S->n / 4)",
                "long b =  [0, 100]",
                "float c =  [(-S->n), 2.5]",
            ]
        );
    }

    #[test]
    fn an_override_directory_replaces_the_runtime_as_plain_c() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("tdg_runtime.h"),
            "/* site runtime {{not a template}} */\n",
        )
        .unwrap();
        let driver = render(&axpy(), Some(dir.path())).unwrap();
        assert_eq!(
            driver.file("tdg_runtime.h"),
            Some("/* site runtime {{not a template}} */\n")
        );
        assert_eq!(
            driver.file("tdg_runtime.c"),
            Some(include_str!("../../templates/tdg_runtime.c"))
        );
    }

    #[test]
    fn a_runtime_template_from_an_older_tdg_is_an_error_naming_the_new_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tdg_runtime.c.hbs"), "/* old */\n").unwrap();
        let err = render(&axpy(), Some(dir.path())).unwrap_err().to_string();
        assert!(
            err.contains("tdg_runtime.c.hbs") && err.contains("rename it to tdg_runtime.c"),
            "{err}"
        );
    }
}
