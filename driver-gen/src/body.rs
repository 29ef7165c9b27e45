//! A spec whose routine has a body `{ ... }` runs without `--impl`: the
//! body, written as a C file, is the implementation (bundled specs carry
//! their kernels this way).

use spec_lang::ast::Spec;
use std::path::{Path, PathBuf};

/// The routine's body as a C file, in a private scratch directory removed
/// when this is dropped.
pub struct BodyImplementation {
    _dir: fsguard::ScratchDir,
    path: PathBuf,
}

impl BodyImplementation {
    /// Writes the body of `spec`'s routine; `None` when it has none.
    pub fn write(spec: &Spec) -> std::io::Result<Option<BodyImplementation>> {
        let Some(text) = crate::model::body_as_implementation(spec) else {
            return Ok(None);
        };
        let dir = fsguard::scratch_dir("tdg-body")?;
        let path = dir.path().join(format!("{}.c", spec.routine.name.name));
        fsguard::write_atomic(&path, text.as_bytes())?;
        Ok(Some(BodyImplementation { _dir: dir, path }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}
