//! `tdg checkpoint time`: restore an image R times and summarise the copies'
//! region times like a default driver does.

use crate::candidate::{compare_outputs, Mismatch};
use crate::criu::{find_criu, running_as_root, Criu};
use crate::error::{io_err, CheckpointError, Result};
use crate::forked::{InPlace, LearnedPages};
use crate::manifest::Manifest;
use crate::restore::{
    Candidate, CopyInstructions, OutputLayout, RestorePlan, RestoredRun, SamplePhases,
};
use stats::Summary;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct TimeOptions {
    pub samples: usize,
    /// Per restore: restore, replayed calls and the region.
    pub timeout: Duration,
    /// Check checksums and the binary's identity first.
    pub verify: bool,
    /// Use this CRIU instead of searching for one.
    pub criu: Option<Criu>,
    /// A candidate ([`crate::build_candidate`]) to run in every copy
    /// instead of the application's own routine.
    pub candidate: Option<Candidate>,
    /// One CRIU restore per sample (the old path) even when the image's
    /// copies can take many samples per restore by fork.
    pub restore_per_sample: bool,
}

impl Default for TimeOptions {
    fn default() -> Self {
        TimeOptions {
            samples: 20,
            timeout: Duration::from_secs(60),
            verify: true,
            criu: None,
            candidate: None,
            restore_per_sample: false,
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
    /// The candidate's source the copies ran (None: the application's code).
    #[serde(default)]
    pub candidate: Option<PathBuf>,
    /// Wall-clock region time of each restored copy, in order, nanoseconds.
    pub samples_ns: Vec<u64>,
    /// CPU time of the same regions (robust to a loaded machine).
    pub samples_cpu_ns: Vec<u64>,
    #[serde(with = "crate::summary_json")]
    pub region_ns: Summary,
    #[serde(with = "crate::summary_json")]
    pub region_cpu_ns: Summary,
    /// Wall time of each sample: a whole restore, or (forked) the sampler's
    /// time from the previous sample's timed call to this one's (fork,
    /// preparation, replay, timed call; the previous child exits meanwhile).
    #[serde(with = "crate::summary_json")]
    pub restore_wall_ms: Summary,
    pub image_bytes: u64,
    /// "fork" (many samples per restore) or "restore" (one per sample).
    #[serde(default)]
    pub sampling: String,
    /// CRIU restores the samples took.
    #[serde(default)]
    pub restores: usize,
    /// Why the samples were taken one restore each although fork was asked.
    #[serde(default)]
    pub fallback: Option<String>,
    /// Everything (restores, learning passes, samples) over the samples:
    /// what one sample costs.
    #[serde(default)]
    pub cost_per_sample_ms: f64,
    /// Minor page faults inside each timed call (empty: an older library).
    #[serde(default)]
    pub samples_minflt: Vec<u64>,
    /// Forked samples: median pre-faulting and replayed-delay times.
    #[serde(default)]
    pub phases_median: Option<SamplePhases>,
    /// Forked samples: the pages each one copied and flushed.
    #[serde(default)]
    pub pages: Option<LearnedPages>,
    /// Samples replayed in place in a restored copy with threads (sampling
    /// "in-place"): what was put back between them.
    #[serde(default)]
    pub in_place: Option<InPlace>,
    /// A copy with threads, per sample: the threads in the process and
    /// those that ran at least a quarter of the busiest one's CPU time.
    #[serde(default)]
    pub samples_threads: Vec<u64>,
    #[serde(default)]
    pub samples_busy_threads: Vec<u64>,
    /// The same, the CPU time of all threads in the timed call, summed.
    #[serde(default)]
    pub samples_team_cpu_ns: Vec<u64>,
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
        let ran = match &self.candidate {
            Some(so) => format!("candidate {}", so.display()),
            None => "the application's own code".to_string(),
        };
        let how = if self.sampling == "in-place" {
            let put_back = self.in_place.map_or(String::new(), |p| {
                format!(
                    "; {} of outputs and {} of the calling thread's stack put back between samples",
                    stats::bytes(p.output_bytes),
                    stats::bytes(p.stack_bytes)
                )
            });
            format!(
                "took {} samples in {} restore(s), replayed in place in the restored copy, whose threads stay \
                 parked between samples{put_back}; cost {} per sample (whole wall / samples; {} each beyond \
                 the restore, median)",
                r.n,
                self.restores,
                stats::ns(self.cost_per_sample_ms * 1e6),
                stats::ns(self.restore_wall_ms.median * 1e6)
            )
        } else if self.sampling == "fork" {
            format!(
                "took {} samples in {} restore(s), a fork of the restored copy each; cost {} per sample \
                 (whole wall / samples; {} each beyond the restore and learning, median)",
                r.n,
                self.restores,
                stats::ns(self.cost_per_sample_ms * 1e6),
                stats::ns(self.restore_wall_ms.median * 1e6)
            )
        } else {
            format!(
                "restored {} times; restore cost {} per sample (median wall)",
                r.n,
                stats::ns(self.restore_wall_ms.median * 1e6)
            )
        };
        let mut notes = String::new();
        if let Some(why) = &self.fallback {
            notes.push_str(&format!("one restore per sample: {why}\n"));
        }
        if let (Some(lo), Some(hi)) = (
            self.samples_busy_threads.iter().min(),
            self.samples_busy_threads.iter().max(),
        ) {
            let threads = self.samples_threads.iter().max().copied().unwrap_or(0);
            let busy = if lo == hi {
                format!("{lo}")
            } else {
                format!("{lo}-{hi}")
            };
            notes.push_str(&format!(
                "threads: {busy} busy in the timed call ({threads} in the process)\n"
            ));
        }
        if let Some(max) = self.samples_minflt.iter().max() {
            notes.push_str(&format!(
                "page faults in the timed call: max {max} over the samples\n"
            ));
        }
        format!(
            "image {} ({}; {}, binary {})\n\
             ran {}\n\
             {}\n{}\
             region wall time: {}\n\
             region CPU time:  {}\n",
            self.image.display(),
            what,
            stats::bytes(self.image_bytes),
            self.exe.display(),
            ran,
            how,
            notes,
            r.ns_line(),
            c.ns_line(),
        )
    }
}

/// The samples of one schedule ([`ImageTimer::take_samples`]).
#[derive(Debug)]
pub struct Samples {
    /// Per schedule entry (None: its implementation failed).
    pub runs: Vec<Option<RestoredRun>>,
    /// (implementation, why) for each that failed.
    pub failures: Vec<(usize, CheckpointError)>,
    pub restores: usize,
    /// Some samples were taken by fork (not only attempted).
    pub forked: bool,
    pub fallback: Option<String>,
    /// Everything, from the first restore to the last sample.
    pub wall: Duration,
    pub pages: Option<LearnedPages>,
    /// The samples taken by fork were replayed in place (a copy with threads).
    pub in_place: Option<InPlace>,
}

impl Samples {
    /// Entries still to take: no run yet, implementation not failed.
    fn pending(&self, schedule: &[usize]) -> Vec<usize> {
        (0..schedule.len())
            .filter(|&i| {
                self.runs[i].is_none() && !self.failures.iter().any(|(k, _)| *k == schedule[i])
            })
            .collect()
    }
}

/// An image opened for restoring: checked once, restored many times.
pub struct ImageTimer {
    pub image: PathBuf,
    pub manifest: Manifest,
    plan: RestorePlan,
}

/// The candidate's outputs against the original's on the same image.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Verification {
    /// Outputs the application declares with TDG_REGION_OUTPUT, or the
    /// region shim from the spec's `returns(...)` (0: nothing could be
    /// compared).
    pub outputs: usize,
    pub elements: u64,
    pub mismatch: Option<Mismatch>,
}

impl Verification {
    pub fn render_text(&self) -> String {
        match (&self.mismatch, self.outputs) {
            (Some(m), _) => format!("verification FAILED: {m}\n"),
            (None, 0) => "not verified: the application declares no outputs for this region \
                          (TDG_REGION_OUTPUT before tdg_region_begin, or returns(C[count]) \
                          in the spec of a shim capture)\n"
                .to_string(),
            (None, n) => format!(
                "verified: {n} output(s), {} element(s) equal to the original's on the image\n",
                self.elements
            ),
        }
    }
}

impl ImageTimer {
    /// Check root, the manifest (and, with `opts.verify`, every checksum and
    /// the binary's identity), find CRIU and plan the restores.
    pub fn open(image: &Path, opts: &TimeOptions) -> Result<ImageTimer> {
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
        let image = image
            .canonicalize()
            .map_err(io_err(format!("cannot resolve {}", image.display())))?;
        crate::criu::prepare_kdat_cache_dir()?;
        let plan = RestorePlan::new(&image, &manifest, &criu, opts.timeout)?;
        Ok(ImageTimer {
            image,
            manifest,
            plan,
        })
    }

    /// One restored copy running `instructions`.
    pub fn restore(&self, sample: usize, instructions: &CopyInstructions) -> Result<RestoredRun> {
        let run = self.plan.restore_once(sample, instructions)?;
        tracing::debug!(
            sample,
            region_ns = run.region_ns,
            wall_ms = run.wall.as_secs_f64() * 1e3,
            "restored"
        );
        Ok(run)
    }

    /// The restores' plan, to change CRIU's log level for a breakdown.
    pub fn plan_mut(&mut self) -> &mut RestorePlan {
        &mut self.plan
    }

    /// Fail early (before any sample) on instructions the image cannot carry.
    pub fn check(&self, instructions: &CopyInstructions) -> Result<()> {
        self.plan.check_instructions(instructions)
    }

    /// Take one sample per `schedule` entry (0: the application's own code,
    /// k: `candidates[k - 1]`), in that order, with as few restores as the
    /// image allows: one restore forking a child per sample, or (an older
    /// image, `restore_per_sample`, or a replay a fork cannot repeat) one
    /// restore each. An implementation that fails drops out with its error;
    /// the others go on.
    pub fn take_samples(
        &self,
        candidates: &[Candidate],
        schedule: &[usize],
        restore_per_sample: bool,
    ) -> Result<Samples> {
        let started = Instant::now();
        let mut taken = Samples {
            runs: vec![None; schedule.len()],
            failures: Vec::new(),
            restores: 0,
            forked: false,
            fallback: None,
            wall: Duration::ZERO,
            pages: None,
            in_place: None,
        };
        let fork = !restore_per_sample && self.plan.can_fork_samples();
        if fork && candidates.len() > crate::forked::MAX_CANDIDATES {
            taken.fallback = Some(format!(
                "{} candidates in one round, more than the {} one sampling copy loads",
                candidates.len(),
                crate::forked::MAX_CANDIDATES
            ));
        }
        while fork && taken.fallback.is_none() {
            let pending = taken.pending(schedule);
            if pending.is_empty() {
                break;
            }
            let sub: Vec<usize> = pending.iter().map(|&i| schedule[i]).collect();
            let mut forked = self.plan.restore_forked(candidates, &sub)?;
            taken.restores += 1;
            if forked.in_place.is_some() && forked.fallback.is_some() {
                // Samples replayed in place before one found that they do
                // not reproduce the first: none of them is trusted.
                forked.samples.clear();
            }
            taken.forked |= !forked.samples.is_empty();
            taken.pages = forked.pages.or(taken.pages);
            if !forked.samples.is_empty() {
                taken.in_place = forked.in_place.or(taken.in_place);
            }
            for (&slot, run) in pending.iter().zip(forked.samples) {
                taken.runs[slot] = Some(run);
            }
            if let Some(failure) = forked.failed {
                taken.failures.push(failure);
            } else if let Some(why) = forked.fallback {
                tracing::info!(image = %self.image.display(), "one restore per sample: {why}");
                taken.fallback = Some(why);
            }
        }
        for i in taken.pending(schedule) {
            if taken.failures.iter().any(|(k, _)| *k == schedule[i]) {
                continue;
            }
            let instructions = CopyInstructions {
                candidate: schedule[i].checked_sub(1).map(|k| candidates[k].clone()),
                outputs: None,
            };
            taken.restores += 1;
            match self.restore(i + 1, &instructions) {
                Ok(run) => taken.runs[i] = Some(run),
                Err(e) => taken.failures.push((schedule[i], e)),
            }
        }
        taken.wall = started.elapsed();
        Ok(taken)
    }

    /// Summarise the copies' times like a default driver does.
    pub fn report(&self, samples: &Samples, candidate: Option<&Candidate>) -> Result<TimingReport> {
        let runs: Vec<&RestoredRun> = samples.runs.iter().flatten().collect();
        if runs.is_empty() {
            return Err(CheckpointError::InvalidRequest(
                "--samples must be at least 1".into(),
            ));
        }
        let samples_ns: Vec<u64> = runs.iter().map(|r| r.region_ns).collect();
        let samples_cpu_ns: Vec<u64> = runs.iter().map(|r| r.region_cpu_ns).collect();
        let walls: Vec<f64> = runs.iter().map(|r| r.wall.as_secs_f64() * 1e3).collect();
        let as_f64 = |v: &[u64]| v.iter().map(|&n| n as f64).collect::<Vec<f64>>();
        let stats = |v: &[f64]| Summary::of(v).expect("at least one sample");
        let phases: Vec<SamplePhases> = runs.iter().filter_map(|r| r.phases).collect();
        let median = |v: Vec<u64>| stats(&as_f64(&v)).median as u64;
        Ok(TimingReport {
            image: self.image.clone(),
            exe: self.manifest.exe.clone(),
            site: self.manifest.site.clone(),
            call: self.manifest.call,
            delay: self.manifest.delay,
            candidate: candidate.map(|c| c.source.clone()),
            region_ns: stats(&as_f64(&samples_ns)),
            region_cpu_ns: stats(&as_f64(&samples_cpu_ns)),
            restore_wall_ms: stats(&walls),
            samples_ns,
            samples_cpu_ns,
            image_bytes: self.manifest.image_bytes(),
            sampling: match (samples.forked, samples.in_place.is_some()) {
                (true, true) => "in-place",
                (true, false) => "fork",
                _ => "restore",
            }
            .to_string(),
            restores: samples.restores,
            fallback: samples.fallback.clone(),
            cost_per_sample_ms: samples.wall.as_secs_f64() * 1e3 / runs.len() as f64,
            samples_minflt: runs.iter().filter_map(|r| r.minor_faults).collect(),
            phases_median: (!phases.is_empty()).then(|| SamplePhases {
                fork_ns: median(phases.iter().map(|p| p.fork_ns).collect()),
                prepare_ns: median(phases.iter().map(|p| p.prepare_ns).collect()),
                prepare_faults: median(phases.iter().map(|p| p.prepare_faults).collect()),
                flush_ns: median(phases.iter().map(|p| p.flush_ns).collect()),
                delay_ns: median(phases.iter().map(|p| p.delay_ns).collect()),
            }),
            pages: samples.pages,
            in_place: samples.in_place,
            samples_threads: runs
                .iter()
                .filter_map(|r| r.team.map(|t| t.threads))
                .collect(),
            samples_busy_threads: runs
                .iter()
                .filter_map(|r| r.team.map(|t| t.busy_threads))
                .collect(),
            samples_team_cpu_ns: runs
                .iter()
                .filter_map(|r| r.team.map(|t| t.cpu_ns))
                .collect(),
        })
    }

    /// Restore the image once with the application's code and once with
    /// `candidate`, each writing the region's declared outputs after the
    /// timed call, and compare them (floating point within `tolerance`).
    pub fn verify(&self, candidate: &Candidate, tolerance: f64) -> Result<Verification> {
        let scratch = toolchain::scratch_dir("tdg-ckpt-verify")
            .map_err(io_err("cannot create a scratch directory"))?;
        let run_with = |name: &str,
                        c: Option<&Candidate>|
         -> Result<(Vec<OutputLayout>, Vec<u8>)> {
            let file = scratch.path().join(name);
            let run = self.restore(
                0,
                &CopyInstructions {
                    candidate: c.cloned(),
                    outputs: Some(file.clone()),
                },
            )?;
            let bytes = if run.outputs.is_empty() {
                Vec::new()
            } else {
                std::fs::read(&file).map_err(io_err(format!("cannot read {}", file.display())))?
            };
            Ok((run.outputs, bytes))
        };
        let (layout, original) = run_with("original.bin", None)?;
        let (candidate_layout, produced) = run_with("candidate.bin", Some(candidate))?;
        let elements = layout.iter().map(|o| o.count).sum();
        let mismatch = if candidate_layout != layout {
            Some(Mismatch {
                output: candidate_layout.len().min(layout.len()),
                element: 0,
                original: format!("{} output(s) declared", layout.len()),
                candidate: format!("{} output(s) declared", candidate_layout.len()),
            })
        } else {
            compare_outputs(&layout, &original, &produced, tolerance)
        };
        Ok(Verification {
            outputs: layout.len(),
            elements,
            mismatch,
        })
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
    let timer = ImageTimer::open(image, opts)?;
    let candidates: Vec<Candidate> = opts.candidate.iter().cloned().collect();
    timer.check(&CopyInstructions {
        candidate: opts.candidate.clone(),
        outputs: None,
    })?;
    let schedule = vec![candidates.len(); opts.samples];
    let mut samples = timer.take_samples(&candidates, &schedule, opts.restore_per_sample)?;
    if let Some((_, e)) = samples.failures.pop() {
        return Err(e);
    }
    timer.report(&samples, opts.candidate.as_ref())
}

/// A spec's `checkpoint` clause: the image path is relative to the spec's
/// directory, and its capture must match the clause's mode.
pub fn clause_image(clause: &spec_lang::ast::CheckpointClause, spec_dir: &Path) -> Result<PathBuf> {
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
    Ok(image)
}

/// `tdg run SPEC` with a `checkpoint` clause.
pub fn time_checkpoint_clause(
    clause: &spec_lang::ast::CheckpointClause,
    spec_dir: &Path,
    opts: &TimeOptions,
) -> Result<TimingReport> {
    time_image(&clause_image(clause, spec_dir)?, opts)
}
