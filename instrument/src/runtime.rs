//! The C profiling runtime, embedded in the tdg binary and compiled on
//! demand with the system compiler: `tdg profile` then works from any cargo
//! build tree or installed binary without locating build artefacts.

use std::path::{Path, PathBuf};
use std::process::Command;
use toolchain::{BuildCache, CCompiler, CompileJob, ToolchainError};

/// `tdg_instrument.h`, the header C programs include.
pub const HEADER: &str = include_str!("../c/tdg_instrument.h");
/// The runtime's single translation unit.
pub const SOURCE: &str = include_str!("../c/tdg_instrument.c");
/// `tdg_resolve.h`: how an `LD_PRELOAD` shim finds the definition it
/// forwards to, and the exit status when there is none.
pub const RESOLVE_HEADER: &str = include_str!("../c/tdg_resolve.h");
/// `tdg_resolve.c`, compiled into every shim (not into the marker runtime).
pub const RESOLVE_SOURCE: &str = include_str!("../c/tdg_resolve.c");

/// `TDG_EXIT_UNRESOLVED` of `tdg_resolve.h`: a shim exits with it when the
/// routine is defined in no loaded object.
pub fn exit_unresolved() -> i32 {
    RESOLVE_HEADER
        .lines()
        .find_map(|l| l.strip_prefix("#define TDG_EXIT_UNRESOLVED "))
        .and_then(|v| v.trim().parse().ok())
        .expect("tdg_resolve.h defines TDG_EXIT_UNRESOLVED as a number")
}

/// Flags the runtime and shims are compiled with: optimised, position
/// independent (it goes into shared objects), and warnings on so a broken
/// generated shim is loud.
pub fn cflags() -> Vec<String> {
    ["-O2", "-fPIC", "-std=gnu11", "-Wall", "-Wextra"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// Where a built runtime is.
#[derive(Debug, Clone)]
pub struct RuntimeBuild {
    /// Holds `tdg_instrument.h` (pass as `-I`).
    pub include_dir: PathBuf,
    /// `tdg_instrument.c`, for compiling into another object.
    pub source: PathBuf,
    /// `tdg_instrument.o`, position independent: what the libraries hold,
    /// linked into the interposers as it is.
    pub object: PathBuf,
    /// `tdg_resolve.c`, compiled into `LD_PRELOAD` shims.
    pub resolve_source: PathBuf,
    /// `libtdg_instrument.a`.
    pub static_lib: PathBuf,
    /// `libtdg_instrument.so`.
    pub shared_lib: PathBuf,
}

/// What a directory of runtime and interposer builds is to the guard:
/// tdg writes into one only when it made it (or found it empty).
pub const BUILD_DIR: fsguard::Purpose = fsguard::Purpose {
    what: "instrumentation build",
    option: "-o",
};

/// Writes the header and source (with the timing header they include) into `dir` (created if needed; refused
/// when it is a directory tdg did not make).
pub fn write_sources(dir: &Path) -> std::io::Result<(PathBuf, PathBuf)> {
    fsguard::OwnedDir::open(dir, BUILD_DIR)?;
    let header = dir.join("tdg_instrument.h");
    let source = dir.join("tdg_instrument.c");
    fsguard::write_atomic(&header, HEADER.as_bytes())?;
    fsguard::write_atomic(&source, SOURCE.as_bytes())?;
    fsguard::write_atomic(&dir.join("tdg_resolve.h"), RESOLVE_HEADER.as_bytes())?;
    fsguard::write_atomic(&dir.join("tdg_resolve.c"), RESOLVE_SOURCE.as_bytes())?;
    c_timing::write_header(dir)?;
    Ok((header, source))
}

/// Builds the static and the shared library into `dir`, the runtime's
/// object taken from `cache` when it holds one for this compiler (the
/// source is tdg's own, the same on every build: compiling it takes
/// seconds, copying it none).
pub fn build(
    cc: &CCompiler,
    dir: &Path,
    cache: Option<&BuildCache>,
) -> Result<RuntimeBuild, ToolchainError> {
    let (_, source) = write_sources(dir).map_err(ToolchainError::Files)?;
    let object = dir.join("tdg_instrument.o");
    cc.compile_object(
        &CompileJob {
            sources: vec![source.clone()],
            output: object.clone(),
            cflags: cflags(),
            include_dirs: vec![dir.to_path_buf()],
            object_only: true,
            ..Default::default()
        },
        cache,
    )?;
    let static_lib = dir.join("libtdg_instrument.a");
    // `ar rcs` adds to an archive: an earlier build's goes first (the
    // directory is tdg's own, checked by write_sources).
    let _ = std::fs::remove_file(&static_lib);
    let mut ar = Command::new("ar");
    ar.arg("rcs").arg(&static_lib).arg(&object);
    toolchain::run(&mut ar, Some(std::time::Duration::from_secs(60)))?;
    let shared_lib = dir.join("libtdg_instrument.so");
    cc.compile(&CompileJob {
        sources: vec![object.clone()],
        output: shared_lib.clone(),
        cflags: vec!["-shared".into()],
        link_args: vec!["-lpthread".into()],
        ..Default::default()
    })?;
    Ok(RuntimeBuild {
        include_dir: dir.to_path_buf(),
        resolve_source: dir.join("tdg_resolve.c"),
        source,
        object,
        static_lib,
        shared_lib,
    })
}
