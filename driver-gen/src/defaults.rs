//! Machine-derived defaults: the one seam through which what we know about
//! this machine (cache sizes, flush size, timer resolution) reaches the
//! driver model. The source is `tdg probe`'s cached measurement; sysfs and a
//! clock-resolution estimate are the fallback. Only [`machine_defaults`],
//! which the command line calls, may start a probe; library paths read what
//! is recorded ([`recorded_defaults`]).

use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::OnceLock;
use std::time::Instant;

/// One data (or unified) cache level as sysfs reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheLevel {
    pub level: u8,
    pub kib: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineDefaults {
    /// Data/unified caches, smallest level first.
    pub caches: Vec<CacheLevel>,
    /// Where the cache sizes came from (e.g. "sysfs").
    pub caches_source: String,
    /// Smallest observed step of the monotonic clock, in ns.
    pub timer_resolution_ns: f64,
    /// Default shortest timed interval: far enough above resolution that a
    /// one-tick error is below 0.1%.
    pub min_interval_ns: u64,
    /// Why `min_interval_ns` has the value it has.
    pub min_interval_source: String,
    /// Read-flush size that was measured to evict a warm operand from every
    /// cache level (the default flush); `None` without a probe result, when
    /// the model falls back to a multiple of the last-level cache.
    pub full_flush_kib: Option<u64>,
    /// Why `full_flush_kib` has the value it has.
    pub full_flush_source: String,
    /// Entries of the largest data TLB (base-size pages): a flush that
    /// evicts the operands' translations touches more pages than this.
    pub tlb_entries: u64,
    /// Why `tlb_entries` has the value it has.
    pub tlb_source: String,
}

impl MachineDefaults {
    /// A fixed machine (32 KiB L1, 1 MiB L2, 32 MiB L3, 20 ns timer, no
    /// measured flush) for output that must not depend on where it is made:
    /// unit tests and the committed golden driver.
    pub fn fixed_for_tests() -> MachineDefaults {
        MachineDefaults {
            caches: vec![
                CacheLevel { level: 1, kib: 32 },
                CacheLevel {
                    level: 2,
                    kib: 1024,
                },
                CacheLevel {
                    level: 3,
                    kib: 32768,
                },
            ],
            caches_source: "test".into(),
            timer_resolution_ns: 20.0,
            min_interval_ns: 20_000,
            min_interval_source: "test machine".into(),
            full_flush_kib: None,
            full_flush_source: String::new(),
            tlb_entries: FALLBACK_TLB_ENTRIES,
            tlb_source: "test machine".into(),
        }
    }

    pub fn llc(&self) -> Option<&CacheLevel> {
        self.caches.iter().max_by_key(|c| c.level)
    }
    pub fn level(&self, level: u8) -> Option<&CacheLevel> {
        self.caches.iter().find(|c| c.level == level)
    }
}

/// Data-TLB entries assumed without a probe (sysfs does not say): the
/// largest second-level DTLBs of current x86 parts (4096 on AMD Zen 5,
/// 3072 on Zen 4, 2048 on Intel's recent server cores), so a flush sized by
/// it evicts the translations on both host kinds.
pub const FALLBACK_TLB_ENTRIES: u64 = 4096;

/// Fallback when sysfs says nothing: a flush of 32 MiB is larger than most
/// last-level caches per socket.
const FALLBACK_LLC_KIB: u64 = 32 * 1024;

/// This machine's defaults, resolved once per process: the probe's cached
/// measurements, measuring them first (under a minute) when there are none;
/// sysfs when probing is off (`TDG_NO_PROBE=1`) or fails.
///
/// Only the command line calls this: it is the one place a probe may start,
/// and `tdg` says so when it does. Libraries take the defaults they are
/// given ([`crate::RunOptions::machine`]) or [`recorded_defaults`].
pub fn machine_defaults() -> MachineDefaults {
    static CACHED: OnceLock<MachineDefaults> = OnceLock::new();
    CACHED
        .get_or_init(|| {
            if !probe::probing_off() {
                match probe::cached_or_measure() {
                    Ok(p) => return from_probe(&p, &probe::cache_path()),
                    Err(e) => tracing::warn!(
                        "machine probe unavailable ({e}); flush size and minimum interval come from sysfs"
                    ),
                }
            }
            from_sysfs()
        })
        .clone()
}

/// This machine's defaults without measuring anything: the probe's cached
/// result when one exists, else sysfs. What a library uses when its caller
/// passed no machine defaults.
pub fn recorded_defaults() -> MachineDefaults {
    static CACHED: OnceLock<MachineDefaults> = OnceLock::new();
    CACHED
        .get_or_init(|| {
            let path = probe::cache_path();
            match probe::load_cached_from(&path) {
                Ok(Some(p)) => from_probe(&p, &path),
                _ => from_sysfs(),
            }
        })
        .clone()
}

/// Defaults from a probe result: effective cache sizes, the measured
/// sufficient flush, and the minimum interval of the serialised TSC (the
/// driver's default timer).
pub fn from_probe(p: &probe::ProbeResult, path: &Path) -> MachineDefaults {
    let caches: Vec<CacheLevel> = p
        .caches
        .iter()
        .map(|c| CacheLevel {
            level: c.level as u8,
            kib: (c.effective_bytes / 1024).max(1),
        })
        .collect();
    if caches.is_empty() {
        return from_sysfs();
    }
    let where_ = format!("tdg probe, {}", path.display());
    let tsc_timer = p
        .timer("rdtscp")
        .or_else(|| p.timer("clock_gettime(MONOTONIC_RAW)"));
    let (timer_resolution_ns, min_interval_ns, min_interval_source) = match tsc_timer {
        Some(t) => (
            t.resolution_ns,
            // Never below 10 us: shorter windows are dominated by interrupts.
            (t.min_interval_ns as u64).max(10_000),
            format!(
                "{where_}: 0.1% error interval of {}, at least 10 us",
                t.name
            ),
        ),
        None => {
            let res = measure_clock_resolution_ns();
            (
                res,
                min_interval_from_resolution(res),
                format!("1000 x measured clock resolution ({res:.0} ns), at least 10 us"),
            )
        }
    };
    let full_flush_kib = (p.recommended_flush_bytes() / 1024).max(1);
    let full_flush_source = match p.flush.as_ref().and_then(|f| f.sufficient_bytes) {
        Some(_) => format!("{where_}: smallest read-flush measured to evict a warm operand"),
        None => format!("{where_}: 2 x effective last-level cache"),
    };
    let (tlb_entries, tlb_source) = match eviction_tlb_entries(&p.tlb) {
        Some((n, why)) => (n, format!("{where_}: {why}")),
        None => (
            FALLBACK_TLB_ENTRIES,
            "assumed (the probe found no TLB step)".to_string(),
        ),
    };
    MachineDefaults {
        caches,
        caches_source: format!("{where_}: effective sizes"),
        timer_resolution_ns,
        min_interval_ns,
        min_interval_source,
        full_flush_kib: Some(full_flush_kib),
        full_flush_source,
        tlb_entries,
        tlb_source,
    }
}

/// The data-TLB entries the flush must outnumber, and why: the largest
/// level, measured or documented, whichever is larger (the measured step is
/// an effective size and can fall short of cpuid's count). When cpuid
/// documents the levels (AMD's leaves list every data-TLB level the core
/// has), a measured step beside them with no documented counterpart is not
/// a TLB: the probe touches one line per page, and those lines with the
/// page-table lines behind them outgrow a data cache (a step where the
/// touched lines fill the L2). Counted as a TLB it would have every driver
/// map and fault in several times the pages, at each process start, for
/// translations no TLB holds.
pub fn eviction_tlb_entries(levels: &[probe::TlbLevel]) -> Option<(u64, String)> {
    let documented: Vec<&probe::TlbLevel> = levels
        .iter()
        .filter(|t| t.documented_entries.is_some())
        .collect();
    let (considered, why) = if documented.is_empty() {
        (
            levels.iter().collect::<Vec<_>>(),
            "largest data TLB, measured or documented",
        )
    } else {
        (
            documented,
            "largest data TLB cpuid documents, or its measured step if larger",
        )
    };
    considered
        .iter()
        .map(|t| t.entries.max(t.documented_entries.unwrap_or(0)))
        .max()
        .filter(|&n| n > 0)
        .map(|n| (n, why.to_string()))
}

/// Defaults from sysfs alone (no probe).
pub fn from_sysfs() -> MachineDefaults {
    let caches = sysfs_caches(Path::new("/sys/devices/system/cpu/cpu0"));
    let (caches, caches_source) = match caches {
        c if !c.is_empty() => (c, "sysfs".to_string()),
        _ => (
            vec![CacheLevel {
                level: 3,
                kib: FALLBACK_LLC_KIB,
            }],
            "fallback (sysfs has no cache information)".to_string(),
        ),
    };
    let res = one_two_five(measure_clock_resolution_ns());
    MachineDefaults {
        caches,
        caches_source,
        timer_resolution_ns: res,
        min_interval_ns: min_interval_from_resolution(res),
        min_interval_source: format!(
            "1000 x measured clock resolution ({res:.0} ns), at least 10 us"
        ),
        full_flush_kib: None,
        full_flush_source: String::new(),
        tlb_entries: FALLBACK_TLB_ENTRIES,
        tlb_source: "assumed (no probe; sysfs does not describe the TLB)".into(),
    }
}

/// 1000 timer steps keep the quantisation error under 0.1%; never below
/// 10 us (interrupt-free windows are short anyway) nor above 10 ms.
pub fn min_interval_from_resolution(resolution_ns: f64) -> u64 {
    ((resolution_ns * 1000.0) as u64).clamp(10_000, 10_000_000)
}

/// `ns` rounded to the nearest (in ratio) of 1, 2 and 5 times a power of
/// ten. The measured step is the clock's read cost, which moves with a
/// shared host's speed (a slow moment reads 30 ns for 20); a minimum
/// interval that moved with it would give two runs of one spec two
/// drivers, different in their compiled default, and miss the build cache.
/// The interval is 1000 steps as a rule of thumb: the step within a factor
/// of 1.6 serves it.
fn one_two_five(ns: f64) -> f64 {
    if !(ns.is_finite() && ns > 0.0) {
        return ns;
    }
    let decade = 10f64.powf(ns.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * decade)
        .min_by(|a, b| (ns / a).ln().abs().total_cmp(&(ns / b).ln().abs()))
        .expect("four steps")
}

fn measure_clock_resolution_ns() -> f64 {
    let mut finest = u128::MAX;
    for _ in 0..2000 {
        let a = Instant::now();
        let mut b = Instant::now();
        while b == a {
            b = Instant::now();
        }
        finest = finest.min((b - a).as_nanos());
    }
    finest as f64
}

/// The data/unified cache levels sysfs documents under `cpu_dir`
/// (`/sys/devices/system/cpu/cpu0`), one entry per level, smallest first.
pub fn sysfs_caches(cpu_dir: &Path) -> Vec<CacheLevel> {
    let mut out: Vec<CacheLevel> = Vec::new();
    for c in probe::documented::data_caches(&probe::documented::caches_from_sysfs(cpu_dir)) {
        let level = c.level as u8;
        if !out.iter().any(|o| o.level == level) {
            out.push(CacheLevel {
                level,
                kib: c.size_bytes / 1024,
            });
        }
    }
    out.sort_by_key(|c| c.level);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_measured_clock_step_is_rounded_to_one_two_five() {
        // A quiet and a slow moment of one host give one step.
        assert_eq!(one_two_five(20.0), 20.0);
        assert_eq!(one_two_five(30.0), 20.0);
        assert_eq!(one_two_five(17.0), 20.0);
        assert_eq!(one_two_five(40.0), 50.0);
        assert_eq!(one_two_five(1.0), 1.0);
        assert_eq!(one_two_five(8.0), 10.0);
        assert_eq!(one_two_five(1000.0), 1000.0);
        assert_eq!(one_two_five(3.0), 2.0);
        assert_eq!(one_two_five(4.0), 5.0);
    }

    #[test]
    fn sysfs_caches_skip_instruction_caches() {
        let dir = tempfile::tempdir().unwrap();
        for (i, (level, ty, size)) in [
            (1, "Data", "32K"),
            (1, "Instruction", "32K"),
            (2, "Unified", "1024K"),
        ]
        .iter()
        .enumerate()
        {
            let d = dir.path().join(format!("cache/index{i}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("level"), format!("{level}\n")).unwrap();
            std::fs::write(d.join("type"), format!("{ty}\n")).unwrap();
            std::fs::write(d.join("size"), format!("{size}\n")).unwrap();
        }
        let c = sysfs_caches(dir.path());
        assert_eq!(
            c,
            vec![
                CacheLevel { level: 1, kib: 32 },
                CacheLevel {
                    level: 2,
                    kib: 1024
                }
            ]
        );
    }

    fn tlb(entries: u64, documented: Option<u64>) -> probe::TlbLevel {
        probe::TlbLevel {
            level: 0,
            entries,
            reach_bytes: entries * 4096,
            latency_ns: 1.0,
            documented_entries: documented,
        }
    }

    #[test]
    fn the_flush_outnumbers_the_documented_tlb_not_a_cache_step_beside_it() {
        // This AMD EPYC's probe: L1 and L2 TLB documented by cpuid, and a
        // third step where the touched lines outgrow the 1 MiB L2.
        let amd = [tlb(64, Some(72)), tlb(2435, Some(3072)), tlb(13777, None)];
        let (n, why) = eviction_tlb_entries(&amd).unwrap();
        assert_eq!(n, 3072);
        assert!(why.contains("cpuid documents"), "{why}");
        // A measured step above its documented count is the one covered.
        let (n, _) = eviction_tlb_entries(&[tlb(64, Some(64)), tlb(4000, Some(3072))]).unwrap();
        assert_eq!(n, 4000);
        // Nothing documented (Intel's descriptors are not decoded): every
        // measured level counts.
        let (n, why) = eviction_tlb_entries(&[tlb(64, None), tlb(1536, None)]).unwrap();
        assert_eq!(n, 1536);
        assert!(why.contains("measured or documented"), "{why}");
        assert_eq!(eviction_tlb_entries(&[]), None);
    }

    #[test]
    fn min_interval_is_bounded() {
        assert_eq!(min_interval_from_resolution(1.0), 10_000);
        assert_eq!(min_interval_from_resolution(30.0), 30_000);
        assert_eq!(min_interval_from_resolution(1e9), 10_000_000);
    }
}
