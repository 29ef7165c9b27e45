//! What is checked after timing: the outputs compared against the spec's
//! body, the overflow guard that keeps repeated calls' outputs finite, and
//! the flop count.

use serde::Serialize;
use spec_lang::ast::{BaseType, Spec};
use spec_lang::checked::CheckedSpec;

use super::config::DriverConfig;
use super::expr::CheckedExpr;
use super::operands::OperandModel;
use super::routine::ret_is_value;
use super::scalars::{ScalarKind, ScalarModel};

#[derive(Debug, Clone, Serialize)]
pub struct OverflowGuard {
    /// Floating scalar whose sign flips each time the working sets wrap
    /// (the paper's `alpha` trick) in multi-call timing.
    pub alternate: Option<String>,
    /// Outputs restored from a pristine copy before each single-call sample.
    pub restore: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct VerifyPlan {
    pub operands: Vec<String>,
    pub compare_return: bool,
    pub tolerance: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FlopPlan {
    pub text: String,
    /// The flops of one call, a formula of the scalars (evaluated in
    /// double by the driver, so large sizes cannot overflow).
    pub expr: CheckedExpr,
    /// Flops of one call at the initial scalar values (explain).
    #[serde(skip)]
    pub value: Option<f64>,
}

pub(super) fn default_tolerance(kind: &BaseType) -> f64 {
    match kind {
        BaseType::Float | BaseType::FloatComplex => 1e-4,
        _ => 1e-9,
    }
}

/// The spec's outputs (and return value) compared against its body or the
/// `--reference` implementation; `None` without either or without anything
/// to compare.
pub(super) fn build_verify(checked: &CheckedSpec, cfg: &DriverConfig) -> Option<VerifyPlan> {
    let spec = &checked.spec;
    let nothing_to_compare = spec.returns.is_empty() && !ret_is_value(spec);
    let no_reference = spec.routine.body.is_none() && !cfg.external_reference;
    if no_reference || nothing_to_compare {
        return None;
    }
    let mut names = Vec::new();
    let mut tol: f64 = 0.0;
    for r in spec
        .returns
        .iter()
        .filter(|r| r.name != spec.routine.name.name)
    {
        if let Some(op) = checked.operands.iter().find(|o| o.name == r.name) {
            names.push(op.name.clone());
            tol = tol.max(default_tolerance(&op.param_ty.base));
        }
    }
    if ret_is_value(spec) {
        tol = tol.max(default_tolerance(&spec.routine.ret.base));
    }
    Some(VerifyPlan {
        operands: names,
        compare_return: ret_is_value(spec),
        tolerance: cfg
            .timing
            .tolerance
            .unwrap_or(if tol > 0.0 { tol } else { 1e-9 }),
    })
}

/// The paper's alpha trick when the routine has a real `alpha` that is
/// fixed; outputs restored between single-call samples.
pub(super) fn build_guard(
    spec: &Spec,
    scalars: &[ScalarModel],
    operands: &[OperandModel],
) -> OverflowGuard {
    let params = &spec.routine.params;
    let alternate = scalars
        .iter()
        .find(|s| {
            s.name.eq_ignore_ascii_case("alpha")
                && !s.integral
                && s.kind == ScalarKind::Fixed
                && params
                    .iter()
                    .any(|p| p.name.name == s.name && p.ty.pointers == 0 && p.ty.base.is_floating())
        })
        .map(|s| s.name.clone());
    let restore = operands
        .iter()
        .filter(|o| o.is_output)
        .map(|o| o.name.clone())
        .collect();
    OverflowGuard { alternate, restore }
}
