//! What the file targets share: a scratch directory for the readers that
//! take a path, and the example specs the driver-side targets build models
//! for.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A private directory for the targets whose reader takes a path, made once
/// per process (a fuzzer runs millions of inputs in one process); in memory
/// where /dev/shm is, since every input is written, read and removed.
/// Statics are never dropped, so the directory is removed by an `atexit`
/// handler: libFuzzer ends a timed run, and the test harness its process,
/// through `exit`, and each would otherwise leave one directory behind.
fn scratch() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let builder = tempfile::Builder::new().prefix("tdg-fuzz-").clone();
        let dir = builder
            .tempdir_in("/dev/shm")
            .or_else(|_| builder.tempdir())
            .expect("a scratch directory for the fuzz targets");
        let path = dir.path().to_path_buf();
        *SCRATCH.lock().unwrap_or_else(|p| p.into_inner()) = Some(dir);
        // SAFETY: registers a plain extern "C" function taking no arguments.
        unsafe { libc::atexit(remove_scratch) };
        path
    })
}

static SCRATCH: std::sync::Mutex<Option<tempfile::TempDir>> = std::sync::Mutex::new(None);

extern "C" fn remove_scratch() {
    if let Ok(mut dir) = SCRATCH.lock() {
        drop(dir.take());
    }
}

/// A fresh empty subdirectory `name` of the scratch directory.
pub(crate) fn fresh_dir(name: &str) -> PathBuf {
    let dir = scratch().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch subdirectory");
    dir
}

/// The example spec the driver-side targets build models for: a dot
/// product with flushed operands, so flush sizes and cache levels matter.
pub(crate) fn dot_spec() -> &'static spec_lang::CheckedSpec {
    static SPEC: OnceLock<spec_lang::CheckedSpec> = OnceLock::new();
    SPEC.get_or_init(|| dot_spec_under(&[]).expect("specs/dot.spec is valid"))
}

/// [`dot_spec`] under `-D` definitions (a context's), as `tdg run` loads it.
pub(crate) fn dot_spec_under(
    defines: &[(String, String)],
) -> Result<spec_lang::CheckedSpec, spec_lang::Diagnostics> {
    spec_lang::check_source(
        include_str!("../../specs/dot.spec"),
        "specs/dot.spec",
        defines,
    )
    .and_then(|c| c.for_use(spec_lang::Use::Driver))
}

/// The tuning example, whose campaigns the kept-driver seeds come from.
pub(crate) fn blocked_gemm_spec() -> &'static spec_lang::CheckedSpec {
    static SPEC: OnceLock<spec_lang::CheckedSpec> = OnceLock::new();
    SPEC.get_or_init(|| {
        spec_lang::check_source(
            include_str!("../../specs/blocked_gemm.spec"),
            "specs/blocked_gemm.spec",
            &[],
        )
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .expect("specs/blocked_gemm.spec is valid")
    })
}
