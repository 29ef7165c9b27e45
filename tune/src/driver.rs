//! The generated timing driver as the search objective.

use crate::campaign::Prebuild;
use crate::search::{Measurement, Objective, Placement};
use crate::TuneError;
use driver_gen::{BuiltDriver, RunOptions};
use spec_lang::ast::{InitValue, Spec};
use std::path::{Path, PathBuf};

/// Builds the spec's driver against the kernel compiled with each
/// configuration's macros, runs it, and scores the reported time per call.
/// Every run verifies the kernel against the spec's reference body when the
/// spec has one, so a configuration that computes wrong results fails.
#[derive(Clone)]
pub struct DriverObjective<'s> {
    pub spec: &'s Spec,
    pub impl_c: PathBuf,
    /// Everything but the tuned macros (flush, samples, fixed -D sizes).
    pub base: RunOptions,
    /// Run the drivers [`Prebuild::prebuild`] kept under this directory
    /// (a campaign's `builds/`) instead of building them here.
    pub kept: Option<PathBuf>,
}

impl DriverObjective<'_> {
    /// The options of one configuration: the base with its macros.
    fn options(&self, values: &[(String, i64)]) -> RunOptions {
        let mut opts = self.base.clone();
        opts.defines
            .retain(|(k, _)| !values.iter().any(|(n, _)| n == k));
        opts.defines
            .extend(values.iter().map(|(k, v)| (k.clone(), v.to_string())));
        opts
    }
}

/// A configuration that failed, as the search and T4 file record it.
fn failed(values: &[(String, i64)], e: &driver_gen::RunError) -> TuneError {
    let message = format!("{}: {e}", crate::campaign::describe(values));
    match formats::Failure::of_run_error(e) {
        Some(failure) => TuneError::Failed { failure, message },
        None => TuneError::Objective(message),
    }
}

impl Objective for DriverObjective<'_> {
    fn evaluate(&mut self, values: &[(String, i64)]) -> Result<Measurement, TuneError> {
        let opts = self.options(values);
        let report = match &self.kept {
            None => driver_gen::run_driver(self.spec, &self.impl_c, &opts),
            Some(root) => {
                let dir = root.join(crate::campaign::file_stem(values));
                match BuiltDriver::open_kept(self.spec, &opts, &dir) {
                    Ok(Some(driver)) => driver.run(&opts),
                    Ok(None) => {
                        return Err(TuneError::Objective(format!(
                            "{}: no driver was kept in {} (the campaign builds each configuration once before submitting it); resume the campaign from the machine that started it",
                            crate::campaign::describe(values),
                            dir.display()
                        )))
                    }
                    Err(e) => Err(e),
                }
            }
        }
        .map_err(|e| failed(values, &e))?;
        Ok(Measurement {
            time_ns: report.reported_ns,
            mflops: report.mflops_best,
            samples_ns: report.samples_ns,
            uncertainty_pct: report.uncertainty_pct,
        })
    }

    fn placement(&self, _values: &[(String, i64)]) -> Option<Placement> {
        Some(crate::campaign::this_host())
    }
}

impl Prebuild for DriverObjective<'_> {
    fn prebuild(&self, values: &[(String, i64)], dir: &Path) -> Result<(), TuneError> {
        let opts = self.options(values);
        driver_gen::build_driver(self.spec, &self.impl_c, &opts)
            .and_then(|driver| driver.keep(dir))
            .map_err(|e| failed(values, &e))
    }
}

/// Size of the spec's array elements (the largest, if they differ), for
/// the cache-tile model; 8 when the spec allocates no arrays of known type.
pub fn element_bytes(spec: &Spec) -> u64 {
    spec.init
        .iter()
        .filter_map(|i| match &i.value {
            InitValue::Array(a) => a.elem.base.size_bytes(),
            InitValue::Scalar(_) => None,
        })
        .max()
        .unwrap_or(8)
}
