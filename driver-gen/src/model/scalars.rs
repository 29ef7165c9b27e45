//! Scalars and size macros: each scalar's C initialiser and whether it
//! stays fixed or changes per call (Range, RANDOM), in the order the
//! checked spec resolved them (dependencies first).

use serde::Serialize;
use spec_lang::ast::Expr;
use spec_lang::checked::{CheckedSpec, PerCall};
use spec_lang::eval::Value;

use super::error::ModelError;
use crate::cexpr::{self, ExprEnv, NameStyle};

#[derive(Debug, Clone, Serialize)]
pub struct MacroDefault {
    pub name: String,
    /// `TDG_MACRO_<name>`, what the driver's code uses.
    pub c_name: String,
    pub default_c: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum ScalarKind {
    Fixed,
    /// begin on the first call, `+= incr` after each call.
    Range {
        incr_c: String,
    },
    /// Fresh uniform value each call.
    Random {
        lo_c: String,
        hi_c: String,
    },
}

#[derive(Debug, Clone, Serialize)]
pub struct ScalarModel {
    pub name: String,
    /// Type of the struct field holding it (qualifiers dropped).
    pub c_type: String,
    pub init_c: String,
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

/// The size macros' C defaults (`-D` on the compiler line overrides them).
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
                c_name: cexpr::macro_c_name(&m.name),
                default_c: cexpr::to_c(&m.default, env, NameStyle::Constant, false)?,
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
        let mut field_ty = sc.ty.clone();
        field_ty.is_const = sc.ty.is_pointer() && sc.ty.is_const;
        let c_type = field_ty.text();
        let integral = sc.ty.pointers == 0 && sc.ty.base.is_integral();
        let c = |e: &Expr| cexpr::to_c(e, env, NameStyle::Runtime, false);
        let (init_c, kind) = match &sc.per_call {
            PerCall::Range { begin, incr } => (c(begin)?, ScalarKind::Range { incr_c: c(incr)? }),
            PerCall::Random { bounds: None } => {
                let (lo, hi) = if integral {
                    ("0".to_string(), "100".to_string())
                } else {
                    ("-0.5".to_string(), "0.5".to_string())
                };
                (String::new(), ScalarKind::Random { lo_c: lo, hi_c: hi })
            }
            PerCall::Random {
                bounds: Some((lo, hi)),
            } => (
                String::new(),
                ScalarKind::Random {
                    lo_c: c(lo)?,
                    hi_c: c(hi)?,
                },
            ),
            PerCall::Fixed => (c(&sc.expr)?, ScalarKind::Fixed),
        };
        scalars.push(ScalarModel {
            name: sc.name.clone(),
            c_type,
            init_c,
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
