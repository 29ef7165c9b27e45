//! Checkpoint timing of data-sensitive routines with CRIU (seed 003, section
//! 3.2): the application checkpoints itself just before, or `delay` calls
//! before, the region of interest; tdg restores the image many times and each
//! restored copy times the region on the application's own memory.
//!
//! Stages, each a plain function: [`capture`] (run the application, seal the
//! image with a [`Manifest`]), [`time_image`] (restore R times),
//! [`auto_delay`], [`measure_in_app`] (the plain-run reference),
//! [`validate`] (the image against its application, interleaved) and
//! [`run_doctor`].

pub mod autodelay;
pub mod breakdown;
pub mod candidate;
pub mod candidate_run;
pub mod capture;
pub mod capture_info;
pub mod clock;
pub mod criu;
pub mod doctor;
pub mod env;
pub mod error;
pub mod fidelity;
pub mod forked;
pub mod hostlib;
pub mod inapp;
pub mod info;
pub mod inherited;
pub mod libcriu;
pub mod manifest;
pub mod region_shim;
pub mod restore;
pub mod sites;
pub mod substitution;
mod summary_json;
pub mod timing;
pub mod tsc;
pub mod validate;

pub use autodelay::{auto_delay, AutoDelayReport, AutoDelayRequest, DelayReference};
pub use candidate::{build_candidate, compare_outputs, CandidateSource, Mismatch};
pub use candidate_run::{time_with_candidate, CandidateRun, CandidateTiming, DEFAULT_TOLERANCE};
pub use capture::{capture, CaptureOutcome, CaptureRequest};
pub use clock::ClockChoice;
pub use criu::{find_criu, Criu, CriuVersion};
pub use doctor::{run_doctor, DoctorReport};
pub use error::{CheckpointError, Result};
pub use forked::InPlace;
pub use hostlib::{build_with_host_library, write_host_library, HostLibrary};
pub use inapp::{measure_in_app, InAppReport, InAppRequest};
pub use info::{image_info, ImageInfo};
pub use manifest::Manifest;
pub use region_shim::{region_shim, region_shim_for_spec, RegionShim, RegionShimError};
pub use restore::{Candidate, CopyInstructions, RestorePlan, RestoredRun, SamplePhases, TeamUse};
pub use sites::{list_sites, SitesReport};
pub use timing::{
    clause_image, time_checkpoint_clause, time_image, ImageTimer, Samples, TimeOptions,
    TimingReport, Verification,
};
pub use validate::{
    validate, validate_candidate, Comparison, ValidateRequest, ValidationOutcome, ValidationReport,
    Verdict,
};

/// What restoring an image means for trust, as `tdg checkpoint capture`
/// and `time` say it in `--help` (docs/checkpoint.md says the same).
pub const IMAGES_ARE_TRUSTED: &str = "\
A checkpoint image is trusted input: restoring it runs the code and data it holds as root. \
Time only images you captured, or that come from someone you would let run programs as root \
on this machine; keep image directories writable by root only.
CRIU is the `criu` found on PATH, or TDG_CRIU=/path/to/criu (tdg never picks one from its build tree).";
