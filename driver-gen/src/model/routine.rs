//! The routine as data: its symbol, its parameters with the types the
//! implementation receives and the spec declares, what verification
//! compares against, and the arguments of its call. The view
//! (`render.rs`) writes the C of each.

use serde::Serialize;
use spec_lang::ast::{BaseType, CType, Lang, Spec};

use super::operands::{elem_kind, ElemKind, OperandModel};

#[derive(Debug, Clone, Serialize)]
pub struct RoutineModel {
    pub name: String,
    /// Linker symbol (Fortran: lower case with a trailing underscore).
    pub symbol: String,
    pub fortran: bool,
    /// The parameters in order.
    pub params: Vec<RoutineParam>,
    #[serde(serialize_with = "type_text")]
    pub ret: CType,
    /// What verification compares against, if anything.
    pub reference: Option<Reference>,
    pub returns_value: bool,
    /// How a return value of this type is folded into a double sink.
    pub ret_kind: ElemKind,
}

/// One parameter of the routine.
#[derive(Debug, Clone, Serialize)]
pub struct RoutineParam {
    pub name: String,
    /// As the implementation receives it (Fortran: scalars by reference).
    #[serde(serialize_with = "type_text")]
    pub abi_type: CType,
    /// As the spec declares it: the type the spec's body sees.
    #[serde(serialize_with = "type_text")]
    pub spec_type: CType,
}

/// The reference the outputs are verified against.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Reference {
    /// Another implementation's definition of the routine (`--reference
    /// K.c`), which the build renames to `tdg_reference`; it takes the
    /// implementation's types.
    External,
    /// The spec's body, as written, compiled with the spec's types.
    Body { text: String },
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

/// `external_reference`: the reference is another implementation's
/// definition (`--reference K.c`), not the spec's body.
pub(super) fn build_routine(spec: &Spec, external_reference: bool) -> RoutineModel {
    let r = &spec.routine;
    let reference = if external_reference {
        Some(Reference::External)
    } else {
        r.body.as_ref().map(|b| Reference::Body {
            text: b.text.clone(),
        })
    };
    RoutineModel {
        name: r.name.name.clone(),
        symbol: spec.symbol(),
        fortran: spec.lang == Lang::Fortran,
        params: r
            .params
            .iter()
            .map(|p| RoutineParam {
                name: p.name.name.clone(),
                abi_type: spec.abi_type(p),
                spec_type: p.ty.clone(),
            })
            .collect(),
        ret: r.ret.clone(),
        reference,
        returns_value: ret_is_value(spec),
        ret_kind: elem_kind(&r.ret),
    }
}

impl RoutineModel {
    /// The routine of `spec` with the spec's body as its reference (what
    /// timing the body as the implementation needs; see
    /// `render::body_as_implementation`).
    pub fn with_body_reference(spec: &Spec) -> RoutineModel {
        build_routine(spec, false)
    }
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
