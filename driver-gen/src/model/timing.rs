//! The timing and flush plans: which timer, how many samples and which
//! estimator, the shortest interval, the sampling budget and the flush —
//! each from the command line, else the spec's `timer={...}`, else the
//! machine's defaults, with where the value came from.

use serde::Serialize;
use spec_lang::ast::{FlushMethod, FlushSize, Selection, TimerClause, TimerMethod};

use super::{DriverConfig, ModelError, TimingOverrides};

#[derive(Debug, Clone, Serialize)]
pub struct FlushPlan {
    /// Spelled for the templates by the render view.
    #[serde(skip)]
    pub method: FlushMethod,
    pub kib: u64,
    /// Why this size: "--flush-kib", "spec: L2", "machine: last-level cache (sysfs)".
    pub kib_source: String,
    pub all_cpus: bool,
    /// The flush is meant to reach memory (the last level, sized by the
    /// probe or from the LLC), not a chosen size or an inner level. Then a
    /// read flush starts with a clflush of the flushed operands: a victim
    /// L3 that protects reused lines can keep an operand through reads of
    /// several times its size, and how many times changes with the other
    /// tenants, so a read size probed earlier cannot promise the operands
    /// are cold; clflush evicts them by address, whatever the policy.
    pub to_memory: bool,
    /// What the read evicts when the flush is meant to reach memory and the
    /// flushed operands are clflushed first (x86): `None` reads `kib`.
    pub eviction: Option<Eviction>,
    /// Some operand is `Flushed`. When none is, the driver runs no flush at
    /// all: a flush would only evict what the spec leaves in cache, the
    /// harness's own code and stack and the routine's instructions, and
    /// charge that to the routine (an empty routine would read as the cost
    /// of refetching the timing path).
    pub any_operand_flushed: bool,
}

/// A full flush on a machine that can evict by address. The clflush takes
/// the flushed operands out of every cache level, whatever the last level's
/// size or replacement policy; what the read after it still has to evict is
/// what else a cold call finds missing: the driver's own data in the
/// private caches and the operands' address translations. Both are sized by
/// what holds them (the caches below the last level, the TLB), not by the
/// last-level cache, so a flushed sample costs about the same on a 32 MiB
/// and on a 300 MiB L3, where a read of the whole last level grows with it
/// (docs/benchmarks.md, "flush").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Eviction {
    /// KiB read in one pass: [`FLUSH_OVERSIZE`] x the largest cache below
    /// the last level.
    pub read_kib: u64,
    pub read_source: String,
    /// Pages touched once each (one cache line per page, at a different
    /// offset on each): [`FLUSH_OVERSIZE`] x the data TLB's entries.
    pub tlb_pages: u64,
    pub tlb_source: String,
}

/// The private-cache size assumed when the machine reports no level below
/// the last: the largest L2 of the host kinds tdg runs on.
const FALLBACK_PRIVATE_KIB: u64 = 2048;

/// The eviction after the operands' clflush on this machine.
fn eviction(m: &crate::MachineDefaults) -> Eviction {
    let private = m
        .caches
        .iter()
        .filter(|c| m.llc().is_some_and(|llc| c.level < llc.level))
        .max_by_key(|c| c.level);
    let (read_kib, read_source) = match private {
        Some(c) => (
            c.kib * FLUSH_OVERSIZE,
            format!(
                "{FLUSH_OVERSIZE} x L{} {} KiB ({})",
                c.level, c.kib, m.caches_source
            ),
        ),
        None => (
            FALLBACK_PRIVATE_KIB * FLUSH_OVERSIZE,
            format!(
                "{FLUSH_OVERSIZE} x {FALLBACK_PRIVATE_KIB} KiB (assumed: no cache below the last level is known)"
            ),
        ),
    };
    Eviction {
        read_kib,
        read_source,
        tlb_pages: m.tlb_entries * FLUSH_OVERSIZE,
        tlb_source: format!(
            "{FLUSH_OVERSIZE} x {} TLB entries ({})",
            m.tlb_entries, m.tlb_source
        ),
    }
}

/// The driver can evict by address (`clflush`): the driver is built for
/// this machine by its own compiler.
const CAN_CLFLUSH: bool = cfg!(any(target_arch = "x86_64", target_arch = "x86"));

#[derive(Debug, Clone, Serialize)]
pub struct TimingPlan {
    /// Spelled for the templates by the render view, as is `selection`.
    #[serde(skip)]
    pub method: TimerMethod,
    pub samples: u32,
    #[serde(skip)]
    pub selection: Selection,
    pub min_interval_ns: u64,
    pub min_interval_source: String,
    /// The interval is the machine's default (the probe's, for rdtscp), not
    /// one the spec or the command line chose: a driver using another timer
    /// replaces it with that timer's own (issue 15).
    pub min_interval_is_machine_default: bool,
    /// CPUs the driver pins to, thread k of the routine to the k-th; empty:
    /// unpinned, or with threads > 1 the first CPUs of the driver's affinity
    /// mask, which only the driver can know where it runs.
    pub pin_cpus: Vec<u32>,
    /// The routine's team size: OpenMP's (omp_set_num_threads) and the
    /// thread-count variables other runtimes read (OMP_NUM_THREADS,
    /// OPENBLAS_NUM_THREADS, ...), one CPU per thread.
    pub threads: u32,
    /// "command line", "spec timer={...}" or "default".
    pub threads_source: &'static str,
    /// The operands' pages are first written by the threads that use them,
    /// each its static share (threads > 1 unless `--first-touch main`).
    pub first_touch_threads: bool,
    pub sampling: SamplingPlan,
    /// Bytes past a 4096-byte boundary where the routine's code starts in
    /// the driver (templates/tdg_code_place.S): fixed, so the figure does
    /// not move with the size of the driver's own code.
    pub code_offset: u32,
    /// "command line", "spec timer={...}" or "default". A chosen offset the
    /// toolchain cannot give is an error; the default is placed where the
    /// toolchain allows and only warned about where not.
    pub code_offset_source: &'static str,
}

/// When a driver stops taking samples (its flags can still change it).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SamplingPlan {
    /// Samples are spread over at least this much wall time: this kind of
    /// machine alternates between a fast and a slow state for stretches of
    /// milliseconds to seconds, and a minimum over a fraction of a
    /// millisecond is whichever state that moment offered.
    pub min_time_ms: u64,
    /// Sampling stops here even if the figure has not settled; the result
    /// is then marked unstable. With set-up and verification a default
    /// driver process stays under half a second.
    pub max_time_ms: u64,
    /// The estimator over the first and the second half of the samples must
    /// agree within this relative difference (per cent).
    pub stable_pct: f64,
    /// Where the budget came from: "default", "spec timer={...}", "command
    /// line", or a mix ("min_time from the spec, ...").
    #[serde(skip)]
    pub source: &'static str,
}

/// The budget when neither the spec nor the command line sets one.
pub const DEFAULT_SAMPLING: SamplingPlan = SamplingPlan {
    min_time_ms: 100,
    max_time_ms: 250,
    stable_pct: 0.5,
    source: "default",
};

/// Command line over the spec's `timer={...}` over [`DEFAULT_SAMPLING`],
/// setting by setting.
pub(super) fn resolve_sampling(
    cli: &TimingOverrides,
    spec: &spec_lang::ast::TimerClause,
) -> Result<SamplingPlan, ModelError> {
    fn pick<T>(cli: Option<T>, spec: Option<T>, default: T) -> (T, &'static str) {
        match (cli, spec) {
            (Some(v), _) => (v, "command line"),
            (None, Some(v)) => (v, "spec timer={...}"),
            (None, None) => (default, "default"),
        }
    }
    let d = DEFAULT_SAMPLING;
    let (min_time_ms, min_from) = pick(cli.min_time_ms, spec.min_time_ms, d.min_time_ms);
    let (max_time_ms, max_from) = pick(cli.max_time_ms, spec.max_time_ms, d.max_time_ms);
    let (stable_pct, pct_from) = pick(cli.stable_pct, spec.stable_pct, d.stable_pct);
    if max_time_ms < min_time_ms {
        return Err(ModelError::SamplingBudget {
            min: min_time_ms,
            min_from,
            max: max_time_ms,
            max_from,
        });
    }
    let froms = [min_from, max_from, pct_from];
    let source = if froms.iter().all(|f| *f == froms[0]) {
        froms[0]
    } else if froms.contains(&"command line") && froms.contains(&"spec timer={...}") {
        "spec timer={...} and command line"
    } else if froms.contains(&"command line") {
        "command line, the rest default"
    } else {
        "spec timer={...}, the rest default"
    };
    Ok(SamplingPlan {
        min_time_ms,
        max_time_ms,
        stable_pct,
        source,
    })
}

/// A flush sized from a cache level reads this many times the level's
/// size. Caches do not replace LRU, so reading exactly their size leaves
/// part of the operands behind (the paper's point); twice the size is where
/// a larger read stops making a flushed operand colder.
pub const FLUSH_OVERSIZE: u64 = 2;

/// The flush size, why, and whether it targets memory ([`FlushPlan::to_memory`]).
pub(super) fn resolve_flush_kib(
    cfg: &DriverConfig,
    spec_size: Option<FlushSize>,
) -> Result<(u64, String, bool), ModelError> {
    if let Some(k) = cfg.timing.flush_kib {
        return Ok((k, "command line".into(), false));
    }
    let m = &cfg.machine;
    let have = || {
        m.caches
            .iter()
            .map(|c| format!("L{} {} KiB", c.level, c.kib))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match spec_size {
        Some(FlushSize::KiB(k)) => Ok((k, "spec timer={...}".into(), false)),
        // Flushing the last level means flushing everything: the measured
        // full flush, not a multiple of the (effective, shared) LLC size,
        // which on this kind of L3 leaves reused lines behind.
        Some(FlushSize::Level(l)) => match (m.full_flush_kib, m.llc()) {
            (Some(k), Some(llc)) if llc.level == l => Ok((k, m.full_flush_source.clone(), true)),
            _ => m
                .level(l)
                .map(|c| {
                    (
                        c.kib * FLUSH_OVERSIZE,
                        format!(
                            "{FLUSH_OVERSIZE} x L{l} size {} KiB ({})",
                            c.kib, m.caches_source
                        ),
                        m.llc().is_some_and(|llc| llc.level == l),
                    )
                })
                .ok_or_else(|| ModelError::NoSuchCache(l, have())),
        },
        Some(FlushSize::Llc) | None => match m.full_flush_kib {
            // Measured: the smallest read that evicts a warm operand.
            Some(k) => Ok((k, m.full_flush_source.clone(), true)),
            None => {
                let llc = m.llc().ok_or_else(|| ModelError::NoSuchCache(0, have()))?;
                Ok((
                    llc.kib * FLUSH_OVERSIZE,
                    format!(
                        "{FLUSH_OVERSIZE} x last-level cache L{} {} KiB ({})",
                        llc.level, llc.kib, m.caches_source
                    ),
                    true,
                ))
            }
        },
    }
}

/// The flush method (operands need it to decide their cache state), the
/// flush plan without its one operand-dependent flag, and the timing plan.
pub(super) fn plan(
    cfg: &DriverConfig,
    tc: &TimerClause,
) -> Result<(FlushMethod, FlushPlan, TimingPlan), ModelError> {
    let flush_method = cfg.timing.flush.or(tc.flush).unwrap_or(FlushMethod::Read);
    let (flush_kib, kib_source, to_memory) = resolve_flush_kib(
        cfg,
        cfg.timing
            .flush_level
            .map(FlushSize::Level)
            .or(tc.flush_size),
    )?;
    let timer = cfg.timing.timer.or(tc.method).unwrap_or(TimerMethod::Cycle);
    let samples = cfg.timing.samples.or(tc.samples).unwrap_or(7);
    if samples == 0 {
        return Err(ModelError::NoSamples);
    }
    // ATLAS: min for wall-clock timers (noise only adds), median for CPU time
    // (its error goes both ways).
    let selection = cfg
        .timing
        .selection
        .or(tc.select)
        .unwrap_or(if timer == TimerMethod::Cpu {
            Selection::Median
        } else {
            Selection::Min
        });
    let sampling = resolve_sampling(&cfg.timing, tc)?;
    let min_interval_is_machine_default =
        cfg.timing.min_interval_ns.is_none() && tc.min_interval_ns.is_none();
    let (min_interval_ns, min_interval_source) =
        match (cfg.timing.min_interval_ns, tc.min_interval_ns) {
            (Some(v), _) => (v, "command line".to_string()),
            (None, Some(v)) => (v, "spec timer={...}".to_string()),
            (None, None) => (
                cfg.machine.min_interval_ns,
                cfg.machine.min_interval_source.clone(),
            ),
        };
    let (code_offset, code_offset_source) = match (cfg.timing.code_offset, tc.code_offset) {
        (Some(v), _) => (v, "command line"),
        (None, Some(v)) => (v, "spec timer={...}"),
        (None, None) => (0, "default"),
    };
    if code_offset >= crate::CODE_PAGE {
        return Err(ModelError::CodeOffset(code_offset));
    }
    let (threads, threads_source) = match (cfg.timing.threads, tc.threads) {
        (Some(n), _) => (n, "command line"),
        (None, Some(n)) => (n, "spec timer={...}"),
        (None, None) => (1, "default"),
    };
    // The ATLAS timing paper's rule: parallel code is timed in wall time;
    // CPU time sums the threads and shows every speedup as perfect.
    if threads > 1 && timer == TimerMethod::Cpu {
        return Err(ModelError::CpuTimerThreads {
            threads,
            threads_from: threads_source,
        });
    }
    let pins = &cfg.timing.pin_cpus;
    if let Some(&c) = pins
        .iter()
        .enumerate()
        .find(|(i, c)| pins[..*i].contains(c))
        .map(|(_, c)| c)
    {
        return Err(ModelError::RepeatedPin(c));
    }
    if !pins.is_empty() && pins.len() < threads as usize {
        return Err(ModelError::TooFewPins {
            threads,
            threads_from: threads_source,
            pins: pins.len(),
        });
    }
    let flush = FlushPlan {
        method: flush_method,
        kib: flush_kib,
        kib_source,
        // Operands a parallel routine used sit in every participating
        // CPU's private caches: the flush runs on all of them.
        all_cpus: cfg.timing.flush_all_cpus || threads > 1,
        to_memory,
        eviction: (to_memory && flush_method == FlushMethod::Read && CAN_CLFLUSH)
            .then(|| eviction(&cfg.machine)),
        any_operand_flushed: false,
    };
    let timing = TimingPlan {
        method: timer,
        samples,
        selection,
        min_interval_ns,
        min_interval_source,
        min_interval_is_machine_default,
        pin_cpus: pins.clone(),
        threads,
        threads_source,
        first_touch_threads: threads > 1 && !cfg.timing.first_touch_main,
        sampling,
        code_offset,
        code_offset_source,
    };
    Ok((flush_method, flush, timing))
}
