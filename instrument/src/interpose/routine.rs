//! The routine as an interposer sees it: the symbol it takes the place of,
//! its C signature, and which of its arguments each call records.

use crate::format::ValueKind;
use spec_lang::ast::{BaseType, CType, Expr, InitValue, Lang, Param, Signedness, Spec};
use std::collections::BTreeSet;

/// Which of the routine's arguments are recorded, in record order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedValue {
    pub param: String,
    pub kind: ValueKind,
    /// Passed by reference (a Fortran scalar): the value is behind it.
    pub by_reference: bool,
}

/// Symbol the application calls: C names as written, Fortran lower-case
/// with the trailing underscore gfortran appends.
pub fn symbol_name(spec: &Spec) -> String {
    spec.symbol()
}

pub(super) fn c_type(ty: &CType) -> String {
    ty.text()
}

fn abi_type(spec: &Spec, p: &Param) -> String {
    spec.abi_type(p).text()
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
    let value = |kind| RecordedValue {
        param: p.name.name.clone(),
        kind,
        by_reference: spec.lang == Lang::Fortran && kind != ValueKind::Pointer,
    };
    if p.ty.pointers == 0 && p.ty.base.is_integral() {
        Some(value(match p.ty.base.signedness() {
            Some(Signedness::Signed) => ValueKind::Signed,
            _ => ValueKind::Unsigned,
        }))
    } else if p.ty.pointers == 0 && matches!(p.ty.base, BaseType::Float | BaseType::Double) {
        Some(value(ValueKind::Double))
    } else if p.ty.pointers > 0 {
        Some(value(ValueKind::Pointer))
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterposerKind {
    /// `LD_PRELOAD` shared object.
    Preload,
    /// Object for `-Wl,--wrap=NAME`.
    Wrap,
}

/// The routine's C signature as an interposer declares and calls it.
#[derive(serde::Serialize)]
pub(super) struct Signature {
    /// The symbol interposed (Fortran: lower case with `_`).
    pub(super) sym: String,
    pub(super) ret: String,
    pub(super) is_void: bool,
    /// `double* a, int n` (or `void`).
    pub(super) param_list: String,
    /// `a, n`.
    pub(super) args: String,
}

impl Signature {
    pub(super) fn of(spec: &Spec) -> Signature {
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
