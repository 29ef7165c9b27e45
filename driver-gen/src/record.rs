//! The run record: everything one run of a driver measured, with the
//! settings it ran under. It is the one type every reporter reads, as
//! Google Benchmark's `Run` feeds its reporters: the text table and CSV
//! ([`crate::report`]), `tdg run --json`, Google Benchmark JSON and T4
//! (`formats`), and the report pages (`report`).
//!
//! The driver's JSON reader ((`driver_json::parse`)) produces it
//! directly from the driver's line: what the driver measured is read into
//! its fields as they are, nothing is copied from a mirror type. What only
//! tdg knows (the compiler and flags the driver was built with) and every
//! setting with its source come from the resolved plan afterwards
//! ([`RunReport::settle`]): the record never takes a setting from the
//! driver's words. The same serde shape reads `tdg run --json` back.

use serde::{Deserialize, Deserializer, Serialize};
use spec_lang::ast::{FlushMethod, Selection, TimerMethod};
use stats::Summary;

use crate::model::{FlushPlan, Origin, Source, TimingPlan};

/// The read of a full flush after the operands' clflush, as the driver ran
/// it: the model's eviction plan, with where each size came from.
pub use crate::model::Eviction as FlushEviction;

/// Everything one driver run measured, serialisable for `--json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub routine: String,
    /// The compiler the driver was built with (tdg's, not the driver's).
    #[serde(default)]
    pub compiler: String,
    #[serde(default)]
    pub impl_cflags: Vec<String>,
    #[serde(default)]
    pub defines: Vec<String>,
    /// Timer used (a missing TSC falls back to wall) and the one asked for.
    #[serde(with = "crate::keyword_json")]
    pub timer: TimerMethod,
    #[serde(with = "crate::keyword_json")]
    pub timer_requested: TimerMethod,
    #[serde(deserialize_with = "positive")]
    pub tsc_hz: Option<f64>,
    pub tsc_hz_source: String,
    /// Empty-interval cost, subtracted from every sample.
    #[serde(deserialize_with = "null_as_zero")]
    pub timer_overhead_ns: f64,
    #[serde(deserialize_with = "null_as_zero")]
    pub timer_resolution_ns: f64,
    /// "single-call", "self-flushing" (R calls over rotating working sets) or
    /// "repeated" (R calls, same data).
    pub mode: String,
    #[serde(alias = "reps")]
    pub reps_per_sample: u64,
    pub working_sets: u64,
    /// The flush the driver ran (none when no operand is flushed).
    #[serde(with = "crate::keyword_json")]
    pub flush: FlushMethod,
    pub flush_kib: u64,
    /// `sources.flush_kib` in words, for readers of the version 2 contract.
    #[serde(default)]
    pub flush_kib_source: String,
    pub flush_all_cpus: bool,
    pub flush_cpus: Vec<i32>,
    /// A read flush meant to reach memory began with a clflush of the
    /// flushed operands (single-call mode, x86).
    #[serde(default)]
    pub flush_clflushes_operands: bool,
    /// What the read after that clflush evicted instead of `flush_kib`, as
    /// the driver ran it: KiB read and pages touched (0: it read `flush_kib`,
    /// or no single-call sample ran).
    #[serde(default)]
    pub flush_evict_kib: u64,
    #[serde(default)]
    pub flush_evict_pages: u64,
    /// That eviction as the plan sized it, with why; `None` when the driver
    /// read `flush_kib`.
    #[serde(default)]
    pub flush_eviction: Option<FlushEviction>,
    /// Mean wall time of the cache preparation before each single-call
    /// sample (clflush, read, re-warming the code): what the flush costs
    /// per sample, outside the timed interval. `None` without one.
    #[serde(default, deserialize_with = "positive")]
    pub flush_ns_per_sample: Option<f64>,
    pub min_interval_ns: u64,
    /// The driver's own reason for its interval when its timer is not the
    /// one the machine's interval belongs to (empty otherwise).
    #[serde(default)]
    pub min_interval_why: String,
    /// `sources.min_interval` in words, for readers of the version 2 contract.
    #[serde(default)]
    pub min_interval_source: String,
    /// Where each timing setting of this run came from, carried from the
    /// plan the run was resolved into (`None`: a report written before tdg
    /// recorded them).
    #[serde(default)]
    pub sources: Option<SettingSources>,
    /// Per-call nanoseconds of every sample, in order.
    pub samples_ns: Vec<f64>,
    pub sample_cpus: Vec<i32>,
    /// The driver's own statistics of `samples_ns` (its JSON line's `stats`);
    /// `n` is `samples_ns.len()`, which the JSON does not repeat: the
    /// readers set it ([`RunReport::count_samples`]).
    #[serde(with = "crate::summary_json")]
    pub stats: Summary,
    #[serde(with = "crate::keyword_json")]
    pub selection: Selection,
    pub reported_ns: f64,
    #[serde(default)]
    pub reported_why: String,
    /// How far the estimator over the first half of the samples is from the
    /// one over the second half, in per cent of the reported figure: the
    /// run's own measure of how settled the figure is (`None`: too few
    /// samples to tell).
    pub uncertainty_pct: Option<f64>,
    /// The figure settled within the tolerance before the budget ran out.
    pub stable: bool,
    /// Why not, and what to do (empty when stable).
    pub unstable_reason: String,
    pub sampling: Sampling,
    /// "hot": after a flush the routine's code was re-warmed (operands stay
    /// cold); "cold": `--cold-code`, everything as the flush left it.
    pub code: String,
    /// The routine's address modulo 4096 in the driver: where its code fell
    /// against fetch blocks and pages (`TimingPlan::code_offset` chose it).
    #[serde(default, deserialize_with = "non_negative")]
    pub code_page_offset: Option<u32>,
    pub flops_per_call: Option<f64>,
    #[serde(default)]
    pub mflops_best: Option<f64>,
    #[serde(default)]
    pub mflops_avg: Option<f64>,
    pub page_faults_during_timing: i64,
    /// The CPU the driver's thread was pinned to (`None`: unpinned).
    #[serde(deserialize_with = "non_negative")]
    pub pinned_cpu: Option<i32>,
    #[serde(flatten)]
    pub team: TeamReport,
    pub touch_pages: bool,
    pub dummy_call: bool,
    pub overflow_guard: String,
    pub outputs_finite: bool,
    /// Output values that became denormal during timing (not in the fill).
    pub outputs_denormal: i64,
    pub operands: Vec<OperandReport>,
    pub verification: Verification,
    pub warnings: Vec<String>,
}

/// The routine's threads as the driver ran them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamReport {
    /// Threads that ran the timed calls, measured: the driver's thread and
    /// every other thread of the process whose CPU time grew by a quarter of
    /// the timed time or more while it sampled.
    pub threads: u32,
    pub threads_requested: u32,
    /// The driver was built with OpenMP (the implementation's flags had it).
    pub openmp: bool,
    /// omp_get_num_threads() in the driver's start-up region (0 without OpenMP).
    pub omp_team: u32,
    /// CPU of thread k (empty: unpinned).
    pub thread_cpus: Vec<i32>,
    /// CPU time of each thread counted in `threads` while sampling, ms.
    pub thread_busy_ms: Vec<f64>,
    /// "threads": each thread first wrote its share of the operands' pages;
    /// "main": the driver's thread wrote them all.
    pub first_touch: String,
    /// Page faults each thread took while first-touching (the kernel's count:
    /// a page is placed where it first faults).
    pub first_touch_faults: Vec<i64>,
}

/// How the driver decided how many samples to take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// False when `--samples` fixed the count.
    pub adaptive: bool,
    pub min_samples: u32,
    pub min_time_ms: u64,
    pub max_time_ms: u64,
    pub stable_pct: f64,
    /// Wall time the samples took.
    pub elapsed_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperandReport {
    pub name: String,
    pub bytes: u64,
    /// Address of the first working set's copy.
    pub address: u64,
    pub align: u64,
    pub misalign: u64,
    /// "flushed" or "warm".
    pub cache: String,
    /// Copies in the self-flushing area (1 when it does not rotate).
    pub copies: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verification {
    /// "passed", "failed" or "skipped".
    pub status: String,
    pub detail: String,
}

/// Where each timing setting of a run came from: the command line, the
/// spec's `timer={...}`, the machine or tdg's default, with how the value
/// follows from it (the cache level a flush was sized from, say).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingSources {
    pub timer: Origin,
    pub samples: Origin,
    pub selection: Origin,
    pub flush: Origin,
    pub flush_kib: Origin,
    pub flush_all_cpus: Origin,
    pub min_interval: Origin,
    pub min_time: Origin,
    pub max_time: Origin,
    pub stable_pct: Origin,
    pub threads: Origin,
    pub pin: Origin,
    pub first_touch: Origin,
    pub code_offset: Origin,
}

impl SettingSources {
    fn of(flush: &FlushPlan, timing: &TimingPlan) -> SettingSources {
        SettingSources {
            timer: timing.method.origin(),
            samples: timing.samples.origin(),
            selection: timing.selection.origin(),
            flush: flush.method_in_effect().origin(),
            flush_kib: flush.kib.origin(),
            flush_all_cpus: flush.all_cpus.origin(),
            min_interval: timing.min_interval_ns.origin(),
            min_time: timing.sampling.min_time_ms.origin(),
            max_time: timing.sampling.max_time_ms.origin(),
            stable_pct: timing.sampling.stable_pct.origin(),
            threads: timing.threads.origin(),
            pin: timing.pin_cpus.origin(),
            first_touch: timing.first_touch_threads.origin(),
            code_offset: timing.code_offset.origin(),
        }
    }
}

/// What tdg built the driver with, which the driver's line cannot say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BuildRecord {
    pub compiler: String,
    pub impl_cflags: Vec<String>,
    pub defines: Vec<String>,
}

impl RunReport {
    /// Sets `stats.n` from the samples, which the JSON does not repeat.
    pub fn count_samples(mut self) -> Self {
        self.stats.n = self.samples_ns.len();
        self
    }

    /// Completes a record read from the driver's line: the build it ran,
    /// and each setting with its source as `flush` and `timing` resolved it
    /// (never the driver's words for them), with the figures that follow.
    pub fn settle(&mut self, build: &BuildRecord, flush: &FlushPlan, timing: &TimingPlan) {
        self.compiler.clone_from(&build.compiler);
        self.impl_cflags.clone_from(&build.impl_cflags);
        self.defines.clone_from(&build.defines);
        let mut sources = SettingSources::of(flush, timing);
        // The machine's interval belongs to the cycle timer; a driver on
        // another timer measured that timer's step and says what it chose.
        if !self.min_interval_why.is_empty() {
            sources.min_interval = Origin {
                source: Source::Machine,
                detail: self.min_interval_why.clone(),
            };
        }
        self.timer_requested = timing.method.value;
        self.selection = timing.selection.value;
        self.reported_why = timing.estimator_why();
        self.flush_kib = flush.kib.value;
        self.flush_kib_source = sources.flush_kib.to_string();
        // Whether the eviction ran is the driver's to say (single-call
        // samples only); what it read, and why, is the plan's.
        self.flush_eviction = (self.flush_evict_kib > 0 || self.flush_evict_pages > 0)
            .then(|| flush.eviction.clone())
            .flatten();
        self.min_interval_source = sources.min_interval.to_string();
        self.sources = Some(sources);
        let flops = self.flops_per_call.filter(|f| *f > 0.0);
        let mflops = |ns: f64| flops.filter(|_| ns > 0.0).map(|f| f / ns * 1e3);
        (self.mflops_best, self.mflops_avg) = (mflops(self.stats.min), mflops(self.stats.mean));
    }
}

/// A figure the driver writes as 0 or less (or null) when it has none.
fn positive<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.filter(|v| *v > 0.0))
}

/// A cost the driver writes as null when it did not measure one.
fn null_as_zero<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(0.0))
}

/// A CPU or offset the driver writes as -1 (the record as null) when there
/// is none.
fn non_negative<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i64>,
{
    Ok(Option::<i64>::deserialize(d)?
        .filter(|v| *v >= 0)
        .and_then(|v| T::try_from(v).ok()))
}
