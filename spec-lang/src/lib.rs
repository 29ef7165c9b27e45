//! The `.spec` language: grammar, typed AST, semantic checks, diagnostics,
//! evaluation of scalar expressions and the canonical formatter.
//!
//! ```
//! let spec = spec_lang::parse("routine=void f(const int N, double* X);\ninit={N=100; X=Vector(double, RANDOM, _, N);};", "f.spec").unwrap();
//! assert_eq!(spec.routine.params.len(), 2);
//! ```

pub mod ast;
mod check;
pub mod checked;
pub mod diag;
pub mod eval;
pub mod format;
pub mod implicit;
mod number;
pub mod parser;
pub mod verdict;
pub mod vocabulary;

pub use ast::Spec;
pub use check::MAX_RECORDED;
pub use checked::{CheckedSpec, Use};
pub use diag::{Diagnostic, Diagnostics};
pub use format::format;
pub use parser::{parse, parse_condition, parse_expr};

use std::path::Path;

/// Parses `src` and prints it in canonical layout, keeping its comments.
pub fn format_source(src: &str, file: &str) -> Result<String, Diagnostics> {
    let spec = parse(src, file)?;
    Ok(format::format_with_comments(&spec, src))
}

/// Reads a spec file once, parses it and checks it for every [`Use`]
/// ([`check_source`]). The one way a command gets a spec from a file; an
/// error when the file cannot be read or does not parse.
pub fn load(
    path: impl AsRef<Path>,
    defines: &[(String, String)],
) -> Result<CheckedSpec, Diagnostics> {
    let path = path.as_ref();
    let src = read_source(path)?;
    check_source(&src, &path.display().to_string(), defines)
}

/// Parses and checks spec text for every [`Use`] at once: which uses it
/// serves, and for the driver its facts resolved under the `-D NAME=TEXT`
/// definitions that name its macros (the others are for the
/// implementation's compile and do not concern the spec). An error only
/// when the text does not parse; whether it serves the use a command needs
/// is [`CheckedSpec::require`]'s to say, located.
pub fn check_source(
    src: &str,
    file: &str,
    defines: &[(String, String)],
) -> Result<CheckedSpec, Diagnostics> {
    let spec = parse(src, file)?;
    Ok(check::check_spec(spec, src, file, defines))
}

/// The directory a spec file's relative paths start from (its checkpoint
/// image, the headers its body includes): `.` for a bare file name.
pub fn spec_dir(spec: &Path) -> &Path {
    spec.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
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
