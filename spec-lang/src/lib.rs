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
pub mod format;
pub mod parser;

pub use ast::Spec;
pub use check::check;
pub use diag::{Diagnostic, Diagnostics};
pub use format::{format, format_source};
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

/// [`load`], then evaluates every size and the flop count with `overrides`
/// (`-D` values), so a bad override is caught before a driver is built.
/// Returns a one-line summary for `tdg check`.
pub fn check_file(
    path: impl AsRef<Path>,
    overrides: &std::collections::BTreeMap<String, f64>,
) -> Result<String, Diagnostics> {
    let path = path.as_ref();
    let spec = load(path)?;
    let file = path.display().to_string();
    let src = std::fs::read_to_string(path).unwrap_or_default();
    let why = (!overrides.is_empty()).then(|| {
        let defs: Vec<String> = overrides
            .iter()
            .map(|(k, v)| format!("-D {k}={v}"))
            .collect();
        format!("with {}", defs.join(" "))
    });
    let fail = |e: eval::EvalError| {
        let d = e.to_diagnostic();
        let d = match (&d.hint, &why) {
            (None, Some(w)) => d.with_hint(w.clone()),
            _ => d,
        };
        Diagnostics::single(&file, &src, d)
    };
    let env = eval::typed_env(&spec, overrides).map_err(fail)?;
    let mut bytes = 0u64;
    let mut arrays = 0usize;
    for init in &spec.init {
        if let ast::InitValue::Array(a) = &init.value {
            arrays += 1;
            let b = eval::array_bytes(a, &env).map_err(|e| {
                let mut d = e.to_diagnostic();
                d.message = format!("`{}`: {}", init.name.name, d.message);
                if d.hint.is_none() {
                    d.hint = why.clone();
                }
                Diagnostics::single(&file, &src, d)
            })?;
            bytes = bytes.saturating_add(b.unwrap_or(0));
        }
    }
    let flops = eval::flop_count(&spec, overrides).map_err(fail)?;
    let mut s = format!(
        "routine {}, {} parameter{}, {arrays} array{} totalling {}",
        spec.routine.name.name,
        spec.routine.params.len(),
        if spec.routine.params.len() == 1 {
            ""
        } else {
            "s"
        },
        if arrays == 1 { "" } else { "s" },
        human_bytes(bytes)
    );
    if let Some(f) = flops {
        s.push_str(&format!(", {f} flop per call"));
    }
    Ok(s)
}

/// `1.5 MiB`-style size.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}
