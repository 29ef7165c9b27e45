//! Spec expressions as C text, and their values for explanations.
//!
//! Sizes are evaluated by the generated C at run time (so `-D MS=100` resizes
//! a driver without regenerating it); the Rust evaluator mirrors C's integer
//! arithmetic so `tdg explain` quotes the same byte counts the driver uses.

use spec_lang::ast::{BinOp, Expr, UnaryOp};
use std::collections::BTreeMap;

use crate::model::ModelError;

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
) -> Result<String, ModelError> {
    to_c_depth(e, env, style, as_double, 0)
}

fn to_c_depth(
    e: &Expr,
    env: &ExprEnv,
    style: NameStyle,
    as_double: bool,
    depth: u32,
) -> Result<String, ModelError> {
    if depth > 64 {
        return Err(ModelError::Cycle(describe(e)));
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
                            return Err(ModelError::NotConstant(id.name.clone()));
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
                return Err(ModelError::UnknownName(id.name.clone()));
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
            return Err(ModelError::PerCallInExpression(describe(e)))
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

/// Short human rendering of an expression for messages.
pub fn describe(e: &Expr) -> String {
    match e {
        Expr::Int(v, _) => v.to_string(),
        Expr::Float(v, _) => format!("{v}"),
        Expr::Str(s, _) => format!("{s:?}"),
        Expr::Name(id) => id.name.clone(),
        Expr::Macro { name, default, .. } => format!("Macro({}, {})", name.name, describe(default)),
        Expr::Random(_) => "RANDOM".into(),
        Expr::RandomRange { lo, hi, .. } => format!("RANDOM({}, {})", describe(lo), describe(hi)),
        Expr::Range { begin, incr, .. } => {
            format!("Range({}, {})", describe(begin), describe(incr))
        }
        Expr::Unary { operand, .. } => format!("-{}", describe(operand)),
        Expr::Binary { op, lhs, rhs, .. } => {
            format!("{} {} {}", describe(lhs), op.symbol(), describe(rhs))
        }
    }
}

/// A value with C's int/double distinction (integer division truncates).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    Int(i64),
    Real(f64),
}

impl Num {
    pub fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Real(r) => r,
        }
    }
}

/// Values of names for [`eval`]: scalars (initial values) and macros.
pub type Values = BTreeMap<String, Num>;

/// Evaluates `e` the way the driver's C does; `None` for values only known
/// per call (RANDOM) or strings.
pub fn eval(e: &Expr, values: &Values) -> Option<Num> {
    Some(match e {
        Expr::Int(v, _) => Num::Int(*v),
        Expr::Float(v, _) => Num::Real(*v),
        Expr::Str(..) | Expr::Random(_) | Expr::RandomRange { .. } => return None,
        Expr::Name(id) => *values.get(&id.name)?,
        Expr::Macro { name, default, .. } => match values.get(&name.name) {
            Some(v) => *v,
            None => eval(default, values)?,
        },
        Expr::Range { begin, .. } => eval(begin, values)?,
        Expr::Unary { operand, .. } => match eval(operand, values)? {
            Num::Int(i) => Num::Int(i.checked_neg()?),
            Num::Real(r) => Num::Real(-r),
        },
        Expr::Binary { op, lhs, rhs, .. } => {
            let (a, b) = (eval(lhs, values)?, eval(rhs, values)?);
            match (a, b) {
                (Num::Int(x), Num::Int(y)) => Num::Int(match op {
                    BinOp::Add => x.checked_add(y)?,
                    BinOp::Sub => x.checked_sub(y)?,
                    BinOp::Mul => x.checked_mul(y)?,
                    BinOp::Div => x.checked_div(y)?,
                    BinOp::Mod => x.checked_rem(y)?,
                }),
                _ => {
                    let (x, y) = (a.as_f64(), b.as_f64());
                    Num::Real(match op {
                        BinOp::Add => x + y,
                        BinOp::Sub => x - y,
                        BinOp::Mul => x * y,
                        BinOp::Div => x / y,
                        BinOp::Mod => x % y,
                    })
                }
            }
        }
    })
}

/// Names an expression mentions (scalars or macros), for ordering scalar
/// initialisation.
pub fn names_in(e: &Expr, out: &mut Vec<String>) {
    match e {
        Expr::Name(id) => out.push(id.name.clone()),
        Expr::Macro { default, .. } => names_in(default, out),
        Expr::RandomRange { lo, hi, .. } => {
            names_in(lo, out);
            names_in(hi, out);
        }
        Expr::Range { begin, incr, .. } => {
            names_in(begin, out);
            names_in(incr, out);
        }
        Expr::Unary { operand, .. } => names_in(operand, out),
        Expr::Binary { lhs, rhs, .. } => {
            names_in(lhs, out);
            names_in(rhs, out);
        }
        _ => {}
    }
}

/// Every `Macro(NAME, default)` inside `e`.
pub fn macros_in(e: &Expr, out: &mut Vec<(String, Expr)>) {
    match e {
        Expr::Macro { name, default, .. } => {
            out.push((name.name.clone(), (**default).clone()));
            macros_in(default, out);
        }
        Expr::RandomRange { lo, hi, .. } => {
            macros_in(lo, out);
            macros_in(hi, out);
        }
        Expr::Range { begin, incr, .. } => {
            macros_in(begin, out);
            macros_in(incr, out);
        }
        Expr::Unary { operand, .. } => macros_in(operand, out),
        Expr::Binary { lhs, rhs, .. } => {
            macros_in(lhs, out);
            macros_in(rhs, out);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spec_lang::ast::{Ident, Span};

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
    fn integer_division_truncates_like_c() {
        let v = Values::new();
        assert_eq!(
            eval(&bin(BinOp::Div, int(7), int(2)), &v),
            Some(Num::Int(3))
        );
        assert_eq!(
            eval(
                &bin(BinOp::Div, Expr::Float(7.0, Span::default()), int(2)),
                &v
            ),
            Some(Num::Real(3.5))
        );
        assert_eq!(eval(&bin(BinOp::Div, int(1), int(0)), &v), None);
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
            Err(ModelError::NotConstant("R".into()))
        );
        assert_eq!(
            to_c(&name("Q"), &env, NameStyle::Runtime, false),
            Err(ModelError::UnknownName("Q".into()))
        );
    }

    #[test]
    fn strings_are_escaped_for_c() {
        assert_eq!(c_string_literal("a\"b\\c"), "\"a\\\"b\\\\c\"");
    }
}
