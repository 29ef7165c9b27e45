//! The `.spec` language: grammar, typed AST, semantic checks, diagnostics,
//! evaluation of scalar expressions and the canonical formatter.
//!
//! ```
//! let spec = spec_lang::parse("routine=void f(const int N, double* X);\ninit={N=100; X=Vector(double, RANDOM, _, N);};", "f.spec").unwrap();
//! assert_eq!(spec.routine.params.len(), 2);
//! ```

pub mod ast;
pub mod check;
pub mod diag;
pub mod eval;
pub mod parser;

pub use ast::Spec;
pub use check::check;
pub use diag::{Diagnostic, Diagnostics};
pub use parser::{parse, parse_expr};

use std::path::Path;

/// Reads, parses and checks a spec file.
pub fn load(path: impl AsRef<Path>) -> Result<Spec, Diagnostics> {
    let path = path.as_ref();
    let file = path.display().to_string();
    let src = std::fs::read_to_string(path).map_err(|e| {
        Diagnostics::single(
            &file,
            "",
            Diagnostic::whole_file(format!("cannot read spec: {e}"))
                .with_hint("check the path; spec files are text files like specs/gemm.spec"),
        )
    })?;
    parse_and_check(&src, &file)
}

/// Parses and checks spec text (what [`load`] does after reading the file).
pub fn parse_and_check(src: &str, file: &str) -> Result<Spec, Diagnostics> {
    let spec = parse(src, file)?;
    check(&spec, src, file)?;
    Ok(spec)
}
