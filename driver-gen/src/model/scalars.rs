//! Scalars and size macros: each scalar's C initialiser and whether it
//! stays fixed or changes per call (Range, RANDOM), in the order the
//! checked spec resolved them (dependencies first).

use serde::Serialize;
use spec_lang::ast::{CType, Expr};
use spec_lang::checked::{CheckedSpec, PerCall};
use spec_lang::eval::Value;

use super::error::ModelError;
use super::expr::CheckedExpr;
use crate::cexpr::{self, ExprEnv, NameStyle};

#[derive(Debug, Clone, Serialize)]
pub struct MacroDefault {
    pub name: String,
    /// Its default, a file-scope constant (`-D` on the compiler line
    /// overrides it).
    pub default: CheckedExpr,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum ScalarKind {
    Fixed,
    /// begin on the first call, `+= incr` after each call.
    Range {
        incr: CheckedExpr,
    },
    /// Fresh uniform value each call, in the spec's bounds or, without
    /// them, the driver's default range for the type.
    Random {
        bounds: Option<(CheckedExpr, CheckedExpr)>,
    },
}

#[derive(Debug, Clone, Serialize)]
pub struct ScalarModel {
    pub name: String,
    /// Type of the struct field holding it (qualifiers dropped).
    #[serde(serialize_with = "type_text")]
    pub field_type: CType,
    /// The value before the first call; none for RANDOM (drawn per call).
    pub init: Option<CheckedExpr>,
    pub kind: ScalarKind,
    pub integral: bool,
    /// Source text of the value, for explanations.
    pub text: String,
    /// Initial value when computable (explain).
    #[serde(skip)]
    pub value: Option<Value>,
    /// The spec gave no init: why the driver passes the value it does.
    pub implicit_reason: Option<&'static str>,
}

fn type_text<S: serde::Serializer>(t: &CType, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&t.text())
}

/// The size macros' defaults.
pub(super) fn build_macros(
    checked: &CheckedSpec,
    env: &ExprEnv,
) -> Result<Vec<MacroDefault>, ModelError> {
    checked
        .macros
        .iter()
        .map(|m| {
            Ok(MacroDefault {
                name: m.name.clone(),
                default: CheckedExpr::new(&m.default, env, NameStyle::Constant)?,
            })
        })
        .collect()
}

/// The scalars in initialisation order.
pub(super) fn build_scalars(
    checked: &CheckedSpec,
    env: &ExprEnv,
) -> Result<Vec<ScalarModel>, ModelError> {
    let mut scalars = Vec::new();
    for sc in &checked.scalars {
        let mut field_type = sc.ty.clone();
        field_type.is_const = sc.ty.is_pointer() && sc.ty.is_const;
        let integral = sc.ty.pointers == 0 && sc.ty.base.is_integral();
        let c = |e: &Expr| CheckedExpr::runtime(e, env);
        let (init, kind) = match &sc.per_call {
            PerCall::Range { begin, incr } => {
                (Some(c(begin)?), ScalarKind::Range { incr: c(incr)? })
            }
            PerCall::Random { bounds } => (
                None,
                ScalarKind::Random {
                    bounds: match bounds {
                        Some((lo, hi)) => Some((c(lo)?, c(hi)?)),
                        None => None,
                    },
                },
            ),
            PerCall::Fixed => (Some(c(&sc.expr)?), ScalarKind::Fixed),
        };
        scalars.push(ScalarModel {
            name: sc.name.clone(),
            field_type,
            init,
            kind,
            integral,
            text: cexpr::describe(&sc.expr),
            value: sc.value,
            implicit_reason: sc
                .implicit
                .then_some(spec_lang::implicit::IMPLICIT_SCALAR_REASON),
        });
    }
    Ok(scalars)
}
