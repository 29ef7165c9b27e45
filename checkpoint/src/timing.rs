//! `tdg checkpoint time`: restore an image R times and summarise the copies'
//! region times like a default driver does.

use crate::criu::{find_criu, running_as_root, Criu};
use crate::error::{CheckpointError, Result};
use crate::manifest::Manifest;
use crate::restore::RestorePlan;
use crate::stats::{human_ns, SampleStats};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct TimeOptions {
    pub samples: usize,
    /// Per restore: restore, replayed calls and the region.
    pub timeout: Duration,
    /// Check checksums and the binary's identity first.
    pub verify: bool,
    /// Use this CRIU instead of searching for one.
    pub criu: Option<Criu>,
}

impl Default for TimeOptions {
    fn default() -> Self {
        TimeOptions {
            samples: 20,
            timeout: Duration::from_secs(60),
            verify: true,
            criu: None,
        }
    }
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct TimingReport {
    pub image: PathBuf,
    pub exe: PathBuf,
    pub site: Option<String>,
    pub call: Option<u64>,
    pub delay: Option<u64>,
    /// Wall-clock region time of each restored copy, in order, nanoseconds.
    pub samples_ns: Vec<u64>,
    /// CPU time of the same regions (robust to a loaded machine).
    pub samples_cpu_ns: Vec<u64>,
    pub region_ns: SampleStats,
    pub region_cpu_ns: SampleStats,
    /// Wall time of each restore as tdg saw it (the cost of one sample).
    pub restore_wall_ms: SampleStats,
    pub image_bytes: u64,
}

impl TimingReport {
    pub fn render_text(&self) -> String {
        let what = match (&self.site, self.call, self.delay) {
            (Some(site), Some(call), Some(0)) => {
                format!("region {site}, call {call}, immediate checkpoint")
            }
            (Some(site), Some(call), Some(d)) => {
                format!("region {site}, call {call}, delayed by {d} call(s)")
            }
            _ => "region between tdg_enter_checkpoint and tdg_stop_checkpoint".to_string(),
        };
        let r = &self.region_ns;
        let c = &self.region_cpu_ns;
        format!(
            "image {} ({}; {:.1} MiB, binary {})\n\
             restored {} times; restore cost {:.1} ms per sample (median wall)\n\
             region wall time: min {}  median {}  mean {}  max {}\n\
             region CPU time:  min {}  median {}  mean {}  max {}\n",
            self.image.display(),
            what,
            self.image_bytes as f64 / (1024.0 * 1024.0),
            self.exe.display(),
            r.n,
            self.restore_wall_ms.median,
            human_ns(r.min),
            human_ns(r.median),
            human_ns(r.mean),
            human_ns(r.max),
            human_ns(c.min),
            human_ns(c.median),
            human_ns(c.mean),
            human_ns(c.max),
        )
    }
}

/// Restore `image` `opts.samples` times in a row and report the region times.
/// This is what a spec's `checkpoint` clause runs.
pub fn time_image(image: &Path, opts: &TimeOptions) -> Result<TimingReport> {
    if opts.samples == 0 {
        return Err(CheckpointError::InvalidRequest(
            "--samples must be at least 1".into(),
        ));
    }
    if !running_as_root() {
        return Err(CheckpointError::NotRoot);
    }
    let manifest = Manifest::read(image)?;
    if opts.verify {
        manifest.verify(image)?;
    }
    let criu = match &opts.criu {
        Some(c) => c.clone(),
        None => find_criu()?,
    };
    let image = image.canonicalize().map_err(crate::error::io_err(format!(
        "cannot resolve {}",
        image.display()
    )))?;
    crate::criu::prepare_kdat_cache_dir()?;
    let plan = RestorePlan::new(&image, &manifest, &criu, opts.timeout)?;
    let mut samples_ns = Vec::with_capacity(opts.samples);
    let mut samples_cpu_ns = Vec::with_capacity(opts.samples);
    let mut walls = Vec::with_capacity(opts.samples);
    for sample in 1..=opts.samples {
        let run = plan.restore_once(sample)?;
        tracing::debug!(
            sample,
            region_ns = run.region_ns,
            wall_ms = run.wall.as_secs_f64() * 1e3,
            "restored"
        );
        samples_ns.push(run.region_ns);
        samples_cpu_ns.push(run.region_cpu_ns);
        walls.push(run.wall.as_secs_f64() * 1e3);
    }
    let as_f64 = |v: &[u64]| v.iter().map(|&n| n as f64).collect::<Vec<f64>>();
    Ok(TimingReport {
        exe: manifest.exe.clone(),
        site: manifest.site.clone(),
        call: manifest.call,
        delay: manifest.delay,
        region_ns: SampleStats::of(&as_f64(&samples_ns)).expect("at least one sample"),
        region_cpu_ns: SampleStats::of(&as_f64(&samples_cpu_ns)).expect("at least one sample"),
        samples_cpu_ns,
        restore_wall_ms: SampleStats::of(&walls).expect("at least one sample"),
        samples_ns,
        image_bytes: manifest.image_bytes(),
        image,
    })
}

/// `tdg run SPEC` with a `checkpoint` clause: the image path is relative to
/// the spec's directory, and its capture must match the clause's mode.
pub fn time_checkpoint_clause(
    clause: &spec_lang::ast::CheckpointClause,
    spec_dir: &Path,
    opts: &TimeOptions,
) -> Result<TimingReport> {
    let image = spec_dir.join(&clause.image);
    let manifest = Manifest::read(&image)?;
    let want = match clause.mode {
        spec_lang::ast::CheckpointMode::Immediate => 0,
        spec_lang::ast::CheckpointMode::Delayed(k) => u64::from(k),
    };
    if let Some(have) = manifest.delay {
        if have != want {
            return Err(CheckpointError::InvalidRequest(format!(
                "the spec asks for a checkpoint delayed by {want} call(s) but {} was captured with delay {have}; \
                 recapture with `tdg checkpoint capture --delay {want}` or change the spec's mode",
                image.display()
            )));
        }
    }
    time_image(&image, opts)
}
