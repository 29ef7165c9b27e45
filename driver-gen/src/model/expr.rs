//! Spec expressions as the model carries them: the expression itself, the
//! names it may refer to, and how the view is to spell those names. The C
//! translator has already accepted each one while the model was built, so
//! a spec it cannot spell is refused then, with the translator's message.

use serde::{Serialize, Serializer};
use spec_lang::ast::Expr;
use std::collections::BTreeMap;

use crate::cexpr::{self, CExprError, ExprEnv, NameStyle};

/// The spec's names an expression may use: each scalar's initial
/// expression and whether it is fixed, and each `Macro(NAME, default)`.
#[derive(Debug, Clone, Default)]
pub struct ExprNames {
    pub scalars: BTreeMap<String, (Expr, bool)>,
    pub macros: BTreeMap<String, Expr>,
}

impl ExprNames {
    pub fn env(&self) -> ExprEnv<'_> {
        ExprEnv {
            scalars: &self.scalars,
            macros: &self.macros,
        }
    }
}

/// An expression the C translator accepted under `style`.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedExpr {
    pub expr: Expr,
    pub style: NameStyle,
}

impl CheckedExpr {
    /// `e` as spelled inside the driver's functions (`S->name`).
    pub(crate) fn runtime(e: &Expr, env: &ExprEnv) -> Result<CheckedExpr, CExprError> {
        Self::new(e, env, NameStyle::Runtime)
    }

    pub(super) fn new(
        e: &Expr,
        env: &ExprEnv,
        style: NameStyle,
    ) -> Result<CheckedExpr, CExprError> {
        cexpr::to_c(e, env, style, false)?;
        Ok(CheckedExpr {
            expr: e.clone(),
            style,
        })
    }
}

/// Explanations (`tdg explain --format json`) show the spec's spelling.
impl Serialize for CheckedExpr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&cexpr::describe(&self.expr))
    }
}
