//! The timing and flush plans: which timer, how many samples and which
//! estimator, the shortest interval, the sampling budget, the flush, the
//! team and the code's placement. Every setting is resolved here once, by
//! one precedence (the command line, else the spec's `timer={...}`, else
//! the machine or tdg's default), into a [`Sourced`] value that carries
//! where it came from to the driver, `tdg explain` and the run report.

use serde::{Deserialize, Serialize};
use spec_lang::ast::{CodeOffset, FlushMethod, FlushSize, Selection, TimerClause, TimerMethod};

use super::config::TimingOverrides;
use super::error::ModelError;
use super::sourced::{Source, Sourced};
use crate::defaults::MachineDefaults;
use spec_lang::vocabulary::Keyword;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlushPlan {
    /// Spelled for the templates by the render view.
    #[serde(skip)]
    pub method: Sourced<FlushMethod>,
    /// KiB the read flush reads (or the self-flushing working sets span).
    pub kib: Sourced<u64>,
    pub all_cpus: Sourced<bool>,
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

impl FlushPlan {
    /// The flush the driver runs: none when no operand is flushed, whatever
    /// method was asked for (it would only evict what the spec keeps warm).
    pub fn method_in_effect(&self) -> Sourced<FlushMethod> {
        if self.any_operand_flushed || self.method.value == FlushMethod::None {
            return self.method.clone();
        }
        Sourced::new(FlushMethod::None, Source::Default).with_detail(format!(
            "no operand is flushed ({} {} asked for)",
            self.method.source,
            self.method.value.spelling()
        ))
    }
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
fn eviction(m: &MachineDefaults) -> Eviction {
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

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimingPlan {
    /// Spelled for the templates by the render view, as is `selection`.
    #[serde(skip)]
    pub method: Sourced<TimerMethod>,
    /// At least this many samples; exactly this many when `samples_exact`.
    pub samples: Sourced<u32>,
    /// A count given on the command line is taken exactly (`--samples N`);
    /// the spec's or the default is the least the adaptive sampling takes.
    pub samples_exact: bool,
    #[serde(skip)]
    pub selection: Sourced<Selection>,
    /// The machine's interval (the probe's, for the cycle timer) is
    /// replaced by the driver with the timer in use's own when that is
    /// another timer (1000 of its steps, at least 10 us).
    pub min_interval_ns: Sourced<u64>,
    /// CPUs the driver pins to, thread k of the routine to the k-th; empty:
    /// unpinned, or with threads > 1 the first CPUs of the driver's affinity
    /// mask, which only the driver can know where it runs.
    pub pin_cpus: Sourced<Vec<u32>>,
    /// The routine's team size: OpenMP's (omp_set_num_threads) and the
    /// thread-count variables other runtimes read (OMP_NUM_THREADS,
    /// OPENBLAS_NUM_THREADS, ...), one CPU per thread.
    pub threads: Sourced<u32>,
    /// The operands' pages are first written by the threads that use them,
    /// each its static share (threads > 1 unless `--first-touch main`).
    pub first_touch_threads: Sourced<bool>,
    pub sampling: SamplingPlan,
    /// Bytes past a 4096-byte boundary where the routine's code starts in
    /// the driver (templates/tdg_code_place.S): fixed, so the figure does
    /// not move with the size of the driver's own code. A chosen offset the
    /// toolchain cannot give is an error; the default is placed where the
    /// toolchain allows and only warned about where not.
    pub code_offset: Sourced<u32>,
}

impl TimingPlan {
    /// The machine's shortest interval stands (the driver may replace it
    /// with its timer's own): neither the spec nor the command line chose one.
    pub fn min_interval_is_machine_default(&self) -> bool {
        self.min_interval_ns.source == Source::Machine
    }

    /// Why the report's figure is the statistic it is.
    pub fn estimator_why(&self) -> String {
        let cpu = self.method.value == TimerMethod::Cpu;
        match (self.selection.value, self.selection.source) {
            (Selection::Median, Source::Default) => {
                "median of the samples: CPU time errs in both directions, so extremes are dropped"
                    .to_string()
            }
            (Selection::Min, Source::Default) => {
                "minimum of the samples: with wall-clock time, other activity only ever adds time"
                    .to_string()
            }
            (Selection::Median, from) => format!("median of the samples (asked for: {from})"),
            (Selection::Min, from) if cpu => format!(
                "minimum of the samples (asked for: {from}; CPU time usually wants the median)"
            ),
            (Selection::Min, from) => format!("minimum of the samples (asked for: {from})"),
        }
    }
}

/// When a driver stops taking samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SamplingPlan {
    /// Samples are spread over at least this much wall time: this kind of
    /// machine alternates between a fast and a slow state for stretches of
    /// milliseconds to seconds, and a minimum over a fraction of a
    /// millisecond is whichever state that moment offered.
    pub min_time_ms: Sourced<u64>,
    /// Sampling stops here even if the figure has not settled; the result
    /// is then marked unstable. With set-up and verification a default
    /// driver process stays under half a second.
    pub max_time_ms: Sourced<u64>,
    /// The estimator over the first and the second half of the samples must
    /// agree within this relative difference (per cent).
    pub stable_pct: Sourced<f64>,
}

/// The budget when neither the spec nor the command line sets one.
pub const DEFAULT_MIN_TIME_MS: u64 = 100;
pub const DEFAULT_MAX_TIME_MS: u64 = 250;
pub const DEFAULT_STABLE_PCT: f64 = 0.5;
/// The least number of samples when neither the spec nor the command line
/// sets one.
pub const DEFAULT_SAMPLES: u32 = 7;

/// A flush sized from a cache level reads this many times the level's
/// size. Caches do not replace LRU, so reading exactly their size leaves
/// part of the operands behind (the paper's point); twice the size is where
/// a larger read stops making a flushed operand colder.
pub const FLUSH_OVERSIZE: u64 = 2;

/// The flush size and whether it targets memory ([`FlushPlan::to_memory`]),
/// for the size asked for by `request` (with its source).
fn flush_size(
    m: &MachineDefaults,
    request: Sourced<Option<FlushSize>>,
) -> Result<(Sourced<u64>, bool), ModelError> {
    let have = || {
        m.caches
            .iter()
            .map(|c| format!("L{} {} KiB", c.level, c.kib))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let source = request.source;
    let sized = |kib: u64, detail: String| Sourced::new(kib, source).with_detail(detail);
    match request.value {
        Some(FlushSize::KiB(k)) => Ok((Sourced::new(k, source), false)),
        // Flushing the last level means flushing everything: the measured
        // full flush, not a multiple of the (effective, shared) LLC size,
        // which on this kind of L3 leaves reused lines behind.
        Some(FlushSize::Level(l)) => match (m.full_flush_kib, m.llc()) {
            (Some(k), Some(llc)) if llc.level == l => {
                Ok((sized(k, m.full_flush_source.clone()), true))
            }
            _ => m
                .level(l)
                .map(|c| {
                    (
                        sized(
                            c.kib * FLUSH_OVERSIZE,
                            format!(
                                "{FLUSH_OVERSIZE} x L{l} size {} KiB ({})",
                                c.kib, m.caches_source
                            ),
                        ),
                        m.llc().is_some_and(|llc| llc.level == l),
                    )
                })
                .ok_or_else(|| ModelError::NoSuchCache(l, have())),
        },
        Some(FlushSize::Llc) | None => match m.full_flush_kib {
            // Measured: the smallest read that evicts a warm operand.
            Some(k) => Ok((sized(k, m.full_flush_source.clone()), true)),
            None => {
                let llc = m.llc().ok_or_else(|| ModelError::NoSuchCache(0, have()))?;
                Ok((
                    sized(
                        llc.kib * FLUSH_OVERSIZE,
                        format!(
                            "{FLUSH_OVERSIZE} x last-level cache L{} {} KiB ({})",
                            llc.level, llc.kib, m.caches_source
                        ),
                    ),
                    true,
                ))
            }
        },
    }
}

/// Every timing and flush setting of a driver, resolved once from the
/// caller's overrides, the spec's `timer={...}` and the machine. The flush
/// plan's `any_operand_flushed` is the operands' to set.
pub fn resolve(
    cli: &TimingOverrides,
    spec: &TimerClause,
    machine: &MachineDefaults,
) -> Result<(FlushPlan, TimingPlan), ModelError> {
    let Sampled {
        method,
        samples,
        selection,
        sampling,
    } = resolve_sampling(cli, spec)?;
    let min_interval_ns = Sourced::pick(cli.min_interval_ns, spec.min_interval_ns, || {
        Sourced::new(machine.min_interval_ns, Source::Machine)
            .with_detail(machine.min_interval_source.clone())
    });
    let code_offset = Sourced::pick(cli.code_offset, spec.code_offset, || {
        default(CodeOffset::default())
    });
    let code_offset = Sourced {
        value: code_offset.value.get(),
        source: code_offset.source,
        detail: code_offset.detail,
    };
    let team = resolve_team(cli, spec, method.value)?;
    let flush = resolve_flush(cli, spec, machine, team.threads.value)?;
    let timing = TimingPlan {
        samples_exact: samples.source == Source::CommandLine,
        method,
        samples,
        selection,
        min_interval_ns,
        pin_cpus: team.pin_cpus,
        threads: team.threads,
        first_touch_threads: team.first_touch_threads,
        sampling,
        code_offset,
    };
    Ok((flush, timing))
}

fn default<T>(value: T) -> Sourced<T> {
    Sourced::new(value, Source::Default)
}

/// The timer, the sample count, the statistic and the sampling budget.
struct Sampled {
    method: Sourced<TimerMethod>,
    samples: Sourced<u32>,
    selection: Sourced<Selection>,
    sampling: SamplingPlan,
}

fn resolve_sampling(cli: &TimingOverrides, spec: &TimerClause) -> Result<Sampled, ModelError> {
    let method = Sourced::pick(cli.timer, spec.method, || default(TimerMethod::Cycle));
    let samples = Sourced::pick(cli.samples, spec.samples, || default(DEFAULT_SAMPLES));
    if samples.value == 0 {
        return Err(ModelError::NoSamples);
    }
    // ATLAS: min for wall-clock timers (noise only adds), median for CPU time
    // (its error goes both ways).
    let selection = Sourced::pick(cli.selection, spec.select, || {
        match method.value {
            TimerMethod::Cpu => default(Selection::Median),
            _ => default(Selection::Min),
        }
        .with_detail(format!(
            "the rule for the {} timer",
            method.value.spelling()
        ))
    });
    let sampling = SamplingPlan {
        min_time_ms: Sourced::pick(cli.min_time_ms, spec.min_time_ms, || {
            default(DEFAULT_MIN_TIME_MS)
        }),
        max_time_ms: Sourced::pick(cli.max_time_ms, spec.max_time_ms, || {
            default(DEFAULT_MAX_TIME_MS)
        }),
        stable_pct: Sourced::pick(cli.stable_pct, spec.stable_pct, || {
            default(DEFAULT_STABLE_PCT)
        }),
    };
    if sampling.max_time_ms.value < sampling.min_time_ms.value {
        return Err(ModelError::SamplingBudget {
            min: sampling.min_time_ms.value,
            min_from: sampling.min_time_ms.source,
            max: sampling.max_time_ms.value,
            max_from: sampling.max_time_ms.source,
        });
    }
    Ok(Sampled {
        method,
        samples,
        selection,
        sampling,
    })
}

/// The routine's team: its size, its pins and who first touches the pages.
struct Team {
    threads: Sourced<u32>,
    pin_cpus: Sourced<Vec<u32>>,
    first_touch_threads: Sourced<bool>,
}

fn resolve_team(
    cli: &TimingOverrides,
    spec: &TimerClause,
    method: TimerMethod,
) -> Result<Team, ModelError> {
    let threads = Sourced::pick(cli.threads, spec.threads, || default(1));
    // The ATLAS timing paper's rule: parallel code is timed in wall time;
    // CPU time sums the threads and shows every speedup as perfect.
    if threads.value > 1 && method == TimerMethod::Cpu {
        return Err(ModelError::CpuTimerThreads {
            threads: threads.value,
            threads_from: threads.source,
        });
    }
    let pins = &cli.pin_cpus;
    if let Some(&c) = pins
        .iter()
        .enumerate()
        .find(|(i, c)| pins[..*i].contains(c))
        .map(|(_, c)| c)
    {
        return Err(ModelError::RepeatedPin(c));
    }
    if !pins.is_empty() && pins.len() < threads.value as usize {
        return Err(ModelError::TooFewPins {
            threads: threads.value,
            threads_from: threads.source,
            pins: pins.len(),
        });
    }
    Ok(Team {
        pin_cpus: match pins.is_empty() {
            true => default(Vec::new()),
            false => Sourced::new(pins.clone(), Source::CommandLine),
        },
        first_touch_threads: match cli.first_touch_main {
            true => Sourced::new(false, Source::CommandLine),
            false => default(threads.value > 1),
        },
        threads,
    })
}

/// The flush: its method, its size (and whether it must reach memory),
/// its CPUs and the targeted eviction.
fn resolve_flush(
    cli: &TimingOverrides,
    spec: &TimerClause,
    machine: &MachineDefaults,
    threads: u32,
) -> Result<FlushPlan, ModelError> {
    let method = Sourced::pick(cli.flush, spec.flush, || default(FlushMethod::Read));
    let cli_size = cli
        .flush_kib
        .map(FlushSize::KiB)
        .or(cli.flush_level.map(FlushSize::Level));
    let size_request = match (cli_size, spec.flush_size) {
        (Some(s), _) => Sourced::new(Some(s), Source::CommandLine),
        (None, Some(s)) => Sourced::new(Some(s), Source::Spec),
        (None, None) => Sourced::new(None, Source::Machine),
    };
    let (kib, to_memory) = flush_size(machine, size_request)?;
    // Operands a parallel routine used sit in every participating CPU's
    // private caches: the flush runs on all of them.
    let all_cpus = match (cli.flush_all_cpus, threads > 1) {
        (true, _) => Sourced::new(true, Source::CommandLine),
        (false, true) => {
            default(true).with_detail("a parallel routine's operands are in every CPU's caches")
        }
        (false, false) => default(false),
    };
    Ok(FlushPlan {
        eviction: (to_memory && method.value == FlushMethod::Read && CAN_CLFLUSH)
            .then(|| eviction(machine)),
        method,
        kib,
        all_cpus,
        to_memory,
        any_operand_flushed: false,
    })
}
