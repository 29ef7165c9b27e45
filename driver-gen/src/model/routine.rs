//! The routine's C face: its symbol and prototype, the reference built
//! from the spec's body, and the call statements of the timed loop, the
//! warm-up call and verification.

use serde::Serialize;
use spec_lang::ast::{BaseType, CType, Lang, Spec};

use super::operands::{elem_kind, ElemKind, OperandModel};

#[derive(Debug, Clone, Serialize)]
pub struct RoutineModel {
    pub name: String,
    /// Linker symbol (Fortran: lower case with a trailing underscore).
    pub symbol: String,
    pub fortran: bool,
    /// Prototype of the user's implementation.
    pub prototype: String,
    /// `static RET tdg_reference(PARAMS) { body }` when a body is given, or
    /// the declaration of the `--reference` file's definition, which the
    /// build renames to `tdg_reference`.
    pub reference: Option<String>,
    pub returns_value: bool,
    pub ret_c_type: String,
    /// How a return value of this type is folded into a double sink.
    pub ret_kind: ElemKind,
}

/// How the driver calls the routine: the timed loop, the warm-up call and
/// the two verification calls all pass these arguments, each from its own
/// copy of the operands and scalars.
#[derive(Debug, Clone, Serialize)]
pub struct CallPlan {
    pub symbol: String,
    pub args: Vec<CallArg>,
    /// The implementation receives its scalars by reference (Fortran).
    pub scalars_by_ref: bool,
    /// So does the reference: another implementation's definition
    /// (`--reference`) of a Fortran routine; a spec's body takes the
    /// spec's own types.
    pub reference_scalars_by_ref: bool,
    /// The return type, when the routine returns a value: the call's
    /// result is folded into a sink so it cannot be dropped.
    #[serde(serialize_with = "ret_text")]
    pub returns: Option<CType>,
}

/// One argument of the call, in the routine's parameter order.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum CallArg {
    /// An operand's buffer, passed as the parameter's type.
    Operand {
        name: String,
        #[serde(serialize_with = "type_text")]
        param_type: CType,
    },
    Scalar {
        name: String,
    },
}

fn type_text<S: serde::Serializer>(t: &CType, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&t.text())
}

fn ret_text<S: serde::Serializer>(t: &Option<CType>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_some(&t.text()),
        None => s.serialize_none(),
    }
}

/// `const double* X`: a parameter declaration.
pub(super) fn decl(t: &CType, name: &str) -> String {
    format!("{} {name}", t.text())
}

/// `external_reference`: the reference is another implementation's
/// definition (`--reference K.c`), not the spec's body.
pub(super) fn build_routine(spec: &Spec, external_reference: bool) -> RoutineModel {
    let r = &spec.routine;
    let fortran = spec.lang == Lang::Fortran;
    let symbol = spec.symbol();
    let ret_ty = r.ret.text();
    let params_c: Vec<String> = r
        .params
        .iter()
        .map(|p| decl(&spec.abi_type(p), &p.name.name))
        .collect();
    let plist = if params_c.is_empty() {
        "void".to_string()
    } else {
        params_c.join(", ")
    };
    let prototype = format!("{ret_ty} {symbol}({plist});");
    let external = external_reference.then(|| {
        format!(
            "/* The reference: the definition of {symbol} in the --reference file, compiled\n * as tdg_reference so it links beside the implementation. */\n{ret_ty} tdg_reference({plist});"
        )
    });
    let reference = external.or_else(|| {
        r.body.as_ref().map(|b| {
            let ref_params: Vec<String> =
                r.params.iter().map(|p| decl(&p.ty, &p.name.name)).collect();
            let rp = if ref_params.is_empty() {
                "void".to_string()
            } else {
                ref_params.join(", ")
            };
            // The spec's body need not use every parameter; keep -Wextra quiet.
            let unused: String = r
                .params
                .iter()
                .map(|p| format!("    (void){};\n", p.name.name))
                .collect();
            format!(
                "static {ret_ty} tdg_reference({rp})\n{{\n{unused}{}}}",
                b.text
            )
        })
    });
    RoutineModel {
        name: r.name.name.clone(),
        symbol,
        fortran,
        prototype,
        reference,
        returns_value: ret_is_value(spec),
        ret_c_type: ret_ty,
        ret_kind: elem_kind(&r.ret),
    }
}

/// A C file implementing the routine with the spec's own body, so a spec
/// with a body can be timed without `--impl` (the reference generator's
/// specs carry their implementation this way). `None` without a body.
/// The body keeps the spec's parameter types; a Fortran symbol receives
/// its scalars by reference and passes them on by value.
pub fn body_as_implementation(spec: &Spec) -> Option<String> {
    let routine = build_routine(spec, false);
    let reference = routine.reference?;
    let fortran = spec.lang == Lang::Fortran;
    let args: Vec<String> = spec
        .routine
        .params
        .iter()
        .map(|p| {
            let by_ref = fortran && p.ty.pointers == 0;
            format!("{}{}", if by_ref { "*" } else { "" }, p.name.name)
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
    let definition = routine.prototype.trim_end_matches(';');
    Some(format!(
        "/* {name}: the body of its spec, timed as the implementation (tdg run without --impl). */\n\
         {includes}#include <complex.h>\n#include <math.h>\n#include <stdbool.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <string.h>\n\n\
         {prototype}\n\n{reference}\n\n{definition}\n{{\n    {call}\n}}\n",
        name = routine.name,
        prototype = routine.prototype,
    ))
}

/// The routine's call, its arguments in parameter order.
pub(super) fn build_calls(
    spec: &Spec,
    operands: &[OperandModel],
    external_reference: bool,
) -> CallPlan {
    let fortran = spec.lang == Lang::Fortran;
    let r = &spec.routine;
    CallPlan {
        symbol: spec.symbol(),
        args: r
            .params
            .iter()
            .map(|p| {
                let name = p.name.name.clone();
                match operands.iter().find(|o| o.name == name) {
                    Some(o) => CallArg::Operand {
                        name,
                        param_type: o.param_type.clone(),
                    },
                    None => CallArg::Scalar { name },
                }
            })
            .collect(),
        scalars_by_ref: fortran,
        reference_scalars_by_ref: fortran && external_reference,
        returns: ret_is_value(spec).then(|| r.ret.clone()),
    }
}

/// The routine returns a value (anything but a plain `void`).
pub(super) fn ret_is_value(spec: &Spec) -> bool {
    let r = &spec.routine.ret;
    !(r.pointers == 0 && r.base == BaseType::Void)
}
