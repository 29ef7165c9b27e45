//! The `.spec` language: grammar, typed AST, semantic checks, diagnostics,
//! evaluation of scalar expressions and the canonical formatter.
//!
//! ```
//! let spec = spec_lang::parse("routine=void f(const int N, double* X);\ninit={N=100; X=Vector(double, RANDOM, _, N);};", "f.spec").unwrap();
//! assert_eq!(spec.routine.params.len(), 2);
//! ```

pub mod ast;
pub mod check;
pub mod checked;
pub mod diag;
pub mod eval;
pub mod format;
pub mod implicit;
mod number;
pub mod parser;
pub mod vocabulary;

pub use ast::Spec;
pub use check::{check, check_for, check_with, Use};
pub use checked::CheckedSpec;
pub use diag::{Diagnostic, Diagnostics};
pub use format::{format, format_source};
pub use parser::{parse, parse_condition, parse_expr};

use std::path::Path;

/// Reads, parses and checks a spec file.
pub fn load(path: impl AsRef<Path>) -> Result<Spec, Diagnostics> {
    let path = path.as_ref();
    let src = read_source(path)?;
    parse_and_check(&src, &path.display().to_string())
}

/// Reads a spec file as text. A file that cannot be read gives one line with
/// the cause and a way out; text that is not UTF-8 is located at its first
/// bad byte, like any other error.
pub fn read_source(path: &Path) -> Result<String, Diagnostics> {
    let file = path.display().to_string();
    let io_error = |why: String| {
        Diagnostics::single(
            &file,
            "",
            Diagnostic::whole_file(format!("cannot read spec: {why}")),
        )
    };
    if path.is_dir() {
        return Err(io_error(format!(
            "it is a directory; name the spec files in it, e.g. `{}/*.spec`",
            file.trim_end_matches('/')
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| {
        let way_out = match e.kind() {
            std::io::ErrorKind::NotFound => "check the path (the bundled specs are in specs/)",
            std::io::ErrorKind::PermissionDenied => "make the file readable (chmod +r)",
            _ => "check that the file exists and is a readable text file",
        };
        io_error(format!("{e}; {way_out}"))
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let byte = e.as_bytes()[at];
        // The lossy text has the same bytes up to `at`, so the location and
        // the source line shown under it stay right.
        let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
        Diagnostics::single(
            &file,
            &text,
            Diagnostic::new(
                format!("not UTF-8 text: byte 0x{byte:02x} cannot start a character here"),
                ast::Span::new(at, at + char::REPLACEMENT_CHARACTER.len_utf8()),
            )
            .with_hint(
                "specs are plain text: save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)",
            ),
        )
    })
}

/// Parses and checks spec text (what [`load`] does after reading the file).
/// The spec returned holds an init for every scalar parameter, the ones the
/// text leaves out marked [`ast::Init::implicit`] (see [`implicit`]).
pub fn parse_and_check(src: &str, file: &str) -> Result<Spec, Diagnostics> {
    let spec = parse(src, file)?;
    Ok(check(&spec, src, file)?.spec)
}

/// Reads, parses and checks a spec used only for its routine's signature
/// (interposition): like [`load`] without [`check::driver_problems`], so
/// `routine=...;` alone is a complete spec.
pub fn load_prototype(path: impl AsRef<Path>) -> Result<Spec, Diagnostics> {
    let path = path.as_ref();
    let src = read_source(path)?;
    parse_and_check_prototype(&src, &path.display().to_string())
}

/// Reads, parses and checks a spec for a profiling shim
/// ([`check::check_profile`]): `tdg profile --spec` and `tdg instrument`.
pub fn load_for_profile(path: impl AsRef<Path>) -> Result<Spec, Diagnostics> {
    let path = path.as_ref();
    let src = read_source(path)?;
    let file = path.display().to_string();
    let spec = parse(&src, &file)?;
    check::check_profile(&spec, &src, &file)?;
    Ok(spec)
}

/// [`parse_and_check`] for a spec used only for its routine's signature.
pub fn parse_and_check_prototype(src: &str, file: &str) -> Result<Spec, Diagnostics> {
    let spec = parse(src, file)?;
    check::check_prototype(&spec, src, file)?;
    Ok(spec)
}

/// [`load`] under `-D` overrides (`tdg explain`, `gen` and `run` use this, so
/// they see exactly the values and errors `tdg check -D` reports).
pub fn load_with(
    path: impl AsRef<Path>,
    overrides: &std::collections::BTreeMap<String, f64>,
) -> Result<CheckedSpec, Diagnostics> {
    let path = path.as_ref();
    let file = path.display().to_string();
    let src = read_source(path)?;
    let spec = parse(&src, &file)?;
    check::check_with(&spec, &src, &file, overrides)
}

/// [`load_with`] for `-D NAME=TEXT` definitions as the command line gives
/// them: those naming a spec macro are evaluated and applied; the others are
/// for the implementation's compile and do not concern the spec.
pub fn load_with_defines(
    path: impl AsRef<Path>,
    defines: &[(String, String)],
) -> Result<CheckedSpec, Diagnostics> {
    let path = path.as_ref();
    let file = path.display().to_string();
    let src = read_source(path)?;
    let spec = parse(&src, &file)?;
    let overrides = checked::spec_overrides(&spec, defines)
        .map_err(|e| Diagnostics::single(&file, &src, Diagnostic::whole_file(e)))?;
    check::check_with(&spec, &src, &file, &overrides)
}
