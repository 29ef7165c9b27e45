//! Measures effective cache sizes, latencies, TLB reach and timer properties
//! with generated C micro-benchmarks, and keeps the result in a per-user
//! cache so timing drivers can size their flushes and timing intervals.
//!
//! The methods follow BlackjackBench: pointer chasing in random order within
//! pages, then monotonicity enforcement, biggest relative step and
//! quality-threshold clustering to turn the noisy curves into numbers.

mod cache;
pub mod cpu;
pub mod cpusource;
pub mod csource;
pub mod documented;
mod error;
mod measure;
mod measure_cpu;
pub mod render;
pub mod render_cpu;
mod result;
mod rows;
pub mod sanity;
pub mod stats;
pub mod validate;
pub mod vendor;

use std::path::Path;

pub use cache::{build_cache_path, cache_path, cache_path_with, load_cached_from, save_to};
pub use cpu::CpuParams;
pub use documented::DocumentedCache;
pub use error::ProbeError;
pub use measure::{
    measure, measure_with, remeasure_stage, remeasure_with, Benches, ProbeOptions, Stage,
};
pub use measure_cpu::CpuRepeat;
pub use result::{
    CacheLevel, CurvePoint, FlushProbe, LineSize, ProbeResult, TimerInfo, TlbLevel, TscInfo,
    RESULT_VERSION,
};

/// Whether the user turned measuring off (`TDG_NO_PROBE` set, and not to
/// "0"): nothing is measured; drivers take their defaults from sysfs, and
/// `tdg tune`'s model a cached result or none.
pub fn probing_off() -> bool {
    std::env::var_os("TDG_NO_PROBE").is_some_and(|v| v != "0")
}

/// The cached probe result, measuring (and caching) it first when there is
/// none and probing is on ([`probing_off`]). This is what `tdg run` uses
/// for its default flush size and minimum timing interval, and `tdg tune`
/// for its starting-point model.
pub fn cached_or_measure() -> Result<ProbeResult, ProbeError> {
    let path = cache_path();
    if let Some(r) = load_cached_from(&path)? {
        // Used, since re-probing on every run of a busy machine would cost
        // a minute each; but said, with the way out.
        let mut implausible = sanity::against_sysfs(&r);
        implausible.extend(sanity::cpu_against_documented(&r));
        if !implausible.is_empty() {
            eprintln!(
                "tdg: the cached probe {} (measured {}) looks disturbed: {}; `tdg probe --check`, then `tdg probe --force` when the machine is idle",
                path.display(),
                sanity::age_text(r.measured_at_unix, sanity::now_unix()),
                implausible.join("; ")
            );
        }
        return Ok(r);
    }
    if probing_off() {
        return Err(ProbeError::ProbingOff { path });
    }
    tracing::info!(
        "no probe result at {}; probing this machine (under a minute)",
        path.display()
    );
    let settled = measure_settled(&path, &ProbeOptions::default(), None, &mut |_| {})?;
    if let Some(note) = &settled.note {
        eprintln!("tdg probe: {note}");
    }
    Ok(settled.result)
}

/// Probes, checks the result and caches it at `path` when it passes
/// ([`sanity::settle`]): a disturbed probe is probed once more; if that one
/// is disturbed too, `previous` is kept (or the last attempt is used for
/// this run only) and nothing is cached.
pub fn measure_settled(
    path: &Path,
    opts: &ProbeOptions,
    previous: Option<ProbeResult>,
    progress: &mut dyn FnMut(&str),
) -> Result<sanity::Settled, ProbeError> {
    progress("building micro-benchmarks");
    let benches = Benches::build(opts)?;
    sanity::settle_and_cache(path, PROBE_ATTEMPTS, previous, &mut || {
        let r = measure_with(&benches, opts, progress)?;
        progress("repeating the key points of the cache curve and the CPU");
        let again = remeasure_with(&benches, opts, &r, &sanity::check_sizes(&r))?;
        Ok((r, again))
    })
}

/// Probes tried before a disturbed result is given up on.
pub const PROBE_ATTEMPTS: u32 = 2;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::samples::sample;

    /// Issue 23: cached points were not validated on load.
    #[test]
    fn recommendations_follow_the_measurements() {
        let r = sample();
        assert_eq!(r.l1_kib(), Some(32));
        assert_eq!(r.l2_kib(), Some(512));
        assert_eq!(r.llc_kib(), Some(8 << 10));
        assert_eq!(r.recommended_flush_bytes(), 16 << 20);
        let mut measured = r.clone();
        measured.flush = Some(FlushProbe {
            operand_bytes: 256 << 10,
            warm_ns: 3.0,
            cold_ns: 80.0,
            curve: vec![],
            sufficient_bytes: Some(96 << 20),
        });
        assert_eq!(
            measured.recommended_flush_bytes(),
            96 << 20,
            "the measured flush wins"
        );
        // rdtsc is more than 2x better than clock_gettime here.
        assert_eq!(r.recommended_timer().unwrap().name, "rdtsc");
        assert!((r.recommended_min_interval_s() - 10.4e-6).abs() < 1e-12);
        assert_eq!(
            r.timer("clock_gettime(MONOTONIC)").unwrap().min_interval_ns,
            45_000.0
        );
        assert!(r.timer("no such timer").is_none());
    }

    #[test]
    fn the_table_shows_each_level_beside_its_documented_size() {
        let r = sample();
        let table = render::table(&r);
        for c in &r.caches {
            assert!(
                table.contains(&::stats::bytes(c.effective_bytes)),
                "{table}"
            );
        }
        // L2: 512 KiB measured against 1 MiB documented.
        assert!(table.contains("L2") && table.contains("-50%"), "{table}");
        assert!(
            table.contains("(no TLB step found)") == r.tlb.is_empty(),
            "{table}"
        );
    }
}
