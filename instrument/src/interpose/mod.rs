//! Interposers generated from a spec's routine signature: an `LD_PRELOAD`
//! shim (finds the real routine on its first call wherever it is loaded,
//! `tdg_resolve.h`) for routines in shared libraries, and a `-Wl,--wrap=NAME` object (`__wrap_NAME` calling
//! `__real_NAME`) for static links. Both profile every outermost call and
//! forward it unchanged. `routine` says what an interposer takes the place
//! of and which values it records; this module decides whether the routine
//! can be forwarded at all and builds the interposers; `view` renders the C
//! from the templates in `instrument/c/`.

mod dispatch;
mod error;
mod routine;
mod view;

pub use dispatch::{Dispatch, DispatchRoute, DispatchVariant};
pub use error::InterposeError;
pub use routine::{recorded_values, symbol_name, InterposerKind, RecordedValue};

use crate::runtime;
use routine::{c_type, Signature};
use spec_lang::ast::{BaseType, CType, Lang, Output, Span, Spec};
use std::path::{Path, PathBuf};
use toolchain::{BuildCache, CCompiler, CompileJob, ToolchainError};

fn check_forwardable(spec: &Spec) -> Result<(), InterposeError> {
    let opaque =
        |t: &CType| t.pointers == 0 && matches!(t.base, BaseType::Struct(_) | BaseType::Named(_));
    let r = &spec.routine;
    // With include= clauses the struct/typedef may well be defined there;
    // let the C compiler be the judge then.
    if !spec.includes.is_empty() || spec.lang == Lang::Fortran {
        return Ok(());
    }
    if opaque(&r.ret) {
        return Err(InterposeError::OpaqueReturn {
            routine: r.name.name.clone(),
            ty: c_type(&r.ret),
        });
    }
    for p in &r.params {
        if opaque(&p.ty) {
            return Err(InterposeError::OpaqueByValue {
                routine: r.name.name.clone(),
                param: p.name.name.clone(),
                ty: c_type(&p.ty),
            });
        }
    }
    Ok(())
}

/// The C source of an interposer for `spec`'s routine.
pub fn generate(spec: &Spec, kind: InterposerKind) -> Result<String, InterposeError> {
    check_forwardable(spec)?;
    let sig = Signature::of(spec);
    Ok(view::interposer(spec, &sig, kind, &recorded_values(spec)))
}

/// The symbol variant `index` of `spec`'s routine is renamed to in a
/// deployed library.
pub fn variant_symbol(spec: &Spec, index: usize) -> String {
    format!("tdg_autotune_v{index}_{}", symbol_name(spec))
}

/// The C source of the dispatcher of a deployed routine: the interposer
/// (`LD_PRELOAD` or `--wrap`) that routes each call by its context, the
/// values a profile records for it (pointers aside), to a variant of
/// `dispatch` or to the original definition.
pub fn generate_dispatcher(
    spec: &Spec,
    kind: InterposerKind,
    dispatch: &Dispatch,
) -> Result<String, InterposeError> {
    check_forwardable(spec)?;
    let sig = Signature::of(spec);
    let key: Vec<RecordedValue> = recorded_values(spec)
        .into_iter()
        .filter(|v| v.kind.is_context())
        .collect();
    for route in &dispatch.routes {
        if let Some(missing) = key.iter().find(|v| !route.values.contains_key(&v.param)) {
            return Err(InterposeError::DispatchKey {
                routine: spec.routine.name.name.clone(),
                param: missing.param.clone(),
            });
        }
    }
    Ok(view::dispatcher(spec, &sig, kind, &key, dispatch))
}

/// The C source of an implementation of `spec`'s routine that calls the
/// original definition in the shared library `library` (where a profile
/// found it): what a driver links to time the routine the program runs.
pub fn generate_original(spec: &Spec, library: &Path) -> Result<String, InterposeError> {
    check_forwardable(spec)?;
    let sig = Signature::of(spec);
    Ok(view::original(spec, &sig, &library.to_string_lossy()))
}

/// The C source of an `LD_PRELOAD` shim that marks every outermost call of
/// `spec`'s routine as the checkpoint region named after the routine
/// (`tdg_region_begin`/`tdg_region_end` of checkpoint/c/tdg_checkpoint.h)
/// and forwards it unchanged: `tdg checkpoint capture --spec` with no
/// change to the application. Each output `returns(...)` names is declared
/// before the call, so a restored copy hands it to tdg for comparison.
pub fn generate_region_shim(spec: &Spec) -> Result<String, InterposeError> {
    check_forwardable(spec)?;
    let sig = Signature::of(spec);
    view::region_shim(spec, &sig)
}

/// Writes and compiles the region shim of [`generate_region_shim`] into
/// `dir`, with the resolver compiled in and the checkpoint host library's
/// position-independent object `host_object` (whose header is in
/// `host_include`) linked in. Returns the `.so`.
pub fn build_region_shim(
    cc: &CCompiler,
    spec: &Spec,
    dir: &Path,
    include_dirs: &[PathBuf],
    host_object: &Path,
    host_include: &Path,
) -> Result<PathBuf, InterposeError> {
    let sym = symbol_name(spec);
    runtime::write_sources(dir).map_err(ToolchainError::Files)?;
    let source = dir.join(format!("tdg_region_{sym}.c"));
    let text = generate_region_shim(spec)?;
    fsguard::write_atomic(&source, text.as_bytes()).map_err(ToolchainError::Files)?;
    let shim = dir.join(format!("tdg_region_{sym}.so"));
    let mut incs = vec![dir.to_path_buf(), host_include.to_path_buf()];
    incs.extend(include_dirs.iter().cloned());
    let built = cc.compile(&CompileJob {
        sources: vec![
            source.clone(),
            dir.join("tdg_resolve.c"),
            host_object.to_path_buf(),
        ],
        output: shim.clone(),
        cflags: {
            let mut f = runtime::cflags();
            f.push("-shared".into());
            f
        },
        include_dirs: incs,
        link_args: vec!["-ldl".into()],
        ..Default::default()
    });
    match built {
        Ok(()) => Ok(shim),
        Err(ToolchainError::BuildFailed { command, stderr }) => {
            match failing_item(spec, &source, &text, &stderr) {
                Some((item, span, compiler, hint)) => Err(InterposeError::SpecItemDoesNotCompile {
                    routine: spec.routine.name.name.clone(),
                    item,
                    span,
                    compiler,
                    hint,
                }),
                None => Err(ToolchainError::BuildFailed { command, stderr }.into()),
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// Where `out` is written in the spec: its name, path and count.
fn out_span(out: &Output) -> Span {
    let end = out.path.last().map_or(out.span.end, |m| m.span.end);
    Span::new(
        out.span.start,
        out.count.as_ref().map_or(end, |c| c.span().end),
    )
}

/// The first compiler error in the lines of a spec item: an `include=`
/// line, or a `returns` item's statements (after its marker comment, up to
/// the next item or the region's start). A member the struct does not have
/// or a header not found is the spec's mistake, and is reported as such:
/// the item as written, where it is, and what the compiler said.
fn failing_item(
    spec: &Spec,
    source: &Path,
    text: &str,
    stderr: &str,
) -> Option<(String, Span, String, &'static str)> {
    let mut item_of_line: Vec<Option<(String, Span, &'static str)>> = Vec::new();
    let mut current = None;
    for line in text.lines() {
        if line.contains("tdg_region_begin(") {
            current = None;
        }
        let output = spec
            .returns
            .iter()
            .enumerate()
            .find(|(i, o)| line.trim() == view::item_marker(*i, o));
        if let Some((_, out)) = output {
            current = Some((
                format!("returns item `{}` does not compile against the spec's include=", out.text()),
                out_span(out),
                "check the member names against the struct's header; a count reads integer members only",
            ));
        }
        let include = spec
            .includes
            .iter()
            .find(|inc| inc.text.lines().any(|l| l == line));
        item_of_line.push(match include {
            Some(inc) => Some((
                format!("the spec's include `{}` does not compile", inc.text),
                inc.span,
                "give the header's directory with -I DIR (default: the spec's directory)",
            )),
            None => current.clone(),
        });
    }
    let file = source.file_name()?.to_str()?;
    stderr.lines().find_map(|l| {
        // `DIR/tdg_region_X.c:LINE:COL: error: MESSAGE` (or `fatal error:`)
        let (_, rest) = l.split_once(&format!("{file}:"))?;
        let (line, rest) = rest.split_once(':')?;
        let (_, message) = rest.split_once("error: ")?;
        let (item, span, hint) = item_of_line
            .get(line.parse::<usize>().ok()?.checked_sub(1)?)?
            .clone()?;
        Some((item, span, message.trim().to_string(), hint))
    })
}

/// Include directories for a spec's `include=` clauses: the ones given
/// with `-I`, or else the spec's own directory.
pub fn include_dirs_for(spec_path: &Path, given: &[PathBuf]) -> Vec<PathBuf> {
    if !given.is_empty() {
        return given.to_vec();
    }
    let dir = spec_path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    vec![dir.to_path_buf()]
}

/// What `build_interposers` produced.
#[derive(Debug, Clone)]
pub struct Interposers {
    pub preload_source: PathBuf,
    /// `LD_PRELOAD` this; the runtime is compiled in.
    pub preload_shim: PathBuf,
    pub wrap_source: PathBuf,
    /// Link this with `-Wl,--wrap=<symbol>` and `libtdg_instrument.a`.
    pub wrap_object: PathBuf,
    pub symbol: String,
    pub runtime: runtime::RuntimeBuild,
}

/// Writes and compiles both interposers and the runtime into `dir` (the
/// runtime's object through `cache`, see [`runtime::build`]).
/// `include_dirs` serve the spec's `include=` clauses.
pub fn build_interposers(
    cc: &CCompiler,
    spec: &Spec,
    dir: &Path,
    include_dirs: &[PathBuf],
    cache: Option<&BuildCache>,
) -> Result<Interposers, InterposeError> {
    let rt = runtime::build(cc, dir, cache)?;
    let sym = symbol_name(spec);
    let mut incs = vec![rt.include_dir.clone()];
    incs.extend(include_dirs.iter().cloned());

    let preload_source = dir.join(format!("tdg_preload_{sym}.c"));
    fsguard::write_atomic(
        &preload_source,
        generate(spec, InterposerKind::Preload)?.as_bytes(),
    )
    .map_err(ToolchainError::Files)?;
    let preload_shim = dir.join(format!("tdg_preload_{sym}.so"));
    cc.compile(&CompileJob {
        sources: vec![
            preload_source.clone(),
            rt.object.clone(),
            rt.resolve_source.clone(),
        ],
        output: preload_shim.clone(),
        cflags: {
            let mut f = runtime::cflags();
            f.push("-shared".into());
            f
        },
        include_dirs: incs.clone(),
        link_args: vec!["-ldl".into(), "-lpthread".into()],
        ..Default::default()
    })?;

    let wrap_source = dir.join(format!("tdg_wrap_{sym}.c"));
    fsguard::write_atomic(
        &wrap_source,
        generate(spec, InterposerKind::Wrap)?.as_bytes(),
    )?;
    let wrap_object = dir.join(format!("tdg_wrap_{sym}.o"));
    cc.compile(&CompileJob {
        sources: vec![wrap_source.clone()],
        output: wrap_object.clone(),
        cflags: runtime::cflags(),
        include_dirs: incs,
        object_only: true,
        ..Default::default()
    })?;
    Ok(Interposers {
        preload_source,
        preload_shim,
        wrap_source,
        wrap_object,
        symbol: sym,
        runtime: rt,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(src: &str) -> Vec<String> {
        let spec = spec_lang::check_source(src, "t.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Checkpoint))
            .unwrap();
        recorded_values(&spec)
            .into_iter()
            .map(|v| v.param)
            .collect()
    }

    /// The integers that size the operands lead, then the other integers,
    /// the floating-point scalars and the addresses; `record=` chooses
    /// exactly, in its order, and the shim registers that list.
    #[test]
    fn sizing_integers_first_unless_record_chooses() {
        let gemm =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/gemm.spec"))
                .unwrap();
        assert_eq!(
            names(&gemm),
            ["M", "N", "K", "lda", "ldb", "ldc", "alpha", "beta", "A", "B", "C"]
        );
        let src = "routine=void f(int order, const int M, const int lda, double a, double* X, const int n);\ninit={ X=Matrix(double, lda, n, RANDOM, _); };\n";
        assert_eq!(names(src), ["lda", "n", "order", "M", "a", "X"]);
        let chosen = format!("{src}record=n, X, a;\n");
        assert_eq!(names(&chosen), ["n", "X", "a"]);
        let spec = spec_lang::check_source(&chosen, "t.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Checkpoint))
            .unwrap();
        let c = generate(&spec, InterposerKind::Preload).unwrap();
        assert!(c.contains(r#"tdg_routine("f", "n:i,X:p,a:f")"#), "{c}");
        assert!(
            c.contains("const int64_t tdg_v_[] = {(int64_t)(n), TDG_PTR(X), tdg_double_bits_((double)(a))};"),
            "{c}"
        );
    }
}
