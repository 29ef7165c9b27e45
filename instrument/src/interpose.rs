//! Interposers generated from a spec's routine signature: an `LD_PRELOAD`
//! shim (finds the real routine on its first call wherever it is loaded,
//! `tdg_resolve.h`) for routines in shared libraries, and a `-Wl,--wrap=NAME` object (`__wrap_NAME` calling
//! `__real_NAME`) for static links. Both profile every outermost call and
//! forward it unchanged.

use crate::format::ValueKind;
use crate::runtime;
use spec_lang::ast::{
    member_path_text, BaseType, CType, Expr, InitValue, Lang, MemberStep, Output, Param, Span,
    Spec, UnaryOp,
};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use toolchain::{CCompiler, CompileJob, ToolchainError};

#[derive(Debug, thiserror::Error)]
pub enum InterposeError {
    #[error("routine `{routine}`: parameter `{param}` has type `{ty}`, which an interposer cannot pass by value without its definition; add an `include=` clause that defines it")]
    OpaqueByValue {
        routine: String,
        param: String,
        ty: String,
    },
    #[error("routine `{routine}` returns `{ty}` by value, which an interposer cannot forward without its definition; add an `include=` clause that defines it")]
    OpaqueReturn { routine: String, ty: String },
    #[error("routine `{routine}`: output `{output}` {reason}; give its element count with it: `returns({output}[COUNT])`")]
    OutputCount {
        routine: String,
        output: String,
        reason: String,
    },
    /// The C compiler refused a spec item the shim is made of: what a
    /// `returns(...)` entry reads (no such member, a member that is not an
    /// integer in a count) or an `include=` (a header not found). `item`
    /// names it as the user wrote it, `span` locates it in the spec,
    /// `compiler` is the compiler's own error line.
    #[error("routine `{routine}`: {item}: {compiler}")]
    SpecItemDoesNotCompile {
        routine: String,
        item: String,
        span: Span,
        compiler: String,
        /// The way out, for the located report.
        hint: &'static str,
    },
    #[error(transparent)]
    Toolchain(#[from] ToolchainError),
    #[error("I/O error writing the interposer: {0}")]
    Io(#[from] std::io::Error),
}

/// Which of the routine's arguments are recorded, in record order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedValue {
    pub param: String,
    pub kind: ValueKind,
    /// The C expression that yields the value as `int64_t`.
    pub expr: String,
}

/// Symbol the application calls: C names as written, Fortran lower-case
/// with the trailing underscore gfortran appends.
pub fn symbol_name(spec: &Spec) -> String {
    spec.symbol()
}

fn c_type(ty: &CType) -> String {
    ty.text()
}

fn abi_type(spec: &Spec, p: &Param) -> String {
    spec.abi_type(p).text()
}

fn is_signed(base: &BaseType) -> bool {
    use BaseType::*;
    matches!(
        base,
        Char | SignedChar | Short | Int | Long | LongLong | PtrdiffT | Int8 | Int16 | Int32 | Int64
    )
}

/// Parameter names that size the spec's operands: named in the sizes of
/// its `Vector`/`Matrix` allocations or in the counts of its outputs.
fn sizing_names(spec: &Spec) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut add = |e: &Expr| {
        for id in e.names() {
            names.insert(id.name.clone());
        }
    };
    for init in &spec.init {
        if let InitValue::Array(a) = &init.value {
            a.dims.iter().for_each(&mut add);
        }
    }
    for out in &spec.returns {
        if let Some(count) = &out.count {
            add(count);
        }
    }
    names
}

/// How a parameter is recorded, or `None` for one a record cannot hold (a
/// struct passed by value).
fn recorded_value(spec: &Spec, p: &Param) -> Option<RecordedValue> {
    let name = p.name.name.clone();
    let deref = if spec.lang == Lang::Fortran { "*" } else { "" };
    if p.ty.pointers == 0 && p.ty.base.is_integral() {
        let kind = if is_signed(&p.ty.base) {
            ValueKind::Signed
        } else {
            ValueKind::Unsigned
        };
        let expr = if kind == ValueKind::Signed {
            format!("(int64_t)({deref}{name})")
        } else {
            format!("(int64_t)(uint64_t)({deref}{name})")
        };
        Some(RecordedValue {
            param: name,
            kind,
            expr,
        })
    } else if p.ty.pointers == 0 && matches!(p.ty.base, BaseType::Float | BaseType::Double) {
        Some(RecordedValue {
            expr: format!("tdg_double_bits_((double)({deref}{name}))"),
            param: name,
            kind: ValueKind::Double,
        })
    } else if p.ty.pointers > 0 {
        Some(RecordedValue {
            expr: format!("TDG_PTR({name})"),
            param: name,
            kind: ValueKind::Pointer,
        })
    } else {
        None
    }
}

/// The values each call's record holds, in record order: the spec's
/// `record=` list as written; else every number parameter and address, up
/// to [`crate::format::MAX_VALUES`]: the integers that size the spec's
/// operands first (they decide the work a call does, and the derived
/// spec's allocations), then the other integers, the floating-point
/// scalars, and the pointer addresses (which buffer, and how aligned).
pub fn recorded_values(spec: &Spec) -> Vec<RecordedValue> {
    if let Some(record) = &spec.record {
        return record
            .names
            .iter()
            .filter_map(|id| spec.param(&id.name))
            .filter_map(|p| recorded_value(spec, p))
            .take(crate::format::MAX_VALUES)
            .collect();
    }
    let sizing = sizing_names(spec);
    let all: Vec<RecordedValue> = spec
        .routine
        .params
        .iter()
        .filter_map(|p| recorded_value(spec, p))
        .collect();
    let rank = |v: &RecordedValue| match v.kind {
        ValueKind::Signed | ValueKind::Unsigned if sizing.contains(&v.param) => 0,
        ValueKind::Signed | ValueKind::Unsigned => 1,
        ValueKind::Double => 2,
        ValueKind::Pointer => 3,
    };
    let mut ordered = all;
    // Stable: declaration order within each group.
    ordered.sort_by_key(rank);
    ordered.truncate(crate::format::MAX_VALUES);
    ordered
}

fn check_forwardable(spec: &Spec) -> Result<(), InterposeError> {
    let opaque =
        |t: &CType| t.pointers == 0 && matches!(t.base, BaseType::Struct(_) | BaseType::Named(_));
    let r = &spec.routine;
    // With include= clauses the struct/typedef may well be defined there;
    // let the C compiler be the judge then.
    if !spec.includes.is_empty() || spec.lang == Lang::Fortran {
        return Ok(());
    }
    if opaque(&r.ret) {
        return Err(InterposeError::OpaqueReturn {
            routine: r.name.name.clone(),
            ty: c_type(&r.ret),
        });
    }
    for p in &r.params {
        if opaque(&p.ty) {
            return Err(InterposeError::OpaqueByValue {
                routine: r.name.name.clone(),
                param: p.name.name.clone(),
                ty: c_type(&p.ty),
            });
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterposerKind {
    /// `LD_PRELOAD` shared object.
    Preload,
    /// Object for `-Wl,--wrap=NAME`.
    Wrap,
}

/// The routine's C signature as an interposer declares and calls it.
struct Signature {
    /// The symbol interposed (Fortran: lower case with `_`).
    sym: String,
    ret: String,
    is_void: bool,
    /// `double* a, int n` (or `void`).
    param_list: String,
    /// `a, n`.
    args: String,
}

impl Signature {
    fn of(spec: &Spec) -> Signature {
        let params: Vec<String> = spec
            .routine
            .params
            .iter()
            .map(|p| format!("{} {}", abi_type(spec, p), p.name.name))
            .collect();
        let args: Vec<&str> = spec
            .routine
            .params
            .iter()
            .map(|p| p.name.name.as_str())
            .collect();
        Signature {
            sym: symbol_name(spec),
            ret: c_type(&spec.routine.ret),
            is_void: spec.routine.ret.base == BaseType::Void && spec.routine.ret.pointers == 0,
            param_list: if params.is_empty() {
                "void".to_string()
            } else {
                params.join(", ")
            },
            args: args.join(", "),
        }
    }
}

/// The part every `LD_PRELOAD` interposer shares: the pointer to the real
/// definition (the one seam through which another implementation could be
/// substituted), its resolution on the first call (`first_call_extra` runs
/// then, after resolution; `before_exit` is passed to `tdg_resolve`), and
/// the interposer's opening lines up to a valid `tdg_fn_`.
fn preload_head(c: &mut String, sig: &Signature, first_call_extra: &str, before_exit: &str) {
    let Signature {
        sym,
        ret,
        param_list,
        ..
    } = sig;
    let _ = writeln!(c, "typedef {ret} (*tdg_real_fn_)({param_list});");
    c.push_str(
        "/* The definition every call is forwarded to, found on the first call:\n \
         * the one place another implementation could be substituted. */\n\
         static tdg_real_fn_ tdg_real_;\n\n",
    );
    c.push_str(
        "/* First call: find the definition (tdg_resolve.h says where it looks). */\n\
         static __attribute__((noinline, cold)) tdg_real_fn_ tdg_first_call_(const void *caller) {\n    char defined_in[512];\n",
    );
    let _ = writeln!(
        c,
        "    tdg_real_fn_ fn = (tdg_real_fn_)tdg_resolve(\"{sym}\", (const void *)&tdg_real_, caller,\n                                                defined_in, sizeof defined_in, {before_exit});"
    );
    c.push_str(first_call_extra);
    c.push_str("    __atomic_store_n(&tdg_real_, fn, __ATOMIC_RELEASE);\n    return fn;\n}\n\n");
    let _ = writeln!(c, "{ret} {sym}({param_list}) {{");
    c.push_str("    tdg_real_fn_ tdg_fn_ = __atomic_load_n(&tdg_real_, __ATOMIC_ACQUIRE);\n");
    c.push_str(
        "    if (__builtin_expect(!tdg_fn_, 0))\n        tdg_fn_ = tdg_first_call_(__builtin_return_address(0));\n",
    );
}

/// `if (tdg_depth_) return <callee>(args);`: nested calls are forwarded
/// untouched (only the outermost call counts).
fn forward_nested(c: &mut String, sig: &Signature, callee: &str) {
    let args = &sig.args;
    if sig.is_void {
        let _ = writeln!(
            c,
            "    if (tdg_depth_) {{\n        {callee}({args});\n        return;\n    }}"
        );
    } else {
        let _ = writeln!(c, "    if (tdg_depth_)\n        return {callee}({args});");
    }
}

/// The C source of an interposer for `spec`'s routine.
pub fn generate(spec: &Spec, kind: InterposerKind) -> Result<String, InterposeError> {
    check_forwardable(spec)?;
    let sig = Signature::of(spec);
    let Signature {
        sym,
        ret,
        is_void,
        param_list,
        args,
    } = &sig;
    let is_void = *is_void;
    let values = recorded_values(spec);
    let descr = values
        .iter()
        .map(|v| format!("{}:{}", v.param, v.kind.code()))
        .collect::<Vec<_>>()
        .join(",");

    let mut c = String::new();
    let _ = writeln!(
        c,
        "/* Generated by `tdg instrument`: profiles every outermost call of {sym}\n \
         * and forwards it unchanged. Do not edit; regenerate from the spec. */"
    );
    c.push_str(
        "#include <stddef.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n",
    );
    c.push_str("#include \"tdg_instrument.h\"\n");
    if kind == InterposerKind::Preload {
        c.push_str("#include \"tdg_resolve.h\"\n");
    }
    for inc in &spec.includes {
        c.push_str(&inc.text);
        c.push('\n');
    }
    // Only when used: clang warns about an unused static inline function.
    if values.iter().any(|v| v.kind == ValueKind::Double) {
        c.push_str(
            "\nstatic inline int64_t tdg_double_bits_(double d) {\n    int64_t b;\n    memcpy(&b, &d, sizeof b);\n    return b;\n}\n",
        );
    }
    c.push_str("static int tdg_id_ = -2;\n");
    // Only the outermost call is recorded: a routine that calls itself (or
    // the runtime calling back into it) must not nest records.
    c.push_str("static __thread int tdg_depth_;\n");
    match kind {
        InterposerKind::Preload => {
            c.push_str("static void tdg_write_profile_(void) {\n    (void)tdg_flush();\n}\n\n");
            // Registered with the resolution, so the per-call path only
            // loads the id; the profile says which object defines it.
            let register = format!(
                "    int id = tdg_routine(\"{}\", \"{descr}\");\n    tdg_routine_defined_in(id, defined_in);\n    tdg_routine_address(id, (uint64_t)(uintptr_t)fn);\n    __atomic_store_n(&tdg_id_, id, __ATOMIC_RELAXED);\n",
                spec.routine.name.name
            );
            preload_head(&mut c, &sig, &register, "tdg_write_profile_");
        }
        InterposerKind::Wrap => {
            let _ = writeln!(c, "{ret} __real_{sym}({param_list});");
            let _ = writeln!(c, "{ret} __wrap_{sym}({param_list});\n");
            let _ = writeln!(c, "{ret} __wrap_{sym}({param_list}) {{");
        }
    }
    let callee = match kind {
        InterposerKind::Preload => "tdg_fn_".to_string(),
        InterposerKind::Wrap => format!("__real_{sym}"),
    };
    forward_nested(&mut c, &sig, &callee);
    c.push_str("    int tdg_idv_ = __atomic_load_n(&tdg_id_, __ATOMIC_RELAXED);\n");
    // The shim registered the routine in tdg_first_call_, before publishing
    // tdg_real_. Relaxed atomics: threads racing on the first call all
    // register the same name (tdg_routine is idempotent) and store the same id.
    if kind == InterposerKind::Wrap {
        let _ = writeln!(
            c,
            "    if (tdg_idv_ == -2) {{\n        tdg_idv_ = tdg_routine(\"{}\", \"{descr}\");\n        tdg_routine_address(tdg_idv_, (uint64_t)(uintptr_t)&__real_{sym});\n        __atomic_store_n(&tdg_id_, tdg_idv_, __ATOMIC_RELAXED);\n    }}",
            spec.routine.name.name
        );
    }
    if values.is_empty() {
        c.push_str("    const int64_t *tdg_v_ = NULL;\n");
    } else {
        let exprs: Vec<&str> = values.iter().map(|v| v.expr.as_str()).collect();
        let _ = writeln!(c, "    const int64_t tdg_v_[] = {{{}}};", exprs.join(", "));
    }
    c.push_str("    tdg_depth_++;\n    uint64_t tdg_t0_ = tdg_begin();\n");
    if is_void {
        let _ = writeln!(c, "    {callee}({args});");
    } else {
        let _ = writeln!(c, "    {ret} tdg_r_ = {callee}({args});");
    }
    let _ = writeln!(
        c,
        "    tdg_end(tdg_idv_, tdg_t0_, {}, tdg_v_);",
        values.len()
    );
    c.push_str("    tdg_depth_--;\n");
    if !is_void {
        c.push_str("    return tdg_r_;\n");
    }
    c.push_str("}\n");
    Ok(c)
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

/// The outputs `returns(...)` names, declared for region `site` before each
/// call (so a restored copy hands them to tdg, which compares original and
/// candidate): C definitions to put before the shim's function, and the
/// statements of its body. The return value, if named, is declared as a
/// per-thread copy the call's result is stored in (`tdg_ret_`).
struct OutputDecls {
    defs: String,
    body: String,
    return_value: bool,
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

/// `lines`, each indented by `by` spaces.
fn indent(lines: &str, by: usize) -> String {
    lines
        .lines()
        .map(|l| format!("{:by$}{l}", ""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The comment that opens an output's statements in the shim: what the
/// compiler says about the lines after it is about that `returns` item.
fn item_marker(index: usize, out: &Output) -> String {
    let count = out
        .count
        .as_ref()
        .map(|c| format!("[{}]", spec_lang::format::expr(c)))
        .unwrap_or_default();
    format!("/* returns item {}: {}{count} */", index + 1, out.text())
}

fn output_decls(spec: &Spec, site: &str, sig: &Signature) -> Result<OutputDecls, InterposeError> {
    let routine = &spec.routine.name.name;
    let mut decls = OutputDecls {
        defs: String::new(),
        body: String::new(),
        return_value: false,
    };
    let mut uses_op = false;
    for (index, out) in spec.returns.iter().enumerate() {
        if out.path.is_empty() && out.name == *routine && !sig.is_void {
            decls.return_value = true;
            let _ = writeln!(
                decls.body,
                "    tdg_region_output(\"{site}\", &tdg_ret_, 1, sizeof tdg_ret_, TDG_OUTPUT_KIND(tdg_ret_));"
            );
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
        uses_op |= count_c.contains("tdg_count_op_");
        let size_kind = match elem {
            Some(e) => format!("sizeof {e}, TDG_OUTPUT_KIND({e})"),
            None => "1, TDG_OUTPUT_BYTES".to_string(),
        };
        let declare = format!("tdg_bad_ = 0;\ntdg_count_ = {count_c};\ntdg_output_({data}, tdg_count_, tdg_bad_, {size_kind});");
        let _ = writeln!(decls.body, "    {}", item_marker(index, out));
        let non_null = dereferenced_by(out, count.as_ref());
        if non_null.is_empty() {
            let _ = writeln!(decls.body, "{}", indent(&declare, 4));
        } else {
            let _ = writeln!(
                decls.body,
                "    if ({}) {{\n{}\n    }} else {{\n        tdg_output_(NULL, 0, 1, {size_kind});\n    }}",
                non_null.iter().map(|g| format!("{g} != NULL")).collect::<Vec<_>>().join(" && "),
                indent(&declare, 8)
            );
        }
    }
    if decls.body.is_empty() {
        return Ok(decls);
    }
    if decls.return_value {
        // Assigned each call: a `const int` result is kept as an `int`.
        let mut kept = spec.routine.ret.clone();
        kept.is_const &= kept.is_pointer();
        let _ = writeln!(
            decls.defs,
            "/* The call's result, declared as an output of the region. */\nstatic __thread {} tdg_ret_;\n",
            c_type(&kept)
        );
    }
    if uses_op {
        decls.defs.push_str(
            "/* Output counts come from the application's arguments: checked arithmetic,\n \
             * so a zero divisor or an overflow declares nothing to compare (count 0)\n \
             * instead of being undefined behaviour in the application. */\n\
             static long long tdg_count_op_(char op, long long a, long long b, int *bad) {\n    \
             long long r = 0;\n    \
             switch (op) {\n    \
             case '+': *bad |= __builtin_add_overflow(a, b, &r); break;\n    \
             case '-': *bad |= __builtin_sub_overflow(a, b, &r); break;\n    \
             case '*': *bad |= __builtin_mul_overflow(a, b, &r); break;\n    \
             default:\n        \
             if (b == 0 || (a == LLONG_MIN && b == -1))\n            \
             *bad = 1;\n        \
             else\n            \
             r = op == '/' ? a / b : a % b;\n    \
             }\n    \
             return r;\n}\n\n",
        );
    }
    if decls.body.contains("tdg_output_(") {
        let _ = writeln!(
            decls.defs,
            "/* Declares `count` elements at `data` as an output of the coming call\n \
             * (none when the count could not be computed or `data` is NULL). */\n\
             static void tdg_output_(const void *data, long long count, int bad, unsigned long elem_size, int kind) {{\n    \
             tdg_region_output(\"{site}\", data, bad || count < 0 || !data ? 0UL : (unsigned long)count, elem_size, kind);\n}}\n"
        );
        decls.body = format!(
            "    int tdg_bad_;\n    long long tdg_count_;\n{}",
            decls.body
        );
    }
    decls.body = format!(
        "    /* The outputs `returns(...)` names: a restored copy hands them to tdg,\n     \
         * which compares the candidate's with the original's. Read from the\n     \
         * call's arguments before the call; behind a NULL pointer or with a\n     \
         * count that cannot be computed, an output declares nothing. */\n{}",
        decls.body
    );
    Ok(decls)
}

/// The C source of an `LD_PRELOAD` shim that marks every outermost call of
/// `spec`'s routine as the checkpoint region named after the routine
/// (`tdg_region_begin`/`tdg_region_end` of checkpoint/c/tdg_checkpoint.h)
/// and forwards it unchanged: `tdg checkpoint capture --spec` with no
/// change to the application.
pub fn generate_region_shim(spec: &Spec) -> Result<String, InterposeError> {
    check_forwardable(spec)?;
    let sig = Signature::of(spec);
    let site = &spec.routine.name.name;
    let mut c = String::new();
    let _ = writeln!(
        c,
        "/* Generated by `tdg checkpoint capture --spec`: every outermost call of {}\n \
         * is checkpoint region \"{site}\", forwarded to the library's definition\n \
         * (or, in a restored copy told to, to a candidate's). Do not edit;\n \
         * regenerate from the spec. */",
        sig.sym
    );
    c.push_str(
        "#include <limits.h>\n#include <stddef.h>\n#include \"tdg_checkpoint.h\"\n#include \"tdg_resolve.h\"\n",
    );
    for inc in &spec.includes {
        c.push_str(&inc.text);
        c.push('\n');
    }
    let outputs = output_decls(spec, site, &sig)?;
    c.push_str("\nstatic __thread int tdg_depth_;\n");
    c.push_str(&outputs.defs);
    preload_head(&mut c, &sig, "", "NULL");
    forward_nested(&mut c, &sig, "tdg_fn_");
    c.push_str("    tdg_depth_++;\n");
    c.push_str(&outputs.body);
    let _ = writeln!(c, "    tdg_region_begin(\"{site}\");");
    // In a restored copy that `tdg checkpoint time --impl` told to load a
    // candidate, the candidate's definition runs instead of the library's
    // (the delay calls and the timed one); everywhere else this is the
    // resolved definition, at the cost of one branch.
    let _ = writeln!(
        c,
        "    tdg_fn_ = (tdg_real_fn_)tdg_redirect(\"{site}\", \"{}\", (void *)tdg_fn_);",
        sig.sym
    );
    let args = &sig.args;
    let result = if outputs.return_value {
        "tdg_ret_"
    } else {
        "tdg_r_"
    };
    if sig.is_void {
        let _ = writeln!(c, "    tdg_fn_({args});");
    } else if outputs.return_value {
        let _ = writeln!(c, "    tdg_ret_ = tdg_fn_({args});");
    } else {
        let _ = writeln!(c, "    {} tdg_r_ = tdg_fn_({args});", sig.ret);
    }
    let _ = writeln!(c, "    tdg_region_end(\"{site}\");\n    tdg_depth_--;");
    if !sig.is_void {
        let _ = writeln!(c, "    return {result};");
    }
    c.push_str("}\n");
    Ok(c)
}

/// Writes and compiles the region shim of [`generate_region_shim`] into
/// `dir`, with the checkpoint host library `host_source` (whose header is
/// in `host_include`) and the resolver compiled in. Returns the `.so`.
pub fn build_region_shim(
    cc: &CCompiler,
    spec: &Spec,
    dir: &Path,
    include_dirs: &[PathBuf],
    host_source: &Path,
    host_include: &Path,
) -> Result<PathBuf, InterposeError> {
    let sym = symbol_name(spec);
    runtime::write_sources(dir).map_err(ToolchainError::Files)?;
    let source = dir.join(format!("tdg_region_{sym}.c"));
    let text = generate_region_shim(spec)?;
    fsguard::write_atomic(&source, text.as_bytes()).map_err(ToolchainError::Files)?;
    let shim = dir.join(format!("tdg_region_{sym}.so"));
    let mut incs = vec![dir.to_path_buf(), host_include.to_path_buf()];
    incs.extend(include_dirs.iter().cloned());
    let built = cc.compile(&CompileJob {
        sources: vec![
            source.clone(),
            dir.join("tdg_resolve.c"),
            host_source.to_path_buf(),
        ],
        output: shim.clone(),
        cflags: {
            let mut f = runtime::cflags();
            f.push("-shared".into());
            f
        },
        include_dirs: incs,
        link_args: vec!["-ldl".into()],
        ..Default::default()
    });
    match built {
        Ok(()) => Ok(shim),
        Err(ToolchainError::BuildFailed { command, stderr }) => {
            match failing_item(spec, &source, &text, &stderr) {
                Some((item, span, compiler, hint)) => Err(InterposeError::SpecItemDoesNotCompile {
                    routine: spec.routine.name.name.clone(),
                    item,
                    span,
                    compiler,
                    hint,
                }),
                None => Err(ToolchainError::BuildFailed { command, stderr }.into()),
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// Where `out` is written in the spec: its name, path and count.
fn out_span(out: &Output) -> Span {
    let end = out.path.last().map_or(out.span.end, |m| m.span.end);
    Span::new(
        out.span.start,
        out.count.as_ref().map_or(end, |c| c.span().end),
    )
}

/// The first compiler error in the lines of a spec item: an `include=`
/// line, or a `returns` item's statements (after its [`item_marker`], up to
/// the next item or the region's start). A member the struct does not have
/// or a header not found is the spec's mistake, and is reported as such:
/// the item as written, where it is, and what the compiler said.
fn failing_item(
    spec: &Spec,
    source: &Path,
    text: &str,
    stderr: &str,
) -> Option<(String, Span, String, &'static str)> {
    let mut item_of_line: Vec<Option<(String, Span, &'static str)>> = Vec::new();
    let mut current = None;
    for line in text.lines() {
        if line.contains("tdg_region_begin(") {
            current = None;
        }
        let output = spec
            .returns
            .iter()
            .enumerate()
            .find(|(i, o)| line.trim() == item_marker(*i, o));
        if let Some((_, out)) = output {
            current = Some((
                format!("returns item `{}` does not compile against the spec's include=", out.text()),
                out_span(out),
                "check the member names against the struct's header; a count reads integer members only",
            ));
        }
        let include = spec
            .includes
            .iter()
            .find(|inc| inc.text.lines().any(|l| l == line));
        item_of_line.push(match include {
            Some(inc) => Some((
                format!("the spec's include `{}` does not compile", inc.text),
                inc.span,
                "give the header's directory with -I DIR (default: the spec's directory)",
            )),
            None => current.clone(),
        });
    }
    let file = source.file_name()?.to_str()?;
    stderr.lines().find_map(|l| {
        // `DIR/tdg_region_X.c:LINE:COL: error: MESSAGE` (or `fatal error:`)
        let (_, rest) = l.split_once(&format!("{file}:"))?;
        let (line, rest) = rest.split_once(':')?;
        let (_, message) = rest.split_once("error: ")?;
        let (item, span, hint) = item_of_line
            .get(line.parse::<usize>().ok()?.checked_sub(1)?)?
            .clone()?;
        Some((item, span, message.trim().to_string(), hint))
    })
}

/// Include directories for a spec's `include=` clauses: the ones given
/// with `-I`, or else the spec's own directory.
pub fn include_dirs_for(spec_path: &Path, given: &[PathBuf]) -> Vec<PathBuf> {
    if !given.is_empty() {
        return given.to_vec();
    }
    let dir = spec_path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    vec![dir.to_path_buf()]
}

/// What `build_interposers` produced.
#[derive(Debug, Clone)]
pub struct Interposers {
    pub preload_source: PathBuf,
    /// `LD_PRELOAD` this; the runtime is compiled in.
    pub preload_shim: PathBuf,
    pub wrap_source: PathBuf,
    /// Link this with `-Wl,--wrap=<symbol>` and `libtdg_instrument.a`.
    pub wrap_object: PathBuf,
    pub symbol: String,
    pub runtime: runtime::RuntimeBuild,
}

/// Writes and compiles both interposers and the runtime into `dir`.
/// `include_dirs` serve the spec's `include=` clauses.
pub fn build_interposers(
    cc: &CCompiler,
    spec: &Spec,
    dir: &Path,
    include_dirs: &[PathBuf],
) -> Result<Interposers, InterposeError> {
    let rt = runtime::build(cc, dir)?;
    let sym = symbol_name(spec);
    let mut incs = vec![rt.include_dir.clone()];
    incs.extend(include_dirs.iter().cloned());

    let preload_source = dir.join(format!("tdg_preload_{sym}.c"));
    fsguard::write_atomic(
        &preload_source,
        generate(spec, InterposerKind::Preload)?.as_bytes(),
    )
    .map_err(ToolchainError::Files)?;
    let preload_shim = dir.join(format!("tdg_preload_{sym}.so"));
    cc.compile(&CompileJob {
        sources: vec![
            preload_source.clone(),
            rt.source.clone(),
            rt.resolve_source.clone(),
        ],
        output: preload_shim.clone(),
        cflags: {
            let mut f = runtime::cflags();
            f.push("-shared".into());
            f
        },
        include_dirs: incs.clone(),
        link_args: vec!["-ldl".into(), "-lpthread".into()],
        ..Default::default()
    })?;

    let wrap_source = dir.join(format!("tdg_wrap_{sym}.c"));
    fsguard::write_atomic(
        &wrap_source,
        generate(spec, InterposerKind::Wrap)?.as_bytes(),
    )?;
    let wrap_object = dir.join(format!("tdg_wrap_{sym}.o"));
    cc.compile(&CompileJob {
        sources: vec![wrap_source.clone()],
        output: wrap_object.clone(),
        cflags: runtime::cflags(),
        include_dirs: incs,
        object_only: true,
        ..Default::default()
    })?;
    Ok(Interposers {
        preload_source,
        preload_shim,
        wrap_source,
        wrap_object,
        symbol: sym,
        runtime: rt,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(src: &str) -> Vec<String> {
        let spec = spec_lang::parse_and_check_prototype(src, "t.spec").unwrap();
        recorded_values(&spec)
            .into_iter()
            .map(|v| v.param)
            .collect()
    }

    /// The integers that size the operands lead, then the other integers,
    /// the floating-point scalars and the addresses; `record=` chooses
    /// exactly, in its order, and the shim registers that list.
    #[test]
    fn sizing_integers_first_unless_record_chooses() {
        let gemm =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/gemm.spec"))
                .unwrap();
        assert_eq!(
            names(&gemm),
            ["M", "N", "K", "lda", "ldb", "ldc", "alpha", "beta", "A", "B", "C"]
        );
        let src = "routine=void f(int order, const int M, const int lda, double a, double* X, const int n);\ninit={ X=Matrix(double, lda, n, RANDOM, _); };\n";
        assert_eq!(names(src), ["lda", "n", "order", "M", "a", "X"]);
        let chosen = format!("{src}record=n, X, a;\n");
        assert_eq!(names(&chosen), ["n", "X", "a"]);
        let spec = spec_lang::parse_and_check_prototype(&chosen, "t.spec").unwrap();
        let c = generate(&spec, InterposerKind::Preload).unwrap();
        assert!(c.contains(r#"tdg_routine("f", "n:i,X:p,a:f")"#), "{c}");
        assert!(
            c.contains("const int64_t tdg_v_[] = {(int64_t)(n), TDG_PTR(X), tdg_double_bits_((double)(a))};"),
            "{c}"
        );
    }
}
