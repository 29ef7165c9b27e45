//! Measures effective cache sizes, latencies, TLB reach and timer properties
//! with generated C micro-benchmarks, and keeps the result in a per-user
//! cache so timing drivers can size their flushes and timing intervals.
//!
//! The methods follow BlackjackBench: pointer chasing in random order within
//! pages, then monotonicity enforcement, biggest relative step and
//! quality-threshold clustering to turn the noisy curves into numbers.

pub mod cpu;
pub mod cpusource;
pub mod csource;
pub mod documented;
mod measure;
mod measure_cpu;
pub mod render;
pub mod render_cpu;
pub mod sanity;
pub mod stats;
pub mod validate;
pub mod vendor;

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub use cpu::CpuParams;
pub use documented::DocumentedCache;
pub use measure::{measure, measure_with, remeasure, remeasure_with, Benches, ProbeOptions};
pub use measure_cpu::CpuRepeat;

/// Bumped when the result layout or the methods change, so stale cache
/// files are re-measured instead of misread.
pub const RESULT_VERSION: u32 = 4;

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The toolchain's own message already says what failed and how to fix it.
    #[error(transparent)]
    Toolchain(#[from] toolchain::ToolchainError),
    #[error("the `{mode}` micro-benchmark printed an unreadable line `{line}`")]
    Output { mode: String, line: String },
    #[error("the cache-latency curve shows no cache level (all {points} points in one cluster); the machine may be too loaded to probe, retry when it is idle")]
    NoCacheLevels { points: usize },
    #[error("probe cache {path}: {cause}; delete it or set TDG_CACHE_DIR to a directory only you can write")]
    CacheFile {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("probe scratch files: {0}")]
    Io(std::io::Error),
}

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

/// Where the probe result is kept: `$TDG_CACHE_DIR/probe.json`, else
/// `$XDG_CACHE_HOME/tdg/probe.json`, else `~/.cache/tdg/probe.json` (the
/// home directory from `$HOME`, else from the password database), else a
/// private per-user directory `tdg-<uid>` under the temporary directory.
pub fn cache_path() -> PathBuf {
    cache_path_with(|k| std::env::var_os(k))
}

/// [`cache_path`] with the environment supplied by the caller.
pub fn cache_path_with(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> PathBuf {
    let nonempty = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(d) = nonempty("TDG_CACHE_DIR") {
        return d.join("probe.json");
    }
    if let Some(d) = nonempty("XDG_CACHE_HOME").or_else(|| {
        nonempty("HOME")
            .or_else(home_from_passwd)
            .map(|h| h.join(".cache"))
    }) {
        return d.join("tdg").join("probe.json");
    }
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    nonempty("TMPDIR")
        .unwrap_or_else(|| PathBuf::from("/tmp"))
        .join(format!("tdg-{uid}"))
        .join("probe.json")
}

/// This user's home directory from the password database.
fn home_from_passwd() -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut buf = vec![0 as libc::c_char; 16 << 10];
    // SAFETY: a zeroed passwd is a valid out-parameter; getpwuid_r writes at
    // most buf.len() bytes into buf and points the fields into it.
    unsafe {
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(
            libc::geteuid(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        );
        if rc != 0 || found.is_null() || pw.pw_dir.is_null() {
            return None;
        }
        let dir = std::ffi::CStr::from_ptr(pw.pw_dir).to_bytes();
        (!dir.is_empty()).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(dir)))
    }
}

/// Why a file or directory the cache lives in is not trusted: it must be
/// this user's and writable by no one else. `None`: trusted.
fn untrusted(meta: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Some(format!(
            "owned by uid {}, not by this user (uid {me})",
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Some(format!(
            "writable by other users (mode {:o})",
            meta.mode() & 0o7777
        ));
    }
    None
}

fn refused(path: &Path, why: String) -> ProbeError {
    ProbeError::CacheFile {
        path: path.to_path_buf(),
        cause: std::io::Error::other(format!("not trusted: {why}")),
    }
}

/// Makes the cache directory (mode 0700) if it is missing, and refuses
/// one that is a link, not a directory, or not this user's alone.
fn ensure_cache_dir(dir: &Path) -> Result<(), ProbeError> {
    use std::os::unix::fs::DirBuilderExt;
    let err = |cause| ProbeError::CacheFile {
        path: dir.to_path_buf(),
        cause,
    };
    match std::fs::symlink_metadata(dir) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(err)?;
        }
        Err(e) => return Err(err(e)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(err)?;
    if !meta.is_dir() {
        return Err(refused(
            dir,
            "a link or a file where the cache directory should be".into(),
        ));
    }
    match untrusted(&meta) {
        Some(why) => Err(refused(dir, why)),
        None => Ok(()),
    }
}

/// Largest probe file read back: a real one is tens of KiB.
const MAX_CACHE_BYTES: u64 = 16 << 20;

/// The cached result when it exists, was made by this version of the probe
/// and on this CPU model and passes [`validate::check`]; `None` otherwise (a
/// stale or corrupt file is not an error: it is measured again, said in one
/// line). A cache file that is a link, not a regular file, not this user's
/// or writable by others is refused: an error that names the way out.
pub fn load_cached_from(path: &Path) -> Result<Option<ProbeResult>, ProbeError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let err = |cause| ProbeError::CacheFile {
        path: path.to_path_buf(),
        cause,
    };
    let file = match std::fs::OpenOptions::new()
        .read(true)
        // Not through a link; and a FIFO planted there must not block.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(refused(path, "a symbolic link".into()))
        }
        Err(cause) => return Err(err(cause)),
    };
    let meta = file.metadata().map_err(err)?;
    if !meta.is_file() {
        return Err(refused(path, "not a regular file".into()));
    }
    if let Some(why) = untrusted(&meta) {
        return Err(refused(path, why));
    }
    let mut text = String::new();
    if let Err(e) = file.take(MAX_CACHE_BYTES + 1).read_to_string(&mut text) {
        tracing::warn!(
            "ignoring the unreadable probe cache {}: {e}; it is measured again",
            path.display()
        );
        return Ok(None);
    }
    if text.len() as u64 > MAX_CACHE_BYTES {
        tracing::warn!(
            "ignoring the probe cache {}: larger than {} bytes, not a probe result; it is measured again",
            path.display(),
            MAX_CACHE_BYTES
        );
        return Ok(None);
    }
    // A file from another version of the probe is stale, not broken: check
    // the version before insisting on this version's layout.
    let version = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("version").and_then(serde_json::Value::as_u64));
    if version.is_some_and(|v| v != u64::from(RESULT_VERSION)) {
        return Ok(None);
    }
    match serde_json::from_str::<ProbeResult>(&text) {
        Ok(r) if r.version == RESULT_VERSION && r.cpu_model == documented::cpu_model() => {
            match validate::check(&r) {
                Ok(()) => Ok(Some(r)),
                Err(why) => {
                    tracing::warn!(
                        "ignoring the probe cache {}: {why}; it is measured again",
                        path.display()
                    );
                    Ok(None)
                }
            }
        }
        Ok(_) => Ok(None),
        Err(e) => {
            tracing::warn!(
                "ignoring the unreadable probe cache {}: {e}; it is measured again",
                path.display()
            );
            Ok(None)
        }
    }
}

/// Writes the result atomically (a private temporary renamed over the
/// file, never through a link: `fsguard`) into a directory that is this
/// user's alone, so a concurrent reader never sees half a file and no
/// other user can plant one.
pub fn save_to(result: &ProbeResult, path: &Path) -> Result<(), ProbeError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        ensure_cache_dir(dir)?;
    }
    let json = serde_json::to_string_pretty(result).expect("probe results serialise");
    fsguard::write_atomic_mode(path, json.as_bytes(), 0o600).map_err(|cause| {
        ProbeError::CacheFile {
            path: path.to_path_buf(),
            cause,
        }
    })
}

/// The cached probe result, measuring (and caching) it first when there is
/// none. This is what `tdg run` uses for its default flush size and minimum
/// timing interval.
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
    use std::ffi::OsString;

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

    #[test]
    fn cache_dir_env_wins_then_xdg_then_home() {
        let env = |pairs: Vec<(&'static str, &'static str)>| {
            move |k: &str| pairs.iter().find(|p| p.0 == k).map(|p| OsString::from(p.1))
        };
        assert_eq!(
            cache_path_with(env(vec![("TDG_CACHE_DIR", "/a"), ("XDG_CACHE_HOME", "/b")])),
            PathBuf::from("/a/probe.json")
        );
        assert_eq!(
            cache_path_with(env(vec![("XDG_CACHE_HOME", "/b"), ("HOME", "/h")])),
            PathBuf::from("/b/tdg/probe.json")
        );
        assert_eq!(
            cache_path_with(env(vec![("TDG_CACHE_DIR", ""), ("HOME", "/h")])),
            PathBuf::from("/h/.cache/tdg/probe.json")
        );
    }

    #[test]
    fn cache_round_trips_and_rejects_stale_or_broken_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/probe.json");
        assert_eq!(load_cached_from(&path).unwrap(), None);
        let r = sample();
        save_to(&r, &path).unwrap();
        assert_eq!(load_cached_from(&path).unwrap(), Some(r.clone()));

        let mut old = r.clone();
        old.version = RESULT_VERSION + 1;
        save_to(&old, &path).unwrap();
        assert_eq!(
            load_cached_from(&path).unwrap(),
            None,
            "other version is re-measured"
        );

        let mut elsewhere = r;
        elsewhere.cpu_model = "some other CPU".into();
        save_to(&elsewhere, &path).unwrap();
        assert_eq!(
            load_cached_from(&path).unwrap(),
            None,
            "other machine is re-measured"
        );

        std::fs::write(&path, "{ not json").unwrap();
        assert_eq!(load_cached_from(&path).unwrap(), None);
    }

    /// Issue 23: a cached point at x = 0 made `--svg` loop ~10^9 times.
    #[test]
    fn svg_is_total_on_points_no_log_scale_can_place() {
        let mut r = sample();
        r.cache_curve[0].x = 0;
        r.cache_curve[1].ns = f64::NAN;
        r.cache_curve[2].ns_monotonic = -1.0;
        r.cache_curve.push(CurvePoint {
            x: u64::MAX,
            ns: f64::INFINITY,
            ns_monotonic: 1.0,
        });
        r.caches[0].effective_bytes = 0;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(render::svg(&r)).unwrap());
        let svg = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the plot is drawn in bounded time");
        assert!(svg.len() < 1 << 20 && svg.trim_end().ends_with("</svg>"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        // Of the 16 points, the 3 spoiled ones and the infinite one are left out.
        assert_eq!(svg.matches("<circle").count(), 12);
    }

    /// Issue 23: cached points were not validated on load.
    #[test]
    fn a_corrupt_cache_is_treated_as_no_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("probe.json");
        type Spoil = (&'static str, fn(&mut ProbeResult));
        let spoil: [Spoil; 6] = [
            ("x = 0", |r| r.cache_curve[0].x = 0),
            ("unsorted", |r| r.cache_curve.swap(3, 4)),
            ("negative latency", |r| r.caches[1].latency_ns = -2.0),
            ("zero line", |r| r.line.bytes = 0),
            ("absurd size", |r| r.caches[2].effective_bytes = u64::MAX),
            ("infinite TSC", |r| {
                r.tsc = Some(TscInfo {
                    measured_ghz: 1e300,
                    documented_ghz: None,
                    documented_source: None,
                })
            }),
        ];
        for (what, f) in spoil {
            let mut r = sample();
            f(&mut r);
            assert!(validate::check(&r).is_err(), "{what}");
            std::fs::write(&path, serde_json::to_string(&r).unwrap()).unwrap();
            assert_eq!(load_cached_from(&path).unwrap(), None, "{what}");
        }
        // A NaN is written as null: unreadable, likewise no cache.
        let mut r = sample();
        r.memory_latency_ns = f64::NAN;
        std::fs::write(&path, serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(load_cached_from(&path).unwrap(), None);
        assert!(validate::check(&sample()).is_ok());
    }

    /// Issue 23: with neither HOME nor XDG_CACHE_HOME the cache was the
    /// shared `/tmp/tdg`.
    #[test]
    fn without_home_the_cache_is_private_to_the_user() {
        let path = cache_path_with(|_| None);
        assert_ne!(path, std::env::temp_dir().join("tdg/probe.json"));
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        let from_passwd = home_from_passwd().map(|h| h.join(".cache/tdg/probe.json"));
        assert!(
            Some(&path) == from_passwd.as_ref()
                || path == Path::new(&format!("/tmp/tdg-{uid}/probe.json")),
            "{}",
            path.display()
        );
    }

    /// Issue 23: a planted probe.json was trusted and the cache written
    /// through a predictable temporary with `fs::write`.
    #[test]
    fn a_planted_cache_is_refused_and_never_written_through() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("probe.json");
        save_to(&sample(), &path).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(load_cached_from(&path).unwrap(), Some(sample()));

        // Writable by others.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let err = load_cached_from(&path).unwrap_err().to_string();
        assert!(
            err.contains("writable by other users") && err.contains("TDG_CACHE_DIR"),
            "{err}"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();

        // Another user's file (the tests run as root, which can make one).
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&path, Some(12345), None).unwrap();
            let err = load_cached_from(&path).unwrap_err().to_string();
            assert!(err.contains("owned by uid 12345"), "{err}");
        } else {
            eprintln!("SKIPPED the other-owner case: needs root to chown");
        }
        std::fs::remove_file(&path).unwrap();

        // A link to a file elsewhere: neither read nor written through.
        let elsewhere = dir.path().join("victim");
        std::fs::write(&elsewhere, "precious").unwrap();
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        let err = load_cached_from(&path).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        assert!(save_to(&sample(), &path).is_err());
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "precious");

        // A directory others may write into is refused; a missing one is
        // made private.
        let shared = dir.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = save_to(&sample(), &shared.join("probe.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("writable by other users"), "{err}");
        assert!(!shared.join("probe.json").exists());
        let fresh = dir.path().join("a/b");
        save_to(&sample(), &fresh.join("probe.json")).unwrap();
        assert_eq!(
            std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777,
            0o700
        );
    }

    #[test]
    fn unwritable_cache_says_how_to_fix() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "").unwrap();
        let err = save_to(&sample(), &blocker.join("probe.json")).unwrap_err();
        assert!(err.to_string().contains("TDG_CACHE_DIR"), "{err}");
    }

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
    fn svg_marks_every_level_and_plots_every_point() {
        let r = sample();
        let svg = render::svg(&r);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        for c in &r.caches {
            assert!(
                svg.contains(&format!(
                    "L{}: {}",
                    c.level,
                    ::stats::bytes(c.effective_bytes)
                )),
                "{svg}"
            );
        }
        assert_eq!(svg.matches("<circle").count(), r.cache_curve.len());
        let table = render::table(&r);
        assert!(table.contains("L2") && table.contains("-50%"), "{table}");
    }
}
