//! Whether a probe result can be trusted, and what to do when it cannot.
//!
//! The cached probe feeds every default (flush size, minimum interval,
//! tune's model), so one disturbed run must not stay in the cache. A result
//! is disturbed when it disagrees with sysfs beyond what sharing explains,
//! or when a repeat of its key points right after it reads different
//! latencies. The same repeat, later, is `tdg probe --check`.

use crate::cpu::FpOp;
use crate::{CpuRepeat, CurvePoint, ProbeError, ProbeResult};

/// A re-measured latency must be within this factor of the result's curve
/// (either way). Noise on a shared machine moves single points by tens of
/// per cent; a level read at the wrong size moves the latency at the
/// checked sizes by integer factors.
pub const LATENCY_TOLERANCE: f64 = 1.5;

/// L1d is private: its effective size matches sysfs on a quiet machine (a
/// loaded run read 26 816 B for 32 KiB).
const L1_RANGE: (f64, f64) = (0.85, 1.15);
/// Levels below the last may be shared with an SMT sibling that another
/// tenant runs on: a 512 KiB L2 read 370-450 KiB on quiet runs here, and
/// 279 KiB (54 %) on one forced probe of an idle machine. Only a reading
/// far below that says the probe itself was disturbed.
const MID_RANGE: (f64, f64) = (0.3, 1.3);
/// The last level is shared with every other tenant: only too large is
/// implausible.
const LLC_MAX: f64 = 1.3;

/// Reasons the result disagrees with the cache sizes sysfs documents.
pub fn against_sysfs(r: &ProbeResult) -> Vec<String> {
    let mut out = Vec::new();
    let n = r.caches.len();
    for (i, c) in r.caches.iter().enumerate() {
        let Some(doc) = c.documented_bytes.filter(|&d| d > 0) else {
            continue;
        };
        let ratio = c.effective_bytes as f64 / doc as f64;
        let (lo, hi) = match i {
            0 => L1_RANGE,
            _ if i + 1 < n => MID_RANGE,
            _ => (0.0, LLC_MAX),
        };
        if !(lo..=hi).contains(&ratio) {
            out.push(format!(
                "L{} read {} B against {} B in sysfs ({:.0}%, plausible {:.0}-{:.0}%)",
                c.level,
                c.effective_bytes,
                doc,
                100.0 * ratio,
                100.0 * lo,
                100.0 * hi
            ));
        }
    }
    out
}

/// Buffer sizes whose latency `tdg probe --check` and the repeat after a
/// probe re-measure: half of each level's effective size (well inside it)
/// and a buffer past the last level (memory), each a size the curve has. A
/// curve that stops before memory (`--max-buffer-mib` below the last level)
/// has no memory point to check: its last point sits at a level's edge,
/// where the latency moves with the other tenants' load.
pub fn check_sizes(r: &ProbeResult) -> Vec<u64> {
    let mut sizes: Vec<u64> = r
        .caches
        .iter()
        .filter_map(|c| nearest(&r.cache_curve, c.effective_bytes / 2).map(|p| p.x))
        .collect();
    if let Some(llc) = r.caches.last() {
        // Past the documented size too: a shared last level's effective
        // size is what other tenants leave, and between it and the
        // documented size the latency moves with their load.
        let largest = llc.effective_bytes.max(llc.documented_bytes.unwrap_or(0));
        let memory: Vec<CurvePoint> = r
            .cache_curve
            .iter()
            .filter(|p| p.x > largest)
            .cloned()
            .collect();
        sizes.extend(nearest(&memory, 4 * largest).map(|p| p.x));
    }
    sizes.dedup();
    sizes
}

/// The curve point closest to `x` on a log scale.
fn nearest(curve: &[CurvePoint], x: u64) -> Option<&CurvePoint> {
    let lx = (x.max(1) as f64).ln();
    curve.iter().min_by(|a, b| {
        let da = ((a.x.max(1) as f64).ln() - lx).abs();
        let db = ((b.x.max(1) as f64).ln() - lx).abs();
        da.total_cmp(&db)
    })
}

/// How much faster than the result a re-measured point past the last cache
/// level (memory) may read. Memory latency on a shared host moves with the
/// other tenants' traffic, which changes over seconds, and the re-measure
/// keeps the faster of two chases against the result's single one, so a
/// faithful result can read well slower than its re-measure. A result that
/// is too slow for memory leaves the defaults on the safe side (a larger
/// flush), so this direction is loose; one that is too fast is what a
/// stale probe looks like (a cache level taken for memory), and that
/// direction keeps [`LATENCY_TOLERANCE`].
pub const MEMORY_FASTER_TOLERANCE: f64 = 2.0;

/// Reasons re-measured `(size, ns)` points disagree with the result's curve.
/// A point is compared with the band its curve neighbours span (one each
/// side): each curve point is a single measurement, and one that noise
/// moved below both its neighbours must not make a faithful result look wrong, while a level read at the wrong
/// size moves the whole neighbourhood.
pub fn against_repeat(r: &ProbeResult, remeasured: &[(u64, f64)]) -> Vec<String> {
    let memory_from = r
        .caches
        .last()
        .map(|c| c.effective_bytes.max(c.documented_bytes.unwrap_or(0)));
    let mut out = Vec::new();
    for &(x, ns) in remeasured {
        let Some(i) = r.cache_curve.iter().position(|p| p.x == x) else {
            continue;
        };
        let p = &r.cache_curve[i];
        let band = &r.cache_curve[i.saturating_sub(1)..(i + 2).min(r.cache_curve.len())];
        let lo = band.iter().map(|q| q.ns).fold(f64::INFINITY, f64::min);
        let hi = band.iter().map(|q| q.ns).fold(0.0, f64::max);
        let ratio = ns / p.ns;
        let faster_tolerance = if memory_from.is_some_and(|m| x > m) {
            MEMORY_FASTER_TOLERANCE
        } else {
            LATENCY_TOLERANCE
        };
        if ns > hi * LATENCY_TOLERANCE || ns < lo / faster_tolerance {
            out.push(format!(
                "{} buffer: {} per access now, {} in the result ({:.2}x)",
                stats::bytes(x),
                stats::ns(ns),
                stats::ns(p.ns),
                ratio
            ));
        }
    }
    out
}

/// What a repeat re-measures: latencies at the check sizes of the cache
/// curve, and the CPU values [`CpuRepeat`] names.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Repeat {
    pub cache: Vec<(u64, f64)>,
    pub cpu: Option<CpuRepeat>,
}

/// A re-measured floating-point latency must be within this many cycles of
/// the result's (or 15 %, whichever is more): latencies are whole cycles,
/// so a result off by half a cycle was timed while something else ran.
pub const LATENCY_CYCLES_TOLERANCE: f64 = 0.5;

/// How far a measured latency or register count may be from the vendor's
/// published figure.
pub const VENDOR_TOLERANCE: f64 = 1.0;

/// Reasons the CPU side disagrees with what the machine documents: ways
/// against sysfs, scalar latencies and register counts against the vendor
/// table.
pub fn cpu_against_documented(r: &ProbeResult) -> Vec<String> {
    let Some(cpu) = &r.cpu else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, ways) in [("L1d", &cpu.l1d_ways), ("L2", &cpu.l2_ways)] {
        let Some(a) = ways else { continue };
        if let (Some(m), Some(d)) = (a.measured, a.documented.value) {
            if m != d {
                out.push(format!(
                    "{name} read {m} ways against {d} in {}",
                    a.documented.source
                ));
            }
        }
    }
    let uarch = cpu.microarchitecture.as_deref().unwrap_or("this CPU");
    for t in cpu
        .fp
        .iter()
        .filter(|t| t.width == crate::cpu::Width::Scalar)
    {
        if let Some(d) = t.documented_latency_cycles.value {
            if (t.latency_cycles - d).abs() > VENDOR_TOLERANCE {
                out.push(format!(
                    "{} latency {:.2} cycles against {d} published for {uarch}",
                    t.op.name(),
                    t.latency_cycles
                ));
            }
        }
    }
    for reg in &cpu.fp_registers {
        if let Some(d) = reg.documented.value {
            if f64::from(reg.measured.abs_diff(d)) > VENDOR_TOLERANCE {
                out.push(format!(
                    "{} floating-point registers at {} against {d} published for {uarch}",
                    reg.measured,
                    reg.isa.name()
                ));
            }
        }
    }
    out
}

/// Reasons the CPU values re-measured now disagree with the result.
pub fn cpu_against_repeat(r: &ProbeResult, now: &CpuRepeat) -> Vec<String> {
    let Some(cpu) = &r.cpu else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for &(op, cycles) in &now.latency_cycles {
        let Some(then) = cpu.fp_timing(op, crate::cpu::Width::Scalar) else {
            continue;
        };
        let tolerance = LATENCY_CYCLES_TOLERANCE.max(0.15 * then.latency_cycles);
        if (cycles - then.latency_cycles).abs() > tolerance {
            out.push(format!(
                "{} latency {:.2} cycles now, {:.2} in the result",
                op.name(),
                cycles,
                then.latency_cycles
            ));
        }
    }
    for (name, then, now) in [
        (
            "L1d",
            cpu.l1d_ways.as_ref().and_then(|a| a.measured),
            now.l1d_ways,
        ),
        (
            "L2",
            cpu.l2_ways.as_ref().and_then(|a| a.measured),
            now.l2_ways,
        ),
    ] {
        if then.is_some() && then != now {
            out.push(format!(
                "{name} ways {} now, {} in the result",
                now.map_or("not found".to_string(), |w| w.to_string()),
                then.map_or("-".to_string(), |w| w.to_string())
            ));
        }
    }
    out
}

/// Whether `r` still holds: a re-measure (`remeasure`) and what disagrees
/// in it ([`check_reasons`]). One re-measure that disagrees may be a moment
/// of the host's noise (a neighbour on the vCPU's core doubles a latency
/// for a second), not a changed machine: as a probe is measured once more
/// when it looks disturbed, the check says no only when a second
/// re-measure disagrees too, and reports that one. What `r` says against
/// sysfs does not move with a re-measure, so it never asks for another.
pub fn recheck(
    r: &ProbeResult,
    mut remeasure: impl FnMut() -> Result<Repeat, ProbeError>,
) -> Result<(Repeat, Vec<String>), ProbeError> {
    let mut now = remeasure()?;
    if !against_repeat_of(r, &now).is_empty() {
        now = remeasure()?;
    }
    let reasons = check_reasons(r, &now);
    Ok((now, reasons))
}

/// Why `r` does not hold against the re-measure `now`: nothing when the
/// re-measure agrees with it and its L1 is plausible against sysfs, else
/// every disturbance. A result off sysfs below L1, or off the vendor
/// table, where two probes agreed, is the machine's own reading: [`settle`]
/// cached it so, with a note, and a check of it by the same rule holds
/// (saying no to it every time would have every `tdg probe --check ||
/// tdg probe --force` probe again).
fn check_reasons(r: &ProbeResult, now: &Repeat) -> Vec<String> {
    if against_repeat_of(r, now).is_empty() && l1_plausible(r) {
        Vec::new()
    } else {
        disturbances(r, now)
    }
}

/// The verdict on a result: empty when it can be trusted.
pub fn disturbances(r: &ProbeResult, repeat: &Repeat) -> Vec<String> {
    let mut out = against_sysfs(r);
    out.extend(cpu_against_documented(r));
    out.extend(against_repeat_of(r, repeat));
    out
}

/// Where `repeat` disagrees with `r`: the curve's points and the CPU values.
fn against_repeat_of(r: &ProbeResult, repeat: &Repeat) -> Vec<String> {
    let mut out = against_repeat(r, &repeat.cache);
    if let Some(cpu) = &repeat.cpu {
        out.extend(cpu_against_repeat(r, cpu));
    }
    out
}

/// One probe and its check points re-measured right after it.
pub type Probed = (ProbeResult, Repeat);

/// What to keep after probing, and what to tell the user.
#[derive(Debug, Clone, PartialEq)]
pub struct Settled {
    /// The result the caller should use now.
    pub result: ProbeResult,
    /// Whether `result` may be written to the cache.
    pub cache_it: bool,
    /// One line for stderr when the result is not a fresh trusted probe.
    pub note: Option<String>,
}

/// Probes until a result passes [`disturbances`], at most `attempts` times.
/// When none does, keeps `previous` (a cached result that passed when it was
/// made) or, without one, uses the last attempt for this run only; neither
/// is (re)written to the cache. `probe_once` measures and re-measures the
/// check points (the test seam: a function taking measurements).
pub fn settle<E>(
    attempts: u32,
    previous: Option<ProbeResult>,
    probe_once: &mut dyn FnMut() -> Result<Probed, E>,
) -> Result<Settled, E> {
    let mut last: Option<ProbeResult> = None;
    let mut reasons = Vec::new();
    for _ in 0..attempts.max(1) {
        let (r, remeasured) = probe_once()?;
        reasons = disturbances(&r, &remeasured);
        if reasons.is_empty() {
            return Ok(Settled {
                result: r,
                cache_it: true,
                note: None,
            });
        }
        // Repeatable, and off only against sysfs: the machine differs from
        // what it documents (a VM, a partitioned cache), not a disturbance.
        // L1d is private and sysfs knows it: never explained away.
        let repeatable = against_repeat(&r, &remeasured.cache).is_empty()
            && remeasured
                .cpu
                .as_ref()
                .is_none_or(|c| cpu_against_repeat(&r, c).is_empty())
            && l1_plausible(&r)
            && last.as_ref().is_some_and(|p| same_levels(p, &r));
        if repeatable {
            return Ok(Settled {
                note: Some(format!(
                    "two probes agree with each other but not with sysfs ({}); cached as measured",
                    reasons.join("; ")
                )),
                result: r,
                cache_it: true,
            });
        }
        last = Some(r);
    }
    let last = last.expect("at least one attempt");
    let load = last
        .load_average
        .map(|l| format!(" (load average {l:.2} on {} CPUs)", last.cpus))
        .unwrap_or_default();
    let why = format!(
        "{} probe(s) disturbed{load}: {}",
        attempts.max(1),
        reasons.join("; ")
    );
    Ok(match previous {
        Some(p) => Settled {
            note: Some(format!(
                "{why}; kept the previous result (measured {}), not cached; probe again when the machine is idle (`tdg probe --force`)",
                age_text(p.measured_at_unix, now_unix())
            )),
            result: p,
            cache_it: false,
        },
        None => Settled {
            note: Some(format!(
                "{why}; using it for this run only, not cached; probe again when the machine is idle (`tdg probe --force`)"
            )),
            result: last,
            cache_it: false,
        },
    })
}

fn l1_plausible(r: &ProbeResult) -> bool {
    r.caches.first().is_none_or(|c| {
        c.documented_bytes.filter(|&d| d > 0).is_none_or(|d| {
            (L1_RANGE.0..=L1_RANGE.1).contains(&(c.effective_bytes as f64 / d as f64))
        })
    })
}

/// The same cache levels, each effective size within 10%, and the same
/// CPU: associativities and scalar latencies.
fn same_levels(a: &ProbeResult, b: &ProbeResult) -> bool {
    let caches = a.caches.len() == b.caches.len()
        && a.caches.iter().zip(&b.caches).all(|(x, y)| {
            let r = x.effective_bytes as f64 / y.effective_bytes.max(1) as f64;
            (0.9..=1.1).contains(&r)
        });
    let cpu = match (&a.cpu, &b.cpu) {
        (Some(x), Some(y)) => {
            let ways = |c: &crate::CpuParams| {
                (
                    c.l1d_ways.as_ref().and_then(|w| w.measured),
                    c.l2_ways.as_ref().and_then(|w| w.measured),
                )
            };
            let latencies = FpOp::ALL.iter().all(|&op| {
                match (
                    x.fp_timing(op, crate::cpu::Width::Scalar),
                    y.fp_timing(op, crate::cpu::Width::Scalar),
                ) {
                    (Some(p), Some(q)) => {
                        (p.latency_cycles - q.latency_cycles).abs() <= LATENCY_CYCLES_TOLERANCE
                    }
                    (None, None) => true,
                    _ => false,
                }
            });
            ways(x) == ways(y) && latencies
        }
        (None, None) => true,
        _ => false,
    };
    caches && cpu
}

/// The 1-minute load average now (`/proc/loadavg`), if readable.
pub fn load_average_now() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next().and_then(|v| v.parse().ok()))
}

pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `3 h ago`, `2 days ago`: how old a result measured at `then` is at `now`.
pub fn age_text(then: u64, now: u64) -> String {
    let s = now.saturating_sub(then);
    match s {
        0..=119 => format!("{s} s ago"),
        120..=7199 => format!("{} min ago", s / 60),
        7200..=172_799 => format!("{} h ago", s / 3600),
        _ => format!("{} days ago", s / 86_400),
    }
}

/// [`settle`], then the result written to `path` only when it may be cached
/// (a disturbed probe never replaces what is there).
pub fn settle_and_cache(
    path: &std::path::Path,
    attempts: u32,
    previous: Option<ProbeResult>,
    probe_once: &mut dyn FnMut() -> Result<Probed, crate::ProbeError>,
) -> Result<Settled, crate::ProbeError> {
    let settled = settle(attempts, previous, probe_once)?;
    if settled.cache_it {
        crate::save_to(&settled.result, path)?;
    }
    Ok(settled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::samples::sample;

    /// The result's own curve at its check sizes: a perfect repeat.
    fn repeat_of(r: &ProbeResult) -> Repeat {
        Repeat {
            cache: check_sizes(r)
                .into_iter()
                .map(|x| (x, r.cache_curve.iter().find(|p| p.x == x).unwrap().ns))
                .collect(),
            cpu: None,
        }
    }

    fn disturbed_l1() -> ProbeResult {
        let mut r = sample();
        r.caches[0].effective_bytes = 26_816;
        r.load_average = Some(1.7);
        r
    }

    /// A re-measure slowed for a moment is made again; one that stays
    /// off is reported.
    #[test]
    fn a_check_says_no_only_when_a_second_re_measure_disagrees_too() {
        let r = sample();
        let slowed = |k: f64| Repeat {
            cache: repeat_of(&r)
                .cache
                .into_iter()
                .map(|(x, ns)| (x, ns * k))
                .collect(),
            cpu: None,
        };
        let mut made = 0;
        let (now, why) = recheck(&r, || {
            made += 1;
            Ok(if made == 1 { slowed(2.0) } else { slowed(1.0) })
        })
        .unwrap();
        assert_eq!((made, why.len(), now), (2, 0, repeat_of(&r)));
        let mut made = 0;
        let (_, why) = recheck(&r, || {
            made += 1;
            Ok(slowed(2.0))
        })
        .unwrap();
        assert!(made == 2 && !why.is_empty(), "{why:?}");
        let mut made = 0;
        recheck(&r, || {
            made += 1;
            Ok(repeat_of(&r))
        })
        .unwrap();
        assert_eq!(made, 1, "a check that holds is made once");
        // A result sysfs disagrees with stays wrong however often it is
        // re-measured: one re-measure, and the reason kept.
        let bad = disturbed_l1();
        let mut made = 0;
        let (_, why) = recheck(&bad, || {
            made += 1;
            Ok(repeat_of(&bad))
        })
        .unwrap();
        assert_eq!((made, why.len()), (1, 1), "{why:?}");
        // One that differs from sysfs below L1, where the re-measure
        // agrees, is what settle caches with a note: it holds.
        let mut machine = sample();
        machine.caches[1].documented_bytes = Some(4 << 20);
        assert!(!against_sysfs(&machine).is_empty());
        let (_, why) = recheck(&machine, || Ok(repeat_of(&machine))).unwrap();
        assert_eq!(why, Vec::<String>::new());
    }

    #[test]
    fn a_quiet_result_passes_and_a_disturbed_one_says_why() {
        let r = sample();
        assert_eq!(disturbances(&r, &repeat_of(&r)), Vec::<String>::new());
        let bad = disturbed_l1();
        let why = disturbances(&bad, &repeat_of(&bad));
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(
            why[0].starts_with("L1 read 26816 B against 32768 B in sysfs (82%"),
            "{why:?}"
        );
        // A repeat three times slower than the curve at one check size.
        let mut slow = repeat_of(&r).cache;
        slow[1].1 *= 3.0;
        let why = against_repeat(&r, &slow);
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(why[0].contains("3.00x"), "{why:?}");
        // One curve point that noise moved low, between faithful
        // neighbours: a repeat at the neighbours' level is not a disturbance.
        let mut noisy = r.clone();
        let k = noisy
            .cache_curve
            .iter()
            .position(|p| p.x == slow[1].0)
            .unwrap();
        let faithful = noisy.cache_curve[k].ns;
        noisy.cache_curve[k].ns = faithful / 1.6;
        assert_eq!(
            against_repeat(&noisy, &[(slow[1].0, faithful)]),
            Vec::<String>::new()
        );
        // Check sizes: inside each level, and memory past the documented
        // last level, all on the curve.
        assert_eq!(check_sizes(&r), vec![1 << 14, 1 << 18, 1 << 22, 1 << 26]);
        // A curve cut before memory checks no point at its end.
        let mut cut = r.clone();
        let largest = cut.caches.last().unwrap().documented_bytes.unwrap();
        cut.cache_curve.retain(|p| p.x <= largest);
        assert_eq!(check_sizes(&cut), vec![1 << 14, 1 << 18, 1 << 22]);
        // Memory may read faster than the result by up to 2x (the host's
        // fast state), not slower than 1.5x its band (a stale result).
        let mem = 1u64 << 26;
        let i = r.cache_curve.iter().position(|p| p.x == mem).unwrap();
        let band = &r.cache_curve[i - 1..(i + 2).min(r.cache_curve.len())];
        let lo = band.iter().map(|q| q.ns).fold(f64::INFINITY, f64::min);
        let hi = band.iter().map(|q| q.ns).fold(0.0, f64::max);
        assert!(against_repeat(&r, &[(mem, lo / 1.8)]).is_empty());
        assert_eq!(against_repeat(&r, &[(mem, lo / 2.2)]).len(), 1);
        assert_eq!(against_repeat(&r, &[(mem, hi * 1.6)]).len(), 1);
        // Inside a level both directions keep 1.5x.
        let (x, _) = slow[1];
        let i = r.cache_curve.iter().position(|p| p.x == x).unwrap();
        let lo = r.cache_curve[i - 1..=i + 1]
            .iter()
            .map(|q| q.ns)
            .fold(f64::INFINITY, f64::min);
        assert_eq!(against_repeat(&r, &[(x, lo / 1.6)]).len(), 1);
    }

    #[test]
    fn a_disturbed_probe_is_probed_again_and_never_cached() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("probe.json");
        // Disturbed, then quiet: the quiet one is cached.
        let mut results = vec![sample(), disturbed_l1()];
        let mut once = || {
            let r = results.pop().unwrap();
            let again = repeat_of(&r);
            Ok((r, again))
        };
        let s = settle_and_cache(&path, 2, None, &mut once).unwrap();
        assert!(s.cache_it && s.note.is_none());
        assert_eq!(crate::load_cached_from(&path).unwrap(), Some(sample()));

        // Disturbed twice with a good cached result: it is kept, unchanged.
        let mut previous = sample();
        previous.measured_at_unix = now_unix() - 3 * 3600;
        crate::save_to(&previous, &path).unwrap();
        let before = std::fs::read(&path).unwrap();
        let mut once = || {
            let r = disturbed_l1();
            let again = repeat_of(&r);
            Ok((r, again))
        };
        let s = settle_and_cache(&path, 2, Some(previous.clone()), &mut once).unwrap();
        assert!(!s.cache_it);
        assert_eq!(s.result, previous);
        let note = s.note.unwrap();
        assert!(
            note.starts_with("2 probe(s) disturbed (load average 1.70 on 2 CPUs): L1 read 26816 B")
                && note.contains("kept the previous result (measured 3 h ago)"),
            "{note}"
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "the cache is untouched"
        );

        // Disturbed twice and nothing cached: used once, still not cached.
        let empty = dir.path().join("none/probe.json");
        let s = settle_and_cache(&empty, 2, None, &mut once).unwrap();
        assert!(!s.cache_it && s.note.unwrap().contains("for this run only"));
        assert!(!empty.exists());
    }

    #[test]
    fn a_machine_that_repeatably_differs_from_sysfs_below_l1_is_cached_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("probe.json");
        let mut once = || {
            let mut r = sample();
            r.caches[1].documented_bytes = Some(4 << 20); // sysfs claims 4 MiB
            let again = repeat_of(&r);
            Ok((r, again))
        };
        let s = settle_and_cache(&path, 2, None, &mut once).unwrap();
        assert!(s.cache_it, "{:?}", s.note);
        assert!(s
            .note
            .unwrap()
            .contains("agree with each other but not with sysfs"));
        assert!(path.exists());
    }

    /// The repeat of a CPU result: its own values.
    fn cpu_repeat_of(r: &ProbeResult) -> Repeat {
        let cpu = r.cpu.as_ref().unwrap();
        Repeat {
            cpu: Some(CpuRepeat {
                latency_cycles: cpu.fp.iter().map(|t| (t.op, t.latency_cycles)).collect(),
                l1d_ways: cpu.l1d_ways.as_ref().and_then(|a| a.measured),
                l2_ways: cpu.l2_ways.as_ref().and_then(|a| a.measured),
            }),
            ..repeat_of(r)
        }
    }

    #[test]
    fn a_disturbed_cpu_measurement_is_probed_again_and_not_cached() {
        let good = crate::result::samples::sample_with_cpu();
        assert_eq!(
            disturbances(&good, &cpu_repeat_of(&good)),
            Vec::<String>::new()
        );

        // The add latency read 6 cycles (a busy sibling), the repeat 3.
        let mut slow = good.clone();
        slow.cpu.as_mut().unwrap().fp[0].latency_cycles = 6.0;
        let why = disturbances(&slow, &cpu_repeat_of(&good));
        assert!(
            why.iter()
                .any(|w| w.contains("add latency 6.00 cycles against 3 published"))
                && why
                    .iter()
                    .any(|w| w.contains("add latency 3.00 cycles now, 6.00")),
            "{why:?}"
        );
        // L2 ways read 12 against sysfs's 8.
        let mut ways = good.clone();
        ways.cpu
            .as_mut()
            .unwrap()
            .l2_ways
            .as_mut()
            .unwrap()
            .measured = Some(12);
        let why = cpu_against_documented(&ways);
        assert_eq!(why, vec!["L2 read 12 ways against 8 in sysfs".to_string()]);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("probe.json");
        // Disturbed twice: nothing cached.
        let mut once = || Ok((slow.clone(), cpu_repeat_of(&good)));
        let s = settle_and_cache(&path, 2, None, &mut once).unwrap();
        assert!(!s.cache_it && !path.exists(), "{:?}", s.note);
        // Disturbed, then quiet: the quiet one is cached.
        let mut results = vec![good.clone(), slow.clone()];
        let mut once = || {
            let r = results.pop().unwrap();
            Ok((r, cpu_repeat_of(&good)))
        };
        let s = settle_and_cache(&path, 2, None, &mut once).unwrap();
        assert!(s.cache_it);
        assert_eq!(crate::load_cached_from(&path).unwrap(), Some(good));
    }

    #[test]
    fn ages_read_naturally() {
        assert_eq!(age_text(100, 130), "30 s ago");
        assert_eq!(age_text(0, 600), "10 min ago");
        assert_eq!(age_text(0, 5 * 3600), "5 h ago");
        assert_eq!(age_text(0, 3 * 86_400), "3 days ago");
    }
}
