//! `tdg checkpoint time`: restore an image R times and summarise the copies'
//! region times like a default driver does.

use crate::candidate::{compare_outputs, Mismatch};
use crate::clock::CPU_CLOCK_FROM_NS;
use crate::criu::{find_criu, running_as_root, Criu};
use crate::error::{io_err, CheckpointError, Result};
use crate::forked::{ForkedRestore, HiddenPages, InPlace, LearnedPages};
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
    /// Take more samples after the first `samples` until the figure is
    /// stable (None: exactly `samples`).
    pub until_stable: Option<StableRule>,
}

/// When a region time is stable, and how long to sample for it: the
/// drivers' rule (their halves-agreement), over restored copies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StableRule {
    /// The median over the first and the second half of the samples must
    /// agree within this many per cent.
    pub pct: f64,
    /// Sampling stops here, stable or not.
    pub max_time: Duration,
    pub max_samples: usize,
}

impl Default for StableRule {
    fn default() -> Self {
        StableRule {
            pct: 2.0,
            max_time: Duration::from_secs(10),
            max_samples: 2000,
        }
    }
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
            until_stable: None,
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
    /// A hidden write flagged on one restore that a fresh restore did not
    /// repeat: the samples were replayed in place, and this says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden_unconfirmed: Option<String>,
    /// Everything (restores, learning passes, samples) over the samples:
    /// what one sample costs.
    #[serde(default)]
    pub cost_per_sample_ms: f64,
    /// Minor page faults inside each timed call (empty: an older library).
    #[serde(default)]
    pub samples_minflt: Vec<u64>,
    /// The state each sample's call ran in (empty: an older library).
    #[serde(default)]
    pub samples_state: Vec<crate::fidelity::CallState>,
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
    /// The samples against the captured application's own run of the call
    /// (None: a candidate ran, or the image has no such record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captured_call: Option<CapturedCallCheck>,
    /// The state around the call in the samples against the captured
    /// application's run of it (None: a candidate ran, or no record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captured_state: Option<crate::fidelity::Fidelity>,
    /// What the copies did to the application's files (each in private
    /// copies of them; the files themselves are untouched).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<crate::restore::FileEffect>,
    /// The region time's stated uncertainty (per cent of the median): how
    /// far the medians over the first and the second half of the samples
    /// differ, and never less than half a step of the timer (below). None:
    /// fewer than 4 samples.
    #[serde(default)]
    pub uncertainty_pct: Option<f64>,
    /// The halves agreed within the stability rule's percentage.
    #[serde(default)]
    pub stable: bool,
    /// Why the figure is not stable (None when it is).
    #[serde(default)]
    pub unstable_why: Option<String>,
    /// The percentage the halves had to agree within, and whether the
    /// samples went on until they did (or the budget ran out).
    #[serde(default)]
    pub stable_pct: f64,
    #[serde(default)]
    pub sampled_until_stable: bool,
    /// The smallest difference between two distinct samples: the step the
    /// timer reads in (a VM's TSC can advance in steps of several ticks), which
    /// bounds what a region of tens of nanoseconds can resolve. When every
    /// sample reads the same, the step the copies measured on their own
    /// empty regions, or the samples' unit ([`SAMPLE_UNIT_NS`]) without one.
    #[serde(default)]
    pub step_ns: Option<f64>,
}

/// The unit samples are recorded in: whole nanoseconds. The timer's step is
/// never taken finer than this.
pub const SAMPLE_UNIT_NS: f64 = 1.0;

/// The stated uncertainty of `samples_ns` (in order): (uncertainty %, the
/// halves' disagreement %, the timer's step in ns). The step is the smallest
/// difference between two distinct samples; when every sample reads the same
/// (a region as steady as the timer reads it) the samples cannot show it, and
/// it is `calibrated_step_ns` (the copies' own empty-region costs, see
/// [`crate::fidelity::CallState::timer_step_ns`]), never below
/// [`SAMPLE_UNIT_NS`].
pub fn region_uncertainty(
    samples_ns: &[u64],
    calibrated_step_ns: Option<f64>,
) -> (Option<f64>, Option<f64>, Option<f64>) {
    let v: Vec<f64> = samples_ns.iter().map(|&n| n as f64).collect();
    let halves = stats::halves_disagreement(&v, true);
    let mut sorted = v.clone();
    sorted.sort_by(f64::total_cmp);
    sorted.dedup();
    let step = sorted
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|d| *d > 0.0)
        .min_by(f64::total_cmp)
        .or_else(|| {
            (!sorted.is_empty())
                .then(|| calibrated_step_ns.map_or(SAMPLE_UNIT_NS, |c| c.max(SAMPLE_UNIT_NS)))
        });
    let median = Summary::of(&v).map_or(0.0, |s| s.median);
    let uncertainty = halves.map(|h| {
        let quantum = match step {
            Some(q) if median > 0.0 => 0.5 * q / median,
            _ => 0.0,
        };
        100.0 * h.max(quantum)
    });
    (uncertainty, halves.map(|h| h * 100.0), step)
}

/// The image's samples held against the one run of the call the captured
/// application itself made after its dump.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CapturedCallCheck {
    pub captured_ns: u64,
    pub captured_cpu_ns: u64,
    /// The clock compared: CPU time for calls of a millisecond and more
    /// ([`CPU_CLOCK_FROM_NS`]), wall time below.
    pub cpu_clock: bool,
    /// The samples' median over the captured call's time (that clock).
    pub median_ratio: f64,
    /// The captured call lies outside the samples' median, widened by
    /// [`CAPTURED_CALL_MARGIN`] (and two TSC steps for short regions), and
    /// took no page fault the samples did not.
    pub disagrees: bool,
    /// Minor page faults inside the captured call (the samples take none).
    #[serde(default)]
    pub captured_minflt: u64,
}

/// How far from the samples' median one in-app observation may fall
/// before the samples are said to disagree with it: a single run of the
/// application scatters by up to this much on a shared VM (a long block
/// sort's plain runs on either host kind), so a narrower margin would flag
/// the noise of one run.
pub const CAPTURED_CALL_MARGIN: f64 = 0.25;

/// Slack below which a difference is the timer's, not the image's: two
/// steps of the TSC as these VMs advance it (about 10 ns each).
const CAPTURED_CALL_SLACK_NS: f64 = 20.0;

impl CapturedCallCheck {
    pub fn of(
        captured: crate::manifest::CapturedCall,
        samples_ns: &[u64],
        samples_cpu_ns: &[u64],
    ) -> Option<Self> {
        let cpu_clock =
            captured.cpu_ns as f64 >= CPU_CLOCK_FROM_NS && samples_cpu_ns.len() == samples_ns.len();
        let (samples, c) = if cpu_clock {
            (samples_cpu_ns, captured.cpu_ns as f64)
        } else {
            (samples_ns, captured.ns as f64)
        };
        let median = Summary::of(&samples.iter().map(|&n| n as f64).collect::<Vec<_>>())?.median;
        // The median, not the range: one sample that ran as the application
        // did (the first, say, before a cache the call builds was there)
        // must not hide all the others.
        let below = c < median / (1.0 + CAPTURED_CALL_MARGIN) - CAPTURED_CALL_SLACK_NS;
        let above = c > median * (1.0 + CAPTURED_CALL_MARGIN) + CAPTURED_CALL_SLACK_NS;
        Some(CapturedCallCheck {
            captured_ns: captured.ns,
            captured_cpu_ns: captured.cpu_ns,
            cpu_clock,
            captured_minflt: captured.minflt,
            median_ratio: if c > 0.0 { median / c } else { f64::INFINITY },
            // Faults only slow the captured call down: it is then no
            // evidence that the samples are too fast.
            disagrees: below || (above && captured.minflt == 0),
        })
    }

    pub fn render_text(&self, image: &Path) -> String {
        let line =
            format!(
            "the captured application's own run of this call: {} (samples' median {:.2}x it, {})\n",
            stats::ns(if self.cpu_clock {
                self.captured_cpu_ns
            } else {
                self.captured_ns
            } as f64),
            self.median_ratio,
            if self.cpu_clock { "CPU time" } else { "wall time" }
        );
        if !self.disagrees {
            let faults = self.captured_minflt;
            return if faults > 0 && self.median_ratio < 1.0 / (1.0 + CAPTURED_CALL_MARGIN) {
                format!(
                    "{line}(that run took {faults} page fault(s) inside the call, pages its dump left to be faulted \
                     back in, which the samples do not take; `tdg checkpoint validate` compares with plain runs)\n"
                )
            } else {
                line
            };
        }
        format!(
            "{line}warning: the samples disagree with the application's own run of this call: it lies \
             more than {:.0}% from their median, so the image may not reproduce the application's \
             state before the call (a delay too short, or cold data); compare side by side with \
             `tdg checkpoint validate {}`\n",
            CAPTURED_CALL_MARGIN * 100.0,
            image.display()
        )
    }
}

impl TimingReport {
    /// Judge the figure against `pct` (the halves of the samples must agree
    /// within it); `until_stable`: the samples went on until they did or
    /// the budget ran out.
    pub fn judge_stability(&mut self, pct: f64, until_stable: bool) {
        let (_, halves, _) = region_uncertainty(&self.samples_ns, None);
        let n = self.samples_ns.len();
        self.stable_pct = pct;
        self.sampled_until_stable = until_stable;
        self.stable = halves.is_some_and(|h| h <= pct);
        self.unstable_why = match (halves, until_stable) {
            (_, _) if self.stable => None,
            (None, _) => Some(format!(
                "{n} sample(s) are too few to judge stability; take 4 or more (-r), or leave -r out to sample until the figure settles"
            )),
            (Some(h), false) => Some(format!(
                "the medians over the first and the second half of the {n} samples differ by {h:.2}%, more than {pct}%; \
                 leave -r out to sample until the figure settles"
            )),
            (Some(h), true) => Some(format!(
                "the medians over the first and the second half of the {n} samples still differ by {h:.2}%, more than {pct}%, \
                 when the budget ran out: the host's speed changed while sampling, or the region's time varies from copy \
                 to copy; raise --max-time"
            )),
        };
    }

    /// The uncertainty line (and why the figure is not stable).
    fn uncertainty_text(&self) -> String {
        let n = self.samples_ns.len();
        let step = match self.step_ns {
            Some(q) if self.region_ns.median < 1000.0 => {
                let all_equal = self.samples_ns.windows(2).all(|w| w[0] == w[1]);
                if all_equal {
                    format!(
                        "; every sample read the same: the timer reads in steps of {} or more",
                        stats::ns(q)
                    )
                } else {
                    format!("; the timer reads in steps of {}", stats::ns(q))
                }
            }
            _ => String::new(),
        };
        let mut t = match self.uncertainty_pct {
            Some(u) => format!(
                "uncertainty      +-{u:.2}% (the medians over the first and the second half of the {n} samples agree within it{}{step})\n",
                if self.sampled_until_stable {
                    format!("; sampled until within {}%", self.stable_pct)
                } else {
                    String::new()
                }
            ),
            None => format!("uncertainty      unknown ({n} sample(s) are too few to judge)\n"),
        };
        if let Some(why) = &self.unstable_why {
            t += &format!("not stable: {why}\n");
        }
        t
    }

    pub fn render_text(&self) -> String {
        let ran = match &self.candidate {
            Some(so) => format!("candidate {}", so.display()),
            None => "the application's own code".to_string(),
        };
        format!(
            "image {} ({}; {}, binary {})\n\
             ran {}\n\
             {}\n{}\
             region wall time: {}\n\
             region CPU time:  {}\n{}{}",
            self.image.display(),
            self.what(),
            stats::bytes(self.image_bytes),
            self.exe.display(),
            ran,
            self.how_sampled(),
            self.notes(),
            self.region_ns.ns_line(),
            self.region_cpu_ns.ns_line(),
            self.uncertainty_text(),
            self.against_captured(),
        )
    }

    /// Which call the image holds.
    fn what(&self) -> String {
        match (&self.site, self.call, self.delay) {
            (Some(site), Some(call), Some(0)) => {
                format!("region {site}, call {call}, immediate checkpoint")
            }
            (Some(site), Some(call), Some(d)) => {
                format!("region {site}, call {call}, delayed by {d} call(s)")
            }
            _ => "region between tdg_enter_checkpoint and tdg_stop_checkpoint".to_string(),
        }
    }

    /// How the samples were taken and what each cost.
    fn how_sampled(&self) -> String {
        let r = &self.region_ns;
        if self.sampling == "in-place" {
            let put_back = self.in_place.map_or(String::new(), |p| {
                let checked = if p.checked > 0 {
                    format!(
                        "; each implementation ran twice first with the pages it writes tracked, and left no \
                         state for a later call ({} page(s) outside the outputs and the stack are rewritten by \
                         every call, as each call leaves them)",
                        p.rewritten_pages
                    )
                } else {
                    String::new()
                };
                format!(
                    "; {} of outputs and {} of the calling thread's stack put back between samples{checked}",
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
        }
    }

    /// The lines between how the samples were taken and the region's times:
    /// fallback, unconfirmed flag, threads, faults, files.
    fn notes(&self) -> String {
        let mut notes = String::new();
        if let Some(why) = &self.fallback {
            notes.push_str(&format!("one restore per sample: {why}\n"));
        }
        if let Some(note) = &self.hidden_unconfirmed {
            notes.push_str(&format!("not confirmed: {note}\n"));
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
        for f in &self.files {
            notes.push_str(&f.render_text());
        }
        notes
    }

    /// The samples against the captured application's run of the call.
    fn against_captured(&self) -> String {
        let mut captured = self
            .captured_call
            .map(|check| check.render_text(&self.image))
            .unwrap_or_default();
        // What differs from the captured run, when something does: one run
        // of the application, so only the state, never a verdict.
        if let Some(f) = self
            .captured_state
            .as_ref()
            .filter(|f| !f.findings.is_empty())
        {
            captured +=
                "the copies' state around the call differs from the captured application's run:\n";
            captured += &f.render_causes();
        }
        captured
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
    /// Pages the hidden-write check flagged on one restore that a fresh
    /// restore's check did not flag again ([`confirm_hidden`]), said.
    pub hidden_unconfirmed: Option<String>,
}

/// Restores a hidden-write flag may take to be confirmed: a table or a flag
/// a first call leaves is left at the same pages after every restore; a
/// write that depends on the scheduler (which thread took part, a wake-up
/// path) is not.
pub const HIDDEN_FRESH_RESTORES: usize = 2;

/// What the hidden-write check's flag from one restore (`flag`) means after
/// the flags of this schedule's earlier restores (`earlier`): Some(why) to
/// fall back to a restore per sample (the same implementation flagged a
/// page again, or [`HIDDEN_FRESH_RESTORES`] fresh restores all flagged
/// something), None to try a fresh restore.
pub fn confirm_hidden(flag: &HiddenPages, earlier: &[HiddenPages]) -> Option<String> {
    if earlier.iter().any(|e| flag.repeats(e)) {
        Some(format!(
            "flagged again at the same page on a fresh restore ({} restores)",
            earlier.len() + 1
        ))
    } else if earlier.len() >= HIDDEN_FRESH_RESTORES {
        Some(format!(
            "{} restores each flagged pages, not the same ones",
            earlier.len() + 1
        ))
    } else {
        None
    }
}

/// The flags no fresh restore repeated, for the report.
fn unconfirmed_note(flags: &[HiddenPages]) -> Option<String> {
    let named: Vec<String> = flags
        .iter()
        .map(|f| {
            let who = match f.implementation {
                0 => "the timed call".to_string(),
                k => format!("candidate {k}"),
            };
            let first = f.pages.first().copied().unwrap_or(0);
            format!("{who} at {first:#x} ({} page(s))", f.pages.len())
        })
        .collect();
    (!named.is_empty()).then(|| {
        format!(
            "the hidden-write check of {} restore(s) flagged {}, and a fresh restore's check did \
             not flag it again: a write that depends on the threads' timing, not state a later \
             call reads; the samples were replayed in place",
            flags.len(),
            named.join("; ")
        )
    })
}

/// The median of each phase over the samples that report phases (forked
/// and in-place samples).
fn phases_median(runs: &[&RestoredRun]) -> Option<SamplePhases> {
    let phases: Vec<SamplePhases> = runs.iter().filter_map(|r| r.phases).collect();
    let median = |f: fn(&SamplePhases) -> u64| {
        let v: Vec<f64> = phases.iter().map(|p| f(p) as f64).collect();
        Summary::of(&v).expect("at least one sample").median as u64
    };
    (!phases.is_empty()).then(|| SamplePhases {
        fork_ns: median(|p| p.fork_ns),
        prepare_ns: median(|p| p.prepare_ns),
        prepare_faults: median(|p| p.prepare_faults),
        flush_ns: median(|p| p.flush_ns),
        delay_ns: median(|p| p.delay_ns),
    })
}

impl Samples {
    /// "in-place", "fork" or "restore": how the samples were taken.
    fn sampling(&self) -> &'static str {
        match (self.forked, self.in_place.is_some()) {
            (true, true) => "in-place",
            (true, false) => "fork",
            _ => "restore",
        }
    }

    /// `n` schedule entries, none taken yet.
    fn none_of(n: usize) -> Samples {
        Samples {
            runs: vec![None; n],
            failures: Vec::new(),
            restores: 0,
            forked: false,
            fallback: None,
            wall: Duration::ZERO,
            pages: None,
            in_place: None,
            hidden_unconfirmed: None,
        }
    }

    /// One sampling restore's samples into the `pending` slots they were
    /// taken for; its fallback, if it fell back (then its in-place samples
    /// are dropped: one found that they do not reproduce the first, so none
    /// of them is trusted).
    fn add_forked(&mut self, pending: &[usize], mut forked: ForkedRestore) -> Option<&str> {
        if forked.in_place.is_some() && forked.fallback.is_some() {
            forked.samples.clear();
        }
        self.forked |= !forked.samples.is_empty();
        self.pages = forked.pages.or(self.pages);
        if !forked.samples.is_empty() {
            self.in_place = forked.in_place.or(self.in_place);
        }
        for (&slot, run) in pending.iter().zip(forked.samples) {
            self.runs[slot] = Some(run);
        }
        if let Some(failure) = forked.failed {
            self.failures.push(failure);
            None
        } else {
            self.fallback = forked.fallback;
            self.fallback.as_deref()
        }
    }

    /// The region's wall times of the samples taken, in order.
    pub fn region_ns(&self) -> Vec<u64> {
        self.runs.iter().flatten().map(|r| r.region_ns).collect()
    }

    /// Add a later batch's samples (its first failure is this one's error).
    pub fn append(&mut self, mut later: Samples) -> Result<()> {
        if let Some((_, e)) = later.failures.pop() {
            return Err(e);
        }
        self.runs.append(&mut later.runs);
        self.restores += later.restores;
        self.forked |= later.forked;
        self.fallback = self.fallback.take().or(later.fallback);
        self.wall += later.wall;
        self.pages = self.pages.or(later.pages);
        self.in_place = self.in_place.or(later.in_place);
        self.hidden_unconfirmed = self.hidden_unconfirmed.take().or(later.hidden_unconfirmed);
        Ok(())
    }

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
        if std::fs::symlink_metadata(image).is_ok() {
            crate::manifest::refuse_untrusted(image)?;
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
        crate::substitution::warn_once(
            &image,
            &crate::substitution::substitutions(&manifest.capture),
        );
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
        let mut taken = Samples::none_of(schedule.len());
        let fork = !restore_per_sample && self.plan.can_fork_samples();
        if fork && candidates.len() > crate::forked::MAX_CANDIDATES {
            taken.fallback = Some(format!(
                "{} candidates in one round, more than the {} one sampling copy loads",
                candidates.len(),
                crate::forked::MAX_CANDIDATES
            ));
        }
        if fork && taken.fallback.is_none() {
            self.take_forked(candidates, schedule, &mut taken)?;
        }
        self.take_restored(candidates, schedule, &mut taken);
        taken.wall = started.elapsed();
        Ok(taken)
    }

    /// As many of `schedule`'s samples as restores that fork (or replay in
    /// place) take, until all are taken, an implementation fails, or a copy
    /// falls back; a hidden-write flag is confirmed on a fresh restore
    /// first ([`confirm_hidden`]).
    fn take_forked(
        &self,
        candidates: &[Candidate],
        schedule: &[usize],
        taken: &mut Samples,
    ) -> Result<()> {
        let mut flags: Vec<HiddenPages> = Vec::new();
        while taken.fallback.is_none() {
            let pending = taken.pending(schedule);
            if pending.is_empty() {
                break;
            }
            let sub: Vec<usize> = pending.iter().map(|&i| schedule[i]).collect();
            let mut forked = self.plan.restore_forked(candidates, &sub)?;
            taken.restores += 1;
            if let (Some(flag), Some(why)) = (forked.hidden.take(), forked.fallback.as_mut()) {
                match confirm_hidden(&flag, &flags) {
                    Some(confirmed) => why.push_str(&format!(" ({confirmed})")),
                    None => {
                        tracing::info!(image = %self.image.display(), "hidden write flagged, confirming on a fresh restore: {why}");
                        flags.push(flag);
                        continue;
                    }
                }
            }
            if let Some(why) = taken.add_forked(&pending, forked) {
                tracing::info!(image = %self.image.display(), "one restore per sample: {why}");
            }
        }
        if taken.fallback.is_none() && taken.in_place.is_some() {
            taken.hidden_unconfirmed = unconfirmed_note(&flags);
        }
        Ok(())
    }

    /// The samples still pending, one restore each (an implementation that
    /// failed takes none).
    fn take_restored(&self, candidates: &[Candidate], schedule: &[usize], taken: &mut Samples) {
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
        let calibrated_step_ns = runs
            .iter()
            .filter_map(|r| r.state.and_then(|s| s.timer_step_ns))
            .min_by(f64::total_cmp);
        let (uncertainty_pct, _, step_ns) = region_uncertainty(&samples_ns, calibrated_step_ns);
        let (captured_call, captured_state) = self.against_captured(candidate, &runs);
        let samples_cpu_ns: Vec<u64> = runs.iter().map(|r| r.region_cpu_ns).collect();
        let walls: Vec<f64> = runs.iter().map(|r| r.wall.as_secs_f64() * 1e3).collect();
        let as_f64 = |v: &[u64]| v.iter().map(|&n| n as f64).collect::<Vec<f64>>();
        let stats = |v: &[f64]| Summary::of(v).expect("at least one sample");
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
            sampling: samples.sampling().to_string(),
            restores: samples.restores,
            fallback: samples.fallback.clone(),
            hidden_unconfirmed: samples.hidden_unconfirmed.clone(),
            cost_per_sample_ms: samples.wall.as_secs_f64() * 1e3 / runs.len() as f64,
            samples_minflt: runs.iter().filter_map(|r| r.minor_faults).collect(),
            samples_state: runs.iter().filter_map(|r| r.state).collect(),
            phases_median: phases_median(&runs),
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
            files: self.plan.file_effects(),
            uncertainty_pct,
            stable: false,
            unstable_why: None,
            stable_pct: StableRule::default().pct,
            sampled_until_stable: false,
            step_ns,
            captured_call,
            captured_state,
        })
    }

    /// The samples against the captured application's own run of the call
    /// (its time, the state around it); none for a candidate.
    fn against_captured(
        &self,
        candidate: Option<&Candidate>,
        runs: &[&RestoredRun],
    ) -> (Option<CapturedCallCheck>, Option<crate::fidelity::Fidelity>) {
        let Some(captured) = self.manifest.captured_call.filter(|_| candidate.is_none()) else {
            return (None, None);
        };
        let ns: Vec<u64> = runs.iter().map(|r| r.region_ns).collect();
        let cpu_ns: Vec<u64> = runs.iter().map(|r| r.region_cpu_ns).collect();
        let state = captured.state.and_then(|s| {
            let copies: Vec<_> = runs.iter().filter_map(|r| r.state).collect();
            crate::fidelity::compare(
                &[s],
                &copies,
                &crate::capture_info::discarded_outputs(&self.manifest.capture),
            )
        });
        (CapturedCallCheck::of(captured, &ns, &cpu_ns), state)
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
    if let Some(rule) = &opts.until_stable {
        if !(rule.pct > 0.0 && rule.pct.is_finite()) {
            return Err(CheckpointError::InvalidRequest(format!(
                "--stable-pct must be a positive percentage (got {})",
                rule.pct
            )));
        }
    }
    let timer = ImageTimer::open(image, opts)?;
    let candidates: Vec<Candidate> = opts.candidate.iter().cloned().collect();
    timer.check(&CopyInstructions {
        candidate: opts.candidate.clone(),
        outputs: None,
    })?;
    let schedule = vec![candidates.len(); opts.samples];
    let started = Instant::now();
    let mut samples = timer.take_samples(&candidates, &schedule, opts.restore_per_sample)?;
    if let Some((_, e)) = samples.failures.pop() {
        return Err(e);
    }
    let Some(rule) = opts.until_stable else {
        let mut report = timer.report(&samples, opts.candidate.as_ref())?;
        report.judge_stability(StableRule::default().pct, false);
        return Ok(report);
    };
    while let Some(more) = more_samples(&samples.region_ns(), &rule, started.elapsed()) {
        let extra = timer.take_samples(
            &candidates,
            &vec![candidates.len(); more],
            opts.restore_per_sample,
        )?;
        samples.append(extra)?;
    }
    let mut report = timer.report(&samples, opts.candidate.as_ref())?;
    report.judge_stability(rule.pct, true);
    Ok(report)
}

/// How many more samples to take after `taken` (in order) under `rule`,
/// `elapsed` into sampling; None: stable, or the budget is spent. A batch is
/// half again the samples so far (at least 10), so the halves are judged
/// after each growth by a sixth at most as the drivers do, and each batch
/// pays one restore.
pub fn more_samples(taken: &[u64], rule: &StableRule, elapsed: Duration) -> Option<usize> {
    let v: Vec<f64> = taken.iter().map(|&n| n as f64).collect();
    let stable = stats::halves_disagreement(&v, true).is_some_and(|h| h * 100.0 <= rule.pct);
    if stable || taken.len() >= rule.max_samples || elapsed >= rule.max_time {
        return None;
    }
    Some(
        (taken.len() / 2)
            .max(10)
            .min(rule.max_samples - taken.len()),
    )
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

#[cfg(test)]
mod captured_call_tests {
    use super::*;
    use crate::manifest::CapturedCall;

    #[test]
    fn the_captured_call_disagrees_only_well_outside_the_samples() {
        let wall = [13_000, 13_400, 13_900, 15_000];
        let cpu = [20_000, 20_000, 21_000, 22_000];
        let at = |ns| {
            CapturedCallCheck::of(
                CapturedCall {
                    ns,
                    cpu_ns: 20_000,
                    minflt: 0,
                    state: None,
                },
                &wall,
                &cpu,
            )
            .unwrap()
        };
        // Short calls compare wall time.
        assert!(!at(13_500).cpu_clock);
        assert!(!at(13_500).disagrees);
        assert!((at(13_400).median_ratio - 13_650.0 / 13_400.0).abs() < 1e-12);
        // One run of the application scatters: 20% from the median is noise.
        assert!(!at(16_300).disagrees);
        assert!(!at(11_100).disagrees);
        // Beyond the margin from the median it disagrees, even inside the
        // samples' range.
        assert!(at(17_900).disagrees);
        // An immediate image's cold samples against a warm application.
        assert!(at(400).disagrees);
        assert!(at(40_000).disagrees);
        assert!(at(400)
            .render_text(Path::new("/dev/shm/img"))
            .contains("warning: the samples disagree with the application's own run of this call"));
        assert!(!at(13_500).render_text(Path::new("/i")).contains("warning"));
    }

    /// A hidden-write flag falls back only once a fresh restore flags the
    /// same implementation's page again (a table built on the first call is
    /// at the same address after every restore); a page only one restore
    /// flags is a write of the scheduler's making, named in the report.
    #[test]
    fn a_hidden_write_falls_back_only_when_a_fresh_restore_repeats_it() {
        let flag = |implementation: usize, pages: &[u64]| HiddenPages {
            implementation,
            pages: pages.to_vec(),
        };
        let table = flag(0, &[0x5000, 0x6000]);
        assert_eq!(
            confirm_hidden(&table, &[]),
            None,
            "the first flag is confirmed first"
        );
        let again = confirm_hidden(&flag(0, &[0x6000]), std::slice::from_ref(&table)).unwrap();
        assert!(again.contains("flagged again at the same page on a fresh restore (2 restores)"));
        // Another page, or the same page of another implementation: not
        // confirmed yet.
        assert_eq!(
            confirm_hidden(&flag(0, &[0x9000]), std::slice::from_ref(&table)),
            None
        );
        assert_eq!(
            confirm_hidden(&flag(1, &[0x5000]), std::slice::from_ref(&table)),
            None
        );
        // Fresh restores are bounded: the third flag falls back whatever it is.
        let why =
            confirm_hidden(&flag(0, &[0xa000]), &[table.clone(), flag(0, &[0x9000])]).unwrap();
        assert!(why.contains("3 restores each flagged pages, not the same ones"));
        let note =
            unconfirmed_note(&[flag(0, &[0x7f00_0000_1000]), flag(2, &[0x3000, 0x4000])]).unwrap();
        assert!(
            note.contains(
                "the timed call at 0x7f0000001000 (1 page(s)); candidate 2 at 0x3000 (2 page(s))"
            ) && note.contains("the samples were replayed in place"),
            "{note}"
        );
        assert_eq!(unconfirmed_note(&[]), None);
    }

    /// A call that builds a table on its first run: one sample (the first)
    /// reads as the application's call did, every later one far faster.
    /// The range holds the captured call; the median does not.
    #[test]
    fn one_honest_sample_does_not_hide_the_others() {
        let wall = [900_000, 100_000, 101_000, 99_000, 100_500];
        let c = CapturedCallCheck::of(
            CapturedCall {
                ns: 880_000,
                cpu_ns: 870_000,
                minflt: 0,
                state: None,
            },
            &wall,
            &wall,
        )
        .unwrap();
        assert!(c.disagrees && c.median_ratio < 0.2, "{c:?}");
        assert!(c.render_text(Path::new("/i")).contains("from their median"));
    }

    #[test]
    fn calls_of_a_millisecond_compare_cpu_time() {
        // Wall time inflated by the host's load, CPU time the same.
        let wall = [250_000_000, 262_000_000, 302_000_000];
        let cpu = [59_800_000, 60_500_000, 64_600_000];
        let c = CapturedCallCheck::of(
            CapturedCall {
                ns: 90_000_000,
                cpu_ns: 65_000_000,
                minflt: 0,
                state: None,
            },
            &wall,
            &cpu,
        )
        .unwrap();
        assert!(c.cpu_clock && !c.disagrees, "{c:?}");
        // Slower by faults the dump left behind: said, not flagged.
        let c = CapturedCallCheck::of(
            CapturedCall {
                ns: 387_000_000,
                cpu_ns: 81_400_000,
                minflt: 1600,
                state: None,
            },
            &wall,
            &cpu,
        )
        .unwrap();
        assert!(!c.disagrees, "{c:?}");
        assert!(c
            .render_text(Path::new("/i"))
            .contains("took 1600 page fault(s)"));
    }
}

#[cfg(test)]
mod stability_tests {
    use super::*;

    #[test]
    fn sampling_goes_on_until_the_halves_agree_or_the_budget_ends() {
        let rule = StableRule {
            pct: 2.0,
            max_time: Duration::from_secs(10),
            max_samples: 100,
        };
        let t = Duration::from_secs(1);
        // Halves at 60 and 70 ns: 15% apart, so 10 more (half of 20, at least 10).
        let split: Vec<u64> = [vec![60; 10], vec![70; 10]].concat();
        assert_eq!(more_samples(&split, &rule, t), Some(10));
        assert_eq!(
            more_samples(&[split.clone(), vec![70; 20]].concat(), &rule, t),
            Some(20)
        );
        // Agreeing halves stop it; so do the sample and time budgets.
        assert_eq!(more_samples(&[60; 20], &rule, t), None);
        assert_eq!(more_samples(&split, &rule, Duration::from_secs(10)), None);
        let near_cap: Vec<u64> = [vec![60; 48], vec![70; 47]].concat();
        assert_eq!(more_samples(&near_cap, &rule, t), Some(5));
        assert_eq!(
            more_samples(&[near_cap, vec![80; 5]].concat(), &rule, t),
            None
        );
        // Too few to judge: take more.
        assert_eq!(more_samples(&[60, 70], &rule, t), Some(10));
    }

    #[test]
    fn a_tens_of_ns_figure_is_never_surer_than_half_the_timers_step() {
        // Halves agree exactly, but the timer reads in 10 ns steps: a 40 ns
        // median is known to +-5 ns, 12.5%.
        let v = [40, 40, 50, 40, 30, 40, 40, 50, 40, 40];
        let (u, halves, step) = region_uncertainty(&v, None);
        assert_eq!((halves, step), (Some(0.0), Some(10.0)));
        assert!((u.unwrap() - 12.5).abs() < 1e-9, "{u:?}");
        // A long region: the halves decide.
        let v = [
            1_000_000, 1_000_100, 1_000_200, 1_030_000, 1_030_100, 1_030_200,
        ];
        let (u, halves, _) = region_uncertainty(&v, None);
        assert_eq!(u, halves);
        assert!(
            (u.unwrap() - 100.0 * 30_000.0 / 1_015_100.0).abs() < 1e-9,
            "{u:?}"
        );
        assert_eq!(region_uncertainty(&[40, 50, 40], None).0, None);
    }

    #[test]
    fn samples_that_all_read_the_same_are_no_surer_than_half_the_calibrated_step() {
        // Twenty 30 ns samples: the halves agree exactly, and the step the
        // samples cannot show is the copies' calibrated one (10 ns: +-5 ns),
        // or at least the unit they are recorded in.
        let (u, halves, step) = region_uncertainty(&[30; 20], Some(10.0));
        assert_eq!((halves, step), (Some(0.0), Some(10.0)));
        assert!((u.unwrap() - 100.0 * 5.0 / 30.0).abs() < 1e-9, "{u:?}");
        let (u, _, step) = region_uncertainty(&[30; 20], None);
        assert_eq!(step, Some(SAMPLE_UNIT_NS));
        assert!((u.unwrap() - 100.0 * 0.5 / 30.0).abs() < 1e-9, "{u:?}");
        assert_eq!(
            region_uncertainty(&[30; 20], Some(0.4)).2,
            Some(SAMPLE_UNIT_NS)
        );
        // Distinct samples show the step themselves.
        assert_eq!(
            region_uncertainty(&[30, 40, 30, 30], Some(1.0)).2,
            Some(10.0)
        );
        assert_eq!(region_uncertainty(&[], Some(10.0)), (None, None, None));
    }
}
