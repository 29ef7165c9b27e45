//! Operands: storage, alignment, fill, and the cache state each one is
//! timed in.

use serde::Serialize;
use spec_lang::ast::{ArrayKind, BaseType, CType, Expr, Fill, FlushMethod, Signedness};
use spec_lang::checked::OperandDef;

use super::error::ModelError;
use super::expr::CheckedExpr;
use crate::cexpr::{self, ExprEnv, NameStyle};

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ElemKind {
    Real,
    Complex,
    Integer,
    Pointer,
    Opaque,
    Void,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CacheState {
    /// Evicted before every timed call (or rotated through working sets).
    Flushed,
    /// Kept cache resident (re-read after any flush, never rotated).
    Warm,
    /// Neither evicted nor re-read on purpose (the reference generator's
    /// "No Flush"): timed in the state its initialisation and the previous
    /// calls leave it. One copy, never rotated; a read flush made for other
    /// operands evicts it too.
    Unflushed,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Storage {
    /// One aligned heap block (Vector, Matrix: column-major).
    Heap,
    /// A row-pointer array and one aligned block per row (Array2D).
    RowPointers,
    /// File-scope static array (SVector, SMatrix).
    Static,
}

#[derive(Debug, Clone, Serialize)]
pub struct OperandModel {
    pub name: String,
    /// Parameter type as the routine receives it, e.g. `const double *`.
    #[serde(serialize_with = "type_text")]
    pub param_type: CType,
    /// Element type, qualifiers dropped.
    #[serde(serialize_with = "type_text")]
    pub elem_type: CType,
    pub elem_kind: ElemKind,
    pub storage: Storage,
    /// The spec's dimensions, evaluated by the driver at run time: rows
    /// and columns for Array2D (rows is the number of blocks); for the
    /// others their product is the elements of the one block.
    pub dims: Vec<CheckedExpr>,
    /// For static storage, the same dimensions as file-scope constants.
    #[serde(skip)]
    pub static_dims: Vec<CheckedExpr>,
    pub align: u64,
    pub misalign: u64,
    pub fill: FillPlan,
    pub cache: CacheState,
    /// The routine may write it (non-const pointee).
    pub is_output: bool,
    /// Elements per block and blocks, when computable (explain).
    #[serde(skip)]
    pub rows_value: Option<i64>,
    #[serde(skip)]
    pub cols_value: Option<i64>,
    /// Element size in bytes when known without a compiler.
    #[serde(skip)]
    pub elem_bytes: Option<u64>,
    pub seed: u64,
}

impl OperandModel {
    /// Evicted (clflush) or rotated through working sets before each call.
    pub fn flushed(&self) -> bool {
        self.cache == CacheState::Flushed
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct FillPlan {
    pub kind: &'static str,
    /// What element `k` (an index in element order) is set to, converted
    /// to the element type; `None` for ZERO (calloc'd storage is already
    /// zero), FILE and the random bytes of an opaque type.
    pub value: Option<FillValue>,
    /// The file whose raw bytes fill the operand, as the spec names it.
    pub file: Option<String>,
    pub text: String,
}

/// One element's value, by the fill and the element type.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum FillValue {
    /// Uniform in [-0.5, 0.5): mixed-sign values keep sums of products
    /// bounded when the routine accumulates across repeated calls.
    RandomReal,
    /// Real and imaginary parts each uniform in [-0.5, 0.5).
    RandomComplex,
    /// A uniform integer in [lo, hi], by the element's signedness.
    RandomInteger {
        lo: i64,
        hi: i64,
    },
    /// Uniform in the spec's [lo, hi], drawn as integers, reals, or a
    /// complex number whose two parts are drawn apart.
    Uniform {
        over: ElemKind,
        lo: CheckedExpr,
        hi: CheckedExpr,
    },
    Constant {
        value: CheckedExpr,
    },
    /// The element's index `k`.
    Index,
}

fn type_text<S: serde::Serializer>(t: &CType, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&t.text())
}

pub fn elem_kind(t: &CType) -> ElemKind {
    if t.pointers > 0 {
        return ElemKind::Pointer;
    }
    match &t.base {
        BaseType::Void => ElemKind::Void,
        BaseType::FloatComplex | BaseType::DoubleComplex => ElemKind::Complex,
        b if b.is_floating() => ElemKind::Real,
        b if b.is_integral() => ElemKind::Integer,
        _ => ElemKind::Opaque,
    }
}

/// Per-operand fill seed: a stable hash of the name, so every working-set
/// copy and the verification copies hold the same data.
pub(super) fn seed_for(name: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in name.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

pub(super) fn build_operand(
    op: &OperandDef,
    env: &ExprEnv,
    flush_method: FlushMethod,
    flush_unmarked: bool,
) -> Result<OperandModel, ModelError> {
    let (name, param_ty, a) = (op.name.as_str(), &op.param_ty, &op.array);
    let elem = &a.elem;
    let elem_t = CType {
        is_const: false,
        ..elem.clone()
    };
    let kind = elem_kind(elem);
    let storage = match a.kind {
        ArrayKind::Vector | ArrayKind::Matrix => Storage::Heap,
        ArrayKind::Array2D => Storage::RowPointers,
        ArrayKind::SVector | ArrayKind::SMatrix => Storage::Static,
    };
    let dims = a
        .dims
        .iter()
        .map(|d| CheckedExpr::runtime(d, env))
        .collect::<Result<Vec<_>, _>>()?;
    let dims_val: Vec<i64> = op.dims.iter().map(|&d| d as i64).collect();
    let (rows_value, cols_value) = match storage {
        Storage::RowPointers => (Some(dims_val[0]), Some(dims_val[1])),
        _ => (
            Some(1),
            dims_val.iter().try_fold(1i64, |acc, d| acc.checked_mul(*d)),
        ),
    };
    let static_dims = if storage == Storage::Static {
        a.dims
            .iter()
            .map(|d| CheckedExpr::new(d, env, NameStyle::Constant))
            .collect::<Result<Vec<_>, _>>()?
    } else {
        Vec::new()
    };

    let align = op.align;
    let misalign = op.misalign.unwrap_or(0);
    // As in the reference generator, only `flush` operands are flushed; an
    // unmarked one is timed as its initialisation and the previous calls
    // leave it ("No Flush"). Flushing off leaves every operand so, except
    // that `warm` ones are still re-read as the spec asks.
    let cache = if a.is_warm() {
        CacheState::Warm
    } else if flush_method != FlushMethod::None && (a.is_flushed() || flush_unmarked) {
        CacheState::Flushed
    } else {
        CacheState::Unflushed
    };

    let fill = build_fill(&elem_t.text(), kind, elem.base.signedness(), &a.fill, env)?;
    let is_output = param_ty.pointers > 0 && !param_ty.is_const;
    let mut param_t = param_ty.clone();
    if param_t.pointers == 0 {
        param_t.pointers = 1;
    }
    Ok(OperandModel {
        name: name.to_string(),
        param_type: param_t,
        elem_type: elem_t,
        elem_kind: kind,
        storage,
        dims,
        static_dims,
        align,
        misalign,
        fill,
        cache,
        is_output,
        rows_value,
        cols_value,
        elem_bytes: elem.base.size_bytes(),
        seed: seed_for(name),
    })
}

/// How the operand's elements are filled. `spec_lang::check` has already
/// matched each fill to its element type and storage.
pub(super) fn build_fill(
    elem_c: &str,
    kind: ElemKind,
    sign: Option<Signedness>,
    fill: &Fill,
    env: &ExprEnv,
) -> Result<FillPlan, ModelError> {
    let checked = |e: &Expr| CheckedExpr::runtime(e, env);
    Ok(match fill {
        Fill::Random(_) => random_fill(elem_c, kind, sign),
        Fill::RandomRange { lo, hi, .. } => {
            let over = match kind {
                ElemKind::Integer | ElemKind::Complex => kind,
                _ => ElemKind::Real,
            };
            FillPlan {
                kind: "random_range",
                value: Some(FillValue::Uniform {
                    over,
                    lo: checked(lo)?,
                    hi: checked(hi)?,
                }),
                file: None,
                text: format!(
                    "pseudo-random, uniform in [{}, {}]",
                    cexpr::describe(lo),
                    cexpr::describe(hi)
                ),
            }
        }
        Fill::Zero(_) => FillPlan {
            kind: "zero",
            value: None,
            file: None,
            text: "zero (calloc'd; pages written before timing so none is lazily zeroed)".into(),
        },
        Fill::Const(e, _) => FillPlan {
            kind: "const",
            value: Some(FillValue::Constant { value: checked(e)? }),
            file: None,
            text: format!("every element {}", cexpr::describe(e)),
        },
        Fill::Seq(_) => FillPlan {
            kind: "seq",
            value: Some(FillValue::Index),
            file: None,
            text: "0, 1, 2, ... in element order".into(),
        },
        Fill::File(path, _) => FillPlan {
            kind: "file",
            value: None,
            file: Some(path.clone()),
            text: format!("raw bytes from {path}"),
        },
    })
}

/// A `RANDOM` fill for the element kind: mixed-sign reals or complex
/// numbers, small integers in the type's sign, doubles over a struct.
fn random_fill(elem_c: &str, kind: ElemKind, sign: Option<Signedness>) -> FillPlan {
    match kind {
        ElemKind::Opaque => FillPlan {
            // Structs of doubles/complex (e.g. an SU(3) matrix) get mixed-sign
            // doubles over their storage; other sizes get random bytes.
            kind: "random_words",
            value: None,
            file: None,
            text: format!(
                "pseudo-random doubles in [-0.5, 0.5) over each {elem_c} (random bytes if its size is not a multiple of 8)"
            ),
        },
        _ => {
            let v = match kind {
                ElemKind::Real => FillValue::RandomReal,
                ElemKind::Complex => FillValue::RandomComplex,
                _ => {
                    let (lo, hi) = match sign {
                        Some(Signedness::Boolean) => (0, 1),
                        Some(Signedness::Unsigned) => (0, 100),
                        _ => (-50, 50),
                    };
                    FillValue::RandomInteger { lo, hi }
                }
            };
            FillPlan {
                kind: "random",
                value: Some(v),
                file: None,
                text: match kind {
                    ElemKind::Real | ElemKind::Complex => {
                        "pseudo-random, uniform in [-0.5, 0.5) (mixed sign)".into()
                    }
                    _ => "pseudo-random small integers".into(),
                },
            }
        }
    }
}
