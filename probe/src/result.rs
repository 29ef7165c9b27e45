//! What a probe measured: the result `tdg probe` prints and keeps, and what
//! a driver reads from it (flush size, timer, minimum interval).

use crate::cpu::CpuParams;
use crate::documented::DocumentedCache;
use serde::{Deserialize, Serialize};

/// Bumped when the result layout or the methods change, so stale cache
/// files are re-measured instead of misread.
pub const RESULT_VERSION: u32 = 4;

/// One point of a measured curve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// Buffer size in bytes (cache curve) or pages touched (TLB curve).
    pub x: u64,
    /// Average ns per access, as measured (min over repetitions).
    pub ns: f64,
    /// After monotonicity enforcement.
    pub ns_monotonic: f64,
}

/// A cache level found on the latency curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheLevel {
    /// 1 for L1d, and so on.
    pub level: u32,
    /// Largest buffer that still ran at this level's latency.
    pub effective_bytes: u64,
    /// Lowest ns per access on the level's plateau.
    pub latency_ns: f64,
    /// What sysfs says for the data cache at this level, if anything.
    pub documented_bytes: Option<u64>,
}

/// A TLB level found on the page-stride curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TlbLevel {
    pub level: u32,
    /// Pages that could be touched before the next step.
    pub entries: u64,
    /// entries x page size.
    pub reach_bytes: u64,
    /// ns per access while inside this level.
    pub latency_ns: f64,
    /// Entries for base-size pages that cpuid documents for this level.
    #[serde(default)]
    pub documented_entries: Option<u64>,
}

/// A timer's measured properties.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimerInfo {
    pub name: String,
    /// Smallest non-zero difference between two consecutive readings.
    pub resolution_ns: f64,
    /// Cost of one reading.
    pub overhead_ns: f64,
    /// What the system claims (`clock_getres`), when it says.
    pub claimed_resolution_ns: Option<f64>,
    /// Shortest interval this timer measures with under 0.1% error from
    /// its resolution and read overhead.
    pub min_interval_ns: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TscInfo {
    /// Ticks per ns against CLOCK_MONOTONIC_RAW (median of 5 windows).
    pub measured_ghz: f64,
    pub documented_ghz: Option<f64>,
    /// Where the documented value came from.
    pub documented_source: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LineSize {
    /// Biggest relative step of the pair test on a buffer between L1 and L2.
    pub bytes: u64,
    /// The same test on a buffer far beyond the caches: prefetchers that
    /// fetch neighbouring lines from memory make this larger.
    pub memory_fetch_bytes: u64,
    pub documented_bytes: Option<u64>,
}

/// How large a read-flush must be to push a warm operand out of every
/// cache level, measured rather than assumed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlushProbe {
    /// Size of the operand that is warmed, flushed and re-read.
    pub operand_bytes: u64,
    /// ns per access re-reading the operand without a flush.
    pub warm_ns: f64,
    /// ns per access after the largest flush tried (memory latency).
    pub cold_ns: f64,
    /// x = flush bytes, ns = per-access time of the pass after that flush.
    pub curve: Vec<CurvePoint>,
    /// Smallest flush after which the pass costs at least 90% of the way
    /// from warm to cold (and every larger flush does too); `None` when
    /// flushing made no measurable difference.
    pub sufficient_bytes: Option<u64>,
}

/// Everything `tdg probe` measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeResult {
    pub version: u32,
    pub cpu_model: String,
    /// Seconds since the epoch when the probe ran.
    pub measured_at_unix: u64,
    /// Wall time the probe took.
    pub duration_s: f64,
    pub line: LineSize,
    pub caches: Vec<CacheLevel>,
    /// Latency of the region beyond the last cache level.
    pub memory_latency_ns: f64,
    pub page_bytes: u64,
    pub tlb: Vec<TlbLevel>,
    pub timers: Vec<TimerInfo>,
    pub tsc: Option<TscInfo>,
    /// The cache curve ran on transparent huge pages.
    pub cache_curve_huge_pages: bool,
    pub cache_curve: Vec<CurvePoint>,
    pub tlb_curve: Vec<CurvePoint>,
    pub flush: Option<FlushProbe>,
    pub documented_caches: Vec<DocumentedCache>,
    /// 1-minute load average and CPU count when the probe started: other
    /// work shares the caches and shrinks the effective sizes.
    pub load_average: Option<f64>,
    pub cpus: u32,
    /// The CPU side (x86-64 only).
    pub cpu: Option<CpuParams>,
}

impl ProbeResult {
    fn level_kib(&self, level: usize) -> Option<u64> {
        self.caches.get(level).map(|c| c.effective_bytes / 1024)
    }
    /// Effective L1 data cache in KiB.
    pub fn l1_kib(&self) -> Option<u64> {
        self.level_kib(0)
    }
    /// Effective L2 in KiB.
    pub fn l2_kib(&self) -> Option<u64> {
        self.level_kib(1)
    }
    /// Effective last-level cache in KiB.
    pub fn llc_kib(&self) -> Option<u64> {
        self.caches.last().map(|c| c.effective_bytes / 1024)
    }
    /// Flush buffer that evicts a routine's operands from every cache level:
    /// the measured sufficient read-flush; without that measurement, twice
    /// the effective last-level cache, since replacement is not exact LRU
    /// and one capacity's worth of traffic leaves some lines behind.
    pub fn recommended_flush_bytes(&self) -> u64 {
        if let Some(b) = self.flush.as_ref().and_then(|f| f.sufficient_bytes) {
            return b;
        }
        self.caches
            .last()
            .map_or(64 << 20, |c| 2 * c.effective_bytes)
    }
    /// The timer a driver should use: the wall-clock timer with the
    /// shortest 0.1%-error interval, preferring the portable
    /// `clock_gettime(MONOTONIC)` when it is within 2x of the best.
    pub fn recommended_timer(&self) -> Option<&TimerInfo> {
        let wall: Vec<&TimerInfo> = self
            .timers
            .iter()
            .filter(|t| !t.name.contains("CPUTIME"))
            .collect();
        let best = wall
            .iter()
            .min_by(|a, b| a.min_interval_ns.total_cmp(&b.min_interval_ns))?;
        let mono = wall.iter().find(|t| t.name == "clock_gettime(MONOTONIC)");
        Some(match mono {
            Some(m) if m.min_interval_ns <= 2.0 * best.min_interval_ns => m,
            _ => best,
        })
    }
    /// A timer's measurements by the name the table shows, e.g.
    /// `"clock_gettime(MONOTONIC_RAW)"` or `"rdtscp"`: a driver that has
    /// already chosen its timer takes that timer's `min_interval_ns`.
    pub fn timer(&self, name: &str) -> Option<&TimerInfo> {
        self.timers.iter().find(|t| t.name == name)
    }
    /// Was the machine busy enough while probing to distort the results?
    pub fn was_busy(&self) -> bool {
        self.load_average
            .is_some_and(|l| l > 0.75 * f64::from(self.cpus.max(1)))
    }
    /// Minimum interval a driver should time per sample, in seconds.
    pub fn recommended_min_interval_s(&self) -> f64 {
        self.recommended_timer()
            .map_or(1e-3, |t| t.min_interval_ns * 1e-9)
    }
}

/// Results as a probe of a Zen 4 host would make them, for tests.
#[cfg(test)]
pub(crate) mod samples {
    use super::*;
    use crate::documented;

    pub(crate) fn sample() -> ProbeResult {
        let curve: Vec<CurvePoint> = (12..=26)
            .map(|e| {
                let ns = match e {
                    ..=15 => 1.0,
                    16..=19 => 3.0,
                    20..=23 => 10.0,
                    _ => 80.0,
                };
                CurvePoint {
                    x: 1 << e,
                    ns,
                    ns_monotonic: ns,
                }
            })
            .collect();
        ProbeResult {
            version: RESULT_VERSION,
            cpu_model: documented::cpu_model(),
            measured_at_unix: 0,
            duration_s: 1.0,
            line: LineSize {
                bytes: 64,
                memory_fetch_bytes: 128,
                documented_bytes: Some(64),
            },
            caches: vec![
                CacheLevel {
                    level: 1,
                    effective_bytes: 32 << 10,
                    latency_ns: 1.0,
                    documented_bytes: Some(32 << 10),
                },
                CacheLevel {
                    level: 2,
                    effective_bytes: 512 << 10,
                    latency_ns: 3.0,
                    documented_bytes: Some(1 << 20),
                },
                CacheLevel {
                    level: 3,
                    effective_bytes: 8 << 20,
                    latency_ns: 10.0,
                    documented_bytes: Some(32 << 20),
                },
            ],
            memory_latency_ns: 80.0,
            page_bytes: 4096,
            tlb: vec![],
            timers: vec![
                TimerInfo {
                    name: "clock_gettime(MONOTONIC)".into(),
                    resolution_ns: 20.0,
                    overhead_ns: 25.0,
                    claimed_resolution_ns: Some(1.0),
                    min_interval_ns: 45_000.0,
                },
                TimerInfo {
                    name: "rdtsc".into(),
                    resolution_ns: 0.4,
                    overhead_ns: 10.0,
                    claimed_resolution_ns: None,
                    min_interval_ns: 10_400.0,
                },
            ],
            tsc: None,
            cache_curve_huge_pages: true,
            cache_curve: curve,
            tlb_curve: vec![],
            flush: None,
            documented_caches: vec![],
            load_average: Some(0.1),
            cpus: 2,
            cpu: None,
        }
    }

    /// [`sample`] with a CPU side as an 8-way L1d/L2 Zen 4 measures it.
    pub(crate) fn sample_with_cpu() -> ProbeResult {
        use crate::cpu::*;
        let vendor = |v: f64| Documented::by(Source::Vendor, Some(v));
        let fp = FpOp::ALL
            .iter()
            .map(|&op| FpTiming {
                op,
                width: Width::Scalar,
                latency_cycles: if op == FpOp::Fma { 4.0 } else { 3.0 },
                recip_throughput_cycles: 0.5,
                chains: 8,
                documented_latency_cycles: vendor(if op == FpOp::Fma { 4.0 } else { 3.0 }),
            })
            .collect();
        let ways = |n: u32| Associativity {
            measured: Some(n),
            documented: Documented::by(Source::Sysfs, Some(n)),
            method: WaysMethod::ConflictStride {
                stride_bytes: 32 << 10,
                curve: vec![],
            },
            note: None,
        };
        let mut r = sample();
        r.cpu = Some(CpuParams {
            vendor: "AuthenticAMD".into(),
            family: 25,
            model: 17,
            microarchitecture: Some("AMD Zen 4".into()),
            core_clock: None,
            fp,
            fma: FmaCheck {
                documented: Documented::by(Source::Cpuid, Some(true)),
                fused: Some(true),
                fma_latency_cycles: Some(4.0),
                mul_then_add_latency_cycles: Some(6.0),
            },
            fp_registers: vec![RegisterCount {
                isa: Width::Scalar,
                measured: 16,
                documented: Documented::by(Source::Vendor, Some(16)),
                cycles_per_op: vec![],
            }],
            l1d_ways: Some(ways(8)),
            l2_ways: Some(ways(8)),
            contexts: None,
            duration_s: 3.0,
        });
        r
    }
}
