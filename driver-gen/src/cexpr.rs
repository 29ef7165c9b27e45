//! Spec expressions as C text.
//!
//! Sizes are evaluated by the generated C at run time (so `-D MS=100` resizes
//! a driver without regenerating it); their values for explanations come
//! from `spec_lang::eval`, the one evaluator, which follows C's arithmetic.

use spec_lang::ast::{Expr, UnaryOp};
use std::collections::BTreeMap;

/// Why an expression has no C spelling. The checker rules each of these
/// out for a spec that serves a driver, so reaching one is a spec the
/// checker let through by mistake, said in the spec's terms.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CExprError {
    #[error("`{0}` is a struct member of the application's call: a driver has none")]
    MemberPath(String),
    #[error("`{0}` is not a routine parameter nor a Macro name; define it in init={{...}} or use Macro({0}, default)")]
    UnknownName(String),
    #[error("`{0}` changes per call (Range/RANDOM) but is used where a fixed value is needed (a size); give it a fixed value")]
    NotConstant(String),
    #[error("{0} varies per call and cannot appear inside another expression; assign it to its own scalar")]
    PerCallInExpression(String),
    #[error("the values of {0} depend on each other in a cycle; break the cycle in init={{...}}")]
    Cycle(String),
}

/// How a name that refers to a routine scalar is spelled in C.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameStyle {
    /// `S->name`: inside functions that receive the scalar struct.
    Runtime,
    /// The scalar's own initial expression, recursively: for file-scope
    /// constants such as static array sizes.
    Constant,
}

/// What the translator needs to know about names.
pub struct ExprEnv<'a> {
    /// Scalar parameter name -> its initial expression and whether it is fixed
    /// (not Range/RANDOM).
    pub scalars: &'a BTreeMap<String, (Expr, bool)>,
    /// Macro names introduced by `Macro(NAME, default)`.
    pub macros: &'a BTreeMap<String, Expr>,
}

/// Translates `e` to a C expression. `as_double` casts every leaf to double
/// (flop formulas: 2*M*N*K must not overflow a 32-bit int).
pub fn to_c(
    e: &Expr,
    env: &ExprEnv,
    style: NameStyle,
    as_double: bool,
) -> Result<String, CExprError> {
    to_c_depth(e, env, style, as_double, 0)
}

fn to_c_depth(
    e: &Expr,
    env: &ExprEnv,
    style: NameStyle,
    as_double: bool,
    depth: u32,
) -> Result<String, CExprError> {
    if depth > 64 {
        return Err(CExprError::Cycle(describe(e)));
    }
    let rec = |x: &Expr| to_c_depth(x, env, style, as_double, depth + 1);
    Ok(match e {
        Expr::Int(v, _) => {
            if as_double {
                format!("{v}.0")
            } else if *v > i32::MAX as i64 || *v < i32::MIN as i64 {
                format!("{v}LL")
            } else {
                v.to_string()
            }
        }
        Expr::Float(v, _) => float_literal(*v),
        Expr::Str(s, _) => c_string_literal(s),
        // The checker keeps member paths out of what a driver evaluates.
        Expr::Member { root, path, .. } => {
            return Err(CExprError::MemberPath(spec_lang::ast::member_path_text(
                &root.name, path,
            )))
        }
        Expr::Name(id) => {
            if let Some((init, fixed)) = env.scalars.get(&id.name) {
                match style {
                    NameStyle::Runtime => {
                        if as_double {
                            format!("((double)S->{})", id.name)
                        } else {
                            format!("S->{}", id.name)
                        }
                    }
                    NameStyle::Constant => {
                        if !fixed {
                            return Err(CExprError::NotConstant(id.name.clone()));
                        }
                        format!("({})", rec(init)?)
                    }
                }
            } else if env.macros.contains_key(&id.name) {
                if as_double {
                    format!("((double){})", macro_c_name(&id.name))
                } else {
                    macro_c_name(&id.name)
                }
            } else {
                return Err(CExprError::UnknownName(id.name.clone()));
            }
        }
        Expr::Macro { name, .. } => {
            if as_double {
                format!("((double){})", macro_c_name(&name.name))
            } else {
                macro_c_name(&name.name)
            }
        }
        Expr::Random(_) | Expr::RandomRange { .. } | Expr::Range { .. } => {
            return Err(CExprError::PerCallInExpression(describe(e)))
        }
        Expr::Unary {
            op: UnaryOp::Neg,
            operand,
            ..
        } => format!("(-{})", rec(operand)?),
        Expr::Binary { op, lhs, rhs, .. } => {
            format!("({} {} {})", rec(lhs)?, op.symbol(), rec(rhs)?)
        }
    })
}

/// The driver's own spelling of a spec macro. The user's name is never
/// #defined by the driver (a macro called `b` or `S` would rewrite the
/// driver's code); `-D NAME=...` still works through it (see driver.c.hbs).
pub fn macro_c_name(name: &str) -> String {
    format!("TDG_MACRO_{name}")
}

fn float_literal(v: f64) -> String {
    let s = format!("{v:?}");
    if s.contains('.') || s.contains('e') || s.contains("inf") || s.contains("NaN") {
        s
    } else {
        format!("{s}.0")
    }
}

pub fn c_string_literal(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An expression as the spec would write it (the canonical formatter's
/// spelling, parentheses kept), for messages and explanations.
pub fn describe(e: &Expr) -> String {
    spec_lang::format::expr(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use spec_lang::ast::{BinOp, Ident, Span};

    fn name(n: &str) -> Expr {
        Expr::Name(Ident {
            name: n.into(),
            span: Span::default(),
        })
    }
    fn int(v: i64) -> Expr {
        Expr::Int(v, Span::default())
    }
    fn bin(op: BinOp, l: Expr, r: Expr) -> Expr {
        Expr::Binary {
            op,
            lhs: Box::new(l),
            rhs: Box::new(r),
            span: Span::default(),
        }
    }

    #[test]
    fn flop_leaves_become_doubles_and_names_resolve() {
        let mut scalars = BTreeMap::new();
        scalars.insert("M".to_string(), (int(3), true));
        scalars.insert("R".to_string(), (Expr::Random(Span::default()), false));
        let macros = BTreeMap::new();
        let env = ExprEnv {
            scalars: &scalars,
            macros: &macros,
        };
        let e = bin(BinOp::Mul, int(2), name("M"));
        assert_eq!(
            to_c(&e, &env, NameStyle::Runtime, true).unwrap(),
            "(2.0 * ((double)S->M))"
        );
        assert_eq!(
            to_c(&e, &env, NameStyle::Constant, false).unwrap(),
            "(2 * (3))"
        );
        assert_eq!(
            to_c(&name("R"), &env, NameStyle::Constant, false),
            Err(CExprError::NotConstant("R".into()))
        );
        assert_eq!(
            to_c(&name("Q"), &env, NameStyle::Runtime, false),
            Err(CExprError::UnknownName("Q".into()))
        );
    }

    #[test]
    fn strings_are_escaped_for_c() {
        assert_eq!(c_string_literal("a\"b\\c"), "\"a\\\"b\\\\c\"");
    }
}
