//! The region shim of `tdg checkpoint capture --spec` and `checkpoint
//! inapp --spec`: an LD_PRELOAD interposer, generated from the spec's
//! prototype, that makes each call of a library routine the marked region
//! (the host library's markers around the forwarded call), so an
//! unmodified application is captured at the routine.

use crate::error::CheckpointError;
use crate::hostlib::write_host_library;
use instrument::interpose::{build_region_shim, include_dirs_for, InterposeError};
use spec_lang::ast::Spec;
use std::path::{Path, PathBuf};
use toolchain::{BuildCache, CCompiler};

/// Why no region shim was built.
#[derive(Debug, thiserror::Error)]
pub enum RegionShimError {
    /// The spec does not read as a prototype, or a spec item the C
    /// compiler refused (a member the struct does not have, a header not
    /// found): located in the spec, with a caret.
    #[error("{0}")]
    Spec(spec_lang::Diagnostics),
    #[error(transparent)]
    Interpose(InterposeError),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
}

/// A shim built for `spec` (read from `spec_path`), and the region's site:
/// the routine's name.
#[derive(Debug, Clone)]
pub struct RegionShim {
    pub site: String,
    pub shared_object: PathBuf,
}

/// Builds the region shim for `spec` in `scratch` (its host library in
/// `scratch/host`, the shim in `scratch/shim`), with the spec's `include=`
/// headers found in `include` (empty: the spec's directory).
pub fn region_shim(
    spec: &Spec,
    spec_path: &Path,
    include: &[PathBuf],
    cc: &CCompiler,
    scratch: &Path,
    cache: Option<&BuildCache>,
) -> Result<RegionShim, RegionShimError> {
    let host = write_host_library(&scratch.join("host"))?;
    let host_object = host.object(cc, cache)?;
    let shared_object = build_region_shim(
        cc,
        spec,
        &scratch.join("shim"),
        &include_dirs_for(spec_path, include),
        &host_object,
        &host.dir,
    )
    .map_err(|e| at_spec_item(e, spec_path))?;
    Ok(RegionShim {
        site: spec.routine.name.name.clone(),
        shared_object,
    })
}

/// [`region_shim`] for the spec at `spec_path`, read here and built with
/// the C compiler `cc` names (None: `$CC`, cc, gcc, clang): what `capture
/// --spec` and `inapp --spec` do with the command line's spec.
pub fn region_shim_for_spec(
    spec_path: &Path,
    include: &[PathBuf],
    cc: Option<&str>,
    scratch: &Path,
    cache: Option<&BuildCache>,
) -> Result<RegionShim, RegionShimError> {
    let spec = spec_lang::load(spec_path, &[])
        .and_then(|c| c.for_use(spec_lang::Use::Checkpoint))
        .map_err(RegionShimError::Spec)?;
    let cc = CCompiler::find(cc).map_err(|e| RegionShimError::Checkpoint(e.into()))?;
    region_shim(&spec, spec_path, include, &cc, scratch, cache)
}

/// A spec item the C compiler refused, shown at the item in the spec like
/// any other spec error; other errors pass through.
fn at_spec_item(e: InterposeError, spec_path: &Path) -> RegionShimError {
    let InterposeError::SpecItemDoesNotCompile {
        item,
        span,
        compiler,
        hint,
        ..
    } = &e
    else {
        return RegionShimError::Interpose(e);
    };
    let Ok(src) = std::fs::read_to_string(spec_path) else {
        return RegionShimError::Interpose(e);
    };
    let d = spec_lang::diag::Diagnostic::new(format!("{item}: {compiler}"), *span).with_hint(*hint);
    RegionShimError::Spec(spec_lang::Diagnostics::single(
        &spec_path.display().to_string(),
        &src,
        d,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host library compiles once for every application and region
    /// shim built with one build cache, wherever each writes the library:
    /// the compiler logs its calls, so the test counts what really ran.
    #[test]
    fn the_host_library_compiles_once_for_every_application_and_region_shim() {
        let _beside = testkit::shared();
        let dir = tempfile::tempdir().unwrap();
        let logged = testkit::LoggedCompiler::new(dir.path());
        let cc = CCompiler::find(Some(&logged.program())).unwrap();
        let cache = BuildCache::open(&dir.path().join("cache")).unwrap();
        let app = dir.path().join("app.c");
        std::fs::write(
            &app,
            "#include \"tdg_checkpoint.h\"\nint main(void) { tdg_region_begin(\"r\"); tdg_region_end(\"r\"); return 0; }\n",
        )
        .unwrap();
        let library_compiles = |calls: &[String]| {
            calls
                .iter()
                .filter(|l| l.contains(" -c ") && l.contains(crate::hostlib::SOURCE_NAME))
                .count()
        };
        for i in 0..2 {
            let lib = write_host_library(&dir.path().join(format!("lib{i}"))).unwrap();
            let exe = dir.path().join(format!("app{i}"));
            crate::build_with_host_library(
                &cc,
                &lib,
                std::slice::from_ref(&app),
                &exe,
                &["-O2"],
                Some(&cache),
            )
            .unwrap();
            let ran = std::process::Command::new(&exe).status().unwrap();
            assert!(ran.success(), "{ran}");
        }
        assert_eq!(library_compiles(&logged.take()), 1);

        let spec_path = dir.path().join("scale.spec");
        std::fs::write(
            &spec_path,
            "routine=void scale(double* x, const int n, const double a);\n",
        )
        .unwrap();
        let spec = spec_lang::load(&spec_path, &[])
            .and_then(|c| c.for_use(spec_lang::Use::Checkpoint))
            .unwrap_or_else(|e| panic!("{e}"));
        let shim = region_shim(
            &spec,
            &spec_path,
            &[],
            &cc,
            &dir.path().join("shim"),
            Some(&cache),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(shim.shared_object.is_file());
        let calls = logged.take();
        assert_eq!(library_compiles(&calls), 0, "{calls:#?}");
        assert!(!calls.is_empty(), "the shim itself was built");
    }
}
