//! What tdg assumes for a scalar parameter the spec gives no init.
//!
//! The reference generator (the POET timer generator) accepts a routine
//! whose scalar parameters are not all initialised. tdg accepts such a spec
//! too, but never passes an undefined value: each such scalar gets
//! [`IMPLICIT_SCALAR`], and the spec gets a located warning saying so.

use crate::ast::{Expr, Init, InitValue, Param, Spec};
use crate::diag::Diagnostic;

/// The value of a scalar parameter without an init. One, not zero: it keeps
/// a size non-empty, a stride (`incx`) valid and a scale factor (`alpha`,
/// `beta`) from wiping out the computation, so the timed call does the work
/// the routine exists for.
pub const IMPLICIT_SCALAR: i64 = 1;

/// Why [`IMPLICIT_SCALAR`] was chosen, for warnings and `tdg explain`.
pub const IMPLICIT_SCALAR_REASON: &str =
    "1 keeps a size non-empty, a stride valid and a scale factor from zeroing the result";

/// Whether a parameter the spec leaves without init gets [`IMPLICIT_SCALAR`]:
/// a by-value number (integer, floating, complex, `_Bool`). Pointers need an
/// allocation and opaque types a value only the user knows; both stay errors.
pub fn takes_implicit_value(p: &Param) -> bool {
    p.ty.pointers == 0 && (p.ty.base.is_integral() || p.ty.base.is_floating())
}

/// `spec` with an init for every scalar parameter that lacks one (marked
/// `implicit`, located at the parameter), and one warning per added init.
/// A spec with nothing to add is returned unchanged, with no warnings.
pub fn complete(spec: &Spec) -> (Spec, Vec<Diagnostic>) {
    let mut out = spec.clone();
    let mut warnings = Vec::new();
    for p in &spec.routine.params {
        let name = &p.name.name;
        if spec.init_for(name).is_some() || !takes_implicit_value(p) {
            continue;
        }
        out.init.push(Init {
            name: p.name.clone(),
            value: InitValue::Scalar(Expr::Int(IMPLICIT_SCALAR, p.name.span)),
            span: p.name.span,
            implicit: true,
        });
        warnings.push(
            Diagnostic::warning(
                format!(
                    "scalar parameter `{name}` has no init: the driver passes {IMPLICIT_SCALAR} ({IMPLICIT_SCALAR_REASON})"
                ),
                p.name.span,
            )
            .with_hint(if p.ty.base.is_integral() {
                format!(
                    "add e.g. `{name}=Macro({}S, 100);` to init to choose its value",
                    name.to_ascii_uppercase()
                )
            } else {
                format!("add e.g. `{name}=0.5;` to init to choose its value")
            }),
        );
    }
    (out, warnings)
}
