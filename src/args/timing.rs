//! The timing options `tdg gen`, `run`, `explain` and `tune` share.

use super::defines::parse_defines;
use super::keyword::keyword;
use driver_gen::RunOptions;
use spec_lang::ast::{FlushMethod, Selection, TimerMethod};

/// Timing configuration shared by `tdg gen`, `tdg run` and `tdg explain`.
#[derive(clap::Args, Clone)]
pub struct TimingArgs {
    /// Timer (default: the spec's, else cycle).
    #[arg(long, value_parser = keyword::<TimerMethod>())]
    #[arg(help_heading = "Timing")]
    pub timer: Option<TimerMethod>,
    /// Number of timing samples (default: the spec's, else 7).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    #[arg(help_heading = "Timing")]
    pub samples: Option<u32>,
    /// Reported statistic (default: min for wall/cycle, median for cpu).
    #[arg(long, value_parser = keyword::<Selection>())]
    #[arg(help_heading = "Timing")]
    pub select: Option<Selection>,
    /// Cache flush before each timed call.
    #[arg(long, value_parser = keyword::<FlushMethod>())]
    #[arg(help_heading = "Timing")]
    pub flush: Option<FlushMethod>,
    /// Flush size(s) in KiB; several (comma-separated) run a flush sweep.
    #[arg(long = "flush-kb", alias = "flush-kib", value_delimiter = ',')]
    #[arg(help_heading = "Timing")]
    pub flush_kb: Vec<u64>,
    /// Flush sized from this cache level (1, 2, 3; twice its sysfs size).
    #[arg(long, conflicts_with = "flush_kb")]
    #[arg(help_heading = "Timing")]
    pub flush_level: Option<u8>,
    /// Flush on every CPU (for parallel routines).
    #[arg(long)]
    #[arg(help_heading = "Timing")]
    pub flush_all_cpus: bool,
    /// Shortest timed interval in ns (0: always one call per sample).
    #[arg(long)]
    #[arg(help_heading = "Timing")]
    pub min_interval_ns: Option<u64>,
    /// Pin the driver to this CPU; with --threads, thread k to the k-th of
    /// a list (default then: the CPUs tdg may use, from its affinity mask).
    #[arg(long, value_delimiter = ',', value_name = "CPU[,CPU...]")]
    #[arg(help_heading = "Timing")]
    pub pin: Vec<u32>,
    /// The routine's threads (default: the spec's threads, else 1): OpenMP's
    /// team size, exported as OMP_NUM_THREADS/OPENBLAS_NUM_THREADS for other
    /// runtimes, each thread pinned to its own CPU, wall or cycle time only.
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(spec_lang::ast::MAX_THREADS)))]
    #[arg(help_heading = "Timing")]
    pub threads: Option<u32>,
    /// Who writes the operands' pages first when threads > 1: the threads
    /// that use them (default), or the main thread.
    #[arg(long, value_name = "WHO", value_parser = ["threads", "main"])]
    #[arg(help_heading = "Timing")]
    pub first_touch: Option<String>,
    /// Spread the samples over at least this many milliseconds (default:
    /// the spec's min_time, else 100).
    #[arg(long, value_name = "MS")]
    #[arg(help_heading = "Timing")]
    pub min_time_ms: Option<u64>,
    /// Stop sampling after this many milliseconds; the result is then marked
    /// unstable if it has not settled (default: the spec's max_time, else 250).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    #[arg(help_heading = "Timing")]
    pub max_time_ms: Option<u64>,
    /// The estimator over the two halves of the samples must agree within
    /// this many per cent (default: the spec's stable, else 0.5).
    #[arg(long, value_name = "PCT", value_parser = positive_percent)]
    #[arg(help_heading = "Timing")]
    pub stable_pct: Option<f64>,
    /// Start the routine's code this many bytes past a 4096-byte boundary
    /// (0-4095; default: the spec's code_offset, else 0): its address
    /// modulo 4096 in the application (`nm APP | grep ROUTINE`) times it as
    /// placed there.
    #[arg(long, value_name = "BYTES")]
    #[arg(help_heading = "Timing")]
    pub code_offset: Option<spec_lang::ast::CodeOffset>,
    /// Define a size macro, e.g. -D NS=4096 (repeatable).
    #[arg(short = 'D', value_name = "NAME=VALUE")]
    #[arg(help_heading = "Build")]
    pub define: Vec<String>,
}

impl TimingArgs {
    pub fn apply(&self, o: &mut RunOptions) -> anyhow::Result<()> {
        o.timing.timer = self.timer;
        o.timing.samples = self.samples;
        o.timing.selection = self.select;
        o.timing.flush = self.flush;
        o.timing.flush_kib = self.flush_kb.first().copied();
        o.timing.flush_level = self.flush_level;
        o.timing.flush_all_cpus = self.flush_all_cpus;
        o.timing.min_interval_ns = self.min_interval_ns;
        o.timing.pin_cpus = self.pin.clone();
        o.timing.threads = self.threads;
        o.timing.first_touch_main = self.first_touch.as_deref() == Some("main");
        o.timing.min_time_ms = self.min_time_ms;
        o.timing.max_time_ms = self.max_time_ms;
        o.timing.stable_pct = self.stable_pct;
        o.timing.code_offset = self.code_offset;
        o.defines = parse_defines(&self.define)?;
        // The one place a machine probe may start (and says so).
        o.machine = Some(driver_gen::machine_defaults());
        Ok(())
    }
}

/// A tolerance in per cent: a positive number.
fn positive_percent(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("`{text}` is not a positive percentage; e.g. 0.5")),
    }
}
