//! Runs the generated micro-benchmarks and analyses their curves.

use crate::csource::{microbench_source, timers, MicrobenchParams};
use crate::documented::{self, DocumentedCache};
use crate::measure_cpu::{measure_cpu, remeasure_cpu, CpuBench, MemoryFacts};
use crate::rows::{num, run_rows};
use crate::sanity::Repeat;
use crate::stats::{enforce_monotonic, fits_quality_threshold, plateaus, relative_steps, Plateau};
use crate::{
    CacheLevel, CurvePoint, FlushProbe, LineSize, ProbeError, ProbeResult, TimerInfo, TlbLevel,
    TscInfo, RESULT_VERSION,
};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Knobs for one probe run.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// C compiler (`--cc`); `None` picks as `toolchain::CCompiler::find` does.
    pub cc: Option<String>,
    /// Largest buffer of the cache sweep; `None`: twice the documented
    /// last-level cache, within 16..256 MiB.
    pub max_buffer_bytes: Option<u64>,
    /// Sweep points per doubling of the buffer size.
    pub points_per_octave: u32,
    /// Where sysfs describes the CPU's caches.
    pub sysfs_cpu_dir: PathBuf,
    /// Where the micro-benchmarks' compiled code is kept for the next
    /// probe ([`toolchain::BuildCache`]); `None` compiles them every time.
    pub build_cache: Option<PathBuf>,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            cc: None,
            max_buffer_bytes: None,
            points_per_octave: 4,
            sysfs_cpu_dir: PathBuf::from("/sys/devices/system/cpu/cpu0"),
            build_cache: Some(crate::cache::build_cache_path()),
        }
    }
}

/// Fine points probed between a level's last coarse point and the next one.
const REFINE_POINTS: u32 = 5;
const RUN_LIMIT: Duration = Duration::from_secs(180);

struct Microbench {
    exe: PathBuf,
}

impl Microbench {
    fn build(
        dir: &Path,
        cc: &toolchain::CCompiler,
        cache: Option<&toolchain::BuildCache>,
    ) -> Result<Microbench, ProbeError> {
        let src = crate::csource::write_program(
            dir,
            "tdg_probe.c",
            &microbench_source(&MicrobenchParams::default()),
        )
        .map_err(ProbeError::Io)?;
        let object = dir.join("tdg_probe.o");
        cc.compile_object(
            &toolchain::CompileJob {
                sources: vec![src],
                output: object.clone(),
                // -O2 for a tight chase loop; the loads cannot be optimised
                // away because each address is the previous load's value.
                cflags: vec!["-O2".into(), "-std=c11".into()],
                include_dirs: vec![dir.to_path_buf()],
                object_only: true,
                ..Default::default()
            },
            cache,
        )?;
        let exe = dir.join("tdg_probe");
        cc.compile(&toolchain::CompileJob {
            sources: vec![object],
            output: exe.clone(),
            ..Default::default()
        })?;
        Ok(Microbench { exe })
    }

    fn run(&self, args: &[String]) -> Result<Vec<Vec<String>>, ProbeError> {
        run_rows(&self.exe, args, RUN_LIMIT)
    }
}

/// A measured curve's points: each (x, ns) beside its monotone value.
fn curve_points(raw: impl IntoIterator<Item = (u64, f64)>, mono: &[f64]) -> Vec<CurvePoint> {
    raw.into_iter()
        .zip(mono)
        .map(|((x, ns), &ns_monotonic)| CurvePoint {
            x,
            ns,
            ns_monotonic,
        })
        .collect()
}

/// Geometric sweep from `lo` to `hi` with `per_octave` points per doubling,
/// each rounded to a multiple of `granule` and deduplicated.
pub(crate) fn geometric_sweep(lo: u64, hi: u64, per_octave: u32, granule: u64) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    let mut k = 0u32;
    loop {
        let v = lo as f64 * 2f64.powf(f64::from(k) / f64::from(per_octave));
        if v > hi as f64 * 1.0001 {
            break;
        }
        let r = ((v / granule as f64).round() as u64).max(1) * granule;
        if out.last() != Some(&r) {
            out.push(r);
        }
        k += 1;
    }
    out
}

/// The probe's compiled micro-benchmarks, built once and shared by a
/// probe and the repeat that checks it (the CPU probe takes seconds to
/// compile).
pub struct Benches {
    memory: Microbench,
    /// The CPU probe and the seconds compiling it took.
    cpu: Option<(CpuBench, f64)>,
    // Last: the programs above live in it.
    _scratch: toolchain::ScratchDir,
}

impl Benches {
    pub fn build(opts: &ProbeOptions) -> Result<Benches, ProbeError> {
        let scratch = toolchain::scratch_dir("tdg-probe").map_err(ProbeError::Io)?;
        let cc = toolchain::CCompiler::find(opts.cc.as_deref())?;
        let cache = opts
            .build_cache
            .as_deref()
            .and_then(toolchain::BuildCache::open_or_warn);
        let memory = Microbench::build(scratch.path(), &cc, cache.as_ref())?;
        let cpu = if cfg!(target_arch = "x86_64") {
            let started = Instant::now();
            let bench = CpuBench::build(scratch.path(), &cc, cache.as_ref())?;
            Some((bench, started.elapsed().as_secs_f64()))
        } else {
            None
        };
        Ok(Benches {
            memory,
            cpu,
            _scratch: scratch,
        })
    }
}

/// Builds the micro-benchmarks and runs them all ([`measure_with`]).
pub fn measure(
    opts: &ProbeOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<ProbeResult, ProbeError> {
    progress("building micro-benchmarks");
    let benches = Benches::build(opts)?;
    measure_with(&benches, opts, progress)
}

fn sysfs_cpu_root(opts: &ProbeOptions) -> PathBuf {
    opts.sysfs_cpu_dir.parent().map_or_else(
        || PathBuf::from("/sys/devices/system/cpu"),
        Path::to_path_buf,
    )
}

/// The cache sweep's largest buffer: `--max-buffer-mib`, or twice the
/// documented last-level cache within 16..256 MiB.
fn sweep_limit(opts: &ProbeOptions, doc_data: &[DocumentedCache]) -> u64 {
    opts.max_buffer_bytes.unwrap_or_else(|| {
        doc_data
            .last()
            .map_or(128 << 20, |c| (2 * c.size_bytes).clamp(16 << 20, 256 << 20))
    })
}

/// The CPU probe's run, its duration counting the seconds its build took.
fn timed_cpu(
    bench: &CpuBench,
    build_s: f64,
    facts: &MemoryFacts<'_>,
    progress: &mut dyn FnMut(&str),
) -> Result<crate::cpu::CpuParams, ProbeError> {
    let started = Instant::now();
    let mut cpu = measure_cpu(bench, facts, progress)?;
    cpu.duration_s = build_s + started.elapsed().as_secs_f64();
    Ok(cpu)
}

/// Runs every micro-benchmark and analyses the curves. `progress` hears one
/// line per stage.
pub fn measure_with(
    benches: &Benches,
    opts: &ProbeOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<ProbeResult, ProbeError> {
    let started = Instant::now();
    let load_average = crate::sanity::load_average_now();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let documented_caches = documented::caches_from_sysfs(&opts.sysfs_cpu_dir);
    let doc_data = documented::data_caches(&documented_caches);
    let page = documented::page_size();
    let bench = &benches.memory;

    progress("timers");
    let tsc = measure_tsc(bench)?;
    let timers = measure_timers(bench, tsc.as_ref())?;

    progress("cache line size");
    let line = measure_line(bench, &doc_data)?;

    progress("cache levels (pointer chase, random order within pages)");
    let (caches, memory_latency_ns, cache_curve, huge) = measure_caches(
        bench,
        line.bytes,
        page,
        sweep_limit(opts, &doc_data),
        opts.points_per_octave,
        &doc_data,
    )?;

    progress("TLB levels");
    let (tlb, tlb_curve) = measure_tlb(bench, page, line.bytes, &caches)?;

    progress("flush size that evicts a warm operand");
    let flush = measure_flush(bench, page, line.bytes, &caches, &doc_data)?;

    let root = sysfs_cpu_root(opts);
    let facts = MemoryFacts {
        line: line.bytes,
        caches: &caches,
        documented: &documented_caches,
        tsc_ghz: tsc.as_ref().map(|t| t.measured_ghz),
        sysfs_cpu_root: &root,
    };
    let cpu = benches
        .cpu
        .as_ref()
        .map(|(cpu_bench, build_s)| timed_cpu(cpu_bench, *build_s, &facts, progress))
        .transpose()?;

    Ok(ProbeResult {
        version: RESULT_VERSION,
        cpu_model: documented::cpu_model(),
        measured_at_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        duration_s: started.elapsed().as_secs_f64(),
        line,
        caches,
        memory_latency_ns,
        page_bytes: page,
        tlb,
        timers,
        tsc,
        cache_curve_huge_pages: huge,
        cache_curve,
        tlb_curve,
        flush: Some(flush),
        documented_caches,
        load_average,
        cpus,
        cpu,
    })
}

/// What the CPU side reads of an earlier result's memory side.
fn memory_facts<'a>(r: &'a ProbeResult, sysfs_cpu_root: &'a Path) -> MemoryFacts<'a> {
    MemoryFacts {
        line: r.line.bytes,
        caches: &r.caches,
        documented: &r.documented_caches,
        tsc_ghz: r.tsc.as_ref().map(|t| t.measured_ghz),
        sysfs_cpu_root,
    }
}

/// A stage of the probe that runs again on its own ([`remeasure_stage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    LineSize,
    CacheLevels,
    Tlb,
    /// The CPU side: core clock, FP latencies, registers, associativity,
    /// execution contexts.
    Cpu,
}

/// `earlier` with one stage measured again, the facts it depends on (line,
/// cache levels) read from `earlier`. Another tenant disturbs one stage's
/// reading at a time: measuring that stage again takes its seconds, not a
/// whole probe's.
pub fn remeasure_stage(
    benches: &Benches,
    opts: &ProbeOptions,
    earlier: &ProbeResult,
    stage: Stage,
) -> Result<ProbeResult, ProbeError> {
    let mut r = earlier.clone();
    let doc_data = documented::data_caches(&r.documented_caches);
    let bench = &benches.memory;
    match stage {
        Stage::LineSize => r.line = measure_line(bench, &doc_data)?,
        Stage::CacheLevels => {
            let limit = sweep_limit(opts, &doc_data);
            let (caches, memory_ns, curve, huge) = measure_caches(
                bench,
                r.line.bytes,
                r.page_bytes,
                limit,
                opts.points_per_octave,
                &doc_data,
            )?;
            (r.caches, r.memory_latency_ns) = (caches, memory_ns);
            (r.cache_curve, r.cache_curve_huge_pages) = (curve, huge);
        }
        Stage::Tlb => {
            (r.tlb, r.tlb_curve) = measure_tlb(bench, r.page_bytes, r.line.bytes, &r.caches)?;
        }
        Stage::Cpu => {
            if let Some((cpu_bench, build_s)) = &benches.cpu {
                let root = sysfs_cpu_root(opts);
                let facts = memory_facts(&r, &root);
                r.cpu = Some(timed_cpu(cpu_bench, *build_s, &facts, &mut |_| {})?);
            }
        }
    }
    Ok(r)
}

/// Re-measures the latency at `sizes` (twice each, the faster kept: noise
/// only adds) with the probe's own pointer chase, and the CPU values
/// [`CpuRepeat`] names, for comparison with a result made earlier:
/// [`crate::sanity::check_sizes`] picks the sizes, and
/// [`crate::sanity::recheck`] compares.
pub fn remeasure_with(
    benches: &Benches,
    opts: &ProbeOptions,
    r: &ProbeResult,
    sizes: &[u64],
) -> Result<Repeat, ProbeError> {
    let cache = if sizes.is_empty() {
        Vec::new()
    } else {
        let mut runs = sizes.to_vec();
        runs.extend_from_slice(sizes);
        chase(&benches.memory, r.line.bytes, r.page_bytes, &runs)?
            .into_iter()
            .map(|(x, ns, _)| (x, ns))
            .collect()
    };
    let cpu = match (&benches.cpu, &r.cpu) {
        (Some((cpu_bench, _)), Some(_)) => {
            let root = sysfs_cpu_root(opts);
            Some(remeasure_cpu(cpu_bench, &memory_facts(r, &root))?)
        }
        _ => None,
    };
    Ok(Repeat { cache, cpu })
}

fn measure_tsc(bench: &Microbench) -> Result<Option<TscInfo>, ProbeError> {
    let rows = bench.run(&["tsc".into()])?;
    let ghz: Vec<f64> = rows
        .iter()
        .map(|r| num("tsc", r, 0))
        .collect::<Result<_, _>>()?;
    let Some(measured) = ::stats::Summary::of(&ghz) else {
        return Ok(None);
    };
    let documented = documented::documented_tsc_ghz();
    Ok(Some(TscInfo {
        measured_ghz: measured.median,
        documented_ghz: documented.as_ref().map(|d| d.0),
        documented_source: documented.map(|d| d.1),
    }))
}

fn measure_timers(bench: &Microbench, tsc: Option<&TscInfo>) -> Result<Vec<TimerInfo>, ProbeError> {
    let specs = timers(tsc.is_some());
    let rows = bench.run(&["timers".into()])?;
    rows.iter()
        .map(|r| {
            let name: String = num("timers", r, 0)?;
            let raw_res: f64 = num("timers", r, 1)?;
            let overhead_ns: f64 = num("timers", r, 2)?;
            let claimed: f64 = num("timers", r, 3)?;
            let ticks = specs.iter().any(|s| s.name == name && s.ticks);
            let resolution_ns = match (ticks, tsc) {
                (true, Some(t)) => raw_res / t.measured_ghz,
                _ => raw_res,
            };
            Ok(TimerInfo {
                min_interval_ns: 1000.0 * (resolution_ns + overhead_ns),
                name,
                resolution_ns,
                overhead_ns,
                claimed_resolution_ns: (claimed >= 0.0).then_some(claimed),
            })
        })
        .collect()
}

/// Extent at which the pair test's cost jumps: the last extent before the
/// biggest relative step.
fn line_from_pairs(extents: &[u64], ns: &[f64]) -> u64 {
    let m = enforce_monotonic(ns);
    let steps = relative_steps(&m);
    let i = steps
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map_or(0, |(i, _)| i);
    extents[i]
}

/// Pair tests per line-size measurement (odd, so a majority exists when two
/// extents split the runs).
const LINE_RUNS: usize = 5;

/// The value that occurs most often; the smaller on a tie.
fn most_frequent(values: &[u64]) -> u64 {
    let mut counts: std::collections::BTreeMap<u64, usize> = std::collections::BTreeMap::new();
    for &v in values {
        *counts.entry(v).or_default() += 1;
    }
    counts
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map_or(0, |(&v, _)| v)
}

fn measure_line(bench: &Microbench, doc: &[DocumentedCache]) -> Result<LineSize, ProbeError> {
    let extents: Vec<u64> = (4..=9).map(|k| 1u64 << k).collect();
    // Between L1 and L2, the second access of a pair is an L1 hit or an L2
    // hit; from memory, neighbouring-line prefetch blurs the step.
    let l1 = doc.first().map_or(32 << 10, |c| c.size_bytes);
    let mut near = 8 * l1;
    if let Some(l2) = doc.get(1) {
        near = near.min(l2.size_bytes / 2).max(2 * l1);
    }
    let far = 64u64 << 20;
    let run = |buffer: u64| -> Result<u64, ProbeError> {
        let mut args = vec!["line".to_string(), buffer.to_string()];
        args.extend(extents.iter().map(u64::to_string));
        let rows = bench.run(&args)?;
        let ns: Vec<f64> = rows
            .iter()
            .map(|r| num("line", r, 1))
            .collect::<Result<_, _>>()?;
        if ns.len() != extents.len() {
            return Err(ProbeError::Output {
                mode: "line".into(),
                line: format!("{} points for {} extents", ns.len(), extents.len()),
            });
        }
        Ok(line_from_pairs(&extents, &ns))
    };
    // One pair test can read a step one extent off when the machine's
    // speed drifts within it (a shared host read 32 B or 256 B for 64 B
    // lines): the extent most runs agree on is the line.
    let bytes = most_frequent(
        &(0..LINE_RUNS)
            .map(|_| run(near))
            .collect::<Result<Vec<_>, _>>()?,
    );
    let memory_fetch_bytes = run(far)?.max(bytes);
    Ok(LineSize {
        bytes,
        memory_fetch_bytes,
        documented_bytes: doc.first().and_then(|c| c.line_bytes),
    })
}

/// Chases each size once per listed occurrence and keeps, per size, the
/// fastest run and whether any ran on huge pages.
fn chase(
    bench: &Microbench,
    stride: u64,
    page: u64,
    sizes: &[u64],
) -> Result<Vec<ChasePoint>, ProbeError> {
    let mut args = vec!["chase".to_string(), stride.to_string(), page.to_string()];
    args.extend(sizes.iter().map(u64::to_string));
    let mut best: std::collections::BTreeMap<u64, (f64, bool)> = std::collections::BTreeMap::new();
    for r in bench.run(&args)? {
        let (x, ns, thp): (u64, f64, i64) = (
            num("chase", &r, 0)?,
            num("chase", &r, 1)?,
            num("chase", &r, 2)?,
        );
        let e = best.entry(x).or_insert((f64::INFINITY, false));
        e.0 = e.0.min(ns);
        e.1 |= thp > 0;
    }
    Ok(best
        .into_iter()
        .map(|(x, (ns, thp))| (x, ns, thp))
        .collect())
}

/// Sizes up to this are chased twice, in two separate passes over the
/// sweep: they are cheap, and a burst of activity from other processes
/// rarely hits the same size twice.
const REPEAT_BELOW: u64 = 4 << 20;

type CacheCurve = (Vec<CacheLevel>, f64, Vec<CurvePoint>, bool);

/// A cache level is at most this fraction of main memory's latency. Under
/// load the curve can hold a flat stretch just past the effective last-level
/// cache where some lines still hit and most go to memory (the curve of
/// `a_flat_stretch_nearly_as_slow_as_memory_is_not_a_cache`); real caches
/// are far faster than memory (on server parts at most about a quarter of
/// its latency), so half of it separates the two with room on either side.
const CACHE_LATENCY_BELOW_MEMORY: f64 = 0.5;

/// Which plateaus of the cache curve are cache levels, and main memory's
/// latency (`None` when the curve has no plateau past the levels).
fn cache_plateaus(
    mut levels: Vec<Plateau>,
    beyond: Option<Plateau>,
    doc: &[DocumentedCache],
) -> (Vec<Plateau>, Option<f64>) {
    let mut memory_latency = beyond.map(|b| b.min_y);
    let into_memory = |levels: &mut Vec<Plateau>, memory: &mut Option<f64>| {
        let l = levels.pop().expect("checked non-empty");
        *memory = Some(memory.map_or(l.min_y, |m| m.min(l.min_y)));
    };
    // Effective sizes come out at or below the documented ones; a "level"
    // well beyond the documented last-level cache is main memory whose
    // latency shifted under load, not another cache.
    if let Some(llc) = doc.last() {
        while levels
            .last()
            .is_some_and(|l| l.max_x > 1.25 * llc.size_bytes as f64)
        {
            into_memory(&mut levels, &mut memory_latency);
        }
    }
    // Nor is a "level" nearly as slow as memory, wherever it ends.
    if let Some(memory) = memory_latency {
        while levels.len() > 1
            && levels
                .last()
                .is_some_and(|l| l.min_y > CACHE_LATENCY_BELOW_MEMORY * memory)
        {
            into_memory(&mut levels, &mut memory_latency);
        }
    }
    // A slow ramp between two levels (a cache shared with a busy SMT
    // sibling or another tenant) can hold an octave of points. When the
    // curve shows more levels than sysfs documents, the intermediate ones
    // spanning the fewest points are such ramps.
    while !doc.is_empty() && levels.len() > doc.len() && levels.len() > 2 {
        let ramp = (1..levels.len() - 1)
            .min_by_key(|&i| levels[i].points.len())
            .expect("at least three levels");
        levels.remove(ramp);
    }
    (levels, memory_latency)
}

/// `sizes`, then each cheap one (up to [`REPEAT_BELOW`]) `repeats` times
/// more, in passes over the whole list.
fn with_cheap_repeats(sizes: &[u64], repeats: usize) -> Vec<u64> {
    let cheap: Vec<u64> = sizes
        .iter()
        .copied()
        .filter(|&s| s <= REPEAT_BELOW)
        .collect();
    let mut runs = sizes.to_vec();
    for _ in 0..repeats {
        runs.extend_from_slice(&cheap);
    }
    runs
}

/// One chased size: bytes, least ns per access, whether huge pages backed it.
type ChasePoint = (u64, f64, bool);

/// The sizes probed past each level's last coarse point: `sizes[spans[i]]`
/// lie between level `i`'s last point and the next one (an empty span
/// when the curve ends there).
struct EdgeProbes {
    sizes: Vec<u64>,
    spans: Vec<std::ops::Range<usize>>,
}

/// The coarse grid puts a level's edge up to a quarter octave below the
/// truth: [`REFINE_POINTS`] geometric sizes between each level's last point
/// and the next one.
fn edge_probes(levels: &[Plateau], raw: &[ChasePoint], line: u64) -> EdgeProbes {
    let mut sizes = Vec::new();
    let mut spans = Vec::new();
    for lvl in levels {
        let last = *lvl.points.last().expect("plateaus are non-empty");
        let Some(&next) = raw.get(last + 1).map(|p| &p.0) else {
            spans.push(0..0);
            continue;
        };
        let from = sizes.len();
        let lo = raw[last].0 as f64;
        let steps = f64::from(REFINE_POINTS + 1);
        for k in 1..=REFINE_POINTS {
            let v = lo * (next as f64 / lo).powf(f64::from(k) / steps);
            sizes.push(((v / line as f64).round() as u64).max(1) * line);
        }
        spans.push(from..sizes.len());
    }
    EdgeProbes { sizes, spans }
}

/// The edge probes chased (the cheap ones three times), in the order the
/// spans index.
fn chase_edges(
    bench: &Microbench,
    line: u64,
    page: u64,
    sizes: &[u64],
) -> Result<Vec<ChasePoint>, ProbeError> {
    if sizes.is_empty() {
        return Ok(Vec::new());
    }
    let measured = chase(bench, line, page, &with_cheap_repeats(sizes, 2))?;
    Ok(sizes
        .iter()
        .map(|s| {
            *measured
                .iter()
                .find(|m| m.0 == *s)
                .expect("every size was measured")
        })
        .collect())
}

/// Level `i` of the curve: its latency, and its edge moved out over the
/// fine points past it that still pass the level's quality threshold.
fn cache_level(
    i: usize,
    lvl: &Plateau,
    mono: &[f64],
    fine: &[ChasePoint],
    doc: &[DocumentedCache],
) -> CacheLevel {
    let mut members: Vec<f64> = lvl.points.iter().map(|&p| mono[p]).collect();
    let mut edge = lvl.max_x as u64;
    let next_y = mono
        .get(*lvl.points.last().unwrap() + 1)
        .copied()
        .unwrap_or(f64::INFINITY);
    let mut fine_ys: Vec<f64> = fine.iter().map(|p| p.1).collect();
    fine_ys.push(next_y);
    let fine_mono = enforce_monotonic(&fine_ys);
    for (p, y) in fine.iter().zip(fine_mono) {
        members.push(y);
        if !fits_quality_threshold(&members, crate::stats::QT_RELATIVE_DIAMETER) {
            break;
        }
        edge = p.0;
    }
    CacheLevel {
        level: i as u32 + 1,
        effective_bytes: edge,
        latency_ns: lvl.min_y,
        documented_bytes: doc.get(i).map(|c| c.size_bytes),
    }
}

fn measure_caches(
    bench: &Microbench,
    line: u64,
    page: u64,
    max_bytes: u64,
    per_octave: u32,
    doc: &[DocumentedCache],
) -> Result<CacheCurve, ProbeError> {
    let sizes = geometric_sweep(4096, max_bytes, per_octave.max(2), line);
    let raw = chase(bench, line, page, &with_cheap_repeats(&sizes, 1))?;
    let huge = raw.iter().any(|p| p.2);
    let xs: Vec<f64> = raw.iter().map(|p| p.0 as f64).collect();
    let ys: Vec<f64> = raw.iter().map(|p| p.1).collect();
    let mono = enforce_monotonic(&ys);
    // A cache level spans at least an octave of buffer sizes (each level is
    // at least twice the one below); shorter flats are transitions.
    let (levels, beyond) = plateaus(&xs, &mono, per_octave.max(2) as usize);
    let (levels, memory_latency) = cache_plateaus(levels, beyond, doc);
    let Some(memory_latency) = memory_latency.filter(|_| !levels.is_empty()) else {
        return Err(ProbeError::NoCacheLevels { points: xs.len() });
    };
    // Probe a few sizes past each level's last point and keep those that
    // still pass the level's quality threshold.
    let probes = edge_probes(&levels, &raw, line);
    let fine = chase_edges(bench, line, page, &probes.sizes)?;
    let caches = levels
        .iter()
        .zip(probes.spans)
        .enumerate()
        .map(|(i, (lvl, span))| cache_level(i, lvl, &mono, &fine[span], doc))
        .collect();
    let curve = curve_points(raw.iter().map(|p| (p.0, p.1)), &mono);
    Ok((caches, memory_latency, curve, huge))
}

/// Each level cpuid documents, attached to the measured step nearest it
/// (within 2.5x, levels kept in order), not to the step at the same
/// position: the curve can show a step no TLB makes (between the L1 and L2
/// TLBs' counts, in the test below), which by position would take the L2
/// TLB's documented count.
fn attach_documented(levels: &mut [TlbLevel], documented: &[Option<u64>]) {
    let mut from = 0;
    for d in documented.iter().flatten() {
        let distance = |t: &TlbLevel| (t.entries as f64 / *d as f64).ln().abs();
        let nearest = levels[from..]
            .iter()
            .enumerate()
            .filter(|(_, t)| distance(t) <= 2.5f64.ln())
            .min_by(|a, b| distance(a.1).total_cmp(&distance(b.1)))
            .map(|(i, _)| from + i);
        if let Some(i) = nearest {
            levels[i].documented_entries = Some(*d);
            from = i + 1;
        }
    }
}

fn measure_tlb(
    bench: &Microbench,
    page: u64,
    line: u64,
    caches: &[CacheLevel],
) -> Result<(Vec<TlbLevel>, Vec<CurvePoint>), ProbeError> {
    // Up to 64 Ki pages (256 MiB of address space at 4 KiB), beyond any
    // second-level TLB, while the touched lines (one per page) stay in L2.
    let counts = geometric_sweep(8, 1 << 14, 4, 1);
    let mut args = vec!["tlb".to_string(), page.to_string(), line.to_string()];
    args.extend(counts.iter().map(u64::to_string));
    let rows = bench.run(&args)?;
    let raw: Vec<(u64, f64)> = rows
        .iter()
        .map(|r| Ok((num("tlb", r, 0)?, num("tlb", r, 1)?)))
        .collect::<Result<_, ProbeError>>()?;
    let xs: Vec<f64> = raw.iter().map(|p| p.0 as f64).collect();
    let ys: Vec<f64> = raw.iter().map(|p| p.1).collect();
    let mono = enforce_monotonic(&ys);
    // A TLB level spans at least a whole octave of page counts; shorter
    // flats appear where page walks grow more expensive step by step.
    let (levels, _) = plateaus(&xs, &mono, 4);
    // Each page contributes one line of data, so the curve also steps when
    // those lines outgrow a data cache; such steps are not TLB levels.
    let cache_step = |pages: u64, next: u64| {
        caches.iter().any(|c| {
            let s = c.effective_bytes as f64;
            (pages * line) as f64 <= s * 1.2 && (next * line) as f64 >= s / 1.2
        })
    };
    let documented = documented::documented_dtlb_entries();
    let mut tlb = Vec::new();
    for lvl in &levels {
        let last = *lvl.points.last().unwrap();
        let entries = raw[last].0;
        let Some(next) = raw.get(last + 1).map(|p| p.0) else {
            continue;
        };
        if cache_step(entries, next) {
            continue;
        }
        tlb.push(TlbLevel {
            level: tlb.len() as u32 + 1,
            entries,
            reach_bytes: entries * page,
            latency_ns: lvl.min_y,
            documented_entries: None,
        });
    }
    attach_documented(&mut tlb, &documented);
    let curve = curve_points(raw.iter().copied(), &mono);
    Ok((tlb, curve))
}

/// Share of the warm-to-cold gap a flush must close to count as sufficient.
const FLUSH_SUFFICIENT: f64 = 0.9;

fn measure_flush(
    bench: &Microbench,
    page: u64,
    line: u64,
    caches: &[CacheLevel],
    doc: &[DocumentedCache],
) -> Result<FlushProbe, ProbeError> {
    // An operand that sits in L2 (and so in any inclusive or victim L3).
    let l2 = caches.get(1).map_or(256 << 10, |c| c.effective_bytes);
    let operand = (l2 / 4).clamp(16 << 10, 256 << 10) / line * line;
    // From the operand's own size to 8x the larger of the documented and
    // effective last-level caches, so the far end is surely cold: caches
    // that protect reused lines from streaming traffic need far more than
    // their capacity (measured: several times the LLC on an AMD EPYC VM).
    let llc = doc
        .last()
        .map(|c| c.size_bytes)
        .into_iter()
        .chain(caches.last().map(|c| c.effective_bytes))
        .max()
        .unwrap_or(32 << 20);
    let sizes = geometric_sweep(operand, (8 * llc).min(1 << 30), 2, line);
    let mut args = vec![
        "flush".to_string(),
        operand.to_string(),
        line.to_string(),
        page.to_string(),
    ];
    args.extend(sizes.iter().map(u64::to_string));
    let rows = bench.run(&args)?;
    let mut warm = None;
    let mut raw = Vec::new();
    for r in &rows {
        if r.first().map(String::as_str) == Some("warm") {
            warm = Some(num("flush", r, 1)?);
        } else {
            raw.push((num::<u64>("flush", r, 0)?, num::<f64>("flush", r, 1)?));
        }
    }
    let (Some(warm_ns), Some(&(_, cold_ns))) = (warm, raw.last()) else {
        return Err(ProbeError::Output {
            mode: "flush".into(),
            line: rows
                .iter()
                .map(|r| r.join(" "))
                .collect::<Vec<_>>()
                .join("; "),
        });
    };
    let mono = enforce_monotonic(&raw.iter().map(|p| p.1).collect::<Vec<_>>());
    Ok(FlushProbe {
        operand_bytes: operand,
        warm_ns,
        cold_ns,
        sufficient_bytes: sufficient_flush(
            &raw.iter().map(|p| p.0).collect::<Vec<_>>(),
            &mono,
            warm_ns,
        ),
        curve: curve_points(raw.iter().copied(), &mono),
    })
}

/// Smallest flush size whose (monotonic) latency closes
/// [`FLUSH_SUFFICIENT`] of the gap between warm and the coldest point;
/// `None` when the flush changes the latency by less than a quarter.
fn sufficient_flush(sizes: &[u64], mono: &[f64], warm: f64) -> Option<u64> {
    let cold = *mono.last()?;
    if cold < 1.25 * warm {
        return None;
    }
    let bar = warm + FLUSH_SUFFICIENT * (cold - warm);
    mono.iter().position(|&y| y >= bar).map(|i| sizes[i])
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_line_is_the_extent_most_runs_agree_on() {
        assert_eq!(super::most_frequent(&[64, 32, 64, 256, 64]), 64);
        assert_eq!(super::most_frequent(&[32, 64]), 32);
    }

    use super::*;

    #[test]
    fn documented_tlb_entries_go_to_the_nearest_step_not_the_same_position() {
        let level = |entries| TlbLevel {
            level: 0,
            entries,
            reach_bytes: entries * 4096,
            latency_ns: 1.0,
            documented_entries: None,
        };
        // The CI rehearsal's probe: 54, a step at 304, 1218, 9742.
        let mut seen = vec![level(54), level(304), level(1218), level(9742)];
        attach_documented(&mut seen, &[Some(64), Some(2048)]);
        let documented: Vec<_> = seen.iter().map(|t| t.documented_entries).collect();
        assert_eq!(documented, [Some(64), None, Some(2048), None]);
        // No step near a documented level: it is attached to none.
        let mut seen = vec![level(54), level(304)];
        attach_documented(&mut seen, &[Some(64), Some(2048)]);
        assert_eq!(seen[1].documented_entries, None);
        // Order kept: the L2 count is never given to a step below the L1's.
        let mut seen = vec![level(900), level(1800)];
        attach_documented(&mut seen, &[Some(1000), Some(2048)]);
        let documented: Vec<_> = seen.iter().map(|t| t.documented_entries).collect();
        assert_eq!(documented, [Some(1000), Some(2048)]);
    }

    #[test]
    fn sweep_is_geometric_rounded_and_bounded() {
        let s = geometric_sweep(4096, 65536, 4, 64);
        assert_eq!(s.first(), Some(&4096));
        assert_eq!(s.last(), Some(&65536));
        assert_eq!(s.len(), 17);
        assert!(s.iter().all(|v| v % 64 == 0));
        assert!(s.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn sufficient_flush_is_the_first_size_near_cold() {
        let sizes = [1, 2, 4, 8, 16];
        assert_eq!(
            sufficient_flush(&sizes, &[3.0, 5.0, 40.0, 78.0, 80.0], 2.0),
            Some(8)
        );
        assert_eq!(
            sufficient_flush(&sizes, &[2.0, 2.0, 2.1, 2.2, 2.2], 2.0),
            None
        );
    }

    /// A CI run's cache curve under load: L1 ~1.1 ns, L2 ~2.3 ns, a slow ramp
    /// through the L3 to 6.8 ns at 10 MiB, then a flat 50-59 ns stretch from
    /// 12 to 40 MiB before memory's 69-72 ns. The probe reported that stretch
    /// as the L3 (edge 46 MB) with memory only 1.36x slower.
    #[test]
    fn a_flat_stretch_nearly_as_slow_as_memory_is_not_a_cache() {
        let xs: Vec<f64> = [
            4096, 4864, 5824, 6912, 8192, 9728, 11584, 13760, 16384, 19456, 23168, 27584, 32768,
            38976, 46336, 55104, 65536, 77952, 92672, 110208, 131072, 155840, 185344, 220416,
            262144, 311744, 370752, 440896, 524288, 623488, 741440, 881728, 1048576, 1246976,
            1482880, 1763456, 2097152, 2493952, 2965824, 3526976, 4194304, 4987904, 5931648,
            7053952, 8388608, 9975808, 11863296, 14107904, 16777216, 19951616, 23726592, 28215808,
            33554432, 39903168, 47453120, 56431616, 67108864,
        ]
        .map(|x: u64| x as f64)
        .to_vec();
        let ys = [
            1.0827, 1.0827, 1.0827, 1.0827, 1.0827, 1.0827, 1.0827, 1.0827, 1.0827, 1.0827, 1.0827,
            1.08331, 1.21887, 2.33928, 2.33928, 2.33928, 2.35073, 2.39608, 2.39608, 2.39608,
            2.39608, 2.39608, 2.39608, 2.39608, 2.42357, 2.42357, 2.46692, 2.46692, 2.52174,
            2.52174, 3.09363, 3.09363, 3.94732, 3.94732, 4.71142, 4.71142, 5.31552, 5.88998,
            5.88998, 5.88998, 5.88998, 5.88998, 6.29586, 6.4613, 6.4613, 6.84391, 50.4041, 50.4041,
            50.4041, 50.4041, 50.4041, 52.0815, 53.7081, 58.8973, 68.8008, 68.8008, 72.32,
        ];
        let doc: Vec<DocumentedCache> = [(1, 32u64 << 10), (2, 1 << 20), (3, 32 << 20)]
            .map(|(level, size_bytes)| DocumentedCache {
                level,
                kind: if level == 1 { "Data" } else { "Unified" }.into(),
                size_bytes,
                line_bytes: Some(64),
                ways: None,
                shared_cpus: None,
            })
            .to_vec();
        let (levels, beyond) = plateaus(&xs, &ys, 4);
        let (caches, memory) = cache_plateaus(levels, beyond, &doc);
        let memory = memory.expect("memory latency");
        assert!(memory >= 50.0, "{memory}");
        assert!(caches.len() >= 2, "{caches:?}");
        for c in &caches {
            assert!(c.min_y < 10.0 && c.max_x < 16e6, "{caches:?}");
        }
    }

    #[test]
    fn line_is_last_extent_before_biggest_step() {
        let ext = [16, 32, 64, 128, 256, 512];
        assert_eq!(line_from_pairs(&ext, &[6.0, 5.8, 6.1, 8.5, 8.2, 8.6]), 64);
        assert_eq!(
            line_from_pairs(&ext, &[150.0, 152.0, 153.0, 163.0, 162.0, 291.0]),
            256
        );
    }
}
