//! The spec as the commands that time it load it.

use std::path::Path;

/// The spec as `tdg run` and `tdg tune` use it, read once under the
/// command line's `-D` definitions. Timed on its checkpoint image (a
/// `checkpoint` clause, no `--default-driver`), the routine runs with the
/// application's own arguments, so the spec only needs to serve the shim
/// that captured the image; a prototype-only spec then times and tunes
/// candidates with no init written. Otherwise a driver is generated from
/// it, which needs everything `tdg check` asks for.
pub fn load_spec(
    path: &Path,
    defines: &[(String, String)],
    default_driver: bool,
) -> anyhow::Result<spec_lang::CheckedSpec> {
    let spec = spec_lang::load(path, defines)?;
    let needed = if tune::Target::uses_checkpoint(&spec, default_driver) {
        spec_lang::Use::Checkpoint
    } else {
        spec_lang::Use::Driver
    };
    Ok(spec.for_use(needed)?)
}
