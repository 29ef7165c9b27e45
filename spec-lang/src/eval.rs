//! Evaluating scalar expressions: the values the driver will pass, the sizes
//! it will allocate and the flop count it will report, for given `-D`
//! overrides.
//!
//! Arithmetic follows C: a value is an integer or a double; `int op int` is
//! integer arithmetic (division truncates toward zero, `%` is the C
//! remainder, overflow is an error rather than a wrap), anything with a double
//! is double arithmetic. A scalar parameter's value is converted to the
//! parameter's C type (an `int` initialised with `1.5` is 1), as the driver's
//! assignment does. The flop formula is evaluated in double precision
//! throughout: it is a count, not C code.

use crate::ast::*;
use crate::diag::{did_you_mean, Diagnostic};
use std::collections::BTreeMap;
use std::fmt;

/// A C arithmetic value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Int(i64),
    Float(f64),
}

impl Value {
    pub fn as_f64(self) -> f64 {
        match self {
            Value::Int(i) => i as f64,
            Value::Float(f) => f,
        }
    }

    /// The value as an integer, if it is one (an integral double counts).
    pub fn as_i64(self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(i),
            Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Some(f as i64),
            Value::Float(_) => None,
        }
    }

    /// Reads an `f64` the way a `-D NAME=v` override is meant: integral
    /// values are integers (so `N/2` truncates as in C), others doubles.
    pub fn from_f64(v: f64) -> Value {
        if v.fract() == 0.0 && v.abs() < 9.0e15 {
            Value::Int(v as i64)
        } else {
            Value::Float(v)
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
        }
    }
}

/// Why an expression has no value.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalError {
    pub message: String,
    /// The sub-expression at fault, if it came from the spec.
    pub span: Option<Span>,
    pub hint: Option<String>,
}

impl EvalError {
    fn at(message: impl Into<String>, span: Span) -> Self {
        EvalError {
            message: message.into(),
            span: Some(span),
            hint: None,
        }
    }

    fn hint(mut self, h: Option<String>) -> Self {
        self.hint = h;
        self
    }

    /// As a diagnostic (for [`crate::Diagnostics`]).
    pub fn to_diagnostic(&self) -> Diagnostic {
        let d = match self.span {
            Some(s) => Diagnostic::new(self.message.clone(), s),
            None => Diagnostic::whole_file(self.message.clone()),
        };
        d.with_hint_opt(self.hint.clone())
    }
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(h) = &self.hint {
            write!(f, " ({h})")?;
        }
        Ok(())
    }
}

impl std::error::Error for EvalError {}

/// Evaluates `expr` with C semantics; names are looked up in `env`.
///
/// `RANDOM`, `RANDOM(lo,hi)` and strings have no single value and are errors;
/// `Range(begin, incr)` evaluates to `begin` (its value on the first call);
/// `Macro(NAME, default)` is `env[NAME]` if present, else `default`.
pub fn eval_value(expr: &Expr, env: &BTreeMap<String, Value>) -> Result<Value, EvalError> {
    eval_in(expr, env, 0)
}

/// [`eval_value`] over plain doubles: integral values in `env` are taken as
/// integers (see [`Value::from_f64`]), so `N/2` with `N = 5` is 2 as in C.
pub fn eval(expr: &Expr, env: &BTreeMap<String, f64>) -> Result<f64, EvalError> {
    let typed: BTreeMap<String, Value> = env
        .iter()
        .map(|(k, v)| (k.clone(), Value::from_f64(*v)))
        .collect();
    eval_value(expr, &typed).map(Value::as_f64)
}

fn eval_in(expr: &Expr, env: &BTreeMap<String, Value>, depth: usize) -> Result<Value, EvalError> {
    if depth > 4 * crate::parser::MAX_DEPTH {
        return Err(EvalError::at("expression nested too deeply", expr.span()));
    }
    Ok(match expr {
        Expr::Int(i, _) => Value::Int(*i),
        Expr::Float(f, _) => Value::Float(*f),
        Expr::Str(_, s) => return Err(EvalError::at("a string has no numeric value", *s)),
        Expr::Name(id) => match env.get(&id.name) {
            Some(v) => *v,
            None => {
                return Err(
                    EvalError::at(format!("`{}` has no value", id.name), id.span)
                        .hint(did_you_mean(&id.name, env.keys().map(String::as_str))),
                )
            }
        },
        Expr::Macro { name, default, .. } => match env.get(&name.name) {
            Some(v) => *v,
            None => eval_in(default, env, depth + 1)?,
        },
        Expr::Random(s) | Expr::RandomRange { span: s, .. } => {
            return Err(EvalError::at(
                "RANDOM has a different value on every call",
                *s,
            ))
        }
        Expr::Range { begin, .. } => eval_in(begin, env, depth + 1)?,
        Expr::Member { span, .. } => {
            return Err(EvalError::at(
                "a struct member has a value only in the application's call",
                *span,
            ))
        }
        Expr::Unary { operand, span, .. } => match eval_in(operand, env, depth + 1)? {
            Value::Int(i) => Value::Int(
                i.checked_neg()
                    .ok_or_else(|| EvalError::at("integer overflow", *span))?,
            ),
            Value::Float(f) => Value::Float(-f),
        },
        Expr::Binary { op, lhs, rhs, span } => {
            let a = eval_in(lhs, env, depth + 1)?;
            let b = eval_in(rhs, env, depth + 1)?;
            binary(*op, a, b, *span)?
        }
    })
}

/// Whether `condition` holds with the names in `env` (C's comparisons:
/// two integers compare exactly, anything with a double as doubles).
pub fn eval_condition(
    condition: &Condition,
    env: &BTreeMap<String, Value>,
) -> Result<bool, EvalError> {
    Ok(match condition {
        Condition::Compare { op, lhs, rhs, .. } => {
            let a = eval_value(lhs, env)?;
            let b = eval_value(rhs, env)?;
            let order = match (a, b) {
                (Value::Int(x), Value::Int(y)) => x.partial_cmp(&y),
                _ => a.as_f64().partial_cmp(&b.as_f64()),
            };
            let Some(order) = order else {
                return Ok(*op == CmpOp::Ne);
            };
            match op {
                CmpOp::Eq => order.is_eq(),
                CmpOp::Ne => order.is_ne(),
                CmpOp::Lt => order.is_lt(),
                CmpOp::Le => order.is_le(),
                CmpOp::Gt => order.is_gt(),
                CmpOp::Ge => order.is_ge(),
            }
        }
        Condition::All(parts, _) => {
            for c in parts {
                if !eval_condition(c, env)? {
                    return Ok(false);
                }
            }
            true
        }
        Condition::Any(parts, _) => {
            for c in parts {
                if eval_condition(c, env)? {
                    return Ok(true);
                }
            }
            false
        }
    })
}

fn binary(op: BinOp, a: Value, b: Value, span: Span) -> Result<Value, EvalError> {
    use Value::*;
    let overflow = || {
        EvalError::at(format!("integer overflow in `{}`", op.symbol()), span)
            .hint(Some("the C driver computes this in 64-bit integers".into()))
    };
    Ok(match (a, b) {
        (Int(x), Int(y)) => Int(match op {
            BinOp::Add => x.checked_add(y).ok_or_else(overflow)?,
            BinOp::Sub => x.checked_sub(y).ok_or_else(overflow)?,
            BinOp::Mul => x.checked_mul(y).ok_or_else(overflow)?,
            BinOp::Div | BinOp::Mod if y == 0 => {
                return Err(EvalError::at("division by zero", span).hint(Some(
                    "the divisor is 0 with these values; change it or its macro default".into(),
                )))
            }
            BinOp::Div => x.checked_div(y).ok_or_else(overflow)?,
            BinOp::Mod => x.checked_rem(y).ok_or_else(overflow)?,
        }),
        _ => {
            let (x, y) = (a.as_f64(), b.as_f64());
            let r = match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
                BinOp::Div => x / y,
                BinOp::Mod => {
                    return Err(EvalError::at("`%` needs integer operands", span)
                        .hint(Some("as in C, `%` is not defined for doubles".into())))
                }
            };
            if !r.is_finite() {
                return Err(EvalError::at("result is not a finite number", span));
            }
            Float(r)
        }
    })
}

/// Every macro named in the spec with its value: the `-D` override if given,
/// else its default.
pub fn macro_values(
    spec: &Spec,
    overrides: &BTreeMap<String, f64>,
) -> Result<BTreeMap<String, Value>, EvalError> {
    Ok(typed_env(spec, overrides)?
        .into_iter()
        .filter(|(k, _)| spec.macros().iter().any(|(n, _)| n.name == *k))
        .collect())
}

/// Every scalar parameter's value on the first call, as `f64` (see
/// [`typed_env`] for what is included).
pub fn scalar_values(
    spec: &Spec,
    overrides: &BTreeMap<String, f64>,
) -> Result<BTreeMap<String, f64>, EvalError> {
    let env = typed_env(spec, overrides)?;
    Ok(spec
        .init
        .iter()
        .filter(|i| matches!(i.value, InitValue::Scalar(_)))
        .filter_map(|i| {
            env.get(&i.name.name)
                .map(|v| (i.name.name.clone(), v.as_f64()))
        })
        .collect())
}

/// Values of every macro and every scalar init with a single value on the
/// first call, converted to the parameter's C type.
///
/// Included: literals, expressions, `Macro` (override or default) and
/// `Range(begin, incr)` (its `begin`). Left out: `RANDOM`, `RANDOM(lo,hi)`
/// and strings, which have no single numeric value. `overrides` may name
/// macros (`-D MS=100`) or scalar parameters (`-D alpha=2`); any other name is
/// an error with a suggestion.
pub fn typed_env(
    spec: &Spec,
    overrides: &BTreeMap<String, f64>,
) -> Result<BTreeMap<String, Value>, EvalError> {
    let macros = spec.macros();
    if let Some(k) = overrides
        .keys()
        .find(|k| !macros.iter().any(|(n, _)| n.name == **k) && spec.scalar_for(k).is_none())
    {
        return Err(unknown_override(spec, &macros, k));
    }
    let mut env: BTreeMap<String, Value> = BTreeMap::new();
    for (k, v) in overrides {
        let v = Value::from_f64(*v);
        // Range-checked like a value in the file; otherwise kept as given, so
        // `-D N=2.5` for an integer size is still reported as not integral.
        convert(v, spec.param(k).map(|p| &p.ty), k, Span::default()).map_err(|mut e| {
            e.span = None;
            e
        })?;
        env.insert(k.clone(), v);
    }
    let pending = definitions(spec, &macros, &env);
    settle(pending, env)
}

/// `-D k=...` names neither a macro nor a scalar of `spec`.
fn unknown_override(spec: &Spec, macros: &[(&Ident, &Expr)], k: &str) -> EvalError {
    let candidates: Vec<&str> = macros
        .iter()
        .map(|(n, _)| n.name.as_str())
        .chain(
            spec.init
                .iter()
                .filter(|i| matches!(i.value, InitValue::Scalar(_)))
                .map(|i| i.name.name.as_str()),
        )
        .collect();
    EvalError {
        message: format!("`-D {k}=...` names no macro or scalar of this spec"),
        span: None,
        hint: did_you_mean(k, candidates.iter().copied()).or_else(|| {
            Some(if candidates.is_empty() {
                "this spec has no macros".into()
            } else {
                format!("known: {}", candidates.join(", "))
            })
        }),
    }
}

/// A name to settle, its definition and the parameter type it converts to.
type Definition<'s> = (&'s str, &'s Expr, Option<&'s CType>);

/// The macros' defaults and the scalar inits with a single value that
/// `env` does not already hold.
fn definitions<'s>(
    spec: &'s Spec,
    macros: &[(&'s Ident, &'s Expr)],
    env: &BTreeMap<String, Value>,
) -> Vec<Definition<'s>> {
    let mut pending: Vec<Definition> = Vec::new();
    for (name, default) in macros {
        if !env.contains_key(&name.name) {
            pending.push((name.name.as_str(), default, None));
        }
    }
    for init in &spec.init {
        if let InitValue::Scalar(e) = &init.value {
            if env.contains_key(&init.name.name) {
                continue;
            }
            if matches!(
                e,
                Expr::Random(_) | Expr::RandomRange { .. } | Expr::Str(..)
            ) {
                continue;
            }
            let ty = spec.param(&init.name.name).map(|p| &p.ty);
            pending.push((init.name.name.as_str(), e, ty));
        }
    }
    pending
}

/// Evaluates the `pending` definitions into `env` to a fixed point, so that
/// order in the file does not matter (`lda=M;` may come before
/// `M=Macro(MS,72);`). Each pass settles at least one name or stops; cycles
/// are a check error.
fn settle(
    mut pending: Vec<Definition>,
    mut env: BTreeMap<String, Value>,
) -> Result<BTreeMap<String, Value>, EvalError> {
    loop {
        let before = pending.len();
        let mut last_err = None;
        pending.retain(|(name, e, ty)| {
            if env.contains_key(*name) {
                return false;
            }
            match eval_value(e, &env).and_then(|v| convert(v, *ty, name, e.span())) {
                Ok(v) => {
                    env.insert(name.to_string(), v);
                    false
                }
                Err(err) => {
                    last_err = Some(err);
                    true
                }
            }
        });
        if pending.is_empty() {
            break;
        }
        if pending.len() == before {
            return Err(last_err.expect("a pending entry failed"));
        }
    }
    Ok(env)
}

/// C's assignment conversion to the parameter type.
///
/// A value outside an integer type's range is an error: C would wrap it
/// silently (`const int N=3000000000;` passes a negative N), while sizes
/// here were computed from the unwrapped value.
fn convert(v: Value, ty: Option<&CType>, name: &str, span: Span) -> Result<Value, EvalError> {
    match ty {
        Some(t) if t.pointers == 0 && t.base.is_integral() => {
            let i = match v {
                Value::Int(i) => i as i128,
                Value::Float(f) => f.trunc() as i128,
            };
            let (lo, hi) = int_range(&t.base);
            if i < lo || i > hi {
                return Err(EvalError::at(
                    format!(
                        "`{name}` is a `{}`: {} does not fit (it holds {lo} to {hi})",
                        t.text(),
                        v.as_f64()
                    ),
                    span,
                )
                .hint(Some(
                    "use a wider type in the prototype (long, size_t) or a smaller value".into(),
                )));
            }
            Ok(Value::Int(i as i64))
        }
        Some(t) if t.pointers == 0 && t.base.is_floating() => Ok(Value::Float(v.as_f64())),
        _ => Ok(v),
    }
}

/// Range of a C integer type on x86-64 Linux (LP64, signed `char`), capped
/// at what the evaluator's 64-bit integers hold.
pub(crate) fn int_range(b: &BaseType) -> (i128, i128) {
    use BaseType::*;
    let signed = |bits: u32| (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1);
    let unsigned = |bits: u32| (0, ((1i128 << bits) - 1).min(i64::MAX as i128));
    match b {
        Bool => (0, 1),
        Char | SignedChar | Int8 => signed(8),
        UnsignedChar | UInt8 => unsigned(8),
        Short | Int16 => signed(16),
        UnsignedShort | UInt16 => unsigned(16),
        Int | Int32 => signed(32),
        UnsignedInt | UInt32 => unsigned(32),
        UnsignedLong | UnsignedLongLong | SizeT | UInt64 => unsigned(64),
        _ => signed(64),
    }
}

/// Element counts along each dimension of an array init (`[n]` or
/// `[rows, cols]`), each a positive integer.
pub fn array_dims(a: &ArrayInit, env: &BTreeMap<String, Value>) -> Result<Vec<u64>, EvalError> {
    a.dims
        .iter()
        .map(|d| {
            let v = eval_value(d, env)?;
            match v {
                Value::Int(i) if i > 0 => Ok(i as u64),
                Value::Int(i) => Err(EvalError::at(
                    format!("size is {i}; it must be at least 1"),
                    d.span(),
                )),
                Value::Float(f) => Err(EvalError::at(
                    format!("size is {f}, not an integer"),
                    d.span(),
                )),
            }
        })
        .collect()
}

/// Total element count of an array init.
pub fn array_elems(a: &ArrayInit, env: &BTreeMap<String, Value>) -> Result<u64, EvalError> {
    array_dims(a, env)?
        .into_iter()
        .try_fold(1u64, |acc, d| acc.checked_mul(d))
        .ok_or_else(|| EvalError::at("array size overflows 64 bits", a.span))
}

/// Bytes of element data (`None` for element types of unknown size, such as
/// a typedef from an include). Row pointers of `Array2D` are not counted.
pub fn array_bytes(a: &ArrayInit, env: &BTreeMap<String, Value>) -> Result<Option<u64>, EvalError> {
    let elem = if a.elem.pointers > 0 {
        Some(8)
    } else {
        a.elem.base.size_bytes()
    };
    let n = array_elems(a, env)?;
    match elem {
        Some(e) => n
            .checked_mul(e)
            .map(Some)
            .ok_or_else(|| EvalError::at("array size in bytes overflows 64 bits", a.span)),
        None => Ok(None),
    }
}

/// The flop count of one call, `None` without a `flop=` clause. Evaluated in
/// double precision (a count, not C code: `N*(N+1)/2` stays exact).
pub fn flop_count(
    spec: &Spec,
    overrides: &BTreeMap<String, f64>,
) -> Result<Option<f64>, EvalError> {
    let Some(flop) = &spec.flop else {
        return Ok(None);
    };
    let env: BTreeMap<String, Value> = typed_env(spec, overrides)?
        .into_iter()
        .map(|(k, v)| (k, Value::Float(v.as_f64())))
        .collect();
    eval_value(&flop.expr, &env).map(|v| Some(v.as_f64()))
}

/// Parses a `NAME=VALUE` command-line definition (`-D MS=100`). The value is
/// a number or an expression of numbers (`-D MS=2*64`).
pub fn parse_define(s: &str) -> Result<(String, f64), String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not NAME=VALUE (e.g. -D MS=100)"))?;
    let name = name.trim();
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(format!(
            "`{name}` is not a macro name (letters, digits, `_`)"
        ));
    }
    let v = define_value(value).map_err(|e| format!("value of {name}: {e}"))?;
    Ok((name.to_string(), v))
}

/// The value of a `-D NAME=TEXT` definition: a number or an expression of
/// numbers. The one reading of `-D` text, for `tdg check` and the driver
/// model alike.
pub fn define_value(text: &str) -> Result<f64, String> {
    let expr = crate::parser::parse_expr(text, 0).map_err(|d| d.message)?;
    eval(&expr, &BTreeMap::new()).map_err(|e| e.to_string())
}
