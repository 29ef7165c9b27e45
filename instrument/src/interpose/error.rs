//! Why an interposer cannot be made for a spec's routine, or did not build.

use spec_lang::ast::Span;
use toolchain::ToolchainError;

#[derive(Debug, thiserror::Error)]
pub enum InterposeError {
    #[error("routine `{routine}`: parameter `{param}` has type `{ty}`, which an interposer cannot pass by value without its definition; add an `include=` clause that defines it")]
    OpaqueByValue {
        routine: String,
        param: String,
        ty: String,
    },
    #[error("routine `{routine}` returns `{ty}` by value, which an interposer cannot forward without its definition; add an `include=` clause that defines it")]
    OpaqueReturn { routine: String, ty: String },
    #[error("routine `{routine}`: output `{output}` {reason}; give its element count with it: `returns({output}[COUNT])`")]
    OutputCount {
        routine: String,
        output: String,
        reason: String,
    },
    /// The C compiler refused a spec item the shim is made of: what a
    /// `returns(...)` entry reads (no such member, a member that is not an
    /// integer in a count) or an `include=` (a header not found). `item`
    /// names it as the user wrote it, `span` locates it in the spec,
    /// `compiler` is the compiler's own error line.
    #[error("routine `{routine}`: {item}: {compiler}")]
    SpecItemDoesNotCompile {
        routine: String,
        item: String,
        span: Span,
        compiler: String,
        /// The way out, for the located report.
        hint: &'static str,
    },
    #[error("routine `{routine}`: a tuned context has no value for `{param}`, which the profile records for every call; profile the program again with this spec")]
    DispatchKey { routine: String, param: String },
    #[error(transparent)]
    Toolchain(#[from] ToolchainError),
    #[error("I/O error writing the interposer: {0}")]
    Io(#[from] std::io::Error),
}
