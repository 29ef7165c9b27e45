//! The generated timing driver as the search objective.

use crate::search::{Measurement, Objective, Placement};
use crate::TuneError;
use driver_gen::RunOptions;
use spec_lang::ast::{InitValue, Spec};
use std::path::PathBuf;

/// Builds the spec's driver against the kernel compiled with each
/// configuration's macros, runs it, and scores the reported time per call.
/// Every run verifies the kernel against the spec's reference body when the
/// spec has one, so a configuration that computes wrong results fails.
pub struct DriverObjective<'s> {
    pub spec: &'s Spec,
    pub impl_c: PathBuf,
    /// Everything but the tuned macros (flush, samples, fixed -D sizes).
    pub base: RunOptions,
}

impl Objective for DriverObjective<'_> {
    fn evaluate(&mut self, values: &[(String, i64)]) -> Result<Measurement, TuneError> {
        let mut opts = self.base.clone();
        opts.defines
            .retain(|(k, _)| !values.iter().any(|(n, _)| n == k));
        opts.defines
            .extend(values.iter().map(|(k, v)| (k.clone(), v.to_string())));
        let described = crate::campaign::describe(values);
        let report = driver_gen::run_driver(self.spec, &self.impl_c, &opts).map_err(|e| {
            let message = format!("{described}: {e}");
            match formats::Failure::of_run_error(&e) {
                Some(failure) => TuneError::Failed { failure, message },
                None => TuneError::Objective(message),
            }
        })?;
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
