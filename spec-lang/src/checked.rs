//! The checked spec: what [`crate::check`] proved about a spec, resolved once
//! so no later stage computes it again. Which uses the spec serves (with
//! the located problems of the others), macros with their values, scalars
//! in initialisation order with what changes per call, operand alignments
//! with their defaults applied, and the `-D` overrides already folded into
//! every value. A driver model is built from this and may fail only on
//! facts of the machine.

use crate::ast::*;
use crate::diag::{Diagnostic, Diagnostics};
use crate::eval::{self, EvalError, Value};
use std::collections::BTreeMap;
use std::ops::Deref;

/// What a spec is used for. Each use reads a different part of it: a
/// driver makes every argument itself; a profiling shim forwards the
/// application's own arguments and records values; a checkpoint's region
/// shim forwards them too and also hands the outputs `returns(...)` names
/// back for verifying candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Use {
    /// `tdg gen`, `run`, `explain`, `tune` with a generated driver.
    Driver,
    /// `tdg profile --spec`, `tdg instrument`.
    Profile,
    /// `tdg checkpoint capture --spec`, `run`/`tune` on a spec's checkpoint image.
    Checkpoint,
}

impl Use {
    pub const ALL: [Use; 3] = [Use::Driver, Use::Profile, Use::Checkpoint];

    pub fn name(self) -> &'static str {
        match self {
            Use::Driver => "driver",
            Use::Profile => "profile",
            Use::Checkpoint => "checkpoint",
        }
    }
}

/// A spec that passed the checks of at least one [`Use`], with the values
/// it implies under the given `-D` overrides when it serves a driver.
#[derive(Debug, Clone)]
pub struct CheckedSpec {
    /// The spec as written: a shim and an edit of the text read this. The
    /// values a driver passes for scalars the text leaves without init are
    /// in [`Self::scalars`] (marked `implicit`).
    pub spec: Spec,
    /// Every `Macro(NAME, default)`, first occurrence of each name, in source
    /// order (conflicting defaults are a check error). Like every resolved
    /// fact below, empty unless the spec serves [`Use::Driver`].
    pub macros: Vec<MacroDef>,
    /// Scalar parameters in initialisation order: everything a scalar's value
    /// uses comes before it.
    pub scalars: Vec<ScalarDef>,
    /// Arrays the driver allocates, in parameter order.
    pub operands: Vec<OperandDef>,
    /// The `-D` overrides that were applied (macro or scalar name -> value).
    pub overrides: BTreeMap<String, f64>,
    /// Values of macros and scalars on the first call (per-call scalars have
    /// their first value; RANDOM and strings have none).
    pub values: BTreeMap<String, Value>,
    /// What the spec was accepted with despite leaving it out (a scalar
    /// without init), located; `tdg check`, `run` and `explain` print them.
    /// Empty (no items) when there is nothing to say.
    pub warnings: Diagnostics,
    flop: Option<f64>,
    /// Each use's problems, located; empty for a use the spec serves.
    uses: BTreeMap<Use, Vec<Diagnostic>>,
    file: String,
    src: String,
}

impl CheckedSpec {
    /// Floating-point operations per call from `flop=` (a count, evaluated
    /// in double precision), `None` without the clause.
    pub fn flop_count(&self) -> Option<f64> {
        self.flop
    }

    /// Whether the spec passed every check of `u`.
    pub fn serves(&self, u: Use) -> bool {
        self.problems(u).is_empty()
    }

    /// Why the spec does not serve `u`, located (empty when it does).
    pub fn problems(&self, u: Use) -> &[Diagnostic] {
        self.uses.get(&u).map_or(&[], Vec::as_slice)
    }

    /// Ok when the spec serves `u`; else every problem in its way, rendered
    /// like any spec error (`file:line:col`, the source line, a caret).
    pub fn require(&self, u: Use) -> Result<(), Diagnostics> {
        match self.problems(u) {
            [] => Ok(()),
            items => Err(Diagnostics {
                file: self.file.clone(),
                src: self.src.clone(),
                items: items.to_vec(),
            }),
        }
    }

    /// `self` when it serves `u` ([`Self::require`]), for chaining after a load.
    pub fn for_use(self, u: Use) -> Result<CheckedSpec, Diagnostics> {
        self.require(u).map(|()| self)
    }

    /// The file name the spec was read from, as its diagnostics show it.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The text the spec was parsed from.
    pub fn source(&self) -> &str {
        &self.src
    }

    /// A spec that serves only shims: no driver facts resolved.
    pub(crate) fn signature_only(spec: &Spec, file: &str, src: &str) -> CheckedSpec {
        CheckedSpec {
            spec: spec.clone(),
            macros: Vec::new(),
            scalars: Vec::new(),
            operands: Vec::new(),
            overrides: BTreeMap::new(),
            values: BTreeMap::new(),
            warnings: Diagnostics::new(file, src, Vec::new()),
            flop: None,
            uses: BTreeMap::new(),
            file: file.to_string(),
            src: src.to_string(),
        }
    }

    pub(crate) fn set_uses(&mut self, file: &str, src: &str, uses: BTreeMap<Use, Vec<Diagnostic>>) {
        self.uses = uses;
        self.file = file.to_string();
        self.src = src.to_string();
    }
}

impl Deref for CheckedSpec {
    type Target = Spec;
    fn deref(&self) -> &Spec {
        &self.spec
    }
}

#[derive(Debug, Clone)]
pub struct MacroDef {
    pub name: String,
    pub default: Expr,
    /// The `-D` value if one was given, else the default's.
    pub value: Option<Value>,
    pub overridden: bool,
}

/// How a scalar's value changes from one call to the next.
#[derive(Debug, Clone, PartialEq)]
pub enum PerCall {
    /// The same value on every call.
    Fixed,
    /// `Range(begin, incr)`: `begin`, then advanced by `incr` after each call.
    Range { begin: Expr, incr: Expr },
    /// `RANDOM` (`None`: the element type's default interval) or
    /// `RANDOM(lo, hi)`, redrawn for each call.
    Random { bounds: Option<(Expr, Expr)> },
}

#[derive(Debug, Clone)]
pub struct ScalarDef {
    pub name: String,
    pub ty: CType,
    pub expr: Expr,
    pub per_call: PerCall,
    /// The spec gave no init: `expr` is [`crate::implicit::IMPLICIT_SCALAR`].
    pub implicit: bool,
    /// Value on the first call, converted to the parameter's C type.
    pub value: Option<Value>,
}

impl ScalarDef {
    pub fn is_fixed(&self) -> bool {
        self.per_call == PerCall::Fixed
    }
}

#[derive(Debug, Clone)]
pub struct OperandDef {
    pub name: String,
    /// The parameter's type (`const double*`).
    pub param_ty: CType,
    pub array: ArrayInit,
    /// `align(n)`, else [`DEFAULT_ALIGN`].
    pub align: u64,
    pub misalign: Option<u64>,
    /// Element counts per dimension under the overrides.
    pub dims: Vec<u64>,
}

impl OperandDef {
    /// Element data in bytes (`None` for element types of unknown size).
    pub fn bytes(&self) -> Option<u64> {
        let elem = if self.array.elem.pointers > 0 {
            Some(8)
        } else {
            self.array.elem.base.size_bytes()
        }?;
        self.dims
            .iter()
            .try_fold(elem, |acc, d| acc.checked_mul(*d))
    }
}

/// Resolves a spec that passed the driver's checks under `overrides`.
/// Errors are the ones only the override values can cause (a size that
/// becomes 0, an overflow, a name that is neither macro nor scalar).
pub(crate) fn resolve(
    spec: &Spec,
    overrides: &BTreeMap<String, f64>,
) -> Result<CheckedSpec, EvalError> {
    let values = eval::typed_env(spec, overrides)?;
    let macros = spec
        .macros()
        .into_iter()
        .map(|(name, default)| MacroDef {
            name: name.name.clone(),
            default: default.clone(),
            value: values.get(&name.name).copied(),
            overridden: overrides.contains_key(&name.name),
        })
        .collect();
    let mut scalars = Vec::new();
    for name in scalar_order(spec)? {
        let (Some(p), Some(expr)) = (spec.param(&name), spec.scalar_for(&name)) else {
            continue;
        };
        let per_call = match expr {
            Expr::Range { begin, incr, .. } => PerCall::Range {
                begin: (**begin).clone(),
                incr: (**incr).clone(),
            },
            Expr::Random(_) => PerCall::Random { bounds: None },
            Expr::RandomRange { lo, hi, .. } => PerCall::Random {
                bounds: Some(((**lo).clone(), (**hi).clone())),
            },
            _ => PerCall::Fixed,
        };
        scalars.push(ScalarDef {
            implicit: spec.init_for(&name).is_some_and(|i| i.implicit),
            value: values.get(&name).copied(),
            name,
            ty: p.ty.clone(),
            expr: expr.clone(),
            per_call,
        });
    }
    let mut operands = Vec::new();
    for p in &spec.routine.params {
        let Some(a) = spec.array_for(&p.name.name) else {
            continue;
        };
        let dims = eval::array_dims(a, &values)?;
        // The byte count must fit too: the driver computes it in size_t.
        eval::array_bytes(a, &values)?;
        operands.push(OperandDef {
            name: p.name.name.clone(),
            param_ty: p.ty.clone(),
            array: a.clone(),
            align: a.effective_align(),
            misalign: a.misalign(),
            dims,
        });
    }
    let flop = eval::flop_count(spec, overrides)?;
    Ok(CheckedSpec {
        spec: spec.clone(),
        flop,
        macros,
        scalars,
        operands,
        overrides: overrides.clone(),
        values,
        warnings: Diagnostics::new("", "", Vec::new()),
        uses: BTreeMap::new(),
        file: String::new(),
        src: String::new(),
    })
}

/// Scalar parameter names, each after every scalar its value names;
/// parameter order among independent ones.
fn scalar_order(spec: &Spec) -> Result<Vec<String>, EvalError> {
    let scalars: Vec<(&str, &Expr)> = spec
        .routine
        .params
        .iter()
        .filter_map(|p| Some((p.name.name.as_str(), spec.scalar_for(&p.name.name)?)))
        .collect();
    let is_scalar = |n: &str| scalars.iter().any(|(s, _)| *s == n);
    let mut done: Vec<String> = Vec::new();
    let mut pending = scalars.clone();
    while !pending.is_empty() {
        let before = pending.len();
        pending.retain(|(name, e)| {
            let ready = e
                .names()
                .iter()
                .all(|d| !is_scalar(&d.name) || done.contains(&d.name) || d.name == *name);
            if ready {
                done.push(name.to_string());
            }
            !ready
        });
        if pending.len() == before {
            // `check` rejects cycles; reaching this means it was skipped.
            let names: Vec<&str> = pending.iter().map(|(n, _)| *n).collect();
            return Err(EvalError {
                message: format!(
                    "the values of {} depend on each other in a cycle",
                    names.join(", ")
                ),
                span: Some(pending[0].1.span()),
                hint: Some("break the cycle in init={...}".into()),
            });
        }
    }
    Ok(done)
}

/// The `-D NAME=TEXT` definitions that concern the spec, as values: names
/// of the spec's macros, each text evaluated as an expression. Other names
/// are left to the implementation's compile (`-D NB=64` for a kernel macro).
pub fn spec_overrides(
    spec: &Spec,
    defines: &[(String, String)],
) -> Result<BTreeMap<String, f64>, String> {
    let macros = spec.macros();
    let mut out = BTreeMap::new();
    for (name, text) in defines {
        if macros.iter().any(|(m, _)| m.name == *name) {
            let v = eval::define_value(text)
                .map_err(|e| format!("-D {name}={text}: {e}; give a number or an expression of numbers, e.g. -D {name}=4096"))?;
            out.insert(name.clone(), v);
        }
    }
    Ok(out)
}
