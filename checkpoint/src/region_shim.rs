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
use toolchain::CCompiler;

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
) -> Result<RegionShim, RegionShimError> {
    let host = write_host_library(&scratch.join("host"))?;
    let shared_object = build_region_shim(
        cc,
        spec,
        &scratch.join("shim"),
        &include_dirs_for(spec_path, include),
        &host.source,
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
) -> Result<RegionShim, RegionShimError> {
    let spec = spec_lang::load(spec_path, &[])
        .and_then(|c| c.for_use(spec_lang::Use::Checkpoint))
        .map_err(RegionShimError::Spec)?;
    let cc = CCompiler::find(cc).map_err(|e| RegionShimError::Checkpoint(e.into()))?;
    region_shim(&spec, spec_path, include, &cc, scratch)
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
