//! The CPU side of the probe: what the processor does with the instructions
//! a tuned kernel is made of, measured with generated micro-benchmarks by
//! the methods of X-Ray (core clock from a dependent integer chain, latency
//! and initiation interval of floating-point operations, FMA, usable
//! registers) and BlackjackBench (associativity from conflicting addresses,
//! execution contexts), each beside what the machine documents.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Where a documented value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The processor's own `cpuid` leaves.
    Cpuid,
    /// The kernel's description of the machine under `/sys`.
    Sysfs,
    /// The vendor's published figures for this microarchitecture
    /// ([`crate::vendor`]).
    Vendor,
    /// Nothing on this machine documents it.
    NotDocumented,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Cpuid => "cpuid",
            Source::Sysfs => "sysfs",
            Source::Vendor => "vendor",
            Source::NotDocumented => "not documented",
        })
    }
}

/// A value as the machine documents it, with where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Documented<T> {
    pub value: Option<T>,
    pub source: Source,
}

/// The value with where it came from ("8 (cpuid leaf 4)"), or where it
/// was looked for when nothing documents it: as the probe's table and the
/// report page both print it.
impl<T: std::fmt::Display> std::fmt::Display for Documented<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Padded as a whole when a table asks for a width.
        f.pad(&match &self.value {
            Some(v) => format!("{v} ({})", self.source),
            None => self.source.to_string(),
        })
    }
}

/// A documented yes or no, printed.
pub fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

impl<T> Documented<T> {
    pub fn by(source: Source, value: Option<T>) -> Documented<T> {
        match value {
            Some(v) => Documented {
                value: Some(v),
                source,
            },
            None => Documented::none(),
        }
    }
    pub fn none() -> Documented<T> {
        Documented {
            value: None,
            source: Source::NotDocumented,
        }
    }
}

/// The core clock: one dependent integer add retires per cycle, so a long
/// chain of them counts cycles (X-Ray's CPU frequency benchmark).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoreClock {
    pub measured_ghz: f64,
    /// Core cycles per TSC tick: above 1 when the core runs faster than the
    /// time-stamp counter (boost), below when slower.
    pub per_tsc_tick: Option<f64>,
    /// Base frequency (`cpuid` leaf 0x16) or the maximum `cpufreq` reports.
    pub documented_ghz: Documented<f64>,
}

impl CoreClock {
    /// The measured clock beside the documented one: `3.000 GHz measured
    /// (1.05 x the TSC rate); documented 2.900 GHz (cpuid)`.
    pub fn described(&self) -> String {
        format!(
            "{:.3} GHz measured{}; documented {}",
            self.measured_ghz,
            self.per_tsc_tick
                .map(|r| format!(" ({r:.2} x the TSC rate)"))
                .unwrap_or_default(),
            match self.documented_ghz.value {
                Some(g) => format!("{g:.3} GHz ({})", self.documented_ghz.source),
                None => self.documented_ghz.source.to_string(),
            }
        )
    }
}

/// A double-precision operation whose timing is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FpOp {
    Add,
    Mul,
    /// Fused multiply-add, timed through its addend.
    Fma,
}

impl FpOp {
    pub const ALL: [FpOp; 3] = [FpOp::Add, FpOp::Mul, FpOp::Fma];
    pub fn name(self) -> &'static str {
        match self {
            FpOp::Add => "add",
            FpOp::Mul => "mul",
            FpOp::Fma => "fma",
        }
    }
}

/// The register width an operation works on: one double, or a vector of
/// the instruction-set extension that introduced that width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Width {
    /// One double in the low lane (`addsd`).
    Scalar,
    /// Two doubles, SSE2 (`addpd xmm`).
    Sse2,
    /// Four doubles, AVX/AVX2 (`vaddpd ymm`).
    Avx2,
    /// Eight doubles, AVX-512F (`vaddpd zmm`).
    Avx512,
}

impl Width {
    pub const ALL: [Width; 4] = [Width::Scalar, Width::Sse2, Width::Avx2, Width::Avx512];
    pub fn bits(self) -> u32 {
        match self {
            Width::Scalar => 64,
            Width::Sse2 => 128,
            Width::Avx2 => 256,
            Width::Avx512 => 512,
        }
    }
    pub fn doubles(self) -> u32 {
        self.bits() / 64
    }
    pub fn name(self) -> &'static str {
        match self {
            Width::Scalar => "scalar",
            Width::Sse2 => "sse2",
            Width::Avx2 => "avx2",
            Width::Avx512 => "avx512",
        }
    }
}

/// Latency and reciprocal throughput of one operation at one width, in core
/// cycles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FpTiming {
    pub op: FpOp,
    pub width: Width,
    /// Cycles from issue to a dependent operation (a chain of them).
    pub latency_cycles: f64,
    /// Cycles per operation with enough independent chains to fill every
    /// pipeline (X-Ray's initiation interval).
    pub recip_throughput_cycles: f64,
    /// Independent chains at which the throughput was reached.
    pub chains: u32,
    pub documented_latency_cycles: Documented<f64>,
}

/// Whether the machine has a fused multiply-add, and whether it is fused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FmaCheck {
    /// The `fma` flag of `cpuid`.
    pub documented: Documented<bool>,
    /// `a*b+c` computed by the instruction keeps the exact product: measured
    /// on operands whose product rounds away the answer when rounded
    /// separately. `None` when the instruction is not available.
    pub fused: Option<bool>,
    /// Latency of the chain `x = fma(x, a, b)` against `x = x*a + b` done
    /// as two instructions (X-Ray's FMA test): one instruction is faster.
    pub fma_latency_cycles: Option<f64>,
    pub mul_then_add_latency_cycles: Option<f64>,
}

/// Floating-point registers a compiled kernel can keep values in, for one
/// instruction-set level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisterCount {
    /// `Scalar` for the baseline (SSE2: also AVX2's count), `Avx512` for
    /// kernels built with AVX-512 enabled.
    pub isa: Width,
    /// Live values the compiler kept in registers before the first spill
    /// (X-Ray's live-value kernel).
    pub measured: u32,
    pub documented: Documented<u32>,
    /// (live values, core cycles per add) of the kernels as they ran: the
    /// cost the spills add, where this core does not hide it.
    pub cycles_per_op: Vec<(u32, f64)>,
}

/// A cache's associativity, measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Associativity {
    /// `None` when the measurement found no answer (`note` says why).
    pub measured: Option<u32>,
    pub documented: Documented<u32>,
    pub method: WaysMethod,
    #[serde(default)]
    pub note: Option<String>,
}

/// How the ways were found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WaysMethod {
    /// k addresses a multiple of the way size apart share one set: the
    /// latency steps once k exceeds the ways (BlackjackBench). Needs the
    /// index bits inside the page (a virtually indexed L1d).
    ConflictStride {
        stride_bytes: u64,
        /// (addresses per set, ns per access).
        curve: Vec<(u32, f64)>,
    },
    /// Minimal eviction sets for a few target lines, from a pool of lines
    /// at the target's page offset: one line per way whatever the physical
    /// placement of the pages.
    EvictionSets {
        pool_lines: u32,
        /// Minimal set found per target (0: the pool did not evict it).
        sizes: Vec<u32>,
        /// TSC ticks reloading a line held in the cache, and one pushed out
        /// to the next level: the test's threshold is halfway.
        hit_ticks: u64,
        next_level_ticks: u64,
    },
}

/// Two CPUs tdg may use, tested side by side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuPair {
    pub cpus: [u32; 2],
    /// Per-CPU throughput of a saturating integer kernel run on both at once
    /// against alone: about 0.5 when they are two contexts of one core.
    pub compute_ratio: f64,
    pub shares_core: bool,
    pub documented_shares_core: Documented<bool>,
    /// Per level tested: whether the two slow each other down there.
    pub caches: Vec<SharedCache>,
}

/// Whether two CPUs share one cache level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedCache {
    pub level: u32,
    /// Buffer each CPU chases (a fraction of the level's effective size).
    pub buffer_bytes: u64,
    /// ns per access with the other CPU chasing its own buffer, against
    /// alone.
    pub slowdown: f64,
    pub shared: bool,
    pub documented_shared: Documented<bool>,
}

/// Execution contexts (BlackjackBench): the CPUs tdg may run on, whether
/// they share cores or caches, and the memory bandwidth they get.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionContexts {
    /// CPUs in this process's affinity mask.
    pub cpus: Vec<u32>,
    pub pairs: Vec<CpuPair>,
    pub bandwidth: Option<Bandwidth>,
}

/// Read bandwidth from memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bandwidth {
    /// Bytes read, in total, per pass (far beyond the last-level cache).
    pub buffer_bytes: u64,
    pub one_cpu_gb_s: f64,
    pub all_cpus_gb_s: f64,
    pub cpus: u32,
}

/// Everything the probe measures of the CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuParams {
    /// `cpuid` vendor string, family and model (display family/model).
    pub vendor: String,
    pub family: u32,
    pub model: u32,
    /// The microarchitecture the vendor table names for them.
    pub microarchitecture: Option<String>,
    pub core_clock: Option<CoreClock>,
    /// Every operation at every width the CPU runs.
    pub fp: Vec<FpTiming>,
    pub fma: FmaCheck,
    /// Baseline and, where the CPU runs it, AVX-512.
    pub fp_registers: Vec<RegisterCount>,
    pub l1d_ways: Option<Associativity>,
    pub l2_ways: Option<Associativity>,
    pub contexts: Option<ExecutionContexts>,
    /// Seconds the CPU side added to the probe: compiling its
    /// micro-benchmarks and running them.
    #[serde(default)]
    pub duration_s: f64,
}

impl CpuParams {
    /// Timing of `op` at `width`, when measured.
    pub fn fp_timing(&self, op: FpOp, width: Width) -> Option<&FpTiming> {
        self.fp.iter().find(|t| t.op == op && t.width == width)
    }
    /// Registers a kernel built for `isa` can keep doubles in: the AVX-512
    /// count for `Avx512`, the baseline count for every narrower width.
    pub fn fp_registers_for(&self, isa: Width) -> Option<u32> {
        let level = if isa == Width::Avx512 {
            Width::Avx512
        } else {
            Width::Scalar
        };
        self.fp_registers
            .iter()
            .find(|r| r.isa == level)
            .map(|r| r.measured)
    }
    /// Widths the CPU runs, narrowest first.
    pub fn widths(&self) -> Vec<Width> {
        let mut w: Vec<Width> = self.fp.iter().map(|t| t.width).collect();
        w.sort();
        w.dedup();
        w
    }
}

impl Associativity {
    /// Measured ways, else the documented ones.
    pub fn ways(&self) -> Option<u32> {
        self.measured.or(self.documented.value)
    }
}
