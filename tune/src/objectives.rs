//! One target's objective, built from what a run shares: the generated
//! driver, or a candidate in restored copies of a checkpoint image. Both a
//! run's own target and each context of `--contexts` are built here.

use crate::{CheckpointObjective, DriverObjective, TuneError};
use driver_gen::RunOptions;
use spec_lang::CheckedSpec;
use std::path::{Path, PathBuf};

/// Restored copies per configuration when the request gives no sample
/// count: each is one call on the application's data, so a median of 7 is
/// steady.
pub const CHECKPOINT_SAMPLES: u32 = 7;

/// How a checkpoint target builds and checks each candidate.
#[derive(Debug, Clone)]
pub struct CandidateSettings {
    /// More C files linked into every candidate.
    pub extra: Vec<PathBuf>,
    /// Compare each configuration's outputs with the original's first.
    pub verify: bool,
    /// Relative tolerance for floating-point outputs.
    pub tolerance: f64,
}

/// The generated driver timing `implementation` with the options `base`.
pub fn driver_objective<'s>(
    spec: &'s CheckedSpec,
    implementation: &Path,
    base: &RunOptions,
) -> DriverObjective<'s> {
    DriverObjective::new(spec, implementation.to_path_buf(), base.clone())
}

/// `implementation` as a candidate in restored copies of `image`, with the
/// driver options `base` (its compiler, flags, `-D` values, sample count
/// and timeout).
pub fn checkpoint_objective(
    image: &Path,
    implementation: &Path,
    base: &RunOptions,
    candidate: &CandidateSettings,
) -> Result<CheckpointObjective, TuneError> {
    let timer = checkpoint::ImageTimer::open(
        image,
        &checkpoint::TimeOptions {
            timeout: base.timeout,
            ..Default::default()
        },
    )
    .map_err(TuneError::Checkpoint)?;
    CheckpointObjective::new(
        timer,
        checkpoint::CandidateSource {
            implementation: implementation.to_path_buf(),
            extra: candidate.extra.clone(),
            cflags: base.cflags.clone(),
            defines: base.defines.clone(),
            cc: base.cc.clone(),
        },
        base.timing.samples.unwrap_or(CHECKPOINT_SAMPLES) as usize,
        candidate.verify,
        candidate.tolerance,
    )
}
