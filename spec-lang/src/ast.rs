//! Typed syntax tree of a `.spec` file.
//!
//! Every node that a diagnostic may point at carries a [`Span`]. Spans compare
//! equal unconditionally so that `parse(format(ast)) == ast` holds: formatting
//! moves text around, but it must never change meaning.

use serde::{Deserialize, Serialize};

/// Byte range in the source text. Equality ignores the positions on purpose
/// (see the module docs); use `start`/`end` directly when positions matter.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl PartialEq for Span {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for Span {}

impl Span {
    pub fn new(start: usize, end: usize) -> Self {
        Span { start, end }
    }
}

/// An identifier with where it was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// One entry of `returns(...)`: a pointer parameter the routine writes (or
/// the routine's name, for its return value), with the number of elements
/// written when the spec gives it (`returns(C[ldc*n])`). The name's fields
/// are inline so that an output reads like the [`Ident`] it names.
///
/// With a member path the output is what the routine writes through a
/// struct it is handed: `returns(s->ptr[s->nblock], s->origPtr)` names the
/// block `s->ptr` points to and the member `s->origPtr` itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Output {
    /// The parameter (or the routine's name) the output starts from.
    pub name: String,
    /// Where the name is written.
    pub span: Span,
    /// `->ptr`, `.n`, ...: members reached from parameter `name`; empty
    /// when the output is the block the parameter itself points to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<MemberStep>,
    /// `[count]`: elements, from the routine's integer parameters (and
    /// integer members reached from its pointer parameters).
    pub count: Option<Expr>,
}

impl Output {
    /// The output as written, without its count: `C`, `s->ptr`.
    pub fn text(&self) -> String {
        member_path_text(&self.name, &self.path)
    }
}

/// One step of a member path: `->member` or `.member`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberStep {
    /// `->` (through a pointer) rather than `.`.
    pub arrow: bool,
    pub member: Ident,
    /// The operator and the member's name.
    pub span: Span,
}

/// `s->cfg.n`: a root name followed by its member steps, as C spells it.
pub fn member_path_text(root: &str, path: &[MemberStep]) -> String {
    let mut s = root.to_string();
    for step in path {
        s.push_str(if step.arrow { "->" } else { "." });
        s.push_str(&step.member.name);
    }
    s
}

/// A whole spec file, clauses in canonical order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    /// `include=` clauses: C lines copied verbatim to the top of the driver
    /// (e.g. `#include "su3.h"` or a typedef).
    pub includes: Vec<Include>,
    /// `lang=c` (default) or `lang=fortran`.
    pub lang: Lang,
    pub routine: Routine,
    /// `init={...}` entries in source order.
    pub init: Vec<Init>,
    /// `returns(A, C)`: outputs to compare against the reference body, and
    /// on a checkpoint image against the application's own code.
    pub returns: Vec<Output>,
    /// `record=m, n, k;`: the parameters a profile records per call, in
    /// this order (instead of those that size the operands first).
    #[serde(default)]
    pub record: Option<RecordClause>,
    /// `flop="..."`.
    pub flop: Option<Flop>,
    pub timer: Option<TimerClause>,
    pub checkpoint: Option<CheckpointClause>,
    /// `tune={...}`: roles and constraints of the kernel's tuned macros.
    #[serde(default)]
    pub tune: Option<TuneClause>,
}

/// `record=m, n, k, lda;`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordClause {
    pub names: Vec<Ident>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Include {
    pub text: String,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Lang {
    #[default]
    C,
    /// Arguments passed by reference, symbol name lower-case with a trailing `_`.
    Fortran,
}

/// `routine=RET NAME(PARAMS);` or `routine=RET NAME(PARAMS) { body }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Routine {
    pub ret: CType,
    pub name: Ident,
    pub params: Vec<Param>,
    /// Reference implementation, the C text between the outer braces.
    pub body: Option<Body>,
    pub span: Span,
}

impl Routine {
    /// The parameters' names, in order.
    pub fn param_names(&self) -> impl Iterator<Item = &str> + '_ {
        self.params.iter().map(|p| p.name.name.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Body {
    pub text: String,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Param {
    pub name: Ident,
    pub ty: CType,
}

/// A C type as written in a prototype: qualifiers, base, pointer levels.
///
/// `const double* A` is `{is_const: true, base: Double, pointers: 1}`: the
/// `const` belongs to the pointee, as in C. `const int M` has `pointers: 0`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CType {
    pub is_const: bool,
    pub base: BaseType,
    /// Number of `*`.
    pub pointers: u8,
    pub span: Span,
}

impl CType {
    pub fn is_pointer(&self) -> bool {
        self.pointers > 0
    }
}

/// The values an integer type holds, for code that fills or records them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Signedness {
    /// Negative values too (`char` counts: it is signed on the targets tdg
    /// supports).
    Signed,
    Unsigned,
    /// `_Bool`: 0 or 1.
    Boolean,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BaseType {
    Void,
    Char,
    SignedChar,
    UnsignedChar,
    Short,
    UnsignedShort,
    Int,
    UnsignedInt,
    Long,
    UnsignedLong,
    LongLong,
    UnsignedLongLong,
    Float,
    Double,
    LongDouble,
    /// `float _Complex`
    FloatComplex,
    /// `double _Complex`
    DoubleComplex,
    SizeT,
    PtrdiffT,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Bool,
    /// `struct NAME`: opaque unless an `include=` defines it.
    Struct(String),
    /// A typedef name introduced by an `include=` clause.
    Named(String),
}

impl BaseType {
    /// Every type C or its standard headers define, in declaration order:
    /// all but a struct's or a typedef's name.
    pub const BUILTIN: &'static [BaseType] = &[
        BaseType::Void,
        BaseType::Char,
        BaseType::SignedChar,
        BaseType::UnsignedChar,
        BaseType::Short,
        BaseType::UnsignedShort,
        BaseType::Int,
        BaseType::UnsignedInt,
        BaseType::Long,
        BaseType::UnsignedLong,
        BaseType::LongLong,
        BaseType::UnsignedLongLong,
        BaseType::Float,
        BaseType::Double,
        BaseType::LongDouble,
        BaseType::FloatComplex,
        BaseType::DoubleComplex,
        BaseType::SizeT,
        BaseType::PtrdiffT,
        BaseType::Int8,
        BaseType::Int16,
        BaseType::Int32,
        BaseType::Int64,
        BaseType::UInt8,
        BaseType::UInt16,
        BaseType::UInt32,
        BaseType::UInt64,
        BaseType::Bool,
    ];

    /// The C spelling, e.g. `unsigned long`, `double _Complex`, `struct node`.
    pub fn c_name(&self) -> String {
        use BaseType::*;
        match self {
            Void => "void".into(),
            Char => "char".into(),
            SignedChar => "signed char".into(),
            UnsignedChar => "unsigned char".into(),
            Short => "short".into(),
            UnsignedShort => "unsigned short".into(),
            Int => "int".into(),
            UnsignedInt => "unsigned int".into(),
            Long => "long".into(),
            UnsignedLong => "unsigned long".into(),
            LongLong => "long long".into(),
            UnsignedLongLong => "unsigned long long".into(),
            Float => "float".into(),
            Double => "double".into(),
            LongDouble => "long double".into(),
            FloatComplex => "float _Complex".into(),
            DoubleComplex => "double _Complex".into(),
            SizeT => "size_t".into(),
            PtrdiffT => "ptrdiff_t".into(),
            Int8 => "int8_t".into(),
            Int16 => "int16_t".into(),
            Int32 => "int32_t".into(),
            Int64 => "int64_t".into(),
            UInt8 => "uint8_t".into(),
            UInt16 => "uint16_t".into(),
            UInt32 => "uint32_t".into(),
            UInt64 => "uint64_t".into(),
            Bool => "_Bool".into(),
            Struct(n) => format!("struct {n}"),
            Named(n) => n.clone(),
        }
    }

    /// How an integer type's values range; `None` for every other type.
    pub fn signedness(&self) -> Option<Signedness> {
        use BaseType::*;
        match self {
            Char | SignedChar | Short | Int | Long | LongLong | PtrdiffT | Int8 | Int16 | Int32
            | Int64 => Some(Signedness::Signed),
            UnsignedChar | UnsignedShort | UnsignedInt | UnsignedLong | UnsignedLongLong
            | SizeT | UInt8 | UInt16 | UInt32 | UInt64 => Some(Signedness::Unsigned),
            Bool => Some(Signedness::Boolean),
            _ => None,
        }
    }

    pub fn is_integral(&self) -> bool {
        self.signedness().is_some()
    }

    pub fn is_floating(&self) -> bool {
        use BaseType::*;
        matches!(
            self,
            Float | Double | LongDouble | FloatComplex | DoubleComplex
        )
    }

    /// Size in bytes on LP64 x86-64, `None` for opaque/typedef types.
    pub fn size_bytes(&self) -> Option<u64> {
        use BaseType::*;
        Some(match self {
            Void => return None,
            Char | SignedChar | UnsignedChar | Int8 | UInt8 | Bool => 1,
            Short | UnsignedShort | Int16 | UInt16 => 2,
            Int | UnsignedInt | Int32 | UInt32 | Float => 4,
            Long | UnsignedLong | LongLong | UnsignedLongLong | SizeT | PtrdiffT | Int64
            | UInt64 | Double | FloatComplex => 8,
            LongDouble | DoubleComplex => 16,
            Struct(_) | Named(_) => return None,
        })
    }
}

/// One `name=value;` entry of `init={...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Init {
    pub name: Ident,
    pub value: InitValue,
    pub span: Span,
    /// Not written in the spec: the value tdg gives a scalar parameter the
    /// spec leaves without an init (see [`crate::implicit`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub implicit: bool,
}

// Unboxed on purpose: a spec has a handful of entries, and other crates
// match on `InitValue::Array(a)` directly.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum InitValue {
    Scalar(Expr),
    Array(ArrayInit),
}

/// Scalar and size expressions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Expr {
    Int(i64, Span),
    Float(f64, Span),
    Str(String, Span),
    Name(Ident),
    /// `Macro(NAME, default)`: a `-D NAME=...` at build time overrides the default.
    Macro {
        name: Ident,
        default: Box<Expr>,
        span: Span,
    },
    /// `RANDOM`: a fresh pseudo-random value for each call.
    Random(Span),
    /// `RANDOM(lo, hi)` as a scalar: uniform in [lo, hi] for each call.
    RandomRange {
        lo: Box<Expr>,
        hi: Box<Expr>,
        span: Span,
    },
    /// `Range(begin, incr)`: `begin` on the first call, advanced by `incr` after each call.
    Range {
        begin: Box<Expr>,
        incr: Box<Expr>,
        span: Span,
    },
    Unary {
        op: UnaryOp,
        operand: Box<Expr>,
        span: Span,
    },
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
        span: Span,
    },
    /// `s->nblock`: an integer member reached from a pointer parameter.
    /// Only an output's count may use one: the interposer reads it from
    /// the call's own arguments.
    Member {
        root: Ident,
        path: Vec<MemberStep>,
        span: Span,
    },
}

impl Expr {
    /// `3`, `-1.5`: a number, negated any number of times, and nothing else.
    pub fn is_number_literal(&self) -> bool {
        match self {
            Expr::Int(..) | Expr::Float(..) => true,
            Expr::Unary { operand, .. } => operand.is_number_literal(),
            _ => false,
        }
    }

    pub fn span(&self) -> Span {
        match self {
            Expr::Int(_, s) | Expr::Float(_, s) | Expr::Str(_, s) | Expr::Random(s) => *s,
            Expr::Name(id) => id.span,
            Expr::Macro { span, .. }
            | Expr::RandomRange { span, .. }
            | Expr::Range { span, .. }
            | Expr::Unary { span, .. }
            | Expr::Binary { span, .. }
            | Expr::Member { span, .. } => *span,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum UnaryOp {
    Neg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
        }
    }
}

/// What a tuned macro is to the machine model of `tdg tune` (Yotov et
/// al.'s parameters of a blocked matrix multiply).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TuneRole {
    /// The cache block's edge (NB).
    Tile,
    /// The register tile's rows of the result (MU).
    Rows,
    /// The register tile's columns of the result (NU).
    Cols,
    /// The unrolling of the loop over the shared dimension (KU).
    KUnroll,
}

/// Which extent of the result's register tile is unit-stride in memory
/// (and so the one the compiler vectorises).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TuneLayout {
    /// A column is contiguous (Fortran, BLAS): the tile's rows.
    ColMajor,
    /// A row is contiguous (C arrays): the tile's columns.
    RowMajor,
}

/// `tune={ NB=tile; MU=rows; NU=cols; constraint="NB % MU == 0"; };`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneClause {
    /// Each named macro with its role, in source order.
    pub roles: Vec<(Ident, TuneRole)>,
    /// `layout=row_major;` or `layout=col_major;`.
    pub layout: Option<TuneLayout>,
    pub constraints: Vec<Constraint>,
    pub span: Span,
}

/// A condition every configuration `tdg tune` builds must meet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Constraint {
    /// As written (inside the quotes, or on the command line).
    pub text: String,
    pub condition: Condition,
}

/// Comparisons of expressions joined by `&&` and `||`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Condition {
    Compare {
        op: CmpOp,
        lhs: Expr,
        rhs: Expr,
        span: Span,
    },
    /// Every one holds (`&&`).
    All(Vec<Condition>, Span),
    /// At least one holds (`||`).
    Any(Vec<Condition>, Span),
}

impl Condition {
    pub fn span(&self) -> Span {
        match self {
            Condition::Compare { span, .. } | Condition::All(_, span) | Condition::Any(_, span) => {
                *span
            }
        }
    }

    /// Every name the condition reads, in order of appearance.
    pub fn names(&self) -> Vec<Ident> {
        let mut out: Vec<Ident> = Vec::new();
        let mut visit = |e: &Expr| {
            e.walk(&mut |x| {
                if let Expr::Name(id) = x {
                    if !out.iter().any(|o| o.name == id.name) {
                        out.push(id.clone());
                    }
                }
            })
        };
        fn each<'c>(c: &'c Condition, f: &mut dyn FnMut(&'c Expr)) {
            match c {
                Condition::Compare { lhs, rhs, .. } => {
                    f(lhs);
                    f(rhs);
                }
                Condition::All(v, _) | Condition::Any(v, _) => v.iter().for_each(|c| each(c, f)),
            }
        }
        each(self, &mut visit);
        out
    }
}

/// A comparison operator of a [`Condition`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

/// An operand allocated by the driver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArrayInit {
    pub kind: ArrayKind,
    /// Element type (the base of the parameter's pointer type, usually).
    pub elem: CType,
    /// `[n]` for vectors, `[rows, cols]` for matrices and `Array2D`.
    pub dims: Vec<Expr>,
    pub fill: Fill,
    pub attrs: Vec<Attr>,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArrayKind {
    /// `Vector(type, fill, attrs, n)`: heap, contiguous.
    Vector,
    /// `Matrix(type, rows, cols, fill, attrs)`: heap, contiguous, column-major.
    Matrix,
    /// `Array2D(type, rows, cols, fill, attrs)`: pointer-to-pointer, one row per pointer.
    Array2D,
    /// `SVector(...)`: static storage, same arguments as `Vector`.
    SVector,
    /// `SMatrix(...)`: static storage, same arguments as `Matrix`.
    SMatrix,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Fill {
    /// Pseudo-random values, mixed sign for signed types (keeps accumulations finite).
    Random(Span),
    /// Uniform in [lo, hi].
    RandomRange {
        lo: Expr,
        hi: Expr,
        span: Span,
    },
    Zero(Span),
    Const(Expr, Span),
    /// 0, 1, 2, ... in element order.
    Seq(Span),
    /// Raw bytes recorded from the application.
    File(String, Span),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Attr {
    /// Evicted from cache before each timed call.
    Flush(Span),
    /// Kept cache-resident before each timed call (re-touched after any flush).
    Warm(Span),
    /// Aligned to n bytes.
    Align(u64, Span),
    /// Never aligned to m bytes (while still aligned to `align`).
    Misalign(u64, Span),
    /// Every page touched before timing even though the fill does not write it.
    Touch(Span),
}

impl Attr {
    pub fn span(&self) -> Span {
        match self {
            Attr::Flush(s) | Attr::Warm(s) | Attr::Touch(s) => *s,
            Attr::Align(_, s) | Attr::Misalign(_, s) => *s,
        }
    }
}

/// `flop="2*M*N*K+M*N"`: the raw string and its parsed form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flop {
    pub text: String,
    pub expr: Expr,
    pub span: Span,
}

/// A routine's code is placed relative to boundaries of this many bytes
/// (`code_offset` below; the driver's tdg_code_place.S aligns to it).
pub const CODE_PAGE: u32 = 4096;

/// Bytes past a [`CODE_PAGE`] boundary where the routine's code starts:
/// the routine's address modulo 4096 in the application. The range is
/// checked here, once, for the spec's `code_offset=` and the command line's
/// `--code-offset` alike; every holder of a `CodeOffset` may rely on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "u32", into = "u32")]
pub struct CodeOffset(u32);

impl CodeOffset {
    /// What to write instead of an offset outside a page.
    pub const HINT: &'static str = "write the routine's address modulo 4096 in the application, 0 to 4095 (`nm APP | grep ROUTINE`), e.g. 1616";

    /// `bytes` when it is within a page.
    pub fn new(bytes: i64) -> Option<CodeOffset> {
        (0..i64::from(CODE_PAGE))
            .contains(&bytes)
            .then_some(CodeOffset(bytes as u32))
    }

    pub fn get(self) -> u32 {
        self.0
    }
}

impl TryFrom<u32> for CodeOffset {
    type Error = String;
    fn try_from(bytes: u32) -> Result<Self, String> {
        CodeOffset::new(i64::from(bytes))
            .ok_or_else(|| format!("{bytes} is not an offset within a page; {}", Self::HINT))
    }
}

impl From<CodeOffset> for u32 {
    fn from(o: CodeOffset) -> u32 {
        o.0
    }
}

impl std::str::FromStr for CodeOffset {
    type Err = String;
    /// Decimal or `0x` hexadecimal, as the spec writes it.
    fn from_str(text: &str) -> Result<Self, String> {
        crate::number::parse_int(text)
            .and_then(CodeOffset::new)
            .ok_or_else(|| format!("`{text}` is not an offset within a page; {}", Self::HINT))
    }
}

impl std::fmt::Display for CodeOffset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The most threads a spec or the command line may ask for: one per CPU of
/// the largest affinity mask the C library describes (`CPU_SETSIZE`).
pub const MAX_THREADS: u32 = 1024;

/// `timer={ method=cycle; samples=7; select=min; flush=read; flush_size=L2; min_interval=1ms;
/// min_time=100ms; max_time=250ms; stable=0.5%; code_offset=0x650; threads=2; };`
/// Every field is optional; the command line overrides what is set here.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TimerClause {
    pub method: Option<TimerMethod>,
    pub samples: Option<u32>,
    pub select: Option<Selection>,
    pub flush: Option<FlushMethod>,
    pub flush_size: Option<FlushSize>,
    /// Minimum timed interval in nanoseconds.
    pub min_interval_ns: Option<u64>,
    /// The sampling budget: samples spread over at least `min_time_ms`,
    /// stopped (and the figure marked unstable) at `max_time_ms` unless the
    /// halves of the run agree within `stable_pct` per cent first.
    pub min_time_ms: Option<u64>,
    pub max_time_ms: Option<u64>,
    pub stable_pct: Option<f64>,
    /// Bytes past a 4096-byte boundary where the routine's code starts in
    /// the driver: its address modulo 4096 in the application.
    pub code_offset: Option<CodeOffset>,
    /// Threads the routine runs with: the team size the driver sets for
    /// OpenMP (and exports to other runtimes), each thread on its own CPU.
    pub threads: Option<u32>,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimerMethod {
    /// CLOCK_MONOTONIC_RAW.
    Wall,
    /// Serialised TSC read.
    Cycle,
    /// CLOCK_PROCESS_CPUTIME_ID.
    Cpu,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Selection {
    Min,
    Median,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FlushMethod {
    /// Read a buffer larger than the target cache.
    Read,
    /// `clflush`/`clflushopt` over the flushed operands' lines.
    Clflush,
    /// No flushing at all (every operand stays warm).
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FlushSize {
    /// A cache level: 1, 2, 3 (per sysfs, or the probe's effective size).
    Level(u8),
    /// The last-level cache.
    Llc,
    /// Explicit size in KiB.
    KiB(u64),
}

/// `checkpoint="image"` or `checkpoint={ image="dir"; mode=delayed(2); };`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointClause {
    pub image: String,
    pub mode: CheckpointMode,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CheckpointMode {
    Immediate,
    /// Checkpoint this many calls/iterations before the timed one.
    Delayed(u32),
}

// ---------------------------------------------------------------------------
// Lookups used by the checker, the driver generator and the tools.

impl Spec {
    /// The routine parameter called `name`.
    pub fn param(&self, name: &str) -> Option<&Param> {
        self.routine.params.iter().find(|p| p.name.name == name)
    }

    /// The (first) `init` entry for `name`.
    pub fn init_for(&self, name: &str) -> Option<&Init> {
        self.init.iter().find(|i| i.name.name == name)
    }

    /// The scalar value expression of `name`, if its init is a scalar.
    pub fn scalar_for(&self, name: &str) -> Option<&Expr> {
        match &self.init_for(name)?.value {
            InitValue::Scalar(e) => Some(e),
            InitValue::Array(_) => None,
        }
    }

    /// How many elements `output` holds, as an expression of the call's
    /// arguments: the count written with it, or else the product of its
    /// allocation's sizes (`Vector` and `Matrix`: one contiguous block).
    /// None without either, and for an `Array2D` (one block per row).
    pub fn output_count(&self, output: &Output) -> Option<Expr> {
        if let Some(count) = &output.count {
            return Some(count.clone());
        }
        let a = self.array_for(&output.name)?;
        if a.kind == ArrayKind::Array2D {
            return None;
        }
        a.dims.iter().cloned().reduce(|lhs, rhs| Expr::Binary {
            op: BinOp::Mul,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
            span: a.span,
        })
    }

    /// The array init of `name`, if it is allocated by the driver.
    pub fn array_for(&self, name: &str) -> Option<&ArrayInit> {
        match &self.init_for(name)?.value {
            InitValue::Array(a) => Some(a),
            InitValue::Scalar(_) => None,
        }
    }

    /// Every `Macro(NAME, default)` in the init entries, first occurrence of
    /// each name, in source order.
    pub fn macros(&self) -> Vec<(&Ident, &Expr)> {
        let mut out: Vec<(&Ident, &Expr)> = Vec::new();
        for init in &self.init {
            let exprs: Vec<&Expr> = match &init.value {
                InitValue::Scalar(e) => vec![e],
                InitValue::Array(a) => {
                    let mut v: Vec<&Expr> = a.dims.iter().collect();
                    match &a.fill {
                        Fill::RandomRange { lo, hi, .. } => {
                            v.push(lo);
                            v.push(hi);
                        }
                        Fill::Const(e, _) => v.push(e),
                        _ => {}
                    }
                    v
                }
            };
            for e in exprs {
                e.walk(&mut |sub| {
                    if let Expr::Macro { name, default, .. } = sub {
                        if !out.iter().any(|(n, _)| n.name == name.name) {
                            out.push((name, default));
                        }
                    }
                });
            }
        }
        out
    }

    /// The routine's link-level symbol: Fortran names are lower-case with a
    /// trailing underscore (the gfortran convention).
    pub fn symbol(&self) -> String {
        match self.lang {
            Lang::C => self.routine.name.name.clone(),
            Lang::Fortran => format!("{}_", self.routine.name.name.to_ascii_lowercase()),
        }
    }

    /// The type the symbol really takes for parameter `p`: Fortran passes
    /// every argument by reference (a scalar as a pointer to it, an array as
    /// the address of its first element); C as declared. The one rule for
    /// the driver's prototype and the interposers' signatures.
    pub fn abi_type(&self, p: &Param) -> CType {
        let mut t = p.ty.clone();
        if self.lang == Lang::Fortran && !t.is_pointer() {
            t.pointers = 1;
        }
        t
    }
}

impl CType {
    /// The type as C writes it in a declaration (`const double*`): the one
    /// spelling for spec text, messages, prototypes and generated C.
    pub fn text(&self) -> String {
        format!(
            "{}{}{}",
            if self.is_const { "const " } else { "" },
            self.base.c_name(),
            "*".repeat(self.pointers as usize)
        )
    }
}

impl Expr {
    /// Calls `f` on this expression and every sub-expression, pre-order.
    pub fn walk<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        f(self);
        match self {
            Expr::Macro { default, .. } => default.walk(f),
            Expr::RandomRange { lo, hi, .. } => {
                lo.walk(f);
                hi.walk(f);
            }
            Expr::Range { begin, incr, .. } => {
                begin.walk(f);
                incr.walk(f);
            }
            Expr::Unary { operand, .. } => operand.walk(f),
            Expr::Binary { lhs, rhs, .. } => {
                lhs.walk(f);
                rhs.walk(f);
            }
            Expr::Int(..)
            | Expr::Float(..)
            | Expr::Str(..)
            | Expr::Name(_)
            | Expr::Random(_)
            | Expr::Member { .. } => {}
        }
    }

    /// Every name the expression refers to (not macro names: those are
    /// defined by the `Macro` itself).
    pub fn names(&self) -> Vec<&Ident> {
        let mut out = Vec::new();
        self.walk(&mut |e| {
            if let Expr::Name(id) = e {
                out.push(id);
            }
        });
        out
    }
}

/// Alignment of an operand without `align(n)`: malloc's own guarantee on
/// x86-64 glibc, so the driver reproduces what a typical caller sees.
pub const DEFAULT_ALIGN: u64 = 16;

impl ArrayInit {
    pub fn is_flushed(&self) -> bool {
        self.attrs.iter().any(|a| matches!(a, Attr::Flush(_)))
    }

    pub fn is_warm(&self) -> bool {
        self.attrs.iter().any(|a| matches!(a, Attr::Warm(_)))
    }

    pub fn is_touched(&self) -> bool {
        self.attrs.iter().any(|a| matches!(a, Attr::Touch(_)))
    }

    /// `align(n)`, if given.
    pub fn align(&self) -> Option<u64> {
        self.attrs.iter().find_map(|a| match a {
            Attr::Align(n, _) => Some(*n),
            _ => None,
        })
    }

    /// The alignment the driver gives the operand: `align(n)`, else
    /// [`DEFAULT_ALIGN`].
    pub fn effective_align(&self) -> u64 {
        self.align().unwrap_or(DEFAULT_ALIGN)
    }

    /// `misalign(m)`, if given.
    pub fn misalign(&self) -> Option<u64> {
        self.attrs.iter().find_map(|a| match a {
            Attr::Misalign(m, _) => Some(*m),
            _ => None,
        })
    }

    /// Static storage (`SVector`/`SMatrix`).
    pub fn is_static(&self) -> bool {
        matches!(self.kind, ArrayKind::SVector | ArrayKind::SMatrix)
    }
}
