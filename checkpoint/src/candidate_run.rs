//! One candidate timed on an image, as `tdg checkpoint time --impl` and
//! `tdg run` on a spec with a `checkpoint` clause do it: built, checked
//! against the application's own code on the image's data, then timed in
//! the restored copies.

use crate::candidate::{build_candidate, CandidateSource};
use crate::error::{io_err, Result};
use crate::timing::{time_image, ImageTimer, TimeOptions, TimingReport, Verification};
use std::path::Path;

/// Floating-point outputs of a candidate may differ this much (relative)
/// from the original's: reassociation under other flags, not wrong results.
pub const DEFAULT_TOLERANCE: f64 = 1e-9;

/// A candidate for the restored copies and how its outputs are checked.
#[derive(Debug, Clone)]
pub struct CandidateRun {
    pub source: CandidateSource,
    /// Compare its outputs with the original's before timing it.
    pub verify: bool,
    /// Relative tolerance for floating-point outputs.
    pub tolerance: f64,
}

/// How timing an image with (or without) a candidate ended.
// One value per command, so the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum CandidateTiming {
    /// Timed; `verification` when a candidate was checked first.
    Timed {
        report: TimingReport,
        verification: Option<Verification>,
    },
    /// The candidate's outputs differ from the original's: not timed.
    Differs(Verification),
}

/// Times `image` with the application's code or, given a candidate, builds
/// it, verifies it against the original on the image (unless told not to)
/// and times it.
pub fn time_with_candidate(
    image: &Path,
    candidate: Option<&CandidateRun>,
    mut opts: TimeOptions,
) -> Result<CandidateTiming> {
    let scratch = toolchain::scratch_dir("tdg-candidate")
        .map_err(io_err("cannot make a scratch directory for the candidate"))?;
    let mut verification = None;
    if let Some(c) = candidate {
        let so = build_candidate(&c.source, scratch.path(), "candidate")?;
        if c.verify {
            let timer = ImageTimer::open(image, &opts)?;
            let v = timer.verify(&so, c.tolerance)?;
            if v.mismatch.is_some() {
                return Ok(CandidateTiming::Differs(v));
            }
            verification = Some(v);
            // Just checked: the image and its binary are what they were.
            opts.verify = false;
        }
        opts.candidate = Some(so);
    }
    let report = time_image(image, &opts)?;
    Ok(CandidateTiming::Timed {
        report,
        verification,
    })
}

impl CandidateTiming {
    /// The JSON document: the timing report with the verification beside
    /// it, or the verification alone when the outputs differ.
    pub fn document(&self) -> serde_json::Value {
        match self {
            CandidateTiming::Timed {
                report,
                verification,
            } => {
                let mut doc = serde_json::to_value(report).expect("a report serialises");
                if let Some(v) = verification {
                    doc["verification"] = serde_json::to_value(v).expect("serialises");
                }
                doc
            }
            CandidateTiming::Differs(v) => {
                serde_json::json!({ "verification": v })
            }
        }
    }

    /// The report for people.
    pub fn render_text(&self) -> String {
        match self {
            CandidateTiming::Timed {
                report,
                verification,
            } => {
                let mut text = report.render_text();
                if let Some(v) = verification {
                    text.push_str(&v.render_text());
                }
                text
            }
            CandidateTiming::Differs(v) => v.render_text(),
        }
    }
}
