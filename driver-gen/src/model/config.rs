//! What a driver model is built under besides the spec: the timing the
//! command line imposes and the machine's defaults.

#[cfg(feature = "cli")]
use crate::cli::{first_touch_main, keyword, positive_percent};
use crate::defaults::MachineDefaults;
use spec_lang::ast::{CodeOffset, FlushMethod, Selection, TimerMethod};

/// Timing settings the command line (or a caller) imposes; `None` falls
/// back to the spec's `timer={...}`, then to the machine defaults. One
/// struct from `tdg`'s options through `RunOptions` to the model: with the
/// feature `cli` it is the timing options' declaration, so a command line
/// parses straight into it (each field's doc is its `--help` line).
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct TimingOverrides {
    /// Timer (default: the spec's, else cycle).
    #[cfg_attr(feature = "cli", arg(help_heading = "Timing", long, value_parser = keyword::<TimerMethod>()))]
    pub timer: Option<TimerMethod>,
    /// Number of timing samples (default: the spec's, else 7).
    #[cfg_attr(feature = "cli", arg(help_heading = "Timing", long, value_parser = clap::value_parser!(u32).range(1..)))]
    pub samples: Option<u32>,
    /// Reported statistic (default: min for wall/cycle, median for cpu).
    #[cfg_attr(feature = "cli", arg(help_heading = "Timing", long = "select", value_name = "SELECT", value_parser = keyword::<Selection>()))]
    pub selection: Option<Selection>,
    /// Cache flush before each timed call.
    #[cfg_attr(feature = "cli", arg(help_heading = "Timing", long, value_parser = keyword::<FlushMethod>()))]
    pub flush: Option<FlushMethod>,
    /// Flush size in KiB (the command line's `--flush-kb`, which may name
    /// several sizes for a sweep, is declared beside this struct).
    #[cfg_attr(feature = "cli", arg(skip))]
    pub flush_kib: Option<u64>,
    /// Flush sized from this cache level (1, 2, 3; twice its sysfs size).
    #[cfg_attr(
        feature = "cli",
        arg(help_heading = "Timing", long, conflicts_with = "flush_kb")
    )]
    pub flush_level: Option<u8>,
    /// Flush on every CPU (for parallel routines).
    #[cfg_attr(feature = "cli", arg(help_heading = "Timing", long))]
    pub flush_all_cpus: bool,
    /// Shortest timed interval in ns (0: always one call per sample).
    #[cfg_attr(feature = "cli", arg(help_heading = "Timing", long))]
    pub min_interval_ns: Option<u64>,
    /// Pin the driver to this CPU; with --threads, thread k to the k-th of
    /// a list (default then: the CPUs tdg may use, from its affinity mask).
    #[cfg_attr(
        feature = "cli",
        arg(
            help_heading = "Timing",
            long = "pin",
            value_delimiter = ',',
            value_name = "CPU[,CPU...]"
        )
    )]
    pub pin_cpus: Vec<u32>,
    /// The routine's threads (default: the spec's threads, else 1): OpenMP's
    /// team size, exported as OMP_NUM_THREADS/OPENBLAS_NUM_THREADS for other
    /// runtimes, each thread pinned to its own CPU, wall or cycle time only.
    #[cfg_attr(
        feature = "cli",
        arg(help_heading = "Timing", long, value_name = "N",
            value_parser = clap::value_parser!(u32).range(1..=i64::from(spec_lang::ast::MAX_THREADS)))
    )]
    pub threads: Option<u32>,
    /// Who writes the operands' pages first when threads > 1: the threads
    /// that use them (default), or the main thread.
    #[cfg_attr(
        feature = "cli",
        arg(help_heading = "Timing", long = "first-touch", value_name = "WHO", value_parser = first_touch_main(),
            action = clap::ArgAction::Set, default_value = "threads", hide_default_value = true)
    )]
    pub first_touch_main: bool,
    /// Spread the samples over at least this many milliseconds (default:
    /// the spec's min_time, else 100).
    #[cfg_attr(feature = "cli", arg(help_heading = "Timing", long, value_name = "MS"))]
    pub min_time_ms: Option<u64>,
    /// Stop sampling after this many milliseconds; the result is then marked
    /// unstable if it has not settled (default: the spec's max_time, else 250).
    #[cfg_attr(
        feature = "cli",
        arg(help_heading = "Timing", long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))
    )]
    pub max_time_ms: Option<u64>,
    /// The estimator over the two halves of the samples must agree within
    /// this many per cent (default: the spec's stable, else 0.5).
    #[cfg_attr(feature = "cli", arg(help_heading = "Timing", long, value_name = "PCT", value_parser = positive_percent))]
    pub stable_pct: Option<f64>,
    /// Start the routine's code this many bytes past a 4096-byte boundary
    /// (0-4095; default: the spec's code_offset, else 0): its address
    /// modulo 4096 in the application (`nm APP | grep ROUTINE`) times it as
    /// placed there.
    #[cfg_attr(
        feature = "cli",
        arg(help_heading = "Timing", long, value_name = "BYTES")
    )]
    pub code_offset: Option<CodeOffset>,
    /// Relative tolerance for verification; `None`: per element type (the
    /// command line's `--tolerance` is the verification group's).
    #[cfg_attr(feature = "cli", arg(skip))]
    pub tolerance: Option<f64>,
}

/// Everything the model is built under besides the spec (whose `-D`
/// values the [`CheckedSpec`] already holds).
#[derive(Debug, Clone)]
pub struct DriverConfig {
    pub timing: TimingOverrides,
    pub machine: MachineDefaults,
    /// Outputs are compared with another implementation's (`--reference
    /// K.c`) instead of the spec's body.
    pub external_reference: bool,
}

impl DriverConfig {
    pub fn new(machine: MachineDefaults) -> Self {
        DriverConfig {
            timing: TimingOverrides::default(),
            machine,
            external_reference: false,
        }
    }
}
