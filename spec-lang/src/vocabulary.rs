//! The spec language's keywords, each family written once: its spellings in
//! specs and on the command line, the C name the driver uses and a line of
//! help. The parser, the formatter, "did you mean" suggestions, the command
//! line's value lists and `tdg explain` all read them from here, and a test
//! checks that docs/spec-language.md names every one.

use crate::ast::{FlushMethod, Selection, TimerMethod, TuneLayout, TuneRole};

/// A closed family of keywords backed by an enum.
pub trait Keyword: Copy + Eq + 'static {
    /// Every value, in the order help lists them.
    const ALL: &'static [Self];
    /// What the family is called in messages ("timer method").
    const FAMILY: &'static str;
    /// How the value is written in a spec and on the command line.
    fn spelling(self) -> &'static str;
    /// One line for `--help` and the docs.
    fn help(self) -> &'static str;

    fn from_spelling(word: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|k| k.spelling() == word)
    }

    fn spellings() -> Vec<&'static str> {
        Self::ALL.iter().map(|k| k.spelling()).collect()
    }
}

impl Keyword for TimerMethod {
    const ALL: &'static [Self] = &[TimerMethod::Wall, TimerMethod::Cycle, TimerMethod::Cpu];
    const FAMILY: &'static str = "timer method";
    fn spelling(self) -> &'static str {
        match self {
            TimerMethod::Wall => "wall",
            TimerMethod::Cycle => "cycle",
            TimerMethod::Cpu => "cpu",
        }
    }
    fn help(self) -> &'static str {
        match self {
            TimerMethod::Wall => "wall-clock time (CLOCK_MONOTONIC_RAW)",
            TimerMethod::Cycle => "serialised TSC reads, converted with the calibrated TSC rate",
            TimerMethod::Cpu => "the process's CPU time (CLOCK_PROCESS_CPUTIME_ID)",
        }
    }
}

impl TimerMethod {
    /// The driver's constant for this timer.
    pub fn c_name(self) -> &'static str {
        match self {
            TimerMethod::Wall => "TDG_TIMER_WALL",
            TimerMethod::Cycle => "TDG_TIMER_CYCLE",
            TimerMethod::Cpu => "TDG_TIMER_CPU",
        }
    }
}

impl Keyword for Selection {
    const ALL: &'static [Self] = &[Selection::Min, Selection::Median];
    const FAMILY: &'static str = "selection";
    fn spelling(self) -> &'static str {
        match self {
            Selection::Min => "min",
            Selection::Median => "median",
        }
    }
    fn help(self) -> &'static str {
        match self {
            Selection::Min => "the smallest sample (wall and cycle time: other activity only adds)",
            Selection::Median => "the median sample (CPU time: its error goes both ways)",
        }
    }
}

impl Keyword for FlushMethod {
    const ALL: &'static [Self] = &[FlushMethod::Read, FlushMethod::Clflush, FlushMethod::None];
    const FAMILY: &'static str = "flush method";
    fn spelling(self) -> &'static str {
        match self {
            FlushMethod::Read => "read",
            FlushMethod::Clflush => "clflush",
            FlushMethod::None => "none",
        }
    }
    fn help(self) -> &'static str {
        match self {
            FlushMethod::Read => "read a buffer larger than the caches before each timed call",
            FlushMethod::Clflush => "clflush the flushed operands' cache lines",
            FlushMethod::None => "no flushing: every operand stays warm",
        }
    }
}

impl FlushMethod {
    /// The driver's constant for this flush.
    pub fn c_name(self) -> &'static str {
        match self {
            FlushMethod::Read => "TDG_FLUSH_READ",
            FlushMethod::Clflush => "TDG_FLUSH_CLFLUSH",
            FlushMethod::None => "TDG_FLUSH_NONE",
        }
    }
}

/// Clause names (`name=...;` at the top level of a spec).
pub const CLAUSES: &[&str] = &[
    "include",
    "lang",
    "routine",
    "init",
    "returns",
    "record",
    "flop",
    "timer",
    "checkpoint",
    "tune",
];

/// Array initialisers in `init={...}`.
pub const ARRAY_KINDS: &[&str] = &["Vector", "Matrix", "SVector", "SMatrix", "Array2D"];

/// Fills of an array initialiser.
pub const FILLS: &[&str] = &["RANDOM", "ZERO", "SEQ", "CONST", "FILE"];

/// Attributes of an array initialiser (`flush|align(64)`).
pub const ATTRIBUTES: &[&str] = &["flush", "warm", "touch", "align", "misalign"];

/// Functions in scalar expressions.
pub const SCALAR_FUNCTIONS: &[&str] = &["Macro", "Range", "RANDOM"];

/// Settings of `timer={...}`.
pub const TIMER_SETTINGS: &[&str] = &[
    "method",
    "samples",
    "select",
    "flush",
    "flush_size",
    "min_interval",
    "min_time",
    "max_time",
    "stable",
    "code_offset",
    "threads",
];

/// Settings of `tune={...}` other than a parameter's role.
pub const TUNE_SETTINGS: &[&str] = &["constraint", "layout"];

impl Keyword for TuneLayout {
    const ALL: &'static [Self] = &[TuneLayout::ColMajor, TuneLayout::RowMajor];
    const FAMILY: &'static str = "result layout";
    fn spelling(self) -> &'static str {
        match self {
            TuneLayout::ColMajor => "col_major",
            TuneLayout::RowMajor => "row_major",
        }
    }
    fn help(self) -> &'static str {
        match self {
            TuneLayout::ColMajor => "a column of the result is contiguous (BLAS): the compiler vectorises the register tile's rows",
            TuneLayout::RowMajor => "a row of the result is contiguous (C arrays): the compiler vectorises the register tile's columns",
        }
    }
}

impl Keyword for TuneRole {
    const ALL: &'static [Self] = &[
        TuneRole::Tile,
        TuneRole::Rows,
        TuneRole::Cols,
        TuneRole::KUnroll,
    ];
    const FAMILY: &'static str = "tuning role";
    fn spelling(self) -> &'static str {
        match self {
            TuneRole::Tile => "tile",
            TuneRole::Rows => "rows",
            TuneRole::Cols => "cols",
            TuneRole::KUnroll => "kunroll",
        }
    }
    fn help(self) -> &'static str {
        match self {
            TuneRole::Tile => "the cache block's edge (ATLAS's NB)",
            TuneRole::Rows => "the register tile's rows of the result (ATLAS's MU)",
            TuneRole::Cols => "the register tile's columns of the result (ATLAS's NU)",
            TuneRole::KUnroll => "the unrolling of the loop over the shared dimension (ATLAS's KU)",
        }
    }
}

/// The words of C's built-in type names (`unsigned long`, `size_t`): what
/// an unknown type may have been meant as.
pub const C_TYPE_NAMES: &[&str] = &[
    "void",
    "char",
    "short",
    "int",
    "long",
    "float",
    "double",
    "size_t",
    "ptrdiff_t",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "uint8_t",
    "uint16_t",
    "uint32_t",
    "uint64_t",
    "unsigned",
    "signed",
    "_Bool",
    "bool",
    "_Complex",
];

/// The other words a type may hold in a parameter's declaration (`const
/// struct s* restrict`, `double complex`): with [`C_TYPE_NAMES`], the words
/// that are never a typedef's name.
pub const C_TYPE_QUALIFIERS: &[&str] = &[
    "complex",
    "const",
    "volatile",
    "restrict",
    "__restrict",
    "__restrict__",
    "struct",
];

/// The other C keywords a declaration may hold: `register` (ignored),
/// `union` and `enum` (refused with a way out).
pub const C_DECLARATION_KEYWORDS: &[&str] = &["register", "union", "enum"];

/// Values of `lang=`.
pub const LANGS: &[&str] = &["c", "fortran"];

/// Checkpoint modes (`mode=` in `checkpoint={...}`).
pub const CHECKPOINT_MODES: &[&str] = &["immediate", "delayed"];

/// Every keyword family with its name, for documentation checks.
pub fn families() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        ("clause", CLAUSES.to_vec()),
        ("array initialiser", ARRAY_KINDS.to_vec()),
        ("fill", FILLS.to_vec()),
        ("attribute", ATTRIBUTES.to_vec()),
        ("scalar function", SCALAR_FUNCTIONS.to_vec()),
        ("timer setting", TIMER_SETTINGS.to_vec()),
        (TimerMethod::FAMILY, TimerMethod::spellings()),
        (Selection::FAMILY, Selection::spellings()),
        (FlushMethod::FAMILY, FlushMethod::spellings()),
        ("lang", LANGS.to_vec()),
        ("checkpoint mode", CHECKPOINT_MODES.to_vec()),
        ("tune setting", TUNE_SETTINGS.to_vec()),
        (TuneRole::FAMILY, TuneRole::spellings()),
        (TuneLayout::FAMILY, TuneLayout::spellings()),
    ]
}
